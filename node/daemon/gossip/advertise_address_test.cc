#include "node/daemon/gossip/advertise_address.h"

#include <gtest/gtest.h>

namespace skipswarm::node {
namespace {

TEST(AdvertiseAddressTest, DefaultsToTheListenAddressWithTheBoundPort) {
  EXPECT_EQ(ResolveAdvertiseAddress("127.0.0.1:0", "", 4242, {}).value(), "127.0.0.1:4242");
  EXPECT_EQ(ResolveAdvertiseAddress("127.0.0.1:7000", "", 7000, {}).value(), "127.0.0.1:7000");
}

TEST(AdvertiseAddressTest, AdvertiseWinsAndItsPortZeroIsTheBoundOne) {
  EXPECT_EQ(ResolveAdvertiseAddress("0.0.0.0:7000", "node.example:7001", 7000, {}).value(),
            "node.example:7001");
  EXPECT_EQ(ResolveAdvertiseAddress("0.0.0.0:0", "203.0.113.5:0", 39001, {}).value(),
            "203.0.113.5:39001");
}

TEST(AdvertiseAddressTest, UnspecifiedHostBecomesTheSourceAddressTowardsTheBootstrapPeer) {
  // Loopback towards a loopback peer (no packet is sent).
  EXPECT_EQ(ResolveAdvertiseAddress("0.0.0.0:0", "", 5000, {"127.0.0.1:7000"}).value(),
            "127.0.0.1:5000");
  absl::StatusOr<std::string> any = ResolveAdvertiseAddress("0.0.0.0:0", "", 5000, {});
  ASSERT_TRUE(any.ok());
  EXPECT_NE(any->rfind(":5000"), std::string::npos);
  EXPECT_EQ(any->find("0.0.0.0"), std::string::npos);
}

TEST(AdvertiseAddressTest, BadAddressesNameTheFlag) {
  absl::StatusOr<std::string> r = ResolveAdvertiseAddress("7000", "", 1, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--listen=7000"), absl::string_view::npos);
  r = ResolveAdvertiseAddress("0.0.0.0:0", "::1:7000", 1, {});
  EXPECT_NE(r.status().message().find("brackets"), absl::string_view::npos);
  EXPECT_EQ(ResolveAdvertiseAddress("[::1]:0", "", 9, {}).value(), "[::1]:9");
}

}  // namespace
}  // namespace skipswarm::node
