#!/usr/bin/env bash
# README's first command: install, build the ddx binary, and run ddx's main job on its embedded
# default: a 4-rank job on this machine that checks every collective and prints the report.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DDX_BUILD_DIR:-$root/build}"

bash "$root/ci/bootstrap.sh"
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target ddx
exec "$build/bin/ddx" launch --nproc-per-node 4 -- "$build/bin/ddx" probe selfcheck "$@"
