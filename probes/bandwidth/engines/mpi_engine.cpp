// MPICH collectives on host buffers. Each nccl-tests op maps to the MPI call a user would write;
// where MPI's in-place convention differs (MPI_Reduce_scatter_block leaves the block at the
// start of the buffer) the result is moved to where nccl-tests expects it.
#include "bandwidth/engines/mpi_engine.h"

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "bandwidth/host_memory.h"
#include "bandwidth/verifiable.h"
#include "ddx/errors/errors.h"
#include "faults/faults.h"

namespace ddx::bw {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(text, len));
}

MPI_Datatype mpi_type(DataType t) {
  switch (t) {
    case DataType::Int8: return MPI_INT8_T;
    case DataType::Uint8: return MPI_UINT8_T;
    case DataType::Int32: return MPI_INT32_T;
    case DataType::Uint32: return MPI_UINT32_T;
    case DataType::Int64: return MPI_INT64_T;
    case DataType::Uint64: return MPI_UINT64_T;
    case DataType::Float: return MPI_FLOAT;
    case DataType::Double: return MPI_DOUBLE;
    // MPI has no 16-bit floats: moved as opaque 16-bit words (no reductions).
    case DataType::Half:
    case DataType::BFloat16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(RedOp op) {
  switch (op) {
    case RedOp::Prod: return MPI_PROD;
    case RedOp::Min: return MPI_MIN;
    case RedOp::Max: return MPI_MAX;
    default: return MPI_SUM;
  }
}

class MpiEngine : public Engine {
 public:
  explicit MpiEngine(int local_ranks) : local_ranks_(local_ranks) {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    faults::set_rank(rank_, size_);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    library_ = std::string(version, len);
    library_ = library_.substr(0, library_.find_first_of("\n\r"));
  }
  ~MpiEngine() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
    std::free(send_);
    std::free(recv_);
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  DeviceInfo device() const override { return {0, "cpu", "host memory, " + library_}; }

  void check_supported(Collective c, DataType t, RedOp op) const override {
    const bool reduces = op != RedOp::None;
    if (reduces && (t == DataType::Half || t == DataType::BFloat16)) {
      throw UsageError(std::string("--engine mpi cannot reduce -d ") + bw::name(t) +
                       " (MPI has no 16-bit floating-point type); use float, or --engine gloo");
    }
    if (op == RedOp::Avg) {
      throw UsageError("--engine mpi has no -o avg (MPI has no MPI_AVG); use sum");
    }
    (void)c;
  }

  size_t buffer_budget() const override { return host_buffer_budget(available_host_memory(), local_ranks_); }

  void allocate(size_t bytes) override {
    std::free(send_);
    std::free(recv_);
    send_ = static_cast<char*>(std::aligned_alloc(64, round_up(bytes)));
    recv_ = static_cast<char*>(std::aligned_alloc(64, round_up(bytes)));
    if (!send_ || !recv_) throw std::runtime_error("cannot allocate 2 x " + std::to_string(bytes) + " B");
    std::memset(send_, 0, bytes);  // touch every page now, not inside the timed loop
    std::memset(recv_, 0, bytes);
    bytes_ = bytes;
  }

  void write(BufferId id, size_t offset, const void* src, size_t bytes) override {
    std::memcpy(buffer(id) + offset, src, bytes);
  }
  void read(BufferId id, size_t offset, void* dst, size_t bytes) override {
    std::memcpy(dst, buffer(id) + offset, bytes);
  }

  void launch(const OpCall& c) override {
    // The injection point for engines that bypass the collective layer (slow-link sleeps here).
    const faults::CollectiveCall fault =
        faults::before_collective(record_name(c.collective, true), record_name(c.collective, false));
    const size_t elt = element_size(c.type);
    const MPI_Datatype t = mpi_type(c.type);
    if (c.count > static_cast<size_t>(INT32_MAX)) {
      throw std::runtime_error("--engine mpi: count " + std::to_string(c.count) + " exceeds MPI's int counts");
    }
    const int count = static_cast<int>(c.count);
    char* in = c.in_place ? recv_ + c.in_offset * elt : send_;
    char* out = c.in_place ? recv_ + c.out_offset * elt : recv_;
    size_t out_count = c.count;
    switch (c.collective) {
      case Collective::AllReduce:
        check(MPI_Allreduce(c.in_place ? MPI_IN_PLACE : in, out, count, t, mpi_op(c.op), comm_), "MPI_Allreduce");
        break;
      case Collective::AllGather:
        out_count = c.count * size_;
        if (c.in_place) {
          check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, count, t, comm_), "MPI_Allgather");
        } else {
          check(MPI_Allgather(in, count, t, out, count, t, comm_), "MPI_Allgather");
        }
        break;
      case Collective::ReduceScatter:
        if (c.in_place) {
          // MPI leaves my block at the start of the buffer; nccl-tests expects it at my offset.
          check(MPI_Reduce_scatter_block(MPI_IN_PLACE, recv_, count, t, mpi_op(c.op), comm_),
                "MPI_Reduce_scatter_block");
          if (out != recv_) std::memmove(out, recv_, c.count * elt);
        } else {
          check(MPI_Reduce_scatter_block(in, out, count, t, mpi_op(c.op), comm_), "MPI_Reduce_scatter_block");
        }
        break;
      case Collective::Broadcast:
        // Out of place the root sends straight from its input (MPI_Bcast is in place).
        check(MPI_Bcast(!c.in_place && rank_ == c.root ? in : out, count, t, c.root, comm_), "MPI_Bcast");
        break;
      case Collective::Reduce:
        if (c.in_place) {
          check(MPI_Reduce(rank_ == c.root ? MPI_IN_PLACE : out, rank_ == c.root ? out : nullptr, count, t,
                           mpi_op(c.op), c.root, comm_),
                "MPI_Reduce");
        } else {
          check(MPI_Reduce(in, out, count, t, mpi_op(c.op), c.root, comm_), "MPI_Reduce");
        }
        break;
      case Collective::AllToAll:
        out_count = c.count * size_;
        check(MPI_Alltoall(in, count, t, out, count, t, comm_), "MPI_Alltoall");
        break;
      case Collective::SendRecv:
        check(MPI_Sendrecv(in, count, t, c.send_peer, 7, out, count, t, c.recv_peer, 7, comm_, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
        break;
    }
    if (fault.corrupt_result) add_one_to_first(c.type, out, out_count);
  }

  void wait_all() override {}
  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }
  void iteration_begin(int i) override { clock_.begin(i); }
  void iteration_end(int i) override { clock_.end(i); }
  std::vector<double> iteration_seconds(int n) override { return clock_.seconds(n); }
  bool synchronous() const override { return true; }

 private:
  static size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }
  char* buffer(BufferId id) { return id == BufferId::Send ? send_ : recv_; }

  int local_ranks_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::string library_;
  char* send_ = nullptr;
  char* recv_ = nullptr;
  size_t bytes_ = 0;
  HostIterationClock clock_;
};

