#pragma once
// Hang detection for a job built on ddx::World, in one call: the flight recorder (records every
// op of the collective layer), the watchdog (timeouts, failures, dead peers, SIGUSR2/SIGTERM
// dumps) and, with check_collectives, the cross-rank fingerprint check. See docs/hangs.md.
//
//   auto world = ddx::World::init(info, pg_options);
//   auto hangs = ddx::HangDetection::install(*world, ddx::hang_options_from_env(ddx::current_env()));
//   ... train ...   // a hang now ends in <trace-dir>/ddx-fr-rank<R>.json on every rank
#include <memory>
#include <string>

#include "ddx/watchdog/flight_recorder.h"
#include "ddx/process_group.h"
#include "ddx/watchdog/watchdog.h"

namespace ddx {

class CollectiveHook;

class HangDetection {
 public:
  // Registers the recorder and starts the watchdog. Keep the result alive for the job; its
  // destructor unregisters everything. Options are validated (UsageError on bad ones).
  static std::unique_ptr<HangDetection> install(World& world, const HangOptions& options);
  ~HangDetection();
  HangDetection(const HangDetection&) = delete;
  HangDetection& operator=(const HangDetection&) = delete;

  FlightRecorder& recorder() { return *recorder_; }
  Watchdog& watchdog() { return *watchdog_; }
  // Dumps now and returns the path ("" without a trace dir).
  std::string dump(const std::string& reason) { return watchdog_->dump(reason); }

 private:
  HangDetection() = default;
  std::unique_ptr<FlightRecorder> recorder_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<CollectiveHook> fingerprint_check_;
};

}  // namespace ddx
