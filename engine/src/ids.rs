//! Dense `u32` identifiers that index plain vectors.

use std::fmt;

macro_rules! dense_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as a vector index.
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

dense_id!(
    /// A simulated node (host NIC, switch, PHOLD process): the unit of state.
    NodeId
);
dense_id!(
    /// A shard: one event queue and the nodes it owns, run by one worker.
    ShardId
);
