#!/usr/bin/env bash
# Makes the folder a GPU machine needs to run ddx's GPU check (ci/gpu_check.sh; docs/gpu.md):
#   DIR/bin/ddx        the built ddx, stripped, its run path set to DIR/lib
#   DIR/lib/           every shared library ddx needs that neither the torch wheel (LibTorch,
#                      NCCL, the CUDA runtime) nor the C library brings: found with ldd, not listed
#                      by hand, so a new dependency is carried without anyone remembering it
#   DIR/gpu_check.sh   the check, and DIR/py/ the Python references it runs beside ddx
# The GPU machine's image has Python with the same torch 2.11.0+cu130 wheel as .venv, so the
# LibTorch, CUDA and NCCL that ddx was linked against here are there already.
#
#   bash ci/gpu_bundle.sh [DIR]      (DIR: out/gpu-bundle, git-ignored)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DDX_BUILD_DIR:-$root/build}"
dir="${1:-$root/out/gpu-bundle}"
venv="${DDX_VENV:-$root/.venv}"
limit_mib=64

die() { echo "gpu_bundle: $*" >&2; exit 2; }
[ -x "$build/bin/ddx" ] || die "no $build/bin/ddx: build ddx first (bash ci/test.sh, or cmake --build build --target ddx)"
[ -x "$venv/bin/python" ] || die "no virtualenv at $venv: run ci/bootstrap.sh first"
command -v patchelf >/dev/null || die "patchelf not found: run ci/bootstrap.sh (it installs patchelf)"
case "$dir" in /|"$root"|"$HOME") die "refusing to use $dir as the bundle folder";; esac

# The torch wheel's library folders, as the GPU machine's own python3 will find them: torch/lib
# and every nvidia/*/lib beside it (NCCL, the CUDA runtime, cuBLAS, ...).
wheel_libs=$("$venv/bin/python" - <<'PY'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join([os.path.join(os.path.dirname(torch.__file__), "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))))
PY
)
site_packages=$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')

# Start from an empty folder: a library left from an older bundle must not ride along unseen.
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/bin" "$tmp/lib" "$tmp/py"
trap 'rm -rf "$tmp"' EXIT

# What the C library's own package installs (the loader, libc, libm, ...) is never carried: it
# must match the machine's kernel interface and loader, and every Linux image has it.
libc_files=$(dpkg -L libc6 2>/dev/null | grep -E '\.so' || true)
carried=()
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  [ "$path" = "not" ] && { case "$name" in libcuda.so*|libnvidia-ml.so*) continue;; esac; die "ldd cannot resolve $name"; }
  real=$(readlink -f "$path")
  case "$real" in "$site_packages"/*) continue;; esac               # the torch wheel's
  if grep -qxF "$path" <<<"$libc_files" || grep -qxF "$real" <<<"$libc_files"; then continue; fi
  cp -L "$path" "$tmp/lib/$name"
  strip --strip-unneeded "$tmp/lib/$name" 2>/dev/null || true
  # A run path reaches only a file's own needs: each carried library finds its siblings here
  # (libmpich's hwloc and UCX), not the image's copies or none.
  patchelf --set-rpath '$ORIGIN' "$tmp/lib/$name"
  carried+=("$name")
done < <(LD_LIBRARY_PATH="$wheel_libs" ldd "$build/bin/ddx")

cp "$build/bin/ddx" "$tmp/bin/ddx"
strip --strip-unneeded "$tmp/bin/ddx"
# $ORIGIN/../lib first: the carried libraries win over the machine's, and the build machine's
# .venv paths recorded at link time are gone.
patchelf --set-rpath '$ORIGIN/../lib' "$tmp/bin/ddx"

cp "$root/ci/gpu_check.sh" "$tmp/gpu_check.sh"
cp "$root"/ci/gpu/*.py "$tmp/py/"
cp "$root/benchmarks/train_throughput.py" "$tmp/py/"
cp "$root"/benchmarks/python/*.py "$tmp/py/"
cp "$root"/tests/python/{fsdp2_reference,reference_training,reference_models}.py "$tmp/py/"
git -C "$root" rev-parse HEAD > "$tmp/commit" 2>/dev/null || echo unknown > "$tmp/commit"

rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
size_kib=$(du -sk "$dir" | cut -f1)
echo "gpu_bundle: $dir: ddx and ${#carried[@]} libraries (${carried[*]}), $((size_kib / 1024)) MiB (limit ${limit_mib} MiB)"
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu_bundle: $dir is over the ${limit_mib} MiB a device run can carry" >&2
  exit 1
fi
