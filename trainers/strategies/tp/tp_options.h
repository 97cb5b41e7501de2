#pragma once
// Tensor parallelism's own flag, read by tp and 2d (the degree, --tp, is a layout flag:
// parallel_dims.h). No LibTorch.
namespace CLI {
class App;
}

namespace ddx::train {

struct TpOptions {
  bool sequence_parallel = false;  // norms and residuals on sequence slices
};

// Adds --sequence-parallel to `ddx train`, bound to `options`.
void add_sequence_parallel_flag(CLI::App& cmd, TpOptions& options);

}  // namespace ddx::train
