// Note [Gossiped bans]: the quorum rule by which a member adopts a ban it
// did not reach itself (Note [Group bans] in grpc_group.h).
//
// Each member publishes the ids it bans (at most kMaxPublishedBans; a
// longer list counts for nothing). A member adopts a ban of `accused` when
// the distinct live, admitted members that publish it number at least 2
// and more than half of the eligible: the live members other than the
// accused that host a stage the accused hosts (this member included when
// it does). Never on one member's word: a liar that publishes honest ids
// bans nobody alone, and a minority of liars cannot outvote the honest
// peers that share the accused's stages. Reporters that this member bans
// itself do not count, nor do newcomers on probation (BanReport::trusted:
// they count among the eligible only), nor members that share no stage with the accused
// (they never saw its parts), nor the accused. An accused that is not a
// live member is not adopted (its stages are unknown; it sends nothing).
// A member never adopts a ban of itself, nor of a member it shares no
// stage with (it never averages its parts; `self` must be in `members`). The rule is recomputed from the
// current view each time: a ban whose quorum no longer holds (reporters
// left, died or withdrew it) is lifted. An adopted ban applies to
// averaging exactly like a local one (RobustOptions::banned) but, unlike a
// local ban, it is not for good, and a member does not publish bans it
// only adopted (a published ban is first-hand evidence).
//
// A second way in: Note [Verify bans] (node/stage/verify_trust.h), a
// newcomer named by at least two distinct trusted live members, whatever
// stages they host (the hop after a replica judges its outputs and hosts
// another stage), and a trusted member named by two that share no stage
// with it (Note [Trusted verify bans]); AdoptedBan::verify_quorum says
// which rule held.
//
// Not covered: a majority of liars among the accused's peers bans an
// honest member; admission, join work and probation are the defences
// against identities made for voting.
//
// Thread rule: QuorumBans is pure; GossipedBans is thread-compatible.
#ifndef SKIPSWARM_NODE_TRAIN_GOSSIPED_BANS_H_
#define SKIPSWARM_NODE_TRAIN_GOSSIPED_BANS_H_

#include <cstddef>
#include <map>
#include <set>
#include <vector>

#include "common/node_id.h"
#include "membership/record.h"
#include "node/stage/evidence_bans.h"

namespace skipswarm::node {

// The longest ban list a member may publish: what a signed record may carry.
inline constexpr size_t kMaxPublishedBans = membership::kMaxRecordBans;

// One live, admitted member as the view shows it (the caller filters out
// dead and unadmitted members).
struct BanReport {
  common::NodeId member;
  std::vector<int> stages;           // the stages it hosts; 0 = data stage
  std::vector<common::NodeId> bans;  // the ids it publishes as banned
  // False: a newcomer still on probation (Note [Newcomer weight] in
  // robust_sum.h): it counts among the eligible but never as a reporter,
  // so fresh identities cannot vote a ban through.
  bool trusted = true;
};

struct AdoptedBan {
  std::vector<common::NodeId> reporters;  // ascending, distinct
  size_t eligible = 0;                    // the quorum's denominator
  // Adopted by Note [Verify bans] or [Trusted verify bans] (the stage-peer
  // majority did not hold).
  bool verify_quorum = false;
  friend bool operator==(const AdoptedBan& a, const AdoptedBan& b) {
    return a.reporters == b.reporters && a.eligible == b.eligible &&
           a.verify_quorum == b.verify_quorum;
  }
};

// The bans `self` adopts from `members` (Note [Gossiped bans]); ids in
// `own_bans` (this member's local bans) are never among them. `evidenced`:
// the bans this member adopted on checked evidence (Note [Evidence bans] in
// node/stage/evidence_bans.h), which VerifyQuorumBans weighs with the quorum.
std::map<common::NodeId, AdoptedBan> QuorumBans(
    const common::NodeId& self, const std::set<common::NodeId>& own_bans,
    const std::vector<BanReport>& members,
    const EvidencedBans& evidenced = {});

// QuorumBans over time: logs each adoption once, with its reporters, and
// each lift once.
class GossipedBans {
 public:
  struct Change {
    std::vector<common::NodeId> adopted;  // newly adopted, ascending
    std::vector<common::NodeId> lifted;   // no longer held, ascending
  };
  Change Update(const common::NodeId& self, const std::set<common::NodeId>& own_bans,
                const std::vector<BanReport>& members,
                const EvidencedBans& evidenced = {});
  const std::map<common::NodeId, AdoptedBan>& adopted() const { return adopted_; }

 private:
  std::map<common::NodeId, AdoptedBan> adopted_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_GOSSIPED_BANS_H_
