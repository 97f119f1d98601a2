// How much memory a compute device has free, for the start-up check of
// model/memory_estimate.h.
//
//   int64_t free = FreeDeviceMemoryBytes("cuda:0");   // -1: unknown
//
// "cpu": the kernel's MemAvailable (/proc/meminfo). "cuda[:N]": the CUDA
// runtime's free figure for that device, only in the CUDA build
// (--config=torch_ext); -1 elsewhere.
//
// Thread rule: thread-safe (reads the system, keeps no state).
#ifndef SKIPSWARM_MODEL_DEVICE_MEMORY_H_
#define SKIPSWARM_MODEL_DEVICE_MEMORY_H_

#include <cstdint>
#include <string>

namespace skipswarm::model {

int64_t FreeDeviceMemoryBytes(const std::string& device);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_DEVICE_MEMORY_H_
