//! Per-flow TCP state for **DCTCP in the switch** (in the spirit of AC/DC TCP) and
//! **congestion-control virtualization** (VCC, seed 002).
//!
//! For a managed direction (data sent by host S to host R) the switch:
//! - sets ECT on S's data so that a RED port marks it instead of dropping it;
//! - counts, per window of data, the bytes the switch marked CE (the receiving side of DCTCP)
//!   and keeps DCTCP's α (g = 1/16 by default);
//! - keeps a congestion window (slow start / additive increase on new ACKs, `cwnd·(1 − α/2)` once
//!   per window with marks, halving on three duplicate ACKs) and enforces it by rewriting the
//!   receive window in R's ACKs towards S (scaled by R's window-scale option from the SYNs); the
//!   rewrite only ever lowers the advertised window;
//! - hides ECN from S: the CE mark is never set on the managed data (the count is the signal) and
//!   ECE is cleared from packets towards S, so S's own stack does not react a second time.
//!
//! Mode `Dctcp` manages every flow of a host; mode `Vcc` manages only flows whose SYN did not
//! ask for ECN (a legacy stack, tcp_ecn=0): the switch adds ECE|CWR to that SYN (and ECE to a
//! legacy SYN-ACK) to negotiate ECN on the host's behalf; flows of ECN-capable hosts are left
//! alone. Flows first seen mid-stream are never managed (their window scale is unknown). State is
//! bounded (`max_flows`, least recently seen evicted) and expires after `idle_timeout_ns`.

use std::collections::HashMap;

use crate::window::DctcpWindow;
use crate::wire::{flags, Ecn, Ipv4Packet, TcpPacket, TcpRepr, PROTO_TCP};

/// How the switch treats TCP flows sent by a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Untouched.
    #[default]
    Off,
    /// DCTCP in the switch for every flow the host sends.
    Dctcp,
    /// VCC: DCTCP in the switch for flows whose SYN did not negotiate ECN.
    Vcc,
}

/// Flow-table parameters; units in the names.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowConfig {
    /// DCTCP's EWMA gain for α.
    pub g: f64,
    /// Initial α (Linux DCTCP starts at 1).
    pub alpha_init: f64,
    /// Initial window in segments.
    pub init_cwnd_segments: u32,
    /// The window never goes below this many segments.
    pub min_cwnd_segments: u32,
    /// At most this many connections are tracked.
    pub max_flows: usize,
    /// A connection unseen for this long is forgotten.
    pub idle_timeout_ns: u64,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            g: 1.0 / 16.0,
            alpha_init: 1.0,
            init_cwnd_segments: 10,
            min_cwnd_segments: 2,
            max_flows: 4096,
            idle_timeout_ns: 60_000_000_000,
        }
    }
}

/// An endpoint: IPv4 address and port.
pub type Endpoint = ([u8; 4], u16);

/// A connection key independent of direction (smaller endpoint first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnKey(Endpoint, Endpoint);

impl ConnKey {
    fn of(a: Endpoint, b: Endpoint) -> (ConnKey, usize) {
        if a <= b {
            (ConnKey(a, b), 0)
        } else {
            (ConnKey(b, a), 1)
        }
    }
}

/// DCTCP state of one direction (data sent by one endpoint).
#[derive(Debug, Clone, Default)]
pub struct Half {
    /// The switch manages this direction.
    pub managed: bool,
    syn_seen: bool,
    syn_ecn: bool,
    /// Window scale this endpoint announced in its SYN (applies to windows it advertises).
    wscale: Option<u8>,
    mss: u32,
    snd_una: u32,
    snd_nxt: u32,
    window_end: u32,
    /// Congestion window and α (the arithmetic shared with the simulator).
    pub win: DctcpWindow,
    dupacks: u32,
    recover: u32,
    max_adv_bytes: u64,
}

#[derive(Debug, Clone)]
struct Conn {
    half: [Half; 2],
    last_seen_ns: u64,
}

/// What the switch must do with a packet after [`FlowTable::on_ingress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ingress {
    /// Data of a managed direction: report the queue's decision with [`FlowTable::on_queued`]
    /// and never set CE on it.
    pub managed_data: Option<DataTag>,
    /// The packet was rewritten (flags, ECN or window); checksums were fixed.
    pub rewritten: bool,
    /// A control packet (no payload: SYN, SYN-ACK, pure ACK, FIN) of a connection the switch
    /// manages in either direction: the queue treats it as ECN-capable (a mark lets it pass
    /// unchanged; only a full queue drops it), as generalized ECN (ECN++) does for control
    /// packets, so a marking queue kept near its threshold by the switch's own DCTCP does not
    /// drop the handshakes and ACKs of the connections it controls.
    pub protected: bool,
}

