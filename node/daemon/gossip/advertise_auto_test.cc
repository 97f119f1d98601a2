#include "node/daemon/gossip/advertise_auto.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "node/transport/node_server.h"

namespace skipswarm::node {
namespace {

// A fake dial-back check: the addresses in `reachable` are dialed back by
// both peers, every other one by none; records what it was asked.
class FakeCheck {
 public:
  explicit FakeCheck(std::set<std::string> reachable) : reachable_(std::move(reachable)) {}
  DialBackCheck fn() {
    return [this](const std::string& address) {
      {
        absl::MutexLock lock(&mu_);
        asked_.insert(address);
      }
      ReachabilityReport r;
      r.advertised = address;
      const bool ok = reachable_.count(address) > 0;
      for (const char* peer : {"p1:7000", "p2:7000"}) {
        DialBackAnswer a;
        a.peer = peer;
        a.answered = true;
        a.reached = ok;
        r.answers.push_back(a);
      }
      r.verdict = Judge(r.answers);
      return r;
    };
  }
  std::set<std::string> asked() {
    absl::MutexLock lock(&mu_);
    return asked_;
  }

 private:
  const std::set<std::string> reachable_;
  absl::Mutex mu_;
  std::set<std::string> asked_ ABSL_GUARDED_BY(mu_);
};

std::vector<Observation> SeenAs(std::vector<std::string> observed) {
  std::vector<Observation> out;
  for (size_t i = 0; i < observed.size(); ++i) {
    out.push_back(Observation{absl::StrCat("p", i + 1, ":7000"), observed[i]});
  }
  return out;
}

using V = ReachabilityReport::Verdict;

TEST(AdvertiseAutoTest, ParsesAutoAndAutoWithAPort) {
  EXPECT_EQ(ParseAutoAdvertise("auto"), 0);
  EXPECT_EQ(ParseAutoAdvertise("auto:17000"), 17000);
  EXPECT_EQ(ParseAutoAdvertise("auto:x"), std::nullopt);
  EXPECT_EQ(ParseAutoAdvertise("auto:70000"), std::nullopt);
  EXPECT_EQ(ParseAutoAdvertise("10.0.0.1:7000"), std::nullopt);
  EXPECT_EQ(ParseAutoAdvertise(""), std::nullopt);
}

TEST(AdvertiseAutoTest, TwoPeersMustAgreeAndBeAMajority) {
  // The source ports differ per connection (the router's mapping): ignored.
  ObservedHost two = AgreeOnHost(SeenAs({"203.0.113.7:40001", "203.0.113.7:51234"}));
  EXPECT_EQ(two.host, "203.0.113.7");
  EXPECT_EQ(two.agreeing, 2);
  EXPECT_EQ(two.observers, 2);
  // One peer alone cannot steer our address.
  EXPECT_EQ(AgreeOnHost(SeenAs({"203.0.113.7:40001", ""})).host, "");
  // Two peers that disagree: no winner.
  ObservedHost split = AgreeOnHost(SeenAs({"203.0.113.7:1", "198.51.100.2:2"}));
  EXPECT_EQ(split.host, "");
  EXPECT_EQ(split.hosts, (std::vector<std::string>{"203.0.113.7", "198.51.100.2"}));
  // 2 of 3 is a majority; 2 of 4 is not.
  EXPECT_EQ(AgreeOnHost(SeenAs({"203.0.113.7:1", "198.51.100.2:2", "203.0.113.7:3"})).host,
            "203.0.113.7");
  EXPECT_EQ(AgreeOnHost(SeenAs({"a.example:1", "b.example:2", "a.example:3", "b.example:4"})).host,
            "");
  // IPv6 as gRPC writes it, escaped or not.
  EXPECT_EQ(AgreeOnHost(SeenAs({"[2001:db8::7]:1", "%5B2001:db8::7%5D:2"})).host, "2001:db8::7");
}

TEST(AdvertiseAutoTest, BehindAPortForwardTheRoutersAddressIsAdvertised) {
  FakeCheck check({"203.0.113.7:7000"});
  AutoAdvertiseResult r = SettleAutoAdvertise(SeenAs({"203.0.113.7:40001", "203.0.113.7:40002"}),
                                              "10.232.1.2:7000", 7000, check.fn());
  EXPECT_EQ(r.address, "203.0.113.7:7000");
  EXPECT_EQ(r.report.verdict, V::kReachable);
  EXPECT_EQ(r.line,
            "advertise=auto: peers see us as 203.0.113.7 (2 of 2 agree); advertising "
            "203.0.113.7:7000");
  // Both candidates were checked (at once).
  EXPECT_EQ(check.asked(), (std::set<std::string>{"203.0.113.7:7000", "10.232.1.2:7000"}));
  EXPECT_EQ(DescribeReachability(r.report),
            "reachable at 203.0.113.7:7000 (dialed back by 2 of 2 answering peers)");
}

TEST(AdvertiseAutoTest, AutoWithAPortUsesThatPort) {
  FakeCheck check({"203.0.113.7:17000"});
  AutoAdvertiseResult r = SettleAutoAdvertise(SeenAs({"203.0.113.7:1", "203.0.113.7:2"}),
                                              "10.232.1.2:7000", 17000, check.fn());
  EXPECT_EQ(r.address, "203.0.113.7:17000");
  EXPECT_EQ(r.report.verdict, V::kReachable);
}

TEST(AdvertiseAutoTest, WithoutAForwardTheNodeIsBehindNatAtTheObservedAddress) {
  FakeCheck check({});
  AutoAdvertiseResult r = SettleAutoAdvertise(SeenAs({"203.0.113.7:1", "203.0.113.7:2"}),
                                              "10.232.1.2:7000", 7000, check.fn());
  EXPECT_EQ(r.address, "203.0.113.7:7000");
  EXPECT_EQ(r.report.verdict, V::kBehindNat);  // the daemon goes outbound-only (relayed)
}

TEST(AdvertiseAutoTest, AReachableLocalAddressIsKeptWhenTheObservedOneFails) {
  // Peers see us through a NAT of their own but can dial us directly.
  FakeCheck check({"10.0.0.5:7000"});
  AutoAdvertiseResult r = SettleAutoAdvertise(SeenAs({"203.0.113.7:1", "203.0.113.7:2"}),
                                              "10.0.0.5:7000", 7000, check.fn());
  EXPECT_EQ(r.address, "10.0.0.5:7000");
  EXPECT_EQ(r.report.verdict, V::kReachable);
  EXPECT_EQ(r.line,
            "advertise=auto: peers see us as 203.0.113.7 (2 of 2 agree), but only the local "
            "address 10.0.0.5:7000 was dialed back; advertising it");
}

TEST(AdvertiseAutoTest, APublicHostKeepsItsAddressWithOneCheck) {
  FakeCheck check({"198.51.100.9:7000"});
  AutoAdvertiseResult r = SettleAutoAdvertise(SeenAs({"198.51.100.9:1", "198.51.100.9:2"}),
                                              "198.51.100.9:7000", 7000, check.fn());
  EXPECT_EQ(r.address, "198.51.100.9:7000");
  EXPECT_EQ(check.asked(), (std::set<std::string>{"198.51.100.9:7000"}));
  EXPECT_EQ(r.line,
            "advertise=auto: peers see us as 198.51.100.9 (2 of 2 agree); advertising "
            "198.51.100.9:7000 (the local address)");
}

TEST(AdvertiseAutoTest, WithoutAgreementTheLocalAddressStays) {
  FakeCheck check({});
  AutoAdvertiseResult one =
      SettleAutoAdvertise(SeenAs({"203.0.113.7:1"}), "10.232.1.2:7000", 7000, check.fn());
  EXPECT_EQ(one.address, "10.232.1.2:7000");
  EXPECT_EQ(one.line,
            "advertise=auto: 1 peer of 1 asked could say where they see us (2 must agree); "
            "advertising the local address 10.232.1.2:7000");
  AutoAdvertiseResult split = SettleAutoAdvertise(SeenAs({"203.0.113.7:1", "198.51.100.2:2"}),
                                                  "10.232.1.2:7000", 7000, check.fn());
  EXPECT_EQ(split.address, "10.232.1.2:7000");
  EXPECT_EQ(split.line,
            "advertise=auto: peers disagree on where they see us (203.0.113.7, 198.51.100.2; "
            "1 of 2 agree, more than half needed); advertising the local address "
            "10.232.1.2:7000");
  EXPECT_EQ(check.asked(), (std::set<std::string>{"10.232.1.2:7000"}));
}

// In process, real gRPC: two peers observe us, then dial the observed
// address back.
struct TestNode {
  explicit TestNode(const std::string& name) {
    options.self = common::NodeId::ForName(name);
    options.credentials = identity::PeerCredentials::Insecure();
    options.swarm_id = "swarm";
    options.dial_timeout = absl::Milliseconds(500);
    service = std::make_unique<ReachabilityService>(options);
    server = std::make_unique<NodeServer>(NodeServerOptions{"127.0.0.1:0"});
    server->builder()->RegisterService(service.get());
    EXPECT_TRUE(server->Start(options.credentials).ok());
  }
  ~TestNode() { server->Shutdown(absl::ZeroDuration()); }
  std::string address() const { return absl::StrCat("127.0.0.1:", server->port()); }

