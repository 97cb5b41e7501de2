#pragma once
// Turns successive reads of the ranks' heartbeats (and of the nodes) into what `ddx top`
// shows and the alarms it raises. Pure logic over given clocks, so tests feed it recorded
// heartbeats and times. No LibTorch.
//
// Alarms:
//   stalled     a rank's heartbeat stopped (no new one for --stall-after) while others go on:
//               a frozen or dead process, named with its last collective
//   missing     a rank below the world size never published a heartbeat
//   silent      no rank's heartbeat changes any more (the job ended or its store host froze)
//   behind      heartbeats alive, no rank stalled, no rank's step moves, and this rank is short
//               of the collective the others wait in and waits in none of that group itself: the
//               hang's culprit, before the watchdog's timeout
//   straggler   time per step outside collectives above --straggler-factor x the median. In
//               synchronous training every rank's wall step time is the same (the fast ones
//               wait in collectives), so the compute part is what tells the slow rank apart.
//   power_drop, processes_drop, memory_near_limit   per node, against its recent past
//   host_problem  a polled host's ssh failed or printed lines that are not nvidia-smi's
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "top/top_model.h"

namespace ddx::top {

struct MonitorOptions {
  std::chrono::milliseconds stall_after{0};  // 0: twice the heartbeat interval the ranks publish
  double straggler_factor = 1.5;
  double memory_alarm = 0.95;                // fraction of a GPU's (or the host's) memory
  int window_polls = 5;                      // refreshes the compute time is averaged over
  int history = 40;                          // tokens/s values kept per rank (the sparkline)
};

class JobMonitor {
 public:
  explicit JobMonitor(MonitorOptions options) : options_(options) {}

  // One refresh of the job: fills screen.ranks and screen.world_size and appends the rank
  // alarms. `now_steady_ms` orders refreshes; `now_unix_ms` is compared with the heartbeats'
  // wall-clock times (hosts' clocks are assumed in sync, as ddx doctor checks).
  void observe_job(const std::map<int, std::string>& heartbeats, int world_size, int64_t now_steady_ms,
                   int64_t now_unix_ms, Screen& screen);
  // Node alarms of screen.nodes against the previous refreshes.
  void observe_nodes(Screen& screen);

 private:
  struct Sample {
    int64_t steady_ms = 0, step = 0;
    double total_step_s = 0, total_comm_s = 0;
  };
  struct Track {
    int polls = 0;  // refreshes that saw a heartbeat of this rank
    uint64_t counter = 0;
    int64_t counter_changed_ms = 0;
    int64_t step = -1;
    int64_t step_changed_ms = 0;
    std::deque<Sample> window;
    std::deque<double> tokens;
  };
  // What one refresh of the job has found so far, handed from one alarm family to the next.
  struct Refresh {
    int world_size = 0;
    int64_t now_steady_ms = 0, now_unix_ms = 0;
    int64_t interval_ms = 1000;  // the ranks' heartbeat interval, as they publish it
    int64_t stall_ms = 0;
    std::vector<RankRow> rows;
    std::map<int, nlohmann::json> docs;  // the heartbeats that parsed
    std::vector<bool> stale;             // per rank
    int fresh = 0, stalled = 0;          // ranks with a live heartbeat; ranks flagged stalled
  };
  void read_rows(const std::map<int, std::string>& heartbeats, Refresh& f);
  void read_training(const nlohmann::json& train, int64_t now_steady_ms, Track& t, RankRow& row) const;
  void flag_stalled(Refresh& f, Screen& screen);
  void flag_behind(Refresh& f, Screen& screen);
  void flag_stragglers(Refresh& f, Screen& screen) const;

  struct NodeMemo {
    std::deque<double> power_pct;
    std::deque<int> gpu_processes, processes;
  };
  MonitorOptions options_;
  std::map<int, Track> tracks_;
  std::map<std::string, NodeMemo> nodes_;
};

}  // namespace ddx::top
