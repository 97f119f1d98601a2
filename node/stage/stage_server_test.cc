#include "node/stage/stage_server.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "model/out_of_memory.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/timed_stage_compute.h"
#include "node/transport/fault_transport.h"
#include "node/transport/frame.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

struct Recorder : OriginListener {
  void OnTail(uint64_t, uint64_t mb, double loss) override { losses[mb] = loss; }
  void OnFinished(uint64_t, uint64_t mb, const absl::Status& s) override {
    finished[mb] = s;
    order.push_back(mb);
  }
  std::map<uint64_t, double> losses;
  std::map<uint64_t, absl::Status> finished;
  std::vector<uint64_t> order;
};

// Returns a fixed route (or error) and records what it was asked.
struct FakeRepairer : RouteRepairer {
  absl::StatusOr<std::vector<RouteHop>> Repair(const RepairRequest& r,
                                               const SwarmView&) override {
    requests.push_back(r);
    return answer;
  }
  absl::StatusOr<std::vector<RouteHop>> answer = absl::AbortedError("no");
  std::vector<RepairRequest> requests;
};

SwitchboardOptions Latency(absl::Duration d) {
  SwitchboardOptions o;
  o.latency = d;
  return o;
}

// A swarm of nodes, each hosting one stage, on a SimClock with timed compute.
class Swarm {
 public:
  // stages[i] = stage hosted by node i ("n<i>"); slots per node.
  // `wrap`: a decorator for node i's compute (null: none).
  using Wrap = std::function<std::unique_ptr<StageCompute>(int i, StageCompute* inner)>;
  Swarm(std::vector<int> stages, int slots = 4, int queue = 8,
        std::function<void(StageServerOptions&)> tweak = nullptr, Wrap wrap = nullptr)
      : board_(&clock_, Latency(absl::Milliseconds(1))) {
    std::vector<PeerInfo> members;
    for (size_t i = 0; i < stages.size(); ++i) {
      ids_.push_back(NodeId::ForName("n" + std::to_string(i)));
      members.push_back({ids_.back(), {stages[i]}, stages[i] == 0 ? 4 : slots, "", ""});
    }
    for (size_t i = 0; i < stages.size(); ++i) {
      auto views = std::make_unique<StaticSwarmView>(members);
      auto t = board_.Attach(ids_[i]);
      EXPECT_TRUE(t.ok());
      auto faulty = std::make_unique<FaultInjectingTransport>(*std::move(t), &clock_, 1);
      faults_.push_back(faulty.get());
      auto compute = std::make_unique<TimedStageCompute>(
          &clock_, TimedStageCompute::Options{.stage = stages[i],
                                              .forward = absl::Milliseconds(10)});
      StageServerOptions o;
      o.memory_slots = stages[i] == 0 ? 4 : slots;
      o.max_queued_forwards = queue;
      if (tweak) tweak(o);
      StageCompute* served = compute.get();
      if (wrap) {
        wrappers_.push_back(wrap(static_cast<int>(i), compute.get()));
        served = wrappers_.back().get();
      }
      auto server = std::make_unique<StageServer>(
          faulty.get(), &clock_, views.get(), std::map<int, StageCompute*>{{stages[i], served}},
          o);
      server->Attach();
      server->SetOriginListener(&recorder_);
      transports_.push_back(std::move(faulty));
      views_.push_back(std::move(views));
      computes_.push_back(std::move(compute));
      servers_.push_back(std::move(server));
    }
  }

  std::vector<RouteHop> Route(std::vector<int> nodes) {
    std::vector<RouteHop> r;
    for (int n : nodes) r.push_back({ids_[n], computes_[n]->stage()});
    return r;
  }

  // Kills node i: its endpoint vanishes from the switchboard.
  void Kill(int i) {
    servers_[i]->Detach();
    transports_[i].reset();
  }

  common::SimClock clock_;
  Switchboard board_;
  std::vector<NodeId> ids_;
  std::vector<FaultInjectingTransport*> faults_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<StaticSwarmView>> views_;
  std::vector<std::unique_ptr<TimedStageCompute>> computes_;
  std::vector<std::unique_ptr<StageCompute>> wrappers_;
  std::vector<std::unique_ptr<StageServer>> servers_;
  Recorder recorder_;
};

TEST(StageServerTest, MicroBatchTravelsRouteAndBack) {
  Swarm swarm({0, 1, 2});
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 7, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.count(7), 1u);
  EXPECT_TRUE(swarm.recorder_.finished[7].ok()) << swarm.recorder_.finished[7];
  EXPECT_EQ(swarm.recorder_.losses.count(7), 1u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(swarm.computes_[i]->TakeGradients()->visits, 1) << i;
    EXPECT_EQ(swarm.computes_[i]->pending(), 0u) << i;
    EXPECT_EQ(swarm.servers_[i]->stats().slots_in_use, 0) << i;
  }
  // 10 ms fwd x3, 2.5 ms tail, 15 ms bwd x3 and 6 hops of 2 ms (frame + ack
  // latency only delays the ack; delivery takes 1 ms).
  EXPECT_EQ(swarm.servers_[1]->stats().forwards, 1);
}

