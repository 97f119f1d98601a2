// The few libtorch C++ APIs that differ between the two libtorch builds we
// compile against: Debian's 1.13 (CPU, the default) and a PyPI wheel's 2.x
// (CUDA, --config=torch_ext; third_party/README.md). Code calls these
// instead of the version-specific names, so both builds are warning-free.
//
//   compat::SetAutocast(at::kCUDA, true, at::kBFloat16);
//   bool on = compat::IsAutocastEnabled(at::kCPU);
//
// Thread rule: autocast state is thread-local in libtorch; so is this.
#ifndef SKIPSWARM_MODEL_TORCH_COMPAT_H_
#define SKIPSWARM_MODEL_TORCH_COMPAT_H_

#include <ATen/autocast_mode.h>
#include <c10/util/string_utils.h>
#include <torch/version.h>

namespace skipswarm::model::compat {

// The key of a parameter in torch::optim::Optimizer::state(): the
// TensorImpl's address, as a pointer (2.x) or as its decimal text (1.13).
#if TORCH_VERSION_MAJOR >= 2
inline void* OptimizerStateKey(const at::Tensor& p) { return p.unsafeGetTensorImpl(); }
#else
inline std::string OptimizerStateKey(const at::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}
#endif

#if TORCH_VERSION_MAJOR >= 2
inline bool IsAutocastEnabled(at::DeviceType device) {
  return at::autocast::is_autocast_enabled(device);
}
inline void SetAutocast(at::DeviceType device, bool enabled, at::ScalarType dtype) {
  at::autocast::set_autocast_enabled(device, enabled);
  if (enabled) at::autocast::set_autocast_dtype(device, dtype);
}
#else
// 1.13: one switch and one dtype per device family.
inline bool IsAutocastEnabled(at::DeviceType device) {
  return device == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
inline void SetAutocast(at::DeviceType device, bool enabled, at::ScalarType dtype) {
  if (device == at::kCUDA) {
    at::autocast::set_enabled(enabled);
    if (enabled) at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    if (enabled) at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

}  // namespace skipswarm::model::compat

#endif  // SKIPSWARM_MODEL_TORCH_COMPAT_H_
