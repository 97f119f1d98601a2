// Verified compute through real stage servers on the simulated transport
// (Note [Verify-only frames], Note [Pending output checks]): a data node D
// (stage 0), two replicas of stage 1 on probation (A honest, B scaling its
// activations by 1.05), a trusted replica T of stage 1 and a node C of
// stage 2, all libtorch computes of the 3-stage test model with fp16
// frames. D's transport sends every hop-1 forward frame also to T,
// verify-only (the hop before's sampling, at rate 1, done by the test);
// T answers C, which checks A's and B's outputs. B's mismatches are
// counted, A's are 0, T trains nothing, and every micro-batch finishes.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/random.h"
#include "common/sim_clock.h"
#include "node/compute/output_check.h"
#include "node/compute/sketch_wire.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"
#include "node/compute/verify_test_util.h"
#include "node/stage/stage_server.h"
#include "node/transport/frame.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

constexpr int kMicroBatches = 12;

struct Recorder : OriginListener {
  void OnTail(uint64_t, uint64_t, double) override {}
  void OnFinished(uint64_t, uint64_t mb, const absl::Status& s) override { finished[mb] = s; }
  std::map<uint64_t, absl::Status> finished;
};

// The hop before's side, as the test does it: every forward frame to hop 1
// goes, verify-only, to `verifier` as well (route[1] naming it, the seed
// and X in header.verify).
class VerifyTap final : public Transport {
 public:
  VerifyTap(std::unique_ptr<Transport> inner, NodeId verifier, uint64_t seed)
      : inner_(std::move(inner)), verifier_(verifier), rng_(seed) {}
  PeerId self() const override { return inner_->self(); }
  void SetFrameHandler(FrameHandler h) override { inner_->SetFrameHandler(std::move(h)); }
  void SetPeerFailureHandler(PeerFailureHandler h) override {
    inner_->SetPeerFailureHandler(std::move(h));
  }
  void SetPeerAddress(const PeerId& p, std::string a) override {
    inner_->SetPeerAddress(p, std::move(a));
  }
  void ForgetPeer(const PeerId& p) override { inner_->ForgetPeer(p); }
  void Send(const PeerId& to, Frame frame, SendDone done) override {
    if (frame.header.direction() == proto::DIRECTION_FORWARD && frame.header.hop_index() == 1 &&
        to != verifier_) {
      Frame copy = frame;
      copy.header.mutable_route(1)->set_node_id(verifier_.Bytes());
      copy.header.mutable_verify()->set_seed(rng_());
      copy.header.mutable_verify()->set_checked(to.Bytes());
      inner_->Send(verifier_, std::move(copy), [this](absl::Status ack) {
        if (!ack.ok()) ++verify_refused;
      });
      ++verify_sent;
    }
    inner_->Send(to, std::move(frame), std::move(done));
  }
  int verify_sent = 0;
  int verify_refused = 0;

 private:
  std::unique_ptr<Transport> inner_;
  const NodeId verifier_;
  common::Random rng_;
};

