//! The shape of the routing tables before any route: switch components,
//! hosts' attachments and destination classes, each component's local
//! adjacency, and where each switch's row goes.

use std::collections::HashMap;

use super::super::{DIRECT_PORT, NO_COMP, NO_ROW};
use super::Comp;
use crate::error::TopoError;
use crate::graph::{NodeIndex, PortIndex, Topology};

/// Each destination class's id by its component and (switch, latency)
/// attachments.
type ClassIndex = HashMap<(u32, Vec<(NodeIndex, u64)>), u32>;

/// The switches whose full rows are built (all of them without a list);
/// the others get first hops only.
#[derive(Clone, Copy)]
pub(super) struct Scope<'a>(pub(super) Option<&'a [bool]>);

impl Scope<'_> {
    pub(super) fn has(self, node: usize) -> bool {
        self.0.is_none_or(|o| o[node])
    }
}

/// The connected components of the switches (over switch-switch links):
/// each node's component and index within it, and the components.
pub(super) fn switch_components(topo: &Topology) -> (Vec<u32>, Vec<u32>, Vec<Comp>) {
    let n = topo.node_count() as usize;
    let hosts = topo.host_count() as usize;
    let mut comp_of = vec![NO_COMP; n];
    let mut local_of = vec![u32::MAX; n];
    let mut comps: Vec<Comp> = Vec::new();
    for s in hosts..n {
        if comp_of[s] != NO_COMP {
            continue;
        }
        let c = comps.len() as u32;
        let mut switches = vec![s as NodeIndex];
        comp_of[s] = c;
        let mut i = 0;
        while i < switches.len() {
            let x = switches[i];
            i += 1;
            for p in topo.ports(x) {
                if !topo.is_host(p.peer) && comp_of[p.peer as usize] == NO_COMP {
                    comp_of[p.peer as usize] = c;
                    switches.push(p.peer);
                }
            }
        }
        switches.sort_unstable();
        for (i, &x) in switches.iter().enumerate() {
            local_of[x as usize] = i as u32;
        }
        comps.push(Comp {
            switches,
            adj_offsets: Vec::new(),
            adj: Vec::new(),
            word_offsets: Vec::new(),
            foreign: Vec::new(),
            host_adjacent: Vec::new(),
            classes: Vec::new(),
        });
    }
    (comp_of, local_of, comps)
}

/// Hosts' attachments and destination classes: hosts attached to the same
/// switches of a component at the same latencies share a class.
pub(super) struct HostClasses {
    /// Each class's (switch, latency) attachments.
    pub(super) class_keys: Vec<Vec<(NodeIndex, u64)>>,
    pub(super) host_class_offsets: Vec<u32>,
    /// Per host, (component, local class) of each component it attaches to.
    pub(super) host_classes: Vec<(u32, u32)>,
    pub(super) attach_offsets: Vec<u32>,
    /// Per host, (switch, switch port) of each link, sorted.
    pub(super) attach: Vec<(NodeIndex, PortIndex)>,
    pub(super) host_port_offsets: Vec<u32>,
    pub(super) host_port_switch: Vec<NodeIndex>,
    pub(super) host_port_latency_ps: Vec<u64>,
    /// Switches linked to a host in the scope.
    pub(super) host_adjacent: Vec<bool>,
}

impl HostClasses {
    /// The hosts of `topo` and their classes, each class listed in its
    /// component of `comps`; an error for a host with over 64 ports or
    /// linked to a host.
    pub(super) fn of(
        topo: &Topology,
        comp_of: &[u32],
        comps: &mut [Comp],
        scope: Scope<'_>,
    ) -> Result<HostClasses, TopoError> {
        let mut class_index = ClassIndex::new();
        let mut h = HostClasses {
            class_keys: Vec::new(),
            host_class_offsets: vec![0u32],
            host_classes: Vec::new(),
            attach_offsets: vec![0u32],
            attach: Vec::new(),
            host_port_offsets: vec![0u32],
            host_port_switch: Vec::new(),
            host_port_latency_ps: Vec::new(),
            host_adjacent: vec![false; topo.node_count() as usize],
        };
        for host in 0..topo.host_count() as NodeIndex {
            let key = h.attach_host(topo, host, comp_of, scope)?;
            h.add_classes(key, &mut class_index, comps);
        }
        drop(class_index);
        // Global class id -> local column within its component.
        let mut class_local = vec![0u32; h.class_keys.len()];
        for comp in comps.iter() {
            for (i, &g) in comp.classes.iter().enumerate() {
                class_local[g as usize] = i as u32;
            }
        }
        for hc in &mut h.host_classes {
            hc.1 = class_local[hc.1 as usize];
        }
        Ok(h)
    }

