//! Rewriting a captured RoCEv2 frame for injection from a fabric GPU: MACs, addresses, TTL /
//! hop limit, the checksums (with etherparse) and the ICRC (with [`rocefab_wire::roce::icrc`]).

use std::net::IpAddr;

use etherparse::checksum::Sum16BitWords;
use etherparse::UdpHeaderSlice;
use rocefab_wire::roce::frame::ETH_MIN_LEN;
use rocefab_wire::roce::icrc;

use super::classify::{l3, ETHERTYPE_IPV4, ETHERTYPE_IPV6};

/// Why a frame could not be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("frame truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("EtherType 0x{0:04x} is neither IPv4 nor IPv6")]
    NotIp(u16),
    #[error("the new addresses ({src}, {dst}) are not of the frame's IP family")]
    Family { src: IpAddr, dst: IpAddr },
    #[error("ICRC: {0}")]
    Icrc(#[from] rocefab_wire::roce::Error),
}

/// Rewrites a RoCEv2 Ethernet frame for injection: `dst_mac` / `src_mac`, EtherType of its IP
/// version (VLAN tags dropped), source and destination address, TTL / hop limit 64, the IPv4
/// header checksum, the UDP checksum (0 for IPv4; for IPv6 recomputed if the frame had one, else
/// 0), and the ICRC when `recompute_icrc` (else the captured one stays). Bytes after the IP
/// packet (Ethernet padding) are dropped, and a frame below 60 bytes is zero-padded.
pub fn rewrite(
    eth: &[u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src_ip: IpAddr,
    dst_ip: IpAddr,
    recompute_icrc: bool,
) -> Result<Vec<u8>, RewriteError> {
    let trunc = |needed: usize| RewriteError::Truncated { needed, available: eth.len() };
    let w = l3(eth).ok_or(trunc(14))?;
    let (et, ip) = (w.ether_type, w.payload_offset);
    let be16 = |h: &[u8], at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let ip_len = match et {
        ETHERTYPE_IPV4 => usize::from(be16(eth.get(ip..ip + 20).ok_or(trunc(ip + 20))?, 2)),
        ETHERTYPE_IPV6 => 40 + usize::from(be16(eth.get(ip..ip + 40).ok_or(trunc(ip + 40))?, 4)),
        other => return Err(RewriteError::NotIp(other)),
    };
    // IP header plus UDP header at least, whatever the length field says (0 in a TSO capture).
    let min = if et == ETHERTYPE_IPV4 { 28 } else { 48 };
    if ip_len < min {
        return Err(RewriteError::Truncated { needed: ip + min, available: ip + ip_len });
    }
    let packet = eth.get(ip..ip + ip_len).ok_or(trunc(ip + ip_len))?;
    let mut out = Vec::with_capacity(14 + ip_len.max(ETH_MIN_LEN));
    out.extend_from_slice(&dst_mac);
    out.extend_from_slice(&src_mac);
    out.extend_from_slice(&et.to_be_bytes());
    out.extend_from_slice(packet);
    let p = &mut out[14..];
    match (et, src_ip, dst_ip) {
        (ETHERTYPE_IPV4, IpAddr::V4(s), IpAddr::V4(d)) => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if ihl < 20 || p.len() < ihl + 8 {
                return Err(trunc(ip + ihl.max(20) + 8));
            }
            p[12..16].copy_from_slice(&s.octets());
            p[16..20].copy_from_slice(&d.octets());
            p[8] = 64;
            fill_ipv4_header_checksum(&mut p[..ihl]);
            p[ihl + 6..ihl + 8].copy_from_slice(&[0, 0]);
            if recompute_icrc {
                icrc::fill(p)?;
            }
        }
        (ETHERTYPE_IPV6, IpAddr::V6(s), IpAddr::V6(d)) => {
            if p.len() < 48 {
                return Err(trunc(ip + 48));
            }
            p[8..24].copy_from_slice(&s.octets());
            p[24..40].copy_from_slice(&d.octets());
            p[7] = 64;
            if recompute_icrc {
                icrc::fill(p)?;
            }
            if p[46..48] != [0, 0] {
                let c = udp_checksum_ipv6(p);
                p[46..48].copy_from_slice(&c.to_be_bytes());
            }
        }
        _ => return Err(RewriteError::Family { src: src_ip, dst: dst_ip }),
    }
    if out.len() < ETH_MIN_LEN {
        out.resize(ETH_MIN_LEN, 0);
    }
    Ok(out)
}

/// Sets the IPv4 header checksum (RFC 791) of `header` (the whole header, options included).
/// etherparse's one's-complement sum runs over the header bytes as they are: its
/// `Ipv4Header::calc_header_checksum` would rebuild the header from its fields and leave out
/// the reserved flag bit (RFC 791's bit 0), giving a wrong checksum for a frame captured with
/// that bit set.
fn fill_ipv4_header_checksum(header: &mut [u8]) {
    header[10..12].copy_from_slice(&[0, 0]);
    let c = Sum16BitWords::new().add_slice(header).ones_complement().to_be();
    header[10..12].copy_from_slice(&c.to_be_bytes());
}

