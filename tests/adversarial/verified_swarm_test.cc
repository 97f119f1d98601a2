// Verified compute switched on in an in-process swarm (Note [Sending
// checks] in node/stage/stage_server_verify_send.cc, Note [Verify trust] and
// Note [Verify bans] in node/stage/verify_trust.h): real stage servers,
// drivers, trainers and averaging on a SimClock, libtorch computes with fp16
// frames. Every node samples checks at the same --verify_rate, judges what
// reaches it, publishes the members it condemned as its record's bans
// (PublishedBansView: gossip in small) and routes through a
// VerifiedRoutingView of its own VerifyTrust over those records.
//  - Data node 0; stage 1 on nodes 1 (trusted) and 2 (on probation,
//    honest); stage 2 on nodes 3 (trusted) and 4 (on probation). With node
//    4 scaling its forward output by 1.05, the data node (the hop after
//    stage 2) condemns it and its planner routes around it; with node 4
//    honest, no check mismatches.
//  - Data node 0; stage 1 on nodes 1 (trusted) and 2 (on probation, lying);
//    stage 2 on trusted nodes 3, 4 and 5, the hops after node 2: they
//    condemn it, and the data node, which judged nothing, routes around it
//    once two of their records name it.
//  - The same with stage 1 on three trusted nodes, node 1 lying, and
//    stage 2 on trusted nodes 4 and 5 (Note [Trusted verify bans]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/random.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "model/corpus.h"
#include "node/compute/output_check.h"
#include "node/compute/sketch_wire.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"
#include "node/compute/verify_test_util.h"
#include "node/stage/verify_trust.h"
#include "node/train/sampler_data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

constexpr int kSamples = 2;

model::ModelConfig Config() {
  model::ModelConfig c;
  c.num_layers = 6;
  c.d_model = 32;
  c.num_heads = 2;
  c.ffn_dim = 64;
  c.vocab_size = 32;
  c.seq_len = 16;
  c.num_stages = 3;
  c.init_seed = 11;
  return c;
}

std::vector<int32_t> Tokens() {
  std::vector<int32_t> t;
  for (int i = 0; i < 5000; ++i) t.push_back((i * 7 + i / 13) % 32);
  return t;
}

// Gossip in small: each member's record names the members its node's
// VerifyTrust condemned (as PublishBans in the gossip daemon does); the
// version moves with every verdict, as gossip's with every snapshot.
class PublishedBansView final : public SwarmView {
 public:
  PublishedBansView(SwarmView* inner, const std::vector<std::unique_ptr<VerifyTrust>>* trust,
                    std::vector<common::NodeId> ids)
      : inner_(inner), trust_(trust), ids_(std::move(ids)) {}
  std::vector<PeerInfo> Members() const override {
    std::vector<PeerInfo> out = inner_->Members();
    for (PeerInfo& p : out) {
      for (size_t i = 0; i < ids_.size(); ++i) {
        if (ids_[i] == p.id) p.bans = (*trust_)[i]->condemned();
      }
    }
    return out;
  }
  bool IsAlive(const common::NodeId& id) const override { return inner_->IsAlive(id); }
  std::vector<common::NodeId> Replicas(int stage) const override {
    return inner_->Replicas(stage);
  }
  void MarkDead(const common::NodeId& id) override { inner_->MarkDead(id); }
  uint64_t version() const override {
    uint64_t v = inner_->version();
    for (const auto& t : *trust_) v += t->generation();
    return v;
  }
  std::optional<LinkEstimate> Link(const common::NodeId& from,
                                   const common::NodeId& to) const override {
    return inner_->Link(from, to);
  }
  std::optional<uint64_t> StopAfter(const common::NodeId& id) const override {
    return inner_->StopAfter(id);
  }
  std::optional<uint64_t> Incarnation(const common::NodeId& id) const override {
    return inner_->Incarnation(id);
  }

 private:
  SwarmView* const inner_;
  const std::vector<std::unique_ptr<VerifyTrust>>* const trust_;
  const std::vector<common::NodeId> ids_;
};

struct Layout {
  std::vector<std::vector<int>> node_stages;
  std::set<int> on_probation;
  int liar = 0;  // lies when RunSwarm's `liar` says so
  double trusted_rate = 0;  // StageServerOptions::verify_trusted_rate
};

