#include "model/checkpoint_state.h"

#include <c10/core/GradMode.h>
#include <torch/optim/adamw.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/checkpoint_tensors.h"
#include "model/torch_compat.h"
#include "model/torch_guard.h"

// The entries' bytes are the host's: the format is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint state assumes little-endian");

namespace skipswarm::model {
namespace {

using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

constexpr char kParam[] = "param/";
constexpr char kAdamW[] = "adamw/";
constexpr char kOptimizer[] = "optimizer";
constexpr char kOptimizerKind[] = "adamw";
constexpr char kAveraging[] = "averaging";
constexpr const char* kAdamWFields[] = {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};

std::optional<TensorDtype> DtypeOf(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return TensorDtype::kFloat32;
    case at::kDouble: return TensorDtype::kFloat64;
    case at::kHalf: return TensorDtype::kFloat16;
    case at::kBFloat16: return TensorDtype::kBFloat16;
    case at::kLong: return TensorDtype::kInt64;
    case at::kByte: return TensorDtype::kUInt8;
    default: return std::nullopt;
  }
}

at::ScalarType ScalarTypeOf(TensorDtype d) {
  switch (d) {
    case TensorDtype::kFloat32: return at::kFloat;
    case TensorDtype::kFloat64: return at::kDouble;
    case TensorDtype::kFloat16: return at::kHalf;
    case TensorDtype::kBFloat16: return at::kBFloat16;
    case TensorDtype::kInt64: return at::kLong;
    case TensorDtype::kUInt8: return at::kByte;
  }
  return at::kByte;  // unreachable: ParseTensorList refuses unknown dtypes
}

absl::Status Loss(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("checkpoint: ", what));
}

// One entry of a state being written: its bytes are `cpu`'s, or `raw`
// (borrowed) where `cpu` is undefined.
struct PendingEntry {
  std::string name;
  TensorDtype dtype = TensorDtype::kUInt8;
  std::vector<int64_t> dims;
  at::Tensor cpu;
  absl::string_view raw;

  absl::string_view Bytes() const {
    if (!cpu.defined()) return raw;
    return absl::string_view(static_cast<const char*>(cpu.data_ptr()),
                             cpu.numel() * cpu.element_size());
  }
};

// `t` (any device) as entry `name`: checked, on the CPU and contiguous.
absl::StatusOr<PendingEntry> Pending(const std::string& name, const at::Tensor& t) {
  std::optional<TensorDtype> dtype = DtypeOf(t.scalar_type());
  if (!dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: ", name, " has dtype ", c10::toString(t.scalar_type()),
                     ", which the format does not store"));
  }
  if (name.size() > kMaxTensorNameLen) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint: name too long: ", name));
  }
  at::Tensor cpu = t.detach().to(at::kCPU).contiguous();
  return PendingEntry{name, *dtype, cpu.sizes().vec(), cpu, absl::string_view()};
}

// A CPU tensor holding a copy of `e`'s bytes.
at::Tensor ToTensor(const TensorEntry& e) {
  at::Tensor t = at::empty(e.dims, at::TensorOptions().dtype(ScalarTypeOf(e.dtype)));
  if (!e.data.empty()) std::memcpy(t.data_ptr(), e.data.data(), e.data.size());
  return t;
}

// `e` as a tensor of `like`'s dtype and shape, finite; on `like`'s device.
absl::StatusOr<at::Tensor> Matching(const TensorEntry& e, const at::Tensor& like,
                                    bool non_negative) {
  std::optional<TensorDtype> want = DtypeOf(like.scalar_type());
  if (!want || e.dtype != *want || !like.sizes().equals(e.dims)) {
    return Loss(absl::StrCat(e.name, " has the wrong shape or dtype"));
  }
  at::Tensor t = ToTensor(e);
  if (t.is_floating_point() && !at::isfinite(t).all().item<bool>()) {
    // A diverged run's weights load and evaluate to NaN: refuse them.
    return Loss(absl::StrCat(e.name, " holds non-finite values (NaN or infinity)"));
  }
  if (non_negative && (t < 0).any().item<bool>()) {
    return Loss(absl::StrCat(e.name, " holds negative values"));
  }
  return t.to(like.device());
}

