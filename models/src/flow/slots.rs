//! Per-flow run state held only while a flow runs: a slab of slots reused
//! as flows end, so a workload of hundreds of millions of flows costs four
//! bytes per flow plus a slot per flow in flight.

use hashbrown::HashMap;
use std::ops::{Index, IndexMut};

/// What a flow-level run holds per flow of its workload beside the
/// workload, for the memory check: the structures indexed by flow id, its
/// slot index here (4 B; the max-min solver keeps nothing per flow id), none under
/// `--lazy-expansion on` (`sparse`: a map of the flows running). FIFO
/// sharing (`--cc none`) keeps per-flow and per-hop arrays for the whole
/// run: the earlier generous 164 B in all, not measured again. What a
/// flow holds while it runs is [`BYTES_PER_FLOW_IN_FLIGHT`].
pub fn bytes_per_flow(fifo: bool, sparse: bool) -> u64 {
    match (fifo, sparse) {
        (true, _) => 164,
        (false, false) => 4,
        (false, true) => 0,
    }
}

/// What a flow holds while it runs, a generous estimate: its state here
/// (80 B), its solver slot and the channels of its path, its entries on
/// those channels and its events queued.
pub const BYTES_PER_FLOW_IN_FLIGHT: u64 = 512;

/// "No slot": the flow has not started, or has ended.
pub(crate) const FREE: u32 = u32::MAX;

/// Per flow id, a slot or [`FREE`]: an array of every id, or (sparse) a
/// map of the ids that have a slot, whose size follows the flows in
/// flight rather than the workload (138 M flow ids are 0.55 GB an array).
#[derive(Debug)]
pub(crate) enum SlotIndex {
    Dense(Vec<u32>),
    Sparse(HashMap<u32, u32>),
}

impl SlotIndex {
    /// Room for ids `0..ids`, none with a slot.
    pub(crate) fn new(ids: usize, sparse: bool) -> SlotIndex {
        match sparse {
            false => SlotIndex::Dense(vec![FREE; ids]),
            true => SlotIndex::Sparse(HashMap::new()),
        }
    }

    /// Id `id`'s slot, or [`FREE`].
    #[inline]
    pub(crate) fn get(&self, id: u32) -> u32 {
        match self {
            SlotIndex::Dense(v) => v[id as usize],
            SlotIndex::Sparse(m) => m.get(&id).copied().unwrap_or(FREE),
        }
    }

    /// Id `id` has slot `slot` now.
    #[inline]
    pub(crate) fn set(&mut self, id: u32, slot: u32) {
        match self {
            SlotIndex::Dense(v) => v[id as usize] = slot,
            SlotIndex::Sparse(m) => {
                m.insert(id, slot);
            }
        }
    }

    /// Id `id` has no slot now: the one it had, or [`FREE`].
    #[inline]
    pub(crate) fn take(&mut self, id: u32) -> u32 {
        match self {
            SlotIndex::Dense(v) => std::mem::replace(&mut v[id as usize], FREE),
            SlotIndex::Sparse(m) => m.remove(&id).unwrap_or(FREE),
        }
    }

    /// The ids that have a slot, ascending.
    fn ids(&self) -> Vec<u32> {
        match self {
            SlotIndex::Dense(v) => (0..v.len() as u32)
                .filter(|&f| v[f as usize] != FREE)
                .collect(),
            SlotIndex::Sparse(m) => {
                let mut ids: Vec<u32> = m.keys().copied().collect();
                ids.sort_unstable();
                ids
            }
        }
    }
}

/// State `T` of the flows running now, indexed by flow id.
pub(crate) struct Slots<T> {
    /// Per flow: its slot in `items`, or [`FREE`].
    slot_of: SlotIndex,
    items: Vec<T>,
    /// Slots of ended flows, reused before `items` grows.
    free: Vec<u32>,
}

impl<T> Slots<T> {
    /// Room for flow ids `0..flows`, none running; `sparse`: see
    /// [`SlotIndex`].
    pub(crate) fn new(flows: usize, sparse: bool) -> Slots<T> {
        Slots {
            slot_of: SlotIndex::new(flows, sparse),
            items: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Flow `flow` starts running with state `state`.
    ///
    /// # Panics
    /// If it is running already.
    pub(crate) fn open(&mut self, flow: u32, state: T) {
        assert_eq!(self.slot_of.get(flow), FREE, "flow {flow} started twice");
        let slot = match self.free.pop() {
            Some(slot) => {
                self.items[slot as usize] = state;
                slot
            }
            None => {
                self.items.push(state);
                u32::try_from(self.items.len() - 1).expect("under 2^32 flows in flight")
            }
        };
        self.slot_of.set(flow, slot);
    }

    /// Flow `flow` ended: its slot goes back for another.
    pub(crate) fn close(&mut self, flow: u32) {
        let slot = self.slot_of.take(flow);
        assert_ne!(slot, FREE, "flow {flow} ended without running");
        self.free.push(slot);
    }

    /// Whether flow `flow` is running.
    #[cfg(test)]
    pub(crate) fn is_open(&self, flow: u32) -> bool {
        self.slot_of.get(flow) != FREE
    }

    /// Flow `flow`'s state if it is running: one look-up of its slot where
    /// a test of whether it runs and indexing would make two.
    pub(crate) fn get_mut(&mut self, flow: u32) -> Option<&mut T> {
        match self.slot_of.get(flow) {
            FREE => None,
            slot => Some(&mut self.items[slot as usize]),
        }
    }

    /// The flows running now, in id order.
    pub(crate) fn open_flows(&self) -> Vec<u32> {
        self.slot_of.ids()
    }
}

impl<T> Index<usize> for Slots<T> {
    type Output = T;

    /// # Panics
    /// If flow `flow` is not running.
    fn index(&self, flow: usize) -> &T {
        &self.items[self.slot_of.get(flow as u32) as usize]
    }
}

impl<T> IndexMut<usize> for Slots<T> {
    fn index_mut(&mut self, flow: usize) -> &mut T {
        let slot = self.slot_of.get(flow as u32);
        &mut self.items[slot as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_flows_listed_in_id_order() {
        for sparse in [false, true] {
            let mut s = Slots::new(4, sparse);
            s.open(2, 'a');
            s.open(0, 'b');
            assert_eq!(s.open_flows(), [0, 2]);
            s.close(2);
            s.open(3, 'c');
            // Flow 3 took flow 2's slot: no growth.
            assert_eq!(s.items.len(), 2);
            assert_eq!((s[0], s[3]), ('b', 'c'));
            assert!(!s.is_open(2));
            assert_eq!(s.open_flows(), [0, 3]);
        }
    }

    #[test]
    #[should_panic(expected = "started twice")]
    fn a_flow_opens_once() {
        let mut s = Slots::new(1, true);
        s.open(0, ());
        s.open(0, ());
    }
}
