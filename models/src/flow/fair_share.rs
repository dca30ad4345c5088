//! Max-min fair rates of flows over link capacities, recomputed only for the
//! connected components of the flow–link graph that an arrival or departure
//! touched (as SimGrid's LMM solver does).
//!
//! Rates are integers (bits per second) and the filling is exact integer
//! arithmetic, so a run is reproducible bit for bit. Progressive filling: the
//! channel with the smallest fair share (`capacity left / flows not yet
//! fixed`) fixes all its unfixed flows at that share; their rates come off
//! every other channel they cross; repeat. A channel's share never drops when
//! flows at the minimum share are fixed, so a lazy heap of shares suffices.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Active flows, the channels (link directions) each crosses, and their
/// max-min fair rates.
#[derive(Debug)]
pub struct FairShare {
    capacity_bps: Vec<u64>,
    /// Per channel: the active flows crossing it.
    flows_on: Vec<Vec<u32>>,
    /// Per flow: its channels, `path[path_start[f]..path_start[f] + path_len[f]]`.
    path: Vec<u32>,
    path_start: Vec<u32>,
    path_len: Vec<u8>,
    rate_bps: Vec<u64>,
    /// Channels whose set of flows changed since the last [`FairShare::resolve`].
    dirty: Vec<u32>,
    // Scratch for `resolve`, sized once; `*_epoch` marks membership in the
    // component being solved without clearing anything.
    channel_epoch: Vec<u32>,
    flow_epoch: Vec<u32>,
    fixed_epoch: Vec<u32>,
    epoch: u32,
    left_bps: Vec<u64>,
    unfixed: Vec<u32>,
    component_channels: Vec<u32>,
    component_flows: Vec<u32>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// Per component channel: `(share, channel)` (`fill_scan`); per channel:
    /// its index there.
    scan: Vec<(u64, u32)>,
    slot: Vec<u32>,
}

/// Components of at most this many channels find their next bottleneck by
/// a linear scan (cheaper than heap pushes at the sizes workloads make:
/// 7 channels on average on SimAI's MoE example); larger ones use the heap.
const SCAN_CHANNELS: usize = 64;

/// A flow whose rate changed: its rate before (0 if it just arrived).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateChange {
    pub flow: u32,
    pub old_bps: u64,
}

impl FairShare {
    /// Channels with these capacities (> 0 each), room for `flows` flow ids.
    pub fn new(capacity_bps: Vec<u64>, flows: usize) -> FairShare {
        assert!(
            capacity_bps.iter().all(|&c| c > 0),
            "a channel without capacity"
        );
        let channels = capacity_bps.len();
        FairShare {
            capacity_bps,
            flows_on: vec![Vec::new(); channels],
            path: Vec::new(),
            path_start: vec![0; flows],
            path_len: vec![0; flows],
            rate_bps: vec![0; flows],
            dirty: Vec::new(),
            channel_epoch: vec![0; channels],
            flow_epoch: vec![0; flows],
            fixed_epoch: vec![0; flows],
            epoch: 0,
            left_bps: vec![0; channels],
            unfixed: vec![0; channels],
            component_channels: Vec::new(),
            component_flows: Vec::new(),
            heap: BinaryHeap::new(),
            scan: Vec::new(),
            slot: vec![0; channels],
        }
    }

    /// The flow's current rate (0 while inactive or until the next resolve).
    pub fn rate_bps(&self, flow: u32) -> u64 {
        self.rate_bps[flow as usize]
    }

    /// The channels flow `flow` crosses.
    pub fn path(&self, flow: u32) -> &[u32] {
        let start = self.path_start[flow as usize] as usize;
        &self.path[start..start + self.path_len[flow as usize] as usize]
    }

    /// Active flows crossing `channel`.
    pub fn load(&self, channel: u32) -> usize {
        self.flows_on[channel as usize].len()
    }

    /// Flow `flow` starts crossing `channels` (each at most once); its rate
    /// is set by the next [`FairShare::resolve`].
    pub fn add(&mut self, flow: u32, channels: &[u32]) {
        let f = flow as usize;
        assert!(
            !channels.is_empty() && channels.len() <= usize::from(u8::MAX),
            "flow {flow}: a path of {} channels",
            channels.len()
        );
        self.path_start[f] = u32::try_from(self.path.len()).expect("under 2^32 path entries");
        self.path_len[f] = channels.len() as u8;
        self.path.extend_from_slice(channels);
        for &c in channels {
            self.flows_on[c as usize].push(flow);
            self.dirty.push(c);
        }
    }

