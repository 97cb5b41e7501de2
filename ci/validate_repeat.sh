#!/usr/bin/env bash
# `ddx validate --np 4` N times in a row (default 10) on this machine: a healthy machine must
# pass every run. Prints each run's verdict and its parity stage's worst margin, then a tally.
#   bash ci/validate_repeat.sh [N] [extra ddx validate flags...]   (DDX_BIN: the ddx binary)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ddx="${DDX_BIN:-$root/build/bin/ddx}"
runs="${1:-10}"
shift || true
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "validate_repeat: the run count must be a positive integer, not '$runs'" >&2; exit 2; }
[ -x "$ddx" ] || { echo "validate_repeat: no ddx binary at $ddx (build first, or set DDX_BIN)" >&2; exit 2; }
out="${DDX_VALIDATE_REPEAT_OUT:-validate-repeat}"
passed=0 failed=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  "$ddx" validate --np 4 --out "$out/run-$i" "$@" >"$out-run-$i.log" 2>&1 && ok=1 || ok=0
  margin=$(python3 - "$out/run-$i/parity/report.json" <<'PY'
import json, sys
try:
    runs = [x for x in json.load(open(sys.argv[1]))["runs"] if x["verdict"] != "SKIP"]
    w = max(runs, key=lambda x: x.get("margin", 0))
    print(f'parity worst margin {w["margin"]:.3g}x ({w["name"]} x{w["world_size"]})')
except Exception as e:
    print(f"no parity report ({e})")
PY
)
  if [ $ok -eq 1 ]; then passed=$((passed + 1)); v=PASS; else failed=$((failed + 1)); v=FAIL; fi
  echo "validate_repeat: run $i/$runs $v ($(( $(date +%s) - start )) s; $margin; log $out-run-$i.log)"
done
echo "validate_repeat: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
