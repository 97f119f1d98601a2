#include "node/daemon/reporting/memory_ceiling.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "model/memory_estimate.h"

namespace skipswarm::node {
namespace {

// The byte bursts strangers share: all strangers' and proven joiners'.
int64_t SharedStrangerBurst(const std::shared_ptr<common::PeerQuota>& quota) {
  if (quota == nullptr) return 0;
  int64_t burst = 0;
  if (quota->options().all_strangers.has_value()) {
    burst += static_cast<int64_t>(quota->options().all_strangers->byte_burst);
  }
  if (quota->options().joiners.has_value()) {
    burst += static_cast<int64_t>(quota->options().joiners->byte_burst);
  }
  return burst;
}

}  // namespace

MemoryCeiling ComputeMemoryCeiling(const MemoryCeilingInputs& in) {
  const int hosted = std::max(1, in.hosted_stages);
  const int slots = std::max(1, in.memory_slots);
  model::MemoryEstimateOptions eo;
  eo.samples_per_mb = in.samples_per_mb;
  eo.in_flight_mbs = slots;
  eo.bf16_activations = in.bf16_activations;
  const model::StageMemoryEstimate largest = model::EstimateLargestStage(in.model, eo);
  const int64_t p = largest.weight_bytes;  // the largest stage's parameters, fp32
  const int64_t f = model::MaxFramePayloadBytes(in.model, in.samples_per_mb);
  const int64_t s = 7 * p + (int64_t{1} << 20);
  MemoryCeiling c;
  c.baseline_bytes = in.baseline_bytes + in.control_plane_bytes;
  c.stage_bytes = hosted * largest.total_bytes;
  const int64_t waiting = 2 * (slots + std::max(0, in.max_queued_forwards)) + slots;
  c.frame_bytes = hosted * waiting * f;
  c.averaging_bytes = std::max(int64_t{64} << 20, 2 * 2 * hosted * p) + hosted * 3 * p;
  c.state_bytes = hosted * 2 * s;
  c.grpc_bytes = in.grpc_memory_quota_bytes;
  if (in.quotas != nullptr) {
    c.stranger_bytes = SharedStrangerBurst(in.quotas->pipeline) +
                       SharedStrangerBurst(in.quotas->group) +
                       SharedStrangerBurst(in.quotas->state) +
                       SharedStrangerBurst(in.quotas->manifest) +
                       SharedStrangerBurst(in.quotas->evidence);
  }
  c.stranger_bytes += in.gossip_strangers_bytes;
  c.relay_bytes =
      RelayHeldBytesBound(in.relay_slots, in.relay_circuits_per_node, in.grpc_max_threads);
  c.total_bytes = c.baseline_bytes + c.stage_bytes + c.frame_bytes + c.averaging_bytes +
                  c.state_bytes + c.grpc_bytes + c.stranger_bytes + c.relay_bytes;
  return c;
}

std::string DescribeMemoryCeiling(const MemoryCeiling& c) {
  auto mib = [](int64_t b) { return absl::StrCat((b + (1 << 20) - 1) >> 20, " MiB"); };
  return absl::StrCat("memory ceiling: ", mib(c.total_bytes), " (baseline ",
                      mib(c.baseline_bytes), " + stages ", mib(c.stage_bytes), " + frames ",
                      mib(c.frame_bytes), " + averaging ", mib(c.averaging_bytes), " + state ",
                      mib(c.state_bytes), " + grpc quota ", mib(c.grpc_bytes),
                      " + all strangers ", mib(c.stranger_bytes), " + relay ",
                      mib(c.relay_bytes), "; Note [Memory ceiling])");
}

int64_t GrpcMemoryQuotaBytes(const model::ModelConfig& model, int samples_per_mb) {
  return std::max(int64_t{128} << 20, 16 * model::MaxFramePayloadBytes(model, samples_per_mb));
}

void AnnounceMemoryCeiling(const std::string& name, const MemoryCeilingInputs& in,
                           Metrics* metrics) {
  const MemoryCeiling c = ComputeMemoryCeiling(in);
  LOG(INFO) << name << ": " << DescribeMemoryCeiling(c);
  metrics->Set("skipswarm_memory_ceiling_bytes", static_cast<double>(c.total_bytes));
}

}  // namespace skipswarm::node
