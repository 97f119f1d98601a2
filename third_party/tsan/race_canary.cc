// A deliberate data race, to prove a --config=tsan build reports: two
// threads write `shared` with nothing ordering them. ThreadSanitizer must
// report it, and the binary then exits non-zero (TSan's exit code after a
// report). tools/concurrency_check.sh runs it before the checked tests and
// fails when it passes: a TSan build that silently reported nothing (a
// flag dropped, an options string that turns exit codes off, a suppression
// that matches everything) would make every clean run meaningless.
#include <thread>

namespace {

int shared = 0;

__attribute__((noinline)) void Write(int v) { shared = v; }

}  // namespace

int main() {
  std::thread a(Write, 1);
  std::thread b(Write, 2);
  a.join();
  b.join();
  return shared == 0 ? 1 : 0;
}
