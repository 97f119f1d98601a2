#include "model/model_flags.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/internal/private_handle_accessor.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "model/presets.h"

// Defaults are the default small model (ModelConfig's defaults): 12 blocks,
// d_model 256, 6 stages, about 9.6 M parameters.
ABSL_FLAG(std::string, model, "",
          "Model preset: tiny, small (= the defaults), 125m, 350m, 1b (model/presets.h). The "
          "shape flags below override the preset's values when given.");
ABSL_FLAG(int, layers, 12, "Transformer blocks in the whole model.");
ABSL_FLAG(int, d_model, 256, "Residual stream width.");
ABSL_FLAG(int, heads, 8, "Attention heads (d_model must be divisible by it).");
ABSL_FLAG(int, ffn, 688, "SwiGLU hidden width.");
ABSL_FLAG(int, vocab, 256, "Vocabulary size (256 for the byte tokenizer).");
ABSL_FLAG(int, seq_len, 128, "Sequence length in tokens.");
ABSL_FLAG(int, stages, 6, "Pipeline stages (stage 0 is the data stage).");
ABSL_FLAG(bool, tie_embeddings, true, "Share the embedding matrix with the LM head.");
ABSL_FLAG(uint64_t, init_seed, 1, "Parameter initialisation seed.");

ABSL_FLAG(std::string, device, "cpu", "Compute device: cpu, cuda, cuda:N.");
ABSL_FLAG(int, threads, 0, "Intra-op threads (0 = all cores).");
ABSL_FLAG(bool, bf16, false, "bf16 autocast where the device supports it.");

ABSL_FLAG(double, lr, 1e-3, "Peak AdamW learning rate.");
ABSL_FLAG(double, min_lr, 1e-4, "Final learning rate of the cosine schedule.");
ABSL_FLAG(int64_t, warmup_steps, 100, "Linear warm-up iterations.");
ABSL_FLAG(double, weight_decay, 0.1, "AdamW weight decay (matrices only).");
ABSL_FLAG(double, grad_clip, 1.0, "Per-stage gradient-norm clip (<= 0: off).");

ABSL_FLAG(int64_t, outer_every, 1,
          "H: local optimiser steps between replica averages. 1 (default): gradients are "
          "averaged every iteration; > 1: DiLoCo-style, pseudo-gradients every H steps with "
          "an outer Nesterov step (Note [Outer steps]). Every member must use the same.");
// 1 / 0 (plain parameter averaging): the best H > 1 settings measured
// (node/train/README.md: DiLoCo's 0.7 / 0.9 lost 21-25% at H = 8-32).
ABSL_FLAG(double, outer_lr, 1.0, "Outer learning rate (with --outer_every > 1).");
ABSL_FLAG(double, outer_momentum, 0.0,
          "Outer Nesterov momentum (with --outer_every > 1; 0: plain parameter averaging).");
ABSL_FLAG(bool, outer_overlap, false,
          "With --outer_every > 1: average round k while the next H steps compute and apply "
          "it one round late (Note [Overlapped sync]); a member slow to upload then costs "
          "nothing while its sync takes less than H steps.");
ABSL_FLAG(double, outer_deadline_factor, 4.0,
          "With --outer_every > 1: an outer sync closes without members still late after "
          "max(--outer_deadline_min_s, this x the expected upload time of the group's median "
          "measured uplink), plus the last H steps' time with --outer_overlap; a member left "
          "out applies the average it missed (Note [Late members]). 0: wait for every member.");
ABSL_FLAG(double, outer_deadline_min_s, 10.0,
          "Shortest outer-sync deadline, seconds (see --outer_deadline_factor).");
ABSL_FLAG(double, outer_upload_floor, 0.25,
          "With --outer_every > 1 and --avg_codec=int8: a member whose sync upload would take "
          "longer than the group's median member's (with --outer_overlap: than 0.8 of the H "
          "steps) sends only its largest int8 blocks, the rest held back in its error "
          "feedback (Note [Thinned uploads]); at least this fraction of them. 1: always all.");
ABSL_FLAG(std::string, avg_codec, "fp32",
          "Codec of what replicas average: fp32, bf16, int8 (blockwise), topk:F (share F of "
          "the entries, error feedback), powersgd:R (rank R, error feedback).");

ABSL_FLAG(std::vector<std::string>, corpus, {},
          "Training text: files or directories, comma separated (default: the Debian "
          "fortunes in /usr/share/games/fortunes).");
