#include "analyzer/entry_listing.h"

#include <algorithm>
#include <sstream>

#include "analyzer/analysis_util.h"

namespace ddx::analyze {

bool group_matches(const std::string& group, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  // A label is "name" or "name (description)".
  const size_t paren = group.find(" (");
  const std::string name = group.substr(0, paren);
  const std::string desc = paren == std::string::npos ? "" : group.substr(paren + 2, group.size() - paren - 3);
  // ddx's own dumps call the default group "world" and give it no description.
  return std::any_of(filters.begin(), filters.end(), [&](const std::string& f) {
    return f == group || f == name || (!desc.empty() && f == desc) || (f == "default_pg" && group == "world");
  });
}

std::string render_entries(const TraceSet& traces, const std::set<int>& ranks, const std::vector<std::string>& pg_filters) {
  std::ostringstream out;
  for (const auto& [rank, d] : traces.dumps) {
    if (!ranks.empty() && !ranks.count(rank)) continue;
    std::vector<const Entry*> shown;
    for (const Entry& e : d.entries) {
      if (group_matches(e.group, pg_filters)) shown.push_back(&e);
    }
    out << "rank " << rank;
    if (!d.host.empty()) out << " (" << d.host << ", pid " << d.pid << ")";
    out << ": " << d.path << ", " << d.format << ", " << shown.size() << " of " << d.entries.size() << " entries";
    if (d.wrapped) out << " (the ring wrapped: older ops are gone)";
    out << "\n";
    std::vector<std::vector<std::string>> rows = {{"record", "group", "seq", "op", "tensor", "state", "call site"}};
    for (const Entry* e : shown) {
      std::string op = detail::op_name(*e);
      if (e->p2p && e->peer_global() >= 0) op += (e->op == "send" ? " to " : " from ") + std::to_string(e->peer_global());
      rows.push_back({std::to_string(e->id), e->group, (e->p2p ? "p2p #" : "#") + std::to_string(e->seq), op,
                      detail::tensor_text(*e), e->state, e->call_site});
    }
    std::vector<size_t> width(rows.front().size(), 0);
    for (const auto& row : rows) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows) {
      std::string line = " ";
      for (size_t c = 0; c < row.size(); ++c) {
        line += " " + row[c];
        if (c + 1 < row.size()) line += std::string(width[c] - row[c].size(), ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out << line << "\n";
    }
    out << "\n";
  }
  for (int rank : traces.missing) {
    if (ranks.empty() || ranks.count(rank)) out << "rank " << rank << ": no dump\n";
  }
  return out.str();
}

}  // namespace ddx::analyze
