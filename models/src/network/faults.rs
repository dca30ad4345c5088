//! Faults in the network: links and nodes that fail and recover, links that
//! slow down, and how the fabric routes around them.
//!
//! A fault is an event at each node it touches (both ends of a link, a node
//! and its neighbours), which the node schedules for itself when the run
//! starts: no message crosses shards, so the result is the same for any
//! shard count. A port whose link is dead drops what is queued for it and
//! what arrives over it; the switch at its end stops choosing it at once
//! (`route` filters dead ports out of the ECMP set). The rest of the fabric
//! follows the routing tables of the [`FaultPlan`]'s epochs: from the
//! fault's time plus the reroute delay on, tables computed without the dead
//! links. A switch whose whole next-hop set is dead takes its routes from the
//! next epoch's tables (a local recomputation). A run without faults has no
//! epochs and pays one branch per forwarded packet.

use super::common::{ecmp_pick, serialization};
use super::packet::{Packet, PRIORITIES, PRIO_DATA};
use super::switch::{ecn_class, EcnMarking};
use super::{NetEvent, Network};
use crate::faults::{Fault, FaultKind};
use crate::telemetry::{PfcEvent, PfcRecord, TelemetrySink};
use netsim_engine::{Context, NodeId, SimTime};
use netsim_topo::{NextHops, Routing, Topology};

/// A link direction's health besides the faults holding it down
/// (`Port::down_causes`, read on every hop): when it last failed, its bit errors.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LinkHealth {
    /// When the link last failed (`ZERO` if never; a failure at time 0
    /// leaves nothing on the wire to lose).
    pub last_down: SimTime,
    /// Lossy link: a packet is lost when the link's random draw falls below
    /// this (`P * 2^64`); 0 draws nothing.
    pub error_threshold: u64,
    /// The state of this link direction's random stream.
    pub error_rng: u64,
    /// A degraded port's fixed queue, scaled with its rate
    /// (`degraded_queue_scales`); `None`: the configured one.
    pub queue_limit_bytes: Option<u64>,
}

/// The faults of a run, and the routing tables the fabric converges to.
#[derive(Debug, Default)]
pub struct FaultPlan {
    /// In time order (the order given among equal times).
    pub faults: Vec<Fault>,
    /// Routing convergence delay: how long after a link fails or recovers the
    /// switches away from it route by the new tables.
    pub reroute: SimTime,
    /// `(from, tables)`: the tables in force from `from` on, in time order.
    epochs: Vec<(SimTime, Routing)>,
}

impl FaultPlan {
    /// The plan of `faults` on `topo`: one routing epoch per distinct
    /// `time + reroute` of the faults that change which links work, its
    /// tables built by `build` from the links dead then.
    pub fn new<E>(
        topo: &Topology,
        mut faults: Vec<Fault>,
        reroute: SimTime,
        mut build: impl FnMut(&[u32]) -> Result<Routing, E>,
    ) -> Result<FaultPlan, E> {
        faults.sort_by_key(|f| f.time);
        let mut times: Vec<SimTime> = faults
            .iter()
            .filter(|f| f.kind.changes_routes())
            .map(|f| f.time + reroute)
            .filter(|&t| t != SimTime::MAX)
            .collect();
        times.dedup();
        let mut epochs = Vec::with_capacity(times.len());
        for from in times {
            let dead = dead_links(topo, &faults, |f| f.time + reroute <= from);
            epochs.push((from, build(&dead)?));
        }
        Ok(FaultPlan {
            faults,
            reroute,
            epochs,
        })
    }

    /// Whether the plan has any fault.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// The routing epoch in force at `now` (`None`: the fault-free tables).
    #[inline]
    pub(crate) fn epoch_at(&self, now: SimTime) -> Option<usize> {
        self.epochs.partition_point(|e| e.0 <= now).checked_sub(1)
    }

    /// The tables of epoch `e`.
    pub(crate) fn tables(&self, e: usize) -> &Routing {
        &self.epochs[e].1
    }

    /// Number of epochs.
    pub(crate) fn epoch_count(&self) -> usize {
        self.epochs.len()
    }
}