class MpiCoordinator : public Coordinator {
 public:
  MpiCoordinator() {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCoordinator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::string> all_gather(const std::string& mine) override { return collect(mine, true); }
  std::vector<std::string> gather(const std::string& mine) override { return collect(mine, false); }

 private:
  std::vector<std::string> collect(const std::string& mine, bool everyone) {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), offsets(size_);
    if (everyone) {
      check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_), "MPI_Allgather");
    } else {
      check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_), "MPI_Gather");
    }
    int total = 0;
    for (int q = 0; q < size_; ++q) {
      offsets[q] = total;
      total += lens[q];
    }
    std::string all(static_cast<size_t>(total), '\0');
    if (everyone) {
      check(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, comm_),
            "MPI_Allgatherv");
    } else {
      check(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, comm_),
            "MPI_Gatherv");
      if (rank_ != 0) return {};
    }
    std::vector<std::string> out;
    for (int q = 0; q < size_; ++q) out.push_back(all.substr(offsets[q], lens[q]));
    return out;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool ensure_mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return false;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  return true;
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int mpi_world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::unique_ptr<Engine> make_mpi_engine(int local_ranks) { return std::make_unique<MpiEngine>(local_ranks); }
std::unique_ptr<Coordinator> make_mpi_coordinator() { return std::make_unique<MpiCoordinator>(); }

}  // namespace ddx::bw
