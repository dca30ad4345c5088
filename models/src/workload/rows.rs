//! [`CollectiveRows`]: the collectives' rows of a workload, each distinct
//! row held once. SimAI's 9,216-GPU example has 12.6 M collectives of a few
//! thousand distinct rows (a phase's collectives differ only in their
//! members, which a row does not name): 80 B a row was 1.01 GB, an index
//! of 4 B is 50 MB (issue 32).

use super::Collective;
use hashbrown::HashMap;
use std::ops::Index;

/// Rows by collective id: per id, the index of its row among the distinct
/// rows.
#[derive(Clone, Debug, Default)]
pub struct CollectiveRows {
    distinct: Vec<Collective>,
    of: Vec<u32>,
    seen: HashMap<Collective, u32>,
}

impl CollectiveRows {
    pub fn len(&self) -> usize {
        self.of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.of.is_empty()
    }

    /// Appends `row` as the next collective's.
    pub fn push(&mut self, row: Collective) {
        let at = match self.seen.get(&row) {
            Some(&at) => at,
            None => {
                let at = u32::try_from(self.distinct.len()).expect("under 2^32 distinct rows");
                self.distinct.push(row.clone());
                self.seen.insert(row, at);
                at
            }
        };
        self.of.push(at);
    }

    /// Collective `id`'s row.
    pub fn get(&self, id: usize) -> Option<&Collective> {
        self.of.get(id).map(|&at| &self.distinct[at as usize])
    }

    /// The rows in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Collective> + '_ {
        self.of.iter().map(|&at| &self.distinct[at as usize])
    }

    /// The distinct rows, each once.
    pub fn distinct(&self) -> &[Collective] {
        &self.distinct
    }

    /// The rows of ids `range`.
    pub fn range(&self, range: std::ops::Range<usize>) -> Vec<Collective> {
        self.of[range]
            .iter()
            .map(|&at| self.distinct[at as usize].clone())
            .collect()
    }

    /// What it holds: an index per collective, each distinct row twice
    /// (the list and the map) and its name and fallback's text.
    pub fn bytes(&self) -> u64 {
        let row = |c: &Collective| {
            2 * std::mem::size_of::<Collective>()
                + 8
                + c.name.len()
                + c.fallback_reason.as_ref().map_or(0, String::len)
        };
        (self.of.len() * 4) as u64 + self.distinct.iter().map(row).sum::<usize>() as u64
    }
}

impl Index<usize> for CollectiveRows {
    type Output = Collective;

    fn index(&self, id: usize) -> &Collective {
        &self.distinct[self.of[id] as usize]
    }
}

impl FromIterator<Collective> for CollectiveRows {
    fn from_iter<I: IntoIterator<Item = Collective>>(rows: I) -> CollectiveRows {
        let mut r = CollectiveRows::default();
        rows.into_iter().for_each(|c| r.push(c));
        r
    }
}

impl From<Vec<Collective>> for CollectiveRows {
    fn from(rows: Vec<Collective>) -> CollectiveRows {
        rows.into_iter().collect()
    }
}

/// Equal when the rows are, id by id.
impl PartialEq for CollectiveRows {
    fn eq(&self, other: &CollectiveRows) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<Vec<Collective>> for CollectiveRows {
    fn eq(&self, other: &Vec<Collective>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<CollectiveRows> for Vec<Collective> {
    fn eq(&self, other: &CollectiveRows) -> bool {
        other == self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::spec::CollectiveOp;
    use std::sync::Arc;

    fn row(name: &str, size_bytes: u64) -> Collective {
        Collective {
            name: Arc::from(name),
            op: CollectiveOp::AllReduce,
            algorithm: "ring",
            group_size: 2,
            size_bytes,
            offloaded: false,
            fallback_reason: None,
            tasks: 4,
            job: 0,
        }
    }

    /// Each id reads back its own row; equal rows are held once.
    #[test]
    fn rows_read_back_by_id_and_are_held_once() {
        let pushed = [
            row("a", 1),
            row("b", 1),
            row("a", 1),
            row("a", 2),
            row("b", 1),
        ];
        let rows: CollectiveRows = pushed.to_vec().into();
        assert_eq!(rows.len(), 5);
        assert_eq!(rows.distinct().len(), 3);
        for (i, r) in pushed.iter().enumerate() {
            assert_eq!(&rows[i], r);
        }
        assert_eq!(rows.range(1..3), pushed[1..3].to_vec());
        assert_eq!(rows, pushed.to_vec());
        assert!(rows.get(5).is_none());
    }
}
