#!/usr/bin/env python3
"""The GPU check's results (ci/gpu_check.sh): one record per check, then results.json and a
Markdown table (docs/gpu.md's layout).

  results.py record OUT NAME STATUS DETAIL [--ddx X --reference Y --unit U --min-ratio R]
  results.py report OUT     (exit 0 PASS, 1 FAIL, 3 SKIP: no GPU, nothing about GPUs checked)

A record with figures gets ratio = ddx / reference and, with --min-ratio, the status that ratio
earns (PASS at or above it, FAIL below); STATUS is then only what the step itself said (a step
that failed to produce its figure stays FAIL). Records are JSON lines in OUT/checks.jsonl, so a
check that dies half-way still leaves the ones before it.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

STATUSES = ("PASS", "FAIL", "SKIP", "INFO")


def record(args):
    # One line of plain text: a tool's tabs and newlines would break the Markdown table.
    rec = {"check": args.name, "status": args.status, "detail": " ".join(args.detail.split())}
    if args.ddx is not None and args.reference is not None:
        rec.update(ddx=args.ddx, reference=args.reference, unit=args.unit)
        rec["ratio"] = args.ddx / args.reference if args.reference > 0 else None
        if args.min_ratio is not None:
            rec["min_ratio"] = args.min_ratio
            if args.status == "PASS" and (rec["ratio"] is None or rec["ratio"] < args.min_ratio):
                rec["status"] = "FAIL"
    with open(os.path.join(args.out, "checks.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(f"gpu_check: {rec['status']:4s} {args.name}: {args.detail}", flush=True)


def gpu_facts():
    """The GPU and driver as nvidia-smi names them; empty without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            name, driver, memory = [x.strip() for x in out.stdout.strip().splitlines()[0].split(",")]
            return {"gpu": name, "driver": driver, "gpu_memory": memory}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    return {"gpu": None, "driver": None, "gpu_memory": None}


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def figure(x):
    return "" if x is None else f"{x:.4g}"


def report(args):
    checks = []
    path = os.path.join(args.out, "checks.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            checks = [json.loads(line) for line in f if line.strip()]
    counts = {s: sum(1 for c in checks if c["status"] == s) for s in STATUSES}
    env = gpu_facts()
    env.update(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               host=platform.node(), commit=args.commit, torch=args.torch)
    # Without a GPU nothing about GPUs was checked: that is SKIP, never PASS.
    no_gpu = not checks or any(c["status"] == "SKIP" and c["detail"] == "no GPU" for c in checks)
    verdict = "FAIL" if counts["FAIL"] else ("SKIP" if no_gpu else "PASS")
    results = {"schema": 1, "verdict": verdict, "counts": counts, "environment": env, "checks": checks}
    write_atomically(os.path.join(args.out, "results.json"), json.dumps(results, indent=2) + "\n")
    gpu = env["gpu"] or "no GPU"
    lines = [f"GPU: {gpu}, driver {env['driver'] or '-'}, torch {env['torch']}, ddx {env['commit']}, {env['date']}", "",
             "| check | status | ddx | reference | ratio | detail |", "|---|---|---|---|---|---|"]
    for c in checks:
        unit = f" {c['unit']}" if c.get("unit") else ""
        ratio = figure(c.get("ratio")) + (f" (>= {c['min_ratio']})" if c.get("min_ratio") is not None else "")
        detail = c["detail"].replace("|", "\\|")
        lines.append(f"| {c['check']} | {c['status']} | {figure(c.get('ddx'))}{unit if c.get('ddx') is not None else ''} "
                     f"| {figure(c.get('reference'))} | {ratio} | {detail} |")
    write_atomically(os.path.join(args.out, "results.md"), "\n".join(lines) + "\n")
    print(f"gpu_check: {verdict}: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP, "
          f"{counts['INFO']} INFO on {gpu}; {os.path.join(args.out, 'results.json')}")
    return {"PASS": 0, "FAIL": 1, "SKIP": 3}[verdict]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("name")
    r.add_argument("status", choices=STATUSES)
    r.add_argument("detail")
    r.add_argument("--ddx", type=float)
    r.add_argument("--reference", type=float)
    r.add_argument("--unit", default="")
    r.add_argument("--min-ratio", type=float)
    s = sub.add_parser("report")
    s.add_argument("out")
    s.add_argument("--commit", default="unknown")
    s.add_argument("--torch", default="unknown")
    args = p.parse_args()
    if args.what == "record":
        record(args)
        return 0
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
