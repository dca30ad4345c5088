//! Max-min fair rates of flows over link capacities, recomputed only for the
//! flows that an arrival or departure can affect: those at or above its
//! level in the connected component of the flow–link graph it touches
//! (SimGrid's LMM solver re-solves the whole component).
//!
//! Rates are integers (bits per second) and the filling is exact integer
//! arithmetic, so a run is reproducible bit for bit. Progressive filling: the
//! channel with the smallest fair share (`capacity left / flows not yet
//! fixed`) fixes all its unfixed flows at that share; their rates come off
//! every other channel they cross; repeat. A channel's share never drops when
//! flows at the minimum share are fixed, so rates come out in nondecreasing
//! order.
//!
//! A flow may be a class of identical flows run at one rate (a folded
//! job's replicas, [`super::classes`]): it crosses each of its channels
//! with a weight, the number of its members there, and counts that many
//! times in the channel's share (`capacity left / members not yet fixed`),
//! so its rate is each member's weighted max-min fair rate.
//!
//! Here: the flows, channels and slots, arrivals and departures, and which
//! region a change re-solves (`resolve`); `fill.rs`: the filling of that
//! region.

mod fill;

/// Active flows, the channels (link directions) each crosses, and their
/// max-min fair rates.
#[derive(Debug)]
pub struct FairShare {
    /// Per channel: what a solve reads and writes of it, in one record.
    channel: Vec<Channel>,
    /// Per channel: the active flows crossing it, as `(slot, weight
    /// there)`.
    flows_on: Vec<Vec<(u32, u32)>>,
    /// Per slot (an active flow; slots are reused, so everything the
    /// solver touches stays as dense as the flows in flight): its rate,
    /// path and marks, its flow id ([`NO_FLOW`] while free), and the channels
    /// `path[slot.path_start..][..slot.path_len]` with their weights in
    /// `weight` at the same places.
    slot: Vec<Slot>,
    flow_at: Vec<u32>,
    path: Vec<u32>,
    weight: Vec<u32>,
    free_slots: Vec<u32>,
    /// `(level, channel)`: channels whose set of flows changed since the
    /// last [`FairShare::resolve`], each with a rate below which no flow's
    /// rate can change (see `resolve`): a departed flow's rate.
    dirty: Vec<(u64, u32)>,
    /// The slots of the flows that arrived since the last resolve (their
    /// level is bounded once every arrival and departure of the instant is
    /// known).
    arrived: Vec<u32>,
    // Scratch for `resolve`; epochs mark membership in the region being
    // solved without clearing anything.
    epoch: u32,
    region_channels: Vec<u32>,
    region_flows: Vec<u32>,
    /// `fill_tree`'s tournament tree.
    tree: Vec<(u64, u32)>,
    /// The region's candidate bottlenecks, `(share, channel)`
    /// (`candidates`); per channel: its index there (`fill_scan`).
    scan: Vec<(u64, u32)>,
    scan_slot: Vec<u32>,
    /// Per slot: the smallest `(share, channel)` of the channels only its
    /// flow crosses (`candidates`).
    private_min: Vec<(u64, u32)>,
    /// The region's flows' `(channel, weight)` on channels that other flows
    /// cross too, `shared[slot.shared_start..][..slot.shared_len]`: all
    /// that fixing a flow changes (most of a class's channels are its own).
    shared: Vec<(u32, u32)>,
    /// The channels one [`FairShare::fix_channel`] changed, each once
    /// (`Channel::touched_at`: the last step that listed it).
    touched: Vec<u32>,
    step: u32,
    /// [`SCAN_CHANNELS`] (tests lower it to check the tree gives the same).
    scan_channels: usize,
    /// Whether a change re-solves only from its level on (tests turn it
    /// off to check that whole components give the same).
    from_level: bool,
}

/// A channel's state: 32 bytes, so that a solve's visit costs one cache
/// line (regions cross hundreds of channels scattered over the fabric).
#[derive(Clone, Copy, Debug)]
struct Channel {
    capacity_bps: u64,
    /// While solved: capacity not yet taken by fixed flows.
    left_bps: u64,
    /// The sum of its active flows' weights (members crossing it).
    weight_on: u32,
    /// While solved: members of flows not yet fixed.
    unfixed: u32,
    /// The last region that listed it.
    epoch: u32,
    touched_at: u32,
}

