// NCCL on one GPU per rank, modelled on nccl-tests: ops enqueued on one stream, host wall time
// over the loop, CUDA events per iteration, a spin on cudaStreamQuery + ncclCommGetAsyncError
// that aborts the communicator after -T seconds.
#include "bandwidth/engines/nccl_engine.h"

#include "ddx/errors/errors.h"
#include "ddx/rendezvous/gpu_placement.h"

#ifdef DDX_WITH_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "bandwidth/verifiable.h"
#include "faults/faults.h"

#endif

namespace ddx::bw {

#ifndef DDX_WITH_CUDA

bool nccl_engine_built() { return false; }

std::unique_ptr<Engine> make_nccl_engine(Coordinator&, int, int, double) {
  throw UsageError("--engine nccl: this ddx was built without the CUDA toolkit; use --engine gloo or mpi");
}

#else

namespace {

void cuda_check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
}

void nccl_check(ncclResult_t rc, const char* what, ncclComm_t comm = nullptr) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  std::string detail = ncclGetErrorString(rc);
  const char* last = ncclGetLastError(comm);
  if (last && *last) detail += std::string(" / ") + last;
  throw std::runtime_error(std::string(what) + " failed: " + detail);
}

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::Int8: return ncclInt8;
    case DataType::Uint8: return ncclUint8;
    case DataType::Int32: return ncclInt32;
    case DataType::Uint32: return ncclUint32;
    case DataType::Int64: return ncclInt64;
    case DataType::Uint64: return ncclUint64;
    case DataType::Half: return ncclFloat16;
    case DataType::Float: return ncclFloat32;
    case DataType::Double: return ncclFloat64;
    case DataType::BFloat16: return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(RedOp op) {
  switch (op) {
    case RedOp::Prod: return ncclProd;
    case RedOp::Min: return ncclMin;
    case RedOp::Max: return ncclMax;
    case RedOp::Avg: return ncclAvg;
    default: return ncclSum;
  }
}

std::string to_hex(const char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += digits[(static_cast<unsigned char>(bytes[i]) >> 4) & 0xf];
    out += digits[static_cast<unsigned char>(bytes[i]) & 0xf];
  }
  return out;
}

void from_hex(const std::string& hex, char* bytes, size_t n) {
  if (hex.size() != 2 * n) throw std::runtime_error("malformed ncclUniqueId from rank 0");
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
}

