#pragma once
// The hang watchdog: a thread of its own (independent of the training thread and of the store)
// that notices a collective running longer than --collective-timeout, a collective that failed,
// or a peer whose heartbeat stopped, then dumps the flight recorder, asks the other ranks to
// dump too, prints a short desync summary and aborts, dumps only, or keeps waiting
// (--on-timeout). It also dumps on SIGUSR2 (training continues), on SIGTERM (a launcher
// stopping the job; the process then dies of SIGTERM as it would have) and on an uncaught
// exception. No LibTorch: peers are reached through a PeerChannel (a TCPStore client in
// ddx_dist, a fake in tests).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ddx/processes/env.h"
#include "ddx/watchdog/flight_recorder.h"

namespace ddx {

enum class OnTimeout { Abort, Dump, Wait };
const char* to_string(OnTimeout action);
// "abort" | "dump" | "wait"; throws UsageError naming `what` otherwise.
OnTimeout parse_on_timeout(const std::string& what, const std::string& text);

// Exit status of a rank the watchdog aborts (--on-timeout abort), as timeout(1) uses.
constexpr int kExitWatchdog = 124;

// "2s", "500ms", "1.5" (seconds), "2m", "1h"; throws UsageError naming `what` otherwise.
std::chrono::milliseconds parse_duration(const std::string& what, const std::string& text);
// "2 s", "0.5 s", "3 min" for messages.
std::string format_duration(std::chrono::milliseconds d);

struct HangOptions {
  std::string trace_dir;  // where dumps go; empty: the recorder records but nothing is dumped
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(300)};
  OnTimeout on_timeout = OnTimeout::Abort;
  size_t buffer_size = kDefaultFlightRecorderEntries;
  bool check_collectives = false;  // compare op fingerprints across ranks before each collective
  std::chrono::milliseconds tick{100};                  // watchdog poll (PyTorch's is 100 ms)
  std::chrono::milliseconds heartbeat_interval{1000};   // publish own heartbeat, look for requests
  // A peer whose heartbeat has not changed for this long is declared dead; 0: the larger of
  // the collective timeout and 10 heartbeat intervals.
  std::chrono::milliseconds heartbeat_timeout{0};
  // With --on-timeout abort: how long the rank that fired waits for the others' dumps.
  std::chrono::milliseconds dump_wait{std::chrono::seconds(5)};
  bool dump_on_sigterm = true;
  bool dump_on_failure = true;  // a collective that fails (peer gone) is handled like a timeout
  DumpFormat dump_format = DumpFormat::Ddx;  // DDX_FR_FORMAT: ddx, pytorch or both

  std::chrono::milliseconds effective_heartbeat_timeout() const;
};

// "ddx" | "pytorch" | "both"; throws UsageError naming `what` otherwise.
DumpFormat parse_dump_format(const std::string& what, const std::string& text);

// Reads DDX_TRACE_DIR, DDX_COLLECTIVE_TIMEOUT, DDX_ON_TIMEOUT, DDX_FR_BUFFER_SIZE,
// DDX_CHECK_COLLECTIVES (0/1), DDX_HEARTBEAT_TIMEOUT, DDX_FR_FORMAT over `defaults`; throws
// UsageError naming the variable for a bad value.
HangOptions hang_options_from_env(const EnvMap& env, HangOptions defaults = {});

// The watchdog's line to the other ranks. Every call may block briefly and may throw (store
// gone); only the watchdog's heartbeat thread calls it, never the watchdog thread itself.
class PeerChannel {
 public:
  virtual ~PeerChannel() = default;
  virtual void publish_heartbeat(int rank, const std::string& payload) = 0;
  // rank -> payload, for the ranks that have published one.
  virtual std::map<int, std::string> read_heartbeats(int world_size) = 0;
  // Dump requests are numbered; 0 means none yet.
  virtual int64_t dump_generation() = 0;
  virtual std::string dump_request(int64_t generation) = 0;
  virtual int64_t request_dump(const std::string& reason) = 0;  // returns its generation
  virtual void mark_dumped(int64_t generation) = 0;
  virtual int64_t dumped_count(int64_t generation) = 0;
};

