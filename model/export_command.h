// `skipswarm export`: a train-ref checkpoint folder as a model other tools
// load. Only --format=hf (a Hugging Face LLaMA checkpoint, model/hf_export.h).
//
//   skipswarm export --checkpoint=/tmp/run --format=hf --out=/tmp/run-hf
#ifndef SKIPSWARM_MODEL_EXPORT_COMMAND_H_
#define SKIPSWARM_MODEL_EXPORT_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::model {

common::cli::Command ExportCommand();

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_EXPORT_COMMAND_H_
