#!/usr/bin/env bash
# Builds ddx and runs every test: README's second command, and what CI (.ci/run) calls.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DDX_BUILD_DIR:-$root/build}"
jobs="${DDX_JOBS:-$(nproc)}"

bash "$root/ci/bootstrap.sh"

start=$(date +%s)
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# A compiler killed under memory pressure (two LibTorch translation units at once on a small
# machine) ends the build with no compiler message at all; one retry, one job at a time, tells
# that apart from a real compile error, which fails again with its message.
if ! cmake --build "$build" -j "$jobs"; then
  echo "ci: build failed; memory and disk now, then one retry with -j 1:"
  free -m || true
  df -h "$build" || true
  dmesg 2>/dev/null | grep -iE "out of memory|killed process" | tail -n 5 || true
  cmake --build "$build" -j 1
fi
echo "ci: build took $(( $(date +%s) - start )) s"

# Multi-rank tests start several processes each: run two tests at a time on 2 cores. Every
# label runs (unit, dist, parity, reference, faults); pass -L/-LE to pick.
cd "$build"
# As root (CI), tests that need namespaces must run: a refusal fails them instead of skipping
# (tests/dist/process_helpers.h, DDX_SKIP_IF_REFUSED), so a green run never hides one.
if [ "$(id -u)" = 0 ]; then export DDX_REQUIRE_PRIVILEGED_TESTS="${DDX_REQUIRE_PRIVILEGED_TESTS:-1}"; fi
status=0
ctest --output-on-failure --timeout 600 -j "${DDX_TEST_JOBS:-2}" "$@" || status=$?
# The parity suite's report belongs in the CI log whether it passed or not.
if [ -f "$build/parity-ci-output.txt" ]; then
  echo "ci: ddx parity report (from the parity test):"
  sed -n '/^strategy /,$p' "$build/parity-ci-output.txt"
fi
# So does the fault matrix's table (from the `faults` label's full run, the newest one).
matrix_table=$(ls -t "$build"/test-scratch/fault-matrix-ddp-*/out/table.txt 2>/dev/null | head -n 1 || true)
if [ -n "$matrix_table" ]; then
  echo "ci: ddx fault matrix table (from the faults test):"
  cat "$matrix_table"
fi
# The training step's parts on the debug model, one thread (benchmarks/train_step_bench.cpp):
# numbers in every commit's log so a slowdown shows; a few seconds, nothing asserted on them.
if [ -x "$build/bin/train_step_bench" ]; then
  echo "ci: train step benchmark (debug model, ms per call):"
  "$build/bin/train_step_bench" --benchmark_min_time=0.2 || status=$?
fi
exit $status