TEST(StageServerTest, OriginRespectsMemorySlots) {
  Swarm swarm({0, 1});
  swarm.servers_[0]->Inject(0, 10, swarm.Route({0, 1}), {}).IgnoreError();
  swarm.servers_[0]->Inject(0, 11, swarm.Route({0, 1}), {}).IgnoreError();
  EXPECT_TRUE(swarm.servers_[0]->Inject(0, 1, swarm.Route({0, 1}), {}).ok());
  EXPECT_TRUE(swarm.servers_[0]->Inject(0, 2, swarm.Route({0, 1}), {}).ok());
  EXPECT_FALSE(swarm.servers_[0]->CanInject());
  EXPECT_TRUE(absl::IsResourceExhausted(swarm.servers_[0]->Inject(0, 3, swarm.Route({0, 1}), {})));
  EXPECT_TRUE(absl::IsAlreadyExists(swarm.servers_[0]->Inject(0, 1, swarm.Route({0, 1}), {})));
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(swarm.recorder_.finished.size(), 4u);
  EXPECT_TRUE(swarm.servers_[0]->CanInject());
}

// A compute that runs out of memory (model::OutOfMemoryError, as
// TorchGuard reports libtorch's allocation failures) when a forward would
// make a third micro-batch resident: memory for two.
class TwoMicroBatchMemory : public ForwardingStageCompute {
 public:
  using ForwardingStageCompute::ForwardingStageCompute;
  void Forward(uint64_t mb, WireTensor input, TensorDone done) override {
    if (pending() >= 2) {
      ++failures;
      // Never inline (StageTasks' rule): the inner compute's clock posts it.
      return ForwardingStageCompute::Forward(
          mb, std::move(input), [done = std::move(done)](absl::StatusOr<WireTensor>) mutable {
            done(model::OutOfMemoryError("Forward", "libtorch: can't allocate memory"));
          });
    }
    ForwardingStageCompute::Forward(mb, std::move(input), std::move(done));
  }
  int failures = 0;
};

TEST(StageServerTest, OutOfMemoryLowersTheSlotsAndTheNodeKeepsTraining) {
  TwoMicroBatchMemory* relay = nullptr;
  Swarm swarm({0, 1}, /*slots=*/4, /*queue=*/8, nullptr,
              [&](int i, StageCompute* inner) -> std::unique_ptr<StageCompute> {
                if (i != 1) return std::make_unique<ForwardingStageCompute>(inner);
                auto c = std::make_unique<TwoMicroBatchMemory>(inner);
                relay = c.get();
                return c;
              });
  ASSERT_NE(relay, nullptr);
  for (uint64_t mb = 1; mb <= 4; ++mb) {
    ASSERT_TRUE(swarm.servers_[0]->Inject(0, mb, swarm.Route({0, 1}), {}).ok());
  }
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.size(), 4u);
  int ok = 0;
  for (const auto& [mb, s] : swarm.recorder_.finished) ok += s.ok();
  const StageServerStats after_oom = swarm.servers_[1]->stats();
  EXPECT_GE(relay->failures, 1);
  EXPECT_EQ(after_oom.out_of_memory, relay->failures);
  EXPECT_EQ(after_oom.dropped_by_reason.at("out_of_memory"), relay->failures);
  EXPECT_EQ(ok, 4 - relay->failures);
  // Lowered to what it held beside the failed MB: two.
  EXPECT_EQ(after_oom.memory_slots, 2);
  EXPECT_EQ(after_oom.slots_in_use, 0);
  EXPECT_EQ(swarm.computes_[1]->pending(), 0u);  // the failed MB left nothing behind

  // The next iteration: four MBs through the same relay, two at a time,
  // all trained, no further failure.
  const int failures = relay->failures;
  swarm.servers_[0]->BeginIteration(1);
  swarm.servers_[1]->BeginIteration(1);
  swarm.recorder_.finished.clear();
  for (uint64_t mb = 11; mb <= 14; ++mb) {
    ASSERT_TRUE(swarm.servers_[0]->Inject(1, mb, swarm.Route({0, 1}), {}).ok());
  }
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.size(), 4u);
  for (const auto& [mb, s] : swarm.recorder_.finished) EXPECT_TRUE(s.ok()) << mb << ": " << s;
  EXPECT_EQ(relay->failures, failures);
  EXPECT_EQ(swarm.servers_[1]->stats().memory_slots, 2);
}

// Only an allocation failure lowers the slots: a compute's other
// RESOURCE_EXHAUSTED (a decoder refusing an oversized tensor from a peer)
// leaves them alone.
TEST(StageServerTest, OtherResourceExhaustedKeepsTheSlots) {
  struct Refusing : ForwardingStageCompute {
    using ForwardingStageCompute::ForwardingStageCompute;
    void Forward(uint64_t mb, WireTensor input, TensorDone done) override {
      ForwardingStageCompute::Forward(
          mb, std::move(input), [done = std::move(done)](absl::StatusOr<WireTensor>) mutable {
            done(absl::ResourceExhaustedError("decode: payload of 9 GiB over the limit"));
          });
    }
  };
  Swarm swarm({0, 1}, 4, 8, nullptr, [](int i, StageCompute* inner) -> std::unique_ptr<StageCompute> {
    if (i == 1) return std::make_unique<Refusing>(inner);
    return std::make_unique<ForwardingStageCompute>(inner);
  });
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 1, swarm.Route({0, 1}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.size(), 1u);
  EXPECT_FALSE(swarm.recorder_.finished[1].ok());
  const StageServerStats s = swarm.servers_[1]->stats();
  EXPECT_EQ(s.memory_slots, 4);
  EXPECT_EQ(s.out_of_memory, 0);
  EXPECT_EQ(s.dropped_by_reason.at("compute_failed"), 1);
}

