// Static --swarm security (Note [Static swarm security], swarm_spec_tls.h):
// the rules StaticSwarmTls::Create enforces, and two nodes built from a
// pinned list talking over mutual TLS (replica group and pipeline
// transport, servers on port 0) while a node with the wrong key at a
// member's address, or one without TLS, is refused.
#include "node/daemon/static_swarm/swarm_spec_tls.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "node/daemon/stack/swarm_spec.h"
#include "node/train/grpc_group.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::identity::Identity;
using ::skipswarm::identity::PeerCredentials;
using ::skipswarm::node::testutil::AckWaiter;
using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::MakeTestFrame;

std::string TempDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

std::string KeyPath(const std::string& name) { return TempDir() + "/" + name + ".key"; }

// A key from a fixed seed, saved as `name`.key (0600) in the test's dir.
std::unique_ptr<Identity> SavedKey(char seed, const std::string& name) {
  auto key = identity::TestIdentity(seed);
  const std::string path = KeyPath(name);
  std::filesystem::remove(path);
  EXPECT_TRUE(key->Save(path).ok());
  return key;
}

// d0 (stage 0) and s1 (stage 1); placeholder addresses (port 0).
std::string Spec(const Identity& d0, const Identity& s1) {
  return absl::StrCat(FormatSwarmEntry("d0", {0}, "127.0.0.1:0", "127.0.0.1:0", d0.id().Hex()),
                      ",",
                      FormatSwarmEntry("s1", {1}, "127.0.0.1:0", "127.0.0.1:0", s1.id().Hex()));
}

TEST(StaticSwarmTlsTest, PlainTextOnlyWhenAskedFor) {
  auto d0 = SavedKey('d', "rules-d0");
  auto s1 = SavedKey('s', "rules-s1");
  auto swarm = ParseSwarmSpec(Spec(*d0, *s1), 2, 4);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  const absl::Time now = common::RealClock::Create()->Now();  // certificate validity
  auto none = StaticSwarmTls::Create({}, *swarm, "d0", now);
  EXPECT_TRUE(absl::IsInvalidArgument(none.status()));
  EXPECT_NE(none.status().message().find("--insecure"), std::string::npos) << none.status();
  EXPECT_NE(none.status().message().find("--node_key_file"), std::string::npos);
  auto both = StaticSwarmTls::Create({KeyPath("rules-d0"), true}, *swarm, "d0", now);
  EXPECT_TRUE(absl::IsInvalidArgument(both.status()));
  auto plain = StaticSwarmTls::Create({"", true}, *swarm, "d0", now);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->credentials->insecure());
  EXPECT_EQ(plain->identity, nullptr);
  auto tls = StaticSwarmTls::Create({KeyPath("rules-d0")}, *swarm, "d0", now);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE(tls->credentials->insecure());
  EXPECT_EQ(tls->credentials->id(), d0->id());
}

TEST(StaticSwarmTlsTest, AKeyNeedsEveryEntryPinnedAndItsOwnId) {
  auto d0 = SavedKey('d', "pin-d0");
  auto s1 = SavedKey('s', "pin-s1");
  const absl::Time now = common::RealClock::Create()->Now();  // certificate validity
  // s1 has no id: nobody could check it.
  auto half = ParseSwarmSpec(
      absl::StrCat(FormatSwarmEntry("d0", {0}, "h:1", "h:2", d0->id().Hex()), ",s1/1/h:3/h:4"),
      2, 4);
  ASSERT_TRUE(half.ok()) << half.status();
  auto unpinned = StaticSwarmTls::Create({KeyPath("pin-d0")}, *half, "d0", now);
  EXPECT_TRUE(absl::IsInvalidArgument(unpinned.status()));
  EXPECT_NE(unpinned.status().message().find("without one: s1"), std::string::npos)
      << unpinned.status();
  // s1's key file given to d0.
  auto swarm = ParseSwarmSpec(Spec(*d0, *s1), 2, 4);
  ASSERT_TRUE(swarm.ok());
  auto wrong = StaticSwarmTls::Create({KeyPath("pin-s1")}, *swarm, "d0", now);
  EXPECT_TRUE(absl::IsInvalidArgument(wrong.status()));
  EXPECT_NE(wrong.status().message().find(d0->id().Hex()), std::string::npos) << wrong.status();
  EXPECT_NE(wrong.status().message().find(s1->id().Hex()), std::string::npos);
  // No key file there.
  auto missing = StaticSwarmTls::Create({KeyPath("nobody")}, *swarm, "d0", now);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("skipswarm keygen"), std::string::npos);
  auto stranger = StaticSwarmTls::Create({KeyPath("pin-d0")}, *swarm, "x9", now);
  EXPECT_TRUE(absl::IsInvalidArgument(stranger.status()));
}

// One node as NodeDaemon wires it: replica group and pipeline transport
// from StaticSwarmTls (or from other credentials, for an impostor).
struct Node {
  std::unique_ptr<StaticSwarmView> view;
  std::unique_ptr<GrpcGroupComm> group;
  std::unique_ptr<Transport> transport;  // gRPC, listed peers only
  std::string address;                  // its pipeline address
};

class StaticSwarmTlsConnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = common::RealClock::Create();
    d0_key_ = SavedKey('d', "net-d0");
    s1_key_ = SavedKey('s', "net-s1");
    x_key_ = SavedKey('x', "net-x");
    auto swarm = ParseSwarmSpec(Spec(*d0_key_, *s1_key_), 2, 4);
    ASSERT_TRUE(swarm.ok()) << swarm.status();
    swarm_ = *swarm;
  }
  void TearDown() override { nodes_.clear(); }

  // Node `name` of the list with `credentials` (its id: its entry's).
  Node& Start(const std::string& name, std::shared_ptr<const PeerCredentials> credentials) {
    std::vector<PeerInfo> members;
    PeerId self;
    for (const SwarmMember& m : swarm_) {
      members.push_back(m.info);
      if (m.name == name) self = m.info.id;
    }
    Node n;
    n.view = std::make_unique<StaticSwarmView>(members);
    GrpcGroupOptions go;
    go.self = credentials->insecure() ? self : credentials->id();
    go.credentials = credentials;
    go.members_only = true;
    go.push_deadline = absl::Seconds(5);
    auto group = GrpcGroupComm::Create(go, n.view.get(), clock_.get());
    EXPECT_TRUE(group.ok()) << group.status();
    n.group = *std::move(group);
    GrpcTransportOptions to;
    to.self = go.self;
    to.swarm_id = kTestSwarm;
    to.credentials = credentials;
    auto transport = GrpcTransport::Create(to, clock_.get());
    EXPECT_TRUE(transport.ok()) << transport.status();
    n.address = (*transport)->loopback_address();
    std::vector<PeerId> ids;
    for (const PeerInfo& m : members) ids.push_back(m.id);
    n.transport = std::make_unique<ListedPeersOnlyTransport>(*std::move(transport), ids);
    n.transport->SetFrameHandler([](const PeerId&, Frame, AckFn ack) { ack(absl::OkStatus()); });
    nodes_[name] = std::move(n);
    return nodes_[name];
  }
  // Every node's view and transport learn every node's ports.
  void Connect() {
    for (auto& [name, n] : nodes_) {
      for (auto& [other, o] : nodes_) {
        const PeerId id = Id(other);
        n.view->SetAddresses(id, o.address, absl::StrCat("127.0.0.1:", o.group->port()));
        if (other != name) n.transport->SetPeerAddress(id, o.address);
      }
    }
  }
  PeerId Id(const std::string& name) const {
    for (const SwarmMember& m : swarm_) {
      if (m.name == name) return m.info.id;
    }
    return PeerId();
  }
  std::shared_ptr<const PeerCredentials> Tls(const std::string& name) {
    auto tls = StaticSwarmTls::Create({KeyPath("net-" + name)}, swarm_, name, clock_->Now());
    EXPECT_TRUE(tls.ok()) << tls.status();
    identities_.push_back(std::move(tls->identity));
    return tls->credentials;
  }
  absl::Status SendFrame(const std::string& from, const std::string& to) {
    AckWaiter ack;
    const PeerId self = nodes_[from].transport->self();
    nodes_[from].transport->Send(Id(to), MakeTestFrame({self, Id(to), self}, 1, 1000, 1),
                                 ack.Callback());
    return ack.Wait();
  }

  std::unique_ptr<common::RealClock> clock_;
  std::unique_ptr<Identity> d0_key_, s1_key_, x_key_;
  std::vector<std::unique_ptr<Identity>> identities_;  // outlive the nodes
  std::vector<SwarmMember> swarm_;
  std::map<std::string, Node> nodes_;
};

TEST_F(StaticSwarmTlsConnectTest, PinnedMembersTalkOverMutualTls) {
  Start("d0", Tls("d0"));
  Start("s1", Tls("s1"));
  Connect();
  EXPECT_TRUE(nodes_["d0"].group->AwaitPeers(absl::Seconds(10)).ok());
  EXPECT_TRUE(nodes_["s1"].group->AwaitPeers(absl::Seconds(10)).ok());
  EXPECT_TRUE(SendFrame("d0", "s1").ok());
  EXPECT_TRUE(SendFrame("s1", "d0").ok());
}

TEST_F(StaticSwarmTlsConnectTest, AWrongKeyAtAMembersAddressIsRefused) {
  Start("d0", Tls("d0"));
  // At s1's address runs a node with another key (the list pins s1's).
  Start("s1", PeerCredentials::Create({x_key_.get()}, clock_->Now()).value());
  Connect();
  absl::Status await = nodes_["d0"].group->AwaitPeers(absl::Seconds(2));
  EXPECT_TRUE(absl::IsDeadlineExceeded(await)) << await;
  EXPECT_NE(await.message().find(Id("s1").ShortString()), std::string::npos) << await;
  absl::Status sent = SendFrame("d0", "s1");
  EXPECT_FALSE(sent.ok());
  // The impostor cannot reach d0 as s1 either: its certificate is not s1's.
  // The impostor reaches d0 only as itself (its certificate), and d0's
  // list does not name it.
  absl::Status back = SendFrame("s1", "d0");
  EXPECT_TRUE(absl::IsPermissionDenied(back)) << back;
  // Nor can it average with d0's group as itself.
  testutil::LogCapture log;
  nodes_["s1"].group->Barrier(0, x_key_->id(), /*data_node=*/true, [](absl::Status) {});
  EXPECT_TRUE(log.WaitFor("is not a member of this swarm"));
  EXPECT_NE(await.message().find("certificate"), std::string::npos) << await;
  std::cout << "d0 awaiting the impostor: " << await << "\nd0 -> impostor: " << sent
            << "\nimpostor -> d0: " << back << "\n";
}

TEST_F(StaticSwarmTlsConnectTest, APlainTextNodeIsRefused) {
  Start("d0", Tls("d0"));
  Start("s1", PeerCredentials::Insecure());
  Connect();
  absl::Status await = nodes_["d0"].group->AwaitPeers(absl::Seconds(2));
  EXPECT_TRUE(absl::IsDeadlineExceeded(await)) << await;
  EXPECT_FALSE(nodes_["s1"].group->AwaitPeers(absl::Seconds(2)).ok());
  EXPECT_FALSE(SendFrame("s1", "d0").ok());
}

}  // namespace
}  // namespace skipswarm::node