TEST(StageServerVerifyTest, TheHopAfterCountsTheLiarsMismatchesAndNoneOfTheHonestReplicas) {
  common::SimClock clock;
  ClockTaskRunner runner(&clock);
  SwitchboardOptions board_options;
  board_options.latency = absl::Milliseconds(1);
  Switchboard board(&clock, board_options);
  const model::ModelConfig config = testing::VerifyConfig();
  // D, A, B, C, T.
  const std::vector<std::string> names = {"d", "a", "b", "c", "t"};
  const std::vector<int> stages = {0, 1, 1, 2, 1};
  std::vector<NodeId> ids;
  std::vector<PeerInfo> members;
  for (size_t i = 0; i < names.size(); ++i) {
    ids.push_back(NodeId::ForName(names[i]));
    members.push_back({ids.back(), {stages[i]}, 4, "", ""});
  }
  const NodeId a = ids[1], b = ids[2], t = ids[4];
  std::vector<std::unique_ptr<TorchStageCompute>> computes;
  std::vector<std::unique_ptr<StageCompute>> wrappers;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<StageServer>> servers;
  VerifyTap* tap = nullptr;
  Recorder recorder;
  for (size_t i = 0; i < names.size(); ++i) {
    TorchStageCompute::Options co;
    co.model = config;
    co.stage = stages[i];
    co.encode = {model::Codec::kFp16};
    absl::StatusOr<std::unique_ptr<TorchStageCompute>> c = TorchStageCompute::Create(co, &runner);
    ASSERT_TRUE(c.ok()) << c.status();
    computes.push_back(*std::move(c));
    StageCompute* served = computes.back().get();
    if (ids[i] == b) {
      wrappers.push_back(std::make_unique<testing::LyingCompute>(
          served, testing::LyingCompute::Where::kForward, testing::LyingCompute::Lie::kScale,
          1.05));
      served = wrappers.back().get();
    }
    absl::StatusOr<std::unique_ptr<Transport>> tr = board.Attach(ids[i]);
    ASSERT_TRUE(tr.ok());
    std::unique_ptr<Transport> transport = *std::move(tr);
    if (i == 0) {
      auto tapped = std::make_unique<VerifyTap>(std::move(transport), t, 99);
      tap = tapped.get();
      transport = std::move(tapped);
    }
    StageServerOptions o;
    o.memory_slots = 4;
    o.member_on_probation = [a, b](const PeerId& p) { return p == a || p == b; };
    o.output_checks.judge = [](const WireTensor& received, const model::OutputSketch& sketch,
                               const model::SketchCheckOptions& options) {
      return CheckOutputAgainstSketch(received, sketch, options);
    };
    o.sketch_limits = ActivationSketchLimits(config, 4);
    views.push_back(std::make_unique<StaticSwarmView>(members));
    servers.push_back(std::make_unique<StageServer>(
        transport.get(), &clock, views.back().get(),
        std::map<int, StageCompute*>{{stages[i], served}}, o));
    servers.back()->Attach();
    servers.back()->SetOriginListener(&recorder);
    transports.push_back(std::move(transport));
  }
  const uint64_t t_digest = computes[4]->ParamsDigest();

  common::Random rng(5);
  for (int i = 0; i < kMicroBatches; ++i) {
    const NodeId& x = i % 2 == 0 ? a : b;
    const std::vector<RouteHop> route = {{ids[0], 0}, {x, 1}, {ids[3], 2}};
    ASSERT_TRUE(servers[0]->Inject(0, static_cast<uint64_t>(i), route, testing::VerifyBatch(rng)).ok());
    // One at a time: T's verify queue holds one per sender.
    clock.Advance(absl::Seconds(5));
  }
  ASSERT_EQ(recorder.finished.size(), static_cast<size_t>(kMicroBatches));
  for (const auto& [mb, s] : recorder.finished) EXPECT_TRUE(s.ok()) << mb << ": " << s;

  const StageServerStats c = servers[3]->stats();
  const StageServerStats y = servers[4]->stats();
  EXPECT_EQ(tap->verify_sent, kMicroBatches);
  EXPECT_EQ(tap->verify_refused, 0);
  EXPECT_EQ(y.verify_answered, kMicroBatches);
  EXPECT_EQ(y.verify_failed, 0);
  EXPECT_EQ(c.sketch_frames_refused, 0);
  ASSERT_EQ(c.checks.by_member.count(a), 1u);
  ASSERT_EQ(c.checks.by_member.count(b), 1u);
  EXPECT_EQ(c.checks.by_member.at(a).checks, kMicroBatches / 2);
  EXPECT_EQ(c.checks.by_member.at(a).mismatches, 0);
  EXPECT_EQ(c.checks.by_member.at(b).checks, kMicroBatches / 2);
  EXPECT_EQ(c.checks.by_member.at(b).mismatches, kMicroBatches / 2);
  EXPECT_EQ(c.checks.by_member.count(t), 0u);  // no bad sketch from T
  EXPECT_EQ(c.checks.kept_outputs, 0);
  EXPECT_EQ(c.checks.pending_sketches, 0);
  // T took part in no training: no visit, no gradient, same weights, no
  // slot held, nothing pending.
  EXPECT_EQ(y.forwards, 0);
  EXPECT_EQ(y.slots_in_use, 0);
  EXPECT_EQ(computes[4]->pending(), 0u);
  EXPECT_EQ(computes[4]->ParamsDigest(), t_digest);
  absl::StatusOr<GradientSum> grads = computes[4]->TakeGradients();
  ASSERT_TRUE(grads.ok());
  EXPECT_EQ(grads->visits, 0);
  std::printf("FIGURE stage_server_verify fp16: honest %lld/%lld mismatches, liar x1.05 %lld/%lld, "
              "%lld answers\n",
              static_cast<long long>(c.checks.by_member.at(a).mismatches),
              static_cast<long long>(c.checks.by_member.at(a).checks),
              static_cast<long long>(c.checks.by_member.at(b).mismatches),
              static_cast<long long>(c.checks.by_member.at(b).checks),
              static_cast<long long>(y.verify_answered));
  for (auto& s : servers) s->Detach();
}

}  // namespace
}  // namespace skipswarm::node
