#include "ddx/text/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ddx/processes/atomic_file.h"

namespace ddx::svg {
namespace {

// A colour-blind-friendly palette (Okabe-Ito), cycled per series.
const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"};

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// Maps data to pixels along one axis.
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;       // data range (transformed when log)
  double p0 = 0, p1 = 1;       // pixel range
  double t(double v) const { return log ? std::log2(v) : v; }
  double px(double v) const { return p0 + (t(v) - lo) / (hi - lo) * (p1 - p0); }
};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// Tick values: powers of two (or ten) on log axes, round steps on linear ones.
std::vector<double> ticks(const Axis& a, double data_lo, double data_hi) {
  std::vector<double> out;
  if (a.log) {
    const double span = a.hi - a.lo;  // in powers of two
    if (span > 24) {
      // Many decades (e.g. relative differences from 1e-16 to 1e-3): label powers of ten, not
      // powers of two whose decimal forms read as noise (8.88e-16, 1.42e-14, ...).
      const double lo10 = a.lo * std::log10(2.0), hi10 = a.hi * std::log10(2.0);
      const int step10 = std::max(1, static_cast<int>(std::ceil((hi10 - lo10) / 8)));
      for (int e = static_cast<int>(std::floor(lo10)); e <= static_cast<int>(std::ceil(hi10)); e += step10) {
        const double v = std::pow(10.0, e);
        if (a.t(v) >= a.lo - 1e-9 && a.t(v) <= a.hi + 1e-9) out.push_back(v);
      }
      return out;
    }
    const int step = std::max(1, static_cast<int>(std::ceil(span / 8)));
    for (int e = static_cast<int>(std::floor(a.lo)); e <= static_cast<int>(std::ceil(a.hi)); e += step) {
      const double v = std::ldexp(1.0, e);
      if (a.t(v) >= a.lo - 1e-9 && a.t(v) <= a.hi + 1e-9) out.push_back(v);
    }
    return out;
  }
  const double range = data_hi - data_lo;
  if (range <= 0) return {data_lo};
  const double raw = range / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(data_lo / step) * step; v <= data_hi + step * 1e-9; v += step) out.push_back(v);
  return out;
}

void draw_panel(std::ostringstream& out, const Panel& panel, double x0, double y0, double w, double h) {
  const double left = x0 + 70, right = x0 + w - 20, top = y0 + 36, bottom = y0 + h - 50;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const auto& s : panel.series) {
    for (const auto& [x, y] : s.points) {
      if (!usable(x, panel.log_x) || !usable(y, panel.log_y)) continue;
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  }
  out << "<text x=\"" << fmt(x0 + w / 2) << "\" y=\"" << fmt(y0 + 20)
      << "\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">" << escape(panel.title) << "</text>\n";
  out << "<rect x=\"" << fmt(left) << "\" y=\"" << fmt(top) << "\" width=\"" << fmt(right - left) << "\" height=\""
      << fmt(bottom - top) << "\" fill=\"none\" stroke=\"#888\"/>\n";
  if (!(xmin <= xmax)) {
    out << "<text x=\"" << fmt((left + right) / 2) << "\" y=\"" << fmt((top + bottom) / 2)
        << "\" text-anchor=\"middle\" font-size=\"12\">no data</text>\n";
    return;
  }
  if (!panel.log_y) ymin = std::min(ymin, 0.0);  // bandwidth-like plots read best from zero
  Axis ax{panel.log_x, 0, 1, left, right};
  Axis ay{panel.log_y, 0, 1, bottom, top};
  ax.lo = ax.t(xmin);
  ax.hi = ax.t(xmax);
  ay.lo = ay.t(ymin);
  ay.hi = ay.t(ymax);
  if (ax.hi - ax.lo < 1e-12) {
    ax.lo -= 1;
    ax.hi += 1;
  }
  if (ay.hi - ay.lo < 1e-12) {
    ay.hi = ay.lo + (panel.log_y ? 1 : std::max(1.0, std::fabs(ay.lo)));
  } else if (!panel.log_y) {
    ay.hi += (ay.hi - ay.lo) * 0.05;  // headroom so the top point is not on the frame
  }
  for (double v : ticks(ax, xmin, xmax)) {
    const double px = ax.px(v);
    out << "<line x1=\"" << fmt(px) << "\" y1=\"" << fmt(top) << "\" x2=\"" << fmt(px) << "\" y2=\"" << fmt(bottom)
        << "\" stroke=\"#eee\"/>\n";
    out << "<text x=\"" << fmt(px) << "\" y=\"" << fmt(bottom + 16) << "\" text-anchor=\"middle\" font-size=\"11\">"
        << escape(short_number(v)) << "</text>\n";
  }
  for (double v : ticks(ay, ymin, ay.log ? ymax : ay.hi)) {
    const double py = ay.px(v);
    out << "<line x1=\"" << fmt(left) << "\" y1=\"" << fmt(py) << "\" x2=\"" << fmt(right) << "\" y2=\"" << fmt(py)
        << "\" stroke=\"#eee\"/>\n";
    out << "<text x=\"" << fmt(left - 6) << "\" y=\"" << fmt(py + 4) << "\" text-anchor=\"end\" font-size=\"11\">"
        << escape(short_number(v)) << "</text>\n";
  }
  out << "<text x=\"" << fmt((left + right) / 2) << "\" y=\"" << fmt(bottom + 36)
      << "\" text-anchor=\"middle\" font-size=\"12\">" << escape(panel.x_label) << "</text>\n";
  out << "<text transform=\"translate(" << fmt(x0 + 18) << " " << fmt((top + bottom) / 2)
      << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" << escape(panel.y_label) << "</text>\n";
  for (size_t i = 0; i < panel.series.size(); ++i) {
    const auto& s = panel.series[i];
    const char* colour = kColours[i % (sizeof(kColours) / sizeof(kColours[0]))];
    std::string path;
    for (const auto& [x, y] : s.points) {
      if (!usable(x, panel.log_x) || !usable(y, panel.log_y)) continue;
      path += (path.empty() ? "" : " ") + fmt(ax.px(x)) + "," + fmt(ay.px(y));
      out << "<circle cx=\"" << fmt(ax.px(x)) << "\" cy=\"" << fmt(ay.px(y)) << "\" r=\"2.5\" fill=\"" << colour
          << "\"/>\n";
    }
    if (!path.empty()) {
      out << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\""
          << (s.dashed ? " stroke-dasharray=\"5,3\"" : "") << " points=\"" << path << "\"/>\n";
    }
    const double ly = top + 14 + 16 * static_cast<double>(i);
    out << "<line x1=\"" << fmt(left + 10) << "\" y1=\"" << fmt(ly - 4) << "\" x2=\"" << fmt(left + 28) << "\" y2=\""
        << fmt(ly - 4) << "\" stroke=\"" << colour << "\" stroke-width=\"2\"/>\n";
    out << "<text x=\"" << fmt(left + 32) << "\" y=\"" << fmt(ly) << "\" font-size=\"11\">" << escape(s.label)
        << "</text>\n";
  }
}

}  // namespace

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string short_number(double v) {
  static const char* suffixes[] = {"", "K", "M", "G", "T"};
  if (v >= 1024 && std::fabs(v - std::round(v)) < 1e-9) {
    double x = v;
    int i = 0;
    while (i < 4 && x >= 1024 && std::fmod(x, 1024) == 0) {
      x /= 1024;
      ++i;
    }
    if (i > 0) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%g%s", x, suffixes[i]);
      return buf;
    }
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

std::string render(const std::vector<Panel>& panels, const Layout& layout) {
  const int columns = std::max(1, std::min<int>(layout.columns, std::max<size_t>(panels.size(), 1)));
  const int rows = static_cast<int>((panels.size() + columns - 1) / columns);
  const int title_h = layout.title.empty() ? 0 : 30;
  const int width = columns * layout.panel_width;
  const int height = title_h + std::max(rows, 1) * layout.panel_height;
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!layout.title.empty()) {
    out << "<text x=\"" << width / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">" << escape(layout.title)
        << "</text>\n";
  }
  for (size_t i = 0; i < panels.size(); ++i) {
    const double x0 = static_cast<double>(i % columns) * layout.panel_width;
    const double y0 = title_h + static_cast<double>(i / columns) * layout.panel_height;
    draw_panel(out, panels[i], x0, y0, layout.panel_width, layout.panel_height);
  }
  out << "</svg>\n";
  return out.str();
}

