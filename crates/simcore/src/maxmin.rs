//! Max-min fair rates for flows over multi-link paths, recomputed incrementally.
//!
//! Progressive filling (water-filling): every unfrozen flow's rate rises together; the link
//! whose remaining capacity per unfrozen flow is the smallest saturates first and freezes its
//! flows at that share; a flow with a rate cap (a non-responsive sender) freezes at its cap when
//! the water reaches it. Shares of the other links only rise as flows freeze elsewhere
//! (`(R - s) / (n - 1) >= R / n` when `s <= R / n`), so a monotone (radix) heap holding one entry per link,
//! keyed at most at the link's current share, finds each next bottleneck: an entry popped below
//! its link's current share goes back in with it (raising a key costs nothing until then).
//!
//! Incremental: adding or removing a flow or changing a capacity marks links dirty.
//! [`Recompute::Components`] recomputes only the connected component(s) of the flow–link graph
//! (flows and the links they cross) that contain a dirty link. Flows outside them keep their
//! rates, which stay max-min fair because components share no capacity. [`Recompute::Full`]
//! solves every flow each time (the from-scratch reference, same code path).
//!
//! Local repair ([`Recompute::Incremental`], the default): fill only the flows a change reaches
//! through the bottleneck structure, over what the others leave, and grow that set until every
//! flow has a bottleneck (see `MaxMin::local`); a feasible allocation in which every flow has
//! a bottleneck is the max-min fair one. On an all-to-all it fills about a third of the flows
//! the level cut below does.
//!
//! Level cut ([`Recompute::LevelCut`], and the start of local repair): progressive filling
//! below the lowest level that a change can reach goes exactly as before, so the flows frozen
//! below it keep their rates and
//! only the flows at or above it are filled again, over what the others leave. A removed flow
//! reaches no lower than its rate (none of its links saturated before it froze, and they only
//! get more room); a new flow no lower than its cap and, on each of its links, the level where
//! that link would saturate with the new flows added, `C = Σ min(r, λ) + k·λ` over the rates r of
//! the link's other flows and its k new flows (a link saturates no earlier below that level);
//! a capacity change, level 0 (everything). Flows with a lower rate cannot reach a higher
//! one: a flow on a saturated link has at most the link's level. On an all-to-all (one
//! component) this re-solves about 40 % of the flows per change instead of all of them.
//! Neither finding those flows nor what the others leave costs a pass over every flow: the
//! flows are kept in order of rate (each fill freezes them rising, to rounding), so the ones at
//! or above the cut are a suffix of the order; and what the others leave on a link is its load
//! less the rates of its re-solved flows (summed over their paths), so a cut solve agrees with
//! the from-scratch fill to rounding, not bit for bit.

/// Which flows a solve recomputes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recompute {
    /// Local repair: the flows at or above the level cut on the changed links, with the flows
    /// bottlenecked on their links, are filled again, the others keeping their rates, and the
    /// set grows by every flow left standing above a new share until none does; when that
    /// takes long, as [`Recompute::LevelCut`] without the search.
    #[default]
    Incremental,
    /// The components of the flow–link graph that hold a changed link, or every flow once the
    /// search has reached half of them (then the search costs more than it can save), and of
    /// those only the flows at or above the lowest level a change can reach (the level cut).
    LevelCut,
    /// The components that hold a changed link, however large (to measure the search).
    Components,
    /// Every flow, every time (the reference).
    Full,
}

#[derive(Debug, Clone)]
struct LinkState {
    capacity: f64,
    /// Flow slots crossing the link (unordered; swap-remove).
    flows: Vec<u32>,
}

/// A link's filling state, together in one place (a freeze touches all of it).
#[derive(Debug, Clone, Copy, Default)]
struct LinkFill {
    /// Capacity not yet taken by frozen (or unsolved) flows.
    left: f64,
    /// Its share: `left` over `count`.
    key: f64,
    /// Sum of the rates of its flows.
    load: f64,
    /// Unfrozen solved flows on it.
    count: u32,
}

#[derive(Debug, Clone)]
struct FlowState {
    cap: f64,
    /// Links on its path: the first `len` of its row in `paths`.
    len: u32,
    active: bool,
}

