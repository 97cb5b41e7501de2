// The checks: for each op, inputs from a formula and the exact expected output. Values are
// small integers ((7i + 3r) mod 13 + 1), so sums over up to 16 ranks are exact even in bfloat16.
#include <torch/torch.h>

#include <chrono>
#include <functional>

#include "ddx/collectives.h"
#include "selfcheck.h"

namespace ddx::probes {
namespace {

c10::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32") return torch::kFloat32;
  if (name == "float64") return torch::kFloat64;
  if (name == "float16") return torch::kFloat16;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "int32") return torch::kInt32;
  if (name == "int64") return torch::kInt64;
  if (name == "int8") return torch::kInt8;
  if (name == "uint8") return torch::kUInt8;
  throw std::invalid_argument("unknown dtype " + name);
}

// The value rank `rank` contributes at element `offset + i`, i in [0, n), as int64.
torch::Tensor pattern(int rank, int64_t offset, int64_t n) {
  auto i = torch::arange(offset, offset + n, torch::kInt64);
  return (i * 7 + rank * 3) % 13 + 1;
}

struct Context {
  Group& group;
  c10::ScalarType dtype;
  torch::Device device;
  int64_t n;
};

torch::Tensor on_device(const Context& c, const torch::Tensor& t) {
  return t.to(c.device, c.dtype).contiguous();
}

// Compares `got` with `expected` (both any device/dtype) exactly, into `r`.
void compare(const torch::Tensor& got, const torch::Tensor& expected, CheckResult& r) {
  auto g = got.to(torch::kCPU).to(torch::kFloat64).view({-1});
  auto e = expected.to(torch::kCPU).to(torch::kFloat64).view({-1});
  auto bad = g.ne(e);
  r.wrong = bad.sum().item<int64_t>();
  if (r.wrong > 0) {
    r.first_offset = bad.nonzero()[0][0].item<int64_t>();
    r.got = g[r.first_offset].item<double>();
    r.expected = e[r.first_offset].item<double>();
  }
}

torch::Tensor sum_over_ranks(int world, int64_t offset, int64_t n) {
  auto s = torch::zeros({n}, torch::kInt64);
  for (int q = 0; q < world; ++q) s += pattern(q, offset, n);
  return s;
}

void check_all_reduce(const Context& c, ReduceOp op, CheckResult& r) {
  const int W = c.group.size();
  auto t = on_device(c, pattern(c.group.rank(), 0, c.n));
  all_reduce(c.group, t, op).wait();
  torch::Tensor expected;
  switch (op) {
    case ReduceOp::Max:
    case ReduceOp::Min: {
      expected = pattern(0, 0, c.n);
      for (int q = 1; q < W; ++q) {
        expected = op == ReduceOp::Max ? torch::maximum(expected, pattern(q, 0, c.n))
                                       : torch::minimum(expected, pattern(q, 0, c.n));
      }
      break;
    }
    case ReduceOp::Avg:
      // The exact sum in the dtype, divided in the dtype: what a correct average must give.
      expected = sum_over_ranks(W, 0, c.n).to(c.dtype).div(W);
      break;
    default: expected = sum_over_ranks(W, 0, c.n);
  }
  compare(t, expected, r);
}

void check_broadcast(const Context& c, int root, CheckResult& r) {
  auto t = on_device(c, c.group.rank() == root ? pattern(root, 0, c.n) : torch::zeros({c.n}));
  broadcast(c.group, t, root).wait();
  compare(t, pattern(root, 0, c.n), r);
}

void check_reduce(const Context& c, int root, CheckResult& r) {
  auto t = on_device(c, pattern(c.group.rank(), 0, c.n));
  reduce(c.group, t, root, ReduceOp::Sum).wait();
  if (c.group.rank() == root) compare(t, sum_over_ranks(c.group.size(), 0, c.n), r);
}

void check_all_gather(const Context& c, CheckResult& r) {
  const int W = c.group.size();
  auto in = on_device(c, pattern(c.group.rank(), 0, c.n));
  auto out = on_device(c, torch::zeros({c.n * W}));
  all_gather(c.group, out, in).wait();
  std::vector<torch::Tensor> blocks;
  for (int q = 0; q < W; ++q) blocks.push_back(pattern(q, 0, c.n));
  compare(out, torch::cat(blocks), r);
}

void check_reduce_scatter(const Context& c, CheckResult& r) {
  const int W = c.group.size();
  auto in = on_device(c, pattern(c.group.rank(), 0, c.n * W));
  auto out = on_device(c, torch::zeros({c.n}));
  reduce_scatter(c.group, out, in, ReduceOp::Sum).wait();
  compare(out, sum_over_ranks(W, c.group.rank() * c.n, c.n), r);
}

// Elements rank `from` sends to rank `to` in the uneven all-to-all.
int64_t uneven_count(int64_t base, int from, int to, int world) {
  return base + (from * world + to) % 3;
}

