#pragma once
// Runs the worker group to completion: start, watch, stop on the first failure or on a signal
// to the launcher, restart up to --max-restarts times, report. torchelastic's semantics: a
// failure of any worker restarts the whole group.
#include "launcher/launch_options.h"

namespace ddx::launcher {

// Returns the launcher's exit code: 0 when every worker of some attempt exited 0; 1 when the
// last attempt failed; 128 + signo when the launcher was told to stop by SIGINT/SIGTERM/SIGHUP.
// `options` must have passed validate(). Call on the main thread before starting any other.
int run_supervised(const LaunchOptions& options);

}  // namespace ddx::launcher
