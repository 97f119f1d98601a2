// Note [Group of one] (node_trainer.cc): a stage with no other replica
// steps its gradients where they are (StageState::ApplyLocalUpdate): the
// trainer takes no gradient vector from it (on a GPU: no copy to the host
// and back), takes no digest and reports no averaged bytes. A stage with
// two replicas still averages through the group.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

constexpr int64_t kParams = 1000;

// Counts what the trainer takes out of the compute: gradient vectors
// (TakeGradients: a host copy of every gradient) and digests.
class CountingCompute final : public ForwardingStageCompute {
 public:
  CountingCompute(common::Clock* clock, int stage)
      : ForwardingStageCompute(std::make_unique<TimedStageCompute>(
            clock, TimedStageCompute::Options{.stage = stage, .num_params = kParams})) {}
  absl::StatusOr<GradientSum> TakeGradients() override {
    ++gradient_vectors;
    return inner()->TakeGradients();
  }
  uint64_t ParamsDigest() override {
    ++digests;
    return inner()->ParamsDigest();
  }
  int gradient_vectors = 0;
  int digests = 0;
};

struct Made {
  int node;
  int stage;
  CountingCompute* compute;
};

ComputeFactory Counting(std::vector<Made>* made) {
  return [made](int node, int stage, common::Clock* clock,
                TaskRunner*) -> std::unique_ptr<StageCompute> {
    auto c = std::make_unique<CountingCompute>(clock, stage);
    made->push_back({node, stage, c.get()});
    return c;
  };
}

TEST(GroupOfOneTest, ALoneReplicaStepsInPlaceWithoutAveragingTraffic) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {2}, {2}};  // stages 0 and 1 alone, stage 2 twice
  o.num_stages = 3;
  o.driver.mbs_per_iteration = 4;
  std::vector<Made> made;
  TestSwarm swarm(o, Counting(&made), &data);
  constexpr int kIterations = 3;
  ASSERT_TRUE(swarm.Run(kIterations));
  ASSERT_EQ(made.size(), 4u);
  for (const Made& m : made) {
    const bool alone = m.stage < 2;
    EXPECT_EQ(m.compute->gradient_vectors, alone ? 0 : kIterations) << "node " << m.node;
    EXPECT_EQ(m.compute->step(), kIterations) << "node " << m.node;
    ASSERT_EQ(swarm.reports(m.node).size(), static_cast<size_t>(kIterations));
    for (int i = 0; i < kIterations; ++i) {
      const StageStep& s = swarm.reports(m.node)[i].stages.at(m.stage);
      const std::string where = "node " + std::to_string(m.node) + " iteration " + std::to_string(i);
      EXPECT_EQ(s.replicas, alone ? 1 : 2) << where;
      EXPECT_TRUE(s.update.stepped) << where;
      EXPECT_GT(s.visits_here, 0) << where;
      // In process, a real round reports the codec's size of the vector.
      EXPECT_EQ(s.avg_bytes, alone ? 0 : kParams * static_cast<int64_t>(sizeof(float))) << where;
      EXPECT_EQ(s.visits_total, alone ? s.visits_here : 4) << where;
      if (alone) {
        EXPECT_EQ(s.digest_after, 0u) << where;
      }
    }
    // A real round digests at its contribution and after its step (the
    // second is the next contribution's, cached by a real compute).
    if (alone) {
      EXPECT_EQ(m.compute->digests, 0) << "node " << m.node;
    }
  }
}

}  // namespace
}  // namespace skipswarm::node
