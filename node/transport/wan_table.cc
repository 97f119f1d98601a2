#include "node/transport/wan_table.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/text_table.h"

namespace skipswarm::node {
namespace {

std::pair<std::string, std::string> Key(const std::string& a, const std::string& b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

bool Number(absl::string_view s, double* out) {
  return absl::SimpleAtod(s, out) && std::isfinite(*out) && *out >= 0;
}

// min of two rates where <= 0 means unlimited.
double MinRate(double a, double b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return std::min(a, b);
}

}  // namespace

void WanTable::AddLink(const std::string& a, const std::string& b, LinkShape shape) {
  links[Key(a, b)] = shape;
}

const LinkShape* WanTable::FindLink(const std::string& a, const std::string& b) const {
  auto it = links.find(Key(a, b));
  return it == links.end() ? nullptr : &it->second;
}

absl::StatusOr<WanTable> ParseWanTable(absl::string_view text) {
  WanTable table;
  auto bad = [](absl::string_view why) { return absl::InvalidArgumentError(why); };
  absl::Status parsed = common::ForEachTableRow(text, "WAN table", [&](const common::TableRow& f) {
    if (f[0] == "node") {
      if (f.size() != 3 && f.size() != 5) {
        return bad("expected: node NAME REGION [UPLINK_BYTES_PER_S DOWNLINK_BYTES_PER_S]");
      }
      WanTable::NodeEntry e;
      e.region = std::string(f[2]);
      if (f.size() == 5 && (!Number(f[3], &e.uplink_bytes_per_second) ||
                            !Number(f[4], &e.downlink_bytes_per_second))) {
        return bad("bad uplink/downlink rate");
      }
      if (!table.nodes.emplace(std::string(f[1]), e).second) {
        return bad(absl::StrCat("node ", f[1], " listed twice"));
      }
    } else if (f[0] == "link") {
      double ms = 0, rate = 0;
      if (f.size() != 5) return bad("expected: link REGION_A REGION_B LATENCY_MS BYTES_PER_S");
      if (!Number(f[3], &ms) || !Number(f[4], &rate)) return bad("bad latency or rate");
      table.AddLink(std::string(f[1]), std::string(f[2]),
                    {absl::Microseconds(std::llround(ms * 1000)), rate});
    } else {
      return bad(absl::StrCat("unknown entry '", f[0], "' (node or link)"));
    }
    return absl::OkStatus();
  });
  if (!parsed.ok()) return parsed;
  return table;
}

absl::StatusOr<WanTable> ReadWanTable(const std::string& path) {
  absl::StatusOr<std::string> text = common::ReadTextFile(path, "WAN table");
  if (!text.ok()) return text.status();
  absl::StatusOr<WanTable> t = ParseWanTable(*text);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", t.status().message()));
  return t;
}

std::string FormatWanTable(const WanTable& table) {
  std::string out =
      "# skipswarm WAN link table (node/transport/wan_table.h)\n"
      "# node NAME REGION UPLINK_BYTES_PER_S DOWNLINK_BYTES_PER_S  (0: unlimited)\n"
      "# link REGION_A REGION_B ONE_WAY_LATENCY_MS BYTES_PER_S\n";
  for (const auto& [name, e] : table.nodes) {
    absl::StrAppendFormat(&out, "node %s %s %.17g %.17g\n", name, e.region,
                          e.uplink_bytes_per_second, e.downlink_bytes_per_second);
  }
  for (const auto& [k, l] : table.links) {
    absl::StrAppendFormat(&out, "link %s %s %.6f %.17g\n", k.first, k.second,
                          absl::ToDoubleMilliseconds(l.latency), l.bytes_per_second);
  }
  return out;
}

absl::StatusOr<WanShaping> WanShapingFor(const WanTable& table, const std::string& self,
                                         double time_scale) {
  if (!(time_scale > 0)) return absl::InvalidArgumentError("WAN time scale must be > 0");
  auto me = table.nodes.find(self);
  if (me == table.nodes.end()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", self, " is not in the WAN table"));
  }
  WanShaping s;
  // An emulated link serialises every byte (no burst allowance), so a frame
  // takes bytes / rate as in the scheduler's cost model.
  s.options.burst_bytes = 0;
  s.options.uplink_bytes_per_second = me->second.uplink_bytes_per_second * time_scale;
  s.options.downlink_bytes_per_second = me->second.downlink_bytes_per_second * time_scale;
  for (const auto& [name, e] : table.nodes) {
    if (name == self) continue;
    const LinkShape* l = table.FindLink(me->second.region, e.region);
    if (l == nullptr) {
      s.missing.push_back(name);
      continue;
    }
    s.links[name] = {l->latency / time_scale, l->bytes_per_second * time_scale};
  }
  return s;
}

void ApplyBandwidthCaps(double max_upload_bytes_per_second,
                        double max_download_bytes_per_second, ShapingOptions* options) {
  options->uplink_bytes_per_second =
      MinRate(options->uplink_bytes_per_second, max_upload_bytes_per_second);
  options->downlink_bytes_per_second =
      MinRate(options->downlink_bytes_per_second, max_download_bytes_per_second);
}

}  // namespace skipswarm::node
