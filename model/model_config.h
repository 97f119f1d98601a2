// ModelConfig: the architecture of the staged LLaMA-style transformer, and
// how its blocks are cut into pipeline stages.
//
//   ModelConfig config;                       // the default small model
//   config.num_layers = 12; config.num_stages = 6;
//   SS_RETURN_IF_ERROR(config.Validate());
//   auto [first, end] = config.StageBlocks(3);  // global block range of stage 3
//   std::string json = ModelConfigToJson(config);
//
// The config identifies a model: two nodes can only exchange activations or
// load each other's checkpoints when their ConfigHash() agrees. Runtime
// choices that do not change the maths (device, threads) live in
// RuntimeOptions, outside the hash.
//
// Thread rule: plain value type.
#ifndef SKIPSWARM_MODEL_MODEL_CONFIG_H_
#define SKIPSWARM_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace skipswarm::model {

struct ModelConfig {
  int num_layers = 12;     // transformer blocks in the whole model
  int d_model = 256;       // residual stream width
  int num_heads = 8;       // attention heads; d_model % num_heads == 0
  int ffn_dim = 688;       // SwiGLU hidden width (about 8/3 d_model)
  int vocab_size = 256;    // 256 = byte-level tokenizer
  int seq_len = 128;       // maximum sequence length (rotary table size)
  int num_stages = 6;      // pipeline stages; stage 0 is the data stage
  bool tie_embeddings = true;  // LM head shares the embedding matrix
  double norm_eps = 1e-5;      // RMSNorm epsilon
  double rope_theta = 10000.0; // rotary base
  uint64_t init_seed = 1;      // parameter initialisation seed

  // OK when every field is in range and the layers cover the stages.
  absl::Status Validate() const;

  // Blocks of stage `stage` as the half-open global range [first, end).
  // Blocks are numbered 0..num_layers-1 in stage order; the first
  // num_layers % num_stages stages hold one block more than the others.
  // REQUIRES: Validate().ok(), 0 <= stage < num_stages.
  std::pair<int, int> StageBlocks(int stage) const;

  int head_dim() const { return d_model / num_heads; }

  // Number of float parameters of stage `stage` / of the whole model.
  int64_t StageParameterCount(int stage) const;
  int64_t ParameterCount() const;

  // Hex digest (16 chars) of every field that changes the maths.
  std::string ConfigHash() const;
};

// Runtime choices that do not change the model's identity.
struct RuntimeOptions {
  std::string device = "cpu";  // "cpu", "cuda", "cuda:1"
  int threads = 0;             // intra-op threads; 0 = all cores
  bool bf16_autocast = false;  // bf16 autocast where the device supports it
};

// The fields on which `a` and `b` differ, as "seq_len 64 vs 128, d_model
// 256 vs 128" (a's value first); empty when the hashes agree. Error messages
// print this instead of two summaries that may look alike.
std::string ModelConfigDiff(const ModelConfig& a, const ModelConfig& b);

// JSON object with the field names above ("num_layers", "d_model", ...).
std::string ModelConfigToJson(const ModelConfig& config);
// Parses such an object; missing fields keep their defaults, unknown fields
// are an error (typos should not silently train the wrong model).
absl::StatusOr<ModelConfig> ModelConfigFromJson(const std::string& json);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_MODEL_CONFIG_H_
