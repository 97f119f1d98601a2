#include "common/peer_log_limiter.h"

#include <algorithm>
#include <utility>

namespace skipswarm::common {

PeerLogLimiter::PeerLogLimiter(PeerLogLimiterOptions options) : options_([&] {
  options.burst = std::max(options.burst, 1);
  options.max_peers = std::max<size_t>(options.max_peers, 1);
  options.max_lines_per_interval = std::max(options.max_lines_per_interval, 1);
  return options;
}()) {}

PeerLogVerdict PeerLogLimiter::Allow(const std::string& peer, absl::Duration now) {
  auto it = table_.find(peer);
  if (it == table_.end()) {
    // Note [Paced peer logs]: forget the peer heard from least recently.
    while (table_.size() >= options_.max_peers) {
      auto oldest = table_.find(by_age_.front());
      forgotten_ += oldest->second.limit.held();
      by_age_.pop_front();
      table_.erase(oldest);
    }
    by_age_.push_back(peer);
    it = table_
             .emplace(peer, Entry{LogLimiter(options_.interval, options_.burst),
                                  std::prev(by_age_.end())})
             .first;
  } else {
    by_age_.splice(by_age_.end(), by_age_, it->second.age);
  }
  if (now - window_start_ >= options_.interval) {
    window_start_ = now;
    window_lines_ = 0;
  }
  PeerLogVerdict verdict;
  if (window_lines_ >= options_.max_lines_per_interval) {
    it->second.limit.Hold();
  } else {
    verdict.show = it->second.limit.Allow(now, &verdict.held);
    if (verdict.show) {
      ++window_lines_;
      verdict.forgotten = std::exchange(forgotten_, 0);
    }
  }
  SweepInto(now, &verdict.due);
  return verdict;
}

void PeerLogLimiter::SweepInto(absl::Duration now, std::vector<PeerLogSummary>* due) {
  // Note [Paced peer logs]: one walk per interval; summaries are lines.
  if (now - last_sweep_ < options_.interval) return;
  last_sweep_ = now;
  for (const std::string& peer : by_age_) {
    if (window_lines_ >= options_.max_lines_per_interval) return;
    const int64_t held = table_.find(peer)->second.limit.TakeDueHeld(now);
    if (held == 0) continue;
    due->push_back({peer, held});
    ++window_lines_;
  }
  if (forgotten_ > 0 && window_lines_ < options_.max_lines_per_interval) {
    due->push_back({"", std::exchange(forgotten_, 0)});
    ++window_lines_;
  }
}

std::vector<PeerLogSummary> PeerLogLimiter::Flush() {
  std::vector<PeerLogSummary> out;
  int64_t rest = std::exchange(forgotten_, 0);
  for (const std::string& peer : by_age_) {
    const int64_t held = table_.find(peer)->second.limit.TakeHeld();
    if (held == 0) continue;
    if (out.size() < static_cast<size_t>(options_.max_lines_per_interval)) {
      out.push_back({peer, held});
    } else {
      rest += held;
    }
  }
  if (rest > 0) out.push_back({"", rest});
  return out;
}

}  // namespace skipswarm::common
