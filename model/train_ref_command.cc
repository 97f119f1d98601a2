#include "model/train_ref_command.h"

#include <ATen/Parallel.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/random.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "model/device_memory.h"
#include "model/evaluate.h"
#include "model/memory_estimate.h"
#include "model/model_flags.h"
#include "model/reference_trainer.h"
#include "model/route.h"
#include "model/route_record.h"
#include "model/sdp_flags.h"
#include "model/sdp_traffic.h"
#include "model/sentencepiece_tokenizer.h"
#include "model/stage_executor.h"

ABSL_FLAG(int64_t, iterations, 2000,
          "Total training iterations (also the length of the cosine schedule).");
ABSL_FLAG(int, mbs_per_iteration, 2,
          "Micro-batches injected per iteration (with --sdp: per simulated worker).");
ABSL_FLAG(double, skip_ratio, 0.0,
          "Skip ratio k in [0, 1): each micro-batch takes a random in-order route through "
          "round((1-k)*stages) stages. 0 trains the full pipeline.");
ABSL_FLAG(bool, balanced_routes, true,
          "Draw an iteration's skip routes together so every non-zero stage gets a visit "
          "(Note [Balanced skip routes] in model/route.cc); false: each route on its own.");
ABSL_FLAG(int64_t, checkpoint_every, 200, "Checkpoint period in iterations (0: only at the end).");
ABSL_FLAG(bool, resume, false,
          "Continue from --checkpoint_dir if it holds a checkpoint: the newest complete "
          "checkpoint generation (a torn one is skipped).");
ABSL_FLAG(int, keep_checkpoints, 3,
          "Checkpoint generations kept in CHECKPOINT_DIR/generations (>= 1).");
ABSL_FLAG(int64_t, eval_every, 200, "Validation period in iterations (0: only start and end).");
ABSL_FLAG(int64_t, log_every, 10, "Progress line period in iterations.");
ABSL_FLAG(std::vector<std::string>, routes_file, {},
          "Replay a swarm's recorded routes (comma-separated files, model/route_record.h; "
          "`skipswarm local --local_record_routes` writes LOCAL_DIR/routes/*.routes): every "
          "iteration trains exactly the recorded micro-batches along their stages, instead of "
          "--mbs_per_iteration and --skip_ratio.");
ABSL_FLAG(std::string, metrics_out, "", "Append one JSON line per logged iteration here.");

namespace skipswarm::model {
namespace {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s / 60) % 60);
  return absl::StrFormat("%dm%02ds", s / 60, s % 60);
}

