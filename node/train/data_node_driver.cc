#include "node/train/data_node_driver.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::node {
namespace {

// Note [Moving the report to the clock]: `done` runs on the clock's thread
// with the report moved there, never copied: the calling thread keeps no
// copy, so nothing of the report is shared between the two threads. A
// report's Status shares one counted representation between its copies; a
// copy kept here and dropped after the hand-off (while the clock thread
// copied the report for `done` and dropped its copies) was correct C++,
// but TSan, through an interposer that took the count's order before the
// library's drop, reported its free (third_party/tsan/README.md, kind 4;
// the interposer now takes the count's own order). The hand-off itself is
// ordered by the clock's lock. data_node_driver_teardown_test checks that
// the calling thread drops no shared Status in Cancel.
void Report(common::Clock* clock, absl::AnyInvocable<void(IterationReport)> done,
            IterationReport report) {
  clock->RunAfter(absl::ZeroDuration(),
                  [done = std::move(done), report = std::move(report)]() mutable {
                    done(std::move(report));
                  });
}

}  // namespace

DataNodeDriver::DataNodeDriver(StageServer* server, common::Clock* clock, const SwarmView* view,
                               RoutePlanner* planner, const DataSource* data,
                               DriverOptions options)
    : server_(server),
      clock_(clock),
      view_(view),
      planner_(planner),
      data_(data),
      options_(options),
      backoff_(options.pause_backoff, options.seed),
      silent_(options.silent_relay, options.seed) {}

DataNodeDriver::~DataNodeDriver() {
  guard_.Close();  // first: waits for an OnDeadline in progress
  absl::MutexLock lock(&mu_);
  if (retry_ != common::kNoTimer) clock_->Cancel(retry_);
  if (replan_ != common::kNoTimer) clock_->Cancel(replan_);
  if (confirm_ != common::kNoTimer) clock_->Cancel(confirm_);
  for (auto& [mb, f] : in_flight_) clock_->Cancel(f.deadline);
}

std::vector<PeerId> DataNodeDriver::StoppingAtLocked(uint64_t iteration) const {
  const absl::Duration now = clock_->SteadyNow();
  std::vector<PeerId> out;
  for (const auto& [node, mark] : stopping_) {
    if (mark.stop_after < iteration && now < mark.until) out.push_back(node);
  }
  return out;
}

bool DataNodeDriver::PauseLocked(const absl::Status& why) {
  const bool changed = pause_reason_.ok() || pause_reason_.message() != why.message();
  if (pause_reason_.ok()) paused_since_ = clock_->SteadyNow();
  pause_reason_ = why;
  return changed;
}

bool DataNodeDriver::ResumeLocked(uint64_t iteration) {
  backoff_.Reset();
  if (pause_reason_.ok()) return false;
  LOG(WARNING) << "training resumed at iteration " << iteration << " after "
               << (clock_->SteadyNow() - paused_since_) << " paused (" << plan_attempts_
               << " planning attempts so far)";
  pause_reason_ = absl::OkStatus();
  return true;
}

absl::Duration DataNodeDriver::StartDeadlineLocked() const {
  // Note [MB deadline]: the start-up deadline, or what the plan needs.
  return std::max(options_.initial_deadline, planned_deadline_);
}

absl::Duration DataNodeDriver::CeilingLocked() const {
  // Note [MB deadline]: no measured deadline above the start-up one.
  return std::max(StartDeadlineLocked(), options_.min_deadline);
}

absl::Duration DataNodeDriver::DeadlineLocked() const {
  if (last_slowest_ <= absl::ZeroDuration()) return StartDeadlineLocked();
  return std::min(CeilingLocked(),
                  std::max(options_.min_deadline, last_slowest_ * options_.deadline_factor));
}

absl::Duration DataNodeDriver::HealthyDeadlineLocked() const {
  if (last_completed_ <= absl::ZeroDuration()) return StartDeadlineLocked();
  return std::min(CeilingLocked(),
                  std::max(options_.min_deadline, last_completed_ * options_.deadline_factor));
}

absl::Duration DataNodeDriver::SilentSampleCapLocked() const {
  // Note [MB deadline]: one more deadline_factor step per
  // silent_iterations_per_step iterations in a row without a completed MB.
  const absl::Duration healthy = HealthyDeadlineLocked();
  const absl::Duration start = StartDeadlineLocked();
  const int steps = options_.silent_iterations_per_step > 0
                        ? silent_streak_ / options_.silent_iterations_per_step
                        : 0;
  absl::Duration cap = healthy;
  for (int i = 0; i < steps && cap < start; ++i) {
    cap = cap * options_.deadline_factor;
  }
  return std::max(healthy, std::min(cap, start));
}

