//! Building the routing tables: switch components, destination classes,
//! Dijkstra per class in parallel chunks, next-hop sets interned per switch,
//! and the reachability check with the hop diameter. Lookups are in the
//! parent module.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rayon::prelude::*;

use super::{Routing, DIRECT_PORT, DIRECT_SET, INF, NONE_PORT, NONE_SET, NO_COMP, NO_ROW};
use crate::error::TopoError;
use crate::graph::{NodeIndex, PortIndex, Topology};

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
    pub(super) fn build_scoped(
        topo: &Topology,
        owned: Option<&[bool]>,
        max_bytes: u64,
    ) -> Result<Routing, TopoError> {
        let n = topo.node_count() as usize;
        let hosts = topo.host_count() as usize;
        let in_scope = |node: usize| owned.is_none_or(|o| o[node]);
        let diameter = owned.is_none();

        // Switch components.
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

        // Host attachments and destination classes.
        let mut class_index: HashMap<(u32, Vec<(NodeIndex, u64)>), u32> = HashMap::new();
        let mut class_keys: Vec<Vec<(NodeIndex, u64)>> = Vec::new();
        let mut class_comp: Vec<u32> = Vec::new();
        let mut host_class_offsets = vec![0u32];
        let mut host_classes = Vec::new();
        let mut attach_offsets = vec![0u32];
        let mut attach: Vec<(NodeIndex, PortIndex)> = Vec::new();
        let mut host_port_offsets = vec![0u32];
        let mut host_port_switch = Vec::new();
        let mut host_port_latency_ps = Vec::new();
        let mut host_adjacent = vec![false; n];
        for h in 0..hosts as NodeIndex {
            let ports = topo.ports(h);
            if ports.len() > 64 {
                return Err(TopoError::TooLarge(format!(
                    "host {h} has {} ports; hosts may have at most 64",
                    ports.len()
                )));
            }
            let mut key: Vec<(u32, NodeIndex, u64)> = Vec::with_capacity(ports.len());
            let start = attach.len();
            for p in ports {
                if topo.is_host(p.peer) {
                    return Err(TopoError::Invalid(format!(
                        "link {} joins hosts {h} and {}; hosts attach only to switches",
                        p.link, p.peer
                    )));
                }
                let lat = topo.link(p.link).latency_ps;
                key.push((comp_of[p.peer as usize], p.peer, lat));
                attach.push((p.peer, p.peer_port));
                host_port_switch.push(p.peer);
                host_port_latency_ps.push(lat);
                if in_scope(h as usize) {
                    host_adjacent[p.peer as usize] = true;
                }
            }
            attach[start..].sort_unstable();
            attach_offsets.push(attach.len() as u32);
            host_port_offsets.push(host_port_switch.len() as u32);
            // Parallel links to one switch count once, at their lowest latency.
            key.sort_unstable();
            key.dedup_by(|b, a| a.0 == b.0 && a.1 == b.1);
            let mut i = 0;
            while i < key.len() {
                let c = key[i].0;
                let mut j = i;
                while j < key.len() && key[j].0 == c {
                    j += 1;
                }
                let k: Vec<(NodeIndex, u64)> = key[i..j].iter().map(|x| (x.1, x.2)).collect();
                let next = class_keys.len() as u32;
                let id = *class_index.entry((c, k.clone())).or_insert_with(|| {
                    class_keys.push(k);
                    class_comp.push(c);
                    next
                });
                if id == next {
                    comps[c as usize].classes.push(id);
                }
                host_classes.push((c, id));
                i = j;
            }
            host_class_offsets.push(host_classes.len() as u32);
        }
        drop(class_index);
        // Global class id -> local column within its component.
        let mut class_local = vec![0u32; class_keys.len()];
        for comp in &comps {
            for (i, &g) in comp.classes.iter().enumerate() {
                class_local[g as usize] = i as u32;
            }
        }
        for hc in &mut host_classes {
            hc.1 = class_local[hc.1 as usize];
        }

        // Local adjacency and bitset layout per component.
        for comp in &mut comps {
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
                let w = if in_scope(s as usize) {
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

        // Table layout: a row per switch in the scope, a first-hop row per other switch.
        let mut row_offset = vec![NO_ROW; n];
        let mut first_offset = vec![NO_ROW; n];
        let (mut total, mut first_total) = (0u64, 0u64);
        for comp in &comps {
            for &s in &comp.switches {
                let (offset, count) = if in_scope(s as usize) {
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
        let table_bytes = (total * std::mem::size_of::<u32>() as u64
            + first_total * std::mem::size_of::<PortIndex>() as u64)
            .saturating_add(side_bytes);
        if table_bytes > max_bytes {
            return Err(TopoError::TooLarge(format!(
                "its routing tables need ~{:.1} GiB ({total} entries), more than the {:.1} GiB \
                 this process has left",
                table_bytes as f64 / (1u64 << 30) as f64,
                max_bytes as f64 / (1u64 << 30) as f64
            )));
        }
        let mut entries = vec![NONE_SET; total as usize];
        let mut first_ports = vec![NONE_PORT; first_total as usize];
        let mut set_offsets = vec![0u32];
        let mut set_ports: Vec<PortIndex> = Vec::new();
        let mut adj_row = vec![NO_ROW; n];
        let mut adj_latency_ps = Vec::new();
        let mut hop_tables: Vec<Vec<u32>> = Vec::new();

        // Destination classes a chunk at a time (in parallel within a chunk): shortest
        // latencies and next hops go straight into the tables, so the working memory is
        // one chunk's, not every class's.
        for comp in &comps {
            let m = comp.classes.len();
            let owned: Vec<usize> = (0..comp.switches.len())
                .filter(|&li| in_scope(comp.switches[li] as usize))
                .collect();
            let rows_start = owned
                .first()
                .map_or(0, |&li| row_offset[comp.switches[li] as usize] as usize);
            let rows = &mut entries[rows_start..rows_start + owned.len() * m];
            let mut interners: Vec<SetInterner> =
                owned.iter().map(|_| SetInterner::default()).collect();
            let adj_base = adj_latency_ps.len();
            for (ai, &li) in comp.host_adjacent.iter().enumerate() {
                adj_row[comp.switches[li as usize] as usize] = (adj_base + ai * m) as u32;
            }
            adj_latency_ps.resize(adj_base + comp.host_adjacent.len() * m, INF);
            let mut hops = vec![0u32; if diameter { m * m } else { 0 }];
            for chunk_start in (0..m).step_by(CLASS_CHUNK) {
                let chunk = &comp.classes[chunk_start..m.min(chunk_start + CLASS_CHUNK)];
                let outs: Vec<ClassOut> = chunk
                    .par_iter()
                    .map(|&g| class_routes(comp, &class_keys, &local_of, g, diameter))
                    .collect();
                rows.par_chunks_mut(m.max(1))
                    .zip(interners.par_iter_mut())
                    .zip(owned.par_iter())
                    .for_each(|((row, interner), &li)| {
                        interner.add(comp, &class_keys, chunk, &outs, li, &mut row[chunk_start..]);
                    });
                for (k, o) in outs.iter().enumerate() {
                    let class = chunk_start + k;
                    for (fi, &li) in comp.foreign.iter().enumerate() {
                        let off = first_offset[comp.switches[li as usize] as usize] as usize;
                        first_ports[off + class] = o.first_ports[fi];
                    }
                    for (ai, &latency) in o.adj_latency_ps.iter().enumerate() {
                        adj_latency_ps[adj_base + ai * m + class] = latency;
                    }
                    if diameter {
                        hops[class * m..(class + 1) * m].copy_from_slice(&o.hops_from);
                    }
                }
            }
            // Local set ids become global ones.
            for (row, interner) in rows.chunks_mut(m.max(1)).zip(interners) {
                let base = (set_offsets.len() - 1) as u64;
                if base + interner.offsets.len() as u64 > (u32::MAX - 2) as u64 {
                    return Err(TopoError::TooLarge("too many next-hop sets".into()));
                }
                for v in row.iter_mut().filter(|v| **v < DIRECT_SET) {
                    *v += base as u32;
                }
                let port_base = set_ports.len() as u32;
                set_offsets.extend(interner.offsets.iter().map(|&o| port_base + o));
                set_ports.extend_from_slice(&interner.ports);
            }
            hop_tables.push(hops);
        }
        let hop_tables = diameter.then_some(hop_tables);
        let attach_switch = attach.iter().map(|a| a.0).collect();
        let attach_port = attach.iter().map(|a| a.1).collect();
        let mut r = Routing {
            comp_of,
            comp_classes: comps.iter().map(|c| c.classes.len() as u32).collect(),
            row_offset,
            entries,
            set_offsets,
            set_ports,
            first_offset,
            first_ports,
            host_class_offsets,
            host_classes,
            attach_offsets,
            attach_switch,
            attach_port,
            host_port_offsets,
            host_port_switch,
            host_port_latency_ps,
            adj_row,
            adj_latency_ps,
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
    index: HashMap<Box<[u64]>, u32>,
    /// Set `i` is `ports[offsets[i - 1]..offsets[i]]` (from 0 for the first).
    offsets: Vec<u32>,
    ports: Vec<PortIndex>,
}

impl SetInterner {
    /// Writes switch `li`'s entries for the classes of `outs` into `row`: a local set id,
    /// `DIRECT_SET` or `NONE_SET`.
    fn add(
        &mut self,
        comp: &Comp,
        class_keys: &[Vec<(NodeIndex, u64)>],
        classes: &[u32],
        outs: &[ClassOut],
        li: usize,
        row: &mut [u32],
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
            } else {
                let id = self.offsets.len() as u32;
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