/// Identifies a managed data packet between ingress and the queue decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataTag {
    key: ConnKey,
    dir: usize,
    payload_len: u32,
}

/// Counters for telemetry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    pub flows: u64,
    pub managed_flows_started: u64,
    pub window_rewrites: u64,
    pub evictions: u64,
    pub expired: u64,
    pub ce_bytes: u64,
}

fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn seq_gt(a: u32, b: u32) -> bool {
    seq_lt(b, a)
}

/// The per-connection state of the switch.
pub struct FlowTable {
    cfg: FlowConfig,
    conns: HashMap<ConnKey, Conn>,
    stats: FlowStats,
}

impl FlowTable {
    pub fn new(cfg: FlowConfig) -> Self {
        FlowTable {
            cfg,
            conns: HashMap::new(),
            stats: FlowStats::default(),
        }
    }

    pub fn stats(&self) -> FlowStats {
        FlowStats {
            flows: self.conns.len() as u64,
            ..self.stats
        }
    }

    /// The state of the direction sent by `src` to `dst`, if tracked.
    pub fn half(&self, src: Endpoint, dst: Endpoint) -> Option<&Half> {
        let (key, dir) = ConnKey::of(src, dst);
        self.conns.get(&key).map(|c| &c.half[dir])
    }

    /// Forget connections unseen for longer than the idle timeout.
    pub fn expire(&mut self, now_ns: u64) {
        let timeout = self.cfg.idle_timeout_ns;
        let before = self.conns.len();
        self.conns
            .retain(|_, c| now_ns.saturating_sub(c.last_seen_ns) <= timeout);
        self.stats.expired += (before - self.conns.len()) as u64;
    }

