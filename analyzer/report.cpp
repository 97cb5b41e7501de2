#include "analyzer/report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <vector>

#include "analyzer/analysis_util.h"

namespace ddx::analyze {
namespace {

using nlohmann::ordered_json;

// "rank 2 (vm, pid 4242)" for each culprit with a dump; just "rank 2" without.
std::string who(const TraceSet& traces, const std::vector<int>& ranks) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    out << (i ? ", " : "") << "rank " << ranks[i];
    auto it = traces.dumps.find(ranks[i]);
    // PyTorch's dumps name no host or pid.
    if (it != traces.dumps.end() && !it->second.host.empty()) {
      out << " (" << it->second.host << ", pid " << it->second.pid << ")";
    }
  }
  return out.str();
}

std::string first_trigger(const TraceSet& traces) {
  // The earliest dump reason that is not an answer to another rank's request.
  const RankDump* first = nullptr;
  for (const auto& [rank, d] : traces.dumps) {
    if (d.reason.rfind("requested by", 0) == 0 || d.reason.rfind("SIGTERM", 0) == 0) continue;
    if (!first || d.dump_unix_ms < first->dump_unix_ms) first = &d;
  }
  if (!first) return "";
  return "rank " + std::to_string(first->rank) + ": " + first->reason;
}

// The Python stack PyTorch recorded for the first culprit's op in the finding (its entry at the
// finding's number on that group, else its newest there): where in the user's code it was.
struct CulpritStack {
  int rank = -1;
  std::string op;
  std::vector<std::string> frames;
};

CulpritStack culprit_stack(const TraceSet& traces, const Finding& f) {
  CulpritStack out;
  if (f.culprits.empty()) return out;
  auto it = traces.dumps.find(f.culprits.front());
  if (it == traces.dumps.end()) return out;
  const Entry* best = nullptr;
  for (const Entry& e : it->second.entries) {
    if (e.group != f.group || e.p2p != f.p2p || e.stack.empty()) continue;
    if (e.seq == f.seq) {
      best = &e;
      break;
    }
    if (!best || e.seq > best->seq) best = &e;
  }
  if (!best) return out;
  out.rank = f.culprits.front();
  out.op = detail::describe(*best);
  out.frames = best->stack;
  return out;
}

void pad(std::ostringstream& out, const std::string& text, size_t width) {
  out << text;
  if (text.size() < width) out << std::string(width - text.size(), ' ');
  out << "  ";
}

}  // namespace

std::string verdict_line(const TraceSet& traces, const Diagnosis& dx) {
  if (dx.findings.empty()) return "no problem found";
  const Finding& f = dx.findings.front();
  // A finding that names no rank says so, rather than leave the brackets empty.
  const std::string culprit = f.culprits.empty() ? "undecided" : who(traces, f.culprits);
  return "VERDICT: " + std::string(to_string(f.kind)) + ": " + f.summary + " [culprit: " + culprit + "]";
}

