//! Packet trimming: what a switch does to a packet its shared buffer would drop on a queue that
//! trims (`qos.trim`, docs/src/lossless-qos.md "Packet trimming").
//!
//! OCP SAI (PR #2077, `doc/SAI-Proposal-Packet-Trimming.md` in opencomputeproject/SAI): a queue
//! whose buffer profile has `SAI_BUFFER_PROFILE_ATTR_PACKET_ADMISSION_FAIL_ACTION` =
//! `SAI_BUFFER_PROFILE_PACKET_ADMISSION_FAIL_ACTION_DROP_AND_TRIM` drops a packet that fails
//! admission and sends a copy cut to `SAI_SWITCH_ATTR_PACKET_TRIM_SIZE` bytes (@default 128),
//! with its DSCP set to `SAI_SWITCH_ATTR_PACKET_TRIM_DSCP_VALUE` and "the IP length and checksum
//! fields updated", through queue `SAI_SWITCH_ATTR_PACKET_TRIM_QUEUE_INDEX` of the same egress
//! port; the original still counts as dropped (`SAI_QUEUE_STAT_DROPPED_PACKETS`), the trim in
//! `SAI_QUEUE_STAT_TRIM_PACKETS`. SONiC's packet-trimming HLD (sonic-net/SONiC
//! `doc/packet_trimming/packet-trimming-design.md`) configures the same three values
//! (`size`, `dscp_value`, `queue_index`) and the per-queue `packet_discard_action: trim`.
//!
//! [`trim_frame`] does the cut in place, on the frame as the switch holds it (Ethernet header
//! first, no FCS). The size counts the whole frame from the first byte of the Ethernet header
//! (the 14-byte header, and a 4-byte 802.1Q tag if there is one, are part of it). Only IPv4 or
//! IPv6 packets carrying UDP directly (no IPv6 extension header, no IPv4 fragment) whose frame is
//! longer than the size are trimmed; the caller drops anything else as before. The cut packet:
//! - IPv4: total length = what is left of it, DSCP = the trim DSCP (the ECN bits kept), header
//!   checksum recomputed (RFC 791); UDP length = what is left of the datagram, UDP checksum 0
//!   ("no checksum", RFC 768: the payload it covered is gone);
//! - IPv6: payload length and traffic class likewise (RFC 8200 §3); UDP length, and the UDP
//!   checksum recomputed over the pseudo-header and what is left (RFC 8200 §8.1: zero is not
//!   allowed over IPv6).
//!
//! Headers are read with etherparse; nothing allocates; the frame is untrusted: every length is
//! checked and nothing panics.
use etherparse::{IpDscp, IpNumber, Ipv4Header, Ipv6Header, UdpHeader};

use dataplane_common::ethertype;

/// `SAI_SWITCH_ATTR_PACKET_TRIM_SIZE` @default: a trimmed frame's length in bytes.
pub const DEFAULT_SIZE: u32 = 128;
/// Smallest trim size accepted: an Ethernet frame of minimum size plus its 4 FCS bytes, so a
/// trimmed frame never needs padding, and room for Ethernet, IPv4 and UDP headers.
pub const MIN_SIZE: u32 = 64;
/// Largest trim size accepted: the top of the range NVIDIA's Spectrum switches take
/// (Cumulus Linux 5.14 "Packet Trimming": 256..=1024 bytes). Always within the first UMEM chunk
/// of a frame, which holds its headers.
pub const MAX_SIZE: u32 = 1024;

const ETH_LEN: usize = 14;
const VLAN_LEN: usize = 4;
const UDP_LEN: usize = 8;

/// A frame [`trim_frame`] cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trimmed {
    /// Bytes cut off the end of the frame (its length before, less the trim size).
    pub removed: usize,
}

/// Why a frame is not trimmed (the caller drops it, as it would without trimming).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotTrimmed {
    #[error("the frame is not longer than the trim size")]
    Short,
    #[error("neither IPv4 nor IPv6")]
    NotIp,
    #[error("the IP packet does not carry UDP directly")]
    NotUdp,
    #[error("an IPv4 fragment")]
    Fragment,
    #[error("its headers do not fit the trim size")]
    HeadersTooLong,
    #[error("its IP or UDP lengths do not match the frame")]
    Malformed,
}

