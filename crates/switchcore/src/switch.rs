//! The switch as one sans-IO endpoint (quinn-proto / smoltcp style): the routing table, the
//! ports' MACs, the flow table (DCTCP in the switch, VCC) and one [`EgressQueue`] per port, driven
//! by three calls that never read a clock or touch a socket:
//!
//! - [`Switch::handle_frame`]: a frame received on a port at `now_ns` is routed (MACs, TTL),
//!   passed through the flow logic and admitted to (or dropped by) its egress queue;
//! - [`Switch::poll_transmit`]: the next frame due on the wire at `now_ns`, with its port;
//! - [`Switch::poll_timeout`]: when something next becomes due (a departure, a delivery, the
//!   flow table's idle check), for the caller to sleep until; [`Switch::handle_timeout`] runs
//!   the timed housekeeping.
//!
//! Optional in-switch traffic sources ([`crate::cross`]) put virtual packets into a port's queue
//! at their scheduled instants; every call above first admits the arrivals due by its `now_ns`,
//! each at its own instant, so they meet the queue exactly as a host's frames arriving then.
//!
//! The userspace switch (`crates/switch`) drives it with AF_PACKET sockets and
//! `CLOCK_MONOTONIC`; `tests/netsim.rs` drives the same endpoint with virtual hosts and virtual
//! time, so what the tests check is the pipeline the binary runs.

use std::collections::HashMap;

use crate::cross::{CrossConfig, CrossSource, CrossStats};
use crate::flow::{is_tcp, DataTag, FlowConfig, FlowStats, FlowTable, Mode};
use crate::queue::{Admit, EgressQueue, PortConfig, PortStats};
use crate::wire::{self, Ecn, Ipv4Packet, ETHERTYPE_IPV4, ETH_HEADER_LEN};

/// How often idle connections are looked for in the flow table.
pub const EXPIRY_PERIOD_NS: u64 = 1_000_000_000;

/// How long [`Switch::poll_timeout`] lets in-switch work wait when no real frame depends on it:
/// a source's arrivals and the departures of a port holding only in-switch packets. They are
/// handled at their own instants whenever the switch next runs (before any real frame, so a real
/// frame always meets the exact queue), so deferring them changes nothing the hosts see; it only
/// batches them, sparing the loop a wake-up per virtual packet (measured: without it the switch
/// spent as much CPU on its own source as on forwarding iperf3's packets).
pub const VIRTUAL_SLACK_NS: u64 = 2_000_000;

/// One port of the switch.
#[derive(Debug, Clone, PartialEq)]
pub struct PortSetup {
    /// The port's own MAC address (source MAC of the frames it sends).
    pub mac: [u8; 6],
    /// Its egress queue: rate, delay, limit, discipline.
    pub queue: PortConfig,
}

/// A host reachable through the switch: one entry of the routing table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    /// Its IPv4 address.
    pub ip: [u8; 4],
    /// The port (index into [`SwitchConfig::ports`]) it hangs off.
    pub port: usize,
    /// Its interface's MAC address (destination MAC of the frames sent to it).
    pub mac: [u8; 6],
    /// What the switch does with the TCP connections this host opens.
    pub mode: Mode,
}

/// Everything the endpoint needs to know at start.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchConfig {
    pub ports: Vec<PortSetup>,
    /// The routing table; a later entry for the same address replaces an earlier one.
    pub hosts: Vec<Host>,
    pub flows: FlowConfig,
    /// In-switch traffic sources (virtual packets into a port's queue).
    pub cross: Vec<CrossConfig>,
}

/// What became of a frame given to [`Switch::handle_frame`]. A frame the switch does not keep is
/// handed back, so the caller can reuse its buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// Routed and queued on egress `port`; `marked`: the port's RED decided to mark it (written
    /// as CE into an unmanaged ECT packet, counted by the flow logic for managed data, ignored
    /// for a protected control packet).
    Queued { port: usize, marked: bool },
    /// Routed to egress `port`, whose queue dropped it (limit, or RED on a non-ECN-capable
    /// packet).
    Dropped { port: usize, frame: Vec<u8> },
    /// Not the switch's to forward: not IPv4, malformed, no route to its destination, or TTL
    /// expiring. Counted as `not_routed` on the ingress port.
    NotRouted { frame: Vec<u8> },
}