/// The network's flows and their max-min rates.
#[derive(Debug, Clone)]
pub struct MaxMin {
    links: Vec<LinkState>,
    flows: Vec<FlowState>,
    /// The flows' paths, one row of `stride` links per slot (a flat array: the fill follows
    /// paths of flows in no particular order).
    paths: Vec<u32>,
    /// For each link of each path, the flow's index in that link's `flows` (rows as `paths`).
    pos: Vec<u32>,
    /// The longest path so far (the rows' length).
    stride: usize,
    /// Each flow slot's rate.
    rate: Vec<f64>,
    /// Whether each slot holds a flow (dense, for the scans over every slot).
    alive: Vec<bool>,
    free: Vec<u32>,
    n_active: usize,
    mode: Recompute,
    dirty: Vec<u32>,
    dirty_mark: Vec<bool>,
    // scratch, reused between solves; marks compare against `epoch`
    epoch: u32,
    link_seen: Vec<u32>,
    link_mark: Vec<u32>,
    flow_seen: Vec<u32>,
    fillst: Vec<LinkFill>,
    frozen: Vec<u32>,
    heap: RadixHeap,
    /// Scratch: links waiting outside the heap during a fill, with their shares at the start
    /// of it (lower bounds: shares only rise), by share from the highest.
    deferred: Vec<(u64, u32)>,
    /// Flows added since the last solve (`fresh_mark[f] == epoch` during a solve).
    fresh: Vec<u32>,
    fresh_mark: Vec<u32>,
    /// The lowest level the removals, caps and capacity changes since the last solve reach.
    reach: f64,
    /// Scratch: the rates on one link (for a new flow's saturation level).
    scratch: Vec<f64>,
    /// Searches in a row that reached half of the flows.
    giant: u32,
    /// The flows by rate ([`Recompute::Incremental`]): `order_flow[i]` (or [`NONE`], a removed
    /// flow's place) with a key at least its rate, the keys non-decreasing, so the flows a level
    /// cut re-solves are a suffix. Built from the freeze order of each fill (rising, to
    /// rounding); invalid after a solve of some components only.
    order_key: Vec<f64>,
    order_flow: Vec<u32>,
    /// Each slot's index in `order_flow` ([`NONE`]: not in it).
    order_pos: Vec<u32>,
    order_valid: bool,
    /// Removed flows' places in the order.
    order_holes: usize,
    /// Scratch: the flows in the order the last fill froze them.
    frozen_list: Vec<u32>,
    /// Each slot's bottleneck in the fill that last set its rate: the link whose share it
    /// froze at, or [`NONE`] (its own cap).
    bott: Vec<u32>,
    /// Scratch: the links the last fill froze flows at, with their shares.
    popped: Vec<(u32, f64)>,
    /// Local repairs that held, those that grew too large (then a level-cut solve), and the
    /// fills they took.
    pub local_ok: u64,
    pub local_fail: u64,
    pub local_fills: u64,
    /// Flows a local repair may fill over its rounds before it falls back (default: twice the
    /// flows in the network, plus 64).
    pub(crate) local_budget: Option<u64>,
    /// Flows solved over all solves (the work done).
    pub flows_solved: u64,
    pub solves: u64,
}

use crate::radixheap::RadixHeap;

const FLOW_TAG: u32 = 1 << 31;
/// No flow (a hole in the order, or a slot not in it).
const NONE: u32 = u32::MAX;

