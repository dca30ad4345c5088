#!/usr/bin/env python3
"""Fast-forward against full packet level on the AICB/SimAI workloads.

Runs each workload with `--fast-forward off`, `on` and `on` with
`--ff-memo on` (interleaved, so machine noise hits them alike) and prints one JSON line per workload:
iteration time (the run's simulated end) and its error, each flow's FCT
error at p50 and p99 (flows matched by id), events and their ratio, wall
times and the speed-up. Needs a release build and pyarrow:

    cargo build --release -p netsim
    python3 benches/fast_forward.py [--threads 1] [--repeat 1] [--workloads a,b] [extra netsim flags]

`--workloads gen-...` runs workloads that `benches/gen_workload.py` writes
for `--seed N` (default 1), with per-line compute jitter of 5%: layouts
nobody tuned fast-forward on.

`--fail-below X` makes the run a check (CI runs it on the cut GPT-13B and
the cut rail-aligned Mixtral): exit 1 unless jumps + memo avoid at least X
times the events (sandboxes' counted) within the issue's errors (iteration
1%, FCT p50 and p99 5%).

`--compare OFF OTHER` compares two output directories already written (a
long run made alone, e.g. under `timeout` in the background): iteration
error, FCT errors (flows matched by id, both finished), events, and
where OTHER's packet-level work went: each collective phase's share of the
payload it simulated (neither replayed nor jumped). It also prints
`criterion`: iteration within 1%, the FCT distribution's p50 and p99
within 5%, and the per-flow p50 and p99 within 5% over the flows whose
start did not move by 1 us or more (a moved start reorders contention,
which another seed of `off` does too). `--noise OFF2` (an `off` run with
another `--seed`) adds OFF2's errors against OFF: the model's own spread.

`--misses RUN` says, per phase of a memo run, how many collectives were
replayed, the share of the payload simulated, and how many started while
an earlier one on the same hosts still ran (never quiet, so
never a memo candidate).

`--bounds` runs each workload once with `--fast-forward off` and prints, from
its flows table, the most that two refinements could avoid (DESIGN.md §3c,
"what the workloads allow"), with payload bytes standing for packet events:

- per-flow skipping: every flow jumps on its own over all of its life but
  the `2W + 1` check periods a jump needs (a window to become steady, a
  window and a period kept before its end); contention domains can skip no
  more, since a domain is steady only when each of its flows is;
- memoization: every collective whose inputs (flow count, sizes, the
  rank offsets of its flows) repeat those of an earlier one, and whose
  outcome (each flow's start offset and FCT) repeats it within 1%, is reused
  whole; the first of each kind is simulated, with per-flow skipping.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {
    # AICB's layout and sizes, cut to 2 layers (runs/scenarios/workloads/aicb_cut.py).
    "gpt13b-tp8-pp2-128": "runs/scenarios/workloads/gpt13b-tp8-pp2-128.txt",
    "mixtral-8x7b-ep8-tp2-128": "runs/scenarios/workloads/mixtral-8x7b-ep8-tp2-128.txt",
    # The same Mixtral along the rails: TP 8, EP 8 on one rail, DP 16.
    "mixtral-8x7b-ep8-tp8-128": "runs/scenarios/workloads/mixtral-8x7b-ep8-tp8-128.txt",
    # GPT-13B uncut (all 40 layers, `aicb_cut.py --whole`); minutes per run,
    # so only when named.
    "gpt13b-whole-128": "runs/scenarios/workloads/gpt13b-tp8-pp2-128-whole.txt",
    # Mixtral-8x7B uncut (all 32 layers); 5.0 G events, ~17 min with
    # `--fast-forward off` on one core: only when named.
    "mixtral-whole-128": "runs/scenarios/workloads/mixtral-8x7b-ep8-tp2-128-whole.txt",
    # Rail-aligned Mixtral uncut: 1.9 G events, ~2.5 min off on 2 threads.
    "mixtral-tp8-whole-128": "runs/scenarios/workloads/mixtral-8x7b-ep8-tp8-128-whole.txt",
    # Hand-made, small collectives (1-16 MiB): seconds per run.
    "repeated-layers-128": "benches/workloads/repeated-layers-128.txt",
    "gpt-micro-128": "runs/scenarios/workloads/gpt-micro-simai.txt",
    "moe-pp4-ep2-tp8-128": "runs/scenarios/workloads/moe-pp4-ep2-tp8-128.txt",
}
# Written by benches/gen_workload.py when named, never tuned on: each line's
# compute drawn within +/-5% of its nominal time.
GENERATED = {
    "gen-gpt-tp8-pp2-128": ["--tp", "8", "--pp", "2", "--layers", "4", "--micro-batches", "2"],
    "gen-moe-tp8-ep8-128": ["--model", "moe", "--tp", "8", "--ep", "8", "--layers", "4"],
    "gen-moe-tp2-ep8-128": ["--model", "moe", "--tp", "2", "--ep", "8", "--layers", "4"],
    # Twice the layers and micro-batches of the dense one: another size.
    "gen-gpt-tp8-pp2-l8-128": ["--tp", "8", "--pp", "2", "--layers", "8", "--micro-batches", "4"],
}
GENERATOR = os.path.join(ROOT, "benches/gen_workload.py")


def generated(name, seed, directory):
    """Writes generated workload `name` with `seed` into `directory`; its path."""
    path = os.path.join(directory, f"{name}-seed{seed}.txt")
    with open(path, "w") as f:
        subprocess.run([sys.executable, GENERATOR, "--gpus", "128", "--jitter", "0.05",
                        "--seed", str(seed)] + GENERATED[name], check=True, stdout=f)
    return path


NETSIM = os.path.join(ROOT, "target/release/netsim")
WINDOW_PERIODS = 4


def run(workload, fast_forward, threads, out, extra, memo="off"):
    cmd = [
        NETSIM, "run",
        "--topo", "spectrum-x", "--gpus", "128",
        "--workload", os.path.join(ROOT, workload),
        "--threads", str(threads), "--fast-forward", fast_forward,
    ] + (["--ff-memo", memo] if fast_forward == "on" else []) + [
        "--sample-ns", "0", "--quiet", "--out", out,
    ] + extra
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "run.json")) as f:
        summary = json.load(f)
    flows = pq.read_table(os.path.join(out, "flows")).to_pandas()
    return summary, flows


def bounds(name, flows, period_ns):
    """The event reductions that per-flow skipping and memoization allow."""
    size = flows["size_bytes"].astype(float)
    fct = flows["fct_ns"].astype(float)
    kept_ns = (2 * WINDOW_PERIODS + 1) * period_ns
    skippable = size * ((fct - kept_ns).clip(lower=0) / fct.clip(lower=1))
    total = size.sum()
    seen, reused = {}, set()
    for cid, g in flows.dropna(subset=["collective_id"]).groupby("collective_id"):
        g = g.sort_values(["start_ns", "src", "dst"])
        key = (len(g), tuple(sorted(g["size_bytes"])),
               tuple(sorted((g["dst"] - g["src"]).tolist())))
        outcome = sorted(zip((g["start_ns"] - g["start_ns"].min()).tolist(),
                             g["fct_ns"].tolist()))
        first = seen.setdefault(key, outcome)
        if first is not outcome and all(
                abs(a[0] - b[0]) <= 0.01 * max(b[0], 1) and abs(a[1] - b[1]) <= 0.01 * b[1]
                for a, b in zip(outcome, first)):
            reused.add(cid)
    memo = flows["collective_id"].isin(reused)
    left_memo = total - size[memo].sum()
    left_both = left_memo - skippable[~memo].sum()
    return {
        "workload": name,
        "period_ns": period_ns,
        "flows": len(flows),
        "fct_ns_p50": fct.quantile(0.5),
        "fct_ns_p90": fct.quantile(0.9),
        "bytes_in_flows_longer_than_kept": size[fct > kept_ns].sum() / total,
        "per_flow_skip_bound": total / max(total - skippable.sum(), 1),
        "collectives": int(flows["collective_id"].nunique()),
        "collective_kinds": len(seen),
        "memo_reused_collectives": len(reused),
        "memo_bound": total / max(left_memo, 1),
        "memo_and_skip_bound": total / max(left_both, 1),
    }


def simulated_by_phase(out_dir, top=5):
    """Where a run's packet-level work went: per collective phase (its name
    without stage, micro-batch and layer numbers), its share of the payload
    simulated (neither replayed from a record nor jumped), largest first."""
    flows = pq.read_table(os.path.join(out_dir, "flows")).to_pandas()
    path = os.path.join(out_dir, "collectives")
    if not os.path.isdir(path) or flows["collective_id"].isna().all():
        return {}
    names = pq.read_table(path).to_pandas()[["collective_id", "name"]]
    names["phase"] = (names["name"].str.replace(r"^s\d+\.mb\d+\.", "", regex=True)
                      .str.replace(r"_layer\d*", "", regex=True))
    flows = flows.merge(names, on="collective_id", how="left")
    simulated = (flows["size_bytes"] - flows["skipped_bytes"]).astype(float)
    by_phase = simulated.groupby(flows["phase"].fillna("none")).sum()
    by_phase = by_phase / max(simulated.sum(), 1)
    return {k: round(v, 4) for k, v in by_phase.sort_values(ascending=False).head(top).items()}


def misses(out_dir):
    """Why a memo run's collectives were simulated, per phase (its name
    without micro-batch and layer numbers, the pipeline stage kept): how
    many it has, how many were replayed whole (every flow's payload and
    FCT skipped), the share of the payload simulated in the run (neither
    replayed nor jumped), and how many started while an earlier one on the
    same hosts (of any phase) was still running. Such a one never starts on
    quiet resources, so it is never a memo candidate (the DP phase:
    docs/perf/2026-11-29-fast-forward-9.md)."""
    flows = pq.read_table(os.path.join(out_dir, "flows")).to_pandas()
    colls = pq.read_table(os.path.join(out_dir, "collectives")).to_pandas()
    colls["phase"] = (colls["name"].str.replace(r"\.mb\d+\.", ".", regex=True)
                      .str.replace(r"_layer\d*", "", regex=True))
    flows = flows[flows["collective_id"].notna()]
    flows = flows.assign(
        simulated=(flows["size_bytes"] - flows["skipped_bytes"]).astype(float),
        replayed=(flows["skipped_bytes"] == flows["size_bytes"])
        & (flows["skipped_ns"] == flows["fct_ns"]))
    per = flows.groupby("collective_id").agg(
        replayed=("replayed", "all"), simulated=("simulated", "sum"),
        hosts=("src", lambda h: tuple(sorted(set(h)))))
    colls = colls.merge(per, left_on="collective_id", right_index=True)
    total = max(colls["simulated"].sum(), 1)
    colls["overlapped"] = False
    for _, same in colls.groupby("hosts"):
        busy_until = None
        for i in same.sort_values(["start_ns", "collective_id"]).index:
            start, end = colls.at[i, "start_ns"], colls.at[i, "end_ns"]
            colls.at[i, "overlapped"] = busy_until is not None and start < busy_until
            busy_until = end if busy_until is None else max(busy_until, end)
    out = {}
    for phase, g in colls.groupby("phase"):
        out[phase] = {
            "collectives": len(g),
            "replayed": int(g["replayed"].sum()),
            "simulated_share": round(g["simulated"].sum() / total, 4),
            "started_while_previous_ran": int(g["overlapped"].sum()),
        }
    return {"run": out_dir,
            "phases": dict(sorted(out.items(), key=lambda kv: -kv[1]["simulated_share"]))}


def twins(out_dir, phase="wg"):
    """How symmetric a run's concurrent collectives are: the collectives
    whose name holds `phase` grouped by name and start instant (on a
    rail-aligned fabric, the same data-parallel collective on each rail),
    and the share of their flows (and payload) that start and end at the
    very instants of their twin in the group's first collective (flows
    matched by their order of id). What replaying one rail for the others
    would take exactly (docs/perf/2026-11-29-fast-forward-7.md)."""
    flows = pq.read_table(os.path.join(out_dir, "flows")).to_pandas()
    colls = pq.read_table(os.path.join(out_dir, "collectives")).to_pandas()
    colls = colls[colls["name"].str.contains(phase, regex=False)]
    flows = flows[flows["collective_id"].isin(colls["collective_id"])].sort_values("flow_id")
    by_coll = {cid: g for cid, g in flows.groupby("collective_id")}
    groups, same, compared, same_bytes, total_bytes, worst = 0, 0, 0, 0, 0, 0
    for _, group in colls.groupby(["name", "start_ns"]):
        ids = [c for c in group["collective_id"] if c in by_coll]
        if len(ids) < 2:
            continue
        groups += 1
        first = by_coll[ids[0]]
        for other in ids[1:]:
            g = by_coll[other]
            if len(g) != len(first):
                continue
            dev = sum(abs(g[col].values.astype("int64") - first[col].values.astype("int64"))
                      for col in ("start_ns", "end_ns"))
            compared += len(g)
            same += int((dev == 0).sum())
            total_bytes += int(g["size_bytes"].sum())
            same_bytes += int(g["size_bytes"].values[dev == 0].sum())
            worst = max(worst, int(dev.max()))
    return {
        "run": out_dir,
        "phase": phase,
        "groups_of_twins": groups,
        "flows_compared": compared,
        "flows_identical": same / max(compared, 1),
        "payload_identical": same_bytes / max(total_bytes, 1),
        "largest_deviation_ns": worst,
    }


def flow_errors(off_dir, other_dir):
    """Per-flow FCT errors of OTHER against OFF (flows matched by id, both
    finished), whether each flow's start moved 1 us or more, and the two
    runs' FCTs."""
    fcts, starts = [], []
    for d in (off_dir, other_dir):
        flows = pq.read_table(os.path.join(d, "flows")).to_pandas()
        done = flows[flows["finished"]].set_index("flow_id")
        fcts.append(done["fct_ns"].astype(float))
        starts.append(done["start_ns"].astype(float))
    both = fcts[0].index.intersection(fcts[1].index)
    err = ((fcts[1][both] - fcts[0][both]) / fcts[0][both]).abs()
    moved = (starts[1][both] - starts[0][both]).abs() >= 1000
    return err, moved, fcts


