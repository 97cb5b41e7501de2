// `ddx probe memory`: memory bandwidth on every rank, STREAM's way (McCalpin): copy (b = a,
// 2 arrays moved) and triad (a = b + s*c, 3 arrays moved) over arrays far larger than the
// caches, as GB/s. On a GPU the same kernels run in device memory, plus host-to-device and
// device-to-host copies from pinned host memory (the PCIe or C2C link of that GPU).
#include <torch/torch.h>

#include <memory>

#include "ddx/text/byte_sizes.h"
#include "node/node_probe_commands.h"
#include "node/rank_probe.h"

namespace ddx::node {
namespace {

Kernel stream_copy(std::shared_ptr<torch::Tensor> a, std::shared_ptr<torch::Tensor> b, const std::string& where) {
  Kernel k;
  k.metric = {where + "_copy", where + " copy", "GB/s"};
  k.work = 2.0 * static_cast<double>(a->nbytes());
  k.scale = 1e9;
  k.run = [a, b]() { b->copy_(*a); };
  return k;
}

Kernel stream_triad(std::shared_ptr<torch::Tensor> a, std::shared_ptr<torch::Tensor> b,
                    std::shared_ptr<torch::Tensor> c, const std::string& where) {
  Kernel k;
  k.metric = {where + "_triad", where + " triad", "GB/s"};
  k.work = 3.0 * static_cast<double>(a->nbytes());
  k.scale = 1e9;
  k.run = [a, b, c]() { torch::add_out(*a, *b, *c, 3.0); };
  return k;
}

Kernel transfer(std::shared_ptr<torch::Tensor> from, std::shared_ptr<torch::Tensor> to, const std::string& name) {
  Kernel k;
  k.metric = {name, name == "host_to_device" ? "host->device" : "device->host", "GB/s"};
  k.work = static_cast<double>(from->nbytes());
  k.scale = 1e9;
  k.run = [from, to]() { to->copy_(*from, /*non_blocking=*/true); };
  return k;
}

}  // namespace

std::vector<Kernel> memory_kernels(const Placement& where, size_t array_bytes) {
  const int64_t elements = static_cast<int64_t>(array_bytes / sizeof(double));
  auto host = torch::TensorOptions().dtype(torch::kFloat64);
  std::vector<Kernel> kernels;
  if (!where.cuda) {
    auto a = std::make_shared<torch::Tensor>(torch::rand({elements}, host));
    auto b = std::make_shared<torch::Tensor>(torch::rand({elements}, host));
    auto c = std::make_shared<torch::Tensor>(torch::rand({elements}, host));
    kernels.push_back(stream_copy(a, b, "host"));
    kernels.push_back(stream_triad(a, b, c, "host"));
    return kernels;
  }
  auto device = host.device(torch::Device(torch::kCUDA, where.device_index));
  auto a = std::make_shared<torch::Tensor>(torch::rand({elements}, device));
  auto b = std::make_shared<torch::Tensor>(torch::rand({elements}, device));
  auto c = std::make_shared<torch::Tensor>(torch::rand({elements}, device));
  auto pinned = std::make_shared<torch::Tensor>(torch::rand({elements}, host).pin_memory());
  kernels.push_back(stream_copy(a, b, "device"));
  kernels.push_back(stream_triad(a, b, c, "device"));
  kernels.push_back(transfer(pinned, a, "host_to_device"));
  kernels.push_back(transfer(a, pinned, "device_to_host"));
  return kernels;
}

}  // namespace ddx::node

namespace ddx::cli {
namespace {

struct MemoryFlags {
  std::string array_bytes = "64M";  // per array; STREAM asks for 4x the last-level cache
};

}  // namespace

Subcommand add_memory_command(CLI::App& probe) {
  auto f = std::make_shared<MemoryFlags>();
  return node::add_rank_probe_command(
      probe, "memory",
      "Memory bandwidth on every rank, STREAM copy and triad (host memory on CPU; device memory and "
      "host<->device copies on GPU), repeated trials, per rank and per host; names a rank or host well below "
      "its peers. Exit 1 when one is named.",
      [f](CLI::App& cmd) {
        cmd.add_option("--array-bytes", f->array_bytes, "Bytes per array (K/M/G); STREAM wants 4x the last-level cache")
            ->capture_default_str()
            ->check([](const std::string& text) -> std::string {
              try {
                return ddx::parse_bytes("--array-bytes", text) < 1024 ? "at least 1K" : "";
              } catch (const std::exception& e) {
                return e.what();
              }
            });
      },
      [f](const node::Placement& where) { return node::memory_kernels(where, ddx::parse_bytes("--array-bytes", f->array_bytes)); });
}

}  // namespace ddx::cli
