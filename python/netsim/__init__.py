"""netsim from Python: run a scenario, get its tables as pyarrow tables.

    >>> import netsim
    >>> run = netsim.run(topo="fat-tree", k=4, cc="dcqcn")
    >>> run.summary["flows_finished"]
    >>> run.flows.to_pandas()

Keyword arguments are the flags of ``netsim run`` (and the keys of a
scenario file), with ``_`` for ``-``: they are handed to the command line's
own parser, so names, defaults and validation are the CLI's. Bad input
raises ``ValueError`` with the CLI's one-line message.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

import pyarrow as pa

from . import _netsim

__version__ = _netsim.__version__
__all__ = ["run", "Run", "argv", "topology", "Topology"]


def argv(*, _command: str = "run", **flags: Any) -> List[str]:
    """The ``netsim run`` command line that ``run(**flags)`` parses.

    ``k=8`` becomes ``--k 8``, ``fast_forward="on"`` ``--fast-forward on``,
    ``True`` a bare flag (``False`` and ``None`` leave the flag out), and a
    list or tuple repeats the flag once per item (``job=[...]``).
    """
    args = ["netsim", _command]
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if isinstance(item, (dict, set, bytes)):
                raise TypeError(f"{name}: {type(item).__name__} is not a flag value")
            args += [flag, os.fspath(item) if isinstance(item, os.PathLike) else str(item)]
    if _command == "run":
        # The CLI's own bar and summary line stay off: Python shows its own.
        args.append("--quiet")
    return args


def run(config: Optional[str] = None, *, progress: bool = True, **flags: Any) -> "Run":
    """Simulates a scenario and returns its tables and summary.

    ``config`` is a scenario file (TOML); ``flags`` override it as typed
    flags do on the command line. With ``progress`` and tqdm installed, a
    progress bar shows the simulated time. The run releases the GIL and
    uses ``threads`` worker threads (default: all cores); Ctrl-C stops it
    within a window and raises ``KeyboardInterrupt`` with no result.
    """
    if config is not None:
        flags = {"config": config, **flags}
    bar = _ProgressBar(flags.get("end_us")) if progress else None
    try:
        inner = _netsim.run(argv(**flags), bar)
    finally:
        if bar is not None:
            bar.close()
    return Run(inner)


def topology(kind: str = "fat-tree", **flags: Any) -> "Topology":
    """The fabric ``netsim topo KIND`` generates with the topology flags
    ``flags`` (``k=8``, ``link_gbps=400``, ...; a run's ``topo`` is ``kind``),
    as tables of its nodes and links."""
    args = argv(_command="topo", **flags)
    nodes, links = _netsim.topology(args[:2] + [kind] + args[2:])
    return Topology(pa.Table.from_batches([nodes]), pa.Table.from_batches([links]))


class Topology:
    """A fabric: ``nodes`` (node id, role, structural coordinates) and
    ``links`` (endpoints ``a`` and ``b``, ``bandwidth_bps``, ``latency_ps``,
    ``tier``), with the ids a run's tables use."""

    def __init__(self, nodes: pa.Table, links: pa.Table):
        self.nodes = nodes
        self.links = links

    def to_networkx(self):
        """The fabric as a ``networkx.Graph`` (needs networkx), nodes and
        edges carrying their columns; parallel links between two nodes are
        one edge whose ``links`` attribute counts them."""
        import networkx as nx

        graph = nx.Graph()
        for row in self.nodes.to_pylist():
            graph.add_node(row.pop("node"), **row)
        for row in self.links.to_pylist():
            a, b = row.pop("a"), row.pop("b")
            if graph.has_edge(a, b):
                graph[a][b]["links"] += 1
            else:
                graph.add_edge(a, b, links=1, **row)
        return graph

    def __repr__(self) -> str:
        return f"<netsim.Topology: {self.nodes.num_rows} nodes, {self.links.num_rows} links>"


class _ProgressBar:
    """A tqdm bar over simulated microseconds, opened at the first report
    (0.1 s into the run, so short runs show none); nothing without tqdm."""

    def __init__(self, end_us: Optional[int]):
        self.end_us = end_us
        self.bar = None

    def __call__(self, sim_time_ns: int, events: int) -> None:
        if self.bar is None:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=self.end_us, unit="us", desc="netsim", leave=False)
        self.bar.n = round(sim_time_ns / 1e3, 1)
        self.bar.set_postfix_str(f"{events / 1e6:.1f} M events", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Run:
    """A finished run: every table the CLI writes, as ``pyarrow.Table``
    (``run.flows``, ``run.queues``, ``run.links``, ``run.pfc``,
    ``run.collectives``, ``run.faults``, ``run.switch_offload``), and
    ``run.summary``, what ``run.json`` holds.

    The tables share their memory with the simulator's output: nothing is
    copied or written to disk. ``save(dir)`` writes the CLI's dataset.
    """

    def __init__(self, inner: "_netsim.RunResult"):
        self._inner = inner
        self._tables: Dict[str, pa.Table] = {}
        self._summary: Optional[Dict[str, Any]] = None

    @property
    def tables(self) -> List[str]:
        """The names of the run's tables."""
        return list(self._inner.table_names())

    @property
    def summary(self) -> Dict[str, Any]:
        """What ``run.json`` holds, as a dict."""
        if self._summary is None:
            self._summary = json.loads(self._inner.summary_json())
        return self._summary

    def table(self, name: str) -> pa.Table:
        """Table ``name`` (see ``tables``)."""
        if name not in self._tables:
            self._tables[name] = self._inner.table(name)
        return self._tables[name]

    def __getattr__(self, name: str) -> pa.Table:
        if name.startswith("_") or name not in self._inner.table_names():
            raise AttributeError(name)
        return self.table(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.tables))

    def to_polars(self, name: str = "flows"):
        """Table ``name`` as a polars DataFrame (zero-copy where polars can)."""
        import polars as pl

        return pl.from_arrow(self.table(name))

    def to_pandas(self, name: str = "flows"):
        """Table ``name`` as a pandas DataFrame."""
        return self.table(name).to_pandas()

    def save(self, out_dir: "str | os.PathLike[str]") -> None:
        """Writes the run as ``netsim run --out out_dir`` would: one Parquet
        dataset per table, the same files, and ``run.json``."""
        self._inner.save(os.fspath(out_dir))

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<netsim.Run {s['scenario']!r}: {s['flows_finished']}/{s['flows']} flows "
            f"finished, simulated {s['sim_end_ns'] / 1e3:.1f} us, tables {', '.join(self.tables)}>"
        )
