//! One queue pair, several messages: a flow queued behind another on its
//! queue pair ([`Sender::after`], NCCL's steps on one connection) waits
//! while the flow ahead sends, then takes the reaction point's DCQCN state
//! the flow ahead leaves, as a NIC's queue pair keeps its rate from one
//! message to the next (`--qp-rate kept`).
//!
//! The state is handed over live (the flow ahead still waits for its ACKs:
//! its later CNPs reach the queued flow's state, [`Transports::rate_holder`])
//! or, if the flow ahead finished first, parked in [`Transports::parked`]
//! until the queued flow's first turn. Every parked state leaves `parked`
//! at that turn, taken or declined (another port, sprayed, not DCQCN), and
//! a flow ahead whose queued flow already had its turn parks nothing, so
//! `parked` holds only states still awaited.
//!
//! A queue pair runs its work requests in the order posted, and NCCL's
//! proxy posts a connection's steps in step order: the later message never
//! sends first. netsim's DAG may still ready the later step first (a
//! hand-built workload; NCCL's builders ready a connection's steps in
//! order), so a queued flow whose flow ahead has not opened yet does not
//! start: it waits in [`Transports::held`] and starts when the flow ahead
//! opens ([`Transports::wait_for_ahead`], [`Transports::ahead_opened`]).
//! Its first turn therefore finds the flow ahead live or ended, never
//! still to open. A flow ahead that opens before its queued flow starts is
//! noted in [`Transports::opened_ahead`] until that start; at the end of a
//! run `parked`, `held` and `opened_ahead` are empty.

use super::{Qp, Sender, SenderReliability, Transports};
use crate::network::cc::{CcState, Dcqcn};
use crate::network::config::DcqcnConfig;
use crate::workload::NONE as NO_TASK;
use netsim_engine::SimTime;

/// A queue pair's DCQCN state while no message of it sends: its last
/// flow finished before the next one took its turn.
#[derive(Clone, Debug)]
pub(crate) struct ParkedRate {
    pub cc: Dcqcn,
    /// When the flow that left it finished.
    pub since: SimTime,
    pub port: u16,
    /// When that flow's next packet was due (its pacing).
    pub next_send: SimTime,
}

/// Whether queued sender `s` could take its queue pair's DCQCN state: it
/// runs DCQCN and sends from one port.
fn can_take(s: &Sender) -> bool {
    matches!(s.cc, CcState::Dcqcn(_)) && s.spray_ports == 0
}

impl Transports {
    /// Whether sender `i` waits for the flow ahead of it on its queue pair
    /// ([`Sender::after`]): that flow is sending from the same port, RoCE,
    /// not sprayed, with packets left to send. When its last packet leaves
    /// the port, the port's next turn finds this one free to send.
    #[inline]
    pub(crate) fn queued_behind(&self, i: usize) -> bool {
        let s = &self.senders[i];
        if s.after == NO_TASK {
            return false;
        }
        let Some(&j) = self.sender_of.get(&s.after) else {
            return false;
        };
        let a = &self.senders[j as usize];
        let Qp::Roce(q) = &a.qp else {
            return false;
        };
        a.on_port && a.port == s.port && a.spray_ports == 0 && q.next_psn() < a.packets
    }

    /// Queued sender `i` takes its first turn to send: it takes the DCQCN
    /// state of its queue pair from the flow ahead (still waiting for its
    /// ACKs: the state is copied and the flow ahead sends its CNPs on to
    /// this one), or from [`Transports::parked`] if that flow has finished
    /// (advanced over the idle time, [`Dcqcn::idle`]), so that a queue pair
    /// keeps its rate from one message to the next, as a NIC's does.
    /// Returns whether the state's timers run (the caller starts this
    /// flow's). Under other congestion controls, sprayed, or on another
    /// port it takes nothing, but the turn is had all the same: a parked
    /// state leaves `parked`, and a live flow ahead will park none.
    pub(crate) fn take_rate(&mut self, i: usize, now: SimTime, c: &DcqcnConfig) -> bool {
        let s = &mut self.senders[i];
        s.rate_taken = true;
        let (ahead, flow, port, takes) = (s.after, s.flow, s.port, can_take(s));
        let (cc, next_send) = match self.sender_of.get(&ahead) {
            Some(&j) => {
                let a = &mut self.senders[j as usize];
                a.queued_had_turn = true;
                let CcState::Dcqcn(d) = &a.cc else {
                    return false;
                };
                if !takes || !a.on_port || a.port != port {
                    self.qp_rates_declined += 1;
                    return false;
                }
                a.handed_to = flow;
                (d.clone(), a.next_send)
            }
            None => match self.parked.remove(&ahead) {
                Some(p) if takes && p.port == port => {
                    let mut d = p.cc;
                    d.idle(c, self.senders[i].line_rate_bps, now - p.since);
                    (d, p.next_send)
                }
                Some(_) => {
                    self.qp_rates_declined += 1;
                    return false;
                }
                None => return false,
            },
        };
        let s = &mut self.senders[i];
        let running = cc.timers_running;
        s.cc = CcState::Dcqcn(cc);
        s.next_send = s.next_send.max(next_send);
        running
    }

