"""The Python API against the CLI: same tables, same files, same errors;
Ctrl-C, a sweep, and tables handed over without a copy."""

import _thread
import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import netsim

ROOT = pathlib.Path(__file__).resolve().parents[2]

# A run with rows in every sampled table: PFC pauses, queues, links, and a
# scenario file the keyword arguments override.
SCENARIO = """
topo = "star"

[topology]
hosts = 9
link-gbps = 100

[traffic]
traffic = "incast"
incast-degree = 8
flow-size = 400000

[network]
cc = "dcqcn"
pfc = "on"
buffer-kb = 512

[output]
sample-ns = 5000
"""

# Timings in run.json, different on every run.
# What the process measures of itself: its time, and its memory (the
# predicted peak adds what the process held at the memory check).
TIMINGS = {
    "wall_s", "setup_s", "simulate_s", "events_per_s", "peak_rss_bytes",
    "peak_rss_predicted_bytes", "per_rank",
}


def cli_binary() -> pathlib.Path:
    """The release `netsim` of this checkout (NETSIM_BIN overrides)."""
    path = pathlib.Path(os.environ.get("NETSIM_BIN", ROOT / "target" / "release" / "netsim"))
    if not path.exists():
        pytest.skip(f"no CLI at {path}: cargo build --release -p netsim, or set NETSIM_BIN")
    return path


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    return path


def run_cli(out, *args):
    subprocess.run(
        [str(cli_binary()), "run", *args, "--out", str(out), "--quiet"],
        check=True,
        capture_output=True,
    )


def parts(out: pathlib.Path):
    return sorted(p.relative_to(out) for p in out.glob("*/part-*.parquet"))


@pytest.mark.parametrize(
    "flags",
    [
        {"threads": 2, "seed": 7},
        {"threads": 1, "fidelity": "flow"},
        {"threads": 3, "shards": 3, "cc": "none", "pfc": "off"},
    ],
)
def test_tables_and_files_equal_the_clis(tmp_path, scenario, flags):
    cli_out = tmp_path / "cli"
    typed = netsim.argv(**flags)[2:-1]
    run_cli(cli_out, "--config", str(scenario), *typed)
    run = netsim.run(str(scenario), progress=False, **flags)

    assert set(run.tables) == {p.name for p in cli_out.iterdir() if p.is_dir()}
    for name in run.tables:
        cli_table = pq.read_table(cli_out / name)
        assert run.table(name).equals(cli_table), name
    assert run.summary["rows"]["flows"] == run.flows.num_rows > 0
    assert run.links.num_rows > 0
    if flags.get("fidelity") != "flow":
        assert run.queues.num_rows > 0

    cli_summary = json.loads((cli_out / "run.json").read_text())
    strip = lambda s: {k: v for k, v in s.items() if k not in TIMINGS}
    assert strip(run.summary) == strip(cli_summary)

    api_out = tmp_path / "api"
    run.save(api_out)
    assert parts(api_out) == parts(cli_out)
    for part in parts(cli_out):
        assert (api_out / part).read_bytes() == (cli_out / part).read_bytes(), part
    assert strip(json.loads((api_out / "run.json").read_text())) == strip(cli_summary)


