//! Deterministic scenarios in virtual time (smoltcp / quinn-proto style) through the same
//! [`Switch`] endpoint the userspace switch runs: virtual hosts hand Ethernet frames to
//! `handle_frame`, take what `poll_transmit` delivers, and the clock jumps to `poll_timeout`.
//!
//! 1. One TCP-like sender whose own window never limits it (a cubic that sees no loss), the
//!    receiver's port with step marking at K, the receiver's ACKs back through the switch. With
//!    DCTCP or VCC in the switch the advertised window holds the queue near K; without it the
//!    sender fills the buffer up to the receiver's window.
//! 2. An ECN-capable bulk sender keeps the receiver's marking queue above K; a switch-managed
//!    host and an unmanaged legacy host open connections through it. The managed host's
//!    handshake passes (its control packets are protected), the legacy host's SYNs are dropped.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use switchcore::cross::{CrossConfig, CrossSource, Pattern};
use switchcore::flow::{FlowConfig, Mode};
use switchcore::queue::{Discipline, PortConfig, RedConfig};
use switchcore::switch::{Handled, Host, PortSetup, Switch, SwitchConfig};
use switchcore::wire::{build_tcp, flags, Ecn, TcpRepr, ETHERTYPE_IPV4, ETH_HEADER_LEN};

const S: [u8; 4] = [10, 77, 1, 1];
const R: [u8; 4] = [10, 77, 2, 1];
const MSS: u32 = 1448;
const WS: u8 = 7;
const RATE: u64 = 12_500_000; // 100 Mbit/s
const ACK_DELAY_NS: u64 = 500_000;
const K: u64 = 30_000;
const RCV_WINDOW: u64 = 400_000;
const END_NS: u64 = 2_000_000_000;
const SYN_OPTS: [u8; 8] = [2, 4, (MSS >> 8) as u8, MSS as u8, 1, 3, 3, WS];

/// Port 0 faces the senders (unshaped, `ACK_DELAY_NS` of delay: the return path), port 1 the
/// receiver R (100 Mbit/s, 500 µs, 1 MB, step marking at K).
const SENDERS: usize = 0;
const RECEIVER: usize = 1;

fn switch(senders: &[([u8; 4], Mode)]) -> Switch {
    let step = PortConfig {
        rate_bytes_per_s: RATE,
        burst_bytes: 3028,
        delay_ns: 500_000,
        limit_bytes: Some(1_000_000),
        limit_packets: None,
        discipline: Discipline::Red(RedConfig {
            min_bytes: K,
            max_bytes: K,
            max_p: 1.0,
            ewma_weight: None,
            ecn: true,
            gentle: false,
            seed: 1,
        }),
    };
    let back = PortConfig {
        rate_bytes_per_s: 0,
        delay_ns: ACK_DELAY_NS,
        ..PortConfig::default()
    };
    let mut hosts: Vec<Host> = senders
        .iter()
        .enumerate()
        .map(|(i, &(ip, mode))| Host {
            ip,
            port: SENDERS,
            mac: [2, 0, 0, 0, 1, i as u8],
            mode,
        })
        .collect();
    hosts.push(Host {
        ip: R,
        port: RECEIVER,
        mac: [2, 0, 0, 0, 2, 0],
        mode: Mode::Off,
    });
    Switch::new(
        SwitchConfig {
            ports: vec![
                PortSetup {
                    mac: [2, 0, 0, 0, 0, 1],
                    queue: back,
                },
                PortSetup {
                    mac: [2, 0, 0, 0, 0, 2],
                    queue: step,
                },
            ],
            hosts,
            flows: FlowConfig::default(),
            cross: vec![],
        },
        0,
    )
    .unwrap()
}

/// An Ethernet frame around an IPv4 packet (addressed to the switch's port: any MAC will do).
fn eth(ip: Vec<u8>) -> Vec<u8> {
    let mut f = vec![0x02; 12];
    f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    f.extend_from_slice(&ip);
    f
}

fn tcp(frame: &[u8]) -> TcpRepr {
    TcpRepr::parse(&frame[ETH_HEADER_LEN..]).unwrap()
}

struct Outcome {
    mean_backlog: f64,
    max_backlog_late: u64,
    goodput_bytes_per_s: f64,
    drops: u64,
    rewrites: u64,
}

