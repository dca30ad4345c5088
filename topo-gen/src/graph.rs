//! The `Topology` graph: nodes with roles and coordinates, full-duplex links, per-node ports.

use crate::error::TopoError;

/// Index of a node in [`Topology::nodes`]. Hosts always come first: hosts are nodes
/// `0..host_count`.
pub type NodeIndex = u32;
/// Index of a link in [`Topology::links`].
pub type LinkIndex = u32;
/// Index of a port within one node's port list ([`Topology::ports`]).
pub type PortIndex = u16;

/// What a node is. Hosts (servers or GPUs) source and sink traffic and never forward it;
/// every other role is a switch that forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// A host NIC or a GPU.
    Host,
    /// An NVSwitch inside a GPU server (NVLink domain).
    NvSwitch,
    /// A top-of-rack / leaf / SimAI ASW switch: the first switch tier above hosts.
    Tor,
    /// An aggregation or spine switch.
    Agg,
    /// A core switch or SimAI PSW.
    Core,
    /// A dragonfly router (hosts attach to it directly).
    Router,
}

impl Role {
    /// Every role, in declaration order (summaries print counts in this order).
    pub const ALL: [Role; 6] = [
        Role::Host,
        Role::NvSwitch,
        Role::Tor,
        Role::Agg,
        Role::Core,
        Role::Router,
    ];

    /// True for every role that forwards packets (everything but [`Role::Host`]).
    pub fn is_switch(self) -> bool {
        self != Role::Host
    }

    /// The lower-case name used in JSON export and summaries.
    pub fn name(self) -> &'static str {
        match self {
            Role::Host => "host",
            Role::NvSwitch => "nvswitch",
            Role::Tor => "tor",
            Role::Agg => "agg",
            Role::Core => "core",
            Role::Router => "router",
        }
    }
}

/// Structural coordinates of a node; each generator fills the ones that mean something
/// for it (fat-tree: pod; dragonfly: group; SimAI templates: segment, rail, plane, server).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Coords {
    /// Fat-tree pod (hosts, edge and aggregation switches); leaf index in a 2-tier fabric.
    pub pod: Option<u32>,
    /// Dragonfly group (hosts and routers).
    pub group: Option<u32>,
    /// SimAI segment: the GPUs, NVSwitches and ASWs under one set of rail switches.
    pub segment: Option<u32>,
    /// Rail: the GPU's index within its server; for rail-optimized ASWs, the rail they serve.
    pub rail: Option<u32>,
    /// Plane: SimAI dual-plane ASW/PSW plane; fat-tree aggregation position and its cores.
    pub plane: Option<u32>,
    /// Server (GPU servers: GPUs and their NVSwitches).
    pub server: Option<u32>,
}

/// One node: its role and coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// What the node is.
    pub role: Role,
    /// Where it sits in the structure.
    pub coords: Coords,
}

/// A full-duplex link: one link is two directions with the same bandwidth and latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Link {
    /// One endpoint (for generated links, the lower tier: host before switch).
    pub a: NodeIndex,
    /// The other endpoint.
    pub b: NodeIndex,
    /// Bandwidth of each direction, bits per second.
    pub bandwidth_bps: u64,
    /// Propagation latency, picoseconds (>= 1).
    pub latency_ps: u64,
}

impl Link {
    /// The endpoint that is not `n` (`n` must be an endpoint).
    pub fn other(&self, n: NodeIndex) -> NodeIndex {
        if self.a == n {
            self.b
        } else {
            self.a
        }
    }
}

/// One port of a node: the link it terminates and what sits at the other end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Port {
    /// The link behind this port.
    pub link: LinkIndex,
    /// The node at the other end of the link.
    pub peer: NodeIndex,
    /// The port index of this link within `peer`'s port list.
    pub peer_port: PortIndex,
}