TEST(StageServerTest, FullRelayRefusesAndSenderRetriesAnotherReplica) {
  // n1 and n2 both host stage 1 with one slot and no queue (the origin has 4).
  Swarm swarm({0, 1, 1}, /*slots=*/1, /*queue=*/0);
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 2, swarm.Route({0, 1}), {}).ok());
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 4, swarm.Route({0, 1}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[2].ok());
  EXPECT_TRUE(swarm.recorder_.finished[4].ok());
  EXPECT_EQ(swarm.servers_[1]->stats().frames_refused, 1);
  EXPECT_EQ(swarm.servers_[0]->stats().rerouted, 1);
  EXPECT_EQ(swarm.computes_[1]->TakeGradients()->visits, 1);
  EXPECT_EQ(swarm.computes_[2]->TakeGradients()->visits, 1);
}

TEST(StageServerTest, KilledReplicaIsRoutedAround) {
  Swarm swarm({0, 1, 1, 2});
  swarm.Kill(1);
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 3}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.count(5), 1u);
  EXPECT_TRUE(swarm.recorder_.finished[5].ok()) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.servers_[0]->stats().rerouted, 1);
  EXPECT_EQ(swarm.servers_[0]->stats().rerouted_by_reason.at("unavailable"), 1);
  EXPECT_EQ(swarm.computes_[2]->TakeGradients()->visits, 1);
}

TEST(StageServerTest, PeerTheViewCallsDeadIsRoutedAroundWithoutSending) {
  Swarm swarm({0, 1, 1, 2});
  swarm.views_[0]->MarkDead(swarm.ids_[1]);
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 3}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[5].ok()) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.servers_[0]->stats().rerouted_by_reason.at("peer_dead"), 1);
  EXPECT_EQ(swarm.servers_[1]->stats().frames_admitted, 0);
  EXPECT_EQ(swarm.computes_[2]->TakeGradients()->visits, 1);
}

TEST(StageServerTest, AWrongDeathVerdictDoesNotLoseMicroBatches) {
  // Every view but n1's own calls n1 dead (say, a slow probe answer); n1 is
  // the only replica of stage 1. Forwards with no other route and
  // backwards are still sent to it.
  Swarm swarm({0, 1, 2});
  swarm.views_[0]->MarkDead(swarm.ids_[1]);
  swarm.views_[2]->MarkDead(swarm.ids_[1]);
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[5].ok()) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.computes_[1]->TakeGradients()->visits, 1);
  EXPECT_EQ(swarm.servers_[0]->stats().rerouted, 0);
  EXPECT_EQ(swarm.servers_[0]->stats().dropped, 0);
}

TEST(StageServerTest, HungPeerIsGivenUpAfterItsObservedHopTimes) {
  Swarm swarm({0, 1, 1, 2}, 4, 8, [](StageServerOptions& o) {
    o.hop_deadline = absl::Seconds(10);
    o.min_hop_deadline = absl::Milliseconds(50);
  });
  // Ten healthy hops to n1 teach n0 its ack time (2 ms on this board).
  for (uint64_t mb = 0; mb < 10; ++mb) {
    ASSERT_TRUE(swarm.servers_[0]->Inject(0, mb, swarm.Route({0, 1, 3}), {}).ok());
    swarm.clock_.Advance(absl::Milliseconds(200));
  }
  ASSERT_EQ(swarm.recorder_.finished.size(), 10u);
  // n1 swallows the next frame (no ack, no broken stream).
  swarm.faults_[0]->DropNext(swarm.ids_[1], 1);
  const absl::Duration t0 = swarm.clock_.SteadyNow();
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 100, swarm.Route({0, 1, 3}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[100].ok()) << swarm.recorder_.finished[100];
  const StageServerStats s = swarm.servers_[0]->stats();
  EXPECT_EQ(s.rerouted_by_reason.at("deadline"), 1);
  // 10 ms start + the 50 ms floor, not the 10 s initial deadline.
  EXPECT_LE(s.first_reroute_at - t0, absl::Milliseconds(70));
  EXPECT_GE(s.hop_latency.count, 10 + 10 + 1);  // to n1 and n3 x10, then n2
  EXPECT_GT(s.traffic.at(swarm.ids_[1]).frames_sent, 10);
}

