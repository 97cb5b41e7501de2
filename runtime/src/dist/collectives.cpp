// The ops of the collective layer. Each validates its tensors, fills the op's record and hands
// a launcher to detail::launch. Gloo gaps are filled here: AVG is SUM plus a local division,
// reduce-scatter is an all-to-all plus a local reduction, all-gather is the list form over views.
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <stdexcept>

#include "collective_layer.h"

namespace ddx {
namespace {

using detail::LaunchSpec;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

void check_tensor(const at::Tensor& t, const char* op, const char* name) {
  require(t.defined(), std::string(op) + ": " + name + " is undefined");
  require(t.is_contiguous(), std::string(op) + ": " + name + " must be contiguous");
}

void check_rank(const Group& g, int rank, const char* op, const char* what) {
  require(rank >= 0 && rank < g.size(), std::string(op) + ": " + what + " " +
                                            std::to_string(rank) + " is outside group " +
                                            g.name() + " of size " + std::to_string(g.size()));
}

bool native_avg(const Group& g, c10::DeviceType device) {
  return g.backend_name(device) == "nccl";
}

c10d::ReduceOp c10d_op(ReduceOp op, bool avg_is_native) {
  switch (op) {
    case ReduceOp::Sum: return c10d::ReduceOp::SUM;
    case ReduceOp::Avg: return avg_is_native ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM;
    case ReduceOp::Max: return c10d::ReduceOp::MAX;
    case ReduceOp::Min: return c10d::ReduceOp::MIN;
    case ReduceOp::Product: return c10d::ReduceOp::PRODUCT;
  }
  return c10d::ReduceOp::SUM;
}

void check_avg(ReduceOp op, const at::Tensor& t, const char* name) {
  require(op != ReduceOp::Avg || at::isFloatingType(t.scalar_type()),
          std::string(name) + ": avg needs a floating-point tensor, got " +
              dtype_name(t.scalar_type()));
}

std::vector<int64_t> shape_of(const at::Tensor& t) { return t.sizes().vec(); }

OpRecord make_record(OpType op, const at::Tensor& in, const at::Tensor& out) {
  OpRecord r;
  r.op = op;
  r.dtype = dtype_name(in.scalar_type());
  r.in_shape = shape_of(in);
  r.out_shape = shape_of(out);
  r.numel = in.numel();
  r.bytes = in.numel() * static_cast<int64_t>(in.element_size());
  return r;
}

// Reduces the `parts` equal blocks of `blocks` (flat) into `out`, in block order, so every
// rank gets the same rounding.
void reduce_blocks(at::Tensor& out, const at::Tensor& blocks, int parts, ReduceOp op) {
  at::Tensor flat_out = out.view({-1});
  const int64_t n = flat_out.numel();
  at::Tensor rows = blocks.view({parts, n});
  flat_out.copy_(rows[0]);
  for (int j = 1; j < parts; ++j) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: flat_out.add_(rows[j]); break;
      case ReduceOp::Max: at::maximum_out(flat_out, flat_out, rows[j]); break;
      case ReduceOp::Min: at::minimum_out(flat_out, flat_out, rows[j]); break;
      case ReduceOp::Product: flat_out.mul_(rows[j]); break;
    }
  }
  if (op == ReduceOp::Avg) flat_out.div_(parts);
}

}  // namespace

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Product: return "product";
  }
  return "unknown";
}

std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Bool: return "bool";
    default: return c10::toString(type);
  }
}

Work all_reduce(Group& g, at::Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "tensor");
  check_avg(op, tensor, "all_reduce");
  const auto device = tensor.device().type();
  const bool avg_native = native_avg(g, device);
  LaunchSpec s;
  s.record = make_record(OpType::AllReduce, tensor, tensor);
  s.record.reduce_op = to_string(op);
  s.device = device;
  s.inputs = {tensor};
  s.outputs = {tensor};
  s.start = [&g, tensor, op, device, avg_native]() {
    std::vector<at::Tensor> v{tensor};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d_op(op, avg_native);
    o.timeout = g.timeout();
    return g.backend(device).allreduce(v, o);
  };
  if (op == ReduceOp::Avg && !avg_native) {
    const int n = g.size();
    s.finish = [tensor, n]() mutable { tensor.div_(n); };
  }
  return detail::launch(g, std::move(s));
}