absl::Duration PlannedDeadline(const std::vector<PlannedRoute>& routes,
                               const DriverOptions& options) {
  // Note [MB deadline]: the slowest prediction, capped at the start-up
  // ceiling; a negative, NaN-born or infinite one counts as none.
  const absl::Duration cap = std::max(options.initial_deadline, options.min_deadline);
  absl::Duration slowest = absl::ZeroDuration();
  for (const PlannedRoute& r : routes) {
    if (!r.predicted_round_trip.has_value()) continue;
    const absl::Duration d = *r.predicted_round_trip;
    if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) continue;
    slowest = std::max(slowest, std::min(d, cap));
  }
  const double factor = options.deadline_factor >= 1.0 ? options.deadline_factor : 1.0;
  return slowest * factor;
}

void DataNodeDriver::RunIteration(uint64_t iteration,
                                  absl::AnyInvocable<void(IterationReport)> done) {
  {
    absl::MutexLock lock(&mu_);
    waiting_ = true;
    waiting_iteration_ = iteration;
    waiting_done_ = std::move(done);
  }
  TryStart();
}

absl::Status DataNodeDriver::paused() const {
  absl::MutexLock lock(&mu_);
  return pause_reason_;
}

absl::Duration DataNodeDriver::mb_deadline() const {
  absl::MutexLock lock(&mu_);
  return DeadlineLocked();
}

absl::Duration DataNodeDriver::NextIterationBound() const {
  const int slots = std::max(1, server_->stats().memory_slots);
  const int waves = (std::max(1, options_.mbs_per_iteration) + slots - 1) / slots;
  absl::MutexLock lock(&mu_);
  return DeadlineLocked() * (waves + 1);
}

int64_t DataNodeDriver::plan_attempts() const {
  absl::MutexLock lock(&mu_);
  return plan_attempts_;
}

void DataNodeDriver::Cancel() {
  absl::AnyInvocable<void(IterationReport)> done;
  IterationReport report;
  {
    absl::MutexLock lock(&mu_);
    if (waiting_) {
      waiting_ = false;
      if (retry_ != common::kNoTimer) clock_->Cancel(retry_);
      retry_ = common::kNoTimer;
      done = std::move(waiting_done_);
      report.iteration = waiting_iteration_;
      report.status = absl::CancelledError(
          pause_reason_.ok() ? std::string("stopped")
                             : absl::StrCat("stopped while paused: ", pause_reason_.message()));
      report.loss = std::numeric_limits<double>::quiet_NaN();
    } else {
      // Note [Stopping drops]: an iteration paused for its re-runs ends,
      // the waiting micro-batches counted as dropped.
      if (!running_ || rerun_.empty() || pause_reason_.ok()) return;
      if (replan_ != common::kNoTimer) clock_->Cancel(replan_);
      replan_ = common::kNoTimer;
      if (confirm_ != common::kNoTimer) clock_->Cancel(confirm_);
      confirm_ = common::kNoTimer;
      for (const Held& h : unconfirmed_) DropUnconfirmedLocked(iteration_, h);
      unconfirmed_.clear();
      report_.dropped += static_cast<int>(rerun_.size());
      report_.dropped_by_reason["stopping"] += static_cast<int>(rerun_.size());
      rerun_.clear();
      report_.status =
          absl::CancelledError(absl::StrCat("stopped while paused: ", pause_reason_.message()));
      if (!in_flight_.empty() || !pending_.empty()) return;
      CompleteLocked(&report, &done);
    }
  }
  if (done) Report(clock_, std::move(done), std::move(report));
}

