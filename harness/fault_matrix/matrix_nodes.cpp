// The matrix processes' own TCPStore (matrix_nodes.h): node 0 serves, every node is a client.
// Keys are "ddx-fault-matrix/<exchange>/<node>"; a get() blocks until the key is set.
#include "harness/fault_matrix/matrix_nodes.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <stdexcept>

namespace ddx::faults::matrix {
namespace {

class StoreNodeLink : public NodeLink {
 public:
  StoreNodeLink(c10::intrusive_ptr<c10d::Store> store, int nnodes, int node_rank)
      : store_(std::move(store)), nnodes_(nnodes), node_rank_(node_rank) {}

  int nnodes() const override { return nnodes_; }
  int node_rank() const override { return node_rank_; }

  std::vector<std::string> gather(const std::string& key, const std::string& value) override {
    store_->set(name(key, node_rank_), value);
    std::vector<std::string> all;
    if (node_rank_ != 0) return all;
    for (int node = 0; node < nnodes_; ++node) all.push_back(text(store_->get(name(key, node))));
    return all;
  }

  std::string broadcast(const std::string& key, const std::string& value) override {
    if (node_rank_ == 0) {
      store_->set(name(key, 0), value);
      return value;
    }
    return text(store_->get(name(key, 0)));
  }

 private:
  static std::string name(const std::string& key, int node) { return "ddx-fault-matrix/" + key + "/" + std::to_string(node); }
  static std::string text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

  c10::intrusive_ptr<c10d::Store> store_;
  int nnodes_;
  int node_rank_;
};

}  // namespace

std::unique_ptr<NodeLink> connect_nodes(const std::string& master_addr, int master_port, int nnodes, int node_rank,
                                        double timeout_s) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(master_port);
  opts.isServer = node_rank == 0;
  opts.numWorkers = static_cast<std::size_t>(nnodes);
  opts.waitWorkers = true;  // node 0 returns once every node's matrix has connected
  opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  try {
    return std::make_unique<StoreNodeLink>(c10::make_intrusive<c10d::TCPStore>(master_addr, opts), nnodes, node_rank);
  } catch (const std::exception& e) {
    throw std::runtime_error("fault matrix: node " + std::to_string(node_rank) + " of " + std::to_string(nnodes) +
                             " could not " + (node_rank == 0 ? "host" : "reach") + " the matrix's store at " +
                             master_addr + ":" + std::to_string(master_port) + ": " + e.what());
  }
}

}  // namespace ddx::faults::matrix
