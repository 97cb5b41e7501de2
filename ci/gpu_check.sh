#!/usr/bin/env bash
# ddx's GPU check: everything ddx says about GPUs, run on a real one and measured against a
# reference taken in the same run on the same GPU (docs/gpu.md). Made into the bundle by
# ci/gpu_bundle.sh; run on the GPU machine from the bundle's folder:
#
#   bash DIR/gpu_check.sh OUT        (OUT: a new or empty folder)
#
# Writes OUT/results.json, OUT/results.md and OUT/gpu_check.log (and every step's own files).
# Each check has its own timeout, and a failed check never stops the ones after it. Without a
# GPU every GPU check is SKIP ("no GPU") and the run still shows that the bundle's ddx starts
# with only the torch wheel's libraries. Exit 0 PASS, 1 a check FAILed, 3 SKIP (no GPU: nothing about
# GPUs was checked, which is not a PASS), 2 for usage.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-}"
[ -n "$out" ] || { echo "usage: bash gpu_check.sh OUT (a new or empty folder for the results)" >&2; exit 2; }
# A verdict judges only this run: never results an earlier run left in the folder.
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "gpu_check: $out is not empty; give a new or empty folder (this run's results only)" >&2
  exit 2
fi
mkdir -p "$out" 2>/dev/null && [ -w "$out" ] || { echo "gpu_check: cannot write to $out" >&2; exit 2; }
out="$(cd "$out" && pwd)"
py="${DDX_GPU_PYTHON:-python3}"
ddx="$here/bin/ddx"
started=$(date +%s)
exec > >(tee -a "$out/gpu_check.log") 2>&1

record() { "$py" "$here/py/results.py" record "$out" "$@"; }
finish() {
  echo "gpu_check: took $(( $(date +%s) - started )) s"
  "$py" "$here/py/results.py" report "$out" --commit "$(cat "$here/commit" 2>/dev/null || echo unknown)" \
    --torch "${torch_version:-none}"
  exit $?
}
# run_step SECONDS NAME CMD...: the command's output into OUT/NAME.log; its exit status, or 124
# when it ran out of time (then its process group is gone: timeout kills it whole).
run_step() {
  local seconds="$1" name="$2"
  shift 2
  echo "gpu_check: -- $name: $*"
  timeout -k 5 "$seconds" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  tail -n 5 "$out/$name.log" | sed 's/^/    /'
  return $rc
}
one_line() { grep -m 1 -E "$1" "$2" 2>/dev/null | cut -c1-240; }

