#include "model/layers.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>

#include "common/random.h"

namespace skipswarm::model {

at::Generator MakeInitGenerator(uint64_t seed, uint64_t stream) {
  return at::detail::createCPUGenerator(
      common::MixSeed(common::MixSeed(seed) ^ (stream + 0x9e3779b97f4a7c15ULL)));
}

RotaryTable MakeRotaryTable(const ModelConfig& config) {
  const int64_t half = config.head_dim() / 2;
  at::Tensor idx = at::arange(half, at::kDouble);
  at::Tensor inv_freq = at::pow(config.rope_theta, -idx / static_cast<double>(half));
  at::Tensor pos = at::arange(config.seq_len, at::kDouble);
  at::Tensor angles = at::outer(pos, inv_freq);  // [seq_len, half]
  RotaryTable t;
  t.cos = angles.cos().to(at::kFloat);
  t.sin = angles.sin().to(at::kFloat);
  t.causal_mask = at::ones({config.seq_len, config.seq_len}, at::kBool).triu(1);
  return t;
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor ms = x.pow(2).mean(-1, /*keepdim=*/true);
  return x * at::rsqrt(ms + eps) * weight;
}

at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTable& rope) {
  const int64_t t = x.size(2);
  const int64_t half = x.size(3) / 2;
  at::Tensor cos = rope.cos.slice(0, 0, t);
  at::Tensor sin = rope.sin.slice(0, 0, t);
  at::Tensor x1 = x.slice(-1, 0, half);
  at::Tensor x2 = x.slice(-1, half, 2 * half);
  return at::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

Block::Block(const ModelConfig& config, int global_index)
    : global_index_(global_index), num_heads_(config.num_heads), eps_(config.norm_eps) {
  at::Generator gen = MakeInitGenerator(config.init_seed, 1000 + global_index);
  const int64_t d = config.d_model;
  const int64_t f = config.ffn_dim;
  const double std = 0.02;
  // GPT-2 style: projections into the residual stream shrink with depth.
  const double out_std = 0.02 / std::sqrt(2.0 * config.num_layers);
  auto normal = [&gen](at::IntArrayRef shape, double s) {
    return at::empty(shape, at::kFloat).normal_(0.0, s, gen);
  };
  attn_norm_ = register_parameter("attn_norm", at::ones({d}));
  wq_ = register_parameter("wq", normal({d, d}, std));
  wk_ = register_parameter("wk", normal({d, d}, std));
  wv_ = register_parameter("wv", normal({d, d}, std));
  wo_ = register_parameter("wo", normal({d, d}, out_std));
  mlp_norm_ = register_parameter("mlp_norm", at::ones({d}));
  w_gate_ = register_parameter("w_gate", normal({f, d}, std));
  w_up_ = register_parameter("w_up", normal({f, d}, std));
  w_down_ = register_parameter("w_down", normal({d, f}, out_std));
}

at::Tensor Block::Attention(const at::Tensor& x, const RotaryTable& rope) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  const int64_t hd = d / num_heads_;
  auto heads = [&](const at::Tensor& w) {
    return at::linear(x, w).view({b, t, num_heads_, hd}).transpose(1, 2);
  };
  at::Tensor q = ApplyRotary(heads(wq_), rope);
  at::Tensor k = ApplyRotary(heads(wk_), rope);
  at::Tensor v = heads(wv_);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));
  scores = scores.masked_fill(rope.causal_mask.slice(0, 0, t).slice(1, 0, t),
                              -std::numeric_limits<float>::infinity());
  at::Tensor out = at::matmul(at::softmax(scores, -1), v);
  return at::linear(out.transpose(1, 2).reshape({b, t, d}), wo_);
}

at::Tensor Block::Mlp(const at::Tensor& x) {
  return at::linear(at::silu(at::linear(x, w_gate_)) * at::linear(x, w_up_), w_down_);
}

at::Tensor Block::Forward(const at::Tensor& x, const RotaryTable& rope) {
  at::Tensor h = x + Attention(RmsNorm(x, attn_norm_, eps_), rope);
  return h + Mlp(RmsNorm(h, mlp_norm_, eps_));
}

}  // namespace skipswarm::model