/// Cuts the frame whose first bytes are `head` (all of it, or the first part of a multi-buffer
/// frame: at least the first `size` bytes) and whose whole length is `len` to `size` bytes, sets
/// its DSCP to `dscp` and fixes its lengths and checksums (module docs). On success the caller
/// sends the first `size` bytes of `head` and gives back the rest of the frame; on an error
/// `head` is unchanged.
pub fn trim_frame(head: &mut [u8], len: usize, size: usize, dscp: u8) -> Result<Trimmed, NotTrimmed> {
    if len <= size {
        return Err(NotTrimmed::Short);
    }
    let dscp = IpDscp::try_new(dscp).map_err(|_| NotTrimmed::Malformed)?;
    if head.len() < size || head.len() > len || size < ETH_LEN {
        return Err(NotTrimmed::HeadersTooLong);
    }
    let mut l3 = ETH_LEN;
    let mut et = u16::from_be_bytes([head[12], head[13]]);
    if et == ethertype::VLAN || et == ethertype::QINQ {
        l3 += VLAN_LEN;
        let inner = head[..size].get(16..18).ok_or(NotTrimmed::HeadersTooLong)?;
        et = u16::from_be_bytes([inner[0], inner[1]]);
    }
    // The headers must lie within the bytes that stay.
    let kept = &head[..size];
    match et {
        ethertype::IPV4 => {
            let (mut ip, _) = Ipv4Header::from_slice(kept.get(l3..).ok_or(NotTrimmed::HeadersTooLong)?)
                .map_err(|_| NotTrimmed::HeadersTooLong)?;
            if ip.protocol != IpNumber::UDP {
                return Err(NotTrimmed::NotUdp);
            }
            if ip.more_fragments || ip.fragment_offset.value() != 0 {
                return Err(NotTrimmed::Fragment);
            }
            let hl = ip.header_len();
            let l4 = l3 + hl;
            if l4 + UDP_LEN > size {
                return Err(NotTrimmed::HeadersTooLong);
            }
            let total = usize::from(ip.total_len);
            if l3 + total > len {
                return Err(NotTrimmed::Malformed);
            }
            if l3 + total <= size {
                // Only padding or trailer bytes past the IP packet: nothing of it to cut.
                return Err(NotTrimmed::Short);
            }
            let mut udp = udp_at(head, l4)?;
            if usize::from(udp.length) != total - hl {
                return Err(NotTrimmed::Malformed);
            }
            ip.dscp = dscp;
            ip.total_len = (size - l3) as u16;
            ip.header_checksum = ip.calc_header_checksum();
            udp.length = (size - l4) as u16;
            udp.checksum = 0;
            head[l3..l4].copy_from_slice(&ip.to_bytes());
            head[l4..l4 + UDP_LEN].copy_from_slice(&udp.to_bytes());
        }
        ethertype::IPV6 => {
            let (mut ip, _) = Ipv6Header::from_slice(kept.get(l3..).ok_or(NotTrimmed::HeadersTooLong)?)
                .map_err(|_| NotTrimmed::HeadersTooLong)?;
            if ip.next_header != IpNumber::UDP {
                return Err(NotTrimmed::NotUdp);
            }
            let l4 = l3 + Ipv6Header::LEN;
            if l4 + UDP_LEN > size {
                return Err(NotTrimmed::HeadersTooLong);
            }
            let payload = usize::from(ip.payload_length);
            if l4 + payload > len {
                return Err(NotTrimmed::Malformed);
            }
            if l4 + payload <= size {
                return Err(NotTrimmed::Short);
            }
            let mut udp = udp_at(head, l4)?;
            if usize::from(udp.length) != payload {
                return Err(NotTrimmed::Malformed);
            }
            ip.set_dscp(dscp);
            ip.payload_length = (size - l4) as u16;
            udp.length = (size - l4) as u16;
            udp.checksum = 0;
            udp.checksum = udp.calc_checksum_ipv6(&ip, &head[l4 + UDP_LEN..size]).map_err(|_| NotTrimmed::Malformed)?;
            head[l3..l4].copy_from_slice(&ip.to_bytes());
            head[l4..l4 + UDP_LEN].copy_from_slice(&udp.to_bytes());
        }
        _ => return Err(NotTrimmed::NotIp),
    }
    Ok(Trimmed { removed: len - size })
}

