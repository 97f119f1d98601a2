#include "scheduler/hybrid_flags.h"

#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(bool, hybrid, false,
          "Compare pipeline-only, SDP-only and mixed plans (per node SDP or "
          "pipeline hosting, scheduler/hybrid_plan.h) instead of planners.");
ABSL_FLAG(std::string, hybrid_mode, "all",
          "--hybrid: which plans to make: all, pipeline (pipeline-only), sdp (SDP-only, "
          "both maskings) or hybrid (mixed, both maskings).");
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
ABSL_FLAG(std::vector<std::string>, hybrid_one_stage_nodes, {},
          "--hybrid: these nodes (comma-separated names) have memory for one stage and "
          "their slots only.");
ABSL_FLAG(double, hybrid_uplink_mbit, 0,
          "--hybrid: every node's uplink in Mbit/s (0: unlimited; sim "
          "scenarios' uplink_mbit take precedence).");
ABSL_FLAG(int, hybrid_sdp_stages, 0, "--hybrid: stages per subnetwork (0: the path length).");
ABSL_FLAG(int, hybrid_outer_every, 1, "--hybrid: H, iterations between averages.");
ABSL_FLAG(std::string, hybrid_avg_codec, "fp32", "--hybrid: averaging codec (fp32, int8, ...).");

namespace skipswarm::scheduler {
namespace {

// Whether flag `name` sets the input: always without a scenario; with one,
// when the flag differs from its default (Abseil here does not say whether
// a flag was on the command line, so a flag cannot set a scenario's value
// back to the flag's default).
bool Use(const HybridInputs* scenario, const char* name) {
  if (scenario == nullptr) return true;
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && flag->CurrentValue() != flag->DefaultValue();
}

}  // namespace

bool HybridRequested() { return absl::GetFlag(FLAGS_hybrid); }

absl::StatusOr<HybridInputs> HybridInputsFromFlags(double default_params,
                                                   const HybridInputs* scenario) {
  HybridInputs in = scenario != nullptr ? *scenario : HybridInputs{};
  const double params = absl::GetFlag(FLAGS_hybrid_params);
  if (params < 0) return absl::InvalidArgumentError("--hybrid_params must be >= 0");
  if (scenario == nullptr) {
    in.params = params > 0 ? params : default_params;
  } else if (params > 0 && Use(scenario, "hybrid_params")) {
    in.params = params;
  }
  if (Use(scenario, "hybrid_tokens_per_sample")) {
    in.tokens_per_sample = absl::GetFlag(FLAGS_hybrid_tokens_per_sample);
  }
  if (in.tokens_per_sample < 1) {
    return absl::InvalidArgumentError("--hybrid_tokens_per_sample must be >= 1");
  }
  if (Use(scenario, "hybrid_activation_gib")) {
    in.activation_gib = absl::GetFlag(FLAGS_hybrid_activation_gib);
  }
  if (Use(scenario, "hybrid_bytes_per_mb")) in.bytes_per_mb = absl::GetFlag(FLAGS_hybrid_bytes_per_mb);
  if (Use(scenario, "hybrid_memory_gib")) in.memory_gib = absl::GetFlag(FLAGS_hybrid_memory_gib);
  if (in.activation_gib < 0 || in.bytes_per_mb < 0 || in.memory_gib < 0) {
    return absl::InvalidArgumentError(
        "--hybrid_activation_gib, --hybrid_bytes_per_mb and --hybrid_memory_gib must be >= 0");
  }
  if (Use(scenario, "hybrid_half_one_stage")) {
    in.half_one_stage = absl::GetFlag(FLAGS_hybrid_half_one_stage);
  }
  if (Use(scenario, "hybrid_one_stage_nodes")) {
    in.one_stage_nodes = absl::GetFlag(FLAGS_hybrid_one_stage_nodes);
  }
  if (Use(scenario, "hybrid_uplink_mbit")) {
    in.uplink_bytes_per_s = absl::GetFlag(FLAGS_hybrid_uplink_mbit) * 1e6 / 8;
  }
  if (Use(scenario, "hybrid_sdp_stages")) in.sdp_stages = absl::GetFlag(FLAGS_hybrid_sdp_stages);
  if (Use(scenario, "hybrid_outer_every")) {
    in.averaging.outer_every = absl::GetFlag(FLAGS_hybrid_outer_every);
  }
  if (in.averaging.outer_every < 1) {
    return absl::InvalidArgumentError("--hybrid_outer_every must be >= 1");
  }
  if (Use(scenario, "hybrid_avg_codec")) {
    absl::StatusOr<model::AvgCodecSpec> codec =
        model::ParseAvgCodec(absl::GetFlag(FLAGS_hybrid_avg_codec));
    if (!codec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hybrid_avg_codec: ", codec.status().message()));
    }
    in.averaging.codec = *codec;
  }
  absl::StatusOr<HybridSelection> selection =
      ParseHybridSelection(absl::GetFlag(FLAGS_hybrid_mode));
  if (!selection.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--hybrid_mode: ", selection.status().message()));
  }
  in.selection = *selection;
  return in;
}

}  // namespace skipswarm::scheduler
