"""Reading a `ddx train` metrics file in the benchmarks: medians over the timed steps."""
import json
import statistics


def median_step_metrics(metrics_path, warmup):
    """(tokens/s, step ms, comm-wait ms), medians over the records after `warmup` steps."""
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f][warmup:]
    return (statistics.median(r["tokens_per_s"] for r in records), statistics.median(r["step_ms"] for r in records),
            statistics.median(r.get("comm_wait_ms", 0.0) for r in records))
