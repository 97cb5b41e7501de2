#pragma once
// Adds the wall time of a scope to a phase's seconds. On CUDA it synchronizes the device on
// entry and exit (as the guide's timer does), so kernels are charged to the phase that
// launched them; on CPU, ops are synchronous anyway.
#include <torch/torch.h>

#include <chrono>

namespace ddx::train {

class PhaseTimer {
 public:
  PhaseTimer(double& seconds, torch::Device device) : seconds_(seconds), device_(device) {
    sync();
    start_ = std::chrono::steady_clock::now();
  }
  ~PhaseTimer() {
    sync();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  void sync() {
    if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  }
  double& seconds_;
  torch::Device device_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ddx::train
