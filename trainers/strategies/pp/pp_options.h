#pragma once
// The pipeline's own flags (`ddx train --strategy pp`; its degree, --pp, is a layout flag:
// parallel_dims.h). No LibTorch.
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ddx::train {

struct PpOptions {
  std::vector<int64_t> split;       // first block of each stage after the first ([]: balanced)
  std::string schedule = "1f1b";    // gpipe | 1f1b | interleaved-1f1b
  int64_t virtual_stages = 1;       // stages per rank (interleaved-1f1b)
  int64_t microbatches = 1;         // pipeline micro-batches per -b batch
  std::string trace;                // schedule picture (SVG)
};

// Adds the pipeline's flags after --pp, bound to `options`.
void add_pp_flags(CLI::App& cmd, PpOptions& options);

// What can be checked before any rank starts (the world- and model-dependent checks are
// parallel_dims.cpp's and pp_pipeline.cpp's). Throws UsageError naming the flag.
void check_pp_options(const PpOptions& options, int64_t batch_size);

}  // namespace ddx::train