# The machine's own torch wheel (the same 2.11.0+cu130 as the build's .venv): its LibTorch,
# NCCL and CUDA runtime are the libraries ddx was linked against.
wheel=$("$py" - <<'PY' 2>/dev/null
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
libs = [os.path.join(os.path.dirname(torch.__file__), "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
print(torch.__version__)
print(":".join(libs))
print(torch.cuda.device_count() if torch.cuda.is_available() else 0)
PY
)
if [ -z "$wheel" ]; then
  record "environment" FAIL "$py cannot import torch: set DDX_GPU_PYTHON to a Python with the torch wheel"
  finish
fi
torch_version=$(sed -n 1p <<<"$wheel")
export LD_LIBRARY_PATH="$(sed -n 2p <<<"$wheel")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gpus=$(sed -n 3p <<<"$wheel")
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"

# 0. The bundle itself: ddx starts with only the wheel's libraries and the carried ones.
if run_step 20 version "$ddx" version; then
  record "bundle: ddx starts" PASS "$(tr -s ' ' < "$out/version.log" | paste -sd ';' | cut -c1-200)"
else
  record "bundle: ddx starts" FAIL "ddx version failed: $(tail -n 1 "$out/version.log")"
fi

checks=("1 version names CUDA, NCCL and the GPU" "2 gpu-health vs nvidia-smi" "3 compute vs torch.mm"
        "4 memory vs PyTorch copies" "5 selfcheck and bandwidth on NCCL" "6 two ranks on one GPU"
        "7 train GPT-2 124M vs PyTorch" "8 DDP and FSDP at world size 1 on NCCL" "9 validate --np 1"
        "10 top shows the GPU during training" "11 health level 1 on the real NVML" "12 health level 2 on the GPU")
if [ "${gpus:-0}" -lt 1 ]; then
  for c in "${checks[@]}"; do record "$c" SKIP "no GPU"; done
  finish
fi

# 1. ddx version names the CUDA runtime and driver, NCCL and the GPU.
if grep -qE "^cuda runtime +[0-9]" "$out/version.log" && grep -qE "^nccl +[0-9]" "$out/version.log" &&
   grep -qE "^gpu 0 +[^ ]" "$out/version.log"; then
  record "${checks[0]}" PASS "$(grep -E '^(cuda|nccl|gpu)' "$out/version.log" | tr -s ' ' | paste -sd ';')"
else
  record "${checks[0]}" FAIL "missing a cuda runtime, nccl or gpu 0 line: $(tr -s ' ' < "$out/version.log" | paste -sd ';')"
fi

# 2. gpu-health on the real NVML: no FAIL on a healthy GPU, every reading as nvidia-smi says.
run_step 60 gpu_health "$ddx" probe gpu-health --json "$out/gpu.json"
rc=$?
if [ $rc -eq 0 ]; then
  record "${checks[1]}: verdict" PASS "$(one_line '^gpu-health:' "$out/gpu_health.log")"
else
  record "${checks[1]}: verdict" FAIL "exit $rc: $(one_line 'FAIL|error' "$out/gpu_health.log")"
fi
if [ -f "$out/gpu.json" ]; then
  timeout 60 "$py" "$here/py/nvidia_smi_compare.py" "$out/gpu.json" "$out" ||
    echo "gpu_check: some gpu-health readings differ from nvidia-smi's"
else
  record "${checks[1]}: readings" FAIL "ddx wrote no gpu.json"
fi

# 11 and 12. `ddx health` on the real NVML and GPU (docs/health.md): level 1 (passive) and level 2
# on the GPU (the known-answer GEMM in every dtype, the figures, the storage test in OUT). Run here,
# after check 2, not last: they take seconds, and a device call cut short must still reach them.
# Judged by py/health_records.py: exit OK or WARN with no CRITICAL or UNKNOWN row on a healthy GPU,
# within the level's budget, every GPU nvidia-smi lists in the rows, every GEMM exact per dtype.
health_level() {  # health_level LEVEL CHECK TIMEOUT FLAGS...
  local level="$1" check="$2" seconds="$3" t0 rc
  shift 3
  t0=$(date +%s%N)
  run_step "$seconds" "health_level$level" "$ddx" health --level "$level" --json "$out/health_level$level.json" \
    --prometheus "$out/health_level$level.prom" "$@"
  rc=$?
  "$py" "$here/py/health_records.py" "$level" "$out/health_level$level.json" "$out/health_level$level.prom" "$rc" \
    "$(( ($(date +%s%N) - t0) / 1000000 ))" "$out" "$check"
}
health_level 1 "${checks[10]}" 30
mkdir -p "$out/health_scratch"
health_level 2 "${checks[11]}" 90 --device cuda --path "$out/health_scratch"
rmdir "$out/health_scratch" 2>/dev/null || echo "gpu_check: ddx health's storage test left files in $out/health_scratch"

# 3 and 4. The probes against PyTorch's same kernels, same run, same GPU: at least 0.95x.
node_probe() {  # node_probe NAME CHECK DDX_FLAGS -- REF_FLAGS
  local name="$1" check="$2" ddx_flags=() ref_flags=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do ddx_flags+=("$1"); shift; done
  shift
  ref_flags=("$@")
  run_step 120 "$name" "$ddx" probe "$name" --device cuda --json "$out/$name.json" "${ddx_flags[@]}" ||
    echo "gpu_check: ddx probe $name exited $?"
  run_step 120 "${name}_reference" "$py" "$here/py/torch_reference.py" "$name" --json "$out/${name}_reference.json" \
    "${ref_flags[@]}"
  if [ -f "$out/$name.json" ] && [ -f "$out/${name}_reference.json" ]; then
    "$py" "$here/py/torch_reference.py" compare "$out/$name.json" "$out/${name}_reference.json" "$out" \
      --check "$check" --min-ratio 0.95
  else
    record "$check" FAIL "no figures: see $name.log and ${name}_reference.log"
  fi
}
node_probe compute "${checks[2]}" --dtypes bf16,fp16,tf32,fp32 --sizes 8192 -- --dtypes bf16,fp16,tf32,fp32 --sizes 8192
node_probe memory "${checks[3]}" --array-bytes 256M -- --array-bytes 256M

# 5. One rank on NCCL: every collective exact through c10d's NCCL (selfcheck) and through the
# raw NCCL engine (bandwidth's #wrong column).
if run_step 120 selfcheck "$ddx" probe selfcheck --device cuda --json "$out/selfcheck.json"; then
  record "${checks[4]}: selfcheck (c10d NCCL)" PASS "$(one_line '^selfcheck:' "$out/selfcheck.log")"
else
  record "${checks[4]}: selfcheck (c10d NCCL)" FAIL "exit $?: $(one_line 'FAIL|error' "$out/selfcheck.log")"
fi
if run_step 120 bandwidth "$ddx" probe bandwidth --engine nccl -b 1M -e 256M -f 4 -n 10 --op-list all \
     --json "$out/bandwidth.json"; then
  record "${checks[4]}: bandwidth (raw NCCL)" PASS "$(one_line 'Avg bus bandwidth' "$out/bandwidth.log")"
else
  record "${checks[4]}: bandwidth (raw NCCL)" FAIL "exit $?: $(one_line 'error|wrong|FAIL' "$out/bandwidth.log")"
fi

# 6. Two ranks on the one GPU: NCCL refuses ("Duplicate GPU detected"); ddx must say so in one
# line naming the cause and exit non-zero, never hang; and the doctor should see it coming.
t0=$(date +%s)
run_step 90 duplicate_gpu "$ddx" launch --nproc-per-node 2 -- "$ddx" probe selfcheck --device cuda --timeout 60
rc=$?
took=$(( $(date +%s) - t0 ))
if [ $rc -eq 124 ]; then
  record "${checks[5]}: selfcheck" FAIL "hung: killed after 90 s"
elif [ $rc -ne 0 ] && grep -qiE "duplicate gpu|same gpu|share.*gpu" "$out/duplicate_gpu.log"; then
  record "${checks[5]}: selfcheck" PASS "exit $rc in $took s: $(one_line '[Dd]uplicate GPU|same GPU|share' "$out/duplicate_gpu.log")"
else
  record "${checks[5]}: selfcheck" FAIL "exit $rc in $took s without naming the shared GPU: $(tail -n 1 "$out/duplicate_gpu.log")"
fi
run_step 90 duplicate_gpu_doctor "$ddx" launch --nproc-per-node 2 -- "$ddx" doctor
if grep -qE "GPUs vs local ranks .*FAIL|1 GPU for 2 local ranks" "$out/duplicate_gpu_doctor.log"; then
  record "${checks[5]}: doctor" PASS "$(one_line 'GPU for 2 local ranks' "$out/duplicate_gpu_doctor.log")"
else
  record "${checks[5]}: doctor" FAIL "the doctor does not warn that 2 ranks share GPU 0: $(one_line '^doctor:' "$out/duplicate_gpu_doctor.log")"
fi

# 7. Training on the GPU: GPT-2 124M, single device, fp32 and bf16, against PyTorch eager and
# torch.compile on the same model and batch (benchmarks/train_throughput.py), and the fp32 loss
# curve against PyTorch's CUDA fp32 run from the same initial weights on the same tokens.
for dtype in fp32 bf16; do
  if run_step 300 "train_$dtype" "$py" "$here/py/train_throughput.py" --ddx "$ddx" --model gpt2 --device cuda \
       --dtype "$dtype" --batch 8 --seq 1024 --steps 12 --warmup 4 --rounds 1 --compile --json "$out/train_$dtype.json"; then
    "$py" "$here/py/gpu_train_records.py" "$out/train_$dtype.json" "$out" "${checks[6]} $dtype"
  else
    record "${checks[6]} $dtype" FAIL "exit $?: $(tail -n 1 "$out/train_$dtype.log")"
  fi
done
# The fp32 curve against PyTorch's CUDA fp32 run from ddx's initial weights on the same tokens.
if run_step 240 curve "$py" "$here/py/curve_check.py" --ddx "$ddx" --reference-dir "$here/py" --device cuda \
     --model gpt2 --steps 20 --out "$out/curve"; then
  record "${checks[6]} fp32 loss curve" PASS "$(grep -vE '^curve_check:' "$out/curve.log" | tail -n 1 | cut -c1-240)"
else
  record "${checks[6]} fp32 loss curve" FAIL "$(tail -n 1 "$out/curve.log" | cut -c1-240)"
fi

# 8. DDP and FSDP at world size 1 on the NCCL process group against the single-device curve.
train_args=(train -m gpt2 -b 4 -s 512 --max-steps 20 --seed 7 --device cuda --log-freq 1 --no-progress --lr 3e-4)
run_step 180 single_curve "$ddx" "${train_args[@]}" --save-dir "$out/single" --metrics-file "$out/single/metrics.jsonl"
for strategy in ddp fsdp; do
  if run_step 180 "${strategy}_curve" "$ddx" launch --nproc-per-node 1 -- "$ddx" "${train_args[@]}" --strategy "$strategy" \
       --save-dir "$out/$strategy" --metrics-file "$out/$strategy/metrics.jsonl" &&
     run_step 30 "${strategy}_compare" "$ddx" compare "$out/single/metrics.jsonl" "$out/$strategy/metrics.jsonl"; then
    record "${checks[7]}: $strategy" PASS "$(one_line 'agree|PASS|within' "$out/${strategy}_compare.log")"
  else
    record "${checks[7]}: $strategy" FAIL "$(tail -n 1 "$out/${strategy}_compare.log" 2>/dev/null || tail -n 1 "$out/${strategy}_curve.log")"
  fi
done

# 9. ddx validate on the GPU, one rank: every stage PASS, or SKIP with its reason.
run_step 240 validate "$ddx" validate --np 1 --out "$out/validate"
rc=$?
if [ $rc -eq 0 ]; then
  record "${checks[8]}" PASS "$(one_line '^validate:' "$out/validate.log")"
else
  record "${checks[8]}" FAIL "exit $rc: $(grep -E '\.\.\. FAIL' "$out/validate.log" | head -n 3 | paste -sd ';' | cut -c1-240)"
fi

# 10. ddx top while a training run is in progress: the GPU's utilisation and memory.
mkdir -p "$out/top_run"
timeout -k 5 120 "$ddx" "${train_args[@]}" --max-steps 200 --save-dir "$out/top_run" \
  --metrics-file "$out/top_run/metrics.jsonl" > "$out/top_train.log" 2>&1 &
trainer=$!
for _ in $(seq 1 60); do [ -s "$out/top_run/metrics.jsonl" ] && break; sleep 1; done
run_step 30 top "$ddx" top --run "$out/top_run" --once --json
kill "$trainer" 2>/dev/null
wait "$trainer" 2>/dev/null
"$py" - "$out/top.log" "$out" "${checks[9]}" "$here/py" <<'PY'
import argparse, json, sys
log, out, check, here = sys.argv[1:5]
sys.path.insert(0, here)
import results
status, detail = "FAIL", "no JSON line from ddx top"
for line in open(log, errors="replace"):
    try:
        view = json.loads(line)
    except ValueError:
        continue
    gpus = [g for n in view.get("nodes", []) for g in n.get("gpus", [])]
    if not gpus:
        detail = "ddx top's JSON lists no GPU: " + "; ".join(str(n.get("gpu_note")) for n in view.get("nodes", []))
        continue
    g = gpus[0]
    ok = (g.get("util_pct") or 0) > 0 and (g.get("memory_used_bytes") or 0) > 0
    status = "PASS" if ok else "FAIL"
    detail = f"gpu {g.get('index')} {g.get('name')}: {g.get('util_pct')} % busy, {g.get('memory_used_bytes')} bytes used"
    break
results.record(argparse.Namespace(out=out, name=check, status=status, detail=detail, ddx=None, reference=None,
                                  unit="", min_ratio=None))
PY
finish
