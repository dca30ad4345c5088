//! Building the routing tables: switch components, destination classes,
//! Dijkstra per class in parallel chunks, next-hop sets interned per switch,
//! and the reachability check with the hop diameter. Lookups are in the
//! parent module.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rayon::prelude::*;

mod layout;

use super::{Routing, DIRECT_PORT, DIRECT_SET, INF, NONE_PORT, NONE_SET, NO_ROW};
use crate::error::TopoError;
use crate::graph::{NodeIndex, PortIndex, Topology};
use layout::{local_adjacency, switch_components, HostClasses, Scope, TableLayout};

/// Destination classes routed at once: enough to keep every core busy, few enough that
/// their next-hop bits stay small next to the tables.
const CLASS_CHUNK: usize = 64;

/// Per-component working data.
struct Comp {
    switches: Vec<NodeIndex>,
    /// Local adjacency over switch-switch ports: (local peer, port at this switch, latency).
    adj_offsets: Vec<u32>,
    adj: Vec<(u32, PortIndex, u64)>,
    /// Start of each switch's words in a class's next-hop bitset (none for switches outside
    /// the scope).
    word_offsets: Vec<u32>,
    /// Local indices of the switches outside the scope.
    foreign: Vec<u32>,
    /// Local indices of switches adjacent to a host in the scope.
    host_adjacent: Vec<u32>,
    /// Global class ids of this component, by local class id.
    classes: Vec<u32>,
}

/// What one destination class contributes: next-hop bits per switch in the scope, first
/// next hops of the others, latencies from the host-adjacent switches, and (for the
/// diameter) host-to-host hop counts from every class of the component.
struct ClassOut {
    bits: Vec<u64>,
    first_ports: Vec<PortIndex>,
    adj_latency_ps: Vec<u64>,
    hops_from: Vec<u32>,
}

impl Routing {
    /// The routing tables of `topo`: full rows for the switches `owned`
    /// (all without it), first hops for the others; with every switch
    /// owned, the hop diameter too. An error if they would need more than
    /// `max_bytes`.
    pub(super) fn build_scoped(
        topo: &Topology,
        owned: Option<&[bool]>,
        max_bytes: u64,
    ) -> Result<Routing, TopoError> {
        let scope = Scope(owned);
        let diameter = owned.is_none();
        let (comp_of, local_of, mut comps) = switch_components(topo);
        let hosts = HostClasses::of(topo, &comp_of, &mut comps, scope)?;
        local_adjacency(topo, &local_of, &hosts.host_adjacent, &mut comps, scope)?;
        let layout = TableLayout::of(topo, &comps, scope)?;
        layout.check_bytes(&comps, diameter, max_bytes)?;
        let mut t = Tables::new(topo.node_count() as usize, &layout);
        // Destination classes a chunk at a time (in parallel within a chunk): shortest
        // latencies and next hops go straight into the tables, so the working memory is
        // one chunk's, not every class's.
        let mut hop_tables: Vec<Vec<u32>> = Vec::new();
        for comp in &comps {
            hop_tables.push(t.route_component(
                comp,
                &hosts.class_keys,
                &local_of,
                &layout,
                scope,
                diameter,
            )?);
        }
        let hop_tables = diameter.then_some(hop_tables);
        let HostClasses {
            host_class_offsets,
            host_classes,
            attach_offsets,
            attach,
            host_port_offsets,
            host_port_switch,
            host_port_latency_ps,
            ..
        } = hosts;
        let host_first_class = (0..host_class_offsets.len() - 1)
            .map(|h| {
                let lo = host_class_offsets[h] as usize;
                let hi = host_class_offsets[h + 1] as usize;
                host_classes[lo..hi]
                    .first()
                    .copied()
                    .unwrap_or((super::NO_COMP, 0))
            })
            .collect();
        let mut r = Routing {
            comp_of,
            comp_classes: comps.iter().map(|c| c.classes.len() as u32).collect(),
            row_offset: layout.row_offset,
            entries: t.entries,
            set_base: t.set_base,
            set_offsets: t.set_offsets,
            set_ports: t.set_ports,
            first_offset: layout.first_offset,
            first_ports: t.first_ports,
            host_class_offsets,
            host_classes,
            host_first_class,
            attach_offsets,
            attach_switch: attach.iter().map(|a| a.0).collect(),
            attach_port: attach.iter().map(|a| a.1).collect(),
            host_port_offsets,
            host_port_switch,
            host_port_latency_ps,
            adj_row: t.adj_row,
            adj_latency_ps: t.adj_latency_ps,
            diameter_hops: None,
        };
        r.diameter_hops = r.check_and_diameter(hop_tables.as_deref())?;
        Ok(r)
    }

