#!/usr/bin/env python3
"""Wall time of `ddx health` against its budgets (docs/health.md): level 1 must finish within
10 s and level 2 within 60 s (slurmd kills a HealthCheckProgram at 60 s, and a prolog that runs
long holds the job). Every way below is run --repeat times, interleaved (one of each per round, so
a machine whose load changes shifts them alike), and timed as slurmd sees it: the whole process,
from exec to exit (loading ddx and LibTorch, the checks, the outputs). Printed per way: median
and max seconds, max as a fraction of the budget, and the report's own `seconds` (the checks
alone, from its --json).

The reference measured in the same run is `ddx version`: the process start every way pays. The
report has no per-check times; the rows' shares come from differences of the ways' medians
(level 2 - level 1: the active checks; with --path - without: the path checks and the storage
write-and-fsync of --storage-mib).

  python3 benchmarks/health_timing.py --ddx build/bin/ddx [--repeat 10] [--scratch DIR]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

STATES = {0: "OK", 1: "WARN", 2: "CRITICAL", 3: "UNKNOWN"}


def ways(ddx, scratch):
    """(name, argv, budget seconds or None); each health way writes its report to REPORT."""
    health = [ddx, "health", "--json", "REPORT"]
    return [
        ("ddx version (process start)", [ddx, "version"], None),
        ("level 1", health + ["--level", "1"], 10),
        ("level 1 --path", health + ["--level", "1", "--path", scratch], 10),
        ("level 2", health + ["--level", "2"], 60),
        ("level 2 --path", health + ["--level", "2", "--path", scratch], 60),
    ]


def run_once(argv, report, budget):
    writes_report = "REPORT" in argv
    argv = [report if a == "REPORT" else a for a in argv]
    start = time.monotonic()
    # Twice the budget: a way that overruns is still timed, and a hung one cannot stop the run.
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=2 * (budget or 30))
    wall = time.monotonic() - start
    if not writes_report:
        if done.returncode != 0:
            sys.exit(f"health_timing: {' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}")
        return wall, None, "exit 0"
    if done.returncode not in STATES:
        sys.exit(f"health_timing: {' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}")
    with open(report) as f:
        seconds = json.load(f)["seconds"]
    os.unlink(report)
    return wall, seconds, STATES[done.returncode]


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def load():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddx", required=True)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--scratch", default=None, help="folder for the --path ways' scratch folder (default: TMPDIR)")
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if not os.access(args.ddx, os.X_OK):
        p.error(f"--ddx {args.ddx}: not an executable")
    work = tempfile.mkdtemp(prefix="ddx-health-timing-", dir=args.scratch)
    scratch = os.path.join(work, "path")
    os.mkdir(scratch)
    report = os.path.join(work, "report.json")
    table = ways(args.ddx, scratch)
    walls = {name: [] for name, _, _ in table}
    own = {name: [] for name, _, _ in table}
    states = {name: {} for name, _, _ in table}
    load_before = load()
    try:
        for i in range(args.repeat):
            for name, argv, budget in table:
                wall, seconds, state = run_once(argv, report, budget)
                walls[name].append(wall)
                if seconds is not None:
                    own[name].append(seconds)
                states[name][state] = states[name].get(state, 0) + 1
                print(f"  round {i + 1}: {name:28s} {wall:6.2f} s  {state}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    reference = statistics.median(walls[table[0][0]])
    print(f"\nddx health wall time, {args.repeat} runs of each way interleaved; {os.cpu_count()} CPUs "
          f"({cpu_model()}), load average {load_before} before, {load()} after")
    print(f"{'way':28s} {'median s':>9s} {'max s':>7s} {'budget':>7s} {'max/budget':>10s} {'x start':>8s} "
          f"{'checks s (median)':>18s}  states")
    for name, _, budget in table:
        med, top = statistics.median(walls[name]), max(walls[name])
        fraction = f"{top / budget:10.3f}" if budget else f"{'-':>10s}"
        checks = f"{statistics.median(own[name]):18.3f}" if own[name] else f"{'-':>18s}"
        tally = ", ".join(f"{n} {s}" for s, n in sorted(states[name].items()))
        print(f"{name:28s} {med:9.2f} {top:7.2f} {(str(budget) + ' s') if budget else '-':>7s} {fraction} "
              f"{med / reference:8.1f} {checks}  {tally}")

    def share(a, b):
        return statistics.median(own[a]) - statistics.median(own[b])

    print(f"\nshares (differences of the checks' medians): level 1's checks {statistics.median(own['level 1']):.3f} s; "
          f"--path at level 1 {share('level 1 --path', 'level 1'):+.3f} s; "
          f"level 2's active checks {share('level 2', 'level 1'):+.2f} s; "
          f"--path at level 2 (storage write-and-fsync) {share('level 2 --path', 'level 2'):+.2f} s")


if __name__ == "__main__":
    main()
