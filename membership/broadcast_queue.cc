#include "membership/broadcast_queue.h"

#include <algorithm>
#include <vector>

namespace skipswarm::membership {

void BroadcastQueue::QueueRecord(const common::NodeId& about,
                                 const proto::SignedNodeRecord& record) {
  Item& item = items_[{about, true}];
  item = Item();
  item.seq = ++next_seq_;
  item.is_record = true;
  item.record = record;
}

void BroadcastQueue::QueueUpdate(const common::NodeId& about,
                                 const proto::MembershipUpdate& update) {
  Item& item = items_[{about, false}];
  item = Item();
  item.seq = ++next_seq_;
  item.update = update;
}

void BroadcastQueue::Fill(int limit, int max_records, int max_updates,
                          proto::Gossip* out) {
  std::vector<std::pair<std::pair<common::NodeId, bool>, Item*>> order;
  order.reserve(items_.size());
  for (auto& [key, item] : items_) order.push_back({key, &item});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second->transmits != b.second->transmits) {
      return a.second->transmits < b.second->transmits;
    }
    return a.second->seq > b.second->seq;
  });
  int records = 0, updates = 0;
  std::vector<std::pair<common::NodeId, bool>> done;
  for (auto& [key, item] : order) {
    if (item->is_record) {
      if (records >= max_records) continue;
      *out->add_records() = item->record;
      ++records;
    } else {
      if (updates >= max_updates) continue;
      *out->add_updates() = item->update;
      ++updates;
    }
    if (++item->transmits >= limit) done.push_back(key);
  }
  for (const auto& key : done) items_.erase(key);
}

}  // namespace skipswarm::membership