TEST(StageServerTest, InjectedRepairerChoosesTheRoute) {
  FakeRepairer fake;
  Swarm swarm({0, 1, 1, 2}, 4, 8, [&](StageServerOptions& o) { o.repairer = &fake; });
  swarm.Kill(1);
  // The repairer sends it to the other replica and skips stage 2.
  fake.answer = std::vector<RouteHop>{{swarm.ids_[0], 0}, {swarm.ids_[2], 1}};
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 3}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(fake.requests.size(), 1u);
  EXPECT_EQ(fake.requests[0].holder, 0);
  EXPECT_EQ(fake.requests[0].failed, std::vector<NodeId>{swarm.ids_[1]});
  // Shorter than planned but allow_skip is off: refused, dropped.
  EXPECT_TRUE(absl::IsUnavailable(swarm.recorder_.finished[5])) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.computes_[2]->TakeGradients()->visits, 0);
}

TEST(StageServerTest, SkipRepairFromTheInjectedRepairerRunsTheShorterRoute) {
  FakeRepairer fake;
  Swarm swarm({0, 1, 1, 2}, 4, 8, [&](StageServerOptions& o) {
    o.repairer = &fake;
    o.allow_skip = true;
  });
  swarm.Kill(1);
  fake.answer = std::vector<RouteHop>{{swarm.ids_[0], 0}, {swarm.ids_[2], 1}};
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 3}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[5].ok()) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.computes_[2]->TakeGradients()->visits, 1);
  EXPECT_EQ(swarm.computes_[3]->TakeGradients()->visits, 0);
}

TEST(StageServerTest, ServesLowerPriorityFirst) {
  Swarm swarm({0, 1}, /*slots=*/1);
  // All three wait at the origin, which starts them by priority.
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 1, swarm.Route({0, 1}), {}, 5).ok());
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 2, swarm.Route({0, 1}), {}, 9).ok());
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 3, swarm.Route({0, 1}), {}, 1).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  // Injected in one instant: the origin picks after all three are in
  // (Note [Dispatch at the end of the instant]).
  EXPECT_EQ(swarm.recorder_.order, (std::vector<uint64_t>{3, 1, 2}));
}

TEST(StageServerTest, EqualPrioritiesKeepArrivalOrder) {
  Swarm swarm({0, 1}, /*slots=*/1);
  for (uint64_t mb : {4, 2, 3}) {
    ASSERT_TRUE(swarm.servers_[0]->Inject(0, mb, swarm.Route({0, 1}), {}).ok());
  }
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(swarm.recorder_.order, (std::vector<uint64_t>{4, 2, 3}));
}

TEST(StageServerTest, NoReplicaLeftDropsAtOriginOrSkips) {
  Swarm swarm({0, 1, 2});
  swarm.Kill(1);
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.count(5), 1u);
  EXPECT_TRUE(absl::IsUnavailable(swarm.recorder_.finished[5])) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.servers_[0]->stats().dropped, 1);
  EXPECT_EQ(swarm.servers_[0]->stats().dropped_by_reason.at("unrepairable"), 1);
  EXPECT_EQ(swarm.servers_[0]->stats().slots_in_use, 0);
}

TEST(StageServerTest, LostMicroBatchIsAbortedUpstreamAtOnce) {
  Swarm swarm({0, 1, 2, 3});
  swarm.Kill(2);
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 2, 3}), {}).ok());
  swarm.clock_.Advance(absl::Milliseconds(100));
  ASSERT_EQ(swarm.recorder_.finished.count(5), 1u);
  EXPECT_TRUE(absl::IsAborted(swarm.recorder_.finished[5])) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.servers_[1]->stats().slots_in_use, 0);
  EXPECT_EQ(swarm.computes_[1]->pending(), 0u);
  EXPECT_EQ(swarm.servers_[0]->stats().slots_in_use, 0);
  EXPECT_EQ(swarm.computes_[0]->pending(), 0u);
}

TEST(StageServerTest, BackwardToDeadHopAbortsTheHopsBefore) {
  Swarm swarm({0, 1, 2, 3});
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 6, swarm.Route({0, 1, 2, 3}), {}).ok());
  // Forward reaches n3 (3 x 10 ms + hops); kill n2 before the backward passes.
  swarm.clock_.Advance(absl::Milliseconds(40));
  swarm.Kill(2);
  swarm.clock_.Advance(absl::Milliseconds(200));
  ASSERT_EQ(swarm.recorder_.finished.count(6), 1u);
  EXPECT_TRUE(absl::IsAborted(swarm.recorder_.finished[6])) << swarm.recorder_.finished[6];
  EXPECT_EQ(swarm.servers_[1]->stats().slots_in_use, 0);
  EXPECT_EQ(swarm.computes_[1]->pending(), 0u);
}

// Sends a hand-made frame from node `from` and returns the ack.
absl::Status SendRaw(Swarm& swarm, int from, int to, proto::FrameHeader header) {
  Frame f;
  f.header = std::move(header);
  f.header.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
  f.header.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
  f.header.mutable_tensor()->add_shape(1);
  f.payload = absl::Cord(std::string(4, '\0'));
  SealFrame(f);
  std::optional<absl::Status> ack;
  swarm.transports_[from]->Send(swarm.ids_[to], std::move(f), [&](absl::Status s) { ack = s; });
  swarm.clock_.Advance(absl::Milliseconds(5));
  return ack.value_or(absl::InternalError("no ack"));
}

