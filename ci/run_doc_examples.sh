#!/usr/bin/env bash
# Runs the examples of README.md and docs/*.md as written, one after another, in one fresh
# folder, the way a new user following the pages would.
#
#   ci/run_doc_examples.sh [--cheap] [--list] BUILD_DIR
#
# Commands are the lines of ```sh blocks and the "$ " lines of output blocks. Every one must be
# classified in the table below, so a new example cannot slip in unrun:
#   cheap [EXIT]   seconds: run by the doc_examples CTest (and without --cheap), expecting EXIT (0)
#   full [EXIT]    minutes on a CPU machine: run without --cheap
#   skip REASON    cannot run as written here (GPUs, a cluster, your own files); says why
# Examples are run from a fresh folder with the build's bin/ first on PATH, `build` linked to
# BUILD_DIR and `.venv`, `tests` and `benchmarks` to the repository's, since pages show them by
# their path from the repository root.
set -euo pipefail

cheap_only=0
list_only=0
while [[ $# -gt 1 ]]; do
  case "$1" in
    --cheap) cheap_only=1 ;;
    --list) list_only=1 ;;
    *) echo "run_doc_examples: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[[ $# -eq 1 ]] || { echo "usage: ci/run_doc_examples.sh [--cheap] [--list] BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
[[ $list_only == 1 || -x "$build/bin/ddx" ]] || { echo "run_doc_examples: no $build/bin/ddx; build first" >&2; exit 2; }

