//! Progressive filling over the region `resolve` collected: the channel with
//! the smallest fair share fixes its unfixed flows, found by a linear scan
//! of the candidate bottlenecks in small regions and a tournament tree in
//! large ones, until every flow of the region is fixed.

use super::{FairShare, RateChange};

impl FairShare {
    /// Progressive filling over the collected region: repeatedly the
    /// channel with the smallest `(share, channel id)` fixes its unfixed
    /// flows. Small regions find it by scanning their candidates' shares,
    /// large ones through a tournament tree; both pick the same channel at every
    /// step.
    pub(super) fn fill(&mut self, changed: &mut Vec<RateChange>) {
        self.candidates();
        if self.scan.len() <= self.scan_channels {
            self.fill_scan(changed);
        } else {
            self.fill_tree(changed);
        }
        debug_assert!(self
            .region_flows
            .iter()
            .all(|&f| self.slot[f as usize].fixed_epoch == self.epoch));
    }

    /// `scan` gets the `(share, channel)` of the region's channels that may
    /// be a bottleneck. A channel that one flow alone crosses (most of a
    /// class's member channels) can only ever fix that flow, and keeps its
    /// share until it does: only the smallest such entry of each flow is a
    /// candidate (the others would come after it, when the flow is fixed
    /// already), and `collect_region` leaves them out of the region's
    /// channels.
    fn candidates(&mut self) {
        self.scan.clear();
        for &c in &self.region_channels {
            let ch = &self.channel[c as usize];
            if ch.unfixed == 0 || self.flows_on[c as usize].len() == 1 {
                continue; // no flow of the region, or a flow's own (a seed)
            }
            self.scan.push((ch.left_bps / u64::from(ch.unfixed), c));
        }
        for &f in &self.region_flows {
            let m = self.private_min[f as usize];
            if m.0 != u64::MAX {
                // Full until its flow is fixed, which leaves it as it is
                // (fixing nothing once it comes up).
                let ch = &mut self.channel[m.1 as usize];
                (ch.left_bps, ch.unfixed) = (ch.capacity_bps, ch.weight_on);
                self.scan.push(m);
            }
        }
    }

    /// [`FairShare::fill`] with the candidates' shares in one small array,
    /// `scan[scan_slot[c]]`, `u64::MAX` once a channel has no unfixed flow.
    fn fill_scan(&mut self, changed: &mut Vec<RateChange>) {
        for (i, &(_, c)) in self.scan.iter().enumerate() {
            self.scan_slot[c as usize] = i as u32;
        }
        while let Some(&(share, c)) = self.scan.iter().min() {
            if share == u64::MAX {
                break;
            }
            let ci = c as usize;
            self.fix_channel(ci, share.max(1), changed, |s, c2, left, unfixed| {
                s.scan[s.scan_slot[c2] as usize].0 = if unfixed == 0 {
                    u64::MAX
                } else {
                    left / u64::from(unfixed)
                };
            });
            self.scan[self.scan_slot[ci] as usize].0 = u64::MAX;
        }
    }

    /// [`FairShare::fill`] with the candidates' `(share, channel)` as the
    /// leaves of a tournament tree (`tree[1]` the least; the children of
    /// `i` are `2i` and `2i + 1`): a step updates each touched channel's
    /// leaf and the minima above it, in place (a heap of the changed
    /// shares would pile up stale entries).
    fn fill_tree(&mut self, changed: &mut Vec<RateChange>) {
        let leaves = self.scan.len().next_power_of_two();
        self.tree.clear();
        self.tree.resize(2 * leaves, (u64::MAX, u32::MAX));
        self.tree[leaves..leaves + self.scan.len()].copy_from_slice(&self.scan);
        for i in (1..leaves).rev() {
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
        for (i, &(_, c)) in self.scan.iter().enumerate() {
            self.scan_slot[c as usize] = (leaves + i) as u32;
        }
        let set = |tree: &mut [(u64, u32)], mut i: usize, share: u64| {
            tree[i].0 = share;
            while i > 1 {
                i /= 2;
                tree[i] = tree[2 * i].min(tree[2 * i + 1]);
            }
        };
        while self.tree[1].0 != u64::MAX {
            let (share, c) = self.tree[1];
            let ci = c as usize;
            self.fix_channel(ci, share.max(1), changed, |s, c2, left, unfixed| {
                let share = if unfixed == 0 {
                    u64::MAX
                } else {
                    left / u64::from(unfixed)
                };
                set(&mut s.tree, s.scan_slot[c2] as usize, share);
            });
            set(&mut self.tree, self.scan_slot[ci] as usize, u64::MAX);
        }
    }

    /// Fixes every unfixed flow of the region on channel `ci` at `rate` (per
    /// member), takes its members off the channels it crosses, and then
    /// tells `update(self, channel, left, unfixed)` the new state of each
    /// such channel that other flows cross too, once (a class crosses many
    /// channels, and a channel is crossed by many of the flows fixed
    /// together). A channel of the flow alone is left as it is: nothing
    /// reads it again.
    fn fix_channel(
        &mut self,
        ci: usize,
        rate: u64,
        changed: &mut Vec<RateChange>,
        mut update: impl FnMut(&mut FairShare, usize, u64, u32),
    ) {
        let epoch = self.epoch;
        if self.step == u32::MAX {
            self.channel.iter_mut().for_each(|c| c.touched_at = 0);
            self.step = 0;
        }
        self.step += 1;
        let step = self.step;
        self.touched.clear();
        for k in 0..self.flows_on[ci].len() {
            let (f, _) = self.flows_on[ci][k];
            let slot = &mut self.slot[f as usize];
            if slot.epoch != epoch || slot.fixed_epoch == epoch {
                continue; // outside the region (slower), or fixed already
            }
            slot.fixed_epoch = epoch;
            let old = std::mem::replace(&mut slot.rate_bps, rate);
            if old != rate {
                changed.push(RateChange {
                    flow: self.flow_at[f as usize],
                    old_bps: old,
                    slot: f,
                });
            }
            let start = slot.shared_start as usize;
            for &(c2, w) in &self.shared[start..start + usize::from(slot.shared_len)] {
                let ch = &mut self.channel[c2 as usize];
                ch.left_bps = ch
                    .left_bps
                    .saturating_sub(rate.saturating_mul(u64::from(w)));
                ch.unfixed -= w;
                if c2 as usize != ci && ch.touched_at != step {
                    ch.touched_at = step;
                    self.touched.push(c2);
                }
            }
        }
        for k in 0..self.touched.len() {
            let c2 = self.touched[k] as usize;
            let (left, unfixed) = (self.channel[c2].left_bps, self.channel[c2].unfixed);
            update(self, c2, left, unfixed);
        }
    }
}