/// `x` if positive, else +0.0 (never -0.0 or NaN: heap keys are the bits of these floats).
fn nonneg(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

impl MaxMin {
    pub fn new(capacities: &[f64], mode: Recompute) -> Self {
        let n = capacities.len();
        MaxMin {
            links: capacities
                .iter()
                .map(|&c| LinkState {
                    capacity: nonneg(c),
                    flows: Vec::new(),
                })
                .collect(),
            flows: Vec::new(),
            paths: Vec::new(),
            pos: Vec::new(),
            stride: 0,
            rate: Vec::new(),
            alive: Vec::new(),
            free: Vec::new(),
            n_active: 0,
            mode,
            dirty: Vec::new(),
            dirty_mark: vec![false; n],
            epoch: 0,
            link_seen: vec![0; n],
            link_mark: vec![0; n],
            flow_seen: Vec::new(),
            fillst: vec![LinkFill::default(); n],
            frozen: Vec::new(),
            heap: RadixHeap::default(),
            deferred: Vec::new(),
            fresh: Vec::new(),
            fresh_mark: Vec::new(),
            reach: f64::INFINITY,
            scratch: Vec::new(),
            giant: 0,
            order_key: Vec::new(),
            order_flow: Vec::new(),
            order_pos: Vec::new(),
            order_valid: false,
            order_holes: 0,
            frozen_list: Vec::new(),
            bott: Vec::new(),
            popped: Vec::new(),
            local_ok: 0,
            local_fail: 0,
            local_fills: 0,
            local_budget: None,
            flows_solved: 0,
            solves: 0,
        }
    }

    fn mark(&mut self, l: u32) {
        if !self.dirty_mark[l as usize] {
            self.dirty_mark[l as usize] = true;
            self.dirty.push(l);
        }
    }

    /// Add a flow along `path` (link indices, non-empty, no repeats) with a rate cap (infinity
    /// for an elastic flow). Its rate is 0 until the next [`MaxMin::solve`].
    pub fn add(&mut self, path: &[u32], cap: f64) -> u32 {
        assert!(!path.is_empty(), "a flow crosses at least one link");
        if path.len() > self.stride {
            self.restride(path.len());
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.flows.push(FlowState {
                    cap: 0.0,
                    len: 0,
                    active: false,
                });
                self.paths.resize(self.paths.len() + self.stride, 0);
                self.pos.resize(self.pos.len() + self.stride, 0);
                self.rate.push(0.0);
                self.alive.push(false);
                self.flow_seen.push(0);
                self.frozen.push(0);
                self.fresh_mark.push(0);
                self.order_pos.push(NONE);
                self.bott.push(NONE);
                (self.flows.len() - 1) as u32
            }
        };
        let row = id as usize * self.stride;
        for (i, &l) in path.iter().enumerate() {
            let link = &mut self.links[l as usize];
            self.pos[row + i] = link.flows.len() as u32;
            self.paths[row + i] = l;
            link.flows.push(id);
        }
        let f = &mut self.flows[id as usize];
        f.len = path.len() as u32;
        f.cap = nonneg(cap);
        f.active = true;
        self.alive[id as usize] = true;
        self.rate[id as usize] = 0.0;
        self.bott[id as usize] = NONE;
        self.n_active += 1;
        self.fresh.push(id);
        self.reach = self.reach.min(f.cap);
        for &l in path {
            self.mark(l);
        }
        id
    }

    /// Remove a flow; its slot may be reused by a later [`MaxMin::add`].
    pub fn remove(&mut self, id: u32) {
        let f = &mut self.flows[id as usize];
        assert!(f.active, "flow {id} is not in the network");
        f.active = false;
        self.alive[id as usize] = false;
        self.n_active -= 1;
        let rate = std::mem::take(&mut self.rate[id as usize]);
        self.reach = self.reach.min(rate);
        let at = std::mem::replace(&mut self.order_pos[id as usize], NONE);
        if at != NONE {
            self.order_flow[at as usize] = NONE;
            self.order_holes += 1;
        }
        let (row, len) = (id as usize * self.stride, f.len as usize);
        for i in row..row + len {
            let (l, p) = (self.paths[i], self.pos[i]);
            let link = &mut self.links[l as usize];
            link.flows.swap_remove(p as usize);
            // (an empty link's load is exactly 0, whatever rounding the sums left)
            let st = &mut self.fillst[l as usize];
            st.load = if link.flows.is_empty() {
                0.0
            } else {
                st.load - rate
            };
            if let Some(&moved) = link.flows.get(p as usize) {
                let m = moved as usize * self.stride;
                let mlen = self.flows[moved as usize].len as usize;
                let k = self.paths[m..m + mlen]
                    .iter()
                    .position(|&x| x == l)
                    .expect("link on path");
                self.pos[m + k] = p;
            }
            self.mark(l);
        }
        self.flows[id as usize].len = 0;
        self.free.push(id);
    }

    /// Make the rows of `paths` and `pos` `stride` long.
    fn restride(&mut self, stride: usize) {
        let (old, n) = (self.stride, self.flows.len());
        let mut paths = vec![0; n * stride];
        let mut pos = vec![0; n * stride];
        for (f, st) in self.flows.iter().enumerate() {
            let len = st.len as usize;
            paths[f * stride..f * stride + len]
                .copy_from_slice(&self.paths[f * old..f * old + len]);
            pos[f * stride..f * stride + len].copy_from_slice(&self.pos[f * old..f * old + len]);
        }
        self.paths = paths;
        self.pos = pos;
        self.stride = stride;
    }

    pub fn set_capacity(&mut self, link: u32, capacity: f64) {
        self.links[link as usize].capacity = nonneg(capacity);
        self.reach = 0.0;
        self.mark(link);
    }

    pub fn capacity(&self, link: u32) -> f64 {
        self.links[link as usize].capacity
    }
    pub fn rate(&self, id: u32) -> f64 {
        self.rate[id as usize]
    }
    pub fn path(&self, id: u32) -> &[u32] {
        let row = id as usize * self.stride;
        &self.paths[row..row + self.flows[id as usize].len as usize]
    }
    pub fn is_active(&self, id: u32) -> bool {
        self.flows.get(id as usize).is_some_and(|f| f.active)
    }
    pub fn link_load(&self, link: u32) -> f64 {
        self.fillst[link as usize].load
    }
    pub fn link_flows(&self, link: u32) -> &[u32] {
        &self.links[link as usize].flows
    }
    pub fn links(&self) -> usize {
        self.links.len()
    }
    /// Slots of the flows in the network.
    pub fn active(&self) -> impl Iterator<Item = u32> + '_ {
        self.flows
            .iter()
            .enumerate()
            .filter(|(_, f)| f.active)
            .map(|(i, _)| i as u32)
    }

    /// Recompute the rates of the flows affected by the changes since the last solve; `solved`
    /// receives the flows whose rates were recomputed, `touched` the links whose load may have
    /// changed (at least those of the solved flows and those a change was on).
    pub fn solve(&mut self, solved: &mut Vec<u32>, touched: &mut Vec<u32>) {
        solved.clear();
        touched.clear();
        if self.dirty.is_empty() {
            return;
        }
        self.next_epoch();
        let (limit, level) = match self.mode {
            Recompute::Incremental | Recompute::LevelCut => (self.n_active / 2, self.level()),
            Recompute::Components => (usize::MAX, 0.0),
            Recompute::Full => (0, 0.0),
        };
        let cut = level > 0.0;
        if self.mode == Recompute::Incremental && cut {
            if self.local(level, solved, touched) {
                self.local_ok += 1;
                for &l in &self.dirty {
                    self.dirty_mark[l as usize] = false;
                }
                self.dirty.clear();
                self.fresh.clear();
                self.reach = f64::INFINITY;
                self.order_valid = false;
                self.solves += 1;
                return;
            }
            self.local_fail += 1;
            solved.clear();
            touched.clear();
        }
        let epoch = self.epoch;
        // after a few searches in a row reached half of the flows, the next ones most likely
        // do too: go to every flow at once (searching again now and then)
        let skip =
            self.mode == Recompute::LevelCut && self.giant >= 4 && !self.solves.is_multiple_of(16);
        let mut full = matches!(self.mode, Recompute::Full | Recompute::Incremental) || skip;
        let searched = !full;
        if !full {
            // breadth-first over the flow–link graph from the dirty links
            for &l in &self.dirty {
                if self.link_seen[l as usize] != epoch {
                    self.link_seen[l as usize] = epoch;
                    touched.push(l);
                }
            }
            let mut i = 0;
            'search: while i < touched.len() {
                let l = touched[i] as usize;
                i += 1;
                for &f in &self.links[l].flows {
                    if self.flow_seen[f as usize] == epoch {
                        continue;
                    }
                    if solved.len() >= limit {
                        full = true;
                        break 'search;
                    }
                    self.flow_seen[f as usize] = epoch;
                    solved.push(f);
                    let row = f as usize * self.stride;
                    let len = self.flows[f as usize].len as usize;
                    for &m in &self.paths[row..row + len] {
                        if self.link_seen[m as usize] != epoch {
                            self.link_seen[m as usize] = epoch;
                            touched.push(m);
                        }
                    }
                }
            }
            self.giant = if full { self.giant + 1 } else { 0 };
        }
        // the order of the flows by rate is kept up to date by the solves of every flow at or
        // above the cut (or of every flow); a solve of some components only leaves it stale
        let ordered = self.mode == Recompute::LevelCut && full;
        let mut suffix = None;
        if full && cut && self.order_valid {
            // the flows at or above the level: a suffix of the order, and the new flows
            let seen = &mut self.flow_seen;
            for &f in solved.iter() {
                seen[f as usize] = epoch.wrapping_sub(1); // (the search's marks)
            }
            solved.clear();
            touched.clear();
            let p = self.order_key.partition_point(|&k| k < level);
            for &f in &self.order_flow[p..] {
                if f != NONE {
                    seen[f as usize] = epoch;
                    solved.push(f);
                }
            }
            for &f in &self.fresh {
                if self.fresh_mark[f as usize] == epoch && seen[f as usize] != epoch {
                    seen[f as usize] = epoch;
                    solved.push(f);
                }
            }
            suffix = Some(p);
        } else if full {
            solved.clear();
            touched.clear();
            // over dense per-slot arrays, in slot order
            let (alive, rate, fresh) = (&self.alive, &self.rate, &self.fresh_mark);
            let seen = &mut self.flow_seen;
            for f in 0..alive.len() {
                if !alive[f] {
                    continue;
                }
                if !cut || rate[f] >= level || fresh[f] == epoch {
                    seen[f] = epoch;
                    solved.push(f as u32);
                } else if searched {
                    // (the search may have marked it)
                    seen[f] = epoch.wrapping_sub(1);
                }
            }
            if !cut {
                touched.extend(0..self.links.len() as u32);
            }
        } else if cut {
            let (rate, seen, fresh) = (&self.rate, &mut self.flow_seen, &self.fresh_mark);
            solved.retain(|&f| {
                let keep = fresh[f as usize] == epoch || rate[f as usize] >= level;
                if !keep {
                    seen[f as usize] = epoch.wrapping_sub(1);
                }
                keep
            });
            touched.clear();
        }
        if cut {
            // the links of the solved flows, and those a change was on; on each, how many
            // solved flows cross it (`count`) and the sum of their rates (`left`, for now: the
            // fill takes it from the link's load to leave what the other flows use)
            self.gather(solved, touched);
        }
        for &l in &self.dirty {
            self.dirty_mark[l as usize] = false;
        }
        self.dirty.clear();
        self.fresh.clear();
        self.reach = f64::INFINITY;
        self.frozen_list.clear();
        self.fill(solved, touched, !cut);
        if ordered {
            self.reorder(suffix, cut, solved.len());
        } else {
            self.order_valid = false;
        }
        self.solves += 1;
        self.flows_solved += solved.len() as u64;
    }

    /// A new epoch for the marks (cleared when the counter wraps).
    fn next_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.link_seen.iter_mut().for_each(|x| *x = 0);
            self.link_mark.iter_mut().for_each(|x| *x = 0);
            self.flow_seen.iter_mut().for_each(|x| *x = 0);
            self.frozen.iter_mut().for_each(|x| *x = 0);
            self.fresh_mark.iter_mut().for_each(|x| *x = 0);
            self.epoch = 1;
        }
    }

    /// Local repair (the rates of the flows it leaves out stay as they are):
    ///
    /// 1. start from the flows at or above `level` (the cut, > 0) on the changed links and the
    ///    new flows;
    /// 2. close the set over the bottleneck structure: every flow at or above the cut whose
    ///    bottleneck (`bott`) is a link of a flow in the set joins it;
    /// 3. fill the set over what the other flows leave (feasible by construction);
    /// 4. check the links where the fill froze flows: no other flow on them may stand above
    ///    that share (else the frozen flows there have no bottleneck); every flow that does
    ///    joins the set, and it goes back to 2.
    ///
    /// When no flow fails, every flow has a bottleneck (the filled ones where they froze, the
    /// others where they had one: on a link no flow of the set crosses, or, by the closure, one
    /// whose flows bottlenecked there are all in the set; those below the cut by the cut's
    /// argument) and the rates are feasible, which makes them the max-min fair rates. False
    /// after 16 fills or once the fills have taken more than [`MaxMin::local_budget`] flows:
    /// then `solved` holds the set, its flows filled at some rates and marked new, for a
    /// level-cut solve to take them all again.
    fn local(&mut self, level: f64, solved: &mut Vec<u32>, touched: &mut Vec<u32>) -> bool {
        const TOL: f64 = 1e-10;
        // (the set stays within the flows at or above the cut, the level-cut solve's; it is
        // the rounds that could cost more than that solve)
        let budget = self.local_budget.unwrap_or(2 * self.n_active as u64 + 64);
        let mut work = 0u64;
        solved.clear();
        let epoch = self.epoch;
        for &l in &self.dirty {
            for &f in &self.links[l as usize].flows {
                let fi = f as usize;
                if self.flow_seen[fi] != epoch
                    && (self.fresh_mark[fi] == epoch || self.rate[fi] >= level)
                {
                    self.flow_seen[fi] = epoch;
                    solved.push(f);
                }
            }
        }
        // the flows bottlenecked on a link of a flow in the set join it (they share what the
        // set's flows leave there), following the bottleneck structure upward
        let seen_mark = epoch;
        let mut next = 0;
        for round in 0.. {
            while next < solved.len() {
                let f = solved[next] as usize;
                next += 1;
                let epoch = self.epoch;
                for i in f * self.stride..f * self.stride + self.flows[f].len as usize {
                    let l = self.paths[i];
                    if self.link_seen[l as usize] == seen_mark {
                        continue;
                    }
                    self.link_seen[l as usize] = seen_mark;
                    for &g in &self.links[l as usize].flows {
                        let gi = g as usize;
                        if self.bott[gi] == l
                            && self.flow_seen[gi] != epoch
                            && self.rate[gi] >= level
                        {
                            self.flow_seen[gi] = epoch;
                            solved.push(g);
                        }
                    }
                }
            }
            if round > 0 {
                // a new epoch for the fill's marks: the set and the new flows marked again
                self.next_epoch();
                let epoch = self.epoch;
                for &f in solved.iter() {
                    self.flow_seen[f as usize] = epoch;
                }
                for k in 0..self.fresh.len() {
                    let f = self.fresh[k] as usize;
                    if self.flows[f].active {
                        self.fresh_mark[f] = epoch;
                    }
                }
            }
            touched.clear();
            self.gather(solved, touched);
            self.frozen_list.clear();
            self.flows_solved += solved.len() as u64;
            work += solved.len() as u64;
            self.local_fills += 1;
            self.fill(solved, touched, false);
            // every flow bottlenecked on a link of the set (or a changed link) at or above the
            // cut is in the set (the closure above); what is left to check is the links where
            // the fill froze flows: none of the others on them may stand above that share
            let before = solved.len();
            let epoch = self.epoch;
            for &(l, share) in &self.popped {
                let bar = share * (1.0 + TOL);
                for &f in &self.links[l as usize].flows {
                    let fi = f as usize;
                    let r = self.rate[fi];
                    if r > bar && r >= level && self.flow_seen[fi] != epoch {
                        self.flow_seen[fi] = epoch;
                        solved.push(f);
                    }
                }
            }
            if solved.len() == before {
                return true;
            }
            if work + solved.len() as u64 > budget || round >= 15 {
                // (a new epoch: the level-cut solve gathers links afresh)
                self.next_epoch();
                let epoch = self.epoch;
                for &f in solved.iter() {
                    self.fresh_mark[f as usize] = epoch;
                }
                return false;
            }
        }
        unreachable!()
    }

    /// The links of the changes and of the flows in `solved` into `touched`, with the count of
    /// those flows on each and the sum of their rates (`count`, `left`: see [`MaxMin::fill`]).
    fn gather(&mut self, solved: &[u32], touched: &mut Vec<u32>) {
        let epoch = self.epoch;
        let MaxMin {
            dirty,
            link_mark,
            fillst,
            flows,
            paths,
            stride,
            rate,
            ..
        } = self;
        for &l in dirty.iter() {
            if link_mark[l as usize] != epoch {
                link_mark[l as usize] = epoch;
                touched.push(l);
                fillst[l as usize].count = 0;
                fillst[l as usize].left = 0.0;
            }
        }
        for &f in solved.iter() {
            let r = rate[f as usize];
            let row = f as usize * *stride;
            for &l in &paths[row..row + flows[f as usize].len as usize] {
                let st = &mut fillst[l as usize];
                if link_mark[l as usize] != epoch {
                    link_mark[l as usize] = epoch;
                    touched.push(l);
                    st.count = 0;
                    st.left = 0.0;
                }
                st.count += 1;
                st.left += r;
            }
        }
    }

    /// After a fill of every flow (`!cut`) or of those at or above the cut (`suffix`: where it
    /// is in the order, or none if the order was stale): the order from the freeze order.
    fn reorder(&mut self, suffix: Option<usize>, cut: bool, solved: usize) {
        if self.frozen_list.len() != solved {
            self.order_valid = false; // (every solved flow freezes; never here)
            return;
        }
        let p = match suffix {
            Some(p) => p,
            None if !cut => 0,
            None => {
                // the flows below the cut, sorted by rate
                let epoch = self.epoch;
                self.order_flow.clear();
                self.order_key.clear();
                for f in 0..self.alive.len() {
                    if self.alive[f] && self.flow_seen[f] != epoch {
                        self.order_flow.push(f as u32);
                    }
                }
                let rate = &self.rate;
                self.order_flow
                    .sort_unstable_by(|&a, &b| rate[a as usize].total_cmp(&rate[b as usize]));
                for (i, &f) in self.order_flow.iter().enumerate() {
                    self.order_key.push(rate[f as usize]);
                    self.order_pos[f as usize] = i as u32;
                }
                self.order_holes = 0;
                self.order_flow.len()
            }
        };
        let p = p.min(self.order_flow.len());
        let holes = self.order_flow[p..].iter().filter(|&&f| f == NONE).count();
        self.order_holes -= holes.min(self.order_holes);
        self.order_flow.truncate(p);
        self.order_key.truncate(p);
        let mut last = self.order_key.last().copied().unwrap_or(0.0);
        for &f in &self.frozen_list {
            last = last.max(self.rate[f as usize]);
            self.order_pos[f as usize] = self.order_flow.len() as u32;
            self.order_flow.push(f);
            self.order_key.push(last);
        }
        if self.order_holes > 64 && 2 * self.order_holes > self.order_flow.len() {
            let mut w = 0;
            for i in 0..self.order_flow.len() {
                let f = self.order_flow[i];
                if f != NONE {
                    self.order_flow[w] = f;
                    self.order_key[w] = self.order_key[i];
                    self.order_pos[f as usize] = w as u32;
                    w += 1;
                }
            }
            self.order_flow.truncate(w);
            self.order_key.truncate(w);
            self.order_holes = 0;
        }
        self.order_valid = true;
    }

    /// The level cut: the lowest level the changes since the last solve reach, less a margin
    /// for rounding (a flow a hair below it is solved too); 0 for everything. Marks the new
    /// flows (`fresh_mark`).
    fn level(&mut self) -> f64 {
        let epoch = self.epoch;
        let mut level = self.reach;
        for k in 0..self.fresh.len() {
            let f = self.fresh[k] as usize;
            if self.flows[f].active {
                self.fresh_mark[f] = epoch;
            }
        }
        for k in 0..self.fresh.len() {
            let f = self.fresh[k] as usize;
            if !self.flows[f].active {
                continue;
            }
            for i in f * self.stride..f * self.stride + self.flows[f].len as usize {
                if level <= 0.0 {
                    return 0.0;
                }
                let l = self.paths[i] as usize;
                level = level.min(self.saturation(l));
            }
        }
        let level = level * (1.0 - 1e-9);
        if level > 0.0 {
            level
        } else {
            0.0
        }
    }

    /// The level at which link `l` would saturate, its new flows (`fresh_mark`) rising from 0
    /// and its other flows at their rates: λ with `C = Σ min(r, λ) + k·λ`.
    fn saturation(&mut self, l: usize) -> f64 {
        let epoch = self.epoch;
        self.scratch.clear();
        let mut k = 0usize;
        for &f in &self.links[l].flows {
            if self.fresh_mark[f as usize] == epoch {
                k += 1;
            } else {
                self.scratch.push(self.rate[f as usize]);
            }
        }
        self.scratch.sort_unstable_by(f64::total_cmp);
        let cap = self.links[l].capacity;
        let n = self.scratch.len() + k;
        let mut used = 0.0;
        for (i, &r) in self.scratch.iter().enumerate() {
            let level = nonneg(cap - used) / (n - i) as f64;
            if level <= r {
                return level;
            }
            used += r;
        }
        nonneg(cap - used) / k.max(1) as f64
    }

    /// Progressive filling over `flows` (marked `flow_seen`), which use only links in `links`;
    /// `all`: they are every flow on those links, else the others keep their rates and leave
    /// the rest of each link's capacity.
    fn fill(&mut self, flows: &[u32], links: &[u32], all: bool) {
        let mut heap = std::mem::take(&mut self.heap);
        heap.clear();
        self.popped.clear();
        let mut deferred = std::mem::take(&mut self.deferred);
        deferred.clear();
        let epoch = self.epoch;
        let mut lowest = f64::INFINITY;
        for &l in links {
            let li = l as usize;
            let n = self.links[li].flows.len() as u32;
            let (count, base) = if all {
                (n, 0.0)
            } else {
                // what the other flows use: the load less the solved flows' rates (summed by
                // `solve`), to rounding; nothing when every flow on the link is solved
                let st = &self.fillst[li];
                let base = if st.count == n {
                    0.0
                } else {
                    nonneg(st.load - st.left)
                };
                (st.count, base)
            };
            let st = &mut self.fillst[li];
            st.left = self.links[li].capacity - base;
            st.count = count;
            st.load = base;
            if count > 0 {
                st.key = nonneg(st.left) / count as f64;
                lowest = lowest.min(st.key);
                deferred.push((st.key.to_bits(), l));
            }
        }
        // Links whose share is far above the lowest (host links behind a busy core, say) wait
        // outside the heap until the water gets near them: shares only rise, so a link above
        // the threshold stays above it, and every link at or below the next key popped is in
        // the heap before it is popped.
        deferred.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        let mut threshold = 2.0 * lowest;
        self.admit(&mut heap, &mut deferred, threshold);
        // a flow's own cap is a bottleneck too; `frozen[f] == epoch` marks a frozen flow
        for &f in flows {
            let cap = self.flows[f as usize].cap;
            if cap.is_finite() {
                heap.push(cap.to_bits(), f | FLOW_TAG);
            }
        }
        // Keys are the bits of non-negative floats, which order as the floats do. One entry per
        // link, its key at most the link's current share (shares only rise as
        // flows freeze): a popped entry below the current share goes back in with it.
        loop {
            if !deferred.is_empty() {
                let next = heap.peek().map_or(f64::INFINITY, f64::from_bits);
                if next > threshold {
                    threshold = (2.0 * threshold).max(next);
                    self.admit(&mut heap, &mut deferred, threshold);
                    continue;
                }
            }
            let Some((bits, tag)) = heap.pop() else {
                break;
            };
            let share = f64::from_bits(bits);
            if tag & FLOW_TAG != 0 {
                let f = tag & !FLOW_TAG;
                if self.frozen[f as usize] != epoch {
                    self.freeze(f, share, NONE);
                }
                continue;
            }
            let l = tag as usize;
            if self.fillst[l].count == 0 {
                continue;
            }
            let current = self.fillst[l].key.to_bits();
            if current > bits {
                heap.push(current, l as u32);
                continue;
            }
            // (a share a rounding below the popped key is the least one now: take it as it is)
            let share = f64::from_bits(current);
            // every unfrozen flow solved on the link gets the share
            self.popped.push((l as u32, share));
            let mut k = 0;
            while k < self.links[l].flows.len() && self.fillst[l].count > 0 {
                let f = self.links[l].flows[k];
                if self.frozen[f as usize] != epoch && self.flow_seen[f as usize] == epoch {
                    self.freeze(f, share, l as u32);
                }
                k += 1;
            }
        }
        self.heap = heap;
        self.deferred = deferred;
    }

    /// Move the links of `deferred` whose share at the start of the fill was at most
    /// `threshold` into the heap at their current shares (and drop those with no flow left to
    /// freeze): every link with a share at most `threshold` is then in the heap.
    fn admit(&self, heap: &mut RadixHeap, deferred: &mut Vec<(u64, u32)>, threshold: f64) {
        let threshold = threshold.to_bits();
        while let Some(&(start, l)) = deferred.last() {
            if start > threshold {
                break;
            }
            deferred.pop();
            let st = &self.fillst[l as usize];
            if st.count > 0 {
                heap.push(st.key.to_bits(), l);
            }
        }
    }

    /// Fix flow `f` at `share`, bottlenecked at link `via` ([`NONE`]: its cap): its links lose
    /// the share and one unfrozen flow.
    fn freeze(&mut self, f: u32, share: f64, via: u32) {
        self.frozen[f as usize] = self.epoch;
        self.rate[f as usize] = share;
        self.bott[f as usize] = via;
        self.frozen_list.push(f);
        let MaxMin {
            flows,
            fillst,
            paths,
            stride,
            ..
        } = self;
        let row = f as usize * *stride;
        for &m in &paths[row..row + flows[f as usize].len as usize] {
            let st = &mut fillst[m as usize];
            st.load += share;
            st.left -= share;
            st.count -= 1;
            if st.count > 0 {
                st.key = nonneg(st.left) / st.count as f64;
            }
        }
    }
}