Work broadcast(Group& g, at::Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "tensor");
  check_rank(g, root, "broadcast", "root");
  const auto device = tensor.device().type();
  LaunchSpec s;
  s.record = make_record(OpType::Broadcast, tensor, tensor);
  s.record.peer = root;
  s.device = device;
  s.inputs = {tensor};
  s.outputs = {tensor};
  s.start = [&g, tensor, root, device]() {
    std::vector<at::Tensor> v{tensor};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.rootTensor = 0;
    o.timeout = g.timeout();
    return g.backend(device).broadcast(v, o);
  };
  return detail::launch(g, std::move(s));
}

Work reduce(Group& g, at::Tensor& tensor, int root, ReduceOp op) {
  check_tensor(tensor, "reduce", "tensor");
  check_rank(g, root, "reduce", "root");
  check_avg(op, tensor, "reduce");
  const auto device = tensor.device().type();
  const bool avg_native = native_avg(g, device);
  LaunchSpec s;
  s.record = make_record(OpType::Reduce, tensor, tensor);
  s.record.reduce_op = to_string(op);
  s.record.peer = root;
  s.device = device;
  s.inputs = {tensor};
  s.outputs = {tensor};
  s.start = [&g, tensor, root, op, device, avg_native]() {
    std::vector<at::Tensor> v{tensor};
    c10d::ReduceOptions o;
    o.reduceOp = c10d_op(op, avg_native);
    o.rootRank = root;
    o.rootTensor = 0;
    o.timeout = g.timeout();
    return g.backend(device).reduce(v, o);
  };
  if (op == ReduceOp::Avg && !avg_native && g.rank() == root) {
    const int n = g.size();
    s.finish = [tensor, n]() mutable { tensor.div_(n); };
  }
  return detail::launch(g, std::move(s));
}

Work all_gather(Group& g, at::Tensor& output, const at::Tensor& input) {
  check_tensor(output, "all_gather", "output");
  check_tensor(input, "all_gather", "input");
  require(output.numel() == input.numel() * g.size() &&
              output.scalar_type() == input.scalar_type() && output.device() == input.device(),
          "all_gather: output must hold group size (" + std::to_string(g.size()) +
              ") x input elements of the same dtype and device");
  const auto device = input.device().type();
  LaunchSpec s;
  s.record = make_record(OpType::AllGather, input, output);
  s.device = device;
  s.inputs = {input};
  s.outputs = {output};
  if (g.backend_name(device) == "nccl") {
    s.start = [&g, output, input, device]() mutable {
      at::Tensor in = input;
      c10d::AllgatherOptions o;
      o.timeout = g.timeout();
      return g.backend(device)._allgather_base(output, in, o);
    };
  } else {
    // Gloo: the list form, writing straight into views of the flat output.
    s.start = [&g, output, input, device]() {
      const int64_t n = input.numel();
      std::vector<std::vector<at::Tensor>> outs(1);
      at::Tensor flat = output.view({-1});
      for (int r = 0; r < g.size(); ++r) outs[0].push_back(flat.narrow(0, r * n, n).view(input.sizes()));
      std::vector<at::Tensor> ins{input};
      c10d::AllgatherOptions o;
      o.timeout = g.timeout();
      return g.backend(device).allgather(outs, ins, o);
    };
  }
  return detail::launch(g, std::move(s));
}