    /// Flow `flow` stops; returns the rate it had.
    pub fn remove(&mut self, flow: u32) -> u64 {
        let start = self.path_start[flow as usize] as usize;
        let len = self.path_len[flow as usize] as usize;
        for i in start..start + len {
            let c = self.path[i];
            let on = &mut self.flows_on[c as usize];
            let at = on
                .iter()
                .position(|&g| g == flow)
                .expect("flow on its path");
            on.swap_remove(at);
            self.dirty.push(c);
        }
        std::mem::take(&mut self.rate_bps[flow as usize])
    }

    /// Recomputes the rates of every flow in a component touched since the
    /// last call; appends the flows whose rate changed to `changed`.
    pub fn resolve(&mut self, changed: &mut Vec<RateChange>) {
        if self.epoch >= (u32::MAX - 2).saturating_sub(self.dirty.len() as u32) {
            // Epochs are about to wrap: forget every mark.
            self.channel_epoch.fill(0);
            self.flow_epoch.fill(0);
            self.fixed_epoch.fill(0);
            self.epoch = 0;
        }
        // Components solved in this call have epochs from `first` on.
        let first = self.epoch + 1;
        while let Some(seed) = self.dirty.pop() {
            if self.channel_epoch[seed as usize] >= first {
                continue;
            }
            self.epoch += 1;
            self.collect_component(seed);
            self.fill(changed);
        }
    }

    /// The component of `seed`: every channel reachable through shared flows.
    fn collect_component(&mut self, seed: u32) {
        let epoch = self.epoch;
        self.component_channels.clear();
        self.component_flows.clear();
        self.channel_epoch[seed as usize] = epoch;
        self.component_channels.push(seed);
        let mut next = 0;
        while next < self.component_channels.len() {
            let c = self.component_channels[next] as usize;
            next += 1;
            for &f in &self.flows_on[c] {
                if self.flow_epoch[f as usize] == epoch {
                    continue;
                }
                self.flow_epoch[f as usize] = epoch;
                self.component_flows.push(f);
                let start = self.path_start[f as usize] as usize;
                for &c2 in &self.path[start..start + self.path_len[f as usize] as usize] {
                    if self.channel_epoch[c2 as usize] != epoch {
                        self.channel_epoch[c2 as usize] = epoch;
                        self.component_channels.push(c2);
                    }
                }
            }
        }
    }

    /// Progressive filling over the collected component: repeatedly the
    /// channel with the smallest `(share, channel id)` fixes its unfixed
    /// flows. Small components find it by scanning their shares, large ones
    /// through a lazy heap; both pick the same channel at every step.
    fn fill(&mut self, changed: &mut Vec<RateChange>) {
        if self.component_channels.len() <= SCAN_CHANNELS {
            self.fill_scan(changed);
        } else {
            self.fill_heap(changed);
        }
        debug_assert!(self
            .component_flows
            .iter()
            .all(|&f| self.fixed_epoch[f as usize] == self.epoch));
    }

    /// [`FairShare::fill`] with the shares of the component's channels in
    /// one small array, `scan[slot[c]]`, `u64::MAX` once a channel has no
    /// unfixed flow.
    fn fill_scan(&mut self, changed: &mut Vec<RateChange>) {
        self.scan.clear();
        for (i, &c) in self.component_channels.iter().enumerate() {
            let ci = c as usize;
            let n = self.flows_on[ci].len() as u32;
            self.left_bps[ci] = self.capacity_bps[ci];
            self.unfixed[ci] = n;
            self.slot[ci] = i as u32;
            let share = if n > 0 {
                self.capacity_bps[ci] / u64::from(n)
            } else {
                u64::MAX
            };
            self.scan.push((share, c));
        }
        loop {
            let Some(&(share, c)) = self.scan.iter().min() else {
                break;
            };
            if share == u64::MAX {
                break;
            }
            let ci = c as usize;
            self.fix_channel(ci, share.max(1), changed, |s, c2, left, unfixed| {
                s.scan[s.slot[c2] as usize].0 = if unfixed == 0 {
                    u64::MAX
                } else {
                    left / u64::from(unfixed)
                };
            });
            self.scan[self.slot[ci] as usize].0 = u64::MAX;
        }
    }

    /// [`FairShare::fill`] with a lazy heap of `(share, channel)`: an entry
    /// whose share is no longer the channel's is stale and skipped.
    fn fill_heap(&mut self, changed: &mut Vec<RateChange>) {
        self.heap.clear();
        for &c in &self.component_channels {
            let c = c as usize;
            let n = self.flows_on[c].len() as u32;
            self.left_bps[c] = self.capacity_bps[c];
            self.unfixed[c] = n;
            if n > 0 {
                self.heap
                    .push(Reverse((self.capacity_bps[c] / u64::from(n), c as u32)));
            }
        }
        while let Some(Reverse((share, c))) = self.heap.pop() {
            let ci = c as usize;
            if self.unfixed[ci] == 0 || share != self.left_bps[ci] / u64::from(self.unfixed[ci]) {
                continue; // stale entry: a fresher one is in the heap
            }
            self.fix_channel(ci, share.max(1), changed, |s, c2, left, unfixed| {
                if unfixed > 0 {
                    s.heap
                        .push(Reverse((left / u64::from(unfixed), c2 as u32)));
                }
            });
        }
    }

