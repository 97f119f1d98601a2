#include "sim/sim_swarm.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace skipswarm::sim {

struct SimSwarm::Node {
  std::unique_ptr<identity::Identity> identity;
  std::string address;
  std::vector<uint32_t> stages;
  proto::SignedInvite invite;
  membership::GossipTransport* transport = nullptr;
  std::unique_ptr<DelayedTransport> delayed_transport;
  std::unique_ptr<DelayedHandler> delayed_handler;
  std::unique_ptr<membership::Membership> membership;
  absl::Duration inbound_delay;  // SetInboundDelay
  bool running = false;
  int generation = 0;
};

// Hands requests to the node's Membership `inbound_delay` late (directly
// when it is zero, so undelayed runs are exactly as before).
class SimSwarm::DelayedHandler final : public membership::GossipHandler {
 public:
  DelayedHandler(SimSwarm* swarm, Node* node) : swarm_(swarm), node_(node) {}
  void HandlePing(const membership::PeerInfo& from, const proto::PingRequest& req,
                  membership::AckCallback reply) override {
    Later([=, reply = std::move(reply)](membership::Membership* m) mutable {
      m->HandlePing(from, req, std::move(reply));
    });
  }
  void HandlePingReq(const membership::PeerInfo& from, const proto::PingRequest& req,
                     membership::AckCallback reply) override {
    Later([=, reply = std::move(reply)](membership::Membership* m) mutable {
      m->HandlePingReq(from, req, std::move(reply));
    });
  }
  void HandlePushPull(const membership::PeerInfo& from, const proto::PushPullRequest& req,
                      membership::PushPullCallback reply) override {
    Later([=, reply = std::move(reply)](membership::Membership* m) mutable {
      m->HandlePushPull(from, req, std::move(reply));
    });
  }

 private:
  template <typename F>
  void Later(F f) {
    if (node_->inbound_delay <= absl::ZeroDuration()) {
      f(node_->membership.get());
      return;
    }
    const int generation = node_->generation;
    swarm_->clock_.RunAfter(
        node_->inbound_delay, [this, generation, f = std::move(f)]() mutable {
          // A restarted node's new Membership never sees old requests.
          if (node_->generation == generation && node_->membership != nullptr) {
            f(node_->membership.get());
          }
        });
  }
  SimSwarm* const swarm_;
  Node* const node_;
};

// Delivers replies to the node's own requests `inbound_delay` late.
class SimSwarm::DelayedTransport final : public membership::GossipTransport {
 public:
  DelayedTransport(SimSwarm* swarm, Node* node) : swarm_(swarm), node_(node) {}
  void Ping(const membership::PeerRef& to, const proto::PingRequest& req,
            absl::Duration timeout, membership::AckCallback done) override {
    node_->transport->Ping(to, req, timeout, Later(std::move(done)));
  }
  void PingReq(const membership::PeerRef& to, const proto::PingRequest& req,
               absl::Duration timeout, membership::AckCallback done) override {
    node_->transport->PingReq(to, req, timeout, Later(std::move(done)));
  }
  void PushPull(const membership::PeerRef& to, const proto::PushPullRequest& req,
                absl::Duration timeout, membership::PushPullCallback done) override {
    node_->transport->PushPull(to, req, timeout, Later(std::move(done)));
  }

 private:
  template <typename Result>
  absl::AnyInvocable<void(Result)> Later(absl::AnyInvocable<void(Result)> done) {
    return [this, done = std::move(done)](Result result) mutable {
      if (node_->inbound_delay <= absl::ZeroDuration()) {
        done(std::move(result));
        return;
      }
      swarm_->clock_.RunAfter(node_->inbound_delay,
                              [done = std::move(done),
                               result = std::move(result)]() mutable {
                                done(std::move(result));
                              });
    };
  }
  SimSwarm* const swarm_;
  Node* const node_;
};

membership::Membership& SimSwarm::node(int i) { return *nodes_[i]->membership; }
const std::string& SimSwarm::address(int i) const { return nodes_[i]->address; }
common::NodeId SimSwarm::id(int i) const { return nodes_[i]->identity->id(); }

const identity::Identity& SimSwarm::identity(int i) const {
  return *nodes_[i]->identity;
}
bool SimSwarm::alive(int i) const { return nodes_[i]->running; }

