#include "model/memory_estimate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace skipswarm::model {

// Note [Stage memory estimate]
// Activations saved for backward, per token and per block, in elements
// (model/layers.cc's Block::Forward, d = d_model, f = ffn_dim, h = heads,
// t = seq_len):
//   attention: the block input and its norm (2d), q/k/v before and q/k
//     after rotary (5d), the softmax output (h t: autograd keeps neither
//     the raw scores, which the q k^T product does not need, nor the masked
//     copy), the attention output before and after the head merge (2d);
//   MLP: the residual h and its norm (2d), gate, up, silu(gate) and the
//     product (4f).
// That is 11d + 4f elements of 4 bytes (2 under bf16 autocast, plus the
// norms' float32 inputs: 5d more of 2 bytes) and h t bytes of attention
// probabilities: 4 in fp32; 6 under bf16 autocast, which runs softmax in
// float32 and keeps a bf16 copy for the product with v. Stage 0 adds the
// embedding output (d), the final norm's input and output (2d) and, for
// the loss, the logits and their log-softmax (2 vocab), in float32.
// Once per stage, not per micro-batch: autocast's bf16 weight copies
// (2 bytes a parameter) and one block's backward temporaries, about three
// float32 tensors of the attention probabilities' size (3 x 4 h t bytes a
// token).
// Checked on a GPU (tests/gpu/gpu-check.sh; figures in model/README.md):
// the 125m and 350m presets, fp32 and bf16, peak device memory (CUDA
// context excluded) within a few percent above the estimate, which leaves
// out the caching allocator's slack.
StageMemoryEstimate EstimateStageMemory(const ModelConfig& config, int stage,
                                        const MemoryEstimateOptions& options) {
  StageMemoryEstimate e;
  e.stage = stage;
  e.parameters = config.StageParameterCount(stage);
  e.weight_bytes = 4 * e.parameters;
  e.gradient_bytes = 4 * e.parameters;
  e.optimizer_bytes = 8 * e.parameters;
  const int64_t d = config.d_model, f = config.ffn_dim, h = config.num_heads,
                t = config.seq_len, v = config.vocab_size;
  const auto [first, end] = config.StageBlocks(stage);
  const int64_t blocks = end - first;
  const int64_t tokens = static_cast<int64_t>(options.samples_per_mb) * t;
  const bool bf16 = options.bf16_activations;
  const int64_t elem = bf16 ? 2 : 4;
  const int64_t probs = bf16 ? 6 : 4;
  int64_t per_token =
      blocks * ((11 * d + 4 * f) * elem + (bf16 ? 5 * d * 2 : 0) + probs * h * t);
  if (stage == 0) per_token += 3 * d * 4 + 2 * v * 4;
  e.activation_bytes_per_mb = tokens * per_token;
  e.in_flight_mbs = std::max(1, options.in_flight_mbs);
  e.autocast_weight_bytes = bf16 ? 2 * e.parameters : 0;
  e.backward_workspace_bytes = blocks > 0 ? 3 * 4 * h * t * tokens : 0;
  e.total_bytes = e.weight_bytes + e.gradient_bytes + e.optimizer_bytes +
                  e.activation_bytes_per_mb * e.in_flight_mbs + e.autocast_weight_bytes +
                  e.backward_workspace_bytes;
  return e;
}

StageMemoryEstimate EstimateLargestStage(const ModelConfig& config,
                                         const MemoryEstimateOptions& options) {
  StageMemoryEstimate best;
  for (int s = 0; s < config.num_stages; ++s) {
    StageMemoryEstimate e = EstimateStageMemory(config, s, options);
    if (s == 0 || e.total_bytes > best.total_bytes) best = e;
  }
  return best;
}

