// GossipDaemon, stage rebalancing (Note [Stage moves] in
// training_members.h; the rule: Note [Stage rebalancing] in
// scheduler/allocation.h). A relay that the rule picks:
//   1. at a boundary, picks its switch boundary `at` (>= 2 iterations and
//      ~0.5 s ahead, like a joiner's entry), re-signs its record with the
//      new stage, entry `at` and `entering` (Note [Routed once ready]: no
//      micro-batch of the new stage until its state is loaded), Announces
//      it, and asks a replica of the new stage for its state at `at` (a
//      worker thread: the trainer goes on with the old stage meanwhile);
//   2. asks the trainer to stop after iteration at - 1 (its in-flight work
//      of the old stage is done then: the server quiesces at every
//      boundary);
//   3. swaps compute, StageServer and trainer for the new stage, loads the
//      fetched state, re-signs without `entering` (Announced) and trains
//      from `at` (averaging with its new replicas at once, routed from
//      at + 1 and the data nodes' first plan with its ready record).
#include <glog/logging.h>

#include <cmath>

#include "absl/strings/str_format.h"
#include "model/memory_estimate.h"
#include "node/daemon/gossip/gossip_daemon_parts.h"
#include "node/daemon/gossip/join_planning.h"

namespace skipswarm::node {
namespace {

// As a joiner's entry margin: announcing and registering the state request
// must fit before the switch.
constexpr absl::Duration kMoveMargin = absl::Milliseconds(500);
// As a joiner's: gossip carries the ready record to whoever this misses.
constexpr absl::Duration kReadyAnnounceTimeout = absl::Seconds(2);

}  // namespace

void GossipDaemon::Parts::StepMove(uint64_t done) {
  const NodeDaemonOptions& o = base();
  const uint64_t next = done + 1;
  {
    absl::MutexLock lock(&mu);
    if (move != nullptr && !draining) {
      if (!move->stop_requested && done + 2 == move->at) {
        // NodeTrainer decides whether to go on before this callback, so a
        // stop asked now ends the segment after the next iteration: at - 1.
        move->stop_requested = true;
        stack->trainer()->Stop();
      }
      return;
    }
    if (draining || volunteer_paused) return;  // no new move while leaving or paused
  }
  if (options.rebalance_every <= 0 || next % options.rebalance_every != 0) return;
  const std::vector<int> stages = Stages();
  if (stages.size() != 1 || stages.front() == 0) return;  // data nodes never move
  scheduler::ModelShape shape;
  shape.num_stages = o.model.model.num_stages;
  shape.layers_per_stage = std::max(1, o.model.model.num_layers / shape.num_stages);
  shape.samples_per_mb = o.model.samples_per_mb;
  const membership::View view = gossip->membership()->GetView();
  absl::StatusOr<std::optional<OwnMove>> own =
      ChooseOwnMove(view, self, shape, next, options.rebalance_min_gain);
  if (!own.ok()) {
    LOG(INFO) << o.name << ": no rebalancing check now: " << own.status();
    return;
  }
  if (!own->has_value()) return;
  const OwnMove m = **own;
  // The switch: two iterations ahead at least, ~0.5 s more when short.
  int lead = 2;
  const uint64_t trained = next - static_cast<uint64_t>(start_iteration);
  if (trained > 0) {
    const absl::Duration per_iteration = (clock->SteadyNow() - run_started) / trained;
    if (per_iteration > absl::ZeroDuration()) {
      lead = std::max(lead, 1 + static_cast<int>(std::ceil(
                                    absl::FDivDuration(kMoveMargin, per_iteration))));
    }
  }
  const uint64_t at = next + static_cast<uint64_t>(lead);
  if (at + 1 >= static_cast<uint64_t>(o.iterations)) return;
  LOG(INFO) << o.name << ": rebalancing: moving from stage " << m.from << " to stage " << m.to
            << " at iteration " << at << " (bottleneck throughput x"
            << absl::StrFormat("%.2f", m.gain) << ")";
  metrics.Add("skipswarm_stage_moves_total", 1);
  auto pending = std::make_unique<PendingMove>();
  pending->from = m.from;
  pending->to = m.to;
  pending->at = at;
  PendingMove* raw = pending.get();
  {
    absl::MutexLock lock(&mu);
    move = std::move(pending);
  }
  // Before the record names the new stage (the worker re-signs it): from
  // now on a pause checks that stage too (Note [Hosted stages snapshot]).
  hosted.BeginMove(m.to);
  raw->worker = std::thread([this, raw] {
    absl::StatusOr<FetchedState> got = [&]() -> absl::StatusOr<FetchedState> {
      SS_RETURN_IF_ERROR(gossip->membership()->UpdateLocalRecord([&](proto::NodeRecord* r) {
        r->clear_stages();
        r->add_stages(static_cast<uint32_t>(raw->to));
        r->set_iteration(raw->at);
        // Note [Routed once ready]: routed in the new stage only once its
        // state is loaded (SwitchStage); in the old one until `at`.
        r->set_entering(true);
      }));
      SS_ASSIGN_OR_RETURN(int reached, gossip->Announce(absl::Seconds(5)));
      (void)reached;
      FetchOptions fo;
      fo.self = self;
      fo.swarm_id = gossip->swarm_id();
      fo.credentials = credentials;
      fo.stage = raw->to;
      fo.iteration = raw->at;
      fo.deadline = base().startup_timeout;
      // The new stage's compute is made after the fetch; its size comes
      // from the model config.
      fo.max_bytes = StateBytesBound(static_cast<uint64_t>(
          model::EstimateStageMemory(base().model.model, raw->to, {}).parameters));
      return FetchStageState(StateSources(RoutedView(), self, raw->to), fo);
    }();
    raw->state = std::move(got);
    raw->fetched.Notify();
  });
}

absl::Status GossipDaemon::Parts::SwitchStage() {
  const NodeDaemonOptions& o = base();
  PendingMove* m = nullptr;
  {
    absl::MutexLock lock(&mu);
    m = move.get();
  }
  if (!m->fetched.WaitForNotificationWithTimeout(o.startup_timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("stage move: no state of stage ", m->to,
                                                    " within ", absl::FormatDuration(o.startup_timeout)));
  }
  m->worker.join();
  if (!m->state.ok()) {
    // Our record already names the new stage from `at`: we cannot go back
    // to the old one consistently, so we stop (the others see us leave).
    return absl::Status(m->state.status().code(),
                        absl::StrCat("stage move to ", m->to, " failed: ",
                                     m->state.status().message()));
  }
  // The old stage's work is done (the trainer stopped after at - 1's
  // update; the server quiesced): out with it.
  ReplaceStack(nullptr);  // detaches the server first
  absl::Status added;
  {
    absl::MutexLock lock(&computes_mu);  // Note [Snapshot in the iteration]
    probes.erase(m->from);
    computes.erase(m->from);
    added = AddCompute(m->to);
  }
  SS_RETURN_IF_ERROR(added);
  SS_ASSIGN_OR_RETURN(int64_t step, computes[m->to]->ImportState(m->state->bytes));
  if (static_cast<uint64_t>(step) != m->at) {
    return absl::DataLossError(
        absl::StrCat("stage move: state at step ", step, ", wanted ", m->at));
  }
  if (computes[m->to]->ParamsDigest() != m->state->params_digest) {
    return absl::DataLossError("stage move: state's digest differs from its source's");
  }
  hosted.FinishMove();  // {m->to}, in one step for the control thread's checks
  status->SetStages(Stages());  // an event on the page
  SS_RETURN_IF_ERROR(BuildServing());
  start_iteration = static_cast<int64_t>(m->at);
  members->SetIteration(m->at);
  state->OnBoundary(m->at, Digests());
  // Note [Routed once ready]: the new StageServer is up and the state
  // loaded (and served, for joiners and later movers): routes may use us.
  SS_RETURN_IF_ERROR(gossip->membership()->UpdateLocalRecord(
      [](proto::NodeRecord* r) { r->set_entering(false); }));
  absl::StatusOr<int> told = gossip->Announce(kReadyAnnounceTimeout);
  if (!told.ok()) {
    LOG(WARNING) << o.name << ": announcing that stage " << m->to
                 << "'s state is loaded: " << told.status() << " (gossip carries it)";
  }
  LOG(INFO) << o.name << ": now hosting stage " << m->to << " from iteration " << m->at << " ("
            << m->state->bytes.size() << " bytes from " << m->state->source << ")";
  absl::MutexLock lock(&mu);
  move.reset();
  return absl::OkStatus();
}

}  // namespace skipswarm::node
