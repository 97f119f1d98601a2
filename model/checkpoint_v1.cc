#include "model/checkpoint_v1.h"

#include <map>
#include <string>

#include <torch/serialize/input-archive.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "model/torch_guard.h"

namespace skipswarm::model {
namespace {

// Note [One libtorch archive at a time]: held around every archive's life.
// Never destroyed (a daemon thread may still load while statics go).
absl::Mutex& TorchArchiveMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}

}  // namespace

absl::Status RestoreV1State(absl::string_view state, StageModule& module,
                            torch::optim::Optimizer* optimizer, std::string* averaging_out) {
  averaging_out->clear();
  return TorchGuard("checkpoint: unreadable state", [&]() -> absl::Status {
    absl::MutexLock lock(&TorchArchiveMutex());  // Note [One libtorch archive at a time]
    torch::serialize::InputArchive archive;
    archive.load_from(state.data(), state.size());
    // Read and check everything first so a bad file leaves the module as is.
    std::map<std::string, at::Tensor> loaded;
    for (const auto& item : module.named_parameters()) {
      at::Tensor t;
      if (!archive.try_read("param/" + item.key(), t) || !t.defined()) {
        return absl::DataLossError(absl::StrCat("checkpoint: missing parameter ", item.key()));
      }
      if (!t.sizes().equals(item.value().sizes()) || t.scalar_type() != item.value().scalar_type()) {
        return absl::DataLossError(absl::StrCat("checkpoint: parameter ", item.key(),
                                                " has the wrong shape or dtype"));
      }
      // A diverged run's weights load and evaluate to NaN: refuse them.
      if (t.is_floating_point() && !at::isfinite(t).all().item<bool>()) {
        return absl::DataLossError(absl::StrCat("checkpoint: parameter ", item.key(),
                                                " holds non-finite values (NaN or infinity)"));
      }
      loaded[item.key()] = t;
    }
    at::Tensor averaging;
    std::string averaging_bytes;
    if (archive.try_read("averaging", averaging) && averaging.defined()) {
      if (averaging.scalar_type() != at::kByte || averaging.dim() != 1) {
        return absl::DataLossError("checkpoint: averaging state is not a byte vector");
      }
      averaging = averaging.contiguous();
      averaging_bytes.assign(reinterpret_cast<const char*>(averaging.data_ptr<uint8_t>()),
                             static_cast<size_t>(averaging.numel()));
    }
    torch::serialize::InputArchive opt;
    const bool has_opt = optimizer != nullptr && archive.try_read("optimizer", opt);
    // libtorch checks an optimizer state (its groups' sizes) only while
    // loading it into the optimizer: so it loads before any weight is
    // copied, and a state that does not fit leaves the weights as they were.
    // (libtorch may have loaded an earlier group when a later one fails.)
    if (has_opt) optimizer->load(opt);
    c10::NoGradGuard no_grad;
    for (auto& item : module.named_parameters()) item.value().copy_(loaded[item.key()]);
    *averaging_out = std::move(averaging_bytes);
    return absl::OkStatus();
  }, absl::StatusCode::kDataLoss);
}

}  // namespace skipswarm::model
