// validate.json (every stage: verdict, exit code, time, log, artefacts) and validate.md (the
// same as a table, with the stages' plots inlined), next to the stages' own reports.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

#include "ddx/atomic_file.h"
#include "validate/validate.h"

namespace ddx::validate {

void write_report(const ValidateOptions& o, const std::vector<StageResult>& results) {
  bool passed = true;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& r : results) {
    passed = passed && r.ran && r.passed;
    stages.push_back({{"stage", r.name}, {"ran", r.ran}, {"passed", r.passed}, {"exit_code", r.exit_code},
                      {"timed_out", r.timed_out}, {"seconds", r.seconds}, {"log", r.log},
                      {"summary", r.summary}, {"artefacts", r.artefacts}});
  }
  nlohmann::json report = {{"ranks", o.nproc}, {"launcher", o.launcher.empty() ? "ddx launch" : o.launcher},
                           {"passed", passed}, {"stages", stages}};
  write_file_atomically(o.out_dir + "/validate.json", report.dump(2) + "\n");

  std::ostringstream md;
  md << "# ddx validate: " << (passed ? "PASS" : "FAIL") << "\n\n" << o.nproc << " ranks, launcher "
     << report["launcher"].get<std::string>() << "\n\n| stage | result | seconds | summary | artefacts |\n|---|---|---|---|---|\n";
  for (const auto& r : results) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", r.seconds);
    md << "| " << r.name << " | " << (!r.ran ? "not run" : r.passed ? "PASS" : "FAIL") << " | "
       << (r.ran ? seconds : "") << " | " << r.summary << " | ";
    if (r.ran) md << "[log](" << r.log << ")";
    for (const auto& a : r.artefacts) md << ", [" << a << "](" << a << ")";
    md << " |\n";
  }
  for (const auto& r : results) {
    for (const auto& a : r.artefacts) {
      if (r.ran && a.size() > 4 && a.compare(a.size() - 4, 4, ".svg") == 0) md << "\n## " << r.name << "\n\n![" << a << "](" << a << ")\n";
    }
  }
  write_file_atomically(o.out_dir + "/validate.md", md.str());
}

}  // namespace ddx::validate
