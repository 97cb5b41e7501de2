// Hugging Face config.json <-> ModelConfig for GPT2LMHeadModel and LlamaForCausalLM.
// Strict: a field the architecture here would silently compute differently (another
// activation, biases in Llama attention, an unknown RoPE scaling, experts, QK norms) is an
// error, not ignored; a key ddx does not know at all (a misspelling, a newer setting) is named
// in a warning.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "ddx/text/text.h"
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
  if (f.has("layer_types")) {
    for (const json& t : config.at("layer_types")) {
      if (t != "full_attention") f.fail("layer_types", "contains " + t.dump() + ", not supported here (full_attention only)");
    }
  }
  warn_dropout(config, f, {"attention_dropout"});
}

// Keys of other architectures, which neither family here computes: a config converted from such
// a model (or edited by hand) would otherwise train as the plain dense model without a word.
// Refused naming the key, unless its value means the feature is off (null always does).
struct ArchitectureKey {
  std::string key;        // the key, or with a trailing '*' every key that starts with it
  std::string what;       // what it would make of the model, for the message
  std::vector<json> off;  // values that mean "not used"
};

const std::vector<ArchitectureKey>& architecture_keys() {
  const std::string experts = "mixture of experts: ddx trains dense models only";
  const std::string qk_norm = "normalised queries and keys: not implemented here";
  const std::string window = "full causal attention only";
  static const std::vector<ArchitectureKey> table = {
      {"num_local_experts", experts, {0}},
      {"num_experts", experts, {0}},
      {"num_experts_per_tok", experts, {0}},
      {"n_routed_experts", experts, {0}},
      {"n_shared_experts", experts, {0}},
      {"moe_*", experts, {0, false}},
      {"router_*", experts, {0, false}},
      {"qk_layernorm", qk_norm, {false}},
      {"qk_norm", qk_norm, {false}},
      {"use_qk_norm", qk_norm, {false}},
      {"use_sliding_window", window, {false}},
      {"sliding_window", window, {}},
      {"attention_chunk_size", window, {}},
      {"attn_logit_softcapping", "logits are not soft-capped here", {}},
      {"final_logit_softcapping", "logits are not soft-capped here", {}},
      {"logit_scale", "logits are not scaled here", {}},
      {"logits_scaling", "logits are not scaled here", {1}},
      {"query_pre_attn_scalar", "attention is scaled by 1/sqrt(head_dim) here", {}},
      {"attention_multiplier", "attention is scaled by 1/sqrt(head_dim) here", {}},
      {"embedding_multiplier", "embeddings are not scaled here", {1}},
      {"residual_multiplier", "residuals are not scaled here", {1}},
      {"partial_rotary_factor", "RoPE on the whole head only", {1}},
      {"use_parallel_residual", "attention and MLP run one after the other here", {false}},
      {"parallel_attn", "attention and MLP run one after the other here", {false}},
      {"alibi", "no ALiBi position biases here", {false}},
  };
  return table;
}

const ArchitectureKey* architecture_key(const std::string& key) {
  for (const ArchitectureKey& a : architecture_keys()) {
    const bool prefix = a.key.back() == '*';
    if (prefix ? key.rfind(a.key.substr(0, a.key.size() - 1), 0) == 0 : key == a.key) return &a;
  }
  return nullptr;
}

void refuse_other_architectures(const json& config, const FieldReader& f) {
  for (const auto& [key, value] : config.items()) {
    const ArchitectureKey* a = architecture_key(key);
    if (!a || value.is_null()) continue;
    if (std::find(a->off.begin(), a->off.end(), value) == a->off.end()) {
      f.fail(key, "= " + value.dump() + " is not supported here (" + a->what + ")");
    }
  }
}

// Keys that every transformers config may carry and that change nothing ddx computes: ids,
// provenance, dtype (--dtype decides), output switches, task heads, generation defaults.
const std::set<std::string>& keys_of_every_config() {
  static const std::set<std::string> keys = {
      "model_type", "architectures", "_name_or_path", "transformers_version", "torch_dtype", "dtype",
      "vocab_size", "tie_word_embeddings", "initializer_range", "use_cache", "bos_token_id", "eos_token_id",
      "pad_token_id", "sep_token_id", "decoder_start_token_id", "return_dict", "output_hidden_states",
      "output_attentions", "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads", "tie_encoder_decoder",
      "is_decoder", "is_encoder_decoder", "chunk_size_feed_forward", "id2label", "label2id", "num_labels",
      "problem_type", "finetuning_task", "tokenizer_class", "prefix", "task_specific_params", "max_length",
      "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
      "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
      "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
      "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
      "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens"};
  return keys;
}

// A family's own keys: read, checked (refused when they ask for something else), warned
// about, or known to change nothing here (docs/models.md's table).
const std::set<std::string>& keys_of(Family family) {
  static const std::set<std::string> gpt2 = {
      "n_embd", "n_layer", "n_head", "n_positions", "n_inner", "n_ctx", "layer_norm_epsilon",
      "activation_function", "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "add_cross_attention",
      "resid_pdrop", "embd_pdrop", "attn_pdrop", "reorder_and_upcast_attn", "summary_type", "summary_use_proj",
      "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "n_special",
      "predict_special_tokens"};
  static const std::set<std::string> llama = {
      "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
      "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "head_dim",
      "hidden_act", "attention_bias", "mlp_bias", "layer_types", "attention_dropout", "pretraining_tp"};
  return family == Family::Gpt2 ? gpt2 : llama;
}

// One warning naming every key ddx does not know, with the nearest known spelling: a misspelt
// rms_norm_eps would otherwise train with the default epsilon without a word.
void warn_unknown_keys(const json& config, const std::string& file, Family family) {
  const std::set<std::string>& own = keys_of(family);
  const std::set<std::string>& common = keys_of_every_config();
  std::vector<std::string> candidates(own.begin(), own.end());
  candidates.insert(candidates.end(), common.begin(), common.end());
  std::vector<std::string> unknown;
  for (const auto& [key, value] : config.items()) {
    if (own.count(key) || common.count(key) || architecture_key(key)) continue;
    const std::string near = nearest_spelling(key, candidates);
    unknown.push_back("'" + key + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
  }
  if (unknown.empty()) return;
  log::warn(file, ": ", unknown.size() == 1 ? "a key" : "keys", " ddx does not know, trained as if absent: ",
            join(unknown), " (docs/models.md lists the keys ddx reads)");
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
  if (model_type != "gpt2" && model_type != "llama") {
    f.fail("model_type", "= '" + model_type + "' is not supported (supported: gpt2, llama)");
  }
  refuse_other_architectures(config, f);
  c = model_type == "gpt2" ? gpt2_from(config, f) : llama_from(config, f, path);
  c.name = path;
  try {
    validate(c);
  } catch (const UsageError& e) {
    throw UsageError(path + ": " + e.what());
  }
  warn_unknown_keys(config, path, c.family);
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