fn run(mode: Mode, sender_ecn: bool) -> Outcome {
    let mut sw = switch(&[(S, mode)]);
    let queue = |sw: &mut Switch, port: usize, ip: Vec<u8>, now: u64| {
        if let Handled::Dropped { .. } = sw.handle_frame(port, eth(ip), false, now) {
            panic!("the 1 MB buffer never overflows in this scenario");
        }
    };
    let syn_flags = flags::SYN
        | if sender_ecn {
            flags::ECE | flags::CWR
        } else {
            0
        };
    let syn = build_tcp(
        S,
        R,
        (40000, 5201),
        0,
        0,
        syn_flags,
        65535,
        &SYN_OPTS,
        0,
        Ecn::NotEct,
    );
    queue(&mut sw, SENDERS, syn, 0);

    let mut established = false;
    let (mut snd_una, mut snd_nxt, mut adv) = (1u32, 1u32, RCV_WINDOW);
    let mut now = 0u64;
    let (mut backlog_sum, mut samples, mut max_late) = (0f64, 0u64, 0u64);
    let mut next_sample = 0u64;
    let mut delivered_late = 0u64;
    while now < END_NS {
        // what the switch delivers: data and the handshake at R, ACKs at S
        while let Some((port, f)) = sw.poll_transmit(now) {
            let r = tcp(&f);
            if port == RECEIVER {
                if r.flags & flags::SYN != 0 {
                    let sa = build_tcp(
                        R,
                        S,
                        (5201, 40000),
                        0,
                        1,
                        flags::SYN | flags::ACK,
                        65535,
                        &SYN_OPTS,
                        0,
                        Ecn::NotEct,
                    );
                    queue(&mut sw, RECEIVER, sa, now);
                    continue;
                }
                if r.payload_len == 0 {
                    continue; // the handshake's ACK
                }
                if mode != Mode::Off {
                    assert_ne!(
                        r.ecn,
                        Ecn::Ce,
                        "managed data must reach the receiver unmarked"
                    );
                }
                let rcv_nxt = r.seq.wrapping_add(r.payload_len);
                if now >= END_NS / 2 {
                    delivered_late += u64::from(r.payload_len);
                }
                let win = (RCV_WINDOW >> WS) as u16;
                let a = build_tcp(
                    R,
                    S,
                    (5201, 40000),
                    1,
                    rcv_nxt,
                    flags::ACK,
                    win,
                    &[],
                    0,
                    Ecn::NotEct,
                );
                queue(&mut sw, RECEIVER, a, now);
            } else if r.flags & flags::SYN != 0 {
                established = true;
                let a = build_tcp(
                    S,
                    R,
                    (40000, 5201),
                    1,
                    1,
                    flags::ACK,
                    65535 >> WS,
                    &[],
                    0,
                    Ecn::NotEct,
                );
                queue(&mut sw, SENDERS, a, now);
            } else {
                assert!(r.window <= (RCV_WINDOW >> WS) as u16, "window only lowered");
                snd_una = r.ack;
                adv = u64::from(r.window) << WS;
            }
        }
        // the sender transmits whatever its (advertised) window allows, at once
        while established && u64::from(snd_nxt.wrapping_sub(snd_una)) + u64::from(MSS) <= adv {
            let ecn = if sender_ecn { Ecn::Ect0 } else { Ecn::NotEct };
            let d = build_tcp(
                S,
                R,
                (40000, 5201),
                snd_nxt,
                1,
                flags::ACK,
                65535,
                &[],
                MSS as usize,
                ecn,
            );
            queue(&mut sw, SENDERS, d, now);
            snd_nxt = snd_nxt.wrapping_add(MSS);
        }
        sw.handle_timeout(now);
        if now >= next_sample {
            let b = sw.port_counters(RECEIVER).queue.backlog_bytes;
            if now >= END_NS / 2 {
                backlog_sum += b as f64;
                samples += 1;
                max_late = max_late.max(b);
            }
            next_sample += 100_000;
        }
        let next = sw
            .poll_timeout()
            .map_or(next_sample, |t| t.min(next_sample));
        now = next.max(now + 1);
    }
    Outcome {
        mean_backlog: backlog_sum / samples as f64,
        max_backlog_late: max_late,
        goodput_bytes_per_s: delivered_late as f64 / (END_NS / 2) as f64 * 1e9,
        drops: sw.port_counters(RECEIVER).queue.drops,
        rewrites: sw.flow_stats().window_rewrites,
    }
}

