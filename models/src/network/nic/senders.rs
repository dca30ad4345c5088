//! A flow's sender at its source host: opened as the flow starts (its port,
//! line rate, congestion control and retransmission timer), held while the
//! flow ahead on its queue pair has not opened, finished when everything is
//! acknowledged, and released for the next flow.

use crate::network::cc::CcState;
use crate::network::common::five_tuple_hash;
use crate::network::config::Transport;
use crate::network::fabric::ideal_fct;
use crate::network::packet::Packet;
use crate::network::transport::uec::planes::{qp_ports, NO_PLANE};
use crate::network::transport::uec::rccc;
use crate::network::transport::Qp;
use crate::network::{FlowTimer, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::workload::NONE as NO_TASK;
use netsim_engine::SimTime;
use netsim_engine::{Context, NodeId};

impl<S: TelemetrySink> Network<'_, S> {
    /// Flow `flow` starts at its source host: pick its port (ECMP over the
    /// host's uplinks), set its line rate and congestion control, arm the
    /// retransmission timer and try to send.
    pub(crate) fn flow_start(&mut self, ctx: &mut Context<'_, NetEvent>, flow: u32) {
        if self.queued_waits(flow) {
            return;
        }
        let i = self.open_sender(flow);
        self.release_held(ctx, flow);
        let fabric = self.fabric;
        self.transport.senders[i].start = ctx.now();
        if let Some(info) = self.flow_info(flow) {
            self.span_started(info.collective, ctx.now());
        }
        if self.memo_flow_start(ctx, i, flow) || self.rail_flow_start(ctx, i) {
            return;
        }
        if self.transport.senders[i].ina_op != NO_TASK {
            return self.ina_stream_start(ctx, i);
        }
        let (src, dst) = (
            self.transport.senders[i].spec.src,
            self.transport.senders[i].spec.dst,
        );
        let probe = Packet::route_probe(flow, src, dst);
        let port = self.host_port_toward(ctx, &probe);
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let port_rate_bps = self.ports[gport].link.rate_bps;
        let mut line_rate_bps = port_rate_bps;
        let (mut ideal_fct, base_rtt) = ideal_fct(fabric, &self.transport.senders[i].spec, port);
        let mut spray_ports = 0;
        if let Some(spray) = self.uec_plane_spray(ctx, i, &probe, port) {
            (spray_ports, line_rate_bps, ideal_fct) =
                (spray.ports, spray.rate_bps, spray.ideal_fct);
        }
        let s = &mut self.transport.senders[i];
        s.port = port;
        s.spray_ports = spray_ports;
        s.line_rate_bps = line_rate_bps;
        s.next_send = ctx.now();
        s.ideal_fct = ideal_fct;
        s.path_hash = five_tuple_hash(fabric.source_port(flow), src, dst);
        // The window covers the path's RTT, or SimAI's fabric-wide largest.
        let (window_rtt, bdp_bytes) = fabric.widest.map_or(
            (
                base_rtt,
                line_rate_bps as f64 * base_rtt.as_ps() as f64 / 8e12,
            ),
            |w| (w.rtt, w.bdp_bytes as f64),
        );
        s.base_rtt = window_rtt;
        s.bdp_bytes = bdp_bytes as u64;
        s.cc = CcState::new(
            fabric.config.cc,
            line_rate_bps,
            bdp_bytes.max(f64::from(fabric.config.mtu_bytes)),
        );
        if let Qp::Uec(u) = &mut s.qp {
            // UEC's window is NSCC's, inside the queue pair.
            s.cc = CcState::LineRate;
            let initial_pkts = if fabric.config.uec.cc.rccc() {
                let bdp = rccc::path_bdp_bytes(fabric, &s.spec);
                let initial = fabric.config.uec.rccc_initial_bdp;
                rccc::initial_pkts(initial, bdp, fabric.config.mtu_bytes)
            } else {
                0
            };
            // NSCC's window: the ports' combined rate, or one port's.
            let window_rate_bps = if fabric.config.uec.plane_window_per_port {
                port_rate_bps
            } else {
                line_rate_bps
            };
            u.start(
                &fabric.config.uec,
                window_rate_bps,
                base_rtt,
                initial_pkts,
                ctx.now(),
            );
        }
        self.transport.senders[i].on_port = true;
        for p in qp_ports(port, spray_ports) {
            let gport = self.port_index(local, p);
            self.hosts[gport].flows.push(i as u32);
        }
        // Even lossless fabrics reorder under spraying: every queue pair
        // keeps the NIC's retransmission timer.
        ctx.schedule_self(
            fabric.config.rto,
            NetEvent::Timer {
                flow,
                timer: FlowTimer::Retransmit,
            },
        );
        self.qp_try_send(ctx, port, spray_ports, NO_PLANE);
    }

    /// A sender for flow `flow`, made as it starts: its slot, known to the
    /// aggregation stream it feeds and to fast-forward's samples.
    pub(crate) fn open_sender(&mut self, flow: u32) -> usize {
        let (spec, info) = (self.flow_spec(flow), self.flow_info(flow));
        let i = self.transport.open(flow, spec, info, self.fabric);
        let s = &self.transport.senders[i];
        if s.ina_op != NO_TASK {
            let key = (s.ina_op, s.spec.src);
            self.aggregation.sender_of.insert(key, i as u32);
        }
        self.ff.sender_opened(i, flow);
        i
    }

    /// Frees sender `i`, finished and recorded, for the next flow to start.
    pub(crate) fn release_sender(&mut self, i: usize) {
        let s = &self.transport.senders[i];
        if s.ina_op != NO_TASK {
            self.aggregation.sender_of.remove(&(s.ina_op, s.spec.src));
        }
        self.transport.release(i);
    }

    /// Sender `i` ends at `now` (finished, or replayed by fast-forward):
    /// a flow queued behind it that has not had its turn finds its DCQCN
    /// state parked ([`Transports::park_rate`]) under `--qp-rate kept`.
    pub(crate) fn flow_ahead_ended(&mut self, i: usize, now: SimTime) {
        let s = &self.transport.senders[i];
        if !self.fabric.config.qp_rate_kept
            || !self.transport.rate_parkable(i)
            || !self.flow_has_queued_behind(s.flow)
        {
            return;
        }
        self.transport.park_rate(i, now);
    }

    /// Whether flow `flow`, queued behind a flow that has not opened yet,
    /// waits for it to open ([`Transports::wait_for_ahead`]): a queue pair
    /// posts its messages in order.
    fn queued_waits(&mut self, flow: u32) -> bool {
        let Some(info) = self.flow_info(flow) else {
            return false;
        };
        info.after != NO_TASK && self.transport.wait_for_ahead(flow, info.after)
    }

    /// Flow `flow` opened: the flow queued behind it, if it waited for this
    /// ([`Transports::ahead_opened`]), starts now.
    fn release_held(&mut self, ctx: &mut Context<'_, NetEvent>, flow: u32) {
        if !self.flow_has_queued_behind(flow) {
            return;
        }
        if let Some(queued) = self.transport.ahead_opened(flow) {
            let event = NetEvent::FlowStart { flow: queued };
            self.memo_scheduled(&event, ctx.now());
            ctx.schedule_self(SimTime::ZERO, event);
        }
    }

    /// Sender `i` has every packet acknowledged (or every aggregation
    /// result back): record it, let the tasks waiting for it go, and free
    /// its slot.
    pub(crate) fn sender_finished(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let s = &mut self.transport.senders[i];
        s.end = Some(ctx.now());
        let flow = s.flow;
        self.stats.flows_finished += 1;
        self.ff.sender_finished(flow);
        self.flow_ahead_ended(i, ctx.now());
        self.qp_unschedule(ctx, i);
        self.record_flow(i);
        self.rail_leader_finished(ctx, i);
        if let Some(info) = self.flow_info(flow) {
            let config = &self.fabric.config;
            if config.recv_complete_at_ack && config.transport == Transport::Roce {
                // SimAI's qp_finish: the receiver learns of the message
                // from the sender's completion (1 ps: another node).
                let end = NetEvent::MemoEnd {
                    flow,
                    at_source: false,
                };
                ctx.send(NodeId(self.transport.senders[i].spec.dst), SimTime(1), end);
            }
            // (Reads the sender's counters: it is freed after.)
            self.task_seen_complete(ctx, info.task, true);
        }
        self.release_sender(i);
    }
}
