// load_token_blocks: find or build a dataset's token cache, then serve it as blocks.
//
// Blocks: block i is tokens [i*T, i*T + T + 1) of the concatenated stream (T = seq_length),
// so consecutive blocks overlap by one token: inputs are its first T tokens and labels its last
// T, and every token after the first is a label exactly once. num_blocks = (tokens - 1) / T;
// the remainder is dropped.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <thread>

#include "data/dataset.h"
#include "data/dataset_internal.h"
#include "data/sha256.h"
#include "data/token_cache.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"

namespace ddx::data {
namespace {

namespace fs = std::filesystem;

std::array<uint8_t, 32> digest_of(const std::string& text) {
  Sha256 h;
  h.update(text);
  return h.digest();
}

std::array<uint8_t, 32> from_hex(const std::string& hex) {
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 32; ++i) out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

bool folder_writable(const fs::path& folder) {
  return ::access(folder.empty() ? "." : folder.c_str(), W_OK | X_OK) == 0;
}

// A name safe in any folder, for caches under cache_dir: "<base>-<hash of absolute path>".
std::string cache_stem_for(const std::string& dataset) {
  std::error_code ec;
  const fs::path abs = fs::absolute(dataset, ec);
  std::string base = fs::path(dataset).filename().string();
  if (base.empty()) base = fs::path(dataset).parent_path().filename().string();
  for (char& c : base) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  if (base.empty()) base = "dataset";
  return base + "-" + sha256_hex(abs.string()).substr(0, 8);
}

// Where the cache lives: beside the data when that folder is writable (and wanted), else under
// cache_dir; "" when neither is possible (then tokens stay in memory). Creates nothing.
std::string choose_cache_path(const std::string& dataset, const std::string& tokenizer_tag, const std::string& cache_dir,
                              bool beside_data) {
  const std::string suffix = "." + tokenizer_tag + ".ddxtok";
  const bool builtin = dataset.rfind(kBuiltinPrefix, 0) == 0;
  if (!builtin && beside_data) {
    std::error_code ec;
    const fs::path p(dataset);
    if (fs::is_directory(p, ec)) {
      if (folder_writable(p)) return (p / ("ddx-tokens" + suffix)).string();
    } else if (folder_writable(p.parent_path())) {
      return p.string() + suffix;
    }
  }
  if (cache_dir.empty()) return "";
  const std::string stem = builtin ? std::string("builtin-") + (dataset.c_str() + std::strlen(kBuiltinPrefix)) : cache_stem_for(dataset);
  return (fs::path(cache_dir) / (stem + suffix)).string();
}

// Tokenises documents on several threads, handing results to `sink` in document order.
template <typename Sink>
void tokenise_in_order(const std::vector<std::string>& docs, const Tokenizer& tokenizer, Sink&& sink) {
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  constexpr size_t kWindow = 4096;  // documents in flight, bounding memory
  std::vector<std::vector<int32_t>> out;
  for (size_t start = 0; start < docs.size(); start += kWindow) {
    const size_t n = std::min(kWindow, docs.size() - start);
    out.assign(n, {});
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) out[i] = tokenizer.encode_document(docs[start + i]);
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < std::min(threads, n); ++t) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
    for (auto& ids : out) sink(ids);
  }
}

class MappedTokenBlocks : public TokenBlocks {
 public:
  MappedTokenBlocks(std::unique_ptr<MappedTokens> tokens, int64_t seq_length)
      : tokens_(std::move(tokens)), seq_length_(seq_length) {}
  int64_t num_blocks() const override { return (tokens_->size() - 1) / seq_length_; }
  int64_t seq_length() const override { return seq_length_; }
  int64_t num_tokens() const override { return tokens_->size(); }
  void block(int64_t i, int32_t* out) const override {
    if (i < 0 || i >= num_blocks()) throw std::out_of_range("block " + std::to_string(i) + " of " + std::to_string(num_blocks()));
    const uint32_t* src = tokens_->tokens() + i * seq_length_;
    for (int64_t k = 0; k <= seq_length_; ++k) out[k] = static_cast<int32_t>(src[k]);
  }
  const std::string& cache_path() const override { return tokens_->path(); }

 private:
  std::unique_ptr<MappedTokens> tokens_;
  int64_t seq_length_;
};

// When no folder can hold a cache: every rank tokenises for itself (deterministically).
class InMemoryTokenBlocks : public TokenBlocks {
 public:
  InMemoryTokenBlocks(std::vector<uint32_t> tokens, int64_t seq_length)
      : tokens_(std::move(tokens)), seq_length_(seq_length) {}
  int64_t num_blocks() const override { return (num_tokens() - 1) / seq_length_; }
  int64_t seq_length() const override { return seq_length_; }
  int64_t num_tokens() const override { return static_cast<int64_t>(tokens_.size()); }
  void block(int64_t i, int32_t* out) const override {
    if (i < 0 || i >= num_blocks()) throw std::out_of_range("block " + std::to_string(i) + " of " + std::to_string(num_blocks()));
    for (int64_t k = 0; k <= seq_length_; ++k) out[k] = static_cast<int32_t>(tokens_[i * seq_length_ + k]);
  }
  const std::string& cache_path() const override { return empty_; }

