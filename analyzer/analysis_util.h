#pragma once
// Small shared pieces of the analysis: how entries and rank sets are written in findings.
#include <functional>
#include <string>
#include <vector>

#include "analyzer/diagnosis.h"

namespace ddx::analyze::detail {

// Calls work(i) for every i in [0, n) on every core (at most 8 threads, this one included),
// each index once; returns when all are done. work must not throw.
void for_each_index_in_parallel(size_t n, const std::function<void(size_t)>& work);

// A verb in the present tense that agrees with rank_list(ranks): "wait" -> "waits" for one rank.
std::string verb_for(const std::vector<int>& ranks, const std::string& verb);
// "all_reduce(sum)"
std::string op_name(const Entry& e);
// "all_reduce(sum) #4 on group world ('step 4 grads')"
std::string describe(const Entry& e);
// "float32 [1024]"
std::string tensor_text(const Entry& e);
// Where `r` stands in `group` at its dump: "#4 in flight 2.0 s: all_reduce 'step 4 grads'".
std::string position_text(const RankDump& d, const std::string& group);
// The entry of `group` with the highest sequence number on this rank (collectives), or null.
const Entry* last_collective(const RankDump& d, const std::string& group);
// An op that never completed: in flight at the dump, or failed only after waiting out the
// collective timeout (its peer gave up or went away while it was stuck: a consequence).
bool blocked(const RankDump& d, const Entry& e);
// Blocked ops on this rank, oldest first.
std::vector<const Entry*> blocked_ops(const RankDump& d);
// Whether a file of a recorded Python stack (or a "file:line in function" frame) is PyTorch's
// own: distributed_c10d.py, c10d_logger.py's wrapper, FSDP internals, frozen importlib.
bool inside_torch(const std::string& file_or_frame);
// Points `f` at `e`: its group, number, kind of op and call site.
void place_at(Finding& f, const Entry& e);

}  // namespace ddx::analyze::detail
