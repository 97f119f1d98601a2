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
#include "node/compute/timed_stage_compute.h"
#include "node/compute/torch_stage_compute.h"
#include "node/compute/verify_test_util.h"
#include "node/stage/stage_server.h"
#include "node/stage/stage_server_test_util.h"
#include "node/transport/frame.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

constexpr int kMicroBatches = 12;

// The hop before's side, as the test does it: every forward frame to hop 1
// goes, verify-only, to `verifier` as well (route[1] naming it, the seed
// and X in header.verify).
class VerifyTap final : public ForwardingTransport {
 public:
  VerifyTap(std::unique_ptr<Transport> inner, NodeId verifier, uint64_t seed)
      : ForwardingTransport(std::move(inner)), verifier_(verifier), rng_(seed) {}
  void Send(const PeerId& to, Frame frame, SendDone done) override {
    if (frame.header.direction() == proto::DIRECTION_FORWARD && frame.header.hop_index() == 1 &&
        to != verifier_) {
      Frame copy = frame;
      copy.header.mutable_route(1)->set_node_id(verifier_.Bytes());
      copy.header.mutable_verify()->set_seed(rng_());
      copy.header.mutable_verify()->set_checked(to.Bytes());
      inner()->Send(verifier_, std::move(copy), [this](absl::Status ack) {
        if (!ack.ok()) ++verify_refused;
      });
      ++verify_sent;
    }
    inner()->Send(to, std::move(frame), std::move(done));
  }
  int verify_sent = 0;
  int verify_refused = 0;

 private:
  const NodeId verifier_;
  common::Random rng_;
};

// Who samples the checks of the swarm below: the test's tap at D (every
// hop-1 frame), or D's stage server itself at `verify_rate` (Note [Sending
// checks]).
struct Sampling {
  bool tap = false;
  double server_rate = 0;
};

// D, A, B, C, T as in the file comment; runs kMicroBatches one at a time
// and checks that every one finishes. `verdicts`: what C's on_check_verdict
// was told, per checked member (matches, mismatches).
struct FiveNodeResult {
  StageServerStats d, c, t;
  int tap_sent = 0, tap_refused = 0;
  std::map<NodeId, std::pair<int, int>> verdicts;
  NodeId a, b, t_id;
};

