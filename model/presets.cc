#include "model/presets.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::model {
namespace {

struct Preset {
  const char* name;
  int layers, d_model, heads, ffn, seq_len;
};

constexpr Preset kPresets[] = {
    {"tiny", 3, 64, 4, 128, 32},
    {"small", 12, 256, 8, 688, 128},
    {"125m", 12, 768, 12, 2048, 1024},
    {"350m", 24, 1024, 16, 2816, 1024},
    {"1b", 24, 2048, 16, 5632, 2048},
};

}  // namespace

absl::StatusOr<ModelConfig> ModelPreset(absl::string_view name) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ModelConfig c;
    c.num_layers = p.layers;
    c.d_model = p.d_model;
    c.num_heads = p.heads;
    c.ffn_dim = p.ffn;
    c.seq_len = p.seq_len;
    if (c.num_layers < c.num_stages) c.num_stages = c.num_layers;
    return c;
  }
  return absl::InvalidArgumentError(absl::StrCat("--model=", name, " is not a preset; known: ",
                                                 absl::StrJoin(ModelPresetNames(), ", ")));
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

}  // namespace skipswarm::model
