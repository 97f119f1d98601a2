#include "model/device_memory.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

#ifdef SKIPSWARM_TORCH_EXT
// The two CUDA runtime entry points we need, declared here rather than
// through cuda_runtime_api.h: the CUDA build then needs the toolkit's
// libraries but not its headers on Bazel's include path. Both return
// cudaError_t, an int-sized enum whose success value is 0.
extern "C" int cudaSetDevice(int device);
extern "C" int cudaMemGetInfo(size_t* free, size_t* total);
#endif

namespace skipswarm::model {

int64_t FreeDeviceMemoryBytes(const std::string& device) {
  if (device == "cpu") {
    std::ifstream in("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit) {
      if (key == "MemAvailable:") return kib * 1024;
    }
    return -1;
  }
#ifdef SKIPSWARM_TORCH_EXT
  if (absl::StartsWith(device, "cuda")) {
    int index = 0;
    if (absl::StartsWith(device, "cuda:") && !absl::SimpleAtoi(device.substr(5), &index)) {
      return -1;
    }
    size_t free = 0, total = 0;
    if (cudaSetDevice(index) != 0 || cudaMemGetInfo(&free, &total) != 0) return -1;
    return static_cast<int64_t>(free);
  }
#endif
  return -1;
}

}  // namespace skipswarm::model
