// Store keys of the watchdog (all under ddx/fr/):
//   hb/<rank>            the rank's latest heartbeat (JSON, see watchdog.h)
//   request_generation   number of dump requests so far
//   request/<g>          text of request g ("rank 1: all_reduce ... has not finished ...")
//   dumped/<g>           ranks that dumped after request g
#include "store_peer_channel.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddx/watchdog/store_lost.h"
#include "ddx/watchdog/store_observer.h"
#include "store_host.h"

namespace ddx::detail {
namespace {

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string text(const std::vector<uint8_t>& data) { return {data.begin(), data.end()}; }

// Every operation goes through guarded(): a connection to the store that broke becomes
// ddx::StoreLost naming the store (the watchdog's cue to stop the rank), the rest passes as is.
// Once lost, the channel never touches the socket again: each further send on it would only
// make c10d log its own warning with a raw C++ stack.
class StorePeerChannel : public PeerChannel {
 public:
  StorePeerChannel(c10::intrusive_ptr<c10d::Store> store, StoreIdentity store_id)
      : store_(std::move(store)), store_id_(std::move(store_id)) {}

  void publish_heartbeat(int rank, const std::string& payload) override {
    guarded([&] { store_->set(hb_key(rank), bytes(payload)); });
  }

  std::map<int, std::string> read_heartbeats(int world_size) override {
    return guarded([&] {
      std::vector<std::string> keys;
      for (int r = 0; r < world_size; ++r) keys.push_back(hb_key(r));
      std::map<int, std::string> out;
      // multiGet waits for missing keys, so only when every rank has published (the usual case).
      if (store_->check(keys)) {
        auto values = store_->multiGet(keys);
        for (int r = 0; r < world_size && r < static_cast<int>(values.size()); ++r) out[r] = text(values[r]);
        return out;
      }
      for (int r = 0; r < world_size; ++r) {
        if (store_->check({keys[r]})) out[r] = text(store_->get(keys[r]));
      }
      return out;
    });
  }

  int64_t dump_generation() override {
    return guarded([&] { return store_->add("ddx/fr/request_generation", 0); });
  }

  std::string dump_request(int64_t generation) override {
    return guarded([&] { return text(store_->get("ddx/fr/request/" + std::to_string(generation))); });
  }

  int64_t request_dump(const std::string& reason) override {
    return guarded([&] {
      const int64_t generation = store_->add("ddx/fr/request_generation", 1);
      store_->set("ddx/fr/request/" + std::to_string(generation), bytes(reason));
      return generation;
    });
  }

  void mark_dumped(int64_t generation) override {
    guarded([&] { store_->add("ddx/fr/dumped/" + std::to_string(generation), 1); });
  }

  int64_t dumped_count(int64_t generation) override {
    return guarded([&] { return store_->add("ddx/fr/dumped/" + std::to_string(generation), 0); });
  }

 private:
  static std::string hb_key(int rank) { return "ddx/fr/hb/" + std::to_string(rank); }

  template <typename F>
  auto guarded(F&& op) -> decltype(op()) {
    if (lost_) throw *lost_;
    QuietStoreLogs quiet;
    try {
      try {
        return op();
      } catch (const std::exception&) {
        rethrow_store_failure(store_id_);
      }
    } catch (const StoreLost& e) {
      lost_ = e;
      throw;
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  StoreIdentity store_id_;
  std::optional<StoreLost> lost_;  // only the watchdog's heartbeat thread uses a channel
};

// `ddx top`'s view: the same heartbeat reader over a client that is not a worker (no
// waitWorkers, so the constructor adds nothing to the store's keys).
class HeartbeatObserver : public StoreObserver {
 public:
  HeartbeatObserver(c10::intrusive_ptr<c10d::Store> store, StoreIdentity store_id)
      : channel_(std::move(store), std::move(store_id)) {}
  std::map<int, std::string> read_heartbeats(int world_size) override {
    return channel_.read_heartbeats(world_size);
  }

 private:
  StorePeerChannel channel_;
};

}  // namespace

std::unique_ptr<PeerChannel> make_store_peer_channel(c10d::Store& store, std::chrono::milliseconds timeout,
                                                     const StoreIdentity& store_id) {
  c10::intrusive_ptr<c10d::Store> clone;
  try {
    clone = store.clone();
  } catch (const std::exception&) {
    return nullptr;
  }
  if (!clone) return nullptr;
  clone->setTimeout(timeout);
  return std::make_unique<StorePeerChannel>(std::move(clone), store_id);
}

}  // namespace ddx::detail

namespace ddx {

std::unique_ptr<StoreObserver> observe_job_store(const std::string& host, int port,
                                                 std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = false;
  opts.numWorkers = std::nullopt;
  opts.waitWorkers = false;
  opts.timeout = timeout;
  try {
    return std::make_unique<detail::HeartbeatObserver>(
        c10::make_intrusive<c10d::TCPStore>(host, opts),
        detail::StoreIdentity{"the job's store at " + host + ":" + std::to_string(port), -1});
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw std::runtime_error("cannot reach the job's store at " + host + ":" + std::to_string(port) + ": " +
                             what.substr(0, what.find('\n')));
  }
}

}  // namespace ddx