void DataNodeDriver::EndReturnedMarks() {
  std::vector<PeerId> marked;
  {
    absl::MutexLock lock(&mu_);
    const absl::Duration now = clock_->SteadyNow();
    for (auto it = stopping_.begin(); it != stopping_.end();) {
      if (now >= it->second.until) {
        stopping_.erase(it++);
      } else {
        marked.push_back(it->first);
        ++it;
      }
    }
  }
  if (marked.empty()) return;
  // The view has its own lock: asked before ours.
  std::vector<std::pair<RecordSeen, bool>> seen_alive;
  for (const PeerId& node : marked) seen_alive.emplace_back(ReadRecord(node), view_->IsAlive(node));
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < marked.size(); ++i) {
    auto it = stopping_.find(marked[i]);
    if (it == stopping_.end()) continue;
    const auto& [seen, alive] = seen_alive[i];
    std::optional<uint64_t>& held = it->second.incarnation;
    if (!seen.incarnation.has_value()) continue;
    if (seen.stop_after.has_value()) {
      if (!held.has_value() || *held < *seen.incarnation) held = seen.incarnation;
    } else if (alive && held.has_value() && *seen.incarnation > *held) {
      LOG(INFO) << marked[i] << " is back with a newer record (incarnation " << *seen.incarnation
                << " over " << *held << ") that does not say stopping after iteration "
                << it->second.stop_after
                << "; planning through it again (Note [Confirmed stopping])";
      stopping_.erase(it);
    }
  }
}

DataNodeDriver::RecordSeen DataNodeDriver::ReadRecord(const PeerId& node) const {
  RecordSeen out;
  out.incarnation = view_->Incarnation(node);
  out.stop_after = view_->StopAfter(node);
  return out;
}

void DataNodeDriver::TryStart() {
  EndReturnedMarks();
  uint64_t iteration;
  uint64_t base = 0;
  std::vector<PeerId> excluded, stopping;
  {
    absl::MutexLock lock(&mu_);
    if (!waiting_) return;
    retry_ = common::kNoTimer;
    iteration = waiting_iteration_;
    ++plan_attempts_;
    // Note [Refused iterations]: a re-run of a refused iteration takes ids
    // above every id its earlier runs used.
    if (!refused_iteration_.has_value() || *refused_iteration_ != iteration) mb_base_ = 0;
    base = mb_base_;
    excluded = silent_.ExcludedAt(clock_->SteadyNow());
    stopping = StoppingAtLocked(iteration);
  }
  const PeerId self = server_->self();
  // Stable data order: rank among every configured data node (Note [Data
  // order], Note [Mixed data order]).
  const DataOrder order = DataOrderOf(*view_, self);
  const int rank = order.rank, num_data = order.num_data;
  IterationReport report;
  report.iteration = iteration;
  std::deque<Pending> pending;
  PlanInput input{iteration, self, options_.mbs_per_iteration, options_.num_stages};
  // Note [Silent relay exclusion]: plan without the relays this node
  // excluded (all but the last replica of a stage); Note [Stopping drops]:
  // nor through a node seen refusing this iteration as stopping.
  const ExcludingView planning(*view_, excluded, std::move(stopping));
  absl::StatusOr<std::vector<PlannedRoute>> routes = planner_->Plan(input, planning);
  if (routes.ok() && routes->empty()) {
    routes = absl::UnavailableError("the planner gave this data node no micro-batches");
  }
  if (!routes.ok()) {
    // Note [Paused training]: re-plan the same iteration later.
    const absl::Status why = routes.status();
    bool changed;
    {
      absl::MutexLock lock(&mu_);
      if (!waiting_) return;  // cancelled meanwhile
      changed = PauseLocked(why);
      pause_refused_ = false;
      retry_ = clock_->RunAfter(backoff_.Next(), guard_.Wrap([this] { TryStart(); }));
    }
    if (changed) {
      LOG(WARNING) << "training paused at iteration " << iteration << ": " << why
                   << " (re-planning with back-off)";
      if (options_.on_pause_change) options_.on_pause_change(why);
    }
    return;
  }
  absl::AnyInvocable<void(IterationReport)> done;
  bool resumed = false;
  {
    absl::MutexLock lock(&mu_);
    if (!waiting_) return;  // cancelled meanwhile
    waiting_ = false;
    done = std::move(waiting_done_);
    // Note [MB deadline]: this iteration's routes' needs, fixed until the
    // next iteration's plan (a re-run's re-plan keeps it).
    planned_deadline_ = PlannedDeadline(*routes, options_);
    // Note [Refused iterations]: resumed by a completed micro-batch, not by
    // a plan through the replica that refused.
    if (!pause_refused_) resumed = ResumeLocked(iteration);
  }
  if (resumed && options_.on_pause_change) options_.on_pause_change(absl::OkStatus());
  // Note [Nothing completed]: the relays the planner had no other planned
  // replica for, judged on the view it planned on.
  absl::flat_hash_set<PeerId> relays;
  for (const PlannedRoute& r : *routes) {
    for (size_t h = 1; h < r.hops.size(); ++h) {
      if (r.hops[h].node != self) relays.insert(r.hops[h].node);
    }
  }
  absl::flat_hash_set<PeerId> last_replicas = LastReplicas(planning, relays);
  if (report.status.ok()) {
    for (PlannedRoute& r : *routes) {
      const uint64_t global =
          r.data_slot >= 0
              ? iteration * std::max(1, num_data) * options_.mbs_per_iteration + r.data_slot
              : GlobalMicroBatchIndex(iteration, rank, std::max(1, num_data),
                                      options_.mbs_per_iteration, r.index);
      absl::StatusOr<MicroBatchData> d = data_->Get(global);
      if (!d.ok()) {
        report.status = d.status();
        break;
      }
      pending.push_back(
          {static_cast<uint64_t>(r.index) + base, std::move(r.hops), *std::move(d), r.priority});
    }
    // The origin serves its own starts by priority too (Note [Queue order]),
    // but only sees the few the memory slots let in: inject in that order.
    std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
      return a.priority < b.priority;
    });
  }
  if (!report.status.ok() || pending.empty()) {
    LOG(ERROR) << "iteration " << iteration << " cannot start: " << report.status;
    report.loss = std::numeric_limits<double>::quiet_NaN();
    Report(clock_, std::move(done), std::move(report));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    running_ = true;
    iteration_ = iteration;
    started_ = clock_->SteadyNow();
    // Note [Stopping drops]: re-runs take ids above every planned one.
    next_mb_ = 0;
    for (const Pending& p : pending) next_mb_ = std::max(next_mb_, p.mb + 1);
    rerun_.clear();
    unconfirmed_.clear();
    pending_ = std::move(pending);
    in_flight_.clear();
    report_ = report;
    loss_sum_ = 0;
    slowest_ = absl::ZeroDuration();
    slowest_completed_ = absl::ZeroDuration();
    lost_relays_.clear();
    completed_relays_.clear();
    lost_any_ = false;
    refused_all_ = true;
    nothing_.on_every_lost_route.clear();
    nothing_.last_replicas = std::move(last_replicas);
    done_ = std::move(done);
  }
  InjectMore();
}

