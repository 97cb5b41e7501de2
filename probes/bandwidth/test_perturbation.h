#pragma once
// DDX_TEST_PERTURB for the engines that bypass the ddx collective layer (mpi, nccl), with the
// same grammar and meaning as ddx/test_perturbation.h, so tests can prove that #wrong counts a
// corrupted result and that pairwise mode finds a slow rank on every engine:
//   corrupt:<op>:<rank>      add 1 to element 0 of every <op> output on global rank <rank>
//   delay:<op>:<rank>:<ms>   sleep <ms> before launching every <op> on global rank <rank>
// <op> is a collective-layer record name (all_reduce, all_gather, reduce_scatter, broadcast,
// reduce, all_to_all, send, recv) or '*'. A sendrecv is a send (delay) and a recv (corrupt).
// Never a --help flag.
#include <string>
#include <vector>

#include "bandwidth/types.h"

namespace ddx::bw {

class TestPerturbation {
 public:
  // Parses DDX_TEST_PERTURB for this rank (nothing when unset). Throws UsageError naming the
  // variable when malformed.
  static TestPerturbation from_env(int rank);
  static TestPerturbation parse(const std::string& spec, int rank);

  bool empty() const { return items_.empty(); }
  // Whether after_complete would change the output of this op: engines whose results live on
  // a device copy them to the host only then, so a delay-only spec leaves timing untouched.
  bool corrupts(Collective c) const;
  // Sleeps when a delay matches the op about to launch.
  void before_launch(Collective c) const;
  // Adds 1 to element 0 of `output` when a corruption matches.
  void after_complete(Collective c, DataType t, void* output, size_t count) const;

 private:
  struct Item {
    bool corrupt = false;
    std::string op;
    int delay_ms = 0;
  };
  std::vector<Item> items_;
};

// The collective-layer record name of the op, as the perturbation grammar spells it.
const char* record_name(Collective c, bool send_side);

}  // namespace ddx::bw