#[test]
fn without_the_switch_the_queue_fills_to_the_receiver_window() {
    let o = run(Mode::Off, true);
    eprintln!(
        "off: mean backlog {:.0} B, goodput {:.0} B/s",
        o.mean_backlog, o.goodput_bytes_per_s
    );
    assert_eq!(o.rewrites, 0);
    assert!(
        o.mean_backlog > 250_000.0,
        "mean backlog {}",
        o.mean_backlog
    );
    assert!(o.goodput_bytes_per_s > 0.9 * RATE as f64 * 1448.0 / 1514.0);
}

#[test]
fn dctcp_in_the_switch_holds_the_queue_near_k_at_full_rate() {
    for (mode, ecn) in [(Mode::Dctcp, true), (Mode::Vcc, false)] {
        let o = run(mode, ecn);
        eprintln!(
            "{mode:?}: mean backlog {:.0} B, max {} B, goodput {:.0} B/s",
            o.mean_backlog, o.max_backlog_late, o.goodput_bytes_per_s
        );
        assert!(o.rewrites > 0);
        assert_eq!(o.drops, 0);
        assert!(
            o.mean_backlog < 2.0 * K as f64 && o.max_backlog_late < 4 * K,
            "{mode:?}: mean backlog {} max {}",
            o.mean_backlog,
            o.max_backlog_late
        );
        assert!(
            o.goodput_bytes_per_s > 0.9 * RATE as f64 * 1448.0 / 1514.0,
            "{mode:?}: goodput {} B/s",
            o.goodput_bytes_per_s
        );
    }
}

/// What became of the connection attempts of scenario 2.
#[derive(Debug, Default)]
struct Opening {
    syns_sent: u32,
    syns_delivered: u32,
    /// R saw the handshake's final ACK.
    established: bool,
}

