#pragma once
// What one refresh of `ddx top` shows: the nodes, the ranks of the job and the alarms raised.
// Filled by the pollers (node_stats, ssh_hosts, job_monitor), drawn by top_render and the TUI.
// No LibTorch.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx::top {

struct GpuStats {
  int index = 0;
  std::string name;
  double util_pct = -1;       // -1: not reported
  double power_w = -1;
  double power_limit_w = -1;
  int64_t memory_used_bytes = -1;
  int64_t memory_total_bytes = -1;
  int processes = -1;         // compute processes on this GPU; -1: not known per GPU
};

struct NodeView {
  std::string host;
  std::string source;              // "nvml", "ssh", "heartbeats" (a host seen only through its ranks)
  std::vector<GpuStats> gpus;
  std::string gpu_note;            // why there are no GPU numbers ("no NVML: ...")
  int gpu_processes = -1;          // compute processes on the node's GPUs; -1: not known
  double load1 = -1;               // CPU load average over 1 min; -1: not known
  int cpus = 0;
  int64_t memory_total_bytes = 0;  // host memory; 0: not known
  int64_t memory_available_bytes = 0;
  int ranks = 0;                   // ranks of the job on this host
  int processes = -1;              // of them, processes alive; -1: not known
  int64_t rss_bytes = 0;           // their resident memory, summed
  std::vector<std::string> problems;  // ssh errors, malformed nvidia-smi lines (never counted)
};

struct RankRow {
  int rank = 0;
  std::string host;
  int pid = 0;
  bool has_heartbeat = false;
  bool has_train = false;
  int64_t step = 0, total_steps = 0;
  double tokens_per_s = 0;
  double step_ms = 0;            // the last step
  double comm_wait_ms = 0;       // of it, waiting for collectives
  double compute_ms = -1;        // per step outside collectives, averaged over the window; -1: unknown
  int64_t heartbeat_age_ms = -1;
  int64_t rss_bytes = 0;
  std::string last_op, last_op_state, in_flight_op;
  std::vector<double> tokens_history;  // oldest first
  bool stalled = false, straggler = false, behind = false;
};

struct Alarm {
  std::string kind;     // see job_monitor.h
  int rank = -1;        // the rank named, -1 for node alarms
  std::string host;
  std::string message;  // one line naming the culprit
  // Identifies the alarm across refreshes, for the event log's raised/cleared lines.
  std::string key() const { return kind + "/" + (rank >= 0 ? "rank" + std::to_string(rank) : host); }
};

struct Screen {
  int64_t unix_ms = 0;
  int poll = 0;                    // refreshes so far, from 1
  std::string job;                 // "127.0.0.1:29500" or "" without a job
  std::string job_error;           // the store could not be read this time
  int world_size = 0;
  std::vector<NodeView> nodes;
  std::vector<RankRow> ranks;
  std::vector<Alarm> alarms;
};

}  // namespace ddx::top