// What a training loop tells the watchdog after each step. It rides in the heartbeat as
// "train", so `ddx top` sees per-rank progress through the same store key and the same thread,
// not a second heartbeat. The totals let a reader average over its own polling window.
struct TrainProgress {
  int64_t step = 0;            // optimizer steps done
  int64_t total_steps = 0;
  double tokens_per_s = 0;     // tokens this rank processed over the last step's time
  double step_ms = 0;          // the last step
  double comm_wait_ms = 0;     // of which blocked waiting for collectives
  double total_step_s = 0;     // sums over the steps of this process
  double total_comm_wait_s = 0;
  int64_t rss_bytes = 0;
  int64_t unix_ms = 0;         // when the last step ended
};

// The heartbeat a rank publishes (JSON text): {"n": counter, "rank", "world_size", "host",
// "pid", "unix_ms", "interval_ms", "idle_ms": since the last op event, "groups": {name:
// [enqueued, started, completed, in_flight, enqueued_p2p, completed_p2p]}, "op": oldest op in
// flight or "", "last_op": the op enqueued last or "", "last_op_state", and with a training
// loop "train": {"step", "total_steps", "tokens_per_s", "step_ms", "comm_wait_ms",
// "total_step_s", "total_comm_wait_s", "rss_bytes", "unix_ms"}}.
std::string heartbeat_payload(uint64_t counter, const DumpContext& me, const RecorderSnapshot& s,
                              const std::vector<OpRecord>& in_flight,
                              const std::optional<OpRecord>& newest = std::nullopt,
                              const std::optional<TrainProgress>& train = std::nullopt,
                              std::chrono::milliseconds interval = std::chrono::milliseconds(0));

// One line per position of `group` across ranks, from their heartbeats, e.g.
//   "group world: ranks 0,1,3 at #4 (in flight); rank 2 at #3 (done, idle 2.1 s) <- behind"
// Ranks without a heartbeat are listed as such. A heartbeat is published from a thread, so a
// rank busy in compute keeps it fresh; ranks whose last one is older than three intervals (at
// least 5 s) at `now_unix_ms` are named with their host, "; ranks 2,3 (node7) silent for 8.1 s:
// their host may be down, or the processes stopped": what a lost node looks like from the
// others. Empty when nothing is known. `behind`, when given, receives the ranks marked
// "<- behind".
std::string desync_summary(const std::string& group, const std::map<int, std::string>& heartbeats,
                           int world_size, int64_t now_unix_ms, std::vector<int>* behind = nullptr);

// "all_reduce(sum) #4 on group world (float32 [1024], at 'step 4 grads')"
std::string describe_op(const OpRecord& r);

class StoreLost;  // ddx/watchdog/store_lost.h

