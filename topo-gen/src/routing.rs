//! Shortest-path ECMP routing tables, compressed by destination class.
//!
//! *Shortest* means minimum total link latency (uniform latencies reduce to hop count);
//! only switches forward, hosts never transit. Switches that are linked to each other form
//! *switch components* (the fabric; each NVSwitch alone, since only GPUs touch it). Within
//! a component, the hosts that attach to the same switches with the same link latencies
//! form a *destination class* (per ToR or router; a dual-ToR NIC's pair of ToRs is its own
//! class) and share one table entry at every switch of that component. So tables grow with
//! switches x ToRs, not switches x hosts. Each switch interns its distinct next-hop port
//! sets. A switch attached to the destination delivers on its direct port(s).
//!
//! Hosts pick among their own ports (NIC, NVLink) by the same latency metric, so a GPU
//! reaches a GPU in its server over NVLink.
//!
//! A process that simulates only some nodes (an MPI rank) builds the tables with
//! [`Routing::build_for`]: full rows for the switches it owns, and elsewhere only the first
//! next hop (what a walk along a minimum-latency path needs, e.g. for an ideal completion
//! time). Rows dominate the memory of a large fabric, so each rank holds about its share.

mod tables;

use crate::error::TopoError;
use crate::graph::{LinkIndex, NodeIndex, PortIndex, Topology};

/// Table entries are a switch's own set ids, 16 bits (half the bytes a hop's lookup
/// misses on); these two mark no route and a direct attachment.
const NONE_SET: u16 = u16::MAX;
const DIRECT_SET: u16 = u16::MAX - 1;
/// First-hop table entries for switches outside the scope.
const NONE_PORT: PortIndex = PortIndex::MAX;
const DIRECT_PORT: PortIndex = PortIndex::MAX - 1;
/// Rows of switches (and latency rows of host-adjacent switches) not in the scope.
const NO_ROW: u32 = u32::MAX;
const INF: u64 = u64::MAX;
const NO_COMP: u32 = u32::MAX;

/// The next-hop ports of a node toward a destination host. Switches get a slice of an
/// interned set; hosts (at most 64 ports) get a bit mask over their ports. Empty when the
/// node is the destination or cannot reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHops<'a> {
    /// Port indices, ascending.
    Ports(&'a [PortIndex]),
    /// Bit `i` set means port `i`.
    Mask(u64),
}

impl NextHops<'_> {
    /// Number of next-hop ports (the ECMP fan-out).
    pub fn len(&self) -> usize {
        match self {
            NextHops::Ports(p) => p.len(),
            NextHops::Mask(m) => m.count_ones() as usize,
        }
    }
    /// True when there is no next hop.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `i`-th next-hop port in ascending order (for ECMP: `get(hash % len)`).
    ///
    /// Panics if `i >= len()`.
    pub fn get(&self, i: usize) -> PortIndex {
        match self {
            NextHops::Ports(p) => p[i],
            NextHops::Mask(m) => {
                let mut m = *m;
                for _ in 0..i {
                    m &= m - 1;
                }
                assert!(m != 0, "next-hop index {i} out of range");
                m.trailing_zeros() as PortIndex
            }
        }
    }
    /// The ports in ascending order.
    pub fn to_vec(&self) -> Vec<PortIndex> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}

