#pragma once
// The matrix over several nodes (`ddx fault matrix --nnodes N --node-rank I ...`, one process per
// node as srun or torchrun would start them): every node runs the same jobs in lock-step, each
// job's `ddx launch` joining the other nodes' through its multi-node rendezvous, and node 0
// judges. After each job every other node sends node 0 what its part left (its console lines,
// exit status, leftover processes, flight-recorder dumps); node 0 reads the detectors over all of
// it and sends the verdict back.
//
// The matrix processes talk through a TCPStore of their own that node 0 hosts at
// --master-addr:--master-port (the jobs rendezvous one port above it), not through the jobs' store,
// which lives inside a job's rank 0 and is gone with each job (or with a fault that kills it),
// and not through files, so that nothing but the jobs' checkpoints needs a filesystem the nodes
// share. No LibTorch here; the store is behind the interface.
#include <memory>
#include <string>
#include <vector>

namespace ddx::faults::matrix {

class NodeLink {
 public:
  virtual ~NodeLink() = default;
  virtual int nnodes() const = 0;
  virtual int node_rank() const = 0;
  // Every node's `value`, in node order, on node 0 (it waits for all); an empty list elsewhere.
  // `key` names the exchange and must be new each time.
  virtual std::vector<std::string> gather(const std::string& key, const std::string& value) = 0;
  // Node 0's `value` on every node (waiting for it; the others' argument is not used).
  virtual std::string broadcast(const std::string& key, const std::string& value) = 0;
};

// Node 0 hosts the store and waits for the others; every node gives up after `timeout_s` of
// waiting for any exchange (a node that died), with an error naming the endpoint.
std::unique_ptr<NodeLink> connect_nodes(const std::string& master_addr, int master_port, int nnodes, int node_rank,
                                        double timeout_s);

}  // namespace ddx::faults::matrix
