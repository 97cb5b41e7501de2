// Hugging Face config.json <-> ModelConfig for GPT2LMHeadModel and LlamaForCausalLM.
// Strict: a field the architecture here would silently compute differently (another
// activation, biases in Llama attention, an unknown RoPE scaling) is an error, not ignored.
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "ddx/errors.h"
#include "ddx/log.h"
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
  const std::string& file() const { return file_; }
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

// Dropout is a training regulariser ddx does not have: a config that asks for it (GPT-2's own
// ship 0.1) is trained without it, and said so in one line rather than refused, since the
// weights and the model's math at inference are the same.
void warn_dropout(const json& config, const FieldReader& f, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (!f.has(key)) continue;
    const json& v = config.at(key);
    if (!v.is_number()) f.fail(key, "must be a number, got " + v.dump());
    if (v.get<double>() != 0)
      log::warn(f.file(), ": field '", key, "' = ", v.dump(), ": ddx trains without dropout (transformers computes "
                "the same only with it set to 0)");
  }
}

ModelConfig gpt2_from(const json& config, const FieldReader& f) {
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
  // Attention scaled by 1/sqrt(head_dim) only, no cross-attention (docs/models.md).
  f.require_one_of("scale_attn_weights", {true});
  f.require_one_of("scale_attn_by_inverse_layer_idx", {false});
  f.require_one_of("add_cross_attention", {false});
  warn_dropout(config, f, {"resid_pdrop", "embd_pdrop", "attn_pdrop"});
  return c;
}

// RoPE's settings in either layout Hugging Face has written:
//  - transformers < 5: top-level "rope_theta" and "rope_scaling" (null, or an object whose type is
//    "rope_type" or, older still, "type");
//  - transformers >= 5: "rope_parameters" {"rope_type", "rope_theta", and the type's own fields},
//    and no top-level keys.
// Only the types computed here are accepted (default, llama3); any other (linear, dynamic, yarn,
// longrope, ...) changes the frequencies and is refused naming the key. A file with both layouts
// must agree.
struct Rope {
  double theta = 10000.0;  // LlamaConfig's default
  RopeScaling scaling;
};

Rope rope_from(const json& object, const FieldReader& f) {
  Rope r;
  r.theta = f.number_or("rope_theta", 10000.0);
  const std::string type_key = f.has("rope_type") ? "rope_type" : "type";
  const std::string type = f.string_or(type_key, "default");
  if (f.has("partial_rotary_factor") && object.at("partial_rotary_factor") != json(1.0) &&
      object.at("partial_rotary_factor") != json(1))
    f.fail("partial_rotary_factor", "= " + object.at("partial_rotary_factor").dump() +
                                        " is not supported here (RoPE on the whole head only)");
  if (type == "default") return r;
  if (type != "llama3")
    f.fail(type_key, "= '" + type + "' is not supported here (supported: default, llama3)");
  r.scaling.factor = f.number("factor");
  r.scaling.low_freq_factor = f.number("low_freq_factor");
  r.scaling.high_freq_factor = f.number("high_freq_factor");
  r.scaling.original_max_position_embeddings = f.integer("original_max_position_embeddings");
  return r;
}

bool same(const RopeScaling& a, const RopeScaling& b) {
  return a.factor == b.factor && a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings;
}

Rope rope_of(const json& config, const std::string& file) {
  const FieldReader top(config, file);
  // The old layout: rope_theta at the top, rope_scaling beside it.
  Rope old;
  old.theta = top.number_or("rope_theta", 10000.0);
  if (top.has("rope_scaling")) {
    const json& s = config.at("rope_scaling");
    if (!s.is_object()) top.fail("rope_scaling", "must be an object or null");
    old.scaling = rope_from(s, FieldReader(s, file, "rope_scaling.")).scaling;
  }
  if (!top.has("rope_parameters")) return old;

  const json& p = config.at("rope_parameters");
  if (!p.is_object()) top.fail("rope_parameters", "must be an object");
  for (const auto& [key, value] : p.items()) {
    // transformers 5 keys RoPE per attention type for models that mix them (sliding and full).
    if (value.is_object())
      top.fail("rope_parameters." + key, "holds RoPE settings per attention type, which is not supported here");
  }
  const Rope now = rope_from(p, FieldReader(p, file, "rope_parameters."));
  if (top.has("rope_theta") && old.theta != now.theta)
    top.fail("rope_theta", "= " + config.at("rope_theta").dump() + " disagrees with rope_parameters.rope_theta = " +
                               (p.contains("rope_theta") ? p.at("rope_theta").dump() : "10000 (its default)"));
  if (top.has("rope_scaling") && !same(old.scaling, now.scaling))
    top.fail("rope_scaling", "disagrees with rope_parameters (" + p.dump() + ")");
  return now;
}

// Settings of a Llama config.json that change what the model computes and that the model here
// does not implement: refused, each naming its key (docs/models.md lists them, and the keys
// that are read or safely ignored).
void refuse_llama_settings_not_implemented(const json& config, const FieldReader& f) {
  f.require_one_of("hidden_act", {"silu"});
  f.require_one_of("attention_bias", {false});
  f.require_one_of("mlp_bias", {false});
  f.require_one_of("use_sliding_window", {false});
  if (f.has("sliding_window")) f.fail("sliding_window", "= " + config.at("sliding_window").dump() + " is not supported here (full causal attention only)");
  if (f.has("layer_types")) {
    for (const json& t : config.at("layer_types")) {
      if (t != "full_attention") f.fail("layer_types", "contains " + t.dump() + ", not supported here (full_attention only)");
    }
  }
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping", "logit_scale"}) {
    if (f.has(key)) f.fail(key, "= " + config.at(key).dump() + " is not supported here");
  }
  warn_dropout(config, f, {"attention_dropout"});
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
  c.tie_embeddings = f.boolean_or("tie_word_embeddings", false);
  c.init_std = f.number_or("initializer_range", 0.02);
  const Rope rope = rope_of(config, file);
  c.rope_theta = rope.theta;
  c.rope_scaling = rope.scaling;
  refuse_llama_settings_not_implemented(config, f);
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
    c = gpt2_from(config, f);
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
