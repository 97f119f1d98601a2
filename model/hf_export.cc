#include "model/hf_export.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "model/checkpoint.h"
#include "model/reference_trainer.h"
#include "model/safetensors.h"
#include "nlohmann/json.hpp"

namespace skipswarm::model {
namespace {

absl::string_view Bytes(const at::Tensor& t) {
  return absl::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes());
}

}  // namespace

absl::StatusOr<std::string> HfTensorName(const std::string& ours) {
  static const std::map<std::string, std::string> kTop = {
      {"embedding", "model.embed_tokens.weight"},
      {"final_norm", "model.norm.weight"},
      {"head", "lm_head.weight"},
  };
  static const std::map<std::string, std::string> kBlock = {
      {"attn_norm", "input_layernorm.weight"},
      {"wq", "self_attn.q_proj.weight"},
      {"wk", "self_attn.k_proj.weight"},
      {"wv", "self_attn.v_proj.weight"},
      {"wo", "self_attn.o_proj.weight"},
      {"mlp_norm", "post_attention_layernorm.weight"},
      {"w_gate", "mlp.gate_proj.weight"},
      {"w_up", "mlp.up_proj.weight"},
      {"w_down", "mlp.down_proj.weight"},
  };
  if (auto it = kTop.find(ours); it != kTop.end()) return it->second;
  std::vector<std::string> parts = absl::StrSplit(ours, '.');
  int index = 0;
  if (parts.size() == 2 && absl::StartsWith(parts[0], "block_") &&
      absl::SimpleAtoi(parts[0].substr(6), &index)) {
    if (auto it = kBlock.find(parts[1]); it != kBlock.end()) {
      return absl::StrCat("model.layers.", index, ".", it->second);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("no Hugging Face name for parameter '", ours,
                                                 "'"));
}

std::string HfConfigJson(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = c.d_model;
  j["intermediate_size"] = c.ffn_dim;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_heads;
  j["head_dim"] = c.head_dim();
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.seq_len;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["mlp_bias"] = false;
  j["vocab_size"] = c.vocab_size;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = "float32";
  j["skipswarm_config_hash"] = c.ConfigHash();
  return j.dump(2) + "\n";
}

at::Tensor FullModelLogits(const std::vector<std::shared_ptr<StageModule>>& stages,
                           const at::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  at::Tensor x = stages[0]->Embed(tokens);
  for (const auto& s : stages) x = s->RunBlocks(x);
  return stages[0]->Head(x);
}

absl::Status ExportHuggingFace(const std::vector<std::shared_ptr<StageModule>>& stages,
                               const std::string& out_dir, const HfExportOptions& options) {
  if (stages.empty()) return absl::InvalidArgumentError("no stages to export");
  const ModelConfig& config = stages[0]->config();
  if (static_cast<int>(stages.size()) != config.num_stages) {
    return absl::InvalidArgumentError(absl::StrCat("export needs all ", config.num_stages,
                                                   " stages, got ", stages.size()));
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", out_dir, ": ",
                                                          ec.message()));
  try {
    // Tensors in HF's order: embedding, layers 0..L-1, final norm, head.
    std::map<std::string, at::Tensor> by_hf_name;
    for (int s = 0; s < config.num_stages; ++s) {
      if (stages[s]->stage() != s || stages[s]->config().ConfigHash() != config.ConfigHash()) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, " does not belong"));
      }
      for (const auto& item : stages[s]->named_parameters()) {
        SS_ASSIGN_OR_RETURN(std::string name, HfTensorName(item.key()));
        by_hf_name[name] = item.value().detach().to(at::kCPU, at::kFloat).contiguous();
      }
    }
    std::vector<std::string> order = {"model.embed_tokens.weight"};
    for (int i = 0; i < config.num_layers; ++i) {
      for (const char* n : {"input_layernorm.weight", "self_attn.q_proj.weight",
                            "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                            "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                            "mlp.gate_proj.weight", "mlp.up_proj.weight",
                            "mlp.down_proj.weight"}) {
        order.push_back(absl::StrCat("model.layers.", i, ".", n));
      }
    }
    order.push_back("model.norm.weight");
    if (!config.tie_embeddings) order.push_back("lm_head.weight");
    if (order.size() != by_hf_name.size()) {
      return absl::InternalError(absl::StrCat("export: ", by_hf_name.size(),
                                              " parameters for ", order.size(), " HF tensors"));
    }
    std::vector<SafetensorsTensor> tensors;
    for (const std::string& name : order) {
      auto it = by_hf_name.find(name);
      if (it == by_hf_name.end()) return absl::InternalError("export: missing " + name);
      tensors.push_back({name, "F32", it->second.sizes().vec(), Bytes(it->second)});
    }
    SS_RETURN_IF_ERROR(WriteSafetensors(out_dir + "/model.safetensors", tensors,
                                        {{"format", "pt"}}));
    SS_RETURN_IF_ERROR(common::WriteFileAtomically(out_dir + "/config.json", HfConfigJson(config)));

    if (options.reference_logits) {
      // A fixed batch: two rows of bytes from a fixed text, full length.
      const std::string text =
          "SkipSwarm exports a LLaMA checkpoint. The quick brown fox jumps over the lazy dog. ";
      const int64_t t = config.seq_len;
      at::Tensor tokens = at::empty({2, t}, at::kLong);
      auto acc = tokens.accessor<int64_t, 2>();
      for (int64_t r = 0; r < 2; ++r) {
        for (int64_t i = 0; i < t; ++i) {
          acc[r][i] = static_cast<unsigned char>(text[(r * 7 + i) % text.size()]) %
                      config.vocab_size;
        }
      }
      const at::Device device = stages[0]->parameters()[0].device();
      at::Tensor logits =
          FullModelLogits(stages, tokens.to(device)).to(at::kCPU, at::kFloat).contiguous();
      std::vector<SafetensorsTensor> ref = {
          {"tokens", "I64", tokens.sizes().vec(), Bytes(tokens)},
          {"logits", "F32", logits.sizes().vec(), Bytes(logits)},
      };
      SS_RETURN_IF_ERROR(
          WriteSafetensors(out_dir + "/skipswarm_reference.safetensors", ref, {}));
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("export: ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::shared_ptr<StageModule>>> LoadCheckpointStages(
    const std::string& dir) {
  SS_ASSIGN_OR_RETURN(std::string head, common::ReadFileBytes(StageCheckpointPath(dir, 0)));
  SS_ASSIGN_OR_RETURN(CheckpointInfo info, ReadCheckpointInfo(head));
  std::vector<std::shared_ptr<StageModule>> stages;
  try {
    for (int s = 0; s < info.config.num_stages; ++s) {
      auto m = std::make_shared<StageModule>(info.config, s);
      SS_ASSIGN_OR_RETURN(CheckpointInfo si, LoadStageCheckpoint(StageCheckpointPath(dir, s),
                                                                 *m, nullptr));
      if (si.step != info.step) {
        return absl::FailedPreconditionError(
            absl::StrCat("checkpoint '", dir, "': stage ", s, " is at iteration ", si.step,
                         ", stage 0 at ", info.step));
      }
      stages.push_back(std::move(m));
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("loading '", dir, "': ", e.what()));
  }
  return stages;
}

}  // namespace skipswarm::model