/// The links dead after the faults that `applied` selects, in order: a link
/// is dead while a link fault or a fault of either end holds it down.
pub fn dead_links(topo: &Topology, faults: &[Fault], applied: impl Fn(&Fault) -> bool) -> Vec<u32> {
    let mut down = vec![0u32; topo.link_count() as usize];
    for f in faults.iter().filter(|f| applied(f)) {
        let delta: i32 = match f.kind {
            FaultKind::LinkDown | FaultKind::NodeDown => 1,
            FaultKind::LinkUp | FaultKind::NodeUp => -1,
            FaultKind::LinkRate => continue,
        };
        for p in topo.ports(f.a) {
            if f.touches(f.a, p.peer) {
                let d = &mut down[p.link as usize];
                *d = d.saturating_add_signed(delta);
            }
        }
    }
    (0..topo.link_count())
        .filter(|&l| down[l as usize] > 0)
        .collect()
}

impl FaultPlan {
    /// The faults each of the shard's nodes `nodes` of `topo` sees (a fault
    /// on one of its links), `(local, fault)`, sorted.
    pub(crate) fn seen_by(&self, topo: &Topology, nodes: &[NodeId]) -> Vec<(u32, u32)> {
        let mut node_faults = Vec::new();
        for (f, fault) in self.faults.iter().enumerate() {
            for (local, &node) in nodes.iter().enumerate() {
                let seen = topo
                    .ports(node.0)
                    .iter()
                    .any(|p| fault.touches(node.0, p.peer));
                if seen {
                    node_faults.push((local as u32, f as u32));
                }
            }
        }
        node_faults.sort_unstable();
        node_faults
    }
}

impl<'f, S: TelemetrySink> Network<'f, S> {
    /// Fault `fault` reaches the current node: the ports it touches fail,
    /// recover or change rate.
    pub(crate) fn apply_fault(&mut self, ctx: &mut Context<'_, NetEvent>, fault: u32) {
        let fabric = self.fabric;
        let f = fabric.faults.faults[fault as usize];
        let node = ctx.node().0;
        for (port, p) in fabric.topo.ports(node).iter().enumerate() {
            if !f.touches(node, p.peer) {
                continue;
            }
            let port = port as u16;
            match f.kind {
                FaultKind::LinkDown | FaultKind::NodeDown => self.port_down(ctx, port),
                FaultKind::LinkUp | FaultKind::NodeUp => self.port_up(ctx, port),
                FaultKind::LinkRate => {
                    let gport = self.port_index(ctx.local_index(), port);
                    self.ports[gport].link.rate_bps = f.rate_bps;
                    if fabric.config.degraded_queue_scales {
                        // htsim's failed link: queue and ECN thresholds
                        // shrink with the rate, so the queue's delay stays.
                        let nominal_bps = fabric.topo.link(p.link).bandwidth_bps.max(1);
                        let scale =
                            |b: u64| (b as f64 * f.rate_bps as f64 / nominal_bps as f64) as u64;
                        let ecn = fabric.config.ecn_for(nominal_bps);
                        let old = self.ecn[usize::from(self.ports[gport].ecn_class)];
                        let scaled = EcnMarking {
                            kmin_bytes: scale(ecn.kmin_bytes),
                            kmax_bytes: scale(ecn.kmax_bytes),
                            pmax: old.pmax,
                        };
                        self.ports[gport].ecn_class = ecn_class(&mut self.ecn, scaled);
                        self.health[gport].queue_limit_bytes =
                            fabric.config.port_buffer_bytes.map(scale);
                    }
                }
            }
        }
    }

    /// Port `port`'s link fails (one more cause holds it down): what waits
    /// for it is lost, pauses over it are void, a host moves its queue pairs
    /// to a live port.
    fn port_down(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let now = ctx.now();
        let switch = !self.is_host(ctx.node());
        let p = &mut self.ports[gport];
        p.down_causes = p.down_causes.saturating_add(1);
        if p.down_causes > 1 {
            return;
        }
        self.health[gport].last_down = now;
        self.ingress[gport].set_pause_sent(false);
        let p = &mut self.ports[gport];
        let was_paused = std::mem::replace(&mut p.paused, false);
        for prio in 0..PRIORITIES {
            while let Some(pkt) = self.ports[gport].pop_front(prio) {
                let wire = u64::from(pkt.wire_bytes);
                self.ports[gport].egress.queued_bytes[prio] -= wire;
                self.port_side[gport].counters.dropped_pkts[prio] += 1;
                if switch {
                    self.buffers[local].used_bytes -= wire;
                    if prio == PRIO_DATA {
                        let gin = self.port_index(local, pkt.in_port);
                        self.ingress[gin].sub(wire);
                    }
                }
            }
        }
        if was_paused {
            let since = self.port_side[gport].pause_since;
            self.sink.pfc(PfcRecord {
                time_ns: now.as_ns(),
                node: ctx.node().0,
                port: u32::from(port),
                priority: PRIO_DATA as u8,
                event: PfcEvent::Resume,
                duration_ns: Some((now - since).as_ns()),
            });
        }
        if switch {
            // The buffer freed may let paused upstream ports resume.
            for other in 0..(self.port_base[local + 1] - self.port_base[local]) as u16 {
                self.resume_if_below(ctx, local, other);
            }
        } else {
            self.move_queue_pairs(ctx, port);
        }
    }

