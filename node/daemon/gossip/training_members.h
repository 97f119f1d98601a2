// TrainingMembers: the daemon's SwarmView (node/stage/swarm_view.h) built
// from gossip (membership/), so training peers come from the membership
// View instead of a static list. Two faces share one state:
//   group()   - for GrpcGroupComm: who takes part in iteration i's barrier
//               and replica averaging;
//   routing() - for the StageServer and the data-node planner: who may be
//               sent micro-batches in iteration i.
// Both also answer SwarmView::Link from the view's measured links
// (membership::View::links: gossip RTT and pipeline throughput), which the
// data node's planner turns into hop costs (Note [Planning from measured
// links] in node/train/scheduler_planner.cc).
//
//   TrainingMembers members(self);
//   membership->AddListener([&](auto&) { members.Update(membership->GetView()); });
//   members.SetIteration(first);                      // then at every boundary
//   GrpcGroupComm::Create(go, members.group(), clock);
//   StageServer server(transport, clock, members.routing(), ...);
//
// Note [Daemon records]: what a daemon puts in its signed NodeRecord.
//   addresses = [gossip, pipeline, group (StageService of GrpcGroupComm),
//                state (StateServer: FetchState, Health)];
//   stages    = hosted stages; empty while a joiner is still preparing
//               or a revived member re-enters (Note [Revived members] in
//               behind_check.h): in the swarm but not in training;
//   iteration = entry iteration: 0 for a founder (trains from the start or
//               from its checkpoints), e >= 1 for a joiner.
//
// Note [Entry iteration]: a joiner that announced entry e is in the group
// face from iteration e: it holds the state after step e-1
// (state_transfer.h, fetched at its source's boundary e) and takes the
// same step e as its replicas (their summed gradient), so its digest
// equals theirs after its first step. The routing face lists it once its
// state is loaded (Note [Routed once ready]); until then it takes its
// replicas' steps with zero visits, like a paused member, and their rounds
// do not wait for it: they close it out, and once loaded it takes their
// result (Note [Entering members] in node/train/grpc_group.h). Every node
// evaluates this rule against its own iteration counter. What must hold:
// its record reaches its replicas before they start the averaging of e and
// the data nodes before their barrier of e (both at the end of e), and its
// state request reaches the source before the source's boundary e. The
// joiner therefore picks e = the source's current iteration + 1 when
// iterations are long enough (more when they are short), Announces
// (push-pull with every live member) and asks for the state at once; if
// the source passed e meanwhile (FAILED_PRECONDITION) it announces a later
// entry, and members drop it from e's barrier and averaging when that
// record comes. A late record elsewhere shows up as a digest mismatch in
// the report. A joiner behind NAT announces its entry only in the record
// that names its relays (Note [Relayed entry] in gossip_daemon_relay.cc),
// so whoever knows the entry can dial it.
//
// Note [Routed once ready]: a joiner's entry record also says `entering`
// (NodeRecord.entering), and the routing face leaves such a member out;
// once its state is loaded it re-signs without the flag and Announces, and
// members route to it from their next plan or re-route on. Before, the
// routing face listed a joiner from its entry and the frames sent before
// its state was loaded waited in its StageServer for BeginIteration(e).
// That held only if the state came at e: when the source passed e before
// the request came (a loaded machine: the netns home layout's run S16,
// tests/netns/README.md), the joiner announced a later entry and the
// frames the data nodes had routed to it for e were dropped at the
// micro-batch deadline. What it costs: the joiner gets no micro-batch in
// the iterations between its entry and the data nodes' first plan with
// its ready record (one or two on a LAN). Whoever holds a record without
// the flag holds the entry, the relays (Note [Relayed entry]) and the
// loaded state with it. A stage move follows the same rule (Note [Stage
// moves]): the flag speaks of the stages the record names from its entry
// on, so a mover is routed in its old stage up to its switch and in its
// new one only once it re-signed without the flag. Nobody counts an
// entering member as a state source (StateSources in join_planning.h).
// Members leave both faces the moment gossip says DEAD or LEFT (and when
// this node's own transport saw them fail: MarkDead, until they re-sign
// with a higher incarnation; a relayed member's failed hops are no such
// verdict, Note [Relayed verdicts] in training_members.cc), so a dead
// member is dropped from a pending barrier or reduce; a joiner only ever
// enters at a boundary.
//
// Note [Leaving]: a draining member signs LEFT together with its exit
// iteration x (the iteration it is in, in record.iteration): it finishes x
// (its in-flight micro-batches, the barrier, its share of the averaging)
// and then exits. In the routing face it is no longer listed and no
// replica (no new routes) but stays alive while our iteration is <= x, so
// hops of micro-batches already routed through it (their backwards
// retrace the route) still go to it; in the group face it stays a member
// through x. Nobody can be past x without its contribution to x, so every
// node agrees. Failed hops to it (MarkDead through the routing face) do
// not cut it out of its exit iteration; the replica group's own verdicts
// (a leaver that exited or crashed and does not answer its probes) do, so
// nobody waits for it forever. DEAD members leave both faces at once.
//
// Note [Stopping last replica]: the last replica of a stage that stops
// does not sign LEFT until its trainer has ended (signed at once, its exit
// iteration would lose its route, Note [Stopping] in gossip_daemon.cc); it
// signs record.stopping with stop_after, the last iteration it trains, as
// its stop begins. In the routing face it is then listed and a replica up
// to stop_after and in no plan of a later iteration, so the data nodes
// pause there for its stage (Note [Paused training]) instead of planning
// micro-batches through a node whose update is never applied. A plan
// made before the record arrived is refused by its server (StopAfter, as
// on any stop) with its stop point; the data node then marks it stopping
// as the record would, and re-runs the refused micro-batches under fresh
// ids through another replica or pauses in that iteration for the stage
// (Note [Stopping refusals] in node/stage/stage_server.h, Note [Stopping
// drops] in node/train/data_node_driver.h). In the group face nothing
// changes until its LEFT.
//
// Note [Paused members]: a volunteer's pause (`skipswarm node pause`,
// quiet hours) signs record.paused. In the routing face such a member is no
// longer listed and no replica (no new routes, from the next plan or
// re-route on), but stays alive, so hops of micro-batches already routed
// through it (their backwards retrace the route) still go to it; its
// StageServer refuses forwards of later iterations (RESOURCE_EXHAUSTED
// "this node is paused") so a data node that planned before the record
// reached it re-routes at once instead of timing out. In the group face
// nothing changes: it stays in its replica groups and keeps taking their
// averaged steps with zero visits, and a resume (record.paused cleared)
// makes it routable again from the next plan with nothing to fetch.
// Staying rather than leaving the group and re-syncing on resume is the
// choice because a pause is the operator's "not now", often nightly
// (quiet hours): a resume must be instant and cost no state transfer (a
// whole stage over a home uplink), the groups' membership and shard
// layout do not churn twice per pause, and the paused node remains a
// state source for joiners and movers. What it costs: its share of the
// averaging traffic while paused (every H-th iteration with outer steps).
// What keeps it consistent: with H = 1 the step is visit-weighted, so its
// zero visits add nothing and its state is its replicas'; with H > 1 it
// takes no inner step without visits, and a replica that stayed at its
// anchor for a whole round adds no weight to the outer mean (Note [Idle
// outer contributions] in node/train/node_trainer.h) and applies the same
// outer step, so its digest equals its replicas' after every sync. A
// pause is refused while the member is the last unpaused live replica of
// one of its stages (a mover's: of the stage it moves to as well), or a
// data node (its data shard would go unread). A joiner's stage choice
// counts no paused member as capacity, and takes a stage hosted by paused
// members only first (ChooseJoinStage). With stage moves: the
// rebalancing rule counts no paused member as a stage's capacity, so no
// move leaves a stage with paused replicas only (ChooseOwnMove); a paused
// member starts no move; a member paused between its move's announcement
// and its switch still moves (its record names the new stage already),
// paused: its new StageServer refuses forwards too (ReplaceStack).
//
// Note [Stage moves] (rebalancing, scheduler's Note [Stage rebalancing]):
// a member that trained stage a and re-signs its record with stage b, a
// later entry e (record.iteration) and `entering` moves at boundary e:
// every node that saw its old record keeps it in stage a (both faces)
// through e-1, puts it in stage b's group from e (it takes step e with
// zero visits, its state fetched at boundary e like a joiner's, so its
// digest equals its new replicas' after it) and routes stage b to it from
// e+1 and its ready record on, whichever is later (Note [Routed once
// ready]: it re-signs without the flag once stage b's state is loaded and
// its new StageServer is up). Before, a move set no flag and stage b was
// routed to it from e+1 whatever its state: when the fetch or the swap
// took longer than an iteration, the micro-batches planned through it
// waited or were dropped. Like a joiner it announces e at least two
// iterations ahead, so the record is everywhere before e. A node that
// never saw the old record (it joined during the move) sees the mover
// only from e, and routes to it only once ready.
//
// Note [Newcomer probation] (an open swarm; docs/DESIGN.md "Open swarms"):
// anyone may join, and join work (membership/join_work.h) only prices an
// identity. A fresh identity has shown nothing yet, so until it has, no
// route may depend on it alone. With the manifest's probation_iterations
// = N > 0, a member is trusted when it is the founder or on the manifest's
// allow-list (in an open swarm: the founder's own hosts), or when the record
// of a trusted member vouches for it (NodeRecord.vouches): that member
// compared their parameter digests in a replica group they share and they
// matched at every comparison for N iterations in a row
// (newcomer_ledger.h; a mismatch starts the count again and withdraws the
// vouch). Trust is decided from records alone, so every node that holds
// the same records agrees, and records of DEAD or LEFT members still count
// (a founder that goes away does not send everyone back to probation). A
// member on probation is in its replica groups as usual (the group face:
// it averages, and its digests are compared, which is how it earns
// trust), but in the routing face it hosts a pipeline stage (>= 1) only
// while a trusted, live, routable member hosts that stage too; otherwise
// it is no replica of that stage and is left out of Members() when no
// stage remains (it stays alive, for hops already routed through it). The
// planner then sends a stage's micro-batches through the newcomer only
// beside a trusted replica whose averaged weights and digest it must match;
// a stage whose only hosts are on probation gets no route (trust passes
// only within replica groups, so the founder lists a trusted host for
// every stage). Data nodes' stage 0 is nobody's hop and is exempt. Both
// faces mark a member on probation (PeerInfo::on_probation): in its replica
// groups its gradient parts carry a lower weight (Note [Newcomer weight] in
// node/train/robust_sum.h), the daemon's quotas give it the newcomer
// budget (Note [Peer quotas] in common/peer_quota.h), and its micro-batches
// share half of a stage host's admission with every other newcomer's
// (Note [Newcomer micro-batches] in node/stage/stage_server.h).
//
// Thread rule: thread-safe; the faces may be used from any thread. One
// lock (mu_) for the view; the per-frame key look-ups (PublicKeyOf,
// SignsFrames) take only their own (keys_mu_, after mu_).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_TRAINING_MEMBERS_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_TRAINING_MEMBERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "membership/view.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

