// The building blocks of the LLaMA-style transformer: RMSNorm, rotary
// position embeddings, causal multi-head self-attention and a SwiGLU MLP,
// combined into a pre-norm residual Block.
//
//   auto block = std::make_shared<Block>(config, /*global_index=*/4);
//   RotaryTable rope = MakeRotaryTable(config);
//   at::Tensor y = block->Forward(x, rope);   // x: [batch, time, d_model]
//
// Parameters are initialised from (config.init_seed, global block index) so a
// block has the same weights whichever stage (or process) builds it.
//
// Thread rule: modules are thread-compatible (one caller at a time).
#ifndef SKIPSWARM_MODEL_LAYERS_H_
#define SKIPSWARM_MODEL_LAYERS_H_

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>

#include "model/model_config.h"

namespace skipswarm::model {

// cos/sin of the rotary angles, each [seq_len, head_dim / 2], plus a
// [seq_len, seq_len] boolean mask that is true above the diagonal.
struct RotaryTable {
  at::Tensor cos;
  at::Tensor sin;
  at::Tensor causal_mask;
};
RotaryTable MakeRotaryTable(const ModelConfig& config);

// x * rsqrt(mean(x^2) + eps) * weight over the last dimension.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// Rotates pairs (i, i + head_dim/2) of x [batch, heads, time, head_dim].
at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTable& rope);

// One pre-norm transformer block: x + Attn(norm(x)), then h + MLP(norm(h)).
class Block : public torch::nn::Module {
 public:
  Block(const ModelConfig& config, int global_index);

  at::Tensor Forward(const at::Tensor& x, const RotaryTable& rope);

  int global_index() const { return global_index_; }

 private:
  at::Tensor Attention(const at::Tensor& x, const RotaryTable& rope);
  at::Tensor Mlp(const at::Tensor& x);

  int global_index_;
  int num_heads_;
  double eps_;
  at::Tensor attn_norm_, wq_, wk_, wv_, wo_;
  at::Tensor mlp_norm_, w_gate_, w_up_, w_down_;
};

// A CPU generator seeded from (seed, stream): the source of every
// initialisation in model/ so that weights never depend on global state.
at::Generator MakeInitGenerator(uint64_t seed, uint64_t stream);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_LAYERS_H_
