#include "node/train/gossiped_bans.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "node/stage/verify_trust.h"

namespace skipswarm::node {

using common::NodeId;

namespace {

bool ShareAStage(const std::vector<int>& a, const std::vector<int>& b) {
  for (int s : a) {
    if (std::find(b.begin(), b.end(), s) != b.end()) return true;
  }
  return false;
}

}  // namespace

std::map<NodeId, AdoptedBan> QuorumBans(const NodeId& self, const std::set<NodeId>& own_bans,
                                        const std::vector<BanReport>& members,
                                        const EvidencedBans& evidenced) {
  // One entry per member (the first one), so a member listed twice is one
  // voice; its published ids deduplicated, an over-long list dropped.
  std::map<NodeId, const BanReport*> by_id;
  std::map<NodeId, std::set<NodeId>> published;
  for (const BanReport& m : members) {
    if (!by_id.emplace(m.member, &m).second) continue;
    if (m.member == self || !m.trusted || m.bans.size() > kMaxPublishedBans) continue;
    published[m.member].insert(m.bans.begin(), m.bans.end());
  }
  std::set<NodeId> accused_ids;
  for (const auto& [reporter, ids] : published) accused_ids.insert(ids.begin(), ids.end());
  for (const auto& [accused, ban] : evidenced) accused_ids.insert(accused);
  // Note [Verify bans]: a newcomer named by two trusted members anywhere; a
  // trusted member by two that share no stage with it.
  std::vector<PeerInfo> live;
  for (const auto& [id, m] : by_id) {
    PeerInfo p;
    p.id = id;
    p.stages = m->stages;
    p.on_probation = !m->trusted;
    auto it = published.find(id);
    if (it != published.end()) p.bans.assign(it->second.begin(), it->second.end());
    live.push_back(std::move(p));
  }
  const std::map<NodeId, std::vector<NodeId>> verify = VerifyQuorumBans(self, live, own_bans, evidenced);

  std::map<NodeId, AdoptedBan> out;
  for (const NodeId& accused : accused_ids) {
    if (accused == self || own_bans.count(accused) > 0) continue;
    auto it = by_id.find(accused);
    if (it == by_id.end()) continue;  // not a live member
    const std::vector<int>& stages = it->second->stages;
    auto me = by_id.find(self);
    if (me == by_id.end() || !ShareAStage(me->second->stages, stages)) continue;  // never sees it
    AdoptedBan ban;
    for (const auto& [id, m] : by_id) {
      if (id == accused || !ShareAStage(m->stages, stages)) continue;
      ++ban.eligible;
      if (id == self || own_bans.count(id) > 0) continue;
      auto p = published.find(id);
      if (p != published.end() && p->second.count(accused) > 0) ban.reporters.push_back(id);
    }
    if (ban.reporters.size() >= 2 && 2 * ban.reporters.size() > ban.eligible) {
      out.emplace(accused, std::move(ban));
      continue;
    }
    auto v = verify.find(accused);
    if (v != verify.end()) {
      ban.reporters = v->second;
      ban.verify_quorum = true;
      out.emplace(accused, std::move(ban));
    }
  }
  return out;
}

GossipedBans::Change GossipedBans::Update(const NodeId& self, const std::set<NodeId>& own_bans,
                                          const std::vector<BanReport>& members,
                                          const EvidencedBans& evidenced) {
  std::map<NodeId, AdoptedBan> now = QuorumBans(self, own_bans, members, evidenced);
  Change change;
  for (const auto& [id, ban] : now) {
    if (adopted_.count(id) > 0) continue;
    change.adopted.push_back(id);
    std::vector<std::string> names;
    for (const NodeId& r : ban.reporters) names.push_back(r.ShortString());
    if (ban.verify_quorum && ban.reporters.size() < kVerifyBanQuorum) {
      LOG(WARNING) << "adopting the output checks' ban of " << id.ShortString()
                   << " on evidence served by " << absl::StrJoin(names, ", ")
                   << " and checked here (Note [Evidence bans])";
      continue;
    }
    if (ban.verify_quorum) {
      LOG(WARNING) << "adopting the output checks' ban of " << id.ShortString()
                   << " published by " << ban.reporters.size()
                   << " trusted members (Note [Verify bans]): "
                   << absl::StrJoin(names, ", ");
      continue;
    }
    LOG(WARNING) << "adopting the ban of " << id.ShortString() << " published by "
                 << ban.reporters.size() << " of the " << ban.eligible
                 << " live members that share a stage with it: " << absl::StrJoin(names, ", ");
  }
  for (const auto& [id, ban] : adopted_) {
    if (now.count(id) > 0 || own_bans.count(id) > 0) continue;  // held, or banned here now
    change.lifted.push_back(id);
    LOG(WARNING) << "lifting the adopted ban of " << id.ShortString()
                 << ": its quorum no longer holds";
  }
  adopted_ = std::move(now);
  return change;
}

}  // namespace skipswarm::node
