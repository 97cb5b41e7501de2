#pragma once
// Pipeline schedules: the order in which one pipeline rank runs the forward and the backward of
// each (micro-batch, stage) it holds. A schedule only orders actions; the executor
// (pp_executor.h) turns each into compute plus the send/recv of activations and their
// gradients: a forward receives its input from the previous stage and sends its output on; a
// backward receives the output's gradient from the next stage and sends the input's gradient
// back. Sends never block and receives do, so a schedule is valid when, on every rank, each
// action's input has been sent by an earlier action of another rank (check_schedules() proves
// it by simulation). Adding a schedule is one small file and one line in pp_schedule.cpp.
// No LibTorch.
#include <string>
#include <vector>

namespace ddx::train {

// p ranks, each holding V stages ("chunks"): global stage s = chunk * p + rank (Megatron's
// "loop" placement), so stage s sends to the rank of stage s + 1, wrapping from p - 1 to 0.
struct PipeShape {
  int ranks = 1;           // p
  int virtual_stages = 1;  // V
  int microbatches = 1;    // m
  int rank = 0;            // this rank's position in the pipeline
  int stages() const { return ranks * virtual_stages; }
  int stage_of(int chunk) const { return chunk * ranks + rank; }
};

struct PipeAction {
  enum class Kind { Forward, Backward };
  Kind kind = Kind::Forward;
  int microbatch = 0;
  int chunk = 0;  // which of this rank's V stages
};
using PipeSchedule = std::vector<PipeAction>;

struct ScheduleKind {
  std::string name;         // the --pp-schedule value
  std::string description;  // for --help and docs
  PipeSchedule (*make)(const PipeShape&);
  bool interleaved = false;  // takes --pp-virtual-stages > 1 (and needs m divisible by p)
  // Fraction of the step each rank idles, with equal stage times and no communication cost.
  double (*theoretical_bubble)(const PipeShape&) = nullptr;
};

// The schedules in pp_gpipe.cpp, pp_1f1b.cpp and pp_interleaved_1f1b.cpp.
PipeSchedule gpipe_schedule(const PipeShape& shape);
PipeSchedule one_f_one_b_schedule(const PipeShape& shape);
PipeSchedule interleaved_1f1b_schedule(const PipeShape& shape);
double flush_bubble(const PipeShape& shape);        // (p - 1) / (m + p - 1): GPipe and 1F1B
double interleaved_bubble(const PipeShape& shape);  // (p - 1) / (V m + p - 1)

// The schedule called `name`; UsageError listing the names when there is none.
const ScheduleKind& find_schedule(const std::string& name);
// "gpipe, 1f1b, interleaved-1f1b"
std::string schedule_names();

// One measured interval of a rank's step (seconds since the step started on that rank); the
// executor records them, the schedule picture (pp_trace.h) draws them.
struct PipeEvent {
  enum class Kind { Forward = 0, Backward = 1, Send = 2, Recv = 3 };
  Kind kind = Kind::Forward;
  int microbatch = 0;
  int stage = 0;  // the stage that ran, or for Send/Recv the peer stage
  double begin_s = 0, end_s = 0;
};

// What a simulation of every rank's schedule found.
struct ScheduleCheck {
  bool ok = false;
  std::string problem;               // why not: a deadlock (naming the ranks' stuck actions), a
                                     // missing or repeated action, a backward before its forward
  std::vector<int> max_in_flight;    // per rank: most micro-batch stages forwarded, not yet backward
};
// Runs the schedules of all ranks of `shape` (its `rank` is ignored) with blocking receives and
// non-blocking sends.
ScheduleCheck check_schedules(const ScheduleKind& kind, PipeShape shape);

}  // namespace ddx::train
