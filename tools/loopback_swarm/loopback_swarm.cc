// Measures membership on real gRPC + mutual TLS over loopback, on the real
// clock: N nodes in one process start together and join one bootstrap
// address; reports the time until every view agrees, then kills one node
// and reports the time until every view marks it DEAD, then (optionally)
// soaks and counts false DEAD verdicts.
//
//   bazel run -c opt //tools/loopback_swarm:loopback_swarm -- --nodes=12 --soak_seconds=60
//   ... --kills=10                       detection distribution over 10 kills
//   ... --slow_every_seconds=20          slow one node's handlers now and then
//   ... --suspicion_max_multiplier=1 --suspicion_confirmations=0   fixed timeout
//
// A tool, not a test: real time on a shared machine is not deterministic.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/real_clock.h"
#include "glog/logging.h"
#include "membership/grpc_gossip.h"
#include "membership/membership.h"
#include "tools/loopback_swarm/swarm_recorder.h"

ABSL_FLAG(int, nodes, 12, "Swarm size.");
ABSL_FLAG(int, soak_seconds, 0, "Run this long after the kills and count false DEADs.");
ABSL_FLAG(int, kills, 1,
          "Kill this many nodes one after the other (each replaced by a new "
          "node once it is DEAD everywhere), for a detection distribution.");
ABSL_FLAG(bool, insecure, false, "Plain-text gRPC instead of mutual TLS.");
ABSL_FLAG(uint64_t, seed, 1, "Random seed.");
ABSL_FLAG(bool, report, true,
          "Print per-minute timing (timer lag, starvation, ping latency) and "
          "an explanation of each false DEAD verdict.");
ABSL_FLAG(double, suspicion_max_multiplier,
          skipswarm::membership::MembershipOptions().suspicion_max_multiplier,
          "membership::MembershipOptions::suspicion_max_multiplier (1: fixed timeout).");
ABSL_FLAG(int, suspicion_confirmations,
          skipswarm::membership::MembershipOptions().suspicion_confirmations,
          "membership::MembershipOptions::suspicion_confirmations (0: fixed timeout).");
ABSL_FLAG(int, slow_every_seconds, 0,
          "Chaos during the soak: this often, one random node handles every "
          "message --slow_delay_ms late for --slow_for_ms (0: off).");
ABSL_FLAG(int, slow_delay_ms, 1500, "See --slow_every_seconds.");
ABSL_FLAG(int, slow_for_ms, 1000, "See --slow_every_seconds.");

namespace skipswarm::tools {
namespace {

// A node's artificial slowness (--slow_every_seconds): how late it handles
// incoming requests and the replies to its own requests.
struct Slowness {
  common::RealClock* clock = nullptr;
  std::atomic<int64_t> delay_ms{0};
  template <typename F>
  void Run(F f) {
    const int64_t ms = delay_ms.load();
    if (ms <= 0) {
      f();
      return;
    }
    clock->RunAfter(absl::Milliseconds(ms), std::move(f));
  }
};

// Lets the server start (and pick its port) before the Membership exists;
// tells the recorder when a request arrives and when a suspect is told.
class Forwarder : public membership::GossipHandler {
 public:
  membership::Membership* target = nullptr;
  SwarmRecorder* recorder = nullptr;
  Slowness* slowness = nullptr;
  void HandlePing(const membership::PeerInfo& f, const proto::PingRequest& r, membership::AckCallback cb) override {
    if (target == nullptr) return cb(absl::UnavailableError("starting"));
    Observe(r);
    slowness->Run([this, f, r, cb = std::move(cb)]() mutable {
      target->HandlePing(f, r, std::move(cb));
    });
  }
  void HandlePingReq(const membership::PeerInfo& f, const proto::PingRequest& r, membership::AckCallback cb) override {
    if (target == nullptr) return cb(absl::UnavailableError("starting"));
    Observe(r);
    slowness->Run([this, f, r, cb = std::move(cb)]() mutable {
      target->HandlePingReq(f, r, std::move(cb));
    });
  }
  void HandlePushPull(const membership::PeerInfo& f, const proto::PushPullRequest& r,
                      membership::PushPullCallback cb) override {
    if (target == nullptr) return cb(absl::UnavailableError("starting"));
    slowness->Run([this, f, r, cb = std::move(cb)]() mutable {
      target->HandlePushPull(f, r, std::move(cb));
    });
  }

