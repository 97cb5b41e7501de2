#pragma once
// Copies every worker's stdout and stderr, line by line, to the console and/or to per-rank log
// files, from one thread blocked in poll(). On the console each line says once which rank wrote
// it: "[rank N]: " in front, except for lines that already carry ddx's log prefix for that rank
// and for rank 0's stdout, the job's report (see console_line in output_pump.cpp).
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ddx::launcher {

struct OutputStream {
  int fd = -1;             // read end of a worker's pipe; the pump closes it
  int rank = 0;
  bool is_stderr = false;
  std::string log_path;    // empty: no file
  bool to_console = true;
  // Rank 0's stdout: the job's report (nccl-tests' table of `ddx probe bandwidth`, doctor's
  // checks), copied to the console as is, as torchrun, srun and mpiexec do.
  bool is_report = false;
};

class OutputPump {
 public:
  // Opens the log files and starts the thread. Start it after the workers are forked: the
  // launcher forks only while it has a single thread.
  explicit OutputPump(std::vector<OutputStream> streams);
  ~OutputPump();
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Waits until every stream has reached end of file or `timeout` passed (a descendant may
  // still hold a pipe open), then stops the thread and closes everything.
  void finish(std::chrono::milliseconds timeout);

  // The last non-empty stderr line of `rank` so far (for failures without an error file).
  std::string last_stderr_line(int rank) const;

 private:
  struct Stream {
    OutputStream spec;
    int log_fd = -1;
    std::string pending;  // bytes after the last newline
    bool open = true;
  };

  void run();
  void drain(Stream& stream);
  void emit_line(Stream& stream, const std::string& line);

  std::vector<Stream> streams_;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point deadline_{};
  bool finishing_ = false;
  std::map<int, std::string> last_stderr_;
};

}  // namespace ddx::launcher
