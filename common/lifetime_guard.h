// LifetimeGuard: the one way an object makes callbacks that may outlive it
// safe (clock timers, gRPC reactions, completions from other threads).
//
// The owner holds a guard and wraps every callback that captures `this`;
// its destructor calls Close() first. From then on a wrapped callback that
// has not started does nothing, and Close() blocks until the wrapped
// callbacks already running on other threads return. So once Close()
// returns, nothing wrapped touches the owner again, whichever thread a
// callback was on. (Clock::Cancel alone cannot promise that: it does not wait
// for a callback that is already running.)
//
//   class Poller {
//    public:
//     ~Poller() {
//       guard_.Close();            // first: waits for a Poll() in progress
//       clock_->Cancel(timer_);    // tidy only; the wrapper already no-ops
//     }
//     void Arm() { timer_ = clock_->RunAfter(delay, guard_.Wrap([this] { Poll(); })); }
//    private:
//     common::LifetimeGuard guard_;  // (other members)
//   };
//
// A callback that must answer even when the owner is gone (a StatusOr
// provider) enters explicitly:
//
//   [token = guard_.token()] { auto entry = token.Enter();
//                              if (!entry) return absl::UnavailableError("stopping");
//                              ... }
//
// Thread rule: thread-safe. Close() waits for callbacks, so it must not be
// called while holding a lock that a wrapped callback may take. Entries on
// the calling thread itself are not waited for (a callback may destroy its
// owner, e.g. a driver torn down from its own completion), but such a
// callback must not touch the owner after that.
#ifndef SKIPSWARM_COMMON_LIFETIME_GUARD_H_
#define SKIPSWARM_COMMON_LIFETIME_GUARD_H_

#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace skipswarm::common {

class LifetimeGuard {
 private:
  struct State {
    absl::Mutex mu;
    bool closed ABSL_GUARDED_BY(mu) = false;
    // One entry per wrapped callback running now: the thread it runs on.
    std::vector<std::thread::id> running ABSL_GUARDED_BY(mu);
  };

 public:
  // Proof that a callback may use the owner; the owner's Close() waits until
  // it is destroyed. Movable, not copyable. False if the guard was closed.
  class Entry {
   public:
    Entry() = default;  // not entered
    Entry(Entry&& other) noexcept = default;
    Entry& operator=(Entry&& other) noexcept {
      if (this != &other) {
        Leave();
        state_ = std::move(other.state_);
      }
      return *this;
    }
    Entry(const Entry&) = delete;
    ~Entry() { Leave(); }
    explicit operator bool() const { return state_ != nullptr; }

   private:
    friend class LifetimeGuard;
    explicit Entry(std::shared_ptr<State> state) : state_(std::move(state)) {}
    void Leave();
    std::shared_ptr<State> state_;  // null: not entered
  };

  // What a callback captures (cheap to copy; safe to keep after the owner
  // is gone).
  class Token {
   public:
    // A token of no guard: never enters.
    Token() = default;
    // Enters unless the guard is closed.
    Entry Enter() const;

   private:
    friend class LifetimeGuard;
    explicit Token(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::shared_ptr<State> state_;  // null: of no guard
  };

  LifetimeGuard() : state_(std::make_shared<State>()) {}
  // Closes (if the owner did not already).
  ~LifetimeGuard() { Close(); }
  LifetimeGuard(const LifetimeGuard&) = delete;
  LifetimeGuard& operator=(const LifetimeGuard&) = delete;

  Token token() const { return Token(state_); }

  // `callback`, run only while the guard is open. The wrapper returns void
  // and forwards its arguments.
  template <typename F>
  auto Wrap(F callback) const {
    return [token = token(), callback = std::move(callback)](auto&&... args) mutable {
      static_assert(std::is_void_v<decltype(callback(std::forward<decltype(args)>(args)...))>,
                    "wrap only callbacks that return void; enter a token() otherwise");
      if (Entry entry = token.Enter()) callback(std::forward<decltype(args)>(args)...);
    };
  }

  // Stops new entries and waits for the entries on other threads to end.
  // Idempotent.
  void Close();

  // Whether Close() has been called (for owners that skip work early).
  bool closed() const;

 private:
  // Held by the guard and by every token: a callback that runs after the
  // owner (and its guard) are gone still finds the closed flag.
  std::shared_ptr<State> state_;
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_LIFETIME_GUARD_H_
