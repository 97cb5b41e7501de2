#pragma once
// The straggler warning of `ddx train` (no LibTorch: unit-tested on synthetic series).
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace ddx::train {

// The straggler warning: a rank whose mean busy time per step (step minus time waiting in
// collectives) over a window is more than `factor` times the median rank's. The window holds at
// least `min_steps` logged steps and spans at least `min_seconds`: on a host shared with other
// work the scheduler leaves one rank 2-3x behind for a hundred milliseconds at a time (several
// 5 ms steps in a row), and evens it out over a second or two (docs/thresholds.md); a rank that
// is really slow stays slow over any window.
class StragglerWatch {
 public:
  StragglerWatch(double factor, int min_steps, double min_seconds)
      : factor_(factor), min_steps_(min_steps), min_seconds_(min_seconds) {}
  // One logged step's busy seconds per global rank, at `now_s` (a steady clock); the warning
  // line when a rank first crosses the factor over a full window (once, until it falls back
  // under), else "".
  std::string observe(int64_t step, const std::vector<double>& busy_s, double now_s);

 private:
  struct Sample {
    double at_s;
    std::vector<double> busy_s;
  };
  double factor_;
  int min_steps_;
  double min_seconds_;
  std::deque<Sample> window_;
  bool warned_ = false;
};

}  // namespace ddx::train
