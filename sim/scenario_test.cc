#include "sim/scenario.h"

#include "gtest/gtest.h"

namespace skipswarm::sim {
namespace {

constexpr char kDir[] = "sim/scenarios";

TEST(SimScenarioTest, LoadsGeneratedTopologyFromTheGcpTables) {
  absl::StatusOr<SimScenario> sc =
      LoadSimScenario(std::string(kDir) + "/gcp12-42.json", 1);
  ASSERT_TRUE(sc.ok()) << sc.status();
  const auto& view = sc->universe.view;
  EXPECT_EQ(view.num_nodes(), 42);
  EXPECT_EQ(view.num_stages(), 8);
  EXPECT_EQ(view.data_nodes().size(), 7u);
  EXPECT_EQ(sc->universe.workload.path_length, 6);
  // Belgium <-> Australia: 129 ms + 32 MiB at 0.0098 GiB/s.
  const int b = view.FindNode("belgium-s0-0");
  const int a = view.FindNode("australia-s1-0");
  ASSERT_GE(b, 0);
  ASSERT_GE(a, 0);
  EXPECT_NEAR(view.hop_s(b, a), 0.129 + (1.0 / 32) / 0.00982666015625, 1e-9);
  EXPECT_NEAR(view.forward_s(a), 0.055 * 4 * 2, 1e-12);
}

TEST(SimScenarioTest, LoadsSkipPipesOwnFileWithItsRoutes) {
  absl::StatusOr<SimScenario> sc =
      LoadSimScenario(std::string(kDir) + "/gcp20-skippipe.json", 1);
  ASSERT_TRUE(sc.ok()) << sc.status();
  EXPECT_EQ(sc->universe.view.num_nodes(), 20);
  EXPECT_TRUE(sc->universe.route_sets.count("ca-paths"));
}

TEST(SimScenarioTest, ExpandsChurnAndAddsJoinersToTheUniverse) {
  absl::StatusOr<SimScenario> sc =
      LoadSimScenario(std::string(kDir) + "/small-churn.json", 3);
  ASSERT_TRUE(sc.ok()) << sc.status();
  const int n = sc->universe.view.num_nodes();
  EXPECT_EQ(n, 2 + 6 + 1);
  EXPECT_FALSE(sc->initially_present[n - 1]);
  EXPECT_TRUE(sc->auto_stage[n - 1]);
  ASSERT_EQ(sc->churn.events.size(), 4u);  // kill, join, slow start, end
  EXPECT_EQ(sc->churn.events[0].kind, ChurnKind::kKill);
  EXPECT_EQ(sc->churn.events[1].kind, ChurnKind::kJoin);
  EXPECT_EQ(sc->churn.events[3].kind, ChurnKind::kSlowEnd);
}

TEST(SimScenarioTest, PoissonTimesDependOnTheSeedOnly) {
  const std::string text = R"({
    "topology_file": "gcp12-42.json",
    "churn": [{"type": "poisson_failures", "fraction": 0.5, "to_s": 100}]})";
  auto a = ParseSimScenario(text, kDir, 5);
  auto b = ParseSimScenario(text, kDir, 5);
  auto c = ParseSimScenario(text, kDir, 6);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->churn.events.size(), 18u);  // half of 35 non-data nodes
  ASSERT_EQ(c->churn.events.size(), 18u);
  for (size_t i = 0; i < a->churn.events.size(); ++i) {
    EXPECT_EQ(a->churn.events[i].at_s, b->churn.events[i].at_s);
  }
  EXPECT_NE(a->churn.events[0].at_s, c->churn.events[0].at_s);
}

TEST(SimScenarioTest, CorrelatedFailuresTakeWholeRegions) {
  const std::string text = R"({
    "topology_file": "gcp12-42.json",
    "churn": [{"type": "correlated_failures", "fraction": 0.25, "to_s": 50}]})";
  auto sc = ParseSimScenario(text, kDir, 5);
  ASSERT_TRUE(sc.ok()) << sc.status();
  size_t killed = 0;
  for (const ChurnEvent& e : sc->churn.events) {
    EXPECT_EQ(e.kind, ChurnKind::kKill);
    killed += e.nodes.size();
  }
  EXPECT_EQ(killed, 9u);  // round(0.25 x 35)
}

