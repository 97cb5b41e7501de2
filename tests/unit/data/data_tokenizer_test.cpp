// Tokenizers: ddx's byte-level BPE must encode exactly as the Rust `tokenizers` package does.
// The package trains small GPT-2 and Llama-3 style tokenizers in this test (tests/python/
// train_tokenizer.py) and records its encodings of ~1500 strings (unicode, numbers, whitespace
// runs, contractions, emoji, added tokens); ddx loads the same tokenizer.json and must agree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/sha256.h"
#include "data/tokenizer.h"
#include "data/unicode_classes.h"
#include "ddx/errors/errors.h"

namespace ddx::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path scratch_dir(const std::string& name) {
  fs::path dir = fs::path(DDX_BINARY_DIR) / "test-scratch" / (name + "." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Trains the tokenizers once for the whole suite (about 3 s).
class PythonTokenizers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(scratch_dir("data_tokenizer"));
    const std::string cmd = std::string("'") + DDX_PYTHON + "' '" + DDX_SOURCE_DIR +
                            "/tests/python/train_tokenizer.py' '" + dir_->string() + "'";
    status_ = std::system(cmd.c_str());
  }
  static void TearDownTestSuite() {
    if (!::testing::Test::HasFailure()) fs::remove_all(*dir_);
    delete dir_;
  }
  void check_style(const std::string& style) {
    ASSERT_EQ(status_, 0) << "train_tokenizer.py failed (python: " << DDX_PYTHON << ")";
    const fs::path d = *dir_ / style;
    auto tok = load_tokenizer((d / "tokenizer.json").string());
    const json cases = json::parse(read_text(d / "cases.json"));
    EXPECT_EQ(tok->vocab_size(), cases["vocab_size"].get<int64_t>());
    int mismatches = 0, checked = 0;
    for (const json& c : cases["cases"]) {
      const std::string text = c["text"].get<std::string>();
      const auto want = c["ids"].get<std::vector<int32_t>>();
      const auto got = tok->encode(text);
      ++checked;
      if (got != want && ++mismatches <= 5) {
        ADD_FAILURE() << style << ": encode(" << json(text).dump() << ")\n  ddx:    " << json(got).dump()
                      << "\n  python: " << json(want).dump();
      }
      EXPECT_EQ(tok->decode(want), c["decoded"].get<std::string>()) << json(text).dump();
      // What a training document contributes: the template's ids plus eos (these templates
      // add nothing after the text).
      auto doc = c["ids_with_template"].get<std::vector<int32_t>>();
      if (tok->eos_id() >= 0) doc.push_back(tok->eos_id());
      EXPECT_EQ(tok->encode_document(text), doc) << json(text).dump();
    }
    EXPECT_EQ(mismatches, 0) << "of " << checked << " strings";
    EXPECT_GT(checked, 1000);
  }
  static fs::path* dir_;
  static int status_;
};
fs::path* PythonTokenizers::dir_ = nullptr;
int PythonTokenizers::status_ = -1;

TEST_F(PythonTokenizers, Gpt2StyleWithStringMergesAgrees) { check_style("gpt2"); }
TEST_F(PythonTokenizers, Gpt2StyleWithPrefixSpaceAndAddedTokensAgrees) { check_style("gpt2_prefix"); }
TEST_F(PythonTokenizers, Llama3StyleAgrees) { check_style("llama3"); }

TEST_F(PythonTokenizers, FingerprintIsSha256OfTheFileAndFolderSpecWorks) {
  ASSERT_EQ(status_, 0);
  const fs::path file = *dir_ / "gpt2" / "tokenizer.json";
  auto a = load_tokenizer(file.string());
  auto b = load_tokenizer((*dir_ / "gpt2").string());  // the folder holding it
  EXPECT_EQ(a->fingerprint(), "bpe:" + sha256_hex(read_text(file)));
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  EXPECT_NE(a->fingerprint(), load_tokenizer((*dir_ / "llama3").string())->fingerprint());
  EXPECT_GE(a->eos_id(), 0);  // <|endoftext|>
}

TEST_F(PythonTokenizers, EosTokenFromTokenizerConfigWins) {
  ASSERT_EQ(status_, 0);
  const fs::path d = scratch_dir("data_tokenizer_eos");
  fs::copy_file(*dir_ / "llama3" / "tokenizer.json", d / "tokenizer.json");
  auto plain = load_tokenizer(d.string());
  write_text(d / "tokenizer_config.json", R"({"eos_token": {"content": "<|reserved_special_token_0|>"}})");
  auto configured = load_tokenizer(d.string());
  EXPECT_NE(plain->eos_id(), configured->eos_id());
  EXPECT_EQ(configured->decode({configured->eos_id()}), "<|reserved_special_token_0|>");
  write_text(d / "tokenizer_config.json", R"({"eos_token": "<nope>"})");
  EXPECT_THROW(load_tokenizer(d.string()), UsageError);
  fs::remove_all(d);
}

