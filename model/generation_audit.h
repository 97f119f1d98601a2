// An audit of a checkpoint-generation root (Note [Checkpoint generations],
// model/checkpoint_generation.h): every generation folder checked as a
// restore would check it, for `skipswarm checkpoints` and the soaks.
//
// Note [Generation audit]: which model the root holds is read from the
// newest folder whose manifest parses (the operator passes no model flags;
// a folder of another model then shows as not complete). The root is
// consistent when a complete generation exists and every folder except
// possibly the newest one is complete: a crash while writing may leave the
// newest generation torn (its stage files without a manifest, say), and a
// restore skips it, but a torn folder below a newer one is a generation
// lost to something else (a file changed or cut short afterwards, a
// second torn write the keep rule did not clear) and must be seen.
//
//   absl::StatusOr<GenerationAudit> audit = AuditGenerations(root);
//   if (audit.ok() && audit->Consistent()) ...
//
// Thread rule: a free function; reads only (safe beside one writer, which
// only ever adds whole generations).
#ifndef SKIPSWARM_MODEL_GENERATION_AUDIT_H_
#define SKIPSWARM_MODEL_GENERATION_AUDIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace skipswarm::model {

struct GenerationAudit {
  struct Folder {
    int64_t iteration = -1;  // from the folder's name
    absl::Status status;     // OK when complete; else why a restore skips it
  };
  std::string config_hash;    // the model the root holds (Note [Generation audit])
  int num_stages = 0;
  std::vector<Folder> folders;  // newest first

  int Complete() const;
  // Folders not complete below the newest folder (Note [Generation audit]).
  int Lost() const;
  // The newest complete generation's iteration, -1 when none.
  int64_t NewestComplete() const;
  bool Consistent() const { return NewestComplete() >= 0 && Lost() == 0; }
};

// NotFound when `root` has no generation folder whose manifest parses.
absl::StatusOr<GenerationAudit> AuditGenerations(const std::string& root);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_GENERATION_AUDIT_H_
