// Reading version-1 stage checkpoints (model/checkpoint.h): their state is a
// libtorch archive, loaded through libtorch's TorchScript importer, which
// crashes on some hostile archives (tests/fuzz/README.md, "Known crash").
// So only files from the user's own disk come here (StateSource::kLocalFile);
// checkpoint.cc refuses version-1 bytes from a peer before any libtorch
// call. Nothing writes version 1 any more. Private to //model:checkpoint.
//
// Thread rule: free function; the caller serialises access to the module
// and optimizer. Archive work runs one at a time, process-wide
// (Note [One libtorch archive at a time]).
//
// Note [One libtorch archive at a time]
// A libtorch archive (torch::serialize::OutputArchive / InputArchive) is a
// TorchScript module underneath: building, saving and loading one goes
// through libtorch's process-wide TorchScript state (class types and their
// qualified names), which libtorch does not document as safe to use from
// two threads at once. One daemon process can do that: each hosted stage
// has its own lock, so two stages could load version-1 files at once. Under
// ThreadSanitizer two archive saves at once reported a race on a 17-byte
// string (a qualified name's size) written inside libtorch by one and read
// by the other; libtorch is not built with TSan, so whether its own atomics
// order that is invisible. So every archive loaded here holds one
// process-wide lock. Version 2 (checkpoint_tensors.h) uses no archive and
// needs no such lock.
#ifndef SKIPSWARM_MODEL_CHECKPOINT_V1_H_
#define SKIPSWARM_MODEL_CHECKPOINT_V1_H_

#include <torch/optim/optimizer.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "model/stage_module.h"

namespace skipswarm::model {

// Restores a version-1 state section (a libtorch archive) into `module`
// and, when `optimizer` is not null and the archive holds one, its state
// (optimizer->load). Every parameter's name, shape, dtype and finiteness is
// checked, and the optimizer state loaded, before a weight is copied: a
// failure leaves the weights unchanged. Sets *averaging to the archive's
// "averaging" bytes (empty when none). DataLoss on anything unreadable.
absl::Status RestoreV1State(absl::string_view archive, StageModule& module,
                            torch::optim::Optimizer* optimizer, std::string* averaging);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CHECKPOINT_V1_H_