/// Counters of one port: its egress queue's and what arrived on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// The egress queue (offered, sent, delivered, drops, marks, backlog ...).
    pub queue: PortStats,
    /// Bytes received on the port (the frames' full length, even when not forwarded).
    pub rx_bytes: u64,
    pub rx_packets: u64,
    /// Received frames not forwarded (see [`Handled::NotRouted`]; also oversized frames).
    pub not_routed: u64,
}

/// How late the caller ran the switch's schedule: for every real frame handed out by
/// [`Switch::poll_transmit`], `now_ns` minus the instant it was due. Cumulative until
/// [`Switch::take_lag`] resets it. (In-switch packets are not counted: their handling is
/// deferred on purpose, see [`VIRTUAL_SLACK_NS`].)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lag {
    pub events: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
}

impl Lag {
    fn add(&mut self, late_ns: u64) {
        self.events += 1;
        self.sum_ns = self.sum_ns.saturating_add(late_ns);
        self.max_ns = self.max_ns.max(late_ns);
    }
}

/// What an egress queue holds: a real frame, or a virtual packet of in-switch source `i`.
enum Packet {
    Frame(Vec<u8>),
    Virtual(usize),
}

#[derive(Debug, Clone, Copy, Default)]
struct Rx {
    bytes: u64,
    packets: u64,
    not_routed: u64,
}

struct Route {
    port: usize,
    mac: [u8; 6],
    mode: Mode,
}

/// The switch's forwarding state and logic, without I/O and without a clock.
pub struct Switch {
    routes: HashMap<[u8; 4], Route>,
    port_macs: Vec<[u8; 6]>,
    queues: Vec<EgressQueue<Packet>>,
    rx: Vec<Rx>,
    flows: FlowTable,
    next_expiry_ns: u64,
    cross: Vec<CrossSource>,
    lag: Lag,
    /// Real frames per port in its queue or delay line (the rest are in-switch packets).
    real: Vec<usize>,
}

impl Switch {
    /// A switch with empty queues (buckets full) at `now_ns` (in-switch sources start then), or
    /// why the configuration is unusable (a host or a source on a port that does not exist).
    pub fn new(cfg: SwitchConfig, now_ns: u64) -> Result<Switch, String> {
        let n = cfg.ports.len();
        let mut routes = HashMap::new();
        for h in &cfg.hosts {
            if h.port >= n {
                return Err(format!(
                    "host {} is on port {}, but the switch has {n} ports",
                    std::net::Ipv4Addr::from(h.ip),
                    h.port
                ));
            }
            routes.insert(
                h.ip,
                Route {
                    port: h.port,
                    mac: h.mac,
                    mode: h.mode,
                },
            );
        }
        for c in &cfg.cross {
            c.check(n)?;
        }
        Ok(Switch {
            routes,
            port_macs: cfg.ports.iter().map(|p| p.mac).collect(),
            queues: cfg
                .ports
                .into_iter()
                .map(|p| EgressQueue::new(p.queue, now_ns))
                .collect(),
            rx: vec![Rx::default(); n],
            flows: FlowTable::new(cfg.flows),
            next_expiry_ns: now_ns + EXPIRY_PERIOD_NS,
            cross: cfg
                .cross
                .into_iter()
                .map(|c| CrossSource::new(c, now_ns))
                .collect(),
            lag: Lag::default(),
            real: vec![0; n],
        })
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.queues.len()
    }

