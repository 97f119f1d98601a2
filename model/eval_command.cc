#include "model/eval_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "model/checkpoint.h"
#include "model/evaluate.h"
#include "model/model_flags.h"
#include "model/reference_trainer.h"
#include "model/route.h"
#include "model/sentencepiece_tokenizer.h"
#include "model/stage_executor.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, checkpoint, "",
          "Checkpoint folder written by train-ref (stage-<s>.ckpt files).");
ABSL_FLAG(std::vector<std::string>, drop_stages, {},
          "Non-zero stages to remove, comma separated (e.g. 2,4).");
ABSL_FLAG(double, keep_fraction, -1,
          "Keep this fraction of all stages, removing the rest from the non-zero ones "
          "(averaged over stage subsets).");
ABSL_FLAG(int, eval_subsets, 10,
          "Stage subsets averaged per removal level (all of them when fewer).");
ABSL_FLAG(bool, depth_calibration, true,
          "Scale the stage updates of routes deeper than the training routes by r_t / r "
          "(Note [Depth calibration] in model/evaluate.h); false: the plain model.");
ABSL_FLAG(double, train_skip_ratio, -1,
          "Skip ratio the checkpoint was trained with, for --depth_calibration; negative: "
          "read it from the checkpoint (train-ref records it; 0 when absent).");

