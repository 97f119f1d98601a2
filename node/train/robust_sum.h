// RobustSum: the sum of replicas' gradient parts that one peer cannot
// poison (Note [Robust averaging]). Used by the shard owner of a sharded
// reduce (sharded_reduce.h) and by the in-process group (inproc_group.h).
//
//   std::vector<PartVerdict> verdicts;
//   std::vector<float> sum = RobustSum(parts, options, &verdicts);
//   for (const PartVerdict& v : verdicts) count_against(v.from, v.kind);
//
// Note [Robust averaging]: every replica's part is checked before it is
// added, per sender:
//  * Non-finite (a NaN or an infinity): the part is left out and the others'
//    sum is scaled by (all visits / the kept parts' visits), so the result,
//    divided by the round's total visits as usual, is the mean of the kept
//    parts: the group steps as if the sender had sent the others' mean, and
//    never averages in its NaN. Only when every part is non-finite does the
//    sum stay non-finite (then every replica skips the step alike, Note
//    [Non-finite steps] in node_trainer.h: a shared divergence, not a peer).
//  * Too large: a part's size is its sender's whole-contribution L2 norm
//    (the larger of what the sender claims and what its part shows, so a
//    low claim cannot hide a large part) over sqrt(visits): a sum of v
//    micro-batch gradients grows between sqrt(v) (noise) and v (signal),
//    and sqrt(v) is the middle in both regimes. The reference is the lower
//    median of the parts that have visits (robust to any minority; with two
//    parts it is the smaller). A part above clip_factor x the reference x
//    sqrt(its visits) is scaled down to that bound; a part with no visits
//    must be zeros and is scaled to zeros. Whole-contribution norms rather
//    than the shard's own: a shard of an embedding table can be legitimately
//    empty for one replica and not another.
//  * An outlier (centered clipping), once at least 3 finite parts with
//    visits remain: a part inside the norm bound can still point the wrong
//    way (a sign-flipped gradient x8 turns the group's step into ascent).
//    The centre is the coordinate-wise median of the parts' per-visit means
//    (robust to any minority); a part's distance is |part - visits x
//    centre| / sqrt(visits) (the same sqrt(v) reasoning as above, so a
//    replica with few visits is not an outlier for its noise alone); the
//    reference is the lower median distance. A part farther than
//    outlier_factor x the reference is pulled in along its own direction
//    to the reference distance from the centre. Honest parts of one model
//    are close to each other in high dimension (their distances differ by
//    far less than 3x), so none is touched. A reference of 0 (most parts
//    equal here, e.g. an embedding shard empty for most replicas) turns
//    this step off for the shard: the norm bound still holds.
// Note [Robust averaging across subnetworks]: centered clipping assumes the
// parts estimate one expected gradient, so honest parts differ by noise
// only. Subnetwork (SDP) members break that by design: a worker training
// stages {0, 2, 5} computes a shared stage's gradient through another
// network than one training {0, 3, 5} or a pipeline host, and its part sits
// a systematic offset from theirs (honest SDP workers were pulled in at the
// daemons' factor, then banned). So parts are judged by class, a class being one subnetwork
// (RobustOptions::subnetworks, from the members' signed records) or all
// pipeline hosts together: centered clipping runs within each class of
// >= 3 finite parts with visits, with that class's own centre and
// reference, so a liar among peers of its class is held to their noise (and
// cannot hide behind the other classes' offsets, which inflated the old
// reference). Across classes only the norm bound and the non-finite rule
// hold at the data stage (stage 0, with RobustOptions::across_classes
// false): there each worker's rows of the tied embedding are its own
// tokens', so an honest SDP part can be many times the others' size and
// distance (figures in node/train/README.md, "Robust averaging with SDP"),
// and no shard-local test tells it from a liar's; a part alone in its
// class there, or in a class of two, is bounded by the norm clip only.
// At every other stage (across_classes true: the callers set it for stages
// > 0) the parts of classes of < 3 are judged against all the shard's
// kept parts once the shard has >= 2 classes: the centre is the
// coordinate-wise median of every kept part's per-visit mean, the
// reference the larger of the lower median distance from it and the lower
// median per-visit size (|part| / sqrt(visits)), which leaves room for an
// honest subnetwork's offset; a part farther than outlier_factor x that
// and pointing against the centre (a negative inner product with it) is
// pulled in as above (an offence, Note [Group bans] in grpc_group.h). The
// direction condition spares an honest subnetwork whose offset or noise
// moves its part far aside (local_sdp_test's backward swarm had one at
// 6.6x at stage 5 without it); a lie that reverses the step, the attack
// that turned the swarm's descent into ascent, points back. A liar that
// pushes far aside only meets the norm clip. This
// is what catches an SDP worker alone in its subnetwork that lies: its
// middle stages are shared with other subnetworks or pipeline hosts, and
// once it is banned by a peer that also holds stage 0 its data-stage
// parts go too.
// Note [Newcomer weight]: in an open swarm a member on probation (Note
// [Newcomer probation] in node/daemon/gossip/training_members.h) has shown
// nothing yet; with 2 replicas (a trusted host and the newcomer beside it,
// the usual case under probation) centered clipping does not run and the
// norm bound alone lets its part move the step by up to clip_factor x an
// honest part. So while any trusted sender's finite part has visits, a
// newcomer's part (after the checks above) counts with newcomer_weight w:
// the sum is the trusted parts' sum, plus w x each newcomer's part, with
// the rest of the newcomers' visits ((1 - w) x theirs, like a left-out
// part's) filled by the trusted parts' mean. A newcomer then moves the
// result by at most w x its part's bound, and not at all with w = 0 (the
// daemons' default): a liar on probation gains nothing, an honest one
// loses only its visits' share of the gradient until it is vouched for.
// It still averages, steps with the group and has its digest compared,
// which is how it earns trust. Without trusted parts with visits (a group
// of newcomers alone) the rules above apply unchanged.
// With one class (every pipeline swarm) this is exactly the rule above.
// With honest parts nothing is left out or scaled, and the sum is the same
// float additions in the same (ascending id) order as the plain sum: the
// bytes equal the plain mean's (Note [Exactness] holds).
//
// Thread rule: a pure function.
#ifndef SKIPSWARM_NODE_TRAIN_ROBUST_SUM_H_
#define SKIPSWARM_NODE_TRAIN_ROBUST_SUM_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/node_id.h"