proto::FrameHeader Header(Swarm& swarm, std::vector<int> nodes, int hop, bool forward,
                          uint64_t mb) {
  proto::FrameHeader h;
  h.set_iteration(0);
  h.set_mb_id(mb);
  h.set_origin(swarm.ids_[nodes[0]].Bytes());
  for (int n : nodes) {
    auto* r = h.add_route();
    r->set_node_id(swarm.ids_[n].Bytes());
    r->set_stage(swarm.computes_[n]->stage());
  }
  h.set_hop_index(hop);
  h.set_direction(forward ? proto::DIRECTION_FORWARD : proto::DIRECTION_BACKWARD);
  return h;
}

TEST(StageServerTest, RejectsBadFramesAndKeepsServing) {
  Swarm swarm({0, 1, 2});
  // Route that does not include n1 at the hop: refused by the transport's
  // validator or by the server.
  EXPECT_TRUE(absl::IsInvalidArgument(SendRaw(swarm, 0, 1, Header(swarm, {0, 2, 1}, 1, true, 1))));
  // Gradient for an unknown micro-batch.
  EXPECT_TRUE(absl::IsNotFound(SendRaw(swarm, 2, 1, Header(swarm, {0, 1, 2}, 1, false, 2))));
  // Tail for a micro-batch that was never started.
  EXPECT_TRUE(absl::IsNotFound(SendRaw(swarm, 2, 0, Header(swarm, {0, 1, 2}, 0, true, 3))));
  // A stage the node does not host.
  proto::FrameHeader wrong_stage = Header(swarm, {0, 1, 2}, 1, true, 4);
  wrong_stage.mutable_route(1)->set_stage(2);
  EXPECT_TRUE(absl::IsInvalidArgument(SendRaw(swarm, 0, 1, wrong_stage)));
  // A forward admitted once; the duplicate is refused.
  EXPECT_TRUE(SendRaw(swarm, 0, 1, Header(swarm, {0, 1, 2}, 1, true, 5)).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(SendRaw(swarm, 0, 1, Header(swarm, {0, 1, 2}, 1, true, 5))));
  EXPECT_GE(swarm.servers_[1]->stats().frames_refused, 2);
  // Still serving.
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 9, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[9].ok());
}

TEST(StageServerTest, LaterIterationWaitsAndOlderIsRefused) {
  Swarm swarm({0, 1});
  proto::FrameHeader future = Header(swarm, {0, 1}, 1, true, 1);
  future.set_iteration(1);
  EXPECT_TRUE(SendRaw(swarm, 0, 1, future).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(swarm.servers_[1]->stats().forwards, 0);
  swarm.servers_[1]->BeginIteration(1);
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(swarm.servers_[1]->stats().forwards, 1);
  proto::FrameHeader past = Header(swarm, {0, 1}, 1, true, 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(SendRaw(swarm, 0, 1, past)));
  // Ending iteration 1 frees the visit that never got its backward.
  swarm.servers_[1]->BeginIteration(2);
  EXPECT_EQ(swarm.servers_[1]->stats().slots_in_use, 0);
  EXPECT_EQ(swarm.computes_[1]->pending(), 0u);
}

// Note [Relay drops]: a relay (n2) that moves past the iteration of a
// visit it admitted tells the hop before at once, and the notice reaches
// the origin through n1. Before, nothing came back: the origin waited out
// its MB deadline and n1 held the slot until its own iteration ended.
TEST(StageServerTest, RelayThatMovesAheadTellsTheOriginAtOnce) {
  Swarm swarm({0, 1, 2});
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Milliseconds(25));  // n2 runs the forward
  ASSERT_EQ(swarm.servers_[2]->stats().slots_in_use, 1);
  swarm.servers_[2]->BeginIteration(1);
  swarm.clock_.Advance(absl::Milliseconds(10));  // two notices of 1 ms each
  ASSERT_EQ(swarm.recorder_.finished.count(5), 1u);
  EXPECT_TRUE(absl::IsAborted(swarm.recorder_.finished[5])) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.servers_[2]->stats().dropped_by_reason.at("iteration_ended"), 1);
  EXPECT_EQ(swarm.servers_[1]->stats().dropped_by_reason.at("aborted_downstream"), 1);
  EXPECT_EQ(swarm.servers_[1]->stats().slots_in_use, 0);
  EXPECT_EQ(swarm.computes_[1]->pending(), 0u);
}

// Note [Relay drops]: a relay whose owner replaces its server (a re-entry,
// a stage move) releases what it holds, and the origin learns at once.
TEST(StageServerTest, ReleasedRelayTellsTheOriginAtOnce) {
  Swarm swarm({0, 1, 2});
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Milliseconds(25));  // n2 runs the forward
  swarm.servers_[2]->ReleaseAll();
  swarm.clock_.Advance(absl::Milliseconds(10));
  ASSERT_EQ(swarm.recorder_.finished.count(5), 1u);
  EXPECT_TRUE(absl::IsAborted(swarm.recorder_.finished[5])) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.servers_[2]->stats().dropped_by_reason.at("released"), 1);
  EXPECT_EQ(swarm.servers_[2]->stats().slots_in_use, 0);
  EXPECT_EQ(swarm.computes_[2]->pending(), 0u);
  EXPECT_EQ(swarm.servers_[1]->stats().slots_in_use, 0);
  // The released server keeps serving new micro-batches.
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 6, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[6].ok()) << swarm.recorder_.finished[6];
}

