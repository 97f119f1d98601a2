#include "node/train/node_trainer.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backoff.h"
#include "common/lifetime_guard.h"
#include "common/node_id.h"
#include "node/train/data_node_wait.h"
#include "node/train/resync_source.h"
#include "node/train/upload_budget.h"

namespace skipswarm::node {
namespace {

// Note [Idle outer contributions] (node_trainer.h): an outer step's mean is
// over the replicas that trained (one visit each), not every contributor.
int OuterWeight(const ReduceResult& r) { return static_cast<int>(r.visits); }

// StageStep::avg_bytes of a round: what this replica's pushes carried where
// they crossed a wire, else (in process) the codec's size of its
// contribution, `own`; 0 for a round this replica had alone, which sends
// nothing anywhere.
int64_t AveragedBytes(const absl::StatusOr<ReduceResult>& r, int64_t own) {
  if (!r.ok()) return own;
  if (r->sent_bytes > 0) return r->sent_bytes;
  return r->contributors <= 1 && r->left_out.empty() ? 0 : own;
}

// Note [Lone outer replica]: what the group's round answers a replica that
// is the only one: its own contribution (RobustSum of one part is that
// part), its visits, and its digest, which agrees with itself.
ReduceResult LocalRound(GradientContribution c) {
  ReduceResult r;
  r.sum = std::move(c.flat);
  r.visits = c.visits;
  r.contributors = 1;
  r.digests_agree = true;
  r.digests.emplace_back(c.from, c.params_digest);
  return r;
}

}  // namespace

// Every callback that reaches it is wrapped by `guard`: ~NodeTrainer closes
// the guard, which waits for a callback in progress (the whole chain it runs
// inline, on_iteration included) and turns later ones into no-ops; so
// nothing borrowed is touched once the destructor returned.
struct NodeTrainer::State {
  StageServer* server;
  std::map<int, StageCompute*> stages;
  DataNodeDriver* driver;
  GroupComm* group;
  common::Clock* clock;

  absl::Mutex mu;
  // Per hosted stage: its state is the one at the start of this iteration
  // (its update of the one before is applied). What the provider serves.
  std::map<int, uint64_t> at_start_of ABSL_GUARDED_BY(mu);
  bool stopped ABSL_GUARDED_BY(mu) = false;
  common::LifetimeGuard guard;
  bool stop_requested ABSL_GUARDED_BY(mu) = false;
  // Note [Stop point]: the iteration in progress, as Finish decides it.
  uint64_t current ABSL_GUARDED_BY(mu) = 0;
  // Note [Non-finite steps]: consecutive skipped steps per stage, and the
  // error that ends the run once a stage reaches kMaxNonFiniteSteps.
  std::map<int, int> nonfinite_steps ABSL_GUARDED_BY(mu);
  absl::Status fatal ABSL_GUARDED_BY(mu);
  ResyncChecks resync_checks;  // Note [Checked re-sync] (resync_source.h)
  common::LogLimiter log_limit ABSL_GUARDED_BY(mu){absl::Seconds(10)};
  // server->stats().rerouted at the previous report (rerouted_here).
  int64_t rerouted_reported ABSL_GUARDED_BY(mu) = 0;
  uint64_t end = 0;
  IterationCallback on_iteration;
  DoneCallback on_done;
  IterationHook before_iteration;
  // Relays only (no driver): Note [Relay without a data node].
  std::unique_ptr<DataNodeWait> data_wait;
  // Note [Overlapped sync]: per stage, the outer round in flight.
  struct OuterRound {
    uint64_t iteration = 0;  // the sync that started it
    uint64_t mine = 0;       // this replica's anchor digest
    int64_t bytes = 0;       // the codec's size of its contribution
    std::optional<absl::StatusOr<ReduceResult>> result;
    absl::AnyInvocable<void()> waiter;  // a sync point waiting for it
  };
  std::map<int, OuterRound> rounds ABSL_GUARDED_BY(mu);
  // Note [Late members]: per stage, the members' uplink figures from the
  // last sync's result (this replica's own among them), and when the last
  // two syncs started; thinned: the last sync sent less than all its
  // blocks (Note [Thinned uploads]).
  struct SyncPace {
    std::vector<uint64_t> figures;
    uint64_t own = 0;
    std::optional<absl::Duration> last_start;
    absl::Duration gap = absl::ZeroDuration();
    bool thinned = false;
  };
  std::map<int, SyncPace> pace ABSL_GUARDED_BY(mu);
  // A sync of `stage` starts now, `waited` after its sync point was
  // reached (Note [Sync wait]): records its start and returns the share of
  // its blocks it sends (Note [Thinned uploads], upload_budget.h).
  double StartSync(int stage, const AveragingPlan& plan, absl::Duration waited);
  // The deadline of a sync starting now whose contribution takes `bytes`.
  absl::Duration CloseAfter(int stage, const AveragingPlan& plan, int64_t bytes);
  void RecordFigures(int stage, const ReduceResult& r) {
    absl::MutexLock lock(&mu);
    SyncPace& p = pace[stage];
    p.figures.clear();
    p.own = 0;
    for (const auto& [id, b] : r.bandwidths) {
      p.figures.push_back(b);
      if (id == server->self()) p.own = b;
    }
  }