/// Hosts M (mode `mode`, SYN asking for ECN iff `m_ecn`) and L (unmanaged legacy) open a
/// connection to R at 1 ms, retrying the SYN every 10 ms until R answers; with `cross`, host C
/// keeps R's queue at about 2 K from t = 0 with ECN-capable bulk data at the link rate (an
/// unmanaged flow: RED marks it, never drops it below the limit).
fn open_through_a_marked_queue(mode: Mode, m_ecn: bool, cross: bool) -> (Opening, Opening, u64) {
    const M: [u8; 4] = [10, 77, 1, 2];
    const L: [u8; 4] = [10, 77, 1, 3];
    const C: [u8; 4] = [10, 77, 1, 4];
    const CROSS_FRAME: u64 = 1514;
    let gap_ns = CROSS_FRAME * 1_000_000_000 / RATE;
    let burst = 2 * K / CROSS_FRAME + 1;
    let mut sw = switch(&[(M, mode), (L, Mode::Off), (C, Mode::Off)]);
    let syn = |src: [u8; 4], port: u16, ecn_setup: bool| {
        let f = flags::SYN
            | if ecn_setup {
                flags::ECE | flags::CWR
            } else {
                0
            };
        eth(build_tcp(
            src,
            R,
            (port, 5201),
            100,
            0,
            f,
            64240,
            &SYN_OPTS,
            0,
            Ecn::NotEct,
        ))
    };
    let hosts = [(M, 41000u16, m_ecn), (L, 42000u16, false)];
    let mut open = [Opening::default(), Opening::default()];
    let mut answered = [false, false];
    // (when, what): 0/1 = SYN (re)try of M/L, 2 = next cross frame
    let mut timers: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    timers.push(Reverse((1_000_000, 0)));
    timers.push(Reverse((1_000_000, 1)));
    let mut cross_seq = 1u32;
    let mut send_cross = |sw: &mut Switch, now: u64| {
        let d = build_tcp(
            C,
            R,
            (43000, 5201),
            cross_seq,
            1,
            flags::ACK,
            1000,
            &[],
            (CROSS_FRAME as usize) - 14 - 40,
            Ecn::Ect0,
        );
        cross_seq = cross_seq.wrapping_add(1460);
        let h = sw.handle_frame(SENDERS, eth(d), false, now);
        assert!(matches!(h, Handled::Queued { .. }), "cross traffic {h:?}");
    };
    if cross {
        for _ in 0..burst {
            send_cross(&mut sw, 0);
        }
        timers.push(Reverse((gap_ns, 2)));
    }
    let end = 40_000_000u64;
    let mut now = 0u64;
    while now < end {
        while let Some(&Reverse((t, what))) = timers.peek() {
            if t > now {
                break;
            }
            timers.pop();
            if what == 2 {
                send_cross(&mut sw, now);
                timers.push(Reverse((t + gap_ns, 2)));
            } else if !answered[what] {
                let (ip, port, ecn) = hosts[what];
                open[what].syns_sent += 1;
                sw.handle_frame(SENDERS, syn(ip, port, ecn), false, now);
                timers.push(Reverse((t + 10_000_000, what)));
            }
        }
        while let Some((port, f)) = sw.poll_transmit(now) {
            let r = tcp(&f);
            let Some(i) = hosts.iter().position(|h| h.0 == r.src || h.0 == r.dst) else {
                continue; // cross traffic reaching R
            };
            let (ip, sport, _) = hosts[i];
            if port == RECEIVER && r.flags & flags::SYN != 0 {
                // protected: passed a marking queue unchanged (never CE)
                assert_eq!(r.ecn, Ecn::NotEct, "a SYN must reach R as it was sent");
                open[i].syns_delivered += 1;
                let sa = build_tcp(
                    R,
                    ip,
                    (5201, sport),
                    7000,
                    r.seq.wrapping_add(1),
                    flags::SYN | flags::ACK,
                    65160,
                    &SYN_OPTS,
                    0,
                    Ecn::NotEct,
                );
                sw.handle_frame(RECEIVER, eth(sa), false, now);
            } else if port == RECEIVER {
                open[i].established = true;
            } else if r.flags & flags::SYN != 0 && !answered[i] {
                answered[i] = true;
                let a = build_tcp(
                    ip,
                    R,
                    (sport, 5201),
                    101,
                    r.seq.wrapping_add(1),
                    flags::ACK,
                    502,
                    &[],
                    0,
                    Ecn::NotEct,
                );
                sw.handle_frame(SENDERS, eth(a), false, now);
            }
        }
        sw.handle_timeout(now);
        let mut next = sw.poll_timeout().unwrap_or(end);
        if let Some(&Reverse((t, _))) = timers.peek() {
            next = next.min(t);
        }
        now = next.max(now + 1);
    }
    let [m, l] = open;
    (m, l, sw.port_counters(RECEIVER).queue.backlog_bytes)
}

#[test]
fn a_managed_connection_opens_through_a_marking_queue_an_unmanaged_one_does_not() {
    for (mode, m_ecn) in [(Mode::Vcc, false), (Mode::Dctcp, true)] {
        let (m, l, backlog) = open_through_a_marked_queue(mode, m_ecn, true);
        eprintln!("{mode:?}: managed {m:?}, legacy {l:?}, backlog at the end {backlog} B");
        assert!(backlog > K, "the cross traffic keeps the queue above K");
        assert!(
            m.established && m.syns_sent == 1 && m.syns_delivered == 1,
            "{mode:?}: the managed host's control packets pass the marking queue: {m:?}"
        );
        assert!(
            !l.established && l.syns_sent > 1 && l.syns_delivered == 0,
            "{mode:?}: the legacy host's SYNs are dropped: {l:?}"
        );
    }
    // the same without cross traffic: both open (the drops above are the marking queue's)
    let (m, l, _) = open_through_a_marked_queue(Mode::Vcc, false, false);
    assert!(m.established && l.established, "{m:?} {l:?}");
}

// -- in-switch cross traffic ---------------------------------------------------------------------
//
// 3. A source inside the switch offers UDP-like virtual packets to the receiver's port: the rate
//    it delivers, its drops and marks are those of real frames sent at the same instants by a
//    host, and a seeded Poisson or on/off source repeats itself exactly.

const UDP_FRAME: u64 = 1514;
const U: [u8; 4] = [10, 77, 3, 1];

fn red_port() -> PortConfig {
    PortConfig {
        rate_bytes_per_s: RATE,
        burst_bytes: 3028,
        delay_ns: 500_000,
        limit_bytes: Some(200_000),
        limit_packets: None,
        discipline: Discipline::Red(RedConfig {
            min_bytes: 30_000,
            max_bytes: 90_000,
            max_p: 0.1,
            ewma_weight: None,
            ecn: true,
            gentle: false,
            seed: 5,
        }),
    }
}

