#include "node/daemon/gossip/gossip_mode_options.h"

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

TEST(GossipModeOptionsTest, DefaultsAreAccepted) {
  EXPECT_TRUE(CheckGossipModeOptions(NodeDaemonOptions()).ok());
  NodeDaemonOptions o;
  o.wan.max_upload_bytes_per_second = 1e6;  // caps work in both modes
  o.wan.max_download_bytes_per_second = 1e6;
  o.planner = "random";
  EXPECT_TRUE(CheckGossipModeOptions(o).ok());
}

// A user flag is never silently ignored: each static-list-only option is
// refused, naming its flag.
TEST(GossipModeOptionsTest, StaticListOnlyOptionsAreRefusedByFlagName) {
  NodeDaemonOptions routes;
  routes.wan.routes_file = "d0.routes";
  NodeDaemonOptions timed;
  timed.wan.timed_forward_s = 0.1;
  NodeDaemonOptions table;
  table.wan.wan_table = "table.csv";
  for (const auto& [o, flag] : {std::pair(routes, "--node_routes"),
                                std::pair(timed, "--node_timed_forward_s"),
                                std::pair(table, "--wan_table")}) {
    const absl::Status s = CheckGossipModeOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find(flag), absl::string_view::npos) << s;
    EXPECT_NE(s.message().find("static --swarm list"), absl::string_view::npos) << s;
  }
}

}  // namespace
}  // namespace skipswarm::node
