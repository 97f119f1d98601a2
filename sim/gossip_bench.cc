#include "sim/gossip_bench.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/random.h"
#include "common/sim_clock.h"
#include "identity/identity.h"
#include "membership/membership.h"
#include "sim/sim_network.h"

namespace skipswarm::sim {
namespace {

using membership::AckCallback;
using membership::PeerRef;
using membership::PushPullCallback;

struct Traffic {
  uint64_t messages = 0;
  uint64_t bytes = 0;
};

// Counts what one node sends and the replies it gets.
class CountingTransport final : public membership::GossipTransport {
 public:
  CountingTransport(membership::GossipTransport* inner, Traffic* traffic)
      : inner_(inner), traffic_(traffic) {}

  void Ping(const PeerRef& to, const proto::PingRequest& req,
            absl::Duration timeout, AckCallback done) override {
    Count(req.ByteSizeLong());
    inner_->Ping(to, req, timeout, Wrap(std::move(done)));
  }
  void PingReq(const PeerRef& to, const proto::PingRequest& req,
               absl::Duration timeout, AckCallback done) override {
    Count(req.ByteSizeLong());
    inner_->PingReq(to, req, timeout, Wrap(std::move(done)));
  }
  void PushPull(const PeerRef& to, const proto::PushPullRequest& req,
                absl::Duration timeout, PushPullCallback done) override {
    Count(req.ByteSizeLong());
    inner_->PushPull(
        to, req, timeout,
        [this, done = std::move(done)](
            absl::StatusOr<proto::PushPullResponse> r) mutable {
          if (r.ok()) Count(r->ByteSizeLong());
          done(std::move(r));
        });
  }

 private:
  void Count(size_t bytes) {
    ++traffic_->messages;
    traffic_->bytes += bytes;
  }
  AckCallback Wrap(AckCallback done) {
    return [this, done = std::move(done)](
               absl::StatusOr<proto::Ack> r) mutable {
      if (r.ok()) Count(r->ByteSizeLong());
      done(std::move(r));
    };
  }

  membership::GossipTransport* inner_;
  Traffic* traffic_;
};

struct Member {
  std::unique_ptr<identity::Identity> identity;
  std::string address;
  std::unique_ptr<CountingTransport> transport;
  std::unique_ptr<membership::Membership> membership;
  bool running = true;
};

}  // namespace

GossipFigures MeasureGossip(const GossipBenchOptions& o) {
  GossipFigures g;
  common::SimClock clock(absl::FromUnixSeconds(1'800'000'000));
  SimNetwork net(&clock, o.seed,
                             {.latency = o.latency, .jitter = o.jitter});
  common::Random rng(o.seed);
  Traffic traffic;
  std::vector<Member> members(o.nodes);
  for (int i = 0; i < o.nodes; ++i) {
    Member& m = members[i];
    m.identity = SimIdentity(rng, i);
    m.address = absl::StrCat("node", i, ":7000");
    m.transport = std::make_unique<CountingTransport>(
        net.AddEndpoint(m.address, m.identity->id()), &traffic);
    membership::MembershipOptions options;
    options.addresses = {m.address};
    options.stages = {static_cast<uint32_t>(i % 16)};
    m.membership = *membership::Membership::Create(
        options, m.identity.get(), m.transport.get(), &clock,
        rng.Fork(absl::StrCat("node", i)));
    net.Serve(m.address, m.membership.get());
  }
  for (int i = 0; i < o.nodes; ++i) {
    members[i].membership->Start();
    if (i > 0) members[i].membership->Join({members[0].address}, [](absl::Status) {});
  }
  auto converged = [&] {
    std::vector<common::NodeId> expected;
    for (const Member& m : members) {
      if (m.running) expected.push_back(m.identity->id());
    }
    std::sort(expected.begin(), expected.end());
    bool first = true;
    uint64_t digest = 0;
    for (const Member& m : members) {
      if (!m.running) continue;
      membership::View view = m.membership->GetView();
      std::vector<common::NodeId> live;
      for (const membership::MemberInfo* x : view.Live()) live.push_back(x->id);
      if (live != expected) return false;
      if (first) digest = view.digest();
      if (view.digest() != digest) return false;
      first = false;
    }
    return true;
  };
  auto run_until = [&](const auto& done, absl::Duration limit,
                       absl::Duration step) {
    const absl::Duration start = clock.SteadyNow();
    while (clock.SteadyNow() - start < limit) {
      if (done()) return clock.SteadyNow() - start;
      clock.Advance(step);
    }
    return absl::InfiniteDuration();
  };
  absl::Duration t =
      run_until(converged, o.converge_limit, absl::Milliseconds(100));
  if (t != absl::InfiniteDuration()) {
    g.converge_s = absl::ToDoubleSeconds(t);
    const Traffic before = traffic;
    clock.Advance(o.steady_window);
    const double span = absl::ToDoubleSeconds(o.steady_window) * o.nodes;
    g.msgs_per_node_s = (traffic.messages - before.messages) / span;
    g.bytes_per_node_s = (traffic.bytes - before.bytes) / span;
    const int victim = o.nodes / 2;
    members[victim].membership->Stop();
    members[victim].running = false;
    net.SetDown(members[victim].address, true);
    const common::NodeId dead = members[victim].identity->id();
    auto all_see = [&] {
      for (const Member& m : members) {
        if (!m.running) continue;
        membership::View view = m.membership->GetView();
        const membership::MemberInfo* x = view.Find(dead);
        if (x != nullptr && x->state != proto::MEMBER_STATE_DEAD) return false;
      }
      return true;
    };
    t = run_until(all_see, absl::Seconds(60), absl::Milliseconds(50));
    if (t != absl::InfiniteDuration()) g.detect_s = absl::ToDoubleSeconds(t);
  }
  for (Member& m : members) net.Detach(m.address);
  members.clear();
  return g;
}

}  // namespace skipswarm::sim
