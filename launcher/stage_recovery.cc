#include "launcher/stage_recovery.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "node/daemon/stack/stage_set_commit.h"
#include "model/checkpoint.h"
#include "nlohmann/json.hpp"

namespace skipswarm::launcher {

std::optional<LostStage> StageLossMonitor::Check(
    const std::set<std::string>& live, const std::map<std::string, int64_t>& killed_after,
    int64_t reported, const std::map<std::string, std::string>& ended) const {
  std::map<int, bool> hosted;  // stage -> some live host
  for (const auto& [name, stages] : layout_) {
    for (int s : stages) hosted[s] = hosted[s] || live.count(name) > 0;
  }
  for (const auto& [s, any] : hosted) {
    if (any) continue;
    LostStage lost;
    lost.stage = s;
    lost.after_iteration = reported;
    std::vector<std::string> gone;
    for (const auto& [name, stages] : layout_) {
      if (std::find(stages.begin(), stages.end(), s) == stages.end()) continue;
      auto k = killed_after.find(name);
      auto e = ended.find(name);
      gone.push_back(k != killed_after.end()
                         ? absl::StrCat(name, " killed after iteration ", k->second)
                         : absl::StrCat(name, " ", e != ended.end() ? e->second : "exited"));
    }
    lost.why = absl::StrJoin(gone, ", ");
    return lost;
  }
  return std::nullopt;
}

absl::StatusOr<RestorePlan> PlanRestore(const std::string& generations_root,
                                        const std::string& config_hash, int num_stages,
                                        const LostStage& lost) {
  absl::StatusOr<model::FoundGeneration> g =
      model::FindNewestCompleteGeneration(generations_root, config_hash, num_stages);
  if (!g.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stage ", lost.stage, " was lost: no live replica is left (", lost.why,
        ") and no checkpoint generation holds it, so it cannot be restored (",
        g.status().message(), "); training stopped after iteration ", lost.after_iteration,
        " (give --checkpoint_every > 0 to keep generations)"));
  }
  RestorePlan plan;
  plan.lost = lost;
  plan.resume_at = g->manifest.iteration;
  plan.generation = *std::move(g);
  return plan;
}

absl::Status SeedNodeCheckpoints(const RestorePlan& plan, const std::string& checkpoint_dir,
                                 const LocalLayout& layout) {
  std::error_code ec;
  std::filesystem::create_directories(checkpoint_dir, ec);
  std::map<int, std::string> bytes;  // each stage's file, read once
  for (const auto& [name, stages] : layout) {
    // An interrupted save of the node (its pending files) must not roll
    // forward over the files written here at its start (Note [Stage set
    // commit]).
    SS_RETURN_IF_ERROR(node::DiscardStageSet(checkpoint_dir, name));
    for (int s : stages) {
      if (bytes.count(s) == 0) {
        const std::string from = plan.generation.StagePath(s);
        if (from.empty()) {
          return absl::DataLossError(absl::StrCat("generation ", plan.resume_at,
                                                  " has no stage ", s));
        }
        SS_ASSIGN_OR_RETURN(bytes[s], common::ReadFileBytes(from));
        // Verified once more: the folder may have changed since it was chosen.
        if (model::Sha256Hex(bytes[s]) != plan.generation.manifest.stages.at(s).sha256) {
          return absl::DataLossError(absl::StrCat("generation ", plan.resume_at, " stage ", s,
                                                  " changed after it was checked"));
        }
      }
      // The daemons' own path.
      SS_RETURN_IF_ERROR(
          common::WriteFileAtomically(node::StageFilePath(checkpoint_dir, name, s), bytes[s]));
    }
  }
  return absl::OkStatus();
}

absl::Status RewindProgress(const std::string& progress_path, int64_t resume_at,
                            const std::string& backup_path) {
  std::error_code ec;
  if (!std::filesystem::exists(progress_path, ec)) return absl::OkStatus();
  std::filesystem::copy_file(progress_path, backup_path,
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot copy ", progress_path, ": ", ec.message()));
  }
  std::ifstream in(progress_path);
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      const auto it = j.find("iteration");
      if (it != j.end() && it->is_number_integer() && it->get<int64_t>() >= resume_at) continue;
    } else {
      continue;  // a line cut short by a killed writer
    }
    absl::StrAppend(&kept, line, "\n");
  }
  return common::WriteFileAtomically(progress_path, kept);
}

std::string DescribeRestore(const RestorePlan& plan, double pause_s) {
  std::string skipped;
  if (!plan.generation.skipped.empty()) {
    skipped = absl::StrCat(" (", absl::StrJoin(plan.generation.skipped, "; "), ")");
  }
  return absl::StrFormat(
      "stage %d restored from checkpoint generation %d%s: every node resumed at iteration %d, "
      "%d iterations re-done, training paused %.1f s",
      plan.lost.stage, plan.resume_at, skipped, plan.resume_at, plan.iterations_redone(),
      pause_s);
}

}  // namespace skipswarm::launcher
