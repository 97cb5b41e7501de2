// Reads a Hugging Face tokenizer.json into a BpeTokenizer. Only what byte-level BPE tokenizers
// (GPT-2, Llama-3 and relatives) use is accepted; any other component is refused by name, so a
// tokenizer ddx would encode differently from the Rust library is never used silently.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/bpe_tokenizer.h"
#include "data/sha256.h"
#include "ddx/errors/errors.h"

namespace ddx::data {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string read_file_or_throw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read tokenizer file " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string type_of(const json& j) { return j.is_object() ? j.value("type", std::string("?")) : "?"; }

bool flag(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw UsageError(std::string("\"") + key + "\" must be true or false");
  return it->get<bool>();
}

PreTokenizerStep parse_step(const json& j) {
  PreTokenizerStep step;
  const std::string type = type_of(j);
  if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::ByteLevel;
    step.add_prefix_space = flag(j, "add_prefix_space", false);
    step.use_regex = flag(j, "use_regex", true);
    return step;
  }
  if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::Split;
    const json& pattern = j.at("pattern");
    if (!pattern.contains("Regex")) throw UsageError("Split pre-tokenizer with a String pattern is not supported");
    const std::string regex = pattern.at("Regex").get<std::string>();
    auto known = split_pattern_from_regex(regex);
    if (!known) {
      throw UsageError("Split pre-tokenizer regex is not one ddx implements (GPT-2, Llama-3, "
                       "Llama-3 with single digits): " + regex);
    }
    step.pattern = *known;
    const std::string behavior = j.value("behavior", std::string("Isolated"));
    if (behavior != "Isolated") throw UsageError("Split behavior \"" + behavior + "\" is not supported (only Isolated)");
    if (flag(j, "invert", false)) throw UsageError("Split with invert=true is not supported");
    return step;
  }
  throw UsageError("pre-tokenizer \"" + type + "\" is not supported (ByteLevel and Split are)");
}

std::vector<PreTokenizerStep> parse_pre_tokenizer(const json& j) {
  if (j.is_null()) throw UsageError("no pre_tokenizer: not a byte-level BPE tokenizer");
  std::vector<PreTokenizerStep> steps;
  if (type_of(j) == "Sequence") {
    for (const json& p : j.at("pretokenizers")) steps.push_back(parse_step(p));
  } else {
    steps.push_back(parse_step(j));
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool byte_level = steps[i].kind == PreTokenizerStep::Kind::ByteLevel;
    if (byte_level != (i + 1 == steps.size())) {
      throw UsageError("pre_tokenizer must end with exactly one ByteLevel step (byte-level BPE)");
    }
  }
  return steps;
}

// TemplateProcessing's "single" template: special-token ids before and after $A.
void parse_post_processor(const json& j, BpeTokenizerSpec& spec) {
  if (j.is_null()) return;
  const std::string type = type_of(j);
  if (type == "ByteLevel") return;  // offsets only; ids unchanged
  if (type == "Sequence") {
    for (const json& p : j.at("processors")) parse_post_processor(p, spec);
    return;
  }
  if (type != "TemplateProcessing") throw UsageError("post_processor \"" + type + "\" is not supported");
  bool seen_sequence = false;
  for (const json& item : j.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const json& ids = j.at("special_tokens").at(name).at("ids");
    auto& dst = seen_sequence ? spec.template_suffix : spec.template_prefix;
    for (const json& id : ids) dst.push_back(id.get<int32_t>());
  }
}