/// The UDP checksum of an IPv6 packet `p` (no extension headers: UDP at 40, at least 48 bytes)
/// with etherparse (RFC 8200 §8.1 pseudo-header, 0 sent as 0xffff), over the UDP datagram as
/// its length field says (the whole IPv6 payload when that field is below 8 or beyond it).
/// For every frame whose UDP length is its IPv6 payload length this is the sum the hand-written
/// code it replaced computed; that code summed the whole IPv6 payload with its length in the
/// pseudo-header even when the UDP length field said less.
fn udp_checksum_ipv6(p: &[u8]) -> u16 {
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&p[8..24]);
    dst.copy_from_slice(&p[24..40]);
    let mut udp = UdpHeaderSlice::from_slice(&p[40..]).expect("the caller checked 48 bytes").to_header();
    udp.checksum = 0;
    let len = usize::from(udp.length);
    let end = if (8..=p.len() - 40).contains(&len) { 40 + len } else { p.len() };
    // Fails only for a payload beyond 4 GiB, which a Vec of a frame is not.
    udp.calc_checksum_ipv6_raw(src, dst, &p[48..end]).unwrap_or(0xffff)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::process::Command;

    use rocefab_wire::roce::{bth, Opcode, ParsedFrame, Repr, RoceFrame};

    use super::*;

    const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn frame(src: IpAddr, dst: IpAddr, payload: &[u8]) -> Vec<u8> {
        let h = Repr::new(bth::Repr::new(Opcode::SendOnly, 0x42, 7));
        RoceFrame::new(MAC_A, MAC_B, src, dst, h, payload).to_vec().unwrap()
    }

    /// The RFC 1071 sum of `b` folded, written out here as the oracle (not etherparse's).
    fn folded_sum(b: &[u8]) -> u16 {
        let mut s: u32 = b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn the_ipv4_header_checksum_covers_the_header_bytes_as_captured() {
        let mut f = frame(Ipv4Addr::new(10, 9, 0, 1).into(), Ipv4Addr::new(10, 9, 0, 2).into(), &[0x5a; 40]);
        // The reserved flag bit (RFC 791, bit 0 of the flags), which etherparse's header type
        // has no field for.
        f[14 + 6] |= 0x80;
        let (s, d) = (Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 2, 1, 1));
        let out = rewrite(&f, MAC_B, MAC_A, s.into(), d.into(), true).unwrap();
        let hdr = &out[14..34];
        assert_eq!(hdr[6] & 0x80, 0x80, "the reserved bit is kept");
        assert_eq!((&hdr[12..16], &hdr[16..20], hdr[8]), (&s.octets()[..], &d.octets()[..], 64));
        assert_eq!(folded_sum(hdr), 0xffff, "a valid header checksum over the bytes sent");
        // Why the checksum is not etherparse's Ipv4Header::calc_header_checksum: the header it
        // rebuilds from its fields has lost the bit, so its checksum would be wrong here.
        let typed = etherparse::Ipv4HeaderSlice::from_slice(hdr).unwrap().to_header().calc_header_checksum();
        assert_ne!(typed.to_be_bytes(), hdr[10..12]);
        assert!(ParsedFrame::parse(&out).unwrap().icrc.is_good());
    }

    /// (stored, recomputed) UDP checksum of the Ethernet frame `f` per scapy, which sums the
    /// datagram its UDP length says (the rest of the IPv6 payload is padding to it).
    fn scapy_udp_checksum(f: &[u8]) -> (String, String) {
        let script = r#"
import sys
from scapy.all import Ether, UDP, raw
p = Ether(bytes.fromhex(sys.argv[1]))
stored = p[UDP].chksum
del p[UDP].chksum
print(hex(stored), hex(Ether(raw(p))[UDP].chksum))
"#;
        let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
        let o = Command::new("/usr/bin/python3")
            .args(["-c", script, &hex])
            .output()
            .unwrap_or_else(|e| panic!("cannot run /usr/bin/python3 (scapy is needed for this test): {e}"));
        assert!(o.status.success(), "scapy: {}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        let (a, b) = out.trim().split_once(' ').unwrap();
        (a.to_string(), b.to_string())
    }

    #[test]
    fn the_ipv6_udp_checksum_is_the_one_scapy_computes() {
        let (s6, d6): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let (n6, m6): (Ipv6Addr, Ipv6Addr) = ("fd01::a".parse().unwrap(), "fd01::b".parse().unwrap());
        let f = frame(s6.into(), d6.into(), &[0x33; 101]);
        let out = rewrite(&f, MAC_B, MAC_A, n6.into(), m6.into(), true).unwrap();
        let (stored, scapy) = scapy_udp_checksum(&out);
        assert_eq!(stored, scapy);
        assert_ne!(stored, "0x0");
        // Four bytes in the IPv6 payload after the UDP datagram (its length field says less):
        // the checksum covers the datagram, as a receiver checks it.
        let mut g = f.clone();
        g.extend_from_slice(b"WXYZ");
        let plen = u16::from_be_bytes([g[18], g[19]]) + 4;
        g[18..20].copy_from_slice(&plen.to_be_bytes());
        let out = rewrite(&g, MAC_B, MAC_A, n6.into(), m6.into(), false).unwrap();
        assert_eq!(&out[out.len() - 4..], b"WXYZ", "the IPv6 payload is kept whole");
        let (stored, scapy) = scapy_udp_checksum(&out);
        assert_eq!(stored, scapy);
    }
}