def ks_distance(a, b):
    """The largest gap between the empirical CDFs of samples `a` and `b`."""
    a, b = np.sort(a.values), np.sort(b.values)
    x = np.concatenate([a, b])
    return float(np.abs(np.searchsorted(a, x, "right") / len(a)
                        - np.searchsorted(b, x, "right") / len(b)).max())


def fct_errors(off_dir, other_dir):
    """The FCT errors the criterion reads (see `criterion`)."""
    err, moved, fcts = flow_errors(off_dir, other_dir)
    on_time = err[~moved]
    return {
        "flows_compared": len(err),
        "fct_error_p50": err.quantile(0.5),
        "fct_error_p99": err.quantile(0.99),
        # The FCT distribution's own quantiles (flows not matched by id).
        "fct_dist_error_p50": fcts[1].quantile(0.5) / fcts[0].quantile(0.5) - 1,
        "fct_dist_error_p99": fcts[1].quantile(0.99) / fcts[0].quantile(0.99) - 1,
        # Kolmogorov-Smirnov distance of the two distributions: where the
        # CDF is steep (dense's p99 moves 30% per half percentile) a few
        # flows reordered move a quantile far, but not the CDF.
        "fct_dist_ks": ks_distance(fcts[0], fcts[1]),
        "flows_over_5pct": int((err > 0.05).sum()),
        "flows_over_5pct_start_moved_1us": int(((err > 0.05) & moved).sum()),
        "flows_start_on_time": len(on_time),
        "fct_error_p50_start_on_time": on_time.quantile(0.5) if len(on_time) else None,
        "fct_error_p99_start_on_time": on_time.quantile(0.99) if len(on_time) else None,
    }


