// Four GossipDaemons in one process over loopback gRPC (ports 0, plain
// text): three founders (stages 0, 1, 2) form a swarm through one
// bootstrap address; a joiner enters stage 1 while they train, takes its
// first step with a digest equal to its replica's; the last replica of
// stage 2 is refused when it asks to leave; the joiner drains cleanly and
// the founders finish without it. Tiny model; waits on notifications, no
// sleeps.
#include "tests/integration/tiny_gossip_options.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "node/daemon/stack/torch_backend.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <thread>
#include <tuple>

#include <grpcpp/grpcpp.h>
#include "third_party/cpp_httplib.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/health.grpc.pb.h"

namespace skipswarm::node {
namespace {

struct Running {
  std::unique_ptr<GossipDaemon> daemon;
  std::thread thread;
  absl::Status result = absl::UnknownError("running");
  DaemonSignals signals;
  absl::Mutex mu;
  std::vector<NodeIterationReport> reports ABSL_GUARDED_BY(mu);
  std::function<void(const NodeIterationReport&)> hook;  // set before Start
  absl::Notification finished;  // Run returned (`result` is final)

  void Start() {
    thread = std::thread([this] {
      result = daemon->Run(&signals);
      finished.Notify();
    });
  }
  // Waits for `n`; false if this daemon's Run returns first (so a daemon
  // that gives up fails the test instead of hanging it).
  bool WaitUnlessFinished(absl::Notification& n) {
    while (!n.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
      if (finished.HasBeenNotified()) return n.HasBeenNotified();
    }
    return true;
  }
  void Join() {
    if (thread.joinable()) thread.join();
  }
  // A case that fails before joining stops its daemons instead of
  // aborting the whole binary (a joinable std::thread's destructor).
  ~Running() {
    signals.stop = true;
    Join();
  }
};

class GossipDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir();
    corpus_ = dir_ + "/corpus.txt";
    std::ofstream out(corpus_);
    for (int i = 0; i < 400; ++i) out << "the swarm trains line " << i << " of a tiny corpus\n";
  }

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages) {
    // In-order routes with round-robin replicas give every replica
    // micro-batches in every iteration it is routed (the joiner's and the
    // mover's checks).
    GossipDaemonOptions o =
        TinyGossipOptions(name, std::move(stages), corpus_, "gossip-daemon-test");
    o.base.iterations = kIterations;
    return o;
  }

  // The joiners' cases: every member, the joiner too, runs one learning-rate
  // schedule (the manifest's; a real joiner takes it from there), with no
  // warm-up: a joiner on another schedule diverges wherever it enters.
  GossipDaemonOptions JoinerCaseOptions(const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.base.iterations = kJoinerCaseIterations;
    o.base.model.optimizer.warmup_steps = 0;
    return o;
  }

  std::unique_ptr<Running> Launch(GossipDaemonOptions o) {
    auto r = std::make_unique<Running>();
    Running* raw = r.get();
    o.observer = [raw](const NodeIterationReport& report) {
      std::function<void(const NodeIterationReport&)> hook;
      {
        absl::MutexLock lock(&raw->mu);
        raw->reports.push_back(report);
        hook = raw->hook;
      }
      if (hook) hook(report);
    };
    absl::StatusOr<std::unique_ptr<GossipDaemon>> d = GossipDaemon::Create(o, TorchNodeBackend());
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return nullptr;
    r->daemon = *std::move(d);
    r->Start();
    return r;
  }

  // Enough iterations for a joiner to enter while the founders train: its
  // entry lead covers ~0.5 s (gossip_daemon_join.cc), ~85 iterations of
  // this tiny model, ~200 in the joiner's case, on a quiet machine.
  static constexpr int64_t kIterations = 300;
  static constexpr int64_t kJoinerCaseIterations = 800;
  // The joiner's iterations its case waits for (the digests after its first
  // step are compared in its second; its first micro-batches, Note [Routed
  // once ready], come by its third).
  static constexpr size_t kJoinerReports = 4;
  std::string dir_, corpus_;
};

// A static-list-only flag is refused before anything starts, never ignored
// (gossip_mode_options.h; `skipswarm node --node_routes=F --host_stages=0`).
TEST_F(GossipDaemonTest, RefusesARoutesFileInsteadOfIgnoringIt) {
  GossipDaemonOptions o = Options("d0", {0});
  o.base.wan.routes_file = "d0.routes";
  absl::StatusOr<std::unique_ptr<GossipDaemon>> d = GossipDaemon::Create(o, TorchNodeBackend());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("--node_routes"), absl::string_view::npos) << d.status();
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& address) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(10)));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status s = stub->Check(&context, request, &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return response.status();
}

