// Fuzz target: the gossip messages a peer sends, through the real
// Membership handlers (membership/membership.h) on a simulated clock, with
// a transport that never delivers. Covers message parsing, the request
// checks (version, swarm id, record and update counts and sizes), record
// verification (membership/record.h: parse, key, id, signature, swarm,
// model, age, field limits, incarnation bounds) and opinions.
//
// Input: byte 0 selects the message (0: Ping, 1: PingReq, 2: PushPull, 3:
// one SignedNodeRecord through VerifyRecord alone; with 3, bit 2 set makes
// the policy an open swarm that asks 4 bits of join work, Note [Join work]
// in membership/join_work.h); the rest is the serialized message.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <glog/logging.h>
#include <google/protobuf/stubs/logging.h>

#include "common/random.h"
#include "common/sim_clock.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "membership/membership.h"
#include "membership/record.h"
#include "proto/gossip.pb.h"

namespace {

namespace membership = skipswarm::membership;
namespace proto = skipswarm::proto;

// Drops every outgoing message (answers UNAVAILABLE at once).
class NullTransport final : public membership::GossipTransport {
 public:
  void Ping(const membership::PeerRef&, const proto::PingRequest&, absl::Duration,
            membership::AckCallback done) override {
    done(absl::UnavailableError("fuzz"));
  }
  void PingReq(const membership::PeerRef&, const proto::PingRequest&, absl::Duration,
               membership::AckCallback done) override {
    done(absl::UnavailableError("fuzz"));
  }
  void PushPull(const membership::PeerRef&, const proto::PushPullRequest&, absl::Duration,
                membership::PushPullCallback done) override {
    done(absl::UnavailableError("fuzz"));
  }
};

// The swarm the seeds were made for (tests/fuzz/make_seeds.cc).
constexpr char kSwarm[] = "fuzz-swarm";
constexpr int64_t kNowUnixMs = 1'800'000'000'000;

struct World {
  World() : clock(absl::FromUnixMillis(kNowUnixMs)) {
    FLAGS_minloglevel = 3;  // each refusal logs a warning: noise at 100k inputs/s
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int,
                                       const std::string&) {});
    identity = skipswarm::identity::TestIdentity('\x07');
    membership::MembershipOptions o;
    o.policy.swarm_id = kSwarm;
    o.policy.num_stages = 4;
    o.addresses = {"127.0.0.1:1"};
    o.stages = {0};
    m = *membership::Membership::Create(o, identity.get(), &transport, &clock,
                                        skipswarm::common::Random(1));
  }
  skipswarm::common::SimClock clock;
  std::unique_ptr<skipswarm::identity::Identity> identity;
  NullTransport transport;
  std::unique_ptr<membership::Membership> m;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();  // one Membership for the whole run
  if (size < 1) return 0;
  const uint8_t kind = data[0] % 4;
  const char* bytes = reinterpret_cast<const char*>(data + 1);
  const int n = static_cast<int>(size - 1);
  membership::PeerInfo from{"127.0.0.1:2", skipswarm::common::NodeId()};
  switch (kind) {
    case 0:
    case 1: {
      proto::PingRequest req;
      if (!req.ParseFromArray(bytes, n)) return 0;
      auto reply = [](absl::StatusOr<proto::Ack>) {};
      if (kind == 0) {
        world->m->HandlePing(from, req, reply);
      } else {
        world->m->HandlePingReq(from, req, reply);
      }
      break;
    }
    case 2: {
      proto::PushPullRequest req;
      if (!req.ParseFromArray(bytes, n)) return 0;
      world->m->HandlePushPull(from, req, [](absl::StatusOr<proto::PushPullResponse>) {});
      break;
    }
    case 3: {
      proto::SignedNodeRecord r;
      if (!r.ParseFromArray(bytes, n)) return 0;
      membership::RecordPolicy policy;
      policy.swarm_id = kSwarm;
      policy.num_stages = 4;
      if (data[0] & 4) {
        policy.admission.join_work_bits = 4;
        policy.admission.manifest_id = "fuzz-manifest";
      }
      (void)membership::VerifyRecord(r, policy, absl::FromUnixMillis(kNowUnixMs));
      break;
    }
  }
  // Whatever the handlers scheduled (probes, suspicion timers) runs now.
  world->clock.Advance(absl::Milliseconds(50));
  return 0;
}
