#include "node/daemon/reporting/status_board.h"

#include <cmath>
#include <string>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "node/daemon/reporting/sample_status.h"

namespace skipswarm::node {
namespace {

StatusBoardOptions Options() {
  StatusBoardOptions o;
  o.node_name = "d0";
  o.node_id = common::NodeId::ForName("d0").Hex();
  o.mode = "gossip";
  o.num_stages = 3;
  o.version = "0.1.0 (commit unknown)";
  return o;
}

nlohmann::json Doc(const StatusBoard& board) {
  return nlohmann::json::parse(board.RenderJson());
}

TEST(StatusBoardTest, ShowsTheSwarmFromTheGossipView) {
  common::SimClock clock;
  StatusBoard board(Options(), &clock);
  FillSampleBoard(&board, &clock);
  board.SetMemberNames({{common::NodeId::ForName("r1"), "r1"}});
  const nlohmann::json d = Doc(board);

  EXPECT_EQ(d["node"]["name"], "d0");
  EXPECT_EQ(d["node"]["stages"], nlohmann::json::array({0}));
  EXPECT_EQ(d["node"]["reachable"], true);
  EXPECT_EQ(d["node"]["iteration"], kSampleIterations - 1);
  EXPECT_TRUE(d["node"]["serving"].is_null());  // no health given

  const nlohmann::json& sw = d["swarm"];
  ASSERT_TRUE(sw["available"].get<bool>());
  ASSERT_EQ(sw["members"].size(), static_cast<size_t>(kSampleMembers));
  EXPECT_EQ(sw["live_members"], 4);  // r2 is DEAD
  int self = 0, outbound = 0;
  for (const auto& m : sw["members"]) {
    self += m["self"].get<bool>();
    outbound += m["outbound_only"].get<bool>();
  }
  EXPECT_EQ(self, 1);
  EXPECT_EQ(outbound, 1);
  int named = 0;
  for (const auto& m : sw["members"]) named += m["name"] == "r1";
  EXPECT_EQ(named, 1);
  // Stage map: replicas are live hosts only; stage 2's one host is SUSPECT
  // (still live), stage 1 lost r2.
  ASSERT_EQ(sw["stages"].size(), 3u);
  EXPECT_EQ(sw["stages"][0]["replicas"], 2);
  EXPECT_EQ(sw["stages"][1]["replicas"], 1);
  EXPECT_EQ(sw["stages"][1]["members"][0], "r1");  // named; others by short id
  EXPECT_EQ(sw["stages"][2]["members"][0], common::NodeId::ForName("r3").ShortString());
  EXPECT_EQ(sw["stages"][2]["replicas"], 1);
  ASSERT_EQ(sw["links"].size(), 2u);
  EXPECT_DOUBLE_EQ(sw["links"][0]["rtt_ms"].get<double>(), 42);
  EXPECT_DOUBLE_EQ(sw["links"][0]["mbps"].get<double>(), 100);
  EXPECT_TRUE(sw["links"][1]["rtt_ms"].is_null());
  EXPECT_TRUE(sw["links"][1]["mbps"].is_null());

  ASSERT_EQ(d["history"].size(), static_cast<size_t>(kSampleIterations));
  EXPECT_DOUBLE_EQ(d["history"][0]["loss"].get<double>(), 5.5);
  EXPECT_NEAR(d["history"][0]["tokens_per_second"].get<double>(), 2048 / 0.8, 1e-6);
  // Events, newest first: the death (at iteration 20), the re-route (12),
  // reachability (before any iteration).
  const nlohmann::json& ev = d["events"];
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0]["kind"], "member");
  EXPECT_EQ(ev[0]["iteration"], 20);
  EXPECT_EQ(ev[1]["kind"], "reroute");
  EXPECT_EQ(ev[1]["iteration"], 12);
  EXPECT_TRUE(ev[2]["iteration"].is_null());
  EXPECT_DOUBLE_EQ(ev[1]["t"].get<double>(), 13);  // SimClock: one second per iteration
}