/// An active flow's state that a solve reads.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    rate_bps: u64,
    path_start: u32,
    path_len: u16,
    /// Room for this many channels at `path_start` (paths only grow it, so
    /// the pool stays bounded by the flows in flight times the longest
    /// path).
    path_room: u16,
    /// The last region that took it in, and the last that fixed it.
    epoch: u32,
    fixed_epoch: u32,
    /// Its shared channels in the region being solved (`FairShare::shared`).
    shared_start: u32,
    shared_len: u16,
}

/// A slot without an active flow.
const NO_FLOW: u32 = u32::MAX;

/// Regions of at most this many candidate channels (`candidates`) find
/// their next bottleneck by a linear scan (cheaper than a tree at the
/// sizes most instants make); larger ones use a tournament tree.
const SCAN_CHANNELS: usize = 64;

/// A flow whose rate changed: its rate before (0 if it just arrived) and
/// its slot, which finds its rate and path without a look-up of the flow
/// id ([`FairShare::changed`]) until the next add or remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateChange {
    pub flow: u32,
    pub old_bps: u64,
    slot: u32,
}

/// An active flow as the solver holds it: its rate, and its channels with
/// its weight on each.
#[derive(Clone, Copy, Debug)]
pub struct Active<'a> {
    pub rate_bps: u64,
    pub path: &'a [u32],
    pub weights: &'a [u32],
}

impl FairShare {
    /// Channels with these capacities (> 0 each). It keeps nothing per
    /// flow id: a flow is known by the slot [`FairShare::add`] gives it,
    /// which its caller keeps with the flow's own state (one look-up of the
    /// flow id per event, not one here too).
    pub fn new(capacity_bps: Vec<u64>) -> FairShare {
        assert!(
            capacity_bps.iter().all(|&c| c > 0),
            "a channel without capacity"
        );
        let channels = capacity_bps.len();
        FairShare {
            channel: capacity_bps
                .iter()
                .map(|&capacity_bps| Channel {
                    capacity_bps,
                    left_bps: 0,
                    weight_on: 0,
                    unfixed: 0,
                    epoch: 0,
                    touched_at: 0,
                })
                .collect(),
            flows_on: vec![Vec::new(); channels],
            slot: Vec::new(),
            flow_at: Vec::new(),
            path: Vec::new(),
            weight: Vec::new(),
            free_slots: Vec::new(),
            dirty: Vec::new(),
            arrived: Vec::new(),
            epoch: 0,
            region_channels: Vec::new(),
            region_flows: Vec::new(),
            tree: Vec::new(),
            scan: Vec::new(),
            scan_slot: vec![0; channels],
            private_min: Vec::new(),
            shared: Vec::new(),
            touched: Vec::new(),
            step: 0,
            scan_channels: SCAN_CHANNELS,
            from_level: true,
        }
    }

    /// The slot of active flow `flow`, found by a scan (tests only).
    #[cfg(test)]
    fn slot_of(&self, flow: u32) -> Option<u32> {
        (0..self.flow_at.len() as u32).find(|&s| self.flow_at[s as usize] == flow)
    }

    /// The flow's current rate (0 while inactive or until the next resolve).
    #[cfg(test)]
    pub fn rate_bps(&self, flow: u32) -> u64 {
        self.slot_of(flow)
            .map_or(0, |s| self.slot[s as usize].rate_bps)
    }

    /// The channels active flow `flow` crosses.
    #[cfg(test)]
    pub fn path(&self, flow: u32) -> &[u32] {
        self.active(self.slot_of(flow).expect("active")).path
    }

    /// The weights of active flow `flow` on its channels (those of `path`).
    #[cfg(test)]
    pub fn weights(&self, flow: u32) -> &[u32] {
        self.active(self.slot_of(flow).expect("active")).weights
    }

    /// Active flow `flow` stops (its slot found by a scan; tests only).
    #[cfg(test)]
    pub fn remove_flow(&mut self, flow: u32) -> u64 {
        self.remove(self.slot_of(flow).expect("active"))
    }