    /// A frame (Ethernet header first) received on port `ingress` at `now_ns`.
    /// `csum_not_ready`: the sender left its transport checksum to offload (only a partial sum
    /// is in place); the switch fills it in before any rewrite, since the frame it forwards
    /// must carry a final checksum.
    ///
    /// A routed IPv4 frame gets the host's MAC as destination and the egress port's as source,
    /// its TTL decremented, TCP goes through the flow logic (ECT on managed data, window
    /// rewrite, VCC's negotiation), and the egress queue decides: accept, mark or drop. ECT
    /// packets are marked; a managed connection's control packet (no payload) counts as
    /// ECN-capable and passes a marking queue unchanged; managed data is never marked, its mark
    /// feeds the switch's DCTCP instead.
    ///
    /// # Panics
    /// If `ingress` is not a port of this switch.
    pub fn handle_frame(
        &mut self,
        ingress: usize,
        mut frame: Vec<u8>,
        csum_not_ready: bool,
        now_ns: u64,
    ) -> Handled {
        self.generate(now_ns);
        let rx = &mut self.rx[ingress];
        rx.bytes += frame.len() as u64;
        rx.packets += 1;
        let Some((out, managed, protected)) = self.forward(&mut frame, csum_not_ready, now_ns)
        else {
            self.rx[ingress].not_routed += 1;
            return Handled::NotRouted { frame };
        };
        let ect = Ipv4Packet::new_checked(&frame[ETH_HEADER_LEN..])
            .map(|p| p.ecn() != Ecn::NotEct)
            .unwrap_or(false);
        // a managed connection's control packet: marked = passed unchanged
        let ect_like = ect || protected;
        let len = frame.len() as u64;
        let q = &mut self.queues[out];
        match q.admit(len, ect_like, now_ns) {
            Admit::Drop => Handled::Dropped { port: out, frame },
            verdict => {
                let marked = verdict == Admit::Mark;
                if let Some(tag) = managed {
                    // the switch is the congestion signal's consumer: count, hide
                    self.flows.on_queued(tag, marked);
                } else if marked && ect {
                    if let Ok(mut ip) = Ipv4Packet::new_checked(&mut frame[ETH_HEADER_LEN..]) {
                        ip.set_ecn(Ecn::Ce);
                    }
                }
                q.push(Packet::Frame(frame), len, now_ns);
                self.real[out] += 1;
                Handled::Queued { port: out, marked }
            }
        }
    }

    /// A frame of `len` bytes arrived on port `ingress` that did not fit the caller's receive
    /// buffer (larger than an MTU frame: offloads are on). It is counted (received, not routed)
    /// and not forwarded.
    pub fn handle_oversized(&mut self, ingress: usize, len: usize) {
        let rx = &mut self.rx[ingress];
        rx.bytes += len as u64;
        rx.packets += 1;
        rx.not_routed += 1;
    }

