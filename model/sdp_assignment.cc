#include "model/sdp_assignment.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::model {

absl::StatusOr<SdpMode> ParseSdpMode(absl::string_view text) {
  if (text.empty() || text == "off") return SdpMode::kOff;
  if (text == "forward") return SdpMode::kForward;
  if (text == "backward") return SdpMode::kBackward;
  return absl::InvalidArgumentError(
      absl::StrCat("--sdp must be forward, backward or off, not '", text, "'"));
}

std::string SdpModeName(SdpMode mode) {
  switch (mode) {
    case SdpMode::kForward:
      return "forward";
    case SdpMode::kBackward:
      return "backward";
    case SdpMode::kOff:
      break;
  }
  return "off";
}

int SdpStagesPerWorker(int num_stages, double keep) {
  if (num_stages < 1) return 0;
  const int p = static_cast<int>(std::lround(keep * num_stages));
  return std::clamp(p, std::min(num_stages, 2), num_stages);
}

absl::StatusOr<SdpAssignment> AssignSubnetworks(int num_stages, int workers, double keep) {
  if (num_stages < 1 || workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SDP needs >= 1 stage and >= 1 worker (got ", num_stages, " and ", workers, ")"));
  }
  if (!(keep > 0 && keep <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--sdp_keep must be in (0, 1], not ", keep));
  }
  SdpAssignment a;
  a.num_stages = num_stages;
  a.stages_per_worker = SdpStagesPerWorker(num_stages, keep);
  a.coverage.assign(num_stages, 0);
  const int middle = std::max(0, num_stages - 2);
  const int take = std::max(0, a.stages_per_worker - 2);
  if (middle > 0 && take == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sdp_keep=", keep, " keeps ", a.stages_per_worker, " of ", num_stages,
        " stages: only the first and last, so stages 1..", num_stages - 2,
        " would never train; keep more"));
  }
  if (middle > 0 && (workers * take) % middle != 0) {
    const int step = middle / std::gcd(take, middle);
    return absl::InvalidArgumentError(absl::StrCat(
        workers, " workers with ", a.stages_per_worker, " of ", num_stages,
        " stages each cannot own every middle stage equally often (Note [SDP assignment]); "
        "use a multiple of ",
        step, " workers"));
  }
  for (int c = 0; c < workers; ++c) {
    std::vector<int> net = {0};
    for (int j = 0; j < take; ++j) net.push_back(1 + (c * take + j) % middle);
    if (num_stages > 1) net.push_back(num_stages - 1);
    std::sort(net.begin(), net.end());
    for (int s : net) ++a.coverage[s];
    a.subnetworks.push_back(std::move(net));
  }
  std::stable_sort(a.subnetworks.begin(), a.subnetworks.end());
  return a;
}

std::vector<SdpMicroBatch> SdpIterationPlan(const SdpAssignment& assignment, SdpMode mode,
                                            int64_t iteration, int mbs_per_worker) {
  std::vector<SdpMicroBatch> plan;
  const int workers = static_cast<int>(assignment.subnetworks.size());
  std::vector<int> full(assignment.num_stages);
  std::iota(full.begin(), full.end(), 0);
  for (int w = 0; w < workers; ++w) {
    const std::vector<int>& net = assignment.subnetworks[w];
    for (int j = 0; j < mbs_per_worker; ++j) {
      SdpMicroBatch mb;
      mb.worker = w;
      mb.index = static_cast<uint64_t>(iteration) * workers * mbs_per_worker +
                 static_cast<uint64_t>(w) * mbs_per_worker + j;
      if (mode == SdpMode::kBackward) {
        mb.route = full;
        mb.frozen = StagesOutside(net, assignment.num_stages);
      } else {
        mb.route = net;
      }
      plan.push_back(std::move(mb));
    }
  }
  return plan;
}

std::vector<int> StagesOutside(const std::vector<int>& subnetwork, int num_stages) {
  std::vector<int> out;
  for (int s = 0; s < num_stages; ++s) {
    if (std::find(subnetwork.begin(), subnetwork.end(), s) == subnetwork.end()) out.push_back(s);
  }
  return out;
}

std::string FormatStageSet(const std::vector<int>& stages) { return absl::StrJoin(stages, "+"); }

}  // namespace skipswarm::model
