// ThreadSanitizer over Debian's Abseil (--config=tsan only).
//
// Debian's libabsl_synchronization.so is not instrumented, so TSan cannot
// see the happens-before edges that absl::Mutex, CondVar, Notification,
// BlockingCounter and Barrier create, and would report every access those
// guard. This file defines those functions in the binary, which interposes
// the library's for every caller: our objects (bound at link time) and the
// uninstrumented libraries that call them through their PLT (gRPC core,
// libgpr, libgrpc++: gRPC's own mutexes are absl::Mutex, so the hand-offs
// it makes under them become visible too; Note [TSan and gRPC]). Each
// definition calls the library's (dlsym RTLD_NEXT) and tells TSan what it
// did (__tsan_release before letting go of a mutex or signalling,
// __tsan_acquire after taking one or being woken). HB edges made with
// plain atomics inside uninstrumented libraries stay invisible.
//
// absl::Status's reference count (an atomic inside libabsl_status) is
// annotated the same way, see below.
//
// The symbols are those of Debian's Abseil 20220623 (inline namespace
// `debian3`); an abort at start-up naming one means Abseil changed: update
// the names.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/time/time.h"

extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void __tsan_ignore_thread_begin();
void __tsan_ignore_thread_end();
}

// Abseil evaluates a waiter's Condition on whichever thread holds the mutex
// at the time (often the one unlocking it, after our __tsan_release), so
// the condition's reads would look unordered. Abseil built with TSan
// ignores accesses inside condition evaluation; so do we: this definition
// interposes the library's (the .so calls it through its PLT) and runs the
// real one with TSan ignoring this thread's accesses.
namespace absl {
inline namespace debian3 {
bool Condition::Eval() const {
  using EvalFn = bool (*)(const Condition*);
  static const EvalFn real =
      reinterpret_cast<EvalFn>(dlsym(RTLD_NEXT, "_ZNK4absl7debian39Condition4EvalEv"));
  __tsan_ignore_thread_begin();
  const bool r = real(this);
  __tsan_ignore_thread_end();
  return r;
}
}  // namespace debian3
}  // namespace absl

namespace {
using absl::Barrier;
using absl::BlockingCounter;
using absl::CondVar;
using absl::Condition;
using absl::Duration;
using absl::Mutex;
using absl::Notification;
using absl::Time;
void* Addr(const void* p) { return const_cast<void*>(p); }
}  // namespace

// The library's definition of `sym` (looked up once).
template <typename Fn>
Fn Next(const char* sym) {
  void* const real = dlsym(RTLD_NEXT, sym);
  if (real == nullptr) {
    fprintf(stderr, "absl_sync_annotations: %s not found in Abseil: update the names\n", sym);
    abort();
  }
  return reinterpret_cast<Fn>(real);
}
#define REAL(sym, Fn) static const auto real = Next<Fn>(#sym)

