#include "common/job_worker.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(JobWorkerTest, RunsQueuedJobsInOrderOnTheCallersThread) {
  std::vector<int> ran;
  JobWorker<int> w([&](int& j) { ran.push_back(j); }, 8, /*start_thread=*/false);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(w.Push(i));
  EXPECT_TRUE(ran.empty()) << "nothing runs before RunQueued";
  w.RunQueued();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2}));
  w.RunQueued();
  EXPECT_EQ(ran.size(), 3u);
}

TEST(JobWorkerTest, BeyondItsBoundTheOldestQueuedJobIsDropped) {
  std::vector<int> ran;
  JobWorker<int> w([&](int& j) { ran.push_back(j); }, 2, /*start_thread=*/false);
  for (int i = 0; i < 5; ++i) w.Push(i);
  w.RunQueued();
  EXPECT_EQ(ran, (std::vector<int>{3, 4}));
}

TEST(JobWorkerTest, ItsThreadRunsEveryJobInOrder) {
  absl::Mutex mu;
  std::vector<int> ran;
  {
    JobWorker<int> w(
        [&](int& j) {
          absl::MutexLock lock(&mu);
          ran.push_back(j);
        },
        100);
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(w.Push(i));
    absl::MutexLock lock(&mu);
    auto all = [&ran]() { return ran.size() == 50; };
    mu.Await(absl::Condition(&all));
  }
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ran[i], i);
}

}  // namespace
}  // namespace skipswarm::common
