#include "ddx/rendezvous/job_file.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "ddx/processes/atomic_file.h"
#include "ddx/errors/errors.h"

namespace ddx {

using nlohmann::json;

std::string job_file_path(const std::string& run_dir) { return run_dir + "/job.json"; }

void write_job_file(const std::string& run_dir, const JobFile& job) {
  json doc = {{"format", "ddx-job"},          {"master_addr", job.master_addr},
              {"master_port", job.master_port}, {"world_size", job.world_size},
              {"host", job.host},              {"pid", job.pid},
              {"started_unix_ms", job.started_unix_ms}};
  write_file_atomically(job_file_path(run_dir), doc.dump(2) + "\n");
}

JobFile read_job_file(const std::string& run_dir) {
  const std::string path = job_file_path(run_dir);
  std::ifstream in(path);
  if (!in) throw UsageError(path + " does not exist (is " + run_dir + " the run folder of a ddx train job?)");
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, false);
  if (!doc.is_object() || doc.value("format", "") != "ddx-job" || !doc["master_port"].is_number_integer() ||
      !doc["master_addr"].is_string() || !doc["world_size"].is_number_integer()) {
    throw UsageError(path + " is not a ddx job file (needs format, master_addr, master_port, world_size)");
  }
  JobFile job;
  job.master_addr = doc["master_addr"].get<std::string>();
  job.master_port = doc["master_port"].get<int>();
  job.world_size = doc["world_size"].get<int>();
  job.host = doc.value("host", "");
  job.pid = doc.value("pid", 0);
  job.started_unix_ms = doc.value("started_unix_ms", int64_t{0});
  return job;
}

}  // namespace ddx
