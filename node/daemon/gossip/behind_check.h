// BehindCheck: does this member trail the live replicas of its stage by
// more than the stage server's lead? (Note [Revived members].)
//
//   BehindCheck check({.every = absl::Seconds(1), .lead = 4}, clock);
//   std::optional<uint64_t> ahead = check.Poll(own_iteration, [&] {
//     return AskReplicas();  // each live replica's iteration, or its error
//   });
//   if (ahead.has_value()) ...  // re-enter at the swarm's iteration
//
// Note [Revived members]: a member that stopped running for a while (a
// SIGSTOP, a swapped-out or suspended machine, a long GC-like pause) past
// its replica group's probes, or past gossip's DEAD verdict, comes back
// with the state of the iteration it stalled in while its replicas went
// on without it. Gossip takes it back at once (it refutes the verdict with
// a higher incarnation, its record still naming its stage), so the
// planners route to it and its replicas wait for its averaging again; its
// trainer is stuck in an iteration nobody else is in any more, and the
// weights it would serve miss every step taken meanwhile. Its stage server
// refuses frames far ahead of it (Note [Behind the swarm] in
// node/stage/stage_server.h), which keeps micro-batches moving but not the
// member correct. So the member itself checks, at most once per `every`,
// the iteration of its stage's other live replicas (their StateServer's
// Health); when one is more than `lead` iterations ahead of its own it is
// behind: it withdraws from training (its record lists no stage: out of
// both faces of every peer, Note [Daemon records] in training_members.h),
// drops its stuck iteration and re-enters like a joiner, with the state of
// a live replica at a new entry iteration (Note [Entry iteration]), so it
// serves again only with the swarm's state. Replicas of one stage average
// every iteration, so a member that is merely slow is never more than one
// iteration behind them; a replica that is not behind answers within the
// lead, and errors (a replica that is itself gone) say nothing.
// Data nodes do not re-enter (their stage 0 replicas are the swarm's
// iteration clock; a stalled data node is dropped from the barrier and
// goes on from its own iteration, as before).
//
// Thread rule: thread-compatible (the daemon's main loop).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_BEHIND_CHECK_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_BEHIND_CHECK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace skipswarm::node {

struct BehindCheckOptions {
  absl::Duration every = absl::Seconds(1);
  // As StageServerOptions::max_iteration_lead: further behind than this
  // is behind the swarm.
  uint64_t lead = 4;
};

class BehindCheck {
 public:
  // The live replicas' iterations (one entry per replica asked).
  using Query = std::function<std::vector<absl::StatusOr<uint64_t>>()>;

  // `clock` must outlive the check.
  BehindCheck(BehindCheckOptions options, common::Clock* clock);

  // Asks `query` when the last question is at least `every` old (the first
  // call always asks) and returns the highest iteration answered when it
  // is more than `lead` ahead of `own`; nullopt otherwise.
  std::optional<uint64_t> Poll(uint64_t own, const Query& query);
  // The next Poll asks at once (after a re-entry: a new start).
  void Reset() { asked_ = false; }

 private:
  const BehindCheckOptions options_;
  common::Clock* const clock_;
  bool asked_ = false;
  absl::Duration last_ = absl::ZeroDuration();
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_BEHIND_CHECK_H_