    /// Port `port`'s link works again once no cause holds it down.
    fn port_up(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let gport = self.port_index(ctx.local_index(), port);
        let p = &mut self.ports[gport];
        p.down_causes = p.down_causes.saturating_sub(1);
        if p.down_causes == 0 {
            if self.is_host(ctx.node()) {
                self.host_try_send(ctx, port);
            } else {
                self.switch_try_send(ctx, port);
            }
        }
    }

    /// A host's port died: its queue pairs go to the port the host would
    /// choose for them now (a dual-homed NIC's other port); with none live
    /// they stay, and their retransmission timer gives up.
    fn move_queue_pairs(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let flows = std::mem::take(&mut self.hosts[gport].flows);
        let mut stay = Vec::new();
        for &i in &flows {
            let s = &mut self.transport.senders[i as usize];
            if s.spray_ports & !(1 << port) != 0 {
                // A sprayed queue pair goes on over its other ports.
                s.spray_ports &= !(1 << port);
                if s.port == port {
                    s.port = s.spray_ports.trailing_zeros() as u16;
                }
                continue;
            }
            s.spray_ports = 0;
            let probe = Packet::route_probe(s.flow, s.spec.src, s.spec.dst);
            let to = self.host_port_toward(ctx, &probe);
            if to == port {
                stay.push(i);
                continue;
            }
            self.transport.senders[i as usize].port = to;
            let gto = self.port_index(local, to);
            self.hosts[gto].flows.push(i);
            self.host_try_send(ctx, to);
        }
        self.hosts[gport].flows = stay;
    }

    /// A packet arrived over port `gport` whose link failed at some time:
    /// whether it was lost (the link is dead, or died while it was on it).
    #[inline(never)]
    pub(crate) fn lost_on_dead_link(&self, gport: usize, pkt: &Packet, now: SimTime) -> bool {
        let p = &self.ports[gport];
        if p.down_causes != 0 {
            return true;
        }
        let flight = p.link.latency + serialization(u64::from(pkt.wire_bytes), p.link.rate_bps);
        now < self.health[gport].last_down + flight
    }

    /// The live ports of the current host that are next hops toward host
    /// `dst` in the tables in force, a bit each; 0 on a host of one port.
    pub(crate) fn host_live_ports_toward(&self, ctx: &Context<'_, NetEvent>, dst: u32) -> u64 {
        let local = ctx.local_index();
        let lo = self.port_base[local] as usize;
        let ports = self.port_base[local + 1] as usize - lo;
        if !(2..=64).contains(&ports) {
            return 0;
        }
        let NextHops::Mask(mask) = self.tables_at(ctx.now()).next_hops(ctx.node().0, dst) else {
            unreachable!("a host's next hops are a port mask")
        };
        (0..ports)
            .filter(|&p| mask >> p & 1 != 0 && !self.port_is_down(lo + p))
            .fold(0, |m, p| m | 1 << p)
    }