// A founder alone has no live peer: its gRPC health says NOT_SERVING and
// its status page says why ("isolated"), until the swarm forms and trains.
TEST_F(GossipDaemonTest, AFounderAloneIsIsolatedUntilTheSwarmForms) {
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.expect_members = 3;
  d0.base.iterations = 3;
  d0.base.metrics_port = 0;
  auto founder = Launch(d0);
  ASSERT_NE(founder, nullptr);
  const std::string address = founder->daemon->gossip_address();
  EXPECT_EQ(Health(address), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  httplib::Client http("127.0.0.1", founder->daemon->metrics_port());
  auto res = http.Get("/status.json");
  ASSERT_TRUE(res);
  const nlohmann::json st = nlohmann::json::parse(res->body);
  EXPECT_EQ(st["node"]["serving"], false);
  EXPECT_EQ(st["node"]["health"], "isolated: no live peer in this node's gossip view");

  absl::Notification trained;
  {
    absl::MutexLock lock(&founder->mu);
    founder->hook = [&](const NodeIterationReport& r) {
      if (r.iteration == 0 && !trained.HasBeenNotified()) trained.Notify();
    };
  }
  GossipDaemonOptions a = Options("a", {1});
  a.expect_members = 3;
  a.base.iterations = 3;
  a.gossip.join = {address};
  GossipDaemonOptions b = Options("b", {2});
  b.expect_members = 3;
  b.base.iterations = 3;
  b.gossip.join = {address};
  auto ra = Launch(a);
  auto rb = Launch(b);
  ASSERT_NE(ra, nullptr);
  ASSERT_NE(rb, nullptr);
  ASSERT_TRUE(founder->WaitUnlessFinished(trained)) << founder->result;
  EXPECT_EQ(Health(address), grpc::health::v1::HealthCheckResponse::SERVING);
  founder->Join();
  ra->Join();
  rb->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
}

TEST_F(GossipDaemonTest, JoinerMatchesItsReplicaAndLastReplicaCannotLeave) {
  // The bootstrap node lets gRPC pick its port; the others join through it.
  GossipDaemonOptions d0 = JoinerCaseOptions("d0", {0});
  d0.expect_members = 3;
  d0.base.listen = "127.0.0.1:0";
  d0.base.metrics_port = 0;  // its status page is checked below
  // Create d0 first (it starts its gossip server in Create), then read its
  // advertised gossip address from its own view.
  auto founder = Launch(d0);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  GossipDaemonOptions a = JoinerCaseOptions("a", {1});
  a.expect_members = 3;
  a.gossip.join = {bootstrap};
  GossipDaemonOptions b = JoinerCaseOptions("b", {2});
  b.expect_members = 3;
  b.gossip.join = {bootstrap};
  auto ra = Launch(a);
  auto rb = Launch(b);
  ASSERT_NE(ra, nullptr);
  ASSERT_NE(rb, nullptr);

  // The joiner comes once the swarm trains (its entry is a few iterations
  // ahead of its source); it reports when its second iteration's averaging
  // compared digests after its first step.
  absl::Notification trained_a_bit;
  {
    absl::MutexLock lock(&ra->mu);
    ra->hook = [&](const NodeIterationReport& r) {
      if (r.iteration == 5 && !trained_a_bit.HasBeenNotified()) trained_a_bit.Notify();
    };
  }
  ASSERT_TRUE(ra->WaitUnlessFinished(trained_a_bit)) << ra->result;
  {
    // The founder's status page shows the swarm from its gossip view.
    ASSERT_GT(founder->daemon->metrics_port(), 0);
    httplib::Client http("127.0.0.1", founder->daemon->metrics_port());
    auto res = http.Get("/status.json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    const nlohmann::json st = nlohmann::json::parse(res->body);
    EXPECT_EQ(st["node"]["name"], "d0");
    EXPECT_EQ(st["node"]["mode"], "gossip");
    EXPECT_EQ(st["node"]["serving"], true);
    EXPECT_EQ(st["node"]["address"], bootstrap);
    EXPECT_EQ(st["swarm"]["live_members"], 3);
    ASSERT_EQ(st["swarm"]["stages"].size(), 3u);
    for (const auto& s : st["swarm"]["stages"]) EXPECT_EQ(s["replicas"], 1) << s;
    ASSERT_FALSE(st["history"].empty());
    EXPECT_TRUE(st["history"][0]["loss"].is_number()) << st["history"][0];
    auto page = http.Get("/");
    ASSERT_TRUE(page);
    EXPECT_NE(page->body.find("<table id=\"members\""), std::string::npos);
  }
  GossipDaemonOptions j = JoinerCaseOptions("j", {1});
  j.gossip.join = {bootstrap};
  absl::Notification checked;
  // The founders must still train when the joiner is asked to leave (else
  // its drain is refused as stage 1's last replica): the data node holds
  // its next iteration end after the joiner's reports until the drain.
  absl::Notification drain_requested;
  {
    absl::MutexLock lock(&founder->mu);
    founder->hook = [&checked, &drain_requested](const NodeIterationReport&) {
      if (checked.HasBeenNotified()) {
        drain_requested.WaitForNotificationWithTimeout(absl::Seconds(60));
      }
    };
  }
  uint64_t first = 0;
  auto rj = std::make_unique<Running>();
  {
    Running* raw = rj.get();
    j.observer = [raw, &checked, &first](const NodeIterationReport& r) {
      absl::MutexLock lock(&raw->mu);
      raw->reports.push_back(r);
      if (raw->reports.size() == 1) first = r.iteration;
      if (raw->reports.size() == kJoinerReports && !checked.HasBeenNotified()) checked.Notify();
    };
    auto d = GossipDaemon::Create(j, TorchNodeBackend());
    ASSERT_TRUE(d.ok()) << d.status();
    rj->daemon = *std::move(d);
    rj->Start();
  }
  ASSERT_TRUE(rj->WaitUnlessFinished(checked)) << rj->result;
  uint64_t joiner_digest = 0;
  int64_t joiner_entry = -1;
  {
    absl::MutexLock lock(&rj->mu);
    ASSERT_EQ(rj->reports.size(), kJoinerReports);
    // Its second averaging compared every replica's digest after its first step.
    EXPECT_TRUE(rj->reports[1].stages.at(1).digests_agree);
    EXPECT_EQ(rj->reports[1].stages.at(1).replicas, 2);
    // Note [Routed once ready]: micro-batches from the data node's first
    // plan after the joiner's ready record; the data node can be an
    // iteration or two ahead of the joiner's first one, planned without it.
    int visits = 0;
    for (const NodeIterationReport& r : rj->reports) visits += r.stages.at(1).visits_here;
    EXPECT_GT(visits, 0);
    joiner_digest = rj->reports[0].stages.at(1).digest_after;
    joiner_entry = rj->reports[0].iteration;
  }
  {
    absl::MutexLock lock(&ra->mu);
    bool found = false;
    for (const NodeIterationReport& r : ra->reports) {
      if (r.iteration == first) {
        EXPECT_EQ(r.stages.at(1).digest_after, joiner_digest);
        found = true;
      }
    }
    EXPECT_TRUE(found);
  }

  // b is stage 2's only replica: refused. The joiner leaves cleanly.
  absl::Status refused = rb->daemon->RequestDrain(/*force=*/false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("last live replica of stage 2"), std::string::npos);
  const absl::Status drained = rj->daemon->RequestDrain(/*force=*/false);
  drain_requested.Notify();
  ASSERT_TRUE(drained.ok()) << drained;
  rj->Join();
  EXPECT_TRUE(rj->result.ok()) << rj->result;
  // With the joiner gone a is stage 1's last replica again.
  // (Its LEFT record reaches a's view within a few gossip rounds; the
  // founders' training finishing is the real check.)
  founder->Join();
  ra->Join();
  rb->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  EXPECT_TRUE(ra->result.ok()) << ra->result;
  EXPECT_TRUE(rb->result.ok()) << rb->result;
  // Note [Measured speeds]: every founder published its compute speed, and
  // d0's link stats hold the throughput of its pipeline hops.
  const membership::View view = founder->daemon->view();
  for (const membership::MemberInfo& m : view.members) {
    if (m.stages.empty() || m.iteration != 0) continue;  // founders only
    EXPECT_GT(m.seconds_per_layer_per_sample, 0) << m.id;
  }
  int measured_links = 0;
  for (const membership::LinkInfo& l : view.links) {
    if (l.from == view.self && l.bytes_per_second > 0) ++measured_links;
  }
  EXPECT_GE(measured_links, 1);
  absl::MutexLock lock(&founder->mu);
  ASSERT_EQ(founder->reports.size(), static_cast<size_t>(kJoinerCaseIterations));
  // Note [Routed once ready]: nothing is routed to the joiner before its
  // state is loaded, so an entry it announced and then skipped (the
  // sources passed it before its fetch came) costs no micro-batch either.
  // Before, those frames were dropped at their deadline (up to 4 in a CI
  // run under load).
  int dropped = 0;
  for (const NodeIterationReport& r : founder->reports) {
    EXPECT_TRUE(r.stages.at(0).digests_agree);
    if (r.data) dropped += r.data->dropped;
  }
  EXPECT_EQ(dropped, 0) << "joiner entered at " << joiner_entry;
}

// Note [Paused members]: a volunteer (stage 1's second replica p) pauses
// while the swarm trains (the control RPC's path): it stays a member, gets
// no micro-batch after the iteration it paused in, keeps averaging (its
// digest stays a's) and is routed again once it resumes; nothing is
// dropped. The data node and the last replica of stage 2 are refused.
TEST_F(GossipDaemonTest, AVolunteerPausesWithoutLeavingAndIsRoutedAgainOnResume) {
  constexpr int64_t kRun = 160;
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.base.iterations = kRun;
  d0.expect_members = 4;
  d0.base.listen = "127.0.0.1:0";
  auto founder = Launch(d0);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  std::vector<std::unique_ptr<Running>> others;
  for (auto [name, stage] : std::vector<std::pair<std::string, int>>{{"a", 1}, {"p", 1}, {"b", 2}}) {
    GossipDaemonOptions o = Options(name, {stage});
    o.base.iterations = kRun;
    o.expect_members = 4;
    o.gossip.join = {bootstrap};
    others.push_back(Launch(o));
    ASSERT_NE(others.back(), nullptr);
  }
  Running* ra = others[0].get();
  Running* rp = others[1].get();
  Running* rb = others[2].get();
  // Waits until p reported iteration `it`; its latest report's iteration.
  const auto wait_for = [&](uint64_t it) {
    absl::Notification reached;
    {
      absl::MutexLock lock(&rp->mu);
      rp->hook = [&reached, it](const NodeIterationReport& r) {
        if (r.iteration >= it && !reached.HasBeenNotified()) reached.Notify();
      };
    }
    const bool ok = rp->WaitUnlessFinished(reached);
    absl::MutexLock lock(&rp->mu);
    rp->hook = nullptr;
    EXPECT_TRUE(ok) << rp->result;
    return rp->reports.empty() ? uint64_t{0} : rp->reports.back().iteration;
  };
  wait_for(10);
  EXPECT_EQ(founder->daemon->RequestPause(true, false).code(),
            absl::StatusCode::kFailedPrecondition);  // a data node
  absl::Status last = rb->daemon->RequestPause(true, false);
  EXPECT_EQ(last.code(), absl::StatusCode::kFailedPrecondition) << last;
  EXPECT_NE(last.message().find("last unpaused live replica of stage 2"), std::string::npos);
  EXPECT_FALSE(rb->daemon->paused());
  ASSERT_TRUE(rp->daemon->RequestPause(true, false).ok());
  const uint64_t paused_after = wait_for(0) + 1;  // its server's iteration at most
  EXPECT_TRUE(rp->daemon->paused());
  const uint64_t resumed_at = wait_for(paused_after + 12);
  // While p is paused a is stage 1's last unpaused replica.
  EXPECT_EQ(ra->daemon->RequestPause(true, false).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(rp->daemon->RequestPause(false, false).ok());
  EXPECT_FALSE(rp->daemon->paused());
  wait_for(resumed_at + 12);
  for (auto& r : others) r->Join();
  founder->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  for (auto& r : others) EXPECT_TRUE(r->result.ok()) << r->result;
  std::map<uint64_t, uint64_t> a_digests;
  {
    absl::MutexLock lock(&ra->mu);
    for (const NodeIterationReport& r : ra->reports) a_digests[r.iteration] = r.stages.at(1).digest_after;
  }
  absl::MutexLock lock(&rp->mu);
  ASSERT_EQ(rp->reports.size(), static_cast<size_t>(kRun));
  int64_t visits_paused = 0, visits_resumed = 0, visits_before = 0;
  for (const NodeIterationReport& r : rp->reports) {
    const StageStep& step = r.stages.at(1);
    EXPECT_EQ(step.replicas, 2) << r.iteration;  // still averaging
    EXPECT_EQ(step.digest_after, a_digests[r.iteration]) << r.iteration;
    if (r.iteration < paused_after) visits_before += step.visits_here;
    if (r.iteration > paused_after && r.iteration <= resumed_at) visits_paused += step.visits_here;
    if (r.iteration > resumed_at + 1) visits_resumed += step.visits_here;
  }
  EXPECT_GT(visits_before, 0);
  EXPECT_EQ(visits_paused, 0);
  EXPECT_GT(visits_resumed, 0);
  absl::MutexLock founder_lock(&founder->mu);
  int dropped = 0;
  for (const NodeIterationReport& r : founder->reports) dropped += r.data ? r.data->dropped : 0;
  EXPECT_EQ(dropped, 0);
}

// A GPU whose process table the test sets: this process (every daemon of
// the test) and, while `foreign`, another one holding 2 GiB.
class FakeGpu : public GpuProcessLister {
 public:
  void SetForeign(bool foreign) {
    absl::MutexLock lock(&mu_);
    foreign_ = foreign;
  }
  absl::StatusOr<std::vector<GpuProcess>> List() override {
    absl::MutexLock lock(&mu_);
    std::vector<GpuProcess> table{{getpid(), int64_t{1} << 30}};
    if (foreign_) table.push_back({1, int64_t{2} << 30});
    return table;
  }
  std::string Describe() const override { return "the test's GPU"; }

 private:
  absl::Mutex mu_;
  bool foreign_ ABSL_GUARDED_BY(mu_) = false;
};

// Note [GPU contention]: a replica whose GPU another process takes pauses
// through the volunteer's pause (its record says paused, so the founder's
// view shows it) and resumes when the process leaves; the last replica of
// stage 2, contended all along, is refused and keeps training; nothing is
// dropped. Zero pause/resume delays make the verdict independent of
// timing (the monitor's delays are gpu_contention_test's).
TEST_F(GossipDaemonTest, AReplicaPausesWhileAnotherProcessHoldsItsGpu) {
  constexpr int64_t kRun = 400;
  auto gpu_p = std::make_shared<FakeGpu>();
  auto gpu_b = std::make_shared<FakeGpu>();
  gpu_b->SetForeign(true);
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.base.iterations = kRun;
  d0.expect_members = 4;
  d0.base.listen = "127.0.0.1:0";
  auto founder = Launch(d0);
  ASSERT_NE(founder, nullptr);
  std::vector<std::unique_ptr<Running>> others;
  for (auto [name, stage] : std::vector<std::pair<std::string, int>>{{"a", 1}, {"p", 1}, {"b", 2}}) {
    GossipDaemonOptions o = Options(name, {stage});
    o.base.iterations = kRun;
    o.expect_members = 4;
    o.gossip.join = {founder->daemon->gossip_address()};
    if (name != "a") {
      o.base.metrics_port = 0;  // the status page and /metrics are checked below
      o.gpu_lister = name == "p" ? gpu_p : gpu_b;
      o.gpu_contention.pause_after = absl::ZeroDuration();
      o.gpu_contention.resume_after = absl::ZeroDuration();
      o.gpu_contention.poll_every = absl::Milliseconds(10);
      o.gpu_contention.own_pids = {getpid()};
    }
    others.push_back(Launch(o));
    ASSERT_NE(others.back(), nullptr);
  }
  Running* rp = others[1].get();
  Running* rb = others[2].get();
  // Waits for p's next iteration; false once p's Run returned.
  const auto next_iteration = [&] {
    absl::Notification reached;
    {
      absl::MutexLock lock(&rp->mu);
      rp->hook = [&reached](const NodeIterationReport&) {
        if (!reached.HasBeenNotified()) reached.Notify();
      };
    }
    const bool ok = rp->WaitUnlessFinished(reached);
    absl::MutexLock lock(&rp->mu);
    rp->hook = nullptr;
    return ok;
  };
  const common::NodeId p_id = rp->daemon->view().self;
  const auto p_record_paused = [&] {
    const membership::View view = founder->daemon->view();
    const membership::MemberInfo* m = view.Find(p_id);
    return m != nullptr && m->paused;
  };
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(next_iteration());
  gpu_p->SetForeign(true);
  while (!rp->daemon->paused()) ASSERT_TRUE(next_iteration()) << "p never paused";
  while (!p_record_paused()) ASSERT_TRUE(next_iteration()) << "the founder never saw p paused";
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(next_iteration());
  EXPECT_TRUE(rp->daemon->paused());
  EXPECT_FALSE(rb->daemon->paused());  // stage 2's last replica
  // Where it shows: p's badge and /metrics; b's refusal among its events.
  const auto get = [](Running* r, const char* path) {
    httplib::Client http("127.0.0.1", r->daemon->metrics_port());
    auto res = http.Get(path);
    return res ? res->body : std::string();
  };
  const nlohmann::json p_status = nlohmann::json::parse(get(rp, "/status.json"));
  EXPECT_EQ(p_status["node"]["paused"], true);
  EXPECT_EQ(p_status["node"]["paused_why"],
            "GPU contention: pid 1 holds 2048 MiB of this node's GPU");
  const std::string p_metrics = get(rp, "/metrics");
  EXPECT_NE(p_metrics.find("\nskipswarm_gpu_contention 1\n"), std::string::npos) << p_metrics;
  EXPECT_NE(p_metrics.find("\nskipswarm_gpu_foreign_memory_bytes 2147483648\n"),
            std::string::npos);
  const auto b_refusal_shown = [&] {
    const nlohmann::json st = nlohmann::json::parse(get(rb, "/status.json"));
    for (const nlohmann::json& e : st["events"]) {
      if (e["text"] == "cannot pause (GPU contention: pid 1 holds 2048 MiB of this node's "
                       "GPU): this node is the last unpaused live replica of stage 2; pausing "
                       "would stop the swarm's training (use --force to pause anyway)") {
        return true;
      }
    }
    return false;
  };
  while (!b_refusal_shown()) ASSERT_TRUE(next_iteration()) << "b's page never showed its refusal";
  gpu_p->SetForeign(false);
  while (rp->daemon->paused()) ASSERT_TRUE(next_iteration()) << "p never resumed";
  for (auto& r : others) r->Join();
  founder->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  for (auto& r : others) EXPECT_TRUE(r->result.ok()) << r->result;
  EXPECT_FALSE(rb->daemon->paused());
  absl::MutexLock founder_lock(&founder->mu);
  int dropped = 0;
  for (const NodeIterationReport& r : founder->reports) dropped += r.data ? r.data->dropped : 0;
  EXPECT_EQ(dropped, 0);
}

// Issue 6 (b): a joiner may host stage 0. It becomes a data node with its
// own data shard (its rank among the data nodes, Note [Data order]) from
// its entry iteration, takes stage 0's weights and AdamW state from the
// founding data node, and its stage-0 digest equals d0's after its first
// step; no micro-batch is dropped.
TEST_F(GossipDaemonTest, DataNodeJoinerTrainsItsShardAndMatchesItsReplica) {
  GossipDaemonOptions d0 = JoinerCaseOptions("d0", {0});
  d0.expect_members = 3;
  auto founder = Launch(d0);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  GossipDaemonOptions a = JoinerCaseOptions("a", {1});
  a.expect_members = 3;
  a.gossip.join = {bootstrap};
  GossipDaemonOptions b = JoinerCaseOptions("b", {2});
  b.expect_members = 3;
  b.gossip.join = {bootstrap};
  auto ra = Launch(a);
  auto rb = Launch(b);
  ASSERT_NE(ra, nullptr);
  ASSERT_NE(rb, nullptr);
  absl::Notification trained_a_bit;
  {
    absl::MutexLock lock(&founder->mu);
    founder->hook = [&](const NodeIterationReport& r) {
      if (r.iteration == 5 && !trained_a_bit.HasBeenNotified()) trained_a_bit.Notify();
    };
  }
  ASSERT_TRUE(founder->WaitUnlessFinished(trained_a_bit)) << founder->result;

  GossipDaemonOptions j = JoinerCaseOptions("j", {0});
  j.gossip.join = {bootstrap};
  absl::Notification checked;
  auto rj = std::make_unique<Running>();
  {
    Running* raw = rj.get();
    j.observer = [raw, &checked](const NodeIterationReport& r) {
      absl::MutexLock lock(&raw->mu);
      raw->reports.push_back(r);
      if (raw->reports.size() == 3 && !checked.HasBeenNotified()) checked.Notify();
    };
    auto d = GossipDaemon::Create(j, TorchNodeBackend());
    ASSERT_TRUE(d.ok()) << d.status();
    rj->daemon = *std::move(d);
    rj->Start();
  }
  ASSERT_TRUE(rj->WaitUnlessFinished(checked)) << rj->result;
  uint64_t first = 0, joiner_digest = 0;
  int joiner_mbs = 0;
  {
    absl::MutexLock lock(&rj->mu);
    first = rj->reports[0].iteration;
    joiner_digest = rj->reports[0].stages.at(0).digest_after;
    EXPECT_TRUE(rj->reports[1].stages.at(0).digests_agree);
    EXPECT_EQ(rj->reports[1].stages.at(0).replicas, 2);
    for (const NodeIterationReport& r : rj->reports) {
      ASSERT_TRUE(r.data.has_value()) << "a data node reports its micro-batches";
      EXPECT_TRUE(r.data->status.ok()) << r.data->status;
      EXPECT_EQ(r.data->dropped, 0);
      joiner_mbs += r.data->completed;
    }
  }
  EXPECT_GT(joiner_mbs, 0);
  ASSERT_TRUE(rj->daemon->RequestDrain(/*force=*/false).ok());
  rj->Join();
  EXPECT_TRUE(rj->result.ok()) << rj->result;
  founder->Join();
  ra->Join();
  rb->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  absl::MutexLock lock(&founder->mu);
  bool found = false;
  int dropped = 0;
  for (const NodeIterationReport& r : founder->reports) {
    if (r.iteration == first) {
      EXPECT_EQ(r.stages.at(0).digest_after, joiner_digest) << "after the joiner's first step";
      found = true;
    }
    EXPECT_TRUE(r.stages.at(0).digests_agree) << "iteration " << r.iteration;
    if (r.data) dropped += r.data->dropped;
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(dropped, 0);
}

// Issue 6 (c), Note [Stage moves]: stage 1 has two fast replicas, stage 2
// one slow one (speeds fixed, so the rule's inputs are known). One of the
// fast ones moves to stage 2 at a boundary: it averages stage 2 with c
// from its switch with zero visits (its digest is c's after that step),
// gets micro-batches one iteration later, and nobody moves again
// (hysteresis); no micro-batch is dropped.
TEST_F(GossipDaemonTest, AFastReplicaMovesToTheBottleneckStageOnce) {
  auto options = [&](const std::string& name, int stage, double speed) {
    GossipDaemonOptions o = Options(name, {stage});
    o.expect_members = 4;
    o.fixed_compute_speed = speed;
    o.rebalance_every = 10;
    return o;
  };
  auto founder = Launch(options("d0", 0, 1e-3));
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  std::vector<std::unique_ptr<Running>> relays;
  for (auto [name, stage, speed] : std::vector<std::tuple<std::string, int, double>>{
           {"a", 1, 1e-3}, {"b", 1, 1e-3}, {"c", 2, 1e-2}}) {
    GossipDaemonOptions o = options(name, stage, speed);
    o.gossip.join = {bootstrap};
    relays.push_back(Launch(o));
    ASSERT_NE(relays.back(), nullptr);
  }
  // Note [Routed once ready] for a move: after every iteration, the
  // relay's own record. One that names a later entry (a move announced,
  // not switched yet) must say `entering`; from the switch on (its new
  // state loaded before it trains there) it must not. The first move check
  // is at iteration 10, long after these hooks are set.
  std::atomic<int> announced_entering{0}, announced_ready{0}, switched_entering{0};
  for (int i : {0, 1}) {
    Running* r = relays[i].get();
    absl::MutexLock lock(&r->mu);
    r->hook = [r, &announced_entering, &announced_ready,
               &switched_entering](const NodeIterationReport& report) {
      const membership::View v = r->daemon->view();
      const membership::MemberInfo* own = v.Find(v.self);
      if (own == nullptr || own->iteration == 0) return;  // not moving
      if (own->iteration > report.iteration) {
        ++(own->entering ? announced_entering : announced_ready);
      } else if (own->entering) {
        ++switched_entering;
      }
    };
  }
  founder->Join();
  for (auto& r : relays) r->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  for (auto& r : relays) EXPECT_TRUE(r->result.ok()) << r->result;
  EXPECT_GT(announced_entering.load(), 0) << "no report between the announcement and the switch";
  EXPECT_EQ(announced_ready.load(), 0) << "a move announced without `entering`";
  EXPECT_EQ(switched_entering.load(), 0) << "still `entering` after the switch";

  // Who moved, and when: the first report with stage 2 among a and b.
  Running* mover = nullptr;
  Running* stayer = nullptr;
  uint64_t switched = 0;
  for (int i : {0, 1}) {
    absl::MutexLock lock(&relays[i]->mu);
    for (const NodeIterationReport& r : relays[i]->reports) {
      if (r.stages.count(2) > 0) {
        mover = relays[i].get();
        switched = r.iteration;
        break;
      }
    }
    if (mover != relays[i].get()) stayer = relays[i].get();
  }
  ASSERT_NE(mover, nullptr) << "nobody moved";
  ASSERT_NE(stayer, nullptr) << "both moved";
  std::map<uint64_t, StageStep> c_steps;
  {
    absl::MutexLock lock(&relays[2]->mu);
    for (const NodeIterationReport& r : relays[2]->reports) c_steps[r.iteration] = r.stages.at(2);
  }
  {
    absl::MutexLock lock(&mover->mu);
    ASSERT_EQ(mover->reports.size(), static_cast<size_t>(kIterations));
    for (const NodeIterationReport& r : mover->reports) {
      ASSERT_EQ(r.stages.size(), 1u);
      EXPECT_EQ(r.stages.count(r.iteration < switched ? 1 : 2), 1u) << "moved once, at "
                                                                  << switched;
      if (r.iteration == switched) {
        EXPECT_EQ(r.stages.at(2).visits_here, 0) << "routed one iteration after its switch";
        EXPECT_EQ(r.stages.at(2).replicas, 2);
        EXPECT_EQ(r.stages.at(2).digest_after, c_steps[r.iteration].digest_after);
      }
      if (r.iteration > switched) {
        EXPECT_TRUE(r.stages.at(2).digests_agree) << r.iteration;
      }
    }
    EXPECT_GT(mover->reports.back().stages.at(2).visits_here +
                  mover->reports[kIterations - 2].stages.at(2).visits_here,
              0);
  }
  {
    absl::MutexLock lock(&stayer->mu);
    for (const NodeIterationReport& r : stayer->reports) {
      EXPECT_EQ(r.stages.count(1), 1u);
      if (r.iteration > switched) {
        EXPECT_EQ(r.stages.at(1).replicas, 1) << r.iteration;
      }
    }
  }
  absl::MutexLock lock(&founder->mu);
  int dropped = 0;
  for (const NodeIterationReport& r : founder->reports) {
    if (r.data) dropped += r.data->dropped;
  }
  EXPECT_EQ(dropped, 0);
}

// Notes [Paused members] and [Stage moves]: as above, and the mover's
// operator pauses it between its move's announcement and its switch. The
// move goes ahead (its record already names the new stage); it gets no
// micro-batch from the pause on, in either stage, averages stage 2 with c
// from its switch (digests equal), stays paused on its new StageServer and
// is routed in stage 2 once resumed; the stayer, stage 1's last unpaused
// replica, is not moved; nothing is dropped.
TEST_F(GossipDaemonTest, AMoverPausedBeforeItsSwitchMovesPausedAndIsRoutedOnResume) {
  auto options = [&](const std::string& name, int stage, double speed) {
    GossipDaemonOptions o = Options(name, {stage});
    o.expect_members = 4;
    o.fixed_compute_speed = speed;
    o.rebalance_every = 10;
    return o;
  };
  auto founder = Launch(options("d0", 0, 1e-3));
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  std::vector<std::unique_ptr<Running>> relays;
  absl::Mutex announce_mu;
  Running* announced = nullptr;  // guarded by announce_mu
  uint64_t switch_at = 0;        // guarded by announce_mu
  absl::Notification move_announced;
  for (auto [name, stage, speed] : std::vector<std::tuple<std::string, int, double>>{
           {"a", 1, 1e-3}, {"b", 1, 1e-3}, {"c", 2, 1e-2}}) {
    GossipDaemonOptions o = options(name, stage, speed);
    o.gossip.join = {bootstrap};
    relays.push_back(Launch(o));
    ASSERT_NE(relays.back(), nullptr);
  }
  for (int i : {0, 1}) {
    Running* r = relays[i].get();
    absl::MutexLock lock(&r->mu);
    // The trainer's thread, after each iteration: our own record names
    // stage 2 from a later entry, i.e. the move is announced, not done.
    r->hook = [r, &announce_mu, &announced, &switch_at,
               &move_announced](const NodeIterationReport& report) {
      if (move_announced.HasBeenNotified()) return;
      const membership::View view = r->daemon->view();
      const membership::MemberInfo* self = view.Find(view.self);
      if (self == nullptr || self->stages != std::vector<uint32_t>{2} ||
          self->iteration <= report.iteration + 1) {
        return;
      }
      absl::MutexLock lock(&announce_mu);
      if (announced != nullptr) return;
      announced = r;
      switch_at = self->iteration;
      move_announced.Notify();
    };
  }
  ASSERT_TRUE(founder->WaitUnlessFinished(move_announced)) << "nobody moved";
  Running* mover = nullptr;
  uint64_t at = 0;
  {
    absl::MutexLock lock(&announce_mu);
    mover = announced;
    at = switch_at;
  }
  ASSERT_TRUE(mover->daemon->RequestPause(true, false).ok());
  uint64_t paused_after = 0;  // the mover's server refuses forwards after this one
  {
    absl::MutexLock lock(&mover->mu);
    paused_after = mover->reports.back().iteration + 1;
  }
  EXPECT_LT(paused_after + 1, at) << "the pause came after the switch (a loaded machine?)";
  // Resume 20 iterations after the switch.
  absl::Notification resume_now;
  {
    absl::MutexLock lock(&mover->mu);
    mover->hook = [at, &resume_now](const NodeIterationReport& report) {
      if (report.iteration >= at + 20 && !resume_now.HasBeenNotified()) resume_now.Notify();
    };
  }
  ASSERT_TRUE(mover->WaitUnlessFinished(resume_now)) << mover->result;
  EXPECT_TRUE(mover->daemon->paused());
  ASSERT_TRUE(mover->daemon->RequestPause(false, false).ok());
  // The mover's iteration in progress at the resume: plans for it may
  // route to the mover again (every earlier iteration had all its visits).
  uint64_t resumed_after = 0;
  {
    absl::MutexLock lock(&mover->mu);
    mover->hook = nullptr;
    resumed_after = mover->reports.back().iteration + 1;
  }
  for (auto& r : relays) {
    absl::MutexLock lock(&r->mu);
    r->hook = nullptr;
  }
  founder->Join();
  for (auto& r : relays) r->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  for (auto& r : relays) EXPECT_TRUE(r->result.ok()) << r->result;
  Running* stayer = mover == relays[0].get() ? relays[1].get() : relays[0].get();
  std::map<uint64_t, uint64_t> c_digests;
  {
    absl::MutexLock lock(&relays[2]->mu);
    for (const NodeIterationReport& r : relays[2]->reports) {
      c_digests[r.iteration] = r.stages.at(2).digest_after;
    }
  }
  {
    absl::MutexLock lock(&mover->mu);
    ASSERT_EQ(mover->reports.size(), static_cast<size_t>(kIterations));
    int64_t visits_resumed = 0;
    for (const NodeIterationReport& r : mover->reports) {
      ASSERT_EQ(r.stages.size(), 1u) << r.iteration;
      const int stage = r.iteration < at ? 1 : 2;
      ASSERT_EQ(r.stages.count(stage), 1u) << "moved at " << at << ", iteration " << r.iteration;
      const StageStep& step = r.stages.at(stage);
      if (r.iteration > paused_after && r.iteration < resumed_after) {
        EXPECT_EQ(step.visits_here, 0) << "paused, iteration " << r.iteration;
      }
      if (stage == 2) {
        EXPECT_EQ(step.replicas, 2) << r.iteration;
        EXPECT_EQ(step.digest_after, c_digests[r.iteration]) << r.iteration;
      }
      if (r.iteration > resumed_after + 1) visits_resumed += step.visits_here;
    }
    EXPECT_GT(visits_resumed, 0);
  }
  {
    absl::MutexLock lock(&stayer->mu);
    for (const NodeIterationReport& r : stayer->reports) {
      EXPECT_EQ(r.stages.count(1), 1u) << "the stayer moved at " << r.iteration;
    }
  }
  absl::MutexLock lock(&founder->mu);
  int dropped = 0;
  for (const NodeIterationReport& r : founder->reports) {
    if (r.data) dropped += r.data->dropped;
  }
  EXPECT_EQ(dropped, 0);
}

}  // namespace
}  // namespace skipswarm::node