    /// Checks that every host reaches every other and returns the hop diameter.
    /// `hop_tables[c][b * classes + a]` = hops from a class-a host to a class-b host in c.
    /// Without `hop_tables`, only checks (two hosts reach each other exactly when they
    /// attach to a common switch component, which is connected) and returns `None`.
    fn check_and_diameter(
        &self,
        hop_tables: Option<&[Vec<u32>]>,
    ) -> Result<Option<u32>, TopoError> {
        let hosts = self.host_class_offsets.len() - 1;
        if hosts >= 2 {
            if let Some(h) =
                (0..hosts).find(|&h| self.host_class_offsets[h] == self.host_class_offsets[h + 1])
            {
                let other = if h == 0 { 1 } else { 0 };
                return Err(TopoError::Unreachable {
                    from: h as u32,
                    to: other,
                });
            }
        }
        // Hosts with the same (component, class) list are interchangeable.
        let mut keys: HashMap<&[(u32, u32)], (u32, u32)> = HashMap::new();
        for h in 0..hosts {
            let lo = self.host_class_offsets[h] as usize;
            let hi = self.host_class_offsets[h + 1] as usize;
            keys.entry(&self.host_classes[lo..hi])
                .and_modify(|e| e.1 += 1)
                .or_insert((h as u32, 1));
        }
        // (classes, first host, number of hosts)
        type Key<'a> = (&'a [(u32, u32)], u32, u32);
        let mut keys: Vec<Key> = keys.into_iter().map(|(k, (h, cnt))| (k, h, cnt)).collect();
        keys.sort_unstable_by_key(|k| k.1);
        let hops = |a: &[(u32, u32)], b: &[(u32, u32)]| -> u32 {
            let (mut i, mut j, mut best) = (0, 0, u32::MAX);
            while i < a.len() && j < b.len() {
                match a[i].0.cmp(&b[j].0) {
                    std::cmp::Ordering::Less => i += 1,
                    std::cmp::Ordering::Greater => j += 1,
                    std::cmp::Ordering::Equal => {
                        let c = a[i].0 as usize;
                        let m = self.comp_classes[c] as usize;
                        best = best.min(
                            hop_tables.map_or(0, |t| t[c][b[j].1 as usize * m + a[i].1 as usize]),
                        );
                        i += 1;
                        j += 1;
                    }
                }
            }
            best
        };
        let worst = (0..keys.len())
            .into_par_iter()
            .map(|i| {
                let (ka, ha, cnt) = keys[i];
                let mut worst: Result<u32, (u32, u32)> = Ok(0);
                let from = if cnt >= 2 { i } else { i + 1 };
                for &(kb, hb, _) in &keys[from..] {
                    let d = hops(ka, kb);
                    if d == u32::MAX {
                        worst = Err((ha, hb));
                        break;
                    }
                    worst = worst.map(|w| w.max(d));
                }
                (i, worst)
            })
            .collect::<Vec<_>>();
        let mut diameter = 0;
        for (_, w) in worst {
            match w {
                Ok(d) => diameter = diameter.max(d),
                Err((from, to)) => return Err(TopoError::Unreachable { from, to }),
            }
        }
        Ok(hop_tables.is_some().then_some(diameter))
    }
}

/// The tables being filled, component by component.
struct Tables {
    entries: Vec<u16>,
    set_base: Vec<u32>,
    first_ports: Vec<PortIndex>,
    set_offsets: Vec<u32>,
    set_ports: Vec<PortIndex>,
    adj_row: Vec<u32>,
    adj_latency_ps: Vec<u64>,
}

impl Tables {
    /// Empty tables of `layout`'s sizes for `n` nodes.
    fn new(n: usize, layout: &TableLayout) -> Tables {
        Tables {
            entries: vec![NONE_SET; layout.total as usize],
            set_base: vec![0; n],
            first_ports: vec![NONE_PORT; layout.first_total as usize],
            set_offsets: vec![0u32],
            set_ports: Vec::new(),
            adj_row: vec![NO_ROW; n],
            adj_latency_ps: Vec::new(),
        }
    }

