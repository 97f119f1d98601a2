// Note [GPU contention]: a volunteer's GPU is theirs first. With
// --pause_on_gpu_contention a node watches the compute processes on its GPU
// and pauses (the volunteer's pause, Note [Paused members] in
// training_members.h: signed record, routes go around it, refused for the
// last unpaused replica of a stage) while another process holds memory
// there, and resumes once it has gone:
//
//   GpuContentionOptions o;                          // pause after 10 s,
//   o.own_pids = {getpid()};                         // resume after 60 s
//   GpuContentionMonitor m(o);
//   m.Observe(lister->List(), clock->SteadyNow());   // every poll
//   if (m.state().contended) ...                     // pause, why: m.state().why
//
// Rules (hysteresis against flapping):
//  * A sample lists the compute processes on our GPU. Processes that are
//    not ours (own_pids) are foreign. A foreign process present in every
//    sample for `pause_after` makes the GPU contended.
//  * Contended, the GPU is free again once no foreign process has been
//    seen for `resume_after`.
//  * A failed sample (the lister's error or timeout) is no evidence either
//    way: it starts, extends and ends nothing, except that a check failing
//    for `resume_after` ends a contention (a broken check must not pause a
//    node for good) and the foreign timer starts again. Failures are
//    reported once per run of failures, not per sample.
//  * A sample that lists processes but none of ours, while `expect_own`
//    (our process holds a context on the GPU), cannot tell ours from theirs
//    (the lister sees another PID namespace: a container without the
//    host's PIDs) and counts as a failed sample.
//
// GpuContentionWatch runs a lister every `poll_every` on its own thread
// (the production lister runs nvidia-smi, nvidia_smi.h, which can take
// seconds) and keeps the monitor's state for the daemon's poll.
//
// Thread rule: GpuContentionMonitor is thread-compatible; GpuContentionWatch
// is thread-safe.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_GPU_CONTENTION_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_GPU_CONTENTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace skipswarm::node {

// One compute process on the watched GPU.
struct GpuProcess {
  int64_t pid = 0;
  int64_t used_bytes = -1;  // -1: the lister does not know
};

// The compute processes on one GPU now.
class GpuProcessLister {
 public:
  virtual ~GpuProcessLister() = default;
  // Blocks at most the lister's own timeout; an error says why it failed.
  virtual absl::StatusOr<std::vector<GpuProcess>> List() = 0;
  // What it watches, for logs ("GPU 0 via nvidia-smi").
  virtual std::string Describe() const = 0;
};

struct GpuContentionOptions {
  absl::Duration pause_after = absl::Seconds(10);
  absl::Duration resume_after = absl::Seconds(60);
  absl::Duration poll_every = absl::Seconds(2);  // GpuContentionWatch only
  std::vector<int64_t> own_pids;
  bool expect_own = true;
};

struct GpuContentionState {
  bool contended = false;
  std::string why;              // while contended: which processes, how much
  int64_t foreign_bytes = 0;    // foreign memory in the last good sample
  int64_t samples = 0;          // samples observed
  int64_t failures = 0;         // failed samples, all time
  bool failing = false;         // the latest sample failed
  std::string failure;          // its error
};

class GpuContentionMonitor {
 public:
  explicit GpuContentionMonitor(GpuContentionOptions options) : options_(std::move(options)) {}

  // Feeds the sample taken at steady time `now` (non-decreasing). Returns a
  // line worth logging when something changed (contended, free again, the
  // check failing, the check working again); nullopt otherwise.
  std::optional<std::string> Observe(const absl::StatusOr<std::vector<GpuProcess>>& sample,
                                     absl::Duration now);
  const GpuContentionState& state() const { return state_; }

 private:
  std::optional<std::string> Failed(const absl::Status& error, absl::Duration now);

  const GpuContentionOptions options_;
  GpuContentionState state_;
  std::optional<absl::Duration> foreign_since_;  // first of the current run
  std::optional<absl::Duration> clear_since_;    // contended: first sample without
  std::optional<absl::Duration> failing_since_;
};

class GpuContentionWatch {
 public:
  // `clock` is borrowed and must outlive this. Starts polling at once (the
  // first sample now, then every options.poll_every).
  GpuContentionWatch(GpuContentionOptions options, std::shared_ptr<GpuProcessLister> lister,
                     common::Clock* clock);
  ~GpuContentionWatch();  // stops and joins the thread

  GpuContentionState state() const;
  std::string Describe() const { return lister_->Describe(); }
  // Blocks until at least `n` samples were observed (tests).
  void WaitForSamples(int64_t n) const;

 private:
  struct Ticks;
  void Loop();

  const std::shared_ptr<GpuProcessLister> lister_;
  common::Clock* const clock_;
  const absl::Duration poll_every_;
  const std::shared_ptr<Ticks> ticks_;  // shared with pending timer callbacks
  mutable absl::Mutex mu_;
  GpuContentionMonitor monitor_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_GPU_CONTENTION_H_
