// ThreadSanitizer over Debian's Abseil (--config=tsan only).
//
// Debian's libabsl_synchronization.so is not instrumented, so TSan cannot
// see the happens-before edges that absl::Mutex, CondVar, Notification,
// BlockingCounter and Barrier create, and would report every access those
// guard. Our objects' calls into them are redirected here at link time
// (-Wl,--wrap=<symbol>, see BUILD): each wrapper calls the real function and
// tells TSan what it did (__tsan_release before letting go of a mutex or
// signalling, __tsan_acquire after taking one or being woken). Only calls
// from our own code are seen; HB edges made inside other uninstrumented
// libraries (gRPC, libtorch) stay invisible, which is what the suppressions
// below are for.
//
// The symbols are those of Debian's Abseil 20220623 (inline namespace
// `debian3`); a link error here means Abseil changed: update the list.
#include <dlfcn.h>

#include <cstddef>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
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

// One wrapper per symbol: REAL(sym) is the library's, WRAP(sym) ours.
#define REAL(sym) __real_##sym
#define WRAP(sym) __wrap_##sym

extern "C" {

// --- Mutex: taking it acquires, releasing it releases ---------------------
#define LOCK0(sym)                       \
  void REAL(sym)(Mutex*);                \
  void WRAP(sym)(Mutex * mu) {           \
    REAL(sym)(mu);                       \
    __tsan_acquire(mu);                  \
  }
LOCK0(_ZN4absl7debian35Mutex4LockEv)
LOCK0(_ZN4absl7debian35Mutex10ReaderLockEv)

#define UNLOCK0(sym)                     \
  void REAL(sym)(Mutex*);                \
  void WRAP(sym)(Mutex * mu) {           \
    __tsan_release(mu);                  \
    REAL(sym)(mu);                       \
  }
UNLOCK0(_ZN4absl7debian35Mutex6UnlockEv)
UNLOCK0(_ZN4absl7debian35Mutex12ReaderUnlockEv)

#define TRYLOCK0(sym)                    \
  bool REAL(sym)(Mutex*);                \
  bool WRAP(sym)(Mutex * mu) {           \
    const bool got = REAL(sym)(mu);      \
    if (got) __tsan_acquire(mu);         \
    return got;                          \
  }
TRYLOCK0(_ZN4absl7debian35Mutex7TryLockEv)
TRYLOCK0(_ZN4absl7debian35Mutex13ReaderTryLockEv)

// LockWhen*: the lock is held on return whatever the result.
#define LOCKWHEN(sym)                                      \
  void REAL(sym)(Mutex*, const Condition&);                \
  void WRAP(sym)(Mutex * mu, const Condition& c) {         \
    REAL(sym)(mu, c);                                      \
    __tsan_acquire(mu);                                    \
  }
LOCKWHEN(_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE)
LOCKWHEN(_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE)

#define LOCKWHEN_T(sym, T)                                 \
  bool REAL(sym)(Mutex*, const Condition&, T);             \
  bool WRAP(sym)(Mutex * mu, const Condition& c, T t) {    \
    const bool r = REAL(sym)(mu, c, t);                    \
    __tsan_acquire(mu);                                    \
    return r;                                              \
  }
LOCKWHEN_T(_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE, Duration)
LOCKWHEN_T(_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE, Time)
LOCKWHEN_T(_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE,
           Duration)
LOCKWHEN_T(_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE, Time)

// Await*: lets go of the lock while waiting and takes it back.
void REAL(_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE)(Mutex*, const Condition&);
void WRAP(_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE)(Mutex* mu, const Condition& c) {
  __tsan_release(mu);
  REAL(_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE)(mu, c);
  __tsan_acquire(mu);
}
#define AWAIT_T(sym, T)                                    \
  bool REAL(sym)(Mutex*, const Condition&, T);             \
  bool WRAP(sym)(Mutex * mu, const Condition& c, T t) {    \
    __tsan_release(mu);                                    \
    const bool r = REAL(sym)(mu, c, t);                    \
    __tsan_acquire(mu);                                    \
    return r;                                              \
  }
AWAIT_T(_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE, Duration)
AWAIT_T(_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE, Time)

// --- CondVar: waiting lets go of the mutex and takes it back -------------
void REAL(_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE)(CondVar*, Mutex*);
void WRAP(_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE)(CondVar* cv, Mutex* mu) {
  __tsan_release(mu);
  REAL(_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE)(cv, mu);
  __tsan_acquire(mu);
}
#define CVWAIT_T(sym, T)                                   \
  bool REAL(sym)(CondVar*, Mutex*, T);                     \
  bool WRAP(sym)(CondVar * cv, Mutex * mu, T t) {          \
    __tsan_release(mu);                                    \
    const bool r = REAL(sym)(cv, mu, t);                   \
    __tsan_acquire(mu);                                    \
    return r;                                              \
  }
CVWAIT_T(_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE, Duration)
CVWAIT_T(_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE, Time)

// --- Notification, BlockingCounter, Barrier -------------------------------
void REAL(_ZN4absl7debian312Notification6NotifyEv)(Notification*);
void WRAP(_ZN4absl7debian312Notification6NotifyEv)(Notification* n) {
  __tsan_release(n);
  REAL(_ZN4absl7debian312Notification6NotifyEv)(n);
}
void REAL(_ZNK4absl7debian312Notification19WaitForNotificationEv)(const Notification*);
void WRAP(_ZNK4absl7debian312Notification19WaitForNotificationEv)(const Notification* n) {
  REAL(_ZNK4absl7debian312Notification19WaitForNotificationEv)(n);
  __tsan_acquire(Addr(n));
}
#define NOTIFWAIT_T(sym, T)                                \
  bool REAL(sym)(const Notification*, T);                  \
  bool WRAP(sym)(const Notification* n, T t) {             \
    const bool r = REAL(sym)(n, t);                        \
    if (r) __tsan_acquire(Addr(n));                        \
    return r;                                              \
  }
NOTIFWAIT_T(_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE,
            Duration)
NOTIFWAIT_T(_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE, Time)

bool REAL(_ZN4absl7debian315BlockingCounter14DecrementCountEv)(BlockingCounter*);
bool WRAP(_ZN4absl7debian315BlockingCounter14DecrementCountEv)(BlockingCounter* b) {
  __tsan_release(b);
  return REAL(_ZN4absl7debian315BlockingCounter14DecrementCountEv)(b);
}
void REAL(_ZN4absl7debian315BlockingCounter4WaitEv)(BlockingCounter*);
void WRAP(_ZN4absl7debian315BlockingCounter4WaitEv)(BlockingCounter* b) {
  REAL(_ZN4absl7debian315BlockingCounter4WaitEv)(b);
  __tsan_acquire(b);
}
bool REAL(_ZN4absl7debian37Barrier5BlockEv)(Barrier*);
bool WRAP(_ZN4absl7debian37Barrier5BlockEv)(Barrier* b) {
  __tsan_release(b);
  const bool r = REAL(_ZN4absl7debian37Barrier5BlockEv)(b);
  __tsan_acquire(b);
  return r;
}

}  // extern "C"
