// The hop after replica X in verified compute (tests/adversarial/README.md,
// "Verified compute"; Note [Output sketch] in model/output_sketch.h): pairs
// X's output, as it arrived here, with replica Y's sketch of the same
// forward (a SketchAnswer, node/compute/sketch_wire.h), in whichever order
// the two arrive, runs CheckOutputAgainstSketch and counts the verdict per
// checked member. The stage server owns one (Note [Verify-only frames]).
//
//   OutputChecksOptions o;
//   o.judge = CheckOutputAgainstSketch;            // node/compute/output_check.h (libtorch)
//   OutputChecks checks(std::move(o));
//   checks.OnOutput(visit, x_output);              // X on probation: keep a reference
//   checks.OnAnswer(y, std::move(answer));         // Y's sketch: checked when both are here
//   checks.EndIteration(iteration);                // drops what is still unpaired
//   checks.stats().by_checked[x].mismatches ...
//
// Note [Pending output checks]
// Neither side knows whether the other will come: X's output is kept only
// in case a sketch follows (the hop after cannot tell which outputs were
// sampled: only the hop before and Y know), and a sketch may come first or
// be forged by anyone. Both are bounded:
//  - outputs: at most max_kept_outputs, the oldest dropped first (counted);
//    a kept output shares the received payload (absl::Cord), so it costs
//    the frame's memory until paired, dropped or its iteration ends. The
//    caller keeps only outputs of members it wants checked (on probation).
//  - sketches: at most max_pending_sketches, and at most
//    max_pending_per_sender from one sender; beyond either, a new one is
//    refused (counted), never displacing another sender's, so a flooding
//    peer fills only its own share. A second sketch for a visit already
//    waiting is refused too.
// Everything of an iteration goes at EndIteration: a check that arrives
// after the replicas stepped is not judged (the weights differ).
// Verdicts: a match or a mismatch is counted on X (checked); a sketch that
// CheckOutputAgainstSketch calls malformed is counted on its sender (Y's
// fault, not X's); an output that does not decode is counted on X as
// undecodable (the hop after refuses such a frame anyway).
//
// The judge is injected so that this file (and the stage server that will
// own it) does not link libtorch: decoding X's output needs the wire codec,
// which the daemon has and the simulator (timed computes) need not.
//
// Thread rule: thread-safe (one mutex; the judge is called under it and
// must not call back).
#ifndef SKIPSWARM_NODE_STAGE_OUTPUT_CHECKS_H_
#define SKIPSWARM_NODE_STAGE_OUTPUT_CHECKS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/node_id.h"
#include "model/output_sketch.h"
#include "node/compute/evidence.h"
#include "node/compute/sketch_wire.h"
#include "node/compute/stage_compute.h"

namespace skipswarm::node {

// Compares X's output, as received, with Y's sketch: a verdict, or an
// error as CheckOutputAgainstSketch gives them ("sketch: ..." for a
// malformed sketch, the decoder's status for an output that does not decode).
using OutputJudge = std::function<absl::StatusOr<model::SketchVerdict>(
    const WireTensor& received, const model::OutputSketch& sketch,
    const model::SketchCheckOptions& options)>;

struct OutputChecksOptions {
  int max_kept_outputs = 16;
  int max_pending_sketches = 16;
  int max_pending_per_sender = 4;
  // Note [Checkable evidence] (node/compute/evidence.h): the mismatches
  // kept as evidence, per checked member (oldest dropped) and members in
  // all (a new member beyond is not kept: no member's evidence displaces
  // another's). Only pairs with X's signed commitment and Y's signed
  // answer are kept.
  int max_evidence_per_member = 4;
  int max_evidence_members = 32;
  model::SketchCheckOptions check;
  // Required: node/compute/output_check.h CheckOutputAgainstSketch, or a
  // stand-in in tests.
  OutputJudge judge;
};

// Per member: as the checked replica X (checks, mismatches, undecodable)
// and as a sender of sketches (bad_sketches).
struct MemberCheckCounts {
  int64_t checks = 0;  // verdicts on X: matches + mismatches
  int64_t mismatches = 0;
  int64_t undecodable = 0;
  int64_t bad_sketches = 0;
};

struct OutputCheckStats {
  std::map<common::NodeId, MemberCheckCounts> by_member;
  int64_t outputs_dropped = 0;     // kept outputs pushed out by newer ones
  int64_t sketches_refused = 0;    // over a cap, or a second one for a visit
  int64_t expired = 0;             // outputs and sketches unpaired at EndIteration
  int kept_outputs = 0;
  int pending_sketches = 0;
};

class OutputChecks {
 public:
  explicit OutputChecks(OutputChecksOptions options);