    fn make_room(&mut self, now_ns: u64) {
        if self.conns.len() < self.cfg.max_flows {
            return;
        }
        self.expire(now_ns);
        while self.conns.len() >= self.cfg.max_flows {
            let oldest = self
                .conns
                .iter()
                .min_by_key(|(_, c)| c.last_seen_ns)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => {
                    self.conns.remove(&k);
                    self.stats.evictions += 1;
                }
                None => break,
            }
        }
    }

    /// Process an IPv4 packet entering the switch, before it is queued. `src_mode` is the mode
    /// of the sending host, `dst_mode` of the receiving host. May rewrite the packet (flags,
    /// ECN, window), always keeping checksums valid.
    pub fn on_ingress(
        &mut self,
        ip: &mut [u8],
        src_mode: Mode,
        dst_mode: Mode,
        now_ns: u64,
    ) -> Ingress {
        let none = Ingress {
            managed_data: None,
            rewritten: false,
            protected: false,
        };
        let Ok(r) = TcpRepr::parse(ip) else {
            return none;
        };
        let (key, dir) = ConnKey::of((r.src, r.src_port), (r.dst, r.dst_port));
        let syn = r.flags & flags::SYN != 0;
        let ack = r.flags & flags::ACK != 0;
        if !self.conns.contains_key(&key) {
            // only a connection opening is tracked, and only if one side wants management
            let opening = syn && !ack;
            if !opening || (src_mode == Mode::Off && dst_mode == Mode::Off) {
                return none;
            }
            self.make_room(now_ns);
            self.conns.insert(
                key,
                Conn {
                    half: [Half::default(), Half::default()],
                    last_seen_ns: now_ns,
                },
            );
        }
        let cfg = self.cfg.clone();
        let conn = self.conns.get_mut(&key).unwrap();
        conn.last_seen_ns = now_ns;
        let mut rewritten = false;
        let mut new_flags = r.flags;

        if r.flags & flags::RST != 0 {
            self.conns.remove(&key);
            return none;
        }

        if syn {
            let (me, peer) = split(&mut conn.half, dir);
            if !me.syn_seen {
                me.syn_seen = true;
                me.wscale = r.wscale;
                me.mss = u32::from(r.mss.unwrap_or(536)).max(64);
                me.snd_una = r.seq.wrapping_add(1);
                me.snd_nxt = me.snd_una;
                me.window_end = me.snd_una;
                me.win = DctcpWindow::new(
                    u64::from(cfg.init_cwnd_segments) * u64::from(me.mss),
                    cfg.alpha_init,
                );
                if !ack {
                    // SYN: ECN asked for with ECE|CWR
                    me.syn_ecn = r.flags & (flags::ECE | flags::CWR) == (flags::ECE | flags::CWR);
                    me.managed = match src_mode {
                        Mode::Off => false,
                        Mode::Dctcp => true,
                        Mode::Vcc => !me.syn_ecn,
                    };
                    if me.managed && src_mode == Mode::Vcc {
                        new_flags |= flags::ECE | flags::CWR;
                    }
                } else {
                    // SYN-ACK: ECN accepted with ECE (and no CWR)
                    me.syn_ecn = r.flags & flags::ECE != 0;
                    me.managed = match src_mode {
                        Mode::Off => false,
                        Mode::Dctcp => true,
                        Mode::Vcc => !me.syn_ecn,
                    };
                    if me.managed && src_mode == Mode::Vcc && peer.syn_ecn {
                        new_flags |= flags::ECE;
                    }
                }
                if me.managed {
                    self.stats.managed_flows_started += 1;
                }
            }
        }

        let (me, peer) = split(&mut conn.half, dir);
        let protected = r.payload_len == 0 && (me.managed || peer.managed);
        // hide congestion echoes from a managed peer (the switch reacts for it)
        if peer.managed && !syn {
            new_flags &= !flags::ECE;
        }
        if peer.managed && syn && ack {
            // SYN-ACK towards a managed opener: hide the ECN negotiation the switch did for it
            if dst_mode == Mode::Vcc {
                new_flags &= !flags::ECE;
            }
        }

        let mut new_window = r.window;
        if ack && peer.managed && peer.syn_seen && me.syn_seen {
            on_ack(peer, &r, &cfg);
            if !syn {
                // the receiver's scale applies only if both SYNs carried the option
                let ws = match (me.wscale, peer.wscale) {
                    (Some(w), Some(_)) => w,
                    _ => 0,
                };
                let adv = u64::from(r.window) << ws;
                peer.max_adv_bytes = peer.max_adv_bytes.max(adv);
                let unit = 1u64 << ws;
                let target = peer.win.cwnd.div_ceil(unit).clamp(1, 0xffff) as u16;
                if target < r.window {
                    new_window = target;
                    self.stats.window_rewrites += 1;
                }
            }
        }

        let mut managed_data = None;
        let mut new_ecn = r.ecn;
        if me.managed && r.payload_len > 0 {
            let end = r.seq.wrapping_add(r.payload_len);
            if seq_gt(end, me.snd_nxt) {
                me.snd_nxt = end;
            }
            if matches!(r.ecn, Ecn::NotEct | Ecn::Ce) {
                new_ecn = Ecn::Ect0;
            }
            managed_data = Some(DataTag {
                key,
                dir,
                payload_len: r.payload_len,
            });
        }

        if new_flags != r.flags || new_window != r.window || new_ecn != r.ecn {
            let mut ipp = Ipv4Packet::new_checked(&mut *ip).expect("parsed above");
            if new_ecn != r.ecn {
                ipp.set_ecn(new_ecn);
            }
            let mut tcp = TcpPacket::new_checked(ipp.payload_mut()).expect("parsed above");
            if new_flags != r.flags {
                tcp.set_flags(new_flags);
            }
            if new_window != r.window {
                tcp.set_window(new_window);
            }
            rewritten = true;
        }
        Ingress {
            managed_data,
            rewritten,
            protected,
        }
    }

    /// Report the queue's decision for managed data: `marked` = the port would have set CE.
    pub fn on_queued(&mut self, tag: DataTag, marked: bool) {
        if let Some(c) = self.conns.get_mut(&tag.key) {
            c.half[tag.dir]
                .win
                .count(u64::from(tag.payload_len), marked);
            if marked {
                self.stats.ce_bytes += u64::from(tag.payload_len);
            }
        }
    }
}

fn split(h: &mut [Half; 2], dir: usize) -> (&mut Half, &mut Half) {
    let (a, b) = h.split_at_mut(1);
    if dir == 0 {
        (&mut a[0], &mut b[0])
    } else {
        (&mut b[0], &mut a[0])
    }
}

