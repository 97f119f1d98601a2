#include "common/atomic_file.h"
#include "manifest/swarm_file.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "identity/identity.h"
#include "manifest/join_target.h"

namespace skipswarm::manifest {
namespace {

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::string SwarmFileToJson(const SwarmFile& file) {
  nlohmann::ordered_json j;
  j["format"] = 1;
  j["manifest_sha256"] = file.manifest_sha256;
  j["founder_id"] = file.founder_id;
  j["swarm_name"] = file.swarm_name;
  j["bootstrap"] = file.bootstrap;
  return j.dump(2) + "\n";
}

absl::StatusOr<SwarmFile> ParseSwarmFile(absl::string_view text) {
  if (text.size() > kMaxSwarmFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the swarm file is ", text.size(),
                                                   " bytes; at most ", kMaxSwarmFileBytes));
  }
  // No exceptions: a malformed file yields a discarded value.
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                                 /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("the swarm file is not a JSON object");
  }
  auto str = [&j](const char* key, std::string* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end()) return absl::OkStatus();
    if (!it->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("swarm file: \"", key, "\" is not a string"));
    }
    *out = it->get<std::string>();
    return absl::OkStatus();
  };
  auto format = j.find("format");
  if (format != j.end() && !(format->is_number_integer() && format->get<int64_t>() == 1)) {
    return absl::InvalidArgumentError(
        "swarm file: unknown \"format\" (this build reads format 1; upgrade skipswarm)");
  }
  SwarmFile f;
  for (auto& [key, out] : {std::pair<const char*, std::string*>{"manifest_sha256", &f.manifest_sha256},
                          {"founder_id", &f.founder_id},
                          {"swarm_name", &f.swarm_name}}) {
    absl::Status s = str(key, out);
    if (!s.ok()) return s;
  }
  f.manifest_sha256 = absl::AsciiStrToLower(f.manifest_sha256);
  if (!IsHex64(f.manifest_sha256)) {
    return absl::InvalidArgumentError(
        "swarm file: \"manifest_sha256\" must be 64 hex digits (the founder writes it with "
        "--write_swarm_file)");
  }
  auto boot = j.find("bootstrap");
  if (boot == j.end() || !boot->is_array() || boot->empty()) {
    return absl::InvalidArgumentError(
        "swarm file: \"bootstrap\" must be a non-empty list of HOST:PORT addresses");
  }
  if (boot->size() > kMaxBootstrapAddresses) {
    return absl::InvalidArgumentError(absl::StrCat("swarm file: ", boot->size(),
                                                   " bootstrap addresses; at most ",
                                                   kMaxBootstrapAddresses));
  }
  for (const nlohmann::json& a : *boot) {
    if (!a.is_string()) {
      return absl::InvalidArgumentError("swarm file: a \"bootstrap\" entry is not a string");
    }
    absl::Status ok = CheckJoinAddress(a.get<std::string>());
    if (!ok.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("swarm file: ", ok.message()));
    }
    f.bootstrap.push_back(a.get<std::string>());
  }
  return f;
}

absl::StatusOr<SwarmFile> ReadSwarmFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read swarm file ", path));
  std::string text(kMaxSwarmFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return ParseSwarmFile(text);
}

absl::Status WriteSwarmFile(const std::string& path, const SwarmFile& file) {
  return common::WriteFileAtomically(path, SwarmFileToJson(file), 0644);
}

}  // namespace skipswarm::manifest
