"""A PyTorch Gloo job under torchrun with one planted fault and PyTorch's flight recorder on.

Each rank writes its recorder dump (``$TORCH_FR_DUMP_TEMP_FILE<rank>``, PyTorch's own pickle,
``torch._C._distributed_c10d._dump_fr_trace``) when a collective fails: Gloo, unlike NCCL, does
not dump by itself on a timeout. A rank that never reaches a failing collective (stuck in
compute) dumps when the job's deadline passes, from a thread, as NCCL's watchdog does when a
peer asks. ``FR_FORMAT=json`` writes PyTorch's JSON dump instead of the pickle.

A rank that is still alive dumps before it ends, whatever ends it: a dump under way is finished
before the rank exits (from whichever thread), and torchrun's SIGTERM (it stops the others once
one rank has died, e.g. a peer that Gloo aborted from its own I/O thread over a size mismatch,
``gloo::EnforceNotMet``) makes the rank dump and exit instead of dying with no dump. Only a rank
that dies at once (SIGKILL, an abort) leaves none.

``FR_DUMP_DELAY_S`` makes each dump take that long at least (a loaded machine, for the test of
torchrun stopping the job in the middle of one).

Faults (``FR_FAULT``, on rank ``FR_CULPRIT``, at step ``FR_STEP`` of 5, by default 2):
  none       a healthy run; every rank dumps at the end
  skip       the culprit skips the step's all_reduce
  op         the culprit calls broadcast where the others call all_reduce
  size       the culprit's all_reduce has 9 elements, the others' 8
  dtype      the culprit's all_reduce is float64, the others' float32
  compute    the culprit is stuck in Python (a sleep) before the step's all_reduce
  kill       the culprit dies (SIGKILL) before the step's all_reduce: it leaves no dump
  subgroup   the job also reduces in pairs (new_group [0,1] and [2,3]); the culprit skips its
             pair's all_reduce, while the world group's all_reduces stay matched until then
  p2p        every step the culprit sends activations to the next rank (dist.send/recv, as a
             pipeline does); at step 2 it leaves out the send, so the next rank waits in recv.
             Gloo's recorder does not record send/recv: the dumps show only that the next rank
             never joined the step's all_reduce
  rest       every step also all-reduces its loss and ends in a barrier; at step 2 the culprit
             skips the rest of the step after the gradients' all_reduce (the loss's all_reduce
             and the barrier), so its next all_reduce, the next step's first, meets the others'
             loss all_reduce (same size: it completes) and its loss all_reduce meets their
             barrier. Two ranks have no majority: only the order of each rank's own calls tells
             which one left the step
"""

import datetime
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

FAULT = os.environ.get("FR_FAULT", "none")
CULPRIT = int(os.environ.get("FR_CULPRIT", "2"))
FAULTY_STEP = int(os.environ.get("FR_STEP", "2"))
TIMEOUT_S = float(os.environ.get("FR_TIMEOUT_S", "4"))
# Seconds each dump takes at least, as a loaded machine slows it (pytorch_fr_test: a dump that
# torchrun's SIGTERM comes in the middle of is finished all the same).
DUMP_DELAY_S = float(os.environ.get("FR_DUMP_DELAY_S", "0"))
DEADLINE_S = float(os.environ.get("FR_DEADLINE_S", "15"))
JSON = os.environ.get("FR_FORMAT", "pickle") == "json"
# Held while the dump is written: a thread that comes second waits for it (and then exits), so no
# os._exit cuts a dump short. Reentrant for the SIGTERM handler, which runs on the main thread.
dump_lock = threading.RLock()
dump_state = {"writing": False, "written": False}


def dump(rank):
    """Writes this rank's dump once, atomically (a reader never sees half a file)."""
    with dump_lock:
        if dump_state["writing"] or dump_state["written"]:
            return
        dump_state["writing"] = True
        time.sleep(DUMP_DELAY_S)
        data = (
            torch._C._distributed_c10d._dump_fr_trace_json()
            if JSON
            else torch._C._distributed_c10d._dump_fr_trace()
        )
        if isinstance(data, str):
            data = data.encode()
        path = os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank) + (".json" if JSON else "")
        with open(path + ".tmp", "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.rename(path + ".tmp", path)
        dump_state["written"] = True


def on_sigterm(rank):
    """torchrun stops the job (a peer died): dump, then exit, as the end of main() would. It runs
    on the main thread between two Python steps (a collective's wait ends within its timeout)."""
    def handler(signo, frame):
        if dump_state["writing"] and not dump_state["written"]:
            return  # interrupted the dump itself (or the deadline thread's): that one finishes and exits
        dump(rank)
        sys.stderr.flush()
        os._exit(0)
    return handler


def at_deadline(rank):
    time.sleep(DEADLINE_S)
    dump(rank)
    os._exit(0)


def reduce(t, group=None):
    dist.all_reduce(t, group=group)


def exchange_activations(rank, faulty):
    receiver = (CULPRIT + 1) % dist.get_world_size()
    activations = torch.ones(16)
    if rank == CULPRIT and not faulty:
        dist.send(activations, dst=receiver)
    elif rank == receiver:
        dist.recv(activations, src=CULPRIT)


def train_step(rank, step, pair):
    faulty = rank == CULPRIT and step == FAULTY_STEP
    grads = torch.ones(8)
    if FAULT == "p2p":
        exchange_activations(rank, faulty)
    if faulty and FAULT == "compute":
        time.sleep(3600)
    if faulty and FAULT == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if faulty and FAULT == "skip":
        pass
    elif faulty and FAULT == "op":
        dist.broadcast(grads, src=0)
    elif faulty and FAULT == "size":
        reduce(torch.ones(9))
    elif faulty and FAULT == "dtype":
        reduce(torch.ones(8, dtype=torch.float64))
    else:
        reduce(grads)
    if pair is not None and not (faulty and FAULT == "subgroup"):
        reduce(torch.ones(4), group=pair)
    if FAULT == "rest" and not faulty:
        dist.all_reduce(torch.ones(8))  # the step's loss
        dist.barrier()


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    rank = dist.get_rank()
    signal.signal(signal.SIGTERM, on_sigterm(rank))
    threading.Thread(target=at_deadline, args=(rank,), daemon=True).start()
    pair = None
    if FAULT == "subgroup":
        pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        pair = pairs[rank // 2]
    try:
        for step in range(5):
            train_step(rank, step, pair)
        dist.barrier()
    except Exception as e:  # the timed-out or failed collective: what NCCL's watchdog would dump on
        print(f"rank {rank}: {type(e).__name__}: {str(e).splitlines()[0][:160]}", file=sys.stderr)
    dump(rank)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
