#pragma once
// The probe's outputs, all on rank 0: the nccl-tests text table (same columns, same footer,
// ddx's per-rank columns appended on the right so column-index parsers keep working), JSON in
// the layout of nccl-tests' -J output, CSV, an SVG plot, and the pairwise matrix.
#include <cstdio>
#include <string>
#include <vector>

#include "bandwidth/options.h"
#include "bandwidth/results.h"

namespace ddx::bw {

// nccl-tests' number fitting: "%.2f" in `width` characters, degrading to "%.1f", "%.0f" and
// finally exponent form as the value grows.
std::string fit_number(double value, int width);

// The three header lines and one data line of the table.
std::vector<std::string> table_header();
std::string table_row(const Row& row);

// Pass/fail of one collective's rows: the footer's numbers.
struct CollectiveVerdict {
  Collective collective = Collective::AllReduce;
  int results = 0;            // measured (size, placement) results
  int wrong_results = 0;      // of which had a wrong value (nccl-tests' out-of-bounds count)
  int64_t wrong_elements = 0;
  double avg_busbw = 0;       // mean busbw over rows and placements
  bool busbw_ok = true;       // --min-busbw met (true when not given)
};
std::vector<CollectiveVerdict> evaluate(const SweepReport& report, const BandwidthOptions& o);
// 0 when nothing was wrong and every --min-busbw was met, else 1.
int exit_code(const std::vector<CollectiveVerdict>& verdicts);
// Why the sweep failed, in one line naming the first failing collective and the size at fault
// (the first wrong value, or the slowest size of a collective below --min-busbw); "" when it
// passed. Every rank writes it into its error file as the job's verdict (ddx/errors/verdict.h), which
// a launcher shows.
std::string failure_text(const SweepReport& report, const std::vector<CollectiveVerdict>& verdicts,
                         const BandwidthOptions& o);

// Streams the table as rows arrive (nccl-tests prints each line as it is measured).
class TextReport {
 public:
  TextReport(std::FILE* out, const BandwidthOptions& o) : out_(out), o_(o) {}
  void started(const SweepReport& report);
  void collective_begins(Collective c);
  void row(const Row& row);
  void collective_ends(Collective c, const SweepReport& report);
  // Stragglers, first wrong value, verdict.
  void summary(const SweepReport& report, const std::vector<CollectiveVerdict>& verdicts);

 private:
  void line(const std::string& text);
  std::FILE* out_;
  const BandwidthOptions& o_;
};

std::string sweep_json(const SweepReport& report, const BandwidthOptions& o,
                       const std::vector<CollectiveVerdict>& verdicts,
                       const std::string& start_time, const std::string& end_time);
std::string sweep_csv(const SweepReport& report);
std::string sweep_svg(const SweepReport& report);

std::string pairs_text(const PairReport& report, const BandwidthOptions& o);
std::string pairs_json(const PairReport& report, const BandwidthOptions& o);
std::string pairs_csv(const PairReport& report);
// 0 when no link or rank was flagged and nothing was wrong, else 1.
int exit_code(const PairReport& report);

}  // namespace ddx::bw
