// OutputChecks (Note [Pending output checks]): three replicas of stage 1
// with equal weights, one of them lying (activations x1.05); a trusted
// replica sketches every micro-batch's forward (verify-only), its answer
// goes through the wire (SketchAnswer) and meets each checked replica's
// output at the hop after, in either order. The liar's mismatches are
// counted, the honest replica's are 0. Then the bounds.
#include "node/stage/output_checks.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/random.h"
#include "common/sim_clock.h"
#include "identity/identity.h"
#include "model/output_sketch.h"
#include "model/tensor_codec.h"
#include "node/compute/evidence.h"
#include "node/compute/output_check.h"
#include "node/compute/sketch_wire.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"
#include "node/compute/verify_test_util.h"

namespace skipswarm::node {
namespace {

using common::NodeId;
using testing::LyingCompute;
using testing::RunTask;

constexpr int kMicroBatches = 20;

// The daemon's judge: decodes X's output with the wire codec (libtorch).
OutputChecksOptions Judged() {
  OutputChecksOptions o;
  o.judge = [](const WireTensor& received, const model::OutputSketch& sketch,
               const model::SketchCheckOptions& options) {
    return CheckOutputAgainstSketch(received, sketch, options);
  };
  return o;
}

class OutputChecksTest : public ::testing::Test {
 protected:
  std::unique_ptr<TorchStageCompute> Make(int stage) {
    TorchStageCompute::Options o;
    o.model = testing::VerifyConfig();
    o.stage = stage;
    o.encode = {model::Codec::kFp16};
    absl::StatusOr<std::unique_ptr<TorchStageCompute>> c = TorchStageCompute::Create(o, &runner_);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Y's answer as the hop after decodes it from the wire.
  SketchAnswer OverTheWire(const CheckedVisit& visit, const model::OutputSketch& sketch) {
    absl::StatusOr<SketchAnswer> a = AnswerFromProto(
        AnswerToProto(SketchAnswer{visit, sketch}),
        ActivationSketchLimits(testing::VerifyConfig(), /*max_samples=*/4));
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *std::move(a) : SketchAnswer{};
  }

  common::SimClock clock_;
  ClockTaskRunner runner_{&clock_};
};

TEST_F(OutputChecksTest, CountsTheLiarsMismatchesAndNoneOfTheHonestReplicas) {
  std::unique_ptr<TorchStageCompute> s0 = Make(0);
  std::unique_ptr<TorchStageCompute> honest = Make(1);
  std::unique_ptr<TorchStageCompute> liar_inner = Make(1);
  std::unique_ptr<TorchStageCompute> trusted = Make(1);
  LyingCompute liar(liar_inner.get(), LyingCompute::Where::kForward, LyingCompute::Lie::kScale,
                    1.05);
  const NodeId origin = NodeId::ForName("origin");
  const NodeId honest_id = NodeId::ForName("honest");
  const NodeId liar_id = NodeId::ForName("liar");
  const NodeId y_id = NodeId::ForName("trusted");
  OutputChecks checks(Judged());
  common::Random rng(17);
  int verdicts = 0;
  for (int i = 0; i < kMicroBatches; ++i) {
    const uint64_t mb = static_cast<uint64_t>(i);
    absl::StatusOr<WireTensor> in = RunTask<WireTensor>(
        clock_, [&](TensorDone done) { s0->Start(mb, testing::VerifyBatch(rng), std::move(done)); });
    ASSERT_TRUE(in.ok()) << in.status();
    s0->Discard(mb);
    const uint64_t seed = rng();
    absl::StatusOr<model::OutputSketch> sketch = RunTask<model::OutputSketch>(
        clock_, [&](SketchDone done) { trusted->SketchForward(*in, seed, std::move(done)); });
    ASSERT_TRUE(sketch.ok()) << sketch.status();
    for (const auto& [replica, id] : {std::pair<StageCompute*, NodeId>{honest.get(), honest_id},
                                      std::pair<StageCompute*, NodeId>{&liar, liar_id}}) {
      StageCompute* x = replica;  // a lambda cannot capture a structured binding (C++17)
      absl::StatusOr<WireTensor> out = RunTask<WireTensor>(
          clock_, [&](TensorDone done) { x->Forward(mb, *in, std::move(done)); });
      ASSERT_TRUE(out.ok()) << out.status();
      x->Discard(mb);
      const CheckedVisit visit{origin, 0, mb, 1, id};
      // Either may arrive first: the sketch on odd micro-batches.
      std::optional<model::SketchVerdict> v;
      if (i % 2 == 0) {
        EXPECT_FALSE(checks.OnOutput(visit, *out).has_value());
        v = checks.OnAnswer(y_id, OverTheWire(visit, *sketch));
      } else {
        EXPECT_FALSE(checks.OnAnswer(y_id, OverTheWire(visit, *sketch)).has_value());
        v = checks.OnOutput(visit, *out);
      }
      ASSERT_TRUE(v.has_value());
      EXPECT_EQ(v->match, id == honest_id) << v->reason;
      ++verdicts;
    }
  }
  const OutputCheckStats s = checks.stats();
  EXPECT_EQ(verdicts, 2 * kMicroBatches);
  EXPECT_EQ(s.by_member.at(honest_id).checks, kMicroBatches);
  EXPECT_EQ(s.by_member.at(honest_id).mismatches, 0);
  EXPECT_EQ(s.by_member.at(liar_id).checks, kMicroBatches);
  EXPECT_EQ(s.by_member.at(liar_id).mismatches, kMicroBatches);
  EXPECT_EQ(s.by_member.count(y_id), 0u);  // no bad sketch
  EXPECT_EQ(s.kept_outputs, 0);
  EXPECT_EQ(s.pending_sketches, 0);
  std::printf("FIGURE output_checks fp16: honest %lld/%lld mismatches, liar x1.05 %lld/%lld\n",
              static_cast<long long>(s.by_member.at(honest_id).mismatches),
              static_cast<long long>(s.by_member.at(honest_id).checks),
              static_cast<long long>(s.by_member.at(liar_id).mismatches),
              static_cast<long long>(s.by_member.at(liar_id).checks));
}

// A small well-formed sketch and an output that never gets judged.
model::OutputSketch SmallSketch() { return model::SketchOutput({1.f, 2.f, 3.f, 4.f}, {1, 2, 2}, 9); }
WireTensor Opaque() { return WireTensor{proto::TensorMeta{}, absl::Cord("x")}; }
// Decodes as a float32 [1, 2, 2] tensor (raw fp32).
WireTensor Decodable() {
  absl::StatusOr<model::EncodedTensor> enc =
      model::EncodeTensor(at::arange(1, 5, at::kFloat).reshape({1, 2, 2}), {});
  EXPECT_TRUE(enc.ok()) << enc.status();
  return WireTensor{ToProto(enc->meta), absl::Cord(std::move(enc->payload))};
}
OutputChecksOptions Caps(int outputs, int sketches, int per_sender) {
  OutputChecksOptions o = Judged();
  o.max_kept_outputs = outputs;
  o.max_pending_sketches = sketches;
  o.max_pending_per_sender = per_sender;
  return o;
}
CheckedVisit Visit(uint64_t iteration, uint64_t mb, const char* checked = "x") {
  return CheckedVisit{NodeId::ForName("origin"), iteration, mb, 1, NodeId::ForName(checked)};
}

TEST(OutputChecksBoundsTest, SketchesAreCappedPerSenderAndInAllWithoutDisplacing) {
  OutputChecks checks(Caps(2, 6, 4));
  const NodeId flooder = NodeId::ForName("flooder");
  for (uint64_t mb = 0; mb < 10; ++mb) {
    checks.OnAnswer(flooder, SketchAnswer{Visit(0, mb), SmallSketch()});
  }
  EXPECT_EQ(checks.stats().pending_sketches, 4);
  EXPECT_EQ(checks.stats().sketches_refused, 6);
  // Another sender still has room, up to the total; a second sketch for a
  // visit already waiting is refused.
  const NodeId y = NodeId::ForName("y");
  checks.OnAnswer(y, SketchAnswer{Visit(0, 20), SmallSketch()});
  checks.OnAnswer(y, SketchAnswer{Visit(0, 20), SmallSketch()});
  checks.OnAnswer(y, SketchAnswer{Visit(0, 21), SmallSketch()});
  checks.OnAnswer(y, SketchAnswer{Visit(0, 22), SmallSketch()});
  EXPECT_EQ(checks.stats().pending_sketches, 6);
  EXPECT_EQ(checks.stats().sketches_refused, 8);
  // Iteration end frees them all; later ones of that iteration are ignored.
  checks.EndIteration(0);
  EXPECT_EQ(checks.stats().pending_sketches, 0);
  EXPECT_EQ(checks.stats().expired, 6);
  checks.OnAnswer(flooder, SketchAnswer{Visit(0, 30), SmallSketch()});
  checks.OnOutput(Visit(0, 31), Opaque());
  EXPECT_EQ(checks.stats().pending_sketches, 0);
  EXPECT_EQ(checks.stats().kept_outputs, 0);
  // The flooder's share is back.
  for (uint64_t mb = 0; mb < 4; ++mb) {
    checks.OnAnswer(flooder, SketchAnswer{Visit(1, mb), SmallSketch()});
  }
  EXPECT_EQ(checks.stats().pending_sketches, 4);
}

TEST(OutputChecksBoundsTest, KeptOutputsDropTheOldestFirst) {
  OutputChecks checks(Caps(2, 16, 4));
  checks.OnOutput(Visit(0, 1), Opaque());
  checks.OnOutput(Visit(0, 2), Opaque());
  checks.OnOutput(Visit(0, 3), Opaque());
  EXPECT_EQ(checks.stats().kept_outputs, 2);
  EXPECT_EQ(checks.stats().outputs_dropped, 1);
  // mb 1 was dropped: its sketch waits; mb 2 is still kept: judged (its
  // output does not decode, which counts on X, not on the sender).
  EXPECT_FALSE(checks.OnAnswer(NodeId::ForName("y"), SketchAnswer{Visit(0, 1), SmallSketch()}));
  EXPECT_EQ(checks.stats().pending_sketches, 1);
  EXPECT_FALSE(checks.OnAnswer(NodeId::ForName("y"), SketchAnswer{Visit(0, 2), SmallSketch()}));
  const OutputCheckStats s = checks.stats();
  EXPECT_EQ(s.kept_outputs, 1);
  EXPECT_EQ(s.by_member.at(NodeId::ForName("x")).undecodable, 1);
  EXPECT_EQ(s.by_member.at(NodeId::ForName("x")).checks, 0);
  EXPECT_EQ(s.by_member.count(NodeId::ForName("y")), 0u);
}

TEST(OutputChecksBoundsTest, AMatchingPairIsJudged) {
  OutputChecks checks(Judged());
  const WireTensor out = Decodable();
  const model::OutputSketch honest = model::SketchOutput({1.f, 2.f, 3.f, 4.f}, {1, 2, 2}, 9);
  checks.OnOutput(Visit(0, 1), out);
  std::optional<model::SketchVerdict> v =
      checks.OnAnswer(NodeId::ForName("y"), SketchAnswer{Visit(0, 1), honest});
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->match) << v->reason;
  EXPECT_EQ(checks.stats().by_member.at(NodeId::ForName("x")).checks, 1);
}

TEST(OutputChecksBoundsTest, AMalformedSketchCountsOnItsSender) {
  OutputChecks checks(Judged());
  model::OutputSketch bad = SmallSketch();
  bad.norm = -1;
  checks.OnAnswer(NodeId::ForName("y"), SketchAnswer{Visit(0, 1), bad});
  EXPECT_FALSE(checks.OnOutput(Visit(0, 1), Decodable()).has_value());
  const OutputCheckStats s = checks.stats();
  EXPECT_EQ(s.by_member.at(NodeId::ForName("y")).bad_sketches, 1);
  EXPECT_EQ(s.by_member.count(NodeId::ForName("x")), 0u);
}

// Note [Checkable evidence]: a mismatch both sides signed is kept, bounded
// per member (oldest dropped), and checks under CheckEvidence with X's and
// Y's keys alone; unsigned mismatches and matches are not kept.
TEST(OutputChecksBoundsTest, SignedMismatchesAreKeptAsEvidenceOldestDropped) {
  OutputChecksOptions o = Judged();
  o.max_evidence_per_member = 2;
  OutputChecks checks(o);
  auto x = identity::Identity::FromSeed(std::string(32, 'x'));
  auto y = identity::Identity::FromSeed(std::string(32, 'y'));
  ASSERT_TRUE(x.ok() && y.ok());
  const WireTensor out = Decodable();  // 1, 2, 3, 4
  const auto check = [&](uint64_t mb, std::vector<float> y_saw, bool sign) {
    const CheckedVisit visit{NodeId::ForName("origin"), 0, mb, 1, (*x)->id()};
    proto::OutputCommitment c;
    c.set_origin(visit.origin.Bytes());
    c.set_mb_id(mb);
    c.set_hop_index(1);
    c.set_input_sha256(std::string(32, 'i'));
    c.set_output_sha256(Sha256(out.payload));
    *c.mutable_output() = out.meta;
    c.mutable_output()->clear_payload_crc32c();
    ASSERT_TRUE(SignCommitment(**x, &c).ok());
    const SketchAnswer answer{visit, model::SketchOutput(y_saw, {1, 2, 2}, 9)};
    proto::SketchAnswer wire = AnswerToProto(answer);
    ASSERT_TRUE(SignAnswer(**y, "", std::string(32, 'i'), &wire).ok());
    checks.OnOutput(visit, out, nullptr, sign ? &c : nullptr);
    checks.OnAnswer((*y)->id(), answer, sign ? &wire : nullptr);
  };
  check(1, {1.f, 2.f, 3.f, 4.f}, true);  // a match
  check(2, {2.f, 4.f, 6.f, 8.f}, false);  // unsigned
  EXPECT_TRUE(checks.EvidenceAgainst((*x)->id()).empty());
  for (uint64_t mb = 3; mb <= 5; ++mb) check(mb, {2.f, 4.f, 6.f, 8.f}, true);
  EXPECT_EQ(checks.stats().by_member.at((*x)->id()).mismatches, 4);
  const std::vector<Evidence> kept = checks.EvidenceAgainst((*x)->id());
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].commitment.mb_id(), 4u);
  EXPECT_EQ(kept[1].commitment.mb_id(), 5u);
  const EvidenceVerdict v = CheckEvidence(kept[1], (*x)->public_key(), (*y)->public_key(),
                                          SketchLimits{{4, 4, 4}}, o.judge);
  EXPECT_EQ(v.kind, EvidenceVerdict::kMismatch) << v.reason;
  EXPECT_TRUE(checks.EvidenceAgainst((*y)->id()).empty());
}