 private:
  void Observe(const proto::PingRequest& r) {
    recorder->Arrived(r.from(), r.seq());
    for (const proto::MembershipUpdate& u : r.gossip().updates()) {
      if (u.node_id() == target->id().Bytes() &&
          u.state() == proto::MEMBER_STATE_SUSPECT) {
        recorder->Told(target->id());
        return;
      }
    }
  }
};

// Hands replies to the node's own requests over `slowness` late.
class SlowTransport final : public membership::GossipTransport {
 public:
  SlowTransport(membership::GossipTransport* inner, Slowness* slowness)
      : inner_(inner), slowness_(slowness) {}
  void Ping(const membership::PeerRef& to, const proto::PingRequest& req,
            absl::Duration timeout, membership::AckCallback done) override {
    inner_->Ping(to, req, timeout, Later(std::move(done)));
  }
  void PingReq(const membership::PeerRef& to, const proto::PingRequest& req,
               absl::Duration timeout, membership::AckCallback done) override {
    inner_->PingReq(to, req, timeout, Later(std::move(done)));
  }
  void PushPull(const membership::PeerRef& to, const proto::PushPullRequest& req,
                absl::Duration timeout, membership::PushPullCallback done) override {
    inner_->PushPull(to, req, timeout, Later(std::move(done)));
  }

