#pragma once
// The tables of `ddx train --profile`, computed from a profiler's events (no LibTorch here, so
// the accounting is unit-tested on hand-made events).
//
// Every event's self time (its duration minus its children's on the same thread) goes to
// exactly one row, so the rows add up to the profiled steps' wall time:
//   - the outermost ddx phase scope around it (ddx::data, ddx::forward, ddx::backward,
//     ddx::comm_wait, ddx::optimizer; anything else inside ddx::step is "other");
//   - within forward, the innermost layer-kind scope of the model (ddx::embedding,
//     ddx::attention, ddx::mlp, ddx::norm, ddx::head; ddx::block's own ops are the residual
//     adds; ddx::loss is a row of its own);
//   - within backward, the layer kind of the forward op whose autograd node runs: the
//     profiler gives both the same sequence number.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx::train {

// The scope names the trainer and the models record (RECORD_USER_SCOPE / PhaseTimer).
namespace profile_scope {
inline constexpr const char* kStep = "ddx::step";
inline constexpr const char* kData = "ddx::data";
inline constexpr const char* kForward = "ddx::forward";
inline constexpr const char* kBackward = "ddx::backward";
inline constexpr const char* kCommWait = "ddx::comm_wait";
inline constexpr const char* kOptimizer = "ddx::optimizer";
}  // namespace profile_scope

// One profiler event: an operator ("aten::mm"), an autograd node's backward
// ("autograd::engine::evaluate_function: MmBackward0") or a ddx scope.
struct ProfileEvent {
  std::string name;
  uint64_t thread = 0;
  int64_t start_ns = 0, end_ns = 0;
  int64_t sequence_nr = -1;  // links a forward op to the backward node it created (-1: none)
};

struct ProfileSummary {
  int64_t steps = 0;
  double step_ms = 0;  // mean wall time of a profiled step
  struct Row {
    std::string phase;  // "data", "forward.attention", "backward.mlp", "loss", "other", ...
    double ms = 0;      // per step
  };
  std::vector<Row> phases;  // in step order; every row present, zeros included
  struct Op {
    std::string name;
    double calls = 0;    // per step
    double self_ms = 0;  // per step
    std::string phase;   // the row where most of its time went
  };
  std::vector<Op> ops;  // by self time, largest first
};

ProfileSummary summarize_profile(const std::vector<ProfileEvent>& events);

// Milliseconds per step of a top-level phase ("forward" sums its layer kinds).
double phase_ms(const ProfileSummary& summary, const std::string& phase);

// The human table: phases with their layer kinds indented, then the `top_ops` costliest ops.
std::string profile_table(const ProfileSummary& summary, const std::string& title, size_t top_ops);

// The same numbers as JSON, for scripts (benchmarks/train_throughput.py --profile compares
// them with PyTorch eager's).
std::string profile_json(const ProfileSummary& summary);

}  // namespace ddx::train