  bool Stopped() {
    absl::MutexLock lock(&mu);
    return stopped;
  }
  bool StopRequested() {
    absl::MutexLock lock(&mu);
    return stop_requested;
  }
  void Start(uint64_t iteration);
  void StartWork(uint64_t iteration);
  void AfterData(uint64_t iteration, std::optional<IterationReport> data);
  void UpdateStage(NodeIterationReport report, std::map<int, StageCompute*>::iterator it);
  using StageIt = std::map<int, StageCompute*>::iterator;
  // Note [Group of one]: the update of a stage with no other replica.
  void SoleStage(NodeIterationReport report, StageIt it);
  // What a sync point does next (Note [Overlapped sync]).
  using StepThen = absl::AnyInvocable<void(NodeIterationReport, StageIt, StageStep)>;
  // Note [Outer steps], H > 1: the local step, and every H-th step the sync.
  // `sole`: GroupComm::SoleReplica said so (Note [Lone outer replica]).
  void OuterStage(NodeIterationReport report, StageIt it, AveragingPlan plan, bool sole);
  // The sync of Note [Outer steps], waited for.
  void SyncNow(NodeIterationReport report, StageIt it, StageStep step, bool sole);
  // Note [Overlapped sync]: applies the round in flight once its result is
  // in (waiting for it if need be), then `then`.
  void AfterRound(NodeIterationReport report, StageIt it, StageStep step, StepThen then);
  // Note [Overlapped sync]: starts this sync's round and moves on.
  void StartRound(NodeIterationReport report, StageIt it, StageStep step, bool sole);
  // Note [Sync wait]: names a sync point's wait for its round once it is
  // more than a tenth of the H steps the round had (rate-limited).
  void WarnSlowRound(uint64_t iteration, int stage, absl::Duration waited);
  // `digest`: false for a group of one (Note [Group of one]), whose
  // digest nobody compares; digest_after stays 0.
  void Next(NodeIterationReport report, std::map<int, StageCompute*>::iterator it,
            StageStep step, bool digest = true) {
    if (digest) step.digest_after = it->second->ParamsDigest();
    report.stages[it->first] = step;
    MarkAt(it->first, report.iteration + 1);
    UpdateStage(std::move(report), std::next(it));
  }
  // The group's verdicts on one reduce, shared by the plain and the outer
  // step: records them in `step`, names every refused part (Note [Robust
  // averaging]) and, when the replicas' digests disagree and a source is
  // known, hands the iteration to Resync (returns nullopt: the caller stops,
  // `report` and `step` were moved). Otherwise returns whether the reduced
  // sum is finite, counted by CountNonFinite.
  // A re-sync then goes on with `then` (null: the next stage).
  std::optional<bool> AcceptReduce(NodeIterationReport& report,
                                   std::map<int, StageCompute*>::iterator it, StageStep& step,
                                   const ReduceResult& r, uint64_t mine, bool outer,
                                   StepThen then = nullptr);
  // Note [Digest re-sync]: replaces this stage's state with `source`'s,
  // then `then` (null: the next stage).
  void Resync(NodeIterationReport report, std::map<int, StageCompute*>::iterator it,
              StageStep step, common::NodeId source, StepThen then = nullptr);
  void Finish(NodeIterationReport report);
  void EndCancelled(uint64_t iteration);
  // Per-iteration errors: at most one line per 10 s (common::LogLimiter).
  bool AllowLog(int64_t* held) {
    absl::MutexLock lock(&mu);
    return log_limit.Allow(clock->SteadyNow(), held);
  }
  void CountNonFinite(uint64_t iteration, int stage, bool nonfinite) {
    absl::MutexLock lock(&mu);
    int& n = nonfinite_steps[stage];
    n = nonfinite ? n + 1 : 0;
    if (!nonfinite) return;
    LOG(ERROR) << "iteration " << iteration << " stage " << stage
               << ": the averaged gradient is not finite; step skipped (" << n << " in a row)";
    if (n >= kMaxNonFiniteSteps && fatal.ok()) {
      fatal = absl::DataLossError(absl::StrCat(
          "stage ", stage, ": non-finite gradients in ", n, " consecutive iterations (last ",
          iteration, "); stopping instead of training on NaN (try a lower --lr or --grad_clip)"));
    }
  }
  void MarkAt(int stage, uint64_t iteration) {
    absl::MutexLock lock(&mu);
    at_start_of[stage] = iteration;
  }
  absl::StatusOr<std::string> ServeState(int stage, uint64_t iteration);
};

absl::StatusOr<std::string> NodeTrainer::State::ServeState(int stage, uint64_t iteration) {
  auto it = stages.find(stage);
  if (it == stages.end()) {
    return absl::NotFoundError(absl::StrCat("stage ", stage, " is not hosted here"));
  }
  {
    absl::MutexLock lock(&mu);
    auto at = at_start_of.find(stage);
    if (at == at_start_of.end() || at->second < iteration) {
      return absl::UnavailableError(absl::StrCat("stage ", stage, " is not at iteration ",
                                                 iteration, " yet"));
    }
    if (at->second > iteration) {
      return absl::FailedPreconditionError(absl::StrCat("stage ", stage, " is past iteration ",
                                                        iteration, " (at ", at->second, ")"));
    }
  }
  // The next update needs the asking replica's gradients, so the state
  // cannot move on while it waits for this answer.
  return it->second->ExportState();
}

// Note [Late members] (sharded_reduce.h): what the round may take before
// the late are closed out. The expected time is the upload of this
// replica's share of the sharded reduce (2 (R-1)/R < 2 times its encoded
// contribution) at the group's median measured uplink (the previous
// sync's figures; unknown before it: the floor alone), so a member several
// times slower than its peers is left out and one as fast is not. With
// overlap the round also has the H steps before anyone waits for it,
// measured as the time between the last two syncs.
absl::Duration NodeTrainer::State::CloseAfter(int stage, const AveragingPlan& plan,
                                              int64_t bytes) {
  if (plan.deadline_factor <= 0) return absl::InfiniteDuration();
  absl::MutexLock lock(&mu);
  SyncPace& p = pace[stage];
  std::vector<uint64_t> known;
  for (uint64_t b : p.figures) {
    if (b > 0) known.push_back(b);
  }
  double expected_s = 0;
  if (!known.empty()) {
    std::sort(known.begin(), known.end());
    expected_s = 2.0 * static_cast<double>(bytes) / static_cast<double>(known[known.size() / 2]);
  }
  absl::Duration d =
      absl::Seconds(std::max(plan.deadline_min_s, plan.deadline_factor * expected_s));
  if (plan.overlap) d += p.gap;
  return d;
}

double NodeTrainer::State::StartSync(int stage, const AveragingPlan& plan,
                                     absl::Duration waited) {
  const absl::Duration now = clock->SteadyNow();
  absl::MutexLock lock(&mu);
  SyncPace& p = pace[stage];
  if (p.last_start.has_value()) p.gap = now - *p.last_start;
  p.last_start = now;
  UploadBudgetInputs in;
  in.own = p.own;
  in.figures = p.figures;
  in.bytes = plan.contribution_bytes;
  if (plan.overlap) in.window = std::max(absl::ZeroDuration(), p.gap - waited);
  in.floor = plan.upload_floor;
  const double keep = UploadFraction(in);
  if ((keep < 1) != p.thinned) {
    p.thinned = keep < 1;
    LOG(INFO) << "stage " << stage << ": "
              << (p.thinned ? absl::StrCat("this replica's outer-sync upload (", in.bytes,
                                           " bytes at ", in.own,
                                           " B/s) would outlast its peers' or the H steps; it "
                                           "sends its largest int8 blocks, ",
                                           absl::SixDigits(keep),
                                           " of them (the rest later, Note [Thinned uploads])")
                            : std::string("this replica's outer syncs send all their blocks "
                                          "again"));
  }
  return keep;
}

void NodeTrainer::State::Start(uint64_t iteration) {
  if (Stopped()) return;
  if (!before_iteration) return StartWork(iteration);
  before_iteration(iteration, guard.Wrap([this, iteration](absl::Status s) {
    if (!s.ok()) {
      LOG(ERROR) << "iteration " << iteration << ": before-iteration step failed: " << s;
    }
    StartWork(iteration);
  }));
}

void NodeTrainer::State::StartWork(uint64_t iteration) {
  if (Stopped()) return;
  if (driver != nullptr) {
    driver->RunIteration(iteration, guard.Wrap([this, iteration](IterationReport r) {
      // Stopped while paused (Note [Paused training]): nothing to average.
      if (absl::IsCancelled(r.status)) return EndCancelled(iteration);
      AfterData(iteration, std::move(r));
    }));
  } else if (data_wait->Ready(iteration, guard.Wrap([this, iteration] {
               if (StopRequested()) return EndCancelled(iteration);
               StartWork(iteration);
             }))) {
    AfterData(iteration, std::nullopt);
  }
}

void NodeTrainer::State::AfterData(uint64_t iteration, std::optional<IterationReport> data) {
  if (Stopped()) return;
  // Note [Stated bounds] (inproc_group.h).
  if (driver != nullptr) {
    group->StateIterationBound(iteration, server->self(), driver->NextIterationBound());
  }
  group->Barrier(iteration, server->self(), driver != nullptr,
                 guard.Wrap([this, iteration, data = std::move(data)](absl::Status s) mutable {
                   if (Stopped()) return;
                   NodeIterationReport report;
                   report.iteration = iteration;
                   report.data = std::move(data);
                   report.status = s;
                   server->EndIteration(
                       iteration, guard.Wrap([this, report = std::move(report)]() mutable {
                         if (Stopped()) return;
                         UpdateStage(std::move(report), stages.begin());
                       }));
                 }));
}

void NodeTrainer::State::UpdateStage(NodeIterationReport report,
                                     std::map<int, StageCompute*>::iterator it) {
  if (it == stages.end()) return Finish(std::move(report));
  StageCompute* compute = it->second;
  const int stage = it->first;
  const AveragingPlan plan = compute->averaging();
  const bool sole = group->SoleReplica(report.iteration, stage, server->self());
  if (plan.outer_every > 1) return OuterStage(std::move(report), it, plan, sole);
  if (sole) return SoleStage(std::move(report), it);
  absl::StatusOr<GradientSum> sum = compute->TakeGradients();
  if (!sum.ok()) {
    report.status = sum.status();
    return Finish(std::move(report));
  }
  GradientContribution c;
  c.from = server->self();
  c.visits = sum->visits;
  int64_t avg_bytes = static_cast<int64_t>(sum->flat.size() * sizeof(float));
  if (plan.lossy) {
    absl::StatusOr<AverageContribution> a = compute->CompressGradients(std::move(sum->flat));
    if (!a.ok()) {
      report.status = a.status();
      compute->ZeroGrad();
      return Finish(std::move(report));
    }
    c.flat = std::move(a->flat);
    c.params_digest = a->digest;
    c.factors = std::move(a->factors);
    avg_bytes = a->bytes;
  } else {
    c.flat = std::move(sum->flat);
    c.params_digest = compute->ParamsDigest();
  }
  const int64_t here = c.visits;
  const uint64_t mine = c.params_digest;
  const uint64_t iteration = report.iteration;
  const absl::Duration since = clock->SteadyNow();  // Note [Sync wait]
  State* self = this;
  group->AllReduce(
      iteration, stage, std::move(c),
      guard.Wrap([self, report = std::move(report), it, here, mine, avg_bytes,
                  since](absl::StatusOr<ReduceResult> r) mutable {
        if (self->Stopped()) return;
        StageCompute* compute = it->second;
        StageStep step;
        step.visits_here = here;
        step.sync_wait = self->clock->SteadyNow() - since;
        // Note [Encoded shards]: what crossed the wire, where one did; a
        // round of one sends nothing.
        step.avg_bytes = AveragedBytes(r, avg_bytes);
        if (!r.ok()) {
          if (int64_t held = 0; self->AllowLog(&held)) {
            LOG(ERROR) << "iteration " << report.iteration << " stage " << it->first
                       << ": replica averaging failed: " << r.status()
                       << (held > 0 ? absl::StrCat(" (", held, " such lines held back)") : "");
          }
          report.status = r.status();
          // No update, but the step still counts the iteration (Note
          // [Restored step] in node/daemon/gossip/gossip_daemon_restore.cc):
          // a round every replica lost keeps them equal and in step with the
          // other stages; one only this replica lost re-syncs by digest.
          absl::StatusOr<UpdateStats> none =
              compute->ApplyUpdate(std::vector<float>(compute->num_params(), 0.f), 0);
          if (!none.ok()) LOG(ERROR) << "stage " << it->first << " update: " << none.status();
        } else {
          const std::optional<bool> finite =
              self->AcceptReduce(report, it, step, *r, mine, /*outer=*/false);
          if (!finite.has_value()) return;  // re-syncing
          // Note [Non-finite steps]: zero visits step nothing on every replica.
          absl::StatusOr<UpdateStats> u =
              *finite ? compute->ApplyUpdate(r->sum, r->visits)
                      : compute->ApplyUpdate(std::vector<float>(r->sum.size(), 0.f), 0);
          if (u.ok()) {
            step.update = *u;
          } else {
            LOG(ERROR) << "stage " << it->first << " update: " << u.status();
            report.status = u.status();
          }
        }
        self->Next(std::move(report), it, step);
      }));
}

// Note [Group of one]: a stage whose group has no other live replica (a
// one-replica layout, or the last replica left after deaths) has nothing
// to average: the reduce would answer with this replica's own sum and
// visits, and the only check that does anything with one part is the
// non-finite one (a sum that is not finite skips the step, Note
// [Non-finite steps]). So the trainer skips the round and the compute
// steps its gradients where they are (StageState::ApplyLocalUpdate): on a
// GPU no gradient crosses to the host and back, and no parameter digest is
// taken, since no replica compares it (digest_after stays 0). The bytes of
// the step are the same as through the round; nothing is averaged or sent
// (avg_bytes 0). The group decides from what it knows at the call
// (GroupComm::SoleReplica); when unsure (a peer's part of the round has
// arrived) it runs the round as before. Outer steps (H > 1): Note [Lone
// outer replica].
void NodeTrainer::State::SoleStage(NodeIterationReport report, StageIt it) {
  StageCompute* compute = it->second;
  StageStep step;
  step.replicas = 1;
  absl::StatusOr<UpdateStats> u = compute->ApplyLocalUpdate();
  if (!u.ok()) {
    LOG(ERROR) << "stage " << it->first << " update: " << u.status();
    report.status = u.status();
  } else {
    step.update = *u;
    step.visits_here = u->visits;
    step.visits_total = u->visits;
    step.skipped_nonfinite = u->nonfinite;
    CountNonFinite(report.iteration, it->first, u->nonfinite);
  }
  Next(std::move(report), it, step, /*digest=*/false);
}

// Note [Lone outer replica]: with H > 1 every inner step is the replica's
// own, so it steps its gradients where they are (ApplyLocalUpdate, the
// same bytes as ApplyUpdate(TakeGradients()), Note [Group of one]) whether
// or not it has peers: no gradient vector per iteration. A replica the
// group says is alone (GroupComm::SoleReplica) also skips what only peers
// need: the digest after each step (digest_after stays 0) and, at a sync,
// the group's round: the round of one would answer with its own
// pseudo-gradient and one visit (zero visits when idle), so LocalRound
// makes that answer here and the outer step is taken as before (the outer
// optimiser is not the identity: a lone replica keeps its Nesterov steps,
// and its anchor and momentum stay what a joiner fetches). The result is
// the round's to the byte (outer_steps_test compares the two paths).
void NodeTrainer::State::OuterStage(NodeIterationReport report, StageIt it, AveragingPlan plan,
                                    bool sole) {
  StageCompute* compute = it->second;
  StageStep step;
  step.replicas = 1;
  // The inner step: this replica's own visit-weighted AdamW step.
  absl::StatusOr<UpdateStats> u = compute->ApplyLocalUpdate();
  if (!u.ok()) {
    LOG(ERROR) << "iteration " << report.iteration << " stage " << it->first
               << " inner step: " << u.status();
    report.status = u.status();
  } else {
    step.visits_here = u->visits;
    step.visits_total = u->visits;
    if (u->nonfinite) {
      // Nothing stepped (the compute cleared the gradients).
      LOG(ERROR) << "iteration " << report.iteration << " stage " << it->first
                 << " inner step: the gradient is not finite; nothing stepped";
    } else {
      step.update = *u;
    }
  }
  const bool sync = compute->step() % plan.outer_every == 0;
  // Note [Digest on demand] (node_trainer.h): between syncs the replicas
  // differ by design and nothing compares them, so no digest is taken.
  if (!plan.overlap) {
    if (!sync) return Next(std::move(report), it, step, /*digest=*/false);
    return SyncNow(std::move(report), it, std::move(step), sole);
  }
  // Note [Overlapped sync]: the last iteration applies the round in flight
  // and syncs in full, so the run ends on the replicas' common anchor.
  const bool last = report.iteration + 1 >= end;
  if (!sync && !last) return Next(std::move(report), it, step, /*digest=*/false);
  State* self = this;
  AfterRound(std::move(report), it, std::move(step),
             [self, sync, last, sole](NodeIterationReport report, StageIt it, StageStep step) {
               if (last && sync) return self->SyncNow(std::move(report), it, std::move(step), sole);
               if (!sync) return self->Next(std::move(report), it, step, /*digest=*/false);
               self->StartRound(std::move(report), it, std::move(step), sole);
             });
}

void NodeTrainer::State::AfterRound(NodeIterationReport report, StageIt it, StageStep step,
                                    StepThen then) {
  std::optional<absl::StatusOr<ReduceResult>> result;
  uint64_t mine = 0;
  int64_t bytes = 0;
  const absl::Duration since = clock->SteadyNow();  // Note [Sync wait]
  {
    absl::MutexLock lock(&mu);
    auto round = rounds.find(it->first);
    if (round != rounds.end() && !round->second.result.has_value()) {
      // Still in flight: the one wait of Note [Overlapped sync].
      round->second.waiter = [this, report = std::move(report), it, step = std::move(step),
                              then = std::move(then), since]() mutable {
        const absl::Duration waited = clock->SteadyNow() - since;
        step.sync_wait += waited;
        WarnSlowRound(report.iteration, it->first, waited);
        AfterRound(std::move(report), it, std::move(step), std::move(then));
      };
      return;
    }
    if (round != rounds.end()) {
      result = std::move(round->second.result);
      mine = round->second.mine;
      bytes = round->second.bytes;
      rounds.erase(round);
    }
  }
  if (!result.has_value()) return then(std::move(report), it, std::move(step));
  step.avg_bytes += AveragedBytes(*result, bytes);
  if (!result->ok()) {
    if (int64_t held = 0; AllowLog(&held)) {
      LOG(ERROR) << "iteration " << report.iteration << " stage " << it->first
                 << ": overlapped outer sync failed, keeping the local parameters: "
                 << result->status()
                 << (held > 0 ? absl::StrCat(" (", held, " such lines held back)") : "");
    }
    report.status = result->status();
    return then(std::move(report), it, std::move(step));
  }
  const ReduceResult& r = **result;
  RecordFigures(it->first, r);
  // Shared with the re-sync path: AcceptReduce consumes `then` only there.
  auto shared = std::make_shared<StepThen>(std::move(then));
  const std::optional<bool> finite =
      AcceptReduce(report, it, step, r, mine, /*outer=*/true,
                   [shared](NodeIterationReport report, StageIt it, StageStep step) {
                     (*shared)(std::move(report), it, std::move(step));
                   });
  if (!finite.has_value()) return;  // re-syncing, then `then`
  absl::StatusOr<UpdateStats> o =
      it->second->ApplyOuterStep(r.sum, *finite ? OuterWeight(r) : 0);
  if (o.ok()) {
    step.outer_step = o->stepped;
  } else {
    LOG(ERROR) << "stage " << it->first << " outer step: " << o.status();
    report.status = o.status();
  }
  (*shared)(std::move(report), it, std::move(step));
}

void NodeTrainer::State::WarnSlowRound(uint64_t iteration, int stage, absl::Duration waited) {
  absl::Duration steps;
  {
    absl::MutexLock lock(&mu);
    steps = pace[stage].gap;
  }
  if (steps <= absl::ZeroDuration() || waited * 10 <= steps) return;
  if (int64_t held = 0; AllowLog(&held)) {
    LOG(WARNING) << "iteration " << iteration << " stage " << stage << ": the overlapped outer "
                 << "sync waited " << waited << " for its round after " << steps
                 << " of H steps: a replica's averaging upload takes longer than the H steps' "
                 << "compute; a larger --outer_every or a smaller --avg_codec hides it"
                 << (held > 0 ? absl::StrCat(" (", held, " such lines held back)") : "");
  }
}

void NodeTrainer::State::StartRound(NodeIterationReport report, StageIt it, StageStep step,
                                    bool sole) {
  // Note [Thinned uploads]: a lone round sends nothing.
  const double keep = StartSync(it->first, it->second->averaging(), step.sync_wait);
  it->second->SetUploadFraction(sole ? 1.0 : keep);
  absl::StatusOr<AverageContribution> a = it->second->TakePseudoGradient();
  if (!a.ok()) {
    report.status = a.status();
    return Next(std::move(report), it, step);
  }
  GradientContribution c;
  c.from = server->self();
  c.visits = a->idle ? 0 : 1;  // as in SyncNow
  c.flat = std::move(a->flat);
  c.params_digest = a->digest;
  c.factors = std::move(a->factors);
  c.close_after = CloseAfter(it->first, it->second->averaging(), a->bytes);
  const int stage = it->first;
  const uint64_t iteration = report.iteration;
  {
    absl::MutexLock lock(&mu);
    OuterRound& round = rounds[stage];
    round = OuterRound();
    round.iteration = iteration;
    round.mine = a->digest;
    round.bytes = a->bytes;
    if (sole) round.result = LocalRound(std::move(c));  // Note [Lone outer replica]
  }
  if (sole) return Next(std::move(report), it, step, /*digest=*/false);
  State* self = this;
  group->AllReduce(iteration, stage, std::move(c),
                   guard.Wrap([self, stage, iteration](absl::StatusOr<ReduceResult> r) mutable {
                     absl::AnyInvocable<void()> waiter;
                     {
                       absl::MutexLock lock(&self->mu);
                       auto round = self->rounds.find(stage);
                       if (round == self->rounds.end() || round->second.iteration != iteration) {
                         return;
                       }
                       round->second.result = std::move(r);
                       waiter = std::move(round->second.waiter);
                     }
                     if (waiter && !self->Stopped()) waiter();
                   }));
  Next(std::move(report), it, step);
}

void NodeTrainer::State::SyncNow(NodeIterationReport report, StageIt it, StageStep step,
                                 bool sole) {
  StageCompute* compute = it->second;
  // Note [Thinned uploads]: a lone round sends nothing.
  const double keep = StartSync(it->first, compute->averaging(), step.sync_wait);
  compute->SetUploadFraction(sole ? 1.0 : keep);
  absl::StatusOr<AverageContribution> a = compute->TakePseudoGradient();
  if (!a.ok()) {
    report.status = a.status();
    return Next(std::move(report), it, step);
  }
  GradientContribution c;
  c.from = server->self();
  // Every replica's pseudo-gradient weighs alike (ApplyOuterStep takes the
  // mean over the visits): one visit each, so Note [Robust averaging]
  // compares and re-weights them as equals (a replica without visits in
  // this iteration still moved since the anchor). An idle one (Note [Idle
  // outer contributions]) weighs nothing: it sends zeros and no visit.
  c.visits = a->idle ? 0 : 1;
  c.flat = std::move(a->flat);
  c.params_digest = a->digest;
  c.factors = std::move(a->factors);
  c.close_after = CloseAfter(it->first, compute->averaging(), a->bytes);
  const int64_t before = step.avg_bytes;  // a round applied just before (overlap)
  step.avg_bytes = before + a->bytes;
  const uint64_t mine = c.params_digest;
  const absl::Duration since = clock->SteadyNow();  // Note [Sync wait]
  State* self = this;
  const uint64_t iteration = report.iteration;
  ReduceDone done = guard.Wrap([self, report = std::move(report), it, step, mine, before, since,
                                sole](absl::StatusOr<ReduceResult> r) mutable {
    if (self->Stopped()) return;
    StageCompute* compute = it->second;
    step.sync_wait += self->clock->SteadyNow() - since;
    if (!r.ok()) {
      if (int64_t held = 0; self->AllowLog(&held)) {
        LOG(ERROR) << "iteration " << report.iteration << " stage " << it->first
                   << ": outer sync failed, keeping the local parameters: " << r.status()
                   << (held > 0 ? absl::StrCat(" (", held, " such lines held back)") : "");
      }
      report.status = r.status();
      return self->Next(std::move(report), it, step);
    }
    // Note [Encoded shards]; a round of one sends nothing.
    step.avg_bytes = before + AveragedBytes(r, step.avg_bytes - before);
    self->RecordFigures(it->first, *r);
    // visits_total counts the contributors that trained (one visit each).
    const std::optional<bool> finite =
        self->AcceptReduce(report, it, step, *r, mine, /*outer=*/true);
    if (!finite.has_value()) return;  // re-syncing
    absl::StatusOr<UpdateStats> o = compute->ApplyOuterStep(r->sum, *finite ? OuterWeight(*r) : 0);
    if (o.ok()) {
      step.outer_step = o->stepped;
    } else {
      LOG(ERROR) << "stage " << it->first << " outer step: " << o.status();
      report.status = o.status();
    }
    self->Next(std::move(report), it, step, /*digest=*/!sole);
  });
  // Note [Lone outer replica]: the round of one, answered here.
  if (sole) return done(LocalRound(std::move(c)));
  group->AllReduce(iteration, it->first, std::move(c), std::move(done));
}

std::optional<bool> NodeTrainer::State::AcceptReduce(NodeIterationReport& report,
                                                     std::map<int, StageCompute*>::iterator it,
                                                     StageStep& step, const ReduceResult& r,
                                                     uint64_t mine, bool outer, StepThen then) {
  step.visits_total = r.visits;
  step.replicas = r.contributors;
  step.digests_agree = r.digests_agree;
  step.digests = r.digests;
  step.digest_before = mine;
  step.refused_parts = r.refused_parts;
  // Note [Late members].
  step.sync_late = r.late;
  step.sync_left_out = r.late ? 0 : static_cast<int>(r.left_out.size());
  if (r.late) {
    LOG(WARNING) << "iteration " << report.iteration << " stage " << it->first
                 << ": this replica's pseudo-gradient missed its round's deadline; applying "
                 << "the average of the " << r.contributors << " that made it";
  } else if (!r.left_out.empty()) {
    LOG(WARNING) << "iteration " << report.iteration << " stage " << it->first << ": "
                 << r.left_out.size() << " late replica(s) left out of the outer sync";
  }
  // A replica left out takes the others' step only from their anchor.
  const bool anchor_differs =
      r.late && std::none_of(r.digests.begin(), r.digests.end(),
                             [mine](const auto& d) { return d.second == mine; });
  for (const PartVerdict& v : r.refused_parts) {
    // One line per refused part; peers that keep sending them are counted in
    // skipswarm_gradient_parts_refused_total.
    LOG(WARNING) << "iteration " << report.iteration << " stage " << it->first
                 << (outer ? " (outer step)" : "") << ": " << DescribeVerdict(v);
  }
  step.resync_source_lied = resync_checks.Check(report.iteration, it->first, r.digests, mine);
  if (!r.digests_agree || anchor_differs) {
    if (int64_t held = 0; AllowLog(&held)) {
      LOG(ERROR) << "iteration " << report.iteration << " stage " << it->first
                 << (outer ? ": replica anchors disagree" : ": replica parameter digests disagree")
                 << (held > 0 ? absl::StrCat(" (", held, " such lines held back)") : "");
    }
    std::optional<common::NodeId> source =  // Note [Choosing the reference]
        ResyncSource(r.digests, mine, report.iteration, [this](const common::NodeId& id) {
          return group->OnProbation(id) || resync_checks.Distrusted(id);
        });
    if (source.has_value()) {
      Resync(std::move(report), it, std::move(step), *source, std::move(then));
      return std::nullopt;
    }
  }
  const bool finite =
      std::all_of(r.sum.begin(), r.sum.end(), [](float x) { return std::isfinite(x); });
  if (!finite) step.skipped_nonfinite = true;
  CountNonFinite(report.iteration, it->first, !finite);
  return finite;
}

void NodeTrainer::State::Resync(NodeIterationReport report,
                                std::map<int, StageCompute*>::iterator it, StageStep step,
                                common::NodeId source, StepThen then) {
  it->second->ZeroGrad();  // this iteration's gradients apply to another state
  const uint64_t iteration = report.iteration;
  LOG(WARNING) << "iteration " << iteration << " stage " << it->first
               << ": diverged; fetching the state of " << source.ShortString();
  State* self = this;
  group->FetchState(
      iteration + 1, it->first, source,
      guard.Wrap([self, report = std::move(report), it, step, source,
                  then = std::move(then)](absl::StatusOr<std::string> state) mutable {
        if (self->Stopped()) return;
        StageCompute* compute = it->second;
        absl::StatusOr<int64_t> restored =
            state.ok() ? compute->ImportState(*state) : absl::StatusOr<int64_t>(state.status());
        if (restored.ok()) {
          step.resynced = true;
          LOG(WARNING) << "iteration " << report.iteration << " stage " << it->first
                       << ": re-synced from " << source.ShortString() << " (step " << *restored
                       << ")";
          self->MarkAt(it->first, report.iteration + 1);
          self->resync_checks.Imported(it->first, source);
        } else {
          LOG(ERROR) << "iteration " << report.iteration << " stage " << it->first
                     << ": re-sync from " << source.ShortString()
                     << " failed, keeping this state: " << restored.status();
        }
        if (then) return then(std::move(report), it, std::move(step));
        step.digest_after = compute->ParamsDigest();
        report.stages[it->first] = step;
        self->UpdateStage(std::move(report), std::next(it));
      }));
}

void NodeTrainer::State::Finish(NodeIterationReport report) {
  report.server = server->stats();
  const uint64_t next = report.iteration + 1;
  bool stop;
  absl::Status failed;
  {
    absl::MutexLock lock(&mu);
    failed = fatal;
    stop = stop_requested || next >= end || !failed.ok();
    if (!stop) current = next;  // Note [Stop point]
    report.rerouted_here = report.server.rerouted - rerouted_reported;
    rerouted_reported = report.server.rerouted;
  }
  // Runs inside a guarded callback: ~NodeTrainer waits for it to return.
  if (Stopped()) return;  // destroyed: nothing borrowed may be used
  if (on_iteration) on_iteration(report);
  if (Stopped()) return;
  server->BeginIteration(next);
  if (!stop) return Start(next);
  DoneCallback done;
  {
    absl::MutexLock lock(&mu);
    done = std::move(on_done);
    if (stop_requested || !failed.ok()) stopped = true;
  }
  if (done) {
    done(!failed.ok()   ? failed
         : next >= end ? absl::OkStatus()
                       : absl::CancelledError("stopped"));
  }
}

void NodeTrainer::State::EndCancelled(uint64_t iteration) {
  DoneCallback done;
  {
    absl::MutexLock lock(&mu);
    if (stopped) return;
    stopped = true;
    done = std::move(on_done);
  }
  if (done) {
    done(absl::CancelledError(absl::StrCat("stopped while iteration ", iteration, " was paused")));
  }
}

NodeTrainer::NodeTrainer(StageServer* server, std::map<int, StageCompute*> stages,
                         DataNodeDriver* driver, GroupComm* group, common::Clock* clock)
    : state_(std::make_unique<State>()) {
  state_->server = server;
  state_->stages = std::move(stages);
  state_->driver = driver;
  state_->group = group;
  state_->clock = clock;
  if (driver == nullptr) {
    state_->data_wait = std::make_unique<DataNodeWait>(
        group, clock, std::hash<std::string>{}(server->self().ShortString()));
  }
  {
    absl::MutexLock lock(&state_->mu);
    state_->rerouted_reported = server->stats().rerouted;
  }
  State* self = state_.get();
  group->SetStateProvider(
      server->self(), [self, token = state_->guard.token()](
                          int stage, uint64_t iteration) -> absl::StatusOr<std::string> {
        common::LifetimeGuard::Entry entry = token.Enter();
        if (!entry) return absl::UnavailableError("node is stopping");
        return self->ServeState(stage, iteration);
      });
}

NodeTrainer::~NodeTrainer() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopped = true;
  }
  // Waits for a callback in progress (an on_iteration call included); later
  // ones do nothing.
  state_->guard.Close();
}

