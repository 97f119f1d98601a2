#include "launcher/eval_snapshots.h"

#include <glog/logging.h>

#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "model/checkpoint.h"

namespace skipswarm::launcher {

std::string EvalSnapshots::SnapshotDir(const std::string& out_dir, int64_t step) {
  return absl::StrFormat("%s/iter-%06d", out_dir, step);
}

std::vector<int64_t> EvalSnapshots::Poll() {
  namespace fs = std::filesystem;
  std::error_code ec;
  // step -> stage -> a file at that step (the first path in order).
  std::map<int64_t, std::map<int, std::string>> complete;
  for (fs::directory_iterator it(checkpoint_dir_, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string path = it->path().string();
    if (!absl::EndsWith(path, ".ckpt") || !absl::StrContains(path, "-stage-")) continue;
    const fs::file_time_type mtime = fs::last_write_time(it->path(), ec);
    if (ec) continue;
    Seen& seen = files_[path];
    if (seen.step < 0 || seen.mtime != mtime) {
      // Written by rename, so the file is whole; a read racing the next
      // rename sees either version.
      absl::StatusOr<std::string> bytes = model::ReadFileBytes(path);
      if (!bytes.ok()) continue;
      absl::StatusOr<model::CheckpointInfo> info = model::ReadCheckpointInfo(*bytes);
      if (!info.ok()) continue;
      seen = {mtime, info->stage, info->step};
    }
    std::string& pick = complete[seen.step][seen.stage];
    if (pick.empty() || path < pick) pick = path;
  }
  std::vector<int64_t> now;
  for (const auto& [step, stages] : complete) {
    if (taken_.count(step) > 0 || static_cast<int>(stages.size()) < num_stages_) continue;
    const std::string dir = SnapshotDir(out_dir_, step);
    fs::create_directories(dir, ec);
    bool ok = !ec;
    for (const auto& [stage, path] : stages) {
      const std::string to = absl::StrFormat("%s/stage-%d.ckpt", dir, stage);
      ok = ok && fs::copy_file(path, to, fs::copy_options::overwrite_existing, ec) && !ec;
    }
    if (!ok) {
      LOG(WARNING) << "eval snapshot of step " << step << " failed: " << ec.message();
      continue;
    }
    taken_.insert(step);
    now.push_back(step);
  }
  return now;
}

}  // namespace skipswarm::launcher
