// JobWorker: a queue of jobs run in order by one background thread, for
// work a caller must not block on (network pulls and fetches queued from
// an iteration callback).
//
//   JobWorker<Pull> pulls([this](Pull& p) { Fetch(p); }, /*max_queued=*/8);
//   pulls.Push({stage, iteration});   // never blocks on the job
//   // ~JobWorker: queued jobs are dropped, a running one finishes.
//
// With start_thread = false nothing runs until RunQueued(), which runs the
// queued jobs on the caller's thread (tests on a simulated clock).
//
// Thread rule: thread-safe. `run` is called on one thread at a time, never
// under the queue's lock. Declare the JobWorker after every member `run`
// uses, so it stops (and joins) before they go.
#ifndef SKIPSWARM_COMMON_JOB_WORKER_H_
#define SKIPSWARM_COMMON_JOB_WORKER_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace skipswarm::common {

template <typename Job>
class JobWorker {
 public:
  // Beyond `max_queued` (at least 1) the oldest queued job is dropped.
  JobWorker(std::function<void(Job&)> run, size_t max_queued, bool start_thread = true)
      : run_(std::move(run)), max_queued_(std::max<size_t>(1, max_queued)) {
    if (start_thread) thread_ = std::thread([this] { Work(); });
  }
  ~JobWorker() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      jobs_.clear();
    }
    if (thread_.joinable()) thread_.join();
  }
  JobWorker(const JobWorker&) = delete;
  JobWorker& operator=(const JobWorker&) = delete;

  // Queues `job`; false (and the job is not queued) once stopping.
  bool Push(Job job) {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    jobs_.push_back(std::move(job));
    while (jobs_.size() > max_queued_) jobs_.pop_front();
    return true;
  }

  // Runs the queued jobs on this thread (start_thread = false).
  void RunQueued() {
    while (std::optional<Job> job = Next(/*wait=*/false)) run_(*job);
  }

 private:
  void Work() {
    while (std::optional<Job> job = Next(/*wait=*/true)) run_(*job);
  }

  // The next job; nullopt when stopping, or (without `wait`) when none.
  std::optional<Job> Next(bool wait) {
    absl::MutexLock lock(&mu_);
    if (wait) {
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !jobs_.empty();
      };
      mu_.Await(absl::Condition(&ready));
    }
    if (stopping_ || jobs_.empty()) return std::nullopt;
    std::optional<Job> job(std::move(jobs_.front()));
    jobs_.pop_front();
    return job;
  }

  const std::function<void(Job&)> run_;
  const size_t max_queued_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the fields above exist
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_JOB_WORKER_H_