/// Max-min rates of `{"capacities": [...], "paths": [[link, ...], ...], "caps": [rate|null, ...]}`
/// (caps optional; null: elastic) with [`MaxMin`]: the rates as a JSON list, in flow order.
pub fn rates_json(input_json: &str) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Input {
        capacities: Vec<f64>,
        paths: Vec<Vec<u32>>,
        #[serde(default)]
        caps: Option<Vec<Option<f64>>>,
    }
    let input: Input =
        serde_json::from_str(input_json).map_err(|e| format!("max-min input: {e}"))?;
    let n = input.capacities.len();
    if n > 1_000_000 || input.paths.len() > 1_000_000 {
        return Err("max-min input: at most 1,000,000 links and 1,000,000 flows".into());
    }
    if input.capacities.iter().any(|c| !c.is_finite() || *c < 0.0) {
        return Err("max-min input: capacities must be finite and >= 0".into());
    }
    let caps = input.caps.unwrap_or_else(|| vec![None; input.paths.len()]);
    if caps.len() != input.paths.len() {
        return Err("max-min input: one cap (or null) per path".into());
    }
    let mut mm = MaxMin::new(&input.capacities, Recompute::Full);
    let mut ids = Vec::with_capacity(input.paths.len());
    for (i, (p, c)) in input.paths.iter().zip(&caps).enumerate() {
        let mut seen = std::collections::HashSet::new();
        if p.is_empty() || p.iter().any(|&l| l as usize >= n || !seen.insert(l)) {
            return Err(format!(
                "max-min input: paths[{i}] must be distinct links below {n}"
            ));
        }
        let cap = c.unwrap_or(f64::INFINITY);
        if cap.is_nan() || cap < 0.0 {
            return Err(format!("max-min input: caps[{i}] must be >= 0"));
        }
        ids.push(mm.add(p, cap));
    }
    let (mut s, mut t) = (Vec::new(), Vec::new());
    mm.solve(&mut s, &mut t);
    let rates: Vec<f64> = ids.iter().map(|&f| mm.rate(f)).collect();
    serde_json::to_string(&rates).map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "maxmin_tests.rs"]
mod tests;
