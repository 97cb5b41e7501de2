// Coordination through the job's TCPStore: each exchange gets its own key prefix (an epoch
// counter that advances identically on every rank), rank 0 deletes what only it reads, and
// finish() keeps rank 0 (the store's host) alive until every rank has read what it needs.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "bandwidth/torch/gloo_engine.h"

namespace ddx::bw {
namespace {

class StoreCoordinator : public Coordinator {
 public:
  StoreCoordinator(c10d::Store& store, int rank, int size) : store_(store), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::string> all_gather(const std::string& mine) override {
    const std::string prefix = next_prefix();
    put(prefix + std::to_string(rank_), mine);
    std::vector<std::string> out;
    for (int q = 0; q < size_; ++q) out.push_back(get(prefix + std::to_string(q)));
    return out;
  }

  std::vector<std::string> gather(const std::string& mine) override {
    const std::string prefix = next_prefix();
    put(prefix + std::to_string(rank_), mine);
    if (rank_ != 0) return {};
    std::vector<std::string> out;
    for (int q = 0; q < size_; ++q) {
      out.push_back(get(prefix + std::to_string(q)));
      store_.deleteKey(prefix + std::to_string(q));
    }
    return out;
  }

  void finish() override {
    const std::string key = "ddx/bw/finished";
    if (rank_ == 0) {
      put(key, "1");
    } else {
      store_.wait({key});
    }
  }

 private:
  std::string next_prefix() { return "ddx/bw/" + std::to_string(epoch_++) + "/"; }
  void put(const std::string& key, const std::string& value) {
    store_.set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string get(const std::string& key) {
    auto bytes = store_.get(key);
    return std::string(bytes.begin(), bytes.end());
  }

  c10d::Store& store_;
  int rank_, size_;
  uint64_t epoch_ = 0;
};

}  // namespace

std::unique_ptr<Coordinator> make_store_coordinator(c10d::Store& store, int rank, int size) {
  return std::make_unique<StoreCoordinator>(store, rank, size);
}

}  // namespace ddx::bw
