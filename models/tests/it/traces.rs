//! Per-rank trace programs built into the DAG and run: a ring of sends,
//! receives and compute against its closed form, a traced collective
//! against the same collective asked for directly, receives from any
//! source, a dependency on another operation's start, and the errors of a
//! trace whose ranks cannot agree.

use crate::common::{self, cc_none};
use netsim_engine::SimTime;
use netsim_models::network::{collective_records, Fabric, NetRun};
use netsim_models::telemetry::MemorySink;
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::trace::{Dep, Op, OpKind, Trace, TraceBuilder};
use netsim_models::workload::{
    build, Algorithm, CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec,
};
use std::sync::Arc;

/// The latency of [`common::link`].
const LINK_NS: u64 = 1000;

fn spec_of(trace: Trace) -> WorkloadSpec {
    WorkloadSpec {
        trace: Some(Arc::new(trace)),
        ..WorkloadSpec::with_phases(Vec::new())
    }
}

use crate::common::star_run as run;

fn build_error(hosts: u32, trace: Trace) -> String {
    let topo = netsim_topo::build(&common::star(hosts)).unwrap();
    build(&spec_of(trace), &topo, &cc_none())
        .unwrap_err()
        .to_string()
}

fn op(kind: OpKind, label: u64) -> Op {
    Op { kind, label }
}

fn after(op: u32) -> Dep {
    Dep {
        op,
        on_start: false,
    }
}

/// Delivery of a message of `size` bytes across the star: every wire byte
/// at 100 Gb/s, two link latencies, and the last packet stored and
/// forwarded by the switch.
fn delivered_ns(size: u64) -> u64 {
    let c = cc_none();
    let (mtu, header) = (u64::from(c.mtu_bytes), u64::from(c.header_bytes));
    let packets = size.div_ceil(mtu);
    let last_packet = size - (packets - 1) * mtu + header;
    let ser_ns = |bytes: u64| bytes * 8 / 100;
    ser_ns(size + packets * header) + 2 * LINK_NS + ser_ns(last_packet)
}

/// A token passed around `n` ranks: each receives it, computes, sends it on.
fn token_ring(n: u32, compute: SimTime, size: u64) -> Trace {
    let mut t = TraceBuilder::new();
    for r in 0..n {
        let first = t.ops_len();
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let recv = OpKind::Recv {
            from: Some(prev),
            bytes: size,
            tag: Some(7),
        };
        let send = OpKind::Send {
            to: next,
            bytes: size,
            tag: 7,
        };
        if r == 0 {
            t.op(op(OpKind::Compute { duration: compute }, 1), &[]);
            t.op(op(send, 2), &[after(first)]);
            t.op(op(recv, 3), &[]);
        } else {
            t.op(op(recv, 1), &[]);
            t.op(
                op(OpKind::Compute { duration: compute }, 2),
                &[after(first)],
            );
            t.op(op(send, 3), &[after(first + 1)]);
        }
        t.end_rank(format!("ring.goal rank {r}"));
    }
    t.finish()
}

#[test]
fn a_token_ring_takes_its_closed_form() {
    let (n, compute_ns, size) = (4u32, 20_000u64, 64 * 1024u64);
    let trace = token_ring(n, SimTime::from_ns(compute_ns), size);
    let (_, run) = run(n, &spec_of(trace));
    // n computes and n deliveries one after another; the run ends when the
    // last sender sees its last ACK (a little after rank 0 has the token).
    let delivered = u64::from(n) * (compute_ns + delivered_ns(size));
    let end = run.sim_end.as_ns();
    assert!(
        end >= delivered && end < delivered + 3 * LINK_NS,
        "ended at {end} ns, the token was back at {delivered} ns"
    );
}

#[test]
fn iterations_run_one_after_another() {
    let trace = token_ring(3, SimTime::from_ns(5_000), 4096);
    let once = run(3, &spec_of(trace.clone())).1.sim_end.as_ns();
    let spec = WorkloadSpec {
        iterations: 3,
        ..spec_of(trace)
    };
    let thrice = run(3, &spec).1.sim_end.as_ns();
    // Each iteration waits at each host for the one before, and the last
    // ACK of one overlaps the next one's first compute.
    assert!(
        thrice > 2 * once && thrice <= 3 * once,
        "{once} ns once, {thrice} ns thrice"
    );
}

