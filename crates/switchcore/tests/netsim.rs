//! A deterministic two-host scenario in virtual time (smoltcp / quinn-proto style): one TCP-like
//! sender whose own window never limits it (a cubic that sees no loss), a switch port with step
//! marking at K, and the receiver's ACKs passing back through the switch's flow logic. With
//! DCTCP or VCC in the switch the advertised window holds the queue near K; without it the sender
//! fills the buffer up to the receiver's window.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use switchcore::flow::{FlowConfig, FlowTable, Mode};
use switchcore::queue::{Admit, Discipline, EgressQueue, PortConfig, RedConfig};
use switchcore::wire::{build_tcp, flags, Ecn, Ipv4Packet, TcpRepr};

const S: [u8; 4] = [10, 77, 1, 1];
const R: [u8; 4] = [10, 77, 2, 1];
const MSS: u32 = 1448;
const WS: u8 = 7;
const RATE: u64 = 12_500_000; // 100 Mbit/s
const ACK_DELAY_NS: u64 = 500_000;
const K: u64 = 30_000;
const RCV_WINDOW: u64 = 400_000;
const END_NS: u64 = 2_000_000_000;

struct Outcome {
    mean_backlog: f64,
    max_backlog_late: u64,
    goodput_bytes_per_s: f64,
    drops: u64,
    rewrites: u64,
}

fn run(mode: Mode, sender_ecn: bool) -> Outcome {
    let mut flows = FlowTable::new(FlowConfig::default());
    let mut q: EgressQueue<Vec<u8>> = EgressQueue::new(
        PortConfig {
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
                seed: 1,
            }),
        },
        0,
    );
    let opts = [2, 4, (MSS >> 8) as u8, MSS as u8, 1, 3, 3, WS];
    let syn_flags = flags::SYN
        | if sender_ecn {
            flags::ECE | flags::CWR
        } else {
            0
        };
    let mut syn = build_tcp(
        S,
        R,
        (40000, 5201),
        0,
        0,
        syn_flags,
        65535,
        &opts,
        0,
        Ecn::NotEct,
    );
    flows.on_ingress(&mut syn, mode, Mode::Off, 0);
    let mut sa = build_tcp(
        R,
        S,
        (5201, 40000),
        0,
        1,
        flags::SYN | flags::ACK,
        65535,
        &opts,
        0,
        Ecn::NotEct,
    );
    flows.on_ingress(&mut sa, Mode::Off, mode, 0);

    let (mut snd_una, mut snd_nxt, mut adv) = (1u32, 1u32, RCV_WINDOW);
    let mut acks: BinaryHeap<Reverse<(u64, u32, u64)>> = BinaryHeap::new(); // (at, ack, window bytes)
    let mut now = 0u64;
    let (mut backlog_sum, mut samples, mut max_late) = (0f64, 0u64, 0u64);
    let mut next_sample = 0u64;
    let mut delivered_late = 0u64;
    while now < END_NS {
        // the sender transmits whatever its (advertised) window allows, at once
        while u64::from(snd_nxt.wrapping_sub(snd_una)) + u64::from(MSS) <= adv {
            let ecn = if sender_ecn { Ecn::Ect0 } else { Ecn::NotEct };
            let mut d = build_tcp(
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
            let ing = flows.on_ingress(&mut d, mode, Mode::Off, now);
            let ect = TcpRepr::parse(&d).unwrap().ecn != Ecn::NotEct;
            let len = d.len() as u64 + 14;
            match q.admit(len, ect, now) {
                Admit::Drop => panic!("the 1 MB buffer never overflows in this scenario"),
                v => {
                    if let Some(tag) = ing.managed_data {
                        flows.on_queued(tag, v == Admit::Mark);
                    } else if v == Admit::Mark {
                        Ipv4Packet::new_checked(&mut d[..])
                            .unwrap()
                            .set_ecn(Ecn::Ce);
                    }
                    q.push(d, len, now);
                }
            }
            snd_nxt = snd_nxt.wrapping_add(MSS);
        }
        // deliveries at the receiver -> ACKs back through the switch
        while let Some(d) = q.poll(now) {
            let r = TcpRepr::parse(&d).unwrap();
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
            let mut a = build_tcp(
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
            flows.on_ingress(&mut a, Mode::Off, mode, now);
            let ar = TcpRepr::parse(&a).unwrap();
            assert!(ar.window <= win);
            acks.push(Reverse((
                now + ACK_DELAY_NS,
                ar.ack,
                u64::from(ar.window) << WS,
            )));
        }
        while let Some(Reverse((at, ack, w))) = acks.peek().copied() {
            if at > now {
                break;
            }
            acks.pop();
            snd_una = ack;
            adv = w;
        }
        if now >= next_sample {
            let b = q.stats().backlog_bytes;
            if now >= END_NS / 2 {
                backlog_sum += b as f64;
                samples += 1;
                max_late = max_late.max(b);
            }
            next_sample += 100_000;
        }
        let mut next = next_sample;
        if let Some(t) = q.next_wakeup() {
            next = next.min(t);
        }
        if let Some(Reverse((at, _, _))) = acks.peek() {
            next = next.min(*at);
        }
        now = next.max(now + 1);
    }
    Outcome {
        mean_backlog: backlog_sum / samples as f64,
        max_backlog_late: max_late,
        goodput_bytes_per_s: delivered_late as f64 / (END_NS / 2) as f64 * 1e9,
        drops: q.stats().drops,
        rewrites: flows.stats().window_rewrites,
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
