//! The METIS strategy: k-way on the graph of atoms, with the C library's console output
//! silenced and empty parts filled.

use netsim_topo::Topology;

use crate::atoms::Atoms;
use crate::PartitionError;

/// METIS k-way over the atom graph (vertex weights = atom weight and its hosts' part, edge
/// weight = links between two atoms, 3% imbalance tolerance, fixed seed); empty parts are then given one light atom
/// each. With as many shards as atoms, each atom is its own shard without asking METIS.
pub(crate) fn metis_parts(
    topo: &Topology,
    atoms: &Atoms,
    shards: u32,
) -> Result<Vec<u32>, PartitionError> {
    let na = atoms.count() as usize;
    if na == shards as usize {
        return Ok((0..shards).collect());
    }
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for l in topo.links() {
        let (a, b) = (atoms.atom_of[l.a as usize], atoms.atom_of[l.b as usize]);
        if a != b {
            edges.push((a, b));
            edges.push((b, a));
        }
    }
    edges.sort_unstable();
    let mut xadj: Vec<metis::Idx> = vec![0; na + 1];
    let mut adjncy: Vec<metis::Idx> = Vec::new();
    let mut adjwgt: Vec<metis::Idx> = Vec::new();
    let mut i = 0;
    while i < edges.len() {
        let mut j = i;
        while j < edges.len() && edges[j] == edges[i] {
            j += 1;
        }
        let (a, b) = edges[i];
        xadj[a as usize + 1] += 1;
        adjncy.push(b as metis::Idx);
        adjwgt.push((j - i).min(metis::Idx::MAX as usize) as metis::Idx);
        i = j;
    }
    for a in 0..na {
        xadj[a + 1] += xadj[a];
    }
    // Two constraints: all work, and the hosts' part of it. Endpoint and fabric work peak
    // at different times (a TP all-reduce over NVLink keeps servers busy while the rail
    // switches idle), so balancing both keeps every phase balanced, not just the total.
    // METIS weights are positive i32s whose sums must not overflow: scale each total
    // under 2^30.
    let scaled = |w: &[u64]| -> Vec<metis::Idx> {
        let scale = (w.iter().sum::<u64>() >> 30) + 1;
        w.iter()
            .map(|&w| (w / scale).max(1) as metis::Idx)
            .collect()
    };
    let (all, hosts) = (scaled(&atoms.weight), scaled(&atoms.host_weight));
    let vwgt: Vec<metis::Idx> = all.iter().zip(&hosts).flat_map(|(&a, &h)| [a, h]).collect();
    let mut part = vec![0 as metis::Idx; na];
    let graph = metis::Graph::new(2, shards as metis::Idx, &xadj, &adjncy)
        .map_err(|e| PartitionError::Metis(e.to_string()))?
        .set_vwgt(&vwgt)
        .set_adjwgt(&adjwgt)
        .set_option(metis::option::UFactor(30))
        .set_option(metis::option::Seed(1));
    {
        // METIS prints diagnostics (e.g. "Cannot bisect a graph with 0 vertices") with printf;
        // they mean nothing to a user and empty parts are repaired below.
        let _quiet = Quiet::new();
        graph.part_kway(&mut part)
    }
    .map_err(|e| PartitionError::Metis(e.to_string()))?;
    let mut atom_shard: Vec<u32> = part.into_iter().map(|p| p as u32).collect();
    fill_empty_shards(&mut atom_shard, &atoms.weight, shards);
    rebalance(
        &mut atom_shard,
        &atoms.weight,
        shards,
        &xadj,
        &adjncy,
        &adjwgt,
    );
    Ok(atom_shard)
}

/// The largest shard may carry this much over the mean (per mille) before [`rebalance`] moves
/// atoms; METIS's own tolerance.
const TOLERANCE_PER_MILLE: u64 = 30;

