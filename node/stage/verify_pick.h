// The sampling side of verified compute (tests/adversarial/README.md,
// "Verified compute"; Note [Verify sampling]): the hop before replica X
// decides, per micro-batch, whether the frame it sends X is also sent,
// verify-only, to a second replica Y of X's stage, and with which seed Y
// sketches its output (Note [Output sketch] in model/output_sketch.h).
// The stage server calls it for each forward frame it sends to a hop > 0
// when its verify_rate is set (Note [Sending checks] in
// stage_server_verify_send.cc).
//
//   std::optional<VerifyPick> pick =
//       PickVerifier(x_info, stage, alive_replicas_of_stage, /*rate=*/0.02, rng);
//   if (pick) ... send the frame, verify-only, to pick->verifier with pick->seed ...
//
// Thread rule: pure function (the caller owns `rng`).
#ifndef SKIPSWARM_NODE_STAGE_VERIFY_PICK_H_
#define SKIPSWARM_NODE_STAGE_VERIFY_PICK_H_

#include <cstdint>
#include <optional>

#include "absl/types/span.h"
#include "common/node_id.h"
#include "common/random.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

struct VerifyPick {
  common::NodeId verifier;  // Y
  uint64_t seed = 0;        // told to Y only, never to X
};

// With probability `rate` (clamped to [0, 1]) when `x` is on probation, or
// `trusted_rate` when it is trusted (Note [Trusted disputes] in
// verify_trust.h):
// a replica of `stage` from `replicas` (the alive members the caller's view
// has; any order) that is not `x`, is trusted, hosts `stage`, routes
// micro-batches (not a subnetwork trainer) and answers verify-only frames
// (PeerInfo::verify_frames), chosen uniformly, and a fresh seed. nullopt
// otherwise: a zero rate for `x`, no such replica, or the coin said no.
// Draws from `rng` only when `x`'s rate is > 0 and a replica exists.
std::optional<VerifyPick> PickVerifier(const PeerInfo& x, int stage,
                                       absl::Span<const PeerInfo> replicas, double rate,
                                       common::Random& rng, double trusted_rate = 0);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_VERIFY_PICK_H_
