#include "observe/top_progress.h"

#include <unistd.h>

#include <filesystem>

#include "ddx/rendezvous/job_file.h"
#include "observe/metrics.h"

namespace ddx::train {

TopProgress::TopProgress(Watchdog& watchdog, int64_t total_steps) : watchdog_(watchdog) {
  progress_.total_steps = total_steps;
}

void TopProgress::step_done(int64_t step, int64_t local_tokens, double step_s, double comm_wait_s) {
  progress_.step = step;
  progress_.tokens_per_s = static_cast<double>(local_tokens) / step_s;
  progress_.step_ms = step_s * 1e3;
  progress_.comm_wait_ms = comm_wait_s * 1e3;
  progress_.total_step_s += step_s;
  progress_.total_comm_wait_s += comm_wait_s;
  progress_.rss_bytes = host_memory().rss_bytes;
  progress_.unix_ms = unix_now_ms();
  watchdog_.set_train_progress(progress_);
}

void announce_job(const RendezvousInfo& info, const std::string& metrics_path) {
  const std::filesystem::path folder = std::filesystem::path(metrics_path).parent_path();
  write_job_file(folder.empty() ? "." : folder.string(),
                 {info.master_addr, info.master_port, info.world_size, info.hostname, static_cast<int>(::getpid()),
                  unix_now_ms()});
}

}  // namespace ddx::train
