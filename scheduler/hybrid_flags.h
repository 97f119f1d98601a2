// The --hybrid_* flags shared by `skipswarm plan --hybrid` and `skipswarm
// sim --hybrid` (hybrid_compare.h): what scenario files do not say about
// the model, memory, uplinks and averaging.
//
//   if (HybridRequested()) {
//     SS_ASSIGN_OR_RETURN(HybridInputs in, HybridInputsFromFlags());
//   }
//
// Thread rule: call from main's thread after flag parsing.
#ifndef SKIPSWARM_SCHEDULER_HYBRID_FLAGS_H_
#define SKIPSWARM_SCHEDULER_HYBRID_FLAGS_H_

#include "absl/status/statusor.h"
#include "scheduler/hybrid_compare.h"

namespace skipswarm::scheduler {

// --hybrid: print the pipeline-only / SDP-only / mixed comparison.
bool HybridRequested();

// InvalidArgument naming the flag for a bad value. `default_params` is
// used when --hybrid_params is 0 (a sim scenario's averaging.model_params).
// With `scenario` (a sim scenario's "hybrid" object) the inputs start from
// it and only flags set to something other than their default replace its
// values (default_params is then unused).
absl::StatusOr<HybridInputs> HybridInputsFromFlags(double default_params = 1e9,
                                                   const HybridInputs* scenario = nullptr);

// The source file whose flags these are, for Command::flag_files.
inline constexpr char kHybridFlagsFile[] = "scheduler/hybrid_flags.cc";

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_HYBRID_FLAGS_H_
