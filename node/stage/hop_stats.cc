#include "node/stage/hop_stats.h"

#include <algorithm>
#include <cmath>

namespace skipswarm::node {
namespace {

// Upper bounds of the latency buckets, seconds (the last is +Inf).
const std::vector<double>& Bounds() {
  static const std::vector<double>* const kBounds = new std::vector<double>{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  return *kBounds;
}

}  // namespace

HopStats::HopStats(HopStatsOptions options)
    : options_(options), buckets_(Bounds().size() + 1, 0) {}

void HopStats::RecordAck(const common::NodeId& peer, absl::Duration latency) {
  const double s = absl::ToDoubleSeconds(latency);
  const auto& b = Bounds();
  const size_t i = std::lower_bound(b.begin(), b.end(), s) - b.begin();
  absl::MutexLock lock(&mu_);
  std::deque<absl::Duration>& q = samples_[peer];
  q.push_back(latency);
  while (static_cast<int>(q.size()) > options_.window) q.pop_front();
  ++buckets_[i];
  ++count_;
  sum_s_ += s;
}

void HopStats::RecordSent(const common::NodeId& peer, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  PeerTraffic& t = traffic_[peer];
  t.bytes_sent += bytes;
  ++t.frames_sent;
}

void HopStats::RecordReceived(const common::NodeId& peer, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  PeerTraffic& t = traffic_[peer];
  t.bytes_received += bytes;
  ++t.frames_received;
}

absl::Duration HopStats::Deadline(const common::NodeId& peer) const {
  std::vector<absl::Duration> v;
  {
    absl::MutexLock lock(&mu_);
    auto it = samples_.find(peer);
    if (it == samples_.end() || it->second.empty() ||
        static_cast<int>(it->second.size()) < options_.min_samples) {
      return options_.initial;
    }
    v.assign(it->second.begin(), it->second.end());
  }
  const size_t k = std::min(v.size() - 1,
                            static_cast<size_t>(std::ceil(options_.quantile * v.size())) - 1);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return std::clamp(v[k] * options_.factor, options_.min, options_.initial);
}

HopHistogram HopStats::Histogram() const {
  HopHistogram h;
  h.bounds_s = Bounds();
  absl::MutexLock lock(&mu_);
  int64_t run = 0;
  for (size_t i = 0; i < h.bounds_s.size(); ++i) {
    run += buckets_[i];
    h.cumulative.push_back(run);
  }
  h.count = count_;
  h.sum_s = sum_s_;
  return h;
}

std::map<common::NodeId, PeerTraffic> HopStats::Traffic() const {
  absl::MutexLock lock(&mu_);
  return traffic_;
}

}  // namespace skipswarm::node
