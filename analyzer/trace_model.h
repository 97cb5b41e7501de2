#pragma once
// What `ddx analyze` reads: every rank's flight recorder dump (ddx/watchdog/flight_recorder.h describes
// the file), as plain structs. No LibTorch; nothing here depends on the runtime.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ddx::analyze {

// An immutable value that many entries hold alike (a group's member list, a Python stack),
// stored once: 2000 entries on a 1024-rank group hold one member list, not 2000 (the difference
// between megabytes and gigabytes when a thousand dumps are read). Reads like the value.
template <class T>
class Shared {
 public:
  using value_type = typename T::value_type;
  using iterator = typename T::const_iterator;
  using const_iterator = typename T::const_iterator;
  Shared() : value_(empty_value()) {}
  Shared(T value) : value_(std::make_shared<const T>(std::move(value))) {}  // NOLINT: reads like a T
  operator const T&() const { return *value_; }
  const T& get() const { return *value_; }
  const_iterator begin() const { return value_->begin(); }
  const_iterator end() const { return value_->end(); }
  size_t size() const { return value_->size(); }
  bool empty() const { return value_->empty(); }
  const value_type& operator[](size_t i) const { return (*value_)[i]; }
  friend bool operator==(const Shared& a, const Shared& b) { return a.get() == b.get(); }
  friend bool operator==(const Shared& a, const T& b) { return a.get() == b; }

 private:
  static const std::shared_ptr<const T>& empty_value() {
    static const std::shared_ptr<const T> none = std::make_shared<const T>();
    return none;
  }
  std::shared_ptr<const T> value_;
};

struct Entry {
  uint64_t id = 0;
  std::string group;
  Shared<std::vector<int>> group_ranks;  // global ranks in group-rank order
  uint64_t seq = 0;
  bool p2p = false;
  std::string op, reduce_op, dtype;
  std::vector<int64_t> in_shape, out_shape;
  int64_t numel = 0;
  int peer = -1;                 // group rank of the root or peer; -1 none
  std::string backend, call_site, state, error;
  Shared<std::vector<std::string>> stack;  // where PyTorch recorded it: "file:line in function", innermost first
  int64_t enqueue_us = 0, start_us = 0, end_us = 0;  // the dumping process's steady clock

  // Asked millions of times over a thousand dumps: compared as views (length first, no strlen).
  bool completed() const { return std::string_view(state) == std::string_view("completed"); }
  bool failed() const { return std::string_view(state) == std::string_view("failed"); }
  bool in_flight() const {
    return std::string_view(state) == std::string_view("scheduled") || std::string_view(state) == std::string_view("started");
  }
  // Global rank of `peer`, or -1.
  int peer_global() const {
    return peer >= 0 && peer < static_cast<int>(group_ranks.size()) ? group_ranks[peer] : -1;
  }
};

struct GroupPosition {
  std::vector<int> ranks;
  uint64_t last_enqueued = 0, last_started = 0, last_completed = 0;
  uint64_t last_enqueued_p2p = 0, last_completed_p2p = 0;
  int in_flight = 0;
};

// One peer as the dumping rank last saw it through the store.
struct PeerView {
  int64_t silent_ms = -1;        // how long its heartbeat had not changed (-1: not tracked)
  std::string host;
  int pid = 0;
  std::string op;                // its oldest op in flight, as it described it
  int64_t idle_ms = -1;
  std::map<std::string, GroupPosition> groups;
};

struct RankDump {
  std::string path;
  int rank = -1;
  int local_rank = 0;
  int world_size = 0;
  std::string host;
  int pid = 0;
  std::string job_id;
  std::string reason;
  std::vector<std::string> triggers;
  int64_t dump_unix_ms = 0, dump_steady_us = 0, heartbeat_unix_ms = 0, last_event_unix_ms = 0;
  int64_t collective_timeout_ms = 0;
  uint64_t capacity = 0, recorded_total = 0;
  std::map<std::string, GroupPosition> groups;
  std::vector<Entry> entries;  // oldest first
  // Peers through the store (empty when this rank had none).
  std::map<int, PeerView> peers;
  std::string peers_error;
  int64_t store_failing_ms = 0;
  std::vector<int> declared_dead;
  bool truncated = false;       // salvaged from a cut-off file: header and complete entries only
  std::string format = "ddx";   // "ddx", or "pytorch 2.10" for PyTorch's own recorder
  bool written_by_ddx = false;  // PyTorch's layout, written by ddx's recorder (DDX_FR_FORMAT)
  bool wrapped = false;         // the ring buffer overwrote its oldest entries

  // Seconds between `steady_us` (an entry time) and this dump.
  double seconds_before_dump(int64_t steady_us) const {
    return steady_us > 0 ? (dump_steady_us - steady_us) / 1e6 : 0.0;
  }
};

// A rank whose dump could not be used, and why: "missing", "truncated" (usable, partial),
// "unreadable", "other-job", "unsupported-version".
struct DumpProblem {
  int rank = -1;
  std::string kind;
  std::string detail;
};

struct TraceSet {
  std::string dir;
  int world_size = 0;
  std::map<int, RankDump> dumps;     // usable dumps by rank (truncated ones included)
  std::vector<DumpProblem> problems;
  std::vector<int> missing;          // ranks with no usable dump
  std::string job_id;
};

}  // namespace ddx::analyze
