//! Communication groups: explicit rank lists, or the groups of a
//! parallelism layout (TP, DP, PP, EP) over the GPUs.
//!
//! Ranks are a job's GPUs (rank `r` is host `r` unless the job is placed
//! elsewhere), and the SimAI fabrics number the GPUs of one server
//! consecutively. The layout is SimAI's (`MockNcclGroup`): TP is the
//! fastest-varying dimension (a TP group stays inside a server), then PP,
//! then DP: `rank = (dp * pp_size + pp) * tp_size + tp`, so a DP group is
//! the ranks `q, q + tp*pp, q + 2*tp*pp, ...`. EP splits each DP group into
//! consecutive expert groups of `ep` ranks; DP_EP groups the DP ranks that
//! hold the same expert (stride `ep` within the DP group). With `pp = 1`
//! these are exactly SimAI's groups; SimAI builds EP groups from `ep`
//! consecutive TP groups whatever `pp` is (it does not run the pipeline),
//! which with `pp > 1` would put one expert group across stages; netsim
//! keeps every EP group inside one stage.

use netsim_topo::NodeIndex;

/// Sizes of the parallel dimensions; their product (without EP, which
/// divides DP) is the number of ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallelism {
    pub tp: u32,
    pub dp: u32,
    pub pp: u32,
    pub ep: u32,
}

/// Which groups a collective runs on. A derived kind means every group of
/// that kind, each running its own instance of the collective.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupSpec {
    All,
    Tp,
    Dp,
    Pp,
    Ep,
    DpEp,
    Ranks(Vec<NodeIndex>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("{0}")]
    Invalid(String),
}

impl Parallelism {
    /// Everything data-parallel over `ranks`.
    pub fn data_parallel(ranks: u32) -> Parallelism {
        Parallelism {
            tp: 1,
            dp: ranks,
            pp: 1,
            ep: 1,
        }
    }

    /// `tp`, `pp` and `ep` given, DP filling the rest of `ranks`.
    pub fn new(ranks: u32, tp: u32, pp: u32, ep: u32) -> Result<Parallelism, GroupError> {
        if tp == 0 || pp == 0 || ep == 0 {
            return Err(GroupError::Invalid(
                "parallel sizes (tp, pp, ep) must be positive".into(),
            ));
        }
        if !ranks.is_multiple_of(tp * pp) {
            return Err(GroupError::Invalid(format!(
                "tp {tp} x pp {pp} does not divide the {ranks} ranks"
            )));
        }
        let dp = ranks / (tp * pp);
        if !dp.is_multiple_of(ep) {
            return Err(GroupError::Invalid(format!(
                "ep {ep} does not divide the data-parallel size {dp}"
            )));
        }
        Ok(Parallelism { tp, dp, pp, ep })
    }

    pub fn ranks(&self) -> u32 {
        self.tp * self.dp * self.pp
    }

    /// The rank at coordinates (`tp`, `dp`, `pp`).
    pub fn rank(&self, tp: u32, dp: u32, pp: u32) -> u32 {
        (dp * self.pp + pp) * self.tp + tp
    }

    /// The pipeline stage of `rank`.
    pub fn stage_of(&self, rank: u32) -> u32 {
        (rank / self.tp) % self.pp
    }

    /// The groups of kind `spec` inside pipeline stage `stage` (all stages
    /// for `None`); `All` becomes the stage's ranks.
    pub fn groups_in(&self, spec: &GroupSpec, stage: Option<u32>) -> Vec<Vec<NodeIndex>> {
        let Some(s) = stage else {
            return self.groups(spec);
        };
        match spec {
            // The stage's ranks, ascending: rank(t, d, s) grows with d, then t.
            GroupSpec::All if s < self.pp => vec![(0..self.dp)
                .flat_map(|d| (0..self.tp).map(move |t| self.rank(t, d, s)))
                .collect()],
            GroupSpec::All => vec![Vec::new()],
            GroupSpec::Ranks(_) => self
                .groups(spec)
                .into_iter()
                .filter(|g| g.first().is_some_and(|&r| self.stage_of(r) == s))
                .collect(),
            // Only the stage's groups are made (a SimAI job of 12 stages
            // made and dropped eleven in twelve for each phase): those of
            // `groups` whose first rank is on stage `s`, in its order.
            _ => self.groups_on(spec, s.min(self.pp)..(s + 1).min(self.pp)),
        }
    }

    /// The groups of kind `spec`, each a list of ranks in group order.
    pub fn groups(&self, spec: &GroupSpec) -> Vec<Vec<NodeIndex>> {
        self.groups_on(spec, 0..self.pp)
    }

