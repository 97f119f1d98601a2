#include "model/model_config.h"

#include <openssl/sha.h>

#include <exception>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace skipswarm::model {
namespace {

nlohmann::json ToJsonObject(const ModelConfig& c) {
  nlohmann::json j;
  j["num_layers"] = c.num_layers;
  j["d_model"] = c.d_model;
  j["num_heads"] = c.num_heads;
  j["ffn_dim"] = c.ffn_dim;
  j["vocab_size"] = c.vocab_size;
  j["seq_len"] = c.seq_len;
  j["num_stages"] = c.num_stages;
  j["tie_embeddings"] = c.tie_embeddings;
  j["norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["init_seed"] = c.init_seed;
  return j;
}

}  // namespace

absl::Status ModelConfig::Validate() const {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("model config: ", what));
  };
  if (num_layers < 1 || num_layers > 4096) return bad("num_layers must be in [1, 4096]");
  if (num_stages < 1) return bad("num_stages must be >= 1");
  if (num_stages > num_layers) {
    return bad(absl::StrCat("num_stages (", num_stages, ") exceeds num_layers (",
                            num_layers, "): every stage needs a block"));
  }
  if (d_model < 2 || d_model > 65536) return bad("d_model must be in [2, 65536]");
  if (num_heads < 1 || d_model % num_heads != 0) {
    return bad(absl::StrCat("d_model (", d_model, ") must be divisible by num_heads (",
                            num_heads, ")"));
  }
  if (head_dim() % 2 != 0) return bad("head dimension must be even for rotary embeddings");
  if (ffn_dim < 1 || ffn_dim > 1 << 20) return bad("ffn_dim must be in [1, 2^20]");
  if (vocab_size < 2 || vocab_size > 1 << 22) return bad("vocab_size must be in [2, 2^22]");
  if (seq_len < 1 || seq_len > 1 << 20) return bad("seq_len must be in [1, 2^20]");
  if (!(norm_eps > 0)) return bad("norm_eps must be > 0");
  if (!(rope_theta > 1)) return bad("rope_theta must be > 1");
  return absl::OkStatus();
}

std::pair<int, int> ModelConfig::StageBlocks(int stage) const {
  const int base = num_layers / num_stages;
  const int extra = num_layers % num_stages;
  const int first = stage * base + (stage < extra ? stage : extra);
  const int count = base + (stage < extra ? 1 : 0);
  return {first, first + count};
}

int64_t ModelConfig::StageParameterCount(int stage) const {
  const int64_t d = d_model;
  const int64_t per_block = 4 * d * d + 3 * d * ffn_dim + 2 * d;
  auto [first, end] = StageBlocks(stage);
  int64_t n = per_block * (end - first);
  if (stage == 0) {
    n += static_cast<int64_t>(vocab_size) * d + d;  // embedding + final norm
    if (!tie_embeddings) n += static_cast<int64_t>(vocab_size) * d;
  }
  return n;
}

int64_t ModelConfig::ParameterCount() const {
  int64_t n = 0;
  for (int s = 0; s < num_stages; ++s) n += StageParameterCount(s);
  return n;
}

std::string ModelConfig::ConfigHash() const {
  const std::string canonical = ToJsonObject(*this).dump();
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(),
         digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), 8));
}

std::string ModelConfigDiff(const ModelConfig& a, const ModelConfig& b) {
  const nlohmann::json ja = ToJsonObject(a), jb = ToJsonObject(b);
  std::string out;
  for (const auto& [key, value] : ja.items()) {
    const auto other = jb.find(key);
    if (other != jb.end() && *other == value) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", key, " ", value.dump(), " vs ",
                    other == jb.end() ? "-" : other->dump());
  }
  return out;
}

std::string ModelConfigToJson(const ModelConfig& config) {
  return ToJsonObject(config).dump(2);
}

absl::StatusOr<ModelConfig> ModelConfigFromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("model config: not a JSON object");
  }
  ModelConfig c;
  try {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      const nlohmann::json& v = it.value();
      if (key == "num_layers") c.num_layers = v.get<int>();
      else if (key == "d_model") c.d_model = v.get<int>();
      else if (key == "num_heads") c.num_heads = v.get<int>();
      else if (key == "ffn_dim") c.ffn_dim = v.get<int>();
      else if (key == "vocab_size") c.vocab_size = v.get<int>();
      else if (key == "seq_len") c.seq_len = v.get<int>();
      else if (key == "num_stages") c.num_stages = v.get<int>();
      else if (key == "tie_embeddings") c.tie_embeddings = v.get<bool>();
      else if (key == "norm_eps") c.norm_eps = v.get<double>();
      else if (key == "rope_theta") c.rope_theta = v.get<double>();
      else if (key == "init_seed") c.init_seed = v.get<uint64_t>();
      else return absl::InvalidArgumentError(absl::StrCat("model config: unknown field '", key, "'"));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("model config: ", e.what()));
  }
  absl::Status valid = c.Validate();
  if (!valid.ok()) return valid;
  return c;
}

}  // namespace skipswarm::model
