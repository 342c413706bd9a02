//! Tests of `maxmin.rs` (a file of their own to keep the solver short).

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
    // a change that reaches half of the flows: everything is solved at once (the level cut's
    // search; local repair solves only the two flows on link 0)
    let mut mm = MaxMin::new(&[1.0; 3], Recompute::LevelCut);
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
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn incremental_equals_from_scratch_and_is_max_min((caps, ops) in scenario()) {
        let mut inc = MaxMin::new(&caps, Recompute::Incremental);
        let mut cut = MaxMin::new(&caps, Recompute::LevelCut);
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
                    prop_assert_eq!(a, cut.add(&path, cap));
                    live.push(a);
                }
                6..=8 if !live.is_empty() => {
                    let f = live.swap_remove(path[0] as usize % live.len());
                    inc.remove(f);
                    full.remove(f);
                    comp.remove(f);
                    cut.remove(f);
                }
                _ => {
                    let l = path[0];
                    let c = if cap.is_finite() { cap } else { 0.0 };
                    caps_now[l as usize] = c;
                    inc.set_capacity(l, c);
                    full.set_capacity(l, c);
                    comp.set_capacity(l, c);
                    cut.set_capacity(l, c);
                }
            }
            solve_all(&mut inc);
            solve_all(&mut cut);
            solve_all(&mut full);
            solve_all(&mut comp);
            check_invariants(&inc)?;
            check_invariants(&cut)?;
            check_invariants(&comp)?;
            check_order(&cut);
            let paths: Vec<Vec<u32>> = live.iter().map(|&f| inc.path(f).to_vec()).collect();
            let fcaps: Vec<f64> = live.iter().map(|&f| inc.flows[f as usize].cap).collect();
            let reference = reference_rates(&caps_now, &paths, &fcaps);
            for (i, &f) in live.iter().enumerate() {
                let (a, b, r) = (inc.rate(f), full.rate(f), reference[i]);
                prop_assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "inc {a} vs full {b}");
                let c = comp.rate(f);
                prop_assert!((c - b).abs() <= 1e-9 * c.abs().max(1.0), "components {c} vs full {b}");
                let d = cut.rate(f);
                prop_assert!((d - b).abs() <= 1e-9 * d.abs().max(1.0), "level cut {d} vs full {b}");
                prop_assert!((a - r).abs() <= 1e-9 * r.abs().max(1.0), "inc {a} vs reference {r}");
            }
        }
    }
}

