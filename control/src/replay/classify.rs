//! What each capture frame is, before the mapping decides about it: a RoCEv2 frame to inject
//! (Ethernet, VLAN tags allowed / IPv4 or IPv6 / UDP destination port 4791 / BTH ..., parsed by
//! [`ParsedFrame::parse_captured`]) or a frame to skip, with the reason. The VLAN tags are
//! walked by [`rocefab_wire::ethernet::walk_vlan_tags`]; cooked and raw-IP captures get an
//! Ethernet header from [`rocefab_wire::pcap::as_ethernet`].

use std::net::IpAddr;

use rocefab_wire::ethernet::{walk_vlan_tags, VlanWalk};
use rocefab_wire::pcap::{self, as_ethernet, CapturedFrame};
use rocefab_wire::roce::{IcrcStatus, ParsedFrame};
use serde::Serialize;

/// What a capture frame is, before the mapping decides about it.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// Not injectable whatever the mapping: the reason.
    Skip(String),
    /// A RoCEv2 frame: the Ethernet frame (header synthesised for cooked / raw-IP captures),
    /// its length on the wire, its addresses and ICRC status.
    Roce { eth: Vec<u8>, wire_len: usize, src: IpAddr, dst: IpAddr, icrc: IcrcStatus },
}

pub(crate) const ETHERTYPE_IPV4: u16 = 0x0800;
pub(crate) const ETHERTYPE_IPV6: u16 = 0x86dd;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The EtherType after any VLAN tags and where its payload starts; `None` when the frame is
/// too short for its Ethernet header or a tag.
pub(crate) fn l3(eth: &[u8]) -> Option<VlanWalk> {
    walk_vlan_tags(eth).ok()
}

/// Why a frame is not RoCEv2 at all (another EtherType, IP protocol or UDP port; UET frames, by
/// UDP destination port 4793 or IP protocol 253, are named as such), judged from
/// as much as was captured; `None` for RoCEv2 candidates (UDP destination port 4791), whose
/// remaining problems the RoCEv2 parser names.
fn not_roce(eth: &[u8]) -> Option<String> {
    let Some(VlanWalk { ether_type: et, payload_offset: ip, .. }) = l3(eth) else {
        return Some(format!("not RoCEv2 (runt frame of {} bytes)", eth.len()));
    };
    let udp = match et {
        ETHERTYPE_IPV4 => {
            let h = eth.get(ip..ip + 20)?;
            if h[9] == rocefab_wire::uet::IP_PROTOCOL {
                return Some(format!("not RoCEv2 (UET, IP protocol {})", h[9]));
            }
            if h[9] != 17 {
                return Some(format!("not RoCEv2 (IP protocol {})", h[9]));
            }
            if be16(h, 6) & 0x1fff != 0 {
                return Some("not RoCEv2 (IP fragment)".into());
            }
            ip + usize::from(h[0] & 0x0f) * 4
        }
        ETHERTYPE_IPV6 => {
            let h = eth.get(ip..ip + 40)?;
            if h[6] == rocefab_wire::uet::IP_PROTOCOL {
                return Some(format!("not RoCEv2 (UET, IPv6 next header {})", h[6]));
            }
            if h[6] != 17 {
                return Some(format!("not RoCEv2 (IPv6 next header {})", h[6]));
            }
            ip + 40
        }
        _ => return Some(format!("not RoCEv2 (ethertype 0x{et:04x})")),
    };
    let u = eth.get(udp..udp + 4)?;
    let (sport, dport) = (be16(u, 0), be16(u, 2));
    // UET's source port is its entropy, any value: the destination port names it.
    if dport == rocefab_wire::uet::UDP_PORT {
        return Some(format!("not RoCEv2 (UET, UDP port {dport})"));
    }
    // The lower of the two ports names the service (DNS queries and answers alike say 53).
    (dport != rocefab_wire::roce::UDP_PORT).then(|| format!("not RoCEv2 (UDP port {})", sport.min(dport)))
}

/// Classifies one capture frame.
pub(crate) fn classify(f: &CapturedFrame) -> Kind {
    let Some(eth) = as_ethernet(f.linktype, &f.data) else {
        return Kind::Skip(match f.linktype {
            pcap::LINKTYPE_LINUX_SLL | pcap::LINKTYPE_LINUX_SLL2 => {
                format!("not RoCEv2 (runt frame of {} bytes)", f.data.len())
            }
            t => format!("not RoCEv2 (link type {t})"),
        });
    };
    // The synthesised header changes the length; `orig_len` counts the captured link header.
    let wire_len = (f.orig_len as usize + eth.len()).saturating_sub(f.data.len());
    if let Some(reason) = not_roce(&eth) {
        return Kind::Skip(reason);
    }
    match ParsedFrame::parse_captured(&eth, wire_len) {
        Ok(p) => Kind::Roce { src: p.ip.src, dst: p.ip.dst, icrc: p.icrc, wire_len, eth: eth.to_vec() },
        Err(e) => Kind::Skip(format!("malformed RoCEv2: {e}")),
    }
}

