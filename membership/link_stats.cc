#include "membership/link_stats.h"

#include <algorithm>

namespace skipswarm::membership {

void LinkStats::ObserveRtt(const common::NodeId& peer, absl::Duration rtt,
                           absl::Time now) {
  if (rtt < absl::ZeroDuration()) return;
  Link& link = links_[peer];
  const double us = absl::ToDoubleMicroseconds(rtt);
  link.rtt_us = link.rtt_us < 0 ? us
                                : rtt_alpha_ * us + (1 - rtt_alpha_) * link.rtt_us;
  link.measured_at = now;
}

void LinkStats::ObserveTransfer(const common::NodeId& peer, uint64_t bytes,
                                absl::Duration elapsed, absl::Time now) {
  if (elapsed <= absl::ZeroDuration()) return;
  Link& link = links_[peer];
  const double bps = static_cast<double>(bytes) / absl::ToDoubleSeconds(elapsed);
  const bool restart = link.bytes_per_second <= 0 ||
                       now - link.throughput_measured_at > throughput_restart_after_;
  link.bytes_per_second =
      restart ? bps : throughput_alpha_ * bps + (1 - throughput_alpha_) * link.bytes_per_second;
  link.measured_at = now;
  link.throughput_measured_at = now;
}

void LinkStats::Forget(const common::NodeId& peer) { links_.erase(peer); }

absl::Duration LinkStats::Rtt(const common::NodeId& peer) const {
  auto it = links_.find(peer);
  if (it == links_.end() || it->second.rtt_us < 0) {
    return absl::InfiniteDuration();
  }
  return absl::Microseconds(it->second.rtt_us);
}

double LinkStats::BytesPerSecond(const common::NodeId& peer) const {
  auto it = links_.find(peer);
  return it == links_.end() ? 0 : it->second.bytes_per_second;
}

std::vector<proto::LinkSample> LinkStats::Samples(
    const common::NodeId& self) const {
  std::vector<proto::LinkSample> out;
  out.reserve(links_.size());
  for (const auto& [peer, link] : links_) {
    proto::LinkSample s;
    s.set_from(self.Bytes());
    s.set_to(peer.Bytes());
    s.set_rtt_us(link.rtt_us < 0 ? 0 : static_cast<uint64_t>(link.rtt_us));
    s.set_bytes_per_second(link.bytes_per_second);
    s.set_measured_at_unix_ms(absl::ToUnixMillis(link.measured_at));
    if (link.bytes_per_second > 0) {
      s.set_throughput_measured_at_unix_ms(absl::ToUnixMillis(link.throughput_measured_at));
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.to() < b.to();
  });
  return out;
}

}  // namespace skipswarm::membership
