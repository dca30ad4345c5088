//! DCQCN's reaction point at the sender: CNPs (packets or ACK flags) and
//! the alpha, decrease and increase timers; a queued flow taking over its
//! queue pair's state starts the timers that state runs.

use crate::network::cc::{CcState, Dcqcn, IncreaseSource};
use crate::network::config::{CnpMode, DcqcnConfig};
use crate::network::packet::Packet;
use crate::network::transport::Transports;
use crate::network::{FlowTimer, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::Context;
use netsim_engine::SimTime;

impl<S: TelemetrySink> Network<'_, S> {
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
pub(super) fn take_rate(
    t: &mut Transports,
    ctx: &mut Context<'_, NetEvent>,
    c: &DcqcnConfig,
    i: usize,
) {
    if t.take_rate(i, ctx.now(), c) {
        let s = &t.senders[i];
        if let CcState::Dcqcn(d) = &s.cc {
            start_dcqcn_timers(ctx, c, s.flow, d);
        }
    }
}