    /// [`Parallelism::groups`] whose first rank is on a stage of `stages`
    /// (every stage for `All` and `Ranks`).
    fn groups_on(&self, spec: &GroupSpec, stages: std::ops::Range<u32>) -> Vec<Vec<NodeIndex>> {
        let (tp, dp, pp, ep) = (self.tp, self.dp, self.pp, self.ep);
        let mut out = Vec::new();
        match spec {
            // [`Parallelism::groups_in`] filters these two itself.
            GroupSpec::All => out.push((0..self.ranks()).collect()),
            GroupSpec::Ranks(r) => out.push(r.clone()),
            GroupSpec::Tp => {
                for d in 0..dp {
                    for p in stages.clone() {
                        out.push((0..tp).map(|t| self.rank(t, d, p)).collect());
                    }
                }
            }
            GroupSpec::Dp => {
                for p in stages {
                    for t in 0..tp {
                        out.push((0..dp).map(|d| self.rank(t, d, p)).collect());
                    }
                }
            }
            // A pipeline group's first rank is on stage 0.
            GroupSpec::Pp if stages.contains(&0) => {
                for d in 0..dp {
                    for t in 0..tp {
                        out.push((0..pp).map(|p| self.rank(t, d, p)).collect());
                    }
                }
            }
            GroupSpec::Pp => {}
            GroupSpec::Ep => {
                for p in stages {
                    for t in 0..tp {
                        for e0 in (0..dp).step_by(ep as usize) {
                            out.push((e0..e0 + ep).map(|d| self.rank(t, d, p)).collect());
                        }
                    }
                }
            }
            GroupSpec::DpEp => {
                for p in stages {
                    for t in 0..tp {
                        for e in 0..ep {
                            out.push(
                                (e..dp)
                                    .step_by(ep as usize)
                                    .map(|d| self.rank(t, d, p))
                                    .collect(),
                            );
                        }
                    }
                }
            }
        }
        out
    }
}

impl GroupSpec {
    /// `all`, `tp`, `dp`, `pp`, `ep`, `dp_ep`, or a rank list such as
    /// `0,1,4-7`.
    pub fn parse(s: &str) -> Result<GroupSpec, GroupError> {
        Ok(match s.trim() {
            "all" | "world" => GroupSpec::All,
            "tp" => GroupSpec::Tp,
            "dp" => GroupSpec::Dp,
            "pp" => GroupSpec::Pp,
            "ep" => GroupSpec::Ep,
            "dp_ep" | "dp-ep" => GroupSpec::DpEp,
            list => GroupSpec::Ranks(parse_rank_list(list)?),
        })
    }

    pub fn name(&self) -> String {
        match self {
            GroupSpec::All => "all".into(),
            GroupSpec::Tp => "tp".into(),
            GroupSpec::Dp => "dp".into(),
            GroupSpec::Pp => "pp".into(),
            GroupSpec::Ep => "ep".into(),
            GroupSpec::DpEp => "dp_ep".into(),
            GroupSpec::Ranks(r) => format!("{} ranks", r.len()),
        }
    }
}

/// Ranks are hosts, and no topology has more nodes than this: a rank list
/// is checked against it before anything is allocated for it.
pub const MAX_RANKS: u32 = 1 << 26;

/// `0,1,4-7` -> `[0, 1, 4, 5, 6, 7]`; ranks must be distinct and below
/// [`MAX_RANKS`].
pub fn parse_rank_list(s: &str) -> Result<Vec<NodeIndex>, GroupError> {
    let bad = |part: &str| {
        GroupError::Invalid(format!(
            "`{part}` is not a rank or a range `a-b` (expected all, tp, dp, pp, ep, dp_ep or a list such as 0,1,4-7)"
        ))
    };
    let mut ranks = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = a.trim().parse().map_err(|_| bad(part))?;
            let b: u32 = b.trim().parse().map_err(|_| bad(part))?;
            if a > b {
                return Err(bad(part));
            }
            check_rank(b)?;
            if ranks.len() as u64 + u64::from(b - a) >= u64::from(MAX_RANKS) {
                return Err(GroupError::Invalid(format!(
                    "the group lists more than {MAX_RANKS} ranks, more than any topology's hosts"
                )));
            }
            ranks.extend(a..=b);
        } else {
            let rank = part.parse().map_err(|_| bad(part))?;
            check_rank(rank)?;
            ranks.push(rank);
        }
    }
    let mut sorted = ranks.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(GroupError::Invalid(format!(
            "rank {} appears twice in the group",
            w[0]
        )));
    }
    Ok(ranks)
}

