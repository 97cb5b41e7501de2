#pragma once
// The collective layer: the only way ddx code talks to c10d. Every call goes through one
// interposition point that builds an OpRecord (group, sequence number, op, dtype, numel, peer,
// timestamps) and tells the observers (flight recorder, timers, tests) and hooks (fault
// injection), so those plug in without touching callers.
//
// Ranks in this API (root, peer) are ranks within the group. Operations are asynchronous:
// each returns a Work that must be waited on before the result is read.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddx/watchdog/op_record.h"
#include "ddx/process_group.h"

namespace ddx {

// Avg is SUM followed by a local division on backends without a native average (Gloo).
enum class ReduceOp { Sum, Avg, Max, Min, Product };
const char* to_string(ReduceOp op);

// A collective that failed or timed out; what() names the op, group, sequence and backend.
class CollectiveError : public std::runtime_error {
 public:
  CollectiveError(const std::string& what, OpRecord record)
      : std::runtime_error(what), record_(std::move(record)) {}
  const OpRecord& record() const { return record_; }

 private:
  OpRecord record_;
};

// Handle to an operation in flight.
class [[nodiscard]] Work {
 public:
  struct State;
  Work() = default;
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Blocks until done, then applies the local part of the op (Avg's division, Gloo's
  // reduce-scatter sum). Throws CollectiveError on failure or timeout. Idempotent.
  void wait();
  bool completed() const;
  // A snapshot of the op's record.
  OpRecord record() const;

 private:
  std::shared_ptr<State> state_;
};

// A label stored in the records of every op launched while it is alive on this thread, e.g.
// CallSite site("step 12 backward bucket 3"). Nested labels replace the outer one.
class CallSite {
 public:
  explicit CallSite(std::string label);
  ~CallSite();
  CallSite(const CallSite&) = delete;
  CallSite& operator=(const CallSite&) = delete;
  static const std::string& current();

 private:
  std::string previous_;
};

Work all_reduce(Group& group, at::Tensor& tensor, ReduceOp op = ReduceOp::Sum);
Work broadcast(Group& group, at::Tensor& tensor, int root);
// The result is valid on `root` only.
Work reduce(Group& group, at::Tensor& tensor, int root, ReduceOp op = ReduceOp::Sum);
// `output` holds group.size() blocks of input.numel() elements, block r from group rank r.
Work all_gather(Group& group, at::Tensor& output, const at::Tensor& input);
// `input` holds group.size() blocks of output.numel() elements; block r is reduced into rank
// r's output.
Work reduce_scatter(Group& group, at::Tensor& output, const at::Tensor& input,
                    ReduceOp op = ReduceOp::Sum);
// Splits are along dim 0, one entry per group rank; empty means equal splits.
Work all_to_all(Group& group, at::Tensor& output, const at::Tensor& input,
                std::vector<int64_t> output_splits = {}, std::vector<int64_t> input_splits = {});
Work send(Group& group, const at::Tensor& tensor, int dst, int tag = 0);
Work recv(Group& group, at::Tensor& tensor, int src, int tag = 0);
Work barrier(Group& group);
// Gloo's monitored barrier: rank 0 waits for each rank in turn and the error names every rank
// that did not arrive within `timeout`. Blocking. The best liveness probe on CPU.
void monitored_barrier(Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks = true);

// Something that may act on tensors around each op: fault injection and test-only
// perturbations. Runs on the calling thread; `tensors` are the op's inputs (before) or
// outputs (after wait).
class CollectiveHook {
 public:
  virtual ~CollectiveHook() = default;
  virtual void before_launch(OpRecord& record, std::vector<at::Tensor>& inputs) {}
  virtual void after_wait(const OpRecord& record, std::vector<at::Tensor>& outputs) {}
};
void add_collective_hook(CollectiveHook* hook);
void remove_collective_hook(CollectiveHook* hook);

// "float32", "bfloat16", ... (the names the records and reports use).
std::string dtype_name(c10::ScalarType type);

}  // namespace ddx
