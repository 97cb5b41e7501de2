#include "observe/loss_plot.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "ddx/text/svg_plot.h"

namespace ddx::train {

void write_loss_plot(const std::string& metrics_path, const std::string& svg_path, const std::string& title) {
  std::ifstream in(metrics_path);
  svg::Series loss{"loss", {}, false}, lr{"learning rate", {}, false};
  std::string line;
  while (std::getline(in, line)) {
    try {
      auto j = nlohmann::json::parse(line);
      const double step = j.at("step").get<double>();
      loss.points.emplace_back(step, j.at("loss").get<double>());
      lr.points.emplace_back(step, j.at("lr").get<double>());
    } catch (const std::exception&) {
      // Not a metrics record: skip it.
    }
  }
  if (loss.points.empty()) return;
  svg::Panel loss_panel{"loss", "step", "mean token cross-entropy", false, false, {loss}};
  svg::Panel lr_panel{"learning rate", "step", "lr", false, false, {lr}};
  svg::Layout layout;
  layout.title = title;
  layout.columns = 1;
  layout.panel_width = 720;
  layout.panel_height = 300;
  svg::write(svg_path, {loss_panel, lr_panel}, layout);
}

}  // namespace ddx::train
