// Swarm-wide consistent checkpoint generations: every stage of the model at
// the same iteration, in one folder, described by a manifest written last.
//
//   std::map<int, std::string> bytes = ...;   // stage -> checkpoint bytes at `it`
//   SS_RETURN_IF_ERROR(WriteGeneration(root, it, config.ConfigHash(), S, bytes, /*keep=*/3));
//   ...
//   SS_ASSIGN_OR_RETURN(FoundGeneration g,
//                       FindNewestCompleteGeneration(root, config.ConfigHash(), S));
//   // g.dir + "/" + g.manifest.stages[s].file holds stage s at g.manifest.iteration
//
// Note [Checkpoint generations]
// Layout: ROOT/gen-NNNNNNNNNN/stage-S.ckpt (the bytes of model/checkpoint.h,
// each written atomically) and ROOT/gen-NNNNNNNNNN/MANIFEST.json, written
// last by temp + fsync + rename + fsync of the folder: a generation exists
// exactly when its manifest does. The manifest holds the iteration, the
// model's config hash, the stage count and per stage the file name, its
// size and its SHA-256. A generation is complete when its manifest parses,
// names this model and every stage 0..S-1, and every file is there with
// that size and SHA-256 (and its header says that stage at that
// iteration). Restore takes the newest complete generation; a torn or
// partial one (a crash between the stage files and the manifest, a file
// cut short or changed afterwards, another model) is skipped with a
// message, never half-loaded. WriteGeneration keeps the newest `keep`
// generations and removes older ones and older torn folders.
//
// Thread rule: free functions; one writer per ROOT at a time (readers may
// run concurrently: they only see whole generations).
#ifndef SKIPSWARM_MODEL_CHECKPOINT_GENERATION_H_
#define SKIPSWARM_MODEL_CHECKPOINT_GENERATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

struct GenerationManifest {
  struct Stage {
    std::string file;    // relative to the generation's folder
    int64_t bytes = 0;
    std::string sha256;  // hex
  };
  int64_t iteration = -1;
  std::string config_hash;  // ModelConfig::ConfigHash
  int num_stages = 0;
  std::map<int, Stage> stages;
};

struct FoundGeneration {
  GenerationManifest manifest;
  std::string dir;                   // the generation's folder
  std::vector<std::string> skipped;  // why each newer generation was not taken
  std::string StagePath(int stage) const;
};

// ROOT/gen-NNNNNNNNNN.
std::string GenerationDir(const std::string& root, int64_t iteration);

// SHA-256 of `bytes`, 64 hex chars.
std::string Sha256Hex(absl::string_view bytes);

// Writes generation `iteration` from `stage_bytes` (stage -> checkpoint
// bytes): InvalidArgument unless it holds exactly stages 0..num_stages-1,
// each a valid checkpoint of that stage at `iteration` with `config_hash`.
// AlreadyExists when a complete generation of that iteration is there.
// Then keeps the newest `keep` (>= 1) generations.
absl::Status WriteGeneration(const std::string& root, int64_t iteration,
                             const std::string& config_hash, int num_stages,
                             const std::map<int, std::string>& stage_bytes, int keep);

// The newest complete generation of this model (Note [Checkpoint
// generations]); each newer folder skipped is logged and listed in
// `skipped`. NotFound (listing what was skipped) when there is none.
absl::StatusOr<FoundGeneration> FindNewestCompleteGeneration(const std::string& root,
                                                             const std::string& config_hash,
                                                             int num_stages);

// Iterations of the folders named like generations, newest first
// (complete or not).
std::vector<int64_t> ListGenerationFolders(const std::string& root);

// The manifest of generation folder `dir`, parsed but not checked against
// the stage files (CheckGeneration does that): the model the folder claims.
absl::StatusOr<GenerationManifest> ReadManifest(const std::string& dir);

// Checks one generation folder; OK with its manifest when complete.
absl::StatusOr<GenerationManifest> CheckGeneration(const std::string& dir,
                                                   const std::string& config_hash,
                                                   int num_stages);

// CheckGeneration of ROOT's folder for `iteration`, which must also be the
// iteration its manifest names (DataLoss otherwise): the check a restore
// makes of each folder it considers.
absl::StatusOr<GenerationManifest> CheckGenerationAt(const std::string& root, int64_t iteration,
                                                     const std::string& config_hash,
                                                     int num_stages);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CHECKPOINT_GENERATION_H_