extern "C" {

// --- Mutex: taking it acquires, releasing it releases ---------------------
#define LOCK0(sym)                  \
  void sym(Mutex* mu) {             \
    REAL(sym, void (*)(Mutex*));    \
    real(mu);                       \
    __tsan_acquire(mu);             \
  }
LOCK0(_ZN4absl7debian35Mutex4LockEv)
LOCK0(_ZN4absl7debian35Mutex10ReaderLockEv)

#define UNLOCK0(sym)                \
  void sym(Mutex* mu) {             \
    REAL(sym, void (*)(Mutex*));    \
    __tsan_release(mu);             \
    real(mu);                       \
  }
UNLOCK0(_ZN4absl7debian35Mutex6UnlockEv)
UNLOCK0(_ZN4absl7debian35Mutex12ReaderUnlockEv)

#define TRYLOCK0(sym)               \
  bool sym(Mutex* mu) {             \
    REAL(sym, bool (*)(Mutex*));    \
    const bool got = real(mu);      \
    if (got) __tsan_acquire(mu);    \
    return got;                     \
  }
TRYLOCK0(_ZN4absl7debian35Mutex7TryLockEv)
TRYLOCK0(_ZN4absl7debian35Mutex13ReaderTryLockEv)

// LockWhen*: the lock is held on return whatever the result.
#define LOCKWHEN(sym)                                   \
  void sym(Mutex* mu, const Condition& c) {             \
    REAL(sym, void (*)(Mutex*, const Condition&));      \
    real(mu, c);                                        \
    __tsan_acquire(mu);                                 \
  }
LOCKWHEN(_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE)
LOCKWHEN(_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE)

#define LOCKWHEN_T(sym, T)                              \
  bool sym(Mutex* mu, const Condition& c, T t) {        \
    REAL(sym, bool (*)(Mutex*, const Condition&, T));   \
    const bool r = real(mu, c, t);                      \
    __tsan_acquire(mu);                                 \
    return r;                                           \
  }
LOCKWHEN_T(_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE, Duration)
LOCKWHEN_T(_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE, Time)
LOCKWHEN_T(_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE,
           Duration)
LOCKWHEN_T(_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE, Time)

// Await*: lets go of the lock while waiting and takes it back.
void _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex* mu, const Condition& c) {
  REAL(_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE, void (*)(Mutex*, const Condition&));
  __tsan_release(mu);
  real(mu, c);
  __tsan_acquire(mu);
}
#define AWAIT_T(sym, T)                                 \
  bool sym(Mutex* mu, const Condition& c, T t) {        \
    REAL(sym, bool (*)(Mutex*, const Condition&, T));   \
    __tsan_release(mu);                                 \
    const bool r = real(mu, c, t);                      \
    __tsan_acquire(mu);                                 \
    return r;                                           \
  }
AWAIT_T(_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE, Duration)
AWAIT_T(_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE, Time)

// --- CondVar: waiting lets go of the mutex and takes it back -------------
void _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* mu) {
  REAL(_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE, void (*)(CondVar*, Mutex*));
  __tsan_release(mu);
  real(cv, mu);
  __tsan_acquire(mu);
}
#define CVWAIT_T(sym, T)                                \
  bool sym(CondVar* cv, Mutex* mu, T t) {               \
    REAL(sym, bool (*)(CondVar*, Mutex*, T));           \
    __tsan_release(mu);                                 \
    const bool r = real(cv, mu, t);                     \
    __tsan_acquire(mu);                                 \
    return r;                                           \
  }
CVWAIT_T(_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE, Duration)
CVWAIT_T(_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE, Time)

// --- Notification, BlockingCounter, Barrier -------------------------------
// HasBeenNotified() is inline (instrumented): an acquire load of the
// Notification's flag, which Notify stores inside the library, unseen.
// Notify releases on the flag's address as well, so a thread that sees
// the flag set is ordered after the notifier like one that waited (it
// reported the notifier's earlier writes, e.g. a daemon thread's result
// read once its `finished` was seen). The flag follows the mutex
// (notification.h: `Mutex mutex_; std::atomic<bool> notified_yet_;`).
static_assert(sizeof(Notification) == 2 * sizeof(absl::Mutex),
              "absl::Notification is no longer {Mutex, atomic<bool>}");
static void* NotifiedFlag(const Notification* n) {
  return Addr(reinterpret_cast<const char*>(n) + sizeof(absl::Mutex));
}
void _ZN4absl7debian312Notification6NotifyEv(Notification* n) {
  REAL(_ZN4absl7debian312Notification6NotifyEv, void (*)(Notification*));
  __tsan_release(n);
  __tsan_release(NotifiedFlag(n));
  real(n);
}
void _ZNK4absl7debian312Notification19WaitForNotificationEv(const Notification* n) {
  REAL(_ZNK4absl7debian312Notification19WaitForNotificationEv, void (*)(const Notification*));
  real(n);
  __tsan_acquire(Addr(n));
}
#define NOTIFWAIT_T(sym, T)                             \
  bool sym(const Notification* n, T t) {                \
    REAL(sym, bool (*)(const Notification*, T));        \
    const bool r = real(n, t);                          \
    if (r) __tsan_acquire(Addr(n));                     \
    return r;                                           \
  }
