#include "model/generation_audit.h"

#include "absl/strings/str_cat.h"
#include "model/checkpoint_generation.h"

namespace skipswarm::model {

int GenerationAudit::Complete() const {
  int n = 0;
  for (const Folder& f : folders) n += f.status.ok() ? 1 : 0;
  return n;
}

int GenerationAudit::Lost() const {
  int n = 0;
  for (size_t i = 1; i < folders.size(); ++i) n += folders[i].status.ok() ? 0 : 1;
  return n;
}

int64_t GenerationAudit::NewestComplete() const {
  for (const Folder& f : folders) {
    if (f.status.ok()) return f.iteration;
  }
  return -1;
}

absl::StatusOr<GenerationAudit> AuditGenerations(const std::string& root) {
  const std::vector<int64_t> iterations = ListGenerationFolders(root);
  GenerationAudit audit;
  for (int64_t iteration : iterations) {
    absl::StatusOr<GenerationManifest> m = ReadManifest(GenerationDir(root, iteration));
    if (m.ok()) {
      audit.config_hash = m->config_hash;
      audit.num_stages = m->num_stages;
      break;
    }
  }
  if (audit.num_stages <= 0) {
    return absl::NotFoundError(absl::StrCat("no generation with a readable manifest in ", root,
                                            " (", iterations.size(), " generation folders)"));
  }
  for (int64_t iteration : iterations) {
    GenerationAudit::Folder f;
    f.iteration = iteration;
    f.status = CheckGenerationAt(root, iteration, audit.config_hash, audit.num_stages).status();
    audit.folders.push_back(std::move(f));
  }
  return audit;
}

}  // namespace skipswarm::model