std::vector<std::pair<std::string, std::string>> parse_merges(const json& merges) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {  // "a b" (older files); byte-level spellings never contain a space
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        throw UsageError("merge " + std::to_string(i) + " \"" + s + "\" is not two tokens separated by one space");
      }
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());  // ["a", "b"]
    } else {
      throw UsageError("merge " + std::to_string(i) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return out;
}

std::unique_ptr<BpeModel> parse_model(const json& m) {
  const std::string type = m.value("type", std::string("BPE"));
  if (type != "BPE") throw UsageError("model type \"" + type + "\" is not supported (only BPE)");
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() > 0) {
    throw UsageError("BPE dropout is not supported (tokenisation must be deterministic)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(key) && !m[key].is_null() && !m[key].get<std::string>().empty()) {
      throw UsageError(std::string("BPE ") + key + " is not supported (not byte-level BPE)");
    }
  }
  std::unordered_map<std::string, int32_t> vocab;
  const json& v = m.at("vocab");
  if (!v.is_object()) throw UsageError("model.vocab must be an object of token -> id");
  vocab.reserve(v.size());
  for (auto it = v.begin(); it != v.end(); ++it) vocab.emplace(it.key(), it.value().get<int32_t>());
  BpeModel::Options options;
  options.ignore_merges = flag(m, "ignore_merges", false);
  options.byte_fallback = flag(m, "byte_fallback", false);
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto it = vocab.find(m["unk_token"].get<std::string>());
    if (it != vocab.end()) options.unk_id = it->second;
  }
  return std::make_unique<BpeModel>(std::move(vocab), parse_merges(m.at("merges")), options);
}

// tokenizer_config.json's eos_token when present beside the file, else a conventional name.
int32_t find_eos(const std::string& path, const BpeTokenizerSpec& spec) {
  auto id_of = [&](const std::string& content) -> int32_t {
    for (const auto& a : spec.added_tokens) {
      if (a.content == content) return a.id;
    }
    auto it = spec.model->vocab().find(content);
    return it == spec.model->vocab().end() ? -1 : it->second;
  };
  const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (fs::exists(config, ec)) {
    try {
      const json c = json::parse(read_file_or_throw(config.string()));
      const json* eos = c.contains("eos_token") ? &c["eos_token"] : nullptr;
      std::string name;
      if (eos && eos->is_string()) name = eos->get<std::string>();
      if (eos && eos->is_object() && eos->contains("content")) name = (*eos)["content"].get<std::string>();
      if (!name.empty()) {
        const int32_t id = id_of(name);
        if (id < 0) throw UsageError(config.string() + ": eos_token \"" + name + "\" is not in " + path);
        return id;
      }
    } catch (const json::exception& e) {
      throw UsageError(config.string() + ": " + e.what());
    }
  }
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>"}) {
    const int32_t id = id_of(name);
    if (id >= 0) return id;
  }
  return -1;
}

}  // namespace

std::unique_ptr<Tokenizer> load_bpe_tokenizer_json(const std::string& path) {
  const std::string text = read_file_or_throw(path);
  try {
    const json j = json::parse(text);
    if (!j.is_object()) throw UsageError("not a JSON object");
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      throw UsageError("normalizer \"" + type_of(j["normalizer"]) + "\" is not supported (byte-level BPE has none)");
    }
    if (j.contains("decoder") && !j["decoder"].is_null() && type_of(j["decoder"]) != "ByteLevel") {
      throw UsageError("decoder \"" + type_of(j["decoder"]) + "\" is not supported (only ByteLevel)");
    }
    BpeTokenizerSpec spec;
    spec.model = parse_model(j.at("model"));
    spec.steps = parse_pre_tokenizer(j.value("pre_tokenizer", json()));
    if (j.contains("added_tokens")) {
      for (const json& a : j["added_tokens"]) {
        AddedToken t;
        t.id = a.at("id").get<int32_t>();
        t.content = a.at("content").get<std::string>();
        t.single_word = flag(a, "single_word", false);
        t.lstrip = flag(a, "lstrip", false);
        t.rstrip = flag(a, "rstrip", false);
        t.special = flag(a, "special", false);
        if (t.id < 0 || t.content.empty()) throw UsageError("added token with a negative id or empty content");
        spec.added_tokens.push_back(std::move(t));
      }
    }
    parse_post_processor(j.value("post_processor", json()), spec);
    spec.eos_id = find_eos(path, spec);
    spec.fingerprint = "bpe:" + sha256_hex(text);
    return std::make_unique<BpeTokenizer>(std::move(spec));
  } catch (const UsageError& e) {
    const std::string what = e.what();
    if (what.compare(0, path.size(), path) == 0) throw;
    throw UsageError(path + ": " + what);
  } catch (const json::exception& e) {
    throw UsageError(path + ": " + e.what());
  }
}

}  // namespace ddx::data
