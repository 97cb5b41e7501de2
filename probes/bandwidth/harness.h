#pragma once
// The measurement loop shared by every engine, modelled on nccl-tests' TimeTest: per size,
// out-of-place then in-place; warm-up, one untimed op and a barrier; `iters` timed ops under a
// host timer; then `check` iterations on fresh exactly-known data. Every rank sends its numbers
// to rank 0 through the Coordinator (never through the library under test), and rank 0 builds
// the rows: the mean over ranks (nccl-tests' default) plus per-rank and per-iteration figures.
#include <functional>

#include "bandwidth/engine.h"
#include "bandwidth/options.h"
#include "bandwidth/results.h"
#include "bandwidth/watchdog.h"

namespace ddx::bw {

// Rank 0 hears about each collective's start and each row as soon as it is measured, so the
// table streams like nccl-tests' does.
struct SweepListener {
  std::function<void(const SweepReport&)> started;  // after devices and memory are known
  std::function<void(Collective)> collective_begins;
  std::function<void(const Row&)> row;
  std::function<void(Collective)> collective_ends;
};

// Runs the sweep on every rank; the returned report is complete on rank 0 only.
SweepReport run_sweep(Engine& engine, Coordinator& coord, const BandwidthOptions& options,
                      Watchdog& watchdog, const RankInfo& me, const SweepListener& listener);

// Runs the pairwise matrix on every rank; the returned report is complete on rank 0 only.
PairReport run_pairs(Engine& engine, Coordinator& coord, const BandwidthOptions& options,
                     Watchdog& watchdog, const RankInfo& me);

// The size every buffer gets: -e, reduced to what every rank can hold. Sets `note` when reduced.
size_t fit_max_bytes(size_t wanted, const std::vector<size_t>& budgets, std::string* note);

}  // namespace ddx::bw