/// DCTCP window update of the managed direction `h` on an ACK from its receiver.
fn on_ack(h: &mut Half, r: &TcpRepr, cfg: &FlowConfig) {
    let mss = u64::from(h.mss);
    let min_cwnd = u64::from(cfg.min_cwnd_segments) * mss;
    if seq_gt(r.ack, h.snd_una) {
        let acked = u64::from(r.ack.wrapping_sub(h.snd_una));
        h.snd_una = r.ack;
        h.dupacks = 0;
        h.win.on_new_ack(acked, mss);
        if h.max_adv_bytes > 0 {
            // an application- or receiver-limited flow must not bank an unbounded window
            h.win.cap(h.max_adv_bytes, min_cwnd);
        }
        if !seq_lt(r.ack, h.window_end) {
            h.win.end_window(cfg.g, min_cwnd);
            h.window_end = h.snd_nxt;
        }
    } else if r.ack == h.snd_una
        && r.payload_len == 0
        && r.flags & (flags::SYN | flags::FIN) == 0
        && seq_lt(h.snd_una, h.snd_nxt)
    {
        h.dupacks += 1;
        if h.dupacks == 3 && !seq_lt(h.snd_una, h.recover) {
            h.win.on_loss(min_cwnd);
            h.recover = h.snd_nxt;
        }
    }
}