  ReachabilityOptions options;
  std::unique_ptr<ReachabilityService> service;
  std::unique_ptr<NodeServer> server;
};

TEST(AdvertiseAutoTest, PeersObserveTheCallerAndTheObservedAddressIsDialedBack) {
  TestNode a("a"), b("b"), c("c");
  const std::vector<std::string> peers = {b.address(), c.address(), "127.0.0.1:1"};
  std::vector<Observation> seen = ObserveSelf(peers, a.options, absl::Seconds(5));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].observed.rfind("127.0.0.1:", 0), 0u) << seen[0].observed;
  EXPECT_EQ(seen[1].observed.rfind("127.0.0.1:", 0), 0u) << seen[1].observed;
  EXPECT_EQ(seen[2].observed, "");  // nobody there
  // Our "local" address is one nobody can dial (port 1); the observed host
  // with our port is where we are.
  const std::vector<std::string> checkers = {b.address(), c.address()};
  AutoAdvertiseResult r =
      SettleAutoAdvertise(seen, "127.0.0.1:1", a.server->port(), [&](const std::string& at) {
        return CheckReachability(checkers, at, a.options, absl::Seconds(5));
      });
  EXPECT_EQ(r.address, a.address());
  EXPECT_EQ(r.report.verdict, V::kReachable);
  EXPECT_EQ(r.line, absl::StrCat("advertise=auto: peers see us as 127.0.0.1 (2 of 2 agree); "
                                 "advertising ",
                                 a.address()));
}

}  // namespace
}  // namespace skipswarm::node
