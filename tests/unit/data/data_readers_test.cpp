// Dataset readers: Alpaca / "text" JSONL, JSON arrays, plain text, folders, the builtin corpus,
// and every bad input, each rejected with one line naming the culprit.
#include <gtest/gtest.h>

#include "data/dataset.h"
#include "data/dataset_internal.h"
#include "data_test_util.h"

namespace ddx::data {
namespace {

using namespace ddx::data::testing;

// Written out independently of alpaca.cpp: Stanford Alpaca's PROMPT_DICT + "\n" + output.
const std::string kWithInput =
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\nTranslate.\n\n### Input:\nbonjour\n\n### Response:\nhello";
const std::string kNoInput =
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\nSay hi.\n\n### Response:\nhi";

TEST(Readers, AlpacaJsonlWithAndWithoutInput) {
  ScratchDir d("data_readers_alpaca");
  write_text(d / "a.jsonl",
             "{\"instruction\": \"Translate.\", \"input\": \"bonjour\", \"output\": \"hello\"}\n"
             "\n"  // blank lines are skipped
             "{\"instruction\": \"Say hi.\", \"input\": \"\", \"output\": \"hi\"}\r\n"
             "{\"instruction\": \"Say hi.\", \"output\": \"hi\"}\n");
  const auto docs = read_documents((d / "a.jsonl").string());
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0], kWithInput);
  EXPECT_EQ(docs[1], kNoInput);  // empty input -> the no-input prompt
  EXPECT_EQ(docs[2], kNoInput);  // absent input likewise
}

TEST(Readers, AlpacaJsonArrayAsInTheStanfordRepo) {
  ScratchDir d("data_readers_array");
  write_text(d / "alpaca_data.json",
             "[\n {\"instruction\": \"Translate.\", \"input\": \"bonjour\", \"output\": \"hello\"},\n"
             " {\"instruction\": \"Say hi.\", \"input\": \"\", \"output\": \"hi\"}\n]\n");
  const auto docs = read_documents((d / "alpaca_data.json").string());
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], kWithInput);
  EXPECT_EQ(docs[1], kNoInput);
}

TEST(Readers, TextJsonlAndPlainText) {
  ScratchDir d("data_readers_text");
  write_text(d / "t.jsonl", "{\"text\": \"first doc\", \"meta\": 1}\n{\"text\": \"second\\ndoc ü\"}\n");
  EXPECT_EQ(read_documents((d / "t.jsonl").string()), (std::vector<std::string>{"first doc", "second\ndoc ü"}));
  write_text(d / "book.txt", "\xEF\xBB\xBFLine one.\nLine two.\n");  // with a byte-order mark
  EXPECT_EQ(read_documents((d / "book.txt").string()), (std::vector<std::string>{"Line one.\nLine two.\n"}));
  write_text(d / "noext", "anything");
  EXPECT_EQ(read_documents((d / "noext").string()), (std::vector<std::string>{"anything"}));
}

TEST(Readers, FolderTakesTxtMdJsonlSortedAndSkipsTheRest) {
  ScratchDir d("data_readers_folder");
  write_text(d / "b.txt", "B");
  write_text(d / "a.md", "A");
  write_text(d / "sub/c.jsonl", "{\"text\": \"C\"}\n{\"text\": \"D\"}\n");
  write_text(d / "sub/z.txt", "Z");
  write_text(d / "notes.csv", "ignored");
  write_text(d / "config.json", "{\"ignored\": true}");
  write_text(d / ".hidden.txt", "ignored");
  write_text(d / ".git/HEAD.txt", "ignored");
  write_text(d / "x.txt.abc123.ddxtok", "ignored");
  EXPECT_EQ(read_documents(d.path().string()), (std::vector<std::string>{"A", "B", "C", "D", "Z"}));
}

