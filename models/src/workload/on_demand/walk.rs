//! Every flow of a lazy workload in id order, for the partition's work
//! estimate (issue 32): a collective's flows are expanded once per shape
//! (see `build::shape`) and relabelled onto the members of the others.

use super::{LazyPlan, Source};
use crate::traffic::FlowSpec;
use crate::workload::build::shape::ShapeKey;
use crate::workload::spec::OpSpec;
use hashbrown::HashMap;

/// Flows of each shape seen, by key and operation, their ends as
/// positions in the group.
type Cache = HashMap<ShapeKey, Vec<(OpSpec, Vec<FlowSpec>)>>;

impl LazyPlan {
    /// Every flow in id order, each collective's expanded in turn (for
    /// the partition's work estimate, which sums in flow order).
    pub fn each_flow(&self, src: Source<'_>, mut f: impl FnMut(u32, &FlowSpec)) {
        let kept = &self.kept;
        let mut ids = kept.flow_gaps.ids(kept.flows.len() as u32).zip(&kept.flows);
        let mut next = ids.next();
        let mut cache = Cache::new();
        for p in 0..self.plans.list.len() as u32 {
            let base = self.base(p).flow;
            while let Some((id, spec)) = next.filter(|(id, _)| *id < base) {
                f(id, spec);
                next = ids.next();
            }
            if self.plans.list[p as usize].count.flow > 0 {
                self.plan_flows(src, p, &mut cache, |k, spec| f(base + k as u32, spec));
            }
        }
        while let Some((id, spec)) = next {
            f(id, spec);
            next = ids.next();
        }
    }

    /// Plan `p`'s flows in order: from its shape's when seen before,
    /// relabelled, else expanded (and kept for its shape when every flow
    /// runs between members).
    fn plan_flows(
        &self,
        src: Source<'_>,
        p: u32,
        cache: &mut Cache,
        mut f: impl FnMut(usize, &FlowSpec),
    ) {
        let i = p as usize;
        let spec = &self.plans.op(i).2;
        let group = self.plans.group(i);
        let mut entry_lens = Vec::with_capacity(group.len());
        self.plans
            .each_entry(i, |_, deps| entry_lens.push(deps.len()));
        let key = self.shape_key(src.topo, p, |at| entry_lens[at]);
        let known = key.as_ref().and_then(|k| cache.get(k));
        let known = known.and_then(|ops| ops.iter().find(|(o, _)| o == spec));
        if let Some((_, flows)) = known {
            for (k, flow) in flows.iter().enumerate() {
                let at = |end: u32| group[end as usize];
                let (src, dst) = (at(flow.src), at(flow.dst));
                f(k, &FlowSpec { src, dst, ..*flow });
            }
            return;
        }
        let flows = self.expand(src, p).flows;
        for (k, flow) in flows.iter().enumerate() {
            f(k, flow);
        }
        let Some(key) = key else { return };
        let position: HashMap<u32, u32> = (group.iter().enumerate())
            .map(|(at, &h)| (h, at as u32))
            .collect();
        let relabel = |flow: &FlowSpec| {
            let (src, dst) = (position.get(&flow.src)?, position.get(&flow.dst)?);
            Some(FlowSpec {
                src: *src,
                dst: *dst,
                ..*flow
            })
        };
        if let Some(relative) = flows.iter().map(relabel).collect::<Option<Vec<_>>>() {
            cache.entry(key).or_default().push((spec.clone(), relative));
        }
    }
}
