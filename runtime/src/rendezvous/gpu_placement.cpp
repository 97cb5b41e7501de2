#include "ddx/rendezvous/gpu_placement.h"

namespace ddx {

std::string shared_gpu_problem(int local_rank, int local_ranks, int devices) {
  if (devices <= 0 || local_ranks <= devices) return "";
  const int gpu = local_rank % devices;
  const std::string plural = devices == 1 ? " GPU is" : " GPUs are";
  return std::to_string(local_ranks) + " ranks on this host but only " + std::to_string(devices) + plural +
         " visible: local rank " + std::to_string(local_rank) + " would share GPU " + std::to_string(gpu) +
         ", and NCCL refuses two ranks on one GPU (\"Duplicate GPU detected\"); start at most " +
         std::to_string(devices) + " rank" + (devices == 1 ? "" : "s") +
         " per host, or make more GPUs visible (CUDA_VISIBLE_DEVICES)";
}

}  // namespace ddx