StageMemoryEstimate EstimateWholeModel(const ModelConfig& config,
                                       const MemoryEstimateOptions& options) {
  MemoryEstimateOptions one = options;
  one.in_flight_mbs = 1;
  StageMemoryEstimate sum;
  sum.stage = -1;
  for (int s = 0; s < config.num_stages; ++s) {
    const StageMemoryEstimate e = EstimateStageMemory(config, s, one);
    sum.parameters += e.parameters;
    sum.weight_bytes += e.weight_bytes;
    sum.gradient_bytes += e.gradient_bytes;
    sum.optimizer_bytes += e.optimizer_bytes;
    sum.activation_bytes_per_mb += e.activation_bytes_per_mb;
    sum.autocast_weight_bytes += e.autocast_weight_bytes;
    // One backward runs at a time: the largest stage's temporaries.
    sum.backward_workspace_bytes =
        std::max(sum.backward_workspace_bytes, e.backward_workspace_bytes);
  }
  sum.total_bytes = sum.weight_bytes + sum.gradient_bytes + sum.optimizer_bytes +
                    sum.activation_bytes_per_mb + sum.autocast_weight_bytes +
                    sum.backward_workspace_bytes;
  return sum;
}

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  if (bytes < (int64_t{1} << 20)) return absl::StrFormat("%.1f KiB", b / 1024);
  if (bytes < (int64_t{1} << 30)) return absl::StrFormat("%.1f MiB", b / (1 << 20));
  return absl::StrFormat("%.2f GiB", b / (1 << 30));
}

std::string DescribeStageMemory(const StageMemoryEstimate& e) {
  return absl::StrFormat(
      "%s: %.2f M params; weights %s + grads %s + AdamW %s + activations %s/micro-batch "
      "x %d%s + backward workspace %s = %s",
      e.stage < 0 ? std::string("all stages") : absl::StrCat("stage ", e.stage),
      e.parameters / 1e6, FormatBytes(e.weight_bytes), FormatBytes(e.gradient_bytes),
      FormatBytes(e.optimizer_bytes), FormatBytes(e.activation_bytes_per_mb), e.in_flight_mbs,
      e.autocast_weight_bytes > 0
          ? absl::StrCat(" + bf16 weight copies ", FormatBytes(e.autocast_weight_bytes))
          : std::string(),
      FormatBytes(e.backward_workspace_bytes), FormatBytes(e.total_bytes));
}

absl::Status CheckStageFits(const StageMemoryEstimate& e, int64_t free_bytes,
                            const std::string& device) {
  if (free_bytes < 0 || e.total_bytes <= free_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "device ", device, " has ", FormatBytes(free_bytes), " free (", free_bytes,
      " bytes) but one stage needs an estimated ", FormatBytes(e.total_bytes), " (",
      e.total_bytes, " bytes): ", DescribeStageMemory(e),
      "; use a smaller --model, more --stages or a smaller --samples_per_mb"));
}

// Note [Memory slots from the estimate]: a node's memory slots are the
// micro-batches whose saved activations it holds at once (node/stage's
// admission limit). The static part (weights, gradients, AdamW) is paid
// once per hosted stage; each slot adds one micro-batch's activations of
// the largest stage. The daemon lowers --memory_slots to what fits at start
// and, when an allocation fails anyway, again at run time (Note [Memory
// slots] in node/stage/stage_server.cc).
MemoryFit FitInMemory(const StageMemoryEstimate& e, int64_t free_bytes, int hosted, int wanted) {
  MemoryFit fit;
  if (free_bytes < 0) {
    fit.stages = -1;
    fit.slots = wanted;
    return fit;
  }
  const int64_t fixed = e.weight_bytes + e.gradient_bytes + e.optimizer_bytes +
                       e.autocast_weight_bytes + e.backward_workspace_bytes;
  const int64_t act = std::max<int64_t>(1, e.activation_bytes_per_mb);
  fit.stages = static_cast<int>(std::min<int64_t>(1 << 20, free_bytes / (fixed + act)));
  const int64_t left = free_bytes - std::max(1, hosted) * fixed;
  fit.slots = left < act ? 0 : static_cast<int>(std::min<int64_t>(wanted, left / act));
  return fit;
}

int64_t MaxActivationBytes(const ModelConfig& config, int samples_per_mb) {
  return int64_t{4} * std::max(1, samples_per_mb) * config.seq_len * config.d_model;
}

int64_t MaxFramePayloadBytes(const ModelConfig& config, int samples_per_mb) {
  return 2 * MaxActivationBytes(config, samples_per_mb) + (int64_t{1} << 20);
}

}  // namespace skipswarm::model