  // X's output for `visit`, as it arrived here. A verdict when Y's sketch
  // was already waiting (and well formed), else nullopt (kept, or nothing
  // to compare with); with a verdict, `*sketch_from` (when given) is Y. An
  // output of an iteration already ended is ignored.
  // `commitment`: X's signed commitment to it (the frame's, checked at
  // admission), kept with it for evidence; null when the frame had none.
  // `input_commitment`: the frame's input_commitment (the hop before's,
  // bound by X's), kept likewise (Evidence::input_commitment).
  std::optional<model::SketchVerdict> OnOutput(
      const CheckedVisit& visit, const WireTensor& received, common::NodeId* sketch_from = nullptr,
      const proto::OutputCommitment* commitment = nullptr,
      const proto::OutputCommitment* input_commitment = nullptr);
  // Y's answer, from peer `from`. A verdict when X's output was kept, else
  // nullopt (waiting, refused, or a malformed sketch). `signed_answer`:
  // the answer as it came on the wire (with Y's signature), kept for
  // evidence; null when unsigned.
  std::optional<model::SketchVerdict> OnAnswer(const common::NodeId& from, SketchAnswer answer,
                                               const proto::SketchAnswer* signed_answer = nullptr);
  // The evidence kept of `member`'s mismatches (as X), oldest first; each
  // piece is for CheckEvidence, which trusts nothing of this node.
  std::vector<Evidence> EvidenceAgainst(const common::NodeId& member) const;
  // Keeps a piece that proves `member` lied on its own (a false input, Note
  // [Evidence bans]), in the same bounded store as the mismatches.
  void KeepProvenPiece(const common::NodeId& member, Evidence piece);
  // Drops outputs and sketches of `iteration` and earlier (counted as
  // expired); later ones of those iterations are ignored.
  void EndIteration(uint64_t iteration);

  OutputCheckStats stats() const;

 private:
  struct Pending {
    common::NodeId from;
    model::OutputSketch sketch;
    std::optional<proto::SketchAnswer> signed_answer;
  };
  struct Kept {
    WireTensor received;
    std::optional<proto::OutputCommitment> commitment;
    std::optional<proto::OutputCommitment> input_commitment;
  };
  std::optional<model::SketchVerdict> Judge(const CheckedVisit& visit, const Kept& output,
                                            const common::NodeId& from, const Pending& sketch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KeepEvidence(const common::NodeId& member, Evidence evidence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetSketchFrom(const common::NodeId& from) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const OutputChecksOptions options_;
  mutable absl::Mutex mu_;
  bool any_ended_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t ended_ ABSL_GUARDED_BY(mu_) = 0;  // valid when any_ended_
  absl::flat_hash_map<CheckedVisit, Kept> outputs_ ABSL_GUARDED_BY(mu_);
  std::deque<CheckedVisit> output_order_ ABSL_GUARDED_BY(mu_);  // oldest first
  absl::flat_hash_map<CheckedVisit, Pending> sketches_ ABSL_GUARDED_BY(mu_);
  // Pending sketches per sender; no entry for a sender with none.
  absl::flat_hash_map<common::NodeId, int> sketches_by_sender_ ABSL_GUARDED_BY(mu_);
  OutputCheckStats stats_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<common::NodeId, std::deque<Evidence>> evidence_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_OUTPUT_CHECKS_H_