/// Routing tables for one topology; see the module docs.
#[derive(Clone, Debug)]
pub struct Routing {
    /// Switch component of each node (`NO_COMP` for hosts).
    comp_of: Vec<u32>,
    /// Classes per component.
    comp_classes: Vec<u32>,
    /// Start of each switch's row in `entries` (one column per class of its component);
    /// `NO_ROW` for switches outside the scope.
    row_offset: Vec<u32>,
    /// The switch's own set id (global id `set_base[switch] + id`), `DIRECT_SET` or
    /// `NONE_SET`.
    entries: Vec<u16>,
    /// Per switch, the global id of its first set.
    set_base: Vec<u32>,
    /// `set_ports[set_offsets[s]..set_offsets[s + 1]]` are the ports of set `s`.
    set_offsets: Vec<u32>,
    set_ports: Vec<PortIndex>,
    /// Switches outside the scope: start of their row in `first_ports` (else `NO_ROW`).
    first_offset: Vec<u32>,
    /// Per class, the lowest next-hop port, `DIRECT_PORT` or `NONE_PORT`.
    first_ports: Vec<PortIndex>,
    /// Per host, its (component, class) pairs sorted by component.
    host_class_offsets: Vec<u32>,
    host_classes: Vec<(u32, u32)>,
    /// Per host, its first (component, class) pair (`(NO_COMP, 0)` if none): most
    /// lookups find the class here with one read instead of two dependent ones.
    host_first_class: Vec<(u32, u32)>,
    /// Per host, its attachments (switch, port at the switch) sorted by switch.
    attach_offsets: Vec<u32>,
    attach_switch: Vec<NodeIndex>,
    attach_port: Vec<PortIndex>,
    /// Per host port: the switch it leads to and the link latency (ps).
    host_port_offsets: Vec<u32>,
    host_port_switch: Vec<NodeIndex>,
    host_port_latency_ps: Vec<u64>,
    /// For switches adjacent to a host in the scope: start of its row of latencies (ps) to
    /// each class (else `NO_ROW`).
    adj_row: Vec<u32>,
    adj_latency_ps: Vec<u64>,
    /// Computed by [`Routing::build`] only.
    diameter_hops: Option<u32>,
}

impl Routing {
    /// Builds the tables of every switch, and the diameter, in parallel over destination
    /// classes. Fails if a link joins two hosts, a host has more than 64 ports, the tables
    /// would exceed `u32` indexing, or some host cannot reach another.
    pub fn build(topo: &Topology) -> Result<Routing, TopoError> {
        Routing::build_scoped(topo, None, u64::MAX)
    }

    /// Builds the tables a process simulating the nodes with `owned[node]` needs: full rows
    /// for owned switches ([`Routing::next_hops`] there), first next hops for the others
    /// ([`Routing::first_next_hop`] everywhere), host choices for owned hosts. No diameter.
    /// Fails as [`Routing::build`] does, whatever the scope.
    ///
    /// # Panics
    /// If `owned` does not have one entry per node.
    pub fn build_for(topo: &Topology, owned: &[bool]) -> Result<Routing, TopoError> {
        assert_eq!(
            owned.len(),
            topo.node_count() as usize,
            "one owned flag per node"
        );
        Routing::build_scoped(topo, Some(owned), u64::MAX)
    }

    /// [`Routing::build`] (`owned` `None`) or [`Routing::build_for`], failing
    /// with [`TopoError::TooLarge`] before allocating tables (with the
    /// latencies and hop counts built beside them) of more than `max_bytes`.
    pub fn build_within(
        topo: &Topology,
        owned: Option<&[bool]>,
        max_bytes: u64,
    ) -> Result<Routing, TopoError> {
        if let Some(owned) = owned {
            assert_eq!(
                owned.len(),
                topo.node_count() as usize,
                "one owned flag per node"
            );
        }
        Routing::build_scoped(topo, owned, max_bytes)
    }

    /// [`Routing::build_within`] for a fabric whose links `dead` have failed: a dead link
    /// costs [`Routing::DEAD_LINK_PS`], more than any path of live links, so the tables
    /// avoid it wherever a live path exists and keep it only toward destinations that
    /// nothing else reaches (traffic sent there is lost at the dead port). Port indices
    /// are those of `topo`.
    pub fn build_avoiding(
        topo: &Topology,
        owned: Option<&[bool]>,
        dead: &[LinkIndex],
        max_bytes: u64,
    ) -> Result<Routing, TopoError> {
        if dead.is_empty() {
            return Routing::build_within(topo, owned, max_bytes);
        }
        let costed = topo.with_link_latency(dead, Routing::DEAD_LINK_PS);
        Routing::build_within(&costed, owned, max_bytes)
    }

    /// The latency a failed link is given when routing around it: 1000 s, above any path
    /// of live links (at most 100 ms per link), and a thousand of them still sum far below
    /// `u64::MAX`.
    pub const DEAD_LINK_PS: u64 = 1_000_000_000_000_000;

