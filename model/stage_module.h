// StageModule: the parameters and maths of one pipeline stage (docs/DESIGN.md §1).
//
//   Stage 0 (data stage): token embedding, blocks [StageBlocks(0)], and the
//     final RMSNorm + LM head + loss (the "tail", run at the end of a route).
//   Stage s > 0: blocks [StageBlocks(s)] only.
//
// A stage is buildable alone: a node hosting stage 3 allocates only stage 3.
//
//   auto stage = std::make_shared<StageModule>(config, 0);
//   at::Tensor x = stage->Embed(tokens);     // [B, T] int64 -> [B, T, D]
//   x = stage->RunBlocks(x);
//   at::Tensor logits = stage->Head(x);      // stage 0 only
//
// Parameter names carry the global block index ("block_7.wq"), so a
// checkpoint or digest is stable however the stages are cut.
//
// Thread rule: thread-compatible.
#ifndef SKIPSWARM_MODEL_STAGE_MODULE_H_
#define SKIPSWARM_MODEL_STAGE_MODULE_H_

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <memory>
#include <vector>

#include "model/layers.h"
#include "model/model_config.h"

namespace skipswarm::model {

class StageModule : public torch::nn::Module {
 public:
  // REQUIRES: config.Validate().ok(), 0 <= stage < config.num_stages.
  StageModule(const ModelConfig& config, int stage);

  int stage() const { return stage_; }
  bool is_data_stage() const { return stage_ == 0; }
  const ModelConfig& config() const { return config_; }

  // Moves parameters and the rotary table to `device` (e.g. "cuda:0").
  void MoveTo(const at::Device& device);

  // Stage 0 only: tokens [B, T] (int64, values < vocab) -> [B, T, D].
  at::Tensor Embed(const at::Tensor& tokens);
  // Runs this stage's blocks in order.
  at::Tensor RunBlocks(const at::Tensor& x);
  // Stage 0 only: final norm + LM head, [B, T, D] -> [B, T, vocab].
  at::Tensor Head(const at::Tensor& x);
  // Stage 0 only: mean next-token cross-entropy of Head(x) against
  // targets [B, T] (int64).
  at::Tensor Loss(const at::Tensor& x, const at::Tensor& targets);

  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }

 private:
  ModelConfig config_;
  int stage_;
  RotaryTable rope_;
  std::vector<std::shared_ptr<Block>> blocks_;
  at::Tensor embedding_;   // [vocab, D], stage 0
  at::Tensor final_norm_;  // [D], stage 0
  at::Tensor head_;        // [vocab, D], stage 0 and untied only
};

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_STAGE_MODULE_H_
