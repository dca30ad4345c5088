//! What a decision reads of this shard's own state: the resources its
//! flows are using, whether a domain's resources are busy here, and its
//! hosts' view of the DAG (each agreed with the other shards' in
//! `decide.rs`).

use super::guard;
use super::key::Canon;
use super::resources::{flow_resources, port_resource, Resource};
use crate::network::transport::Sender;
use crate::network::Network;
use crate::telemetry::TelemetrySink;
use netsim_engine::{Aborted, AllMax, SimTime};

impl<S: TelemetrySink> Network<'_, S> {
    /// The senders of this shard sending (started, not replayed, not
    /// ended or given up); `memo_agree` prunes the list of those that
    /// ended at each check.
    fn memo_sending(&self) -> impl Iterator<Item = &Sender> + '_ {
        let m = self.ff.memo.as_ref().expect("memo on");
        m.sending
            .iter()
            .filter_map(|flow| self.transport.sender_of.get(flow))
            .map(|&i| &self.transport.senders[i as usize])
            .filter(|s| s.end.is_none() && !s.gave_up)
    }

    /// Per flow sending from this shard (not replayed), the resources it uses.
    pub(super) fn memo_active_resources(&self) -> Vec<Resource> {
        let mut out = Vec::new();
        for s in self.memo_sending() {
            flow_resources(self.fabric, s.flow, &mut out);
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether `canon`'s resources are busy on this shard: a flow sending
    /// through them (`active`: the resources of this shard's flows), or at
    /// one of its ports a byte queued, a packet on the wire, a pause, or
    /// buffer in use at its switch.
    pub(super) fn memo_busy(&self, now: SimTime, canon: &Canon, active: &[Resource]) -> bool {
        if active.iter().any(|r| canon.resources.contains(r)) {
            return true;
        }
        self.nodes.iter().enumerate().any(|(local, &node)| {
            let range = self.port_base[local] as usize..self.port_base[local + 1] as usize;
            let mine = |p: usize| {
                canon.resources.contains(&port_resource(
                    self.fabric,
                    node.0,
                    (p - range.start) as u16,
                ))
            };
            let switch_busy = !self.is_host(node) && self.buffers[local].used_bytes != 0;
            range.clone().filter(|&p| mine(p)).any(|gp| {
                let p = &self.ports[gp];
                switch_busy
                    || p.egress.queued_bytes.iter().any(|&b| b != 0)
                    // (Nothing was ever sent from a port still at time zero.)
                    || (p.egress.busy_until != SimTime::ZERO && p.egress.busy_until + p.link.latency > now)
                    || p.paused
                    || self.ingress[gp].pause_sent()
            })
        })
    }

    /// The DAG state the guard follows (see [`guard::DagView`]): this
    /// shard's flow starts scheduled, flows sending (not replayed: they
    /// send nothing), compute tasks that will end, flows its hosts
    /// received whole, and its hosts' tasks' missing dependencies; agreed.
    pub(super) fn memo_dag_view(&mut self, all_max: AllMax<'_>) -> Result<guard::DagView, Aborted> {
        let spare = std::mem::take(&mut self.ff.memo.as_mut().expect("memo on").dag_spare);
        let m = self.ff.memo.as_ref().expect("memo on");
        let workload = &self.fabric.workload;
        let mut dag = guard::DagView::reusing(workload.tasks.len(), spare);
        for (&f, &at) in &m.pending_flows {
            dag.starts(workload.flow_task(f), at);
        }
        for s in self.memo_sending() {
            // From its start: the guard bounds its end by its payload at
            // line rate from there.
            dag.starts(workload.flow_task(s.flow), s.start);
        }
        for (&t, &end) in &m.pending_computes {
            dag.ends(t, end);
        }
        self.dag_view_locals(&mut dag, &m.delivered);
        all_max(&mut dag.values)?;
        Ok(dag)
    }

    /// What only this shard knows of the DAG, for a view before it is
    /// agreed: its hosts' tasks' missing dependencies, and the tasks whose
    /// flows its hosts received whole (`delivered`, set on the
    /// destination's shard only). Memo's view and domain scope's share it.
    pub(in crate::network::fast_forward) fn dag_view_locals(
        &self,
        dag: &mut guard::DagView,
        delivered: &[bool],
    ) {
        let mut local = vec![false; self.fabric.topo.node_count() as usize];
        for &n in &self.nodes {
            local[n.0 as usize] = true;
        }
        for (t, task) in self.fabric.workload.tasks.iter().enumerate() {
            if local[task.host as usize] {
                dag.remaining(t as u32, self.tasks.dag.remaining(t as u32));
            }
            if delivered[t] {
                dag.delivered(t as u32);
            }
        }
    }
}
