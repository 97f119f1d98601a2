#include "model/build_info.h"

#include <torch/cuda.h>
#include <torch/version.h>

namespace skipswarm::model {

std::string LibtorchVersion() { return TORCH_VERSION; }

bool CudaAvailable() {
  try {
    return torch::cuda::is_available();
  } catch (const std::exception&) {  // a broken driver: report "no"
    return false;
  }
}

}  // namespace skipswarm::model
