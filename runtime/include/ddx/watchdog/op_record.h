#pragma once
// One record per collective or point-to-point call made through the collective layer. This is
// the common currency of the flight recorder, fault injection and timing: plain data, no LibTorch.
#include <cstdint>
#include <string>
#include <vector>

namespace ddx {

enum class OpType {
  AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Send, Recv, Barrier,
  MonitoredBarrier
};
const char* to_string(OpType op);

enum class OpState { Scheduled, Started, Completed, Failed };
const char* to_string(OpState state);

struct OpRecord {
  uint64_t id = 0;              // process-wide, increasing
  std::string group;            // "world", "dp", "tp/1" ...
  std::vector<int> group_ranks; // global ranks of the group's members, in group-rank order
  uint64_t seq = 0;             // per group; collectives and p2p count separately (p2p_seq)
  bool p2p = false;
  OpType op = OpType::AllReduce;
  std::string reduce_op;        // "sum", "max", ... ; empty when not a reduction
  std::string dtype;            // "float32", "bfloat16", ...
  std::vector<int64_t> in_shape;
  std::vector<int64_t> out_shape;
  int64_t numel = 0;            // elements sent by this rank
  int64_t bytes = 0;
  int peer = -1;                // root of rooted ops, peer of send/recv (group rank); -1 none
  std::string backend;          // "gloo", "nccl"
  std::string call_site;        // label set by the caller (CallSite) or empty
  OpState state = OpState::Scheduled;
  std::string error;            // set when Failed
  // Microseconds on the steady clock: when the caller asked, when the backend accepted it,
  // when it finished (0 = not yet).
  int64_t t_enqueue_us = 0;
  int64_t t_start_us = 0;
  int64_t t_end_us = 0;
};

// Steady-clock microseconds, the time base of OpRecord.
int64_t steady_now_us();

// Something that wants to see every operation: the flight recorder, timers, tests counting
// collectives. Callbacks run on the calling thread for on_enqueue/on_start and possibly on a
// backend thread for on_end; they must be quick and thread-safe.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_enqueue(const OpRecord&) {}
  virtual void on_start(const OpRecord&) {}
  virtual void on_end(const OpRecord&) {}  // state is Completed or Failed
};

// Observers are process-wide; registration is not expected on hot paths.
void add_op_observer(OpObserver* observer);
void remove_op_observer(OpObserver* observer);
void notify_enqueue(const OpRecord&);
void notify_start(const OpRecord&);
void notify_end(const OpRecord&);

}  // namespace ddx
