#include "model/checkpoint.h"

#include <openssl/evp.h>

#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/crc32c.h"
#include "model/torch_guard.h"
#include "nlohmann/json.hpp"

namespace skipswarm::model {
namespace {

constexpr char kMagic[8] = {'S', 'S', 'W', 'C', 'K', 'P', 'T', '\n'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxHeader = 1 << 20;

// Note [One libtorch archive at a time]: held around every archive's life.
// Never destroyed (a daemon thread may still save while statics go).
absl::Mutex& TorchArchiveMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}
template <typename T>
T Get(absl::string_view bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(v));
  return v;
}

struct Parsed {
  CheckpointInfo info;
  absl::string_view state;
};

absl::StatusOr<Parsed> Parse(absl::string_view b) {
  auto loss = [](auto... parts) {
    return absl::DataLossError(absl::StrCat("checkpoint: ", parts...));
  };
  if (b.size() < 8 + 4 + 4 + 8 + 4) return loss("file of ", b.size(), " bytes is too short");
  if (std::memcmp(b.data(), kMagic, 8) != 0) {
    return absl::FailedPreconditionError("checkpoint: not a SkipSwarm stage checkpoint (bad magic)");
  }
  const uint32_t version = Get<uint32_t>(b, 8);
  if (version != kVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint: format version ", version, " is not supported (this build reads ",
        kVersion, ")"));
  }
  const uint32_t crc = Get<uint32_t>(b, b.size() - 4);
  if (common::Crc32c(b.data(), b.size() - 4) != crc) return loss("CRC mismatch (file corrupted)");
  const uint32_t header_len = Get<uint32_t>(b, 12);
  if (header_len > kMaxHeader || 16 + uint64_t{header_len} + 8 + 4 > b.size()) {
    return loss("bad header length ", header_len);
  }
  const size_t state_at = 16 + header_len + 8;
  const uint64_t state_len = Get<uint64_t>(b, 16 + header_len);
  if (state_len != b.size() - 4 - state_at) return loss("bad state length ", state_len);
  Parsed p;
  p.state = b.substr(state_at, state_len);
  nlohmann::json h = nlohmann::json::parse(b.substr(16, header_len), nullptr, false);
  if (h.is_discarded() || !h.is_object()) return loss("header is not JSON");
  try {
    absl::StatusOr<ModelConfig> config = ModelConfigFromJson(h.at("config").dump());
    if (!config.ok()) return loss(config.status().message());
    p.info.config = *config;
    p.info.stage = h.at("stage").get<int>();
    p.info.step = h.at("step").get<int64_t>();
    p.info.extra = h.value("extra", "");
    if (h.at("config_hash").get<std::string>() != config->ConfigHash()) {
      return loss("config hash does not match the stored config");
    }
  } catch (const std::exception& e) {
    return loss("bad header: ", e.what());
  }
  if (p.info.stage < 0 || p.info.stage >= p.info.config.num_stages) {
    return loss("stage ", p.info.stage, " out of range");
  }
  return p;
}

}  // namespace

absl::StatusOr<std::string> SerializeStageState(StageModule& module,
                                                torch::optim::Optimizer* optimizer, int64_t step,
                                                const std::string& extra,
                                                absl::string_view averaging) {
  std::string state;
  // The parameters' CPU copies are made before the lock: only the archive
  // work is serialised (Note [One libtorch archive at a time]).
  std::vector<std::pair<std::string, at::Tensor>> params;
  absl::Status copied = TorchGuard("checkpoint: copying parameters", [&]() -> absl::Status {
    for (const auto& item : module.named_parameters()) {
      params.emplace_back("param/" + item.key(), item.value().detach().to(at::kCPU));
    }
    return absl::OkStatus();
  });
  if (!copied.ok()) return copied;
  absl::Status serialised = TorchGuard("checkpoint: serialising", [&]() -> absl::Status {
    absl::MutexLock lock(&TorchArchiveMutex());
    torch::serialize::OutputArchive archive;
    for (const auto& [name, tensor] : params) archive.write(name, tensor);
    if (optimizer != nullptr) {
      torch::serialize::OutputArchive opt;
      optimizer->save(opt);
      archive.write("optimizer", opt);
    }
    if (!averaging.empty()) {
      archive.write("averaging",
                    at::from_blob(const_cast<char*>(averaging.data()),
                                  {static_cast<int64_t>(averaging.size())}, at::kByte)
                        .clone());
    }
    archive.save_to([&state](const void* data, size_t n) {
      state.append(static_cast<const char*>(data), n);
      return n;
    });
    return absl::OkStatus();
  });
  if (!serialised.ok()) return serialised;
  nlohmann::json h;
  h["config_hash"] = module.config().ConfigHash();
  h["config"] = nlohmann::json::parse(ModelConfigToJson(module.config()));
  h["stage"] = module.stage();
  h["step"] = step;
  h["extra"] = extra;
  const std::string header = h.dump();
  std::string out(kMagic, 8);
  Put<uint32_t>(out, kVersion);
  Put<uint32_t>(out, static_cast<uint32_t>(header.size()));
  out += header;
  Put<uint64_t>(out, state.size());
  out += state;
  Put<uint32_t>(out, common::Crc32c(out.data(), out.size()));
  return out;
}

absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(absl::string_view bytes) {
  absl::StatusOr<Parsed> p = Parse(bytes);
  if (!p.ok()) return p.status();
  return p->info;
}

absl::StatusOr<CheckpointInfo> RestoreStageState(absl::string_view bytes, StageModule& module,
                                                 torch::optim::Optimizer* optimizer) {
  absl::StatusOr<Parsed> p = Parse(bytes);
  if (!p.ok()) return p.status();
  if (p->info.config.ConfigHash() != module.config().ConfigHash()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint is for model config ", p->info.config.ConfigHash(), ", this model is ",
        module.config().ConfigHash(), "; they differ in ",
        ModelConfigDiff(p->info.config, module.config()), " (checkpoint vs this run)"));
  }
  if (p->info.stage != module.stage()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint holds stage ", p->info.stage, ", not stage ", module.stage()));
  }
  absl::Status restored = TorchGuard("checkpoint: unreadable state", [&]() -> absl::Status {
    absl::MutexLock lock(&TorchArchiveMutex());  // Note [One libtorch archive at a time]
    torch::serialize::InputArchive archive;
    archive.load_from(p->state.data(), p->state.size());
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
    if (archive.try_read("averaging", averaging) && averaging.defined()) {
      if (averaging.scalar_type() != at::kByte || averaging.dim() != 1) {
        return absl::DataLossError("checkpoint: averaging state is not a byte vector");
      }
      averaging = averaging.contiguous();
      p->info.averaging.assign(reinterpret_cast<const char*>(averaging.data_ptr<uint8_t>()),
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
    return absl::OkStatus();
  }, absl::StatusCode::kDataLoss);
  if (!restored.ok()) return restored;
  return p->info;
}

absl::Status SaveStageCheckpoint(const std::string& path, StageModule& module,
                                 torch::optim::Optimizer* optimizer, int64_t step,
                                 const std::string& extra, absl::string_view averaging) {
  absl::StatusOr<std::string> bytes =
      SerializeStageState(module, optimizer, step, extra, averaging);
  if (!bytes.ok()) return bytes.status();
  return common::WriteFileAtomically(path, *bytes);
}

absl::StatusOr<CheckpointInfo> LoadStageCheckpoint(const std::string& path, StageModule& module,
                                                   torch::optim::Optimizer* optimizer) {
  absl::StatusOr<std::string> bytes = common::ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<CheckpointInfo> info = RestoreStageState(*bytes, module, optimizer);
  if (!info.ok()) {
    return absl::Status(info.status().code(), absl::StrCat(path, ": ", info.status().message()));
  }
  return info;
}

std::string ParameterDigest(StageModule& module) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  for (const auto& item : module.named_parameters()) {
    const std::string& name = item.key();
    EVP_DigestUpdate(ctx, name.data(), name.size() + 1);
    at::Tensor t = item.value().detach().to(at::kCPU, at::kFloat).contiguous();
    for (int64_t d : t.sizes()) EVP_DigestUpdate(ctx, &d, sizeof(d));
    EVP_DigestUpdate(ctx, t.data_ptr(), t.numel() * sizeof(float));
  }
  unsigned char digest[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, digest, &len);
  EVP_MD_CTX_free(ctx);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), len));
}

}  // namespace skipswarm::model