    /// Next-hop ports of `node` (switch or host) toward host `dst`.
    pub fn next_hops(&self, node: NodeIndex, dst: NodeIndex) -> NextHops<'_> {
        if self.comp_of[node as usize] == NO_COMP {
            NextHops::Mask(self.host_next_hops(node, dst))
        } else {
            NextHops::Ports(self.switch_next_hops(node, dst))
        }
    }

    /// Next-hop ports of switch `s` toward host `dst` (empty if unreachable).
    ///
    /// Panics if `s` is not a switch, `dst` not a host, or `s` outside the scope of
    /// [`Routing::build_for`].
    pub fn switch_next_hops(&self, s: NodeIndex, dst: NodeIndex) -> &[PortIndex] {
        let c = self.comp_of[s as usize];
        assert!(c != NO_COMP, "node {s} is not a switch");
        let row = self.row_offset[s as usize];
        assert!(
            row != NO_ROW,
            "switch {s} is outside these routing tables' scope"
        );
        let Some(class) = self.class_of(dst, c) else {
            return &[];
        };
        match self.entries[row as usize + class as usize] {
            NONE_SET => &[],
            DIRECT_SET => self.direct_ports(s, dst),
            id => {
                let set = self.set_base[s as usize] as usize + id as usize;
                &self.set_ports[self.set_offsets[set] as usize..self.set_offsets[set + 1] as usize]
            }
        }
    }

    /// Ports of switch `s` that lead straight to host `dst`.
    fn direct_ports(&self, s: NodeIndex, dst: NodeIndex) -> &[PortIndex] {
        let lo = self.attach_offsets[dst as usize] as usize;
        let hi = self.attach_offsets[dst as usize + 1] as usize;
        let sw = &self.attach_switch[lo..hi];
        let a = lo + sw.partition_point(|&x| x < s);
        let b = lo + sw.partition_point(|&x| x <= s);
        &self.attach_port[a..b]
    }

    /// The lowest of the next-hop ports of `node` toward host `dst` (`next_hops(node,
    /// dst).get(0)`), also for switches outside the scope of [`Routing::build_for`]; `None`
    /// when there is none.
    ///
    /// Panics if `node` is a host outside the scope.
    pub fn first_next_hop(&self, node: NodeIndex, dst: NodeIndex) -> Option<PortIndex> {
        let c = self.comp_of[node as usize];
        if c == NO_COMP || self.row_offset[node as usize] != NO_ROW {
            let hops = self.next_hops(node, dst);
            return (!hops.is_empty()).then(|| hops.get(0));
        }
        let class = self.class_of(dst, c)?;
        match self.first_ports[self.first_offset[node as usize] as usize + class as usize] {
            NONE_PORT => None,
            DIRECT_PORT => self.direct_ports(node, dst).first().copied(),
            port => Some(port),
        }
    }

    /// Bit mask of host `h`'s ports on minimum-latency paths to host `dst` (0 if `h == dst`).
    ///
    /// Panics if `h` is outside the scope of [`Routing::build_for`].
    pub fn host_next_hops(&self, h: NodeIndex, dst: NodeIndex) -> u64 {
        if h == dst {
            return 0;
        }
        let lo = self.host_port_offsets[h as usize] as usize;
        let hi = self.host_port_offsets[h as usize + 1] as usize;
        let mut best = INF;
        let mut mask = 0u64;
        for i in lo..hi {
            let s = self.host_port_switch[i];
            let Some(class) = self.class_of(dst, self.comp_of[s as usize]) else {
                continue;
            };
            let row = self.adj_row[s as usize];
            assert!(
                row != NO_ROW,
                "host {h} is outside these routing tables' scope"
            );
            let d = self.adj_latency_ps[row as usize + class as usize];
            let v = d.saturating_add(self.host_port_latency_ps[i]);
            if v < best {
                best = v;
                mask = 0;
            }
            if v == best && v != INF {
                mask |= 1 << (i - lo);
            }
        }
        mask
    }

    /// Minimum total latency (ps) from host `src` to host `dst`; `None` if unreachable.
    ///
    /// Panics if `src` is outside the scope of [`Routing::build_for`].
    pub fn path_latency_ps(&self, src: NodeIndex, dst: NodeIndex) -> Option<u64> {
        if src == dst {
            return Some(0);
        }
        let lo = self.host_port_offsets[src as usize] as usize;
        let hi = self.host_port_offsets[src as usize + 1] as usize;
        (lo..hi)
            .filter_map(|i| {
                let s = self.host_port_switch[i];
                let class = self.class_of(dst, self.comp_of[s as usize])?;
                let row = self.adj_row[s as usize];
                assert!(
                    row != NO_ROW,
                    "host {src} is outside these routing tables' scope"
                );
                let d = self.adj_latency_ps[row as usize + class as usize];
                (d != INF).then(|| d + self.host_port_latency_ps[i])
            })
            .min()
    }

    /// Follows next hops from host `src` to host `dst`, taking `choose(n)` (in `0..n`) among
    /// `n` ECMP ports at each hop. Returns the nodes visited, `src` and `dst` included.
    ///
    /// Panics if the walk dead-ends or loops (a routing bug, not a user error).
    pub fn path(
        &self,
        topo: &Topology,
        src: NodeIndex,
        dst: NodeIndex,
        choose: &mut impl FnMut(usize) -> usize,
    ) -> Vec<NodeIndex> {
        self.walk(topo, src, dst, None, choose)
    }

    /// Follows next hops from `from` toward host `dst`, stopping at `stop` if reached first.
    pub(crate) fn walk(
        &self,
        topo: &Topology,
        from: NodeIndex,
        dst: NodeIndex,
        stop: Option<NodeIndex>,
        choose: &mut impl FnMut(usize) -> usize,
    ) -> Vec<NodeIndex> {
        let mut path = vec![from];
        let mut at = from;
        while at != dst && Some(at) != stop {
            let hops = self.next_hops(at, dst);
            assert!(!hops.is_empty(), "no route from {at} to {dst}");
            let port = hops.get(choose(hops.len()) % hops.len());
            at = topo.port(at, port).peer;
            path.push(at);
            assert!(
                path.len() <= topo.node_count() as usize + 1,
                "routing loop toward {dst}"
            );
        }
        path
    }

    /// Largest number of links between two hosts on a minimum-hop path (hosts never
    /// transit); 0 with fewer than two hosts.
    ///
    /// Panics on tables from [`Routing::build_for`], which skips it.
    pub fn diameter_hops(&self) -> u32 {
        self.diameter_hops
            .expect("the diameter is computed by Routing::build, not build_for")
    }

    /// Number of destination classes over all switch components.
    pub fn class_count(&self) -> u32 {
        self.comp_classes.iter().sum()
    }

    /// Number of switch table entries (switches x classes of their component).
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Number of distinct interned next-hop sets (summed over switches).
    pub fn set_count(&self) -> usize {
        self.set_offsets.len() - 1
    }

    /// Approximate heap bytes held by the tables.
    pub fn memory_bytes(&self) -> usize {
        self.comp_of.len() * 4
            + self.row_offset.len() * 4
            + self.entries.len() * 2
            + self.set_base.len() * 4
            + self.set_offsets.len() * 4
            + self.set_ports.len() * 2
            + self.first_offset.len() * 4
            + self.first_ports.len() * 2
            + self.host_class_offsets.len() * 4
            + self.host_classes.len() * 8
            + self.host_first_class.len() * 8
            + self.attach_offsets.len() * 4
            + self.attach_switch.len() * 6
            + self.host_port_offsets.len() * 4
            + self.host_port_switch.len() * 12
            + self.adj_row.len() * 4
            + self.adj_latency_ps.len() * 8
    }

    /// Host `dst`'s class in switch component `c`, if it attaches to that component.
    #[inline]
    fn class_of(&self, dst: NodeIndex, c: u32) -> Option<u32> {
        let first = self.host_first_class[dst as usize];
        if first.0 == c {
            return Some(first.1);
        }
        let lo = self.host_class_offsets[dst as usize] as usize;
        let hi = self.host_class_offsets[dst as usize + 1] as usize;
        self.host_classes[lo..hi]
            .iter()
            .find(|x| x.0 == c)
            .map(|x| x.1)
    }
}
