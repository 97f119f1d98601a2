// Output sketches for verified compute (tests/adversarial/README.md,
// "Verified compute"): a second replica Y of a stage summarises its forward
// output in a few KiB, and whoever holds replica X's output for the same
// input checks it against that summary, within the error the wire codec
// (and the replicas' devices) may honestly introduce. Note [Output sketch].
//
//   // on Y (the verify-only replica), on its float32 output y
//   OutputSketch s = SketchOutput(y_values, y_shape, seed);
//   // at the hop after X, on X's output as it arrived (decoded)
//   SketchVerdict v = CheckAgainstSketch(x_values, x_shape, x_codec, s).value();
//   if (!v.match) ... X or Y lied (attribution is the caller's) ...
//
// Thread rule: pure functions. No libtorch: tensors are flat float spans.
#ifndef SKIPSWARM_MODEL_OUTPUT_SKETCH_H_
#define SKIPSWARM_MODEL_OUTPUT_SKETCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/codec_options.h"

namespace skipswarm::model {

inline constexpr int kDefaultSketchProjections = 256;
inline constexpr int kMaxSketchProjections = 4096;

// What Y sends instead of its output: ~2 KiB at the default size.
struct OutputSketch {
  std::vector<int64_t> shape;
  uint64_t seed = 0;
  double norm = 0;                  // L2 norm of the whole output
  std::vector<double> projections;  // Note [Output sketch]: signed bucket sums
};

// The sketch of `values` (row-major, numel == product of `shape`) under
// `seed`, with `projections` buckets (1..kMaxSketchProjections; clamped).
// Linear in `values` for a fixed seed and size.
OutputSketch SketchOutput(absl::Span<const float> values, std::vector<int64_t> shape,
                          uint64_t seed, int projections = kDefaultSketchProjections);

// An upper bound on ||received - original|| for a float32 tensor that went
// through `codec` (EncodeTensor) and came back as `received`, computed from
// `received` alone (Note [Codec error bound]). 0 for kRawFp32.
double CodecErrorBound(absl::Span<const float> received, const EncodeOptions& codec);

struct SketchCheckOptions {
  // ||y_X - y_Y|| / ||y|| that two honest replicas computing the same input
  // with equal weights may show (thread counts, kernels, devices). The
  // default is for float32 replicas on CPU (two in one process agree bit
  // for bit). A replica under bf16 autocast differs from a float32 one by
  // ~1e-3 of the norm (measured on CPU, verified_compute_test), so mixed
  // pairs need ~5e-3; CPU against GPU is not measured yet.
  double device_rel = 1e-4;
  // Projected squared difference allowed, in units of the squared error
  // bound (Note [Output sketch]).
  double energy_factor = 3;
};

struct SketchVerdict {
  bool match = false;
  double error_bound = 0;   // B: codec bound + device_rel * norm
  double norm_gap = 0;      // | ||received|| - sketch.norm |, allowed <= B
  double energy = 0;        // sum of squared projection differences
  double energy_limit = 0;  // energy_factor * B^2
  std::string reason;       // empty on a match
};

// Checks `received` (X's output as the hop after decoded it; it came with
// `codec`) against Y's `sketch`. InvalidArgument when the sketch itself is
// malformed (Y's fault, not X's: sizes out of range, non-finite numbers) or
// `values` does not match `shape`; otherwise a verdict, where a different
// shape or a non-finite value in `received` is a mismatch.
absl::StatusOr<SketchVerdict> CheckAgainstSketch(absl::Span<const float> received,
                                                 const std::vector<int64_t>& shape,
                                                 const EncodeOptions& codec,
                                                 const OutputSketch& sketch,
                                                 const SketchCheckOptions& options = {});

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_OUTPUT_SKETCH_H_