class NcclEngine : public Engine {
 public:
  NcclEngine(Coordinator& coord, int local_rank, int local_ranks, double timeout_s)
      : rank_(coord.rank()), size_(coord.size()), timeout_s_(timeout_s) {
    int devices = 0;
    const cudaError_t rc = cudaGetDeviceCount(&devices);
    if (rc != cudaSuccess || devices == 0) {
      throw UsageError("--engine nccl: no GPU is visible to rank " + std::to_string(rank_) + " (" +
                       (rc != cudaSuccess ? std::string(cudaGetErrorString(rc)) : "0 CUDA devices") +
                       "); use --engine gloo or mpi on CPU");
    }
    // One GPU per rank (the local rank picks it): NCCL would refuse a shared one, later and less plainly.
    if (const std::string shared = shared_gpu_problem(local_rank, local_ranks, devices); !shared.empty()) {
      throw UsageError("--engine nccl: " + shared);
    }
    int offset = 0;
    if (const char* first = std::getenv("NCCL_TESTS_DEVICE")) offset = std::atoi(first);
    device_ = (offset + local_rank) % devices;
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    // Rank 0 creates the id; everyone learns it through the store (not MPI), so any launcher works.
    ncclUniqueId id;
    if (rank_ == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::vector<std::string> ids = coord.all_gather(rank_ == 0 ? to_hex(id.internal, sizeof(id.internal)) : "");
    from_hex(ids.at(0), id.internal, sizeof(id.internal));
    nccl_check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    void* scratch = nullptr;
    cuda_check(cudaMalloc(&scratch, sizeof(float)), "cudaMalloc");
    barrier_buf_ = static_cast<float*>(scratch);
    faults::set_rank(rank_, size_);
  }

  ~NcclEngine() override {
    for (auto e : events_) cudaEventDestroy(e);
    if (comm_) {
      if (failed_) {
        ncclCommAbort(comm_);
      } else {
        ncclCommDestroy(comm_);
      }
    }
    if (send_) ncclMemFree(send_);
    if (recv_) ncclMemFree(recv_);
    if (barrier_buf_) cudaFree(barrier_buf_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  DeviceInfo device() const override {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device_);
    char bus[64] = {0};
    cudaDeviceGetPCIBusId(bus, sizeof(bus), device_);
    return {device_, bus, prop.name};
  }

  void check_supported(Collective, DataType, RedOp) const override {}

  // nccl-tests' rule: total memory less min(ceil(total / 16 GiB) GiB, 4 GiB) less 1 GiB, over
  // three buffers; never more than half of what is free now.
  size_t buffer_budget() const override {
    size_t free_b = 0, total_b = 0;
    cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    const size_t gib = size_t{1} << 30;
    const size_t reserve = std::min((total_b + 16 * gib - 1) / (16 * gib) * gib, 4 * gib) + gib;
    const size_t by_total = total_b > reserve ? (total_b - reserve) / 3 : 0;
    return std::min(by_total, free_b / 2);
  }

  void allocate(size_t bytes) override {
    if (send_) ncclMemFree(send_);
    if (recv_) ncclMemFree(recv_);
    send_ = recv_ = nullptr;
    // ncclMemAlloc (cuMem) so NVLS and buffer registration work, as in nccl-tests.
    void* send = nullptr;
    void* recv = nullptr;
    nccl_check(ncclMemAlloc(&send, bytes), "ncclMemAlloc");
    send_ = static_cast<char*>(send);
    nccl_check(ncclMemAlloc(&recv, bytes), "ncclMemAlloc");
    recv_ = static_cast<char*>(recv);
    cuda_check(cudaMemset(send_, 0, bytes), "cudaMemset");
    cuda_check(cudaMemset(recv_, 0, bytes), "cudaMemset");
  }

  void write(BufferId id, size_t offset, const void* src, size_t bytes) override {
    cuda_check(cudaMemcpy(buffer(id) + offset, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  void read(BufferId id, size_t offset, void* dst, size_t bytes) override {
    cuda_check(cudaMemcpy(dst, buffer(id) + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  }

  void launch(const OpCall& c) override {
    // The injection point for engines that bypass the collective layer (slow-link sleeps here).
    const faults::CollectiveCall fault =
        faults::before_collective(record_name(c.collective, true), record_name(c.collective, false));
    last_ = c;
    const size_t elt = element_size(c.type);
    const ncclDataType_t t = nccl_type(c.type);
    const char* in = c.in_place ? recv_ + c.in_offset * elt : send_;
    char* out = c.in_place ? recv_ + c.out_offset * elt : recv_;
    switch (c.collective) {
      case Collective::AllReduce:
        nccl_check(ncclAllReduce(in, out, c.count, t, nccl_op(c.op), comm_, stream_), "ncclAllReduce", comm_);
        break;
      case Collective::AllGather:
        nccl_check(ncclAllGather(in, out, c.count, t, comm_, stream_), "ncclAllGather", comm_);
        break;
      case Collective::ReduceScatter:
        nccl_check(ncclReduceScatter(in, out, c.count, t, nccl_op(c.op), comm_, stream_), "ncclReduceScatter", comm_);
        break;
      case Collective::Broadcast:
        nccl_check(ncclBroadcast(in, out, c.count, t, c.root, comm_, stream_), "ncclBroadcast", comm_);
        break;
      case Collective::Reduce:
        nccl_check(ncclReduce(in, out, c.count, t, nccl_op(c.op), c.root, comm_, stream_), "ncclReduce", comm_);
        break;
      case Collective::AllToAll:
        nccl_check(ncclAlltoAll(in, out, c.count, t, comm_, stream_), "ncclAlltoAll", comm_);
        break;
      case Collective::SendRecv:
        nccl_check(ncclGroupStart(), "ncclGroupStart");
        if (c.send_peer >= 0) nccl_check(ncclSend(in, c.count, t, c.send_peer, comm_, stream_), "ncclSend", comm_);
        if (c.recv_peer >= 0) nccl_check(ncclRecv(out, c.count, t, c.recv_peer, comm_, stream_), "ncclRecv", comm_);
        nccl_check(ncclGroupEnd(), "ncclGroupEnd", comm_);
        break;
    }
    if (fault.corrupt_result) {
      // Injected fault: corrupt on the host after the op (slow, never used for timing figures).
      // Only for an op a corrupt-collective names: slow-link must leave the stream asynchronous, or the
      // pairwise test would time every rank's ops serialised, not just the delayed rank's.
      wait_all();
      const size_t n = c.collective == Collective::AllGather || c.collective == Collective::AllToAll
                           ? c.count * size_
                           : c.count;
      std::vector<char> host(n * elt);
      cuda_check(cudaMemcpy(host.data(), out, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
      add_one_to_first(c.type, host.data(), n);
      cuda_check(cudaMemcpy(out, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    }
  }

  // nccl-tests' testStreamSynchronize: spin on the stream and on NCCL's async error, abort
  // after the timeout.
  void wait_all() override {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t rc = cudaStreamQuery(stream_);
      if (rc == cudaSuccess) return;
      if (rc != cudaErrorNotReady) cuda_check(rc, "cudaStreamQuery");
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        failed_ = true;
        nccl_check(async, (std::string(bw::name(last_.collective)) + " (asynchronous NCCL error)").c_str(), comm_);
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (timeout_s_ > 0 && waited > timeout_s_) {
        failed_ = true;
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw std::runtime_error(std::string(bw::name(last_.collective)) + " of " + std::to_string(last_.count) +
                                 " elements did not complete within " + std::to_string(timeout_s_) +
                                 " s (-T); communicator aborted");
      }
      std::this_thread::yield();
    }
  }

  // A one-element all-reduce, completed: cheap and over the fabric under test.
  void barrier() override {
    nccl_check(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, stream_), "barrier", comm_);
    wait_all();
  }

  void iteration_begin(int i) override { cuda_check(cudaEventRecord(event(2 * i), stream_), "cudaEventRecord"); }
  void iteration_end(int i) override { cuda_check(cudaEventRecord(event(2 * i + 1), stream_), "cudaEventRecord"); }
  std::vector<double> iteration_seconds(int n) override {
    std::vector<double> out;
    for (int i = 0; i < n; ++i) {
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, event(2 * i), event(2 * i + 1)), "cudaEventElapsedTime");
      out.push_back(ms / 1e3);
    }
    return out;
  }
  bool synchronous() const override { return false; }

 private:
  char* buffer(BufferId id) { return id == BufferId::Send ? send_ : recv_; }
  cudaEvent_t event(int i) {
    while (static_cast<int>(events_.size()) <= i) {
      cudaEvent_t e;
      cuda_check(cudaEventCreate(&e), "cudaEventCreate");
      events_.push_back(e);
    }
    return events_[i];
  }

  int rank_, size_;
  double timeout_s_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  char* send_ = nullptr;
  char* recv_ = nullptr;
  float* barrier_buf_ = nullptr;
  std::vector<cudaEvent_t> events_;
  OpCall last_;
  bool failed_ = false;
};

}  // namespace

bool nccl_engine_built() { return true; }

std::unique_ptr<Engine> make_nccl_engine(Coordinator& coord, int local_rank, int local_ranks, double timeout_s) {
  return std::make_unique<NcclEngine>(coord, local_rank, local_ranks, timeout_s);
}

#endif

}  // namespace ddx::bw
