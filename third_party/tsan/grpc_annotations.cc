// ThreadSanitizer over Debian's gRPC (--config=tsan only).
// Note [TSan and gRPC] in third_party/tsan/README.md.
//
// Debian's libgrpc is not instrumented, so TSan cannot see the hand-off
// between the thread that starts a batch of operations on a call and the
// thread that later runs its completion: it happens through gRPC's own
// mutexes and atomics. Everything the grpc++ header code (inlined into our
// binaries, so instrumented) and our reactors did before starting a batch
// looks unordered with what the completion does, and TSan reports it.
//
// gRPC's contract gives that order: a batch's effects (and everything before
// grpc_call_start_batch on the starting thread) happen before its completion
// is delivered. This file tells TSan so, per batch, keyed by the batch's
// completion tag:
//   - release(tag) where a batch or a server request is handed to gRPC
//     (grpc_call_start_batch, grpc_server_request_call,
//     grpc_server_request_registered_call), and where gRPC's thread that
//     finished the work posts the completion (grpc_cq_end_op: what that
//     thread wrote into the results, or allocated for a new server call,
//     is ordered before the consumer reads it);
//   - acquire(tag) where its completion is delivered: when
//     grpc_completion_queue_next / _pluck return the tag (sync and
//     completion-queue API), or when a callback completion queue runs the
//     tag's functor (callback API, see below).
// Nothing else is ordered: two callbacks of different batches stay
// unordered unless our code orders them, so a race in our reactors is still
// reported.
//
// These are gRPC's public C entry points; defining them in the binary
// interposes them for every caller (our objects, libgrpc++), and each
// forwards to libgrpc's definition (dlsym RTLD_NEXT).
//
// Callback API: a callback completion queue does not return the tag; it
// calls tag->functor_run(tag, ok) from one of gRPC's threads. When a batch
// is started with a tag whose functor_run is one of grpc++'s known functors
// (below), that pointer is swapped for a trampoline that acquires the tag
// and then runs the original. The tags are reused (streams) and grpc++
// sets functor_run again before each use, so each start checks afresh.
// A functor this file does not know is left alone (its completion stays
// unordered and would be reported: add it to kFunctors).
//
// Server reactors: grpc++ counts a server call's outstanding reactions
// with an atomic (acquire-release) and runs OnDone after the last one.
// Most decrements are in the header code (instrumented), but the one after
// an OnCancel reaction runs inside libgrpc++, where TSan cannot see it, so
// the order from the other reactions to OnDone and the reactor's teardown
// was lost. libgrpc++ calls ScheduleOnDone (and CallOnCancel) only after
// the count (the cancel count) reached zero; the definitions below take
// that order from the counter before running the library's, and publish
// the OnCancel reaction's effects on the count (CancelReaction).
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "grpc/grpc.h"
#include "grpcpp/support/server_callback.h"

extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
}

struct grpc_cq_completion;  // gRPC core's, opaque here

// The executable's copies of grpc++'s inline functors, resolved at link time
// (weak: null when no object of the binary instantiates the functor).
void ExeSuccessTagRun(grpc_completion_queue_functor*, int) __asm__(
    "_ZN4grpc8internal22CallbackWithSuccessTag9StaticRunEP29grpc_completion_queue_functori")
    __attribute__((weak));
void ExeStatusTagRun(grpc_completion_queue_functor*, int) __asm__(
    "_ZN4grpc8internal21CallbackWithStatusTag9StaticRunEP29grpc_completion_queue_functori")
    __attribute__((weak));

