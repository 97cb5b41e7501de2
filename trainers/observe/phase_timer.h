#pragma once
// Adds the wall time of a scope to a phase's seconds. On CUDA it synchronizes the device on
// entry and exit (as the guide's timer does), so kernels are charged to the phase that
// launched them; on CPU, ops are synchronous anyway. With `profile_scope` (profile_report.h)
// the scope is also recorded for `ddx train --profile`; that costs nothing while no profiler runs.
#include <torch/torch.h>

#include <chrono>

#include "observe/profile_report.h"

namespace ddx::train {

class PhaseTimer {
 public:
  PhaseTimer(double& seconds, torch::Device device, const char* profile_scope = nullptr)
      : seconds_(seconds), device_(device), scope_(at::RecordScope::USER_SCOPE) {
    if (profile_scope && scope_.isActive()) {
      at::detail::record_function_with_scope(scope_, profile_scope, c10::ArrayRef<const c10::IValue>{});
    }
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
  at::RecordFunction scope_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ddx::train
