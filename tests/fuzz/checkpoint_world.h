// The tiny model's stage modules and optimizers that checkpoint_fuzzer
// restores into and make_checkpoint_seeds saves from, and the layout of the
// fuzzer's flag byte. Test-only.
//
// Input of checkpoint_fuzzer: byte 0 = flags, then either the header JSON
// alone or the whole file (model/checkpoint.h's layout). Flags:
//  - bit 4 (kRawFile) clear: the rest is the header JSON; the fuzzer builds
//    the file around it (magic, version 2, lengths, CRC) with an intact
//    state of the tiny model's stage: bits 5-6 (kState*) pick weights only,
//    with AdamW state after one step, with averaging bytes, or with AdamW
//    state one of whose moments has the wrong shape (it does not load, and
//    the restore must leave the weights and the optimizer as they were).
//    Mutations reach every check of the header and of the stage and
//    config, and a restore that succeeds.
//  - bit 4 set: the rest is the whole file; bit 0 (kFixCrc) rewrites its
//    trailing CRC-32C so mutations reach past the CRC check into the state
//    (model/checkpoint_tensors.h's parser and model/checkpoint_state.cc's
//    checks: our code; a version-1 file is refused as peer state before any
//    libtorch call).
//  - bit 1 (kWithOptimizer): restore into an AdamW as well.
//  - bits 2-3 (value mod 3): the stage of the module restored into, and of
//    the state a header-only input gets.
#ifndef SKIPSWARM_TESTS_FUZZ_CHECKPOINT_WORLD_H_
#define SKIPSWARM_TESTS_FUZZ_CHECKPOINT_WORLD_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/crc32c.h"
#include "model/checkpoint.h"
#include "model/checkpoint_test_util.h"
#include "model/optimizer.h"
#include "model/stage_module.h"
#include "model/tiny_config.h"

namespace skipswarm::fuzz {

constexpr unsigned char kFixCrc = 1;
constexpr unsigned char kWithOptimizer = 2;
constexpr unsigned char kRawFile = 16;
enum StateVariant {
  kStateWeights = 0,
  kStateAdamW = 1,
  kStateAveraging = 2,
  kStateBadAdamW = 3,
};
constexpr int kStateVariants = 4;
inline int StateOfFlags(unsigned char flags) { return (flags >> 5) & 3; }
inline unsigned char FlagsForState(int variant) {
  return static_cast<unsigned char>(variant << 5);
}
inline int StageOfFlags(unsigned char flags) { return ((flags >> 2) & 3) % 3; }
inline unsigned char FlagsForStage(int stage) { return static_cast<unsigned char>(stage << 2); }

// One stage of the tiny model (model/tiny_config.h) with its AdamW, weights
// from the config's fixed init seed.
struct TinyStage {
  explicit TinyStage(int stage)
      : module(std::make_shared<model::StageModule>(model::testing::TinyConfig(), stage)),
        optimizer(*module, model::OptimizerOptions()) {}
  std::shared_ptr<model::StageModule> module;
  model::StageOptimizer optimizer;
};

// A whole checkpoint file of `stage` in `variant` (StateVariant): weights
// only, with the AdamW state after one step of gradients of ones, with
// averaging bytes, or (weights moved by 0.5) with such an AdamW state whose
// first matrix's exp_avg is one row short.
inline absl::StatusOr<std::string> TinyCheckpoint(int stage, int variant) {
  TinyStage s(stage);
  if (variant == kStateAdamW || variant == kStateBadAdamW) {
    for (auto& p : s.module->parameters()) p.mutable_grad() = at::ones_like(p);
    s.optimizer.adamw().step();
  }
  if (variant == kStateBadAdamW) {
    {
      // Weights unlike the fuzzer's module's, so copying them shows.
      c10::NoGradGuard no_grad;
      for (auto& p : s.module->parameters()) p.add_(0.5);
    }
    absl::StatusOr<std::string> good =
        model::SerializeStageState(*s.module, &s.optimizer.adamw(), 5, "bad moment");
    if (!good.ok()) return good;
    absl::StatusOr<std::vector<model::testing::OwnedTensorEntry>> entries =
        model::testing::StateEntries(*good);
    if (!entries.ok()) return entries.status();
    for (auto& e : *entries) {
      const std::string suffix = "/exp_avg";
      if (e.dims.size() == 2 && e.name.size() > suffix.size() &&
          e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        e.data.resize(e.data.size() / e.dims[0] * (e.dims[0] - 1));
        e.dims[0] -= 1;
        return model::testing::WithStateEntries(*good, *entries);
      }
    }
    return absl::InternalError("no matrix moment to cut");
  }
  if (variant == kStateAdamW) {
    return model::SerializeStageState(*s.module, &s.optimizer.adamw(), 5, "data 17");
  }
  if (variant == kStateAveraging) {
    return model::SerializeStageState(*s.module, nullptr, 12, "", "outer state");
  }
  return model::SerializeStageState(*s.module, nullptr, 0, "extra text");
}

// The parts of a checkpoint file in model/checkpoint.h's layout: the header
// JSON and the state. False when `file` is too short for the lengths it
// declares.
inline bool SplitCheckpoint(const std::string& file, std::string* header, std::string* state) {
  if (file.size() < 28) return false;
  uint32_t header_len = 0;
  std::memcpy(&header_len, file.data() + 12, 4);
  if (uint64_t{16} + header_len + 8 + 4 > file.size()) return false;
  *header = file.substr(16, header_len);
  *state = file.substr(16 + header_len + 8, file.size() - 4 - (16 + header_len + 8));
  return true;
}

// The file around `header` and `state`: magic, version 2, lengths, CRC.
inline std::string JoinCheckpoint(const std::string& header, const std::string& state) {
  std::string out = "SSWCKPT\n";
  auto put = [&out](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(2, 4);
  put(header.size(), 4);
  out += header;
  put(state.size(), 8);
  out += state;
  put(common::Crc32c(out.data(), out.size()), 4);
  return out;
}

}  // namespace skipswarm::fuzz

#endif  // SKIPSWARM_TESTS_FUZZ_CHECKPOINT_WORLD_H_
