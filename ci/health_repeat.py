#!/usr/bin/env python3
"""No false alarms (docs/health.md): `ddx health --level 1` and `--level 2`, N times each in a row
(default 20), while a real build of ddx runs beside them, and every run's state judged.

The build: ddx configured from scratch into a temporary folder with ccache off (DDX_CCACHE=OFF
and CCACHE_DISABLE=1, so every object is really compiled), its --targets built with -j CPUs,
cleaned and built again whenever it finishes, until the last run ends. Every run line says
whether the build was compiling at its start and end.

Before the build starts, on the machine as it is: one reference run of each level (what this
node WARNs about without any load: its configuration), and --baseline-runs level-2 runs whose
figures become the node's own baseline (`ddx health fleet --save-baseline`, every report of one
host), which the level-2 runs under the build are judged against (--baseline-runs 0: none, as the
example HealthCheckProgram runs).

A run passes when it finished within its level's budget (10 s, 60 s) and
  - no row is CRITICAL or UNKNOWN (a false alarm, or ddx failing to check);
  - no figure is judged low against the baseline (a false alarm: the build, not the node);
  - every WARN row also WARNed, for the same reason, in the reference run before the build:
    a standing WARN is this node's configuration (ulimits, an unsynchronised clock), true with or
    without a build, listed with its reason; a WARN that only the build brings is a false alarm.
Exit 0 every run passed, 1 a run did not, 2 usage.

  python3 ci/health_repeat.py [--runs 20] [--ddx build/bin/ddx] [--out out/health-repeat]
                              [--targets ddx_health ddx_launcher] [--jobs 2] [--torch]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGET = {1: 10, 2: 60}
STATES = {0: "OK", 1: "WARN", 2: "CRITICAL", 3: "UNKNOWN"}


class BuildBeside:
    """A from-scratch build of ddx in a temporary folder, rebuilt after a clean whenever it ends."""

    def __init__(self, targets, jobs, torch, log_path):
        self.targets, self.jobs, self.torch = targets, jobs, torch
        self.log = open(log_path, "w")
        self.folder = tempfile.mkdtemp(prefix="ddx-health-repeat-build-")
        self.env = dict(os.environ, CCACHE_DISABLE="1")
        self.stop = threading.Event()
        self.proc = None
        self.rounds = 0          # builds finished
        self.objects = 0         # objects compiled, over every round
        self.failed = None

    def configure(self):
        args = ["cmake", "-G", "Ninja", "-S", ROOT, "-B", self.folder, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                "-DDDX_CCACHE=OFF", f"-DDDX_CORE_ONLY={'OFF' if self.torch else 'ON'}"]
        done = subprocess.run(args, stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        if done.returncode != 0:
            shutil.rmtree(self.folder, ignore_errors=True)
            sys.exit(f"health_repeat: configuring the build beside failed (exit {done.returncode}); see {self.log.name}")
        commands = subprocess.run(["ninja", "-C", self.folder, "-t", "commands", *self.targets],
                                  stdout=subprocess.PIPE, text=True, env=self.env).stdout
        if "ccache" in commands:
            shutil.rmtree(self.folder, ignore_errors=True)
            sys.exit("health_repeat: the build beside would go through ccache; it must really compile")
        self.per_build = sum(1 for line in commands.splitlines() if " -c " in line)
        return self.per_build

    def _loop(self):
        while not self.stop.is_set():
            subprocess.run(["ninja", "-C", self.folder, "-t", "clean"], stdout=subprocess.DEVNULL, env=self.env)
            # Its own process group, so that the end of the run stops the compilers with ninja.
            self.proc = subprocess.Popen(["ninja", "-C", self.folder, "-j", str(self.jobs), *self.targets],
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                         env=self.env, start_new_session=True)
            for line in self.proc.stdout:
                self.log.write(line)
                if line.startswith("[") and "Building" in line:
                    self.objects += 1
            rc = self.proc.wait()
            if self.stop.is_set():
                break
            if rc != 0:
                self.failed = f"the build beside failed (exit {rc}); see {self.log.name}"
                break
            self.rounds += 1

    def start(self):
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        for _ in range(100):  # until the first compiler runs
            if self.objects:
                return
            time.sleep(0.1)

    def compiling(self):
        return self.proc is not None and self.proc.poll() is None and not self.failed

    def end(self):
        self.stop.set()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.thread.join(timeout=60)
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def health(ddx, level, args, report, log, budget):
    """One `ddx health` run: (state by exit code, seconds, report or None)."""
    argv = [ddx, "health", "--level", str(level), "--json", report, *args]
    start = time.monotonic()
    with open(log, "w") as out:
        try:
            # Past the budget slurmd would have killed it; give it a little more to see how long it takes.
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=budget + 30).returncode
        except subprocess.TimeoutExpired:
            rc = None
    seconds = time.monotonic() - start
    try:
        with open(report) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = None
    return STATES.get(rc, f"exit {rc}" if rc is not None else "killed"), seconds, data


def warn_rows(report):
    return {c["name"]: c.get("reason") or c.get("value", "") for c in report["checks"]
            if c["state"] == "WARN" and not c.get("skipped")}


def judge(level, state, seconds, report, standing):
    """(passed, what was wrong, the standing WARNs seen) of one run."""
    wrong = []
    if report is None:
        return False, [f"{state}: no report"], []
    if seconds > BUDGET[level]:
        wrong.append(f"{seconds:.1f} s, over the {BUDGET[level]} s budget")
    for c in report["checks"]:
        if c["state"] in ("CRITICAL", "UNKNOWN"):
            wrong.append(f"{c['state']} {c['name']}: {c['value']}")
    seen = []
    for name, reason in warn_rows(report).items():
        if name.startswith("ddx_health_"):  # a figure the baseline judged (baseline.cpp judgement_row)
            wrong.append(f"figure judged low: {name}: {reason}")
        elif standing.get(name) == reason:
            seen.append(name)
        else:
            wrong.append(f"WARN only under the build: {name}: {reason}")
    return not wrong, wrong, seen


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="runs of each level in a row")
    p.add_argument("--ddx", default=os.path.join(ROOT, "build", "bin", "ddx"))
    p.add_argument("--out", default=os.path.join(ROOT, "out", "health-repeat"), help="a new or empty folder")
    p.add_argument("--baseline-runs", type=int, default=5, help="level-2 runs before the build for the node's baseline")
    p.add_argument("--targets", nargs="+", default=["ddx_health", "ddx_launcher"])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--torch", action="store_true", help="configure the build beside with LibTorch (targets may then be LibTorch ones)")
    args = p.parse_args()
    if args.runs < 1 or args.baseline_runs < 0 or args.jobs < 1:
        p.error("--runs and --jobs must be at least 1, --baseline-runs at least 0")
    if not os.access(args.ddx, os.X_OK):
        p.error(f"--ddx {args.ddx}: not an executable (build ddx first)")
    if os.path.exists(args.out) and os.listdir(args.out):
        p.error(f"--out {args.out} is not empty: give a new or empty folder (this run's results only)")
    out = os.path.abspath(args.out)
    scratch = os.path.join(out, "scratch")  # --path: the free-space checks and level 2's storage test
    os.makedirs(scratch)
    common = ["--path", scratch]

    def say(line):
        print(line, flush=True)
        with open(os.path.join(out, "summary.txt"), "a") as f:
            f.write(line + "\n")

    # Before the build: what this node WARNs about as it is, and its own baseline.
    standing = {}
    for level in (1, 2):
        state, seconds, report = health(args.ddx, level, common, f"{out}/reference-level{level}.json",
                                        f"{out}/reference-level{level}.log", BUDGET[level])
        if report is None or state not in ("OK", "WARN"):
            sys.exit(f"health_repeat: the reference level-{level} run before the build is {state}; see {out}/reference-level{level}.log")
        standing.update(warn_rows(report))
        say(f"health_repeat: reference level {level} before the build: {state} in {seconds:.1f} s")
    for name, reason in sorted(standing.items()):
        say(f"health_repeat:   standing WARN {name}: {reason}")
    level2_args = list(common)
    if args.baseline_runs:
        runs = os.path.join(out, "baseline-runs")
        os.makedirs(runs)
        for i in range(args.baseline_runs):
            state, _, _ = health(args.ddx, 2, common, f"{runs}/run-{i + 1:02d}.json", f"{runs}/run-{i + 1:02d}.log", BUDGET[2])
            if state not in ("OK", "WARN"):
                sys.exit(f"health_repeat: baseline run {i + 1} is {state}; see {runs}/run-{i + 1:02d}.log")
        baseline = os.path.join(out, "baseline.json")
        done = subprocess.run([args.ddx, "health", "fleet", runs, "--save-baseline", baseline],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not os.path.exists(baseline):
            sys.exit(f"health_repeat: ddx health fleet wrote no baseline (exit {done.returncode}):\n{done.stdout[-2000:]}")
        level2_args += ["--baseline", baseline]
        say(f"health_repeat: the node's own baseline from {args.baseline_runs} level-2 runs before the build: {baseline}")

    build = BuildBeside(args.targets, args.jobs, args.torch, os.path.join(out, "build-beside.log"))
    objects = build.configure()
    say(f"health_repeat: building {' '.join(args.targets)} beside ({objects} objects, -j {args.jobs}, ccache off, "
        f"{'with' if args.torch else 'without'} LibTorch), again after a clean whenever it ends")
    build.start()
    tally = {}
    try:
        for level in (1, 2):
            folder = os.path.join(out, f"level{level}")
            os.makedirs(folder)
            times = []
            for i in range(args.runs):
                before = build.compiling()
                state, seconds, report = health(args.ddx, level, common if level == 1 else level2_args,
                                                f"{folder}/run-{i + 1:02d}.json", f"{folder}/run-{i + 1:02d}.log", BUDGET[level])
                beside = "compiling" if before and build.compiling() else "NOT compiling throughout"
                ok, wrong, seen = judge(level, state, seconds, report, standing)
                times.append(seconds)
                tally.setdefault(level, []).append(ok and beside == "compiling")
                load = open("/proc/loadavg").read().split()[0]
                detail = "; ".join(wrong) if wrong else f"standing WARN: {', '.join(seen) or 'none'}"
                say(f"health_repeat: level {level} run {i + 1:2d}/{args.runs}: {'PASS' if ok else 'FAIL'} {state:8s} "
                    f"{seconds:5.1f} s (build {beside}, load {load}): {detail}")
            say(f"health_repeat: level {level}: {sum(tally[level])} of {args.runs} passed with the build beside; "
                f"{statistics.median(times):.1f} s median, {max(times):.1f} s max (budget {BUDGET[level]} s)")
    finally:
        build.end()
    if build.failed:
        say(f"health_repeat: {build.failed}")
    say(f"health_repeat: the build beside compiled {build.objects} objects ({build.rounds} whole builds of "
        f"{build.per_build} finished, each restarted from a clean)")
    passed = all(all(v) for v in tally.values()) and not build.failed
    say(f"health_repeat: {'PASS' if passed else 'FAIL'}: " +
        ", ".join(f"level {lv} {sum(v)}/{len(v)}" for lv, v in tally.items()) + f"; every run in {out}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