SimSwarm::SimSwarm(uint64_t seed, SimNetwork::Options net,
                   membership::MembershipOptions options)
    // A wall clock in the 2020s so record timestamps look real.
    : clock_(absl::FromUnixSeconds(1'800'000'000)),
      net_(&clock_, seed, net),
      options_(std::move(options)),
      rng_(seed) {}

SimSwarm::~SimSwarm() {
  for (auto& n : nodes_) net_.Detach(n->address);
  nodes_.clear();
}

int SimSwarm::AddNode(std::vector<uint32_t> stages, proto::SignedInvite invite) {
  const int i = size();
  auto node = std::make_unique<Node>();
  node->identity = SimIdentity(rng_, i);
  node->address = absl::StrCat("node", i, ":7000");
  node->stages = std::move(stages);
  node->invite = std::move(invite);
  node->transport = net_.AddEndpoint(node->address, node->identity->id());
  node->delayed_transport = std::make_unique<DelayedTransport>(this, node.get());
  node->delayed_handler = std::make_unique<DelayedHandler>(this, node.get());
  nodes_.push_back(std::move(node));
  CreateMembership(i);
  return i;
}

void SimSwarm::CreateMembership(int i) {
  Node& n = *nodes_[i];
  membership::MembershipOptions options = options_;
  options.addresses = {n.address};
  options.stages = n.stages;
  options.invite = n.invite;
  auto m = membership::Membership::Create(
      options, n.identity.get(), n.delayed_transport.get(), &clock_,
      rng_.Fork(absl::StrCat("node", i, "/", n.generation++)));
  CHECK(m.ok()) << m.status();
  n.membership = *std::move(m);
  n.membership->AddListener([this, i](const membership::MemberChange& c) {
    if (c.old_state == c.new_state) return;
    transitions_.push_back({i, IndexOf(c.id), c.new_state, clock_.SteadyNow()});
  });
  net_.Serve(n.address, n.delayed_handler.get());
}

void SimSwarm::SetInboundDelay(int i, absl::Duration delay) {
  nodes_[i]->inbound_delay = delay;
}

int SimSwarm::IndexOf(const common::NodeId& id) const {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[i]->identity->id() == id) return i;
  }
  return -1;
}

void SimSwarm::StartAndJoin(int i, std::vector<int> bootstrap) {
  Node& n = *nodes_[i];
  n.running = true;
  n.membership->Start();
  std::vector<std::string> addresses;
  for (int b : bootstrap) addresses.push_back(address(b));
  n.membership->Join(addresses, [i](absl::Status s) {
    LOG_IF(WARNING, !s.ok()) << "node " << i << " failed to join: " << s;
  });
}

void SimSwarm::StartAll(int bootstrap) {
  StartAndJoin(bootstrap, {});
  for (int i = 0; i < size(); ++i) {
    if (i != bootstrap) StartAndJoin(i, {bootstrap});
  }
}

void SimSwarm::Kill(int i) {
  nodes_[i]->membership->Stop();
  nodes_[i]->running = false;
  net_.SetDown(address(i), true);
}

void SimSwarm::Restart(int i, int bootstrap) {
  Node& n = *nodes_[i];
  net_.Detach(n.address);
  n.membership.reset();
  net_.SetDown(n.address, false);
  CreateMembership(i);
  StartAndJoin(i, {bootstrap});
}

bool SimSwarm::Converged() {
  std::vector<common::NodeId> expected;
  for (int i = 0; i < size(); ++i) {
    if (nodes_[i]->running) expected.push_back(id(i));
  }
  std::sort(expected.begin(), expected.end());
  bool first = true;
  uint64_t digest = 0;
  for (int i = 0; i < size(); ++i) {
    if (!nodes_[i]->running) continue;
    membership::View view = nodes_[i]->membership->GetView();
    std::vector<common::NodeId> live;
    for (const membership::MemberInfo* m : view.Live()) live.push_back(m->id);
    if (live != expected) return false;
    if (first) {
      digest = view.digest();
      first = false;
    } else if (view.digest() != digest) {
      return false;
    }
  }
  return true;
}

bool SimSwarm::AllSee(int victim, proto::MemberState state) {
  for (int i = 0; i < size(); ++i) {
    if (i == victim || !nodes_[i]->running) continue;
    const membership::View view = nodes_[i]->membership->GetView();
    const membership::MemberInfo* m = view.Find(id(victim));
    if (m == nullptr || m->state != state) return false;
  }
  return true;
}

absl::Duration SimSwarm::RunUntil(const std::function<bool()>& done,
                                  absl::Duration limit, absl::Duration step) {
  const absl::Duration start = clock_.SteadyNow();
  while (!done()) {
    if (clock_.SteadyNow() - start >= limit) return absl::InfiniteDuration();
    clock_.Advance(step);
  }
  return clock_.SteadyNow() - start;
}

}  // namespace skipswarm::sim
