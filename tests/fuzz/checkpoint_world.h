// The tiny model's stage modules and optimizers that checkpoint_fuzzer
// restores into and make_checkpoint_seeds saves from, and the layout of the
// fuzzer's flag byte. Test-only.
//
// Input of checkpoint_fuzzer: byte 0 = flags, then either the header JSON
// alone or the whole file (model/checkpoint.h's layout). Flags:
//  - bit 4 (kRawFile) clear: the rest is the header JSON; the fuzzer builds
//    the file around it (magic, version, lengths, CRC) with an intact
//    libtorch archive of the tiny model's stage: bits 5-6 (kArchive*) pick
//    weights only, with AdamW state after one step, with averaging bytes,
//    or with the AdamW state of another stage (whose parameters differ: it
//    does not load, and the restore must leave the weights as they were). Mutations reach every check of the
//    header and of the stage and config, and a restore that succeeds.
//  - bit 4 set: the rest is the whole file; bit 0 (kFixCrc) rewrites its
//    trailing CRC-32C so mutations reach past the CRC check into the
//    libtorch archive, which libtorch's TorchScript importer then loads
//    (README.md: it crashes on some such archives).
//  - bit 1 (kWithOptimizer): restore into an AdamW as well.
//  - bits 2-3 (value mod 3): the stage of the module restored into, and of
//    the archive a header-only input gets.
#ifndef SKIPSWARM_TESTS_FUZZ_CHECKPOINT_WORLD_H_
#define SKIPSWARM_TESTS_FUZZ_CHECKPOINT_WORLD_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/crc32c.h"
#include "model/checkpoint.h"
#include "model/optimizer.h"
#include "model/stage_module.h"
#include "model/tiny_config.h"

namespace skipswarm::fuzz {

constexpr unsigned char kFixCrc = 1;
constexpr unsigned char kWithOptimizer = 2;
constexpr unsigned char kRawFile = 16;
enum ArchiveVariant {
  kArchiveWeights = 0,
  kArchiveAdamW = 1,
  kArchiveAveraging = 2,
  kArchiveForeignAdamW = 3,
};
constexpr int kArchiveVariants = 4;
inline int ArchiveOfFlags(unsigned char flags) { return (flags >> 5) & 3; }
inline unsigned char FlagsForArchive(int variant) {
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

// A whole checkpoint file of `stage` in `variant` (ArchiveVariant): weights
// only, with the AdamW state after one step of gradients of ones, with
// averaging bytes, or (weights moved by 0.5) with such an AdamW state of
// another stage.
inline absl::StatusOr<std::string> TinyCheckpoint(int stage, int variant) {
  TinyStage s(stage);
  if (variant == kArchiveForeignAdamW) {
    {
      // Weights unlike the fuzzer's module's, so copying them shows.
      c10::NoGradGuard no_grad;
      for (auto& p : s.module->parameters()) p.add_(0.5);
    }
    TinyStage other(stage == 0 ? 1 : 0);
    for (auto& p : other.module->parameters()) p.mutable_grad() = at::ones_like(p);
    other.optimizer.adamw().step();
    return model::SerializeStageState(*s.module, &other.optimizer.adamw(), 5, "foreign");
  }
  if (variant == kArchiveAdamW) {
    for (auto& p : s.module->parameters()) p.mutable_grad() = at::ones_like(p);
    s.optimizer.adamw().step();
    return model::SerializeStageState(*s.module, &s.optimizer.adamw(), 5, "data 17");
  }
  if (variant == kArchiveAveraging) {
    return model::SerializeStageState(*s.module, nullptr, 12, "", "outer state");
  }
  return model::SerializeStageState(*s.module, nullptr, 0, "extra text");
}

// The parts of a checkpoint file in model/checkpoint.h's layout: the header
// JSON and the libtorch archive. False when `file` is too short for the
// lengths it declares.
inline bool SplitCheckpoint(const std::string& file, std::string* header, std::string* archive) {
  if (file.size() < 28) return false;
  uint32_t header_len = 0;
  std::memcpy(&header_len, file.data() + 12, 4);
  if (uint64_t{16} + header_len + 8 + 4 > file.size()) return false;
  *header = file.substr(16, header_len);
  *archive = file.substr(16 + header_len + 8, file.size() - 4 - (16 + header_len + 8));
  return true;
}

// The file around `header` and `archive`: magic, version 1, lengths, CRC.
inline std::string JoinCheckpoint(const std::string& header, const std::string& archive) {
  std::string out = "SSWCKPT\n";
  auto put = [&out](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(1, 4);
  put(header.size(), 4);
  out += header;
  put(archive.size(), 8);
  out += archive;
  put(common::Crc32c(out.data(), out.size()), 4);
  return out;
}

}  // namespace skipswarm::fuzz

#endif  // SKIPSWARM_TESTS_FUZZ_CHECKPOINT_WORLD_H_
