#include "tools/loopback_swarm/swarm_recorder.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace skipswarm::tools {
namespace {

constexpr absl::Duration kTick = absl::Milliseconds(20);

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }
double S(absl::Duration d) { return absl::ToDoubleSeconds(d); }

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

bool IsRefutation(proto::MemberState from, proto::MemberState to) {
  return (from == proto::MEMBER_STATE_SUSPECT ||
          from == proto::MEMBER_STATE_DEAD) &&
         to == proto::MEMBER_STATE_ALIVE;
}

}  // namespace

SwarmRecorder::SwarmRecorder(common::RealClock* clock)
    : clock_(clock), t0_(clock->SteadyNow()) {}

SwarmRecorder::~SwarmRecorder() { Stop(); }

void SwarmRecorder::Start() {
  const absl::Duration first = clock_->SteadyNow() + kTick;
  {
    absl::MutexLock lock(&mu_);
    timer_ = clock_->RunAt(first, [this, first] { TimerTick(first); });
  }
  starvation_thread_ = std::thread([this] { StarvationLoop(); });
}

void SwarmRecorder::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    clock_->Cancel(timer_);
  }
  if (starvation_thread_.joinable()) starvation_thread_.join();
}

void SwarmRecorder::Name(const common::NodeId& id, int index) {
  absl::MutexLock lock(&mu_);
  index_[id] = index;
}

SwarmRecorder::Second& SwarmRecorder::SecondLocked(absl::Duration at) {
  const size_t s = static_cast<size_t>(std::max<int64_t>(
      0, absl::ToInt64Seconds(at - t0_)));
  if (seconds_.size() <= s) seconds_.resize(s + 1);
  return seconds_[s];
}

void SwarmRecorder::TimerTick(absl::Duration deadline) {
  const absl::Duration now = clock_->SteadyNow();
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  Second& s = SecondLocked(now);
  s.timer_lag = std::max(s.timer_lag, now - deadline);
  const absl::Duration next = now + kTick;
  timer_ = clock_->RunAt(next, [this, next] { TimerTick(next); });
}

void SwarmRecorder::StarvationLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    const absl::Duration before = clock_->SteadyNow();
    clock_->SleepFor(kTick);
    const absl::Duration now = clock_->SteadyNow();
    absl::MutexLock lock(&mu_);
    Second& s = SecondLocked(now);
    s.starvation = std::max(s.starvation, now - before - kTick);
  }
}

void SwarmRecorder::Sent(const std::string& from, uint64_t seq,
                         absl::Duration at) {
  absl::MutexLock lock(&mu_);
  if (sent_.size() > 200000) sent_.clear();  // lost requests never arrive
  sent_[{from, seq}] = at;
}

void SwarmRecorder::Arrived(const std::string& from, uint64_t seq) {
  const absl::Duration now = clock_->SteadyNow();
  absl::MutexLock lock(&mu_);
  auto it = sent_.find({from, seq});
  if (it == sent_.end()) return;
  Second& s = SecondLocked(now);
  s.delivery_max = std::max(s.delivery_max, now - it->second);
  sent_.erase(it);
}

void SwarmRecorder::Completed(Kind kind, absl::Duration elapsed,
                              const absl::Status& status) {
  const absl::Duration now = clock_->SteadyNow();
  absl::MutexLock lock(&mu_);
  Second& s = SecondLocked(now);
  ++s.calls[kind];
  if (!status.ok()) {
    ++s.failed[kind];
    if (absl::IsDeadlineExceeded(status)) ++s.deadline_exceeded;
  } else if (kind == kPing) {
    s.ping_ms.push_back(Ms(elapsed));
  }
  s.reply_max[kind] = std::max(s.reply_max[kind], elapsed);
}

void SwarmRecorder::Told(const common::NodeId& subject) {
  const absl::Duration now = clock_->SteadyNow();
  absl::MutexLock lock(&mu_);
  told_.push_back({now, IndexLocked(subject)});
}

void SwarmRecorder::Transition(int observer, const membership::MemberChange& change) {
  const bool interesting =
      change.new_state == proto::MEMBER_STATE_SUSPECT ||
      change.new_state == proto::MEMBER_STATE_DEAD ||
      IsRefutation(change.old_state, change.new_state);
  if (!interesting) return;
  const absl::Duration now = clock_->SteadyNow();
  absl::MutexLock lock(&mu_);
  events_.push_back({now, observer, IndexLocked(change.id), change.old_state,
                     change.new_state, change.record_changed});
}