void DataNodeDriver::InjectMore() {
  for (;;) {
    Pending next;
    uint64_t iteration;
    {
      absl::MutexLock lock(&mu_);
      if (!running_ || pending_.empty() || !server_->CanInject()) return;
      next = std::move(pending_.front());
      pending_.pop_front();
      iteration = iteration_;
      InFlight f;
      f.started = clock_->SteadyNow();
      f.tokens = next.data.samples * next.data.seq;
      for (size_t h = 1; h < next.route.size(); ++h) {
        if (next.route[h].node != server_->self()) f.relays.push_back(next.route[h].node);
      }
      const uint64_t mb = next.mb;
      f.deadline = clock_->RunAfter(DeadlineLocked(), guard_.Wrap([this, iteration, mb] {
        OnDeadline(iteration, mb);
      }));
      f.data = next.data;
      f.reruns = next.reruns;
      in_flight_[mb] = std::move(f);
    }
    const uint64_t mb = next.mb;
    absl::Status s =
        // A copy: on a lost race the MB goes back to pending_ intact.
        server_->Inject(iteration, mb, next.route, next.data, next.priority);
    if (absl::IsResourceExhausted(s)) {
      // Raced with another injector for the slot: put it back and wait.
      absl::MutexLock lock(&mu_);
      clock_->Cancel(in_flight_[mb].deadline);
      in_flight_.erase(mb);
      pending_.push_front(std::move(next));
      return;
    }
    if (!s.ok()) End(iteration, mb, s);
  }
}

const char* RouteShapeOf(const std::vector<int>& stages, int num_stages) {
  std::vector<int> distinct = stages;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const bool skip = static_cast<int>(distinct.size()) < num_stages - 1;
  const bool swap = !std::is_sorted(stages.begin(), stages.end());
  if (skip) return swap ? "skip_swap" : "skip";
  return swap ? "swap" : "in_order";
}

void DataNodeDriver::OnRoute(uint64_t iteration, uint64_t mb, const std::vector<int>& stages) {
  absl::MutexLock lock(&mu_);
  if (!running_ || iteration != iteration_) return;
  auto it = in_flight_.find(mb);
  if (it != in_flight_.end()) it->second.route_shape = RouteShapeOf(stages, options_.num_stages);
}