absl::Status Run() {
  SS_ASSIGN_OR_RETURN(ModelFlags flags, ReadModelFlags());
  // One process, no replicas: nothing is averaged (Note [Outer steps] in
  // node/train/node_trainer.h), so these flags would be silently ignored.
  if (flags.averaging.outer_every != 1 || IsLossy(flags.averaging.codec)) {
    return absl::InvalidArgumentError(
        "train-ref has no replicas to average: --outer_every and --avg_codec apply to swarms "
        "(skipswarm node / local); leave them at 1 and fp32");
  }
  const int64_t iterations = absl::GetFlag(FLAGS_iterations);
  if (iterations < 1) return absl::InvalidArgumentError("--iterations must be >= 1");
  SS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, CreateTokenizer(flags.tokenizer));
  if (flags.model.vocab_size < tokenizer->vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("--vocab=", flags.model.vocab_size,
                                                   " is smaller than the ", tokenizer->name(),
                                                   " tokenizer's vocabulary; pass --vocab=",
                                                   tokenizer->vocab_size()));
  }
  if (flags.runtime.device == "cpu") {
    // Note [Memory estimate]: refuse a model this machine cannot hold (the
    // machine's RAM; the device check with the per-stage figures follows
    // once the device is known, Note [Stage memory estimate]).
    const int64_t needed = EstimateTrainingBytes(
        flags, flags.model.ParameterCount(), flags.model.num_layers,
        absl::GetFlag(FLAGS_mbs_per_iteration));
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const uint64_t available =
        pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
    SS_RETURN_IF_ERROR(CheckFitsInMemory(needed, available, "train-ref"));
  }
  SS_ASSIGN_OR_RETURN(at::Device device, ApplyRuntimeOptions(flags.runtime));
  {
    // train-ref holds every stage on one device, one micro-batch in flight.
    MemoryEstimateOptions mem;
    mem.samples_per_mb = flags.samples_per_mb;
    mem.bf16_activations = flags.runtime.bf16_autocast && device.is_cuda();
    const StageMemoryEstimate total = EstimateWholeModel(flags.model, mem);
    const std::string dev = device.str();
    const int64_t free_bytes = FreeDeviceMemoryBytes(dev);
    std::printf("memory estimate: %s; %s free on %s\n", DescribeStageMemory(total).c_str(),
                free_bytes < 0 ? "unknown" : FormatBytes(free_bytes).c_str(), dev.c_str());
    SS_RETURN_IF_ERROR(CheckStageFits(total, free_bytes, dev));
  }
  LOG(INFO) << "train-ref: seed " << flags.seed << ", init_seed " << flags.model.init_seed
            << ", device " << device << ", threads " << at::get_num_threads();

  SS_ASSIGN_OR_RETURN(Corpus corpus, LoadCorpus(flags.corpus, *tokenizer));
  const double bytes_per_token = corpus.BytesPerToken();
  TrainerOptions options;
  options.model = flags.model;
  options.runtime = flags.runtime;
  options.optimizer = flags.optimizer;
  options.optimizer.total_steps = iterations;
  options.mbs_per_iteration = absl::GetFlag(FLAGS_mbs_per_iteration);
  options.samples_per_mb = flags.samples_per_mb;
  options.skip_ratio = absl::GetFlag(FLAGS_skip_ratio);
  options.balanced_routes = absl::GetFlag(FLAGS_balanced_routes);
  options.seed = flags.seed;
  SS_ASSIGN_OR_RETURN(options.sdp, ReadSdpFlags());
  if (options.sdp.mode != SdpMode::kOff &&
      (options.skip_ratio > 0 || !absl::GetFlag(FLAGS_routes_file).empty())) {
    return absl::InvalidArgumentError(
        "--sdp chooses every micro-batch's stages: drop --skip_ratio and --routes_file");
  }
  SS_ASSIGN_OR_RETURN(auto trainer, ReferenceTrainer::Create(options, corpus));
  if (options.sdp.mode != SdpMode::kOff) {
    const SdpAssignment& a = trainer->sdp_assignment();
    std::printf("sdp: %s masking, %d workers x %d MBs per iteration, %d of %d stages each "
                "(keep %.2f); each stage owned by",
                SdpModeName(options.sdp.mode).c_str(), options.sdp.workers,
                options.mbs_per_iteration, a.stages_per_worker, flags.model.num_stages,
                options.sdp.keep);
    for (int c : a.coverage) std::printf(" %d", c);
    std::printf(" workers\n");
    for (size_t w = 0; w < a.subnetworks.size(); ++w) {
      std::printf("sdp: worker %zu trains stages %s\n", w,
                  FormatStageSet(a.subnetworks[w]).c_str());
    }
    // Bytes on the wire (model/sdp_traffic.h) against a pipeline swarm of
    // the same global batch (K data nodes, each other stage on 2 hosts).
    const int64_t tokens = static_cast<int64_t>(flags.samples_per_mb) * flags.model.seq_len;
    const WireBytes sdp = SdpIterationBytes(flags.model, a, options.sdp.mode,
                                            options.mbs_per_iteration, tokens);
    const WireBytes pipe = PipelineIterationBytes(flags.model, options.sdp.workers, 2,
                                                  options.mbs_per_iteration, tokens);
    std::printf("sdp: wire bytes per token %.0f (averaging %.0f, frozen-copy refresh %.0f); a "
                "pipeline swarm of %d data nodes and 2 hosts per other stage, same batch: %.0f "
                "(activations %.0f, averaging %.0f)\n",
                sdp.PerToken(), sdp.averaging / sdp.tokens, sdp.frozen_refresh / sdp.tokens,
                options.sdp.workers, pipe.PerToken(), pipe.activations / pipe.tokens,
                pipe.averaging / pipe.tokens);
  }

  const int stages = flags.model.num_stages;
  common::Random probe(0);
  const int route_len =
      options.sdp.mode == SdpMode::kForward
          ? trainer->sdp_assignment().stages_per_worker
          : static_cast<int>(RandomSkipRoute(stages, options.skip_ratio, probe).size());
  std::printf("model: %d layers, d_model %d, %d heads, ffn %d, seq_len %d, %d stages, %.2f M "
              "parameters, config %s\n",
              flags.model.num_layers, flags.model.d_model, flags.model.num_heads,
              flags.model.ffn_dim, flags.model.seq_len, stages,
              flags.model.ParameterCount() / 1e6, flags.model.ConfigHash().c_str());
  std::printf("data: %zu files, %zu train / %zu validation tokens (%s tokenizer, %.2f bytes per "
              "token); %d MBs x %d x %d tokens per iteration; routes through %d of %d stages "
              "(skip ratio %.2f)\n",
              corpus.files.size(), corpus.train.size(), corpus.validation.size(),
              tokenizer->name().c_str(), bytes_per_token,
              options.mbs_per_iteration, options.samples_per_mb, flags.model.seq_len, route_len,
              stages, options.skip_ratio);

  // Route replay: every iteration's micro-batches must be in the record.
  std::map<int64_t, std::vector<RoutedMicroBatch>> replay;
  if (!absl::GetFlag(FLAGS_routes_file).empty()) {
    SS_ASSIGN_OR_RETURN(RouteRecord record, ReadRouteRecord(absl::GetFlag(FLAGS_routes_file)));
    size_t mbs = 0;
    for (int64_t i = 0; i < iterations; ++i) {
      auto it = record.find(i);
      if (it == record.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--routes_file has no micro-batch for iteration ", i, " (of ",
                         iterations, "); the record covers ", record.size(), " iterations"));
      }
      for (const RecordedRoute& r : it->second) replay[i].push_back({r.global_mb, r.stages});
      mbs += it->second.size();
    }
    std::printf("routes: replaying %zu recorded micro-batches (%.2f per iteration) over %lld "
                "iterations\n",
                mbs, static_cast<double>(mbs) / iterations, static_cast<long long>(iterations));
  }

  const std::string& dir = flags.checkpoint_dir;
  const int keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  if (keep_checkpoints < 1) return absl::InvalidArgumentError("--keep_checkpoints must be >= 1");
  if (absl::GetFlag(FLAGS_resume)) {
    if (dir.empty()) return absl::InvalidArgumentError("--resume needs --checkpoint_dir");
    if (ReferenceTrainer::HasCheckpoint(dir)) {
      std::vector<std::string> skipped;
      SS_RETURN_IF_ERROR(trainer->LoadCheckpoint(dir, &skipped));
      for (const std::string& why : skipped) std::printf("%s\n", why.c_str());
      std::printf("resumed from %s at iteration %lld\n", dir.c_str(),
                  static_cast<long long>(trainer->iteration()));
    } else {
      std::printf("no checkpoint in %s yet; starting fresh\n", dir.c_str());
    }
  }

  // Periodic validation on an evenly spread sample, the final one on
  // --final_eval_batches (default: the whole split; Note [Validation sample]).
  const std::vector<MicroBatch> val = ValidationBatches(corpus.validation, flags.samples_per_mb,
                                                        flags.model.seq_len, flags.eval_batches);
  const std::vector<MicroBatch> final_val =
      ValidationBatches(corpus.validation, flags.samples_per_mb, flags.model.seq_len,
                        flags.final_eval_batches);
  if (val.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the validation split has ", corpus.validation.size(),
        " tokens, fewer than one micro-batch (", flags.samples_per_mb * flags.model.seq_len + 1,
        "); give more text or a larger --validation_fraction"));
  }
  std::unique_ptr<std::ofstream> metrics;
  if (!absl::GetFlag(FLAGS_metrics_out).empty()) {
    metrics = std::make_unique<std::ofstream>(absl::GetFlag(FLAGS_metrics_out), std::ios::app);
    if (!*metrics) return absl::UnavailableError("cannot open --metrics_out");
  }
  auto evaluate = [&](int64_t at, const std::vector<MicroBatch>& batches) -> absl::Status {
    SS_ASSIGN_OR_RETURN(EvalResult e,
                        trainer->Evaluate(FullRoute(stages), batches, bytes_per_token));
    if (!std::isfinite(e.loss)) {
      return absl::DataLossError(
          absl::StrCat("iteration ", at, ": the validation loss is ", e.loss));
    }
    std::printf("eval  iter %6lld  val_loss %.4f  val_ppl %.3f  val_bits_per_byte %.4f  (%lld "
                "tokens)\n",
                static_cast<long long>(at), e.loss, e.perplexity, e.bits_per_byte,
                static_cast<long long>(e.tokens));
    std::fflush(stdout);
    if (metrics) {
      *metrics << absl::StrFormat(
                      "{\"iteration\":%d,\"val_loss\":%.6f,\"val_bits_per_byte\":%.6f,"
                      "\"val_tokens\":%d}",
                      at, e.loss, e.bits_per_byte, e.tokens)
               << std::endl;
    }
    return absl::OkStatus();
  };
  auto checkpoint = [&]() -> absl::Status {
    if (dir.empty()) return absl::OkStatus();
    SS_RETURN_IF_ERROR(trainer->SaveCheckpoint(dir, keep_checkpoints));
    std::printf("checkpoint  iter %lld  -> %s\n", static_cast<long long>(trainer->iteration()),
                dir.c_str());
    return absl::OkStatus();
  };

  SS_RETURN_IF_ERROR(evaluate(trainer->iteration(), val));
  std::unique_ptr<common::RealClock> clock = common::RealClock::Create();
  const absl::Duration start = clock->SteadyNow();
  const int64_t first = trainer->iteration();
  const int64_t log_every = std::max<int64_t>(1, absl::GetFlag(FLAGS_log_every));
  const int64_t eval_every = absl::GetFlag(FLAGS_eval_every);
  const int64_t ckpt_every = absl::GetFlag(FLAGS_checkpoint_every);
  int64_t tokens = 0;
  double loss_window = 0;
  int window = 0;
  while (trainer->iteration() < iterations) {
    SS_ASSIGN_OR_RETURN(IterationStats s, replay.empty()
                                              ? trainer->RunIteration()
                                              : trainer->RunIteration(replay[trainer->iteration()]));
    // Never train on (or report) a non-finite loss: the update it made is
    // already in the weights, so stop with the iteration named.
    if (!std::isfinite(s.loss)) {
      return absl::DataLossError(absl::StrCat(
          "iteration ", trainer->iteration(), ": the training loss is ", s.loss,
          "; stopping without a checkpoint (try a lower --lr or a --grad_clip)"));
    }
    tokens += s.tokens;
    loss_window += s.loss;
    ++window;
    const int64_t done = trainer->iteration();
    if (done % log_every == 0 || done == iterations) {
      const double elapsed = absl::ToDoubleSeconds(clock->SteadyNow() - start);
      const double per_iter = elapsed / static_cast<double>(done - first);
      std::printf("iter %6lld/%lld  loss %.4f  lr %.2e  gnorm %.3f  tok/s %.0f  %.2f s/it  "
                  "ETA %s\n",
                  static_cast<long long>(done), static_cast<long long>(iterations),
                  loss_window / window, s.lr, s.max_grad_norm, tokens / elapsed, per_iter,
                  FormatDuration(per_iter * static_cast<double>(iterations - done)).c_str());
      std::fflush(stdout);
      if (metrics) {
        *metrics << absl::StrFormat(
                        "{\"iteration\":%d,\"loss\":%.6f,\"lr\":%.6g,\"grad_norm\":%.6f,"
                        "\"tokens_per_s\":%.1f,\"elapsed_s\":%.2f}",
                        done, loss_window / window, s.lr, s.max_grad_norm, tokens / elapsed,
                        elapsed)
                 << std::endl;
      }
      loss_window = 0;
      window = 0;
    }
    if (eval_every > 0 && done % eval_every == 0 && done != iterations) {
      SS_RETURN_IF_ERROR(evaluate(done, val));
    }
    if (ckpt_every > 0 && done % ckpt_every == 0 && done != iterations) {
      SS_RETURN_IF_ERROR(checkpoint());
    }
  }
  SS_RETURN_IF_ERROR(evaluate(trainer->iteration(), final_val));
  return checkpoint();
}

}  // namespace

