#pragma once
// The one grammar of every injected fault and test switch (docs/faults.md):
//   KIND[@key=value,key=value...]        several separated by ';' in DDX_FAULT
// e.g. kill@rank=1,step=13 or slow-link@rank=2,op=send,ms=40. Two keys mean the same for every
// kind: rank (global rank; absent = every rank) and step (1-based training step as metrics.jsonl
// counts them; absent = every step). attempt (restart attempt of ddx launch; absent = the first
// attempt only, "all" = every attempt) lets a recovered run pass the step that failed.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddx::faults {

struct FaultSpec {
  std::string kind;
  int rank = -1;          // -1: every rank
  int64_t step = -1;      // -1: every step
  int attempt = 0;        // -1: every attempt
  std::map<std::string, std::string> params;  // every key but rank, step, attempt
  std::string text;       // as written, for logs and reports
  std::string source;     // "DDX_FAULT" or "--fault": named in errors

  bool targets(int global_rank) const { return rank < 0 || rank == global_rank; }
  bool at_step(int64_t s) const { return step < 0 || step == s; }
  // A key's value, or `fallback` when absent.
  std::string text_param(const std::string& key, const std::string& fallback) const;
  // A key's value as a number in [lo, hi]; UsageError naming the spec otherwise.
  double number_param(const std::string& key, double fallback, double lo, double hi) const;
  int64_t int_param(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const;
  // UsageError prefixed with the source and the spec, for a kind's own checks.
  [[noreturn]] void fail(const std::string& why) const;
};

// Parses one spec; checks the kind exists and takes every key given. Throws UsageError naming
// `source`, the spec and, for an unknown kind, every valid kind.
FaultSpec parse_spec(const std::string& text, const std::string& source);
// Parses a ';'-separated list (empty items ignored).
std::vector<FaultSpec> parse_list(const std::string& text, const std::string& source);

}  // namespace ddx::faults