 private:
  std::vector<uint32_t> tokens_;
  int64_t seq_length_;
  std::string empty_;
};

}  // namespace

std::unique_ptr<TokenBlocks> load_token_blocks(
    const std::string& dataset, const Tokenizer& tokenizer, int64_t seq_length,
    const std::string& cache_dir,
    const std::function<void(const std::function<void()>&)>& rank0_first, const BlockRequirement& need) {
  if (seq_length < 1) throw UsageError("seq_length must be at least 1, got " + std::to_string(seq_length));
  // Every rank hashes the data itself (before the rank-0-first section, so a missing file
  // fails on all ranks alike): the key proves the cache it opens matches what it would build.
  TokenCacheKey key;
  key.dataset_hash = from_hex(dataset_content_hash(dataset));
  const std::string tokenizer_key = tokenizer.fingerprint() + "\neos " + std::to_string(tokenizer.eos_id()) +
                                    "\ndocument format " + std::to_string(kDocumentFormatVersion);
  key.tokenizer_hash = digest_of(tokenizer_key);
  key.vocab_size = static_cast<uint32_t>(tokenizer.vocab_size());
  key.eos_id = tokenizer.eos_id();
  const std::string tag = to_hex(key.tokenizer_hash.data(), 6);
  const std::string path = choose_cache_path(dataset, tag, cache_dir, need.beside_data);

  // Checked on the token count before a cache is committed, so bad data leaves nothing behind.
  auto check_enough = [&](int64_t tokens) {
    const int64_t blocks = tokens > 0 ? (tokens - 1) / seq_length : 0;
    if (blocks < 1) {
      throw UsageError("dataset " + dataset + " has " + std::to_string(tokens) + " tokens (" + tokenizer.fingerprint() +
                       "), fewer than one block of seq_length + 1 = " + std::to_string(seq_length + 1));
    }
    if (blocks < need.min_blocks) {
      throw UsageError("dataset " + dataset + " has " + std::to_string(tokens) + " tokens (" + tokenizer.fingerprint() +
                       "), " + std::to_string(blocks) + " blocks of seq_length + 1 = " + std::to_string(seq_length + 1) +
                       ", fewer than " + (need.why.empty() ? std::to_string(need.min_blocks) + " blocks" : need.why));
    }
  };
  if (path.empty()) {
    log::warn("no writable folder for the token cache of ", dataset, " (pass a cache folder); tokenising in memory");
    std::vector<uint32_t> tokens;
    tokenise_in_order(read_documents(dataset), tokenizer, [&](const std::vector<int32_t>& ids) {
      tokens.insert(tokens.end(), ids.begin(), ids.end());
    });
    check_enough(static_cast<int64_t>(tokens.size()));
    return std::make_unique<InMemoryTokenBlocks>(std::move(tokens), seq_length);
  }

  // Rank 0 builds the cache while the others wait; then they find it valid. A rank that still
  // finds it invalid (a node-local folder, say) builds its own copy: the rename is atomic and
  // the content identical, so concurrent builders cannot corrupt each other.
  std::unique_ptr<MappedTokens> mapped;
  rank0_first([&] {
    std::string why;
    mapped = open_token_cache(path, key, &why);
    if (mapped) {
      log::debug("token cache: using ", path, " (", mapped->size(), " tokens)");
      return;
    }
    if (why != "no cache yet") log::warn("token cache ", path, " is not usable (", why, "); rebuilding it");
    const auto start = std::chrono::steady_clock::now();
    const fs::path folder = fs::path(path).parent_path();
    std::error_code ec;
    fs::path first_created;  // the outermost folder this call creates, removed again on failure
    for (fs::path p = folder; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) first_created = p;
    fs::create_directories(folder, ec);
    if (!folder_writable(folder)) {
      throw UsageError("cache folder " + folder.string() + " is not writable (needed for the token cache of " + dataset + ")");
    }
    try {
      TokenCacheWriter writer(path, key);  // a temp file until commit(): removed if we throw
      tokenise_in_order(read_documents(dataset), tokenizer, [&](const std::vector<int32_t>& ids) { writer.append(ids); });
      check_enough(writer.count());
      writer.commit();
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      log::info("token cache: tokenised ", dataset, " into ", writer.count(), " tokens in ", ms.count(), " ms -> ", path);
    } catch (...) {
      // Empty folders only: nothing else can have appeared in them meanwhile.
      for (fs::path p = folder; !first_created.empty() && fs::remove(p, ec) && p != first_created; p = p.parent_path()) {
      }
      throw;
    }
    mapped = open_token_cache(path, key, &why);
    if (!mapped) throw std::runtime_error("token cache " + path + " is invalid right after it was written: " + why);
  });
  if (!mapped) throw std::runtime_error("token cache " + path + ": rank0_first did not run its function");
  check_enough(mapped->size());
  return std::make_unique<MappedTokenBlocks>(std::move(mapped), seq_length);
}

}  // namespace ddx::data
