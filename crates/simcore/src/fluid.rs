//! The event loop both fluid engines run ([`crate::fabric`]'s all-to-all and [`crate::apps`]'s
//! applications): a time-ordered queue of engine events beside the flows' completion times, one
//! max-min solve per instant, and the re-timing of every flow whose rate that solve changed.
//!
//! An engine supplies its events, what a completion and an event do, and what a link carries;
//! [`Engine::run_events`] and [`Engine::settle`] are the same for both, so their results are
//! computed by one loop.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::completions::Completions;
use crate::maxmin::MaxMin;
use crate::network::Ord64;
use crate::summary::LinkMeter;
use crate::topology::Topology;

/// Completions within this many seconds of the earliest are taken together (one solve for all).
const TOGETHER_S: f64 = 1e-9;

/// A time-ordered queue of events; ties leave in slot order (the slots of handled events are
/// reused), as both engines have always ordered them.
pub(crate) struct Events<E> {
    heap: BinaryHeap<Reverse<(Ord64, u64)>>,
    data: Vec<Option<E>>,
    free: Vec<u64>,
}

impl<E> Default for Events<E> {
    fn default() -> Self {
        Events {
            heap: BinaryHeap::new(),
            data: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<E> Events<E> {
    pub(crate) fn push(&mut self, t: f64, ev: E) {
        let id = match self.free.pop() {
            Some(id) => {
                self.data[id as usize] = Some(ev);
                id
            }
            None => {
                self.data.push(Some(ev));
                (self.data.len() - 1) as u64
            }
        };
        self.heap.push(Reverse((Ord64(t), id)));
    }

    /// The time of the earliest event (infinity: none).
    fn next_time(&self) -> f64 {
        self.heap
            .peek()
            .map_or(f64::INFINITY, |Reverse((Ord64(t), _))| *t)
    }

    /// The earliest event if it is due at or before `t`.
    fn pop_due(&mut self, t: f64) -> Option<E> {
        let &Reverse((Ord64(te), id)) = self.heap.peek()?;
        if te > t {
            return None;
        }
        self.heap.pop();
        let ev = self.data[id as usize].take().expect("event");
        self.free.push(id);
        Some(ev)
    }
}

/// How far a fluid flow has come: `sent` of `bytes` by `t0`, at `rate` since.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    pub(crate) bytes: f64,
    pub(crate) sent: f64,
    pub(crate) t0: f64,
    pub(crate) rate: f64,
}

impl Progress {
    /// A flow of `bytes` that starts at `now` (rate 0 until the next solve).
    pub(crate) fn new(bytes: f64, now: f64) -> Self {
        Progress {
            bytes,
            sent: 0.0,
            t0: now,
            rate: 0.0,
        }
    }

    /// Count the bytes sent up to `now`.
    pub(crate) fn advance(&mut self, now: f64) {
        self.sent += self.rate * (now - self.t0);
        self.t0 = now;
    }

    /// The flow runs at `rate` from `now` on: its new completion time, or `None` when the rate
    /// is bit for bit the one it had (its completion time stays). Infinite bytes or rate 0: never.
    fn rerate(&mut self, now: f64, rate: f64) -> Option<f64> {
        if rate.to_bits() == self.rate.to_bits() {
            return None;
        }
        self.advance(now);
        self.rate = rate;
        let left = self.bytes - self.sent;
        Some(if rate > 0.0 && left.is_finite() {
            now + left.max(0.0) / rate
        } else {
            f64::INFINITY
        })
    }
}

/// A fluid engine: flows in slots of a [`MaxMin`] solver, their completion times, its own events.
pub(crate) trait Engine {
    type Ev;

    fn now(&self) -> f64;
    fn set_now(&mut self, t: f64);
    fn events(&mut self) -> &mut Events<Self::Ev>;
    fn completions(&mut self) -> &mut Completions;
    fn solver(&mut self) -> &mut MaxMin;
    fn meter(&mut self) -> &mut LinkMeter;
    fn topology(&self) -> &Topology;
    /// The progress of the flow in slot `id` (which holds one).
    fn progress(&mut self, id: u32) -> &mut Progress;
    /// Whether slot `id` holds a flow.
    fn holds_flow(&self, id: u32) -> bool;
    /// What link `l` carries, once solved (bytes/s).
    fn link_load(&self, l: u32) -> f64;
    /// The run is over (later events and flows are not simulated).
    fn finished(&self) -> bool;
    /// The flow in slot `id` delivered its last byte into the network.
    fn complete(&mut self, id: u32);
    fn handle(&mut self, ev: Self::Ev);
    /// Link `l` carries `load` from now on (after a solve); nothing by default.
    fn loaded(&mut self, _l: u32, _load: f64) {}

    /// Solve the changed rates, re-time the flows whose rate changed, and account link and tier
    /// loads up to now.
    fn settle(&mut self, solved: &mut Vec<u32>, touched: &mut Vec<u32>) {
        self.solver().solve(solved, touched);
        if touched.is_empty() {
            return;
        }
        let now = self.now();
        self.meter().close_tiers(now);
        for &l in touched.iter() {
            let load = self.link_load(l);
            let tier = self.topology().links[l as usize].tier as usize;
            self.meter().set_load(l as usize, tier, now, load);
            self.loaded(l, load);
        }
        for &id in solved.iter() {
            let rate = self.solver().rate(id);
            if let Some(at) = self.progress(id).rerate(now, rate) {
                self.completions().set(id, at);
            }
        }
    }

    /// Advance to the next instant (the earliest event or completion) until the run is over or
    /// nothing is left: completions due then, then the events due then, then one solve.
    fn run_events(&mut self, solved: &mut Vec<u32>, touched: &mut Vec<u32>) {
        let mut due = Vec::new();
        while !self.finished() {
            let t_ev = self.events().next_time();
            let t_fl = self.completions().next();
            let t = t_ev.min(t_fl);
            if !t.is_finite() {
                break;
            }
            self.set_now(t);
            if t_fl <= t + TOGETHER_S {
                self.completions().due(t + TOGETHER_S, &mut due);
                for &id in &due {
                    // a slot freed and taken again within this loop holds a new flow
                    if self.holds_flow(id) && self.completions().get(id) <= t + TOGETHER_S {
                        self.complete(id);
                    }
                }
            }
            while let Some(ev) = self.events().pop_due(t) {
                self.handle(ev);
            }
            self.settle(solved, touched);
        }
    }
}