ABSL_FLAG(double, validation_fraction, 0.05, "Share of the corpus held out for validation.");
ABSL_FLAG(int, samples_per_mb, 4, "Sequences per micro-batch.");
ABSL_FLAG(int, eval_batches, 32,
          "Validation micro-batches of each periodic evaluation during training, spread evenly "
          "over the validation split (0: the whole split).");
ABSL_FLAG(int, final_eval_batches, 0,
          "Validation micro-batches of train-ref's final evaluation and of eval "
          "(0: the whole split).");

ABSL_FLAG(std::string, tokenizer, "bytes",
          "Tokenizer: bytes (default; vocab 256, loss converts to bits per byte) or "
          "sentencepiece (needs --sp_model; set --vocab to at least its piece count).");
ABSL_FLAG(std::string, sp_model, "", "SentencePiece model file for --tokenizer=sentencepiece.");
ABSL_FLAG(std::string, sp_library, "",
          "Path of libskipswarm_sentencepiece.so (default: next to this binary, then its "
          "Bazel runfiles, then the loader's search path).");

ABSL_FLAG(uint64_t, seed, 1, "Seed for data order and routes (logged).");
ABSL_FLAG(std::string, checkpoint_dir, "", "Folder of per-stage checkpoints.");

namespace skipswarm::model {

absl::StatusOr<ModelFlags> ReadModelFlags(bool validate_model) {
  ModelFlags f;
  // A shape flag overrides the preset when it was given: on the command
  // line, or (config file, tests) with a value other than its default. A
  // config-file value equal to the default is indistinguishable from none.
  const std::string preset = absl::GetFlag(FLAGS_model);
  bool use_preset = !preset.empty();
  if (use_preset) {
    SS_ASSIGN_OR_RETURN(f.model, ModelPreset(preset));
  }
  auto shape = [use_preset](const char* name, int value, int* field) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    // Abseil keeps "was it on the command line" behind its internal
    // accessor (public in later releases); the library is linked already.
    const bool given =
        flag != nullptr &&
        (absl::flags_internal::PrivateHandleAccessor::IsSpecifiedOnCommandLine(*flag) ||
         flag->CurrentValue() != flag->DefaultValue());
    if (!use_preset || given) *field = value;
  };
  shape("layers", absl::GetFlag(FLAGS_layers), &f.model.num_layers);
  shape("d_model", absl::GetFlag(FLAGS_d_model), &f.model.d_model);
  shape("heads", absl::GetFlag(FLAGS_heads), &f.model.num_heads);
  shape("ffn", absl::GetFlag(FLAGS_ffn), &f.model.ffn_dim);
  shape("vocab", absl::GetFlag(FLAGS_vocab), &f.model.vocab_size);
  shape("seq_len", absl::GetFlag(FLAGS_seq_len), &f.model.seq_len);
  shape("stages", absl::GetFlag(FLAGS_stages), &f.model.num_stages);
  f.model.tie_embeddings = absl::GetFlag(FLAGS_tie_embeddings);
  f.model.init_seed = absl::GetFlag(FLAGS_init_seed);
  absl::Status valid = validate_model ? f.model.Validate() : absl::OkStatus();
  if (!valid.ok()) return valid;

  f.runtime.device = absl::GetFlag(FLAGS_device);
  f.runtime.threads = absl::GetFlag(FLAGS_threads);
  f.runtime.bf16_autocast = absl::GetFlag(FLAGS_bf16);