def test_flags_are_the_clis():
    assert netsim.argv(k=8, fast_forward="on", ecmp=True, quiet=False, end_us=None) == [
        "netsim", "run", "--k", "8", "--fast-forward", "on", "--ecmp", "--quiet",
    ]
    assert netsim.argv(job=["a", "b"])[2:6] == ["--job", "a", "--job", "b"]


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"k": 3}, "--k"),
        ({"no_such_flag": 1}, "--no-such-flag"),
        ({"cc": "bogus"}, "--cc"),
        ({"threads": 0}, "--threads"),
        ({"config": "/nonexistent/scenario.toml"}, "/nonexistent/scenario.toml"),
    ],
)
def test_bad_input_raises_the_clis_message(tmp_path, flags, message):
    with pytest.raises(ValueError, match=message) as raised:
        netsim.run(progress=False, **flags)
    text = str(raised.value)
    assert "\n" not in text
    cli = subprocess.run(
        [str(cli_binary()), "run", *netsim.argv(**flags)[2:], "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 2
    assert cli.stderr.strip() == f"netsim: error: {text}"


def test_scenario_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('topo = "fat-tree"\nk = 5\n')
    with pytest.raises(ValueError, match=r"bad\.toml:2"):
        netsim.run(str(path), progress=False)


@pytest.mark.parametrize(
    "flags",
    [
        # Each tens of seconds uninterrupted on two cores, a second to set up.
        dict(traffic="alltoall", flow_size=1_000_000_000),
        dict(workload="allreduce", size="1GiB", iterations=100, fidelity="flow"),
    ],
)
def test_ctrl_c_stops_a_long_run_within_a_second(flags):
    # A shell that starts a job in the background ignores SIGINT in it,
    # and Python then leaves it ignored (interrupt_main does nothing):
    # install the handler an interactive session has, as this test needs.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ctrl_c_stops_a_long_run(flags)
    finally:
        signal.signal(signal.SIGINT, previous)


def ctrl_c_stops_a_long_run(flags):
    interrupted = []

    def interrupt():
        interrupted.append(time.monotonic())
        _thread.interrupt_main()

    timer = threading.Timer(2.0, interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        netsim.run(topo="fat-tree", k=8, threads=2, progress=False, **flags)
    stopped_s = time.monotonic() - interrupted[0]
    timer.join()
    assert stopped_s < 1.0, stopped_s
    # The engine is left usable, the interrupted run's threads gone.
    assert netsim.run(topo="fat-tree", k=4, progress=False).summary["flows_finished"] == 16
    assert threading.active_count() == 1


def test_a_sweep_over_link_speed():
    p50_ns = []
    for gbps in [25, 50, 100, 200]:
        run = netsim.run(topo="fat-tree", k=4, link_gbps=gbps, flow_size=1_000_000,
                         threads=2, progress=False)
        assert run.summary["flows_finished"] == run.summary["flows"] == 16
        p50_ns.append(run.summary["fct_p50_ns"])
        assert run.flows["fct_ns"].to_pylist() == [
            e - s for s, e in zip(run.flows["start_ns"].to_pylist(), run.flows["end_ns"].to_pylist())
        ]
    assert p50_ns == sorted(p50_ns, reverse=True) and p50_ns[0] > 3 * p50_ns[-1], p50_ns


def test_tables_are_not_copied():
    # Several row groups (16,384 rows each) of queue samples.
    # Idle ports' rows kept: every port at every instant.
    run = netsim.run(topo="fat-tree", k=4, sample_ns=100, flow_size=1_000_000, threads=2,
                     telemetry_idle_rows="keep", progress=False)
    table = run.queues
    assert table.num_rows > 3 * 16_384
    rust = run._inner.value_addresses("queues")
    python = [chunk.buffers()[1].address for chunk in table.column(0).chunks]
    assert python == rust
    # Still valid once the run is gone: pyarrow holds the buffers.
    total = pa.compute.sum(table["qlen_bytes"]).as_py()
    del run
    assert pa.compute.sum(table["qlen_bytes"]).as_py() == total


def test_dataframes():
    run = netsim.run(topo="fat-tree", k=4, progress=False)
    pandas = pytest.importorskip("pandas")
    assert isinstance(run.to_pandas(), pandas.DataFrame)
    assert len(run.to_pandas("links")) == run.links.num_rows
    polars = pytest.importorskip("polars")
    assert run.to_polars().height == 16
    assert "flows" in dir(run)
    with pytest.raises(AttributeError):
        run.no_such_table


def test_topology_has_the_runs_nodes_and_links():
    fabric = netsim.topology("fat-tree", k=4, link_gbps=400)
    # Idle rows kept, so that every link direction has rows.
    run = netsim.run(topo="fat-tree", k=4, link_gbps=400, sample_ns=10_000,
                     telemetry_idle_rows="keep", progress=False)
    assert fabric.nodes.num_rows == run.summary["nodes"] == 36
    assert fabric.links.num_rows == run.summary["links"] == 48
    assert fabric.nodes["role"].to_pylist().count("host") == run.summary["hosts"]
    assert set(fabric.links["bandwidth_bps"].to_pylist()) == {400_000_000_000}
    # A run's links table has both directions of each link, named as here.
    directed = set(zip(run.links["src"].to_pylist(), run.links["dst"].to_pylist(),
                       run.links["tier"].to_pylist()))
    undirected = set(zip(fabric.links["a"].to_pylist(), fabric.links["b"].to_pylist(),
                         fabric.links["tier"].to_pylist()))
    assert undirected <= directed and len(directed) == 2 * len(undirected)
    with pytest.raises(ValueError, match="--k"):
        netsim.topology("fat-tree", k=3)
    networkx = pytest.importorskip("networkx")
    graph = fabric.to_networkx()
    assert graph.number_of_nodes() == 36 and networkx.is_connected(graph)
