//! Rail replay (`--ff-rails on`, DESIGN.md §3c): where the workload's
//! traffic on two rail switches is the same flow for flow (the k-th flow
//! through each joins the hosts of the same servers with the same size,
//! and nothing else crosses either switch), the lowest-numbered switch
//! of the class *leads*: its flows are simulated. The others *follow*:
//! their flows inject no packet, and end at the instants their twins end,
//! mirrored when the leader's switch sends the twin's last data packet or
//! its completing ACK down to the host (with that packet's own delay, at
//! least any lookahead). Everything a follower's host can see of its
//! rail is then what the leader's host sees, so the replay equals the
//! simulation; what would make it differ is refused before the run
//! (`Rails::build`) or counted after (`rail_diverged`: a follower flow
//! that did not start at its twin's instant).

use super::memo::resources::static_path;
use super::twin_draws::{draw_identity, signature, TwoHop};
use crate::network::config::{EcmpMode, Transport};
use crate::network::{Fabric, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use hashbrown::HashMap;
use netsim_engine::{Context, NodeId, SimTime};

/// No twin: the flow is simulated.
const NONE: u32 = u32::MAX;

/// A shard's rail replay: the twin classes, found the same on every shard
/// from the fabric alone, and the followers started on this shard.
#[derive(Debug)]
pub(crate) struct Rails {
    /// Per flow: the leader flow it follows, or [`NONE`].
    leader_of: Vec<u32>,
    /// Per leader flow, its followers.
    followers: HashMap<u32, Vec<u32>>,
    /// Per node: whether it is a leading switch.
    leading_switch: Vec<bool>,
    /// Per leader flow: bit 0 its last data packet mirrored, bit 1 its
    /// completing ACK (a late duplicate is not mirrored again).
    mirrored: HashMap<u32, u8>,
    /// At least any lookahead: the topology's longest link latency.
    done_delay: SimTime,
}

/// Why a fabric has no rail replay, or what its classes are.
#[derive(Debug)]
pub(crate) enum Built {
    Rails(Rails),
    Refused(&'static str),
}

/// A flow's route if it is one switch between two hosts: (switch, the
/// host port it leaves by, the switch's port toward the destination, the
/// switch's port back toward the source).
fn two_hop(fabric: &Fabric, flow: u32) -> Option<TwoHop> {
    let spec = fabric.workload.flows[flow as usize];
    let (mut there, mut back) = (Vec::new(), Vec::new());
    static_path(fabric, flow, spec.src, spec.dst, &mut there);
    static_path(fabric, flow, spec.dst, spec.src, &mut back);
    if there.len() != 2 || back.len() != 2 || there[1].0 != back[1].0 {
        return None;
    }
    Some((there[1].0, there[0].1, there[1].1, back[1].1))
}

/// What the run's configuration rules out: the replay is exact only for
/// lossless RoCE on single paths, each flow's ends seen by its own hosts.
fn refusal(fabric: &Fabric) -> Option<&'static str> {
    let (c, w) = (&fabric.config, &fabric.workload);
    if !w.has_tasks() || w.lazy.is_some() || !w.folds.is_empty() || !w.ina_ops.is_empty() {
        return Some("refused: not an expanded workload of tasks");
    }
    if c.transport != Transport::Roce || c.ecmp != EcmpMode::Hash || !c.pfc {
        return Some("refused: not lossless RoCE with hash ECMP");
    }
    if c.recv_complete_at_ack || fabric.topo.has_lossy_links() || !fabric.faults.faults.is_empty() {
        return Some("refused: receiver completion at the ACK, lossy links or faults");
    }
    None
}

/// Per rail switch: its flows in id order, `None` once anything else
/// crosses it.
type Classes = HashMap<u32, Option<Vec<u32>>>;

/// The flows of each switch that only two-hop flows cross.
fn rail_flows(fabric: &Fabric) -> Classes {
    let mut by_switch: Classes = HashMap::new();
    let mut path = Vec::new();
    for flow in 0..fabric.workload.flows.len() as u32 {
        if let Some((w, ..)) = two_hop(fabric, flow) {
            if let Some(Some(v)) = by_switch.get_mut(&w).map(Option::as_mut) {
                v.push(flow);
            } else {
                by_switch.entry(w).or_insert_with(|| Some(vec![flow]));
            }
            continue;
        }
        let spec = fabric.workload.flows[flow as usize];
        path.clear();
        static_path(fabric, flow, spec.src, spec.dst, &mut path);
        static_path(fabric, flow, spec.dst, spec.src, &mut path);
        for &(node, _) in &path {
            by_switch.insert(node, None);
        }
    }
    by_switch
}

/// Whether the events a follower's hosts receive from its leader's switch
/// keep their order among the others they receive at the same instant
/// (by source node): no neighbour of theirs lies between the two switches.
fn same_order(fabric: &Fabric, leader: u32, follower: u32, flows: &[u32]) -> bool {
    let (lo, hi) = (leader.min(follower), leader.max(follower));
    flows.iter().all(|&f| {
        let spec = fabric.workload.flows[f as usize];
        [spec.src, spec.dst].into_iter().all(|h| {
            let between = |n: u32| n > lo && n < hi && n != follower;
            !between(h) && fabric.topo.ports(h).iter().all(|p| !between(p.peer))
        })
    })
}

/// Whether every flow of follower switch `w` draws RED as its twin on
/// `leader` does (`twin_draws.rs`): then packet level would have marked
/// the follower's packets as the leader's, and the replay may copy them.
/// True without `--ecn-draw rail`: the follower takes its leader's marks,
/// which `rail_leader_marks` counts (the replay is then exact only where
/// the leader marks nothing).
fn same_draws(fabric: &Fabric, leader: (u32, &[u32]), follower: (u32, &[u32])) -> bool {
    if !fabric.config.ecn_draw_rails {
        return true;
    }
    let identity = |w: u32, f: u32| draw_identity(&fabric.twin_draws, w, f).unwrap_or((w, f));
    let ((l, lflows), (w, flows)) = (leader, follower);
    flows
        .iter()
        .zip(lflows)
        .all(|(&f, &lead)| identity(w, f) == identity(l, lead))
}

impl Rails {
    /// The twin classes of `fabric`'s rail switches, or why there are none.
    pub(crate) fn build(fabric: &Fabric) -> Built {
        if let Some(why) = refusal(fabric) {
            return Built::Refused(why);
        }
        let longest = fabric.topo.links().iter().map(|l| l.latency_ps).max();
        let done_delay = SimTime(longest.unwrap_or(1).max(1));
        let mut switches: Vec<(u32, Vec<u32>)> = rail_flows(fabric)
            .into_iter()
            .filter_map(|(w, f)| f.map(|f| (w, f)))
            .collect();
        switches.sort_unstable();
        let mut classes: HashMap<Vec<u64>, (u32, Vec<u32>)> = HashMap::new();
        let mut leader_of = vec![NONE; fabric.workload.flows.len()];
        let mut followers: HashMap<u32, Vec<u32>> = HashMap::new();
        let mut leading_switch = vec![false; fabric.topo.node_count() as usize];
        for (w, flows) in switches {
            let Some(sig) = signature(fabric, w, &flows, |f| two_hop(fabric, f)) else {
                continue;
            };
            let Some((leader, lflows)) = classes.get(&sig) else {
                classes.insert(sig, (w, flows));
                continue;
            };
            let last_hop = |w: u32, flows: &[u32]| {
                flows.iter().all(|&f| {
                    let (_, _, down, up) = two_hop(fabric, f).expect("a rail flow");
                    [down, up].into_iter().all(|p| {
                        let l = fabric.topo.link(fabric.topo.port(w, p).link);
                        SimTime(l.latency_ps) >= done_delay
                    })
                })
            };
            if !last_hop(w, &flows)
                || !last_hop(*leader, lflows)
                || !same_order(fabric, *leader, w, &flows)
                || !same_draws(fabric, (*leader, lflows), (w, &flows))
            {
                continue;
            }
            leading_switch[*leader as usize] = true;
            for (&f, &lead) in flows.iter().zip(lflows) {
                leader_of[f as usize] = lead;
                followers.entry(lead).or_default().push(f);
            }
        }
        if followers.is_empty() {
            return Built::Refused("refused: no two rail switches carry the same flows");
        }
        Built::Rails(Rails {
            leader_of,
            followers,
            leading_switch,
            mirrored: HashMap::new(),
            done_delay,
        })
    }

    /// The leader flow `flow` follows, if any.
    pub(crate) fn leader(&self, flow: u32) -> Option<u32> {
        self.leader_of
            .get(flow as usize)
            .copied()
            .filter(|&l| l != NONE)
    }

    /// Whether flow `flow` leads or follows (memo then never replays its
    /// domain: a leader's ends are its followers', mirrored from packets).
    fn holds(&self, flow: u32) -> bool {
        self.leader(flow).is_some() || self.followers.contains_key(&flow)
    }

    /// How many flows follow a twin.
    pub(crate) fn follower_count(&self) -> usize {
        self.followers.values().map(Vec::len).sum()
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Whether any of `tasks` is a flow that leads or follows.
    pub(crate) fn rails_hold(&self, tasks: &[u32]) -> bool {
        let Some(r) = self.ff.rails.as_ref() else {
            return false;
        };
        let w = &self.fabric.workload;
        tasks.iter().any(|&t| match w.kind(&w.tasks[t as usize]) {
            crate::workload::TaskKind::Flow(f) => r.holds(f),
            crate::workload::TaskKind::Compute(_) => false,
        })
    }

    /// Flow `flow` starts at sender `i`: a follower injects nothing and
    /// waits for its twin's ends (true: nothing more to do).
    pub(crate) fn rail_flow_start(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) -> bool {
        let flow = self.transport.senders[i].flow;
        if self
            .ff
            .rails
            .as_ref()
            .and_then(|r| r.leader(flow))
            .is_none()
        {
            return false;
        }
        self.stats.rail_followed += 1;
        let s = &self.transport.senders[i];
        let (src, dst) = (s.spec.src, s.spec.dst);
        // What the flows table reports of a simulated start.
        let port = super::memo::resources::first_port(self.fabric, flow, src, dst);
        let gport = self.port_index(ctx.local_index(), port);
        let rate = self.ports[gport].link.rate_bps;
        let ideal = crate::network::ideal_fct(self.fabric, &self.transport.senders[i].spec, port).0;
        let hash = crate::network::common::five_tuple_hash(self.fabric.source_port(flow), src, dst);
        let s = &mut self.transport.senders[i];
        s.port = port;
        s.line_rate_bps = rate;
        s.ideal_fct = ideal;
        s.path_hash = hash;
        s.skipped_bytes = s.spec.size_bytes;
        true
    }

    /// Port `gport` of the current node sends `pkt`, arriving after
    /// `delay`: on a leading switch, the last data packet or completing
    /// ACK of a leader flow ends its followers at the same instant.
    #[inline]
    pub(crate) fn rail_mirror(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        pkt: &crate::network::packet::Packet,
        delay: SimTime,
    ) {
        use crate::network::packet::PacketKind;
        let Some(r) = self.ff.rails.as_mut() else {
            return;
        };
        if !r.leading_switch[ctx.node().0 as usize] {
            return;
        }
        let Some(followers) = r.followers.get(&pkt.flow) else {
            return;
        };
        let at_source = match pkt.kind {
            PacketKind::Data if pkt.last => false,
            PacketKind::Ack => {
                let spec = self.fabric.workload.flows[pkt.flow as usize];
                let packets = spec
                    .size_bytes
                    .div_ceil(u64::from(self.fabric.config.mtu_bytes));
                if u64::from(pkt.psn) < packets.max(1) {
                    return;
                }
                true
            }
            _ => return,
        };
        let bit = 1u8 << u8::from(at_source);
        let seen = r.mirrored.entry(pkt.flow).or_default();
        if *seen & bit != 0 {
            return;
        }
        *seen |= bit;
        for &f in followers {
            let spec = self.fabric.workload.flows[f as usize];
            let host = if at_source { spec.src } else { spec.dst };
            ctx.send(
                NodeId(host),
                delay,
                NetEvent::RailEnd { flow: f, at_source },
            );
        }
    }

    /// The current switch ECN-marked data packet `pkt`: counted when the
    /// switch leads a class and the packet is a flow with followers (they
    /// take its marks as they are).
    pub(crate) fn rail_marked(&mut self, node: u32, pkt: &crate::network::packet::Packet) {
        let Some(r) = self.ff.rails.as_ref() else {
            return;
        };
        if pkt.kind == crate::network::packet::PacketKind::Data
            && r.leading_switch[node as usize]
            && r.followers.contains_key(&pkt.flow)
        {
            self.stats.rail_leader_marks += 1;
        }
    }

    /// Port `port` of `node` was paused by its peer: counted when either
    /// end is a leading switch (its followers' links would pause alike).
    pub(crate) fn rail_paused(&mut self, node: u32, port: u16) {
        let Some(r) = self.ff.rails.as_ref() else {
            return;
        };
        let peer = self.fabric.topo.port(node, port).peer;
        if r.leading_switch[node as usize] || r.leading_switch[peer as usize] {
            self.stats.rail_leader_pauses += 1;
        }
    }

    /// A follower flow ends at its source or destination, at its twin's
    /// instant.
    pub(crate) fn rail_end(&mut self, ctx: &mut Context<'_, NetEvent>, flow: u32, at_source: bool) {
        let task = self.fabric.workload.flow_task(flow);
        if !at_source {
            self.task_seen_complete(ctx, task, false);
            return;
        }
        let Some(&i) = self.transport.sender_of.get(&flow) else {
            // Its twin ended before it started: not a twin after all.
            self.stats.rail_diverged += 1;
            return;
        };
        let s = &mut self.transport.senders[i as usize];
        s.end = Some(ctx.now());
        s.skipped = ctx.now() - s.start;
        self.stats.flows_finished += 1;
        self.flow_ahead_ended(i as usize, ctx.now());
        // Its row waits for the twin's counters (`RailDone`).
        self.task_seen_complete(ctx, task, true);
    }

    /// Leader sender `i` finished: its followers' rows take its counters,
    /// and check that they started at its instant.
    pub(crate) fn rail_leader_finished(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let Some(r) = self.ff.rails.as_ref() else {
            return;
        };
        let s = &self.transport.senders[i];
        let Some(followers) = r.followers.get(&s.flow) else {
            return;
        };
        let word = |v: u64| v.min(u64::from(u32::MAX)) as u32;
        let start = s.start.as_ps();
        let done = |flow| NetEvent::RailDone {
            flow,
            start_ps: [(start >> 32) as u32, start as u32],
            counters: [
                word(s.retransmitted_pkts),
                word(s.ecn_marked_pkts),
                word(s.cnps),
            ],
        };
        for &f in followers {
            let src = self.fabric.workload.flows[f as usize].src;
            ctx.send(NodeId(src), r.done_delay, done(f));
        }
    }

    /// The twin's counters reach a follower that ended: its row is
    /// written, its slot freed.
    pub(crate) fn rail_done(&mut self, flow: u32, start: SimTime, counters: [u32; 3]) {
        let Some(&i) = self.transport.sender_of.get(&flow) else {
            self.stats.rail_diverged += 1;
            return;
        };
        let i = i as usize;
        let s = &mut self.transport.senders[i];
        if s.start != start || s.end.is_none() {
            self.stats.rail_diverged += 1;
        }
        s.retransmitted_pkts = u64::from(counters[0]);
        s.ecn_marked_pkts = u64::from(counters[1]);
        s.cnps = u64::from(counters[2]);
        let size = s.spec.size_bytes;
        self.stats.sent_payload_bytes += size;
        self.stats.delivered_payload_bytes += size;
        self.record_flow(i);
        self.release_sender(i);
    }
}
