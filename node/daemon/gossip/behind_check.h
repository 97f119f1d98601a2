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
// Data nodes re-enter the same way (Note [Data node behind]), and so do
// members hosting several stages (PollStages: Note [Behind on any stage]
// in gossip_daemon_join.cc). A member
// that comes back after the others finished the run and exited has nobody
// to re-enter from: Note [Alone after the swarm] (alone_check.h) ends it.
//
// Note [Data node behind]: data nodes (stage 0's replicas) are the swarm's
// iteration clock, and they used not to re-enter: a stalled data node was
// dropped from the others' barrier and went on from its own iteration. In
// the 1000-iteration chaos soak (node/daemon/chaos_soak.md) that split the
// swarm for good: d1 dropped a CPU-starved d0 after 3 unanswered probes and
// went on alone, d0 stayed paused in its iteration, and the relays, which
// follow the highest data node they ask, still waited in each iteration's
// barrier for d0 (gossip called it alive) until the silent deadline, so
// every micro-batch was dropped. Two cures were open: d0 re-enters like a
// relay, or the barrier's drop of a data node becomes a swarm-wide
// verdict. Re-entry is the one chosen: it reuses the joiner's path whole
// (a data node may already join as one, ChooseJoinStage), needs no new
// protocol, and repairs every side at once: the re-entry clears our
// record's stages (out of every barrier and averaging at once, so relays
// stop waiting for us), the re-signed records carry a higher incarnation
// (every local dead verdict on us lapses), and we come back at a new entry
// iteration with stage 0's state from another data node (its parameters
// and optimizer state; the averaging keeps stage 0's replicas equal) and
// our data position at that iteration (Note [Data order] in
// node/train/data_source.h: a data node's micro-batches are a function of
// the iteration and its rank). A swarm-wide verdict would need agreement
// on a data node's drop (a gossiped opinion every relay applies to the
// same iteration) and still leave the dropped node stuck in its iteration.
// What we lose: the micro-batches of the iterations we missed (our data
// shard for them goes unread, as with any stalled data node). When: data
// nodes pass every barrier together, so a data node the barrier still
// waits for finishes an iteration only once every other has sent its
// barrier message of it, and no two are ever 2 iterations apart. Another
// data node 2 or more ahead of us therefore says we are not in its
// barrier any more (it dropped us, or we it): more than `lead` ahead, at
// once (the relay's rule); 2 ahead, once it holds for `stuck_checks`
// checks in a row. The second rule is for the split where both go on:
// with two data nodes run as real processes and d0 stopped for 10 s, d0
// dropped d1 from its averaging and d1 dropped d0 from its barrier, each
// waiting out the 30 s silent deadline for the other; both went on alone,
// leapfrogging within the lead, with the relays moving ahead to whichever
// was further on, and most micro-batches of the other were refused (42
// iterations in 7 minutes, every other one without a loss). Our own
// iteration is read after the answers, so iterations we finish while
// asking never make us look behind. A data node never moves ahead
// (kMoveAhead): nobody is ahead of it when it is the clock, and its stage
// has other replicas to take the state from when somebody is. It asks at
// most kDataNodesAsked of the other data nodes (founders first, then by
// id), as relays do. A member that re-enters (a relay too) also forgets
// its own local dead verdicts (TrainingMembers::ForgetLocalVerdicts;
// gossip's DEAD and LEFT still count): the soak's d0 was paused because
// its own view called stage 1's replicas dead, verdicts of its hops that
// timed out while it was starved, which hold until those replicas re-sign;
// kept, they would pause it again at its entry, and the relays would wait
// for its barrier until the silent deadline once per re-entry. A peer
// that is really gone is marked again by its next failed hop or probe.
//
// Note [Data nodes split]: the rule above sees data nodes 2 or more apart.
// Two data nodes that drop each other from their averaging in one
// iteration (each missed the other's deadline, or each one's probes of the
// other timed out) stay in step: the relays' barrier still waits for both,
// so neither gets 2 ahead for long. Each then averaged stage 0 alone, and
// the drop (a local verdict, TrainingMembers::MarkDead) held until the
// other re-signed its record with a higher incarnation, which a steady run
// never does: stage 0 diverged between them for the rest of the run, and
// the digest check (Note [Digest re-sync] in node/train/node_trainer.h)
// could not see it, as it compares only digests of one round's members.
// So a data node also re-enters when another data node that gossip calls
// live, that answers our question within one iteration of ours (it
// progresses: a stalled one falls 2 behind and re-enters itself), and that
// our replica group dropped (`dropped`, asked after the answers), is so in
// `stuck_checks` checks in a row. Of the pair only one re-enters (the
// other keeps serving the state to fetch): the one with the larger node id
// (YieldsTo); both see the same ids whatever their timing, where iteration
// order flips as they leapfrog. An id ground to be the smaller gains
// nothing new: any answering data node can already claim an iteration far
// ahead and be re-entered from. Re-entry is the path of the Note above,
// so it repairs both sides: our re-signed record ends the other's verdict
// on us, ForgetLocalVerdicts ends ours on it, and we come back with its
// state, equal digests from the entry on. A member that answers but never
// averages would be re-entered from, waited for, and dropped again, each
// time at the cost of one silent deadline; so each such re-entry doubles
// the checks the next needs (up to `stuck_checks` << kSplitBackoffMax),
// and a stretch of that many checks without a dropped data node undoes one
// doubling. Only the kDataNodesAsked data nodes asked are seen; the one
// whose entry still lies ahead of our iteration is no split (the daemon
// leaves it out of `dropped`). Figures: node/daemon/README.md, "Data nodes
// split".
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

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/node_id.h"

