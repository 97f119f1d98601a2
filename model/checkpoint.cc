#include "model/checkpoint.h"

#include <openssl/evp.h>

#include <cstring>
#include <exception>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/crc32c.h"
#include "model/checkpoint_state.h"
#include "model/checkpoint_v1.h"
#include "model/torch_guard.h"
#include "nlohmann/json.hpp"

namespace skipswarm::model {
namespace {

constexpr char kMagic[8] = {'S', 'S', 'W', 'C', 'K', 'P', 'T', '\n'};
constexpr uint32_t kVersionV1 = 1;  // a libtorch archive: local files only
constexpr uint32_t kVersion = 2;    // what this build writes
constexpr uint32_t kMaxHeader = 1 << 20;

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
  uint32_t version = 0;
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
  if (version != kVersion && version != kVersionV1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint: format version ", version, " is not supported (this build reads ",
        kVersionV1, " from local files and ", kVersion, ")"));
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
  p.version = version;
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
  const size_t size_at = out.size();
  Put<uint64_t>(out, 0);  // the state's size, set below
  // The state goes straight into `out` (reserved for it and the CRC): one
  // copy of the stage's tensors, not one per intermediate string.
  absl::Status state = AppendStageState(module, optimizer, averaging, out, sizeof(uint32_t));
  if (!state.ok()) return state;
  const uint64_t state_size = out.size() - size_at - sizeof(uint64_t);
  std::memcpy(out.data() + size_at, &state_size, sizeof(state_size));
  Put<uint32_t>(out, common::Crc32c(out.data(), out.size()));
  return out;
}

absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(absl::string_view bytes) {
  absl::StatusOr<Parsed> p = Parse(bytes);
  if (!p.ok()) return p.status();
  return p->info;
}

absl::Status CheckFormatForSource(absl::string_view bytes, StateSource source) {
  // A version-1 state is a libtorch archive, whose loader a hostile peer
  // can crash (model/checkpoint_v1.h).
  if (source == StateSource::kLocalFile || bytes.size() < 12 ||
      std::memcmp(bytes.data(), kMagic, 8) != 0 || Get<uint32_t>(bytes, 8) != kVersionV1) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      "checkpoint: format version 1 (a libtorch archive) is read only from a local file, "
      "never from a peer; the peer must run a build that writes version 2");
}

absl::StatusOr<CheckpointInfo> RestoreStageState(absl::string_view bytes, StageModule& module,
                                                 torch::optim::Optimizer* optimizer,
                                                 StateSource source) {
  absl::StatusOr<Parsed> p = Parse(bytes);
  if (!p.ok()) return p.status();
  // Before anything else, and before any libtorch call.
  absl::Status allowed = CheckFormatForSource(bytes, source);
  if (!allowed.ok()) return allowed;
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
  absl::Status restored =
      p->version == kVersionV1
          ? RestoreV1State(p->state, module, optimizer, &p->info.averaging)
          : DecodeStageState(p->state, module, optimizer, &p->info.averaging);
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
  absl::StatusOr<CheckpointInfo> info =
      RestoreStageState(*bytes, module, optimizer, StateSource::kLocalFile);
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
