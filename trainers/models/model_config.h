#pragma once
// The shape of a decoder-only causal LM: from a named preset or a Hugging Face config.json.
// No LibTorch here, so data code and tests can use it cheaply.
#include <cstdint>
#include <string>

namespace ddx::models {

enum class Family { Gpt2, Llama };
const char* to_string(Family family);

// Llama 3.x "llama3" RoPE frequency scaling (HF rope_scaling). factor == 0 means none: plain
// RoPE. Frequencies whose wavelength exceeds original_max_position_embeddings / low_freq_factor
// are divided by `factor`, those shorter than .../high_freq_factor are kept, and the band in
// between is interpolated smoothly.
struct RopeScaling {
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  bool enabled() const { return factor > 0.0; }
};

struct ModelConfig {
  std::string name;  // preset name or the config.json path it came from
  Family family = Family::Gpt2;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;         // d_model
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;        // == num_heads for GPT-2; < num_heads for GQA
  int64_t intermediate_size = 0;   // MLP hidden width (GPT-2: 4*hidden unless n_inner)
  int64_t max_position_embeddings = 0;
  double norm_eps = 1e-5;
  double rope_theta = 500000.0;    // Llama only
  RopeScaling rope_scaling;        // Llama only
  bool tie_embeddings = true;      // GPT-2: true; Llama: from config (tie_word_embeddings)
  double init_std = 0.02;

  int64_t head_dim() const { return hidden_size / num_heads; }
  // Parameters in the model (tied embeddings counted once).
  int64_t num_parameters() const;
  // Canonical JSON of every field above (sorted keys), and a hash of it: ranks compare hashes
  // at start so a mismatched config is an error, not a hang. The hash leaves out `name`
  // (where the config came from is provenance, not shape): "debug" and the config.json saved
  // from it hash the same.
  std::string to_json() const;
  uint64_t hash() const;
};

// Named presets: "gpt2", "gpt2-medium", "llama-3.2-1b", "llama-3.1-8b", and tiny test models
// "debug" (GPT-2 family) and "debug-llama", whose sizes are odd (not divisible by 2, 3 or 4
// where the architecture allows) so sharding code meets padding; "debug-tp" and
// "debug-tp-llama" have head counts TP 2 and 4 divide and a vocabulary no TP size divides.
// Throws UsageError listing the known presets for an unknown name.
ModelConfig model_config_from_preset(const std::string& name);

// A Hugging Face config.json (GPT2LMHeadModel / LlamaForCausalLM fields). Throws UsageError
// naming the file and the missing or invalid field.
ModelConfig model_config_from_hf_json(const std::string& path);

// The Hugging Face config.json text of `config` (model_type gpt2 or llama, HF field names), so
// a saved model folder loads in transformers and back here.
std::string to_hf_config_json(const ModelConfig& config);

// `spec` is a preset name, a config.json file, or a folder containing config.json.
ModelConfig resolve_model_config(const std::string& spec);

// Validates sizes (heads divide hidden, kv heads divide heads, positive sizes); throws
// UsageError naming the field.
void validate(const ModelConfig& config);

}  // namespace ddx::models
