#include "node/compute/output_check.h"

#include <ATen/ATen.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "model/tensor_codec.h"
#include "model/torch_guard.h"
#include "node/compute/torch_stage_compute.h"

namespace skipswarm::node {

absl::StatusOr<model::SketchVerdict> CheckOutputAgainstSketch(
    const WireTensor& received, const model::OutputSketch& sketch,
    const model::SketchCheckOptions& options) {
  return model::TorchGuard("CheckOutputAgainstSketch",
                           [&]() -> absl::StatusOr<model::SketchVerdict> {
    const model::TensorMeta meta = FromProto(received.meta);
    model::DecodeExpectations want;
    want.dtype = model::WireDType::kFloat32;
    // Counted, not refused: a NaN in X's output is X's wrong answer, which
    // the check reports as a mismatch.
    want.non_finite = model::NonFinitePolicy::kCount;
    const std::string payload(received.payload);
    absl::StatusOr<at::Tensor> x = model::DecodeTensor(meta, absl::string_view(payload), want);
    if (!x.ok()) return x.status();
    const at::Tensor y = x->contiguous();
    model::EncodeOptions codec;
    codec.codec = meta.codec;
    codec.block_size = meta.block_size;
    absl::StatusOr<model::SketchVerdict> v = model::CheckAgainstSketch(
        absl::Span<const float>(y.data_ptr<float>(), y.numel()),
        {y.sizes().begin(), y.sizes().end()}, codec, sketch, options);
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("sketch: ", v.status().message()));
    return v;
  });
}

}  // namespace skipswarm::node
