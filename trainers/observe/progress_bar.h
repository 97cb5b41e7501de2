#pragma once
// A one-line progress bar on stderr, redrawn in place, only when stderr is a terminal (logs
// and CI output stay clean).
#include <cstdint>
#include <string>

namespace ddx::train {

class ProgressBar {
 public:
  ProgressBar(int64_t total_steps, bool enabled);
  void update(int64_t step, double loss, double tokens_per_s);
  void finish();

 private:
  int64_t total_;
  bool enabled_;
  double start_;
  int64_t first_step_ = -1;
};

}  // namespace ddx::train
