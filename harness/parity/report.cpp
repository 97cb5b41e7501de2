#include "harness/parity/report.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

#include "ddx/processes/atomic_file.h"
#include "harness/common/junit.h"
#include "ddx/text/svg_plot.h"
#include "faults/faults.h"

#include <algorithm>

namespace ddx::parity {
namespace {

std::string run_label(const RunReport& r) {
  return r.world_size > 1 ? r.name + " x" + std::to_string(r.world_size) : r.name;
}

}  // namespace

void print_table(const std::vector<RunReport>& runs, const Tolerances& tol) {
  // Each measure next to its tolerance; "margin" is the largest measure over its tolerance
  // (below 1 passes: a healthy run shows its headroom, a planted bug how far over it lands).
  std::printf("\n%-18s %5s %5s %14s %14s %14s %14s %8s  %s\n", "strategy", "ranks", "steps", "max rel loss",
              "first bad step", "step-1 grads", "final weights", "margin", "verdict");
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3e", value);
    return std::string(text);
  };
  int failed = 0, skipped = 0;
  const RunReport* worst = nullptr;  // the compared run with the least room left
  for (const RunReport& r : runs) {
    const Comparison& c = r.comparison;
    failed += r.verdict != "PASS" && r.verdict != "SKIP";
    if ((r.verdict == "PASS" || r.verdict == "FAIL") && (!worst || c.margin > worst->comparison.margin)) worst = &r;
    if (r.verdict == "SKIP") {
      ++skipped;
      std::printf("%-18s %5d %5s %14s %14s %14s %14s %8s  SKIP  %s\n", r.name.c_str(), r.world_size, "-", "-", "-", "-",
                  "-", "-", c.note.c_str());
      continue;
    }
    char margin[32];
    std::snprintf(margin, sizeof(margin), "%.2gx", c.margin);
    std::printf("%-18s %5d %5lld %14.3e %14s %14s %14.3e %8s  %s%s%s\n", r.name.c_str(), r.world_size,
                static_cast<long long>(c.steps), c.max_rel_loss_diff,
                c.first_bad_step < 0 ? "-" : std::to_string(c.first_bad_step).c_str(),
                c.grads_rel_diff < 0 ? "-" : number(c.grads_rel_diff).c_str(), c.final_weight_step_diff, margin,
                r.verdict.c_str(), c.note.empty() ? "" : "  ", c.note.c_str());
  }
  std::string worst_text;
  if (worst) {
    char text[96];
    std::snprintf(text, sizeof(text), "; worst margin %.2g (%s x%d)", worst->comparison.margin, worst->name.c_str(),
                  worst->world_size);
    worst_text = text;
  }
  // "N runs" counts what ran: a SKIP row is a layout that could not run, listed with its reason.
  std::printf("parity: %zu runs, %d failed%s%s (tolerances: loss and gradient norm %.1e per step, step-1 "
              "gradients %.1e, final weights %.2g of AdamW's largest step)\n",
              runs.size() - skipped, failed, skipped ? (", " + std::to_string(skipped) + " skipped").c_str() : "",
              worst_text.c_str(), tol.loss_rel, tol.grads_rel, tol.weight_steps);
  std::fflush(stdout);
}

void write_report_json(const std::string& path, const std::vector<StepPoint>& baseline,
                       const std::vector<RunReport>& runs, const Tolerances& tol, const std::string& environment_json) {
  using nlohmann::json;
  auto curve_json = [](const std::vector<StepPoint>& curve) {
    json out = json::array();
    for (const auto& p : curve) {
      out.push_back({{"step", p.step}, {"loss", p.loss}, {"grad_norm", p.grad_norm}, {"lr", p.lr},
                     {"param_checksum", p.param_checksum}});
    }
    return out;
  };
  json j = {{"format", "ddx-parity-report"}, {"version", 2}, {"tolerance_rel", tol.loss_rel},
            {"tolerances", {{"loss_rel", tol.loss_rel}, {"grads_rel", tol.grads_rel}, {"weight_steps", tol.weight_steps}}},
            {"environment", json::parse(environment_json)}, {"baseline", curve_json(baseline)}};
  // A self-test's planted bug (or a leaked DDX_FAULT) reaches every run: the report says so.
  if (auto injected = faults::report_entry(); !injected.empty()) j["injected_faults"] = injected;
  bool passed = true;
  json list = json::array();
  for (const RunReport& r : runs) {
    const Comparison& c = r.comparison;
    passed = passed && (r.verdict == "PASS" || r.verdict == "SKIP");
    list.push_back({{"name", r.name}, {"strategy", r.strategy}, {"world_size", r.world_size}, {"steps", c.steps},
                    {"max_rel_loss_diff", c.max_rel_loss_diff}, {"max_rel_grad_norm_diff", c.max_rel_grad_norm_diff},
                    {"first_bad_step", c.first_bad_step < 0 ? json(nullptr) : json(c.first_bad_step)},
                    {"grads_rel_diff", c.grads_rel_diff < 0 ? json(nullptr) : json(c.grads_rel_diff)},
                    {"grads_worst_tensor", c.grads_worst_tensor},
                    {"final_weight_max_abs_diff", c.final_weight_max_abs_diff},
                    {"final_weight_rel_diff", c.final_weight_rel_diff},
                    {"final_weight_step_diff", c.final_weight_step_diff}, {"margin", c.margin},
                    {"verdict", r.verdict}, {"note", c.note},
                    {"rel_loss_diff", c.rel_loss_diff}, {"curve", curve_json(r.curve)}, {"log", r.log_path},
                    {"seconds", r.seconds}});
  }
  j["runs"] = list;
  j["passed"] = passed;
  write_file_atomically(path, j.dump(2) + "\n");
}

void write_junit(const std::string& path, const std::vector<RunReport>& runs, const Tolerances& tol) {
  std::vector<JunitCase> cases;
  for (const RunReport& r : runs) {
    JunitCase c{"ddx.parity." + r.name, run_label(r), r.seconds, r.verdict != "PASS" && r.verdict != "SKIP", "",
                "log: " + r.log_path};
    c.skipped = r.verdict == "SKIP";
    if (c.skipped) c.message = r.comparison.note;
    if (c.failed) {
      std::ostringstream msg;
      msg << r.verdict << ": " << r.comparison.note << " (max rel loss diff " << r.comparison.max_rel_loss_diff
          << ", tolerance " << tol.loss_rel << "; margin " << r.comparison.margin << "x)";
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