fn udp_at(head: &[u8], l4: usize) -> Result<UdpHeader, NotTrimmed> {
    let b: [u8; UDP_LEN] =
        head.get(l4..l4 + UDP_LEN).and_then(|s| s.try_into().ok()).ok_or(NotTrimmed::HeadersTooLong)?;
    Ok(UdpHeader::from_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpEcn, PacketBuilder, SlicedPacket, TransportSlice};

    const A4: [u8; 4] = [10, 9, 1, 1];
    const B4: [u8; 4] = [10, 9, 2, 1];
    const A6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const B6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    fn v4(n: usize, vlan: bool, dscp: u8, ecn: u8) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let mut ip = Ipv4Header::new(0, 64, IpNumber::UDP, A4, B4).unwrap();
        ip.dscp = IpDscp::try_new(dscp).unwrap();
        ip.ecn = IpEcn::try_new(ecn).unwrap();
        let mut out = Vec::new();
        if vlan {
            b.single_vlan(7.try_into().unwrap()).ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
        } else {
            b.ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
        }
        .udp(40000, 4793)
        .write(&mut out, &payload(n))
        .unwrap();
        out
    }

    fn v6(n: usize, tc: u8) -> Vec<u8> {
        let mut out = Vec::new();
        let ip = Ipv6Header {
            traffic_class: tc,
            flow_label: Default::default(),
            payload_length: 0,
            next_header: IpNumber::UDP,
            hop_limit: 64,
            source: A6,
            destination: B6,
        };
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ip(etherparse::IpHeaders::Ipv6(ip, Default::default()))
            .udp(40000, 4791)
            .write(&mut out, &payload(n))
            .unwrap();
        out
    }

    /// Trims `f` to `size` and parses what is left with etherparse (strictly: the lengths must
    /// hold).
    fn trimmed(mut f: Vec<u8>, size: usize, dscp: u8) -> (Vec<u8>, Trimmed) {
        let len = f.len();
        let t = trim_frame(&mut f, len, size, dscp).unwrap();
        f.truncate(size);
        (f, t)
    }

    #[test]
    fn ipv4_is_cut_with_lengths_dscp_and_checksum_fixed_and_ecn_kept() {
        for vlan in [false, true] {
            let f = v4(1472, vlan, 0, 2);
            let len = f.len();
            let (t, r) = trimmed(f.clone(), 128, 48);
            assert_eq!(r.removed, len - 128);
            let p = SlicedPacket::from_ethernet(&t).expect("a consistent packet");
            let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else { panic!("{p:?}") };
            let h = ip.header().to_header();
            let l3 = if vlan { 18 } else { 14 };
            assert_eq!(usize::from(h.total_len), 128 - l3);
            assert_eq!((h.dscp.value(), h.ecn.value()), (48, 2));
            assert_eq!(h.header_checksum, h.calc_header_checksum());
            let Some(TransportSlice::Udp(u)) = &p.transport else { panic!() };
            assert_eq!((usize::from(u.length()), u.checksum()), (128 - l3 - 20, 0));
            assert_eq!((u.source_port(), u.destination_port()), (40000, 4793));
            // The rest of the kept bytes (MACs, addresses, the payload's start) is the original's.
            assert_eq!(t[..14], f[..14]);
            assert_eq!(t[l3 + 12..l3 + 20], f[l3 + 12..l3 + 20]);
            assert_eq!(t[l3 + 28..], f[l3 + 28..128]);
        }
    }

    #[test]
    fn ipv6_is_cut_with_the_udp_checksum_recomputed() {
        let f = v6(4000, (26 << 2) | 1);
        let (t, r) = trimmed(f.clone(), 200, 46);
        assert_eq!(r.removed, f.len() - 200);
        let p = SlicedPacket::from_ethernet(&t).expect("a consistent packet");
        let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else { panic!("{p:?}") };
        let h = ip.header().to_header();
        assert_eq!(usize::from(h.payload_length), 200 - 54);
        assert_eq!((h.dscp().value(), h.ecn().value()), (46, 1));
        let Some(TransportSlice::Udp(u)) = &p.transport else { panic!() };
        assert_eq!(usize::from(u.length()), 200 - 54);
        let want = u.to_header().calc_checksum_ipv6(&h, &t[62..]).unwrap();
        assert_eq!(u.checksum(), want);
        assert_ne!(u.checksum(), 0);
        assert_eq!(h.flow_label, Ipv6Header::from_slice(&f[14..]).unwrap().0.flow_label);
    }

    #[test]
    fn what_is_not_trimmed_is_left_alone() {
        let check = |mut f: Vec<u8>, len: usize, size: usize, want: NotTrimmed| {
            let before = f.clone();
            assert_eq!(trim_frame(&mut f, len, size, 48), Err(want));
            assert_eq!(f, before, "an untrimmed frame is unchanged");
        };
        // Not longer than the size (a 128-byte frame is not trimmed to 128).
        let f = v4(128 - 42, false, 0, 0);
        check(f.clone(), f.len(), 128, NotTrimmed::Short);
        // ARP, a PFC frame: not IP.
        let mut arp = v4(200, false, 0, 0);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        check(arp, 242, 128, NotTrimmed::NotIp);
        // TCP.
        let mut tcp = v4(200, false, 0, 0);
        tcp[23] = 6;
        check(tcp, 242, 128, NotTrimmed::NotUdp);
        // A first fragment (MF) and a later one.
        let mut frag = v4(200, false, 0, 0);
        frag[20] = 0x20;
        check(frag, 242, 128, NotTrimmed::Fragment);
        let mut frag = v4(200, false, 0, 0);
        frag[21] = 1;
        check(frag, 242, 128, NotTrimmed::Fragment);
        // An IPv6 extension header (hop-by-hop) in front of UDP.
        let mut ext = v6(200, 0);
        ext[20] = 0;
        check(ext, 262, 128, NotTrimmed::NotUdp);
        // Headers past the size: IPv6 + UDP need 62 bytes.
        check(v6(200, 0), 262, 60, NotTrimmed::HeadersTooLong);
        // Lengths that disagree with the frame: the IPv4 total length says longer than the
        // frame; the UDP length disagrees with the IP payload.
        let mut long = v4(200, false, 0, 0);
        long[16..18].copy_from_slice(&300u16.to_be_bytes());
        check(long, 242, 128, NotTrimmed::Malformed);
        let mut udp = v4(200, false, 0, 0);
        udp[38..40].copy_from_slice(&100u16.to_be_bytes());
        check(udp, 242, 128, NotTrimmed::Malformed);
        // A short IP packet padded (or followed by a trailer) past the size.
        let mut padded = v4(40, false, 0, 0);
        padded.resize(300, 0);
        check(padded, 300, 128, NotTrimmed::Short);
    }

    #[test]
    fn a_multi_buffer_frame_is_trimmed_from_its_first_part() {
        // The whole frame is 9000 bytes; the switch holds its first 3840 in the head chunk.
        let mut f = v4(9000 - 42, false, 0, 2);
        let len = f.len();
        let t = trim_frame(&mut f[..3840], len, 128, 48).unwrap();
        assert_eq!(t.removed, len - 128);
        assert!(SlicedPacket::from_ethernet(&f[..128]).is_ok());
    }

    proptest::proptest! {
        /// Any bytes, any lengths: no panic, and an error leaves the frame as it was.
        #[test]
        fn never_panics(mut f in proptest::collection::vec(proptest::num::u8::ANY, 0..400), extra in 0usize..9000, size in 0usize..300, dscp in 0u8..80) {
            let len = f.len() + extra;
            let before = f.clone();
            if trim_frame(&mut f, len, size, dscp).is_err() {
                proptest::prop_assert_eq!(f, before);
            }
        }
    }
}
