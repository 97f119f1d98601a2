#include "node/daemon/gossip/nvidia_smi.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"

namespace skipswarm::node {

absl::StatusOr<std::vector<GpuProcess>> ParseNvidiaSmiComputeApps(absl::string_view csv) {
  std::vector<GpuProcess> out;
  for (absl::string_view line : absl::StrSplit(csv, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWithIgnoreCase(line, "No running processes found")) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    GpuProcess p;
    int64_t mib = 0;
    if (fields.size() != 2 ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[0]), &p.pid) || p.pid <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected nvidia-smi output line '", line.substr(0, 120), "' (want PID, MiB)"));
    }
    const absl::string_view memory = absl::StripAsciiWhitespace(fields[1]);
    if (absl::SimpleAtoi(memory, &mib) && mib >= 0) {
      p.used_bytes = mib << 20;
    } else if (absl::StartsWith(memory, "[")) {
      p.used_bytes = -1;  // [N/A], [Not Supported]
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected nvidia-smi output line '", line.substr(0, 120), "' (want PID, MiB)"));
    }
    out.push_back(p);
  }
  return out;
}

absl::StatusOr<std::string> NvidiaSmiGpuId(absl::string_view device,
                                           const char* cuda_visible_devices) {
  int index = 0;
  absl::string_view n = device;
  if (device != "cuda" &&
      !(absl::ConsumePrefix(&n, "cuda:") && absl::SimpleAtoi(n, &index) && index >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", device, "' is not a CUDA device (cuda or cuda:N)"));
  }
  const absl::string_view visible = cuda_visible_devices ? cuda_visible_devices : "";
  if (visible.empty()) return absl::StrCat(index);
  const std::vector<absl::string_view> ids = absl::StrSplit(visible, ',');
  if (static_cast<size_t>(index) >= ids.size() ||
      absl::StripAsciiWhitespace(ids[index]).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA device ", index,
                                                   " is not in CUDA_VISIBLE_DEVICES='",
                                                   visible, "'"));
  }
  return std::string(absl::StripAsciiWhitespace(ids[index]));
}

absl::StatusOr<std::vector<GpuProcess>> NvidiaSmiLister::List() {
  absl::StatusOr<std::string> out = common::RunSubprocess(
      {program_, absl::StrCat("--id=", gpu_id_), "--query-compute-apps=pid,used_memory",
       "--format=csv,noheader,nounits"},
      timeout_, 64 << 10);
  if (!out.ok()) return out.status();
  return ParseNvidiaSmiComputeApps(*out);
}

std::string NvidiaSmiLister::Describe() const {
  return absl::StrCat("GPU ", gpu_id_, " (", program_, ")");
}

}  // namespace skipswarm::node