// Stage 2's newcomer lies; the data node is its hop after.
Layout LiarBeforeTheDataNode() { return {{{0}, {1}, {1}, {2}, {2}}, {2, 4}, 4}; }
// Stage 1's newcomer lies; trusted nodes 3, 4 and 5 (stage 2) are its hops
// after (three, so that the in-order planner's routes pair it with each).
Layout LiarBeforeCatchers() { return {{{0}, {1}, {1}, {2}, {2}, {2}}, {2}, 2}; }
// Note [Trusted disputes]: stage 2 on three trusted replicas, node 4 of
// them lying, checked at the trusted rate; the data node is the hop after.
Layout TrustedLiarAmongThree() { return {{{0}, {1}, {2}, {2}, {2}}, {}, 4, 0.5}; }
// Note [Trusted verify bans]: stage 1 on three trusted replicas, node 1 of
// them lying (its forwards; its sketches as a verifier are honest, so they
// forgive its pairs), checked at the trusted rate 1; stage 2's trusted nodes
// 4 and 5 are the hops after, so the data node judges no stage-1 output.
Layout TrustedLiarBeforeCatchers() { return {{{0}, {1}, {1}, {1}, {2}, {2}}, {}, 1, 1.0}; }

struct RunResult {
  int64_t checks = 0, mismatches = 0;            // judged, all nodes
  int64_t liar_checks = 0, liar_mismatches = 0;  // judged on the liar
  int64_t sent = 0, verify_bytes = 0, answered = 0;
  // Node i condemned the liar while the data node was in this iteration.
  std::map<int, uint64_t> condemned_at;
  std::set<int> condemned_by;            // nodes that condemned anyone
  std::set<common::NodeId> condemned;    // whom they condemned
  int64_t trusted_checks = 0, trusted_mismatches = 0;  // judged, all nodes
  std::vector<int64_t> liar_forwards;    // the liar's forwards, cumulative, per iteration
  int64_t dropped = 0;                   // node 0's dropped micro-batches
  double loss_last = 0;
  double wall_ms = 0;
};

