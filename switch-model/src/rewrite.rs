//! L3 forwarding rewrite of a routed frame, in place:
//!
//! - source MAC ← egress port MAC, destination MAC ← next-hop MAC (IEEE 802.3 header);
//! - one IEEE 802.1Q tag (TPID 0x8100 or 0x88a8) is skipped and kept;
//! - IPv4: TTL − 1 with the header checksum updated incrementally (RFC 1624, eqn. 3:
//!   `HC' = ~(~HC + ~m + m')`, where `m` is the 16-bit word holding TTL and protocol);
//! - IPv6: hop limit − 1 (RFC 8200 §3; IPv6 has no header checksum).
//!
//! The frame is untrusted: every length is checked, errors are returned, nothing panics.

use dataplane_common::ethertype;

/// Why a frame could not be rewritten (the caller counts and drops it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("frame of {0} bytes is too short for its headers")]
    Truncated(usize),
    #[error("EtherType {0:#06x} is neither IPv4 nor IPv6")]
    NotIp(u16),
    #[error("IP version field {0} does not match the EtherType")]
    BadVersion(u8),
    #[error("TTL / hop limit {0} would expire")]
    TtlExpired(u8),
}

const ETH_LEN: usize = 14;
const VLAN_LEN: usize = 4;

/// Rewrites `frame` (Ethernet header first, no FCS) for forwarding out of a port whose MAC is
/// `src` towards a next hop whose MAC is `dst`. Returns the packet's ECN codepoint (RFC 3168,
/// the low two bits of the IPv4 TOS / IPv6 traffic class) for the WRED statistics.
pub fn rewrite_l3(frame: &mut [u8], src: [u8; 6], dst: [u8; 6]) -> Result<u8, RewriteError> {
    let len = frame.len();
    if len < ETH_LEN {
        return Err(RewriteError::Truncated(len));
    }
    let mut l3 = ETH_LEN;
    let mut et = u16::from_be_bytes([frame[12], frame[13]]);
    if et == ethertype::VLAN || et == ethertype::QINQ {
        if len < ETH_LEN + VLAN_LEN {
            return Err(RewriteError::Truncated(len));
        }
        et = u16::from_be_bytes([frame[16], frame[17]]);
        l3 += VLAN_LEN;
    }
    let ecn = match et {
        ethertype::IPV4 => {
            let ip = frame.get_mut(l3..l3 + 20).ok_or(RewriteError::Truncated(len))?;
            if ip[0] >> 4 != 4 {
                return Err(RewriteError::BadVersion(ip[0] >> 4));
            }
            let ttl = ip[8];
            if ttl <= 1 {
                return Err(RewriteError::TtlExpired(ttl));
            }
            let old = u16::from_be_bytes([ip[8], ip[9]]);
            ip[8] = ttl - 1;
            let new = u16::from_be_bytes([ip[8], ip[9]]);
            let hc = u16::from_be_bytes([ip[10], ip[11]]);
            ip[10..12].copy_from_slice(&incremental_checksum(hc, old, new).to_be_bytes());
            ip[1] & 3
        }
        ethertype::IPV6 => {
            let ip = frame.get_mut(l3..l3 + 40).ok_or(RewriteError::Truncated(len))?;
            if ip[0] >> 4 != 6 {
                return Err(RewriteError::BadVersion(ip[0] >> 4));
            }
            let hl = ip[7];
            if hl <= 1 {
                return Err(RewriteError::TtlExpired(hl));
            }
            ip[7] = hl - 1;
            (ip[1] >> 4) & 3
        }
        other => return Err(RewriteError::NotIp(other)),
    };
    frame[0..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
    Ok(ecn)
}

/// RFC 1624 eqn. 3: the checksum after one 16-bit word changes from `old` to `new`.
#[inline]
pub fn incremental_checksum(hc: u16, old: u16, new: u16) -> u16 {
    // ~HC + ~m + m' in one's complement arithmetic, then complemented.
    let mut sum = (!hc) as u32 + (!old) as u32 + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpNumber, Ipv4Header, PacketBuilder, SlicedPacket};

    const SRC: [u8; 6] = [0x02, 0, 0, 0, 0xaa, 0x01];
    const DST: [u8; 6] = [0x02, 0, 0, 0, 0xbb, 0x02];

    fn ipv4_frame(ttl: u8, vlan: Option<u16>, payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([1, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2]);
        let mut out = Vec::new();
        match vlan {
            Some(v) => b
                .single_vlan(v.try_into().unwrap())
                .ipv4([10, 9, 1, 1], [10, 9, 2, 1], ttl)
                .udp(40000, 4791)
                .write(&mut out, payload)
                .unwrap(),
            None => b.ipv4([10, 9, 1, 1], [10, 9, 2, 1], ttl).udp(40000, 4791).write(&mut out, payload).unwrap(),
        }
        out
    }

    fn ipv6_frame(hl: u8, vlan: Option<u16>) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([1, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2]);
        let mut out = Vec::new();
        let payload = [7u8; 100];
        match vlan {
            Some(v) => b
                .single_vlan(v.try_into().unwrap())
                .ipv6([0xfd; 16], [0xfe; 16], hl)
                .udp(40000, 4791)
                .write(&mut out, &payload)
                .unwrap(),
            None => b.ipv6([0xfd; 16], [0xfe; 16], hl).udp(40000, 4791).write(&mut out, &payload).unwrap(),
        }
        out
    }

    fn ipv4_of(frame: &[u8]) -> Ipv4Header {
        let p = SlicedPacket::from_ethernet(frame).unwrap();
        match p.net.unwrap() {
            etherparse::NetSlice::Ipv4(s) => s.header().to_header(),
            other => panic!("not ipv4: {other:?}"),
        }
    }

    #[test]
    fn ipv4_ttl_and_checksum_match_full_recomputation() {
        for vlan in [None, Some(100u16)] {
            // Every TTL exercises different carries in the one's complement sum.
            for ttl in 2..=255u8 {
                let mut f = ipv4_frame(ttl, vlan, &[0x5a; 40]);
                let before = f.clone();
                rewrite_l3(&mut f, SRC, DST).unwrap();
                let h = ipv4_of(&f);
                assert_eq!(h.time_to_live, ttl - 1);
                assert_eq!(h.protocol, IpNumber::UDP);
                assert_eq!(h.header_checksum, h.calc_header_checksum(), "ttl {ttl} vlan {vlan:?}");
                assert_eq!(&f[0..6], &DST);
                assert_eq!(&f[6..12], &SRC);
                // Nothing else changed (VLAN tag, addresses, payload).
                let l3 = if vlan.is_some() { 18 } else { 14 };
                assert_eq!(&f[12..l3 + 8], &before[12..l3 + 8]);
                assert_eq!(f[l3 + 9], before[l3 + 9]);
                assert_eq!(&f[l3 + 12..], &before[l3 + 12..]);
            }
        }
    }

    #[test]
    fn ipv4_checksum_with_options_and_odd_values() {
        // Random-looking headers (different ids, addresses, tos) to hit 0xffff / 0x0000 edges.
        for seed in 0u32..2000 {
            let mut h = Ipv4Header::new(
                (seed % 1400) as u16,
                (seed % 254 + 2) as u8,
                IpNumber::UDP,
                seed.wrapping_mul(2654435761).to_be_bytes(),
                seed.wrapping_mul(40503).to_be_bytes(),
            )
            .unwrap();
            h.identification = seed as u16 ^ 0xffff;
            h.dscp = etherparse::IpDscp::try_new((seed % 64) as u8).unwrap();
            h.header_checksum = h.calc_header_checksum();
            let mut f = vec![0u8; 14];
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            h.write(&mut f).unwrap();
            f.resize(14 + h.header_len() + h.payload_len().unwrap() as usize, 0);
            rewrite_l3(&mut f, SRC, DST).unwrap();
            let back = Ipv4Header::from_slice(&f[14..]).unwrap().0;
            assert_eq!(back.header_checksum, back.calc_header_checksum(), "seed {seed}");
        }
    }

    #[test]
    fn ipv6_hop_limit() {
        for vlan in [None, Some(7u16)] {
            let mut f = ipv6_frame(64, vlan);
            let before = f.clone();
            rewrite_l3(&mut f, SRC, DST).unwrap();
            let p = SlicedPacket::from_ethernet(&f).unwrap();
            let etherparse::NetSlice::Ipv6(s) = p.net.unwrap() else { panic!("not ipv6") };
            assert_eq!(s.header().hop_limit(), 63);
            assert_eq!(&f[0..6], &DST);
            assert_eq!(&f[6..12], &SRC);
            let l3 = if vlan.is_some() { 18 } else { 14 };
            assert_eq!(&f[l3 + 8..], &before[l3 + 8..], "addresses and payload unchanged");
            // UDP checksum is unaffected by the hop limit: etherparse agrees it is still valid.
            let udp = etherparse::UdpHeader::from_slice(&f[l3 + 40..]).unwrap().0;
            let ip = etherparse::Ipv6Header::from_slice(&f[l3..]).unwrap().0;
            assert_eq!(udp.checksum, udp.calc_checksum_ipv6(&ip, &f[l3 + 48..]).unwrap());
        }
    }

    #[test]
    fn expiring_ttl_is_refused_and_frame_untouched() {
        for ttl in [0u8, 1] {
            let mut f = ipv4_frame(ttl, None, &[]);
            let before = f.clone();
            assert_eq!(rewrite_l3(&mut f, SRC, DST), Err(RewriteError::TtlExpired(ttl)));
            assert_eq!(f, before);
        }
        let mut f = ipv6_frame(1, None);
        assert_eq!(rewrite_l3(&mut f, SRC, DST), Err(RewriteError::TtlExpired(1)));
    }

    #[test]
    fn truncation_at_every_length_is_an_error() {
        // (frame, end of the headers the rewrite needs)
        let cases = [
            (ipv4_frame(64, None, &[]), 14 + 20),
            (ipv4_frame(64, Some(5), &[]), 18 + 20),
            (ipv6_frame(64, None), 14 + 40),
            (ipv6_frame(64, Some(5)), 18 + 40),
        ];
        for (full, hdr_end) in cases {
            let mut ok = full[..hdr_end].to_vec();
            assert!(rewrite_l3(&mut ok, SRC, DST).is_ok(), "headers alone are enough");
            for cut in 0..hdr_end {
                let mut f = full[..cut].to_vec();
                assert!(matches!(rewrite_l3(&mut f, SRC, DST), Err(RewriteError::Truncated(_))), "cut at {cut}");
            }
        }
    }

    #[test]
    fn non_ip_and_wrong_version() {
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(rewrite_l3(&mut arp, SRC, DST), Err(RewriteError::NotIp(0x0806)));
        let mut f = ipv4_frame(64, None, &[]);
        f[14] = 0x65;
        assert_eq!(rewrite_l3(&mut f, SRC, DST), Err(RewriteError::BadVersion(6)));
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 §4 example: HC = 0xdd2f, m = 0x5555 → m' = 0x3285 gives HC' = 0x0000.
        assert_eq!(incremental_checksum(0xdd2f, 0x5555, 0x3285), 0x0000);
    }
}