namespace {

using FunctorRun = void (*)(grpc_completion_queue_functor*, int);

// grpc++'s functors (the inline header ones and libgrpc++'s server request
// tags), by mangled name: gRPC 1.51 as Debian ships it. A missing symbol
// only means that functor is not trampolined.
constexpr const char* kFunctors[] = {
    "_ZN4grpc8internal22CallbackWithSuccessTag9StaticRunEP29grpc_completion_queue_functori",
    "_ZN4grpc8internal21CallbackWithStatusTag9StaticRunEP29grpc_completion_queue_functori",
    "_ZN4grpc6Server15CallbackRequestINS_21CallbackServerContextEE15CallbackCallTag9StaticRun"
    "EP29grpc_completion_queue_functori",
    "_ZN4grpc6Server15CallbackRequestINS_28GenericCallbackServerContextEE15CallbackCallTag9"
    "StaticRunEP29grpc_completion_queue_functori",
};
constexpr int kNumFunctors = sizeof(kFunctors) / sizeof(kFunctors[0]);
// Each known functor has up to two copies: the executable's (inline
// functions our objects instantiate, not exported, so not visible to dlsym)
// and libgrpc++'s.
constexpr int kCopies = 2;

struct Originals {
  FunctorRun run[kNumFunctors][kCopies] = {};
};

const Originals& KnownFunctors() {
  static const Originals* const originals = [] {
    auto* o = new Originals;
    o->run[0][0] = &ExeSuccessTagRun;
    o->run[1][0] = &ExeStatusTagRun;
    for (int i = 0; i < kNumFunctors; ++i) {
      o->run[i][1] = reinterpret_cast<FunctorRun>(dlsym(RTLD_DEFAULT, kFunctors[i]));
    }
    // Every callback-API binary has the first; without it gRPC's names
    // changed and callback completions would be reported as races.
    if (o->run[0][0] == nullptr && o->run[0][1] == nullptr) {
      fprintf(stderr, "grpc_annotations: %s not found (gRPC changed?): update kFunctors\n",
              kFunctors[0]);
    }
    return o;
  }();
  return *originals;
}

template <int I, int C>
void Trampoline(grpc_completion_queue_functor* tag, int ok) {
  __tsan_acquire(tag);
  KnownFunctors().run[I][C](tag, ok);
}

template <int I>
constexpr FunctorRun kTrampolines[kCopies] = {&Trampoline<I, 0>, &Trampoline<I, 1>};
constexpr const FunctorRun* kAllTrampolines[kNumFunctors] = {
    kTrampolines<0>, kTrampolines<1>, kTrampolines<2>, kTrampolines<3>};

// Swaps a known functor's run for its trampoline. Every tag gRPC hands back
// to a callback queue is a functor (functor_run first); the tags of the
// other queues are grpc++ objects (a vtable first) or caller pointers, and
// match no entry.
void Redirect(void* tag) {
  auto* functor = static_cast<grpc_completion_queue_functor*>(tag);
  const FunctorRun run = functor->functor_run;
  if (run == nullptr) return;
  const Originals& known = KnownFunctors();
  for (int i = 0; i < kNumFunctors; ++i) {
    for (int c = 0; c < kCopies; ++c) {
      if (known.run[i][c] != nullptr && run == known.run[i][c]) {
        functor->functor_run = kAllTrampolines[i][c];
        return;
      }
    }
  }
}

// Called before the tag is handed to gRPC: from here until its completion
// runs, only gRPC touches it. The swap comes before the release so that
// the completion side (grpc++ sets functor_run again) is ordered after it.
void HandOff(void* tag) {
  if (tag == nullptr) return;
  Redirect(tag);
  __tsan_release(tag);
}

void Delivered(const grpc_event& ev) {
  if (ev.type == GRPC_OP_COMPLETE && ev.tag != nullptr) __tsan_acquire(ev.tag);
}

template <typename Fn>
Fn Real(const char* name) {
  void* const sym = dlsym(RTLD_NEXT, name);
  if (sym == nullptr) abort();  // not libgrpc: nothing to forward to
  return reinterpret_cast<Fn>(sym);
}

}  // namespace

extern "C" {

grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops,
                                      void* tag, void* reserved) {
  using Fn = grpc_call_error (*)(grpc_call*, const grpc_op*, size_t, void*, void*);
  static const Fn real = Real<Fn>("grpc_call_start_batch");
  HandOff(tag);
  return real(call, ops, nops, tag, reserved);
}

grpc_call_error grpc_server_request_call(grpc_server* server, grpc_call** call,
                                         grpc_call_details* details,
                                         grpc_metadata_array* request_metadata,
                                         grpc_completion_queue* cq_bound_to_call,
                                         grpc_completion_queue* cq_for_notification,
                                         void* tag_new) {
  using Fn = grpc_call_error (*)(grpc_server*, grpc_call**, grpc_call_details*,
                                 grpc_metadata_array*, grpc_completion_queue*,
                                 grpc_completion_queue*, void*);
  static const Fn real = Real<Fn>("grpc_server_request_call");
  HandOff(tag_new);
  return real(server, call, details, request_metadata, cq_bound_to_call, cq_for_notification,
              tag_new);
}

