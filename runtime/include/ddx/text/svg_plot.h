#pragma once
// Small self-contained SVG line plots (no external libraries): one or more panels in a grid,
// each with several series of (x, y) points, optional log scales, axis labels and a legend.
// Used for busbw-vs-size plots and meant for loss curves and timelines too. No LibTorch.
#include <string>
#include <utility>
#include <vector>

namespace ddx::svg {

struct Series {
  std::string label;                              // legend text
  std::vector<std::pair<double, double>> points;  // drawn in the order given
  bool dashed = false;
};

struct Panel {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // base-2 ticks when the data are powers of two, else base 10
  bool log_y = false;
  std::vector<Series> series;
};

struct Layout {
  std::string title;       // above every panel
  int panel_width = 560;   // pixels
  int panel_height = 360;
  int columns = 2;         // panels per row
};

// The whole document. Points with non-finite coordinates, or <= 0 on a log axis, are skipped.
std::string render(const std::vector<Panel>& panels, const Layout& layout = {});

// A square matrix as a heat map (the pairwise link matrix): cell (row, column) shaded from
// white (0) to dark blue (the largest value) with its value written in it; NaN cells (the
// diagonal) grey. `labels` name the rows and columns (e.g. "0 host-a:0").
struct HeatMap {
  std::string title;
  std::string unit;                          // shown under the title ("GB/s")
  std::vector<std::string> labels;
  std::vector<std::vector<double>> values;   // values[row][column]
};
std::string render_heat_map(const HeatMap& map);

// Text made safe inside SVG or HTML elements and attributes (& < > ").
std::string escape(const std::string& text);

// "1K", "32M", "2G" for powers of 1024; otherwise the number with up to 3 significant digits.
std::string short_number(double value);

// render() written to `path` atomically (ddx/processes/atomic_file.h).
void write(const std::string& path, const std::vector<Panel>& panels, const Layout& layout = {});

}  // namespace ddx::svg