namespace skipswarm::model {
namespace {

// The skip ratio train-ref recorded in the checkpoint's `extra` JSON, 0 when
// there is none (a swarm checkpoint, or one from before it was recorded).
double RecordedSkipRatio(const std::string& extra) {
  nlohmann::json j = nlohmann::json::parse(extra, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("skip_ratio") || !j["skip_ratio"].is_number()) return 0;
  return j["skip_ratio"].get<double>();
}

absl::Status Run() {
  SS_ASSIGN_OR_RETURN(ModelFlags flags, ReadModelFlags());
  const std::string dir = absl::GetFlag(FLAGS_checkpoint);
  if (dir.empty()) return absl::InvalidArgumentError("--checkpoint=DIR is required");
  // The model's shape comes from the checkpoint, not from the flags.
  SS_ASSIGN_OR_RETURN(std::string head, common::ReadFileBytes(StageCheckpointPath(dir, 0)));
  SS_ASSIGN_OR_RETURN(CheckpointInfo info, ReadCheckpointInfo(head));
  head.clear();
  const ModelConfig config = info.config;
  SS_RETURN_IF_ERROR(ApplyRuntimeOptions(flags.runtime).status());
  SS_ASSIGN_OR_RETURN(auto pipe, LocalPipeline::Create(config, flags.runtime));
  for (int s = 0; s < config.num_stages; ++s) {
    SS_ASSIGN_OR_RETURN(CheckpointInfo stage_info,
                        LoadStageCheckpoint(StageCheckpointPath(dir, s), pipe->stage(s).module(),
                                            nullptr));
    if (stage_info.step != info.step) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint '", dir, "': stage ", s, " is at iteration ", stage_info.step,
                       ", stage 0 at ", info.step));
    }
  }
  SS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, CreateTokenizer(flags.tokenizer));
  if (tokenizer->vocab_size() > config.vocab_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", dir, "' has a vocabulary of ", config.vocab_size, ", smaller than the ",
        tokenizer->name(), " tokenizer's ", tokenizer->vocab_size(),
        "; evaluate with the tokenizer it was trained with (--tokenizer, --sp_model)"));
  }
  SS_ASSIGN_OR_RETURN(Corpus corpus, LoadCorpus(flags.corpus, *tokenizer));
  const double bytes_per_token = corpus.BytesPerToken();
  std::vector<MicroBatch> val =
      ValidationBatches(corpus.validation, flags.samples_per_mb, config.seq_len,
                        flags.final_eval_batches);
  if (val.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the validation split has ", corpus.validation.size(),
        " tokens, fewer than one micro-batch; give more text or a larger "
        "--validation_fraction"));
  }
  std::printf("checkpoint %s: iteration %lld, %d stages, %.2f M parameters, %lld validation "
              "tokens\n",
              dir.c_str(), static_cast<long long>(info.step), config.num_stages,
              config.ParameterCount() / 1e6,
              static_cast<long long>(val.size()) * flags.samples_per_mb * config.seq_len);
  double skip = absl::GetFlag(FLAGS_train_skip_ratio);
  if (skip < 0) skip = RecordedSkipRatio(info.extra);
  if (skip >= 1) return absl::InvalidArgumentError("--train_skip_ratio must be < 1");
  if (!absl::GetFlag(FLAGS_depth_calibration)) skip = 0;
  const double full_scale =
      DepthCalibrationScale(config.num_stages, skip, FullRoute(config.num_stages));
  std::printf("depth calibration: %s\n",
              full_scale == 1.0
                  ? "none (plain model)"
                  : absl::StrFormat("trained with skip ratio %.2f, stage updates of the full "
                                    "route scaled by %.3f",
                                    skip, full_scale)
                        .c_str());

  SS_ASSIGN_OR_RETURN(EvalResult full, EvaluateRoute(*pipe, FullRoute(config.num_stages), val,
                                                     bytes_per_token, skip));
  const std::vector<std::string> drop_flag = absl::GetFlag(FLAGS_drop_stages);
  if (!drop_flag.empty()) {
    std::vector<int> dropped;
    for (const std::string& s : drop_flag) {
      int stage;
      if (!absl::SimpleAtoi(s, &stage)) {
        return absl::InvalidArgumentError(absl::StrCat("--drop_stages: bad stage '", s, "'"));
      }
      dropped.push_back(stage);
    }
    SS_ASSIGN_OR_RETURN(std::vector<int> route, RouteWithout(config.num_stages, dropped));
    SS_ASSIGN_OR_RETURN(EvalResult e, EvaluateRoute(*pipe, route, val, bytes_per_token, skip));
    std::printf("full model:          val_loss %.4f  ppl %.3f  bits/byte %.4f\n", full.loss,
                full.perplexity, full.bits_per_byte);
    std::printf("without stages %-5s val_loss %.4f  ppl %.3f  bits/byte %.4f  (ppl %+.1f%%)\n",
                absl::StrJoin(dropped, ",").c_str(), e.loss, e.perplexity, e.bits_per_byte,
                100.0 * (e.perplexity / full.perplexity - 1));
    return absl::OkStatus();
  }
  std::vector<int> levels;
  const double keep = absl::GetFlag(FLAGS_keep_fraction);
  if (keep >= 0) {
    if (keep > 1) return absl::InvalidArgumentError("--keep_fraction must be in [0, 1]");
    levels = {StagesForFraction(config.num_stages, 1.0 - keep)};
  } else {
    for (double f : {0.0, 1.0 / 6, 1.0 / 3, 0.5}) {
      const int k = StagesForFraction(config.num_stages, f);
      if (levels.empty() || levels.back() != k) levels.push_back(k);
    }
  }
  std::printf("%-8s %-7s %-8s %-9s %-9s %-9s %-10s %s\n", "removed", "stages", "subsets",
              "val_loss", "ppl", "bits/byte", "ppl_rise", "worst_ppl");
  for (int k : levels) {
    EvalResult e = full;
    int subsets = 1;
    double worst = full.perplexity;
    if (k > 0) {
      SS_ASSIGN_OR_RETURN(DropResult d,
                          EvaluateDropped(*pipe, k, val, absl::GetFlag(FLAGS_eval_subsets),
                                          bytes_per_token, skip));
      e = d.mean;
      subsets = d.subsets;
      worst = d.worst_perplexity;
    }
    std::printf("%-8s %-7d %-8d %-9.4f %-9.3f %-9.4f %-10s %.3f\n",
                absl::StrCat(static_cast<int>(100.0 * k / config.num_stages + 0.5), "%").c_str(),
                k, subsets, e.loss, e.perplexity, e.bits_per_byte,
                absl::StrFormat("%+.1f%%", 100.0 * (e.perplexity / full.perplexity - 1)).c_str(),
                worst);
  }
  return absl::OkStatus();
}

}  // namespace

common::cli::Command EvalCommand() {
  common::cli::Command c;
  c.name = "eval";
  c.summary = "Validation perplexity of a checkpoint, whole and with stages removed";
  c.usage =
      "skipswarm eval --checkpoint=DIR [--drop_stages=S,S | --keep_fraction=F]\n"
      "Without --drop_stages/--keep_fraction prints a table for 0/17/33/50% of the stages\n"
      "removed (mean over stage subsets; removed stages are bypassed through the residual\n"
      "stream). The model shape is read from the checkpoint. Routes deeper than the\n"
      "training routes of a skip-trained model are depth-calibrated (--depth_calibration).";
  c.flag_files = {"model/eval_command.cc", kModelFlagsFile};
  c.run = [](const std::vector<std::string>& args) {
    if (!args.empty()) {
      std::fprintf(stderr, "eval takes no positional arguments\n");
      return 2;
    }
    absl::Status status = Run();
    if (!status.ok()) {
      std::fprintf(stderr, "eval: %s\n", status.ToString().c_str());
      return 1;
    }
    return 0;
  };
  c.uses_blas = true;
  return c;
}

}  // namespace skipswarm::model
