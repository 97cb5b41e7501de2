// CSV: one line per (size, placement), the columns users otherwise scrape from the table.
#include <sstream>

#include "bandwidth/report.h"

namespace ddx::bw {

std::string sweep_csv(const SweepReport& report) {
  std::ostringstream out;
  out << "collective,size,count,type,redop,root,placement,time_us,algbw_gbs,busbw_gbs,nwrong,"
         "rank_min_us,rank_max_us,slowest_rank,iter_p50_us,iter_p99_us\n";
  for (const Row& row : report.rows) {
    for (const auto& [placement, r] : {std::make_pair("out_of_place", &row.out_of_place),
                                       std::make_pair("in_place", &row.in_place)}) {
      if (!r->measured) continue;
      double lo = 0, hi = 0;
      if (!r->rank_time_us.empty()) {
        lo = hi = r->rank_time_us[0];
        for (double t : r->rank_time_us) {
          lo = std::min(lo, t);
          hi = std::max(hi, t);
        }
      }
      out << name(row.collective) << ',' << row.size << ',' << row.count << ',' << name(row.type) << ','
          << name(row.op) << ',' << row.root << ',' << placement << ',' << r->time_us << ',' << r->algbw
          << ',' << r->busbw << ',' << (r->checked ? std::to_string(r->wrong) : "") << ',' << lo << ','
          << hi << ',' << r->slowest_rank << ',' << r->iter.p50 << ',' << r->iter.p99 << '\n';
    }
  }
  return out.str();
}

std::string pairs_csv(const PairReport& report) {
  std::ostringstream out;
  out << "rank_a,rank_b,host_a,local_rank_a,host_b,local_rank_b,bytes,time_us,bw_gbs,nwrong,slow\n";
  for (const auto& p : report.pairs) {
    bool slow = false;
    for (const auto& s : report.slow_links) slow = slow || (s.a == p.a && s.b == p.b);
    const RankInfo a = p.a < static_cast<int>(report.ranks.size()) ? report.ranks[p.a] : RankInfo{};
    const RankInfo b = p.b < static_cast<int>(report.ranks.size()) ? report.ranks[p.b] : RankInfo{};
    out << p.a << ',' << p.b << ',' << a.host << ',' << a.local_rank << ',' << b.host << ','
        << b.local_rank << ',' << report.bytes << ',' << p.time_us << ',' << p.gbs << ',' << p.wrong
        << ',' << (slow ? 1 : 0) << '\n';
  }
  return out.str();
}

}  // namespace ddx::bw
