// AloneCheck: has this training member been left alone by its swarm for
// longer than a bound, and did the swarm finish the run meanwhile? (Note
// [Alone after the swarm].)
//
//   AloneCheck alone(absl::Minutes(2), /*num_stages=*/3, clock);
//   if (std::optional<AloneVerdict> v = alone.Poll(view, own_iteration, iterations)) {
//     if (v->kind == AloneVerdict::kSwarmFinished) ...  // exit 0, no checkpoint
//     else ...                                          // checkpoint, exit non-zero
//   }
//
// Note [Alone after the swarm]: a member that stops running for a while (a
// SIGSTOP, a suspended laptop) re-enters when it comes back and finds the
// swarm ahead (Note [Revived members], Note [Data node behind] in
// behind_check.h). That needs somebody to come back to. When the others
// finish the run while it is stopped, they exit: d1 and the relays trained
// their last iteration, signed LEFT and went. A data node SIGSTOPped at
// iteration 40 of 120 and resumed after they had exited (two data nodes, one
// replica per stage, real processes: tools/experiments/data_split.sh, case
// `after`) called every peer DEAD within 3 s of its resume and then sat
// paused at iteration 41 forever ("no live replica of stage 1", health
// NOT_SERVING "isolated"): the behind check had nobody to ask, the planner
// no stage to route through, and a joiner nobody to take a state from.
// Nothing it can do alone trains anything, so it ends instead:
//  - While training, once its view has held no live member but itself
//    (every other member DEAD or LEFT: health's "isolated") for `after`
//    without a break, the member stops, unless it hosts every stage itself
//    (a one-member swarm trains alone by design). `after` (default 2 min,
//    --alone_timeout_s) is long against a peer's DEAD verdict (seconds) and
//    a founder swarm's shutdown, so the last iteration of a run that ends
//    normally is never cut, and a short network outage is waited out
//    (gossip's reconnect push-pull with a DEAD member heals it, and the
//    member then re-enters as above).
//  - The swarm finished when another data node's record says LEFT after
//    the run's last iteration (iteration >= iterations - 1: it trained
//    them all). Then our state is a stale copy of stage state the swarm
//    finished without us (the finished stages are the leavers' checkpoints):
//    no checkpoint (it would put an old step next to the run's final set),
//    the line "the swarm finished its N iterations without this node" on
//    stdout and exit 0, as a joiner that arrives after the last iteration
//    ("nothing left to train").
//  - Otherwise nobody can tell a finished run from a partition or a swarm
//    that crashed: the LEFT of the leavers only reaches members they still
//    call live, and by the time they finished they had called us DEAD, so
//    a node stopped through the end of a run usually sees only DEAD peers.
//    Then the stop is Note [Stopping]'s (checkpoint of the last finished
//    step, LEFT) and the exit status is non-zero (UNAVAILABLE, the message
//    naming the iteration and how long we were alone): what we trained is
//    saved, and an operator or a supervisor decides whether to restart it
//    into a swarm that may still run.
// The bound starts anew whenever a live member shows up (a refuted verdict,
// a healed partition, a joiner).
//
// Thread rule: thread-compatible (the daemon's main loop).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_ALONE_CHECK_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_ALONE_CHECK_H_

#include <cstdint>
#include <optional>

#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "membership/view.h"

namespace skipswarm::node {

struct AloneVerdict {
  enum Kind {
    kSwarmFinished,  // another data node left after the run's last iteration
    kAlone,          // every other member DEAD or LEFT; the run's end unknown
  };
  Kind kind = kAlone;
  // kSwarmFinished: the iteration that data node left after; kAlone: ours.
  uint64_t at = 0;
  absl::Duration alone_for;  // how long the view held no live peer
};

class AloneCheck {
 public:
  // `clock` must outlive the check. `after` > 0; `num_stages`: the model's.
  AloneCheck(absl::Duration after, int num_stages, common::Clock* clock);

  // `view`: ours (view.self is us); `own`: our iteration; `iterations`:
  // the run's length. A verdict once the view has held no live member
  // other than us in every call for `after` (timed from the first such
  // call); nullopt otherwise. A view with a live peer resets the bound, and
  // so does our own record hosting every stage.
  std::optional<AloneVerdict> Poll(const membership::View& view, uint64_t own,
                                   uint64_t iterations);
  // True at most once a second (the first call: true): a caller polling
  // often builds the view (every member and link) only when it is.
  bool Due();

 private:
  const absl::Duration after_;
  const int num_stages_;
  common::Clock* const clock_;
  std::optional<absl::Duration> alone_since_;
  common::LogLimiter pace_{absl::Seconds(1)};  // Due
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_ALONE_CHECK_H_
