#pragma once
// The environment of one worker: the launcher's own plus torchrun's variables, so programs
// written for torchrun (and ddx's rendezvous) run unchanged under `ddx launch`.
#include <string>

#include "ddx/processes/env.h"
#include "launcher/launch_options.h"

namespace ddx::launcher {

struct WorkerSlot {
  int local_rank = 0;
  int rank = 0;
  int restart_count = 0;
  std::string error_file;  // this worker's TORCHELASTIC_ERROR_FILE for this attempt
};

// True when the launcher should set OMP_NUM_THREADS=1 (the user did not choose a value).
bool should_default_omp_threads(const EnvMap& launcher_env);

EnvMap worker_env(const EnvMap& launcher_env, const LaunchOptions& options, const WorkerSlot& slot);

}  // namespace ddx::launcher
