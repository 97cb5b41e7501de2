#pragma once
// Two safetensors files of the same named tensors compared tensor by tensor: the parity suite's
// step-1 gradients and final weights (curves.h's compare_runs). The one part of the suite that
// reads tensors, so the only one compiled against LibTorch; this header needs none.
#include <string>

namespace ddx::parity {

struct TensorFilesDiff {
  // A tensor of the baseline that the run's file lacks or holds in another shape ("" if none);
  // nothing after it was compared.
  std::string missing;
  // The worst tensor by max |run - baseline| / max |baseline| (a tensor whose baseline is all
  // zero must be all zero too, else infinite), and its name; infinite, naming it, at the first
  // tensor whose difference is not finite.
  double worst_rel = 0;
  std::string worst_name;
  // Over all tensors: the largest |run - baseline| and the largest |baseline| element.
  double max_abs_diff = 0;
  double max_abs_baseline = 0;
};

// Throws std::runtime_error naming the file when one cannot be read.
TensorFilesDiff diff_tensor_files(const std::string& baseline_path, const std::string& run_path);

}  // namespace ddx::parity
