#include "top/smi_parse.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

namespace ddx::top {

const char* const kSmiMarker = "ddx-top-compute-apps";
const char* const kSmiQuery =
    "nvidia-smi --query-gpu=index,name,utilization.gpu,power.draw,power.limit,memory.used,memory.total "
    "--format=csv,noheader,nounits && echo ddx-top-compute-apps && "
    "nvidia-smi --query-compute-apps=pid --format=csv,noheader";

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// nvidia-smi's words for a value the GPU does not report; they are absent, not malformed.
bool not_reported(const std::string& field) {
  return field == "[N/A]" || field == "N/A" || field == "[Not Supported]" || field == "[Unknown Error]";
}

// The whole field is one finite number, or nullopt.
std::optional<double> number(const std::string& field) {
  if (field.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  if (errno != 0 || end != field.c_str() + field.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string quoted(const std::string& line) {
  return "'" + (line.size() > 80 ? line.substr(0, 80) + "..." : line) + "'";
}

// One GPU line: index, name, util %, power W, power limit W, memory used MiB, memory total MiB.
// Returns the reason it is malformed, or "".
std::string parse_gpu_line(const std::string& line, GpuStats& gpu) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, ',');) fields.push_back(trim(f));
  if (!line.empty() && line.back() == ',') fields.push_back("");
  if (fields.size() != 7) return "expected 7 fields, got " + std::to_string(fields.size());
  const char* names[] = {"index", "name", "utilization.gpu", "power.draw", "power.limit", "memory.used", "memory.total"};
  double values[7] = {0, 0, -1, -1, -1, -1, -1};
  for (int i = 0; i < 7; ++i) {
    if (i == 1) continue;
    if (i >= 2 && not_reported(fields[i])) continue;
    auto v = number(fields[i]);
    if (!v || *v < 0) return std::string(names[i]) + " '" + fields[i] + "' is not a number";
    values[i] = *v;
  }
  if (fields[1].empty()) return "the GPU name is empty";
  if (values[2] > 100) return "utilization.gpu '" + fields[2] + "' is above 100";
  if (values[0] != std::floor(values[0])) return "index '" + fields[0] + "' is not an integer";
  gpu.index = static_cast<int>(values[0]);
  gpu.name = fields[1];
  gpu.util_pct = values[2];
  gpu.power_w = values[3];
  gpu.power_limit_w = values[4];
  gpu.memory_used_bytes = values[5] < 0 ? -1 : static_cast<int64_t>(values[5] * 1024 * 1024);
  gpu.memory_total_bytes = values[6] < 0 ? -1 : static_cast<int64_t>(values[6] * 1024 * 1024);
  return "";
}

}  // namespace

SmiResult parse_smi_output(const std::string& stdout_text) {
  SmiResult r;
  std::stringstream in(stdout_text);
  bool in_apps = false, saw_marker = false;
  int number_of_line = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number_of_line;
    const std::string line = trim(raw);
    if (line.empty()) continue;
    const std::string where = "line " + std::to_string(number_of_line) + " " + quoted(line) + ": ";
    if (line == kSmiMarker) {
      if (saw_marker) r.malformed.push_back(where + "the marker twice");
      in_apps = saw_marker = true;
      continue;
    }
    if (!in_apps) {
      GpuStats gpu;
      const std::string why = parse_gpu_line(line, gpu);
      if (why.empty()) {
        r.gpus.push_back(gpu);
      } else {
        r.malformed.push_back(where + why);
      }
      continue;
    }
    if (line == "No running processes found") continue;
    auto pid = number(line);
    if (pid && *pid > 0 && *pid == std::floor(*pid)) {
      ++r.processes;
    } else {
      r.malformed.push_back(where + "not a process id");
    }
  }
  r.complete = saw_marker;
  if (!saw_marker) r.malformed.push_back("no '" + std::string(kSmiMarker) + "' line: the process query did not run");
  return r;
}

}  // namespace ddx::top
