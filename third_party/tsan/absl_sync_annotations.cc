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
// absl::Status's drops run here, instrumented, so that TSan sees the
// reference count's own order (below).
//
// The symbols are those of Debian's Abseil 20220623 (inline namespace
// `debian3`); an abort at start-up naming one means Abseil changed: update
// the names.
#include <dlfcn.h>

#include <atomic>
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
// its copies. A copy adds to its count in Abseil's inline header code
// (instrumented: TSan sees the atomic); a drop subtracts inside
// libabsl_status, and the drop that takes the count to zero frees the
// representation. Every drop is an acquire-release operation on the count,
// so each drop is ordered after the drops before it, and the free after
// every other copy's use.
//
// Note [Status drops as the count orders them]: every drop of a shared
// representation runs the library's drop here, compiled with TSan (the same
// two steps on the same header's StatusRep: the sole owner frees without
// subtracting; otherwise the drop that reaches zero frees), so TSan takes
// its order from the count itself, at the moment the count changes.
// Annotating around the library's drop cannot be exact: a release and an
// acquire taken before the library subtracts miss the drops another thread
// makes between the two (a thread delayed there, by dladdr below or by
// preemption, then freed the last copy unordered with that thread's copy;
// third_party/tsan/README.md, kind 4). status_count_test holds a thread in
// that window.
//
// gRPC's drops take the same order (acquire included: gRPC moves a Status
// between its threads with atomics TSan cannot see, and the count's order
// is often the only one TSan sees between them; taking only a release here
// left gRPC threads' reads of a Status created on another thread
// unordered). But gRPC also creates a Status on one thread (a cancellation,
// a failed call) and drops its last copy on another, with nothing TSan
// sees between the allocation and the drop, so a drop whose caller is gRPC
// runs with this thread's memory accesses ignored (its reads of the count
// and the free are not recorded; the atomics still order). What that loses
// is a use of the representation after gRPC freed it, which is a memory
// error that --config=asan reports.
// The same holds for a drop made inside libabsl_status itself
// (Status::PrepareToModify's copy-on-write drops the old representation on
// behalf of its caller): a CI run's TSan reported gRPC's server shutdown
// dropping, through PrepareToModify, a Status gRPC had allocated on the
// main thread (grpc_group_test, the allocation and the drop both inside
// gRPC's shutdown). Our own drops run the inline destructor, whose caller
// is our instrumented code, and stay recorded.
static bool CalledFromGrpc(const void* return_address) {
  Dl_info info;
  if (dladdr(return_address, &info) == 0 || info.dli_fname == nullptr) return false;
  return strstr(info.dli_fname, "/libgrpc") != nullptr ||
         strstr(info.dli_fname, "/libabsl_status.so") != nullptr;
}

// libabsl_status's Status::UnrefNonInlined, instrumented (see above).
static void DropShared(absl::status_internal::StatusRep* shared) {
  if (shared->ref.load(std::memory_order_acquire) == 1 ||
      shared->ref.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete shared;
  }
}

void _ZN4absl7debian36Status15UnrefNonInlinedEm(uintptr_t rep) {
  REAL(_ZN4absl7debian36Status15UnrefNonInlinedEm, void (*)(uintptr_t));
  if ((rep & 1) == 0) return real(rep);  // an inlined Status: nothing shared
  // A pointer to the shared representation, plus 1 (Status::RepToPointer).
  auto* const shared = reinterpret_cast<absl::status_internal::StatusRep*>(rep - 1);
  if (CalledFromGrpc(__builtin_return_address(0))) {
    __tsan_ignore_thread_begin();
    DropShared(shared);
    __tsan_ignore_thread_end();
  } else {
    DropShared(shared);
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