// Note [Stopping server]: a replica that stops after iteration 1 serves
// iteration 1 to the end; a forward of iteration 2 (planned before its LEFT
// arrived) is refused, and the hop before re-routes it to the other
// replica at once, without a dead verdict.
TEST(StageServerTest, StoppingReplicaIsRoutedAroundAfterItsLastIteration) {
  Swarm swarm({0, 1, 2, 2});
  for (auto& server : swarm.servers_) server->BeginIteration(1);
  swarm.servers_[2]->StopAfter(1);
  ASSERT_TRUE(swarm.servers_[0]->Inject(1, 5, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[5].ok()) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.servers_[2]->stats().forwards, 1);
  for (auto& server : swarm.servers_) server->BeginIteration(2);
  ASSERT_TRUE(swarm.servers_[0]->Inject(2, 6, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(swarm.recorder_.finished[6].ok()) << swarm.recorder_.finished[6];
  EXPECT_EQ(swarm.servers_[2]->stats().forwards, 1) << "iteration 2 was computed on n2";
  EXPECT_EQ(swarm.servers_[2]->stats().frames_stopping, 1);
  EXPECT_EQ(swarm.servers_[3]->stats().forwards, 1);
  EXPECT_EQ(swarm.servers_[1]->stats().rerouted_by_reason.at("stopping"), 1);
  EXPECT_TRUE(swarm.views_[1]->IsAlive(swarm.ids_[2]));
}

// Note [Stopping server]: the last replica of a stage computes nothing of
// a later iteration: a frame of it that waited there is dropped when the
// stop is fixed (the origin learns at once), and later ones are refused
// and dropped at the hop before, which has no other replica.
TEST(StageServerTest, TheLastStoppingReplicaComputesNoLaterIteration) {
  Swarm swarm({0, 1, 2});
  for (int i : {0, 1}) swarm.servers_[i]->BeginIteration(1);
  ASSERT_TRUE(swarm.servers_[0]->Inject(1, 5, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Milliseconds(50));  // waits at n2, still at 0
  EXPECT_EQ(swarm.servers_[2]->stats().forwards, 0);
  swarm.servers_[2]->StopAfter(0);
  swarm.clock_.Advance(absl::Milliseconds(10));
  ASSERT_EQ(swarm.recorder_.finished.count(5), 1u);
  EXPECT_TRUE(absl::IsAborted(swarm.recorder_.finished[5])) << swarm.recorder_.finished[5];
  // The trainer still begins the next iteration after its last one.
  swarm.servers_[2]->BeginIteration(1);
  ASSERT_TRUE(swarm.servers_[0]->Inject(1, 6, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.count(6), 1u);
  EXPECT_FALSE(swarm.recorder_.finished[6].ok());
  EXPECT_EQ(swarm.servers_[2]->stats().forwards, 0) << "a later iteration was computed";
  EXPECT_EQ(swarm.servers_[2]->stats().frames_stopping, 2);
  EXPECT_EQ(swarm.servers_[2]->stats().slots_in_use, 0);
  EXPECT_EQ(swarm.computes_[2]->pending(), 0u);
  EXPECT_EQ(swarm.servers_[1]->stats().slots_in_use, 0);
}

// Note [Stopping refusals]: a visit of a later iteration that waited at a
// stopping node and was dropped when the stop was fixed computed nothing
// there, as a refused frame: its notice names the stopping node and its
// last iteration, so the origin re-runs the micro-batch (Note [Stopping
// drops] in node/train/data_node_driver.h). Through a relay (n1) and sent
// by the origin itself (n0 -> n2). Before, the notice carried no cause and
// the origin counted the micro-batch as lost downstream (a drop seen in
// restart_behind_test, right after "stopping after iteration N: dropped 1
// micro-batch visits of later iterations").
TEST(StageServerTest, AVisitDroppedAtTheStopCarriesTheStoppingCause) {
  Swarm swarm({0, 1, 2});
  for (int i : {0, 1}) swarm.servers_[i]->BeginIteration(1);
  ASSERT_TRUE(swarm.servers_[0]->Inject(1, 5, swarm.Route({0, 1, 2}), {}).ok());
  ASSERT_TRUE(swarm.servers_[0]->Inject(1, 6, swarm.Route({0, 2}), {}).ok());
  swarm.clock_.Advance(absl::Milliseconds(50));  // both wait at n2, still at 0
  EXPECT_EQ(swarm.servers_[2]->stats().forwards, 0);
  swarm.servers_[2]->StopAfter(0);
  swarm.clock_.Advance(absl::Milliseconds(10));
  for (uint64_t mb : {5, 6}) {
    ASSERT_EQ(swarm.recorder_.finished.count(mb), 1u) << mb;
    const absl::Status& why = swarm.recorder_.finished[mb];
    EXPECT_TRUE(absl::IsAborted(why)) << why;
    const std::optional<StoppingCause> cause = StoppingCauseOf(why);
    ASSERT_TRUE(cause.has_value()) << "micro-batch " << mb << ": " << why;
    EXPECT_EQ(cause->node, swarm.ids_[2]) << mb;
    EXPECT_EQ(cause->stop_after, 0u) << mb;
    EXPECT_EQ(cause->delivered_by, swarm.ids_[mb == 5 ? 1 : 2]) << mb;
  }
  EXPECT_EQ(swarm.servers_[2]->stats().frames_stopping, 2);
}

// Note [Relay drops]: a waiting frame of a later iteration displaced by a
// nearer one is reported to its sender, here the origin.
TEST(StageServerTest, DisplacedFrameIsReportedToItsSender) {
  Swarm swarm({0, 1}, /*slots=*/1, /*queue=*/0);  // n1 holds 1 later frame
  swarm.servers_[0]->BeginIteration(2);
  ASSERT_TRUE(swarm.servers_[0]->Inject(2, 7, swarm.Route({0, 1}), {}).ok());
  swarm.clock_.Advance(absl::Milliseconds(20));  // waits at n1 (iteration 0)
  ASSERT_FALSE(swarm.recorder_.finished.count(7));
  proto::FrameHeader nearer = Header(swarm, {0, 1}, 1, true, 100);
  nearer.set_iteration(1);
  EXPECT_TRUE(SendRaw(swarm, 0, 1, nearer).ok());
  EXPECT_EQ(swarm.servers_[1]->stats().frames_displaced, 1);
  swarm.clock_.Advance(absl::Milliseconds(10));
  ASSERT_EQ(swarm.recorder_.finished.count(7), 1u);
  EXPECT_TRUE(absl::IsAborted(swarm.recorder_.finished[7])) << swarm.recorder_.finished[7];
  EXPECT_EQ(swarm.servers_[0]->stats().slots_in_use, 0);
}

// Sends an abort notice (Note [Abort notices]) from node `from`.
absl::Status SendAbortNotice(Swarm& swarm, int from, int to, proto::FrameHeader header) {
  Frame f;
  f.header = std::move(header);
  f.header.set_direction(proto::DIRECTION_BACKWARD);
  SealFrame(f);
  std::optional<absl::Status> ack;
  swarm.transports_[from]->Send(swarm.ids_[to], std::move(f), [&](absl::Status s) { ack = s; });
  swarm.clock_.Advance(absl::Milliseconds(3));
  return ack.value_or(absl::InternalError("no ack"));
}

// Note [Who may abort]: n3 has no part in the micro-batch (route n0, n1,
// n2); its notices are refused and the micro-batch completes. Before, any
// peer could end any micro-batch whose (origin, iteration, mb) it knew.
TEST(StageServerTest, StrangerCannotAbortOthersMicroBatches) {
  Swarm swarm({0, 1, 2, 3});
  ASSERT_TRUE(swarm.servers_[0]->Inject(0, 5, swarm.Route({0, 1, 2}), {}).ok());
  swarm.clock_.Advance(absl::Milliseconds(12));  // n1 admitted it
  EXPECT_TRUE(absl::IsPermissionDenied(
      SendAbortNotice(swarm, 3, 1, Header(swarm, {0, 1, 2}, 1, false, 5))));
  EXPECT_TRUE(absl::IsPermissionDenied(
      SendAbortNotice(swarm, 3, 0, Header(swarm, {0, 1, 2}, 0, false, 5))));
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.count(5), 1u);
  EXPECT_TRUE(swarm.recorder_.finished[5].ok()) << swarm.recorder_.finished[5];
  EXPECT_EQ(swarm.servers_[1]->stats().dropped, 0);
}

// The measured attack: a stranger's frames for a far-future iteration were
// parked and counted against admission, so no micro-batch ran afterwards.
TEST(StageServerTest, FarFutureFramesNeitherStarveTheIterationNorNearerFrames) {
  Swarm swarm({0, 1});
  int refused = 0;
  for (int k = 0; k < 12; ++k) {  // beyond the lead: refused outright
    proto::FrameHeader far = Header(swarm, {0, 1}, 1, true, 1000 + k);
    far.set_iteration(1'000'000 + k);
    refused += absl::IsResourceExhausted(SendRaw(swarm, 0, 1, far));
  }
  EXPECT_EQ(refused, 12);
  EXPECT_EQ(swarm.servers_[1]->stats().frames_behind, 12);
  int admitted = 0;
  refused = 0;
  for (int k = 0; k < 24; ++k) {  // within the lead: a queue of their own
    proto::FrameHeader later = Header(swarm, {0, 1}, 1, true, 3000 + k);
    later.set_iteration(4);
    const absl::Status s = SendRaw(swarm, 0, 1, later);
    admitted += s.ok();
    refused += absl::IsResourceExhausted(s);
  }
  EXPECT_EQ(admitted, 12);  // 4 slots + 8 queued
  EXPECT_EQ(refused, 12);
  for (int k = 0; k < 12; ++k) {  // the next iteration displaces them
    proto::FrameHeader next = Header(swarm, {0, 1}, 1, true, 2000 + k);
    next.set_iteration(1);
    EXPECT_TRUE(SendRaw(swarm, 0, 1, next).ok()) << k;
  }
  EXPECT_EQ(swarm.servers_[1]->stats().frames_displaced, 12);
  // The current iteration is untouched: the data node injects and finishes.
  for (int mb = 0; mb < 4; ++mb) {
    ASSERT_TRUE(swarm.servers_[0]->CanInject());
    ASSERT_TRUE(swarm.servers_[0]->Inject(0, mb, swarm.Route({0, 1}), {}).ok()) << mb;
    swarm.clock_.Advance(absl::Seconds(1));
  }
  swarm.clock_.Advance(absl::Seconds(5));
  int finished = 0;
  for (const auto& [mb, status] : swarm.recorder_.finished) finished += status.ok();
  EXPECT_EQ(finished, 4);
}

// Note [Newcomer micro-batches]: a data node on probation (n1) sends 12
// forwards of the next iteration to the stage-1 host n2 (4 slots + 8
// queued): it gets the newcomers' share (6), not the whole admission, and
// the trusted data node n0 still gets the other half. On the old server n1
// took all 12 and n0 was refused.
TEST(StageServerTest, MicroBatchesOfNewcomersHoldAtMostTheirShareOfAdmission) {
  const NodeId newcomer = NodeId::ForName("n1");
  Swarm swarm({0, 0, 1}, 4, 8, [newcomer](StageServerOptions& o) {
    o.origin_on_probation = [newcomer](const PeerId& id) { return id == newcomer; };
    o.newcomer_in_flight = 6;
  });
  auto flood = [&](int from, uint64_t first) {
    int admitted = 0, refused = 0;
    for (uint64_t k = 0; k < 12; ++k) {
      proto::FrameHeader h = Header(swarm, {from, 2}, 1, true, first + k);
      h.set_iteration(1);
      const absl::Status s = SendRaw(swarm, from, 2, h);
      admitted += s.ok();
      refused += absl::IsResourceExhausted(s);
    }
    return std::make_pair(admitted, refused);
  };
  EXPECT_EQ(flood(1, 100), std::make_pair(6, 6));
  EXPECT_EQ(swarm.servers_[2]->stats().frames_newcomer_capped, 6);
  EXPECT_EQ(flood(0, 200), std::make_pair(6, 6));  // the rest of 4 + 8
  EXPECT_EQ(swarm.servers_[2]->stats().frames_newcomer_capped, 6);
}

// Note [Behind the swarm], as the chaos soak found it: a stage-1 replica
// (n1) was SIGSTOPped past its DEAD verdict, the swarm went on without it,
// and it came back alive but iterations behind. The origin still routes
// through it; today it parked every frame until the MB deadline. Its
// refusal must send them to the other replica (n2) at once, and n1 must
// get micro-batches again once it has caught up.
TEST(StageServerTest, ReplicaBehindTheSwarmIsRoutedAroundUntilItCatchesUp) {
  Swarm swarm({0, 1, 1, 2});
  constexpr uint64_t kSwarmAt = 20;
  for (int n : {0, 2, 3}) swarm.servers_[n]->BeginIteration(kSwarmAt);
  swarm.servers_[1]->BeginIteration(kSwarmAt - 9);  // stuck where it stalled
  for (uint64_t mb = 0; mb < 4; ++mb) {
    ASSERT_TRUE(swarm.servers_[0]->Inject(kSwarmAt, mb, swarm.Route({0, 1, 3}), {}).ok());
  }
  swarm.clock_.Advance(absl::Seconds(2));  // far below any MB deadline
  for (uint64_t mb = 0; mb < 4; ++mb) {
    ASSERT_EQ(swarm.recorder_.finished.count(mb), 1u) << "mb " << mb << " hangs at n1";
    EXPECT_TRUE(swarm.recorder_.finished[mb].ok()) << swarm.recorder_.finished[mb];
  }
  EXPECT_EQ(swarm.servers_[1]->stats().frames_behind, 4);
  EXPECT_EQ(swarm.servers_[1]->stats().forwards, 0);
  EXPECT_EQ(swarm.servers_[0]->stats().rerouted_by_reason.at("behind"), 4);
  EXPECT_EQ(swarm.computes_[2]->TakeGradients()->visits, 4);
  // Nobody called it dead: a node that is merely behind stays a member.
  EXPECT_TRUE(swarm.views_[0]->IsAlive(swarm.ids_[1]));

  // Caught up (re-synced, at the swarm's iteration): used again.
  swarm.servers_[1]->BeginIteration(kSwarmAt);
  for (uint64_t mb = 4; mb < 8; ++mb) {
    ASSERT_TRUE(swarm.servers_[0]->Inject(kSwarmAt, mb, swarm.Route({0, 1, 3}), {}).ok());
  }
  swarm.clock_.Advance(absl::Seconds(2));
  for (uint64_t mb = 4; mb < 8; ++mb) {
    ASSERT_EQ(swarm.recorder_.finished.count(mb), 1u) << mb;
    EXPECT_TRUE(swarm.recorder_.finished[mb].ok()) << swarm.recorder_.finished[mb];
  }
  EXPECT_EQ(swarm.servers_[1]->stats().forwards, 4);
  EXPECT_EQ(swarm.servers_[1]->stats().frames_behind, 4);
  EXPECT_EQ(swarm.computes_[1]->TakeGradients()->visits, 4);
}

}  // namespace
}  // namespace skipswarm::node
