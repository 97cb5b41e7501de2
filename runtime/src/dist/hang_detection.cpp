// Wires the flight recorder, the watchdog and the fingerprint check to a World.
#include "ddx/hang_detection.h"

#include <unistd.h>

#include <filesystem>

#include "ddx/collectives.h"
#include "ddx/processes/env.h"
#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "fingerprint_check.h"
#include "store_host.h"
#include "store_peer_channel.h"

namespace ddx {
namespace {

std::string job_id(const EnvMap& env) {
  for (const char* key : {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_orte_ess_jobid"}) {
    if (auto v = env_get(env, key); v && !v->empty()) return *v;
  }
  return "";
}

void validate(const HangOptions& o) {
  if (o.collective_timeout.count() <= 0) throw UsageError("--collective-timeout must be positive");
  if (o.buffer_size == 0) throw UsageError("--fr-buffer-size must be at least 1");
  if (!o.trace_dir.empty()) {
    // Checked now, created by the first dump: a run that never dumps leaves no empty folder.
    std::error_code ec;
    std::filesystem::path existing = std::filesystem::absolute(o.trace_dir, ec);
    while (!std::filesystem::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path()) {
      existing = existing.parent_path();
    }
    if (!std::filesystem::is_directory(existing, ec)) {
      throw UsageError("--trace-dir " + o.trace_dir + ": cannot create the directory (" + existing.string() +
                       " is not a folder)");
    }
    if (::access(existing.c_str(), W_OK) != 0) {
      throw UsageError("--trace-dir " + o.trace_dir + " is not writable");
    }
  }
}

}  // namespace

std::unique_ptr<HangDetection> HangDetection::install(World& world, const HangOptions& options) {
  validate(options);
  std::unique_ptr<HangDetection> h(new HangDetection());
  const RendezvousInfo& info = world.info();
  DumpContext me;
  me.rank = info.rank;
  me.local_rank = info.local_rank;
  me.world_size = info.world_size;
  me.host = info.hostname;
  me.pid = static_cast<int>(::getpid());
  me.job_id = job_id(current_env());

  h->recorder_ = std::make_unique<FlightRecorder>(options.buffer_size);
  // The heartbeat client must give up well before the heartbeat timeout.
  const auto store_timeout = std::max(std::chrono::milliseconds(1000), 2 * options.heartbeat_interval);
  std::unique_ptr<PeerChannel> channel;
  if (info.world_size > 1) {
    channel = detail::make_store_peer_channel(world.store(), store_timeout, detail::store_identity(info));
  }
  h->watchdog_ = std::make_unique<Watchdog>(*h->recorder_, options, me, std::move(channel));
  add_op_observer(h->recorder_.get());
  if (options.check_collectives && info.world_size > 1) {
    h->fingerprint_check_ =
        detail::make_fingerprint_check(world.store(), info.rank, options.collective_timeout,
                                       detail::store_identity(info));
    add_collective_hook(h->fingerprint_check_.get());
  }
  h->watchdog_->start();
  log::debug("hang detection: trace dir '", options.trace_dir, "', collective timeout ",
             format_duration(options.collective_timeout), ", on timeout ", to_string(options.on_timeout),
             ", ", options.buffer_size, " entries", options.check_collectives ? ", checking collectives" : "");
  return h;
}

HangDetection::~HangDetection() {
  if (fingerprint_check_) remove_collective_hook(fingerprint_check_.get());
  if (watchdog_) watchdog_->stop();
  if (recorder_) remove_op_observer(recorder_.get());
}

}  // namespace ddx
