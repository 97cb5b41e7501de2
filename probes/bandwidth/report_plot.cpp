// --plot: busbw against size, one panel per collective, one line per placement (and per type
// and reduction op when several were swept).
#include <map>

#include "bandwidth/report.h"
#include "ddx/text/svg_plot.h"

namespace ddx::bw {

std::string sweep_svg(const SweepReport& report) {
  std::vector<svg::Panel> panels;
  std::map<Collective, size_t> panel_of;
  std::map<std::pair<size_t, std::string>, size_t> series_of;
  for (const Row& row : report.rows) {
    if (!panel_of.count(row.collective)) {
      panel_of[row.collective] = panels.size();
      svg::Panel p;
      p.title = std::string(name(row.collective)) + " (" + report.engine + ", " + std::to_string(report.nranks) + " ranks)";
      p.x_label = "size (bytes)";
      p.y_label = "busbw (GB/s)";
      p.log_x = true;
      panels.push_back(p);
    }
    svg::Panel& panel = panels[panel_of[row.collective]];
    for (const auto& [placement, r] : {std::make_pair("out-of-place", &row.out_of_place),
                                       std::make_pair("in-place", &row.in_place)}) {
      if (!r->measured) continue;
      std::string label = std::string(placement) + " " + name(row.type);
      if (row.op != RedOp::None) label += std::string(" ") + name(row.op);
      if (row.root >= 0) label += " root " + std::to_string(row.root);
      const auto key = std::make_pair(panel_of[row.collective], label);
      if (!series_of.count(key)) {
        series_of[key] = panel.series.size();
        panel.series.push_back({label, {}});
      }
      panel.series[series_of[key]].points.emplace_back(static_cast<double>(row.size), r->busbw);
    }
  }
  svg::Layout layout;
  layout.title = "ddx probe bandwidth: busbw vs size";
  return svg::render(panels, layout);
}

}  // namespace ddx::bw
