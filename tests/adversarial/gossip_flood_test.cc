// A stranger pings a member with 25,000 validly signed records (3.4 MB;
// the measured flood cost its victim 2.8-6.9 s per ping under the
// membership lock). The client is built from proto/gossip.proto alone; the
// victim is a real Membership behind the real GossipService on loopback
// (port 0). Note [Gossip admission] in membership/membership_impl.h.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "membership/grpc_gossip.h"
#include "membership/membership.h"
#include "proto/gossip.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::membership {
namespace {

constexpr int kRecords = 25000;

TEST(GossipFloodTest, PingOf25000SignedRecordsIsRefusedCheaply) {
  auto clock = common::RealClock::Create();
  auto victim_id = identity::TestIdentity('v');
  MembershipOptions o;
  o.policy.swarm_id = "f";
  o.addresses = {"127.0.0.1:1"};
  GrpcGossipTransport transport({victim_id.get(), /*insecure=*/true}, clock.get());
  auto victim = *Membership::Create(o, victim_id.get(), &transport, clock.get(),
                                    common::Random(1));
  auto server = GrpcGossipServer::Start("127.0.0.1:0", victim.get(),
                                        {victim_id.get(), /*insecure=*/true}, clock->Now());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());

  // The attacker's records: one key, ascending incarnations, so every one
  // is news to the victim and each would need its signature checked.
  auto mallory = identity::TestIdentity('M');
  proto::PingRequest req;
  req.set_protocol_version(proto::kProtocolVersion);
  req.set_swarm_id("f");
  req.set_from(mallory->id().Bytes());
  req.set_seq(1);
  proto::NodeRecord record;
  record.set_swarm_id("f");
  record.set_memory_slots(1);
  for (int i = 0; i < kRecords; ++i) {
    record.set_incarnation(1'900'000'000'000 + i);
    *req.mutable_gossip()->add_records() = *SignRecord(*mallory, record, clock->Now());
  }
  std::cout << "FIGURE flood_ping_bytes=" << req.ByteSizeLong() << std::endl;

  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(8 << 20);
  auto stub = proto::GossipService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  proto::Ack ack;
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(30)));
  const absl::Time start = clock->Now();
  grpc::Status status = stub->Ping(&context, req, &ack);
  const absl::Duration took = clock->Now() - start;
  std::cout << "FIGURE flood_ping_reply_ms=" << absl::ToDoubleMilliseconds(took) << std::endl;
  // A stranger's 3.95 MB is over its byte quota (1 MiB burst, Note [Peer
  // quotas]) before its size is even counted in records.
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_EQ(victim->stats().signatures_checked, 0u);
  EXPECT_GE(victim->stats().messages_refused, 1u);
  EXPECT_EQ(victim->GetView().Find(mallory->id()), nullptr);

  // The victim still answers an ordinary ping at once.
  proto::PingRequest plain = req;
  plain.mutable_gossip()->clear_records();
  grpc::ClientContext again;
  again.set_deadline(common::SystemDeadlineAfter(absl::Seconds(5)));
  EXPECT_TRUE(stub->Ping(&again, plain, &ack).ok());
  (*server)->Shutdown();
}

}  // namespace
}  // namespace skipswarm::membership
