// The matrix's outputs: one table row per fault (printed as each row finishes, and again as
// table.txt), report.json with every row's evidence, and JUnit XML for CI; all written atomically.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "ddx/processes/atomic_file.h"
#include "harness/common/junit.h"
#include "ddx/text/text.h"
#include "harness/fault_matrix/matrix.h"

namespace ddx::faults::matrix {
namespace {

std::string number_or_all(int value) { return value < 0 ? "all" : std::to_string(value); }

// "bit-identical@10": equal to the reference after resuming from the checkpoint of step 10.
std::string recovery_cell(const RowResult& r) {
  if (!r.recovery_applies) return "-";
  if (r.bit_identical) return "bit-identical@" + r.resumed_from;
  if (r.recovered && r.resumed_from != r.resume_expected) return "from " + r.resumed_from + ", not " + r.resume_expected;
  if (r.recovered && !r.compared) return "yes, unjudged";  // the reference run failed
  return r.recovered ? "yes, differs" : "no";
}

std::string format(const char* fmt, const std::string& a, const std::string& b, const std::string& c,
                   const std::string& d, const std::string& e, const std::string& f, const std::string& g,
                   const std::string& h, const std::string& i, const std::string& j, const std::string& k) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, a.c_str(), b.c_str(), c.c_str(), d.c_str(), e.c_str(), f.c_str(), g.c_str(),
                h.c_str(), i.c_str(), j.c_str(), k.c_str());
  return buf;
}

constexpr const char* kRow = "%-18s %4s %4s  %-8s %-17s %-24s %6s %4s  %-6s %-16s %s";

}  // namespace

std::string table_header() {
  return format(kRow, "kind", "rank", "step", "detected", "detected by", "culprit named", "diag s", "left", "ckpts",
                "recovered", "verdict");
}

std::string table_row(const RowResult& r) {
  if (r.skipped) {
    return format(kRow, r.kind, number_or_all(r.rank), number_or_all(r.step), "-", "-", "-", "-", "-", "-", "-",
                  "SKIPPED") + "\n    " + r.note;
  }
  char seconds[32] = "-";
  if (r.seconds_to_diagnosis >= 0) std::snprintf(seconds, sizeof(seconds), "%.1f", r.seconds_to_diagnosis);
  // The launcher's rows show how the rank ended too: "rank 3 SIGKILL (yes)".
  const std::string named = r.culprit_named + (r.how_named.empty() ? "" : " " + r.how_named);
  const std::string culprit = !r.detected ? "-" : named + (r.culprit_correct ? " (yes)" : " (NO)");
  std::string line = format(kRow, r.kind, number_or_all(r.rank), number_or_all(r.step), r.detected ? "yes" : "no",
                            r.detected ? r.expected_detector : "-", culprit, seconds,
                            std::to_string(r.leftover_processes), !r.checkpoints_apply ? "-" : r.checkpoints_intact ? "intact" : "BAD",
                            recovery_cell(r), r.passed ? "PASS" : "FAIL");
  if (!r.passed) line += "\n    " + r.note + "\n    log: " + r.log;
  return line;
}

std::string summary_line(const std::vector<RowResult>& rows) {
  int failed = 0, skipped = 0;
  for (const RowResult& r : rows) {
    skipped += r.skipped;
    failed += !r.passed && !r.skipped;
  }
  return "fault matrix: " + std::to_string(rows.size()) + " rows, " + std::to_string(failed) + " failed" +
         (skipped > 0 ? ", " + std::to_string(skipped) + " skipped" : "");
}

const char* verdict_word(const Reference& reference, const std::vector<RowResult>& rows) {
  bool failed = !reference.ok, skipped = false;
  for (const RowResult& r : rows) {
    failed = failed || (!r.passed && !r.skipped);
    skipped = skipped || r.skipped;
  }
  return failed ? "FAIL" : skipped ? "INCOMPLETE" : "PASS";
}

void write_reports(const Options& o, const Reference& reference, const std::vector<RowResult>& rows) {
  using nlohmann::json;
  bool passed = reference.ok;
  json list = json::array();
  std::vector<JunitCase> cases;
  std::string table = table_header() + "\n";
  for (const RowResult& r : rows) {
    passed = passed && r.passed;
    table += table_row(r) + "\n";
    list.push_back({{"kind", r.kind},
                    {"faults", r.faults},
                    {"rank", r.rank < 0 ? json(nullptr) : json(r.rank)},
                    {"step", r.step < 0 ? json(nullptr) : json(r.step)},
                    {"detected", r.detected},
                    {"expected_detector", r.expected_detector},
                    {"detected_by", r.detected_by},
                    {"culprit_expected", r.culprit_expected},
                    {"culprit_named", r.culprit_named},
                    {"culprit_correct", r.culprit_correct},
                    {"how_expected", r.how_expected.empty() ? json(nullptr) : json(r.how_expected)},
                    {"how_named", r.how_named.empty() ? json(nullptr) : json(r.how_named)},
                    {"seconds_to_diagnosis", r.seconds_to_diagnosis < 0 ? json(nullptr) : json(r.seconds_to_diagnosis)},
                    {"leftover_processes", r.leftover_processes},
                    {"checkpoints_intact", r.checkpoints_apply ? json(r.checkpoints_intact) : json(nullptr)},
                    {"checkpoints", r.checkpoints_note},
                    {"recovery_applies", r.recovery_applies},
                    {"recovered", r.recovered},
                    {"bit_identical", r.bit_identical},
                    {"resume_expected", r.resume_expected.empty() ? json(nullptr) : json(std::stoll(r.resume_expected))},
                    {"resumed_from", r.resumed_from.empty() ? json(nullptr) : json(std::stoll(r.resumed_from))},
                    {"recovery", r.recovery_note},
                    {"exit_code", r.exit_code},
                    {"timed_out", r.timed_out},
                    {"seconds", r.seconds},
                    {"log", r.log},
                    {"skipped", r.skipped},
                    {"verdict", r.skipped ? "SKIPPED" : r.passed ? "PASS" : "FAIL"},
                    {"note", r.note}});
    const std::string name = r.kind + " (" + o.strategy + " x" + std::to_string(o.nproc) + ")";
    cases.push_back({"ddx.faults." + r.kind, name, r.seconds, !r.passed && !r.skipped, r.note, "log: " + r.log, r.skipped});
  }
  table += summary_line(rows) + (reference.ok ? "" : "; the reference run failed: " + reference.note) + "\n";
  const json doc = {{"format", "ddx-fault-matrix"},
                    {"version", 1},
                    {"strategy", o.strategy},
                    {"nproc", o.nproc},
                    {"nnodes", o.nnodes},
                    {"model", o.model},
                    {"fault_step", o.fault_step},
                    {"ckpt_freq", o.ckpt_freq},
                    {"max_steps", o.max_steps},
                    {"train_args", o.train_args},
                    {"detectors_off", o.without},
                    {"reference", {{"ok", reference.ok}, {"note", reference.note}, {"steps", reference.curve.size()},
                                   {"seconds", reference.seconds}, {"log", reference.log}}},
                    {"rows", list},
                    {"passed", passed}};
  write_file_atomically(o.out_dir + "/report.json", doc.dump(2) + "\n");
  write_file_atomically(o.out_dir + "/junit.xml", junit_xml("ddx-fault-matrix", cases));
  write_file_atomically(o.out_dir + "/table.txt", table);
}

}  // namespace ddx::faults::matrix
