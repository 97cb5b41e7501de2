#include "data/tokenizer.h"

#include <filesystem>

#include "data/bpe_tokenizer.h"
#include "ddx/errors/errors.h"

namespace ddx::data {

std::vector<int32_t> Tokenizer::encode_document(const std::string& text) const {
  std::vector<int32_t> ids = encode(text);
  if (eos_id() >= 0) ids.push_back(eos_id());
  return ids;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  namespace fs = std::filesystem;
  if (spec == "byte") return make_byte_tokenizer();
  std::error_code ec;
  fs::path path(spec);
  if (fs::is_directory(path, ec)) path /= "tokenizer.json";
  if (!fs::is_regular_file(path, ec)) {
    throw UsageError("tokenizer not found: " + path.string() +
                     " (pass \"byte\" or a tokenizer.json file or the folder holding one)");
  }
  return load_bpe_tokenizer_json(path.string());
}

}  // namespace ddx::data
