#include "launcher/output_pump.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddx::launcher {
namespace {

// A line this long without a newline is written out anyway, so memory stays bounded.
constexpr size_t kMaxPendingBytes = 64 * 1024;

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed console must not stop the job
    done += static_cast<size_t>(n);
  }
}

// Whether `line` starts with ddx's own log prefix for `rank` ("[rank 3/8 host:pid] I ...", made
// by ddx::log in runtime/src/text/log.cpp): it already says which rank wrote it.
bool carries_ddx_rank_prefix(const std::string& line, int rank) {
  return line.rfind("[rank " + std::to_string(rank) + "/", 0) == 0;
}

// The console's copy of one line: one rank label, never two. Rank 0's report goes out as is, so
// that `ddx launch -np 8 -- ddx probe bandwidth > out.txt` parses as nccl-tests' output does; a
// line of ddx's logger keeps its own label; anything else gets "[rank N]: ".
std::string console_line(const OutputStream& spec, const std::string& line) {
  if (spec.is_report || carries_ddx_rank_prefix(line, spec.rank)) return line + "\n";
  return "[rank " + std::to_string(spec.rank) + "]: " + line + "\n";
}

}  // namespace

OutputPump::OutputPump(std::vector<OutputStream> specs) {
  for (auto& spec : specs) {
    Stream stream;
    stream.spec = std::move(spec);
    if (!stream.spec.log_path.empty()) {
      stream.log_fd = ::open(stream.spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (stream.log_fd < 0) {
        throw std::runtime_error("ddx launch: cannot open " + stream.spec.log_path + ": " +
                                 std::strerror(errno));
      }
    }
    streams_.push_back(std::move(stream));
  }
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) throw std::runtime_error("ddx launch: pipe failed");
  thread_ = std::thread([this] { run(); });
}

OutputPump::~OutputPump() {
  if (thread_.joinable()) finish(std::chrono::milliseconds(0));
  for (int fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void OutputPump::finish(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finishing_ = true;
    deadline_ = std::chrono::steady_clock::now() + timeout;
  }
  char byte = 1;
  ssize_t unused = ::write(wake_pipe_[1], &byte, 1);
  (void)unused;
  if (thread_.joinable()) thread_.join();
}

std::string OutputPump::last_stderr_line(int rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = last_stderr_.find(rank);
  return it == last_stderr_.end() ? "" : it->second;
}

void OutputPump::run() {
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Stream*> owners;
    for (auto& s : streams_) {
      if (!s.open) continue;
      fds.push_back({s.spec.fd, POLLIN, 0});
      owners.push_back(&s);
    }
    int timeout_ms = -1;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finishing_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline_ - std::chrono::steady_clock::now()).count();
        timeout_ms = left > 0 ? static_cast<int>(left) : 0;
        if (fds.empty() || timeout_ms == 0) break;
      }
    }
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) drain(*owners[i]);
    }
    if (fds.back().revents & POLLIN) {
      char buffer[64];
      ssize_t unused = ::read(wake_pipe_[0], buffer, sizeof buffer);
      (void)unused;
    }
  }
  // Whatever is left: flush partial lines, close.
  for (auto& s : streams_) {
    if (!s.pending.empty()) emit_line(s, s.pending);
    s.pending.clear();
    if (s.open) ::close(s.spec.fd);
    s.open = false;
    if (s.log_fd >= 0) ::close(s.log_fd);
    s.log_fd = -1;
  }
}

void OutputPump::drain(Stream& s) {
  char buffer[16384];
  ssize_t n = ::read(s.spec.fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {  // end of file: the worker and everything holding its pipe are gone
    if (!s.pending.empty()) emit_line(s, s.pending);
    s.pending.clear();
    ::close(s.spec.fd);
    s.open = false;
    return;
  }
  s.pending.append(buffer, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t newline; (newline = s.pending.find('\n', start)) != std::string::npos; start = newline + 1) {
    emit_line(s, s.pending.substr(start, newline - start));
  }
  s.pending.erase(0, start);
  if (s.pending.size() > kMaxPendingBytes) {
    emit_line(s, s.pending);
    s.pending.clear();
  }
}

void OutputPump::emit_line(Stream& s, const std::string& line) {
  if (s.log_fd >= 0) write_all(s.log_fd, line + "\n");
  if (s.spec.to_console) {
    // One write per line: lines of different ranks never interleave mid-line.
    write_all(s.spec.is_stderr ? STDERR_FILENO : STDOUT_FILENO, console_line(s.spec, line));
  }
  if (s.spec.is_stderr && line.find_first_not_of(" \t\r") != std::string::npos) {
    std::lock_guard<std::mutex> lock(mutex_);
    last_stderr_[s.spec.rank] = line;
  }
}

}  // namespace ddx::launcher
