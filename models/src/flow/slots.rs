//! Per-flow run state held only while a flow runs: a slab of slots reused
//! as flows end, so a workload of hundreds of millions of flows costs four
//! bytes per flow plus a slot per flow in flight.

use std::ops::{Index, IndexMut};

/// What a flow-level run holds per flow of its workload beside the
/// workload, for the memory check: the structures indexed by flow id, its
/// slot index here and in the max-min solver (4 B each). FIFO sharing
/// (`--cc none`) keeps per-flow and per-hop arrays for the whole run: the
/// earlier generous 164 B in all, not measured again. What a flow holds
/// while it runs is [`BYTES_PER_FLOW_IN_FLIGHT`].
pub fn bytes_per_flow(fifo: bool) -> u64 {
    if fifo {
        164
    } else {
        8
    }
}

/// What a flow holds while it runs, a generous estimate: its state here
/// (80 B), its solver slot and the channels of its path, its entries on
/// those channels and its events queued.
pub const BYTES_PER_FLOW_IN_FLIGHT: u64 = 512;

/// "No slot": the flow has not started, or has ended.
const FREE: u32 = u32::MAX;

/// State `T` of the flows running now, indexed by flow id.
pub(crate) struct Slots<T> {
    /// Per flow: its slot in `items`, or [`FREE`].
    slot_of: Vec<u32>,
    items: Vec<T>,
    /// Slots of ended flows, reused before `items` grows.
    free: Vec<u32>,
}

impl<T> Slots<T> {
    /// Room for flow ids `0..flows`, none running.
    pub(crate) fn new(flows: usize) -> Slots<T> {
        Slots {
            slot_of: vec![FREE; flows],
            items: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Flow `flow` starts running with state `state`.
    ///
    /// # Panics
    /// If it is running already.
    pub(crate) fn open(&mut self, flow: u32, state: T) {
        assert_eq!(
            self.slot_of[flow as usize], FREE,
            "flow {flow} started twice"
        );
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
        self.slot_of[flow as usize] = slot;
    }

    /// Flow `flow` ended: its slot goes back for another.
    pub(crate) fn close(&mut self, flow: u32) {
        let slot = std::mem::replace(&mut self.slot_of[flow as usize], FREE);
        assert_ne!(slot, FREE, "flow {flow} ended without running");
        self.free.push(slot);
    }

    /// Whether flow `flow` is running.
    pub(crate) fn is_open(&self, flow: u32) -> bool {
        self.slot_of[flow as usize] != FREE
    }

    /// The flows running now, in id order.
    pub(crate) fn open_flows(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.slot_of.len() as u32).filter(|&f| self.is_open(f))
    }
}

impl<T> Index<usize> for Slots<T> {
    type Output = T;

    /// # Panics
    /// If flow `flow` is not running.
    fn index(&self, flow: usize) -> &T {
        &self.items[self.slot_of[flow] as usize]
    }
}

impl<T> IndexMut<usize> for Slots<T> {
    fn index_mut(&mut self, flow: usize) -> &mut T {
        &mut self.items[self.slot_of[flow] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_flows_listed_in_id_order() {
        let mut s = Slots::new(4);
        s.open(2, 'a');
        s.open(0, 'b');
        assert_eq!(s.open_flows().collect::<Vec<_>>(), [0, 2]);
        s.close(2);
        s.open(3, 'c');
        // Flow 3 took flow 2's slot: no growth.
        assert_eq!(s.items.len(), 2);
        assert_eq!((s[0], s[3]), ('b', 'c'));
        assert!(!s.is_open(2));
    }

    #[test]
    #[should_panic(expected = "started twice")]
    fn a_flow_opens_once() {
        let mut s = Slots::new(1);
        s.open(0, ());
        s.open(0, ());
    }
}