# How each example is run. Keyed by the command exactly as the page shows it.
classification() {
  cat <<'EOF'
skip installs packages and builds on a fresh machine	bash ci/quickstart.sh
full	ddx launch -np 8 -- ddx probe compute
full	ddx launch -np 8 -- ddx probe memory --json memory.json
skip a SLURM cluster with GPUs	srun ddx probe compute --dtypes bf16 --sizes 8192
cheap	ddx launch -np 2 -- ddx probe compute
cheap	ddx launch -np 2 -- sh -c 'echo "report of rank $RANK"; echo "note from rank $RANK" >&2'
skip a cgroup named slow with a CPU quota (NodeProbes.ARankUnderACpuQuotaIsNamedByComputeAndMemory makes one and runs this)	ddx launch -np 2 -- sh -c 'if [ "$RANK" = 1 ]; then echo $$ > /sys/fs/cgroup/cpu/slow/cgroup.procs; fi; exec "$@"' sh ddx probe compute --sizes 256,512
skip two hosts (MultiNode.ComputeAndMemoryNameAHostUnderACpuQuotaAsAHost runs it on simulated hosts)	ddx launch --nnodes 2 --node-rank {0,1} ... -np 2 -- ddx probe memory --array-bytes 16M
skip exits with this machine's state, 0 OK or 1 WARN by its limits and clock (Health.Level1OnThisMachineIsOkOrWarnWithTheVerdictLast runs it)	ddx health
skip your scratch folder (HealthActive.Level2OnACpuNodeGivesEveryRowAndItsFigures runs level 2 on one)	ddx health --level 2 --path /scratch
skip ten minutes of burn-in (HealthActive.Level3BurnsInCheckingEveryProductAndCatchesAWrongOne runs 3 s)	ddx health --level 3 --burn-in 600
skip a SLURM node (the HealthCheckProgram tests run it through examples/slurm)	ddx health --level 1 --slurm-drain --slurm-resume --prometheus /var/lib/node_exporter/textfile_collector/ddx_health.prom
skip your nodes' reports in a shared folder (HealthFleet.* run it on recorded reports)	ddx health fleet /shared/health/ --drain-list drain.txt --markdown fleet.md
skip your nodes' reports in a shared folder (HealthFleet.* run it on recorded reports)	ddx health fleet /shared/health/
skip your nodes' reports in a shared folder (HealthFleet.ASavedBaselineJudgesALoneNodeAndABadOneIsRefusedNamingTheKey runs it)	ddx health fleet /shared/health/ --save-baseline fleet-baseline.json
skip one node's history of reports (HealthFleet.ANodesOwnHistoryIsItsOwnBaselineWithEveryRunCounted runs it)	ddx health fleet /shared/health/node17-*.json --save-baseline node17-baseline.json
skip a baseline of your fleet (HealthFleet.ASavedBaselineJudgesALoneNodeAndABadOneIsRefusedNamingTheKey)	ddx health --level 2 --baseline fleet-baseline.json
skip six reports with one planted low (HealthFleet.ANodePlantedLowIsTheOnlyOneNamedInTheDrainListAndTheMarkdown runs it)	ddx health fleet reports --drain-list drain.txt --markdown fleet.md --html fleet.html --save-baseline baseline.json
skip the drain list of the fleet example above	cat drain.txt
skip a SLURM cluster (scontrol)	while read -r node reason; do scontrol update nodename="$node" state=drain reason="$reason"; done < drain.txt
skip installs on a SLURM node, as root	mkdir -p /opt/ddx/examples/slurm
skip installs on a SLURM node, as root	cp examples/slurm/*.sh /opt/ddx/examples/slurm/
skip installs on a SLURM node, as root	install -D -m 0644 -o root examples/slurm/ddx-health.conf /etc/ddx/health.conf
skip a SLURM cluster (the HealthCheckProgram tests run it)	sinfo -R
skip a SLURM cluster (the HealthCheckProgram tests run it)	sinfo -R -o "%120E %9u %19H %N"
skip a SLURM cluster (HealthCheckProgram.AnOperatorsDrainStaysAlthoughDdxFindsTheNodeHealthy runs it)	scontrol update nodename=ddx-host-b state=drain reason="operator: replacing a DIMM, ticket 4711"
full	python3 benchmarks/health_timing.py --ddx build/bin/ddx --repeat 10
skip twenty and twenty runs beside a from-scratch build: half an hour	python3 ci/health_repeat.py
skip twenty and twenty runs beside a from-scratch build: half an hour	python3 ci/health_repeat.py --baseline-runs 0
full	bash ci/health_kernel_sets.sh
cheap	ddx probe gpu-health
cheap	ddx launch -np 8 -- ddx probe gpu-health --json gpu.json
skip a SLURM cluster	srun ddx probe gpu-health
skip your own runs' files	ddx compare yesterday/metrics.jsonl today/metrics.jsonl
skip your own runs' files	ddx compare ref.jsonl new.jsonl --rtol 1e-4 --plot loss-vs-ref.svg
skip your own runs' files	ddx compare ddx.jsonl torchtitan.jsonl --key loss --key train/loss --step-key step --step-key iteration
skip your own runs' files	ddx compare run-a/metrics.jsonl tensorboard-export.csv --key loss --key Value --step-key step --step-key Step
cheap	DDX_CPU_THREADS=1 ddx train -m debug -s 32 -b 4 --max-steps 20 --log-freq 1 --no-progress --save-dir threads1 --metrics-file threads1.jsonl
cheap	DDX_CPU_THREADS=2 ddx train -m debug -s 32 -b 4 --max-steps 20 --log-freq 1 --no-progress --save-dir threads2 --metrics-file threads2.jsonl
cheap	ddx compare threads1.jsonl threads2.jsonl --plot threads.svg
full 1	ddx compare threads1.jsonl threads2.jsonl --rtol 0 --atol 0
cheap	head -n 8 threads2.jsonl > died.jsonl
cheap 1	ddx compare threads1.jsonl died.jsonl
cheap	ddx compare threads1.jsonl died.jsonl --allow-shorter
skip a cluster's own earlier report	ddx validate --np 8 --baseline last-week/validate.json --junit validate.xml
full	ddx validate --np 2 --out last-week --max-bytes 64K --parity-steps 2 --burn-in-steps 4
full 1	ATEN_CPU_CAPABILITY=default ddx validate --np 2 --out this-week --max-bytes 64K --parity-steps 2 --burn-in-steps 4 --baseline last-week/validate.json
skip needs an earlier run's validate-report/ (Validate.ASecondRunIntoTheSameFolderJudgesItsOwnFilesAndKeepsTheFirst runs the same)	ddx validate --np 2 --baseline validate-report/validate.json
skip builds and runs the whole test suite, which runs this script	bash ci/test.sh
skip installs packages on a fresh machine	bash ci/bootstrap.sh
skip makes a 52 MiB bundle from the build (the gpu_bundle CTest makes and checks one)	bash ci/gpu_bundle.sh
skip the GPU machine's command, from the carried bundle (the gpu_bundle CTest runs it without a GPU)	bash out/gpu-bundle/gpu_check.sh OUT
skip the GPU machine's command, from the carried bundle (the gpu_bundle CTest runs it without a GPU)	bash out/gpu-bundle/gpu_check.sh "$OUT"
skip 8 GPUs and 8 GiB buffers	ddx launch --nproc-per-node 8 -- ddx probe bandwidth -b 8 -e 8G -f 2
skip 8 GPUs and 8 GiB buffers, and torchrun	torchrun --nproc-per-node 8 --no-python ddx probe bandwidth -b 8 -e 8G -f 2
skip a SLURM cluster	srun -N 4 --ntasks-per-node 8 ddx probe bandwidth -b 1M -e 8G -f 2
skip a SLURM cluster and your ./train	srun -N 2 --ntasks-per-node 1 ddx launch -np 8 -- ./train
skip a SLURM allocation (slurm_test runs parity across two nodes through validate.sbatch)	ddx parity --world-sizes 4 --launcher "srun -N 2 --ntasks-per-node 2"
skip a SLURM cluster (Slurm.ValidateSbatchRunsEveryStageOverBothHosts submits it on the tests' private cluster)	sbatch examples/slurm/validate.sbatch
skip a SLURM cluster (Slurm.TrainSbatchRequeuedAfterAKillEndsBitIdentical submits it)	sbatch examples/slurm/train.sbatch
skip a SLURM cluster (Slurm.FaultMatrixSbatchRunsItsRowsAcrossBothHosts submits it)	sbatch examples/slurm/fault-matrix.sbatch
skip a SLURM cluster with 16 GPUs	srun -N 2 --ntasks-per-node 8 ddx train --strategy fsdp -m gpt2
skip a SLURM cluster (a benchmark; docs/slurm.md shows its numbers)	python benchmarks/slurm_launch_latency.py --ddx build/bin/ddx --torchrun .venv/bin/torchrun --repeat 3
skip a SLURM cluster with 16 GPUs	srun -N 2 --ntasks-per-node 1 ddx launch --nproc-per-node 8 -- ddx train ...
skip a SLURM cluster; refused by design (Slurm.AnImpossibleLayoutFailsOnEveryTaskWithOneLine runs it)	srun -N 2 -n 3 ddx train --strategy 2d -m debug-tp --tp 2
skip 16 MPI ranks with 8 GiB buffers	mpiexec -n 16 ddx probe bandwidth -b 1M -e 8G -f 2
skip 8 GPUs	ddx launch --nproc-per-node 8 -- ddx probe bandwidth --op-list all -r -1 --json bw.json --csv bw.csv --plot bw.svg
skip 8 GPUs and 8 GiB buffers	ddx launch --nproc-per-node 8 -- ddx probe bandwidth -b 8G -e 8G --min-busbw 360
skip 8 GPUs	ddx launch --nproc-per-node 8 -- ddx probe bandwidth --pairs -e 256M
full	ddx launch --nproc-per-node 4 -- ddx probe bandwidth --engine gloo -b 1K -e 64M -f 4
full	mpiexec -n 4 ddx probe bandwidth --engine mpi -b 1K -e 64M -f 4
skip a benchmark (docs/bandwidth.md shows its numbers)	ddx launch --nproc-per-node 2 -- build/bin/bandwidth_overhead_bench --engine gloo --sizes 4M,16M,64M --iters 10 --rounds 6
skip a benchmark (docs/bandwidth.md shows its numbers)	mpiexec -n 2 build/bin/bandwidth_overhead_bench --engine mpi --sizes 4M,16M,64M --iters 10 --rounds 6
full	ddx launch -np 4 -- ddx train --strategy ddp -b 2 -e ddp-b2
full	ddx launch -np 4 -- ddx train --strategy ddp -b 2 --grad-accum 4 --zero1 -e ddp-zero1
skip a benchmark (docs/ddp.md shows its numbers)	.venv/bin/python benchmarks/ddp_throughput.py --ddx build/bin/ddx --model gpt2 --batch 1 --seq 128 --steps 7
skip GPT-2 (124M parameters) for 300 steps: hours on a CPU	ddx launch -np 4 -- ddx train --strategy fsdp -m gpt2 -b 2 -e fsdp-gpt2
skip 8 GPUs and Llama 3.1 8B weights in /models	ddx launch -np 8 -- ddx train --strategy fsdp -m llama-3.1-8b --init-from /models/llama-3.1-8b --mp-param-dtype bf16 --mp-reduce-dtype fp32 --checkpoint-activations --prefetch 2 -e llama8b
skip needs the Llama run above	ddx checkpoint consolidate outputs/llama8b/checkpoints/step_000000500 -o llama-step500
full	ddx launch -np 4 -- ddx train --strategy fsdp -b 2 -e fsdp-demo --max-steps 12
full	ddx checkpoint consolidate outputs/fsdp-demo/checkpoints/step_000000012 -o fsdp-demo-hf
skip a shared trace folder on a cluster, and your ./train	DDX_TRACE_DIR=/shared/traces/$SLURM_JOB_ID DDX_COLLECTIVE_TIMEOUT=120s ddx launch -np 8 -- ./train ...
skip reads a cluster's trace folder	ddx analyze /shared/traces/12345
skip reads a cluster's trace folder	ddx analyze /shared/traces/12345 --json
skip sets a PyTorch job's environment on a cluster	export TORCH_FR_BUFFER_SIZE=2000
skip sets a PyTorch job's environment on a cluster	export TORCH_FR_DUMP_TEMP_FILE=/shared/fr/$SLURM_JOB_ID/nccl_trace_rank_
skip reads a cluster's dump folder	ddx analyze /shared/fr/12345
skip reads a cluster's dump folder	ddx analyze -p nccl_trace_rank_ /shared/fr/12345
skip reads a cluster's dump folder	ddx analyze /shared/fr/12345/nccl_trace_rank_0 /shared/fr/12345/nccl_trace_rank_1
cheap	mkdir -p fr
full	TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE=$PWD/fr/nccl_trace_rank_ FR_FAULT=compute .venv/bin/torchrun --standalone --nproc-per-node 4 tests/python/fr_job.py
full	TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE=$PWD/fr/nccl_trace_rank_ FR_FAULT=rest FR_CULPRIT=1 .venv/bin/torchrun --standalone --nproc-per-node 2 tests/python/fr_job.py
full 1	ddx analyze fr
full 1	ddx analyze --trace fr-trace.json fr
full	ddx analyze -j --selected-ranks 2 --pg-filters default_pg fr
skip your own training program	DDX_FR_FORMAT=pytorch ddx launch -np 4 -- ./train ...
full	DDX_FR_FORMAT=both ddx probe hang --scenario mismatched-op --culprit-rank 2 -np 4 --timeout 2s --trace-dir fr-ddx --quiet
full	.venv/bin/torchfrtrace -p nccl_trace_rank_ fr-ddx
full	ddx launch -np 4 -- ddx train --strategy ddp --max-steps 100 -e launch-demo
full	ddx launch --nproc-per-node 4 --log-dir logs --tee --max-restarts 2 -- ddx probe selfcheck
skip needs root for a private mount namespace, and ends in SIGBUS by design (exit 1 expected, not yet classified by exit code)	ddx probe buserror --local-ranks 4 --shm-size 64M
full	ddx probe buserror --check --local-ranks 8
skip a tmpfs you mounted at /mnt/shm	ddx probe buserror --local-ranks 2 --shm-dir /mnt/shm
skip needs root for a private mount namespace; expects a shortfall (non-zero exit)	ddx probe buserror --check --local-ranks 4 --shm-size 64M
skip a multi-line shell example that mounts a 1 MiB /dev/shm (needs root)	unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1m tmpfs /dev/shm &&
full	ddx launch -np 4 -- ddx doctor
skip a SLURM cluster	srun --ntasks-per-node 8 ddx doctor --json doctor.json
skip 16 MPI ranks on a cluster and a /checkpoints folder	mpiexec -n 16 ddx doctor --save-dir /checkpoints
skip shows FAILs for interfaces this machine lacks (non-zero exit by design)	NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=eth1 mpiexec -n 2 ddx doctor
skip needs root; shows a FAIL of a 64 MiB /dev/shm by design	unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && ddx launch -np 4 -- ddx doctor'
cheap	ddx launch -np 2 -- sh -c '[ "$RANK" = 1 ] && export ATEN_CPU_CAPABILITY=default; exec ddx doctor'
skip needs root and network namespaces; tests/dist/multinode_test.cpp runs the same	ip netns add hostA && ip netns add hostB && ip link add vA type veth peer name vB
skip needs root and network namespaces; tests/dist/multinode_test.cpp runs the same	ip link set vA netns hostA && ip link set vB netns hostB
skip needs root and network namespaces; tests/dist/multinode_test.cpp runs the same	ip -n hostA link set vA name eth1 && ip -n hostB link set vB name eth1
skip needs root and network namespaces; tests/dist/multinode_test.cpp runs the same	ip -n hostA addr add 10.0.0.1/24 dev eth1 && ip -n hostB addr add 10.0.0.2/24 dev eth1
skip needs root and network namespaces; tests/dist/multinode_test.cpp runs the same	for h in hostA hostB; do ip -n $h link set eth1 up; ip -n $h link set lo up; done
skip needs root and network namespaces; tests/dist/multinode_test.cpp runs the same	ip netns exec hostB unshare --uts sh -c 'hostname node-B; exec ddx launch --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --master-port 29500 -np 2 -- ddx doctor' &
skip needs root and network namespaces; tests/dist/multinode_test.cpp runs the same	ip netns exec hostA unshare --uts sh -c 'hostname node-A; exec ddx launch --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 -np 2 -- ddx doctor'
full	ddx launch -np 2 -- ddx train --strategy tp -m debug-tp --max-steps 20
skip Llama 3.2 1B at TP 4: hours on a CPU	ddx launch -np 4 -- ddx train --strategy tp --tp 4 --sequence-parallel -m llama-3.2-1b -e run1
full	ddx parity --strategies tp,tp-sp,tp-accum2,fsdp --world-sizes 2,4 --steps 10 --no-determinism --uneven-tokens
skip a planted bug: the suite fails by design (the parity self-test checks it)	DDX_FAULT=tp-no-input-reduce ddx parity --strategies tp --world-sizes 2 --steps 6 --no-determinism --uneven-tokens
full	ddx launch -np 4 -- ddx train --strategy 2d --tp 2 -m debug-tp --max-steps 20
full	ddx launch -np 4 -- ddx train --strategy 2d --tp 2 --dp-replicate -m debug-tp --max-steps 20
full	ddx parity --strategies 2d,2d-replicate --world-sizes 2,4 --steps 10 --no-determinism --uneven-tokens
skip a planted bug: the suite fails by design	DDX_FAULT=tp-no-input-reduce ddx parity --strategies 2d --world-sizes 4 --steps 6 --no-determinism --uneven-tokens
full	ddx launch -np 4 -- ddx train --strategy 2d --tp 2 -m debug-tp -b 4 -e twod --max-steps 6 --ckpt-freq 3
full	ddx launch -np 2 -- ddx train --strategy tp -m debug-tp -b 2 -s 32 --max-steps 2 --metrics-file tp.jsonl
full	ddx launch -np 2 -- ddx train --strategy tp --sequence-parallel -m debug-tp -b 2 -s 32 --max-steps 2 --metrics-file tp-sp.jsonl
full	python3 -c 'import json; r = json.loads(open("tp.jsonl").readlines()[-1]); print(r["comm_bytes"], json.dumps(r["comm"]))'
full	python3 -c 'import json; r = json.loads(open("tp-sp.jsonl").readlines()[-1]); print(r["comm_bytes"], json.dumps(r["comm"]))'
full	ddx parity --strategies 2d,2d-sp --world-sizes 4 --steps 10 --no-determinism --uneven-tokens
skip a benchmark (docs/tp.md shows its numbers)	.venv/bin/python benchmarks/tp_throughput.py --ddx build/bin/ddx
full	ls outputs/twod/checkpoints/step_000000006
full	ddx checkpoint consolidate outputs/twod/checkpoints/step_000000006 -o twod-hf
full	ddx launch -np 2 -- ddx train --strategy pp -m debug-pp -b 4 --microbatches 4 --max-steps 20
full	ddx launch -np 4 -- ddx train --strategy pp --pp-schedule interleaved-1f1b --pp-virtual-stages 2 -m debug-pp -b 8 --microbatches 4 --max-steps 20
full	ddx launch -np 4 -- ddx train --strategy pp --pp 2 -m debug-pp -b 4 --microbatches 2 --max-steps 20
full	ddx launch -np 4 -- ddx train --strategy pp -m debug-pp -b 8 --microbatches 8 --pp-schedule gpipe -s 64 --max-steps 2 --pp-trace pp-gpipe.svg
full	ddx launch -np 4 -- ddx train --strategy pp -m debug-pp -b 8 --microbatches 8 --pp-schedule 1f1b -s 64 --max-steps 2 --pp-trace pp-1f1b.svg
full	ddx launch -np 4 -- ddx train --strategy pp -m debug-pp -b 8 --microbatches 8 --pp-schedule interleaved-1f1b --pp-virtual-stages 2 -s 64 --max-steps 2 --pp-trace pp-interleaved-1f1b.svg
full	ddx launch -np 4 -- ddx train --strategy pp --pp 2 -m debug-pp -b 4 --microbatches 4 --max-steps 20
full	ddx launch -np 4 -- ddx train --strategy pp --pp 2 --dp-replicate -m debug-pp -b 4 --microbatches 4 --max-steps 20
full	ddx launch -np 4 -- ddx train --strategy pp --pp 2 -m debug-pp -b 4 --microbatches 4 -s 32 --max-steps 2 --metrics-file pp-fsdp.jsonl
full	python3 -c 'import json; r = json.loads(open("pp-fsdp.jsonl").readlines()[-1]); print(r["param_bytes"], r["fsdp_units"], r["fsdp_all_gathers"], json.dumps(r["comm"]["dp"]))'
full	ddx launch -np 4 -- ddx train --strategy pp --pp 2 --dp-replicate -m debug-pp -b 4 --microbatches 4 -s 32 --max-steps 2 --metrics-file pp-replicate.jsonl
full	python3 -c 'import json; r = json.loads(open("pp-replicate.jsonl").readlines()[-1]); print(r["param_bytes"], json.dumps(r["comm"]["dp"]))'
full	ddx parity --strategies pp-fsdp,pp-dp --world-sizes 2,4 --steps 6 --no-determinism --uneven-tokens
full	ddx launch -np 4 -- ddx train --strategy pp --pp 2 --tp 2 -m debug-tp -b 8 --microbatches 2 --max-steps 20
full	ddx launch -np 8 -- ddx train --strategy pp --pp 2 --tp 2 -m debug-tp -b 4 --microbatches 2 --max-steps 20
full	ddx launch -np 4 -- ddx train --strategy pp --pp 2 --tp 2 -m debug-tp -b 8 --microbatches 2 -s 32 --max-steps 4 --metrics-file pptp.jsonl
full	python3 -c 'import json; r = json.loads(open("pptp.jsonl").readlines()[-1]); print(json.dumps(r["comm"]))'
full	ddx launch -np 8 -- ddx train --strategy pp --pp 2 --tp 2 -m debug-tp -b 4 --microbatches 2 -s 32 --max-steps 4 --metrics-file pptpdp.jsonl
full	python3 -c 'import json; r = json.loads(open("pptpdp.jsonl").readlines()[-1]); print(json.dumps(r["comm"]))'
full	ddx parity --strategies pp-tp,pp-fsdp,pp-dp --world-sizes 2,4 --steps 6 --no-determinism --uneven-tokens
skip a planted bug: the suite fails by design (the parity self-test checks it)	DDX_FAULT=tp-no-input-reduce ddx parity --strategies pp-tp --world-sizes 4 --steps 6 --no-determinism --uneven-tokens
full	ddx launch -np 4 -- ddx train --strategy pp --pp 2 -m debug-pp -b 2 --microbatches 2 --max-steps 3 --ckpt-freq 3 --save-dir ck -e run
full	ls ck/run/checkpoints/step_000000003
full	python3 -c "import json; print(json.dumps(json.load(open('ck/run/checkpoints/step_000000003/fsdp_index.json'))['parameters'][0]))"
full	ddx checkpoint consolidate ck/run/checkpoints/step_000000003 -o hf
skip a deliberate stall: waits out the collective timeout and fails by design (pp_test runs it)	ddx launch -np 2 -- ddx train --strategy pp -m debug-pp -b 4 --microbatches 2 --max-steps 3 --collective-timeout 3 --trace-dir stall-traces --fault slow-link@rank=1,op=send,ms=30000
skip needs the stalled run above	ddx analyze stall-traces
skip a deliberate hang: waits out the collective timeout and fails by design (pp_test runs it)	ddx launch -np 4 -- ddx train --strategy pp -m debug-pp -b 4 --microbatches 2 --max-steps 3 --collective-timeout 3 --trace-dir hang-traces --fault hang@rank=2,step=2
skip needs the hung run above	ddx analyze hang-traces
skip a benchmark (docs/pp.md shows its numbers)	.venv/bin/python benchmarks/pp_throughput.py --ddx build/bin/ddx --rounds 4 --steps 6 --warmup 2
full	ddx parity --strategies ddp,ddp-accum2,fsdp,tp,pp-gpipe,pp-1f1b,pp-interleaved,pp-dp --world-sizes 2,4 --steps 6 --no-determinism --uneven-tokens
skip a planted bug: the suite fails by design (the parity self-test checks it)	DDX_FAULT=pp-double-microbatch ddx parity --strategies pp-1f1b --world-sizes 2 --steps 6 --no-determinism --uneven-tokens
cheap 1	ddx launch -np 2 -- ddx train --max-steps 4 --fault kill@rank=1,step=3
full	ddx fault matrix
full	ddx fault matrix --strategy fsdp --kinds kill,hang,ckpt-corrupt --out fm-fsdp
full	ddx fault matrix --strategy 2d -m debug-tp --kinds kill,hang,ckpt-corrupt -- --tp 2
full 1	ddx fault matrix --kinds nan --without nan-check
full 1	ddx fault matrix --kinds nan,bitflip,mismatch,straggler --without 'nan-check,replica-check,collective check,straggler warning' --out fm-self-test
full 1	ddx fault matrix --kinds kill --out fm-wrong-resume -- --fault ckpt-corrupt@rank=0,step=10
skip a SLURM cluster with 8 GPUs per node	srun --nodes 1 --ntasks 1 --gpus-per-node 8 --cpus-per-task 32 ddx fault matrix -np 8 --strategy fsdp --out fault-matrix-$SLURM_JOB_ID -- --device cuda
skip a SLURM cluster with 8 GPUs per node	srun ddx fault matrix -np 8 --strategy ddp --out "fault-matrix-$SLURM_JOB_ID" -- --device cuda
skip a two-node SLURM cluster with GPUs and a shared /shared	srun --nodes 2 --ntasks-per-node 1 --gpus-per-node 8 ddx fault matrix -np 8 --out /shared/fault-matrix-$SLURM_JOB_ID -- --device cuda
skip two hosts named gpu001 and gpu002 with GPUs and a shared /shared	ddx fault matrix --nnodes 2 --node-rank 1 --master-addr gpu001 --master-port 29500 -np 8 --out /shared/fault-matrix -- --device cuda
skip setpriv drops CAP_SYS_ADMIN from root's bounding set; FaultMatrix.ShmFullRowIsSkippedWhereNoPrivateDevShmCanBeMade runs it	setpriv --bounding-set -sys_admin -- ddx fault matrix --kinds shm-full --out fm2
full	for node in 0 1; do ddx fault matrix --nnodes 2 --node-rank $node --master-addr 127.0.0.1 --master-port 29611 -np 2 --kinds kill,nan --out fm-nodes > node$node.txt & done; wait
full 1	DDX_FAULT='slow-link@rank=2,op=send,ms=500' ddx launch -np 4 -- ddx probe bandwidth --engine gloo --pairs
full	ddx launch -np 2 --max-restarts 1 -- ddx train --strategy ddp -e run --ckpt-freq 5 --max-steps 16 --fault kill@rank=1,step=13
skip torchrun on PATH, from a PyTorch install (fault_injection_test's TorchrunRestartResumesBitIdentically runs it with the build's Python environment)	torchrun --standalone --nproc-per-node 2 --max-restarts 1 --no-python ddx train --strategy ddp -e run --ckpt-freq 5 --max-steps 16 --fault kill@rank=1,step=13
skip the full acceptance run at 4 ranks: minutes; the 2-rank example below is the one run	ddx validate --np 4
skip 16 MPI ranks on a cluster with InfiniBand	ddx validate --launcher "mpiexec -n 16" --expect infiniband --max-bytes 1G --out acceptance/
skip 8 GPUs on NVLink: a 350 GB/s floor fails on a CPU by design	ddx validate --np 8 --expect 350 --keep-going
full	ddx validate --np 2 --out report --max-bytes 64K --parity-steps 2 --burn-in-steps 4 --stage-timeout 240
skip refused by design (exit 2 on every rank); Validate.StartedAsARankOfALaunchedJobRefusesAndWritesNothing runs it	ddx launch -np 2 -- ddx validate
skip two hosts named gpu001 and gpu002	ddx launch --nnodes 2 --node-rank 0 --master-addr gpu001 --master-port 29500 -np 8 -- ./train
cheap 1	ddx launch -np 4 --log-dir logs -- build/bin/test_worker --segv --only-rank 2
skip needs a running ddx train job in that run folder (tests/dist/top_job_test.cpp runs one)	ddx top --run outputs/runs/20261203-071500-4242
skip a job whose store is on host gpu001	ddx top --master-addr gpu001 --master-port 29500
skip GPU hosts reachable over ssh, listed in ./hosts	ddx top --hosts hosts
cheap	ddx top --once
skip needs the run folder of a finished job (TopTest.AFinishedJobIsSaidToHaveEndedInOneLine makes one and runs this)	ddx top --run run --once
cheap	echo $?
full	ddx parity
full	ddx parity --strategies ddp,ddp-zero1 --world-sizes 2,4 --steps 20 --uneven-tokens --out parity-out
full	ddx parity --save-golden golden.json
full	ddx parity --golden golden.json
cheap 2	ddx parity --strategies 2d --world-sizes 2
cheap 2	RANK=5 WORLD_SIZE=4 MASTER_ADDR=h MASTER_PORT=1 ddx probe selfcheck
cheap 2	RANK=0 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=abc ddx probe selfcheck
cheap 2	SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 SLURM_JOB_NODELIST='gpu[001-002' SLURM_JOB_ID=123 ddx probe selfcheck
cheap 2	RANK=1 WORLD_SIZE=2 MASTER_PORT=29999 ddx probe selfcheck
cheap	ddx launch --nproc-per-node 4 -- ddx probe selfcheck
skip a SLURM cluster	srun --ntasks-per-node 8 ddx probe selfcheck
skip 16 MPI ranks on a cluster	mpiexec -n 16 ddx probe selfcheck --json selfcheck.json
cheap	ddx train
skip needs your data.jsonl and tokenizer.json, and GPT-2 at 1024 tokens is hours on a CPU	ddx train -e gpt2-run -m gpt2 -d data.jsonl --tokenizer tokenizer.json -b 4 -s 1024 --lr 3e-4
full	ddx launch -np 4 -- ddx train --strategy ddp -e train-ddp -b 2
full	ddx launch -np 4 -- ddx train --strategy fsdp -e train-fsdp -b 2
cheap	ddx train -m debug --max-steps 4 --profile prof
full	ddx train -m gpt2 -b 2 -s 128 --max-steps 4 --profile prof-gpt2
full	ddx launch -np 2 -- ddx train --strategy ddp -b 2 --max-steps 4 --profile prof-ddp
skip a benchmark (docs/performance.md shows its numbers)	.venv/bin/python benchmarks/train_throughput.py --ddx build/bin/ddx --model gpt2 --rounds 5
skip a benchmark (docs/performance.md shows its numbers)	.venv/bin/python benchmarks/train_throughput.py --ddx build/bin/ddx --model gpt2 --rounds 1 --profile prof-compare
skip a benchmark (docs/performance.md shows its numbers)	.venv/bin/python benchmarks/train_throughput.py --ddx build/bin/ddx --model llama-100m --rounds 5
skip a benchmark (ci/test.sh runs it; docs/performance.md shows its numbers)	build/bin/train_step_bench --benchmark_min_time=0.2
cheap	ddx train -m debug --max-steps 20 --fused-adamw
skip a benchmark (docs/performance.md shows its numbers)	.venv/bin/python benchmarks/train_throughput.py --ddx build/bin/ddx --model gpt2 --rounds 3 --fused-adamw
skip a benchmark (docs/performance.md shows its numbers)	.venv/bin/python benchmarks/train_throughput.py --ddx build/bin/ddx --model llama-100m --rounds 3 --ddx-flags=--fused-adamw
EOF
}

# Every example, in page order: "<page>\t<command>", continuation lines joined, comments cut.
examples() {
  for page in "$repo/README.md" "$repo"/docs/*.md; do
    awk -v page="${page#$repo/}" '
      /^```/ { if (in_block) { in_block = 0 } else { in_block = 1; shell = ($0 ~ /^```(sh|bash)$/) } ; next }
      !in_block { next }
      {
        line = $0
        if (!shell) { if (line !~ /^\$ /) next; line = substr(line, 3) }
        if (pending != "") { line = pending " " line; pending = "" }
        sub(/^[ \t]+/, "", line)
        if (line ~ /^#/ || line == "") next
        if (line ~ /\\$/) { sub(/[ \t]*\\$/, "", line); pending = line; next }
        sub(/[ \t]+#.*$/, "", line)
        gsub(/[ \t]+/, " ", line)
        print page "\t" line
      }' "$page"
  done
}

kind_of() {
  local cmd="$1"
  classification | awk -F '\t' -v cmd="$cmd" '$2 == cmd { print $1; found = 1; exit } END { if (!found) print "unclassified" }'
}

work=$(mktemp -d "${TMPDIR:-/tmp}/ddx-doc-examples-XXXXXX")
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
# Pages also run the project's virtualenv and its test scripts by their repository paths.
for path in .venv tests benchmarks; do
  if [[ -e "$repo/$path" ]]; then ln -s "$repo/$path" "$work/$path"; fi
done
export PATH="$build/bin:$PATH"

ran=0 skipped=0 failed=0 last_status=0

# `ddx validate` output shown on a page must list the stages the current `ddx validate` runs,
# in its order: "[k/N] name ... PASS" lines, N included. The stages come from the binary, not
# from this script: a run whose launcher fails at once (`false`) stops at its first stage in
# under a second, and its report (validate.json) still lists every stage, run or not. Given that
# report as --baseline, a second such run lists the baseline stage too, as a page's run with
# --baseline shows it.
validate_stages() {  # OUT_DIR [--baseline FILE]
  local out="$1"
  shift
  (cd "$work" && ddx validate --np 1 --launcher false --out "$out" "$@") < /dev/null > /dev/null 2>&1 || true
  [[ -f "$out/validate.json" ]] || return 0
  python3 -c 'import json, sys; print("\n".join(s["stage"] for s in json.load(open(sys.argv[1]))["stages"]))' \
      "$out/validate.json"
}

# "<page>:<line>\t<k>\t<N>\t<name>\t<1 when the block's run had --baseline>" for every stage
# line of a validate output block.
shown_validate_stages() {
  for page in "$repo/README.md" "$repo"/docs/*.md; do
    awk -v page="${page#$repo/}" '
      /^```/ { in_block = !in_block; baseline = 0; next }
      !in_block { next }
      /--baseline/ { baseline = 1 }
      /^\[[0-9]+\/[0-9]+\] .* \.\.\. (PASS|FAIL|SKIP)/ {
        k = $0; sub(/^\[/, "", k); sub(/\/.*/, "", k)
        n = $0; sub(/^\[[0-9]+\//, "", n); sub(/\].*/, "", n)
        name = $0; sub(/^\[[0-9]+\/[0-9]+\] /, "", name); sub(/ +\.\.\. .*/, "", name)
        print page ":" FNR "\t" k "\t" n "\t" name "\t" baseline
      }' "$page"
  done
}

