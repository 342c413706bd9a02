//! The switch's configuration file (JSON, written by shufflelab's Python controller). Units are
//! in the field names; every field but `ports` and `hosts` has a default.

use serde::Deserialize;
use switchcore::cross::{CrossConfig, Pattern};
use switchcore::flow::{FlowConfig, Mode};
use switchcore::queue::{Discipline, PortConfig, RedConfig};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The switch's ports: interfaces in the switch's namespace.
    pub ports: Vec<PortSpec>,
    /// Forwarding table: every host reachable through the switch.
    pub hosts: Vec<HostSpec>,
    #[serde(default)]
    pub telemetry: Telemetry,
    #[serde(default)]
    pub flows: FlowSpec,
    /// Waits shorter than this are spun (busy-poll) instead of slept, in microseconds.
    #[serde(default = "default_busy_poll_us")]
    pub busy_poll_us: u64,
    /// Pin the switch to this CPU (none: let the scheduler choose).
    #[serde(default)]
    pub cpu: Option<usize>,
    /// Traffic sources inside the switch (virtual UDP packets into a port's queue).
    #[serde(default)]
    pub cross: Vec<CrossSpec>,
    /// The sources wait for SIGUSR2 to start (instead of starting with the switch).
    #[serde(default)]
    pub cross_paused: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossSpec {
    /// The port (interface name) whose egress queue the packets enter.
    pub port: String,
    /// Mean offered rate in bit/s of Ethernet frame bytes (as the port's `rate_bps`).
    pub rate_bps: u64,
    /// Every packet's length in bytes (default 1514: a 1472-byte UDP datagram's frame).
    #[serde(default = "default_frame_bytes")]
    pub frame_bytes: u64,
    #[serde(default)]
    pub pattern: PatternSpec,
    /// `onoff`: sending period (ms), at rate · (on + off) / on.
    #[serde(default)]
    pub on_ms: f64,
    /// `onoff`: silent period (ms).
    #[serde(default)]
    pub off_ms: f64,
    /// The packets are ECN-capable (RED marks them instead of dropping).
    #[serde(default)]
    pub ect: bool,
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_frame_bytes() -> u64 {
    1514
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PatternSpec {
    #[default]
    Constant,
    Poisson,
    Onoff,
}

impl CrossSpec {
    /// The core's source on port index `port`, or why this one is invalid.
    pub fn to_core(&self, port: usize) -> Result<CrossConfig, String> {
        let pattern = match self.pattern {
            PatternSpec::Constant => Pattern::Constant,
            PatternSpec::Poisson => Pattern::Poisson,
            PatternSpec::Onoff => {
                if !(self.on_ms > 0.0 && self.off_ms >= 0.0) {
                    return Err(format!(
                        "cross source on {}: pattern onoff needs on_ms > 0 and off_ms >= 0",
                        self.port
                    ));
                }
                Pattern::OnOff {
                    on_ns: (self.on_ms * 1e6).round() as u64,
                    off_ns: (self.off_ms * 1e6).round() as u64,
                }
            }
        };
        if self.rate_bps < 8 || self.frame_bytes == 0 {
            return Err(format!(
                "cross source on {}: rate_bps must be >= 8 and frame_bytes > 0",
                self.port
            ));
        }
        Ok(CrossConfig {
            port,
            rate_bytes_per_s: self.rate_bps / 8,
            frame_bytes: self.frame_bytes,
            pattern,
            ect: self.ect,
            seed: self.seed,
        })
    }
}

fn default_busy_poll_us() -> u64 {
    50
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    /// Interface name in the switch's namespace.
    pub ifname: String,
    /// The port's name (hosts, sources and telemetry rows name it by this; default: `ifname`).
    /// Ports of one interface are that interface's queues: each host's packets take its port's
    /// queue and leave through the interface (a one-armed router holding both directions of a
    /// link, a queue per direction).
    #[serde(default)]
    pub name: Option<String>,
    /// Egress rate in bit/s of Ethernet frame bytes (as HTB counts); 0 = unlimited.
    #[serde(default)]
    pub rate_bps: u64,
    /// Token-bucket depth in bytes (default: 1 ms of the rate, at least two 1514-byte frames).
    #[serde(default)]
    pub burst_bytes: Option<u64>,
    /// One-way propagation delay added after the queue, in microseconds.
    #[serde(default)]
    pub delay_us: f64,
    /// Queue limit in bytes (default 1 MiB unless `queue_packets` is given).
    #[serde(default)]
    pub queue_bytes: Option<u64>,
    /// Queue limit in packets.
    #[serde(default)]
    pub queue_packets: Option<u32>,
    #[serde(default)]
    pub discipline: DisciplineSpec,
    /// RED parameters (required when `discipline` is `red`).
    #[serde(default)]
    pub red: Option<RedSpec>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DisciplineSpec {
    #[default]
    Droptail,
    Red,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedSpec {
    pub min_bytes: u64,
    pub max_bytes: u64,
    #[serde(default = "default_max_p")]
    pub max_p: f64,
    /// EWMA weight of the average queue; none = instantaneous queue (DCTCP-style marking).
    #[serde(default)]
    pub ewma_weight: Option<f64>,
    #[serde(default = "default_true")]
    pub ecn: bool,
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_max_p() -> f64 {
    0.1
}
fn default_true() -> bool {
    true
}
fn default_seed() -> u64 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// IPv4 address of the host ("10.77.1.1").
    pub ip: String,
    /// MAC address of the host's interface ("aa:bb:cc:dd:ee:ff").
    pub mac: String,
    /// The port (interface name) the host hangs off.
    pub port: String,
    /// What the switch does with TCP flows this host sends.
    #[serde(default)]
    pub mode: ModeSpec,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ModeSpec {
    #[default]
    Off,
    Dctcp,
    Vcc,
}

impl From<ModeSpec> for Mode {
    fn from(m: ModeSpec) -> Mode {
        match m {
            ModeSpec::Off => Mode::Off,
            ModeSpec::Dctcp => Mode::Dctcp,
            ModeSpec::Vcc => Mode::Vcc,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    /// CSV output (none: no telemetry).
    #[serde(default)]
    pub path: Option<String>,
    /// Sampling period in milliseconds (≥ 1 ms is supported; smaller is clamped to 0.1 ms).
    #[serde(default = "default_period_ms")]
    pub period_ms: f64,
    /// CSV of the switch's own state on the same schedule (none: not written): its lag behind
    /// its schedule and the in-switch sources' counters.
    #[serde(default)]
    pub status_path: Option<String>,
}

fn default_period_ms() -> f64 {
    100.0
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry {
            path: None,
            period_ms: default_period_ms(),
            status_path: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    #[serde(default = "default_g")]
    pub g: f64,
    #[serde(default = "default_max_flows")]
    pub max_flows: usize,
    #[serde(default = "default_idle_s")]
    pub idle_timeout_s: f64,
}

fn default_g() -> f64 {
    1.0 / 16.0
}
fn default_max_flows() -> usize {
    4096
}
fn default_idle_s() -> f64 {
    60.0
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            g: default_g(),
            max_flows: default_max_flows(),
            idle_timeout_s: default_idle_s(),
        }
    }
}

impl FlowSpec {
    pub fn to_core(&self) -> FlowConfig {
        FlowConfig {
            g: self.g,
            max_flows: self.max_flows,
            idle_timeout_ns: (self.idle_timeout_s * 1e9) as u64,
            ..FlowConfig::default()
        }
    }
}

impl PortSpec {
    /// What hosts, sources and telemetry call this port.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.ifname)
    }

    /// The core's port configuration, or why this one is invalid.
    pub fn to_core(&self) -> Result<PortConfig, String> {
        let rate_bytes = self.rate_bps / 8;
        let burst = self
            .burst_bytes
            .unwrap_or_else(|| (rate_bytes / 1000).max(2 * 1514))
            .max(1514);
        let discipline = match (self.discipline, &self.red) {
            (DisciplineSpec::Droptail, _) => Discipline::DropTail,
            (DisciplineSpec::Red, None) => {
                return Err(format!(
                    "port {}: discipline red needs a [red] table",
                    self.name()
                ))
            }
            (DisciplineSpec::Red, Some(r)) => {
                if r.min_bytes > r.max_bytes || !(0.0..=1.0).contains(&r.max_p) {
                    return Err(format!(
                        "port {}: red needs min_bytes <= max_bytes and 0 <= max_p <= 1",
                        self.name()
                    ));
                }
                Discipline::Red(RedConfig {
                    min_bytes: r.min_bytes,
                    max_bytes: r.max_bytes,
                    max_p: r.max_p,
                    ewma_weight: r.ewma_weight,
                    ecn: r.ecn,
                    gentle: false,
                    seed: r.seed,
                })
            }
        };
        if self.delay_us < 0.0 {
            return Err(format!("port {}: delay_us must be >= 0", self.name()));
        }
        let limit_bytes = match (self.queue_bytes, self.queue_packets) {
            (Some(b), _) => Some(b),
            (None, Some(_)) => None,
            (None, None) => Some(1 << 20),
        };
        Ok(PortConfig {
            rate_bytes_per_s: rate_bytes,
            burst_bytes: burst,
            delay_ns: (self.delay_us * 1000.0).round() as u64,
            limit_bytes,
            limit_packets: self.queue_packets,
            discipline,
        })
    }
}

/// Parse "aa:bb:cc:dd:ee:ff".
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC address {s:?}"));
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC address {s:?}"))?;
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_config() {
        let c: Config = serde_json::from_str(
            r#"{"ports": [{"ifname": "h1", "rate_bps": 100000000, "delay_us": 2000,
                 "queue_bytes": 100000, "discipline": "red",
                 "red": {"min_bytes": 30000, "max_bytes": 60000}}],
               "hosts": [{"ip": "10.77.1.1", "mac": "02:00:00:00:00:01", "port": "h1", "mode": "vcc"}],
               "telemetry": {"path": "/tmp/x.csv", "period_ms": 1}}"#,
        )
        .unwrap();
        let p = c.ports[0].to_core().unwrap();
        assert_eq!(p.rate_bytes_per_s, 12_500_000);
        assert_eq!(p.burst_bytes, 12_500);
        assert_eq!(p.delay_ns, 2_000_000);
        assert!(matches!(p.discipline, Discipline::Red(_)));
        assert_eq!(c.hosts[0].mode, ModeSpec::Vcc);
        assert_eq!(parse_mac(&c.hosts[0].mac).unwrap()[5], 1);
    }

    #[test]
    fn rejects_unknown_fields_and_bad_red() {
        assert!(
            serde_json::from_str::<Config>(r#"{"ports": [], "hosts": [], "bogus": 1}"#).is_err()
        );
        let p: PortSpec = serde_json::from_str(r#"{"ifname": "a", "discipline": "red"}"#).unwrap();
        assert!(p.to_core().is_err());
    }

    #[test]
    fn a_port_is_named_by_its_interface_unless_named() {
        let c: Config = serde_json::from_str(
            r#"{"ports": [{"ifname": "data0", "name": "sw1"}, {"ifname": "data0", "name": "sw2"},
                          {"ifname": "r1"}], "hosts": []}"#,
        )
        .unwrap();
        let names: Vec<&str> = c.ports.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["sw1", "sw2", "r1"]);
    }

    #[test]
    fn parses_cross_sources() {
        let c: Config = serde_json::from_str(
            r#"{"ports": [{"ifname": "h2"}], "hosts": [],
               "cross": [{"port": "h2", "rate_bps": 50000000, "pattern": "onoff", "on_ms": 10, "off_ms": 30},
                         {"port": "h2", "rate_bps": 8000, "pattern": "poisson", "seed": 4}],
               "telemetry": {"status_path": "/tmp/s.csv"}}"#,
        )
        .unwrap();
        let a = c.cross[0].to_core(0).unwrap();
        assert_eq!(a.rate_bytes_per_s, 6_250_000);
        assert_eq!(a.frame_bytes, 1514);
        assert_eq!(
            a.pattern,
            Pattern::OnOff {
                on_ns: 10_000_000,
                off_ns: 30_000_000
            }
        );
        assert_eq!(c.cross[1].to_core(0).unwrap().pattern, Pattern::Poisson);
        let bad: CrossSpec =
            serde_json::from_str(r#"{"port": "h2", "rate_bps": 1000, "pattern": "onoff"}"#)
                .unwrap();
        assert!(bad.to_core(0).unwrap_err().contains("on_ms"));
        assert!(
            serde_json::from_str::<CrossSpec>(r#"{"port": "h2", "rate_bps": 1, "x": 1}"#).is_err()
        );
    }
}
