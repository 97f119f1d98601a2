#include "node/stage/evidence_bans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "node/compute/evidence_test_util.h"
#include "node/stage/verify_trust.h"

namespace skipswarm::node {
namespace {

using common::NodeId;
using testing::EvidenceKey;
using testing::EvidenceLimits;
using testing::Fp32EvidenceJudge;
using testing::MakeEvidence;

// X (a newcomer, key 'x'), Y (trusted, key 'y'), another trusted member
// (key 'o'), as this member's view shows them.
struct World {
  std::unique_ptr<identity::Identity> x = EvidenceKey('x'), y = EvidenceKey('y'),
                                      other = EvidenceKey('o'), p = EvidenceKey('p');
  std::string input = Sha256(absl::Cord("the input X and Y both got"));
  std::set<NodeId> trusted = {y->id(), other->id()};
  std::map<NodeId, std::string> keys = {{x->id(), x->public_key()},
                                        {y->id(), y->public_key()},
                                        {other->id(), other->public_key()},
                                        {p->id(), p->public_key()}};

  EvidenceLookup Lookup() const {
    return {[this](const NodeId& id) -> std::optional<std::string> {
              auto it = keys.find(id);
              if (it == keys.end()) return std::nullopt;
              return it->second;
            },
            [this](const NodeId& id) { return trusted.count(id) > 0; }};
  }
  PieceVerdict Judge(const Evidence& e, const NodeId& accused) const {
    return JudgeServedPiece(e, accused, Lookup(), EvidenceLimits(), Fp32EvidenceJudge);
  }
  Evidence Lie() const { return MakeEvidence(*x, *y, 1.05f, input, input); }
  // X at hop 2 binds the hop before P's signed commitment to output
  // `p_output` and signs `x_input` as its input; Y answered for `input`.
  Evidence Chained(const std::string& p_output, const std::string& x_input) const {
    return testing::MakeChainedEvidence(*x, *y, *p, input, p_output, x_input);
  }
};

TEST(EvidenceBansTest, AValidMismatchAgainstANewcomerConvictsIt) {
  World w;
  EXPECT_EQ(w.Judge(w.Lie(), w.x->id()), PieceVerdict::kConvicts);
}

TEST(EvidenceBansTest, AForgedOutputConvictsNobody) {
  World w;
  // The catcher scales an honest X's output and fixes the committed hash.
  Evidence e = MakeEvidence(*w.x, *w.y, 1.f, w.input, w.input);
  const std::vector<float> forged = testing::EvidenceActivation(1.05f);
  e.output = absl::Cord(absl::string_view(reinterpret_cast<const char*>(forged.data()),
                                          forged.size() * sizeof(float)));
  e.commitment.set_output_sha256(Sha256(e.output));
  EXPECT_EQ(w.Judge(e, w.x->id()), PieceVerdict::kInvalid);
}

TEST(EvidenceBansTest, APieceSignedByAnotherKeyConvictsNobody) {
  World w;
  // Signed by the catcher's own key under X's name.
  Evidence e = w.Lie();
  const std::string producer = e.commitment.producer();
  ASSERT_TRUE(SignCommitment(*w.other, &e.commitment).ok());
  e.commitment.set_producer(producer);
  EXPECT_EQ(w.Judge(e, w.x->id()), PieceVerdict::kInvalid);
  // Y's answer signed by someone else under Y's name.
  Evidence f = w.Lie();
  const std::string answerer = f.answer.answerer();
  ASSERT_TRUE(SignAnswer(*w.other, testing::kEvidenceSwarm, w.input, &f.answer).ok());
  f.answer.set_answerer(answerer);
  EXPECT_EQ(w.Judge(f, w.x->id()), PieceVerdict::kInvalid);
}

TEST(EvidenceBansTest, InputsThatDifferConvictNobody) {
  World w;
  const Evidence e =
      MakeEvidence(*w.x, *w.y, 1.05f, w.input, Sha256(absl::Cord("another input")));
  EXPECT_EQ(w.Judge(e, w.x->id()), PieceVerdict::kInputsDiffer);
}

TEST(EvidenceBansTest, AMatchConvictsNobody) {
  World w;
  EXPECT_EQ(w.Judge(MakeEvidence(*w.x, *w.y, 1.f, w.input, w.input), w.x->id()),
            PieceVerdict::kMatch);
}

TEST(EvidenceBansTest, ATrustedAccusedKeepsTheQuorumRule) {
  World w;
  w.trusted.insert(w.x->id());
  EXPECT_EQ(w.Judge(w.Lie(), w.x->id()), PieceVerdict::kTrustedAccused);
}

TEST(EvidenceBansTest, AnUntrustedVerifierOrAnUnknownMemberConvictsNobody) {
  World w;
  w.trusted.erase(w.y->id());
  EXPECT_EQ(w.Judge(w.Lie(), w.x->id()), PieceVerdict::kVerifierUntrusted);
  World gone;
  gone.keys.erase(gone.y->id());
  EXPECT_EQ(gone.Judge(gone.Lie(), gone.x->id()), PieceVerdict::kUnknownMember);
}

TEST(EvidenceBansTest, APieceAboutAnotherMemberIsNotEvidenceAgainstTheAccused) {
  World w;
  EXPECT_EQ(w.Judge(w.Lie(), w.other->id()), PieceVerdict::kNotTheAccused);
}

PeerInfo Member(const NodeId& id, bool probation, std::vector<NodeId> bans = {}) {
  PeerInfo p;
  p.id = id;
  p.stages = {1};
  p.on_probation = probation;
  p.bans = std::move(bans);
  return p;
}

TEST(EvidenceBansTest, AnEvidenceBanJoinsTheQuorumsBansWhileTheNewcomerIsLive) {
  const NodeId self = NodeId::ForName("self"), x = NodeId::ForName("x"),
               catcher = NodeId::ForName("catcher");
  std::vector<PeerInfo> live = {Member(self, false), Member(catcher, false, {x}),
                                Member(x, true)};
  // One accuser: the quorum alone does not ban.
  EXPECT_TRUE(VerifyQuorumBans(self, live, {}).empty());
  const EvidencedBans evidenced = {{x, EvidenceBan{catcher}}};
  auto bans = VerifyQuorumBans(self, live, {}, evidenced);
  ASSERT_EQ(bans.count(x), 1u);
  EXPECT_EQ(bans.at(x), std::vector<NodeId>{catcher});
  // Gone from the view: dropped, like the quorum's.
  live.pop_back();
  EXPECT_TRUE(VerifyQuorumBans(self, live, {}, evidenced).empty());
  // Trusted by now: the quorum rule only.
  live.push_back(Member(x, false));
  EXPECT_TRUE(VerifyQuorumBans(self, live, {}, evidenced).empty());
}

// Note [Evidence bans]: a ban that rests on a false-input proof holds
// whatever the accused's trust; one on a sketch mismatch does not.
TEST(EvidenceBansTest, AProvenBanHoldsForATrustedMemberAndOutlivesProbation) {
  const NodeId self = NodeId::ForName("self"), x = NodeId::ForName("x"),
               other = NodeId::ForName("other"), catcher = NodeId::ForName("catcher");
  // X trusted, another trusted host of stage 1 beside it; one accuser.
  std::vector<PeerInfo> live = {Member(self, false), Member(catcher, false, {x}),
                                Member(x, false), Member(other, false)};
  EXPECT_TRUE(VerifyQuorumBans(self, live, {}, {{x, EvidenceBan{catcher}}}).empty());
  auto bans = VerifyQuorumBans(self, live, {}, {{x, EvidenceBan{catcher, true}}});
  ASSERT_EQ(bans.count(x), 1u);
  EXPECT_EQ(bans.at(x), std::vector<NodeId>{catcher});
  // On probation too; gone from the view, dropped; never self.
  live[2].on_probation = true;
  EXPECT_EQ(VerifyQuorumBans(self, live, {}, {{x, EvidenceBan{catcher, true}}}).count(x), 1u);
  live.erase(live.begin() + 2);
  EXPECT_TRUE(VerifyQuorumBans(self, live, {}, {{x, EvidenceBan{catcher, true}}}).empty());
  EXPECT_TRUE(VerifyQuorumBans(self, live, {}, {{self, EvidenceBan{catcher, true}}}).empty());
}

TEST(EvidenceBansTest, AProofUpgradesAnAdoptedBanAndRoutingLeavesOutTheTrustedLiar) {
  const NodeId self = NodeId::ForName("self"), x = NodeId::ForName("x"),
               catcher = NodeId::ForName("catcher"), other = NodeId::ForName("other");
  StaticSwarmView view({Member(self, false), Member(catcher, false, {x}), Member(x, true),
                        Member(other, false)});
  VerifyTrust trust;
  EvidenceBans evidence;
  VerifiedRoutingView routing(&view, &trust, self, &evidence);
  EXPECT_TRUE(evidence.Adopt(x, catcher));  // a newcomer's mismatch
  EXPECT_EQ(routing.Replicas(1).size(), 3u);
  const uint64_t before = evidence.generation();
  EXPECT_TRUE(evidence.Adopt(x, other, /*proven=*/true));  // then a proof
  EXPECT_GT(evidence.generation(), before);
  EXPECT_EQ(evidence.adopted().at(x), (EvidenceBan{other, true}));
  EXPECT_FALSE(evidence.Adopt(x, catcher, /*proven=*/true));  // once
  EXPECT_FALSE(evidence.Adopt(x, catcher));  // a mismatch never weakens it
  EXPECT_EQ(evidence.adopted().at(x), (EvidenceBan{other, true}));
  // X leaves probation: the proven ban keeps it out of routes.
  StaticSwarmView trusted_view({Member(self, false), Member(catcher, false, {x}),
                                Member(x, false), Member(other, false)});
  VerifiedRoutingView trusted_routing(&trusted_view, &trust, self, &evidence);
  const std::vector<NodeId> replicas = trusted_routing.Replicas(1);
  EXPECT_EQ(std::count(replicas.begin(), replicas.end(), x), 0);
  EXPECT_EQ(replicas.size(), 3u);
}

TEST(EvidenceBansTest, RoutingLeavesOutAMemberAdoptedOnEvidence) {
  const NodeId self = NodeId::ForName("self"), x = NodeId::ForName("x"),
               catcher = NodeId::ForName("catcher");
  StaticSwarmView view({Member(self, false), Member(catcher, false, {x}), Member(x, true)});
  VerifyTrust trust;
  EvidenceBans evidence;
  VerifiedRoutingView routing(&view, &trust, self, &evidence);
  EXPECT_EQ(routing.Replicas(1).size(), 3u);
  EXPECT_TRUE(evidence.Adopt(x, catcher));
  EXPECT_FALSE(evidence.Adopt(x, catcher));
  EXPECT_EQ(routing.Replicas(1).size(), 2u);
  evidence.Retain([&](const NodeId& id) { return id != x; });
  EXPECT_EQ(routing.Replicas(1).size(), 3u);
}

TEST(EvidenceBansTest, ThePacerBoundsFetchesPerPairPeriodAndOutstanding) {
  EvidenceFetchPacer pacer(EvidenceFetchPacerOptions{absl::Seconds(30), 2, 512});
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b"), x = NodeId::ForName("x"),
               z = NodeId::ForName("z");
  EXPECT_TRUE(pacer.TryStart(a, x, absl::Seconds(0)));
  EXPECT_FALSE(pacer.TryStart(a, x, absl::Seconds(1)));  // within the period
  EXPECT_TRUE(pacer.TryStart(b, x, absl::Seconds(1)));
  EXPECT_FALSE(pacer.TryStart(a, z, absl::Seconds(1)));  // two outstanding
  pacer.Done();
  pacer.Done();
  EXPECT_FALSE(pacer.TryStart(a, x, absl::Seconds(29)));
  EXPECT_TRUE(pacer.TryStart(a, x, absl::Seconds(30)));
}

TEST(EvidenceBansTest, AFalseInputConvictsTheProducerWhateverItsTrust) {
  World w;
  const std::string other = Sha256(absl::Cord("another input"));
  // X signed `other` as its input beside P's commitment to `input`.
  Evidence e = w.Chained(w.input, other);
  EXPECT_EQ(w.Judge(e, w.x->id()), PieceVerdict::kProvenFalseInput);
  // Without Y's answer (a receiver that refused the frame kept it).
  Evidence refused = e;
  refused.answer.Clear();
  EXPECT_EQ(w.Judge(refused, w.x->id()), PieceVerdict::kProvenFalseInput);
  // A trusted X too: its own signatures contradict each other.
  w.trusted.insert(w.x->id());
  EXPECT_EQ(w.Judge(e, w.x->id()), PieceVerdict::kProvenFalseInput);
  EXPECT_EQ(w.Judge(refused, w.x->id()), PieceVerdict::kProvenFalseInput);
  EXPECT_TRUE(Convicts(PieceVerdict::kProvenFalseInput));
  EXPECT_STREQ(PieceVerdictName(PieceVerdict::kProvenFalseInput), "false_input");
  // Still only against its producer.
  EXPECT_EQ(w.Judge(e, w.other->id()), PieceVerdict::kNotTheAccused);
  // An honest chain against a trusted X keeps the quorum rule.
  EXPECT_EQ(w.Judge(w.Chained(w.input, w.input), w.x->id()), PieceVerdict::kTrustedAccused);
}

TEST(EvidenceBansTest, ATamperedFalseInputConvictsNobody) {
  World w;
  w.trusted.insert(w.x->id());
  const std::string other = Sha256(absl::Cord("another input"));
  // The catcher rewrites X's input hash without X's key.
  Evidence e = w.Chained(w.input, w.input);
  e.commitment.set_input_sha256(other);
  EXPECT_NE(w.Judge(e, w.x->id()), PieceVerdict::kConvicts);
  // The catcher swaps the carried commitment for another P signed.
  Evidence swapped = w.Chained(w.input, w.input);
  swapped.input_commitment = w.Chained(other, other).input_commitment;
  EXPECT_NE(w.Judge(swapped, w.x->id()), PieceVerdict::kConvicts);
  // P's signature forged by another key under P's name (X's binding, of
  // the signed bytes only, still holds): the hop before's key refuses it.
  Evidence forged = w.Chained(w.input, other);
  const std::string producer = forged.input_commitment->producer();
  ASSERT_TRUE(SignCommitment(*w.other, &*forged.input_commitment).ok());
  forged.input_commitment->set_producer(producer);
  forged.answer.Clear();
  EXPECT_NE(w.Judge(forged, w.x->id()), PieceVerdict::kConvicts);
  // No record key for the hop before: nothing proven.
  Evidence unknown = w.Chained(w.input, other);
  unknown.answer.Clear();
  w.keys.erase(w.p->id());
  EXPECT_NE(w.Judge(unknown, w.x->id()), PieceVerdict::kConvicts);
}

}  // namespace
}  // namespace skipswarm::node
