#include "strategies/pp/pp_stages.h"

#include <algorithm>
#include <limits>

#include "ddx/errors/errors.h"

namespace ddx::train {

std::string StageSplit::describe() const {
  std::string out;
  for (int s = 0; s < stages(); ++s) {
    out += (s ? " | " : "") + std::to_string(begin(s)) + (end(s) - begin(s) > 1 ? "-" + std::to_string(end(s) - 1) : "");
  }
  return out;
}

StageSplit balanced_split(const std::vector<int64_t>& block_params, int64_t embedding_params, int64_t head_params,
                          int stages) {
  const int n = static_cast<int>(block_params.size());
  std::vector<int64_t> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + block_params[i];
  // cost(s, i, j): stage s running blocks [i, j), with the embedding on stage 0 and the head on
  // the last. best[s][j]: the smallest largest-stage cost of stages 0..s covering blocks [0, j).
  auto cost = [&](int s, int i, int j) {
    return prefix[j] - prefix[i] + (s == 0 ? embedding_params : 0) + (s == stages - 1 ? head_params : 0);
  };
  const int64_t inf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(stages, std::vector<int64_t>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages, std::vector<int>(n + 1, 0));
  for (int j = 1; j <= n; ++j) best[0][j] = cost(0, 0, j);
  for (int s = 1; s < stages; ++s) {
    for (int j = s + 1; j <= n; ++j) {
      for (int i = s; i < j; ++i) {
        if (best[s - 1][i] == inf) continue;
        const int64_t c = std::max(best[s - 1][i], cost(s, i, j));
        if (c < best[s][j]) {
          best[s][j] = c;
          cut[s][j] = i;
        }
      }
    }
  }
  StageSplit split;
  split.first_block.assign(stages + 1, 0);
  split.first_block[stages] = n;
  for (int s = stages - 1, j = n; s > 0; --s) {
    j = cut[s][j];
    split.first_block[s] = j;
  }
  return split;
}

StageSplit manual_split(const std::vector<int64_t>& cuts, int64_t num_blocks, int stages) {
  std::string spec;
  for (int64_t c : cuts) spec += (spec.empty() ? "" : ",") + std::to_string(c);
  if (static_cast<int>(cuts.size()) != stages - 1) {
    throw UsageError("--pp-split " + spec + " has " + std::to_string(cuts.size()) + " cut(s); " +
                     std::to_string(stages) + " stages need " + std::to_string(stages - 1));
  }
  StageSplit split;
  split.first_block.push_back(0);
  for (int64_t first : cuts) {
    if (first <= split.first_block.back() || first >= num_blocks) {
      throw UsageError("--pp-split " + spec + ": every cut must be a block index above the previous one and below " +
                       std::to_string(num_blocks) + " (so that no stage is empty)");
    }
    split.first_block.push_back(first);
  }
  split.first_block.push_back(num_blocks);
  return split;
}

}  // namespace ddx::train