void NodeTrainer::SetBeforeIteration(IterationHook hook) {
  state_->before_iteration = std::move(hook);
}

void NodeTrainer::Run(uint64_t first, uint64_t count, IterationCallback on_iteration,
                      DoneCallback on_done) {
  state_->end = first + count;
  {
    absl::MutexLock lock(&state_->mu);
    state_->current = first;
  }
  state_->on_iteration = std::move(on_iteration);
  state_->on_done = std::move(on_done);
  for (const auto& [stage, compute] : state_->stages) state_->MarkAt(stage, first);
  State* self = state_.get();
  state_->server->BeginIteration(first);
  state_->clock->RunAfter(absl::ZeroDuration(),
                          state_->guard.Wrap([self, first] { self->Start(first); }));
}

// Note [Stop point] in node_trainer.h.
uint64_t NodeTrainer::Stop() {
  uint64_t last;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stop_requested = true;
    last = state_->current;
  }
  // A paused iteration (Note [Paused training]) would never reach its end.
  if (state_->driver != nullptr) state_->driver->Cancel();
  // A relay waiting for a data node (Note [Relay without a data node]).
  if (state_->data_wait != nullptr && state_->data_wait->Cancel()) {
    State* self = state_.get();
    state_->clock->RunAfter(absl::ZeroDuration(),
                            state_->guard.Wrap([self, last] { self->EndCancelled(last); }));
  }
  return last;
}

}  // namespace skipswarm::node