// Note [Route shapes]: the skip and swap rates over the latest
// route_window (20) iterations of the sample: 29..10, 80 micro-batches,
// 9 skipped (one a skip_swap), 1 swapped.
TEST(StatusBoardTest, RouteSkipAndSwapRatesCoverTheLatestIterations) {
  common::SimClock clock;
  StatusBoard board(Options(), &clock);
  FillSampleBoard(&board, &clock);
  const nlohmann::json r = Doc(board)["routes"];
  EXPECT_EQ(r["window_iterations"], 20);
  EXPECT_EQ(r["micro_batches"], 80);
  EXPECT_EQ(r["skipped"], 9);
  EXPECT_EQ(r["swapped"], 1);
  EXPECT_DOUBLE_EQ(r["skip_rate"].get<double>(), 9.0 / 80);
  EXPECT_DOUBLE_EQ(r["swap_rate"].get<double>(), 1.0 / 80);
  // A relay originates nothing: no rate rather than 0%.
  StatusBoard relay(Options(), &clock);
  NodeIterationReport it;
  relay.ObserveIteration(it);
  EXPECT_TRUE(Doc(relay)["routes"]["skip_rate"].is_null());
  EXPECT_EQ(Doc(relay)["routes"]["micro_batches"], 0);
}

TEST(StatusBoardTest, HealthReasonsPauseAndNonFiniteLossAreShown) {
  common::SimClock clock;
  Metrics metrics;
  ServingHealth health("d0", [](bool) {}, &metrics);
  StatusBoard board(Options(), &clock);
  board.SetHealth(&health);
  EXPECT_EQ(Doc(board)["node"]["serving"], true);

  NodeIterationReport r;
  r.iteration = 4;
  r.data.emplace();
  r.data->loss = NAN;
  r.data->completed = 4;
  r.data->elapsed = absl::Seconds(1);
  health.ObserveIteration(r);
  board.ObserveIteration(r);
  board.SetPaused(true, "quiet hours 22:00-07:00");
  nlohmann::json d = Doc(board);
  EXPECT_EQ(d["node"]["serving"], false);
  EXPECT_NE(d["node"]["health"].get<std::string>().find("diverged: loss nan at iteration 4"),
            std::string::npos)
      << d["node"]["health"];
  EXPECT_EQ(d["node"]["paused"], true);
  EXPECT_EQ(d["node"]["paused_why"], "quiet hours 22:00-07:00");
  EXPECT_TRUE(d["history"][0]["loss"].is_null());  // NaN is not valid JSON
  EXPECT_EQ(d["events"][0]["kind"], "pause");
  EXPECT_EQ(d["events"][1]["kind"], "error");

  board.SetPaused(false, "");
  d = Doc(board);
  EXPECT_EQ(d["node"]["paused"], false);
  EXPECT_EQ(d["events"][0]["text"], "resumed");
}

TEST(StatusBoardTest, HistoryAndEventsAreBoundedAndAStaticNodeHasNoView) {
  common::SimClock clock;
  StatusBoardOptions o = Options();
  o.mode = "static";
  o.max_history = 10;
  o.max_events = 4;
  StatusBoard board(o, &clock);
  for (int i = 0; i < 25; ++i) {
    NodeIterationReport r;  // a relay: no loss
    r.iteration = i;
    r.rerouted_here = 1;
    board.ObserveIteration(r);
  }
  const nlohmann::json d = Doc(board);
  EXPECT_FALSE(d["swarm"]["available"].get<bool>());
  ASSERT_EQ(d["history"].size(), 10u);
  EXPECT_EQ(d["history"][0]["iteration"], 15);
  EXPECT_TRUE(d["history"][0]["loss"].is_null());
  ASSERT_EQ(d["events"].size(), 4u);
  EXPECT_EQ(d["events"][0]["iteration"], 24);
  EXPECT_EQ(d["events_total"], 25);
}

TEST(StatusBoardTest, InvalidUtf8FromAPeerDoesNotBreakTheDocument) {
  common::SimClock clock;
  StatusBoard board(Options(), &clock);
  membership::View v = SampleView();
  v.members[0].addresses = {std::string("bad\xff\xfe:1")};
  board.UpdateView(v);
  EXPECT_NO_THROW(Doc(board));
}

}  // namespace
}  // namespace skipswarm::node
