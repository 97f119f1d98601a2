#include "common/cli/config_file.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_file.h"

namespace skipswarm::common::cli {
namespace {

using json = nlohmann::ordered_json;  // keeps the file's key order

// Renders a scalar JSON value as flag text; false if it is not a scalar.
bool ScalarToFlagText(const json& value, std::string* out) {
  if (value.is_string()) {
    *out = value.get<std::string>();
  } else if (value.is_boolean()) {
    *out = value.get<bool>() ? "true" : "false";
  } else if (value.is_number_integer() || value.is_number_unsigned()) {
    *out = value.dump();
  } else if (value.is_number_float()) {
    *out = absl::StrCat(value.get<double>());
  } else {
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<ConfigEntry>> ParseConfigText(
    absl::string_view text, absl::string_view source) {
  json doc = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                         /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (doc.is_discarded()) {
    // Re-parse with exceptions only to recover the position of the error.
    std::string where;
    try {
      json unused = json::parse(text.begin(), text.end(), nullptr, true, true);
      (void)unused;
    } catch (const json::exception& e) {  // parse_error, or out_of_range (1e400)
      where = e.what();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("config file '", source, "' is not valid JSON: ", where));
  }
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file '", source, "' must hold a JSON object of flag = value"));
  }
  std::vector<ConfigEntry> entries;
  for (const auto& [key, value] : doc.items()) {
    ConfigEntry entry{key, ""};
    if (value.is_array()) {
      std::vector<std::string> parts;
      for (const json& item : value) {
        std::string part;
        if (!ScalarToFlagText(item, &part)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "config file '", source, "': key '", key,
              "': list items must be strings, numbers or booleans"));
        }
        parts.push_back(part);
      }
      entry.value = absl::StrJoin(parts, ",");
    } else if (!ScalarToFlagText(value, &entry.value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config file '", source, "': key '", key,
          "': value must be a string, number, boolean or list, got ",
          value.type_name()));
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::StatusOr<std::vector<ConfigEntry>> ReadConfigFile(const std::string& path) {
  // Bounded, regular files only: --config=/dev/zero read gigabytes.
  absl::StatusOr<std::string> text = ReadBoundedFile(path, "config file");
  if (!text.ok()) return text.status();
  return ParseConfigText(*text, path);
}

}  // namespace skipswarm::common::cli
