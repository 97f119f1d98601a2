#include "node/daemon/stack/stage_checkpoints.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "node/daemon/stack/stage_set_commit.h"

namespace skipswarm::node {

namespace {

// Finishes or undoes a save a crash interrupted (Note [Stage set commit]).
absl::Status RecoverSet(const NodeDaemonOptions& o) {
  SS_ASSIGN_OR_RETURN(std::string done, RecoverStageSet(o.model.checkpoint_dir, o.name));
  if (!done.empty()) LOG(WARNING) << o.name << ": checkpoints in " << o.model.checkpoint_dir
                                  << ": " << done;
  return absl::OkStatus();
}

}  // namespace

std::string StageCheckpointPath(const NodeDaemonOptions& o, int stage) {
  return StageFilePath(o.model.checkpoint_dir, o.name, stage);
}

absl::Status SaveStageCheckpoints(const NodeDaemonOptions& o,
                                  const std::map<int, StageCompute*>& stages) {
  if (o.model.checkpoint_dir.empty()) return absl::OkStatus();
  std::error_code ec;  // an unusable folder fails the save below, with its path
  std::filesystem::create_directories(o.model.checkpoint_dir, ec);
  SS_RETURN_IF_ERROR(RecoverSet(o));
  // One stage: its atomic file is the whole set, and the commit's extra
  // writes and fsyncs would only delay the node's next step (a stopping
  // node's LEFT comes after its final save).
  if (stages.size() == 1) {
    return stages.begin()->second->SaveCheckpoint(StageCheckpointPath(o, stages.begin()->first));
  }
  for (const auto& [s, c] : stages) {
    SS_RETURN_IF_ERROR(c->SaveCheckpoint(PendingStageFilePath(o.model.checkpoint_dir, o.name, s)));
  }
  return CommitStageSet(o.model.checkpoint_dir, o.name);
}

absl::StatusOr<int64_t> ResumeFromStageCheckpoints(const NodeDaemonOptions& o,
                                                   const std::map<int, StageCompute*>& stages) {
  if (o.model.checkpoint_dir.empty()) return 0;
  SS_RETURN_IF_ERROR(RecoverSet(o));
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