grpc_call_error grpc_server_request_registered_call(
    grpc_server* server, void* registered_method, grpc_call** call, gpr_timespec* deadline,
    grpc_metadata_array* request_metadata, grpc_byte_buffer** optional_payload,
    grpc_completion_queue* cq_bound_to_call, grpc_completion_queue* cq_for_notification,
    void* tag_new) {
  using Fn = grpc_call_error (*)(grpc_server*, void*, grpc_call**, gpr_timespec*,
                                 grpc_metadata_array*, grpc_byte_buffer**,
                                 grpc_completion_queue*, grpc_completion_queue*, void*);
  static const Fn real = Real<Fn>("grpc_server_request_registered_call");
  HandOff(tag_new);
  return real(server, registered_method, call, deadline, request_metadata, optional_payload,
              cq_bound_to_call, cq_for_notification, tag_new);
}

}  // extern "C"

// gRPC core's internal completion entry point (C++ linkage), called through
// the PLT from inside libgrpc.
void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage), void* done_arg,
                    grpc_cq_completion* storage, bool internal) {
  using Fn = void (*)(grpc_completion_queue*, void*, absl::Status,
                      void (*)(void*, grpc_cq_completion*), void*, grpc_cq_completion*, bool);
  static const Fn real = Real<Fn>(
      "_Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_P18grpc_cq_"
      "completionES1_S6_b");
  if (tag != nullptr) __tsan_release(tag);
  real(cq, tag, std::move(error), done, done_arg, storage, internal);
}

extern "C" {

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq, gpr_timespec deadline,
                                      void* reserved) {
  using Fn = grpc_event (*)(grpc_completion_queue*, gpr_timespec, void*);
  static const Fn real = Real<Fn>("grpc_completion_queue_next");
  const grpc_event ev = real(cq, deadline, reserved);
  Delivered(ev);
  return ev;
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag,
                                       gpr_timespec deadline, void* reserved) {
  using Fn = grpc_event (*)(grpc_completion_queue*, void*, gpr_timespec, void*);
  static const Fn real = Real<Fn>("grpc_completion_queue_pluck");
  const grpc_event ev = real(cq, tag, deadline, reserved);
  Delivered(ev);
  return ev;
}

}  // extern "C"

namespace {

// Stands in for a server reactor while libgrpc++ runs its OnCancel reaction
// (on an executor thread): runs the reactor's, then releases on the call's
// reaction count, which libgrpc++ decrements next where TSan cannot see it.
// The final decrement (instrumented, or ScheduleOnDone below) acquires it,
// so OnCancel is ordered before OnDone. libgrpc++ calls only OnCancel and
// InternalInlineable on it, once.
class CancelReaction final : public grpc::internal::ServerReactor {
 public:
  CancelReaction(grpc::internal::ServerReactor* reactor, void* reactions)
      : reactor_(reactor), reactions_(reactions) {}

  void OnCancel() override {
    reactor_->OnCancel();
    __tsan_release(reactions_);
    delete this;
  }
  void OnDone() override {}
  bool InternalInlineable() override { return reactor_->InternalInlineable(); }

 private:
  grpc::internal::ServerReactor* const reactor_;
  void* const reactions_;
};

}  // namespace

namespace grpc::internal {

void ServerCallbackCall::ScheduleOnDone(bool inline_ondone) {
  using Fn = void (*)(ServerCallbackCall*, bool);
  static const Fn real = Real<Fn>("_ZN4grpc8internal18ServerCallbackCall14ScheduleOnDoneEb");
  __tsan_acquire(&callbacks_outstanding_);
  real(this, inline_ondone);
}

void ServerCallbackCall::CallOnCancel(ServerReactor* reactor) {
  using Fn = void (*)(ServerCallbackCall*, ServerReactor*);
  static const Fn real =
      Real<Fn>("_ZN4grpc8internal18ServerCallbackCall12CallOnCancelEPNS0_13ServerReactorE");
  __tsan_acquire(&on_cancel_conditions_remaining_);
  real(this, new CancelReaction(reactor, &callbacks_outstanding_));
}

}  // namespace grpc::internal
