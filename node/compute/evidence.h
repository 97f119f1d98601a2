// Checkable evidence of a verified-compute mismatch (tests/adversarial/
// README.md, "Verified compute"): replica X signs a commitment to every
// forward output it sends, verifier Y signs its sketch answer, and one piece
// of evidence {X's commitment, X's output payload, Y's answer} can be checked
// by anyone holding X's and Y's public keys, without trusting the catcher
// (the hop after X) that collected it.
//
//   // X, on each forward frame it produces:
//   SS_RETURN_IF_ERROR(SignCommitment(identity, &header.commitment));
//   // Y, answering a verify-only frame:
//   SS_RETURN_IF_ERROR(SignAnswer(identity, swarm_id, Sha256(input), &answer));
//   // anyone:
//   EvidenceVerdict v = CheckEvidence(evidence, x_key, y_key, limits, judge);
//   if (v.kind == EvidenceVerdict::kMismatch) ... X and Y disagree ...
//
// Note [Checkable evidence]
// Today (Note [Verify bans] in node/stage/verify_trust.h) a frame is
// authenticated by its TLS channel only, so a catcher could forge both X's
// output and Y's sketch, and a ban needs a quorum of trusted accusers. With
// signatures a forged accusation convicts nobody:
// - X signs, on every forward frame it produces (it cannot know which are
//   checked: the check is sent to Y by the hop before, Note [Sending
//   checks]), an OutputCommitment: swarm, micro-batch, its hop and id,
//   SHA-256 of the input payload it received and of the output payload it
//   sends, and the output's TensorMeta as declared (dtype, shape, codec,
//   size, block size). Per frame, not per iteration: a per-iteration
//   Merkle root would save signatures but the evidence would need the root,
//   sent after the fact, and X could withhold it.
// - Y signs its SketchAnswer together with SHA-256 of the input payload it
//   received and the swarm id (so an answer cannot be replayed into another
//   swarm's evidence).
// - Evidence is VALID iff both signatures verify under keys whose hashes
//   are the ids named, the commitment and the answer name the same visit
//   (origin, iteration, micro-batch, hop, X), the payload hashes to the
//   committed output hash, X's committed input hash equals Y's signed input
//   hash (a lying hop before that fed Y another input cannot frame X), and
//   the judge decodes the payload with the COMMITTED meta (not a frame's).
//   A valid mismatch proves "X and Y disagree on the same input"; who lied
//   is trust's job as before (a newcomer X against a trusted Y: X). A valid
//   match convicts nobody.
// - The input chain. Alone, X could commit to a wrong input hash so that
//   every piece against it is kInputsDiffer. So X's frame carries the hop
//   before's commitment to the frame X received (FrameHeader
//   .input_commitment: its signed output hash IS X's input hash), and X's
//   own commitment binds it (input_commitment_sha256, the SHA-256 of its
//   signing bytes, signed). The catcher refuses a frame whose carried
//   commitment is not the bound one, does not verify under the hop
//   before's key, names another visit than the hop before's (same
//   micro-batch, hop - 1, route's node), or whose output hash is not X's
//   input hash; a frame without one only where both X and the hop before
//   sign by their records (an older peer on either side leaves X nothing
//   to pass on). A false input hash then needs the hop before's key.
//   The route those checks read is the sender's word, so at the origin
//   a tail's hop 1 must be the node the origin sent the micro-batch to
//   (repairs never change it): else a producer past hop 1 could drop the
//   hops before it from the route, claim hop 1, and owe no commitment.
// - What a kept piece then says: an honest catcher kept only frames that
//   passed, so X's input hash is the hop before's signed output, and
//   kInputsDiffer means the hop before fed Y another input or Y lied (its
//   reason says so; still no conviction). A piece whose bound commitment's
//   output hash is not X's input hash (a catcher that kept a refused
//   frame) is kFalseInput: X signed both, so X alone lied, and a catcher
//   cannot make one for an honest X (swapping the carried commitment
//   breaks the binding, stripping the binding breaks X's signature; an
//   honest X binds only a commitment whose output hash is its input hash,
//   CommitOutput). CheckFalseInput proves it from the commitments alone,
//   with X's and the hop before's record keys (no answer, no payload, so
//   whoever Y is), and a receiver that refuses such a frame keeps it as a
//   piece (Note [Evidence bans] in node/stage/evidence_bans.h).
// - The origin. Stage 0 runs at the data node and is never checked, so
//   hop 1's input hash was its own word, and the route every check above
//   reads was the sender's: a middle hop with an accomplice could rename
//   hop 1 on what it forwards. So the origin signs, once per dispatch of a
//   micro-batch, an OriginCommitment (FrameHeader.origin_commitment):
//   swarm, micro-batch, the route as sent and SHA-256 of its stage-0
//   output as sent; every hop passes it on unchanged. A receiver of a
//   forward frame refuses (INVALID_ARGUMENT, counted as the other
//   commitment refusals) one that does not verify under the origin's
//   member key or names another micro-batch; at hop 1 a payload that is
//   not the committed output; a hop-1 input hash (hop 1's commitment, or
//   the one the hop after it passes on) that is not the committed output;
//   and a route that no repair of the committed one gives. Repairs
//   (Note [Hop failures], CheckRepair) keep route[0..holder], may change
//   every hop after the holder and shorten the route, never lengthen it;
//   the origin's own repair (holder 0, before hop 1 admitted the frame)
//   re-signs. So what a receiver holds is route[0..1] and the length: the
//   rest of the planned route is signed as a record of the plan, not
//   checked. In a signing swarm a frame without one is refused
//   (require_commitments, or a record that says the origin signs); where
//   nobody requires it, absent is the old behaviour. Cost: one signature
//   per micro-batch at the origin, one more verify per forward frame
//   received, one payload hash at hop 1.
// - The route between. The checks above bind route[0..1] and the two
//   producers whose commitments travel with the frame; the hops between
//   were the sender's word. Each commitment therefore also signs the
//   route prefix up to the hop its output goes to (route_sha256,
//   SignedRouteDigest), every
//   earlier hop's commitment travels with the frame too
//   (earlier_commitments), and the receiver holds the frame's route to
//   each of them (Note [Signed route prefix] in node/stage/stage_server.h).
//   For pieces from older peers, or where the hop before does not sign,
//   kInputsDiffer keeps naming X, Y or the hop before.
// - Signed swarms. Signing per node let a hostile member evade evidence by
//   not signing: a frame without a commitment was refused only from members
//   whose own record said they sign. So `--sign_frames` is the founder's,
//   in the swarm manifest (SwarmManifest.sign_frames; a joiner adopts it,
//   and one that explicitly says otherwise is refused naming the flag;
//   absent: off). Where it is on, two places enforce it: membership
//   refuses a record without sign_frames (RecordPolicy.sign_frames in
//   membership/record.h, where records are already held to the swarm's
//   model, averaging and stage count), so such a member is never in the
//   view, never routed through and never a planner's choice; and each
//   stage server refuses a forward frame past stage 0 without a valid
//   commitment from any producer (StageServerOptions.require_commitments,
//   set by the training stack from NodeDaemonOptions.swarm_signs_frames),
//   so a frame that slips past the view - a record admitted before the
//   rule, a stale route - is refused too, whatever its sender's record
//   says. The record bit stays: a swarm without the setting still mixes
//   signing and older members per record. Keys and bits are looked up per
//   frame in O(1) (TrainingMembers keeps a map per accepted view).
// - Who reads it: the catcher keeps its signed mismatches (OutputChecks::
//   EvidenceAgainst) and serves them (FetchEvidence on the node's port,
//   node/daemon/gossip/evidence_service.h); a member that sees the
//   catcher's ban of X and has not adopted it by the quorum fetches the
//   pieces and checks them here with X's and Y's record keys. A valid
//   mismatch against a newcomer X by a trusted Y bans X there (Note
//   [Evidence bans] in node/stage/evidence_bans.h), and so does a proven
//   false input against any X; kInputsDiffer, a match or any invalid piece
//   convicts nobody.
//
// Signed bytes are a fixed, length-prefixed encoding (never a proto
// serialization, which is not canonical), with a domain tag per kind.
//
// Thread rule: pure functions (Identity is thread-safe).
#ifndef SKIPSWARM_NODE_COMPUTE_EVIDENCE_H_
#define SKIPSWARM_NODE_COMPUTE_EVIDENCE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"
#include "identity/identity.h"
#include "model/output_sketch.h"
#include "node/compute/sketch_wire.h"
#include "node/compute/stage_compute.h"
#include "proto/pipeline.pb.h"
#include "proto/verify.pb.h"

