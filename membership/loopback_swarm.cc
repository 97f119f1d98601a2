// Measures membership on real gRPC + mutual TLS over loopback, on the real
// clock: N nodes in one process start together and join one bootstrap
// address; reports the time until every view agrees, then kills one node
// and reports the time until every view marks it DEAD, then (optionally)
// soaks and counts false DEAD verdicts.
//
//   bazel run -c opt //membership:loopback_swarm -- --nodes=12 --soak_seconds=60
//
// A tool, not a test: real time on a shared machine is not deterministic.
#include <iostream>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "glog/logging.h"
#include "common/real_clock.h"
#include "membership/grpc_gossip.h"
#include "membership/membership.h"
#include "membership/swarm_recorder.h"

ABSL_FLAG(int, nodes, 12, "Swarm size.");
ABSL_FLAG(int, soak_seconds, 0, "Run this long after the kill and count false DEADs.");
ABSL_FLAG(bool, insecure, false, "Plain-text gRPC instead of mutual TLS.");
ABSL_FLAG(uint64_t, seed, 1, "Random seed.");
ABSL_FLAG(bool, report, true,
          "Print per-minute timing (timer lag, starvation, ping latency) and "
          "an explanation of each false DEAD verdict.");

namespace skipswarm::membership {
namespace {

// Lets the server start (and pick its port) before the Membership exists;
// tells the recorder when a request arrives and when a suspect is told.
class Forwarder : public GossipHandler {
 public:
  Membership* target = nullptr;
  SwarmRecorder* recorder = nullptr;
  void HandlePing(const PeerInfo& f, const proto::PingRequest& r, AckCallback cb) override {
    if (target == nullptr) return cb(absl::UnavailableError("starting"));
    Observe(r);
    target->HandlePing(f, r, std::move(cb));
  }
  void HandlePingReq(const PeerInfo& f, const proto::PingRequest& r, AckCallback cb) override {
    if (target == nullptr) return cb(absl::UnavailableError("starting"));
    Observe(r);
    target->HandlePingReq(f, r, std::move(cb));
  }
  void HandlePushPull(const PeerInfo& f, const proto::PushPullRequest& r,
                      PushPullCallback cb) override {
    if (target == nullptr) return cb(absl::UnavailableError("starting"));
    target->HandlePushPull(f, r, std::move(cb));
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

struct Node {
  std::unique_ptr<Identity> identity;
  Forwarder forwarder;
  std::unique_ptr<GrpcGossipServer> server;
  std::unique_ptr<GrpcGossipTransport> transport;
  std::unique_ptr<TimedTransport> timed;
  std::unique_ptr<Membership> membership;
  bool running = true;
};

int Run() {
  auto clock = common::RealClock::Create();
  const int n = absl::GetFlag(FLAGS_nodes);
  const bool insecure = absl::GetFlag(FLAGS_insecure);
  common::Random rng(absl::GetFlag(FLAGS_seed));
  LOG(INFO) << "seed " << rng.seed();
  SwarmRecorder recorder(clock.get());
  recorder.Start();
  std::vector<std::unique_ptr<Node>> nodes;
  absl::Mutex mu;
  int false_dead = 0;
  int victim = -1;
  for (int i = 0; i < n; ++i) {
    auto node = std::make_unique<Node>();
    node->identity = *Identity::Generate();
    GrpcSecurity security{node->identity.get(), insecure};
    node->server = *GrpcGossipServer::Start("127.0.0.1:0", &node->forwarder,
                                            security, clock->Now());
    node->transport = std::make_unique<GrpcGossipTransport>(security, clock.get());
    node->timed = std::make_unique<TimedTransport>(node->transport.get(), &recorder);
    MembershipOptions o;
    o.policy.swarm_id = "loopback";
    o.addresses = {absl::StrCat("127.0.0.1:", node->server->port())};
    o.stages = {static_cast<uint32_t>(i % 4)};
    node->membership = *Membership::Create(o, node->identity.get(),
                                           node->timed.get(), clock.get(),
                                           rng.Fork(i));
    recorder.Name(node->identity->id(), i);
    node->membership->AddListener([&, i](const MemberChange& c) {
      recorder.Transition(i, c);
      if (c.new_state != proto::MEMBER_STATE_DEAD) return;
      absl::MutexLock lock(&mu);
      if (victim < 0 || c.id != nodes[victim]->identity->id()) ++false_dead;
    });
    node->forwarder.recorder = &recorder;
    node->forwarder.target = node->membership.get();
    nodes.push_back(std::move(node));
  }
  const MembershipOptions defaults;
  auto converged = [&] {
    uint64_t digest = 0;
    for (int i = 0; i < n; ++i) {
      if (!nodes[i]->running) continue;
      View v = nodes[i]->membership->GetView();
      size_t expect = 0;
      for (auto& x : nodes) expect += x->running ? 1 : 0;
      if (v.Live().size() != expect) return false;
      if (digest == 0) digest = v.digest();
      if (v.digest() != digest) return false;
    }
    return true;
  };
  const std::string seed = absl::StrCat("127.0.0.1:", nodes[0]->server->port());
  const absl::Duration t0 = clock->SteadyNow();
  for (int i = 0; i < n; ++i) {
    nodes[i]->membership->Start();
    nodes[i]->membership->Join(i == 0 ? std::vector<std::string>{}
                                      : std::vector<std::string>{seed},
                               [i](absl::Status s) {
                                 LOG_IF(ERROR, !s.ok()) << "node " << i << ": " << s;
                               });
  }
  while (!converged()) clock->SleepFor(absl::Milliseconds(5));
  const absl::Duration convergence = clock->SteadyNow() - t0;
  std::cout << "nodes=" << n << " tls=" << !insecure << "\n"
            << "convergence=" << convergence << " ("
            << absl::FDivDuration(convergence, defaults.probe_interval)
            << " protocol periods of " << defaults.probe_interval << ")\n";

  clock->SleepFor(absl::Seconds(1));
  {
    absl::MutexLock lock(&mu);
    victim = n / 2;
  }
  const common::NodeId victim_id = nodes[victim]->identity->id();
  const absl::Duration t1 = clock->SteadyNow();
  nodes[victim]->running = false;
  nodes[victim]->server->Shutdown();
  nodes[victim]->membership->Stop();
  auto all_dead = [&] {
    for (int i = 0; i < n; ++i) {
      if (!nodes[i]->running) continue;
      View v = nodes[i]->membership->GetView();
      const MemberInfo* m = v.Find(victim_id);
      if (m == nullptr || m->state != proto::MEMBER_STATE_DEAD) return false;
    }
    return true;
  };
  while (!all_dead()) clock->SleepFor(absl::Milliseconds(5));
  std::cout << "detection=" << clock->SteadyNow() - t1 << " (killed node DEAD in all "
            << n - 1 << " views)\n";
  clock->SleepFor(absl::Seconds(absl::GetFlag(FLAGS_soak_seconds)));
  {
    absl::MutexLock lock(&mu);
    std::cout << "false_dead_verdicts=" << false_dead << " over "
              << absl::GetFlag(FLAGS_soak_seconds) << "s soak\n";
  }
  for (int i = 0; i < n; ++i) {
    const MembershipStats st = nodes[i]->membership->stats();
    std::cout << "node " << i << ": probes=" << st.probes
              << " suspicions_raised=" << st.suspicions
              << " refutations=" << st.refutations
              << " health=" << st.health_score << "\n";
  }
  if (absl::GetFlag(FLAGS_report)) recorder.Report(std::cout, victim);
  for (auto& node : nodes) node->server->Shutdown();
  for (auto& node : nodes) node->membership.reset();
  recorder.Stop();
  return 0;
}

}  // namespace
}  // namespace skipswarm::membership

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  skipswarm::common::InitLogging(argv[0]);
  return skipswarm::membership::Run();
}
