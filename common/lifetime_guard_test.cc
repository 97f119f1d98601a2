#include "common/lifetime_guard.h"

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

// These tests wait on notifications, never on fixed sleeps.

TEST(LifetimeGuardTest, RunsWrappedCallbackWhileOpen) {
  LifetimeGuard guard;
  int runs = 0;
  auto f = guard.Wrap([&](int n) { runs += n; });
  f(2);
  f(3);
  EXPECT_EQ(runs, 5);
}

TEST(LifetimeGuardTest, ClosedGuardTurnsCallbacksIntoNoOps) {
  int runs = 0;
  std::function<void()> late;
  {
    LifetimeGuard guard;
    late = guard.Wrap([&] { ++runs; });
    EXPECT_FALSE(guard.closed());
  }  // destroyed: closed
  late();
  EXPECT_EQ(runs, 0);
}

TEST(LifetimeGuardTest, TokenEntersOnlyWhileOpen) {
  LifetimeGuard guard;
  LifetimeGuard::Token token = guard.token();
  {
    LifetimeGuard::Entry entry = token.Enter();
    EXPECT_TRUE(static_cast<bool>(entry));
  }
  guard.Close();
  EXPECT_TRUE(guard.closed());
  EXPECT_FALSE(static_cast<bool>(token.Enter()));
}

TEST(LifetimeGuardTest, CloseWaitsForACallbackRunningOnAnotherThread) {
  auto guard = std::make_unique<LifetimeGuard>();
  absl::Notification entered, release;
  std::atomic<bool> finished{false};
  std::thread t(guard->Wrap([&] {
    entered.Notify();
    release.WaitForNotification();
    finished = true;
  }));
  entered.WaitForNotification();
  std::thread closer([&] {
    guard->Close();
    // Close() returned: the callback must be over.
    EXPECT_TRUE(finished.load());
  });
  release.Notify();
  closer.join();
  t.join();
}

TEST(LifetimeGuardTest, CloseFromInsideItsOwnCallbackDoesNotWaitForItself) {
  auto guard = std::make_unique<LifetimeGuard>();
  bool after = false;
  auto f = guard->Wrap([&] {
    guard.reset();  // the owner destroyed from its own callback
    after = true;
  });
  f();
  EXPECT_TRUE(after);
  EXPECT_EQ(guard, nullptr);
}

// A timer owner destroyed while its timers fire on the real clock's thread:
// after the destructor returns, no callback may touch it. `owner_gone` is
// set right after destruction; a callback that sees it ran too late.
TEST(LifetimeGuardTest, NoCallbackRunsAfterItsOwnerIsDestroyedOnTheRealClock) {
  auto clock = RealClock::Create();
  std::atomic<int> late{0};
  std::atomic<int> ran{0};
  struct Owner {
    Owner(Clock* c, std::atomic<bool>* g, std::atomic<int>* l, std::atomic<int>* r)
        : clock(c), gone(g), late(l), ran(r) {}
    Clock* clock;
    std::atomic<bool>* gone;
    std::atomic<int>* late;
    std::atomic<int>* ran;
    LifetimeGuard guard;
    ~Owner() { guard.Close(); }
    void Arm() {
      clock->RunAfter(absl::ZeroDuration(), guard.Wrap([this] {
        ran->fetch_add(1);
        // Some work, so the destructor has a window to overlap.
        volatile int spin = 0;
        for (int i = 0; i < 2000; ++i) spin = spin + i;
        if (gone->load()) late->fetch_add(1);
      }));
    }
  };
  for (int i = 0; i < 1000; ++i) {
    std::atomic<bool> gone{false};
    auto owner = std::make_unique<Owner>(clock.get(), &gone, &late, &ran);
    for (int k = 0; k < 4; ++k) owner->Arm();
    owner.reset();
    gone = true;
  }
  EXPECT_EQ(late.load(), 0);
}

}  // namespace
}  // namespace skipswarm::common
