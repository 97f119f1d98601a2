#include "model/reference_trainer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "model/checkpoint.h"
#include "model/checkpoint_generation.h"
#include "model/route.h"

namespace skipswarm::model {

std::string GenerationsRoot(const std::string& dir) { return dir + "/generations"; }

std::string StageCheckpointPath(const std::string& dir, int stage) {
  return absl::StrCat(dir, "/stage-", stage, ".ckpt");
}

absl::StatusOr<std::unique_ptr<ReferenceTrainer>> ReferenceTrainer::Create(
    const TrainerOptions& options, const Corpus& corpus) {
  if (options.mbs_per_iteration < 1) {
    return absl::InvalidArgumentError("mbs_per_iteration must be >= 1");
  }
  if (!(options.skip_ratio >= 0 && options.skip_ratio < 1)) {
    return absl::InvalidArgumentError("skip_ratio must be in [0, 1)");
  }
  SdpAssignment sdp;
  if (options.sdp.mode != SdpMode::kOff) {
    SS_ASSIGN_OR_RETURN(sdp, AssignSubnetworks(options.model.num_stages, options.sdp.workers,
                                               options.sdp.keep));
  }
  SS_ASSIGN_OR_RETURN(auto pipe, LocalPipeline::Create(options.model, options.runtime));
  SamplerOptions s;
  s.samples_per_mb = options.samples_per_mb;
  s.seq_len = options.model.seq_len;
  s.seed = options.seed;
  SS_ASSIGN_OR_RETURN(auto sampler, MicroBatchSampler::Create(corpus.train, s));
  auto trainer = std::unique_ptr<ReferenceTrainer>(
      new ReferenceTrainer(options, std::move(pipe), std::move(sampler)));
  trainer->sdp_ = std::move(sdp);
  return trainer;
}

ReferenceTrainer::ReferenceTrainer(const TrainerOptions& options,
                                   std::unique_ptr<LocalPipeline> pipe,
                                   std::unique_ptr<MicroBatchSampler> sampler)
    : options_(options), pipe_(std::move(pipe)), sampler_(std::move(sampler)) {
  for (int s = 0; s < pipe_->num_stages(); ++s) {
    optimizers_.push_back(
        std::make_unique<StageOptimizer>(pipe_->stage(s).module(), options.optimizer));
  }
}

double ReferenceTrainer::effective_skip_ratio() const {
  if (options_.sdp.mode == SdpMode::kOff) return options_.skip_ratio;
  if (options_.sdp.mode == SdpMode::kBackward || sdp_.num_stages == 0) return 0;
  return 1.0 - static_cast<double>(sdp_.stages_per_worker) / sdp_.num_stages;
}

absl::StatusOr<IterationStats> ReferenceTrainer::RunIteration() {
  const int m = options_.mbs_per_iteration;
  if (options_.sdp.mode != SdpMode::kOff) {
    std::vector<RoutedMicroBatch> mbs;
    for (SdpMicroBatch& mb : SdpIterationPlan(sdp_, options_.sdp.mode, iteration_, m)) {
      mbs.push_back({mb.index, std::move(mb.route), std::move(mb.frozen)});
    }
    return RunIteration(mbs);
  }
  const int stages = pipe_->num_stages();
  common::Random routes = common::Random(options_.seed).Fork("routes").Fork(iteration_);
  std::vector<std::vector<int>> plan;
  if (options_.skip_ratio <= 0) {
    plan.assign(m, FullRoute(stages));
  } else if (options_.balanced_routes) {
    plan = BalancedSkipRoutes(stages, options_.skip_ratio, m, routes);
  } else {
    for (int j = 0; j < m; ++j) plan.push_back(RandomSkipRoute(stages, options_.skip_ratio, routes));
  }
  // Sample j of iteration i is sample i*m+j of the shuffled stream; the
  // step itself is RunIteration(mbs) (reference_trainer_replay.cc).
  std::vector<RoutedMicroBatch> mbs;
  for (int j = 0; j < m; ++j) {
    RoutedMicroBatch r;
    r.index = static_cast<uint64_t>(iteration_) * m + j;
    r.route = plan[j];
    mbs.push_back(std::move(r));
  }
  return RunIteration(mbs);
}

absl::Status ReferenceTrainer::SaveCheckpoint(const std::string& dir, int keep) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create '", dir, "': ", ec.message()));
  const std::string extra = absl::StrCat("{\"seed\":", options_.seed, ",\"skip_ratio\":",
                                         effective_skip_ratio(), "}");
  std::map<int, std::string> bytes;
  for (int s = 0; s < pipe_->num_stages(); ++s) {
    SS_ASSIGN_OR_RETURN(bytes[s], SerializeStageState(pipe_->stage(s).module(),
                                                      &optimizers_[s]->adamw(), iteration_, extra));
  }
  // The generation is the consistent set (Note [Checkpoint generations]);
  // the flat files after it are a convenience for `skipswarm eval` and may
  // be torn by a crash between them.
  absl::Status g = WriteGeneration(GenerationsRoot(dir), iteration_, pipe_->config().ConfigHash(),
                                   pipe_->num_stages(), bytes, keep);
  if (!g.ok() && !absl::IsAlreadyExists(g)) return g;
  for (const auto& [s, b] : bytes) {
    SS_RETURN_IF_ERROR(common::WriteFileAtomically(StageCheckpointPath(dir, s), b));
  }
  return absl::OkStatus();
}

bool ReferenceTrainer::HasCheckpoint(const std::string& dir) {
  return !ListGenerationFolders(GenerationsRoot(dir)).empty() ||
         std::filesystem::exists(StageCheckpointPath(dir, 0));
}

absl::Status ReferenceTrainer::LoadCheckpoint(const std::string& dir,
                                              std::vector<std::string>* skipped) {
  std::vector<std::string> paths;
  if (!ListGenerationFolders(GenerationsRoot(dir)).empty()) {
    absl::StatusOr<FoundGeneration> found = FindNewestCompleteGeneration(
        GenerationsRoot(dir), pipe_->config().ConfigHash(), pipe_->num_stages());
    // Nothing to resume from is not worth a retry.
    if (!found.ok()) return absl::FailedPreconditionError(found.status().message());
    const FoundGeneration& g = *found;
    if (skipped != nullptr) *skipped = g.skipped;
    for (int s = 0; s < pipe_->num_stages(); ++s) paths.push_back(g.StagePath(s));
  } else {
    for (int s = 0; s < pipe_->num_stages(); ++s) paths.push_back(StageCheckpointPath(dir, s));
  }
  int64_t step = -1;
  for (int s = 0; s < pipe_->num_stages(); ++s) {
    SS_ASSIGN_OR_RETURN(CheckpointInfo info,
                        LoadStageCheckpoint(paths[s], pipe_->stage(s).module(),
                                            &optimizers_[s]->adamw()));
    if (step >= 0 && info.step != step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint '", dir, "' is inconsistent: stage ", s, " is at iteration ", info.step,
          ", stage 0 at ", step));
    }
    step = info.step;
  }
  iteration_ = step;
  return absl::OkStatus();
}

absl::StatusOr<EvalResult> ReferenceTrainer::Evaluate(const std::vector<int>& route,
                                                      const std::vector<MicroBatch>& batches,
                                                      double bytes_per_token) {
  return EvaluateRoute(*pipe_, route, batches, bytes_per_token, effective_skip_ratio());
}

}  // namespace skipswarm::model
