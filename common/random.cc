#include "common/random.h"

#include <cmath>

namespace skipswarm::common {

uint64_t MixSeed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Random::Random(uint64_t seed) : seed_(seed), engine_(MixSeed(seed)) {}

Random Random::Fork(absl::string_view label) const {
  // FNV-1a over the label, then mixed with our seed.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : label) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return Random(MixSeed(seed_ ^ MixSeed(h)));
}

Random Random::Fork(uint64_t index) const {
  return Random(MixSeed(seed_ ^ MixSeed(index + 0x51ed270b27f2a1c5ULL)));
}

double Random::UniformDouble() {
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

double Random::Uniform(double lo, double hi) {
  return lo + (hi - lo) * UniformDouble();
}

int64_t Random::UniformInt(int64_t lo, int64_t hi) {
  uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(engine_());  // full range
  // Rejection sampling removes modulo bias.
  uint64_t limit = max() - max() % span;
  uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return lo + static_cast<int64_t>(x % span);
}

bool Random::Bernoulli(double p) { return UniformDouble() < p; }

double Random::Exponential(double mean) {
  return -mean * std::log1p(-UniformDouble());
}

double Random::Normal(double mean, double stddev) {
  // Box-Muller; one draw per call keeps the stream simple to reason about.
  double u1 = 1.0 - UniformDouble();  // (0, 1]
  double u2 = UniformDouble();
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) *
                    std::cos(2.0 * M_PI * u2);
}

}  // namespace skipswarm::common
