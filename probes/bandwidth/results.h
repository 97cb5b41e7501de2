#pragma once
// What a sweep measured, as rank 0 assembles it from every rank's numbers: one Row per table
// line, with nccl-tests' columns plus ddx's per-rank and per-iteration figures.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bandwidth/stats.h"
#include "bandwidth/types.h"

namespace ddx::bw {

struct PlacementResult {
  bool measured = false;        // false: not run (alltoall and sendrecv have no in-place)
  double time_us = 0;           // mean over ranks of each rank's mean op time (nccl-tests -a 1)
  double algbw = 0, busbw = 0;  // GB/s from time_us
  bool checked = false;         // false: #wrong is N/A (-c 0)
  int64_t wrong = 0;            // wrong elements summed over ranks
  int first_wrong_rank = -1;
  int64_t first_wrong_index = -1;
  double got = 0, expected = 0;
  std::vector<double> rank_time_us;  // each rank's mean op time
  int slowest_rank = 0;
  std::vector<double> iter_us;  // per iteration, the slowest rank's time
  IterStats iter;               // over iter_us
};

struct Row {
  Collective collective = Collective::AllReduce;
  DataType type = DataType::Float;
  RedOp op = RedOp::None;
  int root = -1;                // -1 for rootless ops, as nccl-tests prints
  size_t size = 0;              // bytes (nccl-tests' size column)
  size_t count = 0;             // elements (the op's count)
  PlacementResult out_of_place, in_place;
};

struct RankInfo {
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  std::string host;
  int device = 0;
  std::string bus_id;
  std::string device_name;
};

// "host vm local rank 2" style label for reports.
std::string describe(const RankInfo& r);

struct SweepReport {
  std::string engine;
  int nranks = 1;
  std::vector<RankInfo> ranks;
  std::vector<Row> rows;
  std::vector<std::string> notes;  // e.g. "Reducing maxBytes to ... due to memory limitation"
  size_t max_bytes = 0;            // after any reduction
};

// Pairwise mode: one exchange per pair of ranks, in disjoint rounds.
struct PairMeasurement {
  int a = 0, b = 0;
  double time_us = 0;   // the slower side's mean exchange time
  double gbs = 0;       // bytes per direction / time
  int64_t wrong = 0;
};

struct PairReport {
  std::string engine;
  int nranks = 0;
  size_t bytes = 0;
  int iters = 0;
  std::vector<RankInfo> ranks;
  std::vector<PairMeasurement> pairs;
  std::vector<std::vector<double>> matrix;  // GB/s, symmetric, diagonal 0
  double median_gbs = 0;
  std::vector<PairMeasurement> slow_links;
  std::vector<std::pair<int, double>> slow_ranks;  // rank, its median link GB/s
  // Links that looked slow with the round's other pairs running and were measured again alone:
  // (link, GB/s in the rounds); the link's own figure is then the better of the two.
  std::vector<std::pair<PairMeasurement, double>> rechecked;
  int64_t wrong = 0;
};

}  // namespace ddx::bw
