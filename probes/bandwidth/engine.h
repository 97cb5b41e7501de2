#pragma once
// What the measurement loop needs from a communication library: two buffers, one op at a time,
// a barrier, and clocks. Three implementations: gloo (the ddx collective layer on CPU tensors),
// mpi (MPICH on host buffers) and nccl (raw NCCL on one GPU per rank). The loop itself
// (harness.h) is shared, so all three measure the same way.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "bandwidth/types.h"

namespace ddx::bw {

// Out-of-band coordination between ranks, independent of the library under test (the ddx
// store, or MPI for the mpi engine): results are gathered through it even when the op under
// test is broken.
class Coordinator {
 public:
  virtual ~Coordinator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's `mine`, in rank order, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // Every rank's `mine` on rank 0 (others get an empty vector). Cheaper than all_gather.
  virtual std::vector<std::string> gather(const std::string& mine) = 0;
  // Called once at the end: rank 0 has read everything and others may exit.
  virtual void finish() {}
};

enum class BufferId { Send, Recv };

// nccl-tests' `#  Rank 0 Group 0 Pid 123 on host device 0 [0000:1b:00] NVIDIA H100` line.
struct DeviceInfo {
  int index = 0;           // CUDA device, or the local rank on CPU
  std::string bus_id;      // PCI bus id, or "cpu"
  std::string name;        // "NVIDIA H100 80GB HBM3", "cpu (gloo)"
};

// One op as the loop launches it. Offsets and counts are in elements.
struct OpCall {
  Collective collective = Collective::AllReduce;
  DataType type = DataType::Float;
  RedOp op = RedOp::Sum;
  int root = 0;
  size_t count = 0;      // the op's count argument (see Geometry::count)
  bool in_place = false;
  // Out of place the input is the send buffer from element 0 and the output the receive buffer
  // from element 0. In place both live in the receive buffer at these offsets.
  size_t in_offset = 0;
  size_t out_offset = 0;
  // sendrecv: the peers (ring neighbours, or the pair partner in pairwise mode); -1 = none.
  int send_peer = -1;
  int recv_peer = -1;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // For the `# Using devices` lines and JSON `devices[]`.
  virtual DeviceInfo device() const = 0;

  // Throws UsageError (one line) when the engine cannot run this op on this type.
  virtual void check_supported(Collective c, DataType t, RedOp op) const = 0;
  // Bytes each of the two buffers may have on this rank (memory left after a safety margin).
  virtual size_t buffer_budget() const = 0;
  // Allocates the send and receive buffers, `bytes` each.
  virtual void allocate(size_t bytes) = 0;
  // Host <-> buffer copies for data set-up and checks (not timed).
  virtual void write(BufferId id, size_t offset_bytes, const void* src, size_t bytes) = 0;
  virtual void read(BufferId id, size_t offset_bytes, void* dst, size_t bytes) = 0;

  // Starts one op. Host engines (gloo, mpi) return once it is complete; nccl enqueues it.
  virtual void launch(const OpCall& call) = 0;
  // Waits until every launched op is complete (stream synchronize for nccl). Throws when an op
  // failed or `timeout` passed; the message names the op.
  virtual void wait_all() = 0;
  // A barrier over the library under test (nccl-tests uses MPI_Barrier or a 1-element op).
  virtual void barrier() = 0;

  // Per-iteration clocks: host timestamps for host engines, CUDA events for nccl.
  virtual void iteration_begin(int i) = 0;
  virtual void iteration_end(int i) = 0;
  // Seconds of iterations [0, n) after wait_all().
  virtual std::vector<double> iteration_seconds(int n) = 0;

  // Whether ops complete inside launch() (host engines), so -z 0 and -z 2 coincide.
  virtual bool synchronous() const = 0;
};

// Host-clock iteration timing for the synchronous host engines.
class HostIterationClock {
 public:
  void begin(int i);
  void end(int i);
  std::vector<double> seconds(int n) const;

 private:
  std::vector<double> begin_, end_;
};

}  // namespace ddx::bw