    /// Records `host`'s links; returns its (component, switch, latency)
    /// attachments, sorted, parallel links to one switch once at their
    /// lowest latency.
    fn attach_host(
        &mut self,
        topo: &Topology,
        host: NodeIndex,
        comp_of: &[u32],
        scope: Scope<'_>,
    ) -> Result<Vec<(u32, NodeIndex, u64)>, TopoError> {
        let ports = topo.ports(host);
        if ports.len() > 64 {
            return Err(TopoError::TooLarge(format!(
                "host {host} has {} ports; hosts may have at most 64",
                ports.len()
            )));
        }
        let mut key: Vec<(u32, NodeIndex, u64)> = Vec::with_capacity(ports.len());
        let start = self.attach.len();
        for p in ports {
            if topo.is_host(p.peer) {
                return Err(TopoError::Invalid(format!(
                    "link {} joins hosts {host} and {}; hosts attach only to switches",
                    p.link, p.peer
                )));
            }
            let lat = topo.link(p.link).latency_ps;
            key.push((comp_of[p.peer as usize], p.peer, lat));
            self.attach.push((p.peer, p.peer_port));
            self.host_port_switch.push(p.peer);
            self.host_port_latency_ps.push(lat);
            if scope.has(host as usize) {
                self.host_adjacent[p.peer as usize] = true;
            }
        }
        self.attach[start..].sort_unstable();
        self.attach_offsets.push(self.attach.len() as u32);
        self.host_port_offsets
            .push(self.host_port_switch.len() as u32);
        // Parallel links to one switch count once, at their lowest latency.
        key.sort_unstable();
        key.dedup_by(|b, a| a.0 == b.0 && a.1 == b.1);
        Ok(key)
    }

    /// The host's class in each component of its attachments `key`
    /// (global ids for now), a new class where no host had its attachments.
    fn add_classes(
        &mut self,
        key: Vec<(u32, NodeIndex, u64)>,
        class_index: &mut ClassIndex,
        comps: &mut [Comp],
    ) {
        let mut i = 0;
        while i < key.len() {
            let c = key[i].0;
            let mut j = i;
            while j < key.len() && key[j].0 == c {
                j += 1;
            }
            let k: Vec<(NodeIndex, u64)> = key[i..j].iter().map(|x| (x.1, x.2)).collect();
            let next = self.class_keys.len() as u32;
            let class_keys = &mut self.class_keys;
            let id = *class_index.entry((c, k.clone())).or_insert_with(|| {
                class_keys.push(k);
                next
            });
            if id == next {
                comps[c as usize].classes.push(id);
            }
            self.host_classes.push((c, id));
            i = j;
        }
        self.host_class_offsets.push(self.host_classes.len() as u32);
    }
}

