#include "model/output_sketch.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::model {

// Note [Output sketch]
// A CountSketch: element i goes to bucket h(i) in [0, k) with sign s(i) in
// {-1, +1}, both drawn from a 64-bit mix of (seed, i); projection j is the
// signed sum of its bucket's elements. So the sketch is S y for a fixed
// k x n matrix S with one +-1 per column, costs one pass over y whatever k
// is, and needs no stored matrix.
//
// The check. Y sends S y_Y and ||y_Y||; the checker holds X's output as it
// arrived, x = y_X + codec error, and computes S x with the same seed. With
// d = x - y_Y (linearity: S d = S x - S y_Y):
//  - norm: | ||x|| - ||y_Y|| | <= ||d|| (triangle inequality). For honest
//    replicas ||d|| <= B = CodecErrorBound(x) + device_rel * ||x||, so this
//    test never fails an honest pair.
//  - energy T = ||S d||^2. For any d that does not depend on the seed, the
//    signs make the cross terms vanish on average: E[T] = ||d||^2 exactly,
//    and Var[T] = 2 sum_j sum_{i != i' in bucket j} d_i^2 d_i'^2 <= 2 max_j
//    ||d_j||^2 ||d||^2, a relative spread of about sqrt(2 / k) (0.09 at
//    k = 256) when d is spread over many elements. Honest rounding errors are
//    about uniform within half a step, so ||d||^2 is near B^2 / 3 and the
//    limit energy_factor * B^2 = 3 B^2 sits ~9x above T's mean (~3x even if
//    every element rounded by a full half step, which no real input does).
//    A wrong output with ||d||^2 well above 3 B^2 (a x(1 + a) scaling: ||d||
//    = a ||y||; random values: ||d|| ~ ||y||) has T near ||d||^2 and fails.
// What it cannot do: tell apart a lie smaller than the codec's own noise
// (no check at that codec can), nor say which of X and Y lied (the caller
// attributes: Note [Newcomer probation]).
// The seed must be unknown to X when X computes its output: knowing S, X
// could add a perturbation in S's null space (two elements of one bucket
// with equal signs moved apart) that keeps the norm and every projection.
// The hop before X draws the seed per check and tells only Y; X does not
// even learn that the micro-batch is being checked.

namespace {

// splitmix64's finaliser over (seed, index): independent-looking bits for
// every element, the same on every machine.
inline uint64_t Mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t Numel(const std::vector<int64_t>& shape) {
  if (shape.empty()) return -1;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 1 || d > (int64_t{1} << 31) || n > (int64_t{1} << 40) / d) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Projections and norm in one pass (double accumulators: the sums of
// ~n / k float terms stay exact to ~1e-16 relative, far under any bound).
void Project(absl::Span<const float> values, uint64_t seed, int k,
             std::vector<double>* projections, double* norm) {
  projections->assign(k, 0.0);
  double* p = projections->data();
  double sq = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint64_t h = Mix(seed, i);
    // Bucket from the high 32 bits (multiply-shift range reduction), sign
    // from the lowest bit.
    const uint64_t bucket = ((h >> 32) * static_cast<uint64_t>(k)) >> 32;
    const double v = values[i];
    p[bucket] += (h & 1) ? v : -v;
    sq += v * v;
  }
  *norm = std::sqrt(sq);
}

}  // namespace

OutputSketch SketchOutput(absl::Span<const float> values, std::vector<int64_t> shape,
                          uint64_t seed, int projections) {
  OutputSketch s;
  s.shape = std::move(shape);
  s.seed = seed;
  Project(values, seed, std::clamp(projections, 1, kMaxSketchProjections), &s.projections,
          &s.norm);
  return s;
}

