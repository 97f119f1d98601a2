#include "scheduler/hybrid_flags.h"

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(int, hybrid_outer_every);
ABSL_DECLARE_FLAG(std::string, hybrid_mode);
ABSL_DECLARE_FLAG(std::vector<std::string>, hybrid_one_stage_nodes);

namespace skipswarm::scheduler {
namespace {

TEST(HybridFlagsTest, AScenarioGivesTheInputsAndFlagsOffTheirDefaultReplaceThem) {
  HybridInputs scenario;
  scenario.params = 3e8;
  scenario.memory_gib = 80;
  scenario.averaging.outer_every = 32;
  scenario.one_stage_nodes = {"n1", "n3"};
  absl::StatusOr<HybridInputs> in = HybridInputsFromFlags(1e9, &scenario);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->params, 3e8);
  EXPECT_EQ(in->memory_gib, 80);
  EXPECT_EQ(in->averaging.outer_every, 32);
  EXPECT_EQ(in->one_stage_nodes, scenario.one_stage_nodes);
  EXPECT_EQ(in->selection, HybridSelection::kAll);

  absl::SetFlag(&FLAGS_hybrid_outer_every, 4);
  absl::SetFlag(&FLAGS_hybrid_one_stage_nodes, std::vector<std::string>{"n5"});
  absl::SetFlag(&FLAGS_hybrid_mode, "sdp");
  in = HybridInputsFromFlags(1e9, &scenario);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->averaging.outer_every, 4);
  EXPECT_EQ(in->one_stage_nodes, std::vector<std::string>{"n5"});
  EXPECT_EQ(in->memory_gib, 80);
  EXPECT_EQ(in->selection, HybridSelection::kSdp);

  // Without a scenario every flag counts, defaults included.
  in = HybridInputsFromFlags(2e9);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->params, 2e9);
  EXPECT_EQ(in->memory_gib, 0);

  absl::SetFlag(&FLAGS_hybrid_mode, "some");
  EXPECT_EQ(HybridInputsFromFlags(1e9, &scenario).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::SetFlag(&FLAGS_hybrid_mode, "all");
  absl::SetFlag(&FLAGS_hybrid_outer_every, 1);
  absl::SetFlag(&FLAGS_hybrid_one_stage_nodes, std::vector<std::string>{});
}

}  // namespace
}  // namespace skipswarm::scheduler
