#pragma once
// Everything `ddx probe bandwidth` can be asked, with nccl-tests' defaults.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "bandwidth/types.h"

namespace ddx::bw {

struct BandwidthOptions {
  std::string engine = "auto";  // auto (nccl with a GPU, else gloo) | gloo | mpi | nccl
  std::vector<Collective> collectives{Collective::AllReduce};
  std::vector<DataType> types{DataType::Float};
  std::vector<RedOp> ops{RedOp::Sum};
  size_t min_bytes = 32u << 20;
  size_t max_bytes = 32u << 20;
  double step_factor = 1;        // > 1 wins over step_bytes
  size_t step_bytes = 1u << 20;
  int iters = 20;
  int warmup_iters = 1;
  int check_iters = 1;           // 0: no check, #wrong prints N/A
  bool check_timed = false;      // also check the last timed out-of-place iteration's output
  int root = 0;                  // -1: every root
  int blocking = 0;              // -z 0..3
  double timeout_s = 300;        // 0: none
  std::string json_path, csv_path, plot_path;
  std::optional<double> min_busbw;  // GB/s; fails the run when the average is below
  bool pairs = false;               // pairwise sendrecv matrix instead of the sweep
  double pair_min_gbs = 0;          // flag links below this (0: off)
  double pair_fraction = 0.5;       // flag links below this fraction of the median link
  std::vector<std::string> args;    // the command line, for JSON
};

// Throws UsageError naming the flag when options contradict each other or the world size.
void validate(const BandwidthOptions& o, int world_size);

}  // namespace ddx::bw