// The frame's input commitment (the hop before's, bound by X's) is kept
// with the piece, so CheckEvidence can tell a false input hash.
TEST(OutputChecksBoundsTest, TheBoundInputCommitmentIsKeptWithTheEvidence) {
  OutputChecksOptions o = Judged();
  OutputChecks checks(o);
  auto p = identity::Identity::FromSeed(std::string(32, 'p'));
  auto x = identity::Identity::FromSeed(std::string(32, 'x'));
  auto y = identity::Identity::FromSeed(std::string(32, 'y'));
  ASSERT_TRUE(p.ok() && x.ok() && y.ok());
  const WireTensor out = Decodable();
  const CheckedVisit visit{NodeId::ForName("origin"), 0, 1, 2, (*x)->id()};
  proto::OutputCommitment before;
  before.set_origin(visit.origin.Bytes());
  before.set_mb_id(1);
  before.set_hop_index(1);
  before.set_input_sha256(std::string(32, 'h'));
  before.set_output_sha256(std::string(32, 'i'));
  *before.mutable_output() = out.meta;
  ASSERT_TRUE(SignCommitment(**p, &before).ok());
  proto::OutputCommitment c = before;
  c.set_hop_index(2);
  c.set_input_sha256(std::string(32, 'i'));
  c.set_output_sha256(Sha256(out.payload));
  c.mutable_output()->clear_payload_crc32c();
  c.set_input_commitment_sha256(CommitmentDigest(before));
  ASSERT_TRUE(SignCommitment(**x, &c).ok());
  const SketchAnswer answer{visit, model::SketchOutput({2.f, 4.f, 6.f, 8.f}, {1, 2, 2}, 9)};
  proto::SketchAnswer wire = AnswerToProto(answer);
  ASSERT_TRUE(SignAnswer(**y, "", std::string(32, 'i'), &wire).ok());
  checks.OnOutput(visit, out, nullptr, &c, &before);
  checks.OnAnswer((*y)->id(), answer, &wire);
  const std::vector<Evidence> kept = checks.EvidenceAgainst((*x)->id());
  ASSERT_EQ(kept.size(), 1u);
  ASSERT_TRUE(kept[0].input_commitment.has_value());
  EXPECT_EQ(kept[0].input_commitment->SerializeAsString(), before.SerializeAsString());
  const EvidenceVerdict v = CheckEvidence(kept[0], (*x)->public_key(), (*y)->public_key(),
                                          SketchLimits{{4, 4, 4}}, o.judge);
  EXPECT_EQ(v.kind, EvidenceVerdict::kMismatch) << v.reason;
}

}  // namespace
}  // namespace skipswarm::node
