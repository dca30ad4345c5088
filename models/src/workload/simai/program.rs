//! One stage's program of phases from the layer lines, and a pipeline of
//! such programs wired by `send` phases (see the module above).

use super::Layer;
use crate::workload::groups::{GroupSpec, Parallelism};
use crate::workload::spec::{Phase, PhaseKind};
use netsim_engine::SimTime;

/// The layer lines and where the backward recomputes forwards.
pub(super) struct Program<'a> {
    pub(super) layers: &'a [Layer],
    /// Per line, the name its phases carry (micro-batch prefixed in a pipeline).
    pub(super) names: Vec<String>,
    /// Per layer: recompute the forwards of layers `from..layer` before its backward.
    pub(super) recompute: &'a [Option<usize>],
}

/// The half of a step a pass over the lines runs: forward first to last,
/// backward last to first.
#[derive(Clone, Copy)]
enum Pass {
    Forward,
    Backward,
}

/// Where a stage waits for, or sends to, a neighbouring stage.
struct Pipe {
    /// Per micro-batch: the phase (a `send`) the stage waits for before it.
    recv: Vec<Option<usize>>,
    /// Per line: `Some(m)` if micro-batch `m` ends there (forward: its last
    /// line; backward: its first line).
    send_after: Vec<Option<usize>>,
    /// Per line: `Some(m)` if micro-batch `m` starts there.
    recv_before: Vec<Option<usize>>,
}

