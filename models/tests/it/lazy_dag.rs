//! Lazy expansion's task driver (issue 32) against the eager one, without
//! a network: on the 128-GPU MoE, with every task taking a fixed time, the
//! lazy DAG starts the same tasks at the same instants in the same order,
//! expands each collective once, frees each, and holds no more at once
//! when the chain of iterations grows; collectives of one shape live at
//! once share one template.

use crate::common;
use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::traffic::FlowSpec;
use netsim_models::workload::build::lazy::lazy_jobs;
use netsim_models::workload::on_demand::{self, LazyDag, Source};
use netsim_models::workload::progress::{DagProgress, Start};
use netsim_models::workload::{build_jobs, file, Job, Workload};
use netsim_topo::Topology;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

enum Driver<'a> {
    Eager(&'a Workload, DagProgress),
    Lazy(Source<'a>, LazyDag),
}

impl Driver<'_> {
    /// Starts `task`: how long it takes, and its flow if it is one.
    fn start(&mut self, task: u32, now: SimTime) -> (SimTime, Option<(u32, FlowSpec)>) {
        let start = match self {
            Driver::Eager(w, d) => d.start(w, task, now),
            Driver::Lazy(src, d) => d.start(*src, task, now),
        };
        match start {
            Start::Compute { after, .. } => (after, None),
            Start::Flow { flow, after } => {
                let (spec, info) = match self {
                    Driver::Eager(w, _) => (w.flows[flow as usize], w.flow_info(flow).unwrap()),
                    Driver::Lazy(src, d) => (d.flow_spec(*src, flow), d.flow_info(*src, flow)),
                };
                assert_eq!(info.task, task);
                // 10 Gb/s: 800 ps a byte.
                (after + SimTime(spec.size_bytes * 800), Some((flow, spec)))
            }
        }
    }

    fn seen(&mut self, task: u32, host: u32, at_source: bool, now: SimTime, ready: &mut Vec<u32>) {
        match self {
            Driver::Eager(w, d) => d.seen_complete(w, task, host, at_source, now, ready),
            Driver::Lazy(src, d) => d.seen_complete(*src, task, host, at_source, now, ready),
        }
    }
}

/// Every start of a run, in order: `(time, host, task, flow)`.
type Log = Vec<(SimTime, u32, u32, Option<u32>)>;

/// What a lazy run held: the collectives it expanded, the most live at
/// once, and the most tasks their templates held at once.
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    expansions: u64,
    peak_live: u64,
    peak_held_tasks: u64,
}

/// Runs the DAG from `roots` (`(host, task)`): its starts, and for a lazy
/// DAG what it held.
fn run(mut driver: Driver<'_>, roots: &[(u32, u32)]) -> (Log, Held) {
    let mut log = Vec::new();
    let mut queue = BinaryHeap::new();
    let mut seq = 0u64;
    let mut start = |driver: &mut Driver<'_>, queue: &mut BinaryHeap<_>, host, task, now| {
        let (after, flow) = driver.start(task, now);
        log.push((now, host, task, flow.map(|f| f.0)));
        let (src, dst) = flow.map_or((host, host), |(_, s)| (s.src, s.dst));
        seq += 1;
        queue.push(Reverse((now + after, seq, task, src, dst, flow.is_some())));
    };
    for &(host, task) in roots {
        start(&mut driver, &mut queue, host, task, SimTime::ZERO);
    }
    let mut ready = Vec::new();
    while let Some(Reverse((now, _, task, src, dst, is_flow))) = queue.pop() {
        let sides: &[(u32, bool)] = if is_flow {
            &[(src, true), (dst, false)]
        } else {
            &[(src, true)]
        };
        for &(host, at_source) in sides {
            driver.seen(task, host, at_source, now, &mut ready);
            for t in ready.drain(..) {
                start(&mut driver, &mut queue, host, t, now);
            }
        }
    }
    let counters = match &driver {
        Driver::Lazy(_, d) => {
            assert_eq!(d.live(), 0, "every collective freed at the end");
            assert_eq!(d.held_tasks(), 0, "every template freed at the end");
            Held {
                expansions: d.expansions,
                peak_live: d.peak_live,
                peak_held_tasks: d.peak_held_tasks,
            }
        }
        Driver::Eager(..) => Held::default(),
    };
    (log, counters)
}

/// The MoE repeated `iterations` times, run eager and lazy on one shard:
/// the same starts; returns the lazy run's expansions and peak live.
fn lazy_against_eager(iterations: u32) -> (u64, u64) {
    let (topo, job) = common::moe_128_job(iterations);
    let held = job_lazy_against_eager(&topo, &job);
    (held.expansions, held.peak_live)
}

/// `job` run eager and lazy on one shard: the same starts; returns what
/// the lazy run held.
fn job_lazy_against_eager(topo: &Topology, job: &Job) -> Held {
    let config = NetConfig::default();
    let jobs = std::slice::from_ref(job);
    let eager = build_jobs(jobs, &[], topo, &config).unwrap();
    let lazy = lazy_jobs(jobs, &[], topo, &config).unwrap();
    let plan = lazy.lazy.clone().unwrap();
    let src = Source {
        workload: &lazy,
        topo,
        config: &config,
    };
    let (dag, mut lazy_roots) = LazyDag::new(src, plan.clone(), (0..topo.node_count()).collect());
    let mut roots: Vec<(u32, u32)> = (eager.tasks.iter().enumerate())
        .filter(|(_, t)| t.deps == 0)
        .map(|(i, t)| (t.host, i as u32))
        .collect();
    roots.sort_unstable();
    lazy_roots.sort_unstable();
    assert_eq!(lazy_roots, roots);
    let (eager_log, _) = run(Driver::Eager(&eager, DagProgress::new(&eager)), &roots);
    let (lazy_log, held) = run(Driver::Lazy(src, dag), &roots);
    assert_eq!(lazy_log.len(), eager.tasks.len(), "every task started");
    assert!(lazy_log == eager_log, "the lazy DAG starts other tasks");
    // One shard: each collective expanded once, some of those whose
    // member waits for nothing a second time (probed as the run starts).
    assert!(held.expansions as usize >= plan.plans());
    held
}

