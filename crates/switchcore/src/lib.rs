//! The switch's logic as a pure library: no I/O, no clock. Every call that depends on time takes
//! `now_ns` (nanoseconds on any monotonic clock the caller chooses), so the userspace switch
//! drives it with real time and a simulator can drive it with virtual time (smoltcp /
//! quinn-proto style).
//!
//! Layers:
//! - [`checksum`]: Internet checksum and its incremental update (RFC 1624).
//! - [`wire`]: raw-bytes views of Ethernet, IPv4 and TCP headers (`*Packet`) separate from the
//!   validated values read out of them ([`wire::TcpRepr`]).
//! - [`queue`]: one egress port: token-bucket rate, fixed propagation delay, byte/packet limit,
//!   droptail or RED with ECN marking.
//! - [`flow`]: per-flow TCP state for DCTCP-in-the-switch (AC/DC style) and congestion-control
//!   virtualization (VCC) for legacy hosts.
//! - [`switch`]: the whole switch as one endpoint: routing, the flow logic and the ports'
//!   queues behind `handle_frame` / `poll_transmit` / `poll_timeout`.
//! - [`window`]: DCTCP's window arithmetic (α, cut, slow start, additive increase), used by
//!   [`flow`] on real headers and by the simulator's packet-level bottleneck on virtual packets.

#![forbid(unsafe_code)]

pub mod checksum;
pub mod cross;
pub mod flow;
pub mod queue;
pub mod rng;
pub mod switch;
pub mod window;
pub mod wire;
