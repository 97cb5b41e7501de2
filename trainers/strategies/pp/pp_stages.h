#pragma once
// Which transformer blocks each pipeline stage runs. The embedding goes with the first stage and
// the final norm, head and loss with the last; blocks are contiguous. By default the cuts
// balance parameter counts (the embedding and head counted with their stages); `--pp-split`
// places them by hand. No LibTorch.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx::train {

struct StageSplit {
  std::vector<int64_t> first_block;  // stages + 1 entries: stage s runs [first_block[s], first_block[s + 1])
  int stages() const { return static_cast<int>(first_block.size()) - 1; }
  int64_t begin(int stage) const { return first_block.at(stage); }
  int64_t end(int stage) const { return first_block.at(stage + 1); }
  // "0-1 | 2-4 | 5-7" (block ranges per stage), for the log and docs.
  std::string describe() const;
};

// The contiguous split of blocks into `stages` non-empty stages that minimises the largest
// stage's parameter count. Needs stages <= block_params.size().
StageSplit balanced_split(const std::vector<int64_t>& block_params, int64_t embedding_params, int64_t head_params,
                          int stages);

// `--pp-split 2,5`: the first block of every stage after the first, strictly increasing within
// (0, num_blocks). UsageError naming the flag otherwise.
StageSplit manual_split(const std::vector<int64_t>& cuts, int64_t num_blocks, int stages);

}  // namespace ddx::train
