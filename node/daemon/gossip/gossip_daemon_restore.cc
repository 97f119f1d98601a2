// GossipDaemon, a joiner a stage of which has no live replica (Note
// [Restore from peer copies]): it restores that stage from the newest
// checkpoint copy its peers hold (Note [Checkpoint copies] in
// checkpoint_copies.h), fetches its other stages from their replicas, and
// enters at the iteration the swarm is paused in. Also the source side of
// that fetch (Note [Snapshot in the iteration] in state_transfer.h).
//
// Note [Restore from peer copies]: when every replica of a stage is gone,
// the data nodes pause in the iteration they cannot plan (Note [Paused
// training] in node/train/data_node_driver.h) and every other member waits
// at that boundary. A node that is to host the stage (a joiner, or the
// node restarted without its disk) finds no live replica to fetch from;
// instead of waiting for one until its start-up deadline, after a short
// grace it asks every live member's StateServer (Health) for the copies it
// holds and for its iteration, fetches the newest copy of the stage (SHA-256
// checked like any state transfer), and enters at the swarm's iteration:
// the data nodes re-plan the paused iteration with it (its record's entry
// is that iteration, Note [Entry iteration]) and training resumes. The
// stage comes back with the weights of the copy's boundary: the updates it
// took after it are lost, the other stages keep theirs, and its step is
// advanced to the entry (Note [Restored step]). The log names the holder,
// the copy's iteration and how many updates the stage lost. A member that
// holds a state of the stage itself (a restart with its disk, a re-entry
// after a stall) takes it instead when no copy is newer (Note [Newest
// state wins] in orphan_restore.h): nothing is fetched, and its own
// state is advanced to the entry the same way. Without any copy or own
// state the joiner keeps waiting, and fails at its start-up deadline
// naming the stage.
// The entry is the newest of the restored state's iteration and the
// iterations the live members hosting stages are in (their Health). While
// data nodes pause those are one iteration. When the restorer is the
// swarm's only data node, come back, its relays may wait one iteration
// apart: one started the iteration after the data node's exit and ran it
// empty when it left, another heard of the leave first and waited before
// it. The newest is still the entry: the relay ahead applied the older
// iteration's (empty) update and would refuse its frames, so entering
// there would lose it, while the relay behind passes its iteration empty
// once it sees a data node entering after it (Note [Data node entered
// later] in node/train/data_node_wait.h). Before that rule it waited there
// for good, the restored data node's micro-batches with it.
// A member hosting several stages (--host_stages=1,2: a restarted founder
// that became a joiner, Note [Restart behind the swarm], or one
// re-entering, Note [Behind on any stage]) enters the same way for all of
// them at one entry: each orphaned stage from the newest copy of it (each
// advanced to the entry, its lost updates reported, as above), each other
// stage from its live replicas' state of the entry boundary. Those
// replicas began the paused iteration, so they passed that boundary
// without a snapshot; they serve it from their state as long as the
// iteration's update has not run, which it cannot while the swarm waits
// for us (Note [Snapshot in the iteration] in state_transfer.h). A later
// entry would never come: the swarm cannot leave the paused iteration
// without the orphaned stage. Without a copy of any one orphaned stage the
// member keeps waiting, and fails at its start-up deadline naming that
// stage.
//
// Note [Restored step]: a stage's step is the swarm iteration its state
// belongs to, not a count of the updates it took: ApplyUpdate advances it
// on an iteration without visits too (StageState in
// node/compute/stage_compute.h), and NodeTrainer passes a failed averaging
// round that way, so at every boundary every stage's step equals the
// swarm's iteration. Everything that pairs stage files or
// states relies on that one number: `skipswarm eval`/`export` and a
// daemon's resume refuse a set whose stages' steps differ, checkpoint
// generations and copies are keyed by it, a joiner's and a stage move's
// state are checked against the entry with it, and the learning-rate
// schedule is read at it. A restored stage therefore passes the iterations
// between the copy and its entry as iterations without an update
// (ApplyUpdate with 0 visits: step + 1, weights and AdamW moments
// untouched) and enters at step == entry. Before, it kept the copy's step
// and lagged the swarm by those iterations for the rest of the run: its
// checkpoints no longer formed a set with the others' (the 10 s stall
// chaos soak's eval refused "stage 1 at step 595 vs 600"), and, from the
// code, a second restore of it would fail (the copy held for iteration I is
// at an older step) and a restart would resume it at its step, not at the
// swarm's iteration.
// Two other answers were weighed. (a) A second number in every checkpoint
// (the swarm iteration beside the step), with eval and resume pairing by
// it: every consumer above would have to learn which number it means, old
// files have one, and the restored stage would run its learning-rate
// schedule behind the others' for good. (b) A swarm-wide rollback to the
// copy's iteration: every live member would have to agree on it and reload
// its own state of that boundary (which it may no longer keep) in a swarm
// with no coordinator, while members come and go, and every healthy stage
// would throw its updates away for the loss of one; the `skipswarm local`
// launcher, which is such a coordinator, does roll back (Note [Local stage
// restore]). With the step advanced, the lost updates are a known,
// reported quantity instead (the log line and the status event name them,
// skipswarm_stage_restore_lost_iterations_total counts them) and the model
// is a valid model of the swarm's iteration: the restored stage trained on
// with the others from its entry on.
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "node/daemon/gossip/gossip_daemon_parts.h"
#include "node/daemon/gossip/join_planning.h"
#include "node/daemon/gossip/orphan_restore.h"

