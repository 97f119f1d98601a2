// Fuzz target: a config file (common/cli/config_file.h), the JSON a user or
// operator hands every subcommand with --config. The input is the file's
// text: ParseConfigText, then, on what parses, ApplyConfig (runner.h), the
// path `skipswarm <command> --config=FILE` takes, onto this file's own flags
// (a Command of one flag of each kind, a prefix and an alias), so values
// reach absl's flag parsers without touching any real command's flags.
//
// Nothing may crash, throw or read out of bounds, and one property is
// asserted (abort, so both libFuzzer and fuzz_driver.cc report the input):
// the entries written back as a JSON object of strings parse to the same
// entries (keys and flag text survive the round trip unchanged).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/string_view.h"
#include "common/cli/command.h"
#include "common/cli/config_file.h"
#include "common/cli/runner.h"

ABSL_FLAG(std::string, fz_name, "", "A string flag.");
ABSL_FLAG(int, fz_count, 0, "An int flag.");
ABSL_FLAG(int64_t, fz_bytes, 0, "An int64 flag.");
ABSL_FLAG(double, fz_ratio, 0, "A double flag.");
ABSL_FLAG(bool, fz_insecure, false, "A bool flag.");
ABSL_FLAG(std::vector<std::string>, fz_peers, {}, "A list flag.");
ABSL_FLAG(uint64_t, fz_seed, 0, "A uint64 flag.");

namespace {

namespace cli = skipswarm::common::cli;

const cli::Command& FuzzCommand() {
  static const cli::Command* const command = [] {
    auto* c = new cli::Command{"fuzz", "config fuzzer", "fuzz --config=FILE",
                               {"tests/fuzz/config_fuzzer.cc"},
                               [](const std::vector<std::string>&) { return 0; }};
    c->flag_aliases = {{"n", "fz_name"}};
    c->flag_prefix = "fz_";
    return c;
  }();
  return *command;
}

void Fail(const char* what) {
  std::fprintf(stderr, "config_fuzzer: %s\n", what);
  std::abort();
}

// How far inputs got (printed at exit with FUZZ_STATS=1).
struct Reached {
  long inputs = 0, parsed = 0, applied = 0;
  ~Reached() {
    if (std::getenv("FUZZ_STATS") != nullptr) {
      std::fprintf(stderr, "config_fuzzer: %ld inputs, %ld parsed, %ld applied\n", inputs,
                   parsed, applied);
    }
  }
} reached;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<cli::ConfigEntry>> entries = cli::ParseConfigText(text, "fuzz.json");
  ++reached.inputs;
  if (!entries.ok()) return 0;
  ++reached.parsed;

  // Round trip: keys are unique after parsing (a repeated key keeps one
  // entry), and every value is flag text, so a JSON object of strings
  // carries them exactly.
  nlohmann::ordered_json back = nlohmann::ordered_json::object();
  for (const cli::ConfigEntry& e : *entries) back[e.key] = e.value;
  if (back.size() != entries->size()) Fail("a key appears twice among the entries");
  absl::StatusOr<std::vector<cli::ConfigEntry>> again =
      cli::ParseConfigText(back.dump(), "fuzz.json");
  if (!again.ok()) Fail("the entries written back do not parse");
  if (again->size() != entries->size()) Fail("the round trip changed the entry count");
  for (size_t i = 0; i < again->size(); ++i) {
    if ((*again)[i].key != (*entries)[i].key || (*again)[i].value != (*entries)[i].value) {
      Fail("the round trip changed an entry");
    }
  }

  reached.applied += cli::ApplyConfig(FuzzCommand(), *entries, "fuzz.json").ok();
  return 0;
}
