// A WAN link table for ShapingTransport: which region each node is
// in, the one-way latency and bandwidth between regions, and optional
// per-node uplink/downlink caps. `skipswarm local --wan=SCENARIO` writes one
// from a simulation scenario (launcher/wan_local.h) and every daemon reads it
// (`--wan_table=FILE`) to shape its pipeline transport; `--max_upload_mbps`
// and `--max_download_mbps` (operator caps) combine with it.
//
// Text format, one entry per line, `#` starts a comment:
//
//   node   NAME REGION [UPLINK_BYTES_PER_S DOWNLINK_BYTES_PER_S]   # 0: unlimited
//   link   REGION_A REGION_B LATENCY_MS BYTES_PER_S               # both ways
//
// A pair of nodes with no link between their regions is left unshaped
// (WanShapingFor reports them in `missing`). A region's link to itself
// shapes traffic between nodes of the same region.
//
// Buckets have no burst allowance (a frame takes bytes / rate, as in the
// scheduler's cost model).
//
// Time scale: WanShapingFor(table, self, k) divides latencies by k and
// multiplies bandwidths (and node caps) by k, so an emulated run is k
// times faster than the scenario: real seconds x k = scenario seconds.
//
//   SS_ASSIGN_OR_RETURN(WanTable t, ReadWanTable("wan.txt"));
//   SS_ASSIGN_OR_RETURN(WanShaping s, WanShapingFor(t, "d0", /*time_scale=*/2));
//   auto shaped = std::make_unique<ShapingTransport>(std::move(inner), clock, s.options);
//   for (auto& [peer_name, shape] : s.links) shaped->SetLink(id_of(peer_name), shape);
//
// Thread rule: plain values and pure functions.
#ifndef SKIPSWARM_NODE_TRANSPORT_WAN_TABLE_H_
#define SKIPSWARM_NODE_TRANSPORT_WAN_TABLE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "node/transport/shaping_transport.h"

namespace skipswarm::node {

struct WanTable {
  struct NodeEntry {
    std::string region;
    double uplink_bytes_per_second = 0;    // 0: unlimited
    double downlink_bytes_per_second = 0;  // 0: unlimited
  };
  std::map<std::string, NodeEntry> nodes;  // by node name
  // Keyed by the region pair in ascending order.
  std::map<std::pair<std::string, std::string>, LinkShape> links;

  void AddLink(const std::string& a, const std::string& b, LinkShape shape);
  // nullptr if the regions have no link.
  const LinkShape* FindLink(const std::string& a, const std::string& b) const;
};

// InvalidArgument naming the line: unknown keyword, wrong field count, bad
// or negative number, a node listed twice.
absl::StatusOr<WanTable> ParseWanTable(absl::string_view text);
absl::StatusOr<WanTable> ReadWanTable(const std::string& path);
// The text format above (round-trips through ParseWanTable).
std::string FormatWanTable(const WanTable& table);

// What one node applies: its ShapingOptions (own uplink/downlink) and the
// link shape to every other node of the table, by name.
struct WanShaping {
  ShapingOptions options;
  std::map<std::string, LinkShape> links;
  std::vector<std::string> missing;  // peers with no link to our region
};

// InvalidArgument if `self` is not in the table or time_scale <= 0.
absl::StatusOr<WanShaping> WanShapingFor(const WanTable& table, const std::string& self,
                                         double time_scale);

// Lowers `options`' uplink/downlink to the operator's caps (<= 0: no cap).
void ApplyBandwidthCaps(double max_upload_bytes_per_second,
                        double max_download_bytes_per_second, ShapingOptions* options);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_WAN_TABLE_H_