// Note [Codec error bound]
// Per element, from the received value r (x the value before encoding):
//  - kRawFp32: lossless, 0.
//  - kFp16 / kBf16: round to nearest, so |x - r| <= u |x| with unit roundoff
//    u = 2^-11 (fp16: 11 significant bits) or 2^-8 (bf16: 8), and
//    |x| <= |r| / (1 - u); below the smallest normal the spacing is fixed,
//    adding 2^-25 (fp16) or 2^-134 (bf16). Overflow gives Inf, which the
//    decoder refuses, so it never reaches here.
//  - kInt8Blockwise: per block of block_size elements, scale = amax / 127
//    and r = round(x / scale) * scale, so |x - r| <= scale / 2. The block's
//    largest element encodes as +-127, so scale = max |r| / 127 is known from
//    the received block alone. Float rounding in the encoder (127 / amax, the
//    product, the scale) moves r by < 1e-4 of a step; 0.501 steps covers it.
// The bound returned is the L2 norm of the per-element bounds.
double CodecErrorBound(absl::Span<const float> received, const EncodeOptions& codec) {
  const size_t n = received.size();
  double sum = 0;
  switch (codec.codec) {
    case Codec::kFp16:
    case Codec::kBf16: {
      const double u = codec.codec == Codec::kFp16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
      const double floor = codec.codec == Codec::kFp16 ? std::ldexp(1.0, -25)
                                                       : std::ldexp(1.0, -134);
      for (size_t i = 0; i < n; ++i) {
        const double b = u * std::fabs(static_cast<double>(received[i])) / (1 - u) + floor;
        sum += b * b;
      }
      break;
    }
    case Codec::kInt8Blockwise: {
      const size_t block = std::max<uint32_t>(codec.block_size, 1);
      for (size_t lo = 0; lo < n; lo += block) {
        const size_t hi = std::min(n, lo + block);
        double amax = 0;
        for (size_t i = lo; i < hi; ++i) {
          amax = std::max(amax, std::fabs(static_cast<double>(received[i])));
        }
        const double b = 0.501 * amax / 127.0;
        sum += b * b * static_cast<double>(hi - lo);
      }
      break;
    }
    default: break;  // kRawFp32 (lossless); integer codecs carry no activations
  }
  return std::sqrt(sum);
}

absl::StatusOr<SketchVerdict> CheckAgainstSketch(absl::Span<const float> received,
                                                 const std::vector<int64_t>& shape,
                                                 const EncodeOptions& codec,
                                                 const OutputSketch& sketch,
                                                 const SketchCheckOptions& options) {
  const int k = static_cast<int>(sketch.projections.size());
  if (k < 1 || sketch.projections.size() > kMaxSketchProjections) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch has ", sketch.projections.size(), " projections, want 1..",
                     kMaxSketchProjections));
  }
  if (!std::isfinite(sketch.norm) || sketch.norm < 0 ||
      !std::all_of(sketch.projections.begin(), sketch.projections.end(),
                   [](double p) { return std::isfinite(p); })) {
    return absl::InvalidArgumentError("sketch has a negative or non-finite number");
  }
  if (Numel(sketch.shape) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch has an invalid shape ", ShapeText(sketch.shape)));
  }
  if (Numel(shape) != static_cast<int64_t>(received.size())) {
    return absl::InvalidArgumentError(absl::StrCat(received.size(), " values for shape ",
                                                   ShapeText(shape)));
  }
  SketchVerdict v;
  if (shape != sketch.shape) {
    v.reason = absl::StrCat("shape ", ShapeText(shape), " but the sketch's is ",
                            ShapeText(sketch.shape));
    return v;
  }
  std::vector<double> mine;
  double norm = 0;
  Project(received, sketch.seed, k, &mine, &norm);
  v.error_bound = CodecErrorBound(received, codec) + options.device_rel * norm;
  v.norm_gap = std::fabs(norm - sketch.norm);
  for (int j = 0; j < k; ++j) {
    const double d = mine[j] - sketch.projections[j];
    v.energy += d * d;
  }
  v.energy_limit = options.energy_factor * v.error_bound * v.error_bound;
  // Written so that a NaN anywhere fails: the comparisons are false then.
  // The 1e-12 relative slack is for the two sides' double sums only.
  const double slack = 1e-12 * (norm + sketch.norm);
  if (!(v.norm_gap <= v.error_bound + slack)) {
    v.reason = absl::StrCat("norm ", norm, " vs the sketch's ", sketch.norm, ": gap ",
                            v.norm_gap, " > bound ", v.error_bound);
  } else if (!(v.energy <= v.energy_limit + slack * slack)) {
    v.reason = absl::StrCat("projected difference energy ", v.energy, " > limit ",
                            v.energy_limit);
  } else {
    v.match = true;
  }
  return v;
}

}  // namespace skipswarm::model
