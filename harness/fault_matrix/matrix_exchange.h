#pragma once
// Across nodes, what the nodes' matrices exchange around each job (matrix_nodes.h says why through
// a store of their own). Before it: whether it runs (a job one node cannot run is SKIPPED on every
// node), with node 0 first emptying the checkpoint folder they share, so the answer is also the
// start line. After it: each node's part goes to node 0, which merges them into one job's
// evidence. Then node 0's verdict goes back. Each call is one exchange, named by the job.
#include <string>

#include "ddx/processes/run_process.h"
#include "harness/fault_matrix/matrix.h"

namespace ddx::faults::matrix {

// Every node's reason not to run job `name` ("" to run it); returns, on every node, the refusing
// nodes' reasons ("node 1: ...") or "" when all run it. Node 0 empties `shared_dir` first.
std::string agree_to_run(const Options& o, const std::string& name, const std::string& my_reason,
                         const std::string& shared_dir);

// On node 0: the other nodes' parts of the job merged into its own: their job events (in the
// order of their wall-clock times, which the nodes' clocks must agree on), the first failing
// exit status, a time-out anywhere, the leftovers of all, and their flight-recorder dumps copied
// into `evidence.dir`/traces. Elsewhere: sends this node's part, changes nothing.
void merge_parts(const Options& o, const std::string& name, ProcessOutcome& outcome, JobEvidence& evidence,
                 int& leftover);

// Node 0's verdict on job `name` (JSON text), on every node.
std::string share_verdict(const Options& o, const std::string& name, const std::string& verdict);

}  // namespace ddx::faults::matrix