def criterion(iteration_error, e):
    """The FCT bounds that tell model error from the model's own seed noise.

    A flow whose start moved (an error carried down the DAG, or another
    seed's RED draws) meets other flows in another order; `off --seed 2`
    against `off --seed 1` puts such flows' per-flow p99 at 211% (report
    fast-forward-12), so matching them by id measures the reordering, not
    the model. The criterion: iteration within 1%, the FCT distribution's
    p50 and p99 within 5%, and the per-flow p50 and p99 within 5% over the
    flows whose start did not move (every flow the error could not reorder)."""
    on_time = [e["fct_error_p50_start_on_time"], e["fct_error_p99_start_on_time"]]
    checks = {
        "iteration_within_1pct": bool(abs(iteration_error) <= 0.01),
        "fct_dist_within_5pct": bool(max(abs(e["fct_dist_error_p50"]),
                                         abs(e["fct_dist_error_p99"])) <= 0.05),
        "fct_start_on_time_within_5pct": None not in on_time and bool(max(on_time) <= 0.05),
    }
    checks["within"] = all(checks.values())
    return checks


def compare(off_dir, other_dir, noise_dir=None):
    """Errors and event ratio of one run against a `--fast-forward off` one;
    with NOISE (`off` with another seed), the same errors of NOISE against
    OFF beside them: the model's own spread."""
    summaries = []
    for d in (off_dir, other_dir):
        with open(os.path.join(d, "run.json")) as f:
            summaries.append(json.load(f))
    off, other = summaries
    ff = other.get("fast_forward") or {}
    sandbox = ff.get("memo_sandbox_events", 0)
    iteration_error = other["sim_end_ns"] / off["sim_end_ns"] - 1
    errors = fct_errors(off_dir, other_dir)
    out = {
        "off": off_dir,
        "other": other_dir,
        "iteration_ns_off": off["sim_end_ns"],
        "iteration_ns": other["sim_end_ns"],
        "iteration_error": iteration_error,
        **errors,
        "criterion": criterion(iteration_error, errors),
        "events_off": off["events"],
        "events": other["events"],
        "memo_sandbox_events": sandbox,
        "event_reduction": off["events"] / max(other["events"] + sandbox, 1),
        "memo_hits": ff.get("memo_hits"),
        "memo_misses": ff.get("memo_misses"),
        "memo_path_hits": ff.get("memo_path_hits"),
        "skips": ff.get("skips"),
        "wall_s_off": off["simulate_s"],
        "wall_s": other["simulate_s"],
        "simulated_share_by_phase": simulated_by_phase(other_dir),
    }
    if noise_dir:
        with open(os.path.join(noise_dir, "run.json")) as f:
            noise_end = json.load(f)["sim_end_ns"]
        noise_iteration = noise_end / off["sim_end_ns"] - 1
        noise = fct_errors(off_dir, noise_dir)
        out["noise"] = {"run": noise_dir, "iteration_error": noise_iteration, **noise,
                        "criterion": criterion(noise_iteration, noise)}
        # The distribution's errors against the seed spread's: 5% or the
        # spread, whichever is larger (the model's own p99 moves 6.5%).
        out["criterion"]["fct_dist_within_noise"] = all(
            bool(abs(errors[k]) <= max(0.05, abs(noise[k])))
            for k in ("fct_dist_error_p50", "fct_dist_error_p99"))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--bounds", action="store_true",
                        help="only the off run: what per-flow skipping and memoization allow")
    parser.add_argument("--netsim", help="the binary [target/release/netsim]")
    parser.add_argument("--compare", nargs=2, metavar=("OFF", "OTHER"),
                        help="compare two output directories already written")
    parser.add_argument("--noise", metavar="OFF2",
                        help="with --compare: OFF2 (off, another seed) against OFF beside it")
    parser.add_argument("--twins", metavar="RUN",
                        help="how many of RUN's concurrent data-parallel collectives' flows equal their twin's")
    parser.add_argument("--misses", metavar="RUN",
                        help="per phase of RUN (a memo run): collectives replayed, payload simulated, "
                        "and those started while an earlier one on their hosts still ran")
    parser.add_argument("--workloads", help="comma-separated names [all but whole and gen-]: "
                        + ", ".join(list(WORKLOADS) + list(GENERATED)))
    parser.add_argument("--seed", type=int, default=1, help="generated workloads' seed")
    parser.add_argument("--fail-below", type=float, metavar="X",
                        help="exit 1 unless memo avoids X times the events within 1%% / 5%%")
    args, extra = parser.parse_known_args()
    if args.compare:
        print(json.dumps(compare(*args.compare, args.noise)))
        return
    if args.misses:
        print(json.dumps(misses(args.misses), indent=1))
        return
    if args.twins:
        print(json.dumps(twins(args.twins)))
        return
    if args.netsim:
        global NETSIM
        NETSIM = os.path.abspath(args.netsim)
    period_us = float(extra[extra.index("--ff-period-us") + 1]) if "--ff-period-us" in extra else 10
    names = args.workloads.split(",") if args.workloads else [n for n in WORKLOADS if "whole" not in n]
    for name in names:
        if name not in WORKLOADS and name not in GENERATED:
            sys.exit(f"--workloads: unknown `{name}` ({', '.join(list(WORKLOADS) + list(GENERATED))})")
    failed = []
    generated_dir = tempfile.TemporaryDirectory()
    for name in names:
        workload = WORKLOADS.get(name) or generated(name, args.seed, generated_dir.name)
        if args.bounds:
            with tempfile.TemporaryDirectory() as tmp:
                _, flows = run(workload, "off", args.threads, f"{tmp}/off", extra)
            # One unskipped run bounds every check period.
            for p_us in sorted({period_us, 10, 1, 0.5, 0.25}, reverse=True):
                print(json.dumps(bounds(name, flows, round(p_us * 1000))))
            sys.stdout.flush()
            continue
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                off, off_flows = run(workload, "off", args.threads, f"{tmp}/off", extra)
                on, on_flows = run(workload, "on", args.threads, f"{tmp}/on", extra)
                memo, memo_flows = run(workload, "on", args.threads, f"{tmp}/memo", extra, "on")
            off_fct = off_flows.set_index("flow_id")["fct_ns"].astype(float)
            on_fct = on_flows.set_index("flow_id")["fct_ns"].astype(float)
            err = ((on_fct - off_fct) / off_fct).abs()
            memo_fct = memo_flows.set_index("flow_id")["fct_ns"].astype(float)
            memo_err = ((memo_fct - off_fct) / off_fct).abs()
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
                # Share of the payload sent while its flow was steady on its
                # own (or jumped): what per-flow skipping could jump at most.
                "flow_steady_share": on["fast_forward"]["flow_steady_bytes"]
                / max(on["sent_payload_bytes"], 1),
                "skips": on["fast_forward"]["skips"],
                "pfc_pauses_off": off["pfc_pauses"],
                "wall_s_off": off["simulate_s"],
                "wall_s_on": on["simulate_s"],
                "speedup": off["simulate_s"] / on["simulate_s"],
                "peak_rss_mb_off": off["peak_rss_bytes"] / 2**20,
                "peak_rss_mb_on": on["peak_rss_bytes"] / 2**20,
                # On + memoization of repeated waves (--ff-memo on).
                "iteration_error_memo": memo["sim_end_ns"] / off["sim_end_ns"] - 1,
                "fct_error_p50_memo": memo_err.quantile(0.5),
                "fct_error_p99_memo": memo_err.quantile(0.99),
                "events_memo": memo["events"],
                # The sandboxes' events (domains simulated alone to make
                # their records) count: they are work the run did.
                "memo_sandbox_events": memo["fast_forward"]["memo_sandbox_events"],
                "event_reduction_memo": off["events"]
                / max(memo["events"] + memo["fast_forward"]["memo_sandbox_events"], 1),
                # Payload replayed from records (flows whose whole size was
                # skipped, less what fast-forward jumps moved in the on run).
                "memo_replayed_share": float(
                    memo_flows["size_bytes"][memo_flows["skipped_bytes"] == memo_flows["size_bytes"]].sum()
                    / max(memo_flows["size_bytes"].sum(), 1)),
                "memo_hits": memo["fast_forward"]["memo_hits"],
                "memo_misses": memo["fast_forward"]["memo_misses"],
                "memo_path_hits": memo["fast_forward"].get("memo_path_hits"),
                "memo_events_avoided": memo["fast_forward"]["memo_events_avoided"],
                "wall_s_memo": memo["simulate_s"],
            }))
            sys.stdout.flush()
            reduction = off["events"] / max(
                memo["events"] + memo["fast_forward"]["memo_sandbox_events"], 1)
            iteration = abs(memo["sim_end_ns"] / off["sim_end_ns"] - 1)
            worst_fct = max(memo_err.quantile(0.5), memo_err.quantile(0.99))
            # Every flow finished in both runs, the same ones: a lost or
            # unfinished flow is a NaN the quantiles would skip.
            finished = (set(off_flows["flow_id"][off_flows["finished"]])
                        == set(memo_flows["flow_id"][memo_flows["finished"]])
                        and len(off_flows) == len(memo_flows) and off_flows["finished"].all())
            if args.fail_below is not None and not (
                    finished and reduction >= args.fail_below and iteration <= 0.01
                    and worst_fct <= 0.05):
                failed.append(f"{name}: {reduction:.1f}x fewer events, iteration "
                              f"{iteration:.3%}, FCT p50/p99 error up to {worst_fct:.2%}"
                              + ("" if finished else ", not the same flows finished"))
    if failed:
        sys.exit("fast_forward.py: below the bar (--fail-below "
                 f"{args.fail_below:g}): " + "; ".join(failed))


if __name__ == "__main__":
    main()
