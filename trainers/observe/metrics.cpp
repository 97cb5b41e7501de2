#include "observe/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "ddx/processes/atomic_file.h"

namespace ddx::train {

HostMemory host_memory() {
  HostMemory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    long long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kb) == 1) m.rss_bytes = kb * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kb) == 1) m.peak_rss_bytes = kb * 1024;
  }
  return m;
}

void MetricsFile::open(const std::string& path, int64_t keep_through_step) {
  path_ = path;
  std::ifstream in(path);
  if (in && keep_through_step >= 0) {
    std::ostringstream kept;
    std::string line;
    while (std::getline(in, line)) {
      try {
        auto j = nlohmann::json::parse(line);
        if (j.value("step", int64_t{0}) <= keep_through_step) kept << line << "\n";
      } catch (const std::exception&) {
        // A torn last line from a killed run: drop it.
      }
    }
    in.close();
    write_file_atomically(path, kept.str());
  } else if (keep_through_step < 0) {
    write_file_atomically(path, "");
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open metrics file " + path + ": " + std::strerror(errno));
}

void MetricsFile::append(const nlohmann::json& record) {
  if (fd_ < 0) return;
  const std::string line = record.dump() + "\n";
  // One write per line: a reader (or a crash) never sees half a record.
  if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error("cannot write metrics file " + path_ + ": " + std::strerror(errno));
  }
}

MetricsFile::~MetricsFile() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ddx::train