TEST(SimScenarioTest, ErrorsNameTheField) {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    auto sc = ParseSimScenario(text, kDir, 1);
    ASSERT_FALSE(sc.ok()) << text;
    EXPECT_NE(sc.status().message().find(needle), std::string::npos)
        << sc.status();
  };
  expect_error("[1]", "not a JSON object");
  expect_error("{}", "topology");
  expect_error(R"({"topology_file": "gcp12-42.json", "iterations": -1})",
               "iterations");
  // Past int's range: an undefined cast (became a negative count of iterations).
  expect_error(R"({"topology_file": "gcp12-42.json", "iterations": 1e12})",
               "scenario.iterations: must be in 1..10000000");
  expect_error(R"({"topology": {"compute_csv": "gcp12-compute.csv",
                                "groups": [{"regions": "all", "stages": [0], "count": 1e12}]}})",
               "topology.groups[0].count: must be a whole number in 0..10000");
  expect_error(R"({"topology": {"compute_csv": "gcp12-compute.csv",
                                "groups": [{"regions": "all", "stages": [0], "count": 1,
                                            "memory_slots": 1e12}]}})",
               "topology.groups[0].memory_slots: must be in 1..1000000");
  expect_error(R"({"topology_file": "gcp12-42.json",
                   "churn": [{"type": "kill", "node": "nobody", "at_s": 1}]})",
               "churn[0].node");
  expect_error(R"({"topology_file": "gcp12-42.json",
                   "churn": [{"type": "meteor", "at_s": 1}]})",
               "unknown churn type");
  expect_error(R"({"topology_file": "gcp12-42.json",
                   "churn": [{"type": "partition", "regions": ["Mars"],
                              "at_s": 1}]})",
               "unknown region Mars");
  expect_error(R"({"topology_file": "gcp12-42.json", "planner": "replay"})",
               "replay_key");
  expect_error(R"({"topology_file": "nope.json"})", "cannot read");
  expect_error(R"({"topology_file": "gcp12-42.json", "name": 3})",
               "wrong type");
  // Used to pass: bad_alloc in the planner, and an empty report with exit 0.
  expect_error(R"({"topology_file": "gcp12-42.json",
                   "workload": {"mb_per_data_node": 1e9}})",
               "mb_per_data_node");
  expect_error(R"({"topology_file": "gcp12-42.json",
                   "workload": {"mb_per_data_node": 100000}})",
               "mb_per_data_node must be in 1..65536");
  expect_error(R"({"topology_file": "gcp12-42.json", "planner": "nosuch"})",
               "unknown planner \"nosuch\"");
  // Used to abort the process: an allocation of 8e18 bytes (scenario_fuzzer).
  expect_error(R"({"topology_file": "gcp12-42.json",
                   "churn": [{"type": "join", "region": "Iowa", "at_s": 1, "count": 1e18}]})",
               "churn[0].count: must be a whole number in 0..1000");
  // A universe of a million joiners: minutes and gigabytes.
  expect_error(R"({"topology_file": "gcp12-42.json",
                   "churn": [{"type": "join", "region": "Iowa", "at_s": 1, "count": 600},
                             {"type": "poisson_arrivals", "rate_per_s": 1e9, "from_s": 0,
                              "to_s": 10}]})",
               "churn[1]: adds 1000001 nodes after 600; a trace may add at most 1000");
}