fn cross_switch(cross: Vec<CrossConfig>) -> Switch {
    let back = PortConfig {
        rate_bytes_per_s: 0,
        ..PortConfig::default()
    };
    Switch::new(
        SwitchConfig {
            ports: vec![
                PortSetup {
                    mac: [2, 0, 0, 0, 0, 1],
                    queue: back,
                },
                PortSetup {
                    mac: [2, 0, 0, 0, 0, 2],
                    queue: red_port(),
                },
            ],
            hosts: vec![
                Host {
                    ip: S,
                    port: SENDERS,
                    mac: [2, 0, 0, 0, 1, 0],
                    mode: Mode::Off,
                },
                Host {
                    ip: U,
                    port: SENDERS,
                    mac: [2, 0, 0, 0, 1, 1],
                    mode: Mode::Off,
                },
                Host {
                    ip: R,
                    port: RECEIVER,
                    mac: [2, 0, 0, 0, 2, 0],
                    mode: Mode::Off,
                },
            ],
            flows: FlowConfig::default(),
            cross,
        },
        0,
    )
    .unwrap()
}

fn source(share: f64, pattern: Pattern, seed: u64) -> CrossConfig {
    CrossConfig {
        port: RECEIVER,
        rate_bytes_per_s: (RATE as f64 * share) as u64,
        frame_bytes: UDP_FRAME,
        pattern,
        ect: false,
        seed,
    }
}

/// A full-size frame from `src` to R (1514 bytes on the wire, like a UDP datagram of 1472).
fn full_frame(src: [u8; 4], ecn: Ecn) -> Vec<u8> {
    eth(build_tcp(
        src,
        R,
        (5201, 5201),
        1,
        1,
        flags::ACK,
        100,
        &[],
        1460,
        ecn,
    ))
}

/// Everything observable at the receiver's port, sampled every 10 ms.
#[derive(Debug, PartialEq)]
struct Trace {
    samples: Vec<(u64, u64, u64, u64)>, // delivered bytes, drops, marks, backlog
    real_delivered: u64,
    real_marked: u64,
}

/// Drive `sw` for `end_ns`: `real` = arrivals of real frames (time, source, ECN) from the
/// senders' side; the switch's own sources run by themselves.
fn drive(sw: &mut Switch, real: &[(u64, [u8; 4], Ecn)], end_ns: u64) -> Trace {
    let mut next_real = 0;
    let mut next_sample = 0;
    let mut trace = Trace {
        samples: vec![],
        real_delivered: 0,
        real_marked: 0,
    };
    loop {
        let arrival = real.get(next_real).map(|r| r.0);
        let t = [sw.poll_timeout(), arrival, Some(next_sample)]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        if t > end_ns {
            return trace;
        }
        while next_real < real.len() && real[next_real].0 <= t {
            let (at, src, ecn) = real[next_real];
            if let Handled::Queued { marked: true, .. } =
                sw.handle_frame(SENDERS, full_frame(src, ecn), false, at)
            {
                trace.real_marked += 1;
            }
            next_real += 1;
        }
        sw.handle_timeout(t);
        while let Some((port, _)) = sw.poll_transmit(t) {
            assert_eq!(port, RECEIVER);
            trace.real_delivered += 1;
        }
        if t == next_sample {
            let q = sw.port_counters(RECEIVER).queue;
            trace
                .samples
                .push((q.delivered_bytes, q.drops, q.marks, q.backlog_bytes));
            next_sample += 10_000_000;
        }
    }
}

/// The instants a source of `cfg` started at 0 offers packets at, up to `end_ns`.
fn schedule(cfg: &CrossConfig, end_ns: u64) -> Vec<u64> {
    let mut src = CrossSource::new(cfg.clone(), 0);
    std::iter::from_fn(|| src.take_due(end_ns)).collect()
}

