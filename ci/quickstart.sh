#!/usr/bin/env bash
# README's first command: install, build the ddx binary, and run ddx's main job: a 4-rank
# validation of this machine (`ddx validate`: doctor, selfcheck, bandwidth, pairwise links,
# parity, a training burn-in), one PASS/FAIL line per stage and a report in ./validate-report/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DDX_BUILD_DIR:-$root/build}"

bash "$root/ci/bootstrap.sh"
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target ddx
exec "$build/bin/ddx" validate --np 4 "$@"