/// A capture frame's outer 802.1Q / 802.1ad tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct VlanTag {
    pub vid: u16,
    /// Priority code point (IEEE 802.1Q PCP, 0..=7).
    pub pcp: u8,
    /// Tags on the frame (2 for QinQ).
    pub tags: u8,
}

/// The outer VLAN tag of an Ethernet frame and how many tags it has.
pub(crate) fn vlan_tag(eth: &[u8]) -> Option<VlanTag> {
    let w = l3(eth)?;
    let outer = w.outer?;
    Some(VlanTag { vid: outer.vid, pcp: outer.pcp.value(), tags: w.tags as u8 })
}

/// The DSCP of an Ethernet frame's IPv4 / IPv6 header (0 when there is none).
pub(crate) fn dscp_of(eth: &[u8]) -> u8 {
    match l3(eth) {
        Some(VlanWalk { ether_type: ETHERTYPE_IPV4, payload_offset: o, .. }) => eth.get(o + 1).map_or(0, |t| t >> 2),
        Some(VlanWalk { ether_type: ETHERTYPE_IPV6, payload_offset: o, .. }) => match eth.get(o..o + 2) {
            Some(h) => (((h[0] & 0x0f) << 4) | (h[1] >> 4)) >> 2,
            None => 0,
        },
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use rocefab_wire::roce::{bth, Opcode, Repr, RoceFrame};

    use super::*;

    /// A RoCEv2 frame, DSCP 26, with `tags` (TPID, TCI) inserted after the MACs.
    fn tagged(tags: &[(u16, u16)]) -> Vec<u8> {
        let h = Repr::new(bth::Repr::new(Opcode::SendOnly, 0x42, 7));
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut f = RoceFrame::new([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], a.into(), b.into(), h, &[7; 32]);
        f.dscp = 26;
        let plain = f.to_vec().unwrap();
        let mut out = plain[..12].to_vec();
        for (tpid, tci) in tags {
            out.extend_from_slice(&tpid.to_be_bytes());
            out.extend_from_slice(&tci.to_be_bytes());
        }
        out.extend_from_slice(&plain[12..]);
        out
    }

    fn captured(data: Vec<u8>) -> CapturedFrame {
        CapturedFrame {
            timestamp: Duration::ZERO,
            linktype: pcap::LINKTYPE_ETHERNET,
            orig_len: data.len() as u32,
            data,
        }
    }

    #[test]
    fn qinq_frames_are_roce_with_their_outer_tag_and_dscp() {
        let f = tagged(&[(0x88a8, 0xa00a), (0x8100, 0x6065)]);
        assert!(matches!(classify(&captured(f.clone())), Kind::Roce { .. }));
        assert_eq!(vlan_tag(&f), Some(VlanTag { vid: 10, pcp: 5, tags: 2 }));
        assert_eq!(dscp_of(&f), 26);
        let one = tagged(&[(0x8100, 0x6065)]);
        assert_eq!(vlan_tag(&one), Some(VlanTag { vid: 101, pcp: 3, tags: 1 }));
        assert_eq!((vlan_tag(&tagged(&[])), dscp_of(&tagged(&[]))), (None, 26));
    }

    #[test]
    fn a_frame_cut_inside_its_tags_is_a_runt() {
        let f = tagged(&[(0x88a8, 0xa00a), (0x8100, 0x6065)]);
        for len in [10, 16, 20] {
            let Kind::Skip(reason) = classify(&captured(f[..len].to_vec())) else { panic!("{len} bytes") };
            assert_eq!(reason, format!("not RoCEv2 (runt frame of {len} bytes)"));
            assert_eq!((vlan_tag(&f[..len]), dscp_of(&f[..len])), (None, 0));
        }
    }

    /// UET frames (UDP 4793 with an entropy source port below it, IP protocol 253) are skipped
    /// and named UET, whatever their source port.
    #[test]
    fn uet_frames_are_skipped_as_uet() {
        use rocefab_wire::uet::frame::{Encap, Ses, UetFrame};
        use rocefab_wire::uet::Repr as Pds;
        let pds = Pds::Ack { next_header: 0, flags: 0, ack_psn_offset: 0, cack_psn: 1, spdcid: 2, dpdcid: 3 };
        for (encap, reason) in [
            (Encap::udp(53), "not RoCEv2 (UET, UDP port 4793)"),
            (Encap::Ip { protocol: 253, entropy: 1 }, "not RoCEv2 (UET, IP protocol 253)"),
        ] {
            let f = UetFrame {
                src_mac: [2, 0, 0, 0, 0, 1],
                dst_mac: [2, 0, 0, 0, 0, 2],
                src_ip: Ipv4Addr::new(10, 0, 0, 1).into(),
                dst_ip: Ipv4Addr::new(10, 0, 0, 2).into(),
                dscp: 0,
                ecn: rocefab_wire::roce::IpEcn::NotEct,
                ttl: 64,
                encap,
                pds,
                ses: Ses::None,
                payload: &[],
            };
            let Kind::Skip(r) = classify(&captured(f.to_vec().unwrap())) else { panic!("{encap:?}") };
            assert_eq!(r, reason);
        }
    }
}
