// Command-line flags of WAN emulation and the operator's bandwidth caps,
// shared by `skipswarm node` and `skipswarm local` (both list
// kShapingFlagsFile in their Command::flag_files; model/model_flags.h is
// the same pattern):
//
//   --max_upload_mbps / --max_download_mbps   caps on this node's pipeline
//                                             traffic (a home connection)
//   --max_sync_upload_mbps                    a cap on its replica-averaging
//                                             pushes alone
//   --wan_table=FILE                          link table (wan_table.h)
//   --wan_time_scale=K                        run K times faster than the table
//
//   SS_ASSIGN_OR_RETURN(ShapingFlags f, ReadShapingFlags());
//
// Thread rule: read on main's thread after flag parsing.
#ifndef SKIPSWARM_NODE_TRANSPORT_SHAPING_FLAGS_H_
#define SKIPSWARM_NODE_TRANSPORT_SHAPING_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"

namespace skipswarm::node {

inline constexpr char kShapingFlagsFile[] = "node/transport/shaping_flags.cc";

struct ShapingFlags {
  std::string wan_table;
  double time_scale = 1;
  double max_upload_bytes_per_second = 0;    // 0: no cap
  double max_download_bytes_per_second = 0;  // 0: no cap
  // Replica averaging's pushes (GrpcGroupOptions::max_upload_bytes_per_
  // second); 0: max_upload_bytes_per_second.
  double max_sync_upload_bytes_per_second = 0;
};

// InvalidArgument for a time scale <= 0 or a negative cap.
absl::StatusOr<ShapingFlags> ReadShapingFlags();

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_SHAPING_FLAGS_H_
