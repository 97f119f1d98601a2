#include "model/sdp_traffic.h"

#include <gtest/gtest.h>

namespace skipswarm::model {
namespace {

ModelConfig SixStages() {
  ModelConfig c;  // the default model: 12 blocks, d_model 256, 6 stages
  return c;
}

TEST(SdpTrafficTest, ForwardMaskingAveragesOnlyTheSharedStages) {
  const ModelConfig c = SixStages();
  const SdpAssignment a = AssignSubnetworks(6, 4, 0.5).value();
  const WireBytes w = SdpIterationBytes(c, a, SdpMode::kForward, 4, 512);
  // Stages 0 and 5 have 4 hosts (2 x 3 x 4 bytes per parameter), 1..4 one.
  const double want = 24.0 * (c.StageParameterCount(0) + c.StageParameterCount(5));
  EXPECT_DOUBLE_EQ(w.averaging, want);
  EXPECT_EQ(w.activations, 0);
  EXPECT_EQ(w.frozen_refresh, 0);
  EXPECT_DOUBLE_EQ(w.tokens, 4 * 4 * 512);
}

TEST(SdpTrafficTest, BackwardMaskingAlsoRefreshesFrozenCopies) {
  const ModelConfig c = SixStages();
  const SdpAssignment a = AssignSubnetworks(6, 4, 0.5).value();
  const WireBytes w = SdpIterationBytes(c, a, SdpMode::kBackward, 4, 512);
  double frozen = 0;
  for (int s = 1; s <= 4; ++s) frozen += 3 * 12.0 * c.StageParameterCount(s);
  EXPECT_DOUBLE_EQ(w.frozen_refresh, frozen);
}

TEST(SdpTrafficTest, PipelineSendsActivationsOnEveryHop) {
  const ModelConfig c = SixStages();
  const WireBytes w = PipelineIterationBytes(c, 4, 1, 4, 512);
  EXPECT_DOUBLE_EQ(w.activations, 16.0 * 2 * 6 * 512 * 256 * 4);
  EXPECT_DOUBLE_EQ(w.averaging, 24.0 * c.StageParameterCount(0));  // relays unreplicated
  EXPECT_GT(w.PerToken(), SdpIterationBytes(c, AssignSubnetworks(6, 4, 0.5).value(),
                                            SdpMode::kForward, 4, 512)
                              .PerToken());
}

}  // namespace
}  // namespace skipswarm::model
