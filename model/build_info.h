// What this build of skipswarm links: the libtorch version and whether it
// sees a CUDA device. For `skipswarm version` and the daemons'
// skipswarm_build_info metric; callers above model/ need no torch headers.
//
//   std::printf("libtorch %s\n", model::LibtorchVersion().c_str());
//
// Thread rule: thread-safe.
#ifndef SKIPSWARM_MODEL_BUILD_INFO_H_
#define SKIPSWARM_MODEL_BUILD_INFO_H_

#include <string>

namespace skipswarm::model {

// "1.13.1" (TORCH_VERSION of the headers this binary was built against).
std::string LibtorchVersion();
// True when libtorch was built with CUDA and sees at least one device.
bool CudaAvailable();

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_BUILD_INFO_H_
