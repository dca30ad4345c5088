//! AICB's seven shipped SimAI-format model workloads (`runs/tests/data/aicb`)
//! on a 128-GPU Spectrum-X fabric: each runs to the end at flow level, and
//! the one whose layer count disagrees with its lines is one error naming
//! line 2.

use crate::common::{netsim, run_json, runs_file, scratch, stderr};

/// The files that run, and the collectives each builds.
const RUNNABLE: [(&str, u64); 6] = [
    ("G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100", 2776),
    ("G13B-M1-C02_GPT13B_megatron_tp8_pp1_mbs1_sp_A100", 5336),
    ("G175B-M1-C03_GPT175B_megatron_tp8_pp1_mbs1_A100", 512),
    ("L65B_D1_C08_Llama65B_deepspeed_zero3_A100", 1),
    ("L7B-D1-C02_Llama7B_deepspeed_zero3_A100", 1),
    ("L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1_A100", 9026),
];

fn aicb(name: &str) -> String {
    runs_file(&format!("tests/data/aicb/{name}.txt"))
}

/// Each file runs to the end at flow level (a few seconds each at the
/// test profile's opt-level 1): every collective it builds finishes, the
/// Megatron files' `norm` BROADCAST among them.
#[test]
fn every_consistent_aicb_workload_runs_to_the_end_at_flow_level() {
    for (name, collectives) in RUNNABLE {
        let out = scratch(name);
        let o = netsim(format!(
            "run --topo spectrum-x --gpus 128 --workload {} --fidelity flow --quiet --out {}",
            aicb(name),
            out.display()
        ));
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let run = run_json(&out);
        assert_eq!(run["collectives"], collectives, "{name}");
        assert_eq!(run["collectives_finished"], collectives, "{name}");
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn llama_65b_megatron_says_839_layers_and_is_refused_in_one_line() {
    let out = scratch("l65b");
    let file = aicb("L65B-M1-C05_Llama65B_megatron_tp8_pp1_mbs1_A100");
    let o = netsim(format!(
        "run --topo spectrum-x --gpus 128 --workload {file} --fidelity flow --quiet --out {}",
        out.display()
    ));
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o).trim_end(),
        format!(
            "netsim: error: {file}:2: layer count: line 2 says 839 layers but the file has 33 \
             layer lines"
        )
    );
}
