#pragma once
// A byte-level BPE tokenizer as the Rust `tokenizers` library runs one: added tokens are cut
// out first, the rest goes through the pre-tokenizer steps, then the BPE model. Built from a
// tokenizer.json by tokenizer_json.cpp. Internal to ddx_data.
#include <memory>
#include <string>
#include <vector>

#include "data/bpe_model.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"

namespace ddx::data {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;  // only matched when not inside a word
  bool lstrip = false;       // also swallows whitespace before it
  bool rstrip = false;       // also swallows whitespace after it
  bool special = false;
};

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel } kind = Kind::ByteLevel;
  SplitPattern pattern = SplitPattern::Gpt2;  // Split
  bool add_prefix_space = false;              // ByteLevel
  bool use_regex = true;                      // ByteLevel: split with the GPT-2 pattern
};

struct BpeTokenizerSpec {
  std::unique_ptr<BpeModel> model;
  std::vector<AddedToken> added_tokens;
  std::vector<PreTokenizerStep> steps;      // in order; the last one is ByteLevel
  std::vector<int32_t> template_prefix;     // post-processor ids before a single sequence
  std::vector<int32_t> template_suffix;     // ... and after it
  int32_t eos_id = -1;
  std::string fingerprint;
};

class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeTokenizerSpec spec);
  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(spelling_.size()); }
  int32_t eos_id() const override { return spec_.eos_id; }
  std::string fingerprint() const override { return spec_.fingerprint; }
  std::vector<int32_t> encode_document(const std::string& text) const override;

 private:
  struct Match {
    size_t begin, end;
    int32_t id;
  };
  std::vector<Match> find_added_tokens(const std::string& text) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;

  BpeTokenizerSpec spec_;
  std::vector<std::string> spelling_;       // id -> vocabulary spelling or added content
  std::vector<int8_t> decode_kind_;         // 0 byte-level spelling, 1 verbatim, 2 fallback byte
  std::vector<const AddedToken*> added_by_first_byte_[256];  // longest first
};

// Parses a tokenizer.json (and an optional tokenizer_config.json beside it, for eos_token).
// Throws UsageError "<path>: <problem>".
std::unique_ptr<Tokenizer> load_bpe_tokenizer_json(const std::string& path);

}  // namespace ddx::data
