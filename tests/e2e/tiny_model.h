// The model the end-to-end tests train: 3 stages, 3 blocks, d_model 64,
// 32-token sequences (0.14 M parameters), one intra-op thread per process,
// a short warm-up so a few iterations show learning. Small enough that a
// 6-process `local` swarm trains it in seconds on 2 cores (tests/README.md).
#ifndef SKIPSWARM_TESTS_E2E_TINY_MODEL_H_
#define SKIPSWARM_TESTS_E2E_TINY_MODEL_H_

#include <string>
#include <vector>

namespace skipswarm::tests {

// `command` followed by the tiny model's flags.
inline std::vector<std::string> TinyModelArgs(const std::string& command) {
  return {command,         "--stages=3",         "--layers=3",       "--d_model=64",
          "--heads=4",     "--ffn=128",          "--seq_len=32",     "--samples_per_mb=2",
          "--threads=1",   "--warmup_steps=2",   "--lr=0.003",       "--seed=1",
          "--init_seed=1"};
}

}  // namespace skipswarm::tests

#endif  // SKIPSWARM_TESTS_E2E_TINY_MODEL_H_
