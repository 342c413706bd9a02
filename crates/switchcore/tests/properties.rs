//! Property tests of the switch core's invariants (proptest).

use proptest::prelude::*;
use switchcore::flow::{FlowConfig, FlowTable, Mode};
use switchcore::queue::{Admit, Discipline, EgressQueue, PortConfig, RedConfig};
use switchcore::wire::{build_tcp, flags, Ecn, Ipv4Packet, TcpPacket, TcpRepr};

fn port_config() -> impl Strategy<Value = PortConfig> {
    (
        100_000u64..2_000_000_000,
        1514u64..40_000,
        0u64..20_000_000,
        prop::option::of(3_000u64..200_000),
        prop::option::of(2u32..100),
        prop::option::of((
            0u64..100_000,
            0u64..100_000,
            0.01f64..1.0,
            any::<bool>(),
            any::<bool>(),
        )),
    )
        .prop_map(|(rate, burst, delay, lb, lp, red)| PortConfig {
            rate_bytes_per_s: rate,
            burst_bytes: burst,
            delay_ns: delay,
            limit_bytes: lb,
            limit_packets: lp,
            discipline: match red {
                None => Discipline::DropTail,
                Some((a, b, p, ewma, ecn)) => Discipline::Red(RedConfig {
                    min_bytes: a.min(b),
                    max_bytes: a.max(b),
                    max_p: p,
                    ewma_weight: ewma.then_some(0.002),
                    ecn,
                    gentle: false,
                    seed: 3,
                }),
            },
        })
}

