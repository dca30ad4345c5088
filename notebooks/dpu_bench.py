"""Plots `netsim dpu-bench` output as DPU-Bench's figures: offload efficiency
against workers, one panel per pattern, one line per assignment and size.

    python notebooks/dpu_bench.py DPU_OUT [FIGURE.png]

DPU_OUT is the directory `netsim dpu-bench --out` wrote (it holds
`dpu_bench/`); the figure goes to FIGURE.png (default DPU_OUT/dpu_bench.png).
Uses the packages of notebooks/requirements.txt (pandas, pyarrow, matplotlib).
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the figure goes to a PNG file
import matplotlib.pyplot as plt
import pandas as pd

PATTERNS = ["broadcast", "gather", "allgather_single_leader", "allgather_all_in"]


def size_label(size_bytes: int) -> str:
    """256 KiB, 1 MiB, ..."""
    if size_bytes % (1 << 20) == 0:
        return f"{size_bytes >> 20} MiB"
    return f"{size_bytes >> 10} KiB"


def plot(table: pd.DataFrame, path: Path) -> None:
    """One panel per pattern present: efficiency (%) against workers (log 2),
    solid lines cyclic, dashed block, one colour per size; the top axis marks
    workers per DPU where the workers are a whole number per node."""
    patterns = [p for p in PATTERNS if p in set(table.pattern)]
    cols = 2 if len(patterns) > 1 else 1
    rows = (len(patterns) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4 * rows), squeeze=False)
    sizes = sorted(table.size_bytes.unique())
    colours = dict(zip(sizes, plt.cm.viridis([i / max(len(sizes) - 1, 1) for i in range(len(sizes))])))
    for ax, pattern in zip(axes.flat, patterns):
        t = table[table.pattern == pattern]
        for (assign, size), line in t.groupby(["assign", "size_bytes"]):
            line = line.sort_values("workers")
            ax.plot(line.workers, line.offload_efficiency_pct, marker="o", markersize=3,
                    linestyle="-" if assign == "cyclic" else "--", color=colours[size],
                    label=f"{assign}, {size_label(size)}")
        ax.set_xscale("log", base=2)
        workers = sorted(t.workers.unique())
        ax.set_xticks(workers, [str(w) for w in workers], fontsize=8)
        ax.set_xlabel("workers (8 nodes: 8 = 1 per DPU, 64 = 8 per DPU)")
        ax.set_ylabel("offload efficiency (%)")
        # At least 20 points tall, so a flat line does not look like a trend.
        ax.set_ylim(max(0.0, min(t.offload_efficiency_pct.min() - 5, 80.0)), 101)
        ax.set_title(pattern)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    for ax in list(axes.flat)[len(patterns):]:
        ax.axis("off")
    fig.suptitle("DPU-Bench on netsim: offload efficiency = reference / max(pure comm, compute)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    if not any((out / "dpu_bench").glob("*.parquet")):
        sys.exit(f"{out} has no dpu_bench/ table: run `netsim dpu-bench --out {out}` first")
    figure = Path(sys.argv[2]) if len(sys.argv) == 3 else out / "dpu_bench.png"
    plot(pd.read_parquet(out / "dpu_bench"), figure)
    print(f"figure written: {figure}")


if __name__ == "__main__":
    main()
