// `ddx compare A B [C ...]`: loss curves from anywhere against a reference (A), step by step,
// with the comparison `ddx parity` makes (harness/parity/curve_diff.h): the first step where a curve leaves
// the tolerance, its largest difference, and with --plot an SVG of the curves and their
// differences (no file unless one is named). Exit 0 when every curve agrees with A, 1 when one
// does not, a curve that stops before A's last step included (a run that died early reproduces
// nothing; --allow-shorter compares only the steps it has): a CI check that a framework upgrade,
// a new cluster or a new parallel layout reproduces yesterday's run.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "harness/parity/curve_diff.h"
#include "ddx/errors/errors.h"
#include "ddx/processes/output_path.h"
#include "ddx/text/svg_plot.h"
#include "ddx/text/text.h"
#include "harness/parity/compare_command.h"
#include "harness/parity/curve_files.h"
#include "harness/parity/curves.h"

namespace ddx::cli {
namespace {

struct CompareFlags {
  std::vector<std::string> files;
  std::string format = "auto";
  std::vector<std::string> keys = {"loss"};       // one for every file, or one per file
  std::vector<std::string> step_keys = {"step"};
  bool step_keys_named = false;                    // given on the command line: each must be in its file
  bool allow_shorter = false;                      // a curve may stop before the reference's last step
  std::string key = "loss";                        // the first file's, for labels
  double rtol = parity::Tolerances{}.loss_rel;  // parity's per-step loss tolerance
  double atol = 0;
  std::string plot;  // none unless asked for: nothing is written that the user did not name
};

std::string name_of(const std::string& path) { return std::filesystem::path(path).filename().string(); }

void write_plot(const CompareFlags& f, const std::vector<std::vector<CurvePoint>>& curves,
                const std::vector<CurveDiff>& diffs) {
  svg::Panel values{"Curves", "step", f.key, false, false, {}};
  svg::Panel differences{"|difference| from " + name_of(f.files[0]), "step", "|" + f.key + " - reference|", false, true, {}};
  for (size_t c = 0; c < curves.size(); ++c) {
    svg::Series s{name_of(f.files[c]), {}, c > 0};
    for (const CurvePoint& p : curves[c]) s.points.emplace_back(static_cast<double>(p.step), p.value);
    values.series.push_back(s);
  }
  for (size_t c = 0; c < diffs.size(); ++c) {
    svg::Series s{name_of(f.files[c + 1]), {}, false};
    for (size_t i = 0; i < diffs[c].steps.size(); ++i) {
      s.points.emplace_back(static_cast<double>(diffs[c].steps[i]), diffs[c].abs_diff[i]);
    }
    differences.series.push_back(s);
  }
  // The tolerance at each step of the reference, so a reader sees where a curve crossed it.
  svg::Series allowed{"tolerance", {}, true};
  for (const CurvePoint& p : curves[0]) {
    allowed.points.emplace_back(static_cast<double>(p.step), f.atol + f.rtol * std::fabs(p.value));
  }
  differences.series.push_back(allowed);
  svg::Layout layout;
  layout.title = "ddx compare: " + f.key + " against " + name_of(f.files[0]);
  svg::write(f.plot, {values, differences}, layout);
}

// The i-th file's key: the only one given, or its own.
std::string per_file(const std::vector<std::string>& given, size_t i) { return given.size() == 1 ? given[0] : given[i]; }

int64_t last_step(const std::vector<CurvePoint>& curve) {
  int64_t last = curve.front().step;
  for (const CurvePoint& p : curve) last = std::max(last, p.step);
  return last;
}

// Said wherever a file's steps are its records' positions: the default step key was not in it.
std::string row_note(const parity::CurveFile& file, const std::string& step_key) {
  return file.steps_are_rows ? "; no '" + step_key + "' in it: its steps are its row numbers" : "";
}

int run_compare(CompareFlags& f) {
  for (const auto* given : {&f.keys, &f.step_keys}) {
    if (given->size() != 1 && given->size() != f.files.size()) {
      throw UsageError("--key and --step-key take one name for every file or one per file: got " +
                       std::to_string(given->size()) + " for " + std::to_string(f.files.size()) + " files");
    }
  }
  check_output_file("--plot", f.plot);  // before anything is read, so a bad path costs no work
  f.key = f.keys[0];
  std::vector<parity::CurveFile> files;
  std::vector<std::vector<CurvePoint>> curves;
  for (size_t i = 0; i < f.files.size(); ++i) {  // every file is read before anything is judged or written
    files.push_back(parity::read_curve_file(
        {f.files[i], f.format, per_file(f.keys, i), per_file(f.step_keys, i), f.step_keys_named}));
    curves.push_back(files.back().points);
  }
  std::printf("ddx compare: reference %s (%zu steps of '%s'%s); a step agrees when |diff| <= %g + %g x |reference|\n",
              f.files[0].c_str(), curves[0].size(), f.key.c_str(), row_note(files[0], per_file(f.step_keys, 0)).c_str(),
              f.atol, f.rtol);
  const int64_t reference_last = last_step(curves[0]);
  std::vector<CurveDiff> diffs;
  int differing = 0;
  for (size_t c = 1; c < curves.size(); ++c) {
    const CurveDiff d = diff_curves(curves[0], curves[c], [&](size_t) { return PointTolerance{f.atol, f.rtol}; });
    diffs.push_back(d);
    std::string line = printf_text("  %s: %zu common steps; ", f.files[c].c_str(), d.steps.size());
    // A curve that ends before the reference does (a run that died, a job cut short) has not
    // reproduced it, however well its steps agree.
    const bool stops_early = !d.steps.empty() && last_step(curves[c]) < reference_last;
    const std::string stop = printf_text("it stops at step %lld, the reference goes on to step %lld",
                                         static_cast<long long>(last_step(curves[c])),
                                         static_cast<long long>(reference_last));
    const bool differs = d.steps.empty() || d.first_bad_step >= 0 || (stops_early && !f.allow_shorter);
    if (d.steps.empty()) {
      line += "DIFFERS: no step in common with the reference";
    } else if (d.first_bad_step >= 0) {
      const size_t i = std::find(d.steps.begin(), d.steps.end(), d.first_bad_step) - d.steps.begin();
      double ref = 0, run = 0;
      for (const auto& p : curves[0]) ref = p.step == d.first_bad_step ? p.value : ref;
      for (const auto& p : curves[c]) run = p.step == d.first_bad_step ? p.value : run;
      line += printf_text("DIFFERS from step %lld: %.9g against the reference's %.9g (|diff| %.3g, relative %.3g)",
                          static_cast<long long>(d.first_bad_step), run, ref, d.abs_diff[i], d.rel_diff[i]);
      if (stops_early) line += "; " + stop;
    } else if (stops_early && !f.allow_shorter) {
      line += "DIFFERS: " + stop + " (--allow-shorter compares only the steps it has)";
    } else if (stops_early) {
      line += "agrees on the steps it has; " + stop + " (--allow-shorter)";
    } else {
      line += "agrees";
    }
    if (!d.steps.empty()) {
      line += printf_text("; largest |diff| %.3g at step %lld, largest relative %.3g, %.2f x the tolerance", d.max_abs,
                          static_cast<long long>(d.max_abs_step), d.max_rel, d.margin);
    }
    if (d.only_in_reference > 0 || d.only_in_run > 0) {
      line += printf_text(" (%lld steps only in the reference, %lld only in this curve)",
                          static_cast<long long>(d.only_in_reference), static_cast<long long>(d.only_in_run));
    }
    line += row_note(files[c], per_file(f.step_keys, c));
    std::printf("%s\n", line.c_str());
    differing += differs ? 1 : 0;
  }
  if (!f.plot.empty()) {
    write_plot(f, curves, diffs);
    std::printf("# plot: %s\n", f.plot.c_str());
  }
  std::printf("compare: %zu curve%s against %s: %s\n", diffs.size(), diffs.size() == 1 ? "" : "s", name_of(f.files[0]).c_str(),
              differing == 0 ? "all agree" : (std::to_string(differing) + " differ").c_str());
  return differing == 0 ? 0 : 1;
}

}  // namespace

Subcommand add_compare_command(CLI::App& app) {
  auto f = std::make_shared<CompareFlags>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Loss curves from anywhere (ddx metrics.jsonl, JSON lines with --key, CSV with a --key column) against the "
      "first file, step by step, with the comparison ddx parity makes: the first step beyond the tolerance, the "
      "largest difference, and with --plot an SVG of the curves and their differences. Exit 0 when all agree, 1 "
      "when one does not or stops before the reference's last step.\n"
      "  ddx compare yesterday/metrics.jsonl today/metrics.jsonl --rtol 1e-4");
  cmd->add_option("files", f->files, "The reference curve, then one or more curves to compare with it")
      ->required()
      ->expected(2, -1)
      ->check(CLI::ExistingFile);
  cmd->add_option("--format", f->format, "auto (by extension, else by content), jsonl or csv")
      ->check(CLI::IsMember({"auto", "jsonl", "csv"}))
      ->capture_default_str();
  cmd->add_option("--key,--column", f->keys,
                  "JSON key or CSV column holding the values: once for every file, or once per file in order")
      ->capture_default_str();
  CLI::Option* step_keys =
      cmd->add_option("--step-key,--step-column", f->step_keys,
                      "JSON key or CSV column holding the step; once, or once per file. A named key must be in its "
                      "file; without one, a file with no 'step' is read by position (1, 2, ...)")
          ->capture_default_str();
  cmd->add_option("--rtol", f->rtol, "Relative tolerance per step (ddx parity's default for the loss)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--atol", f->atol, "Absolute tolerance per step")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_flag("--allow-shorter", f->allow_shorter,
                "Let a curve that stops before the reference's last step agree on the steps it has (default: it "
                "differs, as a run that died early does)");
  cmd->add_option("--plot", f->plot, "Write an SVG of the curves and their differences to this file (default: no plot)");
  return {cmd, [f, step_keys]() {
            f->step_keys_named = step_keys->count() > 0;
            return run_compare(*f);
          }};
}

}  // namespace ddx::cli
