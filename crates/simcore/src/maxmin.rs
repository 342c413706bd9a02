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
//! Incremental: adding or removing a flow or changing a capacity marks links dirty; a solve
//! recomputes only the connected component(s) of the flow–link graph (flows and the links they
//! cross) that contain a dirty link. Flows outside them keep their rates, which stay max-min
//! fair because components share no capacity. [`Recompute::Full`] solves every flow each time
//! (the from-scratch reference, same code path).

/// Which flows a solve recomputes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recompute {
    /// The components of the flow–link graph that hold a changed link, or every flow once the
    /// search has reached half of them (then the search costs more than it can save).
    #[default]
    Incremental,
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
    /// Sum of the rates of its flows.
    load: f64,
}

#[derive(Debug, Clone)]
struct FlowState {
    path: Vec<u32>,
    /// For each link of the path, the flow's index in that link's `flows`.
    pos: Vec<u32>,
    cap: f64,
    rate: f64,
    active: bool,
}

/// The network's flows and their max-min rates.
#[derive(Debug, Clone)]
pub struct MaxMin {
    links: Vec<LinkState>,
    flows: Vec<FlowState>,
    free: Vec<u32>,
    n_active: usize,
    mode: Recompute,
    dirty: Vec<u32>,
    dirty_mark: Vec<bool>,
    // scratch, reused between solves; marks compare against `epoch`
    epoch: u32,
    link_seen: Vec<u32>,
    flow_seen: Vec<u32>,
    left: Vec<f64>,
    count: Vec<u32>,
    key: Vec<f64>,
    frozen: Vec<u32>,
    heap: RadixHeap,
    /// Flows solved over all solves (the work done).
    pub flows_solved: u64,
    pub solves: u64,
}

