#pragma once
// The training loop shared by every strategy: rendezvous, model config agreement, data,
// global-token loss normalisation, gradient accumulation, schedule, clipping, metrics,
// checkpoints and resume, preemption signals.
#include "observe/step_profiler.h"
#include "train/train_options.h"

namespace ddx::train {

// Runs `ddx train` on this rank; returns the exit code. `profile`: --profile's window of steps.
int run_training(TrainOptions options, const ProfileOptions& profile = {});

}  // namespace ddx::train
