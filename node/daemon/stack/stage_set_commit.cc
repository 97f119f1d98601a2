#include "node/daemon/stack/stage_set_commit.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace skipswarm::node {
namespace {

namespace fs = std::filesystem;

constexpr char kPendingSuffix[] = ".ckpt.next";

// Stages with a pending file of NAME in DIR (NAME-stage-S.ckpt.next, S a
// number: "n1" does not match "n10"'s files).
std::vector<int> PendingStages(const std::string& dir, const std::string& name) {
  const std::string prefix = absl::StrCat(name, "-stage-");
  std::vector<int> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (!absl::StartsWith(file, prefix) || !absl::EndsWith(file, kPendingSuffix)) continue;
    const absl::string_view middle = absl::string_view(file).substr(
        prefix.size(), file.size() - prefix.size() - (sizeof(kPendingSuffix) - 1));
    int stage;
    if (absl::SimpleAtoi(middle, &stage) && stage >= 0) out.push_back(stage);
  }
  return out;
}

absl::Status RemoveFile(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot remove '", path, "': ", ec.message()));
  return absl::OkStatus();
}

// Steps 3-4 of Note [Stage set commit]; the marker must exist.
absl::StatusOr<int> MovePendingIntoPlace(const std::string& dir, const std::string& name) {
  int moved = 0;
  for (int s : PendingStages(dir, name)) {
    SS_RETURN_IF_ERROR(
        common::RenameDurably(PendingStageFilePath(dir, name, s), StageFilePath(dir, name, s)));
    ++moved;
  }
  SS_RETURN_IF_ERROR(RemoveFile(StageSetMarkerPath(dir, name)));
  return moved;
}

}  // namespace

std::string StageFilePath(const std::string& dir, const std::string& name, int stage) {
  return absl::StrCat(dir, "/", name, "-stage-", stage, ".ckpt");
}

std::string PendingStageFilePath(const std::string& dir, const std::string& name, int stage) {
  return absl::StrCat(dir, "/", name, "-stage-", stage, kPendingSuffix);
}

std::string StageSetMarkerPath(const std::string& dir, const std::string& name) {
  return absl::StrCat(dir, "/", name, "-stages.commit");
}

absl::Status CommitStageSet(const std::string& dir, const std::string& name) {
  SS_RETURN_IF_ERROR(common::WriteFileAtomically(
      StageSetMarkerPath(dir, name),
      "every NAME-stage-S.ckpt.next beside this file is complete; move each over its "
      "NAME-stage-S.ckpt, then remove this file\n"));
  return MovePendingIntoPlace(dir, name).status();
}

absl::StatusOr<std::string> RecoverStageSet(const std::string& dir, const std::string& name) {
  std::error_code ec;
  if (fs::exists(StageSetMarkerPath(dir, name), ec)) {
    SS_ASSIGN_OR_RETURN(int moved, MovePendingIntoPlace(dir, name));
    return absl::StrCat("finished an interrupted save: ", moved,
                        " stage file(s) moved into place");
  }
  const std::vector<int> pending = PendingStages(dir, name);
  if (pending.empty()) return std::string();
  SS_RETURN_IF_ERROR(DiscardStageSet(dir, name));
  return absl::StrCat("dropped an unfinished save: ", pending.size(),
                      " pending stage file(s) removed, the previous set stands");
}

absl::Status DiscardStageSet(const std::string& dir, const std::string& name) {
  for (int s : PendingStages(dir, name)) {
    SS_RETURN_IF_ERROR(RemoveFile(PendingStageFilePath(dir, name, s)));
  }
  return RemoveFile(StageSetMarkerPath(dir, name));
}

}  // namespace skipswarm::node
