#pragma once
// Test-only perturbations of the collective layer, so tests can prove that checkers fail
// when results are wrong. Driven by the DDX_TEST_PERTURB environment variable, deliberately
// not a flag in any --help. Items separated by ';':
//   corrupt:<op>:<rank>        add 1 to element 0 of every <op> output on global rank <rank>
//   delay:<op>:<rank>:<ms>     sleep <ms> before launching every <op> on global rank <rank>
// <op> is a record name (all_reduce, all_gather, send, ...) or '*' for every op.
namespace ddx {

// Installs the hooks DDX_TEST_PERTURB asks for on this rank (none when unset). Throws
// UsageError naming DDX_TEST_PERTURB for a malformed value.
void install_test_perturbations(int global_rank);

}  // namespace ddx
