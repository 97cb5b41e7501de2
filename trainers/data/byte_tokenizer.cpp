// The byte-level fallback tokenizer: every byte is its own id, so any text encodes, nothing is
// downloaded and the vocabulary (256) suits tiny debug models. There is no room for an eos id
// inside 256, so documents are separated by a newline instead (see encode_document).
#include "data/tokenizer.h"

namespace ddx::data {
namespace {

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<uint8_t>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) out[i] = static_cast<char>(static_cast<uint8_t>(ids[i]));
    return out;
  }
  int64_t vocab_size() const override { return 256; }
  int32_t eos_id() const override { return -1; }
  std::string fingerprint() const override { return "byte"; }
  std::vector<int32_t> encode_document(const std::string& text) const override {
    std::vector<int32_t> ids = encode(text);
    if (ids.empty() || ids.back() != '\n') ids.push_back('\n');
    return ids;
  }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

}  // namespace ddx::data