namespace skipswarm::node {

// Note [Sole replica behind], Note [Data node behind]: a few data nodes tell
// the swarm's iteration (they pass one barrier together); asking every one
// each second would cost a large swarm's data nodes one question per member
// per second each.
inline constexpr size_t kDataNodesAsked = 3;

// Note [Data nodes split]: at most stuck_checks << this checks between two
// split re-entries.
inline constexpr int kSplitBackoffMax = 6;

// Note [Data nodes split]: of two data nodes that dropped each other, the
// one that re-enters (`self`, when this is true) takes `peer`'s state.
inline bool YieldsTo(const common::NodeId& self, const common::NodeId& peer) {
  return peer < self;
}

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
  // Note [Data nodes split]: a data node re-enters because a data node it
  // dropped goes on in step with it (not because it is behind).
  bool split = false;

  bool operator==(const BehindVerdict& o) const {
    return kind == o.kind && at == o.at && split == o.split;
  }
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
  // As above, with `own` read after the replicas answer and again after the
  // data nodes do (Note [Own iteration after the answers]).
  //
  // Note [Own iteration after the answers]: asking takes time (a 500 ms
  // timeout per member asked, more under load) while the trainer goes on;
  // a fast swarm finishes several iterations meanwhile. Compared with our
  // iteration from before the questions, data nodes that are merely one
  // iteration on (waiting for our reduce) looked more than the lead ahead:
  // both replicas of a stage moved ahead at once in gossip_daemon_test,
  // each dropping the iteration it was averaging (an update lost). So each
  // answer is compared with our iteration read after it.
  std::optional<BehindVerdict> Poll(const std::function<uint64_t()>& own, const Query& replicas,
                                    const Query& data_nodes);
  // One check of a member hosting `stages` (Note [Data node behind]).
  // `ask(stage, at_most)` gives the iterations of at most `at_most` live
  // members hosting `stage`, this one left out; `own` is our iteration. A
  // one-stage relay: Poll(own, all of its stage's replicas,
  // kDataNodesAsked data nodes). A data node ({0}) asks kDataNodesAsked
  // other data nodes (its replicas; no clock) and reads `own` after their
  // answers: kReenter at their highest answer when it is more than `lead`
  // ahead of ours, or at least 2 ahead in `stuck_checks` checks in a row.
  // nullopt, asking nothing, for a member hosting several stages (it asks
  // by PollStages). A data node that is not behind asks `dropped`
  // (null: nobody) after the answers: the iterations answered by data
  // nodes our replica group dropped that we yield to (YieldsTo); kReenter
  // with `split` by Note [Data nodes split].
  using AskStage = std::function<std::vector<absl::StatusOr<uint64_t>>(int stage, size_t at_most)>;
  using DroppedQuery = std::function<std::vector<uint64_t>()>;
  std::optional<BehindVerdict> PollMember(const std::vector<int>& stages,
                                          const std::function<uint64_t()>& own,
                                          const AskStage& ask,
                                          const DroppedQuery& dropped = nullptr);
  // One check of a member hosting several stages (Note [Behind on any
  // stage] in gossip_daemon_join.cc): asks `replicas` (the live replicas
  // of all of its stages; none while a stage of ours has none) and reads
  // `own` after their answers: kReenter at their highest answer when it is
  // more than `lead` ahead of ours. Nothing else: no data node is asked and
  // it never moves ahead. At most once per `every`, as Poll.
  std::optional<BehindVerdict> PollStages(const std::function<uint64_t()>& own,
                                          const Query& replicas);
  // The next Poll asks at once and counts afresh (after a re-entry or a
  // move ahead: a new start). The split back-off stays (Note [Data nodes
  // split]: it outlives the re-entries it bounds).
  void Reset() {
    asked_ = false;
    unanswered_ = 0;
    stuck_checks_ = 0;
    split_checks_ = 0;
  }
  // Whether the next Poll, PollMember (of a one-stage member) or PollStages
  // would ask, a check being due. The daemon's main loop calls SwarmAheadOfUs
  // ten times a second and builds a membership view for `ask` only when this is true:
  // that view, built at every call, was ~1% of a local swarm's CPU.
  bool DueNow() const;

 private:
  // At most once per options_.every (the first call, and the first after
  // Reset: at once); true marks this call as the check's.
  bool Due();
  bool DueAt(absl::Duration now) const;
  std::optional<BehindVerdict> PollDataNode(const std::function<uint64_t()>& own,
                                            const AskStage& ask, const DroppedQuery& dropped);
  // Note [Data nodes split], once a data node found nobody 2+ ahead.
  std::optional<BehindVerdict> SplitCheck(uint64_t mine, const DroppedQuery& dropped);

  const BehindCheckOptions options_;
  common::Clock* const clock_;
  bool asked_ = false;
  absl::Duration last_ = absl::ZeroDuration();
  int unanswered_ = 0;  // checks in a row that would move ahead but for a silent replica
  uint64_t stuck_at_ = 0;
  // Checks in a row at stuck_at_ with the data nodes 2+ ahead (a data
  // node: with another data node 2+ ahead).
  int stuck_checks_ = 0;
  // Note [Data nodes split]: checks in a row with a dropped data node in
  // step; doublings of the checks needed; checks in a row without one.
  int split_checks_ = 0;
  int split_backoff_ = 0;
  int calm_checks_ = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_BEHIND_CHECK_H_
