// Serializes a crash report into torchelastic's error-file schema and writes it atomically.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <nlohmann/json.hpp>

#include "error_file.h"
#include "stack_capture.h"

namespace ddx::detail {
namespace {

std::string iso_time_utc(std::time_t now) {
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

nlohmann::json optional_int(int value) {
  return value < 0 ? nlohmann::json(nullptr) : nlohmann::json(value);
}

bool write_all(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string error_report_to_json(const ErrorReport& report) {
  std::time_t now = std::time(nullptr);
  nlohmann::json stack = nlohmann::json::array();
  for (const StackFrame& f : report.frames) {
    stack.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}});
  }
  nlohmann::json ddx_details = {
      {"rank", optional_int(report.rank)},
      {"local_rank", optional_int(report.local_rank)},
      {"world_size", optional_int(report.world_size)},
      {"host", report.host},
      {"pid", report.pid},
      {"signal", report.signo ? nlohmann::json(ddx::signal_name(*report.signo)) : nlohmann::json(nullptr)},
      {"exit_code", report.exit_code},
      {"message", report.message},
      {"stack", stack},
      {"time", iso_time_utc(now)},
  };
  if (report.verdict) ddx_details["verdict"] = true;
  // torchelastic reads message.message and extraInfo.{py_callstack,timestamp}; py_callstack is
  // what `torchrun` prints under "Traceback", so the native trace goes there.
  nlohmann::json doc = {
      {"message",
       {{"message", report.message},
        {"extraInfo",
         {{"py_callstack", format_stack(report.frames)},
          {"timestamp", std::to_string(static_cast<long long>(now))},
          {"ddx", ddx_details}}}}}};
  // Invalid UTF-8 (odd symbol names, exception texts) must not stop the report.
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

bool write_file_atomically(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = write_all(fd, content) && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) {
    // Make the rename itself durable: a node that crashes next should still show the file.
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    if (dir.empty()) dir = "/";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return true;
  }
  ::unlink(tmp.c_str());
  return false;
}

}  // namespace ddx::detail
