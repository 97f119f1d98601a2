// The tiny model every torch test trains (6 layers of width 16 over a
// 32-token vocabulary, 3 stages): one definition for model/ tests and the
// cross-module tests, which override only the fields they vary. Test-only.
#ifndef SKIPSWARM_MODEL_TINY_CONFIG_H_
#define SKIPSWARM_MODEL_TINY_CONFIG_H_

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

}  // namespace skipswarm::model::testing

#endif  // SKIPSWARM_MODEL_TINY_CONFIG_H_
