#pragma once
// Test-only ways to break the trainer on purpose, so the parity suite can prove it catches
// each kind of bug. Driven by DDX_TEST_BREAK (never a --help flag), a comma-separated list of:
//   uneven-tokens        mask a position-dependent prefix of every sequence's labels, so ranks
//                        hold different token counts (a data property: applied to every run)
//   local-mean           normalise each rank's loss by its own token count, then average over
//                        ranks: the mean-of-means bug (wrong only when counts differ)
//   scale-grad:R:F       multiply rank R's gradients by F before they are reduced (DDP, FSDP)
//   skip-bucket:K        never all-reduce DDP bucket K (every rank keeps its local gradient)
//   fsdp-double-divide   divide FSDP's reduce-scattered gradients by the world size twice
//   tp-no-input-reduce   leave out TP's all-reduce of column-parallel input gradients (the f
//                        operator's backward): each rank keeps only its heads' contribution
//   pp-double-microbatch the pipeline's last stage runs micro-batch 0's backward twice, so that
//                        micro-batch's gradient is counted twice on every stage
#include <string>

namespace ddx::train {

struct TestBreaks {
  bool uneven_tokens = false;
  bool local_mean = false;
  int scale_grad_rank = -1;
  double scale_grad_factor = 1.0;
  int skip_bucket = -1;
  bool fsdp_double_divide = false;
  bool tp_no_input_reduce = false;
  bool pp_double_microbatch = false;
  bool any_bug() const {
    return local_mean || scale_grad_rank >= 0 || skip_bucket >= 0 || fsdp_double_divide || tp_no_input_reduce ||
           pp_double_microbatch;
  }
};

// Parsed once from the environment; UsageError naming DDX_TEST_BREAK when malformed.
const TestBreaks& test_breaks();

}  // namespace ddx::train
