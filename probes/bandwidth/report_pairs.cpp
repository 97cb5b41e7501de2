// The pairwise report: the matrix (GB/s per link, each way), the median link, and the links and
// ranks far below it, named by host and local rank so the bad NIC, cable or GPU can be found.
#include <algorithm>
#include <set>
#include <sstream>

#include "bandwidth/report.h"
#include "ddx/text/text.h"

namespace ddx::bw {
namespace {

std::string where(const PairReport& r, int rank) {
  if (rank >= static_cast<int>(r.ranks.size())) return "rank " + std::to_string(rank);
  return r.ranks[rank].host + ":" + std::to_string(r.ranks[rank].local_rank);
}

}  // namespace

int exit_code(const PairReport& report) {
  return report.wrong > 0 || !report.slow_links.empty() || !report.slow_ranks.empty() ? 1 : 0;
}

std::string pairs_text(const PairReport& r, const BandwidthOptions& o) {
  std::ostringstream out;
  out << "# ddx probe bandwidth --pairs: engine " << r.engine << ", " << r.nranks << " ranks, "
      << r.bytes << " B each way per exchange, " << r.iters << " iters, " << (r.nranks % 2 ? r.nranks : r.nranks - 1)
      << " rounds of disjoint pairs\n#\n# Using devices\n";
  for (const RankInfo& k : r.ranks) {
    out << printf_text("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", k.rank, 0, k.pid, k.host.c_str(),
               k.device, k.bus_id.c_str(), k.device_name.c_str());
  }
  out << "#\n# sendrecv bandwidth per link (GB/s): bytes each way / time of the slower side\n";
  // Over several hosts each row also names its host and local rank (a row of low numbers is
  // then a host's NIC at a glance).
  std::set<std::string> hosts;
  for (const RankInfo& k : r.ranks) hosts.insert(k.host);
  size_t label = 0;
  if (hosts.size() > 1) {
    for (int a = 0; a < r.nranks; ++a) label = std::max(label, where(r, a).size());
  }
  out << "#  rank" << std::string(label ? label + 1 : 0, ' ');
  for (int b = 0; b < r.nranks; ++b) out << printf_text("  %6d", b);
  out << "\n";
  for (int a = 0; a < r.nranks; ++a) {
    out << printf_text("%7d", a);
    if (label) out << " " << printf_text("%-*s", static_cast<int>(label), where(r, a).c_str());
    for (int b = 0; b < r.nranks; ++b) {
      out << (a == b ? printf_text("  %6s", "-") : "  " + fit_number(r.matrix[a][b], 6));
    }
    out << "\n";
  }
  out << "#\n" << printf_text("# Median link: %.3g GB/s (links between ranks not flagged slow)\n", r.median_gbs);
  const double floor_gbs = o.pair_fraction * r.median_gbs;
  std::string rule = printf_text("below %g x median = %.3g GB/s", o.pair_fraction, floor_gbs);
  if (o.pair_min_gbs > 0) rule += printf_text(" or below --pair-min-bw %g GB/s", o.pair_min_gbs);
  if (r.slow_ranks.empty()) {
    out << "# Slow ranks: none (each rank's median link against the median of the other ranks')\n";
  } else {
    out << "# Slow ranks (their median link below " << printf_text("%g", o.pair_fraction)
        << " x the median of the other ranks' and below their spread):\n";
    for (const auto& [rank, gbs] : r.slow_ranks) {
      const std::string who = rank < static_cast<int>(r.ranks.size()) ? describe(r.ranks[rank]) : std::to_string(rank);
      out << printf_text("#   %s: median link %.3g GB/s (%.2f x median)\n", who.c_str(), gbs,
                 r.median_gbs > 0 ? gbs / r.median_gbs : 0.0);
    }
  }
  if (!r.rechecked.empty()) {
    out << "# Rechecked alone (below the floor while other pairs ran; the better figure counts):\n";
    for (const auto& [link, in_rounds] : r.rechecked) {
      out << printf_text("#   %d <-> %d  %.3g GB/s in the rounds, %.3g GB/s alone\n", link.a, link.b, in_rounds, link.gbs);
    }
  }
  if (r.slow_links.empty()) {
    out << "# Slow links: none (" << rule << ")\n";
  } else {
    out << "# Slow links (" << rule << "):\n";
    for (const auto& p : r.slow_links) {
      out << printf_text("#   %d <-> %d  %.3g GB/s (%.2f x median)  %s <-> %s\n", p.a, p.b, p.gbs,
                 r.median_gbs > 0 ? p.gbs / r.median_gbs : 0.0, where(r, p.a).c_str(), where(r, p.b).c_str());
    }
  }
  out << printf_text("# Out of bounds values : %lld %s\n", static_cast<long long>(r.wrong), r.wrong ? "FAILED" : "OK");
  // The last line is what `ddx validate` shows for the stage: it names the slow ranks.
  std::vector<int> slow;
  for (const auto& rank_gbs : r.slow_ranks) slow.push_back(rank_gbs.first);
  std::sort(slow.begin(), slow.end());
  out << printf_text("# ddx probe bandwidth --pairs: %s (%zu links, %zu slow, %zu slow ranks%s)\n",
             exit_code(r) ? "FAILED" : "OK", r.pairs.size(), r.slow_links.size(), r.slow_ranks.size(),
             slow.empty() ? "" : (": " + ranks_text(slow)).c_str());
  return out.str();
}

}  // namespace ddx::bw
