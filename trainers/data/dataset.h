#pragma once
// Training data: documents from files, tokenised once into a cached token file, concatenated
// and cut into blocks of seq_length + 1 tokens (inputs = block[0:T], labels = block[1:T+1]).
// No LibTorch.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"

namespace ddx::data {

// Documents of a dataset path:
//  - *.jsonl / *.json lines in the Alpaca schema (instruction, input, output), formatted with
//    the Alpaca prompt template, or with a "text" field;
//  - a plain text file (one document);
//  - a folder: every *.txt, *.md, *.jsonl inside, sorted by path;
//  - "builtin:default": the embedded corpus ddx generates (licence-clean, deterministic).
// Malformed JSONL -> UsageError "file:line: reason"; invalid UTF-8 -> UsageError naming the
// file and byte offset; missing path -> UsageError.
std::vector<std::string> read_documents(const std::string& path);

// The token stream of a dataset, memory-mapped from its cache file.
class TokenBlocks {
 public:
  virtual ~TokenBlocks() = default;
  // (tokens - 1) / seq_length: block i is tokens [i*T, i*T + T + 1), so consecutive blocks
  // share one token and every token after the first is a label exactly once.
  virtual int64_t num_blocks() const = 0;
  virtual int64_t seq_length() const = 0;
  virtual int64_t num_tokens() const = 0;
  // Block i: seq_length + 1 token ids.
  virtual void block(int64_t i, int32_t* out) const = 0;
  // "" when no folder could hold a cache and the tokens live in memory.
  virtual const std::string& cache_path() const = 0;
};

// What the caller needs from the data and where its cache may go.
struct BlockRequirement {
  int64_t min_blocks = 1;   // fewer -> UsageError, raised before a cache is written
  std::string why;          // what needs them, for that error ("one global batch of 8 (-b x ...)")
  bool beside_data = true;  // false: the cache always goes under cache_dir
};

// Tokenises `dataset` with `tokenizer` into a cache file next to the data (or under
// `cache_dir` when the data folder is not writable, for builtin data, or when
// !need.beside_data), unless a valid cache exists (keyed by dataset content hash + tokenizer
// fingerprint). `rank0_first` is called by the caller's distributed code: rank 0 builds the
// cache inside it while the others wait, then the others open it (pass a function that just
// runs its argument for a single process). Fewer blocks than need.min_blocks (at least one) ->
// UsageError naming the dataset, and no cache file or folder is left behind.
std::unique_ptr<TokenBlocks> load_token_blocks(
    const std::string& dataset, const Tokenizer& tokenizer, int64_t seq_length,
    const std::string& cache_dir,
    const std::function<void(const std::function<void()>&)>& rank0_first,
    const BlockRequirement& need = {});

// Which blocks form each global batch: a seeded shuffle per epoch (set_epoch semantics),
// drop_last, and O(1) resume at any step. The global batch of a step depends only on
// (seed, epoch, step, global_batch_size), never on the world size: rank r of N takes
// positions [r*B/N, (r+1)*B/N) of it.
//
// The epoch's order is a Fisher-Yates shuffle driven by ddx's own PRNG seeded from (seed,
// epoch), so it is the same on every platform and standard library. It is computed once per
// epoch (O(num_blocks)) and kept, so resuming at any step costs no replay of earlier batches.
// Throws UsageError when num_blocks < global_batch_size (drop_last would leave no step).
// Copies share the per-epoch order cache; all methods are thread-safe.
class BlockSampler {
 public:
  BlockSampler(int64_t num_blocks, int64_t global_batch_size, uint64_t seed);
  int64_t steps_per_epoch() const;   // num_blocks / global_batch_size (drop_last)
  // Block indices of the global batch at (epoch, step_in_epoch).
  std::vector<int64_t> global_batch(int64_t epoch, int64_t step_in_epoch) const;
  // This rank's slice of it; throws UsageError if global_batch_size % world_size != 0.
  std::vector<int64_t> rank_batch(int64_t epoch, int64_t step_in_epoch, int rank, int world_size) const;
  // (epoch, step_in_epoch) of a global step counted from 0 across epochs.
  std::pair<int64_t, int64_t> locate(int64_t global_step) const;

 private:
  struct EpochOrder;
  const std::vector<uint32_t>& order(int64_t epoch) const;

  int64_t num_blocks_;
  int64_t global_batch_size_;
  uint64_t seed_;
  std::shared_ptr<EpochOrder> cache_;
};

}  // namespace ddx::data