// Record addresses (Note [Daemon records]).
struct DaemonEndpoints {
  std::string gossip;
  std::string pipeline;
  std::string group;
  std::string state;
};
std::vector<std::string> EndpointsToAddresses(const DaemonEndpoints& e);
// InvalidArgument unless the member advertises all four.
absl::StatusOr<DaemonEndpoints> EndpointsOf(const membership::MemberInfo& m);

enum class TrainingFace { kGroup, kRouting };

// Whether member `m` is listed for `iteration` under Note [Entry iteration]
// (liveness aside): it hosts stages, advertises the daemon endpoints and
// its entry rule admits it (a LEFT member, whose record.iteration is its
// exit iteration, stays listed).
bool TrainsIn(const membership::MemberInfo& m, uint64_t iteration, TrainingFace face);

// Live members of `view` (other than `self`) that host `stage` and train
// in `iteration` (group face): the replicas a leaving node would leave
// behind (Note [Leaving] in node_daemon.cc).
std::vector<common::NodeId> OtherLiveReplicas(const membership::View& view,
                                              const common::NodeId& self, int stage,
                                              uint64_t iteration);

// Note [Data node entered later] (node/train/data_node_wait.h): whether a
// live member of `view` hosting stage 0 (a data node) enters after
// `iteration` by its record (Note [Entry iteration]): then `iteration`
// has no data node in anyone's group face and never will, and a relay
// waiting for one there passes it empty. Founders (entry 0) never do.
// The earliest such entry (for the relay's log); nullopt when none.
std::optional<uint64_t> DataNodeEntersAfter(const membership::View& view, uint64_t iteration);

