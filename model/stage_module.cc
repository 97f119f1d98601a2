#include "model/stage_module.h"

#include <glog/logging.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace skipswarm::model {

StageModule::StageModule(const ModelConfig& config, int stage)
    : config_(config), stage_(stage), rope_(MakeRotaryTable(config)) {
  CHECK(config.Validate().ok()) << config.Validate();
  CHECK(stage >= 0 && stage < config.num_stages) << "stage " << stage;
  // Buffers follow the module on MoveTo().
  rope_.cos = register_buffer("rope_cos", rope_.cos);
  rope_.sin = register_buffer("rope_sin", rope_.sin);
  rope_.causal_mask = register_buffer("causal_mask", rope_.causal_mask);
  if (stage == 0) {
    at::Generator gen = MakeInitGenerator(config.init_seed, 1);
    const int64_t v = config.vocab_size, d = config.d_model;
    embedding_ = register_parameter("embedding",
                                    at::empty({v, d}, at::kFloat).normal_(0.0, 0.02, gen));
  }
  auto [first, end] = config.StageBlocks(stage);
  for (int i = first; i < end; ++i) {
    blocks_.push_back(
        register_module(absl::StrCat("block_", i), std::make_shared<Block>(config, i)));
  }
  if (stage == 0) {
    final_norm_ = register_parameter("final_norm", at::ones({config.d_model}));
    if (!config.tie_embeddings) {
      at::Generator gen = MakeInitGenerator(config.init_seed, 2);
      head_ = register_parameter(
          "head", at::empty({config.vocab_size, config.d_model}, at::kFloat)
                      .normal_(0.0, 0.02, gen));
    }
  }
}

void StageModule::MoveTo(const at::Device& device) {
  to(device);
  // Module::to swaps data inside the registered tensors, so the handles kept
  // in rope_ and the parameter members still point at the moved storage.
}

at::Tensor StageModule::Embed(const at::Tensor& tokens) {
  CHECK(is_data_stage());
  return at::embedding(embedding_, tokens);
}

at::Tensor StageModule::RunBlocks(const at::Tensor& x) {
  at::Tensor h = x;
  for (auto& block : blocks_) h = block->Forward(h, rope_);
  return h;
}

at::Tensor StageModule::Head(const at::Tensor& x) {
  CHECK(is_data_stage());
  at::Tensor h = RmsNorm(x, final_norm_, config_.norm_eps);
  return at::linear(h, config_.tie_embeddings ? embedding_ : head_);
}

at::Tensor StageModule::Loss(const at::Tensor& x, const at::Tensor& targets) {
  at::Tensor logits = Head(x);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(at::kFloat),
                                targets.reshape({-1}));
}

}  // namespace skipswarm::model