NOTIFWAIT_T(_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE,
            Duration)
NOTIFWAIT_T(_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE, Time)

bool _ZN4absl7debian315BlockingCounter14DecrementCountEv(BlockingCounter* b) {
  REAL(_ZN4absl7debian315BlockingCounter14DecrementCountEv, bool (*)(BlockingCounter*));
  __tsan_release(b);
  return real(b);
}
void _ZN4absl7debian315BlockingCounter4WaitEv(BlockingCounter* b) {
  REAL(_ZN4absl7debian315BlockingCounter4WaitEv, void (*)(BlockingCounter*));
  real(b);
  __tsan_acquire(b);
}
bool _ZN4absl7debian37Barrier5BlockEv(Barrier* b) {
  REAL(_ZN4absl7debian37Barrier5BlockEv, bool (*)(Barrier*));
  __tsan_release(b);
  const bool r = real(b);
  __tsan_acquire(b);
  return r;
}

// --- absl::Status: the shared representation's reference count -----------
// A non-OK Status with a message shares one heap representation between
// its copies, counted with an atomic inside libabsl_status; the copy that
// drops the count to zero frees it. Every drop releases and acquires on the
// representation (the count's acquire-release order), so the free is
// ordered after every other copy's use. gRPC hands such Statuses between
// its threads (call errors), which is where TSan saw the free unordered.
//
// Known gap: the order is taken before the library's drop subtracts, with
// dladdr (CalledFromGrpc) in between. A thread delayed there that then
// frees the last copy misses the releases of another thread that copied
// and dropped meanwhile, and TSan reports the free against that copy. Our
// code avoids sharing a Status across a hand-off (DataNodeDriver moves its
// reports to the clock thread); why running the drop here, instrumented,
// was not taken: third_party/tsan/README.md, kind 4.
//
// gRPC also creates Statuses on one thread (a cancellation, a failed call)
// and drops them on another after moving them through its own
// uninstrumented hand-offs, so nothing orders the allocation before the
// free. When the caller is gRPC, the drop runs with this thread's accesses
// ignored: the free is not recorded. What that loses is a use of the
// representation after gRPC freed it, which is a memory error that
// --config=asan reports.
static bool CalledFromGrpc(const void* return_address) {
  Dl_info info;
  if (dladdr(return_address, &info) == 0 || info.dli_fname == nullptr) return false;
  return strstr(info.dli_fname, "/libgrpc") != nullptr;
}

void _ZN4absl7debian36Status15UnrefNonInlinedEm(uintptr_t rep) {
  REAL(_ZN4absl7debian36Status15UnrefNonInlinedEm, void (*)(uintptr_t));
  if ((rep & 1) != 0) {  // a pointer to the shared representation, plus 1
    void* const shared = reinterpret_cast<void*>(rep - 1);
    __tsan_release(shared);
    __tsan_acquire(shared);
  }
  if (CalledFromGrpc(__builtin_return_address(0))) {
    __tsan_ignore_thread_begin();
    real(rep);
    __tsan_ignore_thread_end();
  } else {
    real(rep);
  }
}

}  // extern "C"

// --- absl::Cord: the shared tree's reference count --------------------------
// Copies of a Cord share one tree, counted with atomics; the copy whose drop
// frees it does so inside libabsl_cord (Cord::DestroyCordSlow, called by
// ~Cord), where TSan cannot see the count, so a read of the tree through
// another copy looked unordered with the free. Every destroying drop
// releases and acquires on the count (the address the inline header code's
// count operations use), as the count's acquire-release order does.
namespace absl {
inline namespace debian3 {
void Cord::DestroyCordSlow() {
  using Fn = void (*)(Cord*);
  static const Fn real = Next<Fn>("_ZN4absl7debian34Cord15DestroyCordSlowEv");
  void* const count = &contents_.as_tree()->refcount;
  __tsan_release(count);
  __tsan_acquire(count);
  real(this);
}
}  // namespace debian3
}  // namespace absl
