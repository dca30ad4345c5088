//! UEC load balancing: which entropy value each packet of a flow carries.
//! The switches hash it with the 5-tuple, so entropies are paths without
//! the sender knowing the topology.
//!
//! - oblivious: cycle through the entropy set (a flow-specific XOR spreads
//!   flows that start together);
//! - bitmap: the same cycle, but an entropy whose ACK came back ECN-marked,
//!   or whose packet was NACKed, is skipped once; or, as htsim's
//!   `UecMpBitmap`, it scores 1 per marked ACK and 4 per NACK (at most 15)
//!   and each pick that meets scored entropies takes one off the first;
//! - REPS: reuse the entropies of unmarked ACKs (eight kept, a few bytes per
//!   connection), explore a random one when none is left.

use crate::network::config::LoadBalancing;
use netsim_engine::NodeRng;

/// Entropies REPS keeps for reuse.
const REPS_BUFFER: usize = 8;
/// htsim's bitmap scores (`UecMpBitmap::processEv`): an ECN-marked ACK, a
/// NACK, and the most an entropy holds.
const ECN_SCORE: u8 = 1;
const NACK_SCORE: u8 = 4;
const MAX_SCORE: u8 = 15;

/// One flow's entropy choice and its feedback state.
#[derive(Debug)]
pub(crate) struct EntropyPicker {
    mode: LoadBalancing,
    /// Entropy count - 1 (a power of two).
    mask: u32,
    counter: u32,
    xor: u32,
    /// A new `xor` for each pass over the entropies (htsim's
    /// `UecMpOblivious`), not one per flow.
    redraw: bool,
    /// Bitmap: entropies to skip once.
    penalised: Vec<u64>,
    /// Bitmap with htsim's scores: each entropy's (empty without them).
    scores: Vec<u8>,
    /// REPS: entropies to reuse, oldest first.
    recycled: [u16; REPS_BUFFER],
    recycled_len: u8,
    recycled_head: u8,
    /// Entropies used so far (for `paths_used`).
    used: Vec<u64>,
    used_count: u32,
}

impl EntropyPicker {
    /// A picker over `entropies` values (a power of two) whose cycle starts
    /// at `xor`, redrawn after each pass if `redraw`.
    pub(crate) fn new(
        mode: LoadBalancing,
        entropies: u32,
        xor: u32,
        redraw: bool,
        scored: bool,
    ) -> EntropyPicker {
        debug_assert!(entropies.is_power_of_two());
        let words = entropies.div_ceil(64) as usize;
        EntropyPicker {
            mode,
            mask: entropies - 1,
            counter: 0,
            xor: xor & (entropies - 1),
            redraw,
            penalised: if mode == LoadBalancing::Bitmap && !scored {
                vec![0; words]
            } else {
                Vec::new()
            },
            scores: if mode == LoadBalancing::Bitmap && scored {
                vec![0; entropies as usize]
            } else {
                Vec::new()
            },
            recycled: [0; REPS_BUFFER],
            recycled_len: 0,
            recycled_head: 0,
            used: vec![0; words],
            used_count: 0,
        }
    }

    /// Distinct entropies sent on so far.
    pub(crate) fn paths_used(&self) -> u32 {
        self.used_count
    }

    fn cycle(&mut self, rng: &mut NodeRng) -> u32 {
        let e = (self.counter ^ self.xor) & self.mask;
        self.counter = self.counter.wrapping_add(1);
        if self.redraw && self.counter & self.mask == 0 {
            self.xor = rng.below(u64::from(self.mask) + 1) as u32;
        }
        e
    }

    /// The entropy index (0-based) of the next packet.
    pub(crate) fn next(&mut self, rng: &mut NodeRng) -> u16 {
        let e = match self.mode {
            LoadBalancing::Oblivious => self.cycle(rng),
            LoadBalancing::Bitmap if !self.scores.is_empty() => {
                let mut e = self.cycle(rng);
                let mut first = true;
                for _ in 0..=self.mask {
                    let score = &mut self.scores[e as usize];
                    if *score == 0 {
                        break;
                    }
                    if std::mem::take(&mut first) {
                        *score -= 1;
                    }
                    e = self.cycle(rng);
                }
                e
            }
            LoadBalancing::Bitmap => {
                let mut e = self.cycle(rng);
                for _ in 0..=self.mask {
                    let (w, b) = ((e / 64) as usize, 1u64 << (e % 64));
                    if self.penalised[w] & b == 0 {
                        break;
                    }
                    self.penalised[w] &= !b;
                    e = self.cycle(rng);
                }
                e
            }
            LoadBalancing::Reps => {
                if self.recycled_len > 0 {
                    let e = self.recycled[usize::from(self.recycled_head)];
                    self.recycled_head = (self.recycled_head + 1) % REPS_BUFFER as u8;
                    self.recycled_len -= 1;
                    u32::from(e)
                } else {
                    rng.below(u64::from(self.mask) + 1) as u32
                }
            }
        };
        let (w, b) = ((e / 64) as usize, 1u64 << (e % 64));
        if self.used[w] & b == 0 {
            self.used[w] |= b;
            self.used_count += 1;
        }
        e as u16
    }

