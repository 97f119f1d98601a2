// Writes checkpoint_fuzzer's seeds (checkpoint_world.h gives the layout):
//   bazel run //tests/fuzz:make_checkpoint_seeds -- $PWD/tests/fuzz/corpus
// into checkpoint/ the header JSON of valid checkpoints of the tiny model
// (the fuzzer puts an intact state around it): stage 1 with its AdamW
// state after one step, stage 0 with averaging bytes, stage 2 weights only,
// stage 1 with an AdamW moment of the wrong shape (which does not load);
// into checkpoint_raw/ the same as whole files with the CRC-fixing flag
// set, so mutations reach the state's parser.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/fuzz/checkpoint_world.h"

namespace {

namespace fuzz = skipswarm::fuzz;

bool Write(const std::string& path, unsigned char flags, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.put(static_cast<char>(flags));
  out << bytes;
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_checkpoint_seeds CORPUS_DIR\n");
    return 2;
  }
  const std::string root = argv[1];
  std::filesystem::create_directories(root + "/checkpoint");
  std::filesystem::create_directories(root + "/checkpoint_raw");
  struct Seed {
    const char* name;
    int stage;
    int variant;
    unsigned char flags;
  };
  const Seed seeds[] = {
      {"stage1_adamw", 1, fuzz::kStateAdamW, fuzz::kWithOptimizer},
      {"stage0_averaging", 0, fuzz::kStateAveraging, 0},
      {"stage2_weights", 2, fuzz::kStateWeights, 0},
      {"stage1_bad_adamw", 1, fuzz::kStateBadAdamW, fuzz::kWithOptimizer},
  };
  bool ok = true;
  for (const Seed& seed : seeds) {
    absl::StatusOr<std::string> file = fuzz::TinyCheckpoint(seed.stage, seed.variant);
    std::string header, state;
    if (!file.ok() || !fuzz::SplitCheckpoint(*file, &header, &state)) {
      std::fprintf(stderr, "%s: cannot make the checkpoint\n", seed.name);
      return 1;
    }
    const unsigned char flags = seed.flags | fuzz::FlagsForStage(seed.stage);
    ok &= Write(root + "/checkpoint/" + seed.name, flags | fuzz::FlagsForState(seed.variant),
                header);
    // A prefix of its own: run_fuzzer.sh copies both folders into one.
    ok &= Write(root + "/checkpoint_raw/raw_" + std::string(seed.name), flags | fuzz::kRawFile | fuzz::kFixCrc,
                *file);
  }
  return ok ? 0 : 1;
}
