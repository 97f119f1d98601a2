// Fuzz target: a stage checkpoint (model/checkpoint.h) as a joiner reads a
// peer's state (StateSource::kPeer: version 2 only) or a node reads a
// version-2 file: the bytes through ReadCheckpointInfo, then
// RestoreStageState into a stage of the tiny test model
// (checkpoint_world.h gives the input layout: a flag byte picks the stage,
// whether an AdamW is restored too, and whether the input is the header
// JSON, put around an intact state, or the whole file, whose trailing CRC
// may be rewritten so mutations reach the state's parser). Version-1 files
// (a libtorch archive, read from local files only) are not fuzzed: their
// loader is libtorch's (tests/fuzz/README.md, "Known crash").
//
// Nothing may crash or read out of bounds, and these contracts are
// asserted (abort, so both libFuzzer and fuzz_driver.cc report the input):
//  - a restore that fails leaves the module's weights and the optimizer's
//    state as they were: "a corrupted or foreign checkpoint is a clear
//    Status and leaves both unchanged";
//  - a version-1 input is never restored as peer state;
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
// [0] header-only inputs, [1] whole files.
struct Reached {
  long inputs[2] = {}, header_ok[2] = {}, restored[2] = {};
  ~Reached() {
    if (std::getenv("FUZZ_STATS") == nullptr) return;
    for (int raw = 0; raw < 2; ++raw) {
      std::fprintf(stderr, "checkpoint_fuzzer: %s: %ld inputs, %ld headers read, %ld restored\n",
                   raw ? "whole files" : "headers", inputs[raw], header_ok[raw], restored[raw]);
    }
  }
} reached;

// One module per stage, rebuilt after a restore succeeds so every input
// meets the same weights.
std::unique_ptr<fuzz::TinyStage> stages[3];

// The intact state of each stage and variant, made once.
const std::string& State(int stage, int variant) {
  static std::string states[3][fuzz::kStateVariants];
  std::string& a = states[stage][variant];
  if (a.empty()) {
    absl::StatusOr<std::string> file = fuzz::TinyCheckpoint(stage, variant);
    std::string header;
    if (!file.ok() || !fuzz::SplitCheckpoint(*file, &header, &a)) Fail("cannot make a state");
  }
  return a;
}

// The module's weights and, when `optimizer` is set, its AdamW state, as
// bytes (equal bytes <=> unchanged).
std::string Snapshot(model::StageModule& module, torch::optim::Optimizer* optimizer) {
  absl::StatusOr<std::string> bytes = model::SerializeStageState(module, optimizer, 0);
  if (!bytes.ok()) Fail("cannot serialise the module");
  return *bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const unsigned char flags = data[0];
  const int raw = (flags & fuzz::kRawFile) != 0;
  ++reached.inputs[raw];
  const int s = fuzz::StageOfFlags(flags);
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((flags & fuzz::kRawFile) == 0) {
    bytes = fuzz::JoinCheckpoint(bytes, State(s, fuzz::StateOfFlags(flags)));
  } else if ((flags & fuzz::kFixCrc) != 0 && bytes.size() >= 4) {
    const uint32_t crc = skipswarm::common::Crc32c(bytes.data(), bytes.size() - 4);
    std::memcpy(&bytes[bytes.size() - 4], &crc, 4);  // little-endian, as the format
  }

  absl::StatusOr<model::CheckpointInfo> info = model::ReadCheckpointInfo(bytes);
  reached.header_ok[raw] += info.ok();

  if (stages[s] == nullptr) stages[s] = std::make_unique<fuzz::TinyStage>(s);
  model::StageModule& module = *stages[s]->module;
  torch::optim::Optimizer* optimizer =
      (flags & fuzz::kWithOptimizer) != 0 ? &stages[s]->optimizer.adamw() : nullptr;
  const std::string before = Snapshot(module, optimizer);
  absl::StatusOr<model::CheckpointInfo> restored =
      model::RestoreStageState(bytes, module, optimizer, model::StateSource::kPeer);
  if (!restored.ok()) {
    if (Snapshot(module, optimizer) != before) {
      Fail("a failed restore changed the weights or the optimizer state");
    }
    return 0;
  }
  ++reached.restored[raw];
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  if (version != 2) Fail("a version-1 state was restored as peer state");
  if (!info.ok()) Fail("RestoreStageState accepted what ReadCheckpointInfo refused");
  if (info->stage != restored->stage || info->step != restored->step ||
      info->extra != restored->extra) {
    Fail("RestoreStageState and ReadCheckpointInfo disagree");
  }
  stages[s] = std::make_unique<fuzz::TinyStage>(s);
  return 0;
}