/// Each component's adjacency over switch-switch links in local indices,
/// and its next-hop bitset layout; an error for a switch with too many ports.
pub(super) fn local_adjacency(
    topo: &Topology,
    local_of: &[u32],
    host_adjacent: &[bool],
    comps: &mut [Comp],
    scope: Scope<'_>,
) -> Result<(), TopoError> {
    for comp in comps {
        let mut offs = vec![0u32];
        let mut adj = Vec::new();
        let mut words = vec![0u32];
        for (li, &s) in comp.switches.iter().enumerate() {
            if topo.ports(s).len() >= DIRECT_PORT as usize {
                return Err(TopoError::TooLarge(format!(
                    "switch {s} has {} ports; switches may have at most {}",
                    topo.ports(s).len(),
                    DIRECT_PORT - 1
                )));
            }
            for (pi, p) in topo.ports(s).iter().enumerate() {
                if !topo.is_host(p.peer) {
                    adj.push((
                        local_of[p.peer as usize],
                        pi as PortIndex,
                        topo.link(p.link).latency_ps,
                    ));
                }
            }
            offs.push(adj.len() as u32);
            let w = if scope.has(s as usize) {
                topo.ports(s).len().div_ceil(64) as u32
            } else {
                comp.foreign.push(li as u32);
                0
            };
            words.push(words[li] + w);
            if host_adjacent[s as usize] {
                comp.host_adjacent.push(li as u32);
            }
        }
        comp.adj_offsets = offs;
        comp.adj = adj;
        comp.word_offsets = words;
    }
    Ok(())
}

/// Where each switch's row goes: a row per switch in the scope, a
/// first-hop row per other switch, each a column per class of its component.
pub(super) struct TableLayout {
    pub(super) row_offset: Vec<u32>,
    pub(super) first_offset: Vec<u32>,
    /// Entries of the rows.
    pub(super) total: u64,
    /// Entries of the first-hop rows.
    pub(super) first_total: u64,
}

impl TableLayout {
    /// The layout of `comps`' rows; an error past `u32` entries.
    pub(super) fn of(
        topo: &Topology,
        comps: &[Comp],
        scope: Scope<'_>,
    ) -> Result<TableLayout, TopoError> {
        let n = topo.node_count() as usize;
        let mut row_offset = vec![NO_ROW; n];
        let mut first_offset = vec![NO_ROW; n];
        let (mut total, mut first_total) = (0u64, 0u64);
        for comp in comps {
            for &s in &comp.switches {
                let (offset, count) = if scope.has(s as usize) {
                    (&mut row_offset[s as usize], &mut total)
                } else {
                    (&mut first_offset[s as usize], &mut first_total)
                };
                *offset = *count as u32;
                *count += comp.classes.len() as u64;
                if *count > (u32::MAX - 2) as u64 {
                    return Err(TopoError::TooLarge(format!(
                        "routing tables would need more than {} entries",
                        u32::MAX - 2
                    )));
                }
            }
        }
        Ok(TableLayout {
            row_offset,
            first_offset,
            total,
            first_total,
        })
    }

    /// An error if the tables and what is built beside them would need more
    /// than `max_bytes`.
    pub(super) fn check_bytes(
        &self,
        comps: &[Comp],
        diameter: bool,
        max_bytes: u64,
    ) -> Result<(), TopoError> {
        // Beside the tables: each host-adjacent switch's latency to each
        // class (kept), and while building, the hops between classes for
        // the diameter (a dragonfly with h = 255 needs 2 GiB and 1 GiB of
        // them beside 1 GiB of tables).
        let side_bytes = comps.iter().fold(0u64, |sum, comp| {
            let m = comp.classes.len() as u64;
            let adj = (comp.host_adjacent.len() as u64)
                .saturating_mul(m)
                .saturating_mul(std::mem::size_of::<u64>() as u64);
            let hops = if diameter {
                m.saturating_mul(m)
                    .saturating_mul(std::mem::size_of::<u32>() as u64)
            } else {
                0
            };
            sum.saturating_add(adj).saturating_add(hops)
        });
        let total = self.total;
        let table_bytes = (total * std::mem::size_of::<u16>() as u64
            + self.first_total * std::mem::size_of::<PortIndex>() as u64)
            .saturating_add(side_bytes);
        if table_bytes > max_bytes {
            return Err(TopoError::TooLarge(format!(
                "its routing tables need ~{:.1} GiB ({total} entries), more than the {:.1} GiB \
                 this process has left",
                table_bytes as f64 / (1u64 << 30) as f64,
                max_bytes as f64 / (1u64 << 30) as f64
            )));
        }
        Ok(())
    }
}