check_validate_output() {
  local plain with_baseline
  mapfile -t plain < <(validate_stages "$work/.stages")
  if [[ ${#plain[@]} -lt 2 || ! -f "$work/.stages/validate.json" ]]; then
    echo "FAIL  could not list ddx validate's stages (got ${#plain[@]}: ${plain[*]:-none})"
    failed=$((failed + 1)); return
  fi
  mapfile -t with_baseline < <(validate_stages "$work/.stages-baseline" --baseline "$work/.stages/validate.json")
  rm -rf "$work/.stages" "$work/.stages-baseline"
  local where k n name baseline bad=0 checked=0
  local -a expected
  while IFS=$'\t' read -r where k n name baseline; do
    checked=$((checked + 1))
    if [[ $baseline == 1 ]]; then expected=("${with_baseline[@]}"); else expected=("${plain[@]}"); fi
    if [[ $n != "${#expected[@]}" ]]; then
      echo "FAIL  $where: shows [$k/$n] $name, but ddx validate has ${#expected[@]} stages now: ${expected[*]}"
      bad=$((bad + 1))
    elif [[ $name != "${expected[k - 1]}" ]]; then
      echo "FAIL  $where: shows stage $k as '$name', ddx validate's stage $k is '${expected[k - 1]}'"
      bad=$((bad + 1))
    fi
  done < <(shown_validate_stages)
  # No stage line found means the pattern no longer matches the pages' output: a check of nothing.
  if [[ $checked == 0 ]]; then
    echo "FAIL  no '[k/N] stage ... PASS|FAIL|SKIP' line found on any page: the pattern no longer matches"
    bad=1
  fi
  echo "validate output on the pages: ${#plain[@]} stages (${#with_baseline[@]} with --baseline), $checked line(s) checked, $bad wrong"
  failed=$((failed + bad))
}
[[ $list_only == 1 ]] || check_validate_output
while IFS=$'\t' read -r page cmd; do
  kind=$(kind_of "$cmd")
  case "$kind" in
    unclassified)
      echo "UNCLASSIFIED $page: $cmd  (add it to ci/run_doc_examples.sh)"
      failed=$((failed + 1)); continue ;;
    skip*)
      echo "skip  $page: $cmd  (${kind#skip })"; skipped=$((skipped + 1)); continue ;;
  esac
  level=${kind%% *}
  expected=0
  [[ "$kind" == *" "* ]] && expected=${kind#* }
  if [[ $level == full && $cheap_only == 1 ]]; then
    echo "later $page: $cmd  (full run only)"; skipped=$((skipped + 1)); continue
  fi
  if [[ $list_only == 1 ]]; then echo "$level  $page: $cmd"; continue; fi
  echo "run   $page: $cmd"
  # `echo $?` is shown after a failing command: it sees that command's status. No stdin:
  # mpiexec would read the list of examples.
  set +e
  (cd "$work" && eval "( exit $last_status ); $cmd") < /dev/null \
      > "$work/.example.log" 2>&1
  status=$?
  set -e
  last_status=$status
  ran=$((ran + 1))
  if [[ $status != "$expected" ]]; then
    echo "FAIL  $page: $cmd  exited $status, the page shows $expected; its output:"
    tail -n 30 "$work/.example.log" | sed 's/^/      /'
    failed=$((failed + 1))
  fi
done < <(examples)

echo "doc examples: $ran run, $skipped not run here, $failed failed"
[[ $failed == 0 ]]
