// The SWIM piggy-back queue: news (signed records and suspicion/death
// opinions) waiting to ride on outgoing gossip. Each item is sent at most
// `limit` times (Membership uses retransmit_mult * ceil(log10(n + 1)));
// items sent fewer times go first, newest first among equals. News about a
// node replaces older news of the same kind about that node.
//
// Thread rule: thread-compatible (guarded by Membership's mutex).
#ifndef SKIPSWARM_MEMBERSHIP_BROADCAST_QUEUE_H_
#define SKIPSWARM_MEMBERSHIP_BROADCAST_QUEUE_H_

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/node_id.h"
#include "proto/gossip.pb.h"

namespace skipswarm::membership {

class BroadcastQueue {
 public:
  void QueueRecord(const common::NodeId& about,
                   const proto::SignedNodeRecord& record);
  void QueueUpdate(const common::NodeId& about,
                   const proto::MembershipUpdate& update);
  // Appends up to `max_records` records and `max_updates` updates to `out`.
  void Fill(int limit, int max_records, int max_updates, proto::Gossip* out);
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  struct Item {
    uint64_t seq = 0;
    int transmits = 0;
    bool is_record = false;
    proto::SignedNodeRecord record;
    proto::MembershipUpdate update;
  };
  // Key: (node, is_record).
  absl::flat_hash_map<std::pair<common::NodeId, bool>, Item> items_;
  uint64_t next_seq_ = 0;
};

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_BROADCAST_QUEUE_H_
