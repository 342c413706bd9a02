//! `shufflelab-switch CONFIG.json`: shufflelab's userspace switch. Runs inside the router's
//! network namespace, receives frames on its ports (AF_PACKET), routes IPv4 by destination host
//! address (rewriting MACs and TTL, like the kernel router it replaces), passes TCP through the
//! DCTCP/VCC flow logic, queues each frame on its egress port (switchcore: token bucket, delay,
//! droptail/RED-ECN) and transmits it when due. Everything else (ARP, ICMP to the router itself)
//! is left to the namespace's kernel, which must have `ip_forward = 0` so it does not forward a
//! second copy. Telemetry rows go to a CSV; SIGTERM/SIGINT stop it cleanly with a summary.

mod config;
mod port;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};

use config::Config;
use port::Port;
use switchcore::flow::{FlowTable, Mode};
use switchcore::queue::{Admit, EgressQueue};
use switchcore::wire::{self, Ecn, Ipv4Packet, ETHERTYPE_IPV4, ETH_HEADER_LEN};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

struct Route {
    port: usize,
    mac: [u8; 6],
    mode: Mode,
}

#[derive(Default, Clone, Copy)]
struct Extra {
    rx_bytes: u64,
    rx_packets: u64,
    tx_errors: u64,
    not_routed: u64,
}

const FRAME_CAP: usize = 2048;
const RX_BATCH: usize = 64;
const HEADER: &str = "t,dev,backlog_bytes,backlog_packets,drops,sent_bytes,sent_packets,overlimits,tx_bytes,rx_bytes,marks";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 || args[1] == "-h" || args[1] == "--help" {
        eprintln!("usage: shufflelab-switch CONFIG.json");
        std::process::exit(2);
    }
    match run(&args[1]) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("shufflelab-switch: {e}");
            std::process::exit(1);
        }
    }
}

