// Helpers shared by model/ tests: a tiny config and deterministic tokens.
#ifndef SKIPSWARM_MODEL_TEST_UTIL_H_
#define SKIPSWARM_MODEL_TEST_UTIL_H_

#include <ATen/ATen.h>

#include "model/layers.h"
#include "model/model_config.h"

namespace skipswarm::model::testing {

inline ModelConfig TinyConfig(bool tied = true) {
  ModelConfig c;
  c.num_layers = 6;
  c.d_model = 16;
  c.num_heads = 2;
  c.ffn_dim = 24;
  c.vocab_size = 32;
  c.seq_len = 8;
  c.num_stages = 3;
  c.tie_embeddings = tied;
  c.init_seed = 11;
  return c;
}

// [2, 8] token ids below 32.
inline at::Tensor TinyTokens(uint64_t seed) {
  at::Generator gen = MakeInitGenerator(seed, 0);
  return at::randint(32, {2, 8}, gen, at::kLong);
}

}  // namespace skipswarm::model::testing

#endif  // SKIPSWARM_MODEL_TEST_UTIL_H_
