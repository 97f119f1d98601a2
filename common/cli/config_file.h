// The optional config file shared by every subcommand: a JSON object whose
// keys are the command's flag names (without "--") and whose values are
// strings, numbers, booleans, or arrays (joined with commas, for list flags).
// Comments (// and /* */) are allowed. Flags given on the command line
// override the file.
//
//   { "planner": "skippipe",  // route planner
//     "budget_ms": 200,
//     "peers": ["10.0.0.2:7000", "10.0.0.3:7000"] }
//
// Errors name the file and the key: an unknown key, a value of the wrong
// kind, a value the flag rejects, or malformed JSON (with line and column).
#ifndef SKIPSWARM_COMMON_CLI_CONFIG_FILE_H_
#define SKIPSWARM_COMMON_CLI_CONFIG_FILE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::common::cli {

// One `key = value` setting, value rendered as flag text ("true", "200").
struct ConfigEntry {
  std::string key;
  std::string value;
};

// Parses JSON text into entries, in file order. `source` names the file in
// error messages.
absl::StatusOr<std::vector<ConfigEntry>> ParseConfigText(
    absl::string_view text, absl::string_view source);

// Reads and parses a config file.
absl::StatusOr<std::vector<ConfigEntry>> ReadConfigFile(const std::string& path);

}  // namespace skipswarm::common::cli

#endif  // SKIPSWARM_COMMON_CLI_CONFIG_FILE_H_