// Which entries a state may hold: "param/<p>" and "adamw/<p>/<field>" for
// a parameter p of the module, "optimizer" and "averaging".
absl::Status CheckNames(const std::map<std::string, const TensorEntry*>& entries,
                        const std::set<std::string>& params) {
  for (const auto& [name, e] : entries) {
    if (name == kOptimizer || name == kAveraging) continue;
    if (absl::StartsWith(name, kParam) && params.count(name.substr(sizeof(kParam) - 1)) != 0) {
      continue;
    }
    const size_t slash = name.rfind('/');
    if (absl::StartsWith(name, kAdamW) && slash > sizeof(kAdamW) - 1 &&
        params.count(name.substr(sizeof(kAdamW) - 1, slash - (sizeof(kAdamW) - 1))) != 0) {
      const std::string field = name.substr(slash + 1);
      bool known = false;
      for (const char* f : kAdamWFields) known |= field == f;
      if (known) continue;
    }
    return Loss(absl::StrCat("unknown entry ", name, " (not a parameter of this stage?)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AppendStageState(StageModule& module, torch::optim::Optimizer* optimizer,
                              absl::string_view averaging, std::string& out,
                              size_t reserve_after) {
  AdamW* adamw = nullptr;
  if (optimizer != nullptr) {
    adamw = dynamic_cast<AdamW*>(optimizer);
    if (adamw == nullptr) {
      return absl::UnimplementedError(
          "checkpoint: only AdamW optimizer state can be stored (pass null for weights only)");
    }
  }
  // Every entry first, then the list in one buffer reserved at its final
  // size: a stage's state is tens of MB, and appending it piece by piece
  // copied it on every growth, onto fresh pages each time.
  std::vector<PendingEntry> entries;
  absl::Status encoded = TorchGuard("checkpoint: serialising", [&]() -> absl::Status {
    auto add = [&](const std::string& name, const at::Tensor& t) {
      absl::StatusOr<PendingEntry> e = Pending(name, t);
      if (!e.ok()) return e.status();
      entries.push_back(*std::move(e));
      return absl::OkStatus();
    };
    for (const auto& item : module.named_parameters()) {
      absl::Status s = add(kParam + item.key(), item.value());
      if (!s.ok()) return s;
    }
    if (adamw != nullptr) {
      const absl::string_view kind = kOptimizerKind;
      entries.push_back(PendingEntry{kOptimizer, TensorDtype::kUInt8,
                                     {static_cast<int64_t>(kind.size())}, at::Tensor(), kind});
      // State is keyed by the module's parameter names: an optimizer over
      // other tensors (another stage's) is the caller's mistake.
      std::set<const c10::TensorImpl*> owned;
      for (auto& group : adamw->param_groups()) {
        for (const at::Tensor& p : group.params()) owned.insert(p.unsafeGetTensorImpl());
      }
      auto& states = adamw->state();
      for (const auto& item : module.named_parameters()) {
        if (owned.count(item.value().unsafeGetTensorImpl()) == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "checkpoint: parameter ", item.key(), " is not among the optimizer's"));
        }
        auto it = states.find(compat::OptimizerStateKey(item.value()));
        if (it == states.end()) continue;
        const auto& st = static_cast<const AdamWParamState&>(*it->second);
        const std::string prefix = kAdamW + item.key() + "/";
        std::vector<std::pair<std::string, at::Tensor>> fields = {
            {"step", at::scalar_tensor(static_cast<int64_t>(st.step()), at::kLong)},
            {"exp_avg", st.exp_avg()},
            {"exp_avg_sq", st.exp_avg_sq()}};
        if (st.max_exp_avg_sq().defined()) fields.emplace_back("max_exp_avg_sq", st.max_exp_avg_sq());
        for (const auto& [field, t] : fields) {
          if (!t.defined()) return absl::InternalError(absl::StrCat(prefix, field, " is undefined"));
          absl::Status s = add(prefix + field, t);
          if (!s.ok()) return s;
        }
      }
    }
    if (!averaging.empty()) {
      entries.push_back(PendingEntry{kAveraging, TensorDtype::kUInt8,
                                     {static_cast<int64_t>(averaging.size())}, at::Tensor(),
                                     averaging});
    }
    return absl::OkStatus();
  });
  if (!encoded.ok()) return encoded;
  size_t size = sizeof(uint32_t);
  for (const PendingEntry& e : entries) {
    size += TensorEntrySize(e.name.size(), e.dims.size(), e.Bytes().size());
  }
  out.reserve(out.size() + size + reserve_after);
  AppendTensorCount(out, static_cast<uint32_t>(entries.size()));
  for (const PendingEntry& e : entries) AppendTensorEntry(out, e.name, e.dtype, e.dims, e.Bytes());
  return absl::OkStatus();
}

absl::StatusOr<std::string> EncodeStageState(StageModule& module,
                                             torch::optim::Optimizer* optimizer,
                                             absl::string_view averaging) {
  std::string out;
  absl::Status s = AppendStageState(module, optimizer, averaging, out, 0);
  if (!s.ok()) return s;
  return out;
}

absl::Status DecodeStageState(absl::string_view state, StageModule& module,
                              torch::optim::Optimizer* optimizer, std::string* averaging_out) {
  absl::StatusOr<std::vector<TensorEntry>> list = ParseTensorList(state);
  if (!list.ok()) return list.status();
  std::map<std::string, const TensorEntry*> entries;  // names are unique (ParseTensorList)
  for (const TensorEntry& e : *list) entries[e.name] = &e;
  auto find = [&entries](const std::string& name) -> const TensorEntry* {
    auto it = entries.find(name);
    return it == entries.end() ? nullptr : it->second;
  };
  std::set<std::string> names;
  for (const auto& item : module.named_parameters()) names.insert(item.key());
  absl::Status known = CheckNames(entries, names);
  if (!known.ok()) return known;

  std::string averaging;
  if (const TensorEntry* e = find(kAveraging)) {
    if (e->dtype != TensorDtype::kUInt8 || e->dims.size() != 1) {
      return Loss("averaging state is not a byte vector");
    }
    averaging = std::string(e->data);
  }
  const TensorEntry* kind = find(kOptimizer);
  if (kind != nullptr && (kind->dtype != TensorDtype::kUInt8 || kind->dims.size() != 1 ||
                          kind->data != kOptimizerKind)) {
    return Loss("optimizer state of an unknown kind");
  }
  if (kind == nullptr) {
    for (const auto& [name, e] : entries) {
      if (absl::StartsWith(name, kAdamW)) return Loss(absl::StrCat(name, " without \"optimizer\""));
    }
  }
  AdamW* adamw = nullptr;
  if (optimizer != nullptr && kind != nullptr) {
    adamw = dynamic_cast<AdamW*>(optimizer);
    if (adamw == nullptr) {
      return absl::UnimplementedError(
          "checkpoint: the state holds AdamW state but the optimizer is not an AdamW");
    }
  }

  return TorchGuard("checkpoint: unreadable state", [&]() -> absl::Status {
    // Everything is read and checked first so a bad state changes nothing.
    std::vector<std::pair<at::Tensor, at::Tensor>> weights;  // parameter, loaded value
    for (const auto& item : module.named_parameters()) {
      const TensorEntry* e = find(kParam + item.key());
      if (e == nullptr) return Loss(absl::StrCat("missing parameter ", item.key()));
      absl::StatusOr<at::Tensor> t = Matching(*e, item.value(), /*non_negative=*/false);
      if (!t.ok()) return t.status();
      weights.emplace_back(item.value(), *std::move(t));
    }
    using StateKey = decltype(compat::OptimizerStateKey(at::Tensor()));
    std::vector<std::pair<StateKey, std::unique_ptr<AdamWParamState>>> states;
    if (adamw != nullptr) {
      std::map<const c10::TensorImpl*, const AdamWOptions*> group_of;
      for (auto& group : adamw->param_groups()) {
        for (const at::Tensor& p : group.params()) {
          group_of[p.unsafeGetTensorImpl()] = &static_cast<const AdamWOptions&>(group.options());
        }
      }
      for (const auto& item : module.named_parameters()) {
        const at::Tensor& p = item.value();
        const std::string prefix = kAdamW + item.key() + "/";
        const TensorEntry* step = find(prefix + "step");
        const TensorEntry* m = find(prefix + "exp_avg");
        const TensorEntry* v = find(prefix + "exp_avg_sq");
        const TensorEntry* vmax = find(prefix + "max_exp_avg_sq");
        std::unique_ptr<AdamWParamState> st;
        if (step == nullptr) {
          if (m != nullptr || v != nullptr || vmax != nullptr) {
            return Loss(absl::StrCat(prefix, "* without a step"));
          }
        } else {
          auto group = group_of.find(p.unsafeGetTensorImpl());
          if (group == group_of.end()) {
            return absl::FailedPreconditionError(absl::StrCat(
                "checkpoint: parameter ", item.key(), " is not among the optimizer's"));
          }
          if (m == nullptr || v == nullptr) return Loss(absl::StrCat(prefix, "* is incomplete"));
          if ((vmax != nullptr) != group->second->amsgrad()) {
            return Loss(absl::StrCat(prefix, "max_exp_avg_sq does not match the amsgrad option"));
          }
          if (step->dtype != TensorDtype::kInt64 || !step->dims.empty()) {
            return Loss(absl::StrCat(prefix, "step is not an int64 scalar"));
          }
          const int64_t n = ToTensor(*step).item<int64_t>();
          if (n < 0) return Loss(absl::StrCat(prefix, "step is negative"));
          st = std::make_unique<AdamWParamState>();
          st->step(n);
          absl::StatusOr<at::Tensor> mt = Matching(*m, p, /*non_negative=*/false);
          if (!mt.ok()) return mt.status();
          st->exp_avg(*std::move(mt));
          absl::StatusOr<at::Tensor> vt = Matching(*v, p, /*non_negative=*/true);
          if (!vt.ok()) return vt.status();
          st->exp_avg_sq(*std::move(vt));
          if (vmax != nullptr) {
            absl::StatusOr<at::Tensor> xt = Matching(*vmax, p, /*non_negative=*/true);
            if (!xt.ok()) return xt.status();
            st->max_exp_avg_sq(*std::move(xt));
          }
        }
        states.emplace_back(compat::OptimizerStateKey(p), std::move(st));
      }
    }
    // Nothing below refuses the state.
    {
      c10::NoGradGuard no_grad;
      for (auto& [param, value] : weights) param.copy_(value);
    }
    if (adamw != nullptr) {
      auto& installed = adamw->state();
      for (auto& [key, st] : states) {
        if (st == nullptr) {
          installed.erase(key);
        } else {
          installed[key] = std::move(st);
        }
      }
    }
    *averaging_out = std::move(averaging);
    return absl::OkStatus();
  }, absl::StatusCode::kDataLoss);
}

}  // namespace skipswarm::model
