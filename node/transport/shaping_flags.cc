#include "node/transport/shaping_flags.h"

#include "absl/flags/flag.h"
#include "node/transport/shaping_transport.h"

ABSL_FLAG(double, max_upload_mbps, 0,
          "Cap this node's pipeline upload at this many Mbit/s (0: no cap).");
ABSL_FLAG(double, max_download_mbps, 0,
          "Cap this node's pipeline download at this many Mbit/s (0: no cap).");
ABSL_FLAG(double, max_sync_upload_mbps, 0,
          "Cap this node's replica-averaging upload (gradient and pseudo-gradient pushes) at "
          "this many Mbit/s, apart from its pipeline traffic (0: --max_upload_mbps caps both).");
ABSL_FLAG(std::string, wan_table, "",
          "WAN emulation: link table file (node regions, one-way latency and bandwidth per "
          "region pair; node/transport/wan_table.h) that shapes the pipeline transport. "
          "skipswarm local --wan writes one per run.");
ABSL_FLAG(double, wan_time_scale, 1,
          "WAN emulation runs K times faster than its scenario: latencies and timed compute "
          "divided by K, bandwidths multiplied by K; measured times x K = scenario time.");

namespace skipswarm::node {

absl::StatusOr<ShapingFlags> ReadShapingFlags() {
  ShapingFlags f;
  f.wan_table = absl::GetFlag(FLAGS_wan_table);
  f.time_scale = absl::GetFlag(FLAGS_wan_time_scale);
  const double up = absl::GetFlag(FLAGS_max_upload_mbps);
  const double down = absl::GetFlag(FLAGS_max_download_mbps);
  const double sync = absl::GetFlag(FLAGS_max_sync_upload_mbps);
  if (sync < 0) return absl::InvalidArgumentError("--max_sync_upload_mbps must be >= 0");
  f.max_sync_upload_bytes_per_second = MbpsToBytesPerSecond(sync);
  if (!(f.time_scale > 0)) return absl::InvalidArgumentError("--wan_time_scale must be > 0");
  if (up < 0 || down < 0) {
    return absl::InvalidArgumentError("--max_upload_mbps / --max_download_mbps must be >= 0");
  }
  f.max_upload_bytes_per_second = MbpsToBytesPerSecond(up);
  f.max_download_bytes_per_second = MbpsToBytesPerSecond(down);
  return f;
}

}  // namespace skipswarm::node