fn check_rank(rank: u32) -> Result<(), GroupError> {
    if rank >= MAX_RANKS {
        return Err(GroupError::Invalid(format!(
            "rank {rank} is beyond the largest topology ({MAX_RANKS} hosts)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage's groups are those of every stage whose first rank is on
    /// it, in the same order, for each kind and for a stage past the last.
    #[test]
    fn a_stage_s_groups_are_the_whole_layout_s_filtered() {
        let p = Parallelism::new(96, 2, 3, 4).unwrap();
        let kinds = [
            GroupSpec::All,
            GroupSpec::Ranks(vec![5, 1, 40]),
            GroupSpec::Tp,
            GroupSpec::Dp,
            GroupSpec::Pp,
            GroupSpec::Ep,
            GroupSpec::DpEp,
        ];
        for kind in &kinds {
            for s in 0..5 {
                let filtered: Vec<Vec<u32>> = match kind {
                    GroupSpec::All => vec![(0..96).filter(|&r| p.stage_of(r) == s).collect()],
                    _ => p
                        .groups(kind)
                        .into_iter()
                        .filter(|g| p.stage_of(g[0]) == s)
                        .collect(),
                };
                assert_eq!(
                    p.groups_in(kind, Some(s)),
                    filtered,
                    "{kind:?} on stage {s}"
                );
            }
        }
    }

    #[test]
    fn tp_groups_are_consecutive_and_dp_groups_strided() {
        let p = Parallelism::new(16, 4, 2, 1).unwrap();
        assert_eq!(p.dp, 2);
        let tp = p.groups(&GroupSpec::Tp);
        assert_eq!(tp.len(), 4);
        assert_eq!(tp[0], vec![0, 1, 2, 3]);
        assert_eq!(tp[1], vec![4, 5, 6, 7]);
        let dp = p.groups(&GroupSpec::Dp);
        assert_eq!(dp[0], vec![0, 8]);
        assert_eq!(dp[4], vec![4, 12]);
        // SimAI's DP stride is tp * pp.
        assert_eq!(dp[1], vec![1, 9]);
        let pp = p.groups(&GroupSpec::Pp);
        assert_eq!(pp[0], vec![0, 4]);
        assert_eq!(p.stage_of(4), 1);
        assert_eq!(p.stage_of(8), 0);
        // Every rank is in exactly one group of each kind.
        for kind in [GroupSpec::Tp, GroupSpec::Dp, GroupSpec::Pp] {
            let mut all: Vec<u32> = p.groups(&kind).concat();
            all.sort_unstable();
            assert_eq!(all, (0..16).collect::<Vec<_>>());
        }
    }

    /// PP 4 x EP 2 x TP 8 on 128 GPUs (DP 4), worked by hand from SimAI's
    /// layout: rank 37 is tp 5 of TP group 4 = (dp 1, pp 0).
    #[test]
    fn hand_worked_128_gpu_layout() {
        let p = Parallelism::new(128, 8, 4, 2).unwrap();
        assert_eq!(p.dp, 4);
        let of = |kind: GroupSpec, rank: u32| {
            p.groups(&kind)
                .into_iter()
                .find(|g| g.contains(&rank))
                .unwrap()
        };
        assert_eq!(of(GroupSpec::Tp, 37), (32..40).collect::<Vec<_>>());
        assert_eq!(of(GroupSpec::Dp, 37), vec![5, 37, 69, 101]);
        assert_eq!(of(GroupSpec::Ep, 37), vec![5, 37]);
        assert_eq!(of(GroupSpec::DpEp, 37), vec![37, 101]);
        assert_eq!(of(GroupSpec::Pp, 37), vec![37, 45, 53, 61]);
        assert_eq!(p.stage_of(45), 1);
        assert_eq!(p.stage_of(127), 3);
        // Stage 2's EP groups: 4 of them per tp index, all inside stage 2.
        let ep2 = p.groups_in(&GroupSpec::Ep, Some(2));
        assert_eq!(ep2.len(), 16);
        assert!(ep2.concat().iter().all(|&r| p.stage_of(r) == 2));
        assert_eq!(p.groups_in(&GroupSpec::All, Some(3))[0].len(), 32);
    }

    #[test]
    fn expert_groups_split_dp() {
        let p = Parallelism::new(8, 1, 1, 2).unwrap();
        assert_eq!(p.groups(&GroupSpec::Ep)[1], vec![2, 3]);
        assert_eq!(p.groups(&GroupSpec::DpEp)[1], vec![1, 3, 5, 7]);
    }

    #[test]
    fn rank_lists() {
        assert_eq!(parse_rank_list("0, 2,4-6").unwrap(), vec![0, 2, 4, 5, 6]);
        assert!(parse_rank_list("1,1").is_err());
        assert!(parse_rank_list("3-1").is_err());
        assert!(parse_rank_list("x").is_err());
        assert!(Parallelism::new(12, 5, 1, 1).is_err());
    }
}
