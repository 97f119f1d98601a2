#include "model/export_command.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/hf_export.h"

// Prefixed: --checkpoint belongs to eval; the command accepts the short
// names (Command::flag_prefix).
ABSL_FLAG(std::string, export_checkpoint, "",
          "Checkpoint folder written by train-ref (stage-<s>.ckpt files).");
ABSL_FLAG(std::string, export_format, "hf",
          "Output format: hf (Hugging Face LLaMA: config.json + model.safetensors).");
ABSL_FLAG(std::string, export_out, "", "Output folder (created).");
ABSL_FLAG(bool, export_reference_logits, true,
          "Also write skipswarm_reference.safetensors (a fixed batch and our logits for it), "
          "for tools/hf-check.sh.");

namespace skipswarm::model {
namespace {

absl::Status Run() {
  const std::string dir = absl::GetFlag(FLAGS_export_checkpoint);
  const std::string out = absl::GetFlag(FLAGS_export_out);
  const std::string format = absl::GetFlag(FLAGS_export_format);
  if (dir.empty() || out.empty()) {
    return absl::InvalidArgumentError("--checkpoint=DIR and --out=DIR are required");
  }
  if (format != "hf") {
    return absl::InvalidArgumentError(absl::StrCat("--format=", format, ": only hf is known"));
  }
  SS_ASSIGN_OR_RETURN(auto stages, LoadCheckpointStages(dir));
  HfExportOptions options;
  options.reference_logits = absl::GetFlag(FLAGS_export_reference_logits);
  SS_RETURN_IF_ERROR(ExportHuggingFace(stages, out, options));
  const ModelConfig& c = stages[0]->config();
  std::printf("exported %s (%d layers, d_model %d, %.2f M parameters) to %s as a Hugging Face "
              "LLaMA checkpoint\n",
              dir.c_str(), c.num_layers, c.d_model, c.ParameterCount() / 1e6, out.c_str());
  return absl::OkStatus();
}

}  // namespace

common::cli::Command ExportCommand() {
  return {"export",
          "Write a checkpoint as a Hugging Face LLaMA model (config.json + safetensors)",
          "skipswarm export --checkpoint=DIR --format=hf --out=DIR",
          {"model/export_command.cc"},
          [](const std::vector<std::string>&) {
            absl::Status s = Run();
            if (s.ok()) return 0;
            std::fprintf(stderr, "export: %s\n", s.ToString().c_str());
            return 1;
          },
          {},
          {},
          "export_",  // Note [Short flag names]: --checkpoint, --format, --out
          /*uses_blas=*/true};  // the reference logits
}

}  // namespace skipswarm::model
