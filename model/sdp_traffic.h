// Bytes on the wire per iteration and per token: an SDP swarm
// (model/sdp_assignment.h) against a pipeline swarm training the same
// global batch, counted from the model's shapes and the swarm's protocols
// (no measurement; `skipswarm train-ref --sdp` prints both).
//
//   WireBytes sdp = SdpIterationBytes(config, assignment, SdpMode::kForward, 4, 512);
//   WireBytes pipe = PipelineIterationBytes(config, 4, 2, 4, 512);
//   sdp.PerToken()   // bytes per trained token
//
// What is counted (fp32 payloads; headers, chunk framing and gRPC are not):
//  * averaging: a stage with R hosts runs the sharded all-reduce, in which
//    every host sends 2 (R - 1) / R of the stage's gradient (Note [Shard
//    layout] in node/train/sharded_reduce.h): 2 (R - 1) x 4 x params bytes
//    per stage and iteration; a stage with one host sends nothing.
//  * activations (pipeline only): a micro-batch through S stages on S
//    different nodes crosses S links forward (the last one back to the
//    origin) and S backward, each carrying tokens x d_model floats. SDP
//    sends none (every hop is on the node).
//  * frozen refresh (SDP backward masking): each node fetches the state of
//    every stage it does not host once per iteration (Note [SDP frozen
//    stages]); the state holds the weights and both AdamW moments,
//    `state_bytes_per_param` (12 by default, framing not counted).
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MODEL_SDP_TRAFFIC_H_
#define SKIPSWARM_MODEL_SDP_TRAFFIC_H_

#include "model/model_config.h"
#include "model/sdp_assignment.h"

namespace skipswarm::model {

struct WireBytes {
  double averaging = 0;
  double activations = 0;
  double frozen_refresh = 0;
  double tokens = 0;  // tokens trained per iteration
  double Total() const { return averaging + activations + frozen_refresh; }
  double PerToken() const { return tokens > 0 ? Total() / tokens : 0; }
};

// One iteration of the assignment's K workers, each training
// `mbs_per_worker` micro-batches of `tokens_per_mb` tokens.
WireBytes SdpIterationBytes(const ModelConfig& config, const SdpAssignment& assignment,
                            SdpMode mode, int mbs_per_worker, int64_t tokens_per_mb,
                            double state_bytes_per_param = 12);

// One iteration of a pipeline swarm: `data_nodes` nodes host stage 0 and
// inject `mbs_per_data_node` full-route micro-batches each; every other
// stage has `replicas` hosts (`skipswarm local`'s layout).
WireBytes PipelineIterationBytes(const ModelConfig& config, int data_nodes, int replicas,
                                 int mbs_per_data_node, int64_t tokens_per_mb);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_SDP_TRAFFIC_H_