/// Arrivals: (gap before this packet in ns, length, ECT, poll gap after it in ns).
fn arrivals() -> impl Strategy<Value = Vec<(u64, u64, bool, u64)>> {
    prop::collection::vec(
        (0u64..50_000, 64u64..=1514, any::<bool>(), 0u64..80_000),
        1..400,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn queue_conserves_bytes_respects_delay_and_rate(cfg in port_config(), arr in arrivals()) {
        let mut q: EgressQueue<(usize, u64, u64)> = EgressQueue::new(cfg.clone(), 0);
        let mut now = 0u64;
        let mut offered = 0u64;
        let mut dropped = 0u64;
        let mut out: Vec<((usize, u64, u64), u64)> = vec![];
        for (i, (gap, len, ect, poll_gap)) in arr.iter().copied().enumerate() {
            now += gap;
            offered += len;
            match q.admit(len, ect, now) {
                Admit::Drop => dropped += len,
                Admit::Mark => { prop_assert!(ect); q.push((i, len, now), len, now) }
                Admit::Accept => q.push((i, len, now), len, now),
            }
            now += poll_gap;
            while let Some(x) = q.poll_timed(now) { out.push(x); }
            let s = q.stats();
            prop_assert_eq!(offered, dropped + s.delivered_bytes + s.backlog_bytes + s.in_flight_bytes);
        }
        while let Some(t) = q.next_wakeup() {
            prop_assert!(t >= now || t + 1 >= now, "wakeup in the past");
            now = now.max(t);
            while let Some(x) = q.poll_timed(now) { out.push(x); }
        }
        let s = q.stats();
        prop_assert_eq!(s.backlog_bytes + s.in_flight_bytes, 0);
        prop_assert_eq!(offered, dropped + s.delivered_bytes);
        prop_assert_eq!(s.drop_bytes, dropped);
        // FIFO, and nothing is due before its enqueue time + delay
        for w in out.windows(2) { prop_assert!(w[0].0.0 < w[1].0.0); }
        for ((_, _, at), due) in &out { prop_assert!(*due >= at + cfg.delay_ns); }
        // token bucket: over any window of ≥ 10 departures, bytes ≤ burst + rate·Δt
        let deps: Vec<(u64, u64)> = out.iter().map(|((_, len, _), due)| (due - cfg.delay_ns, *len)).collect();
        for i in 0..deps.len() {
            let mut sum = 0u64;
            for (j, (t, len)) in deps.iter().enumerate().skip(i) {
                sum += len;
                if j - i + 1 >= 10 {
                    let allowed = cfg.burst_bytes as u128
                        + (cfg.rate_bytes_per_s as u128 * (t - deps[i].0) as u128) / 1_000_000_000;
                    prop_assert!(sum as u128 <= allowed + 1, "window {}..{}: {} B > {} B", i, j, sum, allowed);
                }
            }
        }
    }
}

const S: [u8; 4] = [10, 77, 1, 1];
const R: [u8; 4] = [10, 77, 2, 1];

fn valid(p: &[u8]) -> bool {
    let ip = Ipv4Packet::new_checked(p).unwrap();
    ip.verify_checksum()
        && TcpPacket::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(ip.src(), ip.dst())
}

#[derive(Debug, Clone)]
enum Ev {
    Data {
        len: usize,
        ce: bool,
        ecn: u8,
    },
    Ack {
        advance: u32,
        window: u16,
        ece: bool,
    },
    Retransmit,
}

fn events() -> impl Strategy<Value = Vec<Ev>> {
    prop::collection::vec(
        prop_oneof![
            (1usize..1448, any::<bool>(), 0u8..4).prop_map(|(len, ce, ecn)| Ev::Data {
                len,
                ce,
                ecn
            }),
            (0u32..20_000, any::<u16>(), any::<bool>()).prop_map(|(advance, window, ece)| {
                Ev::Ack {
                    advance,
                    window,
                    ece,
                }
            }),
            Just(Ev::Retransmit),
        ],
        1..300,
    )
}

fn ecn_of(b: u8) -> Ecn {
    [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce][usize::from(b & 3)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn rewrites_never_raise_the_window_and_keep_checksums(
        mode in prop_oneof![Just(Mode::Dctcp), Just(Mode::Vcc), Just(Mode::Off)],
        syn_ecn in any::<bool>(),
        s_ws in prop::option::of(0u8..15),
        r_ws in prop::option::of(0u8..15),
        isn in any::<u32>(),
        evs in events(),
    ) {
        let mut t = FlowTable::new(FlowConfig::default());
        let opts = |ws: Option<u8>| -> Vec<u8> {
            let mut o = vec![2, 4, 0x05, 0xb4];
            if let Some(w) = ws { o.extend_from_slice(&[1, 3, 3, w]); }
            o
        };
        let syn_flags = flags::SYN | if syn_ecn { flags::ECE | flags::CWR } else { 0 };
        let mut syn = build_tcp(S, R, (40000, 5201), isn, 0, syn_flags, 64240, &opts(s_ws), 0, Ecn::NotEct);
        t.on_ingress(&mut syn, mode, Mode::Off, 0);
        prop_assert!(valid(&syn));
        let mut sa = build_tcp(R, S, (5201, 40000), 77, isn.wrapping_add(1), flags::SYN | flags::ACK, 65160, &opts(r_ws), 0, Ecn::NotEct);
        t.on_ingress(&mut sa, Mode::Off, mode, 0);
        prop_assert!(valid(&sa));
        let mut snd = isn.wrapping_add(1);
        let mut acked = snd;
        let mut now = 1;
        for ev in evs {
            now += 1000;
            match ev {
                Ev::Data { len, ce, ecn } => {
                    let mut d = build_tcp(S, R, (40000, 5201), snd, 78, flags::ACK, 500, &[], len, ecn_of(ecn));
                    let ing = t.on_ingress(&mut d, mode, Mode::Off, now);
                    prop_assert!(valid(&d));
                    if let Some(tag) = ing.managed_data {
                        prop_assert_ne!(TcpRepr::parse(&d).unwrap().ecn, Ecn::NotEct);
                        t.on_queued(tag, ce);
                    }
                    snd = snd.wrapping_add(len as u32);
                }
                Ev::Ack { advance, window, ece } => {
                    let room = snd.wrapping_sub(acked);
                    acked = acked.wrapping_add(advance.min(room));
                    let f = flags::ACK | if ece { flags::ECE } else { 0 };
                    let mut a = build_tcp(R, S, (5201, 40000), 78, acked, f, window, &[], 0, Ecn::NotEct);
                    t.on_ingress(&mut a, Mode::Off, mode, now);
                    prop_assert!(valid(&a));
                    prop_assert!(TcpRepr::parse(&a).unwrap().window <= window);
                }
                Ev::Retransmit => {
                    let mut d = build_tcp(S, R, (40000, 5201), acked, 78, flags::ACK, 500, &[], 1000, Ecn::NotEct);
                    t.on_ingress(&mut d, mode, Mode::Off, now);
                    prop_assert!(valid(&d));
                }
            }
        }
    }

    #[test]
    fn incremental_checksum_equals_recomputed(data in prop::collection::vec(any::<u8>(), 2..200), at in 0usize..100, new in any::<u16>()) {
        let at = (at % (data.len() / 2)) * 2;
        let mut d = data.clone();
        let before = switchcore::checksum::checksum(&d);
        let old = u16::from_be_bytes([d[at], d[at + 1]]);
        d[at..at + 2].copy_from_slice(&new.to_be_bytes());
        let inc = switchcore::checksum::update16(before, old, new);
        let full = switchcore::checksum::checksum(&d);
        // one's complement has two zeros (0x0000 / 0xffff); both verify
        prop_assert!(inc == full || (inc == 0xffff && full == 0) || (inc == 0 && full == 0xffff));
    }
}