/// A network: nodes, links and, for each node, its ports (its incident links in link
/// order) in compressed sparse row form.
///
/// Invariants (checked when built): hosts are nodes `0..host_count`; every link joins two
/// distinct existing nodes, has bandwidth > 0 and latency >= 1 ps; no node has more than
/// `u16::MAX` ports.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    kind: String,
    gpu_type: String,
    gpus_per_server: u32,
    nodes: Vec<Node>,
    links: Vec<Link>,
    host_count: u32,
    /// `ports[port_offsets[n]..port_offsets[n + 1]]` are node `n`'s ports.
    port_offsets: Vec<u32>,
    ports: Vec<Port>,
    /// For link `l`: its port index at `a` and at `b`.
    link_ports: Vec<[PortIndex; 2]>,
    /// Per link, the probability that it loses a packet (a SimAI file's
    /// `error_rate` column); empty when every link is lossless.
    link_error_rates: Vec<f64>,
}

impl Topology {
    /// The generator or source that produced this topology (`fat-tree`, `hpn`, `simai`, ...).
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// GPU type written to SimAI files (`H100`; `NONE` for non-GPU fabrics).
    pub fn gpu_type(&self) -> &str {
        &self.gpu_type
    }
    /// GPUs per server written to SimAI files (1 for non-GPU fabrics).
    pub fn gpus_per_server(&self) -> u32 {
        self.gpus_per_server
    }
    /// All nodes, indexed by [`NodeIndex`].
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// One node.
    pub fn node(&self, n: NodeIndex) -> &Node {
        &self.nodes[n as usize]
    }
    /// The role of node `n`.
    pub fn role(&self, n: NodeIndex) -> Role {
        self.nodes[n as usize].role
    }
    /// Number of nodes.
    pub fn node_count(&self) -> u32 {
        self.nodes.len() as u32
    }
    /// All links, indexed by [`LinkIndex`].
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    /// One link.
    pub fn link(&self, l: LinkIndex) -> &Link {
        &self.links[l as usize]
    }
    /// Number of links.
    pub fn link_count(&self) -> u32 {
        self.links.len() as u32
    }
    /// Number of hosts; hosts are nodes `0..host_count()` in the standard host numbering
    /// (fat-tree left to right, SimAI GPU ids).
    pub fn host_count(&self) -> u32 {
        self.host_count
    }
    /// The host node ids, `0..host_count()`.
    pub fn hosts(&self) -> std::ops::Range<NodeIndex> {
        0..self.host_count
    }
    /// True if `n` is a host.
    pub fn is_host(&self, n: NodeIndex) -> bool {
        n < self.host_count
    }
    /// Node `n`'s ports: its incident links in link order.
    pub fn ports(&self, n: NodeIndex) -> &[Port] {
        let lo = self.port_offsets[n as usize] as usize;
        let hi = self.port_offsets[n as usize + 1] as usize;
        &self.ports[lo..hi]
    }
    /// Port `p` of node `n`.
    pub fn port(&self, n: NodeIndex, p: PortIndex) -> &Port {
        &self.ports(n)[p as usize]
    }
    /// Link `l`'s port index at endpoint `a` and at endpoint `b`.
    pub fn link_ports(&self, l: LinkIndex) -> [PortIndex; 2] {
        self.link_ports[l as usize]
    }
    /// The probability that link `l` loses a packet (0: lossless).
    pub fn link_error_rate(&self, l: LinkIndex) -> f64 {
        self.link_error_rates
            .get(l as usize)
            .copied()
            .unwrap_or(0.0)
    }
    /// Whether some link loses packets.
    pub fn has_lossy_links(&self) -> bool {
        self.link_error_rates.iter().any(|&r| r > 0.0)
    }
    /// Sets every link's loss probability, in link order (each in `[0, 1)`).
    pub(crate) fn set_link_error_rates(&mut self, rates: Vec<f64>) {
        debug_assert_eq!(rates.len(), self.links.len());
        self.link_error_rates = if rates.iter().any(|&r| r > 0.0) {
            rates
        } else {
            Vec::new()
        };
    }
    /// A copy in which the links `links` have latency `latency_ps`, ports and ids
    /// unchanged (routing around failed links costs them out this way).
    pub(crate) fn with_link_latency(&self, links: &[LinkIndex], latency_ps: u64) -> Topology {
        let mut t = self.clone();
        for &l in links {
            t.links[l as usize].latency_ps = latency_ps;
        }
        t
    }
    /// Number of nodes with role `role`.
    pub fn count_role(&self, role: Role) -> u32 {
        self.nodes.iter().filter(|n| n.role == role).count() as u32
    }
}