Work reduce_scatter(Group& g, at::Tensor& output, const at::Tensor& input, ReduceOp op) {
  check_tensor(output, "reduce_scatter", "output");
  check_tensor(input, "reduce_scatter", "input");
  check_avg(op, input, "reduce_scatter");
  require(input.numel() == output.numel() * g.size() &&
              output.scalar_type() == input.scalar_type() && output.device() == input.device(),
          "reduce_scatter: input must hold group size (" + std::to_string(g.size()) +
              ") x output elements of the same dtype and device");
  const auto device = input.device().type();
  LaunchSpec s;
  s.record = make_record(OpType::ReduceScatter, input, output);
  s.record.reduce_op = to_string(op);
  s.device = device;
  s.inputs = {input};
  s.outputs = {output};
  if (g.backend_name(device) == "nccl") {
    s.start = [&g, output, input, op, device]() mutable {
      at::Tensor in = input;
      c10d::ReduceScatterOptions o;
      o.reduceOp = c10d_op(op, /*avg_is_native=*/true);
      o.timeout = g.timeout();
      return g.backend(device)._reduce_scatter_base(output, in, o);
    };
  } else {
    // Gloo has no reduce-scatter: all-to-all the blocks (block r of every rank lands on rank
    // r), then reduce them locally. The fastest Gloo form measured (libtorch-c10d.md §10).
    at::Tensor blocks = at::empty_like(input);
    const int parts = g.size();
    s.start = [&g, blocks, input, device]() mutable {
      at::Tensor in = input;
      std::vector<int64_t> equal;
      std::vector<int64_t> equal_in;
      c10d::AllToAllOptions o;
      o.timeout = g.timeout();
      return g.backend(device).alltoall_base(blocks, in, equal, equal_in, o);
    };
    s.finish = [output, blocks, parts, op]() mutable { reduce_blocks(output, blocks, parts, op); };
  }
  return detail::launch(g, std::move(s));
}

Work all_to_all(Group& g, at::Tensor& output, const at::Tensor& input,
                std::vector<int64_t> output_splits, std::vector<int64_t> input_splits) {
  check_tensor(output, "all_to_all", "output");
  check_tensor(input, "all_to_all", "input");
  const auto size = static_cast<size_t>(g.size());
  require(output_splits.empty() || output_splits.size() == size,
          "all_to_all: output_splits needs one entry per rank");
  require(input_splits.empty() || input_splits.size() == size,
          "all_to_all: input_splits needs one entry per rank");
  const auto device = input.device().type();
  LaunchSpec s;
  s.record = make_record(OpType::AllToAll, input, output);
  s.device = device;
  s.inputs = {input};
  s.outputs = {output};
  s.start = [&g, output, input, output_splits, input_splits, device]() mutable {
    at::Tensor out = output, in = input;
    c10d::AllToAllOptions o;
    o.timeout = g.timeout();
    return g.backend(device).alltoall_base(out, in, output_splits, input_splits, o);
  };
  return detail::launch(g, std::move(s));
}

Work send(Group& g, const at::Tensor& tensor, int dst, int tag) {
  check_tensor(tensor, "send", "tensor");
  check_rank(g, dst, "send", "destination");
  require(dst != g.rank(), "send: a rank cannot send to itself");
  const auto device = tensor.device().type();
  LaunchSpec s;
  s.record = make_record(OpType::Send, tensor, tensor);
  s.record.p2p = true;
  s.record.peer = dst;
  s.device = device;
  s.inputs = {tensor};
  s.start = [&g, tensor, dst, tag, device]() {
    std::vector<at::Tensor> v{tensor};
    return g.backend(device).send(v, dst, tag);
  };
  return detail::launch(g, std::move(s));
}

Work recv(Group& g, at::Tensor& tensor, int src, int tag) {
  check_tensor(tensor, "recv", "tensor");
  check_rank(g, src, "recv", "source");
  require(src != g.rank(), "recv: a rank cannot receive from itself");
  const auto device = tensor.device().type();
  LaunchSpec s;
  s.record = make_record(OpType::Recv, tensor, tensor);
  s.record.p2p = true;
  s.record.peer = src;
  s.device = device;
  s.outputs = {tensor};
  s.start = [&g, tensor, src, tag, device]() {
    std::vector<at::Tensor> v{tensor};
    return g.backend(device).recv(v, src, tag);
  };
  return detail::launch(g, std::move(s));
}

Work barrier(Group& g) {
  LaunchSpec s;
  s.record.op = OpType::Barrier;
  s.record.dtype = "none";
  s.device = c10::DeviceType::CPU;
  s.start = [&g]() {
    c10d::BarrierOptions o;
    o.timeout = g.timeout();
    return g.backend(c10::DeviceType::CPU).barrier(o);
  };
  return detail::launch(g, std::move(s));
}

void monitored_barrier(Group& g, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  OpRecord r;
  r.op = OpType::MonitoredBarrier;
  r.dtype = "none";
  detail::run_blocking(g, r, [&]() {
    c10d::BarrierOptions o;
    o.timeout = timeout;
    g.backend(c10::DeviceType::CPU).monitoredBarrier(o, wait_all_ranks);
  });
}

}  // namespace ddx