class Watchdog {
 public:
  // `identity`: rank, world size, host, pid, job id (reason and triggers are filled per dump).
  // `channel` may be null (a single process, or no store): requests then go through a file in
  // the trace directory only.
  Watchdog(FlightRecorder& recorder, HangOptions options, DumpContext identity,
           std::unique_ptr<PeerChannel> channel);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts the threads and installs the SIGUSR2/SIGTERM handlers and the terminate hook (one
  // watchdog per process at a time).
  void start();
  // Stops the threads and restores the handlers. Idempotent.
  void stop();

  // Writes the dump now (any thread); returns its path, or "" without a trace dir or on error
  // (logged).
  std::string dump(const std::string& reason);
  // How a fatal event ends the process (tests replace std::_Exit).
  void set_exit_function(std::function<void(int)> exit_fn) { exit_ = std::move(exit_fn); }
  const HangOptions& options() const { return options_; }
  // Number of fatal events handled (timeouts, failures, dead peers).
  int fatal_events() const { return fatal_events_.load(); }
  // Published with the next heartbeats (any thread; a copy under a lock, once per step).
  void set_train_progress(const TrainProgress& progress);

 private:
  struct Fatal {
    std::string reason;   // one line
    std::string group;    // of the op, for the summary; empty for a dead peer
  };
  void watch_loop();
  // The heartbeat thread (watchdog_heartbeat.cpp), one step per function.
  struct HeartbeatRound {
    std::vector<std::string> requests;  // our dump requests to announce
    std::vector<int64_t> dumped;        // requests we have dumped for
    bool collect = false;               // a summary waits for every rank's heartbeat
    uint64_t counter = 0;               // our heartbeat's sequence number
    int64_t marked_upto = 0;            // requests marked dumped in the store
    bool store_lost = false;
    int64_t timeout_us = 0;             // a peer's heartbeat older than this: dead
  };
  void heartbeat_loop();
  void relay_own_dumps(HeartbeatRound& round);
  void publish_heartbeat(HeartbeatRound& round);
  void take_peer_requests();
  void read_peer_heartbeats(HeartbeatRound& round);
  void on_store_lost(const StoreLost& e, HeartbeatRound& round);
  void on_store_error(const std::exception& e, HeartbeatRound& round);
  void handle_fatal(const Fatal& fatal);
  void handle_dump_requests();
  void check_timeouts();
  bool wait_for_peer_dumps();
  void write_request_file(const std::string& reason, int64_t unix_ms);
  std::map<int, std::string> collect_peers(std::chrono::milliseconds within);
  std::string peers_json_locked() const;

  FlightRecorder& recorder_;
  HangOptions options_;
  DumpContext identity_;
  std::unique_ptr<PeerChannel> channel_;
  std::function<void(int)> exit_;
  int64_t start_unix_ms_ = 0;

  std::mutex dump_mutex_;  // one dump at a time; guards triggers_
  std::vector<DumpContext::Trigger> triggers_;

  // Shared between the two threads and the failure callback.
  mutable std::mutex mutex_;
  std::condition_variable wake_watch_;
  std::condition_variable wake_heartbeat_;
  bool stopping_ = false;
  std::vector<Fatal> pending_fatal_;         // from the failure callback and the heartbeat thread
  std::set<uint64_t> fired_;                 // op ids already reported
  int64_t seen_generation_ = 0;              // highest peer request seen by the heartbeat thread
  int64_t handled_generation_ = 0;           // highest request the watchdog has dumped for
  std::string seen_request_;                 // its text
  std::vector<std::string> outgoing_requests_;
  std::vector<int64_t> outgoing_dumped_;
  int64_t own_generation_ = 0;               // what request_dump returned for our own request
  int64_t peer_dumped_count_ = 0;            // for own_generation_
  bool collect_requested_ = false;
  uint64_t collect_round_ = 0;
  std::map<int, std::string> peers_;         // last heartbeats read
  int64_t peers_unix_ms_ = 0;                // when
  std::string peers_error_;                  // last store error, "" when fine
  int64_t store_failing_since_us_ = 0;
  std::map<int, std::pair<uint64_t, int64_t>> peer_counter_seen_;  // rank -> (counter, steady us when it last changed)
  std::set<int> declared_dead_;
  // Watch thread only: the last request text dumped for (store and file carry the same text).
  std::string served_request_;
  int64_t last_request_file_mtime_ns_ = 0;
  std::atomic<int64_t> heartbeat_unix_ms_{0};
  std::mutex train_mutex_;
  std::optional<TrainProgress> train_;
  std::atomic<int> fatal_events_{0};
  std::atomic<bool> aborting_{false};

  std::thread watch_thread_;
  std::thread heartbeat_thread_;
  bool started_ = false;
};

}  // namespace ddx
