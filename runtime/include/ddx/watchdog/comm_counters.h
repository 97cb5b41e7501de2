#pragma once
// Calls and bytes per group and op kind, counted by the collective layer as each op launches
// (collective_layer.cpp), for metrics and tests: "how much did this step move?". Plain data, no
// LibTorch.
//
// Bytes are nccl-tests' (and `ddx probe bandwidth`'s) "size" of a call: the full buffer of the
// collective on this rank: the tensor of all_reduce, broadcast, reduce, send and recv; the
// gathered output of all_gather (group size x the local input); the input of reduce_scatter
// (group size x the local output); the input of all_to_all; 0 for barriers. Multiplied by
// nccl-tests' bus factor (2(n-1)/n for all_reduce, (n-1)/n for all_gather and reduce_scatter)
// it is what a ring moves over each rank's link.
#include <cstdint>
#include <map>
#include <string>

#include "ddx/watchdog/op_record.h"

namespace ddx {

struct CommCount {
  int64_t calls = 0;
  int64_t bytes = 0;
};

// Group label -> op name ("all_reduce", ...) -> count. A label is the mesh dimension of a
// device-mesh group ("tp", "dp", "pp"; its slices add up), "world", or another group's name.
using CommCounts = std::map<std::string, std::map<std::string, CommCount>>;

// nccl-tests' size of the op in `record` (see above).
int64_t payload_bytes(const OpRecord& record);
// "dp2xtp2.tp.1" -> "tp" (DeviceMesh's group names); any other name is its own label.
std::string comm_label(const std::string& group_name);

// Adds one call of `record` (the collective layer calls this once per launch).
void count_op(const OpRecord& record);
// Everything counted in this process so far.
CommCounts comm_counts();
// after - before, keeping only entries with calls.
CommCounts comm_counts_since(const CommCounts& before, const CommCounts& after);
// Sum of bytes over every label and op.
int64_t total_bytes(const CommCounts& counts);

}  // namespace ddx
