#include "strategies/pp/pp_trace.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ddx/processes/atomic_file.h"

namespace ddx::train {
namespace {

// Okabe-Ito colours (as ddx/text/svg_plot.h), one per stage; backwards drawn darker.
const char* kStageColours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * v);
  return buf;
}

}  // namespace

std::string render_pipeline_trace(const std::vector<std::vector<PipeEvent>>& per_rank, const PipeTraceInfo& info) {
  const double left = 90, right = 20, top = 64, row = 34, width = 1100;
  double end = 0;
  for (const auto& events : per_rank) {
    for (const PipeEvent& e : events) end = std::max(end, e.end_s);
  }
  if (end <= 0) end = 1;
  const double plot_w = width - left - right;
  auto x = [&](double t) { return left + t / end * plot_w; };
  const double height = top + row * static_cast<double>(per_rank.size()) + 56;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << num(height)
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">" << info.schedule << ": p=" << info.ranks
      << (info.virtual_stages > 1 ? ", V=" + std::to_string(info.virtual_stages) : "") << ", m=" << info.microbatches
      << ", " << info.steps << " step" << (info.steps == 1 ? "" : "s") << "</text>\n";
  svg << "<text x=\"" << left << "\" y=\"40\">bubble measured " << percent(info.bubble_measured) << ", theoretical "
      << percent(info.bubble_theoretical) << " (F = forward, B = backward labelled by micro-batch; grey = waiting "
      << "in recv; ticks = sends)</text>\n";
  for (size_t r = 0; r < per_rank.size(); ++r) {
    const double y = top + row * static_cast<double>(r);
    svg << "<text x=\"8\" y=\"" << num(y + row / 2 + 4) << "\">rank " << r << "</text>\n";
    svg << "<line x1=\"" << left << "\" x2=\"" << num(left + plot_w) << "\" y1=\"" << num(y + row - 4) << "\" y2=\""
        << num(y + row - 4) << "\" stroke=\"#ddd\"/>\n";
    for (const PipeEvent& e : per_rank[r]) {
      const double x0 = x(e.begin_s), w = std::max(0.5, x(e.end_s) - x0);
      if (e.kind == PipeEvent::Kind::Send) {
        svg << "<line x1=\"" << num(x0) << "\" x2=\"" << num(x0) << "\" y1=\"" << num(y + row - 10) << "\" y2=\""
            << num(y + row - 4) << "\" stroke=\"black\"/>\n";
        continue;
      }
      if (e.kind == PipeEvent::Kind::Recv) {
        svg << "<rect x=\"" << num(x0) << "\" y=\"" << num(y + 10) << "\" width=\"" << num(w)
            << "\" height=\"10\" fill=\"#ccc\"/>\n";
        continue;
      }
      const bool backward = e.kind == PipeEvent::Kind::Backward;
      const char* colour = kStageColours[e.stage % 8];
      svg << "<rect x=\"" << num(x0) << "\" y=\"" << num(y + 2) << "\" width=\"" << num(w) << "\" height=\""
          << num(row - 8) << "\" fill=\"" << colour << "\" fill-opacity=\"" << (backward ? "1" : "0.45")
          << "\" stroke=\"white\" stroke-width=\"0.5\"><title>" << (backward ? "backward" : "forward")
          << " micro-batch " << e.microbatch << ", stage " << e.stage << ", " << num((e.end_s - e.begin_s) * 1e3)
          << " ms</title></rect>\n";
      if (w > 14) {
        svg << "<text x=\"" << num(x0 + w / 2) << "\" y=\"" << num(y + row / 2 + 2) << "\" text-anchor=\"middle\" fill=\""
            << (backward ? "white" : "black") << "\">" << (backward ? "B" : "F") << e.microbatch << "</text>\n";
      }
    }
  }
  const double axis_y = top + row * static_cast<double>(per_rank.size()) + 14;
  for (int i = 0; i <= 5; ++i) {
    const double t = end * i / 5;
    svg << "<text x=\"" << num(x(t)) << "\" y=\"" << num(axis_y) << "\" text-anchor=\"middle\">" << num(t * 1e3)
        << " ms</text>\n";
  }
  svg << "<text x=\"" << num(left + plot_w / 2) << "\" y=\"" << num(axis_y + 22)
      << "\" text-anchor=\"middle\">time since the first traced step started (stages coloured; light = forward, "
         "dark = backward)</text>\n</svg>\n";
  return svg.str();
}

void write_pipeline_trace(const std::string& path, const std::vector<std::vector<PipeEvent>>& per_rank,
                          const PipeTraceInfo& info) {
  write_file_atomically(path, render_pipeline_trace(per_rank, info));
}

}  // namespace ddx::train
