#include "node/daemon/gossip/evidence_service.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sim_clock.h"
#include "node/compute/evidence_test_util.h"
#include "node/daemon/gossip/evidence_adopter.h"
#include "node/stage/verify_trust.h"
#include "node/transport/node_server.h"

namespace skipswarm::node {
namespace {

using common::NodeId;
using testing::EvidenceKey;
using testing::MakeEvidence;

// X (a newcomer), Y (the trusted verifier), the catcher that kept pieces
// against X and serves them on its one server, and the member that asks.
struct World {
  std::unique_ptr<identity::Identity> x = EvidenceKey('x'), y = EvidenceKey('y');
  NodeId catcher = NodeId::ForName("catcher"), member = NodeId::ForName("member");
  std::string input = Sha256(absl::Cord("the input X and Y both got"));
  common::SimClock clock;
  std::vector<Evidence> kept;
  std::unique_ptr<EvidenceService> service;
  std::unique_ptr<NodeServer> server;

  explicit World(float x_scale, common::QuotaBudget budget = {}) {
    kept.push_back(MakeEvidence(*x, *y, x_scale, input, input));
    EvidenceServiceOptions o;
    o.self = catcher;
    o.swarm_id = testing::kEvidenceSwarm;
    o.credentials = identity::PeerCredentials::Insecure();
    common::PeerQuotaOptions quota;
    quota.service = "evidence";
    quota.member = quota.stranger = budget;
    o.quota = std::make_shared<common::PeerQuota>(quota, &clock);
    o.evidence_against = [this](const NodeId& id) {
      return id == x->id() ? kept : std::vector<Evidence>{};
    };
    service = std::make_unique<EvidenceService>(std::move(o));
    server = std::make_unique<NodeServer>(NodeServerOptions{"127.0.0.1:0"});
    server->builder()->RegisterService(service.get());
    EXPECT_TRUE(server->Start(identity::PeerCredentials::Insecure()).ok());
  }
  ~World() { server->Shutdown(absl::ZeroDuration()); }
  std::string address() const { return absl::StrCat("127.0.0.1:", server->port()); }

  EvidenceFetchOptions Asker(const NodeId& self) const {
    EvidenceFetchOptions o;
    o.self = self;
    o.swarm_id = testing::kEvidenceSwarm;
    o.credentials = identity::PeerCredentials::Insecure();
    return o;
  }
  absl::StatusOr<std::vector<Evidence>> Fetch(const NodeId& self, const NodeId& accused) {
    return FetchEvidence(Asker(self), catcher, address(), accused);
  }

  // The asking member's view: itself, the catcher naming X in its bans, X
  // on probation, Y trusted.
  std::vector<PeerInfo> Live() const {
    std::vector<PeerInfo> live(4);
    live[0].id = member;
    live[1].id = catcher;
    live[1].address = address();
    live[1].bans = {x->id()};
    live[2].id = x->id();
    live[2].on_probation = true;
    live[3].id = y->id();
    return live;
  }
  EvidenceAdopterOptions AdopterOptions() {
    EvidenceAdopterOptions o;
    o.self = member;
    o.lookup.public_key_of = [this](const NodeId& id) -> std::optional<std::string> {
      if (id == x->id()) return x->public_key();
      if (id == y->id()) return y->public_key();
      return std::nullopt;
    };
    o.lookup.trusted = [this](const NodeId& id) { return id != x->id(); };
    o.limits = testing::EvidenceLimits();
    o.judge = testing::Fp32EvidenceJudge;
    o.fetch = [this](const NodeId& accuser, const std::string& address, const NodeId& accused) {
      return FetchEvidence(Asker(member), accuser, address, accused);
    };
    o.worker = false;
    return o;
  }
};

TEST(EvidenceServiceTest, ServesKeptPiecesAndSaysNotFoundOtherwise) {
  World w(1.05f);
  absl::StatusOr<std::vector<Evidence>> pieces = w.Fetch(w.member, w.x->id());
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 1u);
  EXPECT_EQ(CheckEvidence((*pieces)[0], w.x->public_key(), w.y->public_key(),
                          testing::EvidenceLimits(), testing::Fp32EvidenceJudge)
                .kind,
            EvidenceVerdict::kMismatch);
  EXPECT_EQ(w.Fetch(w.member, w.y->id()).status().code(), absl::StatusCode::kNotFound);
  const EvidenceServeCounts c = w.service->counts();
  EXPECT_EQ(c.served, 1);
  EXPECT_EQ(c.pieces_served, 1);
  EXPECT_EQ(c.refused.at("not_found"), 1);
}

TEST(EvidenceServiceTest, AFloodingCallerIsRefusedByItsQuotaOthersAreNot) {
  World w(1.05f, common::QuotaBudget{/*messages_per_second=*/0.1, /*message_burst=*/2});
  const NodeId flooder = NodeId::ForName("flooder");
  int refused = 0;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<std::vector<Evidence>> r = w.Fetch(flooder, w.x->id());
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 8);
  EXPECT_TRUE(w.Fetch(w.member, w.x->id()).ok());  // per caller
  EXPECT_EQ(w.service->counts().refused.at("quota"), 8);
  w.clock.Advance(absl::Seconds(10));  // the bucket refills
  EXPECT_TRUE(w.Fetch(flooder, w.x->id()).ok());
}

