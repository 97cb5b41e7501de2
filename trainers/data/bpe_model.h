#pragma once
// The BPE model of a byte-level tokenizer: vocabulary, merge ranks, and the merge loop that
// turns one pre-tokenized piece into ids. Internal to ddx_data.
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ddx::data {

class BpeModel {
 public:
  struct Options {
    // Llama-3: a piece that is itself a vocabulary entry becomes that token without merging.
    bool ignore_merges = false;
    // Sentencepiece-style "<0xAB>" tokens for bytes whose character is not in the vocabulary.
    bool byte_fallback = false;
    int32_t unk_id = -1;
  };

  // `vocab`: spelling (byte-level characters) -> id. `merges`: pairs of spellings, highest
  // priority first. Throws UsageError (without a file name; the caller adds it) when a merge
  // names a token missing from the vocabulary.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, Options options);

  // Appends the ids of one piece given as raw bytes (the byte-level spelling is implied).
  void encode_piece(std::string_view raw, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }
  size_t num_merges() const { return merge_of_pair_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view raw, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merge_of_pair_;
  int32_t id_of_byte_[256];           // initial symbol of each byte, -1 when none
  int32_t fallback_id_of_byte_[256];  // "<0xAB>" ids when byte_fallback
  Options options_;

  // Pieces repeat a lot (words), so their ids are cached. Bounded: cleared when full.
  static constexpr size_t kMaxCacheEntries = 1 << 18;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace ddx::data