    /// The next frame due on the wire at `now_ns` and its port (lower ports first); call until
    /// `None`.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<(usize, Vec<u8>)> {
        self.generate(now_ns);
        for (i, q) in self.queues.iter_mut().enumerate() {
            while let Some((p, due)) = q.poll_timed(now_ns) {
                match p {
                    Packet::Frame(f) => {
                        self.lag.add(now_ns.saturating_sub(due));
                        self.real[i] -= 1;
                        return Some((i, f));
                    }
                    Packet::Virtual(s) => {
                        // reached the virtual sink: counted like a frame on the wire
                        let len = self.cross[s].config().frame_bytes;
                        let st = self.cross[s].stats_mut();
                        st.delivered_packets += 1;
                        st.delivered_bytes += len;
                    }
                }
            }
        }
        None
    }

    /// Admit every in-switch arrival due by `now_ns`, each at its own scheduled instant.
    fn generate(&mut self, now_ns: u64) {
        for (s, src) in self.cross.iter_mut().enumerate() {
            let (port, len, ect) = {
                let c = src.config();
                (c.port, c.frame_bytes, c.ect)
            };
            let q = &mut self.queues[port];
            while let Some(t) = src.take_due(now_ns) {
                match q.admit(len, ect, t) {
                    Admit::Drop => src.stats_mut().drops += 1,
                    verdict => {
                        if verdict == Admit::Mark {
                            src.stats_mut().marks += 1;
                        }
                        q.push(Packet::Virtual(s), len, t);
                    }
                }
            }
        }
    }

    /// Stop every in-switch source at `now_ns` (arrivals due by then are admitted first; what is
    /// queued still leaves).
    pub fn stop_cross(&mut self, now_ns: u64) {
        self.generate(now_ns);
        for s in &mut self.cross {
            s.stop();
        }
    }

    /// Stop every in-switch source without admitting anything more (a switch whose sources
    /// must wait for [`start_cross`](Self::start_cross), e.g. until a link self-test is done).
    pub fn pause_cross(&mut self) {
        for s in &mut self.cross {
            s.stop();
        }
    }

    /// (Re)start every stopped in-switch source at `now_ns`: its schedule begins there.
    pub fn start_cross(&mut self, now_ns: u64) {
        self.generate(now_ns);
        for s in self.cross.iter_mut().filter(|s| !s.stats().running) {
            s.start(now_ns);
        }
    }

    /// Counters of the in-switch sources, in configuration order.
    pub fn cross_stats(&self) -> Vec<CrossStats> {
        self.cross.iter().map(|s| s.stats()).collect()
    }

    /// How late the schedule was run since the last call (and reset it).
    pub fn take_lag(&mut self) -> Lag {
        std::mem::take(&mut self.lag)
    }

    /// When [`poll_transmit`](Self::poll_transmit) or [`handle_timeout`](Self::handle_timeout)
    /// next has something to do (nanoseconds on the caller's clock). Once that instant is
    /// reached the caller calls both; until `handle_timeout` ran, the instant stays due.
    /// In-switch work no real frame waits for is due [`VIRTUAL_SLACK_NS`] late.
    pub fn poll_timeout(&self) -> Option<u64> {
        let (mut exact, mut lazy) = (None::<u64>, None::<u64>);
        for (q, &real) in self.queues.iter().zip(&self.real) {
            let slot = if real > 0 { &mut exact } else { &mut lazy };
            if let Some(t) = q.next_wakeup() {
                *slot = Some(slot.map_or(t, |s| s.min(t)));
            }
        }
        let lazy = lazy
            .into_iter()
            .chain(self.cross.iter().filter_map(|s| s.next_arrival()))
            .min()
            .map(|t| t.saturating_add(VIRTUAL_SLACK_NS));
        exact
            .into_iter()
            .chain(lazy)
            .chain(std::iter::once(self.next_expiry_ns))
            .min()
    }

    /// Timed housekeeping at `now_ns`: admit the in-switch arrivals due; forget connections idle for longer than the flow
    /// table's timeout (looked for every [`EXPIRY_PERIOD_NS`]).
    pub fn handle_timeout(&mut self, now_ns: u64) {
        self.generate(now_ns);
        if now_ns >= self.next_expiry_ns {
            self.flows.expire(now_ns);
            self.next_expiry_ns = now_ns + EXPIRY_PERIOD_NS;
        }
    }

    /// Counters of port `port`.
    pub fn port_counters(&self, port: usize) -> PortCounters {
        let rx = self.rx[port];
        PortCounters {
            queue: self.queues[port].stats(),
            rx_bytes: rx.bytes,
            rx_packets: rx.packets,
            not_routed: rx.not_routed,
        }
    }

    /// Counters of the flow table.
    pub fn flow_stats(&self) -> FlowStats {
        self.flows.stats()
    }

    /// The flow table (read-only: per-connection DCTCP state).
    pub fn flows(&self) -> &FlowTable {
        &self.flows
    }

    /// Route one frame: the egress port, for managed TCP data its flow tag, and whether it is a
    /// managed connection's control packet. Rewrites MACs and TTL (and whatever the flow logic
    /// changes); `None` = not ours to forward.
    fn forward(
        &mut self,
        frame: &mut [u8],
        csum_not_ready: bool,
        now_ns: u64,
    ) -> Option<(usize, Option<DataTag>, bool)> {
        if wire::ethertype(frame)? != ETHERTYPE_IPV4 {
            return None;
        }
        let (eth, ip) = frame.split_at_mut(ETH_HEADER_LEN);
        let (src, dst, ttl) = {
            let p = Ipv4Packet::new_checked(&*ip).ok()?;
            (p.src(), p.dst(), p.ttl())
        };
        let route = self.routes.get(&dst)?;
        if ttl <= 1 {
            return None;
        }
        if csum_not_ready {
            wire::fill_transport_checksum(ip);
        }
        Ipv4Packet::new_checked(&mut *ip).ok()?.decrement_ttl();
        eth[0..6].copy_from_slice(&route.mac);
        eth[6..12].copy_from_slice(&self.port_macs[route.port]);
        let src_mode = self.routes.get(&src).map(|r| r.mode).unwrap_or(Mode::Off);
        let mut managed = None;
        let mut protected = false;
        if is_tcp(ip) {
            let ing = self.flows.on_ingress(ip, src_mode, route.mode, now_ns);
            managed = ing.managed_data;
            protected = ing.protected;
        }
        Some((route.port, managed, protected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cross::Pattern;
    use crate::queue::{Discipline, RedConfig};
    use crate::wire::{build_tcp, flags, TcpPacket, TcpRepr};

    const A: [u8; 4] = [10, 77, 1, 1];
    const B: [u8; 4] = [10, 77, 2, 1];
    const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const PORT_MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 2, 0]];

    fn switch(queue: PortConfig) -> Switch {
        Switch::new(
            SwitchConfig {
                ports: PORT_MACS
                    .iter()
                    .map(|&mac| PortSetup {
                        mac,
                        queue: queue.clone(),
                    })
                    .collect(),
                hosts: vec![
                    Host {
                        ip: A,
                        port: 0,
                        mac: MAC_A,
                        mode: Mode::Off,
                    },
                    Host {
                        ip: B,
                        port: 1,
                        mac: MAC_B,
                        mode: Mode::Off,
                    },
                ],
                flows: FlowConfig::default(),
                cross: vec![],
            },
            0,
        )
        .unwrap()
    }

    fn frame(ip: Vec<u8>) -> Vec<u8> {
        let mut f = vec![0xff; 12];
        f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f.extend_from_slice(&ip);
        f
    }

    fn data(ecn: Ecn) -> Vec<u8> {
        frame(build_tcp(
            A,
            B,
            (40000, 5201),
            1,
            1,
            flags::ACK,
            100,
            &[],
            1000,
            ecn,
        ))
    }

    #[test]
    fn routes_rewrites_macs_and_ttl_and_delivers_after_the_delay() {
        let mut sw = switch(PortConfig {
            delay_ns: 1000,
            ..PortConfig::default()
        });
        let f = data(Ecn::NotEct);
        let len = f.len();
        assert_eq!(
            sw.handle_frame(0, f, false, 0),
            Handled::Queued {
                port: 1,
                marked: false
            }
        );
        assert_eq!(sw.poll_timeout(), Some(1000));
        assert!(sw.poll_transmit(999).is_none());
        let (port, out) = sw.poll_transmit(1000).unwrap();
        assert_eq!(port, 1);
        assert_eq!(&out[0..6], &MAC_B);
        assert_eq!(&out[6..12], &PORT_MACS[1]);
        let ip = Ipv4Packet::new_checked(&out[ETH_HEADER_LEN..]).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
        let c = sw.port_counters(0);
        assert_eq!((c.rx_packets, c.rx_bytes), (1, len as u64));
        assert_eq!(sw.port_counters(1).queue.delivered_bytes, len as u64);
        // nothing left but the flow table's idle check
        assert_eq!(sw.poll_timeout(), Some(EXPIRY_PERIOD_NS));
    }

    #[test]
    fn not_routed_frames_come_back_and_are_counted() {
        let mut sw = switch(PortConfig::default());
        let mut arp = data(Ecn::NotEct);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(matches!(
            sw.handle_frame(0, arp, false, 0),
            Handled::NotRouted { .. }
        ));
        let unknown = frame(build_tcp(
            A,
            [10, 77, 9, 1],
            (1, 2),
            1,
            1,
            flags::ACK,
            100,
            &[],
            10,
            Ecn::NotEct,
        ));
        assert!(matches!(
            sw.handle_frame(0, unknown, false, 0),
            Handled::NotRouted { .. }
        ));
        let mut ttl1 = data(Ecn::NotEct);
        ttl1[ETH_HEADER_LEN + 8] = 1;
        let Handled::NotRouted { frame } = sw.handle_frame(0, ttl1.clone(), false, 0) else {
            panic!("TTL 1 must not be forwarded");
        };
        assert_eq!(frame, ttl1, "handed back untouched");
        sw.handle_oversized(0, 65_000);
        let c = sw.port_counters(0);
        assert_eq!((c.rx_packets, c.not_routed), (4, 4));
        assert!(sw.poll_transmit(u64::MAX / 2).is_none());
    }

    #[test]
    fn fills_an_offloaded_checksum_before_forwarding() {
        let mut sw = switch(PortConfig::default());
        let mut f = data(Ecn::NotEct);
        f[ETH_HEADER_LEN + 36] ^= 0x55; // a partial sum, as a veth leaves it
        sw.handle_frame(0, f, true, 0);
        let (_, out) = sw.poll_transmit(0).unwrap();
        let ip = Ipv4Packet::new_checked(&out[ETH_HEADER_LEN..]).unwrap();
        assert!(TcpPacket::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(A, B));
    }

    #[test]
    fn a_marking_queue_sets_ce_on_unmanaged_ect_and_drops_not_ect() {
        let mut sw = switch(PortConfig {
            rate_bytes_per_s: 1000,
            burst_bytes: 1514,
            discipline: Discipline::Red(RedConfig {
                min_bytes: 3000,
                max_bytes: 3000,
                max_p: 1.0,
                ewma_weight: None,
                ecn: true,
                gentle: false,
                seed: 1,
            }),
            ..PortConfig::default()
        });
        // the first leaves at once (full bucket), the next three build 3162 B of backlog
        for _ in 0..4 {
            sw.handle_frame(0, data(Ecn::Ect0), false, 0);
        }
        assert_eq!(
            sw.handle_frame(0, data(Ecn::Ect0), false, 0),
            Handled::Queued {
                port: 1,
                marked: true
            }
        );
        assert!(matches!(
            sw.handle_frame(0, data(Ecn::NotEct), false, 0),
            Handled::Dropped { port: 1, .. }
        ));
        let mut out = vec![];
        let mut now = 0;
        while out.len() < 5 {
            now = sw.poll_timeout().unwrap();
            sw.handle_timeout(now);
            while let Some((_, f)) = sw.poll_transmit(now) {
                out.push(TcpRepr::parse(&f[ETH_HEADER_LEN..]).unwrap().ecn);
            }
        }
        assert_eq!(out, [Ecn::Ect0, Ecn::Ect0, Ecn::Ect0, Ecn::Ect0, Ecn::Ce]);
        assert!(now > 0);
        let q = sw.port_counters(1).queue;
        assert_eq!((q.marks, q.drops), (1, 1));
    }

    fn with_source(queue: PortConfig, src: CrossConfig) -> Switch {
        let mut sw = switch(queue);
        sw.cross = vec![CrossSource::new(src, 0)];
        sw
    }

    fn udp(rate_bytes_per_s: u64, ect: bool) -> CrossConfig {
        CrossConfig {
            port: 1,
            rate_bytes_per_s,
            frame_bytes: 1514,
            pattern: Pattern::Constant,
            ect,
            seed: 1,
        }
    }

    /// Drive `sw` to `end_ns` polling at every instant it asks for, and at `end_ns`; the real
    /// frames it sent.
    fn drain(sw: &mut Switch, end_ns: u64) -> Vec<(u64, usize)> {
        let mut out = vec![];
        let mut poll = |sw: &mut Switch, t: u64| {
            sw.handle_timeout(t);
            while let Some((port, f)) = sw.poll_transmit(t) {
                out.push((t, port));
                drop(f);
            }
        };
        while let Some(t) = sw.poll_timeout().filter(|&t| t < end_ns) {
            poll(sw, t);
        }
        poll(sw, end_ns);
        out
    }

    #[test]
    fn in_switch_packets_take_service_time_are_counted_and_never_transmitted() {
        // port 1: 151 400 B/s (10 ms per 1514-byte frame), one frame of burst
        let port = PortConfig {
            rate_bytes_per_s: 151_400,
            burst_bytes: 1514,
            ..PortConfig::default()
        };
        let frame_at = |sw: &mut Switch| {
            // a real frame arrives at 1 ms; when does it leave?
            drain(sw, 1_000_000);
            sw.handle_frame(0, data(Ecn::NotEct), false, 1_000_000);
            let sent = drain(sw, 100_000_000);
            assert_eq!(sent.len(), 1, "only the real frame reaches the wire");
            sent[0].0
        };
        let alone = frame_at(&mut switch(port.clone()));
        // 50 frames/s of in-switch UDP: its first packet (at 0) empties the bucket
        let mut sw = with_source(port, udp(75_700, false));
        let behind = frame_at(&mut sw);
        assert_eq!(alone, 1_000_000);
        assert_eq!(
            behind, 6_961_691,
            "waits for the tokens the virtual packet used"
        );
        let c = sw.port_counters(1).queue;
        let x = sw.cross_stats()[0];
        assert_eq!(x.offered_packets, 6); // at 0, 20, ..., 100 ms
        assert_eq!(x.delivered_packets, 6);
        assert_eq!(
            c.delivered_packets, 7,
            "the port counts them like real frames"
        );
        assert_eq!(c.sent_bytes, 6 * 1514 + 1054);
        assert_eq!(
            sw.port_counters(1).rx_packets,
            0,
            "no host received anything"
        );
    }

    #[test]
    fn in_switch_packets_meet_the_same_red_decisions_as_real_ones() {
        let red = PortConfig {
            rate_bytes_per_s: 1000, // nothing drains during the test
            burst_bytes: 1514,
            limit_bytes: Some(1_000_000),
            discipline: Discipline::Red(RedConfig {
                min_bytes: 4000,
                max_bytes: 4000,
                max_p: 1.0,
                ewma_weight: None,
                ecn: true,
                gentle: false,
                seed: 1,
            }),
            ..PortConfig::default()
        };
        for ect in [false, true] {
            // 1514 B every ms: the first leaves on the full bucket, three build 4542 B of backlog
            let mut sw = with_source(red.clone(), udp(1_514_000, ect));
            sw.handle_timeout(9_999_999);
            let x = sw.cross_stats()[0];
            assert_eq!(x.offered_packets, 10);
            if ect {
                assert_eq!((x.marks, x.drops), (6, 0));
            } else {
                assert_eq!((x.marks, x.drops), (0, 6));
            }
            let q = sw.port_counters(1).queue;
            assert_eq!(
                (q.marks, q.drops),
                (x.marks, x.drops),
                "the port counts them"
            );
            // a real frame now meets the same queue
            let real = sw.handle_frame(0, data(Ecn::NotEct), false, 10_000_000);
            assert!(matches!(real, Handled::Dropped { port: 1, .. }));
            let real = sw.handle_frame(0, data(Ecn::Ect0), false, 10_000_000);
            assert_eq!(
                real,
                Handled::Queued {
                    port: 1,
                    marked: true
                }
            );
        }
    }

    #[test]
    fn polling_late_changes_nothing_but_the_lag() {
        let port = PortConfig {
            rate_bytes_per_s: 1_000_000,
            delay_ns: 2_000_000,
            limit_bytes: Some(20_000),
            ..PortConfig::default()
        };
        let src = CrossConfig {
            pattern: Pattern::Poisson,
            seed: 3,
            ..udp(1_200_000, false) // 120 %: the queue overflows now and then
        };
        let mut exact = with_source(port.clone(), src.clone());
        drain(&mut exact, 1_000_000_000);
        assert_eq!(exact.take_lag().max_ns, 0);
        let mut late = with_source(port, src);
        let mut t = 0;
        while t < 1_000_000_000 {
            t += 7_000_000; // a loop that wakes every 7 ms
            late.handle_timeout(t);
            while late.poll_transmit(t).is_some() {}
        }
        drain(&mut exact, t);
        let (a, b) = (exact.port_counters(1).queue, late.port_counters(1).queue);
        assert_eq!(
            (a.offered_packets, a.drops, a.sent_bytes),
            (b.offered_packets, b.drops, b.sent_bytes)
        );
        assert!(a.drops > 0);
        assert_eq!(exact.cross_stats(), late.cross_stats());
        assert_eq!(late.take_lag(), Lag::default(), "no real frame was late");
    }

    #[test]
    fn in_switch_work_waits_unless_a_real_frame_needs_it_and_only_real_frames_count_as_lag() {
        let port = PortConfig {
            rate_bytes_per_s: 151_400, // 10 ms per 1514-byte frame
            burst_bytes: 1514,
            ..PortConfig::default()
        };
        let mut sw = with_source(port, udp(75_700, false)); // one every 20 ms
        assert_eq!(
            sw.poll_timeout(),
            Some(VIRTUAL_SLACK_NS),
            "the first arrival, deferred"
        );
        sw.handle_timeout(VIRTUAL_SLACK_NS);
        assert!(sw.poll_transmit(VIRTUAL_SLACK_NS).is_none());
        assert_eq!(
            sw.cross_stats()[0].delivered_packets,
            1,
            "left at 0, handled at 2 ms"
        );
        assert_eq!(sw.poll_timeout(), Some(20_000_000 + VIRTUAL_SLACK_NS));
        // a real frame right after the virtual packet of 20 ms: exact again, and it waits for
        // the tokens that packet took
        sw.handle_frame(0, data(Ecn::NotEct), false, 21_000_000);
        assert_eq!(
            sw.cross_stats()[0].offered_packets,
            2,
            "admitted first, at 20 ms"
        );
        assert_eq!(
            sw.poll_timeout(),
            Some(20_000_000),
            "the virtual packet, now in the way"
        );
        assert!(sw.poll_transmit(21_000_000).is_none());
        let due = sw.poll_timeout().unwrap();
        assert_eq!(due, 26_961_691, "the real frame's own departure");
        sw.handle_timeout(due + 5_000);
        assert!(sw.poll_transmit(due + 5_000).is_some());
        let lag = sw.take_lag();
        assert_eq!((lag.events, lag.max_ns), (1, 5_000));
        assert_eq!(sw.take_lag(), Lag::default(), "taking the lag resets it");
    }

    #[test]
    fn a_stopped_source_sends_nothing_more() {
        let mut sw = with_source(PortConfig::default(), udp(1_514_000, false));
        sw.handle_timeout(4_500_000);
        sw.stop_cross(9_999_999); // the arrivals at 5..9 ms are admitted first
        sw.handle_timeout(1_000_000_000);
        let x = sw.cross_stats()[0];
        assert_eq!((x.offered_packets, x.running), (10, false));
        // paused from the start, then started: its schedule begins at the start
        let mut sw = with_source(PortConfig::default(), udp(1_514_000, false));
        sw.pause_cross();
        sw.handle_timeout(50_000_000);
        assert_eq!(sw.cross_stats()[0].offered_packets, 0);
        sw.start_cross(50_000_000);
        assert_eq!(sw.poll_timeout(), Some(50_000_000 + VIRTUAL_SLACK_NS));
        sw.handle_timeout(52_000_000);
        assert_eq!(sw.cross_stats()[0].offered_packets, 3);
        assert!(Switch::new(
            SwitchConfig {
                ports: vec![],
                hosts: vec![],
                flows: FlowConfig::default(),
                cross: vec![udp(1, false)],
            },
            0
        )
        .is_err());
    }

    #[test]
    fn a_host_on_a_missing_port_is_refused() {
        let err = Switch::new(
            SwitchConfig {
                ports: vec![],
                hosts: vec![Host {
                    ip: A,
                    port: 0,
                    mac: MAC_A,
                    mode: Mode::Off,
                }],
                flows: FlowConfig::default(),
                cross: vec![],
            },
            0,
        )
        .err()
        .unwrap();
        assert!(err.contains("10.77.1.1"), "{err}");
    }
}