void RunFiveNodes(Sampling sampling, FiveNodeResult* result) {
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
  members[1].on_probation = members[2].on_probation = true;  // PickVerifier checks these
  std::vector<std::unique_ptr<TorchStageCompute>> computes;
  std::vector<std::unique_ptr<StageCompute>> wrappers;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<StageServer>> servers;
  VerifyTap* tap = nullptr;
  testing::OriginRecorder recorder;
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
    if (i == 0 && sampling.tap) {
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
    if (i == 0) o.verify_rate = sampling.server_rate;
    if (i == 3) {
      o.on_check_verdict = [result](const PeerId& x, bool match) {
        ++(match ? result->verdicts[x].first : result->verdicts[x].second);
      };
    }
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

  result->d = servers[0]->stats();
  result->c = servers[3]->stats();
  result->t = servers[4]->stats();
  if (tap != nullptr) {
    result->tap_sent = tap->verify_sent;
    result->tap_refused = tap->verify_refused;
  }
  result->a = a;
  result->b = b;
  result->t_id = t;
  // T took part in no training: no visit, no gradient, same weights, no
  // slot held, nothing pending.
  EXPECT_EQ(result->t.forwards, 0);
  EXPECT_EQ(result->t.slots_in_use, 0);
  EXPECT_EQ(computes[4]->pending(), 0u);
  EXPECT_EQ(computes[4]->ParamsDigest(), t_digest);
  absl::StatusOr<GradientSum> grads = computes[4]->TakeGradients();
  ASSERT_TRUE(grads.ok());
  EXPECT_EQ(grads->visits, 0);
  for (auto& s : servers) s->Detach();
}

// What every run below expects at C, the hop after A and B: each sampled
// micro-batch judged, A never flagged, B always; nothing left pending.
void ExpectChecks(const FiveNodeResult& r, int checked) {
  const StageServerStats& c = r.c;
  EXPECT_EQ(r.t.verify_answered, checked);
  EXPECT_EQ(r.t.verify_failed, 0);
  EXPECT_EQ(c.sketch_frames_refused, 0);
  ASSERT_EQ(c.checks.by_member.count(r.a), 1u);
  ASSERT_EQ(c.checks.by_member.count(r.b), 1u);
  EXPECT_EQ(c.checks.by_member.at(r.a).checks, checked / 2);
  EXPECT_EQ(c.checks.by_member.at(r.a).mismatches, 0);
  EXPECT_EQ(c.checks.by_member.at(r.b).checks, checked / 2);
  EXPECT_EQ(c.checks.by_member.at(r.b).mismatches, checked / 2);
  EXPECT_EQ(c.checks.by_member.count(r.t_id), 0u);  // no bad sketch from T
  EXPECT_EQ(c.checks.kept_outputs, 0);
  EXPECT_EQ(c.checks.pending_sketches, 0);
  std::printf("FIGURE stage_server_verify fp16: honest %lld/%lld mismatches, liar x1.05 %lld/%lld, "
              "%lld answers\n",
              static_cast<long long>(c.checks.by_member.at(r.a).mismatches),
              static_cast<long long>(c.checks.by_member.at(r.a).checks),
              static_cast<long long>(c.checks.by_member.at(r.b).mismatches),
              static_cast<long long>(c.checks.by_member.at(r.b).checks),
              static_cast<long long>(r.t.verify_answered));
}

TEST(StageServerVerifyTest, TheHopAfterCountsTheLiarsMismatchesAndNoneOfTheHonestReplicas) {
  FiveNodeResult r;
  RunFiveNodes({.tap = true}, &r);
  EXPECT_EQ(r.tap_sent, kMicroBatches);
  EXPECT_EQ(r.tap_refused, 0);
  ExpectChecks(r, kMicroBatches);
}

// Note [Sending checks]: D's own server samples at rate 1; each hop-1 frame
// to A or B (on probation) also goes to T, the only trusted replica, and
// C's verdicts reach its on_check_verdict.
TEST(StageServerVerifyTest, TheHopBeforeSendsChecksAtItsRate) {
  FiveNodeResult r;
  RunFiveNodes({.server_rate = 1.0}, &r);
  EXPECT_EQ(r.d.verify_sent, kMicroBatches);
  EXPECT_EQ(r.d.verify_send_failed, 0);
  EXPECT_GT(r.d.verify_bytes_sent, 0);
  ExpectChecks(r, kMicroBatches);
  EXPECT_EQ(r.verdicts[r.a], std::make_pair(kMicroBatches / 2, 0));
  EXPECT_EQ(r.verdicts[r.b], std::make_pair(0, kMicroBatches / 2));
  EXPECT_EQ(r.c.verify_sent, 0);  // C's next hop is the tail: nothing to check
}

TEST(StageServerVerifyTest, RateZeroSendsNoChecks) {
  FiveNodeResult r;
  RunFiveNodes({}, &r);
  EXPECT_EQ(r.d.verify_sent, 0);
  EXPECT_EQ(r.t.verify_answered, 0);
  EXPECT_TRUE(r.verdicts.empty());
}

// A hop-1 forward frame of origin `s` along s -> y -> z (a 64-byte fp32
// tensor), verify-only for X when `verify`.
Frame HopOneFrame(const NodeId& s, const NodeId& y, const NodeId& z, uint64_t iteration,
                  uint64_t mb, const NodeId* checked) {
  Frame f;
  f.header.set_iteration(iteration);
  f.header.set_mb_id(mb);
  f.header.set_origin(s.Bytes());
  for (auto [id, stage] : {std::pair<NodeId, int>{s, 0}, {y, 1}, {z, 2}}) {
    proto::Hop* hop = f.header.add_route();
    hop->set_node_id(id.Bytes());
    hop->set_stage(static_cast<uint32_t>(stage));
  }
  f.header.set_hop_index(1);
  f.header.set_direction(proto::DIRECTION_FORWARD);
  if (checked != nullptr) {
    f.header.mutable_verify()->set_seed(7);
    f.header.mutable_verify()->set_checked(checked->Bytes());
  }
  f.payload = absl::Cord(std::string(64, '\0'));
  f.header.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
  f.header.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
  f.header.mutable_tensor()->add_shape(16);
  SealFrame(f);
  return f;
}

// The three hops of the cases below on a 1 ms switchboard: the sender S,
// the checked stage's node Y (its server and compute are each case's) and
// the hop after, Z, whose received frames are kept in `at_z`.
struct ThreeHops {
  static SwitchboardOptions OneMillisecond() {
    SwitchboardOptions o;
    o.latency = absl::Milliseconds(1);
    return o;
  }
  ThreeHops() {
    sender = *board.Attach(s_id);
    z = *board.Attach(z_id);
    z->SetFrameHandler(AdmitWith([this](const PeerId&, Frame f) {
      at_z.push_back(std::move(f));
      return absl::OkStatus();
    }));
  }

  common::SimClock clock;
  Switchboard board{&clock, OneMillisecond()};
  const NodeId s_id = NodeId::ForName("s"), y_id = NodeId::ForName("y"),
               z_id = NodeId::ForName("z"), x_id = NodeId::ForName("x");
  std::vector<Frame> at_z;  // before `z`, whose handler fills it
  std::unique_ptr<Transport> sender;
  std::unique_ptr<Transport> z;
  TimedStageCompute compute{&clock, TimedStageCompute::Options{.stage = 1}};
};

// Y's admission and the hop after's refusals, with a timed compute: a
// sender's second verify frame while its first waits is refused
// RESOURCE_EXHAUSTED, as is one of another iteration (FAILED_PRECONDITION);
// the answer reaches the hop after as a DIRECTION_SKETCH frame; a sketch
// frame naming another micro-batch, or one sent to a node that checks
// nothing, is refused.
TEST(StageServerVerifyTest, AdmissionIsBoundedAndAnswersAreAddressed) {
  ThreeHops h;
  common::SimClock& clock = h.clock;
  Switchboard& board = h.board;
  const NodeId &s_id = h.s_id, &y_id = h.y_id, &z_id = h.z_id, &x_id = h.x_id;
  std::unique_ptr<Transport>& sender = h.sender;
  std::unique_ptr<Transport>& z = h.z;
  std::vector<Frame>& at_z = h.at_z;
  TimedStageCompute& compute = h.compute;
  StaticSwarmView view({{s_id, {0}, 4, "", ""}, {y_id, {1}, 4, "", ""}, {z_id, {2}, 4, "", ""}});
  std::unique_ptr<Transport> y_transport = *board.Attach(y_id);
  StageServer y(y_transport.get(), &clock, &view, {{1, &compute}}, StageServerOptions{});
  y.Attach();

  auto verify_frame = [&](uint64_t iteration, uint64_t mb) {
    return HopOneFrame(s_id, y_id, z_id, iteration, mb, &x_id);
  };
  std::vector<absl::Status> acks(4, absl::UnknownError("no ack"));
  sender->Send(y_id, verify_frame(0, 1), [&](absl::Status s) { acks[0] = s; });
  sender->Send(y_id, verify_frame(0, 2), [&](absl::Status s) { acks[1] = s; });
  sender->Send(y_id, verify_frame(3, 3), [&](absl::Status s) { acks[2] = s; });
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(acks[0].ok()) << acks[0];
  EXPECT_TRUE(absl::IsResourceExhausted(acks[1])) << acks[1];
  EXPECT_TRUE(absl::IsFailedPrecondition(acks[2])) << acks[2];
  // The answer: to the hop after (route[2]), a sketch frame for mb 1 that
  // names X at hop 1; and the sender's share is free again.
  ASSERT_EQ(at_z.size(), 1u);
  EXPECT_EQ(at_z[0].header.direction(), proto::DIRECTION_SKETCH);
  EXPECT_EQ(at_z[0].header.hop_index(), 2u);
  EXPECT_FALSE(at_z[0].header.has_verify());
  EXPECT_EQ(at_z[0].header.sketch_answer().mb_id(), 1u);
  EXPECT_EQ(at_z[0].header.sketch_answer().hop_index(), 1u);
  EXPECT_EQ(at_z[0].header.sketch_answer().checked(), x_id.Bytes());
  sender->Send(y_id, verify_frame(0, 4), [&](absl::Status s) { acks[3] = s; });
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(acks[3].ok()) << acks[3];
  StageServerStats st = y.stats();
  EXPECT_EQ(st.verify_answered, 2);
  EXPECT_EQ(st.verify_refused, 2);
  EXPECT_EQ(st.forwards, 0);
  EXPECT_EQ(st.slots_in_use, 0);
  EXPECT_EQ(compute.pending(), 0u);

  // Sketch frames to Y, which checks nothing (no judge): refused.
  Frame sketch = at_z[0];
  sketch.header.mutable_route(2)->set_node_id(y_id.Bytes());
  absl::Status ack = absl::UnknownError("no ack");
  sender->Send(y_id, sketch, [&](absl::Status s) { ack = s; });
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(absl::IsFailedPrecondition(ack)) << ack;
  y.Detach();

  // A hop after that checks: an answer naming another micro-batch than its
  // frame is refused; the right one is taken.
  StageServerOptions o;
  o.member_on_probation = [](const PeerId&) { return true; };
  o.output_checks.judge = [](const WireTensor&, const model::OutputSketch&,
                             const model::SketchCheckOptions&) -> absl::StatusOr<model::SketchVerdict> {
    return model::SketchVerdict{};
  };
  o.sketch_limits.max_shape = {1 << 20};
  TimedStageCompute compute2(&clock, TimedStageCompute::Options{.stage = 2});
  StageServer checker(z.get(), &clock, &view, {{2, &compute2}}, o);
  checker.Attach();
  // (Both answers went through z's duplicate window already: fresh mb ids.)
  ASSERT_EQ(at_z.size(), 2u);
  Frame other = at_z[1];
  other.header.set_mb_id(9);
  Frame right = at_z[1];
  right.header.set_mb_id(10);
  right.header.mutable_sketch_answer()->set_mb_id(10);
  sender->Send(z_id, other, [&](absl::Status s) { ack = s; });
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(absl::IsInvalidArgument(ack)) << ack;
  sender->Send(z_id, right, [&](absl::Status s) { ack = s; });
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(ack.ok()) << ack;
  EXPECT_EQ(checker.stats().sketch_frames_refused, 1);
  EXPECT_EQ(checker.stats().checks.pending_sketches, 1);
  checker.Detach();
}

// A verify-only forward waits while training holds every slot, and goes
// when its iteration ends; the sender's share is free again.
TEST(StageServerVerifyTest, AWaitingCheckGoesWithItsIteration) {
  ThreeHops h;
  common::SimClock& clock = h.clock;
  Switchboard& board = h.board;
  const NodeId &s_id = h.s_id, &y_id = h.y_id, &z_id = h.z_id, &x_id = h.x_id;
  std::unique_ptr<Transport>& sender = h.sender;
  const std::vector<Frame>& at_z = h.at_z;
  TimedStageCompute& compute = h.compute;
  StaticSwarmView view({{s_id, {0}, 4, "", ""}, {y_id, {1}, 1, "", ""}, {z_id, {2}, 4, "", ""}});
  std::unique_ptr<Transport> y_transport = *board.Attach(y_id);
  StageServerOptions o;
  o.memory_slots = 1;
  StageServer y(y_transport.get(), &clock, &view, {{1, &compute}}, o);
  y.Attach();
  std::vector<absl::Status> acks(3, absl::UnknownError("no ack"));
  // A training forward takes the only slot until its backward (none comes).
  sender->Send(y_id, HopOneFrame(s_id, y_id, z_id, 0, 1, nullptr),
               [&](absl::Status s) { acks[0] = s; });
  clock.Advance(absl::Seconds(1));
  sender->Send(y_id, HopOneFrame(s_id, y_id, z_id, 0, 2, &x_id),
               [&](absl::Status s) { acks[1] = s; });
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(acks[0].ok()) << acks[0];
  EXPECT_TRUE(acks[1].ok()) << acks[1];
  EXPECT_EQ(at_z.size(), 1u);  // the training forward's output; no answer
  EXPECT_EQ(y.stats().verify_answered, 0);
  y.BeginIteration(1);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(y.stats().verify_answered, 0);
  EXPECT_EQ(y.stats().verify_failed, 0);  // dropped while waiting, never run
  EXPECT_EQ(y.stats().slots_in_use, 0);
  // The share is free: a check of the new iteration is admitted and answered.
  sender->Send(y_id, HopOneFrame(s_id, y_id, z_id, 1, 3, &x_id),
               [&](absl::Status s) { acks[2] = s; });
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(acks[2].ok()) << acks[2];
  EXPECT_EQ(y.stats().verify_answered, 1);
  EXPECT_EQ(at_z.size(), 2u);  // the training output, then this answer (not the dropped one)
  y.Detach();
}

// A check of iteration 1 that comes after Y's EndIteration(0), before its
// BeginIteration(1) (a hop before that began 1 ahead of Y): admitted, run
// only once iteration 1 begins, and answered.
TEST(StageServerVerifyTest, ACheckBetweenIterationsWaitsForItsIteration) {
  ThreeHops h;
  common::SimClock& clock = h.clock;
  const std::vector<Frame>& at_z = h.at_z;
  StaticSwarmView view(
      {{h.s_id, {0}, 4, "", ""}, {h.y_id, {1}, 4, "", ""}, {h.z_id, {2}, 4, "", ""}});
  std::unique_ptr<Transport> y_transport = *h.board.Attach(h.y_id);
  StageServer y(y_transport.get(), &clock, &view, {{1, &h.compute}}, StageServerOptions{});
  y.Attach();
  bool quiesced = false;
  y.EndIteration(0, [&] { quiesced = true; });
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(quiesced);
  absl::Status ack = absl::UnknownError("no ack");
  h.sender->Send(h.y_id, HopOneFrame(h.s_id, h.y_id, h.z_id, 1, 1, &h.x_id),
                 [&](absl::Status s) { ack = s; });
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(ack.ok()) << ack;
  EXPECT_EQ(y.stats().verify_refused, 0);
  EXPECT_EQ(y.stats().verify_answered, 0);  // not before our iteration 1 begins
  EXPECT_EQ(h.compute.pending(), 0u);
  EXPECT_TRUE(at_z.empty());
  y.BeginIteration(1);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(y.stats().verify_answered, 1);
  ASSERT_EQ(at_z.size(), 1u);
  EXPECT_EQ(at_z[0].header.direction(), proto::DIRECTION_SKETCH);
  EXPECT_EQ(at_z[0].header.sketch_answer().iteration(), 1u);
  y.Detach();
}

}  // namespace
}  // namespace skipswarm::node
