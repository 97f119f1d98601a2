#include "model/sdp_traffic.h"

namespace skipswarm::model {
namespace {

constexpr double kFloat = 4;

// Bytes one sharded all-reduce of `stage` among `hosts` puts on the wire.
double ReduceBytes(const ModelConfig& config, int stage, int hosts) {
  if (hosts < 2) return 0;
  return 2.0 * (hosts - 1) * kFloat * static_cast<double>(config.StageParameterCount(stage));
}

}  // namespace

WireBytes SdpIterationBytes(const ModelConfig& config, const SdpAssignment& assignment,
                            SdpMode mode, int mbs_per_worker, int64_t tokens_per_mb,
                            double state_bytes_per_param) {
  WireBytes w;
  const int workers = static_cast<int>(assignment.subnetworks.size());
  w.tokens = static_cast<double>(workers) * mbs_per_worker * static_cast<double>(tokens_per_mb);
  for (int s = 0; s < assignment.num_stages; ++s) {
    w.averaging += ReduceBytes(config, s, assignment.coverage[s]);
    if (mode == SdpMode::kBackward) {
      // Every worker not hosting s refreshes its frozen copy.
      w.frozen_refresh += static_cast<double>(workers - assignment.coverage[s]) *
                          state_bytes_per_param *
                          static_cast<double>(config.StageParameterCount(s));
    }
  }
  return w;
}

WireBytes PipelineIterationBytes(const ModelConfig& config, int data_nodes, int replicas,
                                 int mbs_per_data_node, int64_t tokens_per_mb) {
  WireBytes w;
  const double mbs = static_cast<double>(data_nodes) * mbs_per_data_node;
  w.tokens = mbs * static_cast<double>(tokens_per_mb);
  w.activations = mbs * 2.0 * config.num_stages * static_cast<double>(tokens_per_mb) *
                  config.d_model * kFloat;
  if (config.num_stages < 2) w.activations = 0;
  w.averaging += ReduceBytes(config, 0, data_nodes);
  for (int s = 1; s < config.num_stages; ++s) w.averaging += ReduceBytes(config, s, replicas);
  return w;
}

}  // namespace skipswarm::model