namespace skipswarm::node {

struct RobustOptions {
  // A part above clip_factor x the reference norm (Note [Robust averaging])
  // is scaled down to it; 0 turns clipping off (non-finite parts are still
  // left out).
  double clip_factor = 8.0;
  // A part farther from the parts' coordinate-wise median than
  // outlier_factor x the median distance (Note [Robust averaging]) is pulled
  // in to that median distance; 0 turns it off. Applies from 3 parts on.
  double outlier_factor = 3.0;
  // Senders whose parts are left out whatever they hold (Note [Group bans]
  // in grpc_group.h): like a non-finite part, their share becomes the kept
  // parts' mean; each is named kBanned.
  std::set<common::NodeId> banned;
  // Senders that train their own subnetwork (SDP), with its stages (Note
  // [Robust averaging across subnetworks]); any sender not listed is a
  // pipeline host. Empty: one class, the rule of Note [Robust averaging].
  std::map<common::NodeId, std::vector<int>> subnetworks;
  // Note [Newcomer weight]: senders on probation and the weight, in [0, 1],
  // their parts carry while at least one other sender's finite part has
  // visits.
  std::set<common::NodeId> newcomers;
  double newcomer_weight = 0;
  // Judge the parts of classes of < 3 against all the shard's parts (Note
  // [Robust averaging across subnetworks]); callers set it for every stage
  // but the data stage (the tied embedding).
  bool across_classes = false;
};

struct PartInput {
  common::NodeId from;
  const std::vector<float>* data = nullptr;
  int64_t visits = 0;
  // The sender's claimed L2 norm of its whole contribution; < 0 or not
  // finite: unknown (the part's own norm is used).
  double claimed_norm = -1;
};

struct PartVerdict {
  // kBanned: left out because its sender is banned (RobustOptions::banned).
  enum class Kind { kNonFinite, kClipped, kOutlier, kBanned };
  common::NodeId from;
  Kind kind = Kind::kNonFinite;
  // kNonFinite / kClipped: the part's size (whole-contribution norm) and
  // what it was scaled down to; kOutlier: its distance from the centre and
  // the reference distance it was pulled in to.
  double norm = 0;
  double bound = 0;
};

const char* PartVerdictName(PartVerdict::Kind kind);
std::string DescribeVerdict(const PartVerdict& v);

// The L2 norm of `v` (double accumulation); NaN if any element is not finite.
double L2Norm(const std::vector<float>& v);

// REQUIRES: parts non-empty, every data non-null and of one size. Parts are
// added in the given order (callers pass ascending node ids). Appends one
// verdict per part left out or scaled to `verdicts`.
std::vector<float> RobustSum(const std::vector<PartInput>& parts, const RobustOptions& options,
                             std::vector<PartVerdict>* verdicts);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_ROBUST_SUM_H_
