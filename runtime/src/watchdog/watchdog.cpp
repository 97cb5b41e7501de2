// The watchdog's watch thread, and what starts and stops both threads. The watch thread never
// touches the store: it polls the flight recorder for ops past the timeout, reacts to
// failures, signals and requests, and writes dumps. The heartbeat thread
// (watchdog_heartbeat.cpp) does every store round trip, so a store that hangs or vanishes can
// delay only the peer information, never the dump.
#include "ddx/watchdog/watchdog.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>

#include "ddx/processes/atomic_file.h"
#include "ddx/errors/error_report.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/text/log.h"
#include "ddx/watchdog/store_lost.h"
#include "watchdog_detail.h"

namespace ddx {
namespace {

using nlohmann::json;
using watchdog_detail::first_line;
using Clock = std::chrono::steady_clock;

// Signal handlers only set flags; the watch thread does the work at its next tick.
std::atomic<Watchdog*> g_active{nullptr};
std::atomic<bool> g_sigusr2{false};
std::atomic<bool> g_sigterm{false};
struct sigaction g_old_usr2 {};
struct sigaction g_old_term {};
bool g_term_installed = false;
std::terminate_handler g_old_terminate = nullptr;

void on_sigusr2(int) { g_sigusr2.store(true); }
void on_sigterm(int) { g_sigterm.store(true); }

// An uncaught exception would kill the rank before the watch thread's next tick: dump first.
void on_terminate() {
  if (Watchdog* w = g_active.load()) {
    std::string what = "uncaught exception";
    if (std::exception_ptr e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        what += std::string(": ") + ex.what();
      } catch (...) {
      }
    }
    w->dump(what.substr(0, what.find('\n')));
  }
  if (g_old_terminate) g_old_terminate();
  std::abort();
}

int64_t file_mtime_ns(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::string request_file(const std::string& dir) { return dir + "/ddx-fr-request.json"; }

}  // namespace

namespace watchdog_detail {
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}
}  // namespace watchdog_detail

Watchdog::Watchdog(FlightRecorder& recorder, HangOptions options, DumpContext identity,
                   std::unique_ptr<PeerChannel> channel)
    : recorder_(recorder), options_(std::move(options)), identity_(std::move(identity)),
      channel_(std::move(channel)) {
  exit_ = [](int code) {
    std::fflush(nullptr);
    std::_Exit(code);  // destructors could block on groups with ops in flight
  };
  recorder_.set_failure_callback([this](const OpRecord& r) {
    if (!options_.dump_on_failure || aborting_.load()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_ || !fired_.insert(r.id).second) return;
    }
    // Dump here, on the failing op's thread: the caller is about to get an exception that may
    // end the process before the watch thread wakes up.
    const std::string reason = describe_op(r) + " failed: " + first_line(r.error);
    dump(reason);
    std::lock_guard<std::mutex> lock(mutex_);
    pending_fatal_.push_back({reason, r.group});
    wake_watch_.notify_all();
  });
}

Watchdog::~Watchdog() {
  stop();
  recorder_.set_failure_callback(nullptr);
}

void Watchdog::start() {
  if (started_) return;
  started_ = true;
  start_unix_ms_ = unix_now_ms();
  heartbeat_unix_ms_ = start_unix_ms_;
  if (!options_.trace_dir.empty()) {
    last_request_file_mtime_ns_ = file_mtime_ns(request_file(options_.trace_dir));
  }
  Watchdog* expected = nullptr;
  if (g_active.compare_exchange_strong(expected, this)) {
    struct sigaction sa {};
    sa.sa_handler = on_sigusr2;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR2, &sa, &g_old_usr2);
    if (options_.dump_on_sigterm && !options_.trace_dir.empty()) {
      sa.sa_handler = on_sigterm;
      ::sigaction(SIGTERM, &sa, &g_old_term);
      g_term_installed = true;
    }
    g_old_terminate = std::set_terminate(on_terminate);
  } else {
    log::warn("ddx watchdog: another watchdog is active in this process; signals go to it");
  }
  watch_thread_ = std::thread([this] { watch_loop(); });
  if (channel_) heartbeat_thread_ = std::thread([this] { heartbeat_loop(); });
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_watch_.notify_all();
  wake_heartbeat_.notify_all();
  if (watch_thread_.joinable()) watch_thread_.join();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  Watchdog* self = this;
  if (g_active.compare_exchange_strong(self, nullptr)) {
    ::sigaction(SIGUSR2, &g_old_usr2, nullptr);
    if (g_term_installed) ::sigaction(SIGTERM, &g_old_term, nullptr);
    g_term_installed = false;
    std::set_terminate(g_old_terminate);
  }
}