/// Accumulates nodes and links, then checks the invariants and lays out the ports.
#[derive(Clone, Debug)]
pub struct TopologyBuilder {
    kind: String,
    gpu_type: String,
    gpus_per_server: u32,
    nodes: Vec<Node>,
    links: Vec<Link>,
}

impl TopologyBuilder {
    /// An empty builder for a topology of kind `kind` (`gpu_type` `NONE`, 1 GPU per server).
    pub fn new(kind: &str) -> TopologyBuilder {
        TopologyBuilder {
            kind: kind.to_string(),
            gpu_type: "NONE".to_string(),
            gpus_per_server: 1,
            nodes: Vec::new(),
            links: Vec::new(),
        }
    }

    /// Sets the GPU type and GPUs per server written to SimAI files.
    pub fn gpu_info(mut self, gpu_type: &str, gpus_per_server: u32) -> TopologyBuilder {
        self.gpu_type = gpu_type.to_string();
        self.gpus_per_server = gpus_per_server;
        self
    }

    /// Reserves room for `nodes` nodes and `links` links.
    ///
    /// Fails with [`TopoError::TooLarge`] before allocating when the graph
    /// would not fit in the memory this process may use.
    pub fn reserve(&mut self, nodes: usize, links: usize) -> Result<(), TopoError> {
        // Per node: the node, its port offset and degree; per link: the link
        // and a port at each end.
        let node_bytes = std::mem::size_of::<Node>() + 8;
        let link_bytes = std::mem::size_of::<Link>() + 2 * std::mem::size_of::<Port>();
        let bytes = (nodes as u64)
            .saturating_mul(node_bytes as u64)
            .saturating_add((links as u64).saturating_mul(link_bytes as u64));
        let limit = netsim_process::memory_limit_bytes();
        if bytes > limit {
            return Err(TopoError::TooLarge(format!(
                "{nodes} nodes and {links} links need ~{} before routing, more than the {} \
                 this process may use",
                netsim_process::human_bytes(bytes),
                netsim_process::human_bytes(limit)
            )));
        }
        self.nodes.reserve(nodes);
        self.links.reserve(links);
        Ok(())
    }

    /// Adds a node and returns its index.
    pub fn add_node(&mut self, role: Role, coords: Coords) -> NodeIndex {
        self.nodes.push(Node { role, coords });
        (self.nodes.len() - 1) as NodeIndex
    }

    /// Adds a full-duplex link between `a` and `b` and returns its index.
    pub fn add_link(
        &mut self,
        a: NodeIndex,
        b: NodeIndex,
        bandwidth_bps: u64,
        latency_ps: u64,
    ) -> LinkIndex {
        self.links.push(Link {
            a,
            b,
            bandwidth_bps,
            latency_ps,
        });
        (self.links.len() - 1) as LinkIndex
    }

    /// Number of nodes added so far.
    pub fn node_count(&self) -> u32 {
        self.nodes.len() as u32
    }

