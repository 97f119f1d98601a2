// Seeded, reproducible randomness passed explicitly to whoever needs it.
//
//   common::Random rng(seed);                 // main logs the seed
//   common::Random gossip_rng = rng.Fork("gossip");
//   double jitter = rng.Uniform(0.0, 0.1);
//
// The same seed gives the same sequence on every machine and build: the
// engine is std::mt19937_64 (fully specified by the C++ standard) and the
// distributions are implemented here rather than taken from the standard
// library, whose distributions are implementation-defined. `Fork` derives
// an independent child stream from a label, so adding draws in one module
// does not shift another module's sequence.
//
// Thread rule: thread-compatible (one owner, or external locking). Also a
// UniformRandomBitGenerator, so it can be passed as absl::BitGenRef.
#ifndef SKIPSWARM_COMMON_RANDOM_H_
#define SKIPSWARM_COMMON_RANDOM_H_

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/string_view.h"

namespace skipswarm::common {

class Random {
 public:
  using result_type = uint64_t;

  explicit Random(uint64_t seed);

  uint64_t seed() const { return seed_; }

  // A child generator whose seed depends only on this seed and `label`.
  Random Fork(absl::string_view label) const;
  Random Fork(uint64_t index) const;

  static constexpr result_type min() { return 0; }
  static constexpr result_type max() {
    return std::numeric_limits<result_type>::max();
  }
  result_type operator()() { return engine_(); }

  // Uniform in [0, 1).
  double UniformDouble();
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi);
  // Uniform integer in [lo, hi] (inclusive). REQUIRES: lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);
  // True with probability p.
  bool Bernoulli(double p);
  // Exponential with the given mean (> 0).
  double Exponential(double mean);
  // Standard-normal sample scaled: mean + stddev * N(0, 1).
  double Normal(double mean, double stddev);

  // Fisher-Yates shuffle.
  template <typename T>
  void Shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(UniformInt(0, static_cast<int64_t>(i) - 1));
      std::swap(items[i - 1], items[j]);
    }
  }

 private:
  uint64_t seed_;
  std::mt19937_64 engine_;
};

// SplitMix64 finaliser: a good 64-bit mix, used to derive seeds.
uint64_t MixSeed(uint64_t x);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_RANDOM_H_
