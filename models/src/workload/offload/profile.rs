//! What a switch can aggregate: element types, operators, and the
//! profiles (Tofino, SHARP) with their groups, slots and latency.

use netsim_engine::SimTime;

/// Element type of a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    Int32,
    Int64,
    Float16,
    Bfloat16,
    Float32,
    Float64,
}

impl Dtype {
    pub const ALL: [Dtype; 6] = [
        Dtype::Int32,
        Dtype::Int64,
        Dtype::Float16,
        Dtype::Bfloat16,
        Dtype::Float32,
        Dtype::Float64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
            Dtype::Float16 => "float16",
            Dtype::Bfloat16 => "bfloat16",
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
        }
    }

    pub fn parse(s: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// Reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Min,
    Max,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
        }
    }

    pub fn parse(s: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// What a switch can offload, and at what cost.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchProfile {
    pub name: String,
    /// Added by each switch that aggregates a chunk (or an arrival).
    pub processing: SimTime,
    pub dtypes: Vec<Dtype>,
    pub ops: Vec<ReduceOp>,
    /// Children (member hosts plus child switches) one switch aggregates.
    pub max_children: u32,
    /// Reduction groups one switch holds at once.
    pub max_groups: u32,
    /// Aggregation slots (one packet-sized chunk each) per switch, shared by
    /// its groups; each group gets `slots_per_group` of them.
    pub slots_total: u32,
    pub slots_per_group: u32,
    /// Barrier accelerator: members per barrier group and groups per switch.
    pub barrier_max_members: u32,
    pub barrier_max_groups: u32,
    /// Switch-offloaded barriers enabled.
    pub barriers: bool,
}

impl SwitchProfile {
    /// A Tofino-class programmable switch running a SwitchML/mpitofino-style
    /// aggregation program: 32-bit integer sums only (floats must be
    /// converted by the hosts), about 3 us of pipeline latency end to end
    /// (the calibration of the CF'26 SimGrid study of mpitofino), a few
    /// concurrent jobs sharing the register slots.
    pub fn tofino() -> SwitchProfile {
        SwitchProfile {
            name: "tofino".into(),
            processing: SimTime::from_ns(3_000),
            dtypes: vec![Dtype::Int32],
            ops: vec![ReduceOp::Sum],
            max_children: 64,
            max_groups: 8,
            slots_total: 4096,
            slots_per_group: 512,
            barrier_max_members: 128,
            barrier_max_groups: 256,
            barriers: true,
        }
    }

    /// A SHARP-class switch (InfiniBand Quantum style): integer and floating
    /// types, sum/min/max, a short fixed-function pipeline.
    pub fn sharp() -> SwitchProfile {
        SwitchProfile {
            name: "sharp".into(),
            processing: SimTime::from_ns(500),
            dtypes: Dtype::ALL.to_vec(),
            ops: ReduceOp::ALL.to_vec(),
            max_children: 64,
            max_groups: 64,
            slots_total: 16384,
            slots_per_group: 1024,
            barrier_max_members: 128,
            barrier_max_groups: 256,
            barriers: true,
        }
    }

    pub fn by_name(name: &str) -> Option<SwitchProfile> {
        match name {
            "tofino" => Some(SwitchProfile::tofino()),
            "sharp" => Some(SwitchProfile::sharp()),
            _ => None,
        }
    }
}