void check_all_to_all(const Context& c, bool uneven, CheckResult& r) {
  const int W = c.group.size();
  const int me = c.group.rank();
  std::vector<int64_t> in_splits, out_splits;
  int64_t in_total = 0, out_total = 0;
  for (int j = 0; j < W; ++j) {
    in_splits.push_back(uneven ? uneven_count(c.n, me, j, W) : c.n);
    out_splits.push_back(uneven ? uneven_count(c.n, j, me, W) : c.n);
    in_total += in_splits.back();
    out_total += out_splits.back();
  }
  auto in = on_device(c, pattern(me, 0, in_total));
  auto out = on_device(c, torch::zeros({out_total}));
  if (uneven) {
    all_to_all(c.group, out, in, out_splits, in_splits).wait();
  } else {
    all_to_all(c.group, out, in).wait();
  }
  // Block q of my output is the block rank q addressed to me: it starts at the sum of what
  // q sent to ranks before me.
  std::vector<torch::Tensor> expected;
  for (int q = 0; q < W; ++q) {
    int64_t offset = 0;
    for (int j = 0; j < me; ++j) offset += uneven ? uneven_count(c.n, q, j, W) : c.n;
    expected.push_back(pattern(q, offset, out_splits[q]));
  }
  compare(out, torch::cat(expected), r);
}

void check_send_recv_ring(const Context& c, CheckResult& r) {
  const int W = c.group.size();
  const int me = c.group.rank();
  const int next = (me + 1) % W, prev = (me + W - 1) % W;
  auto mine = on_device(c, pattern(me, 0, c.n));
  auto got = on_device(c, torch::zeros({c.n}));
  Work rx = recv(c.group, got, prev);
  Work tx = send(c.group, mine, next);
  tx.wait();
  rx.wait();
  compare(got, pattern(prev, 0, c.n), r);
}

bool is_float(c10::ScalarType t) { return c10::isFloatingType(t); }

}  // namespace

std::vector<CheckResult> run_checks(Group& group, const SelfcheckOptions& options) {
  const bool cuda = options.device == "cuda";
  const torch::Device device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  std::vector<CheckResult> results;

  // Runs one check; returns false when it threw (the group is then unusable).
  auto run = [&](const std::string& op, const std::string& dtype, int64_t n, int root,
                 const std::function<void(CheckResult&)>& body) {
    CheckResult r;
    r.op = op;
    r.dtype = dtype;
    r.size = n;
    r.root = root;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      body(r);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    results.push_back(r);
    return r.error.empty();
  };

  const int W = group.size();
  for (const std::string& dtype_text : options.dtypes) {
    const c10::ScalarType dtype = parse_dtype(dtype_text);
    for (int64_t n : options.sizes) {
      Context c{group, dtype, device, n};
      bool ok = run("all_reduce.sum", dtype_text, n, -1, [&](CheckResult& r) { check_all_reduce(c, ReduceOp::Sum, r); }) &&
                run("all_reduce.max", dtype_text, n, -1, [&](CheckResult& r) { check_all_reduce(c, ReduceOp::Max, r); }) &&
                run("all_reduce.min", dtype_text, n, -1, [&](CheckResult& r) { check_all_reduce(c, ReduceOp::Min, r); }) &&
                (!is_float(dtype) ||
                 run("all_reduce.avg", dtype_text, n, -1, [&](CheckResult& r) { check_all_reduce(c, ReduceOp::Avg, r); }));
      for (int root = 0; ok && root < W; ++root) {
        ok = run("broadcast", dtype_text, n, root, [&](CheckResult& r) { check_broadcast(c, root, r); }) &&
             run("reduce.sum", dtype_text, n, root, [&](CheckResult& r) { check_reduce(c, root, r); });
      }
      ok = ok &&
           run("all_gather", dtype_text, n, -1, [&](CheckResult& r) { check_all_gather(c, r); }) &&
           run("reduce_scatter.sum", dtype_text, n, -1, [&](CheckResult& r) { check_reduce_scatter(c, r); }) &&
           run("all_to_all", dtype_text, n, -1, [&](CheckResult& r) { check_all_to_all(c, false, r); }) &&
           run("all_to_all.uneven", dtype_text, n, -1, [&](CheckResult& r) { check_all_to_all(c, true, r); }) &&
           (W < 2 || run("send_recv.ring", dtype_text, n, -1, [&](CheckResult& r) { check_send_recv_ring(c, r); }));
      if (!ok) return results;
    }
  }
  if (!run("barrier", "none", 0, -1, [&](CheckResult&) { barrier(group).wait(); })) return results;
  // Always on Gloo: the liveness probe that names missing ranks.
  run("monitored_barrier", "none", 0, -1,
      [&](CheckResult&) { monitored_barrier(group, group.timeout()); });
  return results;
}

}  // namespace ddx::probes
