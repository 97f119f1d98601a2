// TaskRunner: where a StageCompute runs its work. Tests and the simulator
// post onto the injected clock (ClockTaskRunner: deterministic on a
// SimClock, one task at a time in posting order); the daemon gives compute
// its own thread (ThreadTaskRunner) so libtorch never blocks the clock's
// timer thread or the transport's threads.
//
//   ThreadTaskRunner runner;                       // owns one worker thread
//   runner.Post([] { /* heavy work */ });
//
// Thread rule: Post is thread-safe; tasks run one at a time, in posting
// order, with no runner lock held.
#ifndef SKIPSWARM_NODE_COMPUTE_TASK_RUNNER_H_
#define SKIPSWARM_NODE_COMPUTE_TASK_RUNNER_H_

#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace skipswarm::node {

using Task = absl::AnyInvocable<void()>;

class TaskRunner {
 public:
  virtual ~TaskRunner() = default;
  // Runs `task` later (never inside Post).
  virtual void Post(Task task) = 0;
};

// Runs tasks as zero-delay timers of `clock` (which must outlive it).
class ClockTaskRunner final : public TaskRunner {
 public:
  explicit ClockTaskRunner(common::Clock* clock) : clock_(clock) {}
  void Post(Task task) override;

 private:
  common::Clock* const clock_;
};

// Runs tasks on one dedicated thread. The destructor runs the tasks already
// posted, then joins; it must not run on the worker thread.
class ThreadTaskRunner final : public TaskRunner {
 public:
  ThreadTaskRunner();
  ~ThreadTaskRunner() override;
  void Post(Task task) override;

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_TASK_RUNNER_H_
