// GossipDaemon, a joiner whose stage has no live replica (Note [Restore
// from peer copies]): it restores the stage from the newest checkpoint
// copy its peers hold (Note [Checkpoint copies] in checkpoint_copies.h)
// and enters at the iteration the swarm is paused in.
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
// the copy's iteration and how many updates the stage lost. Without any
// copy the joiner keeps waiting, and fails at its start-up deadline naming
// the stage.
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
#include <vector>

#include "node/daemon/gossip/gossip_daemon_parts.h"

namespace skipswarm::node {

absl::StatusOr<bool> GossipDaemon::Parts::EnterFromPeerCopy(int stage) {
  const NodeDaemonOptions& o = base();
  const membership::View view = RoutedView();
  bool found = false;
  uint64_t newest = 0;
  std::vector<StateSource> holders;
  std::optional<uint64_t> swarm_at;
  for (const membership::MemberInfo* m : view.Live()) {
    if (m->id == self) continue;
    absl::StatusOr<DaemonEndpoints> e = EndpointsOf(*m);
    if (!e.ok()) continue;
    const StateSource source(e->state, m->id);
    absl::StatusOr<std::vector<std::pair<int, uint64_t>>> copies =
        QueryHeldCopies(source, credentials, absl::Seconds(2));
    if (copies.ok()) {
      for (const auto& [s, it] : *copies) {
        if (s != stage) continue;
        if (!found || it > newest) {
          found = true;
          newest = it;
          holders.clear();
        }
        if (it == newest) holders.push_back(source);
      }
    }
    if (!m->stages.empty()) {
      absl::StatusOr<uint64_t> at = QuerySourceIteration(source, credentials, absl::Seconds(2));
      if (at.ok()) swarm_at = std::max(swarm_at.value_or(0), *at);
    }
  }
  if (!found) return false;
  const uint64_t entry = std::max(newest, swarm_at.value_or(newest));
  if (entry >= static_cast<uint64_t>(o.iterations)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the swarm is at iteration ", entry, " of ", o.iterations, "; nothing left to join"));
  }
  FetchOptions fo;
  fo.self = self;
  fo.swarm_id = gossip->swarm_id();
  fo.credentials = credentials;
  fo.stage = stage;
  fo.iteration = newest;
  fo.deadline = absl::Seconds(30);
  fo.max_bytes = StateBytesBound(static_cast<uint64_t>(computes.at(stage)->num_params()));
  fo.cancelled = [this] { return StopRequested(); };  // Note [Stopping while joining]
  SS_ASSIGN_OR_RETURN(FetchedState fetched, FetchStageState(holders, fo));
  SS_ASSIGN_OR_RETURN(int64_t step, computes[stage]->ImportState(fetched.bytes));
  if (static_cast<uint64_t>(step) != newest) {
    return absl::DataLossError(absl::StrCat("the copy of stage ", stage, " held for iteration ",
                                            newest, " is at step ", step));
  }
  // Note [Restored step]: the iterations the stage missed pass without an
  // update, so it enters at step == entry like every other stage.
  if (entry > newest) {
    const std::vector<float> nothing(static_cast<size_t>(computes[stage]->num_params()), 0.f);
    for (uint64_t i = newest; i < entry; ++i) {
      SS_RETURN_IF_ERROR(computes[stage]->ApplyUpdate(nothing, 0).status());
    }
  }
  if (computes[stage]->step() != static_cast<int64_t>(entry)) {
    return absl::InternalError(absl::StrCat("stage ", stage, " restored at step ",
                                            computes[stage]->step(), " for entry ", entry));
  }
  // Frames of `entry` routed to us wait for BeginIteration(entry) (Note
  // [Entry iteration]).
  if (entry > 0) stack->server()->BeginIteration(entry - 1);
  SS_RETURN_IF_ERROR(gossip->membership()->UpdateLocalRecord([&](proto::NodeRecord* r) {
    r->clear_stages();
    r->add_stages(static_cast<uint32_t>(stage));
    r->set_iteration(entry);
    r->set_entering(false);  // the state is loaded (Note [Routed once ready])
  }));
  SS_ASSIGN_OR_RETURN(int reached, gossip->Announce(absl::Seconds(5)));
  {
    absl::MutexLock lock(&mu);
    timeline.announced = timeline.first_chunk = timeline.state_loaded = clock->SteadyNow();
    timeline.entry = entry;
    timeline.entry_attempts = 1;
    timeline.state_bytes = fetched.bytes.size();
    timeline.streams = fetched.streams;
    timeline.sources_tried = fetched.sources_tried;
    timeline.source = fetched.source;
  }
  start_iteration = static_cast<int64_t>(entry);
  members->SetIteration(entry);
  state->OnBoundary(entry, Digests());
  metrics.Add("skipswarm_stage_restores_total", 1);
  metrics.Add("skipswarm_stage_restore_lost_iterations_total", static_cast<double>(entry - newest));
  const std::string line = absl::StrCat(
      "stage ", stage, " had no live replica: restored from the copy of iteration ", newest,
      " held by ", fetched.source, " (", fetched.bytes.size(), " bytes); entering at iteration ",
      entry, " (announced to ", reached, " members): the stage lost ", entry - newest,
      " iterations of updates (its step advanced to ", entry, ")");
  LOG(WARNING) << o.name << ": " << line;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  status->AddEvent("restore", line);
  return true;
}

}  // namespace skipswarm::node
