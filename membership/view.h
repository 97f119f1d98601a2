// A consistent snapshot of one node's picture of the swarm (docs/DESIGN.md §1
// "view"): who is a member and in what state, what each hosts, how fast it
// computes, and the measured links between members. Planners take a View;
// two nodes whose views have the same digest() plan from the same swarm.
//
//   View view = membership->GetView();
//   for (const MemberInfo& m : view.members)
//     if (m.state == proto::MEMBER_STATE_ALIVE) ...
//
// Thread rule: value types; thread-compatible.
#ifndef SKIPSWARM_MEMBERSHIP_VIEW_H_
#define SKIPSWARM_MEMBERSHIP_VIEW_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/node_id.h"
#include "proto/gossip.pb.h"

namespace skipswarm::membership {

struct MemberInfo {
  common::NodeId id;
  proto::MemberState state = proto::MEMBER_STATE_ALIVE;
  uint64_t incarnation = 0;
  std::vector<std::string> addresses;
  // Its record says it cannot be dialed (behind NAT; Note [Outbound-only
  // members] in membership_impl.h).
  bool outbound_only = false;
  std::vector<uint32_t> stages;
  // Trains its own subnetwork of `stages`; never a pipeline hop
  // (NodeRecord.subnetwork).
  bool subnetwork = false;
  uint32_t memory_slots = 0;
  double seconds_per_layer_per_sample = 0;
  std::map<uint32_t, uint64_t> stage_digests;
  uint64_t iteration = 0;
  // With outbound_only: the members whose Relay service carries
  // connections to it, best first (NodeRecord.relays).
  std::vector<common::NodeId> relays;
  // Its record says it takes no new micro-batches (NodeRecord.paused).
  bool paused = false;
  // Its record says its state is still being fetched: in its replica
  // groups, not routed yet (NodeRecord.entering).
  bool entering = false;
  // Members its record vouches for (NodeRecord.vouches; Note [Newcomer
  // probation] in node/daemon/gossip/training_members.h).
  std::vector<common::NodeId> vouches;
  // Members its record names as banned from its averaging (NodeRecord.bans;
  // Note [Gossiped bans] in node/train/gossiped_bans.h).
  std::vector<common::NodeId> bans;
  // Its record says it answers verify-only frames (NodeRecord.verify_frames).
  bool verify_frames = false;
  // Its record says it signs its forward frames (NodeRecord.sign_frames).
  bool sign_frames = false;
  // Its raw Ed25519 public key, from its signed record (the key its id
  // hashes; checked when the record was admitted).
  std::string public_key;
  // Its record says it is about to leave, or stops as a stage's last
  // replica (NodeRecord.leaving, NodeRecord.stopping).
  bool leaving = false;
  bool stopping = false;
  uint64_t stop_after = 0;  // with `stopping`: the last iteration it trains
  // Since when (this node's steady clock) the member is in `state`.
  absl::Duration state_since;

  bool live() const {
    return state == proto::MEMBER_STATE_ALIVE ||
           state == proto::MEMBER_STATE_SUSPECT;
  }
};

struct LinkInfo {
  common::NodeId from;
  common::NodeId to;
  absl::Duration rtt;          // smoothed; InfiniteDuration when unknown
  double bytes_per_second = 0; // smoothed; 0 when unknown
  absl::Time measured_at;      // latest sample of either kind (sender's clock)
  // Latest throughput sample (sender's clock); measured_at when the sender
  // did not say (LinkSample.throughput_measured_at_unix_ms).
  absl::Time throughput_measured_at;
};

struct View {
  common::NodeId self;
  // Every known member including this node and tombstones (DEAD, LEFT),
  // sorted by id.
  std::vector<MemberInfo> members;
  // Latest sample per (from, to), sorted by (from, to).
  std::vector<LinkInfo> links;
  // Bumped by every change this node applies.
  uint64_t version = 0;

  // Members that count for planning: ALIVE or SUSPECT.
  std::vector<const MemberInfo*> Live() const;
  const MemberInfo* Find(const common::NodeId& id) const;
  // Stable hash (identical on every machine) of the live member set, their
  // incarnations and hosted stages. Equal digests = same member set and
  // stage map.
  uint64_t digest() const;
};

// Change notification (Membership::AddListener).
struct MemberChange {
  common::NodeId id;
  proto::MemberState old_state = proto::MEMBER_STATE_UNSPECIFIED;  // new member
  proto::MemberState new_state = proto::MEMBER_STATE_UNSPECIFIED;
  // The member's signed record changed (stages, slots, speed, addresses...).
  bool record_changed = false;
};

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_VIEW_H_
