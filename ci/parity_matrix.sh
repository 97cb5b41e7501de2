#!/usr/bin/env bash
# The parity suite on every CPU kernel path this machine offers: ATen's dispatch level
# (ATEN_CPU_CAPABILITY) and MKL's instruction set (MKL_ENABLE_INSTRUCTIONS) change the order of
# the sums inside the kernels, so a tolerance tuned on one path can fail on another. Runs
# `ddx parity` for the debug, debug-tp and debug-pp models at 2, 3 and 4 ranks, at 3 and 20
# steps, under each path; prints one line per suite with its verdict and its worst margin (a
# passing run's largest measure over its tolerance: the headroom left), then a tally.
#   bash ci/parity_matrix.sh [out-dir]       (DDX_BIN: the ddx binary; default build/bin/ddx)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ddx="${DDX_BIN:-$root/build/bin/ddx}"
out="${1:-parity-matrix}"
[ -x "$ddx" ] || { echo "parity_matrix: no ddx binary at $ddx (build first, or set DDX_BIN)" >&2; exit 2; }
mkdir -p "$out"

# ATen path / MKL path pairs: the machine's own choice, then each level the CPU can run.
paths=("machine:")
paths+=("default:SSE4_2" "avx2:AVX2")
grep -qw avx512f /proc/cpuinfo && paths+=("avx512:AVX512")
models=(${DDX_PARITY_MODELS:-debug debug-tp debug-pp})
steps_list=(${DDX_PARITY_STEPS:-3 20})

passed=0 failed=0
for path in "${paths[@]}"; do
  aten="${path%%:*}" mkl="${path#*:}"
  for model in "${models[@]}"; do
    for steps in "${steps_list[@]}"; do
      tag="$aten-$model-$steps"
      env_args=()
      [ "$aten" != machine ] && env_args+=("ATEN_CPU_CAPABILITY=$aten" "MKL_ENABLE_INSTRUCTIONS=$mkl")
      env "${env_args[@]}" "$ddx" parity --model "$model" --world-sizes 2,3,4 --global-batch 24 --steps "$steps" \
        --out "$out/$tag" >"$out/$tag.log" 2>&1
      status=$?
      summary=$(python3 - "$out/$tag/report.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no report ({e})"); sys.exit()
runs = [x for x in r["runs"] if x["verdict"] != "SKIP"]
bad = [f'{x["name"]} x{x["world_size"]}: {x["note"]}' for x in runs if x["verdict"] != "PASS"]
worst = max(runs, key=lambda x: x.get("margin", 0), default=None)
skips = sum(1 for x in r["runs"] if x["verdict"] == "SKIP")
line = f'{len(runs)} runs, {len(bad)} failed, {skips} skipped'
if worst: line += f'; worst margin {worst["margin"]:.3g}x ({worst["name"]} x{worst["world_size"]})'
print(line + ("; " + "; ".join(bad[:3]) if bad else ""))
PY
)
      verdict=PASS; [ $status -ne 0 ] && verdict=FAIL
      [ $status -eq 0 ] && passed=$((passed + 1)) || failed=$((failed + 1))
      printf 'parity_matrix: ATEN_CPU_CAPABILITY=%-8s MKL=%-7s model=%-9s steps=%-3s %s  %s\n' \
        "$aten" "${mkl:-machine}" "$model" "$steps" "$verdict" "$summary"
    done
  done
done
echo "parity_matrix: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
