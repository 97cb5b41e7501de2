// Each nccl-tests op as a ddx collective on views of two byte tensors. c10d's all_reduce and
// reduce work in place, so out of place they run on the receive buffer after copying the input
// there, which is what a torch.distributed user does; the in-place columns carry no copy.
#include "bandwidth/torch/gloo_engine.h"

#include <torch/torch.h>

#include <cstring>

#include "bandwidth/host_memory.h"
#include "ddx/collectives.h"
#include "ddx/errors/errors.h"

namespace ddx::bw {
namespace {

c10::ScalarType torch_type(DataType t) {
  switch (t) {
    case DataType::Int8: return torch::kInt8;
    case DataType::Uint8: return torch::kUInt8;
    case DataType::Int32: return torch::kInt32;
    case DataType::Int64: return torch::kInt64;
    case DataType::Half: return torch::kFloat16;
    case DataType::Float: return torch::kFloat32;
    case DataType::Double: return torch::kFloat64;
    case DataType::BFloat16: return torch::kBFloat16;
    default: return torch::kUInt32;  // rejected by check_supported
  }
}

ddx::ReduceOp ddx_op(RedOp op) {
  switch (op) {
    case RedOp::Prod: return ddx::ReduceOp::Product;
    case RedOp::Min: return ddx::ReduceOp::Min;
    case RedOp::Max: return ddx::ReduceOp::Max;
    case RedOp::Avg: return ddx::ReduceOp::Avg;
    default: return ddx::ReduceOp::Sum;
  }
}

class GlooEngine : public Engine {
 public:
  GlooEngine(Group& group, int local_ranks) : group_(group), local_ranks_(local_ranks) {}

  std::string name() const override { return "gloo"; }
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  DeviceInfo device() const override { return {0, "cpu", "cpu tensors, c10d Gloo via the ddx collective layer"}; }

  void check_supported(Collective, DataType t, RedOp) const override {
    if (t == DataType::Uint32 || t == DataType::Uint64) {
      throw UsageError(std::string("--engine gloo has no -d ") + bw::name(t) +
                       " (Gloo has no unsigned 32/64-bit types); use int32/int64 or --engine mpi");
    }
  }

  size_t buffer_budget() const override { return host_buffer_budget(available_host_memory(), local_ranks_); }

  void allocate(size_t bytes) override {
    send_ = torch::zeros({static_cast<int64_t>(bytes)}, torch::kUInt8);
    recv_ = torch::zeros({static_cast<int64_t>(bytes)}, torch::kUInt8);
  }

  void write(BufferId id, size_t offset, const void* src, size_t bytes) override {
    std::memcpy(static_cast<char*>(buffer(id).data_ptr()) + offset, src, bytes);
  }
  void read(BufferId id, size_t offset, void* dst, size_t bytes) override {
    std::memcpy(dst, static_cast<const char*>(buffer(id).data_ptr()) + offset, bytes);
  }

  void launch(const OpCall& c) override {
    at::Tensor in = c.in_place ? view(recv_, c.in_offset, input_count(c), c.type) : view(send_, 0, input_count(c), c.type);
    at::Tensor out = c.in_place ? view(recv_, c.out_offset, output_count(c), c.type) : view(recv_, 0, output_count(c), c.type);
    switch (c.collective) {
      case Collective::AllReduce:
        if (!c.in_place) out.copy_(in);
        all_reduce(group_, out, ddx_op(c.op)).wait();
        break;
      case Collective::AllGather:
        all_gather(group_, out, in).wait();
        break;
      case Collective::ReduceScatter:
        reduce_scatter(group_, out, in, ddx_op(c.op)).wait();
        break;
      case Collective::Broadcast: {
        // Out of place the root sends straight from its input.
        at::Tensor buf = !c.in_place && rank() == c.root ? in : out;
        broadcast(group_, buf, c.root).wait();
        break;
      }
      case Collective::Reduce:
        if (!c.in_place) out.copy_(in);
        reduce(group_, out, c.root, ddx_op(c.op)).wait();
        break;
      case Collective::AllToAll:
        all_to_all(group_, out, in).wait();
        break;
      case Collective::SendRecv: {
        if (c.send_peer == rank() && c.recv_peer == rank()) {
          out.copy_(in);  // one rank: a ring of itself
          break;
        }
        Work s, r;
        if (c.recv_peer >= 0) r = recv(group_, out, c.recv_peer);
        if (c.send_peer >= 0) s = send(group_, in, c.send_peer);
        if (c.send_peer >= 0) s.wait();
        if (c.recv_peer >= 0) r.wait();
        break;
      }
    }
  }

  void wait_all() override {}
  void barrier() override { ddx::barrier(group_).wait(); }
  void iteration_begin(int i) override { clock_.begin(i); }
  void iteration_end(int i) override { clock_.end(i); }
  std::vector<double> iteration_seconds(int n) override { return clock_.seconds(n); }
  bool synchronous() const override { return true; }

 private:
  at::Tensor& buffer(BufferId id) { return id == BufferId::Send ? send_ : recv_; }

  // `count` elements of `type` starting `offset` elements into the byte buffer.
  static at::Tensor view(const at::Tensor& bytes, size_t offset, size_t count, DataType type) {
    const int64_t elt = static_cast<int64_t>(element_size(type));
    return bytes.narrow(0, static_cast<int64_t>(offset) * elt, static_cast<int64_t>(count) * elt)
        .view(torch_type(type));
  }

  size_t input_count(const OpCall& c) const {
    if (c.collective == Collective::ReduceScatter || c.collective == Collective::AllToAll) return c.count * size();
    return c.count;
  }
  size_t output_count(const OpCall& c) const {
    if (c.collective == Collective::AllGather || c.collective == Collective::AllToAll) return c.count * size();
    return c.count;
  }

  Group& group_;
  int local_ranks_;
  at::Tensor send_, recv_;
  HostIterationClock clock_;
};

}  // namespace

std::unique_ptr<Engine> make_gloo_engine(Group& group, int local_ranks) {
  return std::make_unique<GlooEngine>(group, local_ranks);
}

}  // namespace ddx::bw