namespace skipswarm::node {

inline constexpr size_t kSha256Bytes = 32;
// FrameHeader.swarm_id's largest accepted size in a commitment.
inline constexpr size_t kMaxCommitmentSwarmIdBytes = 32;
inline constexpr int kMaxCommitmentRank = 8;

// SHA-256 of every byte of `payload`, in chunk order (32 raw bytes).
using common::Sha256;

// The bytes X signs / Y signs (see Note [Checkable evidence]).
std::string CommitmentSigningBytes(const proto::OutputCommitment& commitment);
std::string AnswerSigningBytes(absl::string_view swarm_id, const proto::SketchAnswer& answer);
// SHA-256 of CommitmentSigningBytes: what the next commitment's
// input_commitment_sha256 holds to bind this one.
std::string CommitmentDigest(const proto::OutputCommitment& commitment);
// SHA-256 (32 raw bytes) of route[0..hops-1] (node id and stage of each,
// length-prefixed, tagged). REQUIRES: 0 <= hops <= route.size().
std::string RouteDigest(const google::protobuf::RepeatedPtrField<proto::Hop>& route, int hops);
// How many hops of the route a producer at `hop_index` signs: its own hop
// and the one its output goes to, min(hop_index + 2, route_size) (the last
// hop's output goes to the origin, route[0]: the whole route). Note
// [Signed route prefix] in node/stage/stage_server.h.
int SignedRouteHops(uint32_t hop_index, int route_size);
// What OutputCommitment.route_sha256 holds for a producer at `hop_index`
// of `route`: RouteDigest(route, SignedRouteHops(hop_index, route.size())).
// REQUIRES: hop_index < route.size().
std::string SignedRouteDigest(const google::protobuf::RepeatedPtrField<proto::Hop>& route,
                              uint32_t hop_index);

// Fills commitment->signature with `signer`'s signature; the caller filled
// the other fields, `producer` with signer.id().
absl::Status SignCommitment(const identity::Identity& signer,
                            proto::OutputCommitment* commitment);
// Sets answer->answerer (signer.id()), ->input_sha256 and ->signature.
absl::Status SignAnswer(const identity::Identity& signer, absl::string_view swarm_id,
                        absl::string_view input_sha256, proto::SketchAnswer* answer);

// The commitment's shape, as a receiver checks it before anything else
// (InvalidArgument naming the field): 32-byte origin, producer and hashes,
// a swarm id of at most 32 bytes, hop_index in 1..kMaxCheckedHops-1, an
// output meta of rank 1..8 with positive dimensions, an
// input_commitment_sha256 and a route_sha256 each empty or of 32 bytes, a
// 64-byte signature.
absl::Status CheckCommitmentShape(const proto::OutputCommitment& commitment);

// CheckCommitmentShape, then `public_key` must hash to the producer and the
// signature verify (Unauthenticated when it does not).
absl::Status VerifyCommitment(const proto::OutputCommitment& commitment,
                              absl::string_view public_key);

// The origin's commitment to a dispatch (Note [Checkable evidence]):
// the bytes it signs; SignOrigin sets origin (signer.id()) and signature,
// the caller filled the rest. CheckOriginShape: a swarm id of at most 32
// bytes, a 32-byte origin and output hash, a route of 1..kMaxCheckedHops
// hops of 32-byte ids starting at (origin, stage 0), a 64-byte signature
// (InvalidArgument naming the field). VerifyOrigin: the shape, then
// `public_key` must hash to the origin and the signature verify.
std::string OriginSigningBytes(const proto::OriginCommitment& origin);
absl::Status SignOrigin(const identity::Identity& signer, proto::OriginCommitment* origin);
absl::Status CheckOriginShape(const proto::OriginCommitment& origin);
absl::Status VerifyOrigin(const proto::OriginCommitment& origin, absl::string_view public_key);

// Compares X's output with Y's sketch; node/compute/output_check.h
// CheckOutputAgainstSketch (libtorch), or a stand-in in tests. The same
// signature as node/stage/output_checks.h OutputJudge.
using EvidenceJudge = std::function<absl::StatusOr<model::SketchVerdict>(
    const WireTensor& received, const model::OutputSketch& sketch,
    const model::SketchCheckOptions& options)>;

struct Evidence {
  proto::OutputCommitment commitment;  // X's, from its output frame
  absl::Cord output;                   // that frame's payload
  proto::SketchAnswer answer;          // Y's
  // That frame's input_commitment (the hop before's, bound by X's
  // commitment); unset where X bound none.
  std::optional<proto::OutputCommitment> input_commitment;
};

struct EvidenceVerdict {
  enum Kind {
    kMismatch,          // valid: X and Y disagree on the same input
    kMatch,             // valid: they agree (convicts nobody)
    kMalformed,         // a field's shape, or the answer does not decode
    kBadXSignature,     // X's key or signature
    kBadYSignature,     // Y's key or signature
    kBadInputSignature, // the hop before's key or signature on the bound commitment
    kVisitsDiffer,      // commitment and answer name different visits
    kPayloadHashDiffers,
    kInputsDiffer,      // Note [Checkable evidence]: no conviction either way
    kUndecodable,       // the judge refused the payload or the sketch
    // X's signed input hash is not the output hash of the commitment it
    // bound (Note [Checkable evidence]): X's own signature contradicts
    // itself, whoever Y is.
    kFalseInput,
  };
  Kind kind = kMalformed;
  std::string reason;  // why not valid; for kMismatch, the judge's reason
  model::SketchVerdict sketch;  // kMismatch / kMatch: the judge's numbers

