// `skipswarm checkpoints`: audits a checkpoint-generation root (train-ref's
// --checkpoint_dir, the local launcher's LOCAL_DIR/generations): one line
// per generation folder, complete or why a restore would skip it, and which
// one a restore takes (Note [Generation audit], model/generation_audit.h).
// Exit 0 when the root is consistent, 1 otherwise.
//
//   skipswarm checkpoints --dir=/tmp/skipswarm-local/generations
#ifndef SKIPSWARM_MODEL_CHECKPOINTS_COMMAND_H_
#define SKIPSWARM_MODEL_CHECKPOINTS_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::model {

common::cli::Command CheckpointsCommand();

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CHECKPOINTS_COMMAND_H_