    /// Routes every destination class of `comp` into the tables; returns
    /// the hops between its classes when computing the `diameter` (else empty).
    fn route_component(
        &mut self,
        comp: &Comp,
        class_keys: &[Vec<(NodeIndex, u64)>],
        local_of: &[u32],
        layout: &TableLayout,
        scope: Scope<'_>,
        diameter: bool,
    ) -> Result<Vec<u32>, TopoError> {
        let m = comp.classes.len();
        let owned: Vec<usize> = (0..comp.switches.len())
            .filter(|&li| scope.has(comp.switches[li] as usize))
            .collect();
        let rows_start = owned.first().map_or(0, |&li| {
            layout.row_offset[comp.switches[li] as usize] as usize
        });
        let rows = &mut self.entries[rows_start..rows_start + owned.len() * m];
        let mut interners: Vec<SetInterner> =
            owned.iter().map(|_| SetInterner::default()).collect();
        let adj_base = self.adj_latency_ps.len();
        for (ai, &li) in comp.host_adjacent.iter().enumerate() {
            self.adj_row[comp.switches[li as usize] as usize] = (adj_base + ai * m) as u32;
        }
        self.adj_latency_ps
            .resize(adj_base + comp.host_adjacent.len() * m, INF);
        let mut hops = vec![0u32; if diameter { m * m } else { 0 }];
        for chunk_start in (0..m).step_by(CLASS_CHUNK) {
            let chunk = &comp.classes[chunk_start..m.min(chunk_start + CLASS_CHUNK)];
            let outs: Vec<ClassOut> = chunk
                .par_iter()
                .map(|&g| class_routes(comp, class_keys, local_of, g, diameter))
                .collect();
            rows.par_chunks_mut(m.max(1))
                .zip(interners.par_iter_mut())
                .zip(owned.par_iter())
                .for_each(|((row, interner), &li)| {
                    interner.add(comp, class_keys, chunk, &outs, li, &mut row[chunk_start..]);
                });
            for (k, o) in outs.iter().enumerate() {
                let class = chunk_start + k;
                for (fi, &li) in comp.foreign.iter().enumerate() {
                    let off = layout.first_offset[comp.switches[li as usize] as usize] as usize;
                    self.first_ports[off + class] = o.first_ports[fi];
                }
                for (ai, &latency) in o.adj_latency_ps.iter().enumerate() {
                    self.adj_latency_ps[adj_base + ai * m + class] = latency;
                }
                if diameter {
                    hops[class * m..(class + 1) * m].copy_from_slice(&o.hops_from);
                }
            }
        }
        if interners.iter().any(|i| i.overflow) {
            return Err(TopoError::TooLarge(
                "a switch with more than 65,534 distinct next-hop sets".into(),
            ));
        }
        // Each switch's sets follow the sets before; its entries keep their own ids.
        for (&li, interner) in owned.iter().zip(interners) {
            let base = (self.set_offsets.len() - 1) as u64;
            if base + interner.offsets.len() as u64 > u64::from(u32::MAX - 1) {
                return Err(TopoError::TooLarge("too many next-hop sets".into()));
            }
            self.set_base[comp.switches[li] as usize] = base as u32;
            let port_base = self.set_ports.len() as u32;
            self.set_offsets
                .extend(interner.offsets.iter().map(|&o| port_base + o));
            self.set_ports.extend_from_slice(&interner.ports);
        }
        Ok(hops)
    }
}

