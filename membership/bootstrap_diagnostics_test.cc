#include "membership/bootstrap_diagnostics.h"

#include <gtest/gtest.h>

namespace skipswarm::membership {
namespace {

// The swarm-mismatch hint names the gossip mode's flags (it once pointed at
// --swarm, the static-list mode's file, which plays no part in a join).
TEST(BootstrapDiagnosticsTest, SwarmMismatchHintNamesTheSwarmIdFlags) {
  const absl::Status explained = ExplainGossipError(
      absl::FailedPreconditionError("peer is in swarm other, not skipswarm"), "h:1");
  EXPECT_NE(explained.message().find("[swarm]"), std::string::npos) << explained;
  EXPECT_NE(explained.message().find("--swarm_name"), std::string::npos) << explained;
  EXPECT_NE(explained.message().find("--swarm_secret"), std::string::npos) << explained;
  EXPECT_EQ(explained.message().find("--swarm "), std::string::npos) << explained;
}

}  // namespace
}  // namespace skipswarm::membership
