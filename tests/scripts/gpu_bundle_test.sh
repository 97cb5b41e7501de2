#!/usr/bin/env bash
# The CPU side of the GPU check (ci/gpu_bundle.sh, ci/gpu_check.sh; docs/gpu.md), as CI can test it:
#  1. the bundle is made and is under 64 MiB;
#  2. its ddx starts with only the torch wheel's libraries (.venv's, what the GPU machine's image
#     has) and the carried ones: the dynamic loader's own record of every library it opened says
#     nothing else was loaded (the C library's package aside);
#  3. its check, on this machine without a GPU, finishes within 60 s, marks every GPU step SKIP
#     ("no GPU") and writes a valid results.json, and says SKIP (exit 3), never PASS;
#  4. the Python pieces the GPU steps run work here on CPU: the loss-curve comparison against
#     PyTorch (debug model), train_throughput.py's --json with the records made from it, and the
#     `ddx health` records (checks 11 and 12) from level 1 on the fake NVML's four GPUs and level 2
#     on the CPU, each judged PASS when healthy and FAIL with the fault named when not.
#   bash tests/scripts/gpu_bundle_test.sh BUILD_DIR [FAKE_NVML]   (FAKE_NVML: libfake_nvml.so, default BUILD_DIR/tests/)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: gpu_bundle_test.sh BUILD_DIR}" && pwd)"
py="$root/.venv/bin/python"
scratch="$build/test-scratch/gpu-bundle"
rm -rf "$scratch"
mkdir -p "$scratch"
passed=0 failed=0
ok() { echo "PASS: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

bundle="$scratch/bundle"
if DDX_BUILD_DIR="$build" bash "$root/ci/gpu_bundle.sh" "$bundle" > "$scratch/bundle.log" 2>&1; then
  ok "bundle made: $(tail -n 1 "$scratch/bundle.log")"
else
  bad "gpu_bundle.sh failed: $(tail -n 3 "$scratch/bundle.log")"
  echo "$passed passed, $failed failed"
  exit 1
fi
size_kib=$(du -sk "$bundle" | cut -f1)
[ "$size_kib" -le $((64 * 1024)) ] && ok "bundle is $((size_kib / 1024)) MiB" || bad "bundle is $((size_kib / 1024)) MiB, over 64"
for f in bin/ddx gpu_check.sh py/results.py py/train_throughput.py py/fsdp2_reference.py commit; do
  [ -e "$bundle/$f" ] || bad "bundle lacks $f"
done

# 2. Only the wheel's libraries on the path, no .venv run path in the binary.
wheel_libs=$("$py" -c 'import glob, os, torch; s = os.path.dirname(os.path.dirname(torch.__file__)); print(":".join([os.path.join(os.path.dirname(torch.__file__), "lib")] + sorted(glob.glob(os.path.join(s, "nvidia", "*", "lib")))))')
site=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
if readelf -d "$bundle/bin/ddx" | grep -E 'R(UN)?PATH' | grep -q '\.venv'; then
  bad "the bundle's ddx still has the build machine's .venv in its run path"
fi
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$wheel_libs" LD_DEBUG=libs LD_DEBUG_OUTPUT="$scratch/ld" \
  "$bundle/bin/ddx" version > "$scratch/version.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^nccl" "$scratch/version.log"; then
  ok "bundle's ddx version runs: $(grep -E '^(libtorch|nccl)' "$scratch/version.log" | tr -s ' ' | paste -sd ';')"
else
  bad "bundle's ddx version exit $rc: $(tail -n 2 "$scratch/version.log")"
fi
libc_files=$(dpkg -L libc6 | grep -E '\.so')
loaded=$(cat "$scratch"/ld.* 2>/dev/null | sed -n 's/.*calling init: //p' | sort -u)
[ -n "$loaded" ] || bad "the loader recorded no library (LD_DEBUG output missing)"
stray=""
for lib in $loaded; do
  real=$(readlink -f "$lib")
  case "$real" in "$bundle"/lib/*|"$site"/*) continue;; esac
  grep -qxF "$lib" <<<"$libc_files" || grep -qxF "$real" <<<"$libc_files" || stray="$stray $lib"
done
[ -z "$stray" ] && ok "every library loaded is the bundle's, the wheel's or the C library's ($(wc -w <<<"$loaded") in all)" ||
  bad "libraries from outside the bundle and the wheel:$stray"

# 3. The check without a GPU: within 60 s, every GPU step SKIP, a valid results.json, exit 3.
start=$(date +%s)
DDX_GPU_PYTHON="$py" timeout -k 5 60 bash "$bundle/gpu_check.sh" "$scratch/check" > "$scratch/check.log" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
[ $rc -eq 3 ] && ok "gpu_check.sh without a GPU: exit 3 (SKIP) in $took s" || bad "gpu_check.sh exit $rc in $took s (want 3): $(tail -n 3 "$scratch/check.log")"
if "$py" - "$scratch/check/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
checks = r["checks"]
gpu = [c for c in checks if c["check"][0].isdigit()]
assert r["verdict"] == "SKIP", r["verdict"]
assert len(gpu) == 12, [c["check"] for c in gpu]
assert all(c["status"] == "SKIP" and c["detail"] == "no GPU" for c in gpu), gpu
bundle = [c for c in checks if c["check"] == "bundle: ddx starts"]
assert bundle and bundle[0]["status"] == "PASS", bundle
assert r["environment"]["gpu"] is None and r["environment"]["torch"].startswith("2."), r["environment"]
PY
then ok "results.json: verdict SKIP, 12 GPU checks SKIP (no GPU), the bundle check PASS"; else bad "results.json is not as expected"; fi
grep -qE "^gpu_check: SKIP 12 health level 2 on the GPU: no GPU$" "$scratch/check.log" &&
  ok "the ddx health checks say SKIP (no GPU)" || bad "no 'SKIP 12 health level 2 on the GPU: no GPU' line"
[ -s "$scratch/check/results.md" ] && grep -q "| 3 compute vs torch.mm | SKIP |" "$scratch/check/results.md" &&
  ok "results.md has the table" || bad "results.md lacks the table"
out_before=$(ls "$scratch/check" | wc -l)
DDX_GPU_PYTHON="$py" timeout 30 bash "$bundle/gpu_check.sh" "$scratch/check" > "$scratch/again.log" 2>&1
rc=$?
[ $rc -eq 2 ] && [ "$(ls "$scratch/check" | wc -l)" = "$out_before" ] && ok "a second check into the same folder is refused (exit 2)" ||
  bad "a second check into a used folder: exit $rc (want 2, nothing touched)"

# 4. The GPU steps' Python on CPU (the bundle's ddx finds LibTorch as on the GPU machine).
export LD_LIBRARY_PATH="$wheel_libs"
if OMP_NUM_THREADS=1 timeout 180 "$py" "$bundle/py/curve_check.py" --ddx "$bundle/bin/ddx" --reference-dir "$bundle/py" \
     --device cpu --model debug --seq 32 --lr 3e-3 --out "$scratch/curve" > "$scratch/curve.log" 2>&1; then
  ok "curve_check.py on CPU: ddx and PyTorch agree: $(grep -v '^curve_check' "$scratch/curve.log" | tail -n 1)"
else
  bad "curve_check.py on CPU failed: $(tail -n 3 "$scratch/curve.log")"
fi
if timeout 180 "$py" "$bundle/py/train_throughput.py" --ddx "$bundle/bin/ddx" --model debug --steps 4 --warmup 1 \
     --rounds 1 --json "$scratch/train.json" > "$scratch/train.log" 2>&1 &&
   "$py" "$bundle/py/gpu_train_records.py" "$scratch/train.json" "$scratch" "7 train" > "$scratch/records.log" 2>&1 &&
   grep -q '"check": "7 train: tokens/s vs PyTorch eager"' "$scratch/checks.jsonl"; then
  ok "train_throughput.py --json and its records: $(head -n 1 "$scratch/records.log")"
else
  bad "train_throughput.py --json or gpu_train_records.py failed: $(tail -n 3 "$scratch/train.log" "$scratch/records.log")"
fi

# The ddx health records (checks 11 and 12): the fake NVML's four GPUs stand for the real ones, and a
# stand-in nvidia-smi lists them as NVML would (or five, one of which ddx then does not show).
health_records() {  # health_records NAME LEVEL GPUS_LISTED ENV... -- DDX_HEALTH_FLAGS...: records in $scratch/NAME
  local name="$1" level="$2" listed="$3" envs=() rc t0
  shift 3
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  mkdir -p "$scratch/$name/bin"
  printf '#!/bin/sh\nseq 0 %d\n' $((listed - 1)) > "$scratch/$name/bin/nvidia-smi"
  chmod +x "$scratch/$name/bin/nvidia-smi"
  t0=$(date +%s%N)
  env "${envs[@]}" timeout 120 "$bundle/bin/ddx" health --level "$level" --json "$scratch/$name/report.json" \
    --prometheus "$scratch/$name/report.prom" "$@" > "$scratch/$name/health.log" 2>&1
  rc=$?
  PATH="$scratch/$name/bin:$PATH" "$py" "$bundle/py/health_records.py" "$level" "$scratch/$name/report.json" \
    "$scratch/$name/report.prom" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" "$scratch/$name" "$name" \
    > "$scratch/$name/records.log" 2>&1
}
status_of() { grep -F "\"check\": \"$1\"" "$2/checks.jsonl" | "$py" -c 'import json, sys; print(json.loads(sys.stdin.readline())["status"])' 2>/dev/null; }
fake_nvml="${2:-$build/tests/libfake_nvml.so}"
[ -f "$fake_nvml" ] || bad "no fake NVML at $fake_nvml: build the fake_nvml target"
health_records l1-healthy 1 4 DDX_NVML_LIBRARY="$fake_nvml" FAKE_NVML_SCENARIO=healthy --
[ "$(status_of "l1-healthy: verdict" "$scratch/l1-healthy")" = PASS ] &&
  [ "$(status_of "l1-healthy: every GPU NVML lists" "$scratch/l1-healthy")" = PASS ] &&
  ok "health records, level 1 on 4 healthy GPUs: $(grep -m 1 'every GPU' "$scratch/l1-healthy/records.log")" ||
  bad "health records, level 1 on 4 healthy GPUs: $(cat "$scratch/l1-healthy/records.log")"
health_records l1-faults 1 4 DDX_NVML_LIBRARY="$fake_nvml" FAKE_NVML_SCENARIO=faults --
[ "$(status_of "l1-faults: verdict" "$scratch/l1-faults")" = FAIL ] &&
  grep -q "CRITICAL gpu0 retired pages" "$scratch/l1-faults/records.log" &&
  ok "health records, level 1 on the faulty GPUs: verdict FAIL naming the CRITICAL rows" ||
  bad "health records, level 1 on the faulty GPUs: $(cat "$scratch/l1-faults/records.log")"
health_records l1-missing 1 5 DDX_NVML_LIBRARY="$fake_nvml" FAKE_NVML_SCENARIO=healthy --
grep -q "FAIL l1-missing: every GPU NVML lists: gpu4: no NVML row; the gpus row counts 4, nvidia-smi lists 5" \
  "$scratch/l1-missing/records.log" && ok "health records: a GPU nvidia-smi lists and ddx does not show is FAIL" ||
  bad "health records, a fifth GPU listed: $(cat "$scratch/l1-missing/records.log")"
health_records l2-cpu 2 0 OMP_NUM_THREADS=2 -- --device cpu
[ "$(status_of "l2-cpu: verdict" "$scratch/l2-cpu")" = PASS ] && [ "$(status_of "l2-cpu: gemm cpu fp32" "$scratch/l2-cpu")" = PASS ] &&
  [ "$(status_of "l2-cpu: gemm cpu bf16" "$scratch/l2-cpu")" = PASS ] &&
  ok "health records, level 2 on the CPU: verdict and every GEMM exact PASS" ||
  bad "health records, level 2 on the CPU: $(cat "$scratch/l2-cpu/records.log")"
health_records l2-wrong 2 1 OMP_NUM_THREADS=2 DDX_FAULT=gemm-wrong@device=cpu,dtype=bf16,row=3,col=5 -- --device cpu
[ "$(status_of "l2-wrong: gemm cpu bf16" "$scratch/l2-wrong")" = FAIL ] && [ "$(status_of "l2-wrong: gemm cpu fp32" "$scratch/l2-wrong")" = PASS ] &&
  [ "$(status_of "l2-wrong: verdict" "$scratch/l2-wrong")" = FAIL ] &&
  grep -q "FAIL l2-wrong: every GPU NVML lists: gemm gpu0 fp32; gemm gpu0 tf32" "$scratch/l2-wrong/records.log" &&
  ok "health records, a wrong bf16 element: that GEMM FAIL, the others PASS; no GPU GEMM for a listed GPU: FAIL" ||
  bad "health records, a wrong bf16 element: $(cat "$scratch/l2-wrong/records.log")"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ] && rm -rf "$scratch"
[ $failed -eq 0 ]
