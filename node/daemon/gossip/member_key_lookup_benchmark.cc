// What a stage server's per-frame look-ups of Note [Checkable evidence]
// cost (TrainingMembers::PublicKeyOf and SignsFrames, called once each per
// forward frame a member receives) as the swarm grows. A Google Benchmark
// binary; figures in node/daemon/README.md.
//   bazel run -c opt //node/daemon/gossip:member_key_lookup_benchmark
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "node/daemon/gossip/test_members.h"
#include "node/daemon/gossip/training_members.h"

namespace skipswarm::node {
namespace {

// A view of `n` members with keys, and the ids asked for in turn.
struct Swarm {
  explicit Swarm(int n) : members(common::NodeId::ForName("self")) {
    std::vector<membership::MemberInfo> infos;
    for (int i = 0; i < n; ++i) {
      membership::MemberInfo m = testing::TestMember(absl::StrCat("m", i), {1});
      m.public_key = std::string(32, static_cast<char>(i));
      m.sign_frames = true;
      ids.push_back(m.id);
      infos.push_back(std::move(m));
    }
    members.Update(testing::TestView(std::move(infos), /*version=*/1));
  }
  TrainingMembers members;
  std::vector<common::NodeId> ids;
};

void BM_KeyAndSignsFramesPerFrame(benchmark::State& state) {
  Swarm swarm(static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    const common::NodeId& id = swarm.ids[i++ % swarm.ids.size()];
    benchmark::DoNotOptimize(swarm.members.PublicKeyOf(id));
    benchmark::DoNotOptimize(swarm.members.SignsFrames(id));
  }
}
BENCHMARK(BM_KeyAndSignsFramesPerFrame)->Arg(8)->Arg(64)->Arg(512)->Arg(4096);

}  // namespace
}  // namespace skipswarm::node

BENCHMARK_MAIN();
