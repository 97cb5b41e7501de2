#include "harness/parity/curve_files.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "ddx/errors/errors.h"
#include "ddx/text/text.h"

namespace ddx::parity {
namespace {

std::string detect_format(const std::string& path, std::ifstream& in) {
  for (const char* e : {".jsonl", ".ndjson", ".json"}) {
    if (ends_with(path, e)) return "jsonl";
  }
  for (const char* e : {".csv", ".tsv"}) {
    if (ends_with(path, e)) return "csv";
  }
  const int first = (in >> std::ws).peek();
  return first == '{' ? "jsonl" : "csv";
}

double number_in(const nlohmann::json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {  // "NaN", "inf": what some loggers write for a diverged loss
    char* end = nullptr;
    const std::string s = v.get<std::string>();
    const double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0') return d;
  }
  throw UsageError(where + ": '" + v.dump() + "' is not a number");
}

CurveFile read_jsonl(const CurveSource& s, std::ifstream& in) {
  CurveFile curve;
  int64_t line_no = 0, row = 0, with_step = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = s.path + ":" + std::to_string(line_no);
    if (j.is_discarded()) throw UsageError(where + ": not a JSON object (expected one JSON record per line)");
    if (!j.is_object() || !j.contains(s.key)) continue;  // other records (events, config) carry no value
    ++row;
    with_step += j.contains(s.step_key) ? 1 : 0;
    const int64_t step = j.contains(s.step_key) ? static_cast<int64_t>(number_in(j[s.step_key], where)) : row;
    curve.points.push_back({step, number_in(j[s.key], where)});
  }
  // A step key the user named that no value came with is a wrong name, not "use the positions".
  if (s.step_key_named && row > 0 && with_step == 0) {
    throw UsageError(s.path + ": no '" + s.step_key + "' in any record with '" + s.key +
                     "' (the steps; pick the field with --step-key)");
  }
  curve.steps_are_rows = row > 0 && with_step == 0;
  return curve;
}

std::vector<std::string> split_row(const std::string& line, char separator) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, separator)) {
    while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.pop_back();
    while (!cell.empty() && cell.front() == ' ') cell.erase(0, 1);
    if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') cell = cell.substr(1, cell.size() - 2);
    cells.push_back(cell);
  }
  return cells;
}

CurveFile read_csv(const CurveSource& s, std::ifstream& in) {
  const char separator = ends_with(s.path, ".tsv") ? '\t' : ',';
  std::string header_line;
  if (!std::getline(in, header_line)) throw UsageError(s.path + ": empty (expected a CSV header row)");
  const std::vector<std::string> header = split_row(header_line, separator);
  auto column = [&](const std::string& name) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  const int value_col = column(s.key), step_col = column(s.step_key);
  if (value_col < 0) {
    throw UsageError(s.path + ": no column '" + s.key + "' (columns: " + join(header) + "); pick one with --key");
  }
  if (step_col < 0 && s.step_key_named) {
    throw UsageError(s.path + ": no column '" + s.step_key + "' for the steps (columns: " + join(header) +
                     "); pick one with --step-key");
  }
  CurveFile curve;
  curve.steps_are_rows = step_col < 0;
  int64_t line_no = 1, row = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::vector<std::string> cells = split_row(line, separator);
    const std::string where = s.path + ":" + std::to_string(line_no);
    if (static_cast<int>(cells.size()) <= value_col || cells[value_col].empty()) continue;  // no value this row
    ++row;
    auto parse = [&](const std::string& text) {
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0') throw UsageError(where + ": '" + text + "' is not a number");
      return d;
    };
    const int64_t step = step_col >= 0 && step_col < static_cast<int>(cells.size())
                             ? static_cast<int64_t>(parse(cells[step_col]))
                             : row;
    curve.points.push_back({step, parse(cells[value_col])});
  }
  return curve;
}

// A curve is text. A file with a NUL or another control byte near its start (a checkpoint, an
// image) is named as not one, instead of being read as a CSV whose "header" is binary bytes
// (which the error would then print to the terminal).
void refuse_binary(const CurveSource& s, std::ifstream& in) {
  char head[4096];
  in.read(head, sizeof head);
  const std::streamsize n = in.gcount();
  for (std::streamsize i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(head[i]);
    if (c == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f')) {
      throw UsageError(s.path + ": not a text file (byte " + std::to_string(i) +
                       " is binary): a curve is JSON lines or CSV");
    }
  }
  in.clear();
  in.seekg(0);
}

}  // namespace

CurveFile read_curve_file(const CurveSource& s) {
  std::ifstream in(s.path, std::ios::binary);
  if (!in) throw UsageError(s.path + ": cannot read the file");
  refuse_binary(s, in);
  const std::string format = s.format == "auto" ? detect_format(s.path, in) : s.format;
  CurveFile curve = format == "csv" ? read_csv(s, in) : read_jsonl(s, in);
  if (curve.points.empty()) {
    throw UsageError(s.path + ": no values under '" + s.key + "' (read as " + format + "; pick the field with --key)");
  }
  // Curves are matched step by step: a step that comes twice (a field that is not a step, such
  // as an epoch, or a resumed run's records appended again) has no single value to compare.
  if (!curve.steps_are_rows) {
    std::map<int64_t, size_t> first_at;
    for (size_t i = 0; i < curve.points.size(); ++i) {
      const auto [it, inserted] = first_at.emplace(curve.points[i].step, i);
      if (!inserted) {
        throw UsageError(s.path + ": step " + std::to_string(curve.points[i].step) + " under '" + s.step_key +
                         "' comes twice (records " + std::to_string(it->second + 1) + " and " + std::to_string(i + 1) +
                         "): a step key must name each record once; pick the field with --step-key");
      }
    }
  }
  return curve;
}

}  // namespace ddx::parity
