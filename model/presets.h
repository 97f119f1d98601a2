// Model presets: named LLaMA-style shapes for `--model=NAME`.
//
//   SS_ASSIGN_OR_RETURN(ModelConfig c, ModelPreset("125m"));
//
// | name  | layers | d_model | heads | ffn  | seq_len | parameters (bytes vocab) |
// |-------|--------|---------|-------|------|---------|--------------------------|
// | tiny  | 3      | 64      | 4     | 128  | 32      | 0.14 M (the e2e tests')  |
// | small | 12     | 256     | 8     | 688  | 128     | 9.6 M (the default)      |
// | 125m  | 12     | 768     | 12    | 2048 | 1024    | 85 M                     |
// | 350m  | 24     | 1024    | 16    | 2816 | 1024    | 308 M                    |
// | 1b    | 24     | 2048    | 16    | 5632 | 2048    | 1.23 G                   |
//
// The names follow the GPT-3 family's depth and width (125M, 350M, 1.3B);
// with the 256-entry byte vocabulary the embedding is tiny, so the counts
// are those of the blocks. ffn is 8/3 d_model rounded up to 256 (LLaMA's
// SwiGLU rule). A sentencepiece vocabulary (--vocab) adds vocab x d_model.
// Stages stay at the flag's value (6 by default).
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MODEL_PRESETS_H_
#define SKIPSWARM_MODEL_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/model_config.h"

namespace skipswarm::model {

// The preset's config (other fields at ModelConfig's defaults);
// InvalidArgument naming the known presets for an unknown name.
absl::StatusOr<ModelConfig> ModelPreset(absl::string_view name);

// "tiny", "small", "125m", "350m", "1b".
std::vector<std::string> ModelPresetNames();

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_PRESETS_H_
