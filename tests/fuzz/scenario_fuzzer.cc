// Fuzz target: the scenario files a user hands `skipswarm plan`, `sim` and
// `local --wan`: scheduler/'s topology format and SkipPipe's schedule.json
// through ParseScenario (scheduler/scenario.h), and the simulator's scenario
// through ParseSimScenario (sim/scenario.h: inline topologies, generators,
// churn traces expanded with a fixed seed, detector and hybrid settings).
//
// Input: byte 0 selects the parser (even: ParseScenario, odd:
// ParseSimScenario; the seeds use '0' and '1'); the rest is the file's
// text. Relative file names inside a simulator scenario resolve against
// sim/scenarios (the working directory must be the repository root, as in
// `bazel test` and README.md's runs), so the seeds' CSV generators load.
// Nothing may crash, throw or read out of bounds; no property beyond that.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "scheduler/scenario.h"
#include "sim/scenario.h"

namespace {

// How far inputs got (printed at exit with FUZZ_STATS=1).
struct Reached {
  long scheduler = 0, scheduler_ok = 0, sim = 0, sim_ok = 0;
  ~Reached() {
    if (std::getenv("FUZZ_STATS") != nullptr) {
      std::fprintf(stderr, "scenario_fuzzer: scheduler %ld inputs, %ld parsed; sim %ld, %ld\n",
                   scheduler, scheduler_ok, sim, sim_ok);
    }
  }
} reached;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    ++reached.scheduler;
    reached.scheduler_ok += skipswarm::scheduler::ParseScenario(text).ok();
  } else {
    ++reached.sim;
    reached.sim_ok +=
        skipswarm::sim::ParseSimScenario(text, "sim/scenarios", /*seed=*/7).ok();
  }
  return 0;
}