const FLOW_TAG: u32 = 1 << 31;

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
                    load: 0.0,
                })
                .collect(),
            flows: Vec::new(),
            free: Vec::new(),
            n_active: 0,
            mode,
            dirty: Vec::new(),
            dirty_mark: vec![false; n],
            epoch: 0,
            link_seen: vec![0; n],
            flow_seen: Vec::new(),
            left: vec![0.0; n],
            count: vec![0; n],
            key: vec![0.0; n],
            frozen: Vec::new(),
            heap: RadixHeap::default(),
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
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.flows.push(FlowState {
                    path: Vec::new(),
                    pos: Vec::new(),
                    cap: 0.0,
                    rate: 0.0,
                    active: false,
                });
                self.flow_seen.push(0);
                self.frozen.push(0);
                (self.flows.len() - 1) as u32
            }
        };
        let mut pos = Vec::with_capacity(path.len());
        for &l in path {
            let link = &mut self.links[l as usize];
            pos.push(link.flows.len() as u32);
            link.flows.push(id);
        }
        let f = &mut self.flows[id as usize];
        f.path.clear();
        f.path.extend_from_slice(path);
        f.pos = pos;
        f.cap = nonneg(cap);
        f.rate = 0.0;
        f.active = true;
        self.n_active += 1;
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
        self.n_active -= 1;
        let rate = f.rate;
        f.rate = 0.0;
        let path = std::mem::take(&mut f.path);
        let pos = std::mem::take(&mut f.pos);
        for (&l, &p) in path.iter().zip(&pos) {
            let link = &mut self.links[l as usize];
            link.load -= rate;
            link.flows.swap_remove(p as usize);
            if let Some(&moved) = link.flows.get(p as usize) {
                let m = &mut self.flows[moved as usize];
                let k = m.path.iter().position(|&x| x == l).expect("link on path");
                m.pos[k] = p;
            }
            self.mark(l);
        }
        let f = &mut self.flows[id as usize];
        f.path = path;
        f.path.clear();
        f.pos = pos;
        self.free.push(id);
    }

    pub fn set_capacity(&mut self, link: u32, capacity: f64) {
        self.links[link as usize].capacity = nonneg(capacity);
        self.mark(link);
    }

    pub fn capacity(&self, link: u32) -> f64 {
        self.links[link as usize].capacity
    }
    pub fn rate(&self, id: u32) -> f64 {
        self.flows[id as usize].rate
    }
    pub fn path(&self, id: u32) -> &[u32] {
        &self.flows[id as usize].path
    }
    pub fn is_active(&self, id: u32) -> bool {
        self.flows.get(id as usize).is_some_and(|f| f.active)
    }
    pub fn link_load(&self, link: u32) -> f64 {
        self.links[link as usize].load
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
    /// receives the flows whose rates were recomputed, `touched` the links of their component.
    pub fn solve(&mut self, solved: &mut Vec<u32>, touched: &mut Vec<u32>) {
        solved.clear();
        touched.clear();
        if self.dirty.is_empty() {
            return;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.link_seen.iter_mut().for_each(|x| *x = 0);
            self.flow_seen.iter_mut().for_each(|x| *x = 0);
            self.frozen.iter_mut().for_each(|x| *x = 0);
            self.epoch = 1;
        }
        let epoch = self.epoch;
        let limit = match self.mode {
            Recompute::Incremental => self.n_active / 2,
            Recompute::Components => usize::MAX,
            Recompute::Full => 0,
        };
        let mut full = self.mode == Recompute::Full;
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
                    for &m in &self.flows[f as usize].path {
                        if self.link_seen[m as usize] != epoch {
                            self.link_seen[m as usize] = epoch;
                            touched.push(m);
                        }
                    }
                }
            }
        }
        if full {
            solved.clear();
            touched.clear();
            touched.extend(0..self.links.len() as u32);
            solved.extend(self.active());
        }
        for &l in &self.dirty {
            self.dirty_mark[l as usize] = false;
        }
        self.dirty.clear();
        self.fill(solved, touched);
        self.solves += 1;
        self.flows_solved += solved.len() as u64;
    }

    /// Progressive filling over `flows`, which use only links in `links` and are every flow on
    /// those links.
    fn fill(&mut self, flows: &[u32], links: &[u32]) {
        let mut heap = std::mem::take(&mut self.heap);
        heap.clear();
        for &l in links {
            let li = l as usize;
            self.left[li] = self.links[li].capacity;
            self.count[li] = self.links[li].flows.len() as u32;
            self.links[li].load = 0.0;
            if self.count[li] > 0 {
                self.key[li] = nonneg(self.left[li]) / self.count[li] as f64;
                heap.push(self.key[li].to_bits(), l);
            }
        }
        // a flow's own cap is a bottleneck too; `frozen[f] == epoch` marks a frozen flow
        let epoch = self.epoch;
        for &f in flows {
            let cap = self.flows[f as usize].cap;
            if cap.is_finite() {
                heap.push(cap.to_bits(), f | FLOW_TAG);
            }
        }
        // Keys are the bits of non-negative floats, which order as the floats do. One entry per
        // link, its key at most the link's current share (shares only rise as
        // flows freeze): a popped entry below the current share goes back in with it.
        while let Some((bits, tag)) = heap.pop() {
            let share = f64::from_bits(bits);
            if tag & FLOW_TAG != 0 {
                let f = tag & !FLOW_TAG;
                if self.frozen[f as usize] != epoch {
                    self.freeze(f, share);
                }
                continue;
            }
            let l = tag as usize;
            if self.count[l] == 0 {
                continue;
            }
            let current = self.key[l].to_bits();
            if current > bits {
                heap.push(current, l as u32);
                continue;
            }
            // (a share a rounding below the popped key is the least one now: take it as it is)
            let share = f64::from_bits(current);
            // every unfrozen flow on the link gets the share
            let mut k = 0;
            while k < self.links[l].flows.len() {
                let f = self.links[l].flows[k];
                if self.frozen[f as usize] != epoch {
                    self.freeze(f, share);
                }
                k += 1;
            }
        }
        self.heap = heap;
    }

    /// Fix flow `f` at `share`: its links lose the share and one unfrozen flow.
    fn freeze(&mut self, f: u32, share: f64) {
        self.frozen[f as usize] = self.epoch;
        self.flows[f as usize].rate = share;
        for k in 0..self.flows[f as usize].path.len() {
            let m = self.flows[f as usize].path[k] as usize;
            self.links[m].load += share;
            self.left[m] -= share;
            self.count[m] -= 1;
            if self.count[m] > 0 {
                self.key[m] = nonneg(self.left[m]) / self.count[m] as f64;
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

/// A monotone priority queue on `u64` keys (a radix heap): every key pushed is at least the
/// last one popped, as the water level only rises. Push O(1); a pop redistributes one bucket.
#[derive(Debug, Clone)]
struct RadixHeap {
    last: u64,
    len: usize,
    buckets: [Vec<(u64, u32)>; 65],
}

impl Default for RadixHeap {
    fn default() -> Self {
        RadixHeap {
            last: 0,
            len: 0,
            buckets: std::array::from_fn(|_| Vec::new()),
        }
    }
}

impl RadixHeap {
    fn bucket(&self, key: u64) -> usize {
        (64 - (key ^ self.last).leading_zeros()) as usize
    }
    fn clear(&mut self) {
        self.buckets.iter_mut().for_each(Vec::clear);
        self.last = 0;
        self.len = 0;
    }
    fn push(&mut self, key: u64, item: u32) {
        let key = key.max(self.last);
        let b = self.bucket(key);
        self.buckets[b].push((key, item));
        self.len += 1;
    }
    fn pop(&mut self) -> Option<(u64, u32)> {
        if self.len == 0 {
            return None;
        }
        if self.buckets[0].is_empty() {
            let i = (1..65).find(|&i| !self.buckets[i].is_empty())?;
            let items = std::mem::take(&mut self.buckets[i]);
            self.last = items.iter().map(|e| e.0).min()?;
            for &(k, v) in &items {
                let b = self.bucket(k);
                self.buckets[b].push((k, v));
            }
            let mut items = items;
            items.clear();
            self.buckets[i] = items; // keep its allocation
        }
        self.len -= 1;
        self.buckets[0].pop()
    }
}

/// Max-min rates from scratch with the textbook algorithm (no heap, no components): the
/// reference the tests compare [`MaxMin`] against. `paths[i]` and `caps[i]` describe flow i.
pub fn reference_rates(capacities: &[f64], paths: &[Vec<u32>], caps: &[f64]) -> Vec<f64> {
    let n = paths.len();
    let mut rate = vec![0.0; n];
    let mut frozen = vec![false; n];
    let mut left: Vec<f64> = capacities.to_vec();
    loop {
        let mut count = vec![0usize; left.len()];
        for (i, p) in paths.iter().enumerate() {
            if !frozen[i] {
                for &l in p {
                    count[l as usize] += 1;
                }
            }
        }
        let mut best = f64::INFINITY;
        for (l, &c) in count.iter().enumerate() {
            if c > 0 {
                best = best.min(left[l].max(0.0) / c as f64);
            }
        }
        for (i, &c) in caps.iter().enumerate() {
            if !frozen[i] {
                best = best.min(c);
            }
        }
        if !best.is_finite() {
            break;
        }
        let tight: Vec<bool> = count
            .iter()
            .enumerate()
            .map(|(l, &c)| c > 0 && left[l].max(0.0) / c as f64 <= best * (1.0 + 1e-12))
            .collect();
        let mut any = false;
        for i in 0..n {
            if !frozen[i] && (caps[i] <= best || paths[i].iter().any(|&l| tight[l as usize])) {
                frozen[i] = true;
                rate[i] = best;
                any = true;
                for &l in &paths[i] {
                    left[l as usize] -= best;
                }
            }
        }
        if !any {
            break;
        }
    }
    rate
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn solve_all(mm: &mut MaxMin) {
        let (mut s, mut t) = (Vec::new(), Vec::new());
        mm.solve(&mut s, &mut t);
    }

    #[test]
    fn two_links_and_a_cap() {
        // link 0 (10) carries A and B; link 1 (3) carries B; C on link 0 is capped at 1
        let mut mm = MaxMin::new(&[10.0, 3.0], Recompute::Incremental);
        let a = mm.add(&[0], f64::INFINITY);
        let b = mm.add(&[0, 1], f64::INFINITY);
        let c = mm.add(&[0], 1.0);
        solve_all(&mut mm);
        assert!((mm.rate(b) - 3.0).abs() < 1e-12);
        assert!((mm.rate(c) - 1.0).abs() < 1e-12);
        assert!((mm.rate(a) - 6.0).abs() < 1e-12);
        assert!((mm.link_load(0) - 10.0).abs() < 1e-12);
        mm.remove(b);
        solve_all(&mut mm);
        assert!((mm.rate(a) - 9.0).abs() < 1e-12);
        assert_eq!(mm.link_load(1), 0.0);
    }

    #[test]
    fn a_solve_touches_only_the_changed_component() {
        for mode in [Recompute::Incremental, Recompute::Components] {
            let mut mm = MaxMin::new(&[1.0; 7], mode);
            let a = mm.add(&[0], f64::INFINITY);
            for l in 1..6 {
                mm.add(&[l, l + 1], f64::INFINITY);
            }
            solve_all(&mut mm);
            let (mut s, mut t) = (Vec::new(), Vec::new());
            let c = mm.add(&[0], f64::INFINITY);
            mm.solve(&mut s, &mut t);
            s.sort();
            assert_eq!(s, vec![a.min(c), a.max(c)]);
            assert_eq!(t, vec![0]);
            assert!((mm.rate(a) - 0.5).abs() < 1e-12);
        }
        // a change that reaches half of the flows: everything is solved at once
        let mut mm = MaxMin::new(&[1.0; 3], Recompute::Incremental);
        mm.add(&[0], f64::INFINITY);
        mm.add(&[1, 2], f64::INFINITY);
        solve_all(&mut mm);
        let (mut s, mut t) = (Vec::new(), Vec::new());
        mm.add(&[0], f64::INFINITY);
        mm.solve(&mut s, &mut t);
        assert_eq!((s.len(), t.len()), (3, 3));
    }

    #[test]
    fn rates_from_json() {
        let out = rates_json(
            r#"{"capacities": [10, 3], "paths": [[0], [0, 1], [0]], "caps": [null, null, 1]}"#,
        );
        assert_eq!(out.unwrap(), "[6.0,3.0,1.0]");
        let bad = rates_json(r#"{"capacities": [10], "paths": [[0, 0]]}"#);
        assert!(bad.unwrap_err().contains("paths[0]"));
    }

    #[test]
    fn zero_capacity_gives_zero_rates() {
        let mut mm = MaxMin::new(&[0.0, 5.0], Recompute::Incremental);
        let a = mm.add(&[0, 1], f64::INFINITY);
        let b = mm.add(&[1], f64::INFINITY);
        solve_all(&mut mm);
        assert_eq!(mm.rate(a), 0.0);
        assert!((mm.rate(b) - 5.0).abs() < 1e-12);
    }

    /// A random network: capacities, and a sequence of operations (add a flow on a random
    /// path with an optional cap / remove a random flow / change a capacity).
    type Op = (u8, Vec<u32>, f64);

    fn scenario() -> impl Strategy<Value = (Vec<f64>, Vec<Op>)> {
        (2usize..12).prop_flat_map(|links| {
            let caps = prop::collection::vec(0.5f64..100.0, links);
            let op = (
                0u8..10,
                prop::collection::btree_set(0..links as u32, 1..4)
                    .prop_map(|s| s.into_iter().collect::<Vec<_>>()),
                prop_oneof![Just(f64::INFINITY), 0.1f64..50.0],
            );
            (caps, prop::collection::vec(op, 1..60))
        })
    }

    fn check_invariants(mm: &MaxMin) -> Result<(), TestCaseError> {
        for l in 0..mm.links() as u32 {
            let sum: f64 = mm.link_flows(l).iter().map(|&f| mm.rate(f)).sum();
            let cap = mm.capacity(l);
            prop_assert!(sum <= cap * (1.0 + 1e-9) + 1e-9, "link {l} over capacity");
            prop_assert!((sum - mm.link_load(l)).abs() <= 1e-9 * cap.max(1.0));
        }
        for f in mm.active() {
            let r = mm.rate(f);
            prop_assert!(r >= 0.0);
            let capped = (r - mm.flows[f as usize].cap).abs() <= 1e-9 * r.max(1.0);
            // bottlenecked: at its cap, or at a saturated link where no flow has a higher rate
            let bottleneck = mm.path(f).iter().any(|&l| {
                let sum: f64 = mm.link_flows(l).iter().map(|&g| mm.rate(g)).sum();
                let saturated = sum >= mm.capacity(l) * (1.0 - 1e-9) - 1e-9;
                let max = mm
                    .link_flows(l)
                    .iter()
                    .map(|&g| mm.rate(g))
                    .fold(0.0, f64::max);
                saturated && r >= max * (1.0 - 1e-9) - 1e-12
            });
            prop_assert!(
                capped || bottleneck,
                "flow {f} (rate {r}) has no bottleneck"
            );
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn the_radix_heap_pops_in_order(batches in prop::collection::vec(prop::collection::vec(0u64..1 << 40, 0..20), 1..20)) {
            // pushes never go below the last pop: each batch adds to the last popped key
            let mut heap = RadixHeap::default();
            let mut reference: Vec<(u64, u32)> = Vec::new();
            let mut last = 0u64;
            for (i, batch) in batches.iter().enumerate() {
                for (j, &d) in batch.iter().enumerate() {
                    heap.push(last + d, (i * 100 + j) as u32);
                    reference.push((last + d, (i * 100 + j) as u32));
                }
                reference.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
                if let Some(want) = reference.pop() {
                    let got = heap.pop().unwrap();
                    prop_assert_eq!(got.0, want.0);
                    last = got.0;
                    // equal keys may come out in any order: drop the one popped
                    if got.1 != want.1 {
                        let k = reference.iter().position(|e| *e == got).unwrap();
                        reference[k] = want;
                    }
                }
            }
            prop_assert_eq!(heap.len, reference.len());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn incremental_equals_from_scratch_and_is_max_min((caps, ops) in scenario()) {
            let mut inc = MaxMin::new(&caps, Recompute::Incremental);
            let mut full = MaxMin::new(&caps, Recompute::Full);
            let mut comp = MaxMin::new(&caps, Recompute::Components);
            let mut caps_now = caps.clone();
            let mut live: Vec<u32> = Vec::new();
            for (kind, path, cap) in ops {
                match kind {
                    0..=5 => {
                        let a = inc.add(&path, cap);
                        let b = full.add(&path, cap);
                        prop_assert_eq!(a, b);
                        prop_assert_eq!(a, comp.add(&path, cap));
                        live.push(a);
                    }
                    6..=8 if !live.is_empty() => {
                        let f = live.swap_remove(path[0] as usize % live.len());
                        inc.remove(f);
                        full.remove(f);
                        comp.remove(f);
                    }
                    _ => {
                        let l = path[0];
                        let c = if cap.is_finite() { cap } else { 0.0 };
                        caps_now[l as usize] = c;
                        inc.set_capacity(l, c);
                        full.set_capacity(l, c);
                        comp.set_capacity(l, c);
                    }
                }
                solve_all(&mut inc);
                solve_all(&mut full);
                solve_all(&mut comp);
                check_invariants(&inc)?;
                check_invariants(&comp)?;
                let paths: Vec<Vec<u32>> = live.iter().map(|&f| inc.path(f).to_vec()).collect();
                let fcaps: Vec<f64> = live.iter().map(|&f| inc.flows[f as usize].cap).collect();
                let reference = reference_rates(&caps_now, &paths, &fcaps);
                for (i, &f) in live.iter().enumerate() {
                    let (a, b, r) = (inc.rate(f), full.rate(f), reference[i]);
                    prop_assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "inc {a} vs full {b}");
                    let c = comp.rate(f);
                    prop_assert!((c - b).abs() <= 1e-9 * c.abs().max(1.0), "components {c} vs full {b}");
                    prop_assert!((a - r).abs() <= 1e-9 * r.abs().max(1.0), "inc {a} vs reference {r}");
                }
            }
        }
    }
}