TEST(ByteTokenizer, RoundTripsBytesAndSeparatesDocumentsWithNewline) {
  auto tok = load_tokenizer("byte");
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_EQ(tok->eos_id(), -1);
  EXPECT_EQ(tok->fingerprint(), "byte");
  const std::string text = "héllo\x01\xff";
  const auto ids = tok->encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[1], 0xC3);
  EXPECT_EQ(ids.back(), 255);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(tok->encode_document("ab"), (std::vector<int32_t>{'a', 'b', '\n'}));
  EXPECT_EQ(tok->encode_document("ab\n"), (std::vector<int32_t>{'a', 'b', '\n'}));
}

// Minimal tokenizer.json with one changeable part, for the refusal tests.
std::string tiny_tokenizer_json(const std::string& normalizer, const std::string& pre_tokenizer,
                                const std::string& merges) {
  std::string vocab = "{";
  for (int c = '!'; c <= '~'; ++c) {
    std::string s(1, static_cast<char>(c));
    if (s == "\"" || s == "\\") s = "\\" + s;
    vocab += "\"" + s + "\": " + std::to_string(c) + ", ";
  }
  vocab += "\"ab\": 200}";
  return R"({"version": "1.0", "added_tokens": [], "normalizer": )" + normalizer +
         R"(, "pre_tokenizer": )" + pre_tokenizer +
         R"(, "post_processor": null, "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": )" +
         vocab + R"(, "merges": )" + merges + "}}";
}

std::string load_error(const fs::path& path) {
  try {
    load_tokenizer(path.string());
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerJson, RefusesWhatItCannotReproduceWithTheFileNamed) {
  const fs::path d = scratch_dir("data_tokenizer_bad");
  const fs::path f = d / "tokenizer.json";
  const std::string byte_level = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";

  write_text(f, tiny_tokenizer_json("null", byte_level, R"(["a b"])"));
  auto ok = load_tokenizer(f.string());
  EXPECT_EQ(ok->encode("ab"), (std::vector<int32_t>{200}));

  write_text(f, tiny_tokenizer_json(R"({"type": "NFKC"})", byte_level, "[]"));
  EXPECT_NE(load_error(f).find("normalizer \"NFKC\""), std::string::npos) << load_error(f);
  EXPECT_EQ(load_error(f).rfind(f.string(), 0), 0u) << load_error(f);

  write_text(f, tiny_tokenizer_json("null", R"({"type": "Whitespace"})", "[]"));
  EXPECT_NE(load_error(f).find("pre-tokenizer \"Whitespace\""), std::string::npos) << load_error(f);

  write_text(f, tiny_tokenizer_json("null",
      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated"}, )" +
      byte_level + "]}", "[]"));
  EXPECT_NE(load_error(f).find("regex"), std::string::npos) << load_error(f);

  write_text(f, tiny_tokenizer_json("null", byte_level, R"(["a q"])"));  // "aq" is not a token
  EXPECT_NE(load_error(f).find("not in the vocabulary"), std::string::npos) << load_error(f);

  write_text(f, tiny_tokenizer_json("null", byte_level, R"([["a"]])"));
  EXPECT_NE(load_error(f).find("merge 0"), std::string::npos) << load_error(f);

  write_text(f, "{ not json");
  EXPECT_EQ(load_error(f).rfind(f.string(), 0), 0u) << load_error(f);

  EXPECT_NE(load_error(d / "missing.json").find("tokenizer not found"), std::string::npos);
  fs::remove_all(d);
}

TEST(UnicodeClasses, SpotChecks) {
  using namespace unicode;
  EXPECT_TRUE(is_letter('a'));
  EXPECT_TRUE(is_letter(0x00E9));   // é
  EXPECT_TRUE(is_letter(0x6771));   // 東
  EXPECT_TRUE(is_letter(0x1D400));  // mathematical bold A
  EXPECT_FALSE(is_letter(0x0301));  // combining acute (Mn)
  EXPECT_FALSE(is_letter('1'));
  EXPECT_TRUE(is_number(0x00B2));   // superscript two (No)
  EXPECT_TRUE(is_number(0x2160));   // Roman numeral one (Nl)
  EXPECT_TRUE(is_number(0xFF11));   // fullwidth one (Nd)
  EXPECT_FALSE(is_number('x'));
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u,
                      0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(is_whitespace(cp)) << std::hex << cp;
  }
  EXPECT_FALSE(is_whitespace(0x200B));  // zero-width space is Cf, not a separator
  EXPECT_FALSE(is_whitespace('x'));
}

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 h;  // fed in uneven pieces
  const std::string million(1000000, 'a');
  for (size_t i = 0; i < million.size(); i += 7777) h.update(std::string_view(million).substr(i, 7777));
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace ddx::data
