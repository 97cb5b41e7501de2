// Hugging Face config.json <-> ModelConfig for GPT2LMHeadModel and LlamaForCausalLM.
// Strict: a field the architecture here would silently compute differently (another
// activation, biases in Llama attention, an unknown RoPE scaling) is an error, not ignored.
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "ddx/errors.h"
#include "models/model_config.h"

namespace ddx::models {
namespace {

using nlohmann::json;

// Reads fields of one JSON object, every error naming the file and the field.
class FieldReader {
 public:
  FieldReader(const json& object, std::string file, std::string prefix = "")
      : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw UsageError(file_ + ": field '" + prefix_ + field + "' " + why);
  }
  bool has(const std::string& field) const {
    return object_.contains(field) && !object_.at(field).is_null();
  }
  int64_t integer(const std::string& field) const {
    if (!has(field)) fail(field, "is missing");
    const json& v = object_.at(field);
    if (!v.is_number_integer()) fail(field, "must be an integer, got " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(field, "is too large: " + v.dump());
    const int64_t value = v.get<int64_t>();
    if (value <= 0) fail(field, "must be positive, got " + v.dump());
    return value;
  }
  int64_t integer_or(const std::string& field, int64_t fallback) const {
    return has(field) ? integer(field) : fallback;
  }
  double number(const std::string& field) const {
    if (!has(field)) fail(field, "is missing");
    const json& v = object_.at(field);
    if (!v.is_number()) fail(field, "must be a number, got " + v.dump());
    const double value = v.get<double>();
    if (!std::isfinite(value) || value <= 0) fail(field, "must be a positive number, got " + v.dump());
    return value;
  }
  double number_or(const std::string& field, double fallback) const {
    return has(field) ? number(field) : fallback;
  }
  bool boolean_or(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    const json& v = object_.at(field);
    if (!v.is_boolean()) fail(field, "must be true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string string_or(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    const json& v = object_.at(field);
    if (!v.is_string()) fail(field, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  // A field whose value must be one of `allowed` when present (this code implements only those).
  void require_one_of(const std::string& field, const std::vector<json>& allowed) const {
    if (!has(field)) return;
    for (const json& a : allowed)
      if (object_.at(field) == a) return;
    fail(field, "= " + object_.at(field).dump() + " is not supported here");
  }

 private:
  const json& object_;
  std::string file_;
  std::string prefix_;
};

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot open model config " + path);
  std::ostringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    throw UsageError(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw UsageError(path + ": expected a JSON object at the top level");
  return j;
}

ModelConfig gpt2_from(const FieldReader& f) {
  ModelConfig c;
  c.family = Family::Gpt2;
  c.hidden_size = f.integer("n_embd");
  c.num_layers = f.integer("n_layer");
  c.num_heads = f.integer("n_head");
  c.num_kv_heads = c.num_heads;
  c.max_position_embeddings = f.integer("n_positions");
  c.vocab_size = f.integer("vocab_size");
  c.intermediate_size = f.integer_or("n_inner", 4 * c.hidden_size);
  c.norm_eps = f.number_or("layer_norm_epsilon", 1e-5);
  c.tie_embeddings = f.boolean_or("tie_word_embeddings", true);
  c.init_std = f.number_or("initializer_range", 0.02);
  c.rope_scaling = RopeScaling{};
  // GPT-2's "gelu_new" is the tanh approximation this model computes.
  f.require_one_of("activation_function", {"gelu_new", "gelu_pytorch_tanh"});
  return c;
}

RopeScaling rope_scaling_from(const json& config, const std::string& file) {
  if (!config.contains("rope_scaling") || config.at("rope_scaling").is_null()) return {};
  const json& s = config.at("rope_scaling");
  if (!s.is_object()) FieldReader(config, file).fail("rope_scaling", "must be an object or null");
  FieldReader f(s, file, "rope_scaling.");
  // Older configs spell rope_type as "type".
  const std::string type = f.has("rope_type") ? f.string_or("rope_type", "") : f.string_or("type", "");
  if (type == "default") return {};
  if (type != "llama3")
    f.fail(f.has("rope_type") ? "rope_type" : "type",
           "= '" + type + "' is not supported here (supported: llama3, default)");
  RopeScaling r;
  r.factor = f.number("factor");
  r.low_freq_factor = f.number("low_freq_factor");
  r.high_freq_factor = f.number("high_freq_factor");
  r.original_max_position_embeddings = f.integer("original_max_position_embeddings");
  return r;
}

ModelConfig llama_from(const json& config, const FieldReader& f, const std::string& file) {
  ModelConfig c;
  c.family = Family::Llama;
  c.hidden_size = f.integer("hidden_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer_or("num_key_value_heads", c.num_heads);
  c.intermediate_size = f.integer("intermediate_size");
  c.max_position_embeddings = f.integer("max_position_embeddings");
  c.vocab_size = f.integer("vocab_size");
  c.norm_eps = f.number_or("rms_norm_eps", 1e-6);  // LlamaConfig's default
  c.rope_theta = f.number_or("rope_theta", 10000.0);
  c.tie_embeddings = f.boolean_or("tie_word_embeddings", false);
  c.init_std = f.number_or("initializer_range", 0.02);
  c.rope_scaling = rope_scaling_from(config, file);
  f.require_one_of("hidden_act", {"silu"});
  f.require_one_of("attention_bias", {false});
  f.require_one_of("mlp_bias", {false});
  if (f.has("head_dim") && c.hidden_size % c.num_heads == 0 &&
      f.integer("head_dim") != c.hidden_size / c.num_heads)
    f.fail("head_dim", "must equal hidden_size / num_attention_heads here");
  return c;
}

}  // namespace

ModelConfig model_config_from_hf_json(const std::string& path) {
  const json config = read_json_file(path);
  FieldReader f(config, path);
  const std::string model_type = f.string_or("model_type", "");
  if (model_type.empty()) f.fail("model_type", "is missing (expected \"gpt2\" or \"llama\")");
  ModelConfig c;
  if (model_type == "gpt2") {
    c = gpt2_from(f);
  } else if (model_type == "llama") {
    c = llama_from(config, f, path);
  } else {
    f.fail("model_type", "= '" + model_type + "' is not supported (supported: gpt2, llama)");
  }
  c.name = path;
  try {
    validate(c);
  } catch (const UsageError& e) {
    throw UsageError(path + ": " + e.what());
  }
  return c;
}

std::string to_hf_config_json(const ModelConfig& c) {
  json j;
  if (c.family == Family::Gpt2) {
    j["model_type"] = "gpt2";
    j["architectures"] = {"GPT2LMHeadModel"};
    j["n_embd"] = c.hidden_size;
    j["n_layer"] = c.num_layers;
    j["n_head"] = c.num_heads;
    j["n_positions"] = c.max_position_embeddings;
    j["n_ctx"] = c.max_position_embeddings;
    j["n_inner"] = c.intermediate_size;
    j["vocab_size"] = c.vocab_size;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["activation_function"] = "gelu_new";
    // No dropout anywhere in ddx; say so, so transformers computes the same in train mode.
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
  } else {
    j["model_type"] = "llama";
    j["architectures"] = {"LlamaForCausalLM"};
    j["hidden_size"] = c.hidden_size;
    j["num_hidden_layers"] = c.num_layers;
    j["num_attention_heads"] = c.num_heads;
    j["num_key_value_heads"] = c.num_kv_heads;
    j["head_dim"] = c.head_dim();
    j["intermediate_size"] = c.intermediate_size;
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["vocab_size"] = c.vocab_size;
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta;
    j["hidden_act"] = "silu";
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["attention_dropout"] = 0.0;
    if (c.rope_scaling.enabled()) {
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", c.rope_scaling.factor},
                           {"low_freq_factor", c.rope_scaling.low_freq_factor},
                           {"high_freq_factor", c.rope_scaling.high_freq_factor},
                           {"original_max_position_embeddings",
                            c.rope_scaling.original_max_position_embeddings}};
    } else {
      j["rope_scaling"] = nullptr;
    }
  }
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["initializer_range"] = c.init_std;
  return j.dump(2) + "\n";
}

}  // namespace ddx::models
