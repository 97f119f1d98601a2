#include "node/compute/evidence.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "identity/identity.h"
#include "model/output_sketch.h"
#include "node/compute/evidence_test_util.h"
#include "node/compute/sketch_wire.h"

namespace skipswarm::node {
namespace {

using testing::EvidenceActivation;
using testing::EvidenceKey;
using testing::EvidenceLimits;
using testing::EvidencePayload;
using testing::Fp32EvidenceJudge;
using testing::kEvidenceSwarm;

// X (key 'x') produced `x_output` from an input hashed to `x_input`; Y (key
// 'y') sketched the honest output of an input hashed to `y_input`.
struct World {
  std::unique_ptr<identity::Identity> x = EvidenceKey('x'), y = EvidenceKey('y'),
                                      other = EvidenceKey('o');
  std::string input = Sha256(absl::Cord("the input X and Y both got"));

  Evidence Make(float x_scale, const std::string& y_input) const {
    return testing::MakeEvidence(*x, *y, x_scale, input, y_input);
  }
  EvidenceVerdict Check(const Evidence& e) const {
    return CheckEvidence(e, x->public_key(), y->public_key(), EvidenceLimits(),
                         Fp32EvidenceJudge);
  }
};

TEST(EvidenceTest, ALiarsSignedOutputAgainstAnHonestSketchIsAValidMismatch) {
  World w;
  const EvidenceVerdict v = w.Check(w.Make(1.05f, w.input));
  EXPECT_EQ(v.kind, EvidenceVerdict::kMismatch) << v.reason;
  EXPECT_TRUE(v.valid());
  EXPECT_FALSE(v.sketch.match);
}

TEST(EvidenceTest, AnHonestPairIsAValidMatchThatConvictsNobody) {
  World w;
  const EvidenceVerdict v = w.Check(w.Make(1.f, w.input));
  EXPECT_EQ(v.kind, EvidenceVerdict::kMatch) << v.reason;
  EXPECT_TRUE(v.valid());
}

TEST(EvidenceTest, ACatcherCannotForgeXsOutput) {
  World w;
  // The catcher replaces an honest X's output with a scaled one and fixes
  // the committed hash: X's signature no longer covers it.
  Evidence e = w.Make(1.f, w.input);
  e.output = EvidencePayload(EvidenceActivation(1.05f));
  e.commitment.set_output_sha256(Sha256(e.output));
  EXPECT_EQ(w.Check(e).kind, EvidenceVerdict::kBadXSignature);
  // Signed by another key under X's name, or checked with another key.
  Evidence f = w.Make(1.05f, w.input);
  std::string producer = f.commitment.producer();
  ASSERT_TRUE(SignCommitment(*w.other, &f.commitment).ok());
  f.commitment.set_producer(producer);
  EXPECT_EQ(w.Check(f).kind, EvidenceVerdict::kBadXSignature);
  const Evidence g = w.Make(1.05f, w.input);
  EXPECT_EQ(CheckEvidence(g, w.other->public_key(), w.y->public_key(), EvidenceLimits(), Fp32EvidenceJudge).kind,
            EvidenceVerdict::kBadXSignature);
}

TEST(EvidenceTest, ACatcherCannotForgeYsSketch) {
  World w;
  Evidence e = w.Make(1.f, w.input);
  e.answer.mutable_sketch()->set_projections(0, e.answer.sketch().projections(0) + 1);
  EXPECT_EQ(w.Check(e).kind, EvidenceVerdict::kBadYSignature);
  Evidence f = w.Make(1.05f, w.input);
  EXPECT_EQ(CheckEvidence(f, w.x->public_key(), w.other->public_key(), EvidenceLimits(), Fp32EvidenceJudge).kind,
            EvidenceVerdict::kBadYSignature);
  // Y's answer in another swarm's evidence.
  Evidence g = w.Make(1.05f, w.input);
  ASSERT_TRUE(SignAnswer(*w.y, "swarm-b", w.input, &g.answer).ok());
  EXPECT_EQ(w.Check(g).kind, EvidenceVerdict::kBadYSignature);
}

TEST(EvidenceTest, APayloadOtherThanTheCommittedOneIsRefused) {
  World w;
  Evidence e = w.Make(1.05f, w.input);
  e.output = EvidencePayload(EvidenceActivation(1.1f));  // same size, other bytes
  EXPECT_EQ(w.Check(e).kind, EvidenceVerdict::kPayloadHashDiffers);
  e.output.Append("x");
  EXPECT_EQ(w.Check(e).kind, EvidenceVerdict::kPayloadHashDiffers);
}

TEST(EvidenceTest, AHopBeforeFeedingYAnotherInputCannotFrameX) {
  World w;
  const EvidenceVerdict v = w.Check(w.Make(1.05f, Sha256(absl::Cord("another input"))));
  EXPECT_EQ(v.kind, EvidenceVerdict::kInputsDiffer);
  EXPECT_FALSE(v.valid());
}

// X at hop 2 of the same visit, after hop before P (key 'p') whose signed
// commitment says it sent output `p_output`; X binds that commitment and
// signs `x_input` as its input; Y (at hop 2 too) signed `y_input`.
Evidence Chained(const World& w, float x_scale, const std::string& p_output,
                 const std::string& x_input, const std::string& y_input) {
  Evidence e = w.Make(x_scale, y_input);
  proto::OutputCommitment p = e.commitment;  // P's visit, one hop earlier
  p.set_hop_index(1);
  p.set_input_sha256(Sha256(absl::Cord("P's input")));
  p.set_output_sha256(p_output);
  CHECK(SignCommitment(*EvidenceKey('p'), &p).ok());
  e.commitment.set_hop_index(2);
  e.commitment.set_input_sha256(x_input);
  e.commitment.set_input_commitment_sha256(CommitmentDigest(p));
  CHECK(SignCommitment(*w.x, &e.commitment).ok());
  e.input_commitment = p;
  e.answer.set_hop_index(2);
  CHECK(SignAnswer(*w.y, kEvidenceSwarm, y_input, &e.answer).ok());
  return e;
}

TEST(EvidenceTest, XsBoundInputCommitmentTellsAFalseInputFromAnHonestOne) {
  World w;
  const std::string other = Sha256(absl::Cord("another input"));
  // Honest X, P and Y: the bound commitment changes nothing.
  EXPECT_EQ(w.Check(Chained(w, 1.05f, w.input, w.input, w.input)).kind,
            EvidenceVerdict::kMismatch);
  EXPECT_EQ(w.Check(Chained(w, 1.f, w.input, w.input, w.input)).kind, EvidenceVerdict::kMatch);
  // X's input is P's committed output; Y's differs: P or Y lied, not X.
  EvidenceVerdict v = w.Check(Chained(w, 1.05f, w.input, w.input, other));
  EXPECT_EQ(v.kind, EvidenceVerdict::kInputsDiffer);
  EXPECT_FALSE(v.proves_x_lied());
  EXPECT_NE(v.reason.find("hop before's committed output"), std::string::npos) << v.reason;
  // X signed a false input hash beside P's commitment (a catcher kept a
  // frame it should have refused): X's own signature convicts it, whatever
  // Y signed.
  for (const std::string& y_input : {w.input, other}) {
    v = w.Check(Chained(w, 1.05f, w.input, other, y_input));
    EXPECT_EQ(v.kind, EvidenceVerdict::kFalseInput) << v.reason;
    EXPECT_TRUE(v.proves_x_lied());
    EXPECT_FALSE(v.valid());
  }
}

TEST(EvidenceTest, ACatcherCannotSwapOrStripTheBoundInputCommitment) {
  World w;
  const std::string other = Sha256(absl::Cord("another input"));
  // An honest X framed with another commitment P signed for the visit: X's
  // signature binds the one it got, so the swap convicts nobody.
  Evidence e = Chained(w, 1.05f, w.input, w.input, other);
  e.input_commitment = Chained(w, 1.05f, other, other, other).input_commitment;
  EvidenceVerdict v = w.Check(e);
  EXPECT_EQ(v.kind, EvidenceVerdict::kInputsDiffer) << v.reason;
  EXPECT_EQ(v.reason.find("hop before's committed output"), std::string::npos) << v.reason;
  // Stripped from X's commitment: X's signature no longer holds.
  Evidence f = Chained(w, 1.05f, w.input, w.input, w.input);
  f.commitment.clear_input_commitment_sha256();
  EXPECT_EQ(w.Check(f).kind, EvidenceVerdict::kBadXSignature);
  // A binding of the wrong size is malformed.
  Evidence g = Chained(w, 1.05f, w.input, w.input, w.input);
  g.commitment.set_input_commitment_sha256("short");
  EXPECT_EQ(w.Check(g).kind, EvidenceVerdict::kMalformed);
  // Without a bound commitment the signed bytes are v1's (what X signs
  // where it received none, and what an older signer signs).
  EXPECT_EQ(CommitmentSigningBytes(w.Make(1.f, w.input).commitment).substr(8, 30),
            "skipswarm.output_commitment.v1");
  EXPECT_EQ(CommitmentSigningBytes(f.commitment).substr(8, 30), "skipswarm.output_commitment.v1");
}

TEST(EvidenceTest, AFalseInputIsProvenByXsAndTheHopBeforesKeysAlone) {
  World w;
  const std::string other = Sha256(absl::Cord("another input"));
  const std::unique_ptr<identity::Identity> p = EvidenceKey('p');
  const auto check = [&](const Evidence& e) {
    return CheckFalseInput(e, w.x->public_key(), p->public_key());
  };
  // No answer or payload needed: a receiver that refused the frame kept it.
  Evidence e = Chained(w, 1.05f, w.input, other, w.input);
  e.answer.Clear();
  e.output.Clear();
  EvidenceVerdict v = check(e);
  EXPECT_EQ(v.kind, EvidenceVerdict::kFalseInput) << v.reason;
  EXPECT_TRUE(v.proves_x_lied());
  // The chain holds: nothing proven.
  EXPECT_EQ(check(Chained(w, 1.05f, w.input, w.input, w.input)).kind, EvidenceVerdict::kMatch);
  // Under another key than X's or the hop before's.
  EXPECT_EQ(CheckFalseInput(e, w.other->public_key(), p->public_key()).kind,
            EvidenceVerdict::kBadXSignature);
  EXPECT_EQ(CheckFalseInput(e, w.x->public_key(), w.other->public_key()).kind,
            EvidenceVerdict::kBadInputSignature);
  // The hop before's signature forged under its name.
  Evidence forged = e;
  ASSERT_TRUE(SignCommitment(*w.other, &*forged.input_commitment).ok());
  forged.input_commitment->set_producer(e.input_commitment->producer());
  EXPECT_EQ(check(forged).kind, EvidenceVerdict::kBadInputSignature);
  // Swapped or missing carried commitment, or none bound.
  Evidence swapped = e;
  swapped.input_commitment = Chained(w, 1.05f, other, other, other).input_commitment;
  EXPECT_EQ(check(swapped).kind, EvidenceVerdict::kMalformed);
  Evidence missing = e;
  missing.input_commitment.reset();
  EXPECT_EQ(check(missing).kind, EvidenceVerdict::kMalformed);
  EXPECT_EQ(check(w.Make(1.05f, w.input)).kind, EvidenceVerdict::kMalformed);
}

TEST(EvidenceTest, AnAnswerForAnotherVisitIsRefused) {
  World w;
  Evidence e = w.Make(1.05f, w.input);
  e.answer.set_mb_id(4);
  ASSERT_TRUE(SignAnswer(*w.y, kEvidenceSwarm, w.input, &e.answer).ok());
  EXPECT_EQ(w.Check(e).kind, EvidenceVerdict::kVisitsDiffer);
  // X "checking" itself.
  Evidence f = w.Make(1.05f, w.input);
  ASSERT_TRUE(SignAnswer(*w.x, kEvidenceSwarm, w.input, &f.answer).ok());
  EXPECT_EQ(CheckEvidence(f, w.x->public_key(), w.x->public_key(), EvidenceLimits(), Fp32EvidenceJudge).kind,
            EvidenceVerdict::kVisitsDiffer);
}

TEST(EvidenceTest, MalformedFieldsAndUndecodablePayloadsAreNoVerdict) {
  World w;
  const auto kind = [&](auto mutate) {
    Evidence e = w.Make(1.05f, w.input);
    mutate(e);
    return w.Check(e).kind;
  };
  EXPECT_EQ(kind([](Evidence& e) { e.commitment.set_hop_index(0); }), EvidenceVerdict::kMalformed);
  EXPECT_EQ(kind([](Evidence& e) { e.commitment.set_signature("short"); }),
            EvidenceVerdict::kMalformed);
  EXPECT_EQ(kind([](Evidence& e) { e.commitment.set_swarm_id(std::string(33, 's')); }),
            EvidenceVerdict::kMalformed);
  EXPECT_EQ(kind([](Evidence& e) { e.commitment.mutable_output()->clear_shape(); }),
            EvidenceVerdict::kMalformed);
  EXPECT_EQ(kind([](Evidence& e) { e.answer.clear_signature(); }), EvidenceVerdict::kMalformed);
  EXPECT_EQ(kind([](Evidence& e) { e.answer.clear_sketch(); }), EvidenceVerdict::kMalformed);
  // The judge refuses the payload under the committed meta (X signed a
  // codec its payload is not): no verdict, not a conviction.
  Evidence e = w.Make(1.05f, w.input);
  e.commitment.mutable_output()->set_codec(proto::CODEC_FP16);
  ASSERT_TRUE(SignCommitment(*w.x, &e.commitment).ok());
  EXPECT_EQ(w.Check(e).kind, EvidenceVerdict::kUndecodable);
}

TEST(EvidenceTest, VerifyCommitmentChecksShapeKeyAndSignature) {
  World w;
  const Evidence e = w.Make(1.f, w.input);
  EXPECT_TRUE(VerifyCommitment(e.commitment, w.x->public_key()).ok());
  EXPECT_EQ(VerifyCommitment(e.commitment, w.y->public_key()).code(),
            absl::StatusCode::kUnauthenticated);
  proto::OutputCommitment c = e.commitment;
  c.set_mb_id(4);
  EXPECT_FALSE(VerifyCommitment(c, w.x->public_key()).ok());
  c = e.commitment;
  c.set_origin("short");
  EXPECT_EQ(VerifyCommitment(c, w.x->public_key()).code(), absl::StatusCode::kInvalidArgument);
  std::printf("FIGURE commitment_bytes=%zu answer_signature_extra_bytes=%zu\n",
              e.commitment.SerializeAsString().size(),
              size_t{32 + 32 + 64 + 6});
}

// Note [Checkable evidence], the origin: its commitment verifies under its
// own key only, and any change to the micro-batch, route or output hash
// breaks the signature.
TEST(EvidenceTest, TheOriginsCommitmentBindsItsRouteAndOutput) {
  std::unique_ptr<identity::Identity> origin = EvidenceKey('d'), other = EvidenceKey('o');
  proto::OriginCommitment o;
  o.set_swarm_id("swarm");
  o.set_iteration(3);
  o.set_mb_id(7);
  for (const identity::Identity* hop : {origin.get(), other.get()}) {
    proto::Hop* h = o.add_route();
    h->set_node_id(hop->id().Bytes());
    h->set_stage(hop == origin.get() ? 0 : 1);
  }
  o.set_output_sha256(std::string(32, 's'));
  ASSERT_TRUE(SignOrigin(*origin, &o).ok());
  EXPECT_TRUE(VerifyOrigin(o, origin->public_key()).ok());
  EXPECT_FALSE(VerifyOrigin(o, other->public_key()).ok());
  for (const std::function<void(proto::OriginCommitment&)>& edit :
       std::vector<std::function<void(proto::OriginCommitment&)>>{
           [](proto::OriginCommitment& c) { c.set_mb_id(8); },
           [](proto::OriginCommitment& c) { c.mutable_route(1)->set_stage(2); },
           [](proto::OriginCommitment& c) { c.mutable_route()->RemoveLast(); },
           [](proto::OriginCommitment& c) { c.set_output_sha256(std::string(32, 't')); }}) {
    proto::OriginCommitment changed = o;
    edit(changed);
    EXPECT_FALSE(VerifyOrigin(changed, origin->public_key()).ok());
  }
  // Shape: a route that does not start at the origin, a short hash.
  proto::OriginCommitment bad = o;
  bad.mutable_route(0)->set_node_id(other->id().Bytes());
  EXPECT_TRUE(absl::IsInvalidArgument(CheckOriginShape(bad)));
  bad = o;
  bad.set_output_sha256("short");
  EXPECT_TRUE(absl::IsInvalidArgument(CheckOriginShape(bad)));
}

// Note [Signed route prefix] (node/stage/stage_server.h): the digest tells
// apart any rename, restage or length of the prefix, and the commitment
// signs it (changed or stripped, the signature breaks).
TEST(EvidenceTest, TheRoutePrefixIsDigestedAndSigned) {
  google::protobuf::RepeatedPtrField<proto::Hop> route;
  for (char node : {'d', 'a', 'b', 'c'}) {
    proto::Hop* h = route.Add();
    h->set_node_id(std::string(32, node));
    h->set_stage(static_cast<uint32_t>(route.size() - 1));
  }
  const std::string prefix = RouteDigest(route, 3);
  EXPECT_EQ(prefix.size(), kSha256Bytes);
  EXPECT_NE(RouteDigest(route, 2), prefix);
  EXPECT_NE(RouteDigest(route, 4), prefix);
  EXPECT_EQ(RouteDigest(route, 0), RouteDigest({}, 0));
  google::protobuf::RepeatedPtrField<proto::Hop> changed = route;
  changed.Mutable(3)->set_node_id(std::string(32, 'z'));  // past the prefix
  EXPECT_EQ(RouteDigest(changed, 3), prefix);
  changed.Mutable(2)->set_node_id(std::string(32, 'z'));
  EXPECT_NE(RouteDigest(changed, 3), prefix);
  changed = route;
  changed.Mutable(1)->set_stage(5);
  EXPECT_NE(RouteDigest(changed, 3), prefix);

  World w;
  proto::OutputCommitment c = w.Make(1.f, w.input).commitment;
  c.set_route_sha256(prefix);
  ASSERT_TRUE(SignCommitment(*w.x, &c).ok());
  EXPECT_TRUE(VerifyCommitment(c, w.x->public_key()).ok());
  proto::OutputCommitment edited = c;
  edited.set_route_sha256(RouteDigest(changed, 3));
  EXPECT_EQ(VerifyCommitment(edited, w.x->public_key()).code(),
            absl::StatusCode::kUnauthenticated);
  edited.clear_route_sha256();
  EXPECT_EQ(VerifyCommitment(edited, w.x->public_key()).code(),
            absl::StatusCode::kUnauthenticated);
  edited = c;
  edited.set_route_sha256("short");
  EXPECT_EQ(VerifyCommitment(edited, w.x->public_key()).code(),
            absl::StatusCode::kInvalidArgument);
}

// A producer signs its own hop and the one its output goes to; the last
// hop's goes to the origin (route[0]): the whole route.
TEST(EvidenceTest, AProducerSignsTheRouteUpToItsNextHop) {
  google::protobuf::RepeatedPtrField<proto::Hop> route;
  for (char node : {'d', 'a', 'b', 'c'}) {
    proto::Hop* h = route.Add();
    h->set_node_id(std::string(32, node));
    h->set_stage(static_cast<uint32_t>(route.size() - 1));
  }
  EXPECT_EQ(SignedRouteHops(1, 4), 3);
  EXPECT_EQ(SignedRouteHops(2, 4), 4);
  EXPECT_EQ(SignedRouteHops(3, 4), 4);
  EXPECT_EQ(SignedRouteDigest(route, 1), RouteDigest(route, 3));
  EXPECT_EQ(SignedRouteDigest(route, 3), RouteDigest(route, 4));
  google::protobuf::RepeatedPtrField<proto::Hop> next = route;
  next.Mutable(2)->set_node_id(std::string(32, 'z'));  // hop 1's next hop
  EXPECT_NE(SignedRouteDigest(next, 1), SignedRouteDigest(route, 1));
  next.RemoveLast();  // hop 2 now the last: its output goes to the origin
  EXPECT_NE(SignedRouteDigest(next, 2), SignedRouteDigest(route, 2));
}

}  // namespace
}  // namespace skipswarm::node
