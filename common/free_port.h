// A loopback TCP port that is free right now: bound to port 0 (the kernel
// picks), read back, then released. Another process may take it before the
// caller binds it, so callers either bind at once or retry; tests also use it
// as a port where nothing listens.
#ifndef SKIPSWARM_COMMON_FREE_PORT_H_
#define SKIPSWARM_COMMON_FREE_PORT_H_

#include "absl/status/statusor.h"

namespace skipswarm::common {

// Unavailable when no socket can be made or bound.
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_FREE_PORT_H_
