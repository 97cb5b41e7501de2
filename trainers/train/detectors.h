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

// --replica-check-freq: a checksum per parameter on every data-parallel replica, compared across
// `dp` (collective over it). The finding names the replica that differs from the majority and
// the first parameter where it does (both ranks when two replicas disagree: no majority).
std::string check_replicas(Strategy& strategy, Group& dp, int64_t step);

// The straggler warning: a rank whose busy time (step minus time waiting in collectives) is
// more than `factor` times the median rank's for `patience` logged steps in a row.
class StragglerWatch {
 public:
  StragglerWatch(double factor, int patience) : factor_(factor), patience_(patience) {}
  // One logged step's busy seconds per global rank; the warning line when a streak reaches
  // `patience` (once per streak), else "".
  std::string observe(int64_t step, const std::vector<double>& busy_s);

 private:
  double factor_;
  int patience_;
  int rank_ = -1;
  int streak_ = 0;
};

}  // namespace ddx::train
