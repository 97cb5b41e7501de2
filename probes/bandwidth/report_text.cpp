// The nccl-tests text table, line for line: preamble, `# Using devices`, the two-level column
// header, one row per size, and the footer (out-of-bounds count, average bus bandwidth). ddx's
// columns (per-rank min/max time, the slowest rank, per-iteration p50/p99 of the out-of-place
// op) are appended on the right so whitespace-splitting parsers keep their column indices.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <map>
#include <sstream>

#include "bandwidth/collective.h"
#include "bandwidth/report.h"

namespace ddx::bw {
namespace {

std::string printf_string(const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

std::string placement_columns(const PlacementResult& r) {
  if (!r.measured) return printf_string("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
  const std::string wrong = r.checked ? printf_string("%6g", static_cast<double>(r.wrong)) : "   N/A";
  return printf_string("  %7s  %6s  %6s  %6s", fit_number(r.time_us, 7).c_str(),
                       fit_number(r.algbw, 6).c_str(), fit_number(r.busbw, 6).c_str(), wrong.c_str());
}

std::string ddx_columns(const PlacementResult& r) {
  if (!r.measured || r.rank_time_us.empty()) return "";
  const auto [lo, hi] = std::minmax_element(r.rank_time_us.begin(), r.rank_time_us.end());
  return printf_string("  %7s  %7s  %6d  %7s  %7s", fit_number(*lo, 7).c_str(), fit_number(*hi, 7).c_str(),
                       r.slowest_rank, fit_number(r.iter.p50, 7).c_str(), fit_number(r.iter.p99, 7).c_str());
}

std::string step_text(const BandwidthOptions& o) {
  if (o.step_factor > 1) {
    std::ostringstream f;
    f << o.step_factor;
    return f.str() + "(factor)";
  }
  return std::to_string(o.step_bytes) + "(bytes)";
}

}  // namespace

std::string fit_number(double value, int width) {
  int digits = 0;  // integer digits of the value
  for (double p = 1; value >= p && digits < 40; p *= 10) ++digits;
  if (digits < width - 2) return printf_string("%*.2f", width, value);
  if (digits < width - 1) return printf_string("%*.1f", width, value);
  if (digits < width + 1) return printf_string("%*.0f", width, value);
  return printf_string("%*.1e", width, value);
}

std::vector<std::string> table_header() {
  const char* fmt = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %6s  %7s  %7s";
  return {
      "#" + std::string(62, ' ') + "out-of-place" + std::string(23, ' ') + "in-place" +
          std::string(19, ' ') + "ddx: out-of-place per rank, per iteration",
      printf_string(fmt, "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                    "time", "algbw", "busbw", "#wrong", "rk_min", "rk_max", "slow", "i_p50", "i_p99"),
      printf_string(fmt, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                    "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(rank)", "(us)", "(us)"),
  };
}

std::string table_row(const Row& row) {
  return printf_string("%12zu  %12zu  %8s  %6s  %6d", row.size, row.count, name(row.type), name(row.op),
                       row.root) +
         placement_columns(row.out_of_place) + placement_columns(row.in_place) + ddx_columns(row.out_of_place);
}

std::vector<CollectiveVerdict> evaluate(const SweepReport& report, const BandwidthOptions& o) {
  std::vector<CollectiveVerdict> verdicts;
  for (Collective c : o.collectives) {
    CollectiveVerdict v;
    v.collective = c;
    double sum = 0;
    for (const Row& row : report.rows) {
      if (row.collective != c) continue;
      for (const PlacementResult* r : {&row.out_of_place, &row.in_place}) {
        if (!r->measured) continue;
        ++v.results;
        sum += r->busbw;
        if (r->wrong > 0) {
          ++v.wrong_results;
          v.wrong_elements += r->wrong;
        }
      }
    }
    v.avg_busbw = v.results ? sum / v.results : 0;
    v.busbw_ok = !o.min_busbw || v.avg_busbw >= *o.min_busbw;
    verdicts.push_back(v);
  }
  return verdicts;
}

int exit_code(const std::vector<CollectiveVerdict>& verdicts) {
  for (const auto& v : verdicts) {
    if (v.wrong_results > 0 || !v.busbw_ok) return 1;
  }
  return 0;
}

std::string failure_text(const SweepReport& report, const std::vector<CollectiveVerdict>& verdicts,
                         const BandwidthOptions& o) {
  for (const auto& v : verdicts) {
    if (v.wrong_results == 0 && v.busbw_ok) continue;
    // The row that shows the failure: the first wrong value, else the lowest busbw.
    const Row* worst = nullptr;
    const PlacementResult* at = nullptr;
    for (const Row& row : report.rows) {
      if (row.collective != v.collective) continue;
      for (const PlacementResult* r : {&row.out_of_place, &row.in_place}) {
        if (!r->measured) continue;
        const bool better = v.wrong_results > 0 ? (r->wrong > 0 && !at) : (!at || r->busbw < at->busbw);
        if (better) {
          worst = &row;
          at = r;
        }
      }
    }
    if (!worst) return printf_string("%s: no results", name(v.collective));
    const std::string where = printf_string("%zu B %s %s %s", worst->size, name(worst->type), name(worst->op),
                                            at == &worst->out_of_place ? "out-of-place" : "in-place");
    if (v.wrong_results > 0) {
      return printf_string("%s: %d results with wrong values; first at %s, rank %d element %lld: got %g expected %g",
                           name(v.collective), v.wrong_results, where.c_str(), at->first_wrong_rank,
                           static_cast<long long>(at->first_wrong_index), at->got, at->expected);
    }
    return printf_string("%s: average busbw %g GB/s is below --min-busbw %g GB/s (lowest %g GB/s at %s)",
                         name(v.collective), v.avg_busbw, *o.min_busbw, at->busbw, where.c_str());
  }
  return "";
}

void TextReport::line(const std::string& text) {
  std::fputs(text.c_str(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
}

void TextReport::started(const SweepReport& report) {
  line("# ddx probe bandwidth: engine " + report.engine + ", " + std::to_string(report.nranks) +
       " ranks (nccl-tests columns and formulas)");
  line(printf_string("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d "
                     "agg iters: 1 validation: %d graph: 0 unalign: 0",
                     std::min(o_.min_bytes, report.max_bytes), report.max_bytes, step_text(o_).c_str(),
                     o_.warmup_iters, o_.iters, o_.check_iters));
  for (const auto& note : report.notes) line("# " + note);
  line("#");
  line("# Using devices");
  for (const RankInfo& r : report.ranks) {
    line(printf_string("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s", r.rank, 0, r.pid,
                       r.host.c_str(), r.device, r.bus_id.c_str(), r.device_name.c_str()));
  }
  line("#");
}

void TextReport::collective_begins(Collective c) {
  line("# Collective test starting: " + perf_name(c));
  for (const auto& h : table_header()) line(h);
}

void TextReport::row(const Row& row) { line(table_row(row)); }

void TextReport::collective_ends(Collective c, const SweepReport& report) {
  for (const auto& v : evaluate(report, o_)) {
    if (v.collective != c) continue;
    line(printf_string("# Out of bounds values : %d %s", v.wrong_results, v.wrong_results ? "FAILED" : "OK"));
    std::string bw = printf_string("# Avg bus bandwidth    : %g ", v.avg_busbw);
    if (o_.min_busbw) bw += printf_string("%s (--min-busbw %g)", v.busbw_ok ? "OK" : "FAILED", *o_.min_busbw);
    line(bw);
  }
  line("#");
  line("# Collective test concluded: " + perf_name(c));
}

void TextReport::summary(const SweepReport& report, const std::vector<CollectiveVerdict>& verdicts) {
  // Who was slowest most often: a straggler shows up here even when the mean hides it.
  std::map<int, int> slowest;
  int measured = 0;
  const Row* first_wrong = nullptr;
  const PlacementResult* first_wrong_placement = nullptr;
  for (const Row& row : report.rows) {
    for (const PlacementResult* r : {&row.out_of_place, &row.in_place}) {
      if (!r->measured) continue;
      ++measured;
      if (report.nranks > 1) ++slowest[r->slowest_rank];
      if (r->wrong > 0 && !first_wrong) {
        first_wrong = &row;
        first_wrong_placement = r;
      }
    }
  }
  if (!slowest.empty()) {
    auto top = std::max_element(slowest.begin(), slowest.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
    const RankInfo* info = nullptr;
    for (const auto& r : report.ranks) {
      if (r.rank == top->first) info = &r;
    }
    line(printf_string("# Slowest rank most often: %s, slowest in %d of %d results",
                       info ? describe(*info).c_str() : std::to_string(top->first).c_str(), top->second, measured));
  }
  if (first_wrong) {
    const PlacementResult& r = *first_wrong_placement;
    line(printf_string("# First wrong value: %s %s %s %zu B %s, rank %d element %lld: got %g expected %g",
                       name(first_wrong->collective), name(first_wrong->type), name(first_wrong->op),
                       first_wrong->size, &r == &first_wrong->out_of_place ? "out-of-place" : "in-place",
                       r.first_wrong_rank, static_cast<long long>(r.first_wrong_index), r.got, r.expected));
  }
  const int rc = exit_code(verdicts);
  int wrong = 0;
  for (const auto& v : verdicts) wrong += v.wrong_results;
  line(printf_string("# ddx probe bandwidth: %s (%d results, %d with wrong values%s)", rc ? "FAILED" : "OK",
                     measured, wrong, o_.min_busbw ? ", --min-busbw checked" : ""));
}

}  // namespace ddx::bw
