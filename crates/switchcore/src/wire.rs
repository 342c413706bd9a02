//! Header views in the smoltcp manner: `Ipv4Packet` / `TcpPacket` wrap raw bytes and read or
//! write fields in place (checked once at construction), while [`TcpRepr`] is the validated value
//! a caller reasons about. Every setter that changes a covered field keeps the checksum valid by
//! an incremental update (RFC 1624) instead of recomputing it.

use crate::checksum;

/// Ethernet header length (no VLAN tag).
pub const ETH_HEADER_LEN: usize = 14;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// Why bytes are not a usable header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than the header (or its stated length).
    Truncated,
    /// A field holds an impossible value (version, header length, total length).
    Malformed,
}

/// The two ECN bits of the IPv4 TOS byte (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    NotEct = 0,
    Ect1 = 1,
    Ect0 = 2,
    Ce = 3,
}

impl Ecn {
    fn from_bits(b: u8) -> Ecn {
        match b & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
}

/// The EtherType of an Ethernet frame, if it has a full header.
pub fn ethertype(frame: &[u8]) -> Option<u16> {
    (frame.len() >= ETH_HEADER_LEN).then(|| u16::from_be_bytes([frame[12], frame[13]]))
}

/// A raw IPv4 header view over a buffer that starts with the IPv4 header.
#[derive(Debug)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap `buf` after checking version, header length and total length against its size.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < 20 {
            return Err(WireError::Truncated);
        }
        if b[0] >> 4 != 4 {
            return Err(WireError::Malformed);
        }
        let ihl = usize::from(b[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
        if ihl < 20 || total < ihl {
            return Err(WireError::Malformed);
        }
        if b.len() < total {
            return Err(WireError::Truncated);
        }
        Ok(Ipv4Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[0] & 0x0f) * 4
    }
    /// Total length in bytes (header + payload) as stated in the header.
    pub fn total_len(&self) -> usize {
        usize::from(u16::from_be_bytes([self.b()[2], self.b()[3]]))
    }
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.b()[1])
    }
    pub fn ttl(&self) -> u8 {
        self.b()[8]
    }
    pub fn protocol(&self) -> u8 {
        self.b()[9]
    }
    pub fn header_checksum(&self) -> u16 {
        u16::from_be_bytes([self.b()[10], self.b()[11]])
    }
    pub fn src(&self) -> [u8; 4] {
        self.b()[12..16].try_into().unwrap()
    }
    pub fn dst(&self) -> [u8; 4] {
        self.b()[16..20].try_into().unwrap()
    }
    /// Whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(&self.b()[..self.header_len()], 0)) == 0xffff
    }
    /// Fragment offset or more-fragments set (a fragment carries no complete TCP header).
    pub fn is_fragment(&self) -> bool {
        let w = u16::from_be_bytes([self.b()[6], self.b()[7]]);
        w & 0x3fff != 0
    }
    /// The payload (transport header and data) within the stated total length.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn set_word(&mut self, at: usize, new: u16) {
        let b = self.buf.as_mut();
        let old = u16::from_be_bytes([b[at], b[at + 1]]);
        b[at..at + 2].copy_from_slice(&new.to_be_bytes());
        let hc = u16::from_be_bytes([b[10], b[11]]);
        let hc = checksum::update16(hc, old, new);
        b[10..12].copy_from_slice(&hc.to_be_bytes());
    }

    /// Set the ECN bits, fixing the header checksum incrementally.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = self.b();
        let word = u16::from_be_bytes([b[0], b[1]]);
        self.set_word(0, (word & !3) | ecn as u16);
    }

    /// Decrement TTL (caller checks it is > 1), fixing the header checksum incrementally.
    pub fn decrement_ttl(&mut self) {
        let b = self.b();
        let word = u16::from_be_bytes([b[8], b[9]]);
        self.set_word(8, word - 0x0100);
    }

    /// The payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), self.total_len());
        &mut self.buf.as_mut()[h..t]
    }

    /// Recompute the header checksum from scratch (only for building packets).
    pub fn fill_checksum(&mut self) {
        let h = self.header_len();
        let b = self.buf.as_mut();
        b[10] = 0;
        b[11] = 0;
        let c = checksum::checksum(&b[..h]);
        b[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

/// TCP flag bits (low byte of the flags word) plus ECE/CWR.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// A raw TCP header view over a buffer holding the whole TCP segment.
#[derive(Debug)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap `buf` after checking the data offset against its size.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < 20 {
            return Err(WireError::Truncated);
        }
        let off = usize::from(b[12] >> 4) * 4;
        if off < 20 {
            return Err(WireError::Malformed);
        }
        if b.len() < off {
            return Err(WireError::Truncated);
        }
        Ok(TcpPacket { buf })
    }
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.b()[0], self.b()[1]])
    }
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.b()[2], self.b()[3]])
    }
    pub fn seq(&self) -> u32 {
        u32::from_be_bytes(self.b()[4..8].try_into().unwrap())
    }
    pub fn ack(&self) -> u32 {
        u32::from_be_bytes(self.b()[8..12].try_into().unwrap())
    }
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[12] >> 4) * 4
    }
    pub fn flags(&self) -> u8 {
        self.b()[13]
    }
    pub fn window(&self) -> u16 {
        u16::from_be_bytes([self.b()[14], self.b()[15]])
    }
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.b()[16], self.b()[17]])
    }
    pub fn payload_len(&self) -> usize {
        self.b().len() - self.header_len()
    }
    /// Whether the checksum is correct for the given IPv4 addresses.
    pub fn verify_checksum(&self, src: [u8; 4], dst: [u8; 4]) -> bool {
        let b = self.b();
        let acc = checksum::pseudo_header(src, dst, PROTO_TCP, b.len() as u16);
        checksum::fold(checksum::sum(b, acc)) == 0xffff
    }
    /// The MSS and window-scale options, if present (only meaningful on SYNs).
    pub fn options(&self) -> (Option<u16>, Option<u8>) {
        let opts = &self.b()[20..self.header_len()];
        let (mut mss, mut ws) = (None, None);
        let mut i = 0;
        while i < opts.len() {
            match opts[i] {
                0 => break,
                1 => i += 1,
                kind => {
                    if i + 1 >= opts.len() {
                        break;
                    }
                    let len = usize::from(opts[i + 1]);
                    if len < 2 || i + len > opts.len() {
                        break;
                    }
                    match (kind, len) {
                        (2, 4) => mss = Some(u16::from_be_bytes([opts[i + 2], opts[i + 3]])),
                        (3, 3) => ws = Some(opts[i + 2].min(14)),
                        _ => {}
                    }
                    i += len;
                }
            }
        }
        (mss, ws)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn set_word(&mut self, at: usize, new: u16) {
        let b = self.buf.as_mut();
        let old = u16::from_be_bytes([b[at], b[at + 1]]);
        b[at..at + 2].copy_from_slice(&new.to_be_bytes());
        let c = u16::from_be_bytes([b[16], b[17]]);
        let c = checksum::update16(c, old, new);
        b[16..18].copy_from_slice(&c.to_be_bytes());
    }
    /// Set the advertised window field, fixing the checksum incrementally.
    pub fn set_window(&mut self, w: u16) {
        self.set_word(14, w);
    }
    /// Replace the flag byte, fixing the checksum incrementally.
    pub fn set_flags(&mut self, f: u8) {
        let b = self.b();
        let word = u16::from_be_bytes([b[12], f]);
        self.set_word(12, word);
    }
    /// Compute the checksum from scratch (for packets whose checksum was left to offload).
    pub fn fill_checksum(&mut self, src: [u8; 4], dst: [u8; 4]) {
        let b = self.buf.as_mut();
        b[16] = 0;
        b[17] = 0;
        let acc = checksum::pseudo_header(src, dst, PROTO_TCP, b.len() as u16);
        let c = !checksum::fold(checksum::sum(b, acc));
        b[16..18].copy_from_slice(&c.to_be_bytes());
    }
}