    /// Checks the invariants and builds the port arrays.
    pub fn finish(self) -> Result<Topology, TopoError> {
        let n = self.nodes.len();
        if n > u32::MAX as usize - 1 || self.links.len() > u32::MAX as usize - 1 {
            return Err(TopoError::TooLarge(format!(
                "{} nodes and {} links exceed the u32 id space",
                n,
                self.links.len()
            )));
        }
        let host_count = self
            .nodes
            .iter()
            .position(|x| x.role != Role::Host)
            .unwrap_or(n);
        if let Some(i) = self.nodes[host_count..]
            .iter()
            .position(|x| x.role == Role::Host)
        {
            return Err(TopoError::Invalid(format!(
                "node {} is a host but follows switch {}; hosts must be numbered first",
                host_count + i,
                host_count
            )));
        }
        let mut degree = vec![0u32; n];
        for (i, l) in self.links.iter().enumerate() {
            if l.a as usize >= n || l.b as usize >= n {
                return Err(TopoError::Invalid(format!(
                    "link {i} joins {} and {} but there are only {n} nodes",
                    l.a, l.b
                )));
            }
            if l.a == l.b {
                return Err(TopoError::Invalid(format!(
                    "link {i} joins node {} to itself",
                    l.a
                )));
            }
            if l.bandwidth_bps == 0 {
                return Err(TopoError::Invalid(format!("link {i} has zero bandwidth")));
            }
            if l.latency_ps == 0 {
                return Err(TopoError::Invalid(format!(
                    "link {i} has zero latency; links need >= 1 ps"
                )));
            }
            if let Err(m) = crate::units::check_latency(l.latency_ps)
                .and_then(|_| crate::units::check_bandwidth(l.bandwidth_bps))
            {
                return Err(TopoError::Invalid(format!("link {i}: {m}")));
            }
            degree[l.a as usize] += 1;
            degree[l.b as usize] += 1;
        }
        if let Some(i) = degree.iter().position(|&d| d > u16::MAX as u32) {
            return Err(TopoError::TooLarge(format!(
                "node {i} has {} ports; at most {} are supported",
                degree[i],
                u16::MAX
            )));
        }
        let mut port_offsets = Vec::with_capacity(n + 1);
        let mut acc = 0u32;
        port_offsets.push(0);
        for &d in &degree {
            acc += d;
            port_offsets.push(acc);
        }
        // Fill ports in link order so that a node's ports follow the generator's link order.
        let mut next = vec![0u16; n];
        let mut link_ports = Vec::with_capacity(self.links.len());
        for l in &self.links {
            let pa = next[l.a as usize];
            next[l.a as usize] += 1;
            let pb = next[l.b as usize];
            next[l.b as usize] += 1;
            link_ports.push([pa, pb]);
        }
        let mut ports = vec![
            Port {
                link: 0,
                peer: 0,
                peer_port: 0
            };
            acc as usize
        ];
        for (i, (l, [pa, pb])) in self.links.iter().zip(&link_ports).enumerate() {
            ports[(port_offsets[l.a as usize] + *pa as u32) as usize] = Port {
                link: i as LinkIndex,
                peer: l.b,
                peer_port: *pb,
            };
            ports[(port_offsets[l.b as usize] + *pb as u32) as usize] = Port {
                link: i as LinkIndex,
                peer: l.a,
                peer_port: *pa,
            };
        }
        Ok(Topology {
            kind: self.kind,
            gpu_type: self.gpu_type,
            gpus_per_server: self.gpus_per_server,
            nodes: self.nodes,
            links: self.links,
            host_count: host_count as u32,
            port_offsets,
            ports,
            link_ports,
            link_error_rates: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_follow_link_order_and_point_back() {
        let mut b = TopologyBuilder::new("t");
        let h0 = b.add_node(Role::Host, Coords::default());
        let h1 = b.add_node(Role::Host, Coords::default());
        let s = b.add_node(Role::Tor, Coords::default());
        b.add_link(h0, s, 1, 1);
        b.add_link(h1, s, 1, 1);
        b.add_link(h0, s, 1, 1);
        let t = b.finish().unwrap();
        assert_eq!(t.host_count(), 2);
        assert_eq!(
            t.ports(s).iter().map(|p| p.link).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(
            t.ports(h0).iter().map(|p| p.link).collect::<Vec<_>>(),
            [0, 2]
        );
        for n in 0..t.node_count() {
            for (i, p) in t.ports(n).iter().enumerate() {
                let back = t.port(p.peer, p.peer_port);
                assert_eq!(back.peer, n);
                assert_eq!(back.peer_port as usize, i);
                assert_eq!(back.link, p.link);
            }
        }
    }

    #[test]
    fn rejects_hosts_after_switches_and_bad_links() {
        let mut b = TopologyBuilder::new("t");
        b.add_node(Role::Tor, Coords::default());
        b.add_node(Role::Host, Coords::default());
        assert!(matches!(b.finish(), Err(TopoError::Invalid(_))));
        let mut b = TopologyBuilder::new("t");
        let h = b.add_node(Role::Host, Coords::default());
        b.add_link(h, 7, 1, 1);
        assert!(matches!(b.finish(), Err(TopoError::Invalid(_))));
        let mut b = TopologyBuilder::new("t");
        let h = b.add_node(Role::Host, Coords::default());
        let s = b.add_node(Role::Tor, Coords::default());
        b.add_link(h, s, 1, 0);
        assert!(matches!(b.finish(), Err(TopoError::Invalid(_))));
    }
}