std::string Watchdog::peers_json_locked() const {
  if (!channel_) return "";
  json ranks = json::object();
  const int64_t now_us = steady_now_us();
  for (const auto& [rank, payload] : peers_) {
    json r = {{"heartbeat", json::parse(payload, nullptr, false)}};
    auto seen = peer_counter_seen_.find(rank);
    if (seen != peer_counter_seen_.end()) r["silent_ms"] = (now_us - seen->second.second) / 1000;
    ranks[std::to_string(rank)] = std::move(r);
  }
  json doc = {{"source", "store"},
              {"observer_rank", identity_.rank},
              {"read_unix_ms", peers_unix_ms_},
              {"error", peers_error_},
              {"store_failing_ms",
               store_failing_since_us_ ? (now_us - store_failing_since_us_) / 1000 : 0},
              {"declared_dead", std::vector<int>(declared_dead_.begin(), declared_dead_.end())},
              {"ranks", std::move(ranks)}};
  return doc.dump();
}

void Watchdog::set_train_progress(const TrainProgress& progress) {
  std::lock_guard<std::mutex> lock(train_mutex_);
  train_ = progress;
}

std::string Watchdog::dump(const std::string& reason) {
  if (options_.trace_dir.empty()) return "";
  std::lock_guard<std::mutex> dump_lock(dump_mutex_);
  triggers_.push_back({reason, unix_now_ms()});
  DumpContext c = identity_;
  c.reason = reason;
  c.triggers = triggers_;
  c.collective_timeout_ms = options_.collective_timeout.count();
  c.heartbeat_unix_ms = heartbeat_unix_ms_.load();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    c.peers_json = peers_json_locked();
  }
  try {
    std::string path = write_flight_recorder_dump(options_.trace_dir, recorder_.snapshot(), c, options_.dump_format);
    log::info("ddx flight recorder: wrote ", path, " (", reason, ")");
    return path;
  } catch (const std::exception& e) {
    log::error("ddx flight recorder: could not write the dump: ", e.what());
    return "";
  }
}

void Watchdog::check_timeouts() {
  const int64_t now_us = steady_now_us();
  const int64_t limit_us = options_.collective_timeout.count() * 1000;
  for (const OpRecord& op : recorder_.in_flight()) {
    const int64_t age_us = now_us - op.t_enqueue_us;
    if (age_us <= limit_us) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fired_.insert(op.id).second) continue;
    pending_fatal_.push_back(
        {describe_op(op) + " has not finished after " +
             format_duration(std::chrono::milliseconds(age_us / 1000)) + " (--collective-timeout " +
             format_duration(options_.collective_timeout) + ")",
         op.group});
  }
}

void Watchdog::watch_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_watch_.wait_for(lock, options_.tick);
    if (stopping_) break;
    lock.unlock();
    heartbeat_unix_ms_ = unix_now_ms();
    if (g_active.load() == this && g_sigterm.exchange(false)) {
      dump("SIGTERM (the launcher or scheduler is stopping this rank)");
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      ::sigaction(SIGTERM, &dfl, nullptr);
      std::fflush(nullptr);
      ::kill(::getpid(), SIGTERM);  // die of SIGTERM, as without us
    }
    if (g_active.load() == this && g_sigusr2.exchange(false)) {
      dump("SIGUSR2 (on-demand dump; training continues)");
    }
    check_timeouts();
    auto handle_pending_fatal = [this] {
      std::vector<Fatal> fatal;
      {
        std::lock_guard<std::mutex> guard(mutex_);
        fatal.swap(pending_fatal_);
      }
      for (const Fatal& f : fatal) handle_fatal(f);
    };
    handle_pending_fatal();
    handle_dump_requests();
    handle_pending_fatal();  // one that serving a request found (the store gone)
    lock.lock();
  }
}

void Watchdog::handle_dump_requests() {
  std::string text;
  int64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (seen_generation_ > handled_generation_) {
      generation = handled_generation_ = seen_generation_;
      text = seen_request_;
    }
  }
  if (generation > 0) {
    if (text != served_request_) dump("requested by " + text);
    served_request_ = text;
    std::lock_guard<std::mutex> lock(mutex_);
    outgoing_dumped_.push_back(generation);
    wake_heartbeat_.notify_all();
  }
  // The fallback when the store is gone: a request file in the trace directory (shared file
  // systems and ranks on one host see it).
  if (options_.trace_dir.empty()) return;
  const std::string path = request_file(options_.trace_dir);
  const int64_t mtime = file_mtime_ns(path);
  if (mtime == 0 || mtime == last_request_file_mtime_ns_) return;
  last_request_file_mtime_ns_ = mtime;
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return;
  std::string content;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) content.append(buffer, n);
  std::fclose(f);
  json request = json::parse(content, nullptr, false);
  if (!request.is_object()) return;
  const int from = request.value("rank", -1);
  const int64_t at = request.value("unix_ms", int64_t{0});
  const std::string request_text = request.value("request", std::string());
  if (from == identity_.rank || at < start_unix_ms_) return;  // ours, or from an earlier run
  if (request_text == served_request_) return;  // already served through the store
  served_request_ = request_text;
  // A peer asked through the file, so perhaps it cannot reach the store: try ours now rather
  // than at the next heartbeat. If it is gone, our own fatal (next) dumps and says so before the
  // peer, which waits for our dump, can end the job.
  collect_peers(options_.tick);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pending_fatal_.empty()) return;
  }
  dump("requested by " + request_text + " (request file)");
}

