#!/usr/bin/env python3
"""SimAI's 9,216-GPU MoE example at flow level, and what `--fold-dp` costs.

Default: scaled copies of the example (its layers, fewer GPUs and
micro-batches, written to a temporary directory) run whole and folded at
flow level, interleaved, and the whole run again with another `--seed`
(other ECMP hashes: the yardstick, since a folded run's flows have other
ids and so other paths); one JSON line per case with the iteration time
(the run's simulated end) and its error against the whole run, each
collective's duration error (matched by name and group, p50 / p99 / max of
|error|), flows, wall time and peak RSS.

`--classes` runs the folded cases with `--fold-classes` (each flow a
class of `fold` members, the left-out replicas' load counted; docs/guide/flow-level.md,
Folding), so the folded rows measure the symmetric-replica
assumption; without it they measure the plain fold (the left-out replicas
sending nothing). `--netsim` picks the binary (to compare builds).

`--full`: the shipped example unchanged on `--topo hpn --gpus 9216` with
`--fold-dp 12`, under `/usr/bin/time -v`: wall time (set-up and
simulating), CPU time (user and system), peak RSS, flows (with `--classes`: classes, and the member
flows they stand for), collectives, the iteration time and the flow level's cost per class
(simulate time / flows). `--full-ga N` keeps its first N micro-batches (a
shorter run of the same shape); arguments after the options (`--cc none`)
go to netsim.

    cargo build --release -p netsim
    python3 benches/fold.py [--gpus 1536 3072] [--ga 2] [--folds 2 4] [--classes]
    python3 benches/fold.py --full [--full-fold 12] [--full-ga 4] [--classes] [--cc none]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "runs/scenarios/workloads/simai-moe-9216.txt")
NETSIM = os.path.join(ROOT, "target/release/netsim")


def scaled(text, gpus, ga):
    """The example on `gpus` GPUs with its first `ga` micro-batches."""
    lines = text.splitlines()
    header = re.sub(r"all_gpus: \d+", f"all_gpus: {gpus}", lines[0])
    header = re.sub(r"ga: \d+", f"ga: {ga}", header)
    body = lines[2:]
    starts = [i for i, l in enumerate(body) if l.split()[0] == "embedding_layer"]
    keep = body[: starts[ga]] if ga < len(starts) else body
    return "\n".join([header, str(len(keep))] + keep) + "\n"


def run(workload, gpus, fold, out, extra, classes=False):
    if classes and fold > 1:
        extra = ["--fold-classes"] + extra
    cmd = [
        "/usr/bin/time", "-v", NETSIM, "run", "--topo", "hpn", "--gpus", str(gpus),
        "--workload", workload, "--fidelity", "flow", "--fold-dp", str(fold),
        "--sample-ns", "0", "--quiet", "--out", out,
    ] + extra
    p = subprocess.run(cmd, check=True, capture_output=True, text=True)
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    with open(os.path.join(out, "run.json")) as f:
        summary = json.load(f)
    summary["time_v_peak_rss_bytes"] = rss_kb * 1024
    # CPU seconds: on a shared machine, steadier than wall time.
    summary["time_v_cpu_s"] = sum(
        float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", p.stderr).group(1))
        for kind in ("User", "System"))
    return summary


def durations(out):
    """Per collective, keyed by its phase name, lowest member (the simulated
    replicas are the whole run's first ones, on the same hosts) and
    occurrence, its duration."""
    c = pq.read_table(os.path.join(out, "collectives"),
                      columns=["collective_id", "name", "duration_ns"]).to_pydict()
    f = pq.read_table(os.path.join(out, "flows"), columns=["collective_id", "src"]).to_pydict()
    low = {}
    for cid, src in zip(f["collective_id"], f["src"]):
        if cid is not None and src < low.get(cid, 1 << 32):
            low[cid] = src
    # Several lines of a layer share a phase name: the k-th collective of a
    # name on a group (in build order, the same in both runs) matches.
    seen, out = {}, {}
    for cid, name, dur in sorted(zip(c["collective_id"], c["name"], c["duration_ns"])):
        key = (name, low.get(cid))
        k = seen.get(key, 0)
        seen[key] = k + 1
        out[key + (k,)] = dur
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def compare(args, text, tmp):
    for gpus in args.gpus:
        path = os.path.join(tmp, f"moe-{gpus}-ga{args.ga}.txt")
        with open(path, "w") as f:
            f.write(scaled(text, gpus, args.ga))
        whole_out = os.path.join(tmp, f"w{gpus}")
        whole = run(path, gpus, 1, whole_out, args.extra)
        wd = durations(whole_out)
        # The yardstick: the whole run with other ECMP hashes (flow ids
        # differ between a folded and a whole run, so their paths do too).
        cases = [(1, ["--seed", "2"])] + [(fold, []) for fold in args.folds]
        for fold, seed in cases:
            out = os.path.join(tmp, f"f{gpus}-{fold}")
            try:
                folded = run(path, gpus, fold, out, args.extra + seed, args.classes)
            except subprocess.CalledProcessError as e:
                error = [l for l in e.stderr.splitlines() if l.startswith("netsim: error")]
                print(json.dumps({"gpus": gpus, "fold_dp": fold, "refused": error}))
                continue
            errors = [
                abs(dur - wd[key]) / wd[key]
                for key, dur in durations(out).items()
                if key in wd and wd[key] and dur is not None
            ]
            we, fe = whole["sim_end_ns"], folded["sim_end_ns"]
            print(json.dumps({
                "gpus": gpus, "ga": args.ga, "fold_dp": fold, "classes": args.classes,
                "extra": seed,
                "iteration_ns": {"whole": we, "folded": fe},
                "iteration_error": (fe - we) / we,
                "collective_abs_error": {"p50": pct(errors, 0.5), "p99": pct(errors, 0.99),
                                         "max": max(errors) if errors else None,
                                         "matched": len(errors)},
                "flows": {"whole": whole["flows"], "folded": folded["flows"]},
                "wall_s": {"whole": whole["wall_s"], "folded": folded["wall_s"]},
                "peak_rss_bytes": {"whole": whole["time_v_peak_rss_bytes"],
                                   "folded": folded["time_v_peak_rss_bytes"]},
            }), flush=True)


def full(args, text, tmp):
    out = os.path.join(tmp, "full")
    workload = EXAMPLE
    if args.full_ga:
        workload = os.path.join(tmp, f"moe-9216-ga{args.full_ga}.txt")
        with open(workload, "w") as f:
            f.write(scaled(text, 9216, args.full_ga))
    s = run(workload, 9216, args.full_fold, out, args.extra, args.classes)
    print(json.dumps({
        "gpus": 9216, "fold_dp": args.full_fold, "classes": args.classes, "ga": args.full_ga,
        "extra": args.extra,
        "wall_s": s["wall_s"], "cpu_s": s["time_v_cpu_s"], "setup_s": s["setup_s"],
        "simulate_s": s["simulate_s"],
        "us_per_flow": s["simulate_s"] * 1e6 / s["flows"],
        "peak_rss_bytes": s["time_v_peak_rss_bytes"], "flows": s["flows"],
        # With classes each flows row stands for `fold` member flows.
        "member_flows": s["flows"] * (args.full_fold if args.classes else 1),
        "flows_finished": s["flows_finished"], "collectives": s["collectives"],
        "collectives_finished": s["collectives_finished"],
        "iteration_ns": s["sim_end_ns"], "events": s.get("events"),
    }), flush=True)


def main():
    global NETSIM
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1536, 3072])
    ap.add_argument("--ga", type=int, default=2)
    ap.add_argument("--folds", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--full-fold", type=int, default=12)
    ap.add_argument("--full-ga", type=int, default=None)
    ap.add_argument("--classes", action="store_true", help="folded runs with --fold-classes")
    ap.add_argument("--netsim", default=NETSIM, help="the binary to run")
    ap.add_argument("extra", nargs=argparse.REMAINDER)
    args, unknown = ap.parse_known_args()
    args.extra = unknown + args.extra
    NETSIM = args.netsim
    with open(EXAMPLE) as f:
        text = f.read()
    with tempfile.TemporaryDirectory(prefix="netsim-fold-") as tmp:
        if args.full:
            full(args, text, tmp)
        else:
            compare(args, text, tmp)


if __name__ == "__main__":
    sys.exit(main())