TEST(Readers, BuiltinCorpusIsDeterministicAndSizable) {
  const auto a = read_documents("builtin:default");
  const auto b = read_documents("builtin:default");
  EXPECT_EQ(a, b);
  size_t bytes = 0;
  for (const auto& doc : a) bytes += doc.size();
  EXPECT_GT(bytes, 500u * 1000);
  EXPECT_LT(bytes, 2000u * 1000);
  EXPECT_GT(a.size(), 1000u);
  // Pinned: the corpus must not change with the compiler or standard library. If the
  // generator is changed on purpose, bump kDocumentFormatVersion and update this value.
  EXPECT_EQ(dataset_content_hash("builtin:default"),
            "d0748771c4c7f955d4ccf248b01db100c710e2e2fd50ba4130253c76dd6cc48a");
}

// --- bad input: UsageError, one line, naming the file (and line or offset) ---

void expect_one_line_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  const std::string msg = usage_error_of(fn);
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
}

TEST(ReaderErrors, MissingPathsAndUnknownBuiltin) {
  ScratchDir d("data_errors_missing");
  const std::string missing = (d / "nope.jsonl").string();
  expect_one_line_error([&] { read_documents(missing); }, {"dataset not found", missing});
  write_text(d / "empty/readme.csv", "x");
  expect_one_line_error([&] { read_documents((d / "empty").string()); }, {"no *.txt", "empty"});
  expect_one_line_error([] { read_documents("builtin:wikipedia"); }, {"unknown builtin dataset", "builtin:wikipedia"});
}

TEST(ReaderErrors, MalformedJsonlNamesFileAndLine) {
  ScratchDir d("data_errors_json");
  const std::string f = (d / "bad.jsonl").string();
  write_text(f, "{\"text\": \"ok\"}\n\n{\"text\": \"unterminated}\n");
  expect_one_line_error([&] { read_documents(f); }, {f + ":3: malformed JSON"});
  write_text(f, "{\"text\": \"ok\"}\n[1, 2]\n");
  expect_one_line_error([&] { read_documents(f); }, {f + ":2: expected a JSON object, got array"});
  write_text(f, "{\"prompt\": \"x\"}\n");
  expect_one_line_error([&] { read_documents(f); }, {f + ":1:", "\"text\" field or the Alpaca fields"});
  const std::string arr = (d / "bad.json").string();
  write_text(arr, "[{\"text\": \"a\"},\n {\"text\": ]");
  expect_one_line_error([&] { read_documents(arr); }, {arr + ": malformed JSON"});
}

TEST(ReaderErrors, MissingAlpacaFieldsAndWrongTypes) {
  ScratchDir d("data_errors_alpaca");
  const std::string f = (d / "alpaca.jsonl").string();
  write_text(f, "{\"instruction\": \"a\", \"output\": \"b\"}\n{\"instruction\": \"a\", \"input\": \"c\"}\n");
  expect_one_line_error([&] { read_documents(f); }, {f + ":2: missing field \"output\"", "Alpaca", f + ":1"});
  write_text(f, "{\"instruction\": 5, \"output\": \"b\"}\n");
  expect_one_line_error([&] { read_documents(f); }, {f + ":1: field \"instruction\" must be a string, got number"});
  write_text(f, "{\"instruction\": \"a\", \"input\": [\"x\"], \"output\": \"b\"}\n");
  expect_one_line_error([&] { read_documents(f); }, {f + ":1: field \"input\" must be a string, got array"});
  write_text(f, "{\"text\": \"a\"}\n{\"instruction\": \"a\", \"output\": \"b\"}\n");
  expect_one_line_error([&] { read_documents(f); }, {f + ":2: missing field \"text\""});
  write_text(f, "{\"text\": null}\n");
  expect_one_line_error([&] { read_documents(f); }, {f + ":1: field \"text\" must be a string, got null"});
  const std::string arr = (d / "alpaca.json").string();
  write_text(arr, "[{\"instruction\": \"a\", \"output\": \"b\"}, {\"instruction\": \"a\"}]");
  expect_one_line_error([&] { read_documents(arr); }, {arr + ": record 2: missing field \"output\""});
}

