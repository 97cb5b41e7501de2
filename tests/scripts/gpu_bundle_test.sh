#!/usr/bin/env bash
# The CPU side of the GPU check (ci/gpu_bundle.sh, ci/gpu_check.sh; docs/gpu.md), as CI can test it:
#  1. the bundle is made and is under 64 MiB;
#  2. its ddx starts with only the torch wheel's libraries (.venv's, what the GPU machine's image
#     has) and the carried ones: the dynamic loader's own record of every library it opened says
#     nothing else was loaded (the C library's package aside);
#  3. its check, on this machine without a GPU, finishes within 60 s, marks every GPU step SKIP
#     ("no GPU") and writes a valid results.json, and says SKIP (exit 3), never PASS;
#  4. the Python pieces the GPU steps run work here on CPU: the loss-curve comparison against
#     PyTorch (debug model), and train_throughput.py's --json with the records made from it.
#   bash tests/scripts/gpu_bundle_test.sh BUILD_DIR
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
assert len(gpu) == 10, [c["check"] for c in gpu]
assert all(c["status"] == "SKIP" and c["detail"] == "no GPU" for c in gpu), gpu
bundle = [c for c in checks if c["check"] == "bundle: ddx starts"]
assert bundle and bundle[0]["status"] == "PASS", bundle
assert r["environment"]["gpu"] is None and r["environment"]["torch"].startswith("2."), r["environment"]
PY
then ok "results.json: verdict SKIP, 10 GPU checks SKIP (no GPU), the bundle check PASS"; else bad "results.json is not as expected"; fi
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

echo "$passed passed, $failed failed"
[ $failed -eq 0 ] && rm -rf "$scratch"
[ $failed -eq 0 ]