common::cli::Command TrainRefCommand() {
  common::cli::Command c;
  c.name = "train-ref";
  c.summary = "Train the staged model in one process (the reference run)";
  c.usage =
      "skipswarm train-ref [--iterations=N] [--skip_ratio=K | --routes_file=F,... |\n"
      "                     --sdp=forward|backward --sdp_workers=K --sdp_keep=F]\n"
      "                    [--checkpoint_dir=DIR [--resume]]\n"
      "                    [model, optimiser and data flags]\n"
      "Trains all stages in this process with the swarm's optimiser (AdamW, warm-up + cosine,\n"
      "per-stage clipping, visit-weighted gradients); prints progress, evaluates on the\n"
      "validation split and writes per-stage checkpoints that `skipswarm eval` reads.";
  c.flag_files = {"model/train_ref_command.cc", kModelFlagsFile, kSdpFlagsFile};
  c.run = [](const std::vector<std::string>& args) {
    if (!args.empty()) {
      std::fprintf(stderr, "train-ref takes no positional arguments\n");
      return 2;
    }
    absl::Status status = Run();
    if (!status.ok()) {
      std::fprintf(stderr, "train-ref: %s\n", status.ToString().c_str());
      return 1;
    }
    return 0;
  };
  c.uses_blas = true;
  return c;
}

}  // namespace skipswarm::model