  bool valid() const { return kind == kMismatch || kind == kMatch; }
  // The piece alone proves X signed falsely (no trust or quorum needed).
  bool proves_x_lied() const { return kind == kFalseInput; }
};

// Checks `evidence` against X's and Y's raw Ed25519 public keys (from their
// signed member records). Pure; never trusts the catcher.
EvidenceVerdict CheckEvidence(const Evidence& evidence, absl::string_view x_public_key,
                              absl::string_view y_public_key, const SketchLimits& limits,
                              const EvidenceJudge& judge,
                              const model::SketchCheckOptions& options = {});

// Whether `evidence` alone proves X signed a false input hash (Note
// [Checkable evidence], the input chain), with X's and the hop before's
// raw public keys from their signed member records; Y's answer and the
// payload are not read (a receiver that refused the frame has no answer).
// kFalseInput iff X's commitment verifies under `x_public_key` and binds
// the carried commitment (input_commitment_sha256 is its digest), that
// commitment verifies under `before_public_key`, and its output hash is
// not X's signed input hash. Else the first reason it does not:
// kMalformed (a shape, nothing bound or carried, not the bound one),
// kBadXSignature, kBadInputSignature, or kMatch (X's input hash is the
// hop before's signed output: the chain holds, nothing is proven).
EvidenceVerdict CheckFalseInput(const Evidence& evidence, absl::string_view x_public_key,
                                absl::string_view before_public_key);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_EVIDENCE_H_