    /// What [`FairShare::active`] gives for the flow of `change`, taken
    /// from the slot it names: valid until the next add or remove.
    pub fn changed(&self, change: &RateChange) -> Active<'_> {
        debug_assert_eq!(self.flow_at[change.slot as usize], change.flow);
        self.active(change.slot)
    }

    /// The rate, channels and weights of the active flow in `slot` (as
    /// [`FairShare::add`] gave it).
    pub fn active(&self, slot: u32) -> Active<'_> {
        debug_assert_ne!(self.flow_at[slot as usize], NO_FLOW, "a free slot");
        let s = self.slot[slot as usize];
        let (start, len) = (s.path_start as usize, usize::from(s.path_len));
        Active {
            rate_bps: s.rate_bps,
            path: &self.path[start..][..len],
            weights: &self.weight[start..][..len],
        }
    }

    /// Active flows crossing `channel`, each counted by its weight there.
    pub fn load(&self, channel: u32) -> usize {
        self.channel[channel as usize].weight_on as usize
    }

    /// Flow `flow` starts crossing `channels` (each at most once); its rate
    /// is set by the next [`FairShare::resolve`]. Returns its slot, which
    /// names it to [`FairShare::active`] and [`FairShare::remove`] until it
    /// is removed.
    pub fn add(&mut self, flow: u32, channels: &[u32]) -> u32 {
        self.add_weighted(flow, channels, |_| 1)
    }

    /// A class `flow` starts crossing `channels` (each at most once) with
    /// `weights[i]` members on `channels[i]` (each at least 1); returns its
    /// slot as [`FairShare::add`] does.
    pub fn add_class(&mut self, flow: u32, channels: &[u32], weights: &[u32]) -> u32 {
        assert_eq!(channels.len(), weights.len());
        assert!(weights.iter().all(|&w| w > 0), "a class without members");
        self.add_weighted(flow, channels, |i| weights[i])
    }

    fn add_weighted(&mut self, flow: u32, channels: &[u32], weight: impl Fn(usize) -> u32) -> u32 {
        assert_ne!(flow, NO_FLOW, "flow id {NO_FLOW} is reserved");
        assert!(
            !channels.is_empty() && channels.len() <= usize::from(u16::MAX),
            "flow {flow}: a path of {} channels",
            channels.len()
        );
        let len = channels.len() as u16;
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                let slot = u32::try_from(self.slot.len()).expect("under 2^32 active flows");
                self.slot.push(Slot::default());
                self.flow_at.push(0);
                self.private_min.push((u64::MAX, u32::MAX));
                slot
            }
        };
        let s = &mut self.slot[slot as usize];
        if s.path_room < len {
            s.path_start = u32::try_from(self.path.len()).expect("under 2^32 path entries");
            s.path_room = len;
            self.path.resize(self.path.len() + usize::from(len), 0);
            self.weight.resize(self.path.len(), 0);
        }
        s.path_len = len;
        s.rate_bps = 0;
        let start = s.path_start as usize;
        self.path[start..start + channels.len()].copy_from_slice(channels);
        self.flow_at[slot as usize] = flow;
        for (i, &c) in channels.iter().enumerate() {
            let w = weight(i);
            self.weight[start + i] = w;
            self.channel[c as usize].weight_on += w;
            self.flows_on[c as usize].push((slot, w));
        }
        self.arrived.push(slot);
        slot
    }

    /// The flow in `slot` stops; returns the rate it had. The slot goes to
    /// the next flow added.
    pub fn remove(&mut self, slot: u32) -> u64 {
        let flow = std::mem::replace(&mut self.flow_at[slot as usize], NO_FLOW);
        assert_ne!(flow, NO_FLOW, "slot {slot} has no active flow");
        let s = &mut self.slot[slot as usize];
        let rate = std::mem::take(&mut s.rate_bps);
        let start = s.path_start as usize;
        for i in start..start + usize::from(s.path_len) {
            let c = self.path[i];
            self.channel[c as usize].weight_on -= self.weight[i];
            let on = &mut self.flows_on[c as usize];
            let at = on
                .iter()
                .position(|&(g, _)| g == slot)
                .expect("flow on its path");
            on.swap_remove(at);
            // Rate 0: it arrived in this instant, and its arrival's level
            // is no longer known; a full re-solve.
            self.dirty.push((rate, c));
        }
        self.free_slots.push(slot);
        rate
    }

    /// Recomputes the rates of the flows that the arrivals and departures
    /// since the last call can affect; appends those whose rate changed to
    /// `changed`.
    ///
    /// Progressive filling fixes flows in nondecreasing order of rate, and
    /// a change at level `L` leaves every step below `L` as it was: a flow
    /// that departs at rate `L` crossed no channel that fixed flows below
    /// `L`, and without it its channels' shares only rise; an arriving flow
    /// gets at least `min(capacity / members)` over its channels (its
    /// bottleneck is full and no flow there is faster), and until it is
    /// fixed its channels' shares are only lower than they were. So flows
    /// slower than the instant's lowest level keep their rates, the
    /// others' channels start with what those flows leave, and only the
    /// flows at or above the level that a changed channel reaches through
    /// them are solved again: the same steps as a full re-solve of the
    /// component from that level on, so the same rates bit for bit.
    /// Changes are taken lowest level first, each solving the region it
    /// reaches that an earlier (lower) one did not.
    pub fn resolve(&mut self, changed: &mut Vec<RateChange>) {
        for k in 0..self.arrived.len() {
            let slot = self.arrived[k];
            if self.flow_at[slot as usize] == NO_FLOW {
                continue; // departed again: its departure was a full re-solve
            }
            // A slot freed and taken again in this instant is listed twice,
            // both times for its new flow: the second listing's channels
            // are seeds at the same levels, which a region already took.
            let s = self.slot[slot as usize];
            let path = &self.path[s.path_start as usize..][..usize::from(s.path_len)];
            let level = path
                .iter()
                .map(|&c| {
                    let ch = &self.channel[c as usize];
                    ch.capacity_bps / u64::from(ch.weight_on)
                })
                .min()
                .expect("a path");
            self.dirty.extend(path.iter().map(|&c| (level, c)));
        }
        self.arrived.clear();
        if !self.from_level {
            self.dirty.iter_mut().for_each(|d| d.0 = 0);
        }
        // A channel listed twice is a seed at its lower level first, and
        // in that seed's region after.
        self.dirty.sort_unstable();
        if self.epoch >= (u32::MAX - 2).saturating_sub(self.dirty.len() as u32) {
            // Epochs are about to wrap: forget every mark.
            self.channel.iter_mut().for_each(|c| c.epoch = 0);
            self.slot.iter_mut().for_each(|s| {
                s.epoch = 0;
                s.fixed_epoch = 0;
            });
            self.epoch = 0;
        }
        // Regions solved in this call have epochs from `first` on.
        let first = self.epoch + 1;
        for k in 0..self.dirty.len() {
            let (level, seed) = self.dirty[k];
            if self.channel[seed as usize].epoch >= first {
                continue;
            }
            self.epoch += 1;
            self.collect_region(seed, level);
            if !self.region_flows.is_empty() {
                self.fill(changed);
            }
        }
        self.dirty.clear();
    }

    /// The flows at or above `level` (or just arrived, rate 0) that `seed`
    /// reaches through channels they share, and those channels with what
    /// the slower flows on them leave (`left_bps`, `unfixed`).
    fn collect_region(&mut self, seed: u32, level: u64) {
        let epoch = self.epoch;
        self.region_channels.clear();
        self.region_flows.clear();
        self.shared.clear();
        self.channel[seed as usize].epoch = epoch;
        self.region_channels.push(seed);
        let mut next = 0;
        while next < self.region_channels.len() {
            let c = self.region_channels[next] as usize;
            next += 1;
            let (mut fixed_bps, mut fixed_weight) = (0u64, 0u32);
            for k in 0..self.flows_on[c].len() {
                let (f, w) = self.flows_on[c][k];
                let slot = &mut self.slot[f as usize];
                let rate = slot.rate_bps;
                if rate != 0 && rate < level {
                    fixed_bps = fixed_bps.saturating_add(rate.saturating_mul(u64::from(w)));
                    fixed_weight += w;
                    continue;
                }
                if slot.epoch == epoch {
                    continue;
                }
                slot.epoch = epoch;
                self.region_flows.push(f);
                // A channel of this flow alone leads nowhere: its share is
                // its capacity's until the flow is fixed, and only the
                // flow's tightest one is a candidate (`candidates`).
                let mut private = (u64::MAX, u32::MAX);
                let start = slot.path_start as usize;
                let len = usize::from(slot.path_len);
                let shared_start = self.shared.len();
                for (&c2, &w2) in self.path[start..start + len]
                    .iter()
                    .zip(&self.weight[start..start + len])
                {
                    let ch = &mut self.channel[c2 as usize];
                    if ch.weight_on == w2 {
                        ch.epoch = epoch;
                        private = private.min((ch.capacity_bps / u64::from(w2), c2));
                        continue;
                    }
                    self.shared.push((c2, w2));
                    if ch.epoch != epoch {
                        ch.epoch = epoch;
                        self.region_channels.push(c2);
                    }
                }
                slot.shared_start = shared_start as u32;
                slot.shared_len = (self.shared.len() - shared_start) as u16;
                self.private_min[f as usize] = private;
            }
            // Filling takes rates off with saturating subtractions, which
            // end where one subtraction of their sum does.
            let ch = &mut self.channel[c];
            ch.left_bps = ch.capacity_bps.saturating_sub(fixed_bps);
            ch.unfixed = ch.weight_on - fixed_weight;
        }
    }
}

#[cfg(test)]
mod tests;
