// BlockSampler: which blocks each step trains on. The global batch of a step is a function of
// (seed, epoch, step, global batch size) only; ranks just take contiguous slices of it, so a
// run on N ranks consumes exactly the blocks of the single-device run, in the same steps.
#include <mutex>
#include <stdexcept>

#include "data/dataset.h"
#include "data/prng.h"
#include "ddx/errors/errors.h"

namespace ddx::data {

struct BlockSampler::EpochOrder {
  std::mutex mutex;
  int64_t epoch = -1;
  std::vector<uint32_t> order;
};

BlockSampler::BlockSampler(int64_t num_blocks, int64_t global_batch_size, uint64_t seed)
    : num_blocks_(num_blocks), global_batch_size_(global_batch_size), seed_(seed),
      cache_(std::make_shared<EpochOrder>()) {
  if (global_batch_size < 1) {
    throw UsageError("global batch size must be at least 1, got " + std::to_string(global_batch_size));
  }
  if (num_blocks > static_cast<int64_t>(UINT32_MAX)) {
    throw UsageError("dataset has " + std::to_string(num_blocks) + " blocks; ddx's sampler handles up to 2^32 - 1");
  }
  if (num_blocks < global_batch_size) {
    throw UsageError("the dataset has " + std::to_string(num_blocks) + " blocks, fewer than one global batch of " +
                     std::to_string(global_batch_size) + " (drop_last leaves no step); use a smaller batch or "
                     "sequence length, or more data");
  }
}

int64_t BlockSampler::steps_per_epoch() const { return num_blocks_ / global_batch_size_; }

std::pair<int64_t, int64_t> BlockSampler::locate(int64_t global_step) const {
  if (global_step < 0) throw std::out_of_range("negative global step " + std::to_string(global_step));
  return {global_step / steps_per_epoch(), global_step % steps_per_epoch()};
}

// Fisher-Yates from the top down with an epoch-specific stream. Seeds are mixed so that
// neighbouring (seed, epoch) pairs give unrelated streams.
const std::vector<uint32_t>& BlockSampler::order(int64_t epoch) const {
  // Called with cache_->mutex held.
  EpochOrder& c = *cache_;
  if (c.epoch == epoch && c.order.size() == static_cast<size_t>(num_blocks_)) return c.order;
  c.order.resize(static_cast<size_t>(num_blocks_));
  for (size_t i = 0; i < c.order.size(); ++i) c.order[i] = static_cast<uint32_t>(i);
  Prng rng(mix64(seed_ ^ mix64(static_cast<uint64_t>(epoch) + 0x6A09E667F3BCC909ull)));
  for (size_t i = c.order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.below(i));
    std::swap(c.order[i - 1], c.order[j]);
  }
  c.epoch = epoch;
  return c.order;
}

std::vector<int64_t> BlockSampler::global_batch(int64_t epoch, int64_t step_in_epoch) const {
  if (epoch < 0) throw std::out_of_range("negative epoch " + std::to_string(epoch));
  if (step_in_epoch < 0 || step_in_epoch >= steps_per_epoch()) {
    throw std::out_of_range("step " + std::to_string(step_in_epoch) + " outside an epoch of " +
                            std::to_string(steps_per_epoch()) + " steps");
  }
  std::lock_guard<std::mutex> lock(cache_->mutex);
  const std::vector<uint32_t>& o = order(epoch);
  const auto first = static_cast<size_t>(step_in_epoch * global_batch_size_);
  return std::vector<int64_t>(o.begin() + static_cast<std::ptrdiff_t>(first),
                              o.begin() + static_cast<std::ptrdiff_t>(first + static_cast<size_t>(global_batch_size_)));
}

std::vector<int64_t> BlockSampler::rank_batch(int64_t epoch, int64_t step_in_epoch, int rank, int world_size) const {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw UsageError("rank " + std::to_string(rank) + " of world size " + std::to_string(world_size) + " is not valid");
  }
  if (global_batch_size_ % world_size != 0) {
    throw UsageError("global batch size " + std::to_string(global_batch_size_) + " is not divisible by the world size " +
                     std::to_string(world_size));
  }
  const std::vector<int64_t> all = global_batch(epoch, step_in_epoch);
  const int64_t per_rank = global_batch_size_ / world_size;
  return std::vector<int64_t>(all.begin() + rank * per_rank, all.begin() + (rank + 1) * per_rank);
}

}  // namespace ddx::data