#[test]
fn the_lazy_dag_starts_the_eager_tasks_and_holds_as_many_collectives_for_a_longer_chain() {
    let (one, live_one) = lazy_against_eager(1);
    let (_, live_four) = lazy_against_eager(4);
    // Iterations wait for each other: a chain four times longer holds no
    // more collectives at once.
    assert_eq!(
        live_four, live_one,
        "{live_one} live for 1 iteration, {live_four} for 4"
    );
    assert!(live_one < one, "{live_one} of {one} live at once");
}

/// The job of workload `text` on every host of `topo`, built lazily.
fn lazy_job(topo: &Topology, text: &str) -> (Job, Workload) {
    let hosts = topo.host_count();
    let job = Job {
        name: None,
        spec: file::parse(text, "w.toml", hosts).unwrap(),
        hosts: (0..hosts).collect(),
        start: SimTime::ZERO,
    };
    let lazy = lazy_jobs(std::slice::from_ref(&job), &[], topo, &NetConfig::default()).unwrap();
    (job, lazy)
}

/// The 8 data-parallel ring all-reduces of a 128-GPU job (TP 8, DP 16,
/// 4 MiB) start at once and are live together; they are of one shape, so
/// the lazy DAG holds one template of 2 x 15 x 16 flow tasks, not eight
/// (issue 32: at 32,768 GPUs dozens of 0.55 M-task all-reduces were held
/// each in full), and starts the eager tasks.
#[test]
fn all_reduces_of_one_shape_live_at_once_share_one_template() {
    let (topo, _) = common::moe_128_job(1);
    let text = "[parallelism]\ntp = 8\n\n[[phase]]\nname = \"backward\"\ncompute_us = 50\n\n\
                [[phase]]\nname = \"gradients\"\ncollective = \"allreduce\"\nsize = \"4MiB\"\n\
                algo = \"ring\"\ngroup = \"dp\"\n";
    let (job, lazy) = lazy_job(&topo, text);
    let plan = lazy.lazy.as_ref().unwrap();
    assert_eq!(plan.plans(), 8, "one all-reduce per data-parallel group");
    let tasks = u64::from(plan.ids().task) - plan.kept_tasks();
    let one = tasks / 8;
    assert!(one >= 2 * 15 * 16, "{one} tasks an all-reduce");
    let held = job_lazy_against_eager(&topo, &job);
    assert_eq!(held.peak_live, 8, "the eight live at once");
    assert_eq!(held.peak_held_tasks, one, "of {tasks} tasks in all");
    // The memory check counts a count a task and at most four templates
    // (it counted 128 B a task: 508 KB here), and what was held fits.
    let (count, task) = (
        on_demand::BYTES_PER_LIVE_COUNT,
        on_demand::BYTES_PER_LIVE_TASK,
    );
    let predicted = plan.live_bytes(&topo);
    assert_eq!(predicted, tasks * count + 4 * one * task);
    assert!(tasks * count + held.peak_held_tasks * task <= predicted);
}

/// Collectives without a shape (here NCCL's choice, `auto`) keep a
/// template each, so the memory check counts their live tasks whole even
/// when the largest collective shares its template: the sixteen
/// tensor-parallel all-reduces live beside the eight data-parallel ones
/// must fit what it predicts (the largest's sharing alone, at four
/// templates, counted them a byte each).
#[test]
fn collectives_without_a_shape_are_counted_whole_beside_shared_templates() {
    // A fat-tree: no NVSwitch, so NCCL's choice is a ring or a tree.
    let topo = netsim_topo::build(&common::fat_tree(8, 3)).unwrap();
    let text = "[parallelism]\ntp = 8\n\n[[phase]]\nname = \"backward\"\ncompute_us = 50\n\n\
                [[phase]]\nname = \"gradients\"\ncollective = \"allreduce\"\nsize = \"4MiB\"\n\
                algo = \"ring\"\ngroup = \"dp\"\n\n\
                [[phase]]\nname = \"activations\"\ncollective = \"allreduce\"\nsize = \"4MiB\"\n\
                algo = \"auto\"\ngroup = \"tp\"\nafter = [\"backward\"]\n";
    let (job, lazy) = lazy_job(&topo, text);
    let plan = lazy.lazy.as_ref().unwrap();
    let tasks = u64::from(plan.ids().task) - plan.kept_tasks();
    let held = job_lazy_against_eager(&topo, &job);
    assert_eq!(held.peak_live, 8 + 16, "every all-reduce live at once");
    let (count, task) = (
        on_demand::BYTES_PER_LIVE_COUNT,
        on_demand::BYTES_PER_LIVE_TASK,
    );
    let predicted = plan.live_bytes(&topo);
    assert!(
        tasks * count + held.peak_held_tasks * task <= predicted,
        "held {} template tasks of {tasks}; predicted {predicted} B",
        held.peak_held_tasks
    );
}
