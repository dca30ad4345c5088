//! [`Counts`]: per task, the dependencies its host has not yet seen
//! complete, in a byte.

use hashbrown::HashMap;

/// Per task, one byte: the dependencies left, or [`MANY`] for a task that
/// waits for more (an iteration's end gathers hundreds), counted in `many`:
/// a run holds one per kept task of the whole workload, and one per task
/// of each live collective.
#[derive(Debug, Default)]
pub(super) struct Counts {
    left: Vec<u8>,
    many: HashMap<u32, u32>,
}

const MANY: u8 = u8::MAX;

impl Counts {
    pub fn new(deps: impl Iterator<Item = u32>) -> Counts {
        let mut many = HashMap::new();
        let left = deps
            .enumerate()
            .map(|(i, d)| {
                u8::try_from(d)
                    .ok()
                    .filter(|&d| d != MANY)
                    .unwrap_or_else(|| {
                        many.insert(i as u32, d);
                        MANY
                    })
            })
            .collect();
        Counts { left, many }
    }

    /// One of task `i`'s dependencies seen: whether it was the last.
    pub fn seen(&mut self, i: u32) -> bool {
        let left = &mut self.left[i as usize];
        if *left == MANY {
            let many = self.many.get_mut(&i).expect("a task waiting for many");
            *many -= 1;
            *many == 0
        } else {
            *left -= 1;
            *left == 0
        }
    }

    /// `other`'s counts, in this one's storage.
    pub fn copy_from(&mut self, other: &Counts) {
        self.left.clear();
        self.left.extend_from_slice(&other.left);
        self.many.clone_from(&other.many);
    }

    /// How many tasks it has room for.
    pub fn capacity(&self) -> usize {
        self.left.capacity()
    }
}
