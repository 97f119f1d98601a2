#include "common/caller_key.h"

#include <string>

#include "absl/time/time.h"
#include "common/peer_quota.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

struct Case {
  const char* peer;
  const char* key;
};

// Note [Caller keys]: what gRPC 1.51 writes (first rows: observed from a
// real server's ServerContext::peer()), then the unescaped forms.
TEST(CallerKeyTest, KeysEachFormItsHostOrSlash64) {
  const Case kCases[] = {
      {"ipv4:127.0.0.1:33156", "ipv4:127.0.0.1"},
      {"ipv6:%5B::1%5D:60580", "ipv6:::/64"},
      {"ipv6:%5Bfd00::2%5D:43732", "ipv6:fd00::/64"},
      {"ipv6:%5Bfe80::fc:ff:fe00:1%254%5D:41180", "ipv6:fe80::/64%4"},
      {"ipv4:10.0.0.1:5000", "ipv4:10.0.0.1"},
      {"ipv6:[::1]:5000", "ipv6:::/64"},
      {"ipv6:[2001:db8:1:2:3:4:5:6]:5000", "ipv6:2001:db8:1:2::/64"},
      {"ipv6:[2001:0DB8:0001:0002::ffff]:1", "ipv6:2001:db8:1:2::/64"},
      {"ipv6:%5b2001:db8::1%5d:1", "ipv6:2001:db8::/64"},
      {"ipv6:[fe80::1%eth0]:5000", "ipv6:fe80::/64%eth0"},
      {"ipv6:[fe80::1%25eth0]:5000", "ipv6:fe80::/64%eth0"},
      {"ipv6:[2001:db8::1%eth0]:5000", "ipv6:2001:db8::/64"},  // zone only on link-local
      {"ipv6:[fe80::1%a/b]:5000", "ipv6:fe80::/64"},            // not a zone: dropped
      {"ipv6:[::ffff:10.1.2.3]:5000", "ipv4:10.1.2.3"},
      {"ipv6:%5B::ffff:a01:203%5D:5000", "ipv4:10.1.2.3"},
      {"ipv6:[2001:db8::1]", "ipv6:2001:db8::/64"},
      {"ipv6:2001:db8::1", "ipv6:2001:db8::/64"},
      {"ipv4:10.0.0.1", "ipv4:10.0.0.1"},
      {"unix:/tmp/x", "unix:/tmp/x"},
      {"unix-abstract:sock", "unix-abstract:sock"},
      {"ipv4:999.0.0.1:5000", "ipv4:999.0.0.1"},
      {"ipv6:[nonsense]:5000", "ipv6:[nonsense]"},
      {"ipv6:%5B", "ipv6:%5B"},
      {"ipv6:%", "ipv6:%"},
      {"", ""},
  };
  for (const Case& c : kCases) EXPECT_EQ(CallerKey(c.peer), c.key) << c.peer;
}

// What a reachability answer tells a caller it was seen as: a dialable
// "host:port", never gRPC's escaped URI form.
TEST(CallerKeyTest, GrpcPeerAddressIsDialable) {
  const Case kCases[] = {
      {"ipv4:127.0.0.1:33156", "127.0.0.1:33156"},
      {"ipv6:%5B::1%5D:60580", "[::1]:60580"},
      {"ipv6:%5b2001:db8::1%5d:1", "[2001:db8::1]:1"},
      {"ipv6:%5Bfe80::fc:ff:fe00:1%254%5D:41180", "[fe80::fc:ff:fe00:1%4]:41180"},
      {"ipv6:[::1]:5000", "[::1]:5000"},
      {"ipv6:[fe80::1%eth0]:5000", "[fe80::1%eth0]:5000"},
      {"unix:/tmp/x", "unix:/tmp/x"},
      {"ipv6:%5B", "["},
      {"ipv6:%", "%"},
      {"", ""},
  };
  for (const Case& c : kCases) EXPECT_EQ(GrpcPeerAddress(c.peer), c.key) << c.peer;
  EXPECT_EQ(PercentDecoded("%5B::1%5D:5000"), "[::1]:5000");
  EXPECT_EQ(PercentDecoded("[::1]:5000"), "[::1]:5000");
  EXPECT_EQ(PercentDecoded("%zz%4"), "%zz%4");
}

TEST(CallerKeyTest, AnOverlongPeerIsKeyedWhole) {
  const std::string peer = "ipv6:[2001:db8::1%" + std::string(200, 'a') + "]:5000";
  EXPECT_EQ(CallerKey(peer), peer.substr(0, peer.rfind(':')));
}

// Note [Caller keys]: one host's /64 is one stranger's budget.
TEST(CallerKeyTest, CallersInOneSlash64ShareABudget) {
  SimClock clock;
  PeerQuotaOptions o;
  o.service = "manifest";
  o.stranger = {/*messages_per_second=*/1, /*message_burst=*/2, 0, 0, 0};
  PeerQuota quota(o, &clock);
  auto admit = [&](const char* peer) {
    return quota.AdmitKey(CallerKey(peer), PeerClass::kStranger, 10).ok();
  };
  EXPECT_TRUE(admit("ipv6:%5B2001:db8:1:2::1%5D:5000"));
  EXPECT_TRUE(admit("ipv6:%5B2001:db8:1:2::2%5D:5001"));
  EXPECT_FALSE(admit("ipv6:%5B2001:db8:1:2:ffff:ffff:ffff:ffff%5D:5002"));
  // Another /64, and IPv4 callers, each have their own.
  EXPECT_TRUE(admit("ipv6:%5B2001:db8:1:3::1%5D:5000"));
  EXPECT_TRUE(admit("ipv4:10.0.0.1:5000"));
  EXPECT_TRUE(admit("ipv4:10.0.0.2:5000"));
  EXPECT_EQ(quota.tracked_peers(), 4u);
}

}  // namespace
}  // namespace skipswarm::common
