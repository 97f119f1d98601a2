// Command-line flags shared by every command that builds or trains the
// model (train-ref, eval, and the node daemon): the architecture, runtime,
// optimiser and data flags live here once, so flag names stay unique in the
// `skipswarm` binary. A command lists "model/model_flags.cc" in its
// Command::flag_files to accept them (and thus also from the config file).
//
//   SS_ASSIGN_OR_RETURN(ModelFlags flags, ReadModelFlags());
//   SS_ASSIGN_OR_RETURN(at::Device device, ApplyRuntimeOptions(flags.runtime));
//
// Flags: --model (a preset, model/presets.h) --layers --d_model --heads --ffn --vocab --seq_len --stages
// --tie_embeddings --init_seed | --device --threads --bf16 | --lr --min_lr
// --warmup_steps --weight_decay --grad_clip | --outer_every --outer_lr
// --outer_momentum --avg_codec | --corpus --validation_fraction
// --samples_per_mb --eval_batches --final_eval_batches | --tokenizer --sp_model --sp_library |
// --seed --checkpoint_dir.
//
// Thread rule: call from main's thread after flags are parsed.
#ifndef SKIPSWARM_MODEL_MODEL_FLAGS_H_
#define SKIPSWARM_MODEL_MODEL_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "model/corpus.h"
#include "model/averaging_options.h"
#include "model/model_config.h"
#include "model/optimizer_options.h"
#include "model/sentencepiece_tokenizer.h"

namespace skipswarm::model {

struct ModelFlags {
  ModelConfig model;
  RuntimeOptions runtime;
  OptimizerOptions optimizer;  // total_steps is left for the command to set
  AveragingOptions averaging;  // replicas' averaging (Note [Outer steps])
  CorpusOptions corpus;
  TokenizerOptions tokenizer;  // checked by CreateTokenizer, not here
  int samples_per_mb = 4;
  int eval_batches = 32;       // periodic validation sample; 0 = whole split
  int final_eval_batches = 0;  // train-ref's last validation and `eval`; 0 = whole split
  uint64_t seed = 1;
  std::string checkpoint_dir;
};

// Reads the flags above; InvalidArgument when the model config is invalid
// (unless !validate_model: a swarm joiner checks its flags against the swarm
// manifest first, which names a disagreeing flag better).
absl::StatusOr<ModelFlags> ReadModelFlags(bool validate_model = true);

// Note [Memory estimate]: a rough upper estimate of the memory that
// training `params` parameters takes (fp32 weights, gradients and the two
// AdamW moments: 16 bytes each) plus the activations of `mbs_in_flight`
// micro-batches kept for their backward passes (per block and token about
// 16 x d_model + 3 x ffn floats), plus 1 GiB for the runtime.
int64_t EstimateTrainingBytes(const ModelFlags& flags, int64_t params, int64_t blocks,
                              int mbs_in_flight);
// RESOURCE_EXHAUSTED, with the estimate and `available` printed in GiB, when
// `needed` is more than `available` (the machine's memory, which main reads).
absl::Status CheckFitsInMemory(int64_t needed, uint64_t available, const std::string& what);

// The source file whose flags these are, for Command::flag_files.
inline constexpr char kModelFlagsFile[] = "model/model_flags.cc";

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_MODEL_FLAGS_H_
