#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ddx::data {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'X', 'T', 'O', 'K', 'S', '\0'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 128;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the token cache format is little-endian");

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t num_tokens;
  uint32_t vocab_size;
  int32_t eos_id;
  uint8_t dataset_hash[32];
  uint8_t tokenizer_hash[32];
  uint64_t tokens_checksum;
  uint8_t zero[16];
  uint64_t header_checksum;
};
static_assert(sizeof(Header) == kHeaderBytes, "header layout");
static_assert(offsetof(Header, dataset_hash) == 32 && offsetof(Header, tokens_checksum) == 96 &&
                  offsetof(Header, header_checksum) == 120,
              "header offsets are the documented ones");

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw std::runtime_error("token cache: cannot " + what + " " + path + ": " + std::strerror(errno));
}

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error("write", path);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

std::string hex8(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t checksum_tokens(uint64_t state, const uint32_t* tokens, size_t count) {
  for (size_t i = 0; i < count; ++i) state = (state ^ tokens[i]) * kFnvPrime;
  return state;
}

uint64_t checksum_bytes(uint64_t state, const uint8_t* bytes, size_t count) {
  for (size_t i = 0; i < count; ++i) state = (state ^ bytes[i]) * kFnvPrime;
  return state;
}

MappedTokens::~MappedTokens() {
  if (map_) ::munmap(map_, map_bytes_);
}

TokenCacheWriter::TokenCacheWriter(const std::string& path, const TokenCacheKey& key)
    : path_(path), key_(key), checksum_(kChecksumStart) {
  tmp_path_ = path + ".tmp.XXXXXX";
  fd_ = ::mkstemp(tmp_path_.data());
  if (fd_ < 0) io_error("create a temporary file for", path);
  // The header is written last, once the count and checksum are known; zeros until then keep
  // a torn file invalid.
  const uint8_t zeros[kHeaderBytes] = {};
  write_all(fd_, zeros, sizeof zeros, tmp_path_);
  buffer_.reserve(1 << 18);
}

TokenCacheWriter::~TokenCacheWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

void TokenCacheWriter::append(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    if (id < 0 || static_cast<uint32_t>(id) >= key_.vocab_size) {
      throw std::runtime_error("token cache: tokenizer produced id " + std::to_string(id) +
                               " outside its vocabulary of " + std::to_string(key_.vocab_size));
    }
    buffer_.push_back(static_cast<uint32_t>(id));
  }
  count_ += static_cast<int64_t>(ids.size());
  if (buffer_.size() >= (1 << 18)) flush();
}

void TokenCacheWriter::flush() {
  checksum_ = checksum_tokens(checksum_, buffer_.data(), buffer_.size());
  write_all(fd_, buffer_.data(), buffer_.size() * sizeof(uint32_t), tmp_path_);
  buffer_.clear();
}

void TokenCacheWriter::commit() {
  flush();
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.header_bytes = kHeaderBytes;
  h.num_tokens = static_cast<uint64_t>(count_);
  h.vocab_size = key_.vocab_size;
  h.eos_id = key_.eos_id;
  std::memcpy(h.dataset_hash, key_.dataset_hash.data(), 32);
  std::memcpy(h.tokenizer_hash, key_.tokenizer_hash.data(), 32);
  h.tokens_checksum = checksum_;
  h.header_checksum = checksum_bytes(kChecksumStart, reinterpret_cast<const uint8_t*>(&h), offsetof(Header, header_checksum));
  if (::pwrite(fd_, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) io_error("write the header of", tmp_path_);
  ::fchmod(fd_, 0644);  // mkstemp makes 0600; other users of a shared dataset may read it
  if (::fsync(fd_) != 0) io_error("flush", tmp_path_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(tmp_path_.c_str());
    io_error("close", tmp_path_);
  }
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    ::unlink(tmp_path_.c_str());
    io_error("rename onto", path_);
  }
  // Persist the rename itself, so a crash cannot bring back the old (or no) file.
  const std::string folder = std::filesystem::path(path_).parent_path().string();
  const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::unique_ptr<MappedTokens> open_token_cache(const std::string& path, const TokenCacheKey& key,
                                               std::string* why_not) {
  auto reject = [&](const std::string& why) -> std::unique_ptr<MappedTokens> {
    if (why_not) *why_not = why;
    return nullptr;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return reject(errno == ENOENT ? "no cache yet" : std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return reject(std::string("cannot stat: ") + std::strerror(errno));
  }
  const auto file_bytes = static_cast<size_t>(st.st_size);
  if (file_bytes < kHeaderBytes) {
    ::close(fd);
    return reject("shorter than its header (" + std::to_string(file_bytes) + " bytes)");
  }
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping stays valid
  if (map == MAP_FAILED) return reject(std::string("cannot map: ") + std::strerror(errno));
  std::unique_ptr<MappedTokens> out(new MappedTokens());
  out->map_ = map;
  out->map_bytes_ = file_bytes;
  out->path_ = path;

  Header h;
  std::memcpy(&h, map, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return reject("not a ddx token cache (bad magic)");
  if (h.header_checksum != checksum_bytes(kChecksumStart, reinterpret_cast<const uint8_t*>(&h), offsetof(Header, header_checksum))) {
    return reject("header checksum mismatch (corrupt)");
  }
  if (h.version != kVersion) return reject("format version " + std::to_string(h.version) + ", expected " + std::to_string(kVersion));
  if (h.header_bytes != kHeaderBytes) return reject("unexpected header size");
  if (std::memcmp(h.dataset_hash, key.dataset_hash.data(), 32) != 0) return reject("the dataset changed since it was built");
  if (std::memcmp(h.tokenizer_hash, key.tokenizer_hash.data(), 32) != 0 || h.vocab_size != key.vocab_size ||
      h.eos_id != key.eos_id) {
    return reject("built with another tokenizer");
  }
  if (h.num_tokens > (file_bytes - kHeaderBytes) / sizeof(uint32_t) ||
      kHeaderBytes + h.num_tokens * sizeof(uint32_t) != file_bytes) {
    return reject("size " + std::to_string(file_bytes) + " bytes does not match its " + std::to_string(h.num_tokens) +
                  " tokens (truncated or padded)");
  }
  const auto* tokens = reinterpret_cast<const uint32_t*>(static_cast<const char*>(map) + kHeaderBytes);
  const size_t n = static_cast<size_t>(h.num_tokens);
  ::madvise(map, file_bytes, MADV_SEQUENTIAL);
  uint32_t max_id = 0;
  uint64_t sum = kChecksumStart;
  constexpr size_t kChunk = 1 << 16;
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = std::min(kChunk, n - i);
    sum = checksum_tokens(sum, tokens + i, m);
    for (size_t j = 0; j < m; ++j) max_id = std::max(max_id, tokens[i + j]);
  }
  if (sum != h.tokens_checksum) return reject("token checksum mismatch (corrupt): " + hex8(sum) + " != " + hex8(h.tokens_checksum));
  if (n > 0 && max_id >= key.vocab_size) return reject("holds id " + std::to_string(max_id) + " outside the vocabulary");
  ::madvise(map, file_bytes, MADV_RANDOM);  // blocks are then read in shuffled order
  out->tokens_ = tokens;
  out->size_ = static_cast<int64_t>(n);
  return out;
}

}  // namespace ddx::data