/// Max-min rates from scratch with the textbook algorithm (no heap, no components): the
/// reference the tests compare [`MaxMin`] against. `paths[i]` and `caps[i]` describe flow i.
fn reference_rates(capacities: &[f64], paths: &[Vec<u32>], caps: &[f64]) -> Vec<f64> {
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

/// The order by rate, when valid: each flow in the network once, at its place, its key at
/// least its rate, the keys non-decreasing. Returns whether it was valid.
fn check_order(mm: &MaxMin) -> bool {
    if !mm.order_valid {
        return false;
    }
    let mut holes = 0;
    for (i, &f) in mm.order_flow.iter().enumerate() {
        if i > 0 {
            assert!(mm.order_key[i - 1] <= mm.order_key[i], "keys rise");
        }
        if f == NONE {
            holes += 1;
            continue;
        }
        assert!(mm.is_active(f), "flow {f} in the order is in the network");
        assert_eq!(mm.order_pos[f as usize], i as u32);
        assert!(mm.order_key[i] >= mm.rate(f), "key at least the rate");
    }
    assert_eq!(holes, mm.order_holes);
    assert_eq!(mm.order_flow.len() - holes, mm.active().count());
    true
}

/// A random leaf-spine (`leaves` × `hosts` hosts, `spines` spines, 10:1 at the leaves like the
/// 1,000-host benchmark) and a random stream of flows starting and ending on it: `mode` (the
/// level cut or local repair, with `budget` as its [`MaxMin::local_budget`]) gives the rates of
/// the from-scratch solve ([`Recompute::Full`]) after every change, and re-solves fewer flows.
/// Returns the flows it re-solved.
fn leaf_spine_stream(
    mode: Recompute,
    budget: Option<u64>,
    seed: u64,
    leaves: u32,
    hosts: u32,
    spines: u32,
    steps: usize,
) -> u64 {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let n_hosts = leaves * hosts;
    // links: host up 2h, host down 2h+1, then leaf l -> spine s up, spine s -> leaf l down
    let mut caps = vec![10.0; 2 * n_hosts as usize];
    caps.extend(std::iter::repeat_n(
        10.0 * hosts as f64 / 10.0 / spines as f64,
        (2 * leaves * spines) as usize,
    ));
    let spine_link = |l: u32, s: u32, down: bool| 2 * n_hosts + 2 * (l * spines + s) + down as u32;
    let mut inc = MaxMin::new(&caps, mode);
    inc.local_budget = budget;
    let mut full = MaxMin::new(&caps, Recompute::Full);
    let mut live: Vec<u32> = Vec::new();
    let (mut s, mut t) = (Vec::new(), Vec::new());
    let mut ordered = 0;
    for step in 0..steps {
        let batch = if rng.random_range(0..4) == 0 { 3 } else { 1 };
        for _ in 0..batch {
            let add = live.len() < 20 || rng.random_range(0..100) < 52;
            if add {
                let (a, b) = (rng.random_range(0..n_hosts), rng.random_range(0..n_hosts));
                if a == b {
                    continue;
                }
                let mut path = vec![2 * a];
                let (la, lb) = (a / hosts, b / hosts);
                if la != lb {
                    let sp = rng.random_range(0..spines);
                    path.push(spine_link(la, sp, false));
                    path.push(spine_link(lb, sp, true));
                }
                path.push(2 * b + 1);
                let cap = if rng.random_range(0..20) == 0 {
                    rng.random_range(0.05..2.0)
                } else {
                    f64::INFINITY
                };
                let id = inc.add(&path, cap);
                assert_eq!(id, full.add(&path, cap));
                live.push(id);
            } else {
                let f = live.swap_remove(rng.random_range(0..live.len()));
                inc.remove(f);
                full.remove(f);
            }
        }
        if step % 97 == 96 {
            let l = rng.random_range(0..caps.len() as u32);
            let c = caps[l as usize] * rng.random_range(0.5..1.5);
            inc.set_capacity(l, c);
            full.set_capacity(l, c);
        }
        inc.solve(&mut s, &mut t);
        full.solve(&mut s, &mut t);
        ordered += check_order(&inc) as usize;
        for &f in &live {
            let (a, b) = (inc.rate(f), full.rate(f));
            assert!(
                (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                "step {step}: flow {f}: cut {a} vs full {b}"
            );
        }
        for l in 0..caps.len() as u32 {
            let (a, b) = (inc.link_load(l), full.link_load(l));
            assert!(
                (a - b).abs() <= 1e-9 * inc.capacity(l).max(1.0),
                "step {step}: link {l} load {a} vs {b}"
            );
        }
    }
    assert!(inc.flows_solved < full.flows_solved, "the cut saves work");
    if mode == Recompute::LevelCut {
        assert!(
            ordered > steps / 4,
            "the order is kept ({ordered} of {steps} steps)"
        );
    } else if budget.is_none() {
        assert!(
            inc.local_ok > steps as u64 / 2,
            "local repair holds on most steps ({} of {steps}, {} fell back)",
            inc.local_ok,
            inc.local_fail
        );
        assert!(
            inc.local_fills > inc.local_ok + inc.local_fail,
            "some repairs found flows above a new share and filled again"
        );
    } else {
        assert!(inc.local_fail > 0, "the fall-back to the level cut ran");
    }
    inc.flows_solved
}

#[test]
fn the_level_cut_gives_the_from_scratch_rates_on_a_leaf_spine() {
    for seed in 0..6 {
        leaf_spine_stream(Recompute::LevelCut, None, seed, 5, 8, 2, 1500);
    }
    leaf_spine_stream(Recompute::LevelCut, None, 99, 25, 40, 4, 3000);
}

#[test]
fn local_repair_gives_the_from_scratch_rates_on_a_leaf_spine_with_less_work() {
    for seed in 0..6 {
        leaf_spine_stream(Recompute::Incremental, None, seed, 5, 8, 2, 1500);
        // no budget: every repair that has to fill again falls back to the level cut
        leaf_spine_stream(Recompute::Incremental, Some(0), seed, 5, 8, 2, 1500);
    }
    let local = leaf_spine_stream(Recompute::Incremental, None, 99, 25, 40, 4, 3000);
    let cut = leaf_spine_stream(Recompute::LevelCut, None, 99, 25, 40, 4, 3000);
    assert!(
        local < cut,
        "local repair re-solves fewer flows ({local} vs {cut})"
    );
}