TEST(EvidenceServiceTest, ALoneCatchersServedEvidenceBansALyingNewcomer) {
  World w(1.05f);
  EvidenceBans bans;
  EvidenceAdopter adopter(w.AdopterOptions(), &bans, &w.clock);
  const std::vector<PeerInfo> live = w.Live();
  // One accuser: the quorum alone bans nobody.
  EXPECT_TRUE(VerifyQuorumBans(w.member, live, {}).empty());
  adopter.Consider(live, {});
  adopter.RunQueued();
  EXPECT_TRUE(bans.Has(w.x->id()));
  EXPECT_EQ(VerifyQuorumBans(w.member, live, {}, bans.adopted()).count(w.x->id()), 1u);
  EvidenceAdoptionCounts c = adopter.counts();
  EXPECT_EQ(c.fetches, 1);
  EXPECT_EQ(c.adopted, 1);
  EXPECT_EQ(c.pieces.at("convicts"), 1);
  // X leaves the view: the ban goes with it.
  std::vector<PeerInfo> without = live;
  without.erase(without.begin() + 2);
  adopter.Consider(without, {});
  EXPECT_FALSE(bans.Has(w.x->id()));
}

TEST(EvidenceServiceTest, AnHonestNewcomersPiecesBanNobodyAndFetchesArePaced) {
  World w(1.f);  // X was honest: the catcher's piece is a match (or a lie)
  EvidenceBans bans;
  EvidenceAdopter adopter(w.AdopterOptions(), &bans, &w.clock);
  adopter.Consider(w.Live(), {});
  adopter.RunQueued();
  EXPECT_FALSE(bans.Has(w.x->id()));
  EXPECT_EQ(adopter.counts().pieces.at("match"), 1);
  // Asked again at once: the pacer says no; after the period, yes.
  adopter.Consider(w.Live(), {});
  adopter.RunQueued();
  EXPECT_EQ(adopter.counts().fetches, 1);
  w.clock.Advance(absl::Seconds(30));
  adopter.Consider(w.Live(), {});
  adopter.RunQueued();
  EXPECT_EQ(adopter.counts().fetches, 2);
  EXPECT_FALSE(bans.Has(w.x->id()));
}

// Note [Evidence bans]: a ban of a trusted member is fetched for (paced
// alike), but a sketch mismatch against it convicts nobody.
TEST(EvidenceServiceTest, ATrustedAccusedsMismatchIsFetchedButConvictsNobody) {
  World w(1.05f);
  EvidenceBans bans;
  EvidenceAdopterOptions o = w.AdopterOptions();
  o.lookup.trusted = [](const NodeId&) { return true; };
  EvidenceAdopter adopter(std::move(o), &bans, &w.clock);
  std::vector<PeerInfo> live = w.Live();
  live[2].on_probation = false;
  adopter.Consider(live, {});
  adopter.RunQueued();
  EXPECT_EQ(adopter.counts().fetches, 1);
  EXPECT_EQ(adopter.counts().pieces.at("trusted_accused"), 1);
  EXPECT_FALSE(bans.Has(w.x->id()));
  adopter.Consider(live, {});  // paced
  adopter.RunQueued();
  EXPECT_EQ(adopter.counts().fetches, 1);
}

// Note [Evidence bans]: the catcher refused a frame of trusted X that
// proves a false input and serves it; a third member (not the catcher)
// fetches it, adopts the ban and routes around X, X being its stage's last
// trusted host (Note [Trusted verify bans]).
TEST(EvidenceServiceTest, AServedFalseInputProofOfATrustedMemberBansItAtAThirdMember) {
  World w(1.05f);
  const std::unique_ptr<identity::Identity> p = EvidenceKey('p');
  w.kept = {testing::MakeChainedEvidence(*w.x, *w.y, *p, w.input, w.input,
                                         Sha256(absl::Cord("not what P sent")))};
  w.kept.back().answer.Clear();  // the catcher refused the frame: no answer
  EvidenceBans bans;
  EvidenceAdopterOptions o = w.AdopterOptions();
  o.lookup.public_key_of = [&](const NodeId& id) -> std::optional<std::string> {
    if (id == w.x->id()) return w.x->public_key();
    if (id == p->id()) return p->public_key();
    return std::nullopt;
  };
  o.lookup.trusted = [](const NodeId&) { return true; };  // no probation at all
  EvidenceAdopter adopter(std::move(o), &bans, &w.clock);
  std::vector<PeerInfo> live = w.Live();
  live[2].on_probation = false;  // X trusted, stage 2's only host
  live[2].stages = {2};
  live[3].stages = {1};
  PeerInfo before;
  before.id = p->id();
  before.stages = {1};
  live.push_back(before);
  StaticSwarmView view(live);
  VerifyTrust trust;
  VerifiedRoutingView routing(&view, &trust, w.member, &bans);
  EXPECT_EQ(routing.Replicas(2), std::vector<NodeId>{w.x->id()});
  // One accuser of a trusted member: the quorum alone bans nobody.
  EXPECT_TRUE(VerifyQuorumBans(w.member, live, {}).empty());
  adopter.Consider(live, {});
  adopter.RunQueued();
  const EvidenceAdoptionCounts c = adopter.counts();
  EXPECT_EQ(c.fetches, 1);
  EXPECT_EQ(c.pieces.at("false_input"), 1);
  EXPECT_EQ(c.adopted, 1);
  ASSERT_TRUE(bans.Has(w.x->id()));
  EXPECT_EQ(bans.adopted().at(w.x->id()), (EvidenceBan{w.catcher, true}));
  EXPECT_TRUE(routing.Replicas(2).empty());
  for (const PeerInfo& m : routing.Members()) EXPECT_NE(m.id, w.x->id());
  EXPECT_TRUE(routing.IsAlive(w.x->id()));
  // Held now: not fetched for again, even after the period.
  w.clock.Advance(absl::Seconds(60));
  adopter.Consider(live, {});
  adopter.RunQueued();
  EXPECT_EQ(adopter.counts().fetches, 1);
}

}  // namespace
}  // namespace skipswarm::node
