#pragma once
// The harness under every per-rank probe (`ddx probe compute`, `ddx probe memory`), as
// nccl-tests' common.cu is under its collectives: a probe is a list of kernels, each a piece of
// work of known size (FLOPs, bytes); the harness times every kernel on every rank, a barrier
// before each trial (on CPU the ranks of one host take turns), repeats the trials, gathers the figures on rank 0,
// names the slow ranks and hosts (rank_judge.h), prints the table and writes the JSON. Exit 1
// when a rank or host is named. Adding a probe: its kernels plus one add_rank_probe_command.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ddx/subcommand.h"
#include "node/rank_judge.h"

namespace ddx::node {

// Where a probe's kernels run: this rank's GPU (local rank modulo the visible GPUs) or the CPU.
struct Placement {
  bool cuda = false;
  int device_index = 0;
};

struct Kernel {
  Metric metric;
  double work = 0;               // per run, in the metric's unit times `scale` (FLOPs, bytes)
  double scale = 1;              // 1e12 for TFLOP/s, 1e9 for GB/s
  std::function<void()> run;     // one run; asynchronous on a GPU (the harness synchronizes)
};

struct ProbeSettings {
  int trials = 7;
  double margin = -1;            // <0: 0.25 on CPU (2 cores shared by 2 ranks are noisy), 0.10 on GPU
  double min_trial_s = 0.05;     // a trial repeats its kernel at least this long
  std::string device = "auto";
  bool concurrent = false;       // CPU: all ranks of a host at once instead of in turns
  std::string json_path;
  double timeout_s = 300;
};

// One trial of `kernel`: runs it until min_trial_s has passed (at least once, synchronizing a
// GPU after each run) and returns its rate in the metric's unit. `ddx health` times the kernels
// below with it.
double time_trial(const Kernel& kernel, const Placement& where, double min_trial_s);

// The kernels of `ddx probe compute` (compute_probe.cpp): n x n matmuls per dtype; empty sizes
// or dtypes take that probe's defaults for the placement.
std::vector<Kernel> compute_kernels(const Placement& where, const std::vector<int64_t>& sizes,
                                    const std::vector<std::string>& dtypes);
// The kernels of `ddx probe memory` (memory_probe.cpp): STREAM copy and triad over arrays of
// `array_bytes`, plus host<->device copies from pinned memory on a GPU.
std::vector<Kernel> memory_kernels(const Placement& where, size_t array_bytes);

// Registers `ddx probe <name>`. `add_flags` adds the probe's own options to the subcommand;
// `make_kernels` builds the kernels once the placement is known (after those options are read).
cli::Subcommand add_rank_probe_command(CLI::App& probe, const std::string& name, const std::string& description,
                                  const std::function<void(CLI::App&)>& add_flags,
                                  const std::function<std::vector<Kernel>(const Placement&)>& make_kernels);

}  // namespace ddx::node
