//! netsim-topo: one `Topology` graph for every fabric, its generators (fat-tree,
//! dragonfly, star, SimAI's rail-optimized templates), SimAI-format import/export, JSON
//! export, ECMP routing tables and a summary.
//!
//! ```
//! use netsim_topo::{build, Routing, TopoSpec};
//! let topo = build(&TopoSpec::default_for("fat-tree").unwrap()).unwrap();
//! let routing = Routing::build(&topo).unwrap();
//! let hops = routing.next_hops(topo.host_count(), 127); // first edge switch -> last host
//! assert_eq!(hops.len(), 4); // k/2 uplinks
//! ```

pub mod dragonfly;
mod error;
mod export;
pub mod fat_tree;
mod graph;
mod routing;
pub mod simai;
mod spec;
pub mod star;
mod summary;
pub mod units;

pub use dragonfly::{valiant_path, DragonflyIndex};
pub use error::TopoError;
pub use export::{export, write_atomically, write_json, Format};
pub use graph::{
    Coords, Link, LinkIndex, Node, NodeIndex, Port, PortIndex, Role, Topology, TopologyBuilder,
};
pub use routing::{NextHops, Routing};
pub use simai::{parse_simai, simai_header, to_simai_string, write_simai};
pub use spec::{
    build, Arrangement, DragonflyParams, FatTreeParams, LinkParams, SimaiParams, SimaiTemplate,
    StarParams, TopoSpec,
};
pub use summary::{bisection_bps, summarize, Summary};