    /// An ACK for a packet sent with entropy `e` came back, ECN-marked or not.
    pub(crate) fn on_ack(&mut self, e: u16, ce: bool) {
        match self.mode {
            LoadBalancing::Oblivious => {}
            LoadBalancing::Bitmap => {
                if ce {
                    self.penalise(e, ECN_SCORE);
                }
            }
            LoadBalancing::Reps => {
                if !ce && usize::from(self.recycled_len) < REPS_BUFFER {
                    let tail = (usize::from(self.recycled_head) + usize::from(self.recycled_len))
                        % REPS_BUFFER;
                    self.recycled[tail] = e;
                    self.recycled_len += 1;
                }
            }
        }
    }

    /// The packet sent with entropy `e` was trimmed (NACK).
    pub(crate) fn on_nack(&mut self, e: u16) {
        if self.mode == LoadBalancing::Bitmap {
            self.penalise(e, NACK_SCORE);
        }
    }

    fn penalise(&mut self, e: u16, score: u8) {
        let e = u32::from(e) & self.mask;
        if let Some(s) = self.scores.get_mut(e as usize) {
            *s = (*s + score).min(MAX_SCORE);
        } else {
            self.penalised[(e / 64) as usize] |= 1 << (e % 64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oblivious_cycles_through_every_entropy() {
        let mut rng = NodeRng::new(1, netsim_engine::NodeId(0));
        let mut p = EntropyPicker::new(LoadBalancing::Oblivious, 8, 5, false, false);
        let mut seen: Vec<u16> = (0..8).map(|_| p.next(&mut rng)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
        assert_eq!(p.paths_used(), 8);
    }

    #[test]
    fn a_redrawn_cycle_still_covers_every_entropy_each_pass() {
        let mut rng = NodeRng::new(1, netsim_engine::NodeId(0));
        let mut p = EntropyPicker::new(LoadBalancing::Oblivious, 8, 5, true, false);
        let passes: Vec<Vec<u16>> = (0..4)
            .map(|_| (0..8).map(|_| p.next(&mut rng)).collect())
            .collect();
        for pass in &passes {
            let mut seen = pass.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..8).collect::<Vec<_>>());
        }
        assert!(passes.windows(2).any(|w| w[0] != w[1]), "the order changes");
    }

    #[test]
    fn bitmap_skips_a_penalised_entropy_once() {
        let mut rng = NodeRng::new(1, netsim_engine::NodeId(0));
        let mut p = EntropyPicker::new(LoadBalancing::Bitmap, 4, 0, false, false);
        p.on_ack(1, true);
        p.on_nack(2);
        let first: Vec<u16> = (0..2).map(|_| p.next(&mut rng)).collect();
        assert_eq!(first, vec![0, 3]);
        let again: Vec<u16> = (0..4).map(|_| p.next(&mut rng)).collect();
        assert_eq!(again, vec![0, 1, 2, 3], "skipped once only");
    }

    #[test]
    fn htsims_bitmap_scores_skip_a_nacked_entropy_for_four_picks() {
        let mut rng = NodeRng::new(1, netsim_engine::NodeId(0));
        let mut p = EntropyPicker::new(LoadBalancing::Bitmap, 4, 0, false, true);
        p.on_nack(1);
        p.on_ack(2, true);
        // Each pick that meets scored entropies takes one off the first
        // only: 1 goes 4 -> 0 over four picks while 2 (score 1) is passed
        // untouched; then 2 is met first and cleared.
        let picks: Vec<u16> = (0..12).map(|_| p.next(&mut rng)).collect();
        assert_eq!(picks, vec![0, 3, 0, 3, 0, 3, 0, 3, 0, 1, 3, 0]);
    }

    #[test]
    fn reps_reuses_clean_entropies_in_order() {
        let mut rng = NodeRng::new(1, netsim_engine::NodeId(0));
        let mut p = EntropyPicker::new(LoadBalancing::Reps, 256, 0, false, false);
        p.on_ack(7, false);
        p.on_ack(9, true);
        p.on_ack(11, false);
        assert_eq!(p.next(&mut rng), 7);
        assert_eq!(p.next(&mut rng), 11);
        let explored = p.next(&mut rng);
        assert!(explored < 256);
    }
}