void Watchdog::write_request_file(const std::string& request, int64_t unix_ms) {
  if (options_.trace_dir.empty()) return;
  json doc = {{"rank", identity_.rank}, {"unix_ms", unix_ms}, {"request", request}};
  try {
    std::filesystem::create_directories(options_.trace_dir);
    write_file_atomically(request_file(options_.trace_dir), doc.dump() + "\n");
  } catch (const std::exception& e) {
    log::warn("ddx watchdog: could not write the dump request file: ", e.what());
  }
}

std::map<int, std::string> Watchdog::collect_peers(std::chrono::milliseconds within) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!channel_) return {};
  const uint64_t round = collect_round_;
  collect_requested_ = true;
  wake_heartbeat_.notify_all();
  wake_watch_.wait_for(lock, within, [&] { return collect_round_ > round || stopping_; });
  return peers_;
}

bool Watchdog::wait_for_peer_dumps() {
  const auto deadline = Clock::now() + options_.dump_wait;
  while (Clock::now() < deadline) {
    if (g_sigterm.load()) return false;  // being stopped anyway; our dump is written
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (own_generation_ > 0 && peer_dumped_count_ >= identity_.world_size) return true;
    }
    // Without the store: every rank's file written since this job started (same host or a
    // shared file system).
    if (!options_.trace_dir.empty()) {
      int fresh = 0;
      for (int r = 0; r < identity_.world_size; ++r) {
        const int64_t mtime = file_mtime_ns(flight_recorder_path(options_.trace_dir, r, options_.dump_format));
        if (mtime / 1000000 >= start_unix_ms_ - 1000) ++fresh;
      }
      if (fresh == identity_.world_size) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void Watchdog::handle_fatal(const Fatal& fatal) {
  if (aborting_.load()) return;
  ++fatal_events_;
  const std::string path = dump(fatal.reason);
  log::error("ddx watchdog: ", fatal.reason);
  const int64_t request_ms = unix_now_ms();
  const std::string request = "rank " + std::to_string(identity_.rank) + ": " + fatal.reason +
                              " @" + std::to_string(request_ms);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outgoing_requests_.push_back(request);
    wake_heartbeat_.notify_all();
  }
  served_request_ = request;  // never serve our own request
  write_request_file(request, request_ms);
  if (!path.empty()) {
    log::error("ddx watchdog: flight recorder written to ", path,
               "; asked the other ranks to dump too");
  }
  std::map<int, std::string> peers = collect_peers(std::chrono::milliseconds(1500));
  if (!fatal.group.empty()) {
    std::vector<int> behind;
    std::string summary = desync_summary(fatal.group, peers, identity_.world_size, unix_now_ms(), &behind);
    std::string error;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error = peers_error_;
    }
    if (summary.empty()) {
      summary = "peer progress unknown" + (error.empty() ? std::string() : " (store: " + error + ")");
    }
    log::error("ddx watchdog: ", summary);
    if (!behind.empty()) {
      std::sort(behind.begin(), behind.end());
      events::Event("watchdog.behind").text("group", fatal.group).ranks("ranks", behind).number("rank", identity_.rank).emit();
    }
  }
  if (!options_.trace_dir.empty()) {
    log::error("ddx watchdog: once every rank has dumped: ddx analyze ", options_.trace_dir);
  }
  switch (options_.on_timeout) {
    case OnTimeout::Abort: {
      aborting_ = true;
      log::error("ddx watchdog: aborting (--on-timeout abort) after the other ranks dump (at most ",
                 format_duration(options_.dump_wait), ")");
      const bool all = wait_for_peer_dumps();
      if (!all) log::warn("ddx watchdog: not every rank confirmed its dump; aborting anyway");
      dump(fatal.reason);  // again, now with what we learned about the peers
      // The op, its call site and the peers' state are in the message and the dump; this
      // thread's stack is the watchdog's, not the stuck caller's.
      write_error_report("ddx watchdog: " + fatal.reason +
                             (path.empty() ? std::string() : "; flight recorder: " + path),
                         kExitWatchdog, /*with_stack=*/false);
      exit_(kExitWatchdog);
      break;
    }
    case OnTimeout::Dump:
      dump(fatal.reason);
      log::error("ddx watchdog: continuing (--on-timeout dump); the backend's own timeout decides what happens next");
      break;
    case OnTimeout::Wait:
      dump(fatal.reason);
      log::error("ddx watchdog: keeping the rank alive (--on-timeout wait): attach a debugger, or stop the job");
      break;
  }
}

}  // namespace ddx
