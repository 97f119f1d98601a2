// A development entry point with only model/'s commands, so model/ can be
// exercised before (and without) the full `skipswarm` binary in node/.
//
//   bazel build //model:model_cli
//   bazel-bin/model/model_cli train-ref --iterations=20
#include "common/blas_setup.h"
#include "common/cli/runner.h"
#include "model/eval_command.h"
#include "model/train_ref_command.h"

int main(int argc, char** argv) {
  const std::vector<skipswarm::common::cli::Command> commands = {
      skipswarm::model::TrainRefCommand(), skipswarm::model::EvalCommand()};
  // May re-execute the binary with the OpenBLAS core chosen (Note [BLAS core]).
  const auto blas = skipswarm::common::SetUpBlasCoreFor(
      skipswarm::common::cli::CommandToRun(argc, argv, commands), argv);
  return skipswarm::common::cli::RunCli(argc, argv, commands,
                                        [&blas] { skipswarm::common::LogBlasCore(blas); });
}
