#include "scheduler/hybrid_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(bool, hybrid, false,
          "Compare pipeline-only, SDP-only and mixed plans (per node SDP or "
          "pipeline hosting, scheduler/hybrid_plan.h) instead of planners.");
ABSL_FLAG(double, hybrid_params, 0,
          "--hybrid: model parameters (0: the sim scenario's "
          "averaging.model_params, else 1e9).");
ABSL_FLAG(int, hybrid_tokens_per_sample, 1024, "--hybrid: tokens per sample (sequence length).");
ABSL_FLAG(double, hybrid_activation_gib, 0.5,
          "--hybrid: saved activations of one micro-batch at one stage (GiB).");
ABSL_FLAG(double, hybrid_bytes_per_mb, 0,
          "--hybrid: activation bytes per hop (0: the scenario's); also sets "
          "each link's bandwidth for averaging as bytes / hop time.");
ABSL_FLAG(double, hybrid_memory_gib, 0, "--hybrid: every node's memory (0: unlimited).");
ABSL_FLAG(bool, hybrid_half_one_stage, false,
          "--hybrid: every second node has memory for one stage and its slots only.");
ABSL_FLAG(double, hybrid_uplink_mbit, 0,
          "--hybrid: every node's uplink in Mbit/s (0: unlimited; sim "
          "scenarios' uplink_mbit take precedence).");
ABSL_FLAG(int, hybrid_sdp_stages, 0, "--hybrid: stages per subnetwork (0: the path length).");
ABSL_FLAG(int, hybrid_outer_every, 1, "--hybrid: H, iterations between averages.");
ABSL_FLAG(std::string, hybrid_avg_codec, "fp32", "--hybrid: averaging codec (fp32, int8, ...).");

namespace skipswarm::scheduler {

bool HybridRequested() { return absl::GetFlag(FLAGS_hybrid); }

absl::StatusOr<HybridInputs> HybridInputsFromFlags(double default_params) {
  HybridInputs in;
  const double params = absl::GetFlag(FLAGS_hybrid_params);
  if (params < 0) return absl::InvalidArgumentError("--hybrid_params must be >= 0");
  in.params = params > 0 ? params : default_params;
  in.tokens_per_sample = absl::GetFlag(FLAGS_hybrid_tokens_per_sample);
  if (in.tokens_per_sample < 1) {
    return absl::InvalidArgumentError("--hybrid_tokens_per_sample must be >= 1");
  }
  in.activation_gib = absl::GetFlag(FLAGS_hybrid_activation_gib);
  in.bytes_per_mb = absl::GetFlag(FLAGS_hybrid_bytes_per_mb);
  in.memory_gib = absl::GetFlag(FLAGS_hybrid_memory_gib);
  if (in.activation_gib < 0 || in.bytes_per_mb < 0 || in.memory_gib < 0) {
    return absl::InvalidArgumentError(
        "--hybrid_activation_gib, --hybrid_bytes_per_mb and --hybrid_memory_gib must be >= 0");
  }
  in.half_one_stage = absl::GetFlag(FLAGS_hybrid_half_one_stage);
  in.uplink_bytes_per_s = absl::GetFlag(FLAGS_hybrid_uplink_mbit) * 1e6 / 8;
  in.sdp_stages = absl::GetFlag(FLAGS_hybrid_sdp_stages);
  in.averaging.outer_every = absl::GetFlag(FLAGS_hybrid_outer_every);
  if (in.averaging.outer_every < 1) {
    return absl::InvalidArgumentError("--hybrid_outer_every must be >= 1");
  }
  absl::StatusOr<model::AvgCodecSpec> codec = model::ParseAvgCodec(absl::GetFlag(FLAGS_hybrid_avg_codec));
  if (!codec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hybrid_avg_codec: ", codec.status().message()));
  }
  in.averaging.codec = *codec;
  return in;
}

}  // namespace skipswarm::scheduler