fn run(path: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let cfg: Config = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let start = now_ns();
    let mut ports = Vec::new();
    let mut queues: Vec<EgressQueue<Vec<u8>>> = Vec::new();
    let mut index = HashMap::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        let core = p.to_core()?;
        ports.push(Port::open(&p.ifname).map_err(|e| format!("port {}: {e}", p.ifname))?);
        queues.push(EgressQueue::new(core, start));
        index.insert(p.ifname.clone(), i);
    }
    let mut routes: HashMap<[u8; 4], Route> = HashMap::new();
    for h in &cfg.hosts {
        let ip: Ipv4Addr =
            h.ip.parse()
                .map_err(|_| format!("bad host address {:?}", h.ip))?;
        let port = *index
            .get(&h.port)
            .ok_or_else(|| format!("host {} names unknown port {:?}", h.ip, h.port))?;
        let mac = config::parse_mac(&h.mac)?;
        routes.insert(
            ip.octets(),
            Route {
                port,
                mac,
                mode: h.mode.into(),
            },
        );
    }
    let port_macs: Vec<[u8; 6]> = ports.iter().map(|p| p.mac).collect();
    let mut flows = FlowTable::new(cfg.flows.to_core());
    let mut extra = vec![Extra::default(); ports.len()];

    // SAFETY: installing an async-signal-safe handler that only stores an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        // precise sleeps: no timer slack
        libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0);
    }
    if let Some(cpu) = cfg.cpu {
        // SAFETY: a zeroed cpu_set_t with one bit set, for this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }

    let mut telemetry = match &cfg.telemetry.path {
        Some(p) => {
            let mut w = BufWriter::new(File::create(p).map_err(|e| format!("{p}: {e}"))?);
            writeln!(w, "{HEADER}").map_err(|e| e.to_string())?;
            w.flush().map_err(|e| e.to_string())?;
            Some(w)
        }
        None => None,
    };
    let period_ns = ((cfg.telemetry.period_ms.max(0.1)) * 1e6) as u64;
    let busy_ns = cfg.busy_poll_us * 1000;
    let mut next_sample = start;
    let mut sample_k = 0u64;
    let mut next_expiry = start + 1_000_000_000;

    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut pfds: Vec<libc::pollfd> = ports
        .iter()
        .map(|p| libc::pollfd {
            fd: p.fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    println!("ready ports={}", ports.len());
    let _ = std::io::stdout().flush();

    while !STOP.load(Ordering::Relaxed) {
        let mut worked = false;
        // receive
        for (pi, port) in ports.iter().enumerate() {
            for _ in 0..RX_BATCH {
                let mut buf = pool.pop().unwrap_or_else(|| vec![0u8; FRAME_CAP]);
                buf.resize(FRAME_CAP, 0);
                let info = match port.recv(&mut buf) {
                    Ok(Some(i)) => i,
                    Ok(None) => {
                        pool.push(buf);
                        break;
                    }
                    Err(e) => return Err(format!("recv on {}: {e}", port.ifname)),
                };
                worked = true;
                let now = now_ns();
                extra[pi].rx_bytes += info.len as u64;
                extra[pi].rx_packets += 1;
                if info.len > FRAME_CAP {
                    extra[pi].not_routed += 1; // larger than an MTU frame: offloads are on
                    pool.push(buf);
                    continue;
                }
                buf.truncate(info.len);
                match forward(
                    &mut buf,
                    info.csum_not_ready,
                    &routes,
                    &port_macs,
                    &mut flows,
                    now,
                ) {
                    Some((out, managed, protected)) => {
                        let ect = Ipv4Packet::new_checked(&buf[ETH_HEADER_LEN..])
                            .map(|p| p.ecn() != Ecn::NotEct)
                            .unwrap_or(false);
                        // a managed connection's control packet: marked = passed unchanged
                        let ect_like = ect || protected;
                        let len = buf.len() as u64;
                        let q = &mut queues[out];
                        match q.admit(len, ect_like, now) {
                            Admit::Drop => pool.push(buf),
                            verdict => {
                                let marked = verdict == Admit::Mark;
                                if let Some(tag) = managed {
                                    // the switch is the congestion signal's consumer: count, hide
                                    flows.on_queued(tag, marked);
                                } else if marked && ect {
                                    if let Ok(mut ip) =
                                        Ipv4Packet::new_checked(&mut buf[ETH_HEADER_LEN..])
                                    {
                                        ip.set_ecn(Ecn::Ce);
                                    }
                                }
                                q.push(buf, len, now);
                            }
                        }
                    }
                    None => {
                        extra[pi].not_routed += 1;
                        pool.push(buf);
                    }
                }
            }
        }
        // transmit what is due
        let now = now_ns();
        for (pi, q) in queues.iter_mut().enumerate() {
            while let Some(frame) = q.poll(now) {
                worked = true;
                match ports[pi].send(&frame) {
                    Ok(true) => {}
                    Ok(false) => extra[pi].tx_errors += 1,
                    Err(e) => return Err(format!("send on {}: {e}", ports[pi].ifname)),
                }
                pool.push(frame);
            }
        }
        // telemetry on an absolute schedule
        if now >= next_sample {
            if let Some(w) = telemetry.as_mut() {
                let t = clock_ns(libc::CLOCK_REALTIME) as f64 / 1e9;
                for (pi, q) in queues.iter().enumerate() {
                    let s = q.stats();
                    writeln!(
                        w,
                        "{t:.6},{},{},{},{},{},{},{},{},{},{}",
                        ports[pi].ifname,
                        s.backlog_bytes,
                        s.backlog_packets,
                        s.drops,
                        s.sent_bytes,
                        s.sent_packets,
                        s.overlimits,
                        s.delivered_bytes,
                        extra[pi].rx_bytes,
                        s.marks
                    )
                    .map_err(|e| e.to_string())?;
                }
                w.flush().map_err(|e| e.to_string())?;
            }
            sample_k += 1;
            next_sample = start + sample_k * period_ns;
            if next_sample <= now {
                // fell behind: skip missed slots rather than burst
                sample_k = (now - start) / period_ns + 1;
                next_sample = start + sample_k * period_ns;
            }
        }
        if now >= next_expiry {
            flows.expire(now);
            next_expiry = now + 1_000_000_000;
        }
        if worked {
            continue;
        }
        // wait: spin for short waits, sleep (hrtimer, no slack) for long ones
        let mut wake = next_sample;
        for q in &queues {
            if let Some(t) = q.next_wakeup() {
                wake = wake.min(t);
            }
        }
        let now = now_ns();
        if wake <= now + busy_ns {
            continue;
        }
        let sleep = wake - now - busy_ns / 2;
        let ts = libc::timespec {
            tv_sec: (sleep / 1_000_000_000) as libc::time_t,
            tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: pfds is a live array of pollfd; ts a valid timespec.
        unsafe {
            libc::ppoll(
                pfds.as_mut_ptr(),
                pfds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            );
        }
    }

    // summary for the log
    let fs = flows.stats();
    let mut summary = String::from("{\"ports\": {");
    for (pi, q) in queues.iter().enumerate() {
        let s = q.stats();
        let e = extra[pi];
        if pi > 0 {
            summary.push_str(", ");
        }
        summary.push_str(&format!(
            "\"{}\": {{\"offered_packets\": {}, \"sent_bytes\": {}, \"sent_packets\": {}, \"drops\": {}, \"marks\": {}, \"overlimits\": {}, \"rx_bytes\": {}, \"rx_packets\": {}, \"not_routed\": {}, \"tx_errors\": {}}}",
            ports[pi].ifname, s.offered_packets, s.sent_bytes, s.sent_packets, s.drops, s.marks, s.overlimits, e.rx_bytes, e.rx_packets, e.not_routed, e.tx_errors
        ));
    }
    summary.push_str(&format!(
        "}}, \"flows\": {{\"tracked\": {}, \"managed_started\": {}, \"window_rewrites\": {}, \"ce_bytes\": {}, \"evictions\": {}, \"expired\": {}}}}}",
        fs.flows, fs.managed_flows_started, fs.window_rewrites, fs.ce_bytes, fs.evictions, fs.expired
    ));
    println!("summary {summary}");
    if let Some(mut w) = telemetry {
        let _ = w.flush();
    }
    Ok(())
}

/// Route one frame: returns the egress port and, for managed TCP data, the flow tag. Rewrites
/// MACs and TTL (and whatever the flow logic changes); `None` = not ours to forward.
fn forward(
    frame: &mut [u8],
    csum_not_ready: bool,
    routes: &HashMap<[u8; 4], Route>,
    port_macs: &[[u8; 6]],
    flows: &mut FlowTable,
    now: u64,
) -> Option<(usize, Option<switchcore::flow::DataTag>, bool)> {
    if wire::ethertype(frame)? != ETHERTYPE_IPV4 {
        return None;
    }
    let (eth, ip) = frame.split_at_mut(ETH_HEADER_LEN);
    let (src, dst, ttl) = {
        let p = Ipv4Packet::new_checked(&*ip).ok()?;
        (p.src(), p.dst(), p.ttl())
    };
    let route = routes.get(&dst)?;
    if ttl <= 1 {
        return None;
    }
    if csum_not_ready {
        wire::fill_transport_checksum(ip);
    }
    Ipv4Packet::new_checked(&mut *ip).ok()?.decrement_ttl();
    eth[0..6].copy_from_slice(&route.mac);
    eth[6..12].copy_from_slice(&port_macs[route.port]);
    let src_mode = routes.get(&src).map(|r| r.mode).unwrap_or(Mode::Off);
    let mut managed = None;
    let mut protected = false;
    if switchcore::flow::is_tcp(ip) {
        let ing = flows.on_ingress(ip, src_mode, route.mode, now);
        managed = ing.managed_data;
        protected = ing.protected;
    }
    Some((route.port, managed, protected))
}
