#pragma once
// The parity self-test's planted bugs as the strategies and the loop see them, so the suite can prove it
// catches each kind of bug. They are fault kinds (faults/kinds/planted_bugs.cpp), set like any
// fault with DDX_FAULT (never a --help flag), e.g. DDX_FAULT='scale-grad@rank=1,factor=1.001':
//   local-mean                    normalise each rank's loss by its own token count, then average
//                                 over ranks: the mean-of-means bug (wrong only when counts differ)
//   scale-grad@rank=R,factor=F    multiply data-parallel rank R's gradients by F before they are
//                                 reduced (DDP, FSDP, the pipeline's replicas)
//   scale-grad-element@factor=F   after DDP's all-reduce, multiply the largest-magnitude element of
//                                 the first parameter's gradient by F on every rank (a reduction
//                                 wrong in one element: only the step-1 gradient check sees 1+1e-4)
//   lr-scale@factor=F             DDP's optimizer runs at the learning rate times F
//   skip-bucket@bucket=K          never all-reduce DDP bucket K (every rank keeps its local gradient)
//   fsdp-double-divide            divide FSDP's reduce-scattered gradients by the world size twice
//   tp-no-input-reduce            leave out TP's all-reduce of column-parallel input gradients (the f
//                                 operator's backward): each rank keeps only its heads' contribution
//   sp-no-replicated-reduce       under sequence parallelism, leave out the TP-group sum of the
//                                 replicated parameters' gradients (layer norms, biases): the
//                                 Megatron-SP bug, each rank keeping its sequence slice's part
//   pp-double-microbatch          the pipeline's last stage runs micro-batch 0's backward twice, so
//                                 that micro-batch's gradient is counted twice on every stage
#include <string>

namespace ddx::train {

struct PlantedBugs {
  bool local_mean = false;
  int scale_grad_rank = -1;
  double scale_grad_factor = 1.0;
  double scale_grad_element_factor = 1.0;
  double lr_factor = 1.0;
  int skip_bucket = -1;
  bool fsdp_double_divide = false;
  bool tp_no_input_reduce = false;
  bool sp_no_replicated_reduce = false;
  bool pp_double_microbatch = false;
};

// Read once from the process's faults (faults/faults.h), which announce() has already checked.
const PlantedBugs& planted_bugs();

}  // namespace ddx::train
