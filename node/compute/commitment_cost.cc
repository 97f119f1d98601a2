// The share of a stage's compute that Note [Checkable evidence] costs, both
// measured on this machine the same way (steady-clock medians): one middle
// stage of the default model (model_config.h defaults, 4 x 128 tokens per
// micro-batch: a 512 KiB fp32 activation) runs forward, and forward +
// backward, per micro-batch; a commitment costs the producer SHA-256 of its
// input and output and one signature, and the catcher SHA-256 of the output
// and one verification; the input chain adds the producer one digest of
// the hop before's commitment and the catcher that digest and one more
// verification; the signed route prefix adds each one route digest
// (the catcher two). Prints FIGURE lines (tests/adversarial/README.md
// quotes them); asserts only that the pieces ran and that the commitment it
// timed verifies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/random.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "identity/identity.h"
#include "model/model_config.h"
#include "node/compute/evidence.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"
#include "node/compute/verify_test_util.h"

namespace skipswarm::node {
namespace {

using testing::RunTask;

constexpr int kWarmup = 2;
constexpr int kReps = 9;

double Median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The process's real clock (common/), read around each timed call.
common::Clock& Wall() {
  static const std::unique_ptr<common::RealClock> clock = common::RealClock::Create();
  return *clock;
}

double MicrosSince(absl::Duration start) {
  return absl::ToDoubleMicroseconds(Wall().SteadyNow() - start);
}

TEST(CommitmentCostTest, FigureShareOfTheDefaultModelsStageCompute) {
  common::SimClock clock;
  ClockTaskRunner runner(&clock);
  model::ModelConfig config;  // the default model
  auto make = [&](int stage) {
    TorchStageCompute::Options o;
    o.model = config;
    o.stage = stage;
    absl::StatusOr<std::unique_ptr<TorchStageCompute>> c = TorchStageCompute::Create(o, &runner);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  };
  std::unique_ptr<TorchStageCompute> s0 = make(0);
  std::unique_ptr<TorchStageCompute> s1 = make(1);
  ASSERT_NE(s0, nullptr);
  ASSERT_NE(s1, nullptr);

  common::Random rng(7);
  MicroBatchData data;
  data.samples = 4;
  data.seq = config.seq_len;
  for (int64_t i = 0; i < data.samples * data.seq; ++i) {
    data.tokens.push_back(rng.UniformInt(0, 255));
    data.targets.push_back(rng.UniformInt(0, 255));
  }
  absl::StatusOr<WireTensor> in = RunTask<WireTensor>(
      clock, [&](TensorDone done) { s0->Start(0, data, std::move(done)); });
  ASSERT_TRUE(in.ok()) << in.status();
  s0->Discard(0);

  std::vector<double> forward_us, backward_us;
  WireTensor out;
  for (int i = 0; i < kWarmup + kReps; ++i) {
    const uint64_t mb = static_cast<uint64_t>(i + 1);
    absl::Duration start = Wall().SteadyNow();
    absl::StatusOr<WireTensor> y = RunTask<WireTensor>(
        clock, [&](TensorDone done) { s1->Forward(mb, *in, std::move(done)); });
    const double f = MicrosSince(start);
    ASSERT_TRUE(y.ok()) << y.status();
    // Any gradient of the output's shape: the cost does not depend on it.
    start = Wall().SteadyNow();
    absl::StatusOr<WireTensor> g = RunTask<WireTensor>(
        clock, [&](TensorDone done) { s1->Backward(mb, *y, std::move(done)); });
    const double b = MicrosSince(start);
    ASSERT_TRUE(g.ok()) << g.status();
    if (i >= kWarmup) {
      forward_us.push_back(f);
      backward_us.push_back(b);
    }
    out = *std::move(y);
  }

  auto key = identity::Identity::FromSeed(std::string(32, 'x'));
  ASSERT_TRUE(key.ok()) << key.status();
  const identity::Identity& x = **key;
  proto::OutputCommitment c;
  c.set_swarm_id(std::string(16, 's'));
  c.set_origin(std::string(32, 'o'));
  c.set_iteration(3);
  c.set_mb_id(1);
  c.set_hop_index(1);
  *c.mutable_output() = out.meta;
  c.mutable_output()->clear_payload_crc32c();
  c.mutable_output()->set_payload_bytes(out.payload.size());
  std::vector<double> produce_us, check_us;
  for (int i = 0; i < kWarmup + kReps; ++i) {
    absl::Duration start = Wall().SteadyNow();
    c.set_input_sha256(Sha256(in->payload));
    c.set_output_sha256(Sha256(out.payload));
    ASSERT_TRUE(SignCommitment(x, &c).ok());
    const double p = MicrosSince(start);
    start = Wall().SteadyNow();
    ASSERT_TRUE(VerifyCommitment(c, x.public_key()).ok());
    ASSERT_EQ(Sha256(out.payload), c.output_sha256());
    const double k = MicrosSince(start);
    if (i >= kWarmup) {
      produce_us.push_back(p);
      check_us.push_back(k);
    }
  }
  // The input chain: X binds the hop before's commitment (here `c`, as
  // the hop before's) in its own and passes it on; the catcher checks the
  // binding, the hop before's signature and its output hash against X's
  // input hash.
  proto::OutputCommitment next = c;
  next.set_hop_index(2);
  next.set_input_sha256(c.output_sha256());
  std::vector<double> bind_us, chain_check_us;
  for (int i = 0; i < kWarmup + kReps; ++i) {
    absl::Duration start = Wall().SteadyNow();
    next.set_input_commitment_sha256(CommitmentDigest(c));
    const double p = MicrosSince(start);
    start = Wall().SteadyNow();
    ASSERT_EQ(CommitmentDigest(c), next.input_commitment_sha256());
    ASSERT_TRUE(VerifyCommitment(c, x.public_key()).ok());
    ASSERT_EQ(c.output_sha256(), next.input_sha256());
    const double k = MicrosSince(start);
    if (i >= kWarmup) {
      bind_us.push_back(p);
      chain_check_us.push_back(k);
    }
  }
  // The origin's commitment (4-hop route): the data node hashes its
  // stage-0 output and signs once per dispatch; every receiver verifies it,
  // and hop 1 also hashes the payload against it.
  proto::OriginCommitment origin;
  origin.set_swarm_id(std::string(16, 's'));
  origin.set_iteration(3);
  origin.set_mb_id(1);
  for (int hop = 0; hop < 4; ++hop) {
    proto::Hop* h = origin.add_route();
    h->set_node_id(hop == 0 ? x.id().Bytes() : std::string(32, static_cast<char>('a' + hop)));
    h->set_stage(static_cast<uint32_t>(hop));
  }
  std::vector<double> origin_sign_us, origin_check_us;
  for (int i = 0; i < kWarmup + kReps; ++i) {
    absl::Duration start = Wall().SteadyNow();
    origin.set_output_sha256(Sha256(in->payload));
    ASSERT_TRUE(SignOrigin(x, &origin).ok());
    const double p = MicrosSince(start);
    start = Wall().SteadyNow();
    ASSERT_TRUE(VerifyOrigin(origin, x.public_key()).ok());
    const double k = MicrosSince(start);
    if (i >= kWarmup) {
      origin_sign_us.push_back(p);
      origin_check_us.push_back(k);
    }
  }
  // Note [Signed route prefix] (node/stage/stage_server.h): the producer
  // hashes its route prefix (up to its next hop) once, the receiver the
  // two prefixes its commitments sign; timed on the longest route a frame
  // may carry (producer at hop 62 of 64).
  proto::FrameHeader routed;
  for (int hop = 0; hop < 64; ++hop) {
    proto::Hop* h = routed.add_route();
    h->set_node_id(std::string(32, static_cast<char>('a' + hop % 26)));
    h->set_stage(static_cast<uint32_t>(hop));
  }
  std::vector<double> prefix_sign_us, prefix_check_us;
  for (int i = 0; i < kWarmup + kReps; ++i) {
    absl::Duration start = Wall().SteadyNow();
    next.set_route_sha256(SignedRouteDigest(routed.route(), 62));
    const double p = MicrosSince(start);
    start = Wall().SteadyNow();
    ASSERT_EQ(SignedRouteDigest(routed.route(), 62), next.route_sha256());
    ASSERT_NE(SignedRouteDigest(routed.route(), 61), next.route_sha256());
    const double k = MicrosSince(start);
    if (i >= kWarmup) {
      prefix_sign_us.push_back(p);
      prefix_check_us.push_back(k);
    }
  }
  const size_t unrouted_bytes = [&] {
    proto::OutputCommitment bare = next;
    bare.clear_route_sha256();
    return bare.ByteSizeLong();
  }();
  ASSERT_TRUE(SignCommitment(x, &next).ok());
  // The earlier hops' commitments a frame carries: on the longest route
  // the last hop's frame carries 62, and the receiver checks each (shape,
  // its prefix's digest, its signature).
  proto::FrameHeader carried;
  for (int j = 1; j <= 62; ++j) {
    proto::OutputCommitment* e = carried.add_earlier_commitments();
    *e = next;
    e->set_hop_index(static_cast<uint32_t>(j));
    e->set_route_sha256(SignedRouteDigest(routed.route(), static_cast<uint32_t>(j)));
    ASSERT_TRUE(SignCommitment(x, e).ok());
  }
  std::vector<double> earlier_check_us;
  for (int i = 0; i < kWarmup + kReps; ++i) {
    // Each timed alone, as the figures above (a 62-check burst on shared
    // cores measures the preemption more than the checks).
    for (const proto::OutputCommitment& e : carried.earlier_commitments()) {
      absl::Duration start = Wall().SteadyNow();
      ASSERT_TRUE(CheckCommitmentShape(e).ok());
      ASSERT_EQ(SignedRouteDigest(routed.route(), e.hop_index()), e.route_sha256());
      ASSERT_TRUE(VerifyCommitment(e, x.public_key()).ok());
      if (i >= kWarmup) earlier_check_us.push_back(MicrosSince(start));
    }
  }
  const size_t prefix_bytes = 2 * (next.ByteSizeLong() - unrouted_bytes);
  const size_t chain_bytes = c.ByteSizeLong() + 2 + (next.ByteSizeLong() - c.ByteSizeLong());
  const double fwd = Median(forward_us), bwd = Median(backward_us);
  const double commit = Median(produce_us) + Median(check_us);
  const double chain = Median(bind_us) + Median(chain_check_us);
  std::printf(
      "FIGURE default model stage 1, %zu KiB in / %zu KiB out: forward_ms=%.2f "
      "backward_ms=%.2f\n",
      static_cast<size_t>(in->payload.size() >> 10), static_cast<size_t>(out.payload.size() >> 10),
      fwd / 1e3, bwd / 1e3);
  std::printf(
      "FIGURE commitment producer_us=%.0f (hash in+out, sign) catcher_us=%.0f (verify, hash "
      "out) total_us=%.0f = %.2f%% of forward, %.2f%% of forward+backward\n",
      Median(produce_us), Median(check_us), commit, 100 * commit / fwd,
      100 * commit / (fwd + bwd));
  std::printf(
      "FIGURE input chain producer_us=%.1f (digest) catcher_us=%.0f (digest, verify) "
      "total_us=%.0f = %.2f%% of forward; ~%zu header bytes per frame\n",
      Median(bind_us), Median(chain_check_us), chain, 100 * chain / fwd, chain_bytes);
  std::printf(
      "FIGURE origin commitment origin_us=%.0f (hash stage-0 out, sign; once per micro-batch) "
      "receiver_us=%.0f (verify; per forward frame, plus hash out at hop 1) = %.2f%% of "
      "forward; %zu header bytes per frame (4-hop route)\n",
      Median(origin_sign_us), Median(origin_check_us), 100 * Median(origin_check_us) / fwd,
      origin.ByteSizeLong() + 2);
  std::printf(
      "FIGURE route prefix producer_us=%.1f (one digest) catcher_us=%.1f (two digests) on a "
      "64-hop route = %.3f%% of forward; +%zu header bytes per forward frame (two "
      "commitments)\n",
      Median(prefix_sign_us), Median(prefix_check_us),
      100 * (Median(prefix_sign_us) + Median(prefix_check_us)) / fwd, prefix_bytes);
  std::printf(
      "FIGURE earlier commitments receiver_us=%.0f per earlier hop (shape, prefix digest, "
      "verify) = %.2f%% of forward each; %.1f ms and %zu header bytes for the 62 of a "
      "64-hop route's last frame (%zu bytes each)\n",
      Median(earlier_check_us), 100 * Median(earlier_check_us) / fwd,
      62 * Median(earlier_check_us) / 1e3, carried.ByteSizeLong(), carried.ByteSizeLong() / 62);
  EXPECT_GT(fwd, 0);
  EXPECT_GT(commit, 0);
}

}  // namespace
}  // namespace skipswarm::node
