// BehindCheck: does this member trail the live replicas of its stage by
// more than the stage server's lead? (Note [Revived members].)
//
//   BehindCheck check({.every = absl::Seconds(1), .lead = 4}, clock);
//   std::optional<BehindVerdict> v = check.Poll(own_iteration,
//       [&] { return AskReplicas(); },    // each live replica's iteration, or its error
//       [&] { return AskDataNodes(); });  // the same of each live data node
//   if (v.has_value() && v->kind == BehindVerdict::kReenter) ...    // a replica's state
//   if (v.has_value() && v->kind == BehindVerdict::kMoveAhead) ...  // our own state
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
// Note [Sole replica behind]: the check above needs a replica to take the
// state from. A stage's sole replica (a replacement whose peer was killed,
// a stage with one replica) that was stalled comes back the same way:
// stuck in its iteration (the data nodes' barrier messages of that
// iteration were pushed while it was stopped and are lost), while the data
// nodes, which do not wait for relays, go on with iterations whose every
// micro-batch it refuses. Nobody is ahead of it in its stage, so it never
// re-entered, and the swarm trained nothing for the rest of the run (the
// 1000-iteration chaos soak stopped that way, node/daemon/chaos_soak.md). So
// when no replica is ahead, the check also asks the live data nodes (the
// swarm's iteration clock): one more than `lead` ahead of us while no
// replica of our stage is past our own iteration means our stage as a
// whole fell behind. So does one at least two ahead of us for
// `stuck_checks` checks in a row in which our iteration did not move (the
// data nodes finished an iteration we did not serve, and we are not
// catching up), unless a listed replica does not answer (a stalled peer
// holds up our reduce until the group drops it: slow, not stuck; in the
// 1000-iteration soak a replica moved ahead that way): within the lead our server still admits their frames,
// which then wait out the micro-batch deadline, so the data nodes crawl
// (the 8 s stall of a sole replica in sole_replica_stall_test: 105 s from
// iteration 45 to 49) and the lead alone is reached late. Its most advanced live copy is ours (a tie: equal
// states, as replicas of one boundary are), so the member moves ahead
// with its own state (kMoveAhead): it drops its stuck iteration and goes
// on at the data nodes' iteration with its parameters and optimizer state,
// the skipped iterations passing without an update (Note [Restored step]
// in gossip_daemon_restore.cc), logged with WARN and counted
// (skipswarm_sole_replica_skips_total, ..._skipped_iterations_total). A
// replica that falls behind such a member later re-enters from it as
// above. Replicas whose peers are all dead are sole replicas (dead members
// are not asked). A peer that is listed live but does not answer may be a
// stalled replica that holds a newer state, or a dead one gossip has not
// declared yet: moving ahead then waits until it has not answered in
// `confirm` checks in a row, so a slow answer from a healthy peer (then
// near the data nodes, so we re-enter from it) does not make us serve a
// stale state in its place.
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
  // Note [Sole replica behind]: checks in a row in which a listed replica
  // did not answer before we move ahead without it.
  int confirm = 3;
  // Note [Sole replica behind]: checks in a row at one iteration of ours,
  // with the data nodes at least two iterations on, that mean stuck.
  int stuck_checks = 5;
};

struct BehindVerdict {
  enum Kind {
    kReenter,    // a replica of our stage is ahead: take its state
    kMoveAhead,  // the stage is behind the data nodes: go on with ours
  };
  Kind kind = kReenter;
  uint64_t at = 0;  // the iteration the replica or the data nodes are in

  bool operator==(const BehindVerdict& o) const { return kind == o.kind && at == o.at; }
};

class BehindCheck {
 public:
  // Live members' iterations (one entry per member asked; none: nobody
  // to ask).
  using Query = std::function<std::vector<absl::StatusOr<uint64_t>>()>;

  // `clock` must outlive the check.
  BehindCheck(BehindCheckOptions options, common::Clock* clock);

  // At most once per `every` (the first call always asks): asks `replicas`
  // (our stage's other live replicas); kReenter at the highest answer when
  // it is more than `lead` ahead of `own`. Otherwise asks `data_nodes`:
  // kMoveAhead at their highest answer when it is more than `lead` ahead of
  // `own` (or at least 2 ahead for `stuck_checks` checks at one `own`
  // while every replica listed answers),
  // no replica answered past `own`, and every replica listed
  // answered, or has not for `confirm` such checks in a row (Note [Sole
  // replica behind]). nullopt otherwise.
  std::optional<BehindVerdict> Poll(uint64_t own, const Query& replicas, const Query& data_nodes);
  // The next Poll asks at once and counts afresh (after a re-entry or a
  // move ahead: a new start).
  void Reset() {
    asked_ = false;
    unanswered_ = 0;
    stuck_checks_ = 0;
  }

 private:
  const BehindCheckOptions options_;
  common::Clock* const clock_;
  bool asked_ = false;
  absl::Duration last_ = absl::ZeroDuration();
  int unanswered_ = 0;  // checks in a row that would move ahead but for a silent replica
  uint64_t stuck_at_ = 0;
  int stuck_checks_ = 0;  // checks in a row at stuck_at_ with the data nodes 2+ ahead
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_BEHIND_CHECK_H_
