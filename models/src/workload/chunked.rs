//! A vector that grows in fixed blocks, for the builder's largest
//! structures: a `Vec` that doubles holds its old and its new buffer while
//! it copies (up to three times its length, 19 GB at the end of building a
//! 13 GB workload), a [`Chunked`] never copies what it holds, and
//! [`Chunked::into_vec`] moves it into one vector of exactly its length
//! block by block, freeing each block once moved: the peak is its length
//! and one block.

use std::ops::{Index, IndexMut};

/// Elements per block past the first (16 MiB of 16-byte tasks).
const BLOCK: usize = 1 << 20;

/// Elements in blocks: the first grows as a `Vec` does up to [`BLOCK`]
/// (a small workload holds no more than it would), the others are
/// allocated at [`BLOCK`] each.
#[derive(Debug)]
pub struct Chunked<T> {
    blocks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            blocks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn push(&mut self, value: T) {
        match self.blocks.last_mut() {
            Some(last) if last.len() < BLOCK => last.push(value),
            Some(_) => {
                let mut block = Vec::with_capacity(BLOCK);
                block.push(value);
                self.blocks.push(block);
            }
            None => self.blocks.push(vec![value]),
        }
        self.len += 1;
    }

    pub fn extend_from_slice(&mut self, values: &[T])
    where
        T: Copy,
    {
        for &v in values {
            self.push(v);
        }
    }

    /// The elements, in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.blocks.iter().flatten()
    }

    /// The blocks, in order: their elements are the vector's.
    pub fn into_blocks(self) -> impl Iterator<Item = Vec<T>> {
        self.blocks.into_iter()
    }

    /// One vector of exactly [`Chunked::len`] elements, each block freed
    /// once moved into it.
    pub fn into_vec(self) -> Vec<T> {
        let mut all = Vec::with_capacity(self.len);
        for mut block in self.into_blocks() {
            all.append(&mut block);
        }
        all
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "index {i} past {}", self.len);
        &self.blocks[i / BLOCK][i % BLOCK]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        assert!(i < self.len, "index {i} past {}", self.len);
        &mut self.blocks[i / BLOCK][i % BLOCK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_what_a_vec_holds_and_becomes_one_of_exact_size() {
        let n = 2 * BLOCK + 3;
        let mut c = Chunked::default();
        for i in 0..n as u32 {
            c.push(i);
        }
        assert_eq!(
            (c.len(), c[BLOCK], c[n - 1]),
            (n, BLOCK as u32, n as u32 - 1)
        );
        c[BLOCK + 1] = 7;
        // Blocks past the first never grew: each was allocated once.
        assert!(c.blocks[1..].iter().all(|b| b.capacity() == BLOCK));
        let v = c.into_vec();
        assert_eq!((v.len(), v.capacity()), (n, n));
        assert_eq!(v[BLOCK + 1], 7);
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| i == BLOCK + 1 || x == i as u32));
    }
}
