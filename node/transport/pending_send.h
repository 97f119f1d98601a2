// Internal helper shared by the transports: one Send's completion, run at
// most once, with an optional deadline timer on the injected clock.
//
// Thread rule: thread-safe; `done` runs on the completing thread with no
// lock held.
#ifndef SKIPSWARM_NODE_TRANSPORT_PENDING_SEND_H_
#define SKIPSWARM_NODE_TRANSPORT_PENDING_SEND_H_

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "node/transport/transport.h"

namespace skipswarm::node {

class PendingSend : public std::enable_shared_from_this<PendingSend> {
 public:
  // `clock` must outlive every timer this object schedules.
  PendingSend(common::Clock* clock, SendDone done)
      : clock_(clock), done_(std::move(done)) {}

  // Completes with DEADLINE_EXCEEDED after `timeout` unless completed first.
  void ArmDeadline(absl::Duration timeout) {
    std::weak_ptr<PendingSend> weak = weak_from_this();
    common::TimerId id = clock_->RunAfter(timeout, [weak, timeout] {
      if (auto self = weak.lock()) {
        self->Complete(absl::DeadlineExceededError(absl::StrCat(
            "no ack within ", absl::FormatDuration(timeout))));
      }
    });
    bool cancel_now = false;
    {
      absl::MutexLock lock(&mu_);
      if (done_) {
        timer_ = id;
      } else {
        cancel_now = true;
      }
    }
    if (cancel_now) clock_->Cancel(id);
  }

  // Runs `done` with `status` if nothing ran it yet. Returns whether it ran.
  bool Complete(absl::Status status) {
    SendDone done;
    common::TimerId timer;
    {
      absl::MutexLock lock(&mu_);
      if (!done_) return false;
      done = std::move(done_);
      done_ = nullptr;
      timer = timer_;
    }
    if (timer != common::kNoTimer) clock_->Cancel(timer);
    done(std::move(status));
    return true;
  }

  // Whether `done` already ran (or is running).
  bool completed() {
    absl::MutexLock lock(&mu_);
    return !done_;
  }

  // Completes later on the clock (never inline in the caller).
  void CompleteSoon(absl::Status status, absl::Duration after = absl::ZeroDuration()) {
    clock_->RunAfter(after, [self = shared_from_this(),
                             status = std::move(status)]() mutable {
      self->Complete(std::move(status));
    });
  }

 private:
  common::Clock* const clock_;
  absl::Mutex mu_;
  SendDone done_ ABSL_GUARDED_BY(mu_);
  common::TimerId timer_ ABSL_GUARDED_BY(mu_) = common::kNoTimer;
};

// The deadline a frame asks for, or `fallback` when it names none.
inline absl::Duration FrameDeadline(const proto::FrameHeader& header,
                                    absl::Duration fallback) {
  return header.deadline_ms() > 0 ? absl::Milliseconds(header.deadline_ms())
                                  : fallback;
}

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_PENDING_SEND_H_
