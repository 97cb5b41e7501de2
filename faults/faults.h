#pragma once
// The faults and test switches of this process, and the injection points that fire them. The
// set comes from DDX_FAULT (any ddx process: trainers, probes, the launcher's workers) and
// `ddx train --fault` (repeatable), both in the grammar of fault_spec.h. It is never silent:
// `announce` puts it on the process's first log line and `report_entry` into every report.
//
// Layering: faults depends on the runtime (logging, errors, the collective layer's hook), never
// the other way round. The runtime only offers a hook interface (ddx/collectives.h) that
// faults::install_collective_faults registers into, so ddx_core and ddx_dist stay free of faults.
#include <cstdint>
#include <string>
#include <vector>

#include "ddx/processes/env.h"
#include "faults/fault_spec.h"
#include "faults/kind.h"

namespace ddx::faults {

// A `--fault` value, kept until announce() parses it with DDX_FAULT (so a bad one is a usage
// error like any other, and every spec is on the first log line).
void add_flag_spec(const std::string& text);
// Parses DDX_FAULT and the --fault values (once), rejects the retired switches DDX_TEST_PERTURB,
// DDX_TEST_BREAK and DDX_TEST_HOST_MEMORY, and logs one warning naming every spec when any is
// set. Throws UsageError for bad input. Called by main before a command runs.
void announce();
// Every spec of this process, on any rank (parsed on first use when announce was not called).
const std::vector<FaultSpec>& all();
// Fixes this process's global rank and checks every spec's rank against the world (and, when
// max_step > 0, its step against the run's last step). UsageError listing the valid kinds.
void set_rank(int rank, int world_size, int64_t max_step = 0);
// The first spec of `kind` that targets this rank and attempt (any step), or nullptr.
const FaultSpec* find(const std::string& kind);
// The first spec of `kind` for any rank (planted bugs whose rank is a group rank), or nullptr.
const FaultSpec* find_any(const std::string& kind);
// Specs as written ("kill@rank=1,step=13"), for reports: empty when the process is clean.
std::vector<std::string> report_entry();
// "injected faults: ..." for a launcher's start line about `worker_argv` started with `env`, or
// "" when neither DDX_FAULT nor any --fault is set.
std::string launch_note(const EnvMap& env, const std::vector<std::string>& worker_argv);

// --- injection points ---
// The training loop, at the start of step `step` (1-based): process and compute faults.
void at_step(int64_t step);
// The step the last at_step call named (0 before training); collectives use it.
int64_t current_step();
// The first spec of `kind` that targets this rank, attempt and the current step, or nullptr:
// for the kinds whose code lives where the fault happens (nan, bitflip).
const FaultSpec* find_now(const std::string& kind);
// The training loop multiplies its loss scale by this before backward: 1, or NaN / +Inf when
// a nan fault fires (faults/kinds/nan.cpp), so every gradient of this rank goes non-finite
// through a real backward pass.
double gradient_factor();
// A collective about to launch on this rank; returns what the caller must do to its result.
// `result_op` names the op whose result is written when it differs (a sendrecv sends, then its
// result is a recv's); empty = op.
CollectiveCall before_collective(const std::string& op, const std::string& result_op = "");
// Replaces this process's specs, rank and attempt, as if parsed (unit tests of the injection point).
void reset_for_tests(std::vector<FaultSpec> specs, int rank, int attempt = 0);
// Logs "fault <spec> on rank R at step S: <what>" before a kind acts, so every log says which
// failure was planted and when.
void log_firing(const FaultSpec& spec, const std::string& what);
// The training loop's checkpoint: files written to `staging`, not yet complete (ckpt-torn,
// disk-full); then complete in `folder` (ckpt-corrupt, on rank 0 which completes it).
void during_checkpoint(const std::string& staging);
void after_checkpoint(const std::string& folder);
// Whether any spec could act on collectives of this rank (a cheap check for probe engines).
bool touches_collectives();

// Registers the collective-layer hook (faults/dist/, LibTorch) that calls before_collective
// and corrupts results, after set_rank(global_rank, world_size); a no-op when nothing targets
// this rank's collectives.
void install_collective_faults(int global_rank, int world_size);

}  // namespace ddx::faults
