//! Host NICs: starting queue pairs, scheduling a free port over its flows
//! (control first, then data round robin, each flow paced by its rate or
//! window), and driving the senders' congestion control (CNPs and DCQCN's
//! timers). Sequence numbers and acknowledgements are the transport's.
//!
//! A host port does not queue data: when it is free it pulls the next packet
//! from its flows; when none may send yet it schedules one `Wake` for the
//! earliest pacing deadline (stale ones are told apart by a generation).

use super::cc::{window_bytes, CcState, Dcqcn, IncreaseSource};
use super::common::{five_tuple_hash, serialization, NO_NODE};
use super::config::{CnpMode, DcqcnConfig, NetConfig, Transport};
use super::fabric::ideal_fct;
use super::packet::{Packet, PacketKind, PRIO_CONTROL};
use super::transport::uec::planes::{qp_ports, NO_PLANE};
use super::transport::{Qp, Sender, Transports};
use super::{FlowTimer, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::workload::NONE as NO_TASK;
use netsim_engine::SimTime;
use netsim_engine::{Context, NodeId};

/// No `Wake` pending on a host port.
pub(crate) const NO_WAKE: SimTime = SimTime::MAX;

/// A host port's share of the NIC: the queue pairs (local sender indices)
/// sending through it, whose turn is next, and the pending `Wake`.
#[derive(Debug)]
pub(crate) struct HostQueue {
    pub flows: Vec<u32>,
    pub round_robin: usize,
    /// Tells the current `Wake` from stale ones.
    pub wake_generation: u32,
    /// When the pending `Wake` fires; `NO_WAKE` if none is pending.
    pub wake_at: SimTime,
}

impl HostQueue {
    /// No queue pairs, no `Wake` pending.
    pub(crate) fn new() -> HostQueue {
        HostQueue {
            flows: Vec::new(),
            round_robin: 0,
            wake_generation: 0,
            wake_at: NO_WAKE,
        }
    }
}

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
        let probe = Packet {
            flow,
            src,
            dst,
            psn: 0,
            wire_bytes: 0,
            in_port: 0,
            kind: PacketKind::Data,
            ce: 0,
            last: false,
            via: NO_NODE,
            util: 0,
            entropy: 0,
            sack_offset: 0,
        };
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
        let bdp_bytes = line_rate_bps as f64 * base_rtt.as_ps() as f64 / 8e12;
        s.base_rtt = base_rtt;
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
                let bdp = super::transport::uec::rccc::path_bdp_bytes(fabric, &s.spec);
                let initial = fabric.config.uec.rccc_initial_bdp;
                super::transport::uec::rccc::initial_pkts(initial, bdp, fabric.config.mtu_bytes)
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

    /// Sends the next packet on a free host port: control first, then data
    /// from the flows round robin, as their rate or window allows.
    pub(crate) fn host_try_send(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let now = ctx.now();
        if !self.port_ready(ctx, gport, port) {
            return;
        }
        let p = &mut self.ports[gport];
        if let Some(pkt) = p.pop_front(PRIO_CONTROL) {
            p.egress.queued_bytes[PRIO_CONTROL] -= u64::from(pkt.wire_bytes);
            self.transmit(ctx, gport, pkt);
            self.host_continue(ctx, gport, port);
            return;
        }
        let host = &mut self.hosts[gport];
        if p.paused || host.flows.is_empty() {
            return;
        }
        let config = &self.fabric.config;
        let mss = f64::from(config.mtu_bytes);
        let n = host.flows.len();
        let mut earliest = NO_WAKE;
        for k in 0..n {
            let slot = (host.round_robin + k) % n;
            let i = host.flows[slot] as usize;
            let next_psn = self.transport.sendable_psn(i);
            let s = &mut self.transport.senders[i];
            if next_psn >= s.packets {
                continue;
            }
            if s.after != NO_TASK && !s.rate_taken && config.qp_rate_kept {
                take_rate(&mut self.transport, ctx, &config.dcqcn, i);
            }
            let s = &mut self.transport.senders[i];
            let ina = s.ina_op != NO_TASK;
            if ina && next_psn >= s.qp.acked() + s.ina_window {
                // Every aggregation slot of the operation is in use.
                continue;
            }
            if window_full(s, config) {
                continue;
            }
            let rate_bps = match &s.cc {
                CcState::Dcqcn(d) => d.rate_bps as u64,
                CcState::Hpcc(h) => h.rate_bps as u64,
                CcState::Timely(t) => t.rate_bps as u64,
                CcState::Dctcp(d) => {
                    let in_flight_bytes = f64::from(s.qp.in_flight()) * mss;
                    if in_flight_bytes >= d.cwnd_bytes {
                        continue;
                    }
                    s.line_rate_bps
                }
                CcState::LineRate => s.line_rate_bps,
            };
            if s.next_send > now {
                earliest = earliest.min(s.next_send);
                continue;
            }
            // A sprayed queue pair's plane is the port it leaves by.
            let plane = if s.spray_ports != 0 { port } else { 0 };
            let (psn, retransmission, entropy) = s.qp.on_send(now, ctx.rng(), plane);
            let payload = (s.spec.size_bytes - u64::from(psn) * u64::from(config.mtu_bytes))
                .min(u64::from(config.mtu_bytes));
            let wire_bytes = (payload + u64::from(config.header_bytes)) as u16;
            let pkt = Packet {
                flow: if ina { s.ina_op } else { s.flow },
                src: s.spec.src,
                dst: s.spec.dst,
                psn,
                wire_bytes,
                in_port: 0,
                kind: if ina {
                    PacketKind::InaUp
                } else {
                    PacketKind::Data
                },
                ce: 0,
                last: psn + 1 == s.packets,
                via: NO_NODE,
                util: s.qp.data_util(),
                entropy,
                sack_offset: 0,
            };
            if retransmission {
                s.retransmitted_pkts += 1;
            } else {
                self.stats.sent_payload_bytes += payload;
            }
            s.next_send = now + serialization(u64::from(wire_bytes), rate_bps.max(1));
            if let CcState::Dcqcn(d) = &mut s.cc {
                if d.on_sent(&config.dcqcn, u64::from(wire_bytes)) {
                    d.increase(&config.dcqcn, s.line_rate_bps, IncreaseSource::Bytes);
                }
            }
            if let CcState::Timely(t) = &mut s.cc {
                t.on_sent(psn, now);
            }
            host.round_robin = if config.qp_round_robin_after_last {
                slot + 1
            } else {
                (slot + 1) % n
            };
            self.transmit(ctx, gport, pkt);
            self.host_continue(ctx, gport, port);
            return;
        }
        if earliest != NO_WAKE && earliest < host.wake_at {
            host.wake_generation = host.wake_generation.wrapping_add(1);
            host.wake_at = earliest;
            let generation = host.wake_generation;
            ctx.schedule_self(earliest - now, NetEvent::Wake { port, generation });
        }
    }

    /// A pacing deadline of host port `port` came; a `Wake` whose
    /// generation moved on was superseded by an earlier one and is ignored.
    pub(crate) fn host_wake(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        port: u16,
        generation: u32,
    ) {
        let gport = self.port_index(ctx.local_index(), port);
        let host = &mut self.hosts[gport];
        if host.wake_generation == generation {
            host.wake_at = NO_WAKE;
            self.host_try_send(ctx, port);
        }
    }

    /// After a host port started a packet: if it has more to send, come back
    /// when the port is free.
    #[inline]
    pub(crate) fn host_continue(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        gport: usize,
        port: u16,
    ) {
        if self.ports[gport].has_queued(PRIO_CONTROL) || !self.hosts[gport].flows.is_empty() {
            self.port_ready(ctx, gport, port);
        }
    }

    /// Queues a control packet at the current host toward `pkt.dst`.
    pub(crate) fn host_send_control(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let port = self.host_port_toward(ctx, &pkt);
        let gport = self.port_index(ctx.local_index(), port);
        let p = &mut self.ports[gport];
        p.egress.queued_bytes[PRIO_CONTROL] += u64::from(pkt.wire_bytes);
        p.push_back(PRIO_CONTROL, pkt);
        self.host_try_send(ctx, port);
    }

    /// A packet reached its destination host: hand it to the transport, the
    /// congestion control or the aggregation stream it belongs to.
    pub(crate) fn host_receive(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        debug_assert_eq!(pkt.dst, ctx.node().0);
        let uec = self.fabric.config.transport == Transport::Uec;
        match pkt.kind {
            PacketKind::Data if uec => self.uec_receive_data(ctx, pkt),
            PacketKind::Data => self.receive_data(ctx, pkt),
            PacketKind::Nack if uec => self.uec_receive_feedback(ctx, pkt),
            PacketKind::Sack => self.uec_receive_feedback(ctx, pkt),
            PacketKind::Trimmed => self.uec_receive_trimmed(ctx, pkt),
            PacketKind::Probe => self.uec_receive_probe(ctx, pkt),
            PacketKind::ProbeAck => self.uec_receive_feedback(ctx, pkt),
            PacketKind::Credit => self.uec_receive_credit(ctx, pkt),
            PacketKind::Ack | PacketKind::Nack => self.receive_ack(ctx, pkt),
            PacketKind::Cnp => self.receive_cnp(ctx, pkt),
            PacketKind::InaDown => self.ina_result(ctx, pkt),
            PacketKind::External => self.external_receive(ctx, pkt),
            PacketKind::InaUp => unreachable!("aggregation packets go up to switches"),
        }
    }

    /// A CNP reached the sender: DCQCN's reaction point takes it.
    pub(crate) fn receive_cnp(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let Some(&i) = self.transport.sender_of.get(&pkt.flow) else {
            return;
        };
        if self.fabric.config.dcqcn.cnp_mode == CnpMode::Packet {
            self.dcqcn_notified(ctx, i as usize);
        }
    }

    /// Sender `i` was told of ECN marks (a CNP, or an ACK flagged as one):
    /// its reaction point takes note; the first notification starts the
    /// timers (and cuts at once unless `rate_on_first_cnp` is set).
    pub(crate) fn dcqcn_notified(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let c = &self.fabric.config.dcqcn;
        let s = &mut self.transport.senders[i];
        if s.end.is_some() {
            return;
        }
        s.cnps += 1;
        // The queue pair's state: this flow's, or the queued flow's it was
        // handed to.
        let holder = self.transport.rate_holder(i);
        let s = &mut self.transport.senders[holder];
        let flow = s.flow;
        let CcState::Dcqcn(d) = &mut s.cc else {
            return;
        };
        if d.on_cnp(c) {
            start_dcqcn_timers(ctx, c, flow, d);
        }
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

    /// A DCQCN timer of sender `i` fired (its reaction point's alpha
    /// update, rate-decrease check or rate increase).
    pub(crate) fn cc_timer(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize, timer: FlowTimer) {
        let c = &self.fabric.config.dcqcn;
        let s = &mut self.transport.senders[i];
        let (flow, line_rate_bps) = (s.flow, s.line_rate_bps);
        match (timer, &mut s.cc) {
            (FlowTimer::DcqcnAlpha, CcState::Dcqcn(d)) => {
                d.update_alpha(c);
                ctx.schedule_self(c.alpha_update, NetEvent::Timer { flow, timer });
            }
            (FlowTimer::DcqcnDecrease, CcState::Dcqcn(d)) => {
                if d.check_decrease(c) {
                    start_increase_timer(ctx, c, flow, d);
                }
                ctx.schedule_self(c.rate_decrease_interval, NetEvent::Timer { flow, timer });
            }
            (FlowTimer::DcqcnIncrease { generation }, CcState::Dcqcn(d)) => {
                if generation == d.increase_generation {
                    d.increase(c, line_rate_bps, IncreaseSource::Timer);
                    ctx.schedule_self(c.rate_increase_timer, NetEvent::Timer { flow, timer });
                    let port = s.port;
                    self.host_try_send(ctx, port);
                }
            }
            _ => unreachable!("timer {timer:?} for a flow without that congestion control"),
        }
    }
}

/// Starts the DCQCN timers of flow `flow` with state `d` (its first CNP,
/// or a queue pair's state taken over while they run): the alpha update,
/// the decrease check and, once the rate was cut, the increase timer.
fn start_dcqcn_timers(ctx: &mut Context<'_, NetEvent>, c: &DcqcnConfig, flow: u32, d: &Dcqcn) {
    ctx.schedule_self(
        c.alpha_update,
        NetEvent::Timer {
            flow,
            timer: FlowTimer::DcqcnAlpha,
        },
    );
    // SimAI checks the first decrease 1 ns after the alpha update due
    // at the same time, so that the update goes first.
    let after_alpha = if c.rate_on_first_cnp.is_some() {
        SimTime::from_ns(1)
    } else {
        SimTime::ZERO
    };
    ctx.schedule_self(
        c.rate_decrease_interval + after_alpha,
        NetEvent::Timer {
            flow,
            timer: FlowTimer::DcqcnDecrease,
        },
    );
    if d.increasing {
        // The first CNP cut at once: the increase timer starts now.
        start_increase_timer(ctx, c, flow, d);
    }
}

/// Starts flow `flow`'s rate-increase timer for `d`'s current cut: a
/// later cut bumps the generation, and the timer of an older one is
/// ignored when it fires.
fn start_increase_timer(ctx: &mut Context<'_, NetEvent>, c: &DcqcnConfig, flow: u32, d: &Dcqcn) {
    let generation = d.increase_generation;
    ctx.schedule_self(
        c.rate_increase_timer,
        NetEvent::Timer {
            flow,
            timer: FlowTimer::DcqcnIncrease { generation },
        },
    );
}

/// Queued sender `i` takes its first turn: it takes its queue pair's DCQCN
/// state ([`Transports::take_rate`]) and, if that state's timers run,
/// starts its own.
fn take_rate(t: &mut Transports, ctx: &mut Context<'_, NetEvent>, c: &DcqcnConfig, i: usize) {
    if t.take_rate(i, ctx.now(), c) {
        let s = &t.senders[i];
        if let CcState::Dcqcn(d) = &s.cc {
            start_dcqcn_timers(ctx, c, s.flow, d);
        }
    }
}

/// HAS_WIN / VAR_WIN: whether sender `s`, paced by a rate, has its
/// window's bytes in flight.
fn window_full(s: &Sender, config: &NetConfig) -> bool {
    let rate = match &s.cc {
        CcState::Dcqcn(d) => d.rate_bps,
        CcState::Hpcc(h) => h.rate_bps,
        CcState::Timely(t) => t.rate_bps,
        _ => return false,
    };
    let window = window_bytes(config.window, s.bdp_bytes, rate, s.line_rate_bps);
    let in_flight_bytes = u64::from(s.qp.in_flight()) * u64::from(config.mtu_bytes);
    window.is_some_and(|w| in_flight_bytes >= w)
}
