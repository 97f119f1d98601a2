// The checking side of verified compute (Note [Output sketch] in
// model/output_sketch.h): the hop after replica X holds X's output as a
// WireTensor and replica Y's sketch of the same forward
// (TorchStageCompute::SketchForward); this decodes X's output and compares,
// with the bound of the codec X's frame declares.
//
//   SS_ASSIGN_OR_RETURN(model::SketchVerdict v, CheckOutputAgainstSketch(x_out, y_sketch));
//   if (!v.match) ... a mismatch: X or Y lied (attribution is the caller's) ...
//
// Thread rule: pure function.
#ifndef SKIPSWARM_NODE_COMPUTE_OUTPUT_CHECK_H_
#define SKIPSWARM_NODE_COMPUTE_OUTPUT_CHECK_H_

#include "absl/status/statusor.h"
#include "model/output_sketch.h"
#include "node/compute/stage_compute.h"

namespace skipswarm::node {

// A verdict when both sides are well formed (a non-finite value in X's
// output is a mismatch, not an error). Errors name whose input was bad:
// InvalidArgument "sketch: ..." for a malformed sketch (Y's); the decoder's
// status (InvalidArgument, ResourceExhausted, DataLoss) for an output that
// does not decode as a float tensor (X's, which the hop after refuses anyway).
absl::StatusOr<model::SketchVerdict> CheckOutputAgainstSketch(
    const WireTensor& received, const model::OutputSketch& sketch,
    const model::SketchCheckOptions& options = {});

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_OUTPUT_CHECK_H_
