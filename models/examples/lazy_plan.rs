//! Measures a workload's build eager against planned only (issue 32's lazy
//! expansion): `lazy_plan TOPO GPUS WORKLOAD FOLD eager|plan`; run it under
//! `/usr/bin/time -v` for the peak RSS.

use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::workload::build::lazy::plan_only_jobs;
use netsim_models::workload::{build_jobs, simai, Algorithm, Job};
use netsim_topo::{SimaiParams, SimaiTemplate, TopoSpec};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, topo, gpus, workload, fold, mode] = &args[..] else {
        panic!("usage: lazy_plan hpn|spectrum-x GPUS WORKLOAD FOLD eager|plan");
    };
    let template = match topo.as_str() {
        "hpn" => SimaiTemplate::Hpn,
        _ => SimaiTemplate::SpectrumX,
    };
    let mut p = SimaiParams::defaults(template);
    p.gpus = gpus.parse().unwrap();
    let topo = netsim_topo::build(&TopoSpec::Simai(p)).unwrap();
    let hosts = topo.host_count();
    let mut spec = simai::read(workload.as_ref(), hosts, Algorithm::Ring).unwrap();
    spec.fold_dp = fold.parse().unwrap();
    let job = Job {
        name: None,
        spec,
        hosts: (0..hosts).collect(),
        start: SimTime::ZERO,
    };
    let config = NetConfig::default();
    let t0 = Instant::now();
    if mode == "eager" {
        let w = build_jobs(&[job], &[], &topo, &config).unwrap();
        let b = w.bytes();
        println!(
            "eager: {} tasks, {} flows, {} collectives, {} edges; {} B (tasks {}, flows {}, dependents {}, collectives {}); {:.2} s",
            w.tasks.len(), w.flows.len(), w.collectives.len(), w.edge_count(),
            b.total(), b.tasks, b.flows, b.dependents, b.collectives,
            t0.elapsed().as_secs_f64()
        );
    } else {
        let (s, plans) = plan_only_jobs(&[job], &[], &topo, &config).unwrap();
        println!(
            "plan: ids {:?}; kept {} tasks, {} flows, {} edges, {} collectives; skeleton {} B, plans {} B ({} plans); {:.2} s",
            s.ids, s.kept_tasks, s.kept_flows, s.edges, s.collectives.len(),
            s.bytes, plans.bytes(), plans.list.len(),
            t0.elapsed().as_secs_f64()
        );
    }
}
