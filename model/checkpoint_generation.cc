#include "model/checkpoint_generation.h"

#include <glog/logging.h>
#include <openssl/sha.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "model/checkpoint.h"
#include "nlohmann/json.hpp"

namespace skipswarm::model {
namespace {

namespace fs = std::filesystem;

constexpr char kManifest[] = "MANIFEST.json";
constexpr char kPrefix[] = "gen-";
// A manifest is a few hundred bytes per stage; anything far larger is not one.
constexpr int64_t kMaxManifestBytes = int64_t{1} << 20;

std::string StageFileName(int stage) { return absl::StrCat("stage-", stage, ".ckpt"); }

// Checks that `bytes` is a checkpoint of `stage` at `iteration` of the
// model `config_hash`.
absl::Status CheckStageBytes(absl::string_view bytes, int stage, int64_t iteration,
                             const std::string& config_hash) {
  SS_ASSIGN_OR_RETURN(CheckpointInfo info, ReadCheckpointInfo(bytes));
  if (info.stage != stage || info.step != iteration) {
    return absl::InvalidArgumentError(absl::StrCat("holds stage ", info.stage, " at step ",
                                                   info.step, ", not stage ", stage, " at ",
                                                   iteration));
  }
  if (info.config.ConfigHash() != config_hash) {
    return absl::InvalidArgumentError("is a checkpoint of another model config");
  }
  return absl::OkStatus();
}

std::string ManifestJson(const GenerationManifest& m) {
  nlohmann::json j;
  j["iteration"] = m.iteration;
  j["config_hash"] = m.config_hash;
  j["num_stages"] = m.num_stages;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& [s, st] : m.stages) {
    stages.push_back({{"stage", s}, {"file", st.file}, {"bytes", st.bytes}, {"sha256", st.sha256}});
  }
  j["stages"] = stages;
  return j.dump(2) + "\n";
}

absl::StatusOr<GenerationManifest> ParseManifest(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("manifest is malformed: ", why));
  };
  if (!j.is_object()) return bad("not a JSON object");
  GenerationManifest m;
  const auto it = j.find("iteration");
  const auto hash = j.find("config_hash");
  const auto n = j.find("num_stages");
  const auto stages = j.find("stages");
  if (it == j.end() || !it->is_number_integer()) return bad("no iteration");
  if (hash == j.end() || !hash->is_string()) return bad("no config_hash");
  if (n == j.end() || !n->is_number_integer()) return bad("no num_stages");
  if (stages == j.end() || !stages->is_array()) return bad("no stages");
  m.iteration = it->get<int64_t>();
  m.config_hash = hash->get<std::string>();
  m.num_stages = n->get<int>();
  for (const nlohmann::json& s : *stages) {
    if (!s.is_object() || !s.contains("stage") || !s["stage"].is_number_integer() ||
        !s.contains("file") || !s["file"].is_string() || !s.contains("bytes") ||
        !s["bytes"].is_number_integer() || !s.contains("sha256") || !s["sha256"].is_string()) {
      return bad("a stage entry lacks stage/file/bytes/sha256");
    }
    GenerationManifest::Stage st;
    st.file = s["file"].get<std::string>();
    st.bytes = s["bytes"].get<int64_t>();
    st.sha256 = s["sha256"].get<std::string>();
    // The file must stay inside the generation's folder.
    if (st.file.empty() || absl::StrContains(st.file, "/") || st.file[0] == '.') {
      return bad(absl::StrCat("stage file name '", st.file, "'"));
    }
    m.stages[s["stage"].get<int>()] = st;
  }
  return m;
}

}  // namespace

std::string FoundGeneration::StagePath(int stage) const {
  auto it = manifest.stages.find(stage);
  return it == manifest.stages.end() ? "" : absl::StrCat(dir, "/", it->second.file);
}

std::string GenerationDir(const std::string& root, int64_t iteration) {
  return absl::StrFormat("%s/%s%010d", root, kPrefix, iteration);
}

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  std::string hex;
  for (unsigned char c : digest) absl::StrAppendFormat(&hex, "%02x", c);
  return hex;
}

std::vector<int64_t> ListGenerationFolders(const std::string& root) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int64_t iteration;
    if (!absl::StartsWith(name, kPrefix) ||
        !absl::SimpleAtoi(absl::string_view(name).substr(sizeof(kPrefix) - 1), &iteration) ||
        !it->is_directory(ec)) {
      continue;
    }
    out.push_back(iteration);
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

absl::StatusOr<GenerationManifest> ReadManifest(const std::string& dir) {
  const std::string manifest_path = absl::StrCat(dir, "/", kManifest);
  std::error_code ec;
  if (!fs::exists(manifest_path, ec)) {
    return absl::NotFoundError("no manifest (a generation cut short before its manifest)");
  }
  const auto size = fs::file_size(manifest_path, ec);
  if (ec || static_cast<int64_t>(size) > kMaxManifestBytes) {
    return absl::DataLossError("manifest unreadable or too large");
  }
  SS_ASSIGN_OR_RETURN(std::string text, common::ReadFileBytes(manifest_path));
  return ParseManifest(text);
}

