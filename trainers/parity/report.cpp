#include "parity/report.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

#include "ddx/atomic_file.h"
#include "ddx/junit.h"
#include "ddx/svg_plot.h"
#include "faults/faults.h"

#include <algorithm>

namespace ddx::parity {
namespace {

std::string run_label(const RunReport& r) {
  return r.world_size > 1 ? r.name + " x" + std::to_string(r.world_size) : r.name;
}

}  // namespace

void print_table(const std::vector<RunReport>& runs, double tolerance_rel) {
  std::printf("\n%-18s %6s %6s %16s %16s %18s  %s\n", "strategy", "ranks", "steps", "max rel loss diff",
              "first bad step", "final weight diff", "verdict");
  for (const RunReport& r : runs) {
    const Comparison& c = r.comparison;
    std::printf("%-18s %6d %6lld %16.3e %16s %18.3e  %s%s%s\n", r.name.c_str(), r.world_size,
                static_cast<long long>(c.steps), c.max_rel_loss_diff,
                c.first_bad_step < 0 ? "-" : std::to_string(c.first_bad_step).c_str(), c.final_weight_rel_diff,
                r.verdict.c_str(), c.note.empty() ? "" : "  ", c.note.c_str());
  }
  int failed = 0;
  for (const RunReport& r : runs) failed += r.verdict != "PASS";
  std::printf("parity: %zu runs, %d failed (tolerance %.1e relative per step)\n", runs.size(), failed, tolerance_rel);
  std::fflush(stdout);
}

void write_report_json(const std::string& path, const std::vector<StepPoint>& baseline,
                       const std::vector<RunReport>& runs, double tolerance_rel, const std::string& environment_json) {
  using nlohmann::json;
  auto curve_json = [](const std::vector<StepPoint>& curve) {
    json out = json::array();
    for (const auto& p : curve) {
      out.push_back({{"step", p.step}, {"loss", p.loss}, {"grad_norm", p.grad_norm}, {"lr", p.lr},
                     {"param_checksum", p.param_checksum}});
    }
    return out;
  };
  json j = {{"format", "ddx-parity-report"}, {"version", 1}, {"tolerance_rel", tolerance_rel},
            {"environment", json::parse(environment_json)}, {"baseline", curve_json(baseline)}};
  // A self-test's planted bug (or a leaked DDX_FAULT) reaches every run: the report says so.
  if (auto injected = faults::report_entry(); !injected.empty()) j["injected_faults"] = injected;
  bool passed = true;
  json list = json::array();
  for (const RunReport& r : runs) {
    const Comparison& c = r.comparison;
    passed = passed && r.verdict == "PASS";
    list.push_back({{"name", r.name}, {"strategy", r.strategy}, {"world_size", r.world_size}, {"steps", c.steps},
                    {"max_rel_loss_diff", c.max_rel_loss_diff}, {"max_rel_grad_norm_diff", c.max_rel_grad_norm_diff},
                    {"first_bad_step", c.first_bad_step < 0 ? json(nullptr) : json(c.first_bad_step)},
                    {"final_weight_max_abs_diff", c.final_weight_max_abs_diff},
                    {"final_weight_rel_diff", c.final_weight_rel_diff}, {"verdict", r.verdict}, {"note", c.note},
                    {"rel_loss_diff", c.rel_loss_diff}, {"curve", curve_json(r.curve)}, {"log", r.log_path},
                    {"seconds", r.seconds}});
  }
  j["runs"] = list;
  j["passed"] = passed;
  write_file_atomically(path, j.dump(2) + "\n");
}

void write_junit(const std::string& path, const std::vector<RunReport>& runs, double tolerance_rel) {
  std::vector<JunitCase> cases;
  for (const RunReport& r : runs) {
    JunitCase c{"ddx.parity." + r.name, run_label(r), r.seconds, r.verdict != "PASS", "", "log: " + r.log_path};
    if (c.failed) {
      std::ostringstream msg;
      msg << r.verdict << ": " << r.comparison.note << " (max rel loss diff " << r.comparison.max_rel_loss_diff
          << ", tolerance " << tolerance_rel << ")";
      c.message = msg.str();
    }
    cases.push_back(c);
  }
  write_file_atomically(path, junit_xml("ddx-parity", cases));
}

void write_parity_plot(const std::string& path, const std::vector<StepPoint>& baseline,
                       const std::vector<RunReport>& runs) {
  svg::Panel losses{"loss per step", "step", "mean token cross-entropy", false, false, {}};
  svg::Panel diffs{"difference to the baseline", "step", "|relative loss difference|", false, true, {}};
  svg::Series base{"single (baseline)", {}, false};
  for (const auto& p : baseline) base.points.emplace_back(static_cast<double>(p.step), p.loss);
  losses.series.push_back(base);
  diffs.series.push_back({"single (baseline)", {}, false});  // no points: keeps colours aligned
  for (const RunReport& r : runs) {
    if (r.curve.empty() || r.name == "determinism") continue;
    svg::Series s{run_label(r), {}, true};
    for (const auto& p : r.curve) s.points.emplace_back(static_cast<double>(p.step), p.loss);
    losses.series.push_back(s);
    svg::Series d{run_label(r), {}, false};
    for (size_t i = 0; i < r.comparison.rel_loss_diff.size(); ++i) {
      // Exact agreement has no place on a log axis: draw it at 1e-16.
      d.points.emplace_back(static_cast<double>(i + 1), std::max(r.comparison.rel_loss_diff[i], 1e-16));
    }
    diffs.series.push_back(d);
  }
  svg::Layout layout;
  layout.title = "ddx parity: every strategy against the single-device baseline";
  layout.columns = 1;
  layout.panel_width = 760;
  layout.panel_height = 320;
  svg::write(path, {losses, diffs}, layout);
}

}  // namespace ddx::parity
