#include "node/compute/task_runner.h"

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

// WaitIdle counts a task that is running, not only the queued ones: a
// caller flushing pushes before it leaves must not go while one is on the
// wire.
TEST(ThreadTaskRunnerTest, WaitIdleWaitsForTheRunningTask) {
  ThreadTaskRunner runner;
  EXPECT_TRUE(runner.WaitIdle(absl::Seconds(60)));
  absl::Notification started, release;
  bool done = false;
  runner.Post([&] {
    started.Notify();
    release.WaitForNotification();
    done = true;
  });
  started.WaitForNotification();  // the queue is empty now
  // A wait that must not end may be short: a slow machine only makes it
  // pass more easily.
  EXPECT_FALSE(runner.WaitIdle(absl::Milliseconds(20)));
  release.Notify();
  EXPECT_TRUE(runner.WaitIdle(absl::Seconds(60)));
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace skipswarm::node
