// WorkerThreads: the threads a relay client starts for its circuits and
// attachments, so that its destructor can wait for all of them and
// finished ones are joined as it goes.
//
//   WorkerThreads workers;
//   workers.Start([] { ... blocking work ... });
//   workers.Reap();     // now and then: joins the finished ones
//   workers.JoinAll();  // once whatever they block on has been woken
//
// Thread rule: thread-safe; JoinAll must not run on one of its threads.
#ifndef SKIPSWARM_NODE_TRANSPORT_RELAY_WORKER_THREADS_H_
#define SKIPSWARM_NODE_TRANSPORT_RELAY_WORKER_THREADS_H_

#include <functional>
#include <list>
#include <memory>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace skipswarm::node {

class WorkerThreads {
 public:
  WorkerThreads() = default;
  ~WorkerThreads() { JoinAll(); }
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  void Start(std::function<void()> work) {
    auto worker = std::make_shared<Worker>();
    absl::MutexLock lock(&mu_);
    worker->thread = std::thread([worker, work = std::move(work), this] {
      work();
      absl::MutexLock lock(&mu_);
      worker->done = true;
    });
    workers_.push_back(std::move(worker));
  }

  void Reap() {
    std::list<std::shared_ptr<Worker>> finished;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = workers_.begin(); it != workers_.end();) {
        if ((*it)->done) {
          finished.push_back(std::move(*it));
          it = workers_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& w : finished) w->thread.join();
  }

  void JoinAll() {
    std::list<std::shared_ptr<Worker>> all;
    {
      absl::MutexLock lock(&mu_);
      all.swap(workers_);
    }
    for (auto& w : all) {
      if (w->thread.joinable()) w->thread.join();
    }
  }

 private:
  struct Worker {
    std::thread thread;
    bool done = false;  // guarded by the owner's mu_
  };
  absl::Mutex mu_;
  std::list<std::shared_ptr<Worker>> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_RELAY_WORKER_THREADS_H_
