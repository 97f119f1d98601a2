// What the in-process gossip-daemon tests share beside their options
// (tiny_gossip_options.h): a GossipDaemon run on a thread of its own with
// its iteration reports kept, the tiny corpus they train on, and fixed keys.
#ifndef SKIPSWARM_TESTS_INTEGRATION_RUNNING_DAEMON_H_
#define SKIPSWARM_TESTS_INTEGRATION_RUNNING_DAEMON_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "membership/admission.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "node/daemon/stack/node_backend.h"

namespace skipswarm::node {

// A daemon started by LaunchDaemon. Its observer keeps every report in
// `reports`, notifies `reached` once an iteration >= `reach` finished (when
// `reach` >= 0) and `trained` once `train` iterations finished (when > 0).
struct RunningDaemon {
  std::unique_ptr<GossipDaemon> daemon;
  std::thread thread;
  absl::Status result = absl::UnknownError("running");
  DaemonSignals signals;
  absl::Notification finished;  // Run returned (`result` is final)
  absl::Mutex mu;
  std::vector<NodeIterationReport> reports ABSL_GUARDED_BY(mu);
  int64_t reach = -1;
  absl::Notification reached;
  size_t train = 0;
  absl::Notification trained;

  // Waits for `n`; false if Run returns first (a daemon that gives up
  // fails the test instead of hanging it).
  bool WaitUnlessFinished(absl::Notification& n);
  // The last iteration it finished; -1 before the first.
  int64_t LastIteration();
  // Blocks until it reported `iteration` or later (no polling); false after
  // `limit`.
  bool WaitForIteration(int64_t iteration, absl::Duration limit);
  void Join();
  // A case that fails before joining stops its daemon instead of aborting
  // the whole binary (a joinable std::thread's destructor).
  ~RunningDaemon();
};

// Creates a daemon from `o` with the libtorch backend and starts Run on its
// own thread. Its observer records into the RunningDaemon, then calls
// `o.observer` (the test's own) if set. nullptr, with a failed expectation,
// when Create refuses `o`.
std::unique_ptr<RunningDaemon> LaunchDaemon(GossipDaemonOptions o, int64_t reach = -1,
                                            size_t train = 0);
// The same with `observer` as the test's own.
std::unique_ptr<RunningDaemon> LaunchDaemon(
    GossipDaemonOptions o, std::function<void(const NodeIterationReport&)> observer);

// The same with `backend` instead of TorchNodeBackend(): a test that wraps
// one node's computes (e.g. a replica that starts lying on cue) passes
// TorchNodeBackend() with its create_compute wrapped, for that node only.
std::unique_ptr<RunningDaemon> LaunchDaemonWith(GossipDaemonOptions o, NodeBackend backend);

// The founder of a swarm that forms once `expect_members` members are in:
// `o` with that count, listening on a port of its own (127.0.0.1:0, read
// back with gossip_address()), started by LaunchDaemon.
std::unique_ptr<RunningDaemon> LaunchFounder(GossipDaemonOptions o, int expect_members);

// Writes the tiny corpus at `path`: 400 lines, line i is `before` i `after`.
void WriteTinyCorpus(const std::string& path, absl::string_view before,
                     absl::string_view after = "");

// The fixture of the in-process daemon tests that train in a folder of
// their own: SetUp makes TempDir()/<prefix>-<test name> afresh (a node
// resumes from the checkpoints it finds there) with the tiny corpus in it.
class TinySwarmFolderTest : public ::testing::Test {
 protected:
  explicit TinySwarmFolderTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override;

  std::string dir_, corpus_;

 private:
  const std::string prefix_;
};

// The fixture of the daemon tests whose swarm admits by a policy: every
// daemon gets `policy_` as its admission and the fixed key of its seed,
// saved in the test's folder; they train on a tiny corpus of `corpus_line`
// lines.
class AdmissionSwarmTest : public ::testing::Test {
 protected:
  AdmissionSwarmTest(std::string swarm, std::string corpus_line)
      : swarm_(std::move(swarm)), corpus_line_(std::move(corpus_line)) {}
  void SetUp() override;
  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages, char seed);

  const std::string swarm_, corpus_line_;
  std::string dir_, corpus_;
  membership::AdmissionPolicy policy_;
};

// Saves identity::TestIdentity(seed) at `path` (overwriting it) and returns `path`.
std::string SaveSeededKey(const std::string& path, char seed);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_TESTS_INTEGRATION_RUNNING_DAEMON_H_