  f.optimizer.peak_lr = absl::GetFlag(FLAGS_lr);
  f.optimizer.min_lr = absl::GetFlag(FLAGS_min_lr);
  f.optimizer.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  f.optimizer.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  f.optimizer.grad_clip = absl::GetFlag(FLAGS_grad_clip);
  if (!(f.optimizer.peak_lr > 0) || f.optimizer.min_lr < 0 || f.optimizer.warmup_steps < 0) {
    return absl::InvalidArgumentError("need --lr > 0, --min_lr >= 0, --warmup_steps >= 0");
  }
  // Every value is range-checked here, with the flag named: a non-finite
  // learning rate or clip trains into NaN, a negative thread count is not
  // "all cores".
  auto finite = [](const char* flag, double v) -> absl::Status {
    if (std::isfinite(v)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", v, " is not a finite number"));
  };
  SS_RETURN_IF_ERROR(finite("lr", f.optimizer.peak_lr));
  SS_RETURN_IF_ERROR(finite("min_lr", f.optimizer.min_lr));
  SS_RETURN_IF_ERROR(finite("weight_decay", f.optimizer.weight_decay));
  SS_RETURN_IF_ERROR(finite("grad_clip", f.optimizer.grad_clip));
  if (f.optimizer.weight_decay < 0) {
    return absl::InvalidArgumentError("--weight_decay must be >= 0");
  }
  if (f.runtime.threads < 0 || f.runtime.threads > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--threads=", f.runtime.threads, " is outside 0..4096 (0: all cores)"));
  }

  f.averaging.outer_every = absl::GetFlag(FLAGS_outer_every);
  f.averaging.outer_lr = absl::GetFlag(FLAGS_outer_lr);
  f.averaging.outer_momentum = absl::GetFlag(FLAGS_outer_momentum);
  f.averaging.overlap = absl::GetFlag(FLAGS_outer_overlap);
  f.averaging.sync_deadline_factor = absl::GetFlag(FLAGS_outer_deadline_factor);
  f.averaging.sync_deadline_min_s = absl::GetFlag(FLAGS_outer_deadline_min_s);
  f.averaging.upload_floor = absl::GetFlag(FLAGS_outer_upload_floor);
  SS_ASSIGN_OR_RETURN(f.averaging.codec, ParseAvgCodec(absl::GetFlag(FLAGS_avg_codec)));
  SS_RETURN_IF_ERROR(ValidateAveraging(f.averaging));

  f.corpus.paths = absl::GetFlag(FLAGS_corpus);
  f.corpus.validation_fraction = absl::GetFlag(FLAGS_validation_fraction);
  f.samples_per_mb = absl::GetFlag(FLAGS_samples_per_mb);
  f.eval_batches = absl::GetFlag(FLAGS_eval_batches);
  f.final_eval_batches = absl::GetFlag(FLAGS_final_eval_batches);
  if (f.samples_per_mb < 1 || f.eval_batches < 0 || f.final_eval_batches < 0) {
    return absl::InvalidArgumentError(
        "need --samples_per_mb >= 1, --eval_batches >= 0 and --final_eval_batches >= 0");
  }
  SS_RETURN_IF_ERROR(finite("validation_fraction", f.corpus.validation_fraction));
  if (f.corpus.validation_fraction < 0 || f.corpus.validation_fraction >= 1) {
    return absl::InvalidArgumentError("--validation_fraction must be in [0, 1)");
  }
  // Tokens per micro-batch feed int arithmetic all the way down.
  constexpr int64_t kMaxTokensPerMb = int64_t{1} << 24;
  if (static_cast<int64_t>(f.samples_per_mb) * f.model.seq_len > kMaxTokensPerMb) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--samples_per_mb=", f.samples_per_mb, " x --seq_len=", f.model.seq_len, " = ",
        static_cast<int64_t>(f.samples_per_mb) * f.model.seq_len,
        " tokens per micro-batch; at most ", kMaxTokensPerMb));
  }
  f.tokenizer.kind = absl::GetFlag(FLAGS_tokenizer);
  f.tokenizer.sp_model = absl::GetFlag(FLAGS_sp_model);
  f.tokenizer.sp_library = absl::GetFlag(FLAGS_sp_library);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  return f;
}

int64_t EstimateTrainingBytes(const ModelFlags& flags, int64_t params, int64_t blocks,
                              int mbs_in_flight) {
  const double per_token_block =
      4.0 * (16.0 * flags.model.d_model + 3.0 * flags.model.ffn_dim);
  const double tokens = static_cast<double>(flags.samples_per_mb) * flags.model.seq_len;
  const double activations = per_token_block * tokens * static_cast<double>(blocks) *
                             std::max(1, mbs_in_flight);
  const double bytes = 16.0 * static_cast<double>(params) + activations + double(1 << 30);
  return bytes > 9e18 ? int64_t{9000000000000000000} : static_cast<int64_t>(bytes);
}

absl::Status CheckFitsInMemory(int64_t needed, uint64_t available, const std::string& what) {
  if (available == 0 || static_cast<uint64_t>(needed) <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s needs about %.1f GiB of memory (weights, gradients, AdamW state and activations; "
      "estimate) but this machine has %.1f GiB: choose a smaller model (--layers, --d_model, "
      "--ffn, --vocab) or fewer --samples_per_mb",
      what, needed / double(1 << 30), available / double(1 << 30)));
}

}  // namespace skipswarm::model
