#include "data/bpe_model.h"

#include <cstdio>
#include <queue>

#include "data/byte_level.h"
#include "data/utf8.h"
#include "ddx/errors/errors.h"

namespace ddx::data {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, Options options)
    : vocab_(std::move(vocab)), options_(options) {
  for (int b = 0; b < 256; ++b) {
    std::string spelled;
    utf8::append(spelled, byte_level::char_of_byte(static_cast<uint8_t>(b)));
    auto it = vocab_.find(spelled);
    id_of_byte_[b] = it == vocab_.end() ? -1 : it->second;
    char fallback[8];
    std::snprintf(fallback, sizeof fallback, "<0x%02X>", b);
    auto fb = vocab_.find(fallback);
    fallback_id_of_byte_[b] = fb == vocab_.end() ? -1 : fb->second;
  }
  merge_of_pair_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a), ib = vocab_.find(b), ir = vocab_.find(a + b);
    if (ia == vocab_.end() || ib == vocab_.end() || ir == vocab_.end()) {
      const std::string& missing = ia == vocab_.end() ? a : ib == vocab_.end() ? b : a + b;
      throw UsageError("merge " + std::to_string(rank) + " (\"" + a + "\" \"" + b + "\") uses \"" +
                       missing + "\", which is not in the vocabulary");
    }
    // A pair listed twice (a malformed file) keeps its first, highest-priority rank.
    merge_of_pair_.emplace(pair_key(ia->second, ib->second),
                           Merge{static_cast<uint32_t>(rank), ir->second});
  }
}

void BpeModel::encode_piece(std::string_view raw, std::vector<int32_t>& out) const {
  if (raw.empty()) return;
  std::string key(raw);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  bool whole = false;
  if (options_.ignore_merges) {
    auto it = vocab_.find(byte_level::encode(raw));
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      whole = true;
    }
  }
  if (!whole) merge_word(raw, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

// Repeatedly merges the adjacent pair of lowest rank (leftmost on ties) until no pair has a
// merge. A heap of candidate pairs keeps this O(n log n); entries made stale by an earlier
// merge are recognised (the symbols at that spot changed) and skipped.
void BpeModel::merge_word(std::string_view raw, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
  };
  std::vector<Symbol> sym;
  sym.reserve(raw.size());
  for (char c : raw) {
    const uint8_t b = static_cast<uint8_t>(c);
    int32_t id = id_of_byte_[b];
    if (id < 0 && options_.byte_fallback) id = fallback_id_of_byte_[b];
    if (id < 0) id = options_.unk_id;
    if (id < 0) continue;  // no way to spell this byte: dropped, as the Rust library does
    const int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back({id, idx - 1, -1});
    if (idx > 0) sym[idx - 1].next = idx;
  }

  struct Candidate {
    uint32_t rank;
    int32_t pos;  // index of the left symbol
    int32_t left_id, right_id, result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = sym[left].next;
    if (right < 0) return;
    auto it = merge_of_pair_.find(pair_key(sym[left].id, sym[right].id));
    if (it != merge_of_pair_.end()) {
      heap.push({it->second.rank, left, sym[left].id, sym[right].id, it->second.result});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push_pair(i);

  std::vector<bool> dead(sym.size(), false);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (dead[c.pos] || sym[c.pos].id != c.left_id) continue;
    const int32_t right = sym[c.pos].next;
    if (right < 0 || sym[right].id != c.right_id) continue;
    sym[c.pos].id = c.result;
    sym[c.pos].next = sym[right].next;
    if (sym[right].next >= 0) sym[sym[right].next].prev = c.pos;
    dead[right] = true;
    push_pair(sym[c.pos].prev);
    push_pair(c.pos);
  }
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace ddx::data
