// Membership::Shutdown: it waits for a listener call already running (here
// one made by a push-pull answer on another thread, as a gRPC thread does)
// and no listener call starts once it has returned, whether the change
// comes from a transport callback or an incoming request. A daemon resets
// what its listener reads right after Shutdown returns.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "common/sim_clock.h"
#include "identity/test_identity.h"
#include "membership/membership.h"
#include "membership/record.h"
#include "proto/version.h"

namespace skipswarm::membership {
namespace {

constexpr char kSwarm[] = "shutdown-swarm";

// Holds each push-pull's callback for the test to answer on a thread of
// its choice; pings are never answered.
class HeldTransport final : public GossipTransport {
 public:
  void Ping(const PeerRef&, const proto::PingRequest&, absl::Duration,
            AckCallback) override {}
  void PingReq(const PeerRef&, const proto::PingRequest&, absl::Duration,
               AckCallback) override {}
  void PushPull(const PeerRef&, const proto::PushPullRequest&, absl::Duration,
                PushPullCallback done) override {
    absl::MutexLock lock(&mu_);
    held_.push_back(std::move(done));
  }

  // The newest push-pull not answered yet (REQUIRES: one was sent).
  PushPullCallback Take() {
    absl::MutexLock lock(&mu_);
    EXPECT_FALSE(held_.empty());
    if (held_.empty()) return [](absl::StatusOr<proto::PushPullResponse>) {};
    PushPullCallback done = std::move(held_.back());
    held_.pop_back();
    return done;
  }

 private:
  absl::Mutex mu_;
  std::vector<PushPullCallback> held_ ABSL_GUARDED_BY(mu_);
};

proto::SignedNodeRecord RecordOf(const identity::Identity& id, const std::string& address,
                                 absl::Time now) {
  proto::NodeRecord r;
  r.set_swarm_id(kSwarm);
  r.add_addresses(address);
  r.set_memory_slots(1);
  r.set_incarnation(1'900'000'000'000);
  return *SignRecord(id, r, now);
}

// An answer from `peer` that brings its record: one change for listeners.
proto::PushPullResponse AnswerFrom(const identity::Identity& peer, absl::Time now) {
  proto::PushPullResponse resp;
  resp.set_protocol_version(proto::kProtocolVersion);
  resp.set_from(peer.id().Bytes());
  *resp.mutable_gossip()->add_records() = RecordOf(peer, "peer:1", now);
  return resp;
}

TEST(MembershipShutdownTest, WaitsForARunningListenerAndCallsNoneAfter) {
  common::SimClock clock(absl::FromUnixSeconds(1'800'000'000));
  auto self = identity::TestIdentity('s');
  auto peer = identity::TestIdentity('p');
  auto later = identity::TestIdentity('l');
  auto last = identity::TestIdentity('z');
  HeldTransport transport;
  MembershipOptions o;
  o.policy.swarm_id = kSwarm;
  o.addresses = {"self:1"};
  auto m = *Membership::Create(o, self.get(), &transport, &clock, common::Random(7));

  absl::Notification in_listener, release, shutdown_returned;
  std::atomic<int> calls{0};
  std::atomic<bool> returned_while_listening{false};
  m->AddListener([&](const MemberChange&) {
    if (calls.fetch_add(1) > 0) return;
    in_listener.Notify();
    release.WaitForNotification();
    // What a daemon's listener reads is reset once Shutdown returns.
    returned_while_listening = shutdown_returned.HasBeenNotified();
  });
  m->Start();
  m->Join({"peer:1"}, [](absl::Status) {});

  // The join's push-pull is answered on another thread; its listener call
  // blocks there.
  PushPullCallback answer = transport.Take();
  std::thread answering(
      [&] { answer(AnswerFrom(*peer, clock.Now())); });
  in_listener.WaitForNotification();

  std::thread stopping([&] {
    m->Shutdown();
    shutdown_returned.Notify();
  });
  // Shutdown must not return while the listener runs. A bounded wait: a
  // correct Shutdown can never make it fail (it cannot return before the
  // release below); one that does not wait returns within it.
  EXPECT_FALSE(shutdown_returned.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "Shutdown returned while a listener call was running";
  release.Notify();
  stopping.join();
  answering.join();
  EXPECT_FALSE(returned_while_listening);
  EXPECT_EQ(calls.load(), 1);

  // After Shutdown: a join's push-pull is answered with another new
  // member, and a member we never saw pings us with its record. Neither
  // reaches a listener; the ping is still answered.
  m->Join({"later:1"}, [](absl::Status) {});
  transport.Take()(AnswerFrom(*later, clock.Now()));
  proto::PingRequest ping;
  ping.set_protocol_version(proto::kProtocolVersion);
  ping.set_swarm_id(kSwarm);
  ping.set_from(last->id().Bytes());
  ping.set_seq(1);
  *ping.mutable_gossip()->add_records() = RecordOf(*last, "last:1", clock.Now());
  absl::StatusOr<proto::Ack> ack = absl::UnknownError("no reply");
  m->HandlePing({"last:1", common::NodeId()}, ping,
                [&](absl::StatusOr<proto::Ack> a) { ack = std::move(a); });
  EXPECT_TRUE(ack.ok()) << ack.status();
  EXPECT_NE(m->GetView().Find(last->id()), nullptr);  // the table still works
  EXPECT_EQ(calls.load(), 1) << "a listener ran after Shutdown returned";

  m->Shutdown();  // idempotent
}

}  // namespace
}  // namespace skipswarm::membership
