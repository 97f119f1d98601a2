#include "tests/integration/running_daemon.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "node/daemon/stack/torch_backend.h"
#include "tests/integration/tiny_gossip_options.h"

namespace skipswarm::node {

bool RunningDaemon::WaitUnlessFinished(absl::Notification& n) {
  while (!n.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
    if (finished.HasBeenNotified()) return n.HasBeenNotified();
  }
  return true;
}

int64_t RunningDaemon::LastIteration() {
  absl::MutexLock lock(&mu);
  return reports.empty() ? -1 : static_cast<int64_t>(reports.back().iteration);
}

namespace {
struct Until {
  RunningDaemon* r;
  int64_t iteration;
};

// absl::Condition's predicate: it runs with u->r->mu held.
bool Reported(Until* u) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return !u->r->reports.empty() &&
         static_cast<int64_t>(u->r->reports.back().iteration) >= u->iteration;
}
}  // namespace

bool RunningDaemon::WaitForIteration(int64_t iteration, absl::Duration limit) {
  Until u{this, iteration};
  absl::MutexLock lock(&mu);
  return mu.AwaitWithTimeout(absl::Condition(&Reported, &u), limit);
}

void RunningDaemon::Join() {
  if (thread.joinable()) thread.join();
}

RunningDaemon::~RunningDaemon() {
  signals.stop.store(true);
  Join();
}

namespace {

std::unique_ptr<RunningDaemon> Launch(GossipDaemonOptions o, NodeBackend backend, int64_t reach,
                                      size_t train) {
  auto r = std::make_unique<RunningDaemon>();
  RunningDaemon* raw = r.get();
  raw->reach = reach;
  raw->train = train;
  o.observer = [raw, also = std::move(o.observer)](const NodeIterationReport& report) {
    {
      absl::MutexLock lock(&raw->mu);
      raw->reports.push_back(report);
      if (raw->reach >= 0 && static_cast<int64_t>(report.iteration) >= raw->reach &&
          !raw->reached.HasBeenNotified()) {
        raw->reached.Notify();
      }
      if (raw->train > 0 && raw->reports.size() >= raw->train &&
          !raw->trained.HasBeenNotified()) {
        raw->trained.Notify();
      }
    }
    if (also) also(report);
  };
  absl::StatusOr<std::unique_ptr<GossipDaemon>> d = GossipDaemon::Create(o, std::move(backend));
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok()) return nullptr;
  r->daemon = *std::move(d);
  r->thread = std::thread([raw] {
    raw->result = raw->daemon->Run(&raw->signals);
    raw->finished.Notify();
  });
  return r;
}

}  // namespace

std::unique_ptr<RunningDaemon> LaunchDaemon(GossipDaemonOptions o, int64_t reach, size_t train) {
  return Launch(std::move(o), TorchNodeBackend(), reach, train);
}

std::unique_ptr<RunningDaemon> LaunchDaemonWith(GossipDaemonOptions o, NodeBackend backend) {
  return Launch(std::move(o), std::move(backend), /*reach=*/-1, /*train=*/0);
}

std::unique_ptr<RunningDaemon> LaunchDaemon(
    GossipDaemonOptions o, std::function<void(const NodeIterationReport&)> observer) {
  o.observer = std::move(observer);
  return LaunchDaemon(std::move(o));
}

std::unique_ptr<RunningDaemon> LaunchFounder(GossipDaemonOptions o, int expect_members) {
  o.expect_members = expect_members;
  o.base.listen = "127.0.0.1:0";
  return LaunchDaemon(std::move(o));
}

void WriteTinyCorpus(const std::string& path, absl::string_view before, absl::string_view after) {
  std::ofstream out(path);
  for (int i = 0; i < 400; ++i) out << before << i << after << "\n";
}

void AdmissionSwarmTest::SetUp() {
  dir_ = ::testing::TempDir();
  corpus_ = dir_ + "/corpus.txt";
  WriteTinyCorpus(corpus_, corpus_line_);
}

GossipDaemonOptions AdmissionSwarmTest::Options(const std::string& name, std::vector<int> stages,
                                                char seed) {
  GossipDaemonOptions o = TinyGossipOptions(name, std::move(stages), corpus_, swarm_);
  o.gossip.key_file = SaveSeededKey(dir_ + "/" + name + ".key", seed);
  o.gossip.admission = policy_;
  return o;
}

void TinySwarmFolderTest::SetUp() {
  dir_ = absl::StrCat(::testing::TempDir(), "/", prefix_, "-",
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  corpus_ = dir_ + "/corpus.txt";
  WriteTinyCorpus(corpus_, "the swarm trains line ", " of a tiny corpus");
}

std::string SaveSeededKey(const std::string& path, char seed) {
  EXPECT_TRUE(identity::TestIdentity(seed)->Save(path, /*overwrite=*/true).ok());
  return path;
}

}  // namespace skipswarm::node
