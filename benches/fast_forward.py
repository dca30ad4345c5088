#!/usr/bin/env python3
"""Fast-forward against full packet level on the AICB/SimAI workloads.

Runs each workload with `--fast-forward off` and `on` (interleaved, so
machine noise hits both alike) and prints one JSON line per workload:
iteration time (the run's simulated end) and its error, each flow's FCT
error at p50 and p99 (flows matched by id), events and their ratio, wall
times and the speed-up. Needs a release build and pyarrow:

    cargo build --release -p netsim
    python3 benches/fast_forward.py [--threads 1] [--repeat 1] [extra netsim flags]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {
    "gpt-micro-128": "runs/scenarios/workloads/gpt-micro-simai.txt",
    "moe-pp4-ep2-tp8-128": "runs/scenarios/workloads/moe-pp4-ep2-tp8-128.txt",
}


def run(workload, fast_forward, threads, out, extra):
    cmd = [
        os.path.join(ROOT, "target/release/netsim"), "run",
        "--topo", "spectrum-x", "--gpus", "128",
        "--workload", os.path.join(ROOT, workload),
        "--threads", str(threads), "--fast-forward", fast_forward,
        "--sample-ns", "0", "--quiet", "--out", out,
    ] + extra
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "run.json")) as f:
        summary = json.load(f)
    flows = pq.read_table(os.path.join(out, "flows")).to_pandas()
    return summary, flows.set_index("flow_id")["fct_ns"].astype(float)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1)
    args, extra = parser.parse_known_args()
    for name, workload in WORKLOADS.items():
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                off, off_fct = run(workload, "off", args.threads, f"{tmp}/off", extra)
                on, on_fct = run(workload, "on", args.threads, f"{tmp}/on", extra)
            err = ((on_fct - off_fct) / off_fct).abs()
            print(json.dumps({
                "workload": name,
                "threads": args.threads,
                "iteration_ns_off": off["sim_end_ns"],
                "iteration_ns_on": on["sim_end_ns"],
                "iteration_error": on["sim_end_ns"] / off["sim_end_ns"] - 1,
                "fct_error_p50": err.quantile(0.5),
                "fct_error_p99": err.quantile(0.99),
                "events_off": off["events"],
                "events_on": on["events"],
                "event_reduction": off["events"] / max(on["events"], 1),
                "skipped_ns": on["fast_forward"]["skipped_ns"],
                "skips": on["fast_forward"]["skips"],
                "wall_s_off": off["simulate_s"],
                "wall_s_on": on["simulate_s"],
                "speedup": off["simulate_s"] / on["simulate_s"],
            }))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
