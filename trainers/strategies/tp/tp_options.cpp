#include "strategies/tp/tp_options.h"

#include <CLI/CLI.hpp>

namespace ddx::train {

void add_sequence_parallel_flag(CLI::App& cmd, TpOptions& o) {
  cmd.add_flag("--sequence-parallel", o.sequence_parallel,
               "Run norms and residuals on sequence slices: all-gather before and reduce-scatter after "
               "each tensor-parallel region instead of all-reduces")->group("Tensor parallel (tp)");
}

}  // namespace ddx::train