#[test]
fn a_traced_collective_runs_as_the_same_collective_asked_for() {
    let (n, size) = (4u32, 1u64 << 20);
    let mut t = TraceBuilder::new();
    let group = t.group((0..n).collect());
    for r in 0..n {
        let coll = OpKind::Collective {
            op: CollectiveOp::AllReduce,
            bytes: size,
            group,
        };
        t.op(op(coll, 10), &[]);
        t.end_rank(format!("rank {r}"));
    }
    let (traced_fabric, traced) = run(n, &spec_of(t.finish()));
    let direct = WorkloadSpec::single(OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Ring,
        size_bytes: size,
        group: GroupSpec::All,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    });
    let (direct_fabric, direct) = run(n, &direct);
    assert_eq!(common::flows(&traced), common::flows(&direct));
    let rows = |f: &Fabric, r: &NetRun<MemorySink>| collective_records(&f.workload, &r.spans());
    assert_eq!(rows(&traced_fabric, &traced), rows(&direct_fabric, &direct));
    assert_eq!(traced.sim_end, direct.sim_end);
}

#[test]
fn receives_from_any_source_take_the_sends_left() {
    // Ranks 1 and 2 send to rank 0, which receives twice from anyone, then
    // computes.
    let mut t = TraceBuilder::new();
    let any = OpKind::Recv {
        from: None,
        bytes: 1000,
        tag: None,
    };
    let a = t.op(op(any, 1), &[]);
    let b = t.op(op(any, 2), &[]);
    let duration = SimTime::from_ns(1_000);
    t.op(op(OpKind::Compute { duration }, 3), &[after(a), after(b)]);
    t.end_rank("rank 0".into());
    for r in 1..3u32 {
        let send = OpKind::Send {
            to: 0,
            bytes: 1000 * u64::from(r),
            tag: r.into(),
        };
        t.op(op(send, 1), &[]);
        t.end_rank(format!("rank {r}"));
    }
    let (fabric, _) = run(3, &spec_of(t.finish()));
    let mut sizes: Vec<u64> = fabric.workload.flows.iter().map(|f| f.size_bytes).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1000, 2000]);
}

#[test]
fn an_operation_may_wait_for_another_to_start() {
    // Rank 0 computes for 50 us; its send starts with the compute, not
    // after it (GOAL's `irequires`), so the message arrives long before.
    let mut t = TraceBuilder::new();
    let long = SimTime::from_us(50);
    let c = t.op(op(OpKind::Compute { duration: long }, 1), &[]);
    let send = OpKind::Send {
        to: 1,
        bytes: 1000,
        tag: 0,
    };
    t.op(
        op(send, 2),
        &[Dep {
            op: c,
            on_start: true,
        }],
    );
    t.end_rank("rank 0".into());
    let recv = OpKind::Recv {
        from: Some(0),
        bytes: 1000,
        tag: Some(0),
    };
    t.op(op(recv, 1), &[]);
    t.end_rank("rank 1".into());
    let (_, run) = run(2, &spec_of(t.finish()));
    let flows = common::flows(&run);
    assert_eq!(flows.len(), 1);
    assert!(flows[0].fct_ns.unwrap() < 10_000, "{:?}", flows[0]);
    assert_eq!(run.sim_end.as_ns(), long.as_ns());
}

#[test]
fn ranks_that_cannot_agree_are_named() {
    // A receive nobody sends to.
    let mut t = TraceBuilder::new();
    let recv = OpKind::Recv {
        from: Some(1),
        bytes: 8,
        tag: None,
    };
    t.op(op(recv, 5), &[]);
    t.end_rank("a.goal rank 0".into());
    t.end_rank("a.goal rank 1".into());
    let e = build_error(2, t.finish());
    assert!(
        e.contains("a.goal rank 0") && e.contains("operation 5") && e.contains("no send"),
        "{e}"
    );

    // Each rank receives before it sends: neither ever starts.
    let mut t = TraceBuilder::new();
    for r in 0..2u32 {
        let recv = OpKind::Recv {
            from: Some(1 - r),
            bytes: 8,
            tag: None,
        };
        let send = OpKind::Send {
            to: 1 - r,
            bytes: 8,
            tag: 0,
        };
        let first = t.ops_len();
        t.op(op(recv, 1), &[]);
        t.op(op(send, 2), &[after(first)]);
        t.end_rank(format!("rank {r}"));
    }
    let e = build_error(2, t.finish());
    assert!(e.contains("never starts"), "{e}");

    // Members that disagree on a collective's size.
    let mut t = TraceBuilder::new();
    let group = t.group(vec![0, 1]);
    for r in 0..2u32 {
        let coll = OpKind::Collective {
            op: CollectiveOp::AllGather,
            bytes: 1024 << r,
            group,
        };
        t.op(op(coll, 9), &[]);
        t.end_rank(format!("rank {r}"));
    }
    let e = build_error(2, t.finish());
    assert!(
        e.contains("rank 1") && e.contains("2048 bytes") && e.contains("1024 bytes"),
        "{e}"
    );

    // More ranks than hosts.
    let e = build_error(2, token_ring(3, SimTime::from_ns(1), 8));
    assert!(e.contains("3 ranks"), "{e}");
}
