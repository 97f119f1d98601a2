// A joiner's replica is bit-identical to the others after its first step
// (a join's acceptance check), with the daemon's own pieces: the entry-iteration
// faces (TrainingMembers), the state transfer at a boundary snapshot
// (StateServer / FetchStageState over loopback gRPC, port 0) and the
// reduce rule (contributions summed in ascending id, the joiner's first
// one zero). Real libtorch maths on the tiny shared config, computes on a
// SimClock; no sleeps.
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "model/tiny_config.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"
#include "node/daemon/gossip/state_transfer.h"
#include "node/daemon/gossip/training_members.h"

namespace skipswarm::node {
namespace {

template <typename T, typename Call>
absl::StatusOr<T> RunTask(common::SimClock& clock, Call call) {
  std::optional<absl::StatusOr<T>> out;
  call([&](absl::StatusOr<T> r) { out = std::move(r); });
  clock.RunDue();
  EXPECT_TRUE(out.has_value());
  return out.has_value() ? std::move(*out) : absl::InternalError("task did not finish");
}

MicroBatchData Batch(int64_t salt) {
  MicroBatchData d;
  d.samples = 2;
  d.seq = 8;
  for (int64_t i = 0; i < d.samples * d.seq; ++i) {
    d.tokens.push_back((i * 7 + salt * 5) % 32);
    d.targets.push_back((i * 3 + salt * 11 + 1) % 32);
  }
  return d;
}

membership::MemberInfo Member(const std::string& name, uint32_t stage, uint64_t entry) {
  membership::MemberInfo m;
  m.id = common::NodeId::ForName(name);
  m.stages = {stage};
  m.iteration = entry;
  m.memory_slots = 4;
  m.addresses = {name + ":1", name + ":2", name + ":3", name + ":4"};
  return m;
}

class JoinDigestTest : public ::testing::Test {
 protected:
  std::unique_ptr<TorchStageCompute> Make(int stage, uint64_t init_seed) {
    TorchStageCompute::Options o;
    o.model = model::testing::TinyConfig();
    o.model.init_seed = init_seed;
    o.stage = stage;
    o.optimizer.total_steps = 20;
    auto c = TorchStageCompute::Create(o, &runner_);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  // One micro-batch origin(stage 0) -> `relay` (stage 1) -> origin; stage 2
  // is skipped (the residual stream carries it).
  void Train(uint64_t mb, StageCompute& relay) {
    auto x = RunTask<WireTensor>(clock_, [&](TensorDone d) { s0_->Start(mb, Batch(mb), std::move(d)); });
    ASSERT_TRUE(x.ok()) << x.status();
    auto y = RunTask<WireTensor>(clock_, [&](TensorDone d) { relay.Forward(mb, *x, std::move(d)); });
    ASSERT_TRUE(y.ok()) << y.status();
    auto t = RunTask<TailOutput>(clock_, [&](TailDone d) { s0_->Tail(mb, *y, std::move(d)); });
    ASSERT_TRUE(t.ok()) << t.status();
    auto gx = RunTask<WireTensor>(clock_, [&](TensorDone d) { relay.Backward(mb, t->grad, std::move(d)); });
    ASSERT_TRUE(gx.ok()) << gx.status();
    auto end = RunTask<WireTensor>(clock_, [&](TensorDone d) { s0_->Backward(mb, *gx, std::move(d)); });
    ASSERT_TRUE(end.ok()) << end.status();
  }

  // The replica group's averaging step as GrpcGroupComm does it: every
  // group member's contribution, summed in ascending node-id order.
  void Reduce(const std::vector<std::pair<common::NodeId, StageCompute*>>& group) {
    std::map<common::NodeId, GradientSum> sums;
    for (auto& [id, c] : group) sums[id] = *c->TakeGradients();
    std::vector<float> total;
    int64_t visits = 0;
    for (auto& [id, s] : sums) {
      if (total.empty()) {
        total = s.flat;
      } else {
        for (size_t i = 0; i < total.size(); ++i) total[i] += s.flat[i];
      }
      visits += s.visits;
    }
    for (auto& [id, c] : group) ASSERT_TRUE(c->ApplyUpdate(total, visits).ok());
    auto g0 = *s0_->TakeGradients();
    ASSERT_TRUE(s0_->ApplyUpdate(g0.flat, g0.visits).ok());
  }

  common::SimClock clock_;
  ClockTaskRunner runner_{&clock_};
  std::unique_ptr<TorchStageCompute> s0_ = Make(0, 11);
};

TEST_F(JoinDigestTest, JoinerDigestEqualsItsReplicasAfterItsFirstStep) {
  std::unique_ptr<TorchStageCompute> r = Make(1, 11);
  std::unique_ptr<TorchStageCompute> j = Make(1, 11);  // a fresh node: step 0
  const auto d = Member("d", 0, 0), rm = Member("r", 1, 0);
  constexpr uint64_t kEntry = 3;
  const auto jm = Member("j", 1, kEntry);
  for (uint64_t it = 0; it < kEntry; ++it) {  // the swarm trains before the join
    Train(it * 10, *r);
    Train(it * 10 + 1, *r);
    Reduce({{rm.id, r.get()}});
  }
  ASSERT_NE(r->ParamsDigest(), j->ParamsDigest());

  // The source snapshots at the joiner's entry boundary; the joiner loads it.
  StateServerOptions so;
  so.self = rm.id;
  so.chunk_bytes = 4096;  // several chunks even for the tiny stage
  auto server = *StateServer::Create(so, [&](int stage) -> absl::StatusOr<StageSnapshot> {
    absl::StatusOr<std::string> bytes = r->ExportState();  // as GossipDaemon's snapshot
    if (!bytes.ok()) return bytes.status();
    return StageSnapshot{*std::move(bytes), r->ParamsDigest()};
  });
  server->OnBoundary(kEntry - 1, {{1, r->ParamsDigest()}});
  FetchOptions fo;
  fo.self = jm.id;
  fo.stage = 1;
  fo.iteration = kEntry;
  absl::StatusOr<FetchedState> got = absl::UnknownError("not run");
  std::thread fetch([&] {
    got = FetchStageState({absl::StrCat("127.0.0.1:", server->port())}, fo);
  });
  while (server->waiting() == 0) std::this_thread::yield();
  server->OnBoundary(kEntry, {{1, r->ParamsDigest()}});
  fetch.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GT(got->bytes.size(), 4096u);
  ASSERT_EQ(*j->ImportState(got->bytes), static_cast<int64_t>(kEntry));
  EXPECT_EQ(j->ParamsDigest(), r->ParamsDigest());

  // Iteration kEntry (Note [Entry iteration]): the joiner is in both faces
  // and trains a micro-batch of its own in its first iteration.
  TrainingMembers members(d.id);
  std::vector<membership::MemberInfo> all = {d, rm, jm};
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.id < b.id; });
  membership::View view;
  view.members = all;
  members.Update(view);
  members.SetIteration(kEntry - 1);
  ASSERT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{rm.id});
  members.SetIteration(kEntry);
  ASSERT_EQ(members.group()->Replicas(1).size(), 2u);
  ASSERT_EQ(members.routing()->Replicas(1).size(), 2u);
  Train(100, *r);
  Train(101, *j);
  Reduce({{rm.id, r.get()}, {jm.id, j.get()}});
  EXPECT_EQ(j->step(), static_cast<int64_t>(kEntry) + 1);
  EXPECT_EQ(j->ParamsDigest(), r->ParamsDigest()) << "digest after the joiner's first step";

  // And stays equal.
  members.SetIteration(kEntry + 1);
  Train(200, *r);
  Train(201, *j);
  Reduce({{rm.id, r.get()}, {jm.id, j.get()}});
  EXPECT_EQ(j->ParamsDigest(), r->ParamsDigest());
}

}  // namespace
}  // namespace skipswarm::node