// Note [Simultaneous leavers] (gossip_daemon_run.cc): the replicas of
// OtherLiveReplicas that stay when this node leaves: not stopping as a
// stage's last replica (record.stopping), and not about to leave
// (record.leaving) unless their node id is larger than `self`'s (of two
// that check at once, the larger yields and stays, or stops last).
std::vector<common::NodeId> StayingReplicas(const membership::View& view,
                                            const common::NodeId& self, int stage,
                                            uint64_t iteration);

class TrainingMembers {
 public:
  explicit TrainingMembers(common::NodeId self);
  ~TrainingMembers();

  // A new membership snapshot (from a listener; any thread).
  void Update(membership::View view);
  // The iteration this node is in; call at every boundary, before the
  // next iteration's planning starts.
  void SetIteration(uint64_t iteration);
  uint64_t iteration() const;
  // Called (no lock held) with every member whose pipeline address is new
  // or changed, so the transport can dial it.
  void SetAddressListener(std::function<void(const PeerInfo&)> listener);

  SwarmView* group();
  SwarmView* routing();
  membership::View view() const;

  // Note [Newcomer probation]: from now on members not trusted (rooted at
  // `roots`: the founder and the open swarm's allow-list) host pipeline
  // stages in the routing face only beside a trusted replica. Without this
  // call everyone is trusted.
  void SetProbation(absl::flat_hash_set<common::NodeId> roots);
  // Whether `id` is trusted (always, without probation).
  bool Trusted(const common::NodeId& id) const;
  // Live members hosting a pipeline stage (>= 1) that are not trusted; 0
  // without probation.
  int OnProbation() const;
  // Every member of the view that is not trusted (ascending id); empty
  // without probation. The daemon's quotas give them the newcomer budget.
  std::vector<common::NodeId> Untrusted() const;
  // Note [Checkable evidence]: the raw public key of `id` from its signed
  // record (nullopt for a member not in the view), and whether its record
  // says it signs its forward frames (NodeRecord.sign_frames). Both faces.
  // Called once per forward frame by the stage server: O(1), from a map
  // Update rebuilds with each accepted view, under its own lock (keys_mu_),
  // never the members' lock, so a frame's check does not wait on a sweep.
  std::optional<std::string> PublicKeyOf(const common::NodeId& id) const;
  bool SignsFrames(const common::NodeId& id) const;
  // Note [Data node behind] (behind_check.h): drops every local dead
  // verdict (MarkDead through either face: this node's failed hops, probes
  // and silences); gossip's DEAD and LEFT still count. For a member that
  // re-enters after a stall, whose verdicts of that time say more about it
  // than about its peers.
  void ForgetLocalVerdicts();