void DataNodeDriver::OnTail(uint64_t iteration, uint64_t mb, double loss) {
  absl::MutexLock lock(&mu_);
  if (!running_ || iteration != iteration_) return;
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end()) return;
  it->second.loss = loss;
  it->second.has_loss = true;
}

void DataNodeDriver::OnFinished(uint64_t iteration, uint64_t mb, const absl::Status& status) {
  End(iteration, mb, status);
  InjectMore();
}

void DataNodeDriver::OnDeadline(uint64_t iteration, uint64_t mb) {
  {
    absl::MutexLock lock(&mu_);
    if (!running_ || iteration != iteration_ || !in_flight_.contains(mb)) return;
    in_flight_[mb].deadline = common::kNoTimer;
  }
  server_->Abandon(iteration, mb);
  End(iteration, mb, absl::DeadlineExceededError("micro-batch deadline passed"),
      /*timed_out=*/true);
  InjectMore();
}

void DataNodeDriver::End(uint64_t iteration, uint64_t mb, const absl::Status& status,
                         bool timed_out) {
  // Note [Confirmed stopping]: the named node's record, read before our
  // lock (the view has its own).
  std::optional<StoppingCause> claim;
  if (!status.ok() && !timed_out) claim = StoppingCauseOf(status);
  RecordSeen record;
  if (claim.has_value()) record = ReadRecord(claim->node);
  absl::AnyInvocable<void(IterationReport)> done;
  IterationReport report;
  bool resumed = false;
  absl::Status refused;  // Note [Refused iterations]: the pause, if new
  {
    absl::MutexLock lock(&mu_);
    if (!running_ || iteration != iteration_) return;
    auto it = in_flight_.find(mb);
    if (it == in_flight_.end()) return;
    InFlight f = std::move(it->second);
    in_flight_.erase(it);
    if (f.deadline != common::kNoTimer) clock_->Cancel(f.deadline);
    // Note [Stopping drops]: only a relay of its own planned route.
    std::optional<StoppingCause> stop = std::move(claim);
    if (stop.has_value() &&
        std::find(f.relays.begin(), f.relays.end(), stop->node) == f.relays.end()) {
      stop.reset();
    }
    if (stop.has_value() && f.reruns < options_.max_stopping_reruns) {
      if (ConfirmClaim(&*stop, record.stop_after, iteration)) {
        RerunLocked(iteration, mb, *stop, record, std::move(f.data), f.reruns);
      } else {
        // Note [Confirmed stopping]: held until the view confirms it.
        unconfirmed_.push_back(
            {mb, *stop, std::move(f.data), f.reruns, clock_->SteadyNow() + DeadlineLocked()});
        if (confirm_ == common::kNoTimer) {
          confirm_ = clock_->RunAfter(options_.stopping_confirm_poll,
                                      guard_.Wrap([this] { ConfirmClaims(); }));
        }
      }
      return;
    }
    if (status.ok()) {
      refused_all_ = false;
      if (pause_refused_) {
        pause_refused_ = false;
        resumed = ResumeLocked(iteration);
      }
      ++report_.completed;
      if (f.route_shape != nullptr) ++report_.completed_by_route[f.route_shape];
      loss_sum_ += f.loss;
      report_.tokens += f.tokens;
      const absl::Duration took = clock_->SteadyNow() - f.started;
      slowest_ = std::max(slowest_, took);
      slowest_completed_ = std::max(slowest_completed_, took);
      completed_relays_.insert(f.relays.begin(), f.relays.end());
    } else {
      // An MB abandoned at its deadline took at least that long: without
      // this, a data node whose routes became slower than the deadline (a
      // replica died, the rest is far away) would drop every MB from then
      // on, its deadline never growing (seen on the simulator's real-node
      // backend, sim/node_swarm.h). A drop the server reported (a relay's
      // notice, a refused or unanswered hop, whatever its status code)
      // says nothing about a healthy MB's time: not a sample (Note [MB
      // deadline]). Nor does a silent one say more than that it outlasted
      // the healthy deadline (it may be lost at a hung relay): capped
      // there, so silent losses grow the deadline one step, not one per
      // iteration, until a long run of them widens the cap.
      if (timed_out) {
        lost_relays_.insert(f.relays.begin(), f.relays.end());
        // Note [Nothing completed]: the first lost route's relays, in its
        // order, less those a later lost route avoided.
        std::vector<PeerId>& shared = nothing_.on_every_lost_route;
        if (!lost_any_) {
          for (const PeerId& id : f.relays) {
            if (std::find(shared.begin(), shared.end(), id) == shared.end()) shared.push_back(id);
          }
        } else {
          shared.erase(std::remove_if(shared.begin(), shared.end(),
                                      [&f](const PeerId& id) {
                                        return std::find(f.relays.begin(), f.relays.end(), id) ==
                                               f.relays.end();
                                      }),
                       shared.end());
        }
        lost_any_ = true;
        slowest_ = std::max(
            slowest_, std::min(clock_->SteadyNow() - f.started, SilentSampleCapLocked()));
      }
      // Note [Refused iterations]: refused at once, on a route through
      // the only planned replica of a stage.
      const bool through_last =
          std::any_of(f.relays.begin(), f.relays.end(),
                      [this](const PeerId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                        return nothing_.last_replicas.contains(id);
                      });
      if (stop.has_value() || timed_out || !through_last ||
          !(absl::IsAborted(status) || IsRetryElsewhere(status))) {
        refused_all_ = false;
      }
      ++report_.dropped;
      ++report_.dropped_by_reason[stop.has_value()           ? "stopping"
                                  : timed_out                  ? "mb_deadline"
                                  : absl::IsAborted(status)  ? "lost_downstream"
                                  : IsRetryElsewhere(status) ? "unrepairable"
                                                             : "error"];
      if (int64_t held = 0; drop_log_.Allow(clock_->SteadyNow(), &held)) {
        LOG(WARNING) << "iteration " << iteration << ": micro-batch " << mb
                     << " dropped: " << status
                     << (held > 0 ? absl::StrCat(" (", held, " more drops not logged)") : "");
      }
    }
    const bool last =
        in_flight_.empty() && pending_.empty() && rerun_.empty() && unconfirmed_.empty();
    const bool all_refused =
        refused_all_ && report_.completed == 0 && report_.dropped > 0 && report_.rerun == 0;
    if (last && all_refused && refused_streak_ > 0) {
      refused = RefusedLocked(iteration);  // Note [Refused iterations]
    } else if (last) {
      refused_streak_ = all_refused ? refused_streak_ + 1 : 0;
      if (!all_refused && pause_refused_) {  // a re-run that was not refused
        pause_refused_ = false;
        resumed = ResumeLocked(iteration) || resumed;
      }
      CompleteLocked(&report, &done);
    }
  }
  if (!refused.ok()) {
    LOG(WARNING) << "training paused at iteration " << iteration << ": " << refused
                 << " (re-running it with back-off)";
    if (options_.on_pause_change) options_.on_pause_change(refused);
  }
  if (resumed && options_.on_pause_change) options_.on_pause_change(absl::OkStatus());
  if (done) Report(clock_, std::move(done), std::move(report));
}