int SwarmRecorder::IndexLocked(const common::NodeId& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

absl::Duration SwarmRecorder::MaxLagLocked(absl::Duration from,
                                           absl::Duration to, bool starvation) {
  absl::Duration worst;
  const int64_t a = std::max<int64_t>(0, absl::ToInt64Seconds(from - t0_));
  const int64_t b = absl::ToInt64Seconds(to - t0_);
  for (int64_t s = a; s <= b && s < static_cast<int64_t>(seconds_.size()); ++s) {
    worst = std::max(worst, starvation ? seconds_[s].starvation
                                       : seconds_[s].timer_lag);
  }
  return worst;
}

void SwarmRecorder::Incident(std::ostream& out, const Event& dead) {
  // This observer's suspicion that ended in the verdict.
  absl::Duration suspected_here = -absl::InfiniteDuration();
  for (const Event& e : events_) {
    if (e.at > dead.at) break;
    if (e.observer == dead.observer && e.subject == dead.subject &&
        e.to == proto::MEMBER_STATE_SUSPECT) {
      suspected_here = e.at;
    }
  }
  // The episode: back to the last refutation seen anywhere before it.
  absl::Duration episode = absl::ZeroDuration() + t0_;
  for (const Event& e : events_) {
    if (e.at >= suspected_here) break;
    if (e.subject == dead.subject && IsRefutation(e.from, e.to)) episode = e.at;
  }
  absl::Duration first = suspected_here;
  int first_by = dead.observer;
  int suspecters = 0;
  absl::Duration refuted_first = absl::InfiniteDuration();
  absl::Duration refuted_here = absl::InfiniteDuration();
  for (const Event& e : events_) {
    if (e.subject != dead.subject || e.at <= episode) continue;
    if (e.to == proto::MEMBER_STATE_SUSPECT && e.at <= dead.at) {
      ++suspecters;
      if (e.at < first) {
        first = e.at;
        first_by = e.observer;
      }
    }
    if (IsRefutation(e.from, e.to)) {
      refuted_first = std::min(refuted_first, e.at);
      if (e.observer == dead.observer) refuted_here = std::min(refuted_here, e.at);
    }
  }
  absl::Duration told = absl::InfiniteDuration();
  for (const auto& [at, subject] : told_) {
    if (subject == dead.subject && at >= first) {
      told = at;
      break;
    }
  }
  auto rel = [&](absl::Duration t) {
    return t == absl::InfiniteDuration() ? std::string("never")
                                         : absl::StrFormat("%+.0fms", Ms(t - first));
  };
  int calls = 0, failed = 0;
  std::vector<double> ping;
  for (int64_t s = absl::ToInt64Seconds(first - t0_);
       s <= absl::ToInt64Seconds(dead.at - t0_) &&
       s < static_cast<int64_t>(seconds_.size());
       ++s) {
    if (s < 0) continue;
    calls += seconds_[s].calls[kPing];
    failed += seconds_[s].failed[kPing];
    ping.insert(ping.end(), seconds_[s].ping_ms.begin(),
                seconds_[s].ping_ms.end());
  }
  out << absl::StrFormat(
      "false DEAD at %.1fs: observer %d -> node %d | first suspected by %d "
      "(%d suspicions in episode), here %s, told %s, refutation first seen %s, "
      "here %s, DEAD %s | max timer lag %.0fms, max thread starvation %.0fms, "
      "pings %d failed %d p99 %.0fms\n",
      S(dead.at - t0_), dead.observer, dead.subject, first_by, suspecters,
      rel(suspected_here), rel(told), rel(refuted_first), rel(refuted_here),
      rel(dead.at), Ms(MaxLagLocked(first, dead.at, false)),
      Ms(MaxLagLocked(first, dead.at, true)), calls, failed,
      Quantile(ping, 0.99));
}

void SwarmRecorder::Report(std::ostream& out, const std::vector<int>& killed) {
  absl::MutexLock lock(&mu_);
  out << "period  timer_lag_max  starvation_max  pings  failed(deadline)  "
         "ping_p50/p99/max_ms  delivery_max_ms  suspicions  deads\n";
  const size_t period = 60;
  std::vector<double> all_ping;
  int all_calls = 0, all_failed = 0;
  for (size_t a = 0; a < seconds_.size(); a += period) {
    absl::Duration lag, starve, delivery;
    int calls = 0, failed = 0, deadline = 0;
    std::vector<double> ping;
    for (size_t s = a; s < std::min(seconds_.size(), a + period); ++s) {
      lag = std::max(lag, seconds_[s].timer_lag);
      starve = std::max(starve, seconds_[s].starvation);
      delivery = std::max(delivery, seconds_[s].delivery_max);
      calls += seconds_[s].calls[kPing];
      failed += seconds_[s].failed[kPing];
      deadline += seconds_[s].deadline_exceeded;
      ping.insert(ping.end(), seconds_[s].ping_ms.begin(),
                  seconds_[s].ping_ms.end());
    }
    int suspicions = 0, deads = 0;
    for (const Event& e : events_) {
      const double at = S(e.at - t0_);
      if (at < a || at >= a + period) continue;
      suspicions += e.to == proto::MEMBER_STATE_SUSPECT;
      deads += e.to == proto::MEMBER_STATE_DEAD;
    }
    all_calls += calls;
    all_failed += failed;
    all_ping.insert(all_ping.end(), ping.begin(), ping.end());
    out << absl::StrFormat(
        "%4zus  %8.0fms  %10.0fms  %6d  %5d(%d)  %5.1f/%.1f/%.0f  %8.0f  %6d  %4d\n",
        a, Ms(lag), Ms(starve), calls, failed, deadline, Quantile(ping, 0.5),
        Quantile(ping, 0.99), Quantile(ping, 1.0), Ms(delivery), suspicions,
        deads);
  }
  out << absl::StrFormat("pings %d, failed %d (%.2f%%), p50 %.1fms p99 %.1fms p99.9 %.1fms\n",
                         all_calls, all_failed,
                         all_calls ? 100.0 * all_failed / all_calls : 0.0,
                         Quantile(all_ping, 0.5), Quantile(all_ping, 0.99),
                         Quantile(all_ping, 0.999));
  int incidents = 0;
  for (const Event& e : events_) {
    if (e.to != proto::MEMBER_STATE_DEAD ||
        std::find(killed.begin(), killed.end(), e.subject) != killed.end()) {
      continue;
    }
    if (++incidents > 60) continue;  // enough to see the pattern
    Incident(out, e);
  }
  out << "false DEAD incidents: " << incidents << "\n";
}

// ---------------------------------------------------------------- transport

void TimedTransport::Ping(const membership::PeerRef& to, const proto::PingRequest& req,
                          absl::Duration timeout, membership::AckCallback done) {
  const absl::Duration start = recorder_->Now();
  recorder_->Sent(req.from(), req.seq(), start);
  inner_->Ping(to, req, timeout,
               [this, start, done = std::move(done)](
                   absl::StatusOr<proto::Ack> ack) mutable {
                 recorder_->Completed(SwarmRecorder::kPing,
                                      recorder_->Now() - start, ack.status());
                 done(std::move(ack));
               });
}

void TimedTransport::PingReq(const membership::PeerRef& to, const proto::PingRequest& req,
                             absl::Duration timeout, membership::AckCallback done) {
  const absl::Duration start = recorder_->Now();
  recorder_->Sent(req.from(), req.seq(), start);
  inner_->PingReq(to, req, timeout,
                  [this, start, done = std::move(done)](
                      absl::StatusOr<proto::Ack> ack) mutable {
                    recorder_->Completed(SwarmRecorder::kPingReq,
                                         recorder_->Now() - start, ack.status());
                    done(std::move(ack));
                  });
}

void TimedTransport::PushPull(const membership::PeerRef& to,
                              const proto::PushPullRequest& req,
                              absl::Duration timeout, membership::PushPullCallback done) {
  const absl::Duration start = recorder_->Now();
  inner_->PushPull(to, req, timeout,
                   [this, start, done = std::move(done)](
                       absl::StatusOr<proto::PushPullResponse> resp) mutable {
                     recorder_->Completed(SwarmRecorder::kPushPull,
                                          recorder_->Now() - start,
                                          resp.status());
                     done(std::move(resp));
                   });
}

}  // namespace skipswarm::tools