 private:
  class Face;
  std::vector<PeerInfo> MembersOf(TrainingFace face) const;
  bool IsAlive(const common::NodeId& id, TrainingFace face) const;
  std::vector<common::NodeId> ReplicasOf(int stage, TrainingFace face) const;
  void MarkDead(const common::NodeId& id, TrainingFace face);
  uint64_t Version() const;
  // The view's sample of link from -> to (both faces: links do not depend
  // on who trains when).
  std::optional<LinkEstimate> LinkOf(const common::NodeId& from, const common::NodeId& to) const;
  // The stop_after of `id`'s own record when it says stopping, or its exit
  // iteration when its record says LEFT (Note [Leaving]); both faces;
  // SwarmView::StopAfter.
  std::optional<uint64_t> StopAfterOf(const common::NodeId& id) const;
  // The incarnation of `id`'s record in the view; both faces;
  // SwarmView::Incarnation.
  std::optional<uint64_t> IncarnationOf(const common::NodeId& id) const;
  // `m` as it trains in our current iteration under Notes [Entry iteration]
  // and [Stage moves], or nullopt when it is not listed in `face`.
  std::optional<membership::MemberInfo> AsOfLocked(const membership::MemberInfo& m,
                                                   TrainingFace face) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // AsOfLocked without the copy (the group asks several times per sweep):
  // the stages `m` trains then (its record's or its move's old ones, which
  // live as long as the view or the move), with its entry iteration in
  // `*entry`; null when it is not listed.
  const std::vector<uint32_t>* StagesAsOfLocked(const membership::MemberInfo& m,
                                                TrainingFace face, uint64_t* entry) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Whether routes may not start using `m` now (Notes [Leaving], [Paused
  // members], [Routed once ready]; a mover's flag: [Stage moves]).
  bool TakesNoNewRoutesLocked(const membership::MemberInfo& m) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Newcomer probation]: the trusted set from view_'s vouches.
  void RecomputeTrustLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether routes may use `m` for `stage` under probation (true without).
  bool RoutableForLocked(const membership::MemberInfo& m, uint32_t stage) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsAliveLocked(const common::NodeId& id, TrainingFace face) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Move {
    std::vector<uint32_t> stages;  // before the switch
    uint64_t entry = 0;            // of the old record
    uint64_t switch_at = 0;        // the new record's entry
  };

  const common::NodeId self_;
  mutable absl::Mutex mu_;
  membership::View view_ ABSL_GUARDED_BY(mu_);
  uint64_t iteration_ ABSL_GUARDED_BY(mu_) = 0;
  // Local failure verdicts: id -> the incarnation they apply to; the
  // group's verdicts (its liveness probes and pushes) apply to leavers too.
  absl::flat_hash_map<common::NodeId, uint64_t> dead_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<common::NodeId, uint64_t> group_dead_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<common::NodeId, Move> moves_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<common::NodeId, std::string> dialed_ ABSL_GUARDED_BY(mu_);
  std::function<void(const PeerInfo&)> address_listener_ ABSL_GUARDED_BY(mu_);
  // Note [Newcomer probation]: set once probation is on.
  std::optional<absl::flat_hash_set<common::NodeId>> roots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<common::NodeId> trusted_ ABSL_GUARDED_BY(mu_);
  // Note [Checkable evidence]: each member's record key and sign_frames
  // bit, as of view_. Lock order: mu_ then keys_mu_ (Update swaps the map
  // under both, so the map never goes back to an older view); readers take
  // keys_mu_ alone.
  struct FrameKey {
    std::string public_key;
    bool sign_frames = false;
  };
  mutable absl::Mutex keys_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::flat_hash_map<common::NodeId, FrameKey> frame_keys_ ABSL_GUARDED_BY(keys_mu_);
  std::unique_ptr<Face> group_;
  std::unique_ptr<Face> routing_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_TRAINING_MEMBERS_H_