 private:
  template <typename R>
  absl::AnyInvocable<void(R)> Later(absl::AnyInvocable<void(R)> done) {
    return [this, done = std::move(done)](R result) mutable {
      slowness_->Run([done = std::move(done), result = std::move(result)]() mutable {
        done(std::move(result));
      });
    };
  }
  membership::GossipTransport* const inner_;
  Slowness* const slowness_;
};

struct Node {
  int index = 0;
  std::unique_ptr<identity::Identity> identity;
  Slowness slowness;
  Forwarder forwarder;
  std::unique_ptr<membership::GrpcGossipServer> server;
  std::unique_ptr<membership::GrpcGossipTransport> transport;
  std::unique_ptr<TimedTransport> timed;
  std::unique_ptr<SlowTransport> slow;
  std::unique_ptr<membership::Membership> membership;
  bool running = true;
};

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

int Run() {
  auto clock = common::RealClock::Create();
  const int n = absl::GetFlag(FLAGS_nodes);
  const bool insecure = absl::GetFlag(FLAGS_insecure);
  common::Random rng(absl::GetFlag(FLAGS_seed));
  LOG(INFO) << "seed " << rng.seed();
  SwarmRecorder recorder(clock.get());
  recorder.Start();
  // Nodes are never destroyed before the end (a killed one is stopped and
  // kept), so gRPC callbacks in flight always find them.
  std::vector<std::unique_ptr<Node>> nodes;
  absl::Mutex mu;
  int false_dead = 0;
  int dead_while_slowed = 0;
  absl::flat_hash_set<common::NodeId> killed;  // guarded by mu
  absl::flat_hash_set<common::NodeId> slowed;  // ever slowed; guarded by mu
  std::vector<int> killed_index;
  std::string seed_address;

  auto make_node = [&](int index) -> Node* {
    auto node = std::make_unique<Node>();
    node->index = index;
    node->identity = *identity::Identity::Generate();
    node->slowness.clock = clock.get();
    identity::GrpcSecurity security{node->identity.get(), insecure};
    node->server = *membership::GrpcGossipServer::Start("127.0.0.1:0", &node->forwarder,
                                            security, clock->Now());
    node->transport = std::make_unique<membership::GrpcGossipTransport>(security, clock.get());
    node->timed = std::make_unique<TimedTransport>(node->transport.get(), &recorder);
    node->slow = std::make_unique<SlowTransport>(node->timed.get(), &node->slowness);
    membership::MembershipOptions o;
    o.policy.swarm_id = "loopback";
    o.addresses = {absl::StrCat("127.0.0.1:", node->server->port())};
    o.stages = {static_cast<uint32_t>(index % 4)};
    o.suspicion_max_multiplier = absl::GetFlag(FLAGS_suspicion_max_multiplier);
    o.suspicion_confirmations = absl::GetFlag(FLAGS_suspicion_confirmations);
    node->membership = *membership::Membership::Create(o, node->identity.get(),
                                           node->slow.get(), clock.get(),
                                           rng.Fork(index));
    recorder.Name(node->identity->id(), index);
    node->membership->AddListener([&, index](const membership::MemberChange& c) {
      recorder.Transition(index, c);
      if (c.new_state != proto::MEMBER_STATE_DEAD) return;
      absl::MutexLock lock(&mu);
      if (killed.contains(c.id)) return;
      ++false_dead;
      if (slowed.contains(c.id)) ++dead_while_slowed;
    });
    node->forwarder.recorder = &recorder;
    node->forwarder.slowness = &node->slowness;
    node->forwarder.target = node->membership.get();
    nodes.push_back(std::move(node));
    return nodes.back().get();
  };
  auto start = [&](Node* node) {
    node->membership->Start();
    node->membership->Join(
        seed_address.empty() ? std::vector<std::string>{}
                             : std::vector<std::string>{seed_address},
        [i = node->index](absl::Status s) {
          LOG_IF(ERROR, !s.ok()) << "node " << i << ": " << s;
        });
  };
  auto running = [&] {
    std::vector<Node*> out;
    for (auto& x : nodes) {
      if (x->running) out.push_back(x.get());
    }
    return out;
  };
  auto converged = [&] {
    uint64_t digest = 0;
    const std::vector<Node*> live = running();
    for (Node* node : live) {
      membership::View v = node->membership->GetView();
      if (v.Live().size() != live.size()) return false;
      if (digest == 0) digest = v.digest();
      if (v.digest() != digest) return false;
    }
    return true;
  };

  for (int i = 0; i < n; ++i) make_node(i);
  const membership::MembershipOptions defaults;
  const absl::Duration t0 = clock->SteadyNow();
  for (int i = 0; i < n; ++i) {
    start(nodes[i].get());
    if (i == 0) seed_address = absl::StrCat("127.0.0.1:", nodes[0]->server->port());
  }
  while (!converged()) clock->SleepFor(absl::Milliseconds(5));
  const absl::Duration convergence = clock->SteadyNow() - t0;
  std::cout << "nodes=" << n << " tls=" << !insecure
            << " suspicion_max_multiplier=" << absl::GetFlag(FLAGS_suspicion_max_multiplier)
            << " suspicion_confirmations=" << absl::GetFlag(FLAGS_suspicion_confirmations)
            << "\n"
            << "convergence=" << convergence << " ("
            << absl::FDivDuration(convergence, defaults.probe_interval)
            << " protocol periods of " << defaults.probe_interval << ")\n";

  // Kill, wait for DEAD everywhere, replace with a new node, converge, again.
  std::vector<double> detections;
  for (int k = 0; k < absl::GetFlag(FLAGS_kills); ++k) {
    clock->SleepFor(absl::Seconds(1));
    std::vector<Node*> live = running();
    Node* victim = live[1 + rng.UniformInt(0, static_cast<int64_t>(live.size()) - 2)];
    const common::NodeId victim_id = victim->identity->id();
    {
      absl::MutexLock lock(&mu);
      killed.insert(victim_id);
    }
    killed_index.push_back(victim->index);
    const absl::Duration t1 = clock->SteadyNow();
    victim->running = false;
    victim->server->Shutdown();
    victim->membership->Stop();
    auto all_dead = [&] {
      for (Node* node : running()) {
        membership::View v = node->membership->GetView();
        const membership::MemberInfo* m = v.Find(victim_id);
        if (m == nullptr || m->state != proto::MEMBER_STATE_DEAD) return false;
      }
      return true;
    };
    while (!all_dead()) clock->SleepFor(absl::Milliseconds(5));
    detections.push_back(Seconds(clock->SteadyNow() - t1));
    std::cout << "detection=" << clock->SteadyNow() - t1 << " (node "
              << victim->index << " DEAD in all " << running().size()
              << " views)\n";
    if (k + 1 < absl::GetFlag(FLAGS_kills)) {
      start(make_node(static_cast<int>(nodes.size())));
      while (!converged()) clock->SleepFor(absl::Milliseconds(5));
    }
  }
  if (!detections.empty()) {
    std::vector<double> d = detections;
    std::sort(d.begin(), d.end());
    double sum = 0;
    for (double x : d) sum += x;
    std::cout << absl::StrFormat(
        "detection over %d kills: mean %.2fs median %.2fs min %.2fs worst %.2fs\n",
        static_cast<int>(d.size()), sum / d.size(), d[d.size() / 2], d.front(),
        d.back());
  }

  // Soak, optionally slowing one random node at a time.
  const absl::Duration soak = absl::Seconds(absl::GetFlag(FLAGS_soak_seconds));
  const absl::Duration soak_end = clock->SteadyNow() + soak;
  int slowdowns = 0;
  const int every = absl::GetFlag(FLAGS_slow_every_seconds);
  while (clock->SteadyNow() < soak_end) {
    const absl::Duration left = soak_end - clock->SteadyNow();
    if (every <= 0) {
      clock->SleepFor(left);
      break;
    }
    clock->SleepFor(std::min(left, absl::Seconds(every)));
    if (clock->SteadyNow() >= soak_end) break;
    std::vector<Node*> live = running();
    Node* slow = live[rng.UniformInt(0, static_cast<int64_t>(live.size()) - 1)];
    {
      absl::MutexLock lock(&mu);
      slowed.insert(slow->identity->id());
    }
    ++slowdowns;
    slow->slowness.delay_ms = absl::GetFlag(FLAGS_slow_delay_ms);
    clock->SleepFor(absl::Milliseconds(absl::GetFlag(FLAGS_slow_for_ms)));
    slow->slowness.delay_ms = 0;
  }
  {
    absl::MutexLock lock(&mu);
    std::cout << "false_dead_verdicts=" << false_dead << " over "
              << absl::GetFlag(FLAGS_soak_seconds) << "s soak";
    if (every > 0) {
      std::cout << " (" << slowdowns << " slowdowns of "
                << absl::GetFlag(FLAGS_slow_for_ms) << " ms with handlers "
                << absl::GetFlag(FLAGS_slow_delay_ms) << " ms late; "
                << dead_while_slowed << " verdicts about slowed nodes)";
    }
    std::cout << "\n";
  }
  for (auto& node : nodes) {
    if (!node->running) continue;
    const membership::MembershipStats st = node->membership->stats();
    std::cout << "node " << node->index << ": probes=" << st.probes
              << " suspicions_raised=" << st.suspicions
              << " confirmations=" << st.confirmations
              << " refutations=" << st.refutations
              << " deferred_verdicts=" << st.deferred_verdicts
              << " late_ticks=" << st.late_ticks
              << " health=" << st.health_score << "\n";
  }
  if (absl::GetFlag(FLAGS_report)) recorder.Report(std::cout, killed_index);
  for (auto& node : nodes) node->server->Shutdown();
  for (auto& node : nodes) node->membership.reset();
  recorder.Stop();
  return 0;
}

}  // namespace
}  // namespace skipswarm::tools

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  skipswarm::common::InitLogging(argv[0]);
  return skipswarm::tools::Run();
}
