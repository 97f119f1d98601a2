#include "model/checkpoints_command.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "model/generation_audit.h"

// Prefixed (Note [Short flag names]): the command takes --dir.
ABSL_FLAG(std::string, checkpoints_dir, "",
          "Checkpoint-generation root: train-ref's --checkpoint_dir or the local launcher's "
          "LOCAL_DIR/generations.");

namespace skipswarm::model {
namespace {

int Run() {
  const std::string root = absl::GetFlag(FLAGS_checkpoints_dir);
  if (root.empty()) {
    std::fprintf(stderr, "checkpoints: --dir=ROOT is required\n");
    return 1;
  }
  absl::StatusOr<GenerationAudit> audit = AuditGenerations(root);
  if (!audit.ok()) {
    std::fprintf(stderr, "checkpoints: %s\n", audit.status().ToString().c_str());
    return 1;
  }
  std::printf("%s: model %s, %d stages\n", root.c_str(), audit->config_hash.c_str(),
              audit->num_stages);
  for (size_t i = 0; i < audit->folders.size(); ++i) {
    const GenerationAudit::Folder& f = audit->folders[i];
    if (f.status.ok()) {
      std::printf("  iteration %lld: complete%s\n", static_cast<long long>(f.iteration),
                  f.iteration == audit->NewestComplete() ? " (a restore takes this one)" : "");
    } else {
      std::printf("  iteration %lld: %s: %s\n", static_cast<long long>(f.iteration),
                  i == 0 ? "torn (the newest: a crash while writing it)" : "LOST",
                  std::string(f.status.message()).c_str());
    }
  }
  std::printf("%d complete, %d lost, newest complete %lld: %s\n", audit->Complete(),
              audit->Lost(), static_cast<long long>(audit->NewestComplete()),
              audit->Consistent() ? "consistent" : "NOT consistent");
  return audit->Consistent() ? 0 : 1;
}

}  // namespace

common::cli::Command CheckpointsCommand() {
  return {"checkpoints",
          "Audit checkpoint generations: which are complete, which a restore takes",
          "skipswarm checkpoints --dir=ROOT",
          {"model/checkpoints_command.cc"},
          [](const std::vector<std::string>&) { return Run(); },
          {},
          {},
          "checkpoints_"};  // Note [Short flag names]: --dir
}

}  // namespace skipswarm::model
