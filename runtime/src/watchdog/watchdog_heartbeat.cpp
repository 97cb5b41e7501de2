// The watchdog's heartbeat thread: every store round trip happens here, never on the watch
// thread (watchdog.cpp), so a store that hangs or vanishes delays only the peer information,
// never a dump. Each round: relay this rank's dump requests and dumps, publish its heartbeat,
// pick up other ranks' requests, and (rank 0, or when a summary asked) read every heartbeat
// and declare the ranks whose counters stopped dead.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "ddx/text/log.h"
#include "ddx/watchdog/store_lost.h"
#include "ddx/text/text.h"
#include "ddx/watchdog/watchdog.h"
#include "watchdog_detail.h"

namespace ddx {

using nlohmann::json;
using watchdog_detail::first_line;

void Watchdog::heartbeat_loop() {
  HeartbeatRound round;
  round.timeout_us = options_.effective_heartbeat_timeout().count() * 1000;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_heartbeat_.wait_for(lock, options_.heartbeat_interval, [&] {
        return stopping_ || collect_requested_ || !outgoing_requests_.empty() ||
               !outgoing_dumped_.empty();
      });
      if (stopping_) return;
      round.requests.clear();
      round.dumped.clear();
      round.requests.swap(outgoing_requests_);
      round.dumped.swap(outgoing_dumped_);
      round.collect = collect_requested_;
      collect_requested_ = false;
    }
    try {
      relay_own_dumps(round);
      publish_heartbeat(round);
      take_peer_requests();
      if (identity_.rank == 0 || round.collect) {
        // Rank 0 watches everyone's heartbeat; the others read them when asked (summaries).
        read_peer_heartbeats(round);
      } else {
        std::lock_guard<std::mutex> lock(mutex_);
        peers_error_.clear();
        store_failing_since_us_ = 0;
      }
    } catch (const StoreLost& e) {
      on_store_lost(e, round);
    } catch (const std::exception& e) {
      on_store_error(e, round);
    }
  }
}

// Our requests go to the store, and our dumps are marked there. A dump marks every request up
// to the one it served: a rank that dumped for its own timeout at the same moment counts for a
// concurrent request of another rank.
void Watchdog::relay_own_dumps(HeartbeatRound& round) {
  auto mark_upto = [&](int64_t generation) {
    for (int64_t g = round.marked_upto + 1; g <= generation; ++g) channel_->mark_dumped(g);
    round.marked_upto = std::max(round.marked_upto, generation);
  };
  for (const std::string& request : round.requests) {
    const int64_t generation = channel_->request_dump(request);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      own_generation_ = generation;
      handled_generation_ = std::max(handled_generation_, generation);
      seen_generation_ = std::max(seen_generation_, generation);
    }
    mark_upto(generation);  // we dumped before asking
  }
  for (int64_t g : round.dumped) mark_upto(g);
}

void Watchdog::publish_heartbeat(HeartbeatRound& round) {
  const std::vector<OpRecord> in_flight = recorder_.in_flight();
  std::optional<TrainProgress> train;
  {
    std::lock_guard<std::mutex> lock(train_mutex_);
    train = train_;
  }
  channel_->publish_heartbeat(identity_.rank,
                              heartbeat_payload(++round.counter, identity_, recorder_.progress(), in_flight,
                                                recorder_.newest(), train, options_.heartbeat_interval));
}

// A request another rank made is handed to the watch thread, which dumps for it; for our own
// request, how many ranks have dumped so far.
void Watchdog::take_peer_requests() {
  const int64_t generation = channel_->dump_generation();
  int64_t own = 0;
  bool fresh = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    own = own_generation_;
    fresh = generation > seen_generation_;
  }
  if (fresh) {
    std::string text = channel_->dump_request(generation);
    std::lock_guard<std::mutex> lock(mutex_);
    seen_generation_ = std::max(seen_generation_, generation);
    seen_request_ = text;
    wake_watch_.notify_all();
  }
  if (own > 0) {
    const int64_t count = channel_->dumped_count(own);
    std::lock_guard<std::mutex> lock(mutex_);
    peer_dumped_count_ = count;
  }
}

