// Helpers shared by model/ tests: a tiny config and deterministic tokens.
#ifndef SKIPSWARM_MODEL_TEST_UTIL_H_
#define SKIPSWARM_MODEL_TEST_UTIL_H_

#include <ATen/ATen.h>

#include "model/layers.h"
#include "model/model_config.h"
#include "model/tiny_config.h"

namespace skipswarm::model::testing {

// [2, 8] token ids below 32.
inline at::Tensor TinyTokens(uint64_t seed) {
  at::Generator gen = MakeInitGenerator(seed, 0);
  return at::randint(32, {2, 8}, gen, at::kLong);
}

}  // namespace skipswarm::model::testing

#endif  // SKIPSWARM_MODEL_TEST_UTIL_H_
