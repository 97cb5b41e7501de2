#pragma once
// The flight recorder: a per-process ring buffer of the last N operations of the collective
// layer (an OpObserver), cheap enough to leave on in production (well under a microsecond per
// collective; benchmarks/flight_recorder_bench.cpp), dumped as JSON when a collective hangs or
// fails, on SIGUSR2, or when a peer asks (see ddx/watchdog/watchdog.h). No LibTorch.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ddx/watchdog/op_record.h"

namespace ddx {

constexpr size_t kDefaultFlightRecorderEntries = 2000;  // PyTorch's TORCH_FR_BUFFER_SIZE default

// Where one group stands on this rank: the highest sequence number enqueued, started and
// completed, collectives and point-to-point counted separately as in OpRecord.
struct GroupProgress {
  std::string group;
  std::vector<int> ranks;  // global ranks, group-rank order
  uint64_t last_enqueued = 0, last_started = 0, last_completed = 0;
  uint64_t last_enqueued_p2p = 0, last_completed_p2p = 0;
  int in_flight = 0;           // ops of this group enqueued and not ended
  int64_t last_event_us = 0;   // steady clock
};

struct RecorderSnapshot {
  std::vector<OpRecord> entries;      // oldest first
  std::vector<GroupProgress> groups;  // in order of first use
  size_t capacity = 0;
  uint64_t recorded_total = 0;        // ops ever recorded; > capacity means the oldest were overwritten
  int64_t last_event_us = 0;          // the last enqueue/start/end seen, steady clock
};

class FlightRecorder : public OpObserver {
 public:
  explicit FlightRecorder(size_t capacity = kDefaultFlightRecorderEntries);

  void on_enqueue(const OpRecord& record) override;
  void on_start(const OpRecord& record) override;
  void on_end(const OpRecord& record) override;

  RecorderSnapshot snapshot() const;
  // The snapshot without the entries (group progress only): cheap enough for every heartbeat.
  RecorderSnapshot progress() const;
  // Ops enqueued and not ended, oldest first (the watchdog's view).
  std::vector<OpRecord> in_flight() const;
  // The op enqueued last, in its current state (the heartbeat's "last collective").
  std::optional<OpRecord> newest() const;
  size_t capacity() const { return slots_.size(); }

  // Called (outside the lock) for every op that ends Failed; the watchdog reacts at once
  // instead of at its next poll. Set before ops flow; not synchronized with on_end.
  void set_failure_callback(std::function<void(const OpRecord&)> callback) {
    on_failure_ = std::move(callback);
  }

 private:
  OpRecord* find_locked(uint64_t id);
  GroupProgress& progress_locked(const OpRecord& record);

  mutable std::mutex mutex_;
  // Slots are overwritten in place, so after warm-up an op's strings and vectors reuse the
  // capacity of the op it replaces and recording allocates nothing.
  std::vector<OpRecord> slots_;
  uint64_t next_ = 0;  // ops recorded; slot of op k is k % capacity
  std::vector<GroupProgress> groups_;
  int64_t last_event_us_ = 0;
  std::function<void(const OpRecord&)> on_failure_;
};

// Facts about the process that go into every dump next to the recorder's contents.
struct DumpContext {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string host;
  int pid = 0;
  std::string job_id;          // TORCHELASTIC_RUN_ID or SLURM_JOB_ID: tells dumps of different runs apart
  std::string reason;          // why this dump was written
  struct Trigger {
    std::string reason;
    int64_t unix_ms = 0;
  };
  std::vector<Trigger> triggers;  // every reason this process dumped for, oldest first
  int64_t collective_timeout_ms = 0;
  int64_t heartbeat_unix_ms = 0;  // the watchdog's last tick (wall clock)
  // What this rank last saw of its peers (JSON object text, see watchdog.h); empty: none.
  std::string peers_json;
};

// Dump format version; bump on incompatible changes (the analyzer checks it).
constexpr int kFlightRecorderFormatVersion = 1;

// The dump document (JSON text). Layout, documented for users in docs/hangs.md:
//   {"format": "ddx-flight-recorder", "version": 1, "rank", "local_rank", "world_size", "host",
//    "pid", "job_id", "reason", "triggers": [{"reason", "unix_ms"}], "dump_unix_ms",
//    "dump_steady_us", "heartbeat_unix_ms", "last_event_unix_ms", "collective_timeout_ms",
//    "capacity", "recorded_total",
//    "groups": {name: {"ranks", "last_enqueued", "last_started", "last_completed",
//                      "last_enqueued_p2p", "last_completed_p2p", "in_flight"}},
//    "peers": {...} (see watchdog.h),
//    "entries": [{"id", "group", "group_ranks", "seq", "p2p", "op", "reduce_op", "dtype",
//                 "in_shape", "out_shape", "numel", "bytes", "peer", "backend", "call_site",
//                 "state", "error", "enqueue_us", "start_us", "end_us"}]}
// Times *_us are this process's steady clock (comparable between processes on one host);
// dump_unix_ms/dump_steady_us convert them to wall time.
std::string flight_recorder_json(const RecorderSnapshot& snapshot, const DumpContext& context);

// The same dump in PyTorch's own layout (format "2.10", as pickled by PyTorch's FlightRecorder),
// for torchfrtrace and other PyTorch tooling; flight_recorder_pytorch.cpp says how each field
// maps. `ddx analyze` reads it too.
std::string flight_recorder_pytorch_pickle(const RecorderSnapshot& snapshot, const DumpContext& context);

// Which layouts a dump is written in (DDX_FR_FORMAT): ddx's JSON, PyTorch's pickle, or both.
enum class DumpFormat { Ddx, PyTorch, Both };

// "<dir>/ddx-fr-rank<R>.json"
std::string flight_recorder_path(const std::string& dir, int rank);
// "<dir>/nccl_trace_rank_<R>", PyTorch's default name (torchfrtrace -p nccl_trace_rank_).
std::string flight_recorder_pytorch_path(const std::string& dir, int rank);
// The file a dump of `format` is complete with (the last one written).
std::string flight_recorder_path(const std::string& dir, int rank, DumpFormat format);

// Writes the dump in `format` atomically (never a half-written file) and returns the path of
// the last file written. Throws std::runtime_error naming the path when it cannot.
std::string write_flight_recorder_dump(const std::string& dir, const RecorderSnapshot& snapshot,
                                       const DumpContext& context, DumpFormat format = DumpFormat::Ddx);

// Wall-clock milliseconds since the epoch.
int64_t unix_now_ms();

}  // namespace ddx