// Every rank's heartbeat, kept for the summaries. On rank 0, a rank whose counter has not
// moved for the heartbeat timeout is declared dead (once).
void Watchdog::read_peer_heartbeats(HeartbeatRound& round) {
  std::map<int, std::string> peers = channel_->read_heartbeats(identity_.world_size);
  const int64_t now_us = steady_now_us();
  std::lock_guard<std::mutex> lock(mutex_);
  for (int r = 0; r < identity_.world_size; ++r) {
    if (r == identity_.rank) continue;
    uint64_t n = 0;
    auto it = peers.find(r);
    if (it != peers.end()) {
      json hb = json::parse(it->second, nullptr, false);
      if (hb.is_object()) n = hb.value("n", uint64_t{0});
    }
    auto seen = peer_counter_seen_.find(r);
    if (seen == peer_counter_seen_.end() || seen->second.first != n) {
      peer_counter_seen_[r] = {n, now_us};
    } else if (identity_.rank == 0 && now_us - seen->second.second > round.timeout_us &&
               declared_dead_.insert(r).second) {
      std::string last = it == peers.end() ? "it never sent one" : "last: " + it->second;
      pending_fatal_.push_back(
          {"rank " + std::to_string(r) + "'s heartbeat stopped " +
               format_duration(std::chrono::milliseconds((now_us - seen->second.second) / 1000)) + " ago (" +
               first_line(last) + ")",
           ""});
      wake_watch_.notify_all();
    }
  }
  peers_ = std::move(peers);
  peers_unix_ms_ = unix_now_ms();
  ++collect_round_;
  peers_error_.clear();
  store_failing_since_us_ = 0;
  wake_watch_.notify_all();
}

// The connection broke and a TCPStore client never reconnects: waiting cannot help, so every
// rank that sees it stops now, in one line, rather than at the heartbeat timeout or (when the
// store is not needed again before the end) never.
void Watchdog::on_store_lost(const StoreLost& e, HeartbeatRound& round) {
  const int64_t now_us = steady_now_us();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!store_failing_since_us_) store_failing_since_us_ = now_us;
  if (round.collect) ++collect_round_;  // answer the waiting watch thread anyway
  if (!round.store_lost) {
    round.store_lost = true;  // reported once; the later rounds fail the same way
    peers_error_ = e.cause();
    const auto since = StoreLost::Clock::now() - std::chrono::microseconds(now_us - store_failing_since_us_);
    pending_fatal_.push_back({StoreLost::line(e.store(), e.cause(), since), ""});
  }
  wake_watch_.notify_all();
}

// Any other store error: logged once, and past the heartbeat timeout a rank other than 0
// declares rank 0 (whose process hosts the store) dead.
void Watchdog::on_store_error(const std::exception& e, HeartbeatRound& round) {
  const int64_t now_us = steady_now_us();
  std::lock_guard<std::mutex> lock(mutex_);
  if (peers_error_.empty()) log::warn("ddx watchdog: store unreachable: ", first_line(e.what()));
  peers_error_ = first_line(e.what());
  if (!store_failing_since_us_) store_failing_since_us_ = now_us;
  if (round.collect) ++collect_round_;  // answer the waiting watch thread anyway
  if (now_us - store_failing_since_us_ > round.timeout_us && identity_.rank != 0 && declared_dead_.insert(0).second) {
    pending_fatal_.push_back(
        {"the store hosted by rank 0 has been unreachable for " +
             format_duration(std::chrono::milliseconds((now_us - store_failing_since_us_) / 1000)) + " (" +
             peers_error_ + "): rank 0 is probably dead",
         ""});
  }
  wake_watch_.notify_all();
}

}  // namespace ddx
