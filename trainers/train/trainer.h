#pragma once
// The training loop shared by every strategy: rendezvous, model config agreement, data,
// global-token loss normalisation, gradient accumulation, schedule, clipping, metrics,
// checkpoints and resume, preemption signals.
#include "train/train_options.h"

namespace ddx::train {

// Runs `ddx train` on this rank; returns the exit code.
int run_training(TrainOptions options);

}  // namespace ddx::train
