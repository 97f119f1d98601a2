// Export to a Hugging Face LLaMA checkpoint: config.json plus
// model.safetensors, loadable with transformers' LlamaForCausalLM.
//
//   std::vector<std::shared_ptr<StageModule>> stages = ...;  // all stages
//   SS_RETURN_IF_ERROR(ExportHuggingFace(stages, "/tmp/hf", HfExportOptions{}));
//
// Note [HF LLaMA mapping]
// Our model (model/layers.h) is LLaMA's maths exactly: pre-norm blocks with
// RMSNorm (x * rsqrt(mean(x^2) + eps) * w), bias-free q/k/v/o projections,
// rotary embeddings that rotate the pairs (i, i + head_dim/2) with angles
// pos * theta^(-2i/head_dim) (HF's rotate_half layout, so q and k need no
// permutation; Meta's original checkpoints interleave pairs, which HF's
// converter permutes into this layout), a SwiGLU MLP
// down(silu(gate(x)) * up(x)), a final RMSNorm and an LM head that shares
// the embedding when tie_embeddings. Every head has its own k/v
// (num_key_value_heads = num_attention_heads). Names:
//   embedding            -> model.embed_tokens.weight
//   block_i.attn_norm    -> model.layers.i.input_layernorm.weight
//   block_i.wq/wk/wv/wo  -> model.layers.i.self_attn.{q,k,v,o}_proj.weight
//   block_i.mlp_norm     -> model.layers.i.post_attention_layernorm.weight
//   block_i.w_gate/w_up/w_down -> model.layers.i.mlp.{gate,up,down}_proj.weight
//   final_norm           -> model.norm.weight
//   head (untied only)   -> lm_head.weight
// Two differences that do not change the logits: HF computes the rotary
// frequencies in float32 (ours in double, rounded to float32 once), and
// the byte tokenizer has no BOS/EOS tokens (config.json names none).
//
// Thread rule: free functions; the modules must not be trained meanwhile.
#ifndef SKIPSWARM_MODEL_HF_EXPORT_H_
#define SKIPSWARM_MODEL_HF_EXPORT_H_

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/model_config.h"
#include "model/stage_module.h"

namespace skipswarm::model {

struct HfExportOptions {
  // Also write skipswarm_reference.safetensors: "tokens" (I64 [2, T]) and
  // our "logits" (F32 [2, T, vocab]) for a fixed batch, which a checker
  // compares with transformers' (tools/hf-check.sh).
  bool reference_logits = true;
};

// Our parameter name -> the HF tensor name (Note [HF LLaMA mapping]);
// InvalidArgument for a name outside the mapping.
absl::StatusOr<std::string> HfTensorName(const std::string& ours);

// transformers' LlamaConfig for `config`, as JSON text.
std::string HfConfigJson(const ModelConfig& config);

// Writes config.json, model.safetensors (float32) and optionally the
// reference batch into `out_dir` (created). `stages[s]` is stage s; all
// stages of one config, on any device.
absl::Status ExportHuggingFace(const std::vector<std::shared_ptr<StageModule>>& stages,
                               const std::string& out_dir, const HfExportOptions& options);

// Whole-model logits [B, T, vocab] of tokens [B, T]: stage 0's embedding,
// every stage's blocks in order, stage 0's head. No gradients.
at::Tensor FullModelLogits(const std::vector<std::shared_ptr<StageModule>>& stages,
                           const at::Tensor& tokens);

// Loads the train-ref checkpoint folder `dir` (stage-<s>.ckpt files, all at
// one step) into freshly built CPU stages.
absl::StatusOr<std::vector<std::shared_ptr<StageModule>>> LoadCheckpointStages(
    const std::string& dir);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_HF_EXPORT_H_
