#!/usr/bin/env python3
"""The GPU check's `ddx health` records (ci/gpu_check.sh checks 11 and 12) from one run's --json
and --prometheus files, its exit status and its wall time (milliseconds, as the shell measures it):
  - the verdict: exit 0 (OK) or 1 (WARN), no CRITICAL or UNKNOWN row on a healthy GPU, within the
    level's budget (10 s, 60 s: slurmd kills a HealthCheckProgram at 60 s), and a Prometheus
    textfile with the overall state;
  - every GPU nvidia-smi lists (NVML's own list) has its rows: level 1 its NVML rows
    ("gpu<i> ecc", ...) and a `gpus` row counting them all; level 2 its known-answer GEMMs;
  - level 2: one record per device and dtype, PASS only when the product is exact.

  health_records.py LEVEL REPORT_JSON PROM_FILE EXIT_STATUS MILLISECONDS OUT CHECK
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402

BUDGET_S = {1: 10, 2: 60}
GPU_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp64")  # what the known-answer GEMM runs on a GPU
STATES = {0: "OK", 1: "WARN", 2: "CRITICAL", 3: "UNKNOWN", 124: "killed at the step's timeout"}


def rec(out, name, status, detail):
    results.record(argparse.Namespace(out=out, name=name, status=status, detail=detail, ddx=None, reference=None,
                                      unit="", min_ratio=None))


def nvml_gpus():
    """NVML's GPU indices as nvidia-smi lists them, or None with why."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"nvidia-smi: {e}"
    if done.returncode != 0:
        return None, f"nvidia-smi exit {done.returncode}: {done.stderr.strip()[:120]}"
    return [int(x) for x in done.stdout.split()], ""


def verdict_record(level, report, prom, rc, seconds, out, check):
    wrong = []
    if rc not in (0, 1):
        wrong.append(f"exit {rc} ({STATES.get(rc, 'not a Nagios state')})")
    bad = [c for c in report["checks"] if c["state"] in ("CRITICAL", "UNKNOWN")] if report else []
    wrong += [f"{c['state']} {c['name']}: {c['value']}" for c in bad]
    if seconds > BUDGET_S[level]:
        wrong.append(f"{seconds:.1f} s, over the {BUDGET_S[level]} s budget")
    prom_text = open(prom).read() if os.path.exists(prom) else ""
    if "ddx_health_state{" not in prom_text:
        wrong.append("no ddx_health_state in the Prometheus textfile")
    if report is None:
        wrong.append("no JSON report")
    verdict = report.get("verdict", "") if report else ""
    rec(out, f"{check}: verdict", "FAIL" if wrong else "PASS",
        ("; ".join(wrong) + "; " if wrong else "") + f"{seconds:.1f} s (budget {BUDGET_S[level]} s): {verdict}")


def every_gpu_record(level, report, out, check):
    indices, why = nvml_gpus()
    if indices is None:
        rec(out, f"{check}: every GPU NVML lists", "FAIL", why)
        return
    names = [c["name"] for c in report["checks"]]
    missing = []
    for i in indices:
        if level == 1:
            if not any(n.startswith(f"gpu{i} ") for n in names):
                missing.append(f"gpu{i}: no NVML row")
        else:
            missing += [f"gemm gpu{i} {d}" for d in GPU_DTYPES if f"gemm gpu{i} {d}" not in names]
    if level == 1:
        gpus = next((c for c in report["checks"] if c["name"] == "gpus"), None)
        counted = next((int(m["value"]) for m in (gpus or {}).get("metrics", []) if m["name"] == "ddx_health_gpus"), None)
        if counted != len(indices):
            missing.append(f"the gpus row counts {counted}, nvidia-smi lists {len(indices)}")
    rec(out, f"{check}: every GPU NVML lists", "FAIL" if missing else "PASS",
        "; ".join(missing) if missing else f"nvidia-smi lists {len(indices)} GPU(s) ({', '.join(map(str, indices))}): "
        + ("each has its NVML rows" if level == 1 else f"each has its GEMM in {', '.join(GPU_DTYPES)}"))


def gemm_records(report, out, check):
    for c in report["checks"]:
        if not c["name"].startswith("gemm "):  # every device's: on the GPU machine, the GPUs' (--device cuda)
            continue
        exact = c["state"] == "OK" and c["value"].startswith("exact")
        rec(out, f"{check}: {c['name']}", "PASS" if exact else "FAIL", f"{c['state']} {c['value']}")


def main():
    level, path, prom, rc, ms, out, check = sys.argv[1:8]
    level, rc, seconds = int(level), int(rc), int(ms) / 1000
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = None
    verdict_record(level, report, prom, rc, seconds, out, check)
    if report is None:
        return 0
    every_gpu_record(level, report, out, check)
    if level == 2:
        gemm_records(report, out, check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