/// Whether an IPv4 packet is TCP (cheap pre-check before [`FlowTable::on_ingress`]).
pub fn is_tcp(ip: &[u8]) -> bool {
    ip.len() >= 20 && ip[0] >> 4 == 4 && ip[9] == PROTO_TCP
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::build_tcp;

    const S: [u8; 4] = [10, 77, 1, 1];
    const R: [u8; 4] = [10, 77, 2, 1];
    const SYN_OPTS: [u8; 8] = [2, 4, 0x05, 0xb4, 1, 3, 3, 7];

    fn handshake(t: &mut FlowTable, mode: Mode, syn_flags: u8) -> (Vec<u8>, Vec<u8>) {
        let mut syn = build_tcp(
            S,
            R,
            (40000, 5201),
            1000,
            0,
            syn_flags,
            64240,
            &SYN_OPTS,
            0,
            Ecn::NotEct,
        );
        t.on_ingress(&mut syn, mode, Mode::Off, 0);
        let mut synack = build_tcp(
            R,
            S,
            (5201, 40000),
            5000,
            1001,
            flags::SYN | flags::ACK | flags::ECE,
            65160,
            &SYN_OPTS,
            0,
            Ecn::NotEct,
        );
        t.on_ingress(&mut synack, Mode::Off, mode, 0);
        (syn, synack)
    }

    #[test]
    fn vcc_negotiates_for_legacy_and_hides_it() {
        let mut t = FlowTable::new(FlowConfig::default());
        let (syn, synack) = handshake(&mut t, Mode::Vcc, flags::SYN);
        let s = TcpRepr::parse(&syn).unwrap();
        assert_eq!(s.flags & (flags::ECE | flags::CWR), flags::ECE | flags::CWR);
        let sa = TcpRepr::parse(&synack).unwrap();
        assert_eq!(
            sa.flags & flags::ECE,
            0,
            "legacy host must not see the negotiation"
        );
        assert!(t.half((S, 40000), (R, 5201)).unwrap().managed);
        // data gets ECT
        let mut d = build_tcp(
            S,
            R,
            (40000, 5201),
            1001,
            5001,
            flags::ACK,
            502,
            &[],
            1448,
            Ecn::NotEct,
        );
        let ing = t.on_ingress(&mut d, Mode::Vcc, Mode::Off, 1);
        assert!(ing.managed_data.is_some());
        assert_eq!(TcpRepr::parse(&d).unwrap().ecn, Ecn::Ect0);
    }

    #[test]
    fn control_packets_of_managed_connections_are_protected() {
        for (mode, syn_flags) in [
            (Mode::Vcc, flags::SYN),
            (Mode::Dctcp, flags::SYN | flags::ECE | flags::CWR),
        ] {
            let mut t = FlowTable::new(FlowConfig::default());
            let mut syn = build_tcp(
                S,
                R,
                (40000, 5201),
                1000,
                0,
                syn_flags,
                64240,
                &SYN_OPTS,
                0,
                Ecn::NotEct,
            );
            assert!(
                t.on_ingress(&mut syn, mode, Mode::Off, 0).protected,
                "{mode:?} SYN"
            );
            let mut synack = build_tcp(
                R,
                S,
                (5201, 40000),
                5000,
                1001,
                flags::SYN | flags::ACK | flags::ECE,
                65160,
                &SYN_OPTS,
                0,
                Ecn::NotEct,
            );
            assert!(
                t.on_ingress(&mut synack, Mode::Off, mode, 0).protected,
                "{mode:?} SYN-ACK"
            );
            let mut ack = build_tcp(
                R,
                S,
                (5201, 40000),
                5001,
                1001,
                flags::ACK,
                502,
                &[],
                0,
                Ecn::NotEct,
            );
            assert!(
                t.on_ingress(&mut ack, Mode::Off, mode, 1).protected,
                "{mode:?} pure ACK"
            );
            let mut d = build_tcp(
                S,
                R,
                (40000, 5201),
                1001,
                5001,
                flags::ACK,
                502,
                &[],
                1448,
                Ecn::NotEct,
            );
            let ing = t.on_ingress(&mut d, mode, Mode::Off, 2);
            assert!(
                !ing.protected && ing.managed_data.is_some(),
                "data is managed, not protected"
            );
        }
        // connections the switch does not manage are not protected
        let mut t = FlowTable::new(FlowConfig::default());
        let mut syn = build_tcp(
            S,
            R,
            (40000, 5201),
            1000,
            0,
            flags::SYN | flags::ECE | flags::CWR,
            64240,
            &SYN_OPTS,
            0,
            Ecn::NotEct,
        );
        assert!(!t.on_ingress(&mut syn, Mode::Vcc, Mode::Off, 0).protected);
        let mut syn = build_tcp(
            S,
            R,
            (40001, 5201),
            1000,
            0,
            flags::SYN,
            64240,
            &SYN_OPTS,
            0,
            Ecn::NotEct,
        );
        assert!(!t.on_ingress(&mut syn, Mode::Off, Mode::Off, 0).protected);
    }

    #[test]
    fn vcc_leaves_ecn_capable_hosts_alone() {
        let mut t = FlowTable::new(FlowConfig::default());
        let (syn, _) = handshake(&mut t, Mode::Vcc, flags::SYN | flags::ECE | flags::CWR);
        assert!(!t.half((S, 40000), (R, 5201)).unwrap().managed);
        let mut d = build_tcp(
            S,
            R,
            (40000, 5201),
            1001,
            5001,
            flags::ACK,
            502,
            &[],
            1448,
            Ecn::Ect0,
        );
        let before = d.clone();
        let ing = t.on_ingress(&mut d, Mode::Vcc, Mode::Off, 1);
        assert!(ing.managed_data.is_none() && !ing.rewritten);
        assert_eq!(d, before);
        let _ = syn;
    }

    #[test]
    fn marks_shrink_the_advertised_window() {
        let mut t = FlowTable::new(FlowConfig::default());
        handshake(&mut t, Mode::Dctcp, flags::SYN | flags::ECE | flags::CWR);
        let mut seq = 1001u32;
        let mut last_win = 0;
        for round in 0..20u32 {
            // one window of data, all marked from round 5 on
            let cwnd = t.half((S, 40000), (R, 5201)).unwrap().win.cwnd as u32;
            let n = (cwnd / 1448).max(1);
            for _ in 0..n {
                let mut d = build_tcp(
                    S,
                    R,
                    (40000, 5201),
                    seq,
                    5001,
                    flags::ACK,
                    502,
                    &[],
                    1448,
                    Ecn::Ect0,
                );
                let ing = t.on_ingress(&mut d, Mode::Dctcp, Mode::Off, 1);
                t.on_queued(ing.managed_data.unwrap(), round >= 5);
                seq = seq.wrapping_add(1448);
            }
            let mut a = build_tcp(
                R,
                S,
                (5201, 40000),
                5001,
                seq,
                flags::ACK | flags::ECE,
                3000,
                &[],
                0,
                Ecn::NotEct,
            );
            t.on_ingress(&mut a, Mode::Off, Mode::Dctcp, 2);
            let r = TcpRepr::parse(&a).unwrap();
            assert_eq!(
                r.flags & flags::ECE,
                0,
                "ECE hidden from the managed sender"
            );
            assert!(r.window <= 3000);
            last_win = r.window;
        }
        let h = t.half((S, 40000), (R, 5201)).unwrap();
        assert!(h.win.alpha > 0.5, "alpha {}", h.win.alpha);
        assert!(u64::from(last_win) << 7 <= h.win.cwnd + 128);
        assert!(last_win < 3000);
    }

    #[test]
    fn table_is_bounded_and_expires() {
        let mut t = FlowTable::new(FlowConfig {
            max_flows: 4,
            idle_timeout_ns: 100,
            ..FlowConfig::default()
        });
        for p in 0..10u16 {
            let mut syn = build_tcp(
                S,
                R,
                (1000 + p, 80),
                1,
                0,
                flags::SYN,
                100,
                &[],
                0,
                Ecn::NotEct,
            );
            t.on_ingress(&mut syn, Mode::Dctcp, Mode::Off, u64::from(p));
        }
        assert_eq!(t.stats().flows, 4);
        assert_eq!(t.stats().evictions, 6);
        t.expire(1000);
        assert_eq!(t.stats().flows, 0);
    }
}
