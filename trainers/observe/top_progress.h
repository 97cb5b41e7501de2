#pragma once
// What `ddx top` sees of a training rank (docs/top.md): each step's numbers go into the
// watchdog's heartbeat (no second heartbeat), and rank 0 writes job.json in the run folder so
// `ddx top --run <run folder>` finds the store. No LibTorch.
#include <cstdint>
#include <string>

#include "ddx/rendezvous/rendezvous.h"
#include "ddx/watchdog/watchdog.h"

namespace ddx::train {

class TopProgress {
 public:
  TopProgress(Watchdog& watchdog, int64_t total_steps);
  // After step `step` (1-based): this rank's tokens, the step's seconds and the part of them
  // spent waiting for collectives.
  void step_done(int64_t step, int64_t local_tokens, double step_s, double comm_wait_s);

 private:
  Watchdog& watchdog_;
  TrainProgress progress_;
};

// Writes <folder of metrics_path>/job.json (rank 0 of a multi-rank job).
void announce_job(const RendezvousInfo& info, const std::string& metrics_path);

}  // namespace ddx::train
