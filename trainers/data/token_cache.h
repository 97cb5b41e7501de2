#pragma once
// The token cache file: a dataset's token stream, tokenised once, as little-endian uint32 ids
// after a 128-byte header.
//
//   offset size  field
//        0    8  magic "DDXTOKS\0"
//        8    4  format version (1)
//       12    4  header size (128)
//       16    8  number of tokens
//       24    4  vocabulary size (every id is below it)
//       28    4  eos id (-1 for none)
//       32   32  SHA-256 of the dataset's content (dataset_content_hash)
//       64   32  SHA-256 of the tokenizer key (fingerprint, eos, document format version)
//       96    8  checksum of the token bytes (FNV-1a over 32-bit words)
//      104   16  zero
//      120    8  checksum of header bytes 0..119 (FNV-1a over bytes)
//
// Written atomically (temp file, fsync, rename, fsync of the folder). On open every field is
// checked, the checksum recomputed and every id range-checked, so a truncated, corrupt or
// mismatched cache is rebuilt, never used. Internal to ddx_data.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddx::data {

struct TokenCacheKey {
  std::array<uint8_t, 32> dataset_hash{};
  std::array<uint8_t, 32> tokenizer_hash{};
  uint32_t vocab_size = 0;
  int32_t eos_id = -1;
};

// A read-only memory map of a validated cache file.
class MappedTokens {
 public:
  ~MappedTokens();
  MappedTokens(const MappedTokens&) = delete;
  MappedTokens& operator=(const MappedTokens&) = delete;
  const uint32_t* tokens() const { return tokens_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  friend std::unique_ptr<MappedTokens> open_token_cache(const std::string&, const TokenCacheKey&, std::string*);
  MappedTokens() = default;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint32_t* tokens_ = nullptr;
  int64_t size_ = 0;
  std::string path_;
};

// Streams tokens into a temp file beside `path`; commit() publishes it atomically. A writer
// destroyed without commit() removes its temp file. Throws std::runtime_error on I/O errors.
class TokenCacheWriter {
 public:
  TokenCacheWriter(const std::string& path, const TokenCacheKey& key);
  ~TokenCacheWriter();
  void append(const std::vector<int32_t>& ids);
  int64_t count() const { return count_; }
  void commit();

 private:
  void flush();
  std::string path_, tmp_path_;
  int fd_ = -1;
  TokenCacheKey key_;
  std::vector<uint32_t> buffer_;
  uint64_t checksum_;
  int64_t count_ = 0;
};

// The validated, mapped cache, or nullptr with the reason (missing, which field mismatches,
// corrupt) in *why_not.
std::unique_ptr<MappedTokens> open_token_cache(const std::string& path, const TokenCacheKey& key,
                                               std::string* why_not);

// Checksums of the format: FNV-1a 64 over 32-bit words (tokens) or bytes (header). An
// integrity check against torn or damaged files, not a defence against tampering.
constexpr uint64_t kChecksumStart = 0xcbf29ce484222325ull;
uint64_t checksum_tokens(uint64_t state, const uint32_t* tokens, size_t count);
uint64_t checksum_bytes(uint64_t state, const uint8_t* bytes, size_t count);

}  // namespace ddx::data