absl::StatusOr<GenerationManifest> CheckGeneration(const std::string& dir,
                                                   const std::string& config_hash,
                                                   int num_stages) {
  SS_ASSIGN_OR_RETURN(GenerationManifest m, ReadManifest(dir));
  if (m.config_hash != config_hash) {
    return absl::FailedPreconditionError("a generation of another model config");
  }
  if (m.num_stages != num_stages) {
    return absl::FailedPreconditionError(
        absl::StrCat("has ", m.num_stages, " stages, the model ", num_stages));
  }
  for (int s = 0; s < num_stages; ++s) {
    auto st = m.stages.find(s);
    if (st == m.stages.end()) return absl::DataLossError(absl::StrCat("stage ", s, " missing"));
    const std::string path = absl::StrCat(dir, "/", st->second.file);
    absl::StatusOr<std::string> bytes = common::ReadFileBytes(path);
    if (!bytes.ok()) {
      return absl::DataLossError(absl::StrCat("stage ", s, " file unreadable: ",
                                              bytes.status().message()));
    }
    if (static_cast<int64_t>(bytes->size()) != st->second.bytes ||
        Sha256Hex(*bytes) != st->second.sha256) {
      return absl::DataLossError(absl::StrCat("stage ", s, " file ", st->second.file,
                                              " does not match the manifest (", bytes->size(),
                                              " bytes; size or SHA-256 differ)"));
    }
    absl::Status header = CheckStageBytes(*bytes, s, m.iteration, config_hash);
    if (!header.ok()) {
      return absl::DataLossError(absl::StrCat("stage ", s, " file ", header.message()));
    }
  }
  return m;
}

absl::StatusOr<GenerationManifest> CheckGenerationAt(const std::string& root, int64_t iteration,
                                                     const std::string& config_hash,
                                                     int num_stages) {
  SS_ASSIGN_OR_RETURN(GenerationManifest m,
                      CheckGeneration(GenerationDir(root, iteration), config_hash, num_stages));
  if (m.iteration != iteration) {
    return absl::DataLossError(absl::StrCat("its manifest says iteration ", m.iteration));
  }
  return m;
}

absl::StatusOr<FoundGeneration> FindNewestCompleteGeneration(const std::string& root,
                                                             const std::string& config_hash,
                                                             int num_stages) {
  FoundGeneration found;
  for (int64_t iteration : ListGenerationFolders(root)) {
    const std::string dir = GenerationDir(root, iteration);
    absl::StatusOr<GenerationManifest> m =
        CheckGenerationAt(root, iteration, config_hash, num_stages);
    if (!m.ok()) {
      found.skipped.push_back(absl::StrCat("generation ", iteration, " skipped: ",
                                           m.status().message()));
      LOG(WARNING) << dir << ": " << found.skipped.back();
      continue;
    }
    found.manifest = *std::move(m);
    found.dir = dir;
    return found;
  }
  return absl::NotFoundError(absl::StrCat(
      "no complete checkpoint generation in ", root,
      found.skipped.empty() ? "" : absl::StrCat(" (", absl::StrJoin(found.skipped, "; "), ")")));
}

absl::Status WriteGeneration(const std::string& root, int64_t iteration,
                             const std::string& config_hash, int num_stages,
                             const std::map<int, std::string>& stage_bytes, int keep) {
  if (keep < 1) return absl::InvalidArgumentError("keep must be >= 1");
  if (iteration < 0 || num_stages < 1 || static_cast<int>(stage_bytes.size()) != num_stages ||
      stage_bytes.begin()->first != 0 || stage_bytes.rbegin()->first != num_stages - 1) {
    return absl::InvalidArgumentError(absl::StrCat("a generation needs stages 0..", num_stages - 1,
                                                   " at an iteration >= 0"));
  }
  GenerationManifest m;
  m.iteration = iteration;
  m.config_hash = config_hash;
  m.num_stages = num_stages;
  for (const auto& [s, bytes] : stage_bytes) {
    absl::Status ok = CheckStageBytes(bytes, s, iteration, config_hash);
    if (!ok.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", s, " ", ok.message()));
    }
    m.stages[s] = {StageFileName(s), static_cast<int64_t>(bytes.size()), Sha256Hex(bytes)};
  }
  const std::string dir = GenerationDir(root, iteration);
  if (CheckGeneration(dir, config_hash, num_stages).ok()) {
    return absl::AlreadyExistsError(absl::StrCat("generation ", iteration, " exists"));
  }
  std::error_code ec;
  // A torn folder of the same iteration (no or a bad manifest) is replaced;
  // its manifest goes first so the folder is never complete-looking.
  fs::remove(absl::StrCat(dir, "/", kManifest), ec);
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  for (const auto& [s, bytes] : stage_bytes) {
    SS_RETURN_IF_ERROR(common::WriteFileAtomically(absl::StrCat(dir, "/", m.stages[s].file), bytes));
  }
  SS_RETURN_IF_ERROR(common::WriteFileAtomically(absl::StrCat(dir, "/", kManifest), ManifestJson(m)));
  // Keep the newest `keep` complete generations (this one among them);
  // older folders go, torn ones older than this one too.
  int kept = 0;
  for (int64_t other : ListGenerationFolders(root)) {
    const std::string other_dir = GenerationDir(root, other);
    if (other > iteration) continue;  // newer (written by a restored run): not ours to judge
    const bool complete =
        other == iteration || fs::exists(absl::StrCat(other_dir, "/", kManifest), ec);
    if (complete && kept < keep) {
      ++kept;
      continue;
    }
    fs::remove_all(other_dir, ec);
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::model
