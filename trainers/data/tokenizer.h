#pragma once
// Tokenizers: byte-level BPE from a Hugging Face tokenizer.json (GPT-2 and Llama-3 styles) and
// a byte-level fallback (vocab 256). No LibTorch.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddx::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  // Appended after every document; -1 when the tokenizer has none.
  virtual int32_t eos_id() const = 0;
  // Identifies the tokenizer for cache keys: "byte" or "bpe:<sha256 of tokenizer.json>".
  virtual std::string fingerprint() const = 0;
  // The ids one training document contributes to the token stream: the tokenizer's own
  // template around the text (Llama-3: <|begin_of_text|> first), then eos_id() unless the
  // template already ends with it. encode() alone adds no special tokens.
  // The byte tokenizer has no eos; it ends a document with "\n" unless the text already does.
  virtual std::vector<int32_t> encode_document(const std::string& text) const;
};

// "byte" -> the byte-level tokenizer; otherwise a tokenizer.json path (or a folder holding
// one). Throws UsageError naming the file and the problem.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);

// Bytes as ids 0..255; vocab_size() 256, eos_id() -1, fingerprint() "byte".
std::unique_ptr<Tokenizer> make_byte_tokenizer();

}  // namespace ddx::data