    /// Queued sender `i` is freed (finished, its turn had or not: a flow
    /// replayed by fast-forward never sends from a port): the flow ahead,
    /// if still live, parks nothing for it, and a state parked for it goes.
    /// A queued flow that had its turn ([`Sender::rate_taken`]) settled it
    /// then.
    pub(crate) fn queued_released(&mut self, i: usize) {
        let (ahead, had_turn) = (self.senders[i].after, self.senders[i].rate_taken);
        if ahead == NO_TASK || had_turn {
            return;
        }
        match self.sender_of.get(&ahead) {
            Some(&j) => self.senders[j as usize].queued_had_turn = true,
            None => {
                self.parked.remove(&ahead);
            }
        }
    }

    /// Queued flow `flow` is to start behind flow `ahead`: whether it waits
    /// ([`Transports::held`]) because `ahead` has not opened yet.
    pub(crate) fn wait_for_ahead(&mut self, flow: u32, ahead: u32) -> bool {
        if self.opened_ahead.remove(&ahead) {
            return false;
        }
        let old = self.held.insert(ahead, flow);
        debug_assert!(old.is_none(), "two flows queued behind flow {ahead}");
        true
    }

    /// Flow `flow`, with a flow queued behind it, opens: it is noted as
    /// opened for that flow's start, and that flow is returned if it waited
    /// to start ([`Transports::wait_for_ahead`]): it starts again now.
    pub(crate) fn ahead_opened(&mut self, flow: u32) -> Option<u32> {
        self.opened_ahead.insert(flow);
        self.held.remove(&flow)
    }

    /// Hand-over entries still held: parked states, held queued flows and
    /// notes of opened flows ahead; 0 once every queued flow had its turn.
    pub(crate) fn hand_overs_left(&self) -> usize {
        self.parked.len() + self.held.len() + self.opened_ahead.len()
    }

    /// Whether finished sender `i` leaves a DCQCN state worth keeping for a
    /// flow queued behind it: CNPs moved it (else a fresh one is the same),
    /// and the queued flow has not had its turn yet (taken or declined).
    pub(crate) fn rate_parkable(&self, i: usize) -> bool {
        let s = &self.senders[i];
        let moved = matches!(&s.cc, CcState::Dcqcn(d) if d.timers_running);
        moved && !s.queued_had_turn && s.on_port && s.spray_ports == 0
    }

    /// Sender `i` ([`Transports::rate_parkable`]) finished at `now` with a
    /// flow queued behind it: its DCQCN state waits in
    /// [`Transports::parked`] for that flow.
    pub(crate) fn park_rate(&mut self, i: usize, now: SimTime) {
        let s = &self.senders[i];
        let CcState::Dcqcn(d) = &s.cc else {
            return;
        };
        let parked = ParkedRate {
            cc: d.clone(),
            since: now,
            port: s.port,
            next_send: s.next_send,
        };
        self.parked.insert(s.flow, parked);
    }

    /// The sender whose DCQCN state sender `i`'s CNPs reach: `i`, or the
    /// live flow its state was handed to (and on along the queue pair).
    pub(crate) fn rate_holder(&self, mut i: usize) -> usize {
        while self.senders[i].handed_to != NO_TASK {
            match self.sender_of.get(&self.senders[i].handed_to) {
                Some(&j) if self.senders[j as usize].end.is_none() => i = j as usize,
                _ => break,
            }
        }
        i
    }
}