absl::Status DataNodeDriver::RefusedLocked(uint64_t iteration) {
  std::vector<std::string> sole;
  for (const PeerId& id : nothing_.last_replicas) sole.push_back(id.ShortString());
  std::sort(sole.begin(), sole.end());
  const absl::Status why = absl::UnavailableError(absl::StrCat(
      "every micro-batch was refused on a route through the only replica of a stage (",
      absl::StrJoin(sole, ", "), "): behind, stalled or gone (Note [Refused iterations])"));
  running_ = false;
  waiting_ = true;
  waiting_iteration_ = iteration;
  waiting_done_ = std::move(done_);
  refused_iteration_ = iteration;
  mb_base_ = next_mb_;  // above every id this iteration used
  const bool changed = PauseLocked(why);
  pause_refused_ = true;
  retry_ = clock_->RunAfter(backoff_.Next(), guard_.Wrap([this] { TryStart(); }));
  return changed ? why : absl::OkStatus();
}

bool DataNodeDriver::ConfirmClaim(StoppingCause* claim, std::optional<uint64_t> record,
                                  uint64_t iteration) {
  // Its own word: it could refuse every micro-batch anyway.
  if (claim->delivered_by.IsZero() || claim->delivered_by == claim->node) return true;
  if (!record.has_value() || *record >= iteration) return false;
  claim->stop_after = *record;  // what it signed, not what was claimed
  return true;
}

