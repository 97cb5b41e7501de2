// Reads back an error file written by ddx's handlers or by torchelastic's @record, for the
// launcher's failure table.
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "ddx/errors/error_report.h"
#include "ddx/errors/verdict.h"

namespace ddx {
namespace {

constexpr size_t kMaxFrames = 8;

std::string first_line(const std::string& text) {
  size_t start = text.find_first_not_of("\r\n");
  if (start == std::string::npos) return "";
  size_t end = text.find_first_of("\r\n", start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string string_field(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_string()) ? it->get<std::string>() : "";
}

int int_field(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_number_integer()) ? it->get<int>() : 0;
}

// "SIGSEGV" from "Signal 11 (SIGSEGV) received by PID 7" (torchelastic's and ddx's wording).
std::optional<std::string> signal_in_message(const std::string& message) {
  static const std::regex kSignal(R"(Signal [0-9]+ \((SIG[A-Z0-9]+)\))");
  std::smatch match;
  if (std::regex_search(message, match, kSignal)) return match[1].str();
  return std::nullopt;
}

// Python tracebacks list the outermost call first: `  File "train.py", line 12, in main`.
std::vector<StackFrame> frames_from_python_callstack(const std::string& text) {
  static const std::regex kFrame(R"re(File "([^"]+)", line ([0-9]+), in (.+))re");
  std::vector<StackFrame> frames;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, kFrame)) {
      frames.push_back({match[3].str(), match[1].str(), std::stoi(match[2].str())});
    }
  }
  return {frames.rbegin(), frames.rend()};
}

// ddx's own "#0 function at file:line" text, for files where only py_callstack survived.
std::vector<StackFrame> frames_from_native_callstack(const std::string& text) {
  static const std::regex kFrame(R"(^#[0-9]+ (.+?)(?: at (.+):([0-9]+))?$)");
  std::vector<StackFrame> frames;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_match(line, match, kFrame)) {
      frames.push_back({match[1].str(), match[2].str(),
                        match[3].matched ? std::stoi(match[3].str()) : 0});
    }
  }
  return frames;
}

}  // namespace

std::optional<ErrorFileSummary> read_error_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("message")) return std::nullopt;

  ErrorFileSummary summary;
  const nlohmann::json& message = doc["message"];
  nlohmann::json extra = nlohmann::json::object();
  if (message.is_string()) {
    // Older torchelastic and hand-written files: {"message": "text"}.
    summary.message = first_line(message.get<std::string>());
  } else if (message.is_object()) {
    summary.message = first_line(string_field(message, "message"));
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) extra = message["extraInfo"];
  } else {
    return std::nullopt;
  }

  if (extra.contains("ddx") && extra["ddx"].is_object()) {
    const nlohmann::json& details = extra["ddx"];
    summary.host = string_field(details, "host");
    summary.pid = int_field(details, "pid");
    std::string signal = string_field(details, "signal");
    if (!signal.empty()) summary.signal = signal;
    if (details.contains("stack") && details["stack"].is_array()) {
      for (const auto& f : details["stack"]) {
        if (!f.is_object()) continue;
        summary.frames.push_back({string_field(f, "function"), string_field(f, "file"), int_field(f, "line")});
      }
    }
  }
  std::string callstack = string_field(extra, "py_callstack");
  if (summary.frames.empty() && !callstack.empty()) {
    summary.frames = frames_from_python_callstack(callstack);
    if (summary.frames.empty()) summary.frames = frames_from_native_callstack(callstack);
  }
  if (!summary.signal) summary.signal = signal_in_message(summary.message);
  if (summary.frames.size() > kMaxFrames) summary.frames.resize(kMaxFrames);
  return summary;
}

std::optional<JobVerdict> read_verdict_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json::json_pointer at("/message/extraInfo/ddx");
  if (!doc.is_object() || !doc.contains(at)) return std::nullopt;
  const nlohmann::json& details = doc[at];
  if (!details.is_object() || !details.contains("verdict") || details["verdict"] != true ||
      !details.contains("exit_code") || !details["exit_code"].is_number_integer()) {
    return std::nullopt;
  }
  return JobVerdict{details["exit_code"].get<int>(), first_line(string_field(details, "message"))};
}

}  // namespace ddx
