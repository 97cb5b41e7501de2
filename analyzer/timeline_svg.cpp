// The timeline as an SVG: a row per rank and group, time left to right. The picture answers
// "where did the ranks part ways?": the others' long orange bars (stuck in a collective) beside
// the culprit's row, which has none or stops early.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "analyzer/timeline.h"
#include "ddx/text/svg_plot.h"

namespace ddx::analyze {
namespace {

constexpr int kLabelWidth = 250, kPlotWidth = 900, kRowHeight = 18, kTop = 58, kRightPad = 20;

// A round step (1, 2 or 5 times a power of ten) giving about eight ticks over `span`.
double tick_step(double span) {
  const double raw = span / 8;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * power) return m * power;
  }
  return 10 * power;
}

std::string seconds_label(double us) {
  char text[32];
  std::snprintf(text, sizeof text, us >= 1e6 || us == 0 ? "%.3g s" : "%.3g ms", us >= 1e6 || us == 0 ? us / 1e6 : us / 1e3);
  return text;
}

}  // namespace

std::string render_timeline_svg(const Timeline& t) {
  int64_t end = std::max<int64_t>(t.end_us, 1);
  for (const Slice& s : t.slices) end = std::max(end, s.end_us);
  int rows = 0;
  for (const RankLanes& r : t.ranks) rows += static_cast<int>(r.groups.size());
  const int width = kLabelWidth + kPlotWidth + kRightPad;
  const int height = kTop + rows * kRowHeight + 60;
  auto x = [&](int64_t us) { return kLabelWidth + static_cast<double>(us) / end * kPlotWidth; };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">ddx analyze: every rank's collectives"
      << "</text>\n";
  if (!t.verdict.empty()) {
    svg << "<text x=\"10\" y=\"36\" fill=\"#c0392b\">VERDICT: " << svg::escape(t.verdict.substr(0, 160)) << "</text>\n";
  }
  // Time axis.
  const double step = tick_step(static_cast<double>(end));
  for (double tick = 0; tick <= end; tick += step) {
    const double px = x(static_cast<int64_t>(tick));
    svg << "<line x1=\"" << px << "\" y1=\"" << kTop - 6 << "\" x2=\"" << px << "\" y2=\"" << kTop + rows * kRowHeight
        << "\" stroke=\"#eee\"/>\n<text x=\"" << px << "\" y=\"" << kTop - 9 << "\" text-anchor=\"middle\" fill=\"#666\">"
        << seconds_label(tick) << "</text>\n";
  }
  // Rows.
  int row = 0;
  for (const RankLanes& r : t.ranks) {
    const int first_row = row;
    for (size_t lane = 0; lane < r.groups.size(); ++lane, ++row) {
      const int y = kTop + row * kRowHeight;
      if (row % 2 == 0) {
        svg << "<rect x=\"0\" y=\"" << y << "\" width=\"" << width << "\" height=\"" << kRowHeight
            << "\" fill=\"#f7f7f7\"/>\n";
      }
      std::string label = (lane == 0 ? r.name + "  " : std::string()) + (r.has_dump ? "group " + r.groups[lane] : "");
      svg << "<text x=\"10\" y=\"" << y + 13 << "\"" << (r.culprit ? " fill=\"#c0392b\" font-weight=\"bold\"" : "")
          << ">" << svg::escape(label.substr(0, 44)) << (r.culprit && lane == 0 ? " \u25C0 culprit" : "") << "</text>\n";
    }
    if (!r.has_dump) {
      svg << "<text x=\"" << kLabelWidth + 4 << "\" y=\"" << kTop + first_row * kRowHeight + 13
          << "\" fill=\"#999\" font-style=\"italic\">no dump: crashed or killed before it could write one</text>\n";
    } else {
      const int y = kTop + first_row * kRowHeight;
      svg << "<line x1=\"" << x(r.dump_us) << "\" y1=\"" << y << "\" x2=\"" << x(r.dump_us) << "\" y2=\""
          << y + static_cast<int>(r.groups.size()) * kRowHeight << "\" stroke=\"#333\" stroke-dasharray=\"2,2\"/>\n";
    }
    (void)first_row;
  }
  // Bars, on the row of their rank and lane.
  std::vector<int> first_row_of(t.ranks.size(), 0);
  for (size_t i = 0, at = 0; i < t.ranks.size(); ++i) {
    first_row_of[i] = static_cast<int>(at);
    at += t.ranks[i].groups.size();
  }
  for (const Slice& s : t.slices) {
    auto it = std::find_if(t.ranks.begin(), t.ranks.end(), [&](const RankLanes& r) { return r.rank == s.rank; });
    if (it == t.ranks.end()) continue;
    const int y = kTop + (first_row_of[it - t.ranks.begin()] + s.lane) * kRowHeight + 3;
    const double x0 = x(s.begin_us);
    const double w = std::max(1.5, x(s.end_us) - x0);
    const char* fill = s.entry->failed() ? "#e15759" : s.stuck ? "#f28e2b" : s.p2p ? "#59a14f" : "#4e79a7";
    svg << "<rect x=\"" << x0 << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << kRowHeight - 6
        << "\" fill=\"" << fill << "\"><title>" << svg::escape(s.title + " — " + s.state) << "</title></rect>\n";
    if (s.stuck && w > 60) {
      svg << "<text x=\"" << x0 + 4 << "\" y=\"" << y + 10 << "\" fill=\"white\" font-size=\"10\">"
          << svg::escape(s.title) << "</text>\n";
    }
  }
  // Legend.
  const int ly = kTop + rows * kRowHeight + 24;
  int lx = 10;
  for (auto [color, text] : {std::pair{"#4e79a7", "collective, completed"}, {"#59a14f", "send/recv, completed"},
                             {"#f28e2b", "in flight at the dump"}, {"#e15759", "failed"}}) {
    svg << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"12\" height=\"10\" fill=\"" << color << "\"/>"
        << "<text x=\"" << lx + 16 << "\" y=\"" << ly + 9 << "\">" << text << "</text>\n";
    lx += 180;
  }
  svg << "<line x1=\"" << lx << "\" y1=\"" << ly + 5 << "\" x2=\"" << lx + 12 << "\" y2=\"" << ly + 5
      << "\" stroke=\"#333\" stroke-dasharray=\"2,2\"/><text x=\"" << lx + 16 << "\" y=\"" << ly + 9
      << "\">the rank's dump</text>\n</svg>\n";
  return svg.str();
}

}  // namespace ddx::analyze