RunResult RunSwarm(const Layout& layout, double rate, bool liar, int iterations) {
  const int nodes = static_cast<int>(layout.node_stages.size());
  const model::ModelConfig config = Config();
  model::SamplerOptions s{.samples_per_mb = kSamples, .seq_len = config.seq_len, .seed = 3};
  const std::vector<int32_t> tokens = Tokens();  // the sampler borrows them
  auto data = SamplerDataSource::Create(tokens, s);
  EXPECT_TRUE(data.ok());
  // Declared before the swarm: they outlive it (the computes borrow the
  // inner ones, the servers the trusts and views).
  std::vector<std::unique_ptr<StageCompute>> inner;
  std::vector<std::unique_ptr<VerifyTrust>> trust;
  std::vector<std::unique_ptr<PublishedBansView>> published;
  std::vector<std::unique_ptr<VerifiedRoutingView>> views;
  for (int i = 0; i < nodes; ++i) trust.push_back(std::make_unique<VerifyTrust>());
  RunResult r;
  TestSwarm* swarm_ptr = nullptr;

  TestSwarmOptions o;
  o.node_stages = layout.node_stages;
  o.num_stages = 3;
  o.driver.mbs_per_iteration = 8;
  o.on_probation = layout.on_probation;
  std::vector<common::NodeId> ids;
  for (int i = 0; i < nodes; ++i) {
    ids.push_back(common::NodeId::ForName("node" + std::to_string(i)));  // as TestSwarm names them
  }
  o.server_options = [&](int node, StageServerOptions& so) {
    so.verify_rate = rate;
    so.verify_seed = 100 + static_cast<uint64_t>(node);
    so.member_on_probation = [ids, probation = layout.on_probation](const PeerId& p) {
      for (int i : probation) {
        if (p == ids[static_cast<size_t>(i)]) return true;
      }
      return false;
    };
    so.output_checks.judge = [](const WireTensor& received, const model::OutputSketch& sketch,
                                const model::SketchCheckOptions& options) {
      return CheckOutputAgainstSketch(received, sketch, options);
    };
    so.sketch_limits = ActivationSketchLimits(config, kSamples);
    VerifyTrust* t = trust[static_cast<size_t>(node)].get();
    const common::NodeId liar_id = ids[static_cast<size_t>(layout.liar)];
    so.on_check_verdict = [&r, &swarm_ptr, t, node, liar_id](const PeerId& x, bool match) {
      if (!t->Record(x, match)) return;
      r.condemned_by.insert(node);
      r.condemned.insert(x);
      if (x == liar_id) r.condemned_at.emplace(node, swarm_ptr->server(0)->iteration());
    };
    so.verify_trusted_rate = layout.trusted_rate;
    so.on_trusted_verdict = [&r, &swarm_ptr, t, node, liar_id](const PeerId& x, const PeerId& y,
                                                               bool match) {
      for (const PeerId& id : t->RecordPair(x, y, match)) {
        r.condemned_by.insert(node);
        r.condemned.insert(id);
        if (id == liar_id) r.condemned_at.emplace(node, swarm_ptr->server(0)->iteration());
      }
    };
  };
  o.routing = [&](int node, StaticSwarmView* view) -> SwarmView* {
    VerifyTrust* t = trust[static_cast<size_t>(node)].get();
    published.push_back(std::make_unique<PublishedBansView>(view, &trust, ids));
    views.push_back(std::make_unique<VerifiedRoutingView>(published.back().get(), t,
                                                          ids[static_cast<size_t>(node)]));
    return views.back().get();
  };
  ComputeFactory factory = [&](int node, int stage, common::Clock*, TaskRunner* runner) {
    TorchStageCompute::Options co;
    co.model = config;
    co.stage = stage;
    co.optimizer.peak_lr = 1e-2;
    co.optimizer.warmup_steps = 5;
    co.optimizer.total_steps = iterations;
    co.encode = {model::Codec::kFp16};
    auto c = TorchStageCompute::Create(co, runner);
    CHECK(c.ok()) << c.status();
    std::unique_ptr<StageCompute> compute = *std::move(c);
    if (!(liar && node == layout.liar)) return compute;
    inner.push_back(std::move(compute));
    return std::unique_ptr<StageCompute>(std::make_unique<testing::LyingCompute>(
        inner.back().get(), testing::LyingCompute::Where::kForward,
        testing::LyingCompute::Lie::kScale, 1.05));
  };
  std::unique_ptr<common::RealClock> wall = common::RealClock::Create();
  const absl::Duration start = wall->SteadyNow();
  {
    TestSwarm swarm(o, factory, data->get());
    swarm_ptr = &swarm;
    for (int it = 0; it < iterations; ++it) {
      EXPECT_TRUE(swarm.Run(1)) << "iteration " << it;
      r.liar_forwards.push_back(swarm.server(layout.liar)->stats().forwards);
    }
    r.wall_ms = absl::ToDoubleMilliseconds(wall->SteadyNow() - start);
    for (int i = 0; i < nodes; ++i) {
      const StageServerStats st = swarm.server(i)->stats();
      r.sent += st.verify_sent;
      r.verify_bytes += st.verify_bytes_sent;
      r.answered += st.verify_answered;
      for (const auto& [id, c] : st.checks.by_member) {
        r.checks += c.checks;
        r.mismatches += c.mismatches;
        if (id == ids[static_cast<size_t>(layout.liar)]) {
          r.liar_checks += c.checks;
          r.liar_mismatches += c.mismatches;
        }
        EXPECT_EQ(c.bad_sketches, 0) << "node " << i;
        EXPECT_EQ(c.undecodable, 0) << "node " << i;
      }
      for (const auto& [id, c] : st.trusted_checks.by_member) {
        r.trusted_checks += c.checks;
        r.trusted_mismatches += c.mismatches;
        EXPECT_EQ(c.undecodable, 0) << "node " << i;
      }
    }
    for (const NodeIterationReport& rep : swarm.reports(0)) {
      EXPECT_TRUE(rep.status.ok()) << rep.status;
      if (rep.data) r.dropped += rep.data->dropped;
    }
    if (!swarm.reports(0).empty() && swarm.reports(0).back().data) {
      r.loss_last = swarm.reports(0).back().data->loss;
    }
    swarm_ptr = nullptr;
  }
  return r;
}

MicroBatchData Batch(common::Random& rng) {
  MicroBatchData d;
  d.samples = kSamples;
  d.seq = Config().seq_len;
  for (int64_t i = 0; i < d.samples * d.seq; ++i) {
    d.tokens.push_back(static_cast<int32_t>(rng.UniformInt(0, 31)));
    d.targets.push_back(static_cast<int32_t>(rng.UniformInt(0, 31)));
  }
  return d;
}

