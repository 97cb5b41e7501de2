// Presets, validation, parameter counts and the canonical JSON/hash of a ModelConfig.
#include "models/model_config.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>

#include "ddx/checksum.h"
#include "ddx/errors/errors.h"

namespace ddx::models {

const char* to_string(Family family) { return family == Family::Gpt2 ? "gpt2" : "llama"; }

namespace {

ModelConfig gpt2_shape(const std::string& name, int64_t hidden, int64_t layers, int64_t heads) {
  ModelConfig c;
  c.name = name;
  c.family = Family::Gpt2;
  c.vocab_size = 50257;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = heads;
  c.intermediate_size = 4 * hidden;
  c.max_position_embeddings = 1024;
  c.norm_eps = 1e-5;
  c.tie_embeddings = true;
  return c;
}

// Shapes of meta-llama/Llama-3.2-1B and Llama-3.1-8B (config.json on the HF hub).
ModelConfig llama3_shape(const std::string& name, int64_t hidden, int64_t layers,
                         int64_t intermediate, bool tie, double rope_factor) {
  ModelConfig c;
  c.name = name;
  c.family = Family::Llama;
  c.vocab_size = 128256;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.intermediate_size = intermediate;
  c.max_position_embeddings = 131072;
  c.norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling = RopeScaling{rope_factor, 1.0, 4.0, 8192};
  c.tie_embeddings = tie;
  return c;
}

// Tiny test models. Sizes are chosen so that dim 0 of most weights is not divisible by 2, 3
// or 4 (sharding code must meet padding), while a CPU step stays in the milliseconds:
//  - vocab 259 and max positions 131 are odd primes-ish for every family;
//  - GPT-2: hidden 35 = 5 heads x 7, MLP 137 (the fused qkv is 3 x 35 = 105, unavoidably /3);
//  - Llama: RoPE needs an even head_dim, so hidden cannot be odd; 250 = 25 heads x 10 is
//    divisible by 2 only. 5 KV heads with 5 query heads each: a GQA grouping error (tiling
//    instead of repeat-interleave) changes the output, which 1 KV head would not reveal.
//    MLP 343 = 7^3. llama3 RoPE scaling with a 64-token original context puts the 5
//    frequencies of a 10-wide head in all three bands (kept, interpolated, divided).
ModelConfig debug_gpt2() {
  ModelConfig c;
  c.name = "debug";
  c.family = Family::Gpt2;
  c.vocab_size = 259;
  c.hidden_size = 35;
  c.num_layers = 3;
  c.num_heads = 5;
  c.num_kv_heads = 5;
  c.intermediate_size = 137;
  c.max_position_embeddings = 131;
  c.norm_eps = 1e-5;
  c.tie_embeddings = true;
  return c;
}

ModelConfig debug_llama() {
  ModelConfig c;
  c.name = "debug-llama";
  c.family = Family::Llama;
  c.vocab_size = 259;
  c.hidden_size = 250;
  c.num_layers = 3;
  c.num_heads = 25;
  c.num_kv_heads = 5;
  c.intermediate_size = 343;
  c.max_position_embeddings = 131;
  c.norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.rope_scaling = RopeScaling{4.0, 1.0, 4.0, 64};
  c.tie_embeddings = false;
  return c;
}

// Tensor-parallel test models: head counts that TP 2 and 4 divide (GPT-2 4 heads; Llama 8 query
// heads over 4 KV heads, so TP 4 leaves one KV head and its group of 2 query heads per rank),
// and sizes no TP size divides, so vocabulary and MLP shards meet a short last shard: vocab
// 1001 = 7 x 11 x 13, MLP 137 (prime).
ModelConfig tp_test_shape(ModelConfig c, const std::string& name, int64_t hidden, int64_t heads, int64_t kv_heads) {
  c.name = name;
  c.vocab_size = 1001;
  c.hidden_size = hidden;
  c.num_layers = 2;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.intermediate_size = 137;
  return c;
}

ModelConfig debug_tp_gpt2() { return tp_test_shape(debug_gpt2(), "debug-tp", 48, 4, 4); }
ModelConfig debug_tp_llama() { return tp_test_shape(debug_llama(), "debug-tp-llama", 64, 8, 4); }

// Pipeline test model: the debug GPT-2 (tied embedding, so the first and last stage share wte)
// with 8 blocks, so that --pp 4 x --pp-virtual-stages 2 has a block per stage.
ModelConfig debug_pp_gpt2() {
  ModelConfig c = debug_gpt2();
  c.name = "debug-pp";
  c.num_layers = 8;
  return c;
}

const std::map<std::string, std::function<ModelConfig()>>& presets() {
  static const std::map<std::string, std::function<ModelConfig()>> table = {
      {"gpt2", [] { return gpt2_shape("gpt2", 768, 12, 12); }},
      {"gpt2-medium", [] { return gpt2_shape("gpt2-medium", 1024, 24, 16); }},
      {"llama-3.2-1b", [] { return llama3_shape("llama-3.2-1b", 2048, 16, 8192, true, 32.0); }},
      {"llama-3.1-8b", [] { return llama3_shape("llama-3.1-8b", 4096, 32, 14336, false, 8.0); }},
      {"debug", debug_gpt2},
      {"debug-llama", debug_llama},
      {"debug-tp", debug_tp_gpt2},
      {"debug-tp-llama", debug_tp_llama},
      {"debug-pp", debug_pp_gpt2},
  };
  return table;
}

std::string preset_names() {
  std::string names;
  for (const auto& [name, make] : presets()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

[[noreturn]] void invalid(const ModelConfig& c, const std::string& field, const std::string& why) {
  throw UsageError("model config " + c.name + ": " + field + " " + why);
}

nlohmann::json to_json_object(const ModelConfig& c) {
  // nlohmann::json objects keep keys sorted, which makes the text canonical.
  nlohmann::json j;
  j["name"] = c.name;
  j["family"] = to_string(c.family);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_layers"] = c.num_layers;
  j["num_heads"] = c.num_heads;
  j["num_kv_heads"] = c.num_kv_heads;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = {{"factor", c.rope_scaling.factor},
                       {"low_freq_factor", c.rope_scaling.low_freq_factor},
                       {"high_freq_factor", c.rope_scaling.high_freq_factor},
                       {"original_max_position_embeddings",
                        c.rope_scaling.original_max_position_embeddings}};
  j["tie_embeddings"] = c.tie_embeddings;
  j["init_std"] = c.init_std;
  return j;
}

}  // namespace

int64_t ModelConfig::num_parameters() const {
  const int64_t d = hidden_size, v = vocab_size, l = num_layers, i = intermediate_size;
  const int64_t head = tie_embeddings ? 0 : v * d;
  if (family == Family::Gpt2) {
    const int64_t per_layer = 2 * d            // ln_1
                              + 3 * d * d + 3 * d  // c_attn (fused qkv)
                              + d * d + d        // attn c_proj
                              + 2 * d            // ln_2
                              + i * d + i        // c_fc
                              + i * d + d;       // mlp c_proj
    return v * d + max_position_embeddings * d + l * per_layer + 2 * d + head;
  }
  const int64_t kv = num_kv_heads * head_dim();
  const int64_t per_layer = d                    // attention norm
                            + d * d + 2 * kv * d + d * d  // q, k, v, o
                            + d                  // MLP norm
                            + 3 * i * d;         // gate, up, down
  return v * d + l * per_layer + d + head;
}

std::string ModelConfig::to_json() const { return to_json_object(*this).dump(); }

uint64_t ModelConfig::hash() const {
  nlohmann::json j = to_json_object(*this);
  j.erase("name");
  return fnv1a64(j.dump());
}

ModelConfig model_config_from_preset(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end())
    throw UsageError("unknown model preset '" + name + "' (known: " + preset_names() + ")");
  ModelConfig c = it->second();
  validate(c);
  return c;
}

ModelConfig resolve_model_config(const std::string& spec) {
  if (presets().count(spec)) return model_config_from_preset(spec);
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    const std::string file = (fs::path(spec) / "config.json").string();
    if (!fs::exists(file, ec)) throw UsageError("model folder " + spec + " has no config.json");
    return model_config_from_hf_json(file);
  }
  if (fs::exists(spec, ec)) return model_config_from_hf_json(spec);
  throw UsageError("unknown model '" + spec + "': not a preset (" + preset_names() +
                   ") and no such file or folder");
}

void validate(const ModelConfig& c) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_layers", c.num_layers},
      {"num_heads", c.num_heads},
      {"num_kv_heads", c.num_kv_heads},
      {"intermediate_size", c.intermediate_size},
      {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [field, value] : sizes)
    if (value <= 0) invalid(c, field, "must be positive, got " + std::to_string(value));
  if (c.hidden_size % c.num_heads != 0)
    invalid(c, "num_heads", "(" + std::to_string(c.num_heads) + ") must divide hidden_size (" +
                                std::to_string(c.hidden_size) + ")");
  if (c.num_heads % c.num_kv_heads != 0)
    invalid(c, "num_kv_heads", "(" + std::to_string(c.num_kv_heads) +
                                   ") must divide num_heads (" + std::to_string(c.num_heads) + ")");
  if (!(c.norm_eps > 0)) invalid(c, "norm_eps", "must be positive");
  if (!(c.init_std > 0)) invalid(c, "init_std", "must be positive");
  if (c.family == Family::Gpt2) {
    if (c.num_kv_heads != c.num_heads) invalid(c, "num_kv_heads", "must equal num_heads for GPT-2");
    if (c.rope_scaling.enabled()) invalid(c, "rope_scaling", "is not used by GPT-2");
    return;
  }
  if (c.head_dim() % 2 != 0)
    invalid(c, "num_heads", "must give an even head_dim for RoPE (hidden_size / num_heads = " +
                                std::to_string(c.head_dim()) + ")");
  if (!(c.rope_theta > 0)) invalid(c, "rope_theta", "must be positive");
  const RopeScaling& s = c.rope_scaling;
  if (s.factor < 0) invalid(c, "rope_scaling.factor", "must not be negative");
  if (s.enabled()) {
    if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor))
      invalid(c, "rope_scaling", "needs 0 < low_freq_factor < high_freq_factor");
    if (s.original_max_position_embeddings <= 0)
      invalid(c, "rope_scaling.original_max_position_embeddings", "must be positive");
  }
}

}  // namespace ddx::models
