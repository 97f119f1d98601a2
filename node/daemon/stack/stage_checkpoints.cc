#include "node/daemon/stack/stage_checkpoints.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace skipswarm::node {

std::string StageCheckpointPath(const NodeDaemonOptions& o, int stage) {
  return absl::StrCat(o.model.checkpoint_dir, "/", o.name, "-stage-", stage, ".ckpt");
}

absl::Status SaveStageCheckpoints(const NodeDaemonOptions& o,
                                  const std::map<int, StageCompute*>& stages) {
  if (o.model.checkpoint_dir.empty()) return absl::OkStatus();
  std::error_code ec;  // an unusable folder fails the save below, with its path
  std::filesystem::create_directories(o.model.checkpoint_dir, ec);
  for (const auto& [s, c] : stages) {
    SS_RETURN_IF_ERROR(c->SaveCheckpoint(StageCheckpointPath(o, s)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ResumeFromStageCheckpoints(const NodeDaemonOptions& o,
                                                   const std::map<int, StageCompute*>& stages) {
  if (o.model.checkpoint_dir.empty()) return 0;
  std::vector<int64_t> steps;
  for (const auto& [s, c] : stages) {
    if (!std::filesystem::exists(StageCheckpointPath(o, s))) continue;
    SS_ASSIGN_OR_RETURN(int64_t step, c->LoadCheckpoint(StageCheckpointPath(o, s)));
    steps.push_back(step);
  }
  if (steps.empty()) return 0;
  if (steps.size() != stages.size() ||
      std::adjacent_find(steps.begin(), steps.end(), std::not_equal_to<>()) != steps.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoints in ", o.model.checkpoint_dir, " disagree on the step"));
  }
  LOG(INFO) << o.name << ": resumed at iteration " << steps.front();
  return steps.front();
}

}  // namespace skipswarm::node