TEST(ReaderErrors, InvalidUtf8NamesFileAndByteOffset) {
  ScratchDir d("data_errors_utf8");
  const std::string f = (d / "latin1.txt").string();
  write_text(f, "caf\xe9 au lait\n");  // Latin-1 é
  expect_one_line_error([&] { read_documents(f); }, {f + ": invalid UTF-8 at byte offset 3 (line 1)"});
  const std::string j = (d / "x.jsonl").string();
  write_text(j, "{\"text\": \"ok\"}\n{\"text\": \"\xc0\xaf\"}\n");  // overlong encoding of '/'
  expect_one_line_error([&] { read_documents(j); }, {j + ": invalid UTF-8 at byte offset 25 (line 2)"});
  write_text(f, "surrogate \xed\xa0\x80");
  expect_one_line_error([&] { read_documents(f); }, {"byte offset 10"});
  write_text(f, "truncated \xe2\x82");
  expect_one_line_error([&] { read_documents(f); }, {"byte offset 10"});
  // In a folder, the file inside is named.
  write_text(d / "folder/good.txt", "fine");
  write_text(d / "folder/bad.md", "\xff");
  expect_one_line_error([&] { read_documents((d / "folder").string()); }, {"bad.md: invalid UTF-8 at byte offset 0"});
}

TEST(ReaderErrors, TooLittleDataForOneBlock) {
  ScratchDir d("data_errors_small");
  const std::string f = (d / "tiny.txt").string();
  write_text(f, "abc");  // 3 bytes + "\n" = 4 tokens with the byte tokenizer
  auto tok = make_byte_tokenizer();
  expect_one_line_error([&] { load_token_blocks(f, *tok, 4, "", run_now); },
                        {"dataset " + f + " has 4 tokens", "seq_length + 1 = 5"});
  EXPECT_EQ(load_token_blocks(f, *tok, 3, "", run_now)->num_blocks(), 1);
  write_text(d / "empty.txt", "");
  expect_one_line_error([&] { load_token_blocks((d / "empty.txt").string(), *tok, 1, "", run_now); }, {"has 1 tokens"});
  expect_one_line_error([&] { load_token_blocks(f, *tok, 0, "", run_now); }, {"seq_length must be at least 1"});
}

// Too few blocks for what the caller needs is found before the cache is committed: neither the
// data's folder nor a cache folder keeps anything (and a cache folder made for it is removed).
TEST(ReaderErrors, TooFewBlocksForTheCallerLeaveNoCacheBehind) {
  ScratchDir d("data_errors_few_blocks");
  const std::string f = (d / "data" / "small.txt").string();
  write_text(f, std::string(99, 'x'));  // 100 tokens: 3 blocks of 33
  auto tok = make_byte_tokenizer();
  BlockRequirement need;
  need.min_blocks = 8;
  need.why = "one global batch of 8";
  for (bool beside : {true, false}) {
    need.beside_data = beside;
    EXPECT_EQ(usage_error_of([&] { load_token_blocks(f, *tok, 32, (d / "out" / "cache").string(), run_now, need); }),
              "dataset " + f + " has 100 tokens (byte), 3 blocks of seq_length + 1 = 33, fewer than one global batch of 8");
    EXPECT_EQ(std::distance(fs::directory_iterator(d / "data"), fs::directory_iterator()), 1);
    EXPECT_FALSE(fs::exists(d / "out")) << "the cache folder it created is removed again";
  }
  need.min_blocks = 3;
  auto blocks = load_token_blocks(f, *tok, 32, (d / "out" / "cache").string(), run_now, need);
  EXPECT_EQ(blocks->num_blocks(), 3);
  EXPECT_EQ(fs::path(blocks->cache_path()).parent_path(), d / "out" / "cache");  // not beside the data
}

}  // namespace
}  // namespace ddx::data
