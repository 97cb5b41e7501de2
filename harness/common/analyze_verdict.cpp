#include "harness/common/analyze_verdict.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>

#include "ddx/processes/run_process.h"

namespace ddx::harness {

AnalyzeVerdict analyze_traces(const std::string& traces, const std::string& json_path) {
  run_process({self_executable(), "analyze", "--json", traces}, {}, json_path, 120);
  std::ifstream in(json_path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The log holds stderr too: a warning line may come before the document.
  const size_t brace = text.find("\n{") == std::string::npos ? text.find('{') : text.find("\n{") + 1;
  AnalyzeVerdict v;
  if (brace == std::string::npos) return v;
  const auto doc = nlohmann::json::parse(text.substr(brace), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.value("problem_found", false)) return v;
  if (!doc.contains("verdict") || !doc["verdict"].is_object()) return v;
  const auto& verdict = doc["verdict"];
  v.problem_found = true;
  if (verdict.contains("culprits") && verdict["culprits"].is_array()) {
    for (const auto& r : verdict["culprits"]) {
      if (r.is_number_integer()) v.culprits.push_back(r.get<int>());
    }
  }
  v.summary = verdict.value("summary", std::string());
  v.line = doc.value("verdict_line", std::string());
  return v;
}

}  // namespace ddx::harness
