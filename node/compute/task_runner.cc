#include "node/compute/task_runner.h"

#include <utility>

namespace skipswarm::node {

void ClockTaskRunner::Post(Task task) {
  clock_->RunAfter(absl::ZeroDuration(), std::move(task));
}

ThreadTaskRunner::ThreadTaskRunner() : thread_([this] { Loop(); }) {}

ThreadTaskRunner::~ThreadTaskRunner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ThreadTaskRunner::Post(Task task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void ThreadTaskRunner::Loop() {
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !tasks_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace skipswarm::node