#[test]
fn the_in_switch_source_delivers_its_rate_in_every_pattern() {
    let on_off = Pattern::OnOff {
        on_ns: 50_000_000,
        off_ns: 50_000_000,
    };
    for pattern in [Pattern::Constant, Pattern::Poisson, on_off] {
        for share in [0.5, 0.9] {
            let mut sw = cross_switch(vec![source(share, pattern, 11)]);
            let trace = drive(&mut sw, &[], END_NS);
            assert_eq!(trace.real_delivered, 0, "nothing reaches a host");
            let x = sw.cross_stats()[0];
            let rate = x.delivered_bytes as f64 / (END_NS as f64 / 1e9) / RATE as f64;
            // on/off at 90 % bursts at 180 % of the link: the queue overflows in every burst
            let lost = x.drops as f64 * UDP_FRAME as f64 / (END_NS as f64 / 1e9) / RATE as f64;
            assert!(
                (rate + lost - share).abs() < 0.02,
                "{pattern:?} at {share}: delivered {rate:.3} + dropped {lost:.3}"
            );
            if pattern != on_off {
                assert!(
                    (rate - share).abs() < 0.02,
                    "{pattern:?} at {share}: {rate:.3}"
                );
            }
            assert_eq!(
                x.delivered_bytes,
                sw.port_counters(RECEIVER).queue.delivered_bytes
            );
        }
    }
    // over the link's rate the port carries its rate and drops the rest
    let mut sw = cross_switch(vec![source(1.2, Pattern::Constant, 1)]);
    drive(&mut sw, &[], END_NS);
    let x = sw.cross_stats()[0];
    let rate = x.delivered_bytes as f64 / (END_NS as f64 / 1e9) / RATE as f64;
    assert!((rate - 1.0).abs() < 0.01 && x.drops > 0, "{rate} {x:?}");
}

#[test]
fn in_switch_packets_are_dropped_and_marked_exactly_like_real_ones() {
    // an ECN-capable bulk stream at 60 % of the link plus UDP at 60 %, once as real frames from
    // host U at the instants the source would use and once from the switch's own source
    let udp = source(0.6, Pattern::Poisson, 21);
    let end = 1_000_000_000;
    let bulk_gap = (UDP_FRAME as f64 * 1e9 / (RATE as f64 * 0.6)) as u64;
    let bulk: Vec<(u64, [u8; 4], Ecn)> = (0..end / bulk_gap)
        .map(|k| (k * bulk_gap + 333, S, Ecn::Ect0))
        .collect();
    let mut with_real: Vec<(u64, [u8; 4], Ecn)> = schedule(&udp, end)
        .into_iter()
        .map(|t| (t, U, Ecn::NotEct))
        .chain(bulk.iter().copied())
        .collect();
    with_real.sort_by_key(|r| r.0);

    let mut hosts_send = cross_switch(vec![]);
    let a = drive(&mut hosts_send, &with_real, end);
    let mut switch_sends = cross_switch(vec![udp]);
    let b = drive(&mut switch_sends, &bulk, end);

    let (qa, qb) = (
        hosts_send.port_counters(RECEIVER).queue,
        switch_sends.port_counters(RECEIVER).queue,
    );
    assert!(qa.drops > 100 && qa.marks > 100, "{qa:?}");
    assert_eq!(
        a.samples, b.samples,
        "same deliveries, drops, marks, backlog"
    );
    assert_eq!(
        a.real_marked, b.real_marked,
        "the bulk stream is marked alike"
    );
    let x = switch_sends.cross_stats()[0];
    assert_eq!(x.marks, 0, "non-ECT UDP is dropped, never marked");
    assert_eq!(
        qb.drops, x.drops,
        "every drop is the UDP's, as with the host's UDP"
    );
    assert_eq!(a.real_delivered, b.real_delivered + x.delivered_packets);
}

#[test]
fn seeded_poisson_and_on_off_sources_repeat_exactly() {
    let on_off = Pattern::OnOff {
        on_ns: 20_000_000,
        off_ns: 60_000_000,
    };
    for pattern in [Pattern::Poisson, on_off] {
        let run = |seed| {
            let mut sw = cross_switch(vec![source(0.7, pattern, seed)]);
            let trace = drive(&mut sw, &[], 500_000_000);
            (trace, sw.cross_stats()[0])
        };
        assert_eq!(run(3), run(3), "{pattern:?}");
        if pattern == Pattern::Poisson {
            assert_ne!(run(3).0, run(4).0);
        } else {
            assert_eq!(run(3), run(4), "on/off does not use the seed");
        }
    }
}
