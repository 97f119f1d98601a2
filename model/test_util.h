// Helpers shared by model/ tests: a tiny config, deterministic tokens and a
// fresh folder under the test's temp dir.
#ifndef SKIPSWARM_MODEL_TEST_UTIL_H_
#define SKIPSWARM_MODEL_TEST_UTIL_H_

#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "model/layers.h"
#include "model/model_config.h"
#include "model/tiny_config.h"

namespace skipswarm::model::testing {

// [2, 8] token ids below 32.
inline at::Tensor TinyTokens(uint64_t seed) {
  at::Generator gen = MakeInitGenerator(seed, 0);
  return at::randint(32, {2, 8}, gen, at::kLong);
}

// TEST_TMPDIR/NAME (or /tmp/NAME outside bazel), emptied.
inline std::string FreshTestDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace skipswarm::model::testing

#endif  // SKIPSWARM_MODEL_TEST_UTIL_H_
