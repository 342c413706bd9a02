//! Data-center topologies as directed links between nodes, with ECMP routing.
//!
//! A leaf-spine (every leaf joined to every spine), a k-ary fat tree (k pods of k/2 edge and
//! k/2 aggregation switches, (k/2)² cores, k³/4 hosts) or any graph read from a file. Every
//! cable is two directed links, each with a capacity, a one-way delay and a tier (e.g.
//! `leaf→spine`), so utilisation can be reported per tier and direction.
//!
//! Routing is per-flow ECMP over shortest paths (hop count): at each switch the next hop is
//! chosen among the neighbours one hop closer to the destination by a hash of (seed, flow key,
//! switch), so a flow keeps its path and flows spread evenly over equal-cost paths. A link that
//! is down is not used; distances are recomputed after a change.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

/// The most hosts a topology may have (memory: links, routing tables).
pub const MAX_HOSTS: usize = 200_000;
/// The most nodes (hosts and switches) of a graph from a file.
pub const MAX_NODES: usize = 250_000;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TopologySpec {
    LeafSpine {
        leaves: u32,
        hosts_per_leaf: u32,
        spines: u32,
        host_bytes_per_s: f64,
        uplink_bytes_per_s: f64,
        #[serde(default)]
        host_delay_s: f64,
        #[serde(default)]
        uplink_delay_s: f64,
    },
    FatTree {
        k: u32,
        host_bytes_per_s: f64,
        edge_agg_bytes_per_s: f64,
        agg_core_bytes_per_s: f64,
        #[serde(default)]
        host_delay_s: f64,
        #[serde(default)]
        edge_agg_delay_s: f64,
        #[serde(default)]
        agg_core_delay_s: f64,
    },
    Graph {
        nodes: Vec<GraphNode>,
        links: Vec<GraphLink>,
    },
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct GraphNode {
    pub name: String,
    #[serde(default)]
    pub host: bool,
}

/// A cable between nodes `a` and `b` (both directions, same capacity and delay).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct GraphLink {
    pub a: String,
    pub b: String,
    pub bytes_per_s: f64,
    #[serde(default)]
    pub delay_s: f64,
    pub tier: String,
}

#[derive(Debug, Clone)]
pub struct TLink {
    pub from: u32,
    pub to: u32,
    pub capacity: f64,
    pub delay_s: f64,
    pub tier: u16,
    pub up: bool,
}

#[derive(Debug, Clone)]
pub struct Topology {
    pub names: Vec<String>,
    /// Node of host i.
    pub hosts: Vec<u32>,
    pub links: Vec<TLink>,
    pub tiers: Vec<String>,
    out: Vec<Vec<u32>>,
    inc: Vec<Vec<u32>>,
    seed: u64,
    /// Hop distance of every node to a node, per destination node (built on demand).
    dist: HashMap<u32, Vec<u32>>,
}

const FAR: u32 = u32::MAX;

/// SplitMix64's output function: a 64-bit hash whose bits all depend on every bit of `x`.
pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn ok_rate(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(format!("topology: {name} must be a finite rate > 0"))
    }
}
fn ok_delay(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && (0.0..=10.0).contains(&v) {
        Ok(())
    } else {
        Err(format!("topology: {name} must be in [0, 10] s"))
    }
}

struct Builder {
    names: Vec<String>,
    links: Vec<TLink>,
    tiers: Vec<String>,
}

impl Builder {
    fn node(&mut self, name: String) -> u32 {
        self.names.push(name);
        (self.names.len() - 1) as u32
    }
    fn tier(&mut self, name: &str) -> u16 {
        match self.tiers.iter().position(|t| t == name) {
            Some(i) => i as u16,
            None => {
                self.tiers.push(name.to_string());
                (self.tiers.len() - 1) as u16
            }
        }
    }
    /// Two directed links a→b (tier `up`) and b→a (tier `down`).
    fn cable(&mut self, a: u32, b: u32, cap: f64, delay: f64, up: &str, down: &str) {
        let (tu, td) = (self.tier(up), self.tier(down));
        for (from, to, tier) in [(a, b, tu), (b, a, td)] {
            self.links.push(TLink {
                from,
                to,
                capacity: cap,
                delay_s: delay,
                tier,
                up: true,
            });
        }
    }
}

