// Hugging Face GPT-2 / Llama checkpoints <-> ddx parameters.
#include "models/hf_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

#include "ddx/processes/atomic_file.h"
#include "ddx/errors/errors.h"
#include "ddx/text/text.h"
#include "models/parallel_layers.h"
#include "models/safetensors.h"

namespace ddx::models {
namespace {

namespace fs = std::filesystem;

// "blocks.{i}.{rest}" -> {i, rest}; false for names outside the blocks.
bool split_block_name(const std::string& name, std::string& index, std::string& rest) {
  static const std::regex pattern(R"(^blocks\.(\d+)\.(.+)$)");
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return false;
  index = m[1];
  rest = m[2];
  return true;
}

[[noreturn]] void unknown(const std::string& ddx_name) {
  throw std::invalid_argument("no Hugging Face name for parameter '" + ddx_name + "'");
}

HfTensorName gpt2_name(const std::string& n) {
  if (n == "wte.weight" || n == "wpe.weight" || starts_with(n, "ln_f.")) return {"transformer." + n, false};
  if (n == "lm_head.weight") return {n, false};
  std::string i, rest;
  if (!split_block_name(n, i, rest)) unknown(n);
  // Conv1D layers store [in, out]: the transpose of our Linear weights. Biases are the same.
  static const std::set<std::string> conv1d = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                                               "mlp.c_proj.weight"};
  return {"transformer.h." + i + "." + rest, conv1d.count(rest) > 0};
}

HfTensorName llama_name(const std::string& n) {
  if (n == "tok_embeddings.weight") return {"model.embed_tokens.weight", false};
  if (n == "norm.weight") return {"model.norm.weight", false};
  if (n == "lm_head.weight") return {n, false};
  std::string i, rest;
  if (!split_block_name(n, i, rest)) unknown(n);
  const std::string layer = "model.layers." + i + ".";
  if (rest == "attn_norm.weight") return {layer + "input_layernorm.weight", false};
  if (rest == "mlp_norm.weight") return {layer + "post_attention_layernorm.weight", false};
  if (starts_with(rest, "attn.")) return {layer + "self_attn." + rest.substr(5), false};
  if (starts_with(rest, "mlp.")) return {layer + rest, false};
  unknown(n);
}

// Tensors some HF checkpoints carry that are not parameters: GPT-2's causal-mask buffers and
// old Llama rotary caches, and the stored copy of a tied head.
bool ignorable(const ModelConfig& config, const std::string& hf) {
  if (config.tie_embeddings && hf == "lm_head.weight") return true;
  if (config.family == Family::Gpt2) return ends_with(hf, ".attn.bias") || ends_with(hf, ".attn.masked_bias");
  return ends_with(hf, ".rotary_emb.inv_freq");
}

}  // namespace

HfTensorName hf_name(const ModelConfig& config, const std::string& ddx_name) {
  return config.family == Family::Gpt2 ? gpt2_name(ddx_name) : llama_name(ddx_name);
}

std::map<std::string, HfSource> match_hf_tensors(const ModelConfig& config, const std::vector<ParameterShape>& parameters,
                                                const std::string& path) {
  const std::map<std::string, TensorInfo> index = read_safetensors_index(path);
  std::set<std::string> used;
  std::vector<std::string> problems;
  std::map<std::string, HfSource> plan;
  for (const auto& [name, shape] : parameters) {
    const HfTensorName hf = hf_name(config, name);
    auto it = index.find(hf.name);
    // The original openai-community/gpt2 file was saved from GPT2Model: no "transformer." prefix.
    if (it == index.end() && starts_with(hf.name, "transformer.")) it = index.find(hf.name.substr(12));
    if (it == index.end()) {
      problems.push_back("missing tensor '" + hf.name + "'");
      continue;
    }
    used.insert(it->first);
    std::vector<int64_t> expected = shape;
    if (hf.transposed) std::reverse(expected.begin(), expected.end());
    if (it->second.shape != expected) {
      problems.push_back("tensor '" + it->first + "' has shape " + shape_text(it->second.shape) + ", expected " +
                         shape_text(expected));
      continue;
    }
    const std::string& dtype = it->second.dtype;
    if (dtype != "F32" && dtype != "BF16" && dtype != "F16" && dtype != "F64") {
      problems.push_back("tensor '" + it->first + "' has dtype " + dtype + ", expected a floating-point type");
      continue;
    }
    plan[name] = {it->second, hf.transposed};
  }
  for (const auto& [name, info] : index)
    if (!used.count(name) && !ignorable(config, name)) problems.push_back("unexpected tensor '" + name + "'");
  if (!problems.empty()) {
    std::string message = path + ": weights do not fit model " + config.name + " (" + to_string(config.family) + "):";
    const size_t shown = std::min<size_t>(problems.size(), 12);
    for (size_t i = 0; i < shown; ++i) message += "\n  " + problems[i];
    if (problems.size() > shown) message += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
    throw UsageError(message);
  }
  return plan;
}

torch::Tensor read_hf_rows(const HfSource& source, int64_t row_begin, int64_t row_end) {
  if (!source.transposed) return read_tensor_rows(source.info, row_begin, row_end);
  return read_tensor_columns(source.info, row_begin, row_end).t().contiguous();
}

void load_hf_weights(CausalLM& model, const std::string& path) {
  // A tensor-parallel model reads only its slices: row ranges directly, column slices of whole
  // rows (row-parallel weights).
  const ParameterShards shards = parameter_shards(model);
  std::vector<ParameterShape> shapes;
  for (auto& param : model.named_parameters()) {
    auto shard = shards.find(param.key());
    shapes.emplace_back(param.key(), shard != shards.end() ? shard->second.full_shape : param.value().sizes().vec());
  }
  const std::map<std::string, HfSource> plan = match_hf_tensors(model.config(), shapes, path);
  torch::NoGradGuard no_grad;
  for (auto& param : model.named_parameters()) {
    const HfSource& source = plan.at(param.key());
    auto shard = shards.find(param.key());
    if (shard == shards.end()) {
      torch::Tensor t = read_tensor(source.info);
      param.value().copy_(source.transposed ? t.t() : t);
      continue;
    }
    std::vector<torch::Tensor> parts;
    for (const Range& r : shard->second.ranges) {
      parts.push_back(shard->second.dim == 0 ? read_hf_rows(source, r.begin, r.end)
                                             : read_hf_rows(source, 0, shard->second.full_shape[0])
                                                   .narrow(shard->second.dim, r.begin, r.size()));
    }
    param.value().copy_(torch::cat(parts, shard->second.dim));
  }
}

void save_hf_weights(CausalLM& model, const std::string& dir) {
  fs::create_directories(dir);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& param : model.named_parameters()) {
    const HfTensorName hf = hf_name(model.config(), param.key());
    torch::Tensor t = param.value().detach();
    tensors.emplace_back(hf.name, hf.transposed ? t.t() : t);
  }
  // transformers refuses safetensors files without format metadata.
  write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  write_file_atomically((fs::path(dir) / "config.json").string(), to_hf_config_json(model.config()));
}

}  // namespace ddx::models