    /// Fixes every unfixed flow on channel `ci` at `rate`, takes it off the
    /// other channels it crosses, and tells `update(self, channel, left,
    /// unfixed)` each such channel's new state (every channel but `ci`).
    fn fix_channel(
        &mut self,
        ci: usize,
        rate: u64,
        changed: &mut Vec<RateChange>,
        mut update: impl FnMut(&mut FairShare, usize, u64, u32),
    ) {
        let epoch = self.epoch;
        for k in 0..self.flows_on[ci].len() {
            let f = self.flows_on[ci][k];
            if self.fixed_epoch[f as usize] == epoch {
                continue;
            }
            self.fixed_epoch[f as usize] = epoch;
            let old = std::mem::replace(&mut self.rate_bps[f as usize], rate);
            if old != rate {
                changed.push(RateChange {
                    flow: f,
                    old_bps: old,
                });
            }
            let start = self.path_start[f as usize] as usize;
            for i in start..start + self.path_len[f as usize] as usize {
                let c2 = self.path[i] as usize;
                self.left_bps[c2] = self.left_bps[c2].saturating_sub(rate);
                self.unfixed[c2] -= 1;
                if c2 != ci {
                    let (left, unfixed) = (self.left_bps[c2], self.unfixed[c2]);
                    update(self, c2, left, unfixed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solve(share: &mut FairShare) -> Vec<RateChange> {
        let mut changed = Vec::new();
        share.resolve(&mut changed);
        changed
    }

    #[test]
    fn flows_on_one_bottleneck_split_it_evenly() {
        let mut s = FairShare::new(vec![100, 100, 30], 3);
        s.add(0, &[0, 2]);
        s.add(1, &[1, 2]);
        s.add(2, &[2]);
        assert_eq!(solve(&mut s).len(), 3);
        assert_eq!((s.rate_bps(0), s.rate_bps(1), s.rate_bps(2)), (10, 10, 10));
    }

    #[test]
    fn a_flow_limited_elsewhere_leaves_its_share_to_the_others() {
        // Classic max-min: flow 0 crosses a 10 b/s channel, so flows 1 and 2
        // share what it leaves of the common 100 b/s channel.
        let mut s = FairShare::new(vec![100, 10], 3);
        s.add(0, &[0, 1]);
        s.add(1, &[0]);
        s.add(2, &[0]);
        solve(&mut s);
        assert_eq!((s.rate_bps(0), s.rate_bps(1), s.rate_bps(2)), (10, 45, 45));
    }

    #[test]
    fn departures_only_touch_their_component() {
        let mut s = FairShare::new(vec![100, 100], 4);
        s.add(0, &[0]);
        s.add(1, &[0]);
        s.add(2, &[1]);
        solve(&mut s);
        assert_eq!(s.remove(1), 50);
        let changed = solve(&mut s);
        assert_eq!(
            changed,
            vec![RateChange {
                flow: 0,
                old_bps: 50
            }]
        );
        assert_eq!((s.rate_bps(0), s.rate_bps(2)), (100, 100));
    }

    #[test]
    fn rates_never_exceed_a_channel_capacity() {
        // A chain of channels with flows of every span over them.
        let caps = vec![70, 50, 90, 30, 110];
        let mut s = FairShare::new(caps.clone(), 15);
        let mut f = 0;
        for a in 0..caps.len() as u32 {
            for b in a..caps.len() as u32 {
                s.add(f, &(a..=b).collect::<Vec<_>>());
                f += 1;
            }
        }
        solve(&mut s);
        for (c, &cap) in caps.iter().enumerate() {
            let used: u64 = (0..f)
                .filter(|&g| s.path(g).contains(&(c as u32)))
                .map(|g| s.rate_bps(g))
                .sum();
            assert!(used <= cap, "channel {c}: {used} > {cap}");
        }
        // Every flow is bottlenecked: some channel it crosses is (nearly) full
        // and gives no other flow on it a higher rate.
        for g in 0..f {
            let bottlenecked = s.path(g).iter().any(|&c| {
                let on: Vec<u32> = (0..f).filter(|&h| s.path(h).contains(&c)).collect();
                let used: u64 = on.iter().map(|&h| s.rate_bps(h)).sum();
                caps[c as usize] - used < on.len() as u64
                    && on.iter().all(|&h| s.rate_bps(h) <= s.rate_bps(g))
            });
            assert!(bottlenecked, "flow {g} could go faster");
        }
    }
}
