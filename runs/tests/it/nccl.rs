//! NCCL's model from the command line and scenario files: --pxn,
//! --protocol, --nvls and --algo auto reach the workload, bad values exit
//! with code 2 naming the flag.

use crate::common::{netsim, run_json, scratch, stderr};

/// A scenario's `pxn` and `protocol` keys run the all-gather as SimAI's
/// MockNccl with `AS_PXN_ENABLE=1` builds it and netsim relays it: 8
/// rings of 16 GPUs, 15 steps, and one NVLink relay per server, step and
/// ring (1,920 + 240 flows).
#[test]
fn scenario_keys_select_pxn_and_the_protocol() {
    let dir = scratch("nccl-scenario");
    let scenario = dir.join("pxn.toml");
    std::fs::write(
        &scenario,
        "topo = \"spectrum-x\"\ngpus = 16\n[workload]\nworkload = \"allgather\"\nsize = \"64KiB\"\nalgo = \"ring\"\npxn = \"on\"\nprotocol = \"simple\"\n",
    )
    .unwrap();
    let out = dir.join("out");
    let o = netsim(format!(
        "--config {} --threads 1 --quiet --out {}",
        scenario.display(),
        out.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let run = run_json(&out);
    assert_eq!(run["collectives_finished"], 1);
    assert_eq!(run["rows"]["flows"], 1920 + 240);
}

#[test]
fn bad_nccl_values_exit_with_code_2_naming_the_flag() {
    let dir = scratch("nccl-bad");
    let out = dir.join("out");
    for (args, needle) in [
        ("--pxn maybe", "--pxn"),
        ("--nvls 1", "--nvls"),
        ("--protocol ll64", "--protocol"),
        ("--algo nvls --workload alltoall", "--algo"),
        ("--algo ring --nvls-flows mocknccl", "--nvls-flows"),
    ] {
        let o = netsim(format!(
            "--topo spectrum-x --gpus 16 --workload allreduce --out {} {args}",
            out.display()
        ));
        assert_eq!(o.status.code(), Some(2), "{args}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args}: {}", stderr(&o));
    }
}

/// `--nvls-flows nccl` is the default: it leaves a run without NCCL's
/// model as it was (the same flows as without the flag).
#[test]
fn the_default_nvls_flows_asks_for_nothing() {
    let dir = scratch("nccl-nvls-flows");
    let flows = |extra: &str| {
        let out = dir.join("out");
        let o = netsim(format!(
            "--topo spectrum-x --gpus 16 --workload allreduce --size 64KiB --algo ring \
             --threads 1 --quiet --out {} {extra}",
            out.display()
        ));
        assert!(o.status.success(), "{extra}: {}", stderr(&o));
        run_json(&out)["rows"]["flows"].clone()
    };
    assert_eq!(flows("--nvls-flows nccl"), flows(""));
}
