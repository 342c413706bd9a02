//! `shufflelab-switch CONFIG.json`: shufflelab's userspace switch. Runs inside the router's
//! network namespace, receives frames on its ports (AF_PACKET), routes IPv4 by destination host
//! address (rewriting MACs and TTL, like the kernel router it replaces), passes TCP through the
//! DCTCP/VCC flow logic, queues each frame on its egress port (switchcore: token bucket, delay,
//! droptail/RED-ECN) and transmits it when due. Everything else (ARP, ICMP to the router itself)
//! is left to the namespace's kernel, which must have `ip_forward = 0` so it does not forward a
//! second copy. Telemetry rows go to a CSV; SIGTERM/SIGINT stop it cleanly with a summary.
//!
//! The forwarding itself is `switchcore::switch::Switch`, a sans-IO endpoint; this binary only
//! owns what it cannot: the sockets, the clock, signals, CPU placement, the wait, telemetry.

mod config;
mod port;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};

use config::Config;
use port::Port;
use switchcore::cross::CrossStats;
use switchcore::switch::{Handled, Host, PortSetup, Switch, SwitchConfig};

static STOP: AtomicBool = AtomicBool::new(false);
static STOP_CROSS: AtomicBool = AtomicBool::new(false);
static START_CROSS: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_usr1(_: libc::c_int) {
    STOP_CROSS.store(true, Ordering::SeqCst);
}

