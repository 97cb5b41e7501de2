// validate.json (every stage: verdict, exit code, time, log, artefacts, the busbw judgement),
// validate.md (the table, linking the stages' own plots) and validate.html: one self-contained
// page (no external files) with the tables and every plot inline: the bandwidth probe's busbw
// vs size, the pairwise matrix as a heat map, parity's and the burn-in's loss curves.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "ddx/processes/atomic_file.h"
#include "ddx/text/svg_plot.h"
#include "harness/validate/validate.h"

namespace ddx::validate {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
}

namespace {

using nlohmann::json;

std::string verdict(const StageResult& r) { return !r.ran ? "not run" : r.passed ? "PASS" : "FAIL"; }

std::string seconds_text(const StageResult& r) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", r.seconds);
  return r.ran ? text : "";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// An SVG file a stage wrote, ready to sit inside HTML (its XML declaration removed).
std::string inline_svg(const std::string& path) {
  std::string svg = read_text(path);
  if (svg.rfind("<?xml", 0) == 0) svg.erase(0, svg.find("?>") + 2);
  return svg;
}

// The pairwise matrix of pairs.json as a heat map, rows named by rank, host and local rank.
std::string pairs_heat_map(const std::string& path) {
  const json pairs = read_json(path);
  if (!pairs.is_object() || !pairs.contains("ddx")) return "";
  svg::HeatMap map;
  map.title = "Pairwise link bandwidth";
  map.unit = "GB/s each way, " + svg::short_number(pairs["ddx"].value("bytes", 0.0)) + " B per exchange";
  for (const auto& d : pairs.value("devices", json::array())) {
    map.labels.push_back(std::to_string(d["rank"].get<int>()) + " " + d["hostname"].get<std::string>() + ":" +
                         std::to_string(d["ddx"]["local_rank"].get<int>()));
  }
  const auto& matrix = pairs["ddx"]["matrix_gbs"];
  for (size_t a = 0; a < matrix.size(); ++a) {
    std::vector<double> row;
    for (size_t b = 0; b < matrix[a].size(); ++b) {
      row.push_back(a == b || !matrix[a][b].is_number() ? std::numeric_limits<double>::quiet_NaN()
                                                         : matrix[a][b].get<double>());
    }
    map.values.push_back(row);
  }
  return svg::render_heat_map(map);
}

const StageResult* find(const std::vector<StageResult>& results, const std::string& name) {
  for (const auto& r : results) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

bool has_artefact(const StageResult* r, const std::string& a) {
  if (!r) return false;
  for (const auto& x : r->artefacts) {
    if (x == a) return true;
  }
  return false;
}

// A PASS/WARN/FAIL/SKIP table (the doctor's, the GPU health stage's) from its JSON.
std::string checks_section(const std::string& path, const std::string& title) {
  const json doc = read_json(path);
  if (!doc.is_object() || !doc.contains("checks")) return "";
  std::ostringstream h;
  h << "<h2>" << title << "</h2>\n<table><tr><th>check</th><th>status</th><th>value</th><th>fix</th></tr>\n";
  for (const auto& c : doc["checks"]) {
    const std::string status = c["status"].get<std::string>();
    h << "<tr><td>" << svg::escape(c["check"].get<std::string>()) << "</td><td class=\"" << status << "\">" << status
      << "</td><td>" << svg::escape(c["value"].get<std::string>()) << "</td><td>"
      << svg::escape(c["fix"].get<std::string>()) << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

// compute.json / memory.json: one row per metric and rank, the slow ones marked with why.
std::string rank_probe_section(const ValidateOptions& o, const std::string& probe) {
  const json j = read_json(o.out_dir + "/" + probe + ".json");
  if (!j.is_object() || !j.contains("ranks")) return "";
  std::ostringstream h;
  h << "<h2>" << (probe == "compute" ? "Compute (matrix multiply)" : "Memory bandwidth (STREAM)") << "</h2>\n<p>"
    << "A rank is named when its best of " << j["rule"]["min_trials"].get<int>() << "+ trials is below "
    << std::lround((1 - j["rule"]["margin"].get<double>()) * 100)
    << "% of the median of the other ranks and below their spread; a host when even its best rank is.</p>\n"
    << "<table><tr><th>metric</th><th>rank</th><th>host</th><th>local rank</th><th>best trial</th><th>result</th></tr>\n";
  for (const auto& m : j["metrics"]) {
    for (const auto& r : j["ranks"]) {
      std::string why;
      for (const auto& f : j["slow_ranks"]) {
        if (f["metric"] == m["key"] && f["rank"] == r["rank"]) {
          char text[160];
          std::snprintf(text, sizeof text, "SLOW: peers' median %.4g, named below %.4g", f["peer_median"].get<double>(),
                        f["threshold"].get<double>());
          why = text;
        }
      }
      for (const auto& f : j["slow_hosts"]) {
        if (f["metric"] == m["key"] && f["host"] == r["host"]) why += (why.empty() ? "SLOW" : "") + std::string(" (slow host)");
      }
      char value[64];
      std::snprintf(value, sizeof value, "%.4g %s", r["metrics"][m["key"].get<std::string>()]["best"].get<double>(),
                    m["unit"].get<std::string>().c_str());
      h << "<tr><td>" << svg::escape(m["label"].get<std::string>()) << "</td><td>" << r["rank"].get<int>() << "</td><td>"
        << svg::escape(r["host"].get<std::string>()) << "</td><td>" << r["local_rank"].get<int>() << "</td><td>" << value
        << "</td><td class=\"" << (why.empty() ? "PASS" : "FAIL") << "\">" << (why.empty() ? "PASS" : svg::escape(why))
        << "</td></tr>\n";
    }
  }
  h << "</table>\n";
  return h.str();
}

// The baseline stage: every figure that regressed, before and after.
std::string baseline_section(const StageResult& b) {
  std::ostringstream h;
  h << "<h2>Against the baseline</h2>\n<p>" << svg::escape(b.summary) << "</p>\n";
  if (b.details["regressions"].empty()) return h.str();
  h << "<table><tr><th>figure</th><th>before</th><th>now</th><th>change</th></tr>\n";
  for (const auto& g : b.details["regressions"]) {
    char row[128];
    std::snprintf(row, sizeof row, "<td>%.4g</td><td>%.4g</td><td class=\"FAIL\">%+.0f%%</td>", g["before"].get<double>(),
                  g["after"].get<double>(), g["change"].get<double>() * 100);
    h << "<tr><td>" << svg::escape(g["figure"].get<std::string>()) << "</td>" << row << "</tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

std::string html_page(const ValidateOptions& o, const std::vector<StageResult>& results, const json& report) {
  const bool passed = report["passed"].get<bool>();
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ddx validate: " << (passed ? "PASS" : "FAIL")
    << "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
       "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
       ".PASS{color:#087f23;font-weight:bold}.FAIL{color:#b00020;font-weight:bold}.WARN{color:#b36b00}"
       ".SKIP,.not{color:#777}</style></head><body>\n"
    << "<h1>ddx validate: <span class=\"" << (passed ? "PASS" : "FAIL") << "\">" << (passed ? "PASS" : "FAIL")
    << "</span></h1>\n<p>" << o.nproc << " ranks, launcher " << svg::escape(report["launcher"].get<std::string>())
    << "</p>\n<h2>Stages</h2>\n<table><tr><th>stage</th><th>result</th><th>seconds</th><th>summary</th><th>log</th></tr>\n";
  for (const auto& r : results) {
    h << "<tr><td>" << svg::escape(r.name) << "</td><td class=\"" << verdict(r).substr(0, 4) << "\">" << verdict(r)
      << "</td><td>" << seconds_text(r) << "</td><td>" << svg::escape(r.summary) << "</td><td>"
      << (r.ran ? svg::escape(r.log) : "") << "</td></tr>\n";
  }
  h << "</table>\n";

  h << checks_section(o.out_dir + "/doctor.json", "Doctor") << checks_section(o.out_dir + "/gpu-health.json", "GPU health");
  for (const char* probe : {"compute", "memory"}) h << rank_probe_section(o, probe);

  const StageResult* bw = find(results, "bandwidth");
  if (bw && bw->details.is_object()) {
    h << "<h2>Bandwidth</h2>\n<p>Threshold: " << svg::escape(bw->details["threshold_source"].get<std::string>())
      << "</p>\n<table><tr><th>collective</th><th>bytes</th><th>busbw (GB/s)</th><th>result</th></tr>\n";
    for (const auto& c : bw->details["collectives"]) {
      const bool ok = c["ok"].get<bool>();
      char busbw[32];
      std::snprintf(busbw, sizeof busbw, "%.4g", c["busbw_gbs"].get<double>());
      h << "<tr><td>" << svg::escape(c["collective"].get<std::string>()) << "</td><td>"
        << svg::short_number(c["bytes"].get<double>()) << "</td><td>" << busbw << "</td><td class=\""
        << (ok ? "PASS" : "FAIL") << "\">" << (ok ? "PASS" : "FAIL") << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  if (has_artefact(bw, "busbw.svg")) h << "<h3>Bus bandwidth vs message size</h3>\n" << inline_svg(o.out_dir + "/busbw.svg");
  if (has_artefact(find(results, "pairwise links"), "pairs.json")) {
    h << "<h2>Pairwise links</h2>\n" << pairs_heat_map(o.out_dir + "/pairs.json");
  }
  if (has_artefact(find(results, "parity"), "parity/loss.svg")) {
    h << "<h2>Parity: loss curves of every strategy</h2>\n" << inline_svg(o.out_dir + "/parity/loss.svg");
  }
  if (has_artefact(find(results, "burn-in"), "burn-in/loss.svg")) {
    h << "<h2>Training burn-in: loss curve</h2>\n" << inline_svg(o.out_dir + "/burn-in/loss.svg");
  }
  if (const StageResult* b = find(results, "baseline"); b && b->details.is_object()) h << baseline_section(*b);
  h << "</body></html>\n";
  return h.str();
}

}  // namespace

void write_report(const ValidateOptions& o, const std::vector<StageResult>& results) {
  bool passed = true;
  json stages = json::array();
  for (const auto& r : results) {
    passed = passed && r.ran && r.passed;
    json s = {{"stage", r.name}, {"ran", r.ran}, {"passed", r.passed}, {"exit_code", r.exit_code},
              {"timed_out", r.timed_out}, {"seconds", r.seconds}, {"log", r.log},
              {"summary", r.summary}, {"artefacts", r.artefacts}};
    if (!r.details.is_null()) s["details"] = r.details;
    stages.push_back(s);
  }
  json report = {{"ranks", o.nproc}, {"launcher", o.launcher.empty() ? "ddx launch" : o.launcher},
                 {"passed", passed}, {"stages", stages}, {"figures", to_json(figures_of(o, results))}};
  write_file_atomically(o.out_dir + "/validate.json", report.dump(2) + "\n");
  write_file_atomically(o.out_dir + "/validate.html", html_page(o, results, report));

  std::ostringstream md;
  md << "# ddx validate: " << (passed ? "PASS" : "FAIL") << "\n\n" << o.nproc << " ranks, launcher "
     << report["launcher"].get<std::string>() << "\n\n| stage | result | seconds | summary | artefacts |\n|---|---|---|---|---|\n";
  for (const auto& r : results) {
    md << "| " << r.name << " | " << verdict(r) << " | " << seconds_text(r) << " | " << r.summary << " | ";
    if (r.ran) md << "[log](" << r.log << ")";
    for (const auto& a : r.artefacts) md << ", [" << a << "](" << a << ")";
    md << " |\n";
  }
  for (const auto& r : results) {
    for (const auto& a : r.artefacts) {
      if (r.ran && a.size() > 4 && a.compare(a.size() - 4, 4, ".svg") == 0) md << "\n## " << r.name << "\n\n![" << a << "](" << a << ")\n";
    }
  }
  if (const StageResult* b = find(results, "baseline"); b && b->details.is_object() && !b->details["regressions"].empty()) {
    md << "\n## Regressions against the baseline\n\n| figure | before | now | change |\n|---|---|---|---|\n";
    for (const auto& g : b->details["regressions"]) {
      char row[128];
      std::snprintf(row, sizeof row, " | %.4g | %.4g | %+.0f%% |\n", g["before"].get<double>(), g["after"].get<double>(),
                    g["change"].get<double>() * 100);
      md << "| " << g["figure"].get<std::string>() << row;
    }
  }
  write_file_atomically(o.out_dir + "/validate.md", md.str());
}

}  // namespace ddx::validate
