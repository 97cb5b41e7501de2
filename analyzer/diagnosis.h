#pragma once
// The hang analysis: align every group's collectives across ranks by sequence number and name
// the culprit. Decisions are by majority, never by taking one rank (rank 0) as the reference;
// where there is no majority (two ranks), by each rank's own history: the rank whose calls left
// the order its earlier steps repeat, else the one that deviates from what it did at the same
// call site earlier, is the culprit; otherwise the finding names no culprit (undecided).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analyzer/trace_model.h"

namespace ddx::analyze {

// In order of priority: the first finding is the verdict.
enum class FindingKind {
  OpMismatch,         // ranks called different collectives at the same sequence number
  DtypeMismatch,
  SizeMismatch,
  MembershipMismatch, // ranks list different members for the same group
  P2PDeadlock,        // two ranks both sending to (or both receiving from) each other
  DeadRank,           // no dump, and peers saw it go (heartbeat stopped, connection closed)
  StoppedPeer,        // ranks wait in a send/recv on a rank that has nothing in flight
  SkippedCollective,  // a rank's call sites show it skipped one collective
  NeverJoined,        // others wait in #N; this rank finished #N-1 and is elsewhere (straggler)
  Stuck,              // this rank is inside #N and others are past it
  ExtraCollective,    // a minority of ranks is in #N that the majority finished the job without
  Failed,             // an op failed and nothing above explains it
  NoDump,             // a rank left no usable dump and nothing else is known
};
const char* to_string(FindingKind kind);

struct Finding {
  FindingKind kind = FindingKind::Failed;
  std::vector<int> culprits;     // global ranks
  std::vector<int> affected;     // ranks waiting on / disagreeing with the culprits
  std::string group;
  uint64_t seq = 0;
  bool p2p = false;
  std::string op;                // the culprit's op ("all_gather"), or the op others wait in
  std::string expected_op;       // what the majority did, for mismatches
  std::string call_site;
  std::string summary;           // one line, names the culprit, op and call site
  std::string decided_by;        // "majority (3 of 4)", "history at call site ...", ...
  std::vector<std::string> evidence;
};

// One row of the evidence table.
struct RankRow {
  int rank = -1;
  std::string host;
  int pid = 0;
  std::string dump;              // "timeout", "requested by rank 1", "missing", "truncated" ...
  std::vector<std::string> groups;  // "world #4 in flight 2.0 s: all_reduce 'step 4 grads'"
};

struct Diagnosis {
  int world_size = 0;
  std::vector<Finding> findings;  // sorted by priority; empty: no problem found
  std::vector<RankRow> ranks;
  std::vector<std::string> notes;  // healthy-run facts, dump problems
};

Diagnosis diagnose(const TraceSet& traces);

// Internal steps, exposed for unit tests.
namespace detail {
std::vector<Finding> find_collective_problems(const TraceSet& traces);
std::vector<Finding> find_p2p_deadlocks(const TraceSet& traces);
std::vector<Finding> find_dead_ranks(const TraceSet& traces);
std::vector<Finding> find_stopped_peers(const TraceSet& traces);
std::vector<Finding> find_membership_mismatches(const TraceSet& traces);

// Pipeline ranks (`--strategy pp`, pipeline_stages.cpp): the group of the mesh's "pp"
// dimension a rank belongs to, its position there and the stages it runs.
struct PipelinePlace {
  std::string group;
  int position = -1;
  std::set<int> stages;  // empty: no hop of its stages recorded on any rank
};
std::map<int, PipelinePlace> pipeline_places(const TraceSet& traces);
// "pipeline stage 1", "pipeline stages 1 and 5", "pipeline rank 1 of group G".
std::string stage_text(const PipelinePlace& place);
// What a rank blocked in the pipeline hop `e` waits for ("micro-batch 0's gradient from
// stage 1"); "" for other ops.
std::string pipeline_wait(const Entry& e);
// Appends each culprit's pipeline stages to the findings' summaries.
void add_pipeline_stages(const TraceSet& traces, std::vector<Finding>& findings);
// "step 12 grads" -> "step # grads": the same code location on another step.
std::string normalize_call_site(const std::string& site);
std::string rank_list(const std::vector<int>& ranks);  // "rank 2", "ranks 0,1,3"
std::string seconds(double s);                          // "2.03 s"
}  // namespace detail

}  // namespace ddx::analyze
