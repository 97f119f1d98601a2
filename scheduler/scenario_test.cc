#include "scheduler/scenario.h"

#include "gtest/gtest.h"
#include "scheduler/evaluator.h"
#include "scheduler/route_search.h"

namespace skipswarm::scheduler {
namespace {

constexpr char kReference[] = "scheduler/testdata/skippipe_gcp20_schedule.json";

TEST(ScenarioTest, LoadsSkipPipeScheduleAndItsRoutes) {
  auto sc = LoadScenarioFile(kReference);
  ASSERT_TRUE(sc.ok()) << sc.status();
  const TopologyView& view = sc->view;
  EXPECT_EQ(view.num_nodes(), 20);
  EXPECT_EQ(view.num_stages(), 6);
  EXPECT_EQ(view.data_nodes(), (std::vector<int>{0, 3, 4, 10, 11}));
  EXPECT_EQ(view.memory_slots(7), 3);
  EXPECT_DOUBLE_EQ(view.forward_s(7), 0.44);
  EXPECT_EQ(view.node(11).region, "Australia");
  auto ca = sc->RouteSet("ca-paths");
  ASSERT_TRUE(ca.ok()) << ca.status();
  ASSERT_EQ(ca->routes.size(), 30u);  // 5 data nodes x 6 MBs
  EXPECT_EQ(ca->routes[0].nodes, (std::vector<int>{0, 14, 6, 12, 0}));
  EXPECT_TRUE(ValidatePlan(view, sc->workload, *ca, 4).ok());
  auto nonca = sc->RouteSet("non-ca-paths");
  ASSERT_TRUE(nonca.ok());
  EXPECT_EQ(nonca->routes.size(), 30u);
  EXPECT_FALSE(sc->RouteSet("nope").ok());
}

TEST(ScenarioTest, AustraliaBoundsTheReferenceIteration) {
  auto sc = LoadScenarioFile(kReference);
  ASSERT_TRUE(sc.ok());
  RouteSearcher searcher(sc->view, sc->workload);
  auto best = searcher.Best(11, {});
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->nodes, (std::vector<int>{11, 8, 16, 9, 11}));
  EXPECT_NEAR(best->latency_s, 15.141895, 1e-5);
  auto lb = ComputeLowerBound(sc->view, sc->workload);
  ASSERT_TRUE(lb.ok());
  EXPECT_NEAR(lb->origin_memory_s, 2 * 15.141895, 1e-4);
  EXPECT_NEAR(lb->origin_tail_s, 2 * 15.141895 + 5 * 0.44, 1e-4);
  EXPECT_NEAR(lb->seconds, lb->origin_tail_s, 1e-12);
}

TEST(ScenarioTest, LoadsOurOwnFormat) {
  auto sc = LoadScenarioFile("scheduler/scenarios/gcp12-24.json");
  ASSERT_TRUE(sc.ok()) << sc.status();
  EXPECT_EQ(sc->view.num_nodes(), 24);
  EXPECT_DOUBLE_EQ(sc->view.forward_s(0), 0.44);
  EXPECT_TRUE(ComputeLowerBound(sc->view, sc->workload).ok());
}

std::string ErrorOf(const std::string& json) {
  auto sc = ParseScenario(json);
  return sc.ok() ? "" : std::string(sc.status().message());
}

constexpr char kGood[] = R"({
  "model": {"num_stages": 2},
  "workload": {"mb_per_data_node": 2, "path_length": 2},
  "region_links": [{"a": "x", "b": "x", "latency_ms": 1, "bandwidth_gib_s": 1}],
  "nodes": [
    {"name": "d0", "stage": 0, "region": "x", "sec_per_layer_sample": 0.1, "memory_slots": 2},
    {"name": "a", "stage": 1, "region": "x", "sec_per_layer_sample": 0.1, "memory_slots": 2}],
  "routes": {"r": [{"origin": "d0", "nodes": ["d0", "a", "d0"]}]}
})";

std::string Replace(std::string text, const std::string& from,
                    const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(ScenarioTest, BadInputGetsAClearError) {
  EXPECT_EQ(ErrorOf(kGood), "");
  auto sc = ParseScenario(kGood);
  ASSERT_TRUE(sc.ok());
  EXPECT_EQ(sc->RouteSet("r")->routes.size(), 2u);

  EXPECT_EQ(ErrorOf("{"), "scenario is not a JSON object");
  EXPECT_EQ(ErrorOf(Replace(kGood, R"("sec_per_layer_sample": 0.1, "memory_slots": 2},
    {"name": "a")", R"("memory_slots": 2},
    {"name": "a")")),
            "node 'd0'.sec_per_layer_sample: missing");
  EXPECT_EQ(ErrorOf(Replace(kGood, R"("latency_ms": 1)", R"("latency_ms": -1)")),
            "region_links[0].latency_ms: must not be negative, got -1");
  EXPECT_EQ(ErrorOf(Replace(kGood, R"("name": "a", "stage": 1, "region": "x")",
                            R"("name": "a", "stage": 1, "region": "y")")),
            "stage 1 is disconnected: none of its nodes (a) has a link path "
            "to a data node");
  EXPECT_EQ(ErrorOf(Replace(kGood, R"("num_stages": 2)", R"("num_stages": 3)")),
            "stage 2 has no node");
  EXPECT_EQ(ErrorOf(Replace(kGood, R"("name": "a", "stage": 1, "region": "x", "sec_per_layer_sample": 0.1, "memory_slots": 2)",
                            R"("name": "a", "stage": 1, "region": "x", "sec_per_layer_sample": 0.1, "memory_gib": 1)")),
            "node 'a': memory_gib needs model.activation_gib_per_mb");
  EXPECT_EQ(
      ErrorOf(Replace(
          Replace(kGood, R"("num_stages": 2)",
                  R"("num_stages": 2, "activation_gib_per_mb": 3)"),
          R"("name": "a", "stage": 1, "region": "x", "sec_per_layer_sample": 0.1, "memory_slots": 2)",
          R"("name": "a", "stage": 1, "region": "x", "sec_per_layer_sample": 0.1, "memory_gib": 2)")),
      "node 'a': 2 GiB of memory cannot hold one micro-batch of 3 GiB "
      "activations");
  EXPECT_EQ(ErrorOf(Replace(kGood, R"("path_length": 2)", R"("path_length": 3)")),
            "path_length must be in 2..2 (number of stages), got 3");
}

TEST(ScenarioTest, BadSkipPipeFilesGetClearErrors) {
  EXPECT_EQ(ErrorOf(R"({"delays": [[0, 1], [1, 0]], "partitions": [[0], []], "memory": 3})"),
            "partitions[1]: stage 1 has no node");
  EXPECT_EQ(ErrorOf(R"({"delays": [[0, -1], [-1, 0]], "partitions": [[0], [1]], "memory": 3})"),
            "link n0 -> n1: hop time must be >= 0 seconds, got -1");
  EXPECT_EQ(ErrorOf(R"({"delays": [[0, 1], [1, 0]], "partitions": [[0], [1]]})"),
            "schedule.memory: missing");
  EXPECT_EQ(ErrorOf(R"({"delays": [[0, null], [null, 0]], "partitions": [[0], [1]], "memory": 3})"),
            "stage 1 is disconnected: none of its nodes (n1) has a link path "
            "to a data node");
}

}  // namespace
}  // namespace skipswarm::scheduler
