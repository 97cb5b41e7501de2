#pragma once
// A fault kind: its name, what it breaks, and what it does at the injection points. The
// injection points (faults.h) are called by the training loop (at_step), by the collective layer
// through its hook (runtime/include_torch/ddx/collectives.h) and by the probe engines that bypass it
// (before_collective); each calls only the kinds whose spec targets this rank, step and attempt.
// Some kinds act nowhere here: their code is the place they break (planted parity bugs in the
// strategies, host-memory in the bandwidth probe), which asks faults::find() for them.
//
// Adding a kind: one file in faults/kinds/ defining `const Kind& <name>_kind()`, and one line in
// faults/kinds.cpp. No LibTorch here: the probes without LibTorch use the same kinds.
#include <cstdint>
#include <string>
#include <vector>

#include "faults/fault_spec.h"

namespace ddx::faults {

// A collective about to run, as the collective layer or a probe engine describes it. A kind
// sets the flags; the caller, who owns the buffers, carries them out.
struct CollectiveCall {
  std::string op;              // record name: all_reduce, all_gather, send, recv, ...
  std::string result_op;       // whose result is written: op, or recv for a probe's sendrecv
  bool corrupt_result = false;  // add 1 to element 0 of the result once it completes
  bool skip = false;            // leave the op out on this rank (no sequence number, nothing sent)
  bool drop_last_element = false;  // launch it with one element fewer than the other ranks
};

class Kind {
 public:
  virtual ~Kind() = default;
  virtual std::string name() const = 0;
  // process, communication, compute, storage, memory, planted bug (parity self-test), test
  virtual std::string category() const = 0;
  virtual std::string summary() const = 0;
  // Keys accepted besides rank, step and attempt.
  virtual std::vector<std::string> keys() const { return {}; }
  // Checks the values of the keys (UsageError through spec.fail).
  virtual void check(const FaultSpec&) const {}
  // Start of training step `step` (1-based) on a targeted rank.
  virtual void at_step(const FaultSpec&, int64_t /*step*/) const {}
  // Before a collective is launched on a targeted rank during a targeted step; only kinds that
  // say acts_on_collectives are asked.
  virtual bool acts_on_collectives() const { return false; }
  virtual void before_collective(const FaultSpec&, CollectiveCall&) const {}
  // A checkpoint's files are written into `staging` on a targeted rank but it is not complete.
  virtual void during_checkpoint(const FaultSpec&, const std::string& /*staging*/) const {}
  // Rank 0 has completed checkpoint `folder` (renamed into place).
  virtual void after_checkpoint(const FaultSpec&, const std::string& /*folder*/) const {}
};

// Every kind, in the order docs/faults.md lists them.
const std::vector<const Kind*>& kinds();
// nullptr when unknown.
const Kind* find_kind(const std::string& name);
// "kill, segfault, ..." for error messages.
std::string kind_names();

}  // namespace ddx::faults