// The iterations in which the catchers condemned the liar, ascending.
std::vector<uint64_t> CondemnedIterations(const RunResult& r) {
  std::vector<uint64_t> at;
  for (const auto& [node, it] : r.condemned_at) at.push_back(it);
  std::sort(at.begin(), at.end());
  return at;
}

// From iteration `from` on, the liar serves no new micro-batch.
void ExpectNoForwardsFrom(const RunResult& r, uint64_t from) {
  ASSERT_LT(from, r.liar_forwards.size());
  EXPECT_EQ(r.liar_forwards.back(), r.liar_forwards[from]);
}

// What one checked micro-batch costs, timed directly (median of `reps`):
// the verifier's verify-only forward and the hop after's check, beside the
// training forward of the same stage and input.
struct DirectCost {
  double forward_ms = 0, sketch_forward_ms = 0, check_ms = 0;
};

DirectCost MeasureDirect(int reps) {
  common::SimClock clock;
  ClockTaskRunner runner(&clock);
  auto make = [&](int stage) {
    TorchStageCompute::Options co;
    co.model = Config();
    co.stage = stage;
    co.encode = {model::Codec::kFp16};
    auto c = TorchStageCompute::Create(co, &runner);
    CHECK(c.ok()) << c.status();
    return *std::move(c);
  };
  std::unique_ptr<TorchStageCompute> s0 = make(0), s1 = make(1);
  std::unique_ptr<common::RealClock> wall = common::RealClock::Create();
  common::Random rng(7);
  std::vector<double> fwd, sk, chk;
  for (int i = 0; i < reps; ++i) {
    const uint64_t mb = static_cast<uint64_t>(i) + 1;
    absl::StatusOr<WireTensor> in = testing::RunTask<WireTensor>(
        clock, [&](TensorDone done) { s0->Start(mb, Batch(rng), std::move(done)); });
    CHECK(in.ok()) << in.status();
    const absl::Duration t0 = wall->SteadyNow();
    absl::StatusOr<WireTensor> out = testing::RunTask<WireTensor>(
        clock, [&](TensorDone done) { s1->Forward(mb, *in, std::move(done)); });
    const absl::Duration t1 = wall->SteadyNow();
    absl::StatusOr<model::OutputSketch> sketch = testing::RunTask<model::OutputSketch>(
        clock, [&](SketchDone done) { s1->SketchForward(*in, 1000 + mb, std::move(done)); });
    const absl::Duration t2 = wall->SteadyNow();
    CHECK(out.ok() && sketch.ok());
    absl::StatusOr<model::SketchVerdict> v = CheckOutputAgainstSketch(*out, *sketch, {});
    const absl::Duration t3 = wall->SteadyNow();
    EXPECT_TRUE(v.ok() && v->match);
    s0->Discard(mb);
    s1->Discard(mb);
    fwd.push_back(absl::ToDoubleMilliseconds(t1 - t0));
    sk.push_back(absl::ToDoubleMilliseconds(t2 - t1));
    chk.push_back(absl::ToDoubleMilliseconds(t3 - t2));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return DirectCost{median(fwd), median(sk), median(chk)};
}

TEST(VerifiedSwarmTest, ALyingReplicaIsCondemnedAndRoutedAround) {
  constexpr int kIterations = 24;
  const RunResult r = RunSwarm(LiarBeforeTheDataNode(), /*rate=*/0.1, /*liar=*/true, kIterations);
  ASSERT_EQ(r.condemned_at.count(0), 1u) << "liar checks " << r.liar_checks;
  EXPECT_EQ(r.mismatches, r.liar_mismatches);  // every mismatch is the liar's
  EXPECT_EQ(r.liar_mismatches, r.liar_checks);  // and the liar fails every check
  EXPECT_GE(r.liar_mismatches, 3);
  EXPECT_EQ(r.condemned_by, std::set<int>{0});
  // Routed around: from the iteration after the verdict on, node 4 serves
  // no new micro-batch.
  const uint64_t from = r.condemned_at.at(0) + 1;
  ASSERT_NO_FATAL_FAILURE(ExpectNoForwardsFrom(r, from));
  EXPECT_EQ(r.dropped, 0);
  std::printf("FIGURE verified_swarm liar x1.05 at rate 0.1: %lld/%lld checks of the liar "
              "mismatched, %lld of %lld checks in all; condemned by the data node in iteration "
              "%llu; liar forwards %lld at the verdict, %lld at the end (%d iterations)\n",
              static_cast<long long>(r.liar_mismatches), static_cast<long long>(r.liar_checks),
              static_cast<long long>(r.mismatches), static_cast<long long>(r.checks),
              static_cast<unsigned long long>(r.condemned_at.at(0)),
              static_cast<long long>(r.liar_forwards[from]),
              static_cast<long long>(r.liar_forwards.back()), kIterations);
}

TEST(VerifiedSwarmTest, AnHonestSwarmHasNoMismatchAndTheCostIsCounted) {
  constexpr int kIterations = 20;
  const RunResult off = RunSwarm(LiarBeforeTheDataNode(), /*rate=*/0, /*liar=*/false, kIterations);
  const RunResult on = RunSwarm(LiarBeforeTheDataNode(), /*rate=*/0.1, /*liar=*/false, kIterations);
  EXPECT_EQ(off.sent, 0);
  EXPECT_EQ(off.checks, 0);
  EXPECT_GT(on.checks, 0);
  EXPECT_EQ(on.mismatches, 0);
  EXPECT_TRUE(on.condemned_by.empty());
  EXPECT_EQ(on.dropped, 0);
  // Verify-only work changes no weight; it only moves other tasks in time,
  // and so the order in which a replica sums its micro-batches' gradients.
  EXPECT_NEAR(on.loss_last, off.loss_last, 1e-4 * off.loss_last);
  const DirectCost cost = MeasureDirect(50);
  std::printf("FIGURE verified_swarm honest at rate 0.1: %lld checks sent, %lld answered, %lld "
              "judged, %lld mismatches; %lld verify bytes (%.0f per check); %d iterations x 8 MBs "
              "wall %.0f ms at rate 0 vs %.0f ms at 0.1 (shared 2-core box: noise, see the direct "
              "figure); final loss %.6f vs %.6f\n",
              static_cast<long long>(on.sent), static_cast<long long>(on.answered),
              static_cast<long long>(on.checks), static_cast<long long>(on.mismatches),
              static_cast<long long>(on.verify_bytes),
              on.sent > 0 ? static_cast<double>(on.verify_bytes) / on.sent : 0.0, kIterations,
              off.wall_ms, on.wall_ms, off.loss_last, on.loss_last);
  std::printf("FIGURE verified_swarm cost per checked micro-batch (stage 1, %d samples x %d "
              "tokens, d_model %d, fp16; median of 50): verifier's SketchForward %.3f ms vs the "
              "training Forward %.3f ms; hop after's check %.3f ms\n",
              kSamples, Config().seq_len, Config().d_model, cost.sketch_forward_ms,
              cost.forward_ms, cost.check_ms);
}

// Note [Trusted disputes]: a replica that lies after earning trust. Before
// trusted members were checked, nothing judged node 4 and it served to the
// end; an honest swarm at the same rate condemns nobody.
TEST(VerifiedSwarmTest, ATrustedReplicaTurnedLiarIsCondemnedByItsDisputes) {
  constexpr int kIterations = 20;
  const RunResult honest =
      RunSwarm(TrustedLiarAmongThree(), /*rate=*/0, /*liar=*/false, kIterations);
  EXPECT_GT(honest.trusted_checks, 0);
  EXPECT_EQ(honest.trusted_mismatches, 0);
  EXPECT_TRUE(honest.condemned_by.empty());
  const RunResult r = RunSwarm(TrustedLiarAmongThree(), /*rate=*/0, /*liar=*/true, kIterations);
  ASSERT_EQ(r.condemned_at.count(0), 1u) << "trusted checks " << r.trusted_checks;
  EXPECT_EQ(r.condemned, std::set<common::NodeId>{common::NodeId::ForName("node4")});
  const uint64_t from = r.condemned_at.at(0) + 1;
  ASSERT_NO_FATAL_FAILURE(ExpectNoForwardsFrom(r, from));
  EXPECT_EQ(r.dropped, 0);
  std::printf("FIGURE verified_swarm trusted liar x1.05 among 3 trusted replicas, trusted rate "
              "0.5: %lld/%lld trusted checks mismatched (honest run: %lld/%lld); condemned by "
              "the data node in iteration %llu; liar forwards %lld then, %lld at the end (%d "
              "iterations)\n",
              static_cast<long long>(r.trusted_mismatches),
              static_cast<long long>(r.trusted_checks),
              static_cast<long long>(honest.trusted_mismatches),
              static_cast<long long>(honest.trusted_checks),
              static_cast<unsigned long long>(r.condemned_at.at(0)),
              static_cast<long long>(r.liar_forwards[from]),
              static_cast<long long>(r.liar_forwards.back()), kIterations);
}

// Note [Verify bans]: the catchers host stage 2, so neither plans a route
// nor shares a stage with the liar; the data node judged nothing and still
// stops routing through the liar once both catchers' records name it.
// Before the quorum (each verdict stayed with its node) the liar kept
// serving every iteration to the end.
TEST(VerifiedSwarmTest, TwoCatchersBanALiarTheDataNodeNeverChecked) {
  constexpr int kIterations = 20;
  const RunResult r = RunSwarm(LiarBeforeCatchers(), /*rate=*/0.5, /*liar=*/true, kIterations);
  EXPECT_EQ(r.mismatches, r.liar_mismatches);  // every mismatch is the liar's
  EXPECT_EQ(r.condemned_at.count(0), 0u);      // the data node judged nothing
  for (int node : r.condemned_by) EXPECT_GE(node, 3) << "liar checks " << r.liar_checks;
  ASSERT_GE(r.condemned_at.size(), 2u) << "liar checks " << r.liar_checks;
  // The quorum holds from the second verdict; the iteration after the one
  // it came in, node 2 serves no new micro-batch.
  const std::vector<uint64_t> at = CondemnedIterations(r);
  const uint64_t from = at[1] + 1;
  ASSERT_NO_FATAL_FAILURE(ExpectNoForwardsFrom(r, from));
  EXPECT_EQ(r.dropped, 0);
  std::printf("FIGURE verified_swarm stage-1 liar x1.05 at rate 0.5, three stage-2 catchers: "
              "%lld/%lld checks of the liar mismatched; %zu catchers condemned it, the first two "
              "in iterations %llu and %llu; liar forwards %lld then, %lld at the end (%d "
              "iterations)\n",
              static_cast<long long>(r.liar_mismatches), static_cast<long long>(r.liar_checks),
              r.condemned_at.size(), static_cast<unsigned long long>(at[0]),
              static_cast<unsigned long long>(at[1]),
              static_cast<long long>(r.liar_forwards[from]),
              static_cast<long long>(r.liar_forwards.back()), kIterations);
}

// Note [Trusted verify bans]: a trusted stage-1 replica turned liar,
// condemned by its disputes at the two stage-2 catchers, which neither plan
// routes nor share its stage. Before, Note [Verify bans] never spread a ban
// of a trusted member, and the data node, which judged nothing, routed
// through the liar to the end.
TEST(VerifiedSwarmTest, TwoCatchersBanATrustedLiarTheDataNodeNeverChecked) {
  constexpr int kIterations = 20;
  const RunResult r =
      RunSwarm(TrustedLiarBeforeCatchers(), /*rate=*/0, /*liar=*/true, kIterations);
  EXPECT_EQ(r.condemned, std::set<common::NodeId>{common::NodeId::ForName("node1")});
  EXPECT_EQ(r.condemned_at.count(0), 0u);  // the data node judged nothing
  ASSERT_EQ(r.condemned_at.size(), 2u) << "trusted checks " << r.trusted_checks << ", "
                                       << r.trusted_mismatches << " mismatched";
  const std::vector<uint64_t> at = CondemnedIterations(r);
  const uint64_t from = at[1] + 1;
  ASSERT_NO_FATAL_FAILURE(ExpectNoForwardsFrom(r, from));
  EXPECT_EQ(r.dropped, 0);
  std::printf("FIGURE verified_swarm trusted stage-1 liar x1.05 among 3, trusted rate 1, two "
              "stage-2 catchers: %lld/%lld trusted checks mismatched; condemned in iterations "
              "%llu and %llu; liar forwards %lld then, %lld at the end (%d iterations)\n",
              static_cast<long long>(r.trusted_mismatches),
              static_cast<long long>(r.trusted_checks), static_cast<unsigned long long>(at[0]),
              static_cast<unsigned long long>(at[1]),
              static_cast<long long>(r.liar_forwards[from]),
              static_cast<long long>(r.liar_forwards.back()), kIterations);
}

}  // namespace
}  // namespace skipswarm::node
