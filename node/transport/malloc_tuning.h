// Allocator settings for a process that moves MB-sized frames. `main` (the
// daemon, benchmarks) calls it once at start-up; libraries never do.
//
//   int main(int argc, char** argv) {
//     SS_CHECK_OK(node::TuneMallocForLargeFrames());
//
// Why: glibc serves allocations ≥ 128 KiB-32 MiB with fresh mmap()s and
// returns them on free, so every 1 MiB chunk a stream sends or receives
// page-faults its memory in again, which cuts gRPC stream throughput several
// times (figures: node/transport/README.md). The price is that up to
// `trim_threshold` bytes of freed memory stay in the process heap.
//
// Thread rule: call before starting threads (mallopt is process-wide).
#ifndef SKIPSWARM_NODE_TRANSPORT_MALLOC_TUNING_H_
#define SKIPSWARM_NODE_TRANSPORT_MALLOC_TUNING_H_

#include <cstddef>

#include "absl/status/status.h"

namespace skipswarm::node {

// Serves allocations below 32 MiB from the heap and trims the heap only
// beyond `trim_threshold` free bytes.
absl::Status TuneMallocForLargeFrames(size_t trim_threshold = size_t{256} << 20);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_MALLOC_TUNING_H_
