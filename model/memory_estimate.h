// The memory one pipeline stage needs to train, estimated from the model
// config alone (no tensors are allocated), and the check a node makes at
// start against what its device has free.
//
//   StageMemoryEstimate e = EstimateStageMemory(config, /*stage=*/0, options);
//   LOG(INFO) << DescribeStageMemory(e);
//   SS_RETURN_IF_ERROR(CheckStageFits(e, free_bytes, "cuda:0"));
//
// The figures (Note [Stage memory estimate]): weights and gradients in float32
// (4 + 4 bytes a parameter), AdamW's two moments (8 bytes; fp32 master
// weights under bf16 autocast are the weights themselves), and the
// activations autograd saves for one micro-batch's backward pass, times the
// micro-batches a stage holds at once. They are upper-bound-leaning
// estimates of what libtorch allocates, not of what the caching allocator
// reserves; the GPU check compares them with the measured peak.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MODEL_MEMORY_ESTIMATE_H_
#define SKIPSWARM_MODEL_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "model/model_config.h"

namespace skipswarm::model {

struct MemoryEstimateOptions {
  int samples_per_mb = 4;   // sequences per micro-batch
  int in_flight_mbs = 1;    // micro-batches whose activations a stage holds at once
  bool bf16_activations = false;  // autocast: matmul outputs in bf16
};

struct StageMemoryEstimate {
  int stage = 0;  // -1: the whole model (EstimateWholeModel)
  int64_t parameters = 0;           // number of parameters
  int64_t weight_bytes = 0;         // fp32 weights
  int64_t gradient_bytes = 0;       // fp32 gradients
  int64_t optimizer_bytes = 0;      // AdamW exp_avg + exp_avg_sq
  int64_t activation_bytes_per_mb = 0;
  int in_flight_mbs = 1;
  // Paid once, whatever is in flight: bf16 copies of the weights that
  // autocast keeps for backward (0 in fp32), and the largest temporaries of
  // one block's backward (the attention probabilities' gradients).
  int64_t autocast_weight_bytes = 0;
  int64_t backward_workspace_bytes = 0;
  int64_t total_bytes = 0;  // all of the above, activations x in_flight_mbs
};

// REQUIRES: config.Validate().ok(), 0 <= stage < config.num_stages.
StageMemoryEstimate EstimateStageMemory(const ModelConfig& config, int stage,
                                        const MemoryEstimateOptions& options);

// The largest stage's estimate (what a node must fit to host any stage).
StageMemoryEstimate EstimateLargestStage(const ModelConfig& config,
                                         const MemoryEstimateOptions& options);

// Every stage on one device with one micro-batch in flight (train-ref).
StageMemoryEstimate EstimateWholeModel(const ModelConfig& config,
                                       const MemoryEstimateOptions& options);

// One line: "stage 0: 9.5 M params, weights 36.3 MiB + grads ... = total".
std::string DescribeStageMemory(const StageMemoryEstimate& e);

// OK when `free_bytes` holds the estimate; otherwise ResourceExhausted with
// both numbers and `device` in the message. free_bytes < 0 (unknown): OK.
absl::Status CheckStageFits(const StageMemoryEstimate& e, int64_t free_bytes,
                            const std::string& device);

// What a device with `free_bytes` free holds of stages like `e` (its
// in_flight_mbs ignored): `stages`, how many such stages with one
// micro-batch in flight each; `slots`, how many micro-batches in flight fit
// beside `hosted` such stages' weights, gradients and AdamW state, at most
// `wanted` (0 when not even one fits). free_bytes < 0 (unknown): stages -1,
// slots = wanted. Note [Memory slots from the estimate] in memory_estimate.cc.
struct MemoryFit {
  int stages = 0;
  int slots = 0;
};
MemoryFit FitInMemory(const StageMemoryEstimate& e, int64_t free_bytes, int hosted, int wanted);

// The largest pipeline payload a stage legally sends: one micro-batch's
// activation or its gradient in float32 (samples x seq_len x d_model x 4
// bytes); other codecs are smaller. The daemons refuse frames above twice
// this plus 1 MiB (MaxFramePayloadBytes) instead of the wire's 256 MiB.
int64_t MaxActivationBytes(const ModelConfig& config, int samples_per_mb);
int64_t MaxFramePayloadBytes(const ModelConfig& config, int samples_per_mb);

// Human form of a byte count: "512 B", "3.2 KiB", "1.50 GiB".
std::string FormatBytes(int64_t bytes);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_MEMORY_ESTIMATE_H_