/// Moves atoms from the most to the least loaded shard while the largest is more than 3% over
/// the mean. METIS keeps that tolerance with many light vertices but not always when a few
/// vertices are heavy (the ToR of a DCN+ segment carries most of its segment's work). Each
/// move takes the atom of the heaviest shard that is lighter than the two shards' difference
/// (so both end below the old maximum) and has the most links into the lightest shard less
/// those it keeps, then the heaviest; every move lowers the sum of squared loads, so it ends.
fn rebalance(
    atom_shard: &mut [u32],
    weight: &[u64],
    shards: u32,
    xadj: &[metis::Idx],
    adjncy: &[metis::Idx],
    adjwgt: &[metis::Idx],
) {
    let mut load = vec![0u64; shards as usize];
    for (a, &s) in atom_shard.iter().enumerate() {
        load[s as usize] += weight[a];
    }
    let total: u64 = load.iter().sum();
    let limit = total / shards as u64 * (1000 + TOLERANCE_PER_MILLE) / 1000;
    for _ in 0..atom_shard.len() {
        let heavy = (0..shards).max_by_key(|&s| (load[s as usize], std::cmp::Reverse(s)));
        let light = (0..shards).min_by_key(|&s| (load[s as usize], s));
        let (Some(heavy), Some(light)) = (heavy, light) else {
            return;
        };
        let gap = load[heavy as usize] - load[light as usize];
        if load[heavy as usize] <= limit {
            return;
        }
        let links = |a: usize, s: u32| -> i64 {
            (xadj[a] as usize..xadj[a + 1] as usize)
                .filter(|&e| atom_shard[adjncy[e] as usize] == s)
                .map(|e| i64::from(adjwgt[e]))
                .sum()
        };
        let best = (0..atom_shard.len())
            .filter(|&a| atom_shard[a] == heavy && weight[a] < gap)
            .max_by_key(|&a| {
                (
                    links(a, light) - links(a, heavy),
                    weight[a],
                    std::cmp::Reverse(a),
                )
            });
        let Some(a) = best else {
            return;
        };
        // Never empty a shard.
        if atom_shard.iter().filter(|&&s| s == heavy).count() == 1 {
            return;
        }
        atom_shard[a] = light;
        load[heavy as usize] -= weight[a];
        load[light as usize] += weight[a];
    }
}

/// Gives every empty shard the lightest atom of the shard that holds the most atoms.
fn fill_empty_shards(atom_shard: &mut [u32], weight: &[u64], shards: u32) {
    loop {
        let mut count = vec![0usize; shards as usize];
        for &s in atom_shard.iter() {
            count[s as usize] += 1;
        }
        let Some(empty) = count.iter().position(|&c| c == 0) else {
            return;
        };
        let donor = (0..shards as usize)
            .max_by_key(|&s| (count[s], std::cmp::Reverse(s)))
            .expect("at least one shard") as u32;
        let atom = (0..atom_shard.len())
            .filter(|&a| atom_shard[a] == donor)
            .min_by_key(|&a| (weight[a], a))
            .expect("the donor holds atoms");
        atom_shard[atom] = empty as u32;
    }
}

/// Serialises [`Quiet`] sections: each saves the descriptors it restores, so two at once on
/// different threads could restore /dev/null for good.
static QUIET: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Points the process's stdout and stderr at /dev/null until dropped, flushing both the Rust
/// and the C buffers on either side so nothing written before leaks in and nothing written
/// inside leaks out. `netsim` partitions before any worker thread starts; in a process that
/// writes from other threads meanwhile (a test harness), their lines in that window are lost.
/// If /dev/null cannot be opened, output is left as it is.
struct Quiet {
    saved: Option<[libc::c_int; 2]>,
    _only: std::sync::MutexGuard<'static, ()>,
}

impl Quiet {
    fn new() -> Quiet {
        use std::io::Write as _;
        let only = QUIET.lock().unwrap_or_else(|e| e.into_inner());
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: plain POSIX calls on descriptors this process owns; each duplicate is
        // checked before use and restored (then closed) in `drop`.
        let saved = unsafe {
            libc::fflush(std::ptr::null_mut());
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            if null < 0 {
                None
            } else {
                let saved = [libc::dup(1), libc::dup(2)];
                if saved.iter().any(|&fd| fd < 0) {
                    for fd in saved.into_iter().filter(|&fd| fd >= 0) {
                        libc::close(fd);
                    }
                    libc::close(null);
                    None
                } else {
                    libc::dup2(null, 1);
                    libc::dup2(null, 2);
                    libc::close(null);
                    Some(saved)
                }
            }
        };
        Quiet { saved, _only: only }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        if let Some([out, err]) = self.saved {
            // SAFETY: `out` and `err` are the duplicates taken in `new`, still open.
            unsafe {
                libc::fflush(std::ptr::null_mut());
                libc::dup2(out, 1);
                libc::dup2(err, 2);
                libc::close(out);
                libc::close(err);
            }
        }
    }
}