// The shipped home-uplink scenario: uplinks spread over each stage's
// nodes, and the averaging configurations to compare.
TEST(SimScenarioTest, LoadsHomeUplinksAndAveragingConfigurations) {
  auto sc = LoadSimScenario(std::string(kDir) + "/home-uplink.json", 1);
  ASSERT_TRUE(sc.ok()) << sc.status();
  ASSERT_TRUE(sc->averaging.has_value());
  EXPECT_DOUBLE_EQ(sc->averaging->model_params, 350e6);
  ASSERT_EQ(sc->averaging->compare.size(), 10u);
  EXPECT_TRUE(sc->averaging->compare[9].overlap);
  EXPECT_FALSE(sc->averaging->compare[3].overlap);
  EXPECT_EQ(sc->averaging->compare[3].outer_every, 8);
  EXPECT_EQ(model::AvgCodecName(sc->averaging->compare[3].codec), "int8");
  ASSERT_EQ(sc->uplinks.size(), 16u);
  std::vector<double> stage1;
  for (const auto& u : sc->uplinks) {
    if (u.stage == 1) stage1.push_back(u.bytes_per_s);
  }
  // [10, 50] Mbit/s over the stage's two nodes (one per region).
  ASSERT_EQ(stage1.size(), 2u);
  EXPECT_DOUBLE_EQ(stage1[0], 10e6 / 8);
  EXPECT_DOUBLE_EQ(stage1[1], 50e6 / 8);
  auto bad = ParseSimScenario(
      R"({"topology": {"model": {"num_stages": 1, "layers_per_stage": 1, "samples_per_mb": 1,
          "bytes_per_mb": 1}, "workload": {"mb_per_data_node": 1, "path_length": 1},
          "region_links": [{"a": "x", "b": "x", "latency_ms": 1, "bandwidth_gib_s": 1}],
          "groups": [{"regions": ["x"], "stages": [0], "sec_per_layer_sample": 1}]},
          "averaging": {"model_params": 1e6, "compare": [{"avg_codec": "zip"}]}})",
      kDir, 1);
  EXPECT_FALSE(bad.ok());
}

// The heterogeneous-memory variant of SkipPipe's 12-region file: the
// "hybrid" object carries what `sim --hybrid` assumes; bad keys and values
// are refused by name.
TEST(SimScenarioTest, LoadsTheHybridInputsOfTheHeterogeneousMemoryVariant) {
  auto sc = LoadSimScenario(std::string(kDir) + "/gcp20-hybrid-halfmem.json", 1);
  ASSERT_TRUE(sc.ok()) << sc.status();
  ASSERT_TRUE(sc->hybrid.has_value());
  EXPECT_DOUBLE_EQ(sc->hybrid->params, 1e9);
  EXPECT_DOUBLE_EQ(sc->hybrid->bytes_per_mb, 64 << 20);
  EXPECT_DOUBLE_EQ(sc->hybrid->memory_gib, 80);
  EXPECT_EQ(sc->hybrid->averaging.outer_every, 32);
  ASSERT_EQ(sc->hybrid->one_stage_nodes.size(), 10u);
  EXPECT_EQ(sc->hybrid->one_stage_nodes[9], "n19");
  for (const std::string& name : sc->hybrid->one_stage_nodes) {
    EXPECT_GE(sc->universe.view.FindNode(name), 0) << name;
  }
  auto uniform = LoadSimScenario(std::string(kDir) + "/gcp20-hybrid.json", 1);
  ASSERT_TRUE(uniform.ok()) << uniform.status();
  ASSERT_TRUE(uniform->hybrid.has_value());
  EXPECT_TRUE(uniform->hybrid->one_stage_nodes.empty());

  auto expect_error = [](const std::string& hybrid, const std::string& needle) {
    auto bad = ParseSimScenario(
        R"({"topology_file": "gcp12-42.json", "hybrid": )" + hybrid + "}", kDir, 1);
    ASSERT_FALSE(bad.ok()) << hybrid;
    EXPECT_NE(bad.status().message().find(needle), std::string::npos) << bad.status();
  };
  expect_error("3", "hybrid: must be an object");
  expect_error(R"({"memory": 80})", "hybrid.memory: unknown key");
  expect_error(R"({"params": 0})", "hybrid.params");
  expect_error(R"({"outer_every": 0})", "hybrid.outer_every");
  expect_error(R"({"avg_codec": "zip"})", "hybrid.avg_codec");
  expect_error(R"({"one_stage_nodes": "n1"})", "hybrid.one_stage_nodes");
  expect_error(R"({"half_one_stage": 1})", "hybrid.half_one_stage");
}

}  // namespace
}  // namespace skipswarm::sim