std::string render_text(const TraceSet& traces, const Diagnosis& dx) {
  std::ostringstream out;
  out << "ddx analyze " << traces.dir << ": world size " << traces.world_size << ", "
      << traces.dumps.size() << " usable dump" << (traces.dumps.size() == 1 ? "" : "s");
  if (!traces.job_id.empty()) out << " (job " << traces.job_id << ")";
  out << "\n";
  const std::string trigger = first_trigger(traces);
  if (!trigger.empty()) out << "first trigger: " << trigger << "\n";
  out << "\n" << verdict_line(traces, dx) << "\n";
  if (!dx.findings.empty()) out << "  decided by: " << dx.findings.front().decided_by << "\n";
  if (!dx.findings.empty()) {
    const CulpritStack stack = culprit_stack(traces, dx.findings.front());
    if (!stack.frames.empty()) {
      out << "  rank " << stack.rank << "'s stack at " << stack.op << " (innermost first):\n";
      for (const std::string& frame : stack.frames) out << "    " << frame << "\n";
    }
  }
  if (!dx.findings.empty()) {
    out << "\nfindings:\n";
    for (size_t i = 0; i < dx.findings.size(); ++i) {
      const Finding& f = dx.findings[i];
      out << "  " << i + 1 << ". " << to_string(f.kind) << ": " << f.summary << "\n";
      if (i > 0) out << "     decided by: " << f.decided_by << "\n";
      for (const std::string& e : f.evidence) out << "     - " << e << "\n";
    }
  }
  out << "\nranks:\n";
  size_t host_w = 4, dump_w = 4;
  for (const RankRow& r : dx.ranks) {
    host_w = std::max(host_w, r.host.size());
    dump_w = std::max(dump_w, r.dump.size());
  }
  std::ostringstream table;
  table << "  ";
  pad(table, "rank", 4);
  pad(table, "host", host_w);
  pad(table, "pid", 7);
  pad(table, "dump", dump_w);
  table << "position\n";
  for (const RankRow& r : dx.ranks) {
    table << "  ";
    pad(table, std::to_string(r.rank), 4);
    pad(table, r.host.empty() ? "?" : r.host, host_w);
    pad(table, r.pid ? std::to_string(r.pid) : "?", 7);
    pad(table, r.dump, dump_w);
    for (size_t i = 0; i < r.groups.size(); ++i) {
      if (i) table << "\n  " << std::string(4 + host_w + 7 + dump_w + 8, ' ');
      table << r.groups[i];
    }
    table << "\n";
  }
  out << table.str();
  if (!dx.notes.empty()) {
    out << "\nnotes:\n";
    for (const std::string& n : dx.notes) out << "  " << n << "\n";
  }
  return out.str();
}

std::string render_json(const TraceSet& traces, const Diagnosis& dx) {
  auto finding_json = [&](const Finding& f) {
    ordered_json hosts = ordered_json::array();
    for (int r : f.culprits) {
      auto it = traces.dumps.find(r);
      hosts.push_back(it == traces.dumps.end() ? ordered_json(nullptr) : ordered_json(it->second.host));
    }
    const CulpritStack stack = culprit_stack(traces, f);
    return ordered_json{{"kind", to_string(f.kind)}, {"culprits", f.culprits}, {"culprit_hosts", hosts},
                        {"affected", f.affected},    {"group", f.group},       {"seq", f.seq},
                        {"p2p", f.p2p},              {"op", f.op},             {"expected_op", f.expected_op},
                        {"call_site", f.call_site},  {"summary", f.summary},   {"decided_by", f.decided_by},
                        {"evidence", f.evidence},    {"culprit_stack", stack.frames}};
  };
  ordered_json doc;
  doc["trace_dir"] = traces.dir;
  doc["world_size"] = traces.world_size;
  doc["job_id"] = traces.job_id;
  std::vector<int> found;
  for (const auto& [rank, d] : traces.dumps) found.push_back(rank);
  doc["dumps"] = {{"usable", found}, {"missing", traces.missing}};
  ordered_json problems = ordered_json::array();
  for (const DumpProblem& p : traces.problems) problems.push_back({{"rank", p.rank}, {"kind", p.kind}, {"detail", p.detail}});
  doc["dump_problems"] = problems;
  doc["problem_found"] = !dx.findings.empty();
  doc["verdict"] = dx.findings.empty() ? ordered_json(nullptr) : finding_json(dx.findings.front());
  // The text report's verdict line, for suites that show it as their summary (ddx validate).
  doc["verdict_line"] = verdict_line(traces, dx);
  ordered_json findings = ordered_json::array();
  for (const Finding& f : dx.findings) findings.push_back(finding_json(f));
  doc["findings"] = findings;
  ordered_json ranks = ordered_json::array();
  for (const RankRow& r : dx.ranks) {
    ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"pid", r.pid}, {"dump", r.dump}, {"positions", r.groups}});
  }
  doc["ranks"] = ranks;
  doc["notes"] = dx.notes;
  return doc.dump(2) + "\n";
}

}  // namespace ddx::analyze