impl Topology {
    pub fn build(spec: &TopologySpec, seed: u64) -> Result<Topology, String> {
        let mut b = Builder {
            names: Vec::new(),
            links: Vec::new(),
            tiers: Vec::new(),
        };
        let hosts: Vec<u32>;
        match spec {
            TopologySpec::LeafSpine {
                leaves,
                hosts_per_leaf,
                spines,
                host_bytes_per_s,
                uplink_bytes_per_s,
                host_delay_s,
                uplink_delay_s,
            } => {
                let (l, h, s) = (*leaves as usize, *hosts_per_leaf as usize, *spines as usize);
                if l == 0 || h == 0 || s == 0 {
                    return Err("topology: leaves, hosts_per_leaf and spines must be > 0".into());
                }
                if l * h > MAX_HOSTS || l * s > 10_000_000 {
                    return Err(format!("topology: more than {MAX_HOSTS} hosts"));
                }
                ok_rate("host_bytes_per_s", *host_bytes_per_s)?;
                ok_rate("uplink_bytes_per_s", *uplink_bytes_per_s)?;
                ok_delay("host_delay_s", *host_delay_s)?;
                ok_delay("uplink_delay_s", *uplink_delay_s)?;
                hosts = (0..l * h).map(|i| b.node(format!("h{i}"))).collect();
                let leaf: Vec<u32> = (0..l).map(|i| b.node(format!("leaf{i}"))).collect();
                let spine: Vec<u32> = (0..s).map(|i| b.node(format!("spine{i}"))).collect();
                for (i, &hn) in hosts.iter().enumerate() {
                    let (cap, d) = (*host_bytes_per_s, *host_delay_s);
                    b.cable(hn, leaf[i / h], cap, d, "host→leaf", "leaf→host");
                }
                for &ln in &leaf {
                    for &sn in &spine {
                        let (cap, d) = (*uplink_bytes_per_s, *uplink_delay_s);
                        b.cable(ln, sn, cap, d, "leaf→spine", "spine→leaf");
                    }
                }
            }
            TopologySpec::FatTree {
                k,
                host_bytes_per_s,
                edge_agg_bytes_per_s,
                agg_core_bytes_per_s,
                host_delay_s,
                edge_agg_delay_s,
                agg_core_delay_s,
            } => {
                let k = *k as usize;
                if k < 2 || !k.is_multiple_of(2) || k * k * k / 4 > MAX_HOSTS {
                    return Err(format!(
                        "topology: k must be even, >= 2 and give at most {MAX_HOSTS} hosts (k³/4)"
                    ));
                }
                ok_rate("host_bytes_per_s", *host_bytes_per_s)?;
                ok_rate("edge_agg_bytes_per_s", *edge_agg_bytes_per_s)?;
                ok_rate("agg_core_bytes_per_s", *agg_core_bytes_per_s)?;
                ok_delay("host_delay_s", *host_delay_s)?;
                ok_delay("edge_agg_delay_s", *edge_agg_delay_s)?;
                ok_delay("agg_core_delay_s", *agg_core_delay_s)?;
                let half = k / 2;
                hosts = (0..k * half * half)
                    .map(|i| b.node(format!("h{i}")))
                    .collect();
                let edge: Vec<u32> = (0..k * half)
                    .map(|i| b.node(format!("edge{}.{}", i / half, i % half)))
                    .collect();
                let agg: Vec<u32> = (0..k * half)
                    .map(|i| b.node(format!("agg{}.{}", i / half, i % half)))
                    .collect();
                let core: Vec<u32> = (0..half * half)
                    .map(|i| b.node(format!("core{i}")))
                    .collect();
                for (i, &hn) in hosts.iter().enumerate() {
                    let (cap, d) = (*host_bytes_per_s, *host_delay_s);
                    b.cable(hn, edge[i / half], cap, d, "host→edge", "edge→host");
                }
                for p in 0..k {
                    for e in 0..half {
                        for a in 0..half {
                            let (cap, d) = (*edge_agg_bytes_per_s, *edge_agg_delay_s);
                            let (en, an) = (edge[p * half + e], agg[p * half + a]);
                            b.cable(en, an, cap, d, "edge→agg", "agg→edge");
                        }
                    }
                    for a in 0..half {
                        for j in 0..half {
                            let (cap, d) = (*agg_core_bytes_per_s, *agg_core_delay_s);
                            let (an, cn) = (agg[p * half + a], core[a * half + j]);
                            b.cable(an, cn, cap, d, "agg→core", "core→agg");
                        }
                    }
                }
            }
            TopologySpec::Graph { nodes, links } => {
                if nodes.len() > MAX_NODES {
                    return Err(format!("topology: more than {MAX_NODES} nodes"));
                }
                let mut index = HashMap::new();
                let mut hs = Vec::new();
                for n in nodes {
                    if index.contains_key(&n.name) {
                        return Err(format!("topology: node {:?} appears twice", n.name));
                    }
                    let id = b.node(n.name.clone());
                    index.insert(n.name.clone(), id);
                    if n.host {
                        hs.push(id);
                    }
                }
                if hs.is_empty() {
                    return Err("topology: the graph has no host".into());
                }
                for (i, l) in links.iter().enumerate() {
                    let find = |name: &str| {
                        index
                            .get(name)
                            .copied()
                            .ok_or_else(|| format!("topology: links[{i}]: unknown node {name:?}"))
                    };
                    let (a, z) = (find(&l.a)?, find(&l.b)?);
                    if a == z {
                        return Err(format!("topology: links[{i}]: a link needs two nodes"));
                    }
                    ok_rate(&format!("links[{i}].bytes_per_s"), l.bytes_per_s)?;
                    ok_delay(&format!("links[{i}].delay_s"), l.delay_s)?;
                    b.cable(a, z, l.bytes_per_s, l.delay_s, &l.tier, &l.tier);
                }
                hosts = hs;
            }
        }
        let n = b.names.len();
        let mut out = vec![Vec::new(); n];
        let mut inc = vec![Vec::new(); n];
        for (i, l) in b.links.iter().enumerate() {
            out[l.from as usize].push(i as u32);
            inc[l.to as usize].push(i as u32);
        }
        Ok(Topology {
            names: b.names,
            hosts,
            links: b.links,
            tiers: b.tiers,
            out,
            inc,
            seed,
            dist: HashMap::new(),
        })
    }