impl Program<'_> {
    /// The program of every rank, without a pipeline.
    pub(super) fn single(&self) -> Vec<Phase> {
        let (mut phases, mut last) = (Vec::new(), None);
        for pass in [Pass::Forward, Pass::Backward] {
            self.pass(pass, None, &mut phases, &mut last, None, &mut |_, _, _| {});
        }
        phases
    }

    /// One pass over every line on `stage`, after `last`: each line waits
    /// for the transfer of a micro-batch that starts there, and
    /// `on_boundary` runs after each line where a micro-batch ends.
    fn pass(
        &self,
        pass: Pass,
        stage: Option<u32>,
        phases: &mut Vec<Phase>,
        last: &mut Option<usize>,
        pipe: Option<&Pipe>,
        on_boundary: &mut dyn FnMut(&mut Vec<Phase>, usize, usize),
    ) {
        let n = self.layers.len();
        let lines = (0..n).map(|k| match pass {
            Pass::Forward => k,
            Pass::Backward => n - 1 - k,
        });
        for i in lines {
            let wait = pipe.and_then(|p| p.recv[p.recv_before[i]?]);
            match pass {
                Pass::Forward => self.forward_line(stage, phases, last, i, wait),
                Pass::Backward => self.backward_line(stage, phases, last, i, wait),
            }
            if let Some(m) = pipe.and_then(|p| p.send_after[i]) {
                on_boundary(phases, m, last.expect("a line adds phases"));
            }
        }
    }

    /// Line `i`'s forward, after `last` and `wait`.
    fn forward_line(
        &self,
        stage: Option<u32>,
        phases: &mut Vec<Phase>,
        last: &mut Option<usize>,
        i: usize,
        wait: Option<usize>,
    ) {
        let (l, name) = (&self.layers[i], &self.names[i]);
        let after: Vec<usize> = last.iter().copied().chain(wait).collect();
        *last = Some(push(
            phases,
            format!("{name}.fwd"),
            compute(l.compute[0]),
            after,
            stage,
        ));
        if let Some(op) = &l.comm[0] {
            *last = Some(push(
                phases,
                format!("{name}.fwd.{}", op.op.name()),
                PhaseKind::Collective(op.clone()),
                vec![last.unwrap()],
                stage,
            ));
        }
    }

    /// Line `i`'s backward (recomputing forwards first where asked),
    /// after `last` and `wait`.
    fn backward_line(
        &self,
        stage: Option<u32>,
        phases: &mut Vec<Phase>,
        last: &mut Option<usize>,
        i: usize,
        mut wait: Option<usize>,
    ) {
        let (l, name) = (&self.layers[i], &self.names[i]);
        if let Some(from) = self.recompute[i] {
            for j in from..i {
                self.forward_line(stage, phases, last, j, wait.take());
            }
        }
        let after: Vec<usize> = last.iter().copied().chain(wait).collect();
        *last = Some(push(
            phases,
            format!("{name}.ig"),
            compute(l.compute[1]),
            after,
            stage,
        ));
        if let Some(op) = &l.comm[1] {
            *last = Some(push(
                phases,
                format!("{name}.ig.{}", op.op.name()),
                PhaseKind::Collective(op.clone()),
                vec![last.unwrap()],
                stage,
            ));
        }
        *last = Some(push(
            phases,
            format!("{name}.wg"),
            compute(l.compute[2]),
            vec![last.unwrap()],
            stage,
        ));
        let mut update_after = vec![last.unwrap()];
        if let Some(op) = &l.comm[2] {
            // Overlaps the rest of the backward pass.
            update_after = vec![push(
                phases,
                format!("{name}.wg.{}", op.op.name()),
                PhaseKind::Collective(op.clone()),
                vec![last.unwrap()],
                stage,
            )];
        }
        push(
            phases,
            format!("{name}.update"),
            compute(l.update),
            update_after,
            stage,
        );
    }

    /// Every stage's program with the transfers between them: forwards
    /// stage 0 first (each waits for the activations of the stage before),
    /// then backwards from the last stage (each waits for the gradients of
    /// the stage after).
    pub(super) fn pipeline(&self, p: &Parallelism, starts: &[usize], pp_comm: u64) -> Vec<Phase> {
        let n = self.layers.len();
        let ga = starts.len();
        let mut first_of = vec![None; n];
        let mut last_of = vec![None; n];
        for (m, &s) in starts.iter().enumerate() {
            let end = starts.get(m + 1).copied().unwrap_or(n) - 1;
            first_of[s] = Some(m);
            last_of[end] = Some(m);
        }
        let mut phases = Vec::new();
        let mut last: Vec<Option<usize>> = vec![None; p.pp as usize];
        // sent[m]: the send phase into the next stage to consume.
        let mut sent: Vec<Option<usize>> = vec![None; ga];
        for s in 0..p.pp {
            let start = push(
                &mut phases,
                "start".into(),
                compute(SimTime::ZERO),
                Vec::new(),
                Some(s),
            );
            last[s as usize] = Some(start);
            let pipe = Pipe {
                recv: std::mem::replace(&mut sent, vec![None; ga]),
                send_after: if s + 1 < p.pp {
                    last_of.clone()
                } else {
                    vec![None; n]
                },
                recv_before: first_of.clone(),
            };
            sent = self.stage_pass(
                Pass::Forward,
                s,
                &mut phases,
                &mut last[s as usize],
                &pipe,
                pp_comm,
            );
        }
        sent = vec![None; ga];
        for s in (0..p.pp).rev() {
            let pipe = Pipe {
                recv: std::mem::replace(&mut sent, vec![None; ga]),
                send_after: if s > 0 {
                    first_of.clone()
                } else {
                    vec![None; n]
                },
                recv_before: last_of.clone(),
            };
            sent = self.stage_pass(
                Pass::Backward,
                s,
                &mut phases,
                &mut last[s as usize],
                &pipe,
                pp_comm,
            );
        }
        phases
    }

    /// Stage `s`'s pass in a pipeline: a micro-batch that ends on this
    /// stage is sent on (`pp_comm` bytes of activations to the next stage
    /// forward, of gradients to the one before backward). Returns, per
    /// micro-batch, the send phase the neighbour waits for.
    fn stage_pass(
        &self,
        pass: Pass,
        s: u32,
        phases: &mut Vec<Phase>,
        last: &mut Option<usize>,
        pipe: &Pipe,
        pp_comm: u64,
    ) -> Vec<Option<usize>> {
        let mut out = vec![None; pipe.recv.len()];
        self.pass(
            pass,
            Some(s),
            phases,
            last,
            Some(pipe),
            &mut |phases, m, after| {
                // Only a stage with a neighbour that way has boundaries.
                let (what, to) = match pass {
                    Pass::Forward => ("activations", s + 1),
                    Pass::Backward => ("gradients", s - 1),
                };
                out[m] = Some(push(
                    phases,
                    format!("mb{m}.{what}"),
                    PhaseKind::Send {
                        size_bytes: pp_comm,
                        from: s,
                        to,
                    },
                    vec![after],
                    Some(s),
                ));
            },
        );
        out
    }
}

fn compute(d: SimTime) -> PhaseKind {
    PhaseKind::Compute {
        duration: d,
        group: GroupSpec::All,
    }
}

fn push(
    phases: &mut Vec<Phase>,
    name: String,
    kind: PhaseKind,
    after: Vec<usize>,
    stage: Option<u32>,
) -> usize {
    phases.push(Phase {
        // In a pipeline, every phase name starts with its stage.
        name: match stage {
            Some(s) => format!("s{s}.{name}"),
            None => name,
        },
        kind,
        after,
        stage,
    });
    phases.len() - 1
}
