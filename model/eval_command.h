// `skipswarm eval`: validation perplexity of a train-ref checkpoint, whole
// and with pipeline stages removed (SkipPipe's robustness experiment).
//
//   skipswarm eval --checkpoint=/tmp/skip33            # 0/17/33/50% table
//   skipswarm eval --checkpoint=/tmp/skip33 --drop_stages=2,4
//   skipswarm eval --checkpoint=/tmp/skip33 --keep_fraction=0.5
#ifndef SKIPSWARM_MODEL_EVAL_COMMAND_H_
#define SKIPSWARM_MODEL_EVAL_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::model {

common::cli::Command EvalCommand();

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_EVAL_COMMAND_H_