void DataNodeDriver::RerunLocked(uint64_t iteration, uint64_t mb, const StoppingCause& claim,
                                 const RecordSeen& record, MicroBatchData data, int reruns) {
  const absl::Duration now = clock_->SteadyNow();
  auto [mark, added] = stopping_.try_emplace(claim.node);
  // An expired mark is a new one: what its record said then is stale.
  if (!added && now >= mark->second.until) {
    mark->second = StoppingMark{};
    added = true;
  }
  if (added || claim.stop_after < mark->second.stop_after) {
    mark->second.stop_after = claim.stop_after;
  }
  // Note [Confirmed stopping]: tied to the newest record seen.
  std::optional<uint64_t>& held = mark->second.incarnation;
  if (record.incarnation.has_value() && (!held.has_value() || *held < *record.incarnation)) {
    held = record.incarnation;
  }
  mark->second.until = now + options_.stopping_mark;
  if (reruns == 0) ++report_.rerun;
  Pending again;
  again.data = std::move(data);
  again.reruns = reruns + 1;
  rerun_.push_back(std::move(again));
  if (int64_t held = 0; stopping_log_.Allow(now, &held)) {
    LOG(WARNING) << "iteration " << iteration << ": micro-batch " << mb << " refused by "
                 << claim.node << ", stopping after iteration " << claim.stop_after
                 << "; re-running it without that node"
                 << (held > 0 ? absl::StrCat(" (", held, " more not logged)") : "");
  }
  if (replan_ == common::kNoTimer) {
    replan_ = clock_->RunAfter(absl::ZeroDuration(), guard_.Wrap([this] { Replan(); }));
  }
}

void DataNodeDriver::DropUnconfirmedLocked(uint64_t iteration, const Held& h) {
  ++report_.dropped;
  ++report_.dropped_by_reason["stopping_unconfirmed"];
  ++report_.stopping_claims_unconfirmed;
  if (int64_t held = 0; unconfirmed_log_.Allow(clock_->SteadyNow(), &held)) {
    LOG(WARNING) << "iteration " << iteration << ": micro-batch " << h.mb
                 << " dropped: the abort notice from " << h.claim.delivered_by << " claims "
                 << h.claim.node << " stops after iteration " << h.claim.stop_after
                 << ", which its own record does not confirm; nothing excluded"
                 << " (Note [Confirmed stopping])"
                 << (held > 0 ? absl::StrCat(" (", held, " more not logged)") : "");
  }
}

void DataNodeDriver::ConfirmClaims() {
  uint64_t iteration;
  std::vector<PeerId> nodes;
  {
    absl::MutexLock lock(&mu_);
    confirm_ = common::kNoTimer;
    if (!running_ || unconfirmed_.empty()) return;
    iteration = iteration_;
    for (const Held& h : unconfirmed_) nodes.push_back(h.claim.node);
  }
  // The view has its own lock: asked before ours.
  std::vector<RecordSeen> records;
  for (const PeerId& node : nodes) records.push_back(ReadRecord(node));
  absl::AnyInvocable<void(IterationReport)> done;
  IterationReport report;
  {
    absl::MutexLock lock(&mu_);
    // Only this timer removes held claims (Cancel and a new iteration clear
    // them all): the first nodes.size() are those asked about.
    if (!running_ || iteration != iteration_ || unconfirmed_.size() < nodes.size()) return;
    const absl::Duration now = clock_->SteadyNow();
    std::deque<Held> keep;
    for (size_t i = 0; i < unconfirmed_.size(); ++i) {
      Held& h = unconfirmed_[i];
      if (i < records.size() && ConfirmClaim(&h.claim, records[i].stop_after, iteration)) {
        RerunLocked(iteration, h.mb, h.claim, records[i], std::move(h.data), h.reruns);
      } else if (now >= h.until) {
        DropUnconfirmedLocked(iteration, h);
      } else {
        keep.push_back(std::move(h));
      }
    }
    unconfirmed_ = std::move(keep);
    if (!unconfirmed_.empty()) {
      confirm_ = clock_->RunAfter(options_.stopping_confirm_poll,
                                  guard_.Wrap([this] { ConfirmClaims(); }));
    } else if (in_flight_.empty() && pending_.empty() && rerun_.empty()) {
      CompleteLocked(&report, &done);
    }
  }
  if (done) Report(clock_, std::move(done), std::move(report));
}