    /// The two directed links of the cable between nodes named `a` and `b`.
    pub fn cable(&self, a: &str, b: &str) -> Option<Vec<u32>> {
        let ia = self.names.iter().position(|n| n == a)? as u32;
        let ib = self.names.iter().position(|n| n == b)? as u32;
        let ids: Vec<u32> = self
            .links
            .iter()
            .enumerate()
            .filter(|(_, l)| (l.from, l.to) == (ia, ib) || (l.from, l.to) == (ib, ia))
            .map(|(i, _)| i as u32)
            .collect();
        (!ids.is_empty()).then_some(ids)
    }

    /// Take a link down or bring it back; routes are recomputed on the next lookup.
    pub fn set_up(&mut self, link: u32, up: bool) {
        self.links[link as usize].up = up;
        self.dist.clear();
    }

    /// A node that every path to `node` ends through (a host's only neighbour), to share
    /// distance tables between the hosts of a switch.
    fn funnel(&self, node: u32) -> Option<(u32, u32)> {
        match self.inc[node as usize].as_slice() {
            [l] if self.links[*l as usize].up => Some((self.links[*l as usize].from, *l)),
            _ => None,
        }
    }

    fn distances(&mut self, target: u32) -> &Vec<u32> {
        let (links, inc) = (&self.links, &self.inc);
        self.dist.entry(target).or_insert_with(|| {
            let mut d = vec![FAR; inc.len()];
            d[target as usize] = 0;
            let mut q = VecDeque::from([target]);
            while let Some(v) = q.pop_front() {
                for &l in &inc[v as usize] {
                    let l = &links[l as usize];
                    if l.up && d[l.from as usize] == FAR {
                        d[l.from as usize] = d[v as usize] + 1;
                        q.push_back(l.from);
                    }
                }
            }
            d
        })
    }

