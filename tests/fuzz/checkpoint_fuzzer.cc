// Fuzz target: a stage checkpoint (model/checkpoint.h) as a node reads it
// from disk (`--resume`, `skipswarm checkpoints`) or from a peer's copy: the
// bytes through ReadCheckpointInfo, then RestoreStageState into a stage of
// the tiny test model (checkpoint_world.h gives the input layout: a flag
// byte picks the stage, whether an AdamW is restored too, and whether the
// input is the header JSON, put around an intact archive, or the whole
// file, whose trailing CRC may be rewritten so mutations reach the libtorch
// archive).
//
// Nothing may crash or read out of bounds, and two contracts are asserted
// (abort, so both libFuzzer and fuzz_driver.cc report the input):
//  - a restore that fails leaves the module's weights as they were
//    (ParameterDigest unchanged): "a corrupted or foreign checkpoint is a
//    clear Status and leaves the module unchanged";
//  - what RestoreStageState accepts, ReadCheckpointInfo accepts with the
//    same stage, step and extra.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "common/crc32c.h"
#include "model/checkpoint.h"
#include "tests/fuzz/checkpoint_world.h"

namespace {

namespace fuzz = skipswarm::fuzz;
namespace model = skipswarm::model;

void Fail(const char* what) {
  std::fprintf(stderr, "checkpoint_fuzzer: %s\n", what);
  std::abort();
}

// How far inputs got (printed at exit with FUZZ_STATS=1).
struct Reached {
  long inputs = 0, header_ok = 0, restored = 0;
  ~Reached() {
    if (std::getenv("FUZZ_STATS") != nullptr) {
      std::fprintf(stderr, "checkpoint_fuzzer: %ld inputs, %ld headers read, %ld restored\n",
                   inputs, header_ok, restored);
    }
  }
} reached;

// One module per stage, rebuilt after a restore succeeds so every input
// meets the same weights.
std::unique_ptr<fuzz::TinyStage> stages[3];

// The intact archive of each stage and variant, made once.
const std::string& Archive(int stage, int variant) {
  static std::string archives[3][fuzz::kArchiveVariants];
  std::string& a = archives[stage][variant];
  if (a.empty()) {
    absl::StatusOr<std::string> file = fuzz::TinyCheckpoint(stage, variant);
    std::string header;
    if (!file.ok() || !fuzz::SplitCheckpoint(*file, &header, &a)) Fail("cannot make an archive");
  }
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  ++reached.inputs;
  const unsigned char flags = data[0];
  const int s = fuzz::StageOfFlags(flags);
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((flags & fuzz::kRawFile) == 0) {
    bytes = fuzz::JoinCheckpoint(bytes, Archive(s, fuzz::ArchiveOfFlags(flags)));
  } else if ((flags & fuzz::kFixCrc) != 0 && bytes.size() >= 4) {
    const uint32_t crc = skipswarm::common::Crc32c(bytes.data(), bytes.size() - 4);
    std::memcpy(&bytes[bytes.size() - 4], &crc, 4);  // little-endian, as the format
  }

  absl::StatusOr<model::CheckpointInfo> info = model::ReadCheckpointInfo(bytes);
  reached.header_ok += info.ok();

  if (stages[s] == nullptr) stages[s] = std::make_unique<fuzz::TinyStage>(s);
  model::StageModule& module = *stages[s]->module;
  const std::string before = model::ParameterDigest(module);
  absl::StatusOr<model::CheckpointInfo> restored = model::RestoreStageState(
      bytes, module,
      (flags & fuzz::kWithOptimizer) != 0 ? &stages[s]->optimizer.adamw() : nullptr);
  if (!restored.ok()) {
    if (model::ParameterDigest(module) != before) Fail("a failed restore changed the weights");
    return 0;
  }
  ++reached.restored;
  if (!info.ok()) Fail("RestoreStageState accepted what ReadCheckpointInfo refused");
  if (info->stage != restored->stage || info->step != restored->step ||
      info->extra != restored->extra) {
    Fail("RestoreStageState and ReadCheckpointInfo disagree");
  }
  stages[s] = std::make_unique<fuzz::TinyStage>(s);
  return 0;
}
