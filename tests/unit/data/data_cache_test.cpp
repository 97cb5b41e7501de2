// Token cache and blocks: built once, reused, rebuilt when the data or tokenizer changes or the
// file is damaged (never used silently), blocks/labels layout, and rank-0-first building.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "data/dataset.h"
#include "data/token_cache.h"
#include "data_test_util.h"

namespace ddx::data {
namespace {

using namespace ddx::data::testing;

// The byte tokenizer under another name, to stand for "a different tokenizer".
class RenamedByteTokenizer : public Tokenizer {
 public:
  explicit RenamedByteTokenizer(std::string name) : name_(std::move(name)), inner_(make_byte_tokenizer()) {}
  std::vector<int32_t> encode(const std::string& t) const override { return inner_->encode(t); }
  std::string decode(const std::vector<int32_t>& ids) const override { return inner_->decode(ids); }
  int64_t vocab_size() const override { return 256; }
  int32_t eos_id() const override { return -1; }
  std::string fingerprint() const override { return name_; }
  std::vector<int32_t> encode_document(const std::string& t) const override { return inner_->encode_document(t); }

 private:
  std::string name_;
  std::unique_ptr<Tokenizer> inner_;
};

ino_t inode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

std::vector<int32_t> block_of(const TokenBlocks& b, int64_t i) {
  std::vector<int32_t> out(static_cast<size_t>(b.seq_length() + 1));
  b.block(i, out.data());
  return out;
}

std::vector<int32_t> ids(const std::string& s) { return std::vector<int32_t>(s.begin(), s.end()); }

void flip_byte(const std::string& path, std::streamoff offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(offset);
  f.write(&c, 1);
}

TEST(TokenBlocks, BlocksOverlapByOneSoLabelsAreInputsShifted) {
  ScratchDir d("data_blocks_layout");
  write_text(d / "a.txt", "abcdefghij");  // + "\n" = 11 tokens
  auto tok = make_byte_tokenizer();
  auto blocks = load_token_blocks((d / "a.txt").string(), *tok, 3, "", run_now);
  EXPECT_EQ(blocks->num_tokens(), 11);
  EXPECT_EQ(blocks->seq_length(), 3);
  ASSERT_EQ(blocks->num_blocks(), 3);  // (11 - 1) / 3, remainder "\n"... dropped
  EXPECT_EQ(block_of(*blocks, 0), ids("abcd"));
  EXPECT_EQ(block_of(*blocks, 1), ids("defg"));  // labels of block 0 = "bcd", inputs of 1 start at 'd'
  EXPECT_EQ(block_of(*blocks, 2), ids("ghij"));
  EXPECT_THROW(block_of(*blocks, 3), std::out_of_range);
  // Beside the data: "a.txt.<tokenizer tag>.ddxtok".
  const std::string name = fs::path(blocks->cache_path()).filename().string();
  EXPECT_EQ(fs::path(blocks->cache_path()).parent_path(), d.path());
  EXPECT_EQ(name.rfind("a.txt.", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - 7), ".ddxtok") << name;
}

TEST(TokenBlocks, DocumentsAreConcatenatedWithTheTokenizersSeparator) {
  ScratchDir d("data_blocks_docs");
  write_text(d / "t.jsonl", "{\"text\": \"ab\"}\n{\"text\": \"cd\\n\"}\n{\"text\": \"e\"}\n");
  auto tok = make_byte_tokenizer();
  auto blocks = load_token_blocks((d / "t.jsonl").string(), *tok, 7, "", run_now);
  EXPECT_EQ(block_of(*blocks, 0), ids("ab\ncd\ne\n"));
}

TEST(TokenCache, BuiltOnceThenReused) {
  ScratchDir d("data_cache_reuse");
  write_text(d / "a.txt", std::string(5000, 'x'));
  auto tok = make_byte_tokenizer();
  int calls = 0;
  auto counting = [&](const std::function<void()>& fn) { ++calls, fn(); };
  auto first = load_token_blocks((d / "a.txt").string(), *tok, 16, "", counting);
  const std::string path = first->cache_path();
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(fs::file_size(path), 128u + 5001u * 4);
  const ino_t built = inode_of(path);
  auto second = load_token_blocks((d / "a.txt").string(), *tok, 32, "", counting);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(second->cache_path(), path);
  EXPECT_EQ(inode_of(path), built);  // reused, not rewritten (a rebuild renames a new file in)
  EXPECT_EQ(second->num_blocks(), 5000 / 32);
}

TEST(TokenCache, ContentChangeRebuilds) {
  ScratchDir d("data_cache_content");
  auto tok = make_byte_tokenizer();
  write_text(d / "a.txt", "hello world, first version");
  auto one = load_token_blocks((d / "a.txt").string(), *tok, 4, "", run_now);
  const std::string path = one->cache_path();
  write_text(d / "a.txt", "HELLO WORLD, second version");  // same length
  auto two = load_token_blocks((d / "a.txt").string(), *tok, 4, "", run_now);
  EXPECT_EQ(two->cache_path(), path);
  EXPECT_EQ(block_of(*two, 0), ids("HELLO"));
  EXPECT_EQ(block_of(*one, 0), ids("hello"));  // the old mapping still reads the old file
}

TEST(TokenCache, FolderContentChangeRebuilds) {
  ScratchDir d("data_cache_folder");
  auto tok = make_byte_tokenizer();
  write_text(d / "f/a.txt", "aaaa");
  auto one = load_token_blocks((d / "f").string(), *tok, 2, "", run_now);
  EXPECT_EQ(one->num_tokens(), 5);
  write_text(d / "f/b.txt", "bbbb");  // a new file in the folder changes the content hash
  auto two = load_token_blocks((d / "f").string(), *tok, 2, "", run_now);
  EXPECT_EQ(two->num_tokens(), 10);
  EXPECT_EQ(two->cache_path(), one->cache_path());
}

TEST(TokenCache, TokenizerChangeNeverReusesTheOtherTokenizersCache) {
  ScratchDir d("data_cache_tokenizer");
  write_text(d / "a.txt", "some text for the cache");
  RenamedByteTokenizer a("test:A"), b("test:B");
  auto with_a = load_token_blocks((d / "a.txt").string(), a, 4, "", run_now);
  auto with_b = load_token_blocks((d / "a.txt").string(), b, 4, "", run_now);
  EXPECT_NE(with_a->cache_path(), with_b->cache_path());
  // Even a cache of tokenizer A placed where B's belongs is refused and rebuilt.
  const std::string b_path = with_b->cache_path();
  with_b.reset();
  fs::copy_file(with_a->cache_path(), b_path, fs::copy_options::overwrite_existing);
  TokenCacheKey key_b;  // only the reason matters here
  std::string why;
  EXPECT_EQ(open_token_cache(b_path, key_b, &why), nullptr);
  const ino_t copied = inode_of(b_path);
  auto again = load_token_blocks((d / "a.txt").string(), b, 4, "", run_now);
  EXPECT_NE(inode_of(b_path), copied);
}

TEST(TokenCache, DamagedFilesAreRebuiltNeverUsed) {
  ScratchDir d("data_cache_damage");
  write_text(d / "a.txt", std::string(1000, 'q') + "end");
  auto tok = make_byte_tokenizer();
  const std::string data = (d / "a.txt").string();
  const std::string path = load_token_blocks(data, *tok, 8, "", run_now)->cache_path();
  const std::string pristine = read_text(path);

  struct Damage {
    const char* what;
    std::function<void()> apply;
  };
  const std::vector<Damage> damages = {
      {"header byte (token count)", [&] { flip_byte(path, 16); }},
      {"magic", [&] { flip_byte(path, 0); }},
      {"token byte", [&] { flip_byte(path, 128 + 4 * 500); }},
      {"truncated", [&] { fs::resize_file(path, fs::file_size(path) - 4); }},
      {"padded", [&] { fs::resize_file(path, fs::file_size(path) + 4); }},
      {"shorter than a header", [&] { fs::resize_file(path, 50); }},
      {"garbage", [&] { write_text(path, std::string(4000, '\x7f')); }},
  };
  for (const Damage& damage : damages) {
    write_text(path, pristine);
    damage.apply();
    const ino_t damaged = inode_of(path);
    auto blocks = load_token_blocks(data, *tok, 8, "", run_now);
    EXPECT_NE(inode_of(path), damaged) << damage.what << ": not rebuilt";
    EXPECT_EQ(read_text(path), pristine) << damage.what;
    EXPECT_EQ(block_of(*blocks, 0), ids("qqqqqqqqq")) << damage.what;
  }
}

TEST(TokenCache, OpenReportsWhyACacheIsRefused) {
  ScratchDir d("data_cache_reasons");
  TokenCacheKey key;
  key.vocab_size = 10;
  key.dataset_hash[0] = 1;
  const std::string path = (d / "c.ddxtok").string();
  {
    TokenCacheWriter w(path, key);
    w.append({1, 2, 3});
    EXPECT_THROW(w.append({10}), std::runtime_error);  // outside the vocabulary
    w.commit();
  }
  std::string why;
  auto ok = open_token_cache(path, key, &why);
  ASSERT_NE(ok, nullptr) << why;
  EXPECT_EQ(ok->size(), 3);
  TokenCacheKey other_data = key;
  other_data.dataset_hash[0] = 2;
  EXPECT_EQ(open_token_cache(path, other_data, &why), nullptr);
  EXPECT_EQ(why, "the dataset changed since it was built");
  TokenCacheKey other_tok = key;
  other_tok.tokenizer_hash[5] = 9;
  EXPECT_EQ(open_token_cache(path, other_tok, &why), nullptr);
  EXPECT_EQ(why, "built with another tokenizer");
  EXPECT_EQ(open_token_cache((d / "none").string(), key, &why), nullptr);
  EXPECT_EQ(why, "no cache yet");
  // A writer abandoned without commit leaves nothing behind.
  { TokenCacheWriter w((d / "abandoned.ddxtok").string(), key); w.append({1}); }
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(d.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST(TokenCache, BuiltinDataGoesToCacheDirOrStaysInMemory) {
  ScratchDir d("data_cache_builtin");
  auto tok = make_byte_tokenizer();
  auto cached = load_token_blocks("builtin:default", *tok, 64, (d / "cache").string(), run_now);
  EXPECT_EQ(fs::path(cached->cache_path()).parent_path(), d / "cache");
  EXPECT_GT(cached->num_tokens(), 500000);
  auto in_memory = load_token_blocks("builtin:default", *tok, 64, "", run_now);
  EXPECT_EQ(in_memory->cache_path(), "");
  ASSERT_EQ(in_memory->num_blocks(), cached->num_blocks());
  for (int64_t i : {int64_t{0}, int64_t{1234}, cached->num_blocks() - 1}) {
    EXPECT_EQ(block_of(*in_memory, i), block_of(*cached, i));
  }
}

// Four "ranks" as threads, with a rank0_first like the trainer's: rank 0 runs first while the
// others wait, then they run. Exactly one build happens; all see identical tokens.
TEST(TokenCache, RankZeroBuildsOthersReuse) {
  ScratchDir d("data_cache_ranks");
  write_text(d / "a.jsonl", "{\"text\": \"" + std::string(20000, 'r') + "\"}\n");
  auto tok = make_byte_tokenizer();
  std::mutex m;
  std::condition_variable cv;
  bool rank0_done = false;
  std::vector<std::unique_ptr<TokenBlocks>> got(4);
  std::vector<ino_t> inode(4);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back([&, r] {
      auto rank0_first = [&](const std::function<void()>& fn) {
        if (r == 0) {
          fn();
          std::lock_guard<std::mutex> lock(m);
          rank0_done = true;
          cv.notify_all();
        } else {
          std::unique_lock<std::mutex> lock(m);
          cv.wait(lock, [&] { return rank0_done; });
          lock.unlock();
          fn();
        }
      };
      got[r] = load_token_blocks((d / "a.jsonl").string(), *tok, 100, "", rank0_first);
      inode[r] = inode_of(got[r]->cache_path());
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(inode[r], inode[0]);
    EXPECT_EQ(block_of(*got[r], 7), block_of(*got[0], 7));
  }
}

}  // namespace
}  // namespace ddx::data
