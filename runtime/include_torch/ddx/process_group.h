#pragma once
// Process groups: the TCPStore bootstrap, one c10d backend per device type (Gloo for CPU
// tensors, NCCL for CUDA tensors), named subgroups for a device mesh, and a shutdown that never
// waits out a backend's 30-minute default timeout.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddx/rendezvous/cpu_threads.h"
#include "ddx/rendezvous/rendezvous.h"

namespace ddx {

struct ProcessGroupOptions {
  // How long rank 0's store waits for every rank to connect, and how long any rank waits
  // for a key (e.g. a peer that never creates its side of a group).
  std::chrono::milliseconds store_timeout{std::chrono::seconds(300)};
  // Timeout of every collective (c10d's defaults are 30 min for Gloo, 10 min for NCCL).
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(300)};
  // Create NCCL backends when CUDA is available.
  bool enable_nccl = true;
};

// One group of ranks. Always has a Gloo backend (CPU tensors, barriers, metadata); has an NCCL
// backend for CUDA tensors when CUDA is available.
class Group {
 public:
  Group(std::string name, int rank, std::vector<int> global_ranks,
        c10::intrusive_ptr<c10d::Store> store, const ProcessGroupOptions& options,
        const std::string& master_addr);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(global_ranks_.size()); }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  int global_rank(int group_rank) const { return global_ranks_.at(group_rank); }
  std::chrono::milliseconds timeout() const { return options_.collective_timeout; }

  // The backend that serves tensors on `device`; throws when there is none (CUDA without NCCL).
  c10d::Backend& backend(c10::DeviceType device);
  std::string backend_name(c10::DeviceType device) const;
  bool has_nccl() const { return static_cast<bool>(nccl_); }

  // Sequence numbers, as the flight recorder matches them across ranks: one counter for
  // collectives, one for point-to-point.
  uint64_t next_seq() { return ++seq_; }
  uint64_t next_p2p_seq() { return ++p2p_seq_; }
  uint64_t seq() const { return seq_; }

  // Operations launched and not finished; the collective layer keeps this count.
  std::shared_ptr<std::atomic<int>> pending() const { return pending_; }

  // Releases the backends. A backend with an operation still pending is aborted and
  // deliberately leaked: destroying it would block until its timeout.
  void shutdown();

 private:
  std::string name_;
  int rank_;
  std::vector<int> global_ranks_;
  ProcessGroupOptions options_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
  c10::intrusive_ptr<c10d::Backend> nccl_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> p2p_seq_{0};
  std::shared_ptr<std::atomic<int>> pending_ = std::make_shared<std::atomic<int>>(0);
};

class DeviceMesh;

// The job: its store, the world group and every subgroup this rank belongs to.
class World {
 public:
  // Connects to the job's store (rank 0 hosts it at the master endpoint) and creates the world
  // group. Under an MPI launcher with no master endpoint in the environment, rank 0's endpoint
  // is agreed over MPI first.
  static std::unique_ptr<World> init(const RendezvousInfo& info,
                                     const ProcessGroupOptions& options = {});
  ~World();

  const RendezvousInfo& info() const { return info_; }
  int rank() const { return info_.rank; }
  int size() const { return info_.world_size; }
  Group& world() { return *world_; }
  c10d::Store& store() { return *store_; }
  const ProcessGroupOptions& options() const { return options_; }
  // The CPU threads this rank's kernels use, chosen by init (ddx/rendezvous/cpu_threads.h).
  const CpuThreads& cpu_threads() const { return cpu_threads_; }

  // A subgroup of `ranks` (global ranks, in group-rank order). Every rank calls this with the
  // same arguments in the same order; a rank outside `ranks` gets nullptr and creates nothing.
  Group* new_group(const std::string& name, const std::vector<int>& ranks);

  // A device mesh over all ranks, e.g. {{"dp", 2}, {"tp", 2}}, outermost first (the last
  // dimension varies fastest over global ranks). The product must equal the world size.
  DeviceMesh& mesh(const std::vector<std::pair<std::string, int>>& dims);

  // Shuts every group down (see Group::shutdown) and finalizes MPI if we initialized it. Throws
  // ddx::StoreLost (ddx/watchdog/store_lost.h) when the check-out finds the store gone: the store went
  // away during the run, which must then fail rather than end as if clean.
  void shutdown();

 private:
  World(RendezvousInfo info, ProcessGroupOptions options);

  RendezvousInfo info_;
  ProcessGroupOptions options_;
  CpuThreads cpu_threads_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<Group> world_;
  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<std::unique_ptr<DeviceMesh>> meshes_;
  bool mpi_initialized_here_ = false;
  bool shut_down_ = false;

  friend class DeviceMesh;
};

// Named dimensions over the world's ranks; each dimension is a family of groups (one per slice
// through the other dimensions), of which this rank belongs to exactly one.
class DeviceMesh {
 public:
  DeviceMesh(World& world, std::vector<std::pair<std::string, int>> dims);

  Group& group(const std::string& dim);
  int coordinate(const std::string& dim) const;
  int size(const std::string& dim) const;
  const std::vector<std::pair<std::string, int>>& dims() const { return dims_; }
  // "pp=2 x dp=2 x tp=2; this rank: pp 0, dp 1, tp 1"
  std::string describe() const;

 private:
  int dim_index(const std::string& dim) const;

  std::vector<std::pair<std::string, int>> dims_;
  std::vector<int> coords_;
  std::map<std::string, Group*> groups_;
};

}  // namespace ddx
