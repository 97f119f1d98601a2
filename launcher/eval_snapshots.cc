#include "launcher/eval_snapshots.h"

#include <glog/logging.h>

#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "model/checkpoint.h"
#include "model/checkpoint_generation.h"

namespace skipswarm::launcher {

std::string EvalSnapshots::SnapshotDir(const std::string& out_dir, int64_t step) {
  return absl::StrFormat("%s/iter-%06d", out_dir, step);
}

bool EvalSnapshots::TakeGeneration(int64_t step, const std::map<int, std::string>& paths) {
  std::map<int, std::string> bytes;
  for (const auto& [stage, path] : paths) {
    absl::StatusOr<std::string> b = common::ReadFileBytes(path);
    // Replaced by a later step since the scan: not this step any more.
    if (!b.ok()) return false;
    absl::StatusOr<model::CheckpointInfo> info = model::ReadCheckpointInfo(*b);
    if (!info.ok() || info->step != step || info->stage != stage) return false;
    if (config_hash_.empty()) config_hash_ = info->config.ConfigHash();
    bytes[stage] = *std::move(b);
  }
  absl::Status s = model::WriteGeneration(out_dir_, step, config_hash_, num_stages_,
                                          bytes, generations_->keep);
  if (!s.ok() && !absl::IsAlreadyExists(s)) {
    LOG(WARNING) << "checkpoint generation " << step << " not written: " << s;
    return false;
  }
  return true;
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
      absl::StatusOr<std::string> bytes = common::ReadFileBytes(path);
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
    if (generations_) {
      if (TakeGeneration(step, stages)) {
        taken_.insert(step);
        now.push_back(step);
      }
      continue;
    }
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