    /// The links of host `src`'s flow with `key` to host `dst` (None: unreachable; empty: the
    /// same host).
    pub fn route(&mut self, src: u32, dst: u32, key: u64) -> Option<Vec<u32>> {
        let (s, d) = (self.hosts[src as usize], self.hosts[dst as usize]);
        if s == d {
            return Some(Vec::new());
        }
        let (target, last) = match self.funnel(d) {
            Some((t, l)) if t != s => (t, Some(l)),
            _ => (d, None),
        };
        let h = splitmix(self.seed ^ splitmix(key));
        self.distances(target); // fills the cache
        let dist = &self.dist[&target];
        if dist[s as usize] == FAR {
            return None;
        }
        let mut path = Vec::with_capacity(dist[s as usize] as usize + 1);
        let mut u = s;
        let mut cands: Vec<u32> = Vec::new();
        while u != target {
            cands.clear();
            let want = dist[u as usize] - 1;
            cands.extend(self.out[u as usize].iter().copied().filter(|&l| {
                let l = &self.links[l as usize];
                l.up && dist[l.to as usize] == want
            }));
            let pick = cands[(splitmix(h ^ u as u64) % cands.len() as u64) as usize];
            path.push(pick);
            u = self.links[pick as usize].to;
        }
        path.extend(last);
        Some(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fat_tree(k: u32) -> Topology {
        Topology::build(
            &TopologySpec::FatTree {
                k,
                host_bytes_per_s: 1.0,
                edge_agg_bytes_per_s: 1.0,
                agg_core_bytes_per_s: 1.0,
                host_delay_s: 0.0,
                edge_agg_delay_s: 0.0,
                agg_core_delay_s: 0.0,
            },
            7,
        )
        .unwrap()
    }

    #[test]
    fn fat_tree_sizes_and_path_lengths() {
        let mut t = fat_tree(4);
        assert_eq!(t.hosts.len(), 16);
        // 16 host cables, 4 pods x 4 edge-agg, 4 pods x 4 agg-core; two links each
        assert_eq!(t.links.len(), 2 * (16 + 16 + 16));
        assert_eq!(t.route(0, 1, 1).unwrap().len(), 2); // same edge switch
        assert_eq!(t.route(0, 2, 1).unwrap().len(), 4); // same pod
        assert_eq!(t.route(0, 15, 1).unwrap().len(), 6); // across the core
        assert_eq!(t.route(3, 3, 1).unwrap().len(), 0);
    }

    #[test]
    fn paths_are_connected_and_ecmp_spreads_over_the_cores() {
        let mut t = fat_tree(4);
        let mut cores = std::collections::HashSet::new();
        for key in 0..200 {
            let p = t.route(0, 15, key).unwrap();
            assert_eq!(t.links[p[0] as usize].from, t.hosts[0]);
            assert_eq!(t.links[*p.last().unwrap() as usize].to, t.hosts[15]);
            for w in p.windows(2) {
                assert_eq!(t.links[w[0] as usize].to, t.links[w[1] as usize].from);
            }
            cores.insert(t.links[p[2] as usize].to);
            assert_eq!(p, t.route(0, 15, key).unwrap(), "a flow keeps its path");
        }
        assert_eq!(cores.len(), 4, "all (k/2)^2 cores are used");
    }

    #[test]
    fn a_failed_link_is_avoided_and_a_cut_host_is_unreachable() {
        let mut t = fat_tree(4);
        let up = t.cable("edge0.0", "agg0.0").unwrap();
        for &l in &up {
            t.set_up(l, false);
        }
        for key in 0..50 {
            let p = t.route(0, 15, key).unwrap();
            assert!(p.iter().all(|l| !up.contains(l)));
        }
        for &l in &t.cable("h15", "edge3.1").unwrap() {
            t.set_up(l, false);
        }
        assert!(t.route(0, 15, 1).is_none());
    }

    #[test]
    fn leaf_spine_tiers() {
        let mut t = Topology::build(
            &TopologySpec::LeafSpine {
                leaves: 3,
                hosts_per_leaf: 2,
                spines: 2,
                host_bytes_per_s: 10.0,
                uplink_bytes_per_s: 5.0,
                host_delay_s: 0.0,
                uplink_delay_s: 0.0,
            },
            0,
        )
        .unwrap();
        assert_eq!(
            t.tiers,
            ["host→leaf", "leaf→host", "leaf→spine", "spine→leaf"]
        );
        let p = t.route(0, 5, 3).unwrap();
        let tiers: Vec<&str> = p
            .iter()
            .map(|&l| t.tiers[t.links[l as usize].tier as usize].as_str())
            .collect();
        assert_eq!(
            tiers,
            ["host→leaf", "leaf→spine", "spine→leaf", "leaf→host"]
        );
    }
}
