"""Reading a `ddx train` metrics file in the benchmarks: medians over the timed steps."""
import json
import statistics


def median_step_metrics(metrics_path, warmup):
    """(tokens/s, step ms, comm-wait ms), medians over the records after `warmup` steps."""
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f][warmup:]
    return (statistics.median(r["tokens_per_s"] for r in records), statistics.median(r["step_ms"] for r in records),
            statistics.median(r.get("comm_wait_ms", 0.0) for r in records))


def run_tokens_per_s(metrics_path, warmup):
    """Tokens per second over all the timed steps together (their tokens / their seconds), so a
    cost paid on some steps only (a check every N steps) counts, which a median would hide."""
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f][warmup:]
    return sum(r["tokens_per_s"] * r["step_ms"] / 1e3 for r in records) / sum(r["step_ms"] / 1e3 for r in records)
