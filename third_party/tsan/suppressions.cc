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
      "";
}

extern "C" const char* __tsan_default_options() {
  // second_deadlock_stack: both stacks of a lock-order report.
  return "second_deadlock_stack=1";
}
