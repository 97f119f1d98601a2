#include "node/daemon/gossip/reachability.h"

#include <gtest/gtest.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "node/transport/node_server.h"

namespace skipswarm::node {
namespace {

// A node: its one server with the reachability service, on IPv4 loopback
// or, with `host` "[::1]", IPv6 loopback.
struct TestNode {
  explicit TestNode(const std::string& name, const std::string& host = "127.0.0.1") : host(host) {
    options.self = common::NodeId::ForName(name);
    options.credentials = identity::PeerCredentials::Insecure();
    options.swarm_id = "swarm";
    options.dial_timeout = absl::Milliseconds(500);
    service = std::make_unique<ReachabilityService>(options);
    server = std::make_unique<NodeServer>(NodeServerOptions{absl::StrCat(host, ":0")});
    server->builder()->RegisterService(service.get());
    started = server->Start(options.credentials).ok();
    if (host == "127.0.0.1") {
      EXPECT_TRUE(started);
    }
  }
  ~TestNode() { server->Shutdown(absl::ZeroDuration()); }
  std::string address() const { return absl::StrCat(host, ":", server->port()); }

  std::string host;
  bool started = false;
  ReachabilityOptions options;
  std::unique_ptr<ReachabilityService> service;
  std::unique_ptr<NodeServer> server;
};

TEST(ReachabilityTest, PeersDialBackAReachableNode) {
  TestNode a("a"), b("b"), c("c");
  ReachabilityReport r =
      CheckReachability({b.address(), c.address()}, a.address(), a.options, absl::Seconds(5));
  EXPECT_EQ(r.verdict, ReachabilityReport::Verdict::kReachable);
  EXPECT_EQ(r.reached(), 2);
  EXPECT_EQ(r.answers[0].observed_address.rfind("127.0.0.1:", 0), 0u);
  EXPECT_EQ(DescribeReachability(r),
            absl::StrCat("reachable at ", a.address(), " (dialed back by 2 of 2 answering peers)"));
}

// The observed address of an IPv6 caller is one it can dial and parse
// ("[::1]:port"), not gRPC's escaped peer string ("%5B::1%5D:port").
TEST(ReachabilityTest, AnIpv6CallerIsToldADialableAddress) {
  TestNode a("a", "[::1]"), b("b", "[::1]");
  if (!a.started || !b.started) GTEST_SKIP() << "no IPv6 loopback here";
  ReachabilityReport r = CheckReachability({b.address()}, a.address(), a.options, absl::Seconds(5));
  EXPECT_EQ(r.verdict, ReachabilityReport::Verdict::kReachable);
  ASSERT_EQ(r.answers.size(), 1u);
  EXPECT_EQ(r.answers[0].observed_address.rfind("[::1]:", 0), 0u) << r.answers[0].observed_address;
}

TEST(ReachabilityTest, AnAddressNobodyCanDialIsBehindNat) {
  TestNode a("a"), b("b"), c("c");
  // Nothing listens on port 1: what a peer sees of a node behind NAT.
  ReachabilityReport r =
      CheckReachability({b.address(), c.address()}, "127.0.0.1:1", a.options, absl::Seconds(5));
  EXPECT_EQ(r.verdict, ReachabilityReport::Verdict::kBehindNat);
  EXPECT_EQ(r.answered(), 2);
  EXPECT_EQ(r.reached(), 0);
  EXPECT_NE(r.answers[0].detail.find("127.0.0.1:1"), std::string::npos) << r.answers[0].detail;
  EXPECT_EQ(DescribeReachability(r),
            "behind NAT: outbound-only mode (127.0.0.1:1 could not be dialed by 2 of 2 peers; "
            "they see this node as 127.0.0.1)");
}

TEST(ReachabilityTest, AnotherNodeAtTheAddressDoesNotCount) {
  TestNode a("a"), b("b"), c("c");
  // `a` advertises c's address: c answers Identify with its own id.
  ReachabilityReport r = CheckReachability({b.address()}, c.address(), a.options, absl::Seconds(5));
  EXPECT_EQ(r.verdict, ReachabilityReport::Verdict::kBehindNat);
  EXPECT_NE(r.answers[0].detail.find("another node"), std::string::npos) << r.answers[0].detail;
}

TEST(ReachabilityTest, NoAnswerIsUnknownAndWrongSwarmIsRefused) {
  TestNode a("a"), b("b");
  ReachabilityReport none = CheckReachability({}, a.address(), a.options, absl::Seconds(1));
  EXPECT_EQ(none.verdict, ReachabilityReport::Verdict::kUnknown);
  EXPECT_EQ(DescribeReachability(none), "reachability unknown (no peer to ask)");
  ReachabilityOptions stranger = a.options;
  stranger.swarm_id = "other";
  ReachabilityReport r = CheckReachability({b.address()}, a.address(), stranger, absl::Seconds(5));
  EXPECT_EQ(r.verdict, ReachabilityReport::Verdict::kUnknown);
  EXPECT_NE(r.answers[0].detail.find("wrong swarm"), std::string::npos) << r.answers[0].detail;
}

TEST(ReachabilityTest, JudgeNeedsOneSuccessForReachable) {
  std::vector<DialBackAnswer> answers(3);
  EXPECT_EQ(Judge(answers), ReachabilityReport::Verdict::kUnknown);
  answers[0].answered = true;
  EXPECT_EQ(Judge(answers), ReachabilityReport::Verdict::kBehindNat);
  answers[1].answered = answers[1].reached = true;
  EXPECT_EQ(Judge(answers), ReachabilityReport::Verdict::kReachable);
}

}  // namespace
}  // namespace skipswarm::node
