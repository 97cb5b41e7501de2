#pragma once
// <run folder>/job.json: where a running job's store is, written by rank 0 of `ddx train` so
// `ddx top --run <run folder>` can watch the job without being told the master endpoint.
#include <cstdint>
#include <string>

namespace ddx {

struct JobFile {
  std::string master_addr;
  int master_port = 0;
  int world_size = 0;
  std::string host;  // rank 0's
  int pid = 0;       // rank 0's
  int64_t started_unix_ms = 0;
};

// "<dir>/job.json"
std::string job_file_path(const std::string& run_dir);
// Written atomically; throws std::runtime_error naming the file.
void write_job_file(const std::string& run_dir, const JobFile& job);
// Throws UsageError naming the file when it is missing or not a job file.
JobFile read_job_file(const std::string& run_dir);

}  // namespace ddx
