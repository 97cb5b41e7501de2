// Model presets, HF config.json parsing (and every way it can be wrong), canonical JSON/hash.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ddx/errors/errors.h"
#include "models/model_config.h"

namespace ddx::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ddx_model_config_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name, const std::string& content) const {
    const std::string p = (fs::path(path_) / name).string();
    std::ofstream(p) << content;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

TEST(ModelPresets, RealModelsHaveTheirPublishedParameterCounts) {
  EXPECT_EQ(model_config_from_preset("gpt2").num_parameters(), 124439808);
  EXPECT_EQ(model_config_from_preset("gpt2-medium").num_parameters(), 354823168);
  EXPECT_EQ(model_config_from_preset("llama-3.2-1b").num_parameters(), 1235814400);
  EXPECT_EQ(model_config_from_preset("llama-3.1-8b").num_parameters(), 8030261248);
  const ModelConfig llama8b = model_config_from_preset("llama-3.1-8b");
  EXPECT_EQ(llama8b.family, Family::Llama);
  EXPECT_EQ(llama8b.num_kv_heads, 8);
  EXPECT_EQ(llama8b.head_dim(), 128);
  EXPECT_FALSE(llama8b.tie_embeddings);
  EXPECT_TRUE(model_config_from_preset("llama-3.2-1b").tie_embeddings);
  EXPECT_DOUBLE_EQ(llama8b.rope_scaling.factor, 8.0);
}

TEST(ModelPresets, DebugModelsHaveOddSizes) {
  for (const char* name : {"debug", "debug-llama"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = model_config_from_preset(name);
    EXPECT_LT(c.num_parameters(), 2'000'000);
    for (int64_t size : {c.vocab_size, c.intermediate_size, c.max_position_embeddings})
      for (int divisor : {2, 3, 4}) EXPECT_NE(size % divisor, 0) << size;
    // hidden: odd for GPT-2; for Llama only 2 divides it (RoPE needs an even head_dim).
    EXPECT_NE(c.hidden_size % 3, 0);
    EXPECT_NE(c.hidden_size % 4, 0);
  }
  const ModelConfig llama = model_config_from_preset("debug-llama");
  EXPECT_GT(llama.num_kv_heads, 1);
  EXPECT_LT(llama.num_kv_heads, llama.num_heads);
  EXPECT_EQ(llama.head_dim() % 2, 0);
  EXPECT_TRUE(llama.rope_scaling.enabled());
}

TEST(ModelPresets, UnknownPresetListsTheKnownOnes) {
  const std::string message = usage_error([] { model_config_from_preset("gpt5"); });
  EXPECT_NE(message.find("gpt5"), std::string::npos);
  EXPECT_NE(message.find("llama-3.1-8b"), std::string::npos);
  EXPECT_NE(message.find("debug-llama"), std::string::npos);
  const std::string resolved = usage_error([] { resolve_model_config("/no/such/model"); });
  EXPECT_NE(resolved.find("/no/such/model"), std::string::npos);
}

TEST(ModelConfigJson, IsCanonicalAndHashIgnoresTheName) {
  ModelConfig a = model_config_from_preset("debug");
  ModelConfig b = model_config_from_preset("debug");
  EXPECT_EQ(a.to_json(), b.to_json());
  const json j = json::parse(a.to_json());
  for (const char* key : {"family", "vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads",
                          "intermediate_size", "max_position_embeddings", "norm_eps", "rope_theta",
                          "rope_scaling", "tie_embeddings", "init_std", "name"})
    EXPECT_TRUE(j.contains(key)) << key;
  b.name = "elsewhere/config.json";
  EXPECT_EQ(a.hash(), b.hash());
  b.num_layers += 1;
  EXPECT_NE(a.hash(), b.hash());
  b = a;
  b.norm_eps = 1e-6;
  EXPECT_NE(a.hash(), b.hash());
  EXPECT_NE(model_config_from_preset("debug").hash(), model_config_from_preset("debug-llama").hash());
}

TEST(HfConfig, EveryPresetRoundTripsThroughConfigJson) {
  TempDir dir;
  for (const char* name : {"gpt2", "gpt2-medium", "llama-3.2-1b", "llama-3.1-8b", "debug", "debug-llama", "debug-tp",
                           "debug-tp-llama", "debug-pp"}) {
    SCOPED_TRACE(name);
    const ModelConfig preset = model_config_from_preset(name);
    const std::string path = dir.file(std::string(name) + ".json", to_hf_config_json(preset));
    const ModelConfig parsed = model_config_from_hf_json(path);
    EXPECT_EQ(parsed.name, path);
    EXPECT_EQ(parsed.hash(), preset.hash()) << parsed.to_json() << "\n" << preset.to_json();
  }
}

TEST(HfConfig, ParsesRealGpt2AndLlamaConfigs) {
  TempDir dir;
  // The fields of openai-community/gpt2's config.json that matter here (n_inner null).
  const std::string gpt2 = dir.file("gpt2.json", R"({
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12, "n_positions": 1024,
    "layer_norm_epsilon": 1e-05, "initializer_range": 0.02, "vocab_size": 50257,
    "resid_pdrop": 0.1, "task_specific_params": {"text-generation": {"do_sample": true}}})");
  const ModelConfig g = model_config_from_hf_json(gpt2);
  EXPECT_EQ(g.hash(), model_config_from_preset("gpt2").hash());

  // meta-llama/Llama-3.2-1B's config.json.
  const std::string llama = dir.file("llama.json", R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");
  const ModelConfig l = model_config_from_hf_json(llama);
  EXPECT_EQ(l.hash(), model_config_from_preset("llama-3.2-1b").hash()) << l.to_json();

  // resolve_model_config: preset, file, and folder holding config.json.
  dir.file("config.json", R"({"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1,
                             "n_positions": 16, "vocab_size": 11})");
  const ModelConfig from_folder = resolve_model_config(dir.path());
  EXPECT_EQ(from_folder.hidden_size, 8);
  EXPECT_EQ(from_folder.intermediate_size, 32);
  EXPECT_TRUE(from_folder.tie_embeddings);
  const ModelConfig llama_defaults = [&] {
    return model_config_from_hf_json(dir.file("l.json", R"({"model_type": "llama", "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 12,
      "max_position_embeddings": 16, "vocab_size": 11})"));
  }();
  EXPECT_EQ(llama_defaults.num_kv_heads, 2);
  EXPECT_DOUBLE_EQ(llama_defaults.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(llama_defaults.norm_eps, 1e-6);
  EXPECT_FALSE(llama_defaults.tie_embeddings);
  EXPECT_FALSE(llama_defaults.rope_scaling.enabled());
}

// transformers 5 writes RoPE's settings as rope_parameters and no longer writes rope_theta or
// rope_scaling: the same Llama in both layouts must read the same, and a file in the new layout
// must not fall back to the defaults (theta 10000, no scaling) without a word.
TEST(HfConfig, ReadsRopeInTransformers4And5Layouts) {
  TempDir dir;
  const std::string sizes = R"("model_type": "llama", "hidden_size": 64, "num_hidden_layers": 3,
      "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 96,
      "max_position_embeddings": 256, "vocab_size": 1001)";
  const ModelConfig v4 = model_config_from_hf_json(dir.file("v4.json", "{" + sizes + R"(, "rope_theta": 500000.0,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 64}})"));
  const ModelConfig v5 = model_config_from_hf_json(dir.file("v5.json", "{" + sizes + R"(,
      "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})"));
  EXPECT_DOUBLE_EQ(v5.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(v5.rope_scaling.factor, 8.0);
  EXPECT_EQ(v5.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_EQ(v4.hash(), v5.hash()) << v4.to_json() << " vs " << v5.to_json();
  // The oldest spelling of the type ("type"), and transformers 5's default type with its theta.
  const ModelConfig oldest = model_config_from_hf_json(dir.file("v3.json", "{" + sizes + R"(, "rope_theta": 500000.0,
      "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 64}})"));
  EXPECT_EQ(oldest.hash(), v4.hash());
  const ModelConfig plain = model_config_from_hf_json(
      dir.file("v5-default.json", "{" + sizes + R"(, "rope_parameters": {"rope_type": "default", "rope_theta": 123456.0}})"));
  EXPECT_DOUBLE_EQ(plain.rope_theta, 123456.0);
  EXPECT_FALSE(plain.rope_scaling.enabled());
  // Both layouts in one file (a config edited by hand, or converted): fine when they agree.
  const ModelConfig both = model_config_from_hf_json(dir.file("both.json", "{" + sizes + R"(, "rope_theta": 123456.0,
      "rope_scaling": null, "rope_parameters": {"rope_type": "default", "rope_theta": 123456.0}})"));
  EXPECT_EQ(both.hash(), plain.hash());
}

struct BadConfig {
  std::string text;
  const char* expected;  // must appear in the message (besides the file path)
};

TEST(HfConfig, BadInputNamesFileAndField) {
  TempDir dir;
  const std::string gpt2 = R"("model_type": "gpt2", "n_head": 2, "n_layer": 1, "n_positions": 16, "vocab_size": 11)";
  const std::string llama = R"("model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 16)";
  const std::vector<BadConfig> cases = {
      {"", "not valid JSON"},
      {"{\"model_type\": ", "not valid JSON"},
      {"[1, 2]", "JSON object"},
      {"{}", "'model_type' is missing"},
      {R"({"model_type": "mistral"})", "'mistral' is not supported"},
      {R"({"model_type": 7})", "'model_type' must be a string"},
      {("{" + gpt2 + "}"), "'n_embd' is missing"},
      {("{" + gpt2 + R"(, "n_embd": "768"})"), "'n_embd' must be an integer"},
      {("{" + gpt2 + R"(, "n_embd": 7.5})"), "'n_embd' must be an integer"},
      {("{" + gpt2 + R"(, "n_embd": -8})"), "'n_embd' must be positive"},
      {("{" + gpt2 + R"(, "n_embd": 0})"), "'n_embd' must be positive"},
      {("{" + gpt2 + R"(, "n_embd": 1e400})"), "1e400"},
      {("{" + gpt2 + R"(, "n_embd": 99999999999999999999})"), "n_embd"},
      {("{" + gpt2 + R"(, "n_embd": 9})"), "num_heads"},  // 2 heads do not divide 9
      {("{" + gpt2 + R"(, "n_embd": 8, "layer_norm_epsilon": "small"})"), "'layer_norm_epsilon' must be a number"},
      {("{" + gpt2 + R"(, "n_embd": 8, "layer_norm_epsilon": -1})"), "'layer_norm_epsilon' must be a positive"},
      {("{" + gpt2 + R"(, "n_embd": 8, "tie_word_embeddings": 1})"), "'tie_word_embeddings' must be true or false"},
      {("{" + gpt2 + R"(, "n_embd": 8, "activation_function": "relu"})"), "'activation_function'"},
      {("{" + llama + "}"), "'vocab_size' is missing"},
      {("{" + llama + R"(, "vocab_size": 11, "num_key_value_heads": 3})"), "num_kv_heads"},
      {("{" + llama + R"(, "vocab_size": 11, "hidden_act": "gelu"})"), "'hidden_act'"},
      {("{" + llama + R"(, "vocab_size": 11, "attention_bias": true})"), "'attention_bias'"},
      {("{" + llama + R"(, "vocab_size": 11, "head_dim": 8})"), "'head_dim'"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_theta": 0})"), "'rope_theta'"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_scaling": 5})"), "'rope_scaling' must be an object"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})"),
       "'rope_scaling.rope_type' = 'yarn' is not supported"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_scaling": {"rope_type": "llama3", "factor": 4.0}})"),
       "'rope_scaling.low_freq_factor' is missing"},
      // transformers 5's layout: every RoPE type not computed here, and the settings that change
      // the math (docs/models.md), each refused naming its key.
      {("{" + llama + R"(, "vocab_size": 11, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}})"),
       "'rope_parameters.rope_type' = 'yarn' is not supported"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}})"),
       "'rope_parameters.rope_type' = 'longrope' is not supported"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_parameters": {"rope_type": "linear", "factor": 2.0}})"),
       "'rope_parameters.rope_type' = 'linear' is not supported"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}})"),
       "'rope_parameters.low_freq_factor' is missing"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}})"),
       "'rope_parameters.partial_rotary_factor' = 0.5 is not supported"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_parameters": "llama3"})"), "'rope_parameters' must be an object"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_parameters": {"full_attention": {"rope_type": "default"}}})"),
       "'rope_parameters.full_attention' holds RoPE settings per attention type"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_theta": 5e5, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}})"),
       "'rope_theta' = 500000.0 disagrees with rope_parameters.rope_theta = 10000.0"},
      {("{" + llama + R"(, "vocab_size": 11, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 8}, "rope_parameters": {"rope_type": "default"}})"),
       "'rope_scaling' disagrees with rope_parameters"},
      {("{" + llama + R"(, "vocab_size": 11, "mlp_bias": true})"), "'mlp_bias'"},
      {("{" + llama + R"(, "vocab_size": 11, "sliding_window": 4096})"), "'sliding_window' = 4096 is not supported"},
      {("{" + llama + R"(, "vocab_size": 11, "use_sliding_window": true})"), "'use_sliding_window'"},
      {("{" + llama + R"(, "vocab_size": 11, "layer_types": ["full_attention", "sliding_attention"]})"),
       "'layer_types' contains \"sliding_attention\""},
      {("{" + llama + R"(, "vocab_size": 11, "final_logit_softcapping": 30.0})"), "'final_logit_softcapping'"},
      {("{" + gpt2 + R"(, "n_embd": 8, "scale_attn_weights": false})"), "'scale_attn_weights'"},
      {("{" + gpt2 + R"(, "n_embd": 8, "scale_attn_by_inverse_layer_idx": true})"), "'scale_attn_by_inverse_layer_idx'"},
      {("{" + gpt2 + R"(, "n_embd": 8, "add_cross_attention": true})"), "'add_cross_attention'"},
      {("{" + gpt2 + R"(, "n_embd": 8, "resid_pdrop": "0.1"})"), "'resid_pdrop' must be a number"},
      {(R"({"model_type": "llama", "hidden_size": 6, "num_hidden_layers": 1, "num_attention_heads": 2,
           "intermediate_size": 12, "max_position_embeddings": 16, "vocab_size": 11})"),
       "even head_dim"},
  };
  int i = 0;
  for (const BadConfig& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string path = dir.file("bad" + std::to_string(i++) + ".json", c.text);
    const std::string message = usage_error([&] { model_config_from_hf_json(path); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  const std::string missing = usage_error([&] { model_config_from_hf_json(dir.path() + "/nope.json"); });
  EXPECT_NE(missing.find("nope.json"), std::string::npos);
  const std::string empty_folder = usage_error([&] {
    fs::create_directory(dir.path() + "/empty");
    resolve_model_config(dir.path() + "/empty");
  });
  EXPECT_NE(empty_folder.find("config.json"), std::string::npos);
}

// The warning about keys ddx does not know, as printed while `f` runs ("" when none).
std::string unknown_key_warnings(const std::function<void()>& f) {
  ::testing::internal::CaptureStderr();
  f();
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::string lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (line.find("ddx does not know") != std::string::npos) lines += line + "\n";
  }
  return lines;
}

// Keys of other architectures (experts, QK norms, attention variants) change what the model
// computes; ddx trains neither family with them, so a converted config is refused naming the key
// rather than trained as the dense model (issue 44, item 5). Their "off" values are fine.
TEST(HfConfig, KeysOfOtherArchitecturesAreRefusedNamingTheKey) {
  TempDir dir;
  const std::string llama = R"("model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 16, "vocab_size": 11)";
  const std::string gpt2 = R"("model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1, "n_positions": 16,
      "vocab_size": 11)";
  const std::vector<BadConfig> cases = {
      {("{" + llama + R"(, "num_local_experts": 8, "num_experts_per_tok": 2})"),
       "field 'num_experts_per_tok' = 2 is not supported here (mixture of experts: ddx trains dense models only)"},
      {("{" + llama + R"(, "num_local_experts": 8})"), "field 'num_local_experts' = 8 is not supported here (mixture of experts"},
      {("{" + llama + R"(, "num_experts": 64})"), "field 'num_experts' = 64 is not supported"},
      {("{" + llama + R"(, "moe_intermediate_size": 768})"), "field 'moe_intermediate_size' = 768 is not supported"},
      {("{" + llama + R"(, "router_aux_loss_coef": 0.001})"), "field 'router_aux_loss_coef' = 0.001 is not supported"},
      {("{" + gpt2 + R"(, "num_local_experts": 4})"), "field 'num_local_experts' = 4 is not supported"},
      {("{" + llama + R"(, "qk_layernorm": true})"),
       "field 'qk_layernorm' = true is not supported here (normalised queries and keys"},
      {("{" + llama + R"(, "use_qk_norm": true})"), "field 'use_qk_norm' = true is not supported"},
      {("{" + llama + R"(, "attention_chunk_size": 8192})"), "field 'attention_chunk_size' = 8192 is not supported"},
      {("{" + llama + R"(, "partial_rotary_factor": 0.5})"), "field 'partial_rotary_factor' = 0.5 is not supported"},
      {("{" + llama + R"(, "query_pre_attn_scalar": 256})"), "field 'query_pre_attn_scalar' = 256 is not supported"},
      {("{" + llama + R"(, "residual_multiplier": 0.22})"), "field 'residual_multiplier' = 0.22 is not supported"},
      {("{" + gpt2 + R"(, "sliding_window": 128})"), "field 'sliding_window' = 128 is not supported"},
  };
  int i = 0;
  for (const BadConfig& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string path = dir.file("arch" + std::to_string(i++) + ".json", c.text);
    const std::string message = usage_error([&] { model_config_from_hf_json(path); });
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  // Present but off: the dense model it describes, read without a warning.
  const ModelConfig plain = model_config_from_hf_json(dir.file("plain.json", "{" + llama + "}"));
  const std::string off = dir.file("off.json", "{" + llama + R"(, "num_local_experts": 0, "num_experts_per_tok": 0,
      "moe_layer_freq": null, "router_aux_loss_coef": 0.0, "output_router_logits": false, "qk_layernorm": false,
      "use_qk_norm": false, "sliding_window": null, "use_sliding_window": false, "partial_rotary_factor": 1.0,
      "logits_scaling": 1})");
  ModelConfig parsed;
  const std::string warnings = unknown_key_warnings([&] { parsed = model_config_from_hf_json(off); });
  EXPECT_EQ(parsed.hash(), plain.hash());
  // output_router_logits is not a setting of the model ddx knows: named, not refused.
  EXPECT_EQ(warnings.find("num_local_experts"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("'output_router_logits'"), std::string::npos) << warnings;
}