/// Dijkstra and BFS from destination class `g`'s attachment switches over its component.
fn class_routes(
    comp: &Comp,
    class_keys: &[Vec<(NodeIndex, u64)>],
    local_of: &[u32],
    g: u32,
    diameter: bool,
) -> ClassOut {
    let n = comp.switches.len();
    let key = &class_keys[g as usize];
    let mut dist = vec![INF; n];
    let mut heap = BinaryHeap::new();
    for &(s, lat) in key {
        let l = local_of[s as usize];
        dist[l as usize] = lat;
        heap.push(Reverse((lat, l)));
    }
    while let Some(Reverse((d, u))) = heap.pop() {
        if d > dist[u as usize] {
            continue;
        }
        let (lo, hi) = (
            comp.adj_offsets[u as usize] as usize,
            comp.adj_offsets[u as usize + 1] as usize,
        );
        for &(v, _, lat) in &comp.adj[lo..hi] {
            let nd = d.saturating_add(lat);
            if nd < dist[v as usize] {
                dist[v as usize] = nd;
                heap.push(Reverse((nd, v)));
            }
        }
    }
    let dist = &dist;
    let on_shortest_path = |u: usize| {
        comp.adj[comp.adj_offsets[u] as usize..comp.adj_offsets[u + 1] as usize]
            .iter()
            .filter(move |&&(v, _, lat)| {
                dist[v as usize] != INF && dist[v as usize] + lat == dist[u]
            })
            .map(|&(_, port, _)| port)
    };
    let attached = |u: usize| key.binary_search_by_key(&comp.switches[u], |k| k.0).is_ok();
    let mut bits = vec![0u64; *comp.word_offsets.last().unwrap_or(&0) as usize];
    for (u, &d) in dist.iter().enumerate() {
        let w0 = comp.word_offsets[u] as usize;
        if d == INF || w0 == comp.word_offsets[u + 1] as usize || attached(u) {
            continue;
        }
        for port in on_shortest_path(u) {
            bits[w0 + port as usize / 64] |= 1 << (port % 64);
        }
    }
    let first_ports = comp
        .foreign
        .iter()
        .map(|&u| {
            let u = u as usize;
            if attached(u) {
                DIRECT_PORT
            } else if dist[u] == INF {
                NONE_PORT
            } else {
                on_shortest_path(u).min().unwrap_or(NONE_PORT)
            }
        })
        .collect();
    if !diameter {
        return ClassOut {
            bits,
            first_ports,
            adj_latency_ps: adj_latencies(comp, dist),
            hops_from: Vec::new(),
        };
    }
    // Hop counts for the diameter: BFS from the attachment switches.
    let mut hop = vec![u32::MAX; n];
    let mut queue: Vec<u32> = key.iter().map(|&(s, _)| local_of[s as usize]).collect();
    for &l in &queue {
        hop[l as usize] = 0;
    }
    let mut i = 0;
    while i < queue.len() {
        let u = queue[i] as usize;
        i += 1;
        for &(v, _, _) in &comp.adj[comp.adj_offsets[u] as usize..comp.adj_offsets[u + 1] as usize]
        {
            if hop[v as usize] == u32::MAX {
                hop[v as usize] = hop[u] + 1;
                queue.push(v);
            }
        }
    }
    let hops_from = comp
        .classes
        .iter()
        .map(|&a| {
            class_keys[a as usize]
                .iter()
                .map(|&(s, _)| hop[local_of[s as usize] as usize])
                .min()
                .map_or(u32::MAX, |h| h.saturating_add(2))
        })
        .collect();
    ClassOut {
        bits,
        first_ports,
        adj_latency_ps: adj_latencies(comp, dist),
        hops_from,
    }
}

/// Latencies to the class from the component's host-adjacent switches.
fn adj_latencies(comp: &Comp, dist: &[u64]) -> Vec<u64> {
    comp.host_adjacent
        .iter()
        .map(|&l| dist[l as usize])
        .collect()
}

/// One switch's distinct next-hop sets, interned as the classes come by.
#[derive(Default)]
struct SetInterner {
    index: HashMap<Box<[u64]>, u16>,
    /// More sets than 16-bit ids: the tables cannot be built.
    overflow: bool,
    /// Set `i` is `ports[offsets[i - 1]..offsets[i]]` (from 0 for the first).
    offsets: Vec<u32>,
    ports: Vec<PortIndex>,
}

impl SetInterner {
    /// Writes switch `li`'s entries for the classes of `outs` into `row`: a local set id,
    /// `DIRECT_SET` or `NONE_SET`. Fails when the switch has more distinct next-hop sets
    /// than a 16-bit id tells apart (65,534; a switch of `p` ports has at most
    /// `2^p - 1`, and in the fabrics built here a few per port).
    fn add(
        &mut self,
        comp: &Comp,
        class_keys: &[Vec<(NodeIndex, u64)>],
        classes: &[u32],
        outs: &[ClassOut],
        li: usize,
        row: &mut [u16],
    ) {
        let s = comp.switches[li];
        let (w0, w1) = (
            comp.word_offsets[li] as usize,
            comp.word_offsets[li + 1] as usize,
        );
        for ((o, &g), entry) in outs.iter().zip(classes).zip(row) {
            let words = &o.bits[w0..w1];
            *entry = if class_keys[g as usize]
                .binary_search_by_key(&s, |x| x.0)
                .is_ok()
            {
                DIRECT_SET
            } else if words.iter().all(|&w| w == 0) {
                NONE_SET
            } else if let Some(&id) = self.index.get(words) {
                id
            } else if self.offsets.len() >= usize::from(DIRECT_SET) {
                self.overflow = true;
                NONE_SET
            } else {
                let id = self.offsets.len() as u16;
                for (wi, &w) in words.iter().enumerate() {
                    let mut w = w;
                    while w != 0 {
                        self.ports
                            .push((wi * 64 + w.trailing_zeros() as usize) as PortIndex);
                        w &= w - 1;
                    }
                }
                self.offsets.push(self.ports.len() as u32);
                self.index.insert(words.into(), id);
                id
            };
        }
    }
}
