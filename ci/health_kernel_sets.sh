#!/usr/bin/env bash
# `ddx health --level 2 --device cpu` end to end under each of the CPU's kernel sets (docs/health.md):
# the known-answer GEMM must be exact under every one. A CPU GEMM goes through one of three
# libraries, each picking its kernels by its own switch: ATen's own kernels (ATEN_CPU_CAPABILITY),
# MKL's sgemm/dgemm for fp32 and fp64 (MKL_ENABLE_INSTRUCTIONS) and oneDNN's matmul for bf16 and
# fp16 (ONEDNN_MAX_CPU_ISA). Each run is asked which kernels it really used: the rows name ATen's,
# MKL_VERBOSE prints MKL's ISA and ONEDNN_VERBOSE oneDNN's matmul implementations. One line per
# setting, then one per GEMM row.
#   bash ci/health_kernel_sets.sh [OUT]   (DDX_BIN: the ddx binary; OUT: the runs' files, default a temp folder)
# Exit 0 every GEMM exact under every setting, 1 not, 2 usage.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ddx="${DDX_BIN:-$root/build/bin/ddx}"
[ -x "$ddx" ] || { echo "health_kernel_sets: no ddx binary at $ddx (build first, or set DDX_BIN)" >&2; exit 2; }
out="${1:-$(mktemp -d -t ddx-health-kernel-sets.XXXXXX)}"
mkdir -p "$out" || exit 2

settings=("native"
          "ATEN_CPU_CAPABILITY=default" "ATEN_CPU_CAPABILITY=avx2"
          "MKL_ENABLE_INSTRUCTIONS=AVX2" "MKL_ENABLE_INSTRUCTIONS=AVX512"
          "ONEDNN_MAX_CPU_ISA=AVX2"
          "ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41")
inexact=0
for setting in "${settings[@]}"; do
  name=$(tr ' =' '_-' <<<"$setting")
  vars=()
  [ "$setting" = native ] || read -r -a vars <<<"$setting"
  # Native: none of the switches, whatever this shell has.
  env -u ATEN_CPU_CAPABILITY -u MKL_ENABLE_INSTRUCTIONS -u ONEDNN_MAX_CPU_ISA MKL_VERBOSE=1 ONEDNN_VERBOSE=1 "${vars[@]}" \
    timeout 120 "$ddx" health --level 2 --device cpu --json "$out/$name.json" > "$out/$name.log" 2>&1
  rc=$?
  mkl=$(grep -m 1 -oE 'for Intel\(R\) 64 architecture .*(enabled processors|instructions)' "$out/$name.log" | sed 's/for Intel(R) 64 architecture //')
  # oneDNN's matmul implementations that ran (brg_matmul:avx512_core_amx, ...); none: ATen's own kernels did it.
  dnn=$(grep -oE 'primitive,exec,cpu,matmul,[^,]+' "$out/$name.log" | sed 's/.*matmul,//' | sort -u | paste -sd ' ')
  echo "health_kernel_sets: $setting: exit $rc; MKL: ${mkl:-not used}; oneDNN matmul: ${dnn:-not used}"
  if ! python3 - "$out/$name.json" "$setting" <<'PY'
import json, sys
path, setting = sys.argv[1:3]
try:
    rows = [c for c in json.load(open(path))["checks"] if c["name"].startswith("gemm ")]
except (OSError, ValueError, KeyError) as e:
    sys.exit(print(f"health_kernel_sets: {setting}: no report ({e})") or 1)
bad = 0
for c in rows:
    exact = c["state"] == "OK" and c["value"].startswith("exact")
    bad += not exact
    print(f"health_kernel_sets:   {'exact ' if exact else 'WRONG '} {c['name']:14s} {c['state']:8s} {c['value']}")
sys.exit(1 if bad or not rows else 0)
PY
  then inexact=$((inexact + 1)); fi
done
echo "health_kernel_sets: $(( ${#settings[@]} - inexact )) of ${#settings[@]} settings exact in every GEMM; runs in $out"
[ "$inexact" -eq 0 ]
