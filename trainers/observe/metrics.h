#pragma once
// What a step costs and how training goes, as one JSON object per logged step (metrics.jsonl).
// Schema: docs/train.md.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace ddx::train {

struct HostMemory {
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;
};
HostMemory host_memory();

// Appends JSON lines; on resume, drops lines past the resumed step so the file describes one
// continuous run. Only rank 0 writes.
class MetricsFile {
 public:
  MetricsFile() = default;
  // Opens `path` for appending; keeps only lines with "step" <= keep_through_step (all when
  // negative). Throws std::runtime_error naming the file.
  void open(const std::string& path, int64_t keep_through_step);
  void append(const nlohmann::json& record);
  const std::string& path() const { return path_; }
  bool is_open() const { return fd_ >= 0; }
  ~MetricsFile();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace ddx::train
