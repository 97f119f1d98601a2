#include "node/transport/malloc_tuning.h"

#include <malloc.h>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

absl::Status TuneMallocForLargeFrames(size_t trim_threshold) {
  // 32 MiB is glibc's upper limit for the mmap threshold on 64-bit.
  constexpr int kMmapThreshold = 32 << 20;
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1) {
    return absl::InternalError("mallopt(M_MMAP_THRESHOLD) failed");
  }
  if (mallopt(M_TRIM_THRESHOLD, static_cast<int>(trim_threshold)) != 1) {
    return absl::InternalError(
        absl::StrCat("mallopt(M_TRIM_THRESHOLD, ", trim_threshold, ") failed"));
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::node