void write(const std::string& path, const std::vector<Panel>& panels, const Layout& layout) {
  write_file_atomically(path, render(panels, layout));
}

std::string render_heat_map(const HeatMap& map) {
  const int n = static_cast<int>(map.values.size());
  size_t longest = 0;
  for (const auto& l : map.labels) longest = std::max(longest, l.size());
  const double cell = 56, left = 16 + 7.0 * static_cast<double>(longest), top = 64;
  const double width = std::max(320.0, left + n * cell + 16), height = top + n * cell + 16;
  double hi = 0;
  for (const auto& row : map.values) {
    for (double v : row) {
      if (std::isfinite(v)) hi = std::max(hi, v);
    }
  }
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width) << "\" height=\"" << fmt(height)
      << "\" viewBox=\"0 0 " << fmt(width) << " " << fmt(height) << "\" font-family=\"sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << fmt(width / 2) << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">"
      << escape(map.title) << "</text>\n<text x=\"" << fmt(width / 2)
      << "\" y=\"38\" text-anchor=\"middle\" font-size=\"11\">" << escape(map.unit) << "</text>\n";
  for (int i = 0; i < n; ++i) {
    const std::string label = i < static_cast<int>(map.labels.size()) ? map.labels[i] : std::to_string(i);
    out << "<text x=\"" << fmt(left - 6) << "\" y=\"" << fmt(top + (i + 0.5) * cell + 4)
        << "\" text-anchor=\"end\" font-size=\"11\">" << escape(label) << "</text>\n"
        << "<text x=\"" << fmt(left + (i + 0.5) * cell) << "\" y=\"" << fmt(top - 6)
        << "\" text-anchor=\"middle\" font-size=\"11\">" << i << "</text>\n";
    for (int j = 0; j < n && j < static_cast<int>(map.values[i].size()); ++j) {
      const double v = map.values[i][j];
      std::string fill = "#dddddd";
      bool dark = false;
      if (std::isfinite(v)) {
        const double f = hi > 0 ? std::clamp(v / hi, 0.0, 1.0) : 0.0;  // white -> #08306b
        char rgb[8];
        std::snprintf(rgb, sizeof rgb, "#%02x%02x%02x", static_cast<int>(255 - f * (255 - 8)),
                      static_cast<int>(255 - f * (255 - 48)), static_cast<int>(255 - f * (255 - 107)));
        fill = rgb;
        dark = f > 0.55;
      }
      const double x = left + j * cell, y = top + i * cell;
      out << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(cell) << "\" height=\"" << fmt(cell)
          << "\" fill=\"" << fill << "\" stroke=\"white\"/>\n";
      if (std::isfinite(v)) {
        out << "<text x=\"" << fmt(x + cell / 2) << "\" y=\"" << fmt(y + cell / 2 + 4)
            << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"" << (dark ? "white" : "black") << "\">"
            << escape(short_number(v)) << "</text>\n";
      }
    }
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace ddx::svg
