"""Launch latency under SLURM: seconds from `srun` to every rank's process group connected.

Gloo's process group connects a full mesh when it is built, so the last rank to report its
group ready is the moment every rank can run its first collective. Three ways of starting the
same 4 ranks on 2 nodes, one after another in the same run, `--repeat` times each (median):

  srun ddx          srun -N 2 --ntasks-per-node 2 ddx probe selfcheck --sizes 1 --dtypes float32
                    (each rank reads SLURM itself)
  srun ddx launch   srun -N 2 --ntasks-per-node 1 ddx launch --nproc-per-node 2 -- ddx probe ...
  srun torchrun     srun -N 2 --ntasks-per-node 1 torchrun --nnodes 2 --nproc-per-node 2
                    --rdzv-backend c10d ... first_collective.py (init_process_group + barrier)

ddx ranks say when their group is ready in their debug log (`world ready`, DDX_LOG_LEVEL=debug);
the torchrun workers print time.time() after init_process_group. Clocks: the nodes' (NTP on a
cluster; one kernel clock in the tests' simulated cluster). Ratios are against `srun torchrun`.

Run it where srun works (a login node, or inside an allocation of 2 nodes):
  python benchmarks/slurm_launch_latency.py --ddx build/bin/ddx --torchrun .venv/bin/torchrun
"""

import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

FIRST_COLLECTIVE = """
import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
print(f"group ready {time.time():.6f}", flush=True)
dist.barrier()
dist.destroy_process_group()
"""

READY = re.compile(r"\] D (\d\d):(\d\d):(\d\d)\.(\d\d\d) world ready")
PY_READY = re.compile(r"group ready (\d+\.\d+)")


def ddx_ready_times(output, day):
    """Unix times of the ddx ranks' `world ready` lines (the log prints UTC wall-clock time)."""
    times = []
    for h, m, s, ms in READY.findall(output):
        moment = day.replace(hour=int(h), minute=int(m), second=int(s), microsecond=int(ms) * 1000)
        times.append(moment.timestamp())
    return times


def run(argv, env, timeout):
    start = time.time()
    day = datetime.datetime.now(datetime.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return start, day, p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ddx", required=True)
    ap.add_argument("--torchrun", required=True)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rdzv-port", type=int, default=29400)
    ap.add_argument("--timeout", type=int, default=120)
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    ranks = a.nodes * a.ranks_per_node
    # TZ=UTC: ddx's log prints local wall-clock time, read back here as UTC.
    env = dict(os.environ, DDX_LOG_LEVEL="debug", OMP_NUM_THREADS="1", TZ="UTC")
    nodes = ["-N", str(a.nodes)]
    probe = [a.ddx, "probe", "selfcheck", "--sizes", "1", "--dtypes", "float32"]
    script = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    script.write(FIRST_COLLECTIVE)
    script.close()
    # The first host of the allocation hosts torchrun's rendezvous, as in PyTorch's SLURM recipe.
    first_host = subprocess.run(["srun", *nodes, "--ntasks-per-node", "1", "hostname"], env=env,
                                stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    first_host = sorted(first_host)[0]
    ways = {
        "srun ddx": ["srun", *nodes, "--ntasks-per-node", str(a.ranks_per_node), *probe],
        "srun ddx launch": ["srun", *nodes, "--ntasks-per-node", "1", a.ddx, "launch", "--nproc-per-node",
                            str(a.ranks_per_node), "--", *probe],
        "srun torchrun": ["srun", *nodes, "--ntasks-per-node", "1", a.torchrun, "--nnodes", str(a.nodes),
                          "--nproc-per-node", str(a.ranks_per_node), "--rdzv-backend", "c10d",
                          "--rdzv-endpoint", f"{first_host}:{a.rdzv_port}", "--rdzv-id", "ddx-latency",
                          script.name],
    }
    results = {name: [] for name in ways}
    for i in range(a.repeat):
        for name, argv in ways.items():
            start, day, p = run(argv, env, a.timeout)
            ready = [float(t) for t in PY_READY.findall(p.stdout)] if "torchrun" in name else ddx_ready_times(p.stdout, day)
            if p.returncode != 0 or len(ready) != ranks:
                sys.exit(f"slurm_launch_latency: {name} exited {p.returncode} with {len(ready)} of {ranks} ranks ready:\n"
                         + p.stdout[-3000:])
            results[name].append(max(ready) - start)
            print(f"  run {i + 1}: {name:16s} {max(ready) - start:6.2f} s", flush=True)
    os.unlink(script.name)
    reference = statistics.median(results["srun torchrun"])
    print(f"\nsrun to every rank's process group ready, {ranks} ranks on {a.nodes} nodes, median of {a.repeat}:")
    for name, seconds in results.items():
        m = statistics.median(seconds)
        print(f"  {name:16s} {m:6.2f} s   {m / reference:5.2f}x srun torchrun   (runs: "
              + ", ".join(f"{s:.2f}" for s in seconds) + ")")


if __name__ == "__main__":
    main()