/// The validated values of a TCP segment that the flow logic needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub payload_len: u32,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub ecn: Ecn,
}

impl TcpRepr {
    /// Parse an IPv4 packet carrying a complete, unfragmented TCP segment.
    pub fn parse(ip: &[u8]) -> Result<TcpRepr, WireError> {
        let ipp = Ipv4Packet::new_checked(ip)?;
        if ipp.protocol() != PROTO_TCP || ipp.is_fragment() {
            return Err(WireError::Malformed);
        }
        let tcp = TcpPacket::new_checked(ipp.payload())?;
        let (mss, wscale) = if tcp.flags() & flags::SYN != 0 {
            tcp.options()
        } else {
            (None, None)
        };
        Ok(TcpRepr {
            src: ipp.src(),
            dst: ipp.dst(),
            src_port: tcp.src_port(),
            dst_port: tcp.dst_port(),
            seq: tcp.seq(),
            ack: tcp.ack(),
            flags: tcp.flags(),
            window: tcp.window(),
            payload_len: tcp.payload_len() as u32,
            mss,
            wscale,
            ecn: ipp.ecn(),
        })
    }
}

/// Fill the transport checksum of an IPv4 packet whose checksum was left to offload (TCP/UDP).
/// Returns false for other protocols or malformed packets.
pub fn fill_transport_checksum(ip: &mut [u8]) -> bool {
    let Ok(mut ipp) = Ipv4Packet::new_checked(&mut *ip) else {
        return false;
    };
    if ipp.is_fragment() {
        return false;
    }
    let (src, dst, proto) = (ipp.src(), ipp.dst(), ipp.protocol());
    let payload = ipp.payload_mut();
    let at = match proto {
        PROTO_TCP if payload.len() >= 20 => 16,
        PROTO_UDP if payload.len() >= 8 => 6,
        _ => return false,
    };
    payload[at] = 0;
    payload[at + 1] = 0;
    let acc = checksum::pseudo_header(src, dst, proto, payload.len() as u16);
    let mut c = !checksum::fold(checksum::sum(payload, acc));
    if proto == PROTO_UDP && c == 0 {
        c = 0xffff;
    }
    payload[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Build an IPv4/TCP packet (for tests and tools): valid checksums, the given options bytes.
#[allow(clippy::too_many_arguments)]
pub fn build_tcp(
    src: [u8; 4],
    dst: [u8; 4],
    ports: (u16, u16),
    seq: u32,
    ack: u32,
    flag_bits: u8,
    window: u16,
    options: &[u8],
    payload_len: usize,
    ecn: Ecn,
) -> Vec<u8> {
    let opt_len = options.len().div_ceil(4) * 4;
    let tcp_len = 20 + opt_len + payload_len;
    let total = 20 + tcp_len;
    let mut b = vec![0u8; total];
    b[0] = 0x45;
    b[1] = ecn as u8;
    b[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    b[6] = 0x40;
    b[8] = 64;
    b[9] = PROTO_TCP;
    b[12..16].copy_from_slice(&src);
    b[16..20].copy_from_slice(&dst);
    {
        let t = &mut b[20..];
        t[0..2].copy_from_slice(&ports.0.to_be_bytes());
        t[2..4].copy_from_slice(&ports.1.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..12].copy_from_slice(&ack.to_be_bytes());
        t[12] = (((20 + opt_len) / 4) as u8) << 4;
        t[13] = flag_bits;
        t[14..16].copy_from_slice(&window.to_be_bytes());
        t[20..20 + options.len()].copy_from_slice(options);
        for (i, x) in t[20 + opt_len..].iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
    }
    let mut ip = Ipv4Packet::new_checked(&mut b[..]).unwrap();
    ip.fill_checksum();
    let mut tcp = TcpPacket::new_checked(ip.payload_mut()).unwrap();
    tcp.fill_checksum(src, dst);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 4] = [10, 77, 1, 1];
    const B: [u8; 4] = [10, 77, 2, 1];

    #[test]
    fn parse_syn_options() {
        let opts = [2, 4, 0x05, 0xb4, 1, 3, 3, 7];
        let p = build_tcp(
            A,
            B,
            (1000, 5201),
            7,
            0,
            flags::SYN,
            64240,
            &opts,
            0,
            Ecn::NotEct,
        );
        let r = TcpRepr::parse(&p).unwrap();
        assert_eq!(r.mss, Some(1460));
        assert_eq!(r.wscale, Some(7));
        assert_eq!(r.src_port, 1000);
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert!(ip.verify_checksum());
        assert!(TcpPacket::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(A, B));
    }

    #[test]
    fn set_ecn_keeps_checksum() {
        let mut p = build_tcp(A, B, (1, 2), 1, 1, flags::ACK, 100, &[], 100, Ecn::Ect0);
        let mut ip = Ipv4Packet::new_checked(&mut p[..]).unwrap();
        ip.set_ecn(Ecn::Ce);
        assert_eq!(ip.ecn(), Ecn::Ce);
        assert!(ip.verify_checksum());
        ip.decrement_ttl();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn truncated_is_rejected() {
        let p = build_tcp(A, B, (1, 2), 1, 1, flags::ACK, 100, &[], 10, Ecn::NotEct);
        assert_eq!(
            Ipv4Packet::new_checked(&p[..30]).unwrap_err(),
            WireError::Truncated
        );
        assert!(TcpRepr::parse(&p[..19]).is_err());
    }

    #[test]
    fn fill_transport_checksum_repairs_partial() {
        let mut p = build_tcp(A, B, (1, 2), 1, 1, flags::ACK, 100, &[], 33, Ecn::NotEct);
        p[36] ^= 0x55; // garble the TCP checksum (as offload leaves a partial sum)
        assert!(fill_transport_checksum(&mut p));
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert!(TcpPacket::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(A, B));
    }
}
