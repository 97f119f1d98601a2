// TSan's built-in suppressions and options for --config=tsan (TSan reads
// these hooks at start-up). Every suppression says why it is not ours to
// fix; the races our code had were fixed instead.
//
// Report a new race by fixing it. Add a line here only for a race inside a
// library we do not build with TSan (libtorch, OpenBLAS, gRPC, glog,
// Abseil), with the reason beside it.

extern "C" const char* __tsan_default_suppressions() {
  return
      // Interceptors (memmove, epoll_*, ...) called from inside these
      // uninstrumented libraries: the libraries order their own accesses
      // with Abseil mutexes and atomics compiled without TSan, which TSan
      // cannot see (only our own calls into Abseil are annotated), so every
      // such access looks unordered. Reports about our code's accesses are
      // not affected by these lines.
      "called_from_lib:libabsl_graphcycles_internal.so\n"  // Abseil's deadlock graph
      "called_from_lib:libabsl_synchronization.so\n"
      "called_from_lib:libgrpc.so\n"                         // gRPC core (event engine, polling)
      "called_from_lib:libgrpc++.so\n"
      "called_from_lib:libgpr.so\n"
      // gRPC's own libraries, called only from gRPC: upb is gRPC's internal
      // protobuf runtime (ours is libprotobuf) and libssl does gRPC's TLS
      // (our code calls no SSL_* function). Their memcpy / free calls work
      // on gRPC's buffers, which gRPC hands between its threads with
      // uninstrumented atomics (Note [TSan and gRPC]).
      "called_from_lib:libupb.so\n"
      "called_from_lib:libssl.so\n"
      // libcrypto: gRPC's TLS record protection frees and copies its cipher
      // state on whichever gRPC thread holds the connection. Our own calls
      // (identity, signatures, hashes) lose little here: TSan never saw
      // libcrypto's reads of our buffers (uninstrumented assembly), only
      // the interceptors it calls on its own state.
      "called_from_lib:libcrypto.so\n"
      // absl::Status and absl::Cord keep their contents (message, payloads,
      // cord buffers) in shared representations, reference-counted with
      // atomics inside these uninstrumented libraries. gRPC creates such
      // Statuses on its threads (call errors, cancellation) and moves them
      // to others through its own uninstrumented hand-offs; the only
      // accesses TSan saw were these libraries' memcpy / memcmp / free on
      // those contents. What is lost for our code is small: TSan already
      // saw none of these libraries' plain loads and stores, and races on a
      // Status or Cord object itself are in its inline header code (copy,
      // move, assignment), which is instrumented.
      "called_from_lib:libabsl_status.so\n"
      "called_from_lib:libabsl_cord.so\n"
      // Abseil's string and time formatting, called by gRPC core on its
      // polling threads: a server's Shutdown creates its cancellation
      // errors on the calling thread, and a poller copies their messages
      // (absl::StrCat / StrAppend) and time properties (absl::FormatTime /
      // ParseTime) after gRPC's lock-free hand-off. Seen in a daemon's
      // teardown, both stacks inside gRPC. Our own calls lose only these
      // functions' memcpy / memcmp on their arguments; our writes and reads
      // of the same strings elsewhere are still checked.
      "called_from_lib:libabsl_strings.so\n"
      "called_from_lib:libabsl_time.so\n"
      // Abseil's time-zone cache (cctz) creates its lock in a function-local
      // static on first use; the check that it exists already is a plain
      // load compiled without TSan, so a gRPC thread locking it looked
      // unordered with the thread that created it. Only races with this
      // function on a stack; the lock itself stays visible (a
      // called_from_lib line hid it, and the zones it publishes then
      // looked racy).
      "race:cctz::time_zone::Impl::LoadTimeZone\n"
      // glibc's tzset (under mktime, which glog calls for every message's
      // time stamp) frees and copies its TZ string under glibc's internal
      // tzset_lock, which TSan cannot see (glibc is not instrumented): two
      // threads logging at once looked like a race on that string. This
      // names a glibc function, never one of ours.
      "race:tzset_internal\n"
      "";
}

extern "C" const char* __tsan_default_options() {
  // second_deadlock_stack: both stacks of a lock-order report.
  return "second_deadlock_stack=1";
}
