// One process group: a Gloo backend always (CPU tensors, barriers), NCCL when CUDA is there.
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/cuda.h>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>

#include "ddx/text/log.h"
#include "ddx/rendezvous/net_interface.h"
#include "ddx/process_group.h"

namespace ddx {
namespace {

// Gloo's device on the interface net_interface.h chooses for this process.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  const InterfaceChoice& choice = gloo_interface_choice(master_addr);
  switch (choice.kind) {
    case InterfaceChoice::Kind::Loopback: return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    case InterfaceChoice::Kind::Hostname: return c10d::ProcessGroupGloo::createDefaultDevice();
    default: return c10d::ProcessGroupGloo::createDeviceForInterface(choice.interface);
  }
}

}  // namespace

Group::Group(std::string name, int rank, std::vector<int> global_ranks,
             c10::intrusive_ptr<c10d::Store> store, const ProcessGroupOptions& options,
             const std::string& master_addr)
    : name_(std::move(name)), rank_(rank), global_ranks_(std::move(global_ranks)),
      options_(options) {
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.collective_timeout);
  gloo_options->devices.push_back(gloo_device(master_addr));
  auto gloo_store = c10::make_intrusive<c10d::PrefixStore>("group/" + name_ + "/gloo", store);
  gloo_ = c10::make_intrusive<c10d::ProcessGroupGloo>(gloo_store, rank_, size(), gloo_options);
#ifdef USE_C10D_NCCL
  if (options.enable_nccl && torch::cuda::is_available()) {
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = options.collective_timeout;
    auto nccl_store = c10::make_intrusive<c10d::PrefixStore>("group/" + name_ + "/nccl", store);
    nccl_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(nccl_store, rank_, size(), nccl_options);
  }
#endif
  log::debug("group ", name_, ": rank ", rank_, "/", size(), nccl_ ? " (gloo + nccl)" : " (gloo)");
}

Group::~Group() { shutdown(); }

c10d::Backend& Group::backend(c10::DeviceType device) {
  if (device == c10::DeviceType::CPU) return *gloo_;
  if (device == c10::DeviceType::CUDA && nccl_) return *nccl_;
  throw std::invalid_argument("group " + name_ + " has no backend for " +
                              c10::DeviceTypeName(device, /*lower_case=*/true) +
                              " tensors (NCCL needs CUDA and a build with NCCL)");
}

std::string Group::backend_name(c10::DeviceType device) const {
  if (device == c10::DeviceType::CUDA && nccl_) return "nccl";
  return "gloo";
}

void Group::shutdown() {
  // A backend destroyed with work in flight blocks until the work times out (Gloo) or may hang
  // (NCCL). Abort and leak it instead: the process is going away.
  const bool busy = pending_->load() > 0;
  if (nccl_) {
    if (busy) {
      nccl_->abort();
      nccl_.release();
    } else {
      nccl_->shutdown();
      nccl_.reset();
    }
  }
  if (gloo_) {
    if (busy) {
      log::warn("group ", name_, ": ", pending_->load(),
                " operation(s) still pending at shutdown; abandoning the backend");
      gloo_->abort();
      gloo_.release();
    } else {
      gloo_.reset();
    }
  }
}

}  // namespace ddx