void DataNodeDriver::CompleteLocked(IterationReport* report,
                                    absl::AnyInvocable<void(IterationReport)>* done) {
  running_ = false;
  // Note [MB deadline]: an iteration without a sample (every MB dropped
  // on a report) keeps the previous one.
  if (slowest_ > absl::ZeroDuration()) last_slowest_ = slowest_;
  if (slowest_completed_ > absl::ZeroDuration()) {
    last_completed_ = slowest_completed_;
    silent_streak_ = 0;
  } else if (slowest_ > absl::ZeroDuration()) {
    ++silent_streak_;  // every sample of this iteration was a silent loss
  }
  ExcludeSilentRelaysLocked();
  report_.loss = report_.completed > 0 ? loss_sum_ / report_.completed
                                       : std::numeric_limits<double>::quiet_NaN();
  report_.elapsed = clock_->SteadyNow() - started_;
  *report = report_;
  *done = std::move(done_);
}

void DataNodeDriver::Replan() {
  EndReturnedMarks();
  uint64_t iteration;
  int count;
  std::vector<PeerId> excluded, stopping;
  {
    absl::MutexLock lock(&mu_);
    replan_ = common::kNoTimer;
    if (!running_ || rerun_.empty()) return;
    iteration = iteration_;
    count = static_cast<int>(rerun_.size());
    ++plan_attempts_;
    excluded = silent_.ExcludedAt(clock_->SteadyNow());
    stopping = StoppingAtLocked(iteration);
  }
  const ExcludingView planning(*view_, excluded, std::move(stopping));
  PlanInput input{iteration, server_->self(), count, options_.num_stages};
  absl::StatusOr<std::vector<PlannedRoute>> routes = planner_->Plan(input, planning);
  if (routes.ok() && routes->empty()) {
    routes = absl::UnavailableError("the planner gave this data node no micro-batches");
  }
  absl::Status why;
  bool changed = false, resumed = false;
  {
    absl::MutexLock lock(&mu_);
    if (!running_ || iteration != iteration_ || rerun_.empty()) return;
    if (!routes.ok()) {
      // Note [Paused training], in the iteration: its re-runs wait.
      // (No count in the reason: a change of reason is a log line.)
      why = absl::Status(routes.status().code(),
                         absl::StrCat("micro-batches a stopping node refused wait for a route: ",
                                      routes.status().message()));
      changed = PauseLocked(why);
      replan_ = clock_->RunAfter(backoff_.Next(), guard_.Wrap([this] { Replan(); }));
    } else {
      resumed = ResumeLocked(iteration);
      for (PlannedRoute& r : *routes) {
        if (rerun_.empty()) break;
        Pending p = std::move(rerun_.front());
        rerun_.pop_front();
        p.mb = next_mb_++;  // fresh: every hop saw the refused id
        p.route = std::move(r.hops);
        p.priority = r.priority;
        pending_.push_back(std::move(p));
      }
      // The planner gave fewer than asked: the rest after a back-off.
      if (!rerun_.empty()) {
        replan_ = clock_->RunAfter(backoff_.Next(), guard_.Wrap([this] { Replan(); }));
      }
    }
  }
  if (changed) {
    LOG(WARNING) << "training paused in iteration " << iteration << ": " << why
                 << " (re-planning with back-off)";
    if (options_.on_pause_change) options_.on_pause_change(why);
  }
  if (resumed && options_.on_pause_change) options_.on_pause_change(absl::OkStatus());
  if (routes.ok()) InjectMore();
}

void DataNodeDriver::ExcludeSilentRelaysLocked() {
  const absl::Duration now = clock_->SteadyNow();
  for (const SilentLossTracker::Exclusion& e :
       silent_.EndIteration(lost_relays_, completed_relays_, now, nothing_)) {
    ++report_.relays_excluded;
    if (int64_t held = 0; exclude_log_.Allow(now, &held)) {
      LOG(WARNING) << "iteration " << iteration_ << ": relay " << e.relay
                   << " excluded from this data node's routes for "
                   << absl::Trunc(e.duration, absl::Milliseconds(1))
                   << " (exclusion " << e.times
                   << "): micro-batches routed through it vanish and none completes"
                   << " (Note [Silent relay exclusion])"
                   << (held > 0 ? absl::StrCat(" (", held, " more exclusions not logged)") : "");
    }
  }
}

}  // namespace skipswarm::node
