// `skipswarm train-ref`: single-process reference training of the staged
// model (reference_trainer.h) with progress, evaluation, checkpoints and
// resume. Flags: this file's .cc plus model/model_flags.cc.
//
//   skipswarm train-ref --iterations=2000 --skip_ratio=0.33
//       --checkpoint_dir=/tmp/skip33 --metrics_out=/tmp/skip33.jsonl  (one line)
#ifndef SKIPSWARM_MODEL_TRAIN_REF_COMMAND_H_
#define SKIPSWARM_MODEL_TRAIN_REF_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::model {

common::cli::Command TrainRefCommand();

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_TRAIN_REF_COMMAND_H_