    /// The routing tables in force at `now`.
    #[inline]
    pub(crate) fn tables_at(&self, now: SimTime) -> &'f Routing {
        let fabric: &'f super::Fabric = self.fabric;
        let plan = &fabric.faults;
        match plan.epoch_at(now) {
            None => &fabric.routing,
            Some(e) => plan.tables(e),
        }
    }

    /// Whether port `gport` is held down by a fault. A fault-free run skips
    /// the port's health: on every hop the read missed the cache (the
    /// forwarding check was half of `switch_receive`'s time on k=16).
    #[inline]
    pub(crate) fn port_is_down(&self, gport: usize) -> bool {
        !self.fabric.faults.is_empty() && self.ports[gport].down_causes != 0
    }

    /// Whether port `gport`'s link is down or ever went down (what it
    /// carried may be lost); false without reading the port in a
    /// fault-free run, as [`Self::port_is_down`].
    #[inline]
    pub(crate) fn link_ever_down(&self, gport: usize) -> bool {
        !self.fabric.faults.is_empty()
            && (self.ports[gport].down_causes != 0 || self.health[gport].last_down != SimTime::ZERO)
    }

    /// The ECMP choice of a switch whose first pick `hops` led to a dead
    /// port: among the live ports of the set, else of the next epochs' sets
    /// (routes recomputed without the dead links); the dead pick if none
    /// lives (the packet is lost there).
    #[inline(never)]
    pub(crate) fn reroute_around(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        pkt: &Packet,
        toward: u32,
        dead_pick: u16,
    ) -> u16 {
        let fabric = self.fabric;
        let node = ctx.node().0;
        let plan = &fabric.faults;
        let first = plan.epoch_at(ctx.now()).map_or(0, |e| e + 1);
        let current = self.tables_at(ctx.now()).switch_next_hops(node, toward);
        if let Some(port) = self.live_pick(ctx, pkt, current) {
            return port;
        }
        for e in first..plan.epoch_count() {
            let hops = plan.tables(e).switch_next_hops(node, toward);
            if let Some(port) = self.live_pick(ctx, pkt, hops) {
                return port;
            }
        }
        dead_pick
    }

    /// The ECMP choice among the live ports of `hops`, if any.
    fn live_pick(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        pkt: &Packet,
        hops: &[u16],
    ) -> Option<u16> {
        let local = ctx.local_index();
        let live = |p: &u16, this: &Self| this.ports[this.port_index(local, *p)].down_causes == 0;
        let n = hops.iter().filter(|p| live(p, self)).count();
        if n == 0 {
            return None;
        }
        let k = self.ecmp_choice(ctx, pkt, n);
        hops.iter().filter(|p| live(p, self)).nth(k).copied()
    }

    /// The port of the current host toward host `pkt.dst`: ECMP over the
    /// host's next hops in the tables in force, among the live ones, else
    /// among the live next hops of the next epochs' tables; the dead choice
    /// if none lives.
    pub(crate) fn host_port_toward(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        pkt: &Packet,
    ) -> u16 {
        let node = ctx.node().0;
        let local = ctx.local_index();
        let lo = self.port_base[local] as usize;
        // A host of one port (every fat-tree host) has that one next hop
        // toward any other host: no table lookup per ACK. ECMP among one
        // draws nothing, so nothing else changes.
        if self.port_base[local + 1] as usize == lo + 1 && pkt.dst != node && !self.port_is_down(lo)
        {
            return 0;
        }
        let hops = self.tables_at(ctx.now()).next_hops(node, pkt.dst);
        assert!(
            !hops.is_empty(),
            "host {node} has no route to host {}",
            pkt.dst
        );
        let port = hops.get(self.ecmp_choice(ctx, pkt, hops.len()));
        if !self.port_is_down(self.port_index(local, port)) {
            return port;
        }
        let ports = (self.port_base[local + 1] - self.port_base[local]) as usize;
        let live = (0..ports)
            .filter(|&i| self.ports[lo + i].down_causes == 0)
            .fold(0u64, |m, i| m | 1 << i);
        let plan = &self.fabric.faults;
        let first = plan.epoch_at(ctx.now()).map_or(0, |e| e + 1);
        let later = (first..plan.epoch_count()).map(|e| plan.tables(e).next_hops(node, pkt.dst));
        for hops in std::iter::once(hops).chain(later) {
            let NextHops::Mask(mask) = hops else {
                unreachable!("a host's next hops are a port mask")
            };
            let m = mask & live;
            if m != 0 {
                let n = m.count_ones() as usize;
                let k = ecmp_pick(
                    self.forwarding.ecmp_seed[local],
                    self.source_port(pkt),
                    pkt.src,
                    pkt.dst,
                    n,
                );
                return NextHops::Mask(m).get(k);
            }
        }
        port
    }
}
