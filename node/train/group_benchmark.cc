// Replica averaging over gRPC on loopback: R GrpcGroupComms in one process,
// each all-reducing a flat float32 gradient of N elements per iteration.
//
//   bazel build //node/train:group_benchmark
//   bazel-bin/node/train/group_benchmark --benchmark_repetitions=3
//
// bytes_per_second = N x 4 / wall time of one all-reduce (every replica
// done): the gradient bytes averaged per second ("algorithm bandwidth").
// The counter sent_per_replica_MB is what each replica put on the wire.
//
// BM_GrpcAllReduceShaped: 3 replicas whose pushes are paced to 10 / 10 / 2
// MB/s uplinks (GrpcGroupOptions::max_upload_bytes_per_second), 4 MiB of
// gradient; sized:0 gives every member the same uplink figure (equal
// shards), sized:1 lets each measure its own (Note [Uplink figure]) so
// rounds are cut by bandwidth (Note [Shard layout]). Two untimed rounds
// first (the figures come from the previous round).
//   bazel run -c opt //node/train:group_benchmark -- --benchmark_filter=Shaped
#include <benchmark/benchmark.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/real_clock.h"
#include "node/train/grpc_group.h"

namespace skipswarm::node {
namespace {

// `replicas` GrpcGroupComms on loopback (plain text), each with its own
// StaticSwarmView of the others' addresses. `tune(r, options)` adjusts
// replica r's options before it is created.
struct LoopbackGroup {
  std::vector<PeerInfo> members;
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
};

absl::StatusOr<LoopbackGroup> MakeLoopbackGroup(
    int replicas, const std::string& prefix, common::Clock* clock,
    const std::function<void(int, GrpcGroupOptions&)>& tune = nullptr) {
  LoopbackGroup g;
  for (int r = 0; r < replicas; ++r) {
    g.members.push_back({common::NodeId::ForName(absl::StrCat(prefix, r)), {1}, 4, "", ""});
  }
  for (int r = 0; r < replicas; ++r) {
    g.views.push_back(std::make_unique<StaticSwarmView>(g.members));
    GrpcGroupOptions o;
    o.self = g.members[r].id;
    o.credentials = identity::PeerCredentials::Insecure();
    if (tune) tune(r, o);
    auto group = GrpcGroupComm::Create(o, g.views.back().get(), clock);
    if (!group.ok()) return group.status();
    g.groups.push_back(*std::move(group));
  }
  for (int r = 0; r < replicas; ++r) {
    for (auto& v : g.views) {
      v->SetAddresses(g.members[r].id, "", absl::StrCat("127.0.0.1:", g.groups[r]->port()));
    }
  }
  return g;
}

void BM_GrpcAllReduce(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  const int64_t n = state.range(1);
  auto clock = common::RealClock::Create();
  auto made = MakeLoopbackGroup(replicas, "r", clock.get());
  if (!made.ok()) return state.SkipWithError(made.status().ToString().c_str());
  const std::vector<PeerInfo>& members = made->members;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = made->groups;
  std::vector<float> grad(n);
  for (int64_t i = 0; i < n; ++i) grad[i] = static_cast<float>(i % 97) * 0.01f;
  uint64_t iteration = 0;
  for (auto _ : state) {
    absl::BlockingCounter done(replicas);
    bool ok = true;
    for (int r = 0; r < replicas; ++r) {
      GradientContribution c{members[r].id, grad, 1, 7, nullptr};
      groups[r]->AllReduce(iteration, 1, std::move(c), [&](absl::StatusOr<ReduceResult> res) {
        if (!res.ok() || res->contributors != replicas) ok = false;
        done.DecrementCount();
      });
    }
    done.Wait();
    if (!ok) return state.SkipWithError("all-reduce failed");
    ++iteration;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
  state.counters["replicas"] = replicas;
}
BENCHMARK(BM_GrpcAllReduce)
    ->ArgNames({"replicas", "floats"})
    ->Args({2, 1 << 16})
    ->Args({2, 4 << 20})
    ->Args({3, 4 << 20})
    ->Args({4, 4 << 20})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

void BM_GrpcAllReduceShaped(benchmark::State& state) {
  const bool sized = state.range(0) != 0;
  const int64_t n = int64_t{1} << 20;
  const std::vector<double> uplinks = {10e6, 10e6, 2e6};
  const int replicas = static_cast<int>(uplinks.size());
  auto clock = common::RealClock::Create();
  auto made = MakeLoopbackGroup(replicas, "w", clock.get(), [&](int r, GrpcGroupOptions& o) {
    o.max_upload_bytes_per_second = uplinks[r];
    if (!sized) o.uplink_bytes_per_second = [] { return uint64_t{1}; };  // all alike: equal
  });
  if (!made.ok()) return state.SkipWithError(made.status().ToString().c_str());
  const std::vector<PeerInfo>& members = made->members;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = made->groups;
  std::vector<float> grad(n);
  for (int64_t i = 0; i < n; ++i) grad[i] = static_cast<float>(i % 97) * 0.01f;
  uint64_t iteration = 0;
  bool ok = true;
  bool cut = true;
  auto round = [&] {
    absl::BlockingCounter done(replicas);
    for (int r = 0; r < replicas; ++r) {
      GradientContribution c{members[r].id, grad, 1, 7, nullptr};
      groups[r]->AllReduce(iteration, 1, std::move(c), [&](absl::StatusOr<ReduceResult> res) {
        if (!res.ok() || res->contributors != replicas) ok = false;
        if (res.ok() && res->shard_weights.empty() == sized) cut = false;
        done.DecrementCount();
      });
    }
    done.Wait();
    ++iteration;
  };
  round();
  round();
  cut = true;
  for (auto _ : state) round();
  if (!ok) return state.SkipWithError("all-reduce failed");
  if (!cut) return state.SkipWithError("rounds were not cut as asked");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}
BENCHMARK(BM_GrpcAllReduceShaped)
    ->ArgNames({"sized"})
    ->Arg(0)
    ->Arg(1)
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace skipswarm::node
