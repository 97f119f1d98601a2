// absl::Status's reference count under TSan (absl_sync_annotations.cc,
// Note [Status drops as the count orders them]): every drop is ordered
// after the drops before it, as the count's acquire-release order makes
// it, so the free of a shared representation comes after every other
// copy's use, also a copy that another thread makes and drops while the
// freeing thread is already inside its drop; and a drop taken for gRPC's
// orders too (the second case).
//
// First case: the freeing thread is held at the first library call the interposed drop
// makes (dladdr: is gRPC the caller?) until the other thread has copied the
// Status and dropped its copies. An annotation that takes its order before
// the count is decremented (the interposer before this fix: release and
// acquire, then dladdr, then the library's uninstrumented drop) misses that
// thread's drops, and TSan reports the free against its copy; the test then
// fails on TSan's exit code.
//
// Only --config=tsan interposes the drop; other builds skip both cases.
#include <dlfcn.h>

#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

#if defined(__SANITIZE_THREAD__)
#define SKIPSWARM_STATUS_COUNT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SKIPSWARM_STATUS_COUNT_TSAN 1
#endif
#endif

namespace {

// Set on the freeing thread just before its drop: dladdr holds that thread
// once, until `copier_done` is set.
thread_local bool hold_next_dladdr = false;
// Set around a drop that is to be taken for gRPC's: dladdr names libgrpc as
// the caller's object.
thread_local bool as_if_from_grpc = false;
absl::Notification* copier_go = nullptr;
// Relaxed on purpose: waiting for it must give the freeing thread no order
// TSan could use (a Notification would order the copy before the free by
// itself, which is what the count has to do here).
std::atomic<bool>* copier_done = nullptr;
int holds = 0;  // written on the freeing thread only

}  // namespace

// Interposes libc's dladdr in this binary; the interposed Status drop calls
// it on every drop of a shared representation.
extern "C" int dladdr(const void* address, Dl_info* info) noexcept {
  using Fn = int (*)(const void*, Dl_info*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dladdr"));
  if (hold_next_dladdr) {
    hold_next_dladdr = false;
    ++holds;
    copier_go->Notify();
    while (!copier_done->load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  const int found = real(address, info);
  if (as_if_from_grpc && found != 0) info->dli_fname = "/usr/lib/x86_64-linux-gnu/libgrpc.so.29";
  return found;
}

namespace {

TEST(StatusCountTest, TheFreeIsOrderedAfterACopyMadeDuringTheFreeingDrop) {
#ifndef SKIPSWARM_STATUS_COUNT_TSAN
  GTEST_SKIP() << "only --config=tsan interposes Status drops";
#else
  absl::Notification go;
  std::atomic<bool> done{false};
  copier_go = &go;
  copier_done = &done;
  // Not OK and with a message: one shared representation, counted.
  absl::Status mine = absl::CancelledError("stopped");
  // As a clock thread handed a task that holds a copy: it copies the Status
  // again, then drops both copies while the first owner is dropping its own.
  std::thread copier([theirs = mine, &go, &done]() mutable {
    go.WaitForNotification();
    {
      const absl::Status copy = theirs;
      EXPECT_TRUE(absl::IsCancelled(copy));
    }
    theirs = absl::OkStatus();
    done.store(true, std::memory_order_relaxed);
  });
  hold_next_dladdr = true;
  mine = absl::OkStatus();  // the last copy: frees the representation
  hold_next_dladdr = false;
  copier.join();
  EXPECT_EQ(holds, 1) << "the drop never called dladdr: no copy ran inside it";
#endif
}

// gRPC moves a Status between its threads with atomics TSan cannot see; the
// count's order is then the only one TSan sees between a thread that used
// the Status and dropped its copy and the gRPC thread that drops the last.
// A drop taken for gRPC's (its accesses ignored) must still acquire: with
// a release only, this thread's read below is reported against the write
// made before the other thread's drop.
TEST(StatusCountTest, AGrpcDropIsOrderedAfterEarlierDrops) {
#ifndef SKIPSWARM_STATUS_COUNT_TSAN
  GTEST_SKIP() << "only --config=tsan interposes Status drops";
#else
  absl::Status ours = absl::UnavailableError("call failed");
  int written_before_our_drop = 0;  // plain: ordered only through the count
  std::atomic<bool> dropped{false};  // relaxed: gives no order of its own
  std::thread grpc_thread([theirs = ours, &written_before_our_drop, &dropped]() mutable {
    while (!dropped.load(std::memory_order_relaxed)) std::this_thread::yield();
    as_if_from_grpc = true;
    theirs = absl::OkStatus();  // the last copy, dropped "by gRPC"
    as_if_from_grpc = false;
    EXPECT_EQ(written_before_our_drop, 1);
  });
  written_before_our_drop = 1;
  ours = absl::OkStatus();  // not the last copy: the count goes 2 -> 1
  dropped.store(true, std::memory_order_relaxed);
  grpc_thread.join();
#endif
}

}  // namespace