extern "C" fn on_usr2(_: libc::c_int) {
    START_CROSS.store(true, Ordering::SeqCst);
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

const FRAME_CAP: usize = 2048;
const RX_BATCH: usize = 64;
const HEADER: &str = "t,dev,backlog_bytes,backlog_packets,drops,sent_bytes,sent_packets,overlimits,tx_bytes,rx_bytes,marks";
/// The switch's own state per sample: lag behind its schedule since the previous row (events,
/// mean, max) and the in-switch sources' counters summed (cumulative), `cross_running` = sources
/// still sending.
const STATUS_HEADER: &str = "t,lag_events,lag_mean_us,lag_max_us,cross_offered_packets,cross_offered_bytes,cross_delivered_packets,cross_delivered_bytes,cross_drops,cross_marks,cross_running";

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
    // one socket per interface; the config's ports are queues, several of one interface sharing
    // its socket (a one-armed router's directions): frames leave through their port's socket,
    // and a frame received on a socket counts on that socket's first port
    let mut sockets: Vec<Port> = Vec::new();
    let mut socket_of = Vec::new(); // port -> its socket
    let mut first_port = Vec::new(); // socket -> its first port
    let mut setups = Vec::new();
    let mut index = HashMap::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        let queue = p.to_core()?;
        let si = match sockets.iter().position(|s| s.ifname == p.ifname) {
            Some(si) => si,
            None => {
                let port = Port::open(&p.ifname).map_err(|e| format!("port {}: {e}", p.name()))?;
                sockets.push(port);
                first_port.push(i);
                sockets.len() - 1
            }
        };
        setups.push(PortSetup {
            mac: sockets[si].mac,
            queue,
        });
        socket_of.push(si);
        if index.insert(p.name().to_string(), i).is_some() {
            return Err(format!("two ports are named {:?}", p.name()));
        }
    }
    let names: Vec<String> = cfg.ports.iter().map(|p| p.name().to_string()).collect();
    let mut hosts = Vec::new();
    for h in &cfg.hosts {
        let ip: Ipv4Addr =
            h.ip.parse()
                .map_err(|_| format!("bad host address {:?}", h.ip))?;
        let port = *index
            .get(&h.port)
            .ok_or_else(|| format!("host {} names unknown port {:?}", h.ip, h.port))?;
        hosts.push(Host {
            ip: ip.octets(),
            port,
            mac: config::parse_mac(&h.mac)?,
            mode: h.mode.into(),
        });
    }
    let mut cross = Vec::new();
    for c in &cfg.cross {
        let port = *index
            .get(&c.port)
            .ok_or_else(|| format!("cross source names unknown port {:?}", c.port))?;
        cross.push(c.to_core(port)?);
    }
    let mut switch = Switch::new(
        SwitchConfig {
            ports: setups,
            hosts,
            flows: cfg.flows.to_core(),
            cross,
        },
        start,
    )?;
    if cfg.cross_paused {
        switch.pause_cross();
    }
    let mut tx_errors = vec![0u64; names.len()];

    // SAFETY: installing an async-signal-safe handler that only stores an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        // SIGUSR1: stop the in-switch sources (the rest keeps forwarding); SIGUSR2: start them
        libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t);
        libc::signal(libc::SIGUSR2, on_usr2 as *const () as libc::sighandler_t);
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
    let mut status = match &cfg.telemetry.status_path {
        Some(p) => {
            let mut w = BufWriter::new(File::create(p).map_err(|e| format!("{p}: {e}"))?);
            writeln!(w, "{STATUS_HEADER}").map_err(|e| e.to_string())?;
            w.flush().map_err(|e| e.to_string())?;
            Some(w)
        }
        None => None,
    };
    let period_ns = ((cfg.telemetry.period_ms.max(0.1)) * 1e6) as u64;
    let busy_ns = cfg.busy_poll_us * 1000;
    let mut next_sample = start;
    let mut sample_k = 0u64;

    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut pfds: Vec<libc::pollfd> = sockets
        .iter()
        .map(|p| libc::pollfd {
            fd: p.fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    println!("ready ports={}", names.len());
    let _ = std::io::stdout().flush();

    while !STOP.load(Ordering::Relaxed) {
        let mut worked = false;
        if START_CROSS.swap(false, Ordering::Relaxed) {
            switch.start_cross(now_ns());
            println!("cross traffic started (SIGUSR2)");
            let _ = std::io::stdout().flush();
        }
        if STOP_CROSS.swap(false, Ordering::Relaxed) {
            switch.stop_cross(now_ns());
            println!("cross traffic stopped (SIGUSR1)");
            let _ = std::io::stdout().flush();
        }
        // receive
        for (si, port) in sockets.iter().enumerate() {
            let pi = first_port[si];
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
                if info.other_host {
                    // addressed to another machine's MAC (flooded by the network's switch): not
                    // this router's to forward, as the kernel's forwarding would not either
                    pool.push(buf);
                    continue;
                }
                let now = now_ns();
                if info.len > FRAME_CAP {
                    // larger than an MTU frame: offloads are on
                    switch.handle_oversized(pi, info.len);
                    pool.push(buf);
                    continue;
                }
                buf.truncate(info.len);
                match switch.handle_frame(pi, buf, info.csum_not_ready, now) {
                    Handled::Queued { .. } => {}
                    Handled::Dropped { frame, .. } | Handled::NotRouted { frame } => {
                        pool.push(frame)
                    }
                }
            }
        }
        // transmit what is due
        let now = now_ns();
        while let Some((pi, frame)) = switch.poll_transmit(now) {
            worked = true;
            let socket = &sockets[socket_of[pi]];
            match socket.send(&frame) {
                Ok(true) => {}
                Ok(false) => tx_errors[pi] += 1,
                Err(e) => return Err(format!("send on {}: {e}", socket.ifname)),
            }
            pool.push(frame);
        }
        // telemetry on an absolute schedule
        if now >= next_sample {
            if let Some(w) = telemetry.as_mut() {
                let t = clock_ns(libc::CLOCK_REALTIME) as f64 / 1e9;
                for (pi, name) in names.iter().enumerate() {
                    let c = switch.port_counters(pi);
                    let s = c.queue;
                    writeln!(
                        w,
                        "{t:.6},{},{},{},{},{},{},{},{},{},{}",
                        name,
                        s.backlog_bytes,
                        s.backlog_packets,
                        s.drops,
                        s.sent_bytes,
                        s.sent_packets,
                        s.overlimits,
                        s.delivered_bytes,
                        c.rx_bytes,
                        s.marks
                    )
                    .map_err(|e| e.to_string())?;
                }
                w.flush().map_err(|e| e.to_string())?;
            }
            if let Some(w) = status.as_mut() {
                write_status(w, &mut switch)?;
            }
            sample_k += 1;
            next_sample = start + sample_k * period_ns;
            if next_sample <= now {
                // fell behind: skip missed slots rather than burst
                sample_k = (now - start) / period_ns + 1;
                next_sample = start + sample_k * period_ns;
            }
        }
        switch.handle_timeout(now);
        if worked {
            continue;
        }
        // wait: spin for short waits, sleep (hrtimer, no slack) for long ones
        let wake = switch
            .poll_timeout()
            .map_or(next_sample, |t| t.min(next_sample));
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
    let fs = switch.flow_stats();
    let mut summary = String::from("{\"ports\": {");
    for (pi, name) in names.iter().enumerate() {
        let c = switch.port_counters(pi);
        let s = c.queue;
        if pi > 0 {
            summary.push_str(", ");
        }
        summary.push_str(&format!(
            "\"{}\": {{\"offered_packets\": {}, \"sent_bytes\": {}, \"sent_packets\": {}, \"drops\": {}, \"marks\": {}, \"overlimits\": {}, \"rx_bytes\": {}, \"rx_packets\": {}, \"not_routed\": {}, \"tx_errors\": {}}}",
            name, s.offered_packets, s.sent_bytes, s.sent_packets, s.drops, s.marks, s.overlimits, c.rx_bytes, c.rx_packets, c.not_routed, tx_errors[pi]
        ));
    }
    summary.push_str("}, \"cross\": [");
    for (i, x) in switch.cross_stats().iter().enumerate() {
        if i > 0 {
            summary.push_str(", ");
        }
        summary.push_str(&format!(
            "{{\"offered_packets\": {}, \"offered_bytes\": {}, \"delivered_bytes\": {}, \"drops\": {}, \"marks\": {}, \"running\": {}}}",
            x.offered_packets, x.offered_bytes, x.delivered_bytes, x.drops, x.marks, x.running
        ));
    }
    summary.push_str(&format!(
        "], \"flows\": {{\"tracked\": {}, \"managed_started\": {}, \"window_rewrites\": {}, \"ce_bytes\": {}, \"evictions\": {}, \"expired\": {}}}}}",
        fs.flows, fs.managed_flows_started, fs.window_rewrites, fs.ce_bytes, fs.evictions, fs.expired
    ));
    println!("summary {summary}");
    if let Some(mut w) = telemetry {
        let _ = w.flush();
    }
    if let Some(mut w) = status {
        let _ = w.flush();
    }
    Ok(())
}

/// One row of the status CSV (see [`STATUS_HEADER`]); takes (resets) the switch's lag.
fn write_status(w: &mut BufWriter<File>, switch: &mut Switch) -> Result<(), String> {
    let t = clock_ns(libc::CLOCK_REALTIME) as f64 / 1e9;
    let lag = switch.take_lag();
    let mean_us = if lag.events > 0 {
        lag.sum_ns as f64 / lag.events as f64 / 1e3
    } else {
        0.0
    };
    let xs = switch.cross_stats();
    let sum = |f: fn(&CrossStats) -> u64| xs.iter().map(f).sum::<u64>();
    writeln!(
        w,
        "{t:.6},{},{mean_us:.1},{:.1},{},{},{},{},{},{},{}",
        lag.events,
        lag.max_ns as f64 / 1e3,
        sum(|x| x.offered_packets),
        sum(|x| x.offered_bytes),
        sum(|x| x.delivered_packets),
        sum(|x| x.delivered_bytes),
        sum(|x| x.drops),
        sum(|x| x.marks),
        xs.iter().filter(|x| x.running).count()
    )
    .map_err(|e| e.to_string())?;
    w.flush().map_err(|e| e.to_string())
}
