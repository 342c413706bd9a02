//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624), the way a switch must
//! fix headers after changing a field without re-reading the whole packet.

/// One's-complement sum of `data` (16-bit big-endian words, odd byte padded) added to `acc`,
/// not folded.
pub fn sum(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u32::from(*b) << 8;
    }
    acc
}

/// Fold a 32-bit accumulator into 16 bits (end-around carry).
pub fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum field value for `data` (complement of the folded sum).
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data, 0))
}

/// RFC 1624 eqn. 3: the new checksum `HC' = ~(~HC + ~m + m')` after a 16-bit word of the covered
/// data changed from `old` to `new`.
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    let acc = u32::from(!hc) + u32::from(!old) + u32::from(new);
    !fold(acc)
}

/// [`update16`] for a 32-bit field (two words).
pub fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let hc = update16(hc, (old >> 16) as u16, (new >> 16) as u16);
    update16(hc, old as u16, new as u16)
}

/// The IPv4 pseudo-header sum for a transport checksum (not folded).
pub fn pseudo_header(src: [u8; 4], dst: [u8; 4], protocol: u8, length: u16) -> u32 {
    let mut acc = sum(&src, 0);
    acc = sum(&dst, acc);
    acc += u32::from(protocol);
    acc += u32::from(length);
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: sum of 0001 f203 f4f5 f6f7 = ddf2 (folded)
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn incremental_matches_full() {
        let mut data = [0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01];
        let before = checksum(&data);
        let old = u16::from_be_bytes([data[0], data[1]]);
        data[1] = 0x03;
        let new = u16::from_be_bytes([data[0], data[1]]);
        assert_eq!(update16(before, old, new), checksum(&data));
    }
}
