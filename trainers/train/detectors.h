#pragma once
// Detectors of failures that do not crash anything (docs/faults.md): a non-finite gradient, a
// data-parallel replica whose weights drifted (a flipped bit, a corrupted all-reduce), a rank
// slower than the others. Each returns a finding naming the rank, or "" when all is well; the
// training loop decides what to do with it (skip, stop, warn).
#include <cstdint>
#include <string>
#include <vector>

namespace ddx {
class Group;
}

namespace ddx::train {

class Strategy;

// --nan-check: every rank looks at its own gradients after backward, before they are reduced
// (DDP reduces copies; with --grad-as-bucket-view or FSDP they may be reduced already, and every
// rank can then look guilty). Collective over `world`. The finding names the lowest rank with a
// non-finite gradient, its first such parameter in module order, and every rank that had one.
std::string check_gradients_finite(Strategy& strategy, Group& world, int64_t step);
// Zeroes this rank's gradients: the update of a step --nan-check skips.
void drop_gradients(Strategy& strategy);

// --replica-check-freq, after a step's update (collective over `world`): every copy of a parameter
// must be equal. A checksum per parameter is compared across the group that holds its copies
// (data-parallel replicas, tensor-parallel ranks for the replicated parameters); when some of
// this rank's storage has no copy (TP slices, FSDP rows), the full parameters every rank gathers
// are compared across the world too, which names a rank whose all-gather delivered something
// else. The finding names the rank that differs from the majority and the first parameter
// where it does (both sides when two disagree: no majority).
std::string check_replicas(Strategy& strategy, Group& world, int64_t step);

// The other half for storage without a copy: the checksums of this rank's own parameters as a
// check step's update wrote them, compared before the next update reads them, so a bit that
// flips in between (memory, not the math) is found on the rank that holds it.
class ParameterSeal {
 public:
  // After the update of `step`: remembers the checksums of the parameters without a copy.
  void record(Strategy& strategy, int64_t step);
  bool pending() const { return step_ > 0; }
  // Before the next update (collective over `world`, on every rank when pending): the first
  // rank and parameter whose storage changed, or "". Clears the seal.
  std::string verify(Strategy& strategy, Group& world, int64_t step);

 private:
  int64_t step_ = 0;
  std::vector<int64_t> sums_;
};

}  // namespace ddx::train
