// MeasuredLinksView: a test SwarmView, a StaticSwarmView plus measured links
// as TrainingMembers answers them from gossip (Note [Planning from measured
// links] in node/train/scheduler_planner.cc).
//
//   MeasuredLinksView view(members);
//   view.Measure("d0", "s1a", /*rtt_s=*/0.2, /*bps=*/10e6);  // d0 -> s1a
//
// Thread rule: Measure* before the view is shared; the rest thread-safe.
#ifndef SKIPSWARM_NODE_TRAIN_MEASURED_LINKS_VIEW_H_
#define SKIPSWARM_NODE_TRAIN_MEASURED_LINKS_VIEW_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "node/stage/swarm_view.h"

namespace skipswarm::node {

class MeasuredLinksView final : public SwarmView {
 public:
  explicit MeasuredLinksView(const std::vector<PeerInfo>& members) : members_(members) {}
  // rtt_s <= 0 / bps <= 0: that part unknown. Members by name (NodeId::ForName).
  void Measure(const std::string& from, const std::string& to, double rtt_s, double bps) {
    MeasureIds(common::NodeId::ForName(from), common::NodeId::ForName(to), rtt_s, bps);
  }
  // As Measure, the throughput measured by `from` at `throughput_at` (its
  // wall clock); Measure's samples never age.
  void MeasureAt(const std::string& from, const std::string& to, double rtt_s, double bps,
                 absl::Time throughput_at) {
    MeasureIds(common::NodeId::ForName(from), common::NodeId::ForName(to), rtt_s, bps,
               throughput_at);
  }
  void MeasureIds(const common::NodeId& from, const common::NodeId& to, double rtt_s,
                  double bps, absl::Time throughput_at = absl::InfiniteFuture()) {
    LinkEstimate e;
    if (rtt_s > 0) e.rtt = absl::Seconds(rtt_s);
    e.bytes_per_second = bps;
    e.throughput_measured_at = throughput_at;
    links_[{from, to}] = e;
  }
  std::vector<PeerInfo> Members() const override { return members_.Members(); }
  bool IsAlive(const common::NodeId& id) const override { return members_.IsAlive(id); }
  std::vector<common::NodeId> Replicas(int stage) const override {
    return members_.Replicas(stage);
  }
  void MarkDead(const common::NodeId& id) override { members_.MarkDead(id); }
  uint64_t version() const override { return members_.version(); }
  std::optional<LinkEstimate> Link(const common::NodeId& from,
                                   const common::NodeId& to) const override {
    auto it = links_.find({from, to});
    if (it == links_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<uint64_t> StopAfter(const common::NodeId& id) const override {
    return members_.StopAfter(id);
  }
  std::optional<uint64_t> Incarnation(const common::NodeId& id) const override {
    return members_.Incarnation(id);
  }

 private:
  StaticSwarmView members_;
  std::map<std::pair<common::NodeId, common::NodeId>, LinkEstimate> links_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_MEASURED_LINKS_VIEW_H_