namespace skipswarm::node {

absl::StatusOr<StageSnapshot> GossipDaemon::Parts::SnapshotInIteration(int stage,
                                                                      uint64_t boundary) {
  absl::MutexLock lock(&computes_mu);
  auto it = computes.find(stage);
  if (it == computes.end()) return absl::NotFoundError("stage not hosted");
  StageCompute* c = it->second.get();
  // The step advances in the iteration's update only, so a step still at
  // `boundary` after the export and the digest means neither saw an update.
  if (c->step() != static_cast<int64_t>(boundary)) {
    return absl::FailedPreconditionError(
        absl::StrCat("stage ", stage, " is at step ", c->step(), ", not ", boundary));
  }
  SS_ASSIGN_OR_RETURN(std::string bytes, c->ExportState());
  const uint64_t digest = c->ParamsDigest();
  if (c->step() != static_cast<int64_t>(boundary)) {
    return absl::FailedPreconditionError(
        absl::StrCat("stage ", stage, "'s update of iteration ", boundary, " ran meanwhile"));
  }
  return StageSnapshot{std::move(bytes), digest};
}

absl::StatusOr<bool> GossipDaemon::Parts::EnterFromPeerCopies(const std::vector<int>& orphaned,
                                                              int* missing) {
  const NodeDaemonOptions& o = base();
  const std::vector<int> stages = Stages();
  const membership::View view = RoutedView();
  // Note [Newest state wins] (orphan_restore.h): our own state competes
  // with the peers' copies.
  OrphanRestorePlan plan(orphaned);
  for (int s : orphaned) plan.AddOwn(s, computes.at(s)->step());
  std::optional<uint64_t> swarm_at;
  for (const membership::MemberInfo* m : view.Live()) {
    if (m->id == self) continue;
    absl::StatusOr<DaemonEndpoints> e = EndpointsOf(*m);
    if (!e.ok()) continue;
    const StateSource source(e->state, m->id);
    absl::StatusOr<std::vector<std::pair<int, uint64_t>>> held =
        QueryHeldCopies(source, credentials, absl::Seconds(2));
    if (held.ok()) plan.AddHeld(source, *held);
    if (!m->stages.empty()) {
      absl::StatusOr<uint64_t> at = QuerySourceIteration(source, credentials, absl::Seconds(2));
      if (at.ok()) swarm_at = std::max(swarm_at.value_or(0), *at);
    }
  }
  if (std::optional<int> none = plan.Missing(); none.has_value()) {
    if (missing != nullptr) *missing = *none;
    return false;
  }
  const std::map<int, OrphanRestore>& copies = plan.stages();
  const uint64_t newest = plan.Newest();
  // The newest iteration any replica is in (Note [Restore from peer copies]
  // on relays one iteration apart).
  const uint64_t entry = std::max(newest, swarm_at.value_or(newest));
  if (entry >= static_cast<uint64_t>(o.iterations)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the swarm is at iteration ", entry, " of ", o.iterations, "; nothing left to join"));
  }
  // Frames of `entry` routed to us wait for BeginIteration(entry) (Note
  // [Entry iteration]); our replica groups take pushes for it (Note [Entry
  // in the group]).
  if (entry > 0) stack->server()->BeginIteration(entry - 1);
  if (group != nullptr) group->EnterAt(entry);
  // Per stage, in Stages() order: an orphaned stage's copy (none fetched
  // when our own state is the newest), or a live stage's state at `entry`
  // from its replicas (they are in that iteration while the swarm is
  // paused: Note [Snapshot in the iteration]).
  std::vector<absl::StatusOr<FetchedState>> got;
  for (int s : stages) {
    auto c = copies.find(s);
    if (c != copies.end() && c->second.own) {
      FetchedState kept;
      kept.source = "this member's own state";
      got.push_back(std::move(kept));
      continue;
    }
    FetchOptions fo;
    fo.self = self;
    fo.swarm_id = gossip->swarm_id();
    fo.credentials = credentials;
    fo.stage = s;
    fo.deadline = absl::Seconds(30);
    fo.max_bytes = StateBytesBound(static_cast<uint64_t>(computes.at(s)->num_params()));
    fo.cancelled = [this] { return StopRequested(); };  // Note [Stopping while joining]
    fo.iteration = c != copies.end() ? c->second.iteration : entry;
    got.push_back(FetchStageState(
        c != copies.end() ? c->second.holders : StateSources(RoutedView(), self, s), fo));
    if (!got.back().ok()) {
      return absl::Status(got.back().status().code(),
                          absl::StrCat("stage ", s, " (",
                                       c != copies.end() ? "a peer's copy" : "a live replica",
                                       "): ", got.back().status().message()));
    }
  }
  std::vector<std::string> lines;
  size_t bytes = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const int s = stages[i];
    const FetchedState& fetched = *got[i];
    auto c = copies.find(s);
    const uint64_t from = c != copies.end() ? c->second.iteration : entry;
    if (c == copies.end()) {
      SS_ASSIGN_OR_RETURN(int64_t step, computes[s]->ImportState(fetched.bytes));
      // A live stage: its replicas' state (digest) at the entry boundary.
      if (static_cast<uint64_t>(step) != entry ||
          computes[s]->ParamsDigest() != fetched.params_digest) {
        return absl::DataLossError(absl::StrCat("the state of stage ", s, " from ",
                                                fetched.source, " is at step ", step,
                                                " or its digest differs; wanted boundary ",
                                                entry));
      }
      bytes += fetched.bytes.size();
      continue;
    }
    if (!c->second.own) {
      SS_ASSIGN_OR_RETURN(int64_t step, computes[s]->ImportState(fetched.bytes));
      if (static_cast<uint64_t>(step) != from) {
        return absl::DataLossError(absl::StrCat("the copy of stage ", s, " held for iteration ",
                                                from, " is at step ", step));
      }
    } else if (computes[s]->step() != static_cast<int64_t>(from)) {
      return absl::InternalError(absl::StrCat("stage ", s, "'s own state moved from step ", from,
                                              " to ", computes[s]->step(), " while restoring"));
    }
    // Note [Restored step]: the iterations the stage missed pass without an
    // update, so it enters at step == entry like every other stage.
    if (entry > from) {
      const std::vector<float> nothing(static_cast<size_t>(computes[s]->num_params()), 0.f);
      for (uint64_t it = from; it < entry; ++it) {
        SS_RETURN_IF_ERROR(computes[s]->ApplyUpdate(nothing, 0).status());
      }
    }
    if (computes[s]->step() != static_cast<int64_t>(entry)) {
      return absl::InternalError(absl::StrCat("stage ", s, " restored at step ",
                                              computes[s]->step(), " for entry ", entry));
    }
    bytes += fetched.bytes.size();
    metrics.Add("skipswarm_stage_restores_total", 1);
    metrics.Add("skipswarm_stage_restore_lost_iterations_total",
                static_cast<double>(entry - from));
    const std::string origin =
        c->second.own
            ? absl::StrCat("kept its own state of iteration ", from,
                           " (newer than or as new as every peer's copy)")
            : absl::StrCat("restored from the copy of iteration ", from, " held by ",
                           fetched.source, " (", fetched.bytes.size(), " bytes)");
    lines.push_back(absl::StrCat("stage ", s, " had no live replica: ", origin,
                                 "; entering at iteration ", entry, ": the stage lost ",
                                 entry - from, " iterations of updates (its step advanced to ",
                                 entry, ")"));
  }
  SS_RETURN_IF_ERROR(gossip->membership()->UpdateLocalRecord([&](proto::NodeRecord* r) {
    r->clear_stages();
    for (int s : stages) r->add_stages(static_cast<uint32_t>(s));
    r->set_iteration(entry);
    r->set_entering(false);  // the state is loaded (Note [Routed once ready])
  }));
  SS_ASSIGN_OR_RETURN(int reached, gossip->Announce(absl::Seconds(5)));
  {
    absl::MutexLock lock(&mu);
    timeline.announced = timeline.first_chunk = timeline.state_loaded = clock->SteadyNow();
    timeline.entry = entry;
    timeline.entry_attempts = 1;
    timeline.state_bytes = bytes;
    timeline.streams = got.front()->streams;
    timeline.sources_tried = got.front()->sources_tried;
    timeline.source = got.front()->source;
  }
  start_iteration = static_cast<int64_t>(entry);
  members->SetIteration(entry);
  state->OnBoundary(entry, Digests());
  for (const std::string& line : lines) {
    const std::string told = absl::StrCat(line, " (announced to ", reached, " members)");
    LOG(WARNING) << o.name << ": " << told;
    std::printf("%s\n", told.c_str());
    status->AddEvent("restore", told);
  }
  std::fflush(stdout);
  if (options.after_stage_restore) options.after_stage_restore(entry);
  return true;
}

}  // namespace skipswarm::node