// A key ddx does not know is trained as if absent; a misspelt rms_norm_eps would silently take
// the default epsilon. One warning names every such key, with the nearest known spelling.
TEST(HfConfig, UnknownKeysAreNamedInOneWarning) {
  TempDir dir;
  const std::string path = dir.file("typo.json", R"({"model_type": "llama", "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 16,
      "vocab_size": 11, "rms_norm_epsilon": 1e-5, "flash_attn_impl": "v3"})");
  ModelConfig c;
  const std::string warnings = unknown_key_warnings([&] { c = model_config_from_hf_json(path); });
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);  // the default: rms_norm_epsilon is not read
  EXPECT_NE(warnings.find(path + ": keys ddx does not know, trained as if absent: 'flash_attn_impl', "
                                 "'rms_norm_epsilon' (did you mean 'rms_norm_eps'?)"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
  const std::string one = dir.file("one.json", R"({"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1,
      "n_positions": 16, "vocab_size": 11, "layer_norm_eps": 1e-5})");
  EXPECT_NE(unknown_key_warnings([&] { model_config_from_hf_json(one); })
                .find(": a key ddx does not know, trained as if absent: 'layer_norm_eps' (did you mean "
                      "'layer_norm_epsilon'?)"),
            std::string::npos);
}

// Real configs carry no key ddx does not know: the presets as ddx writes them, the checked-in
// transformers 4.57.6 file, the hub's gpt2-medium, and what transformers 5 writes by default for
// both families (HfReferenceTest checks the files the installed transformers writes, too).
TEST(HfConfig, RealConfigsGetNoUnknownKeyWarning) {
  TempDir dir;
  std::vector<std::string> paths = {std::string(DDX_SOURCE_DIR) +
                                    "/tests/fixtures/hf-configs/llama-llama3-transformers-4.57.6.json"};
  for (const char* name : {"gpt2", "gpt2-medium", "llama-3.2-1b", "llama-3.1-8b", "debug", "debug-llama", "debug-tp",
                           "debug-tp-llama", "debug-pp"}) {
    paths.push_back(dir.file(std::string(name) + ".json", to_hf_config_json(model_config_from_preset(name))));
  }
  // GPT2Config().to_dict() and LlamaConfig(...).to_dict() of transformers 5.25.0, and the hub's
  // gpt2-medium config.json.
  paths.push_back(dir.file("t5-gpt2.json", R"({"_name_or_path": "", "activation_function": "gelu_new",
      "add_cross_attention": false, "architectures": null, "attn_pdrop": 0.1, "bos_token_id": 50256,
      "chunk_size_feed_forward": 0, "dtype": null, "embd_pdrop": 0.1, "eos_token_id": 50256, "id2label": {"0": "LABEL_0"},
      "initializer_range": 0.02, "is_encoder_decoder": false, "label2id": {"LABEL_0": 0}, "layer_norm_epsilon": 1e-05,
      "model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12, "n_positions": 1024,
      "output_attentions": false, "output_hidden_states": false, "pad_token_id": null, "problem_type": null,
      "reorder_and_upcast_attn": false, "resid_pdrop": 0.1, "return_dict": true, "scale_attn_by_inverse_layer_idx": false,
      "scale_attn_weights": true, "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
      "summary_type": "cls_index", "summary_use_proj": true, "tie_word_embeddings": true, "transformers_version": "5.25.0",
      "use_cache": true, "vocab_size": 50257})"));
  paths.push_back(dir.file("t5-llama.json", R"({"_name_or_path": "", "architectures": null, "attention_bias": false,
      "attention_dropout": 0.0, "bos_token_id": 1, "chunk_size_feed_forward": 0, "dtype": null, "eos_token_id": 2,
      "head_dim": 8, "hidden_act": "silu", "hidden_size": 64, "id2label": {"0": "LABEL_0"}, "initializer_range": 0.02,
      "intermediate_size": 96, "is_encoder_decoder": false, "label2id": {"LABEL_0": 0}, "max_position_embeddings": 256,
      "mlp_bias": false, "model_type": "llama", "num_attention_heads": 8, "num_hidden_layers": 3,
      "num_key_value_heads": 2, "output_attentions": false, "output_hidden_states": false, "pad_token_id": null,
      "pretraining_tp": 1, "problem_type": null, "return_dict": true, "rms_norm_eps": 1e-06,
      "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "tie_word_embeddings": false,
      "transformers_version": "5.25.0", "use_cache": true, "vocab_size": 1001})"));
  paths.push_back(dir.file("gpt2-medium-hub.json", R"({"activation_function": "gelu_new",
      "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1,
      "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024,
      "n_embd": 1024, "n_head": 16, "n_layer": 24, "n_positions": 1024, "n_special": 0, "predict_special_tokens": true,
      "resid_pdrop": 0.1, "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
      "summary_type": "cls_index", "summary_use_proj": true,
      "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}}, "vocab_size": 50257})"));
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    EXPECT_EQ(unknown_key_warnings([&] { model_config_from_hf_json(path); }), "");
  }
}

TEST(ModelConfigValidate, RejectsInconsistentSizes) {
  ModelConfig c = model_config_from_preset("debug-llama");
  c.num_kv_heads = 4;
  EXPECT_NE(usage_error([&] { validate(c); }).find("num_kv_heads"), std::string::npos);
  c = model_config_from_preset("debug");
  c.num_kv_heads = 1;
  EXPECT_NE(usage_error([&] { validate(c); }).find("num_kv_heads"), std::string::npos);
  c = model_config_from_preset("debug");
  c.vocab_size = 0;
  EXPECT_NE(usage_error([&] { validate(c); }).find("vocab_size"), std::string::npos);
}

}  // namespace
}  // namespace ddx::models
