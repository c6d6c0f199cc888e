//! Prebuilt benchmark frames: Ethernet II / IPv4 (RFC 791) / UDP (RFC 768) with valid header and
//! UDP checksums, built once with etherparse and then only re-sent, never rewritten.
//!
//! `size` is the size on the wire including the 4-byte FCS the NIC would append, as in RFC 2544
//! frame sizes: `--size 64` builds 60-byte frames (14 Ethernet + 20 IPv4 + 8 UDP + 18 payload).
//! Flow `i` of `flows` uses UDP source port `BASE_SRC_PORT + i`, so a switch hashing the 5-tuple
//! sees `flows` distinct flows.
use std::net::Ipv4Addr;

use etherparse::PacketBuilder;

/// Ethernet frame check sequence length: counted in `size`, not written into the frame.
pub const FCS_LEN: usize = 4;
/// Smallest Ethernet frame on the wire (with FCS).
pub const MIN_WIRE_SIZE: usize = 64;
/// Largest untagged Ethernet frame on the wire (with FCS) that the benchmark builds: one
/// 4096-byte UMEM chunk (AF_XDP chunks are at most a page; a descriptor never spans two).
/// Enough for a 3500-byte IP MTU, the largest a rocefab link carries.
pub const MAX_WIRE_SIZE: usize = 4096 + FCS_LEN;
/// UDP source port of flow 0.
pub const BASE_SRC_PORT: u16 = 10_000;
/// UDP destination port (discard, RFC 863).
pub const DST_PORT: u16 = 9;
const HEADERS_LEN: usize = 14 + 20 + 8;

/// What to put in the benchmark frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// Size on the wire including FCS (64..=4100).
    pub size: usize,
    /// Number of distinct UDP flows (1..=1024).
    pub flows: u16,
    /// DSCP written into the IPv4 header (0..=63).
    pub dscp: u8,
}

/// Why a [`FrameSpec`] cannot be built.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    Size(usize),
    Flows(u16),
    Dscp(u8),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Size(s) => write!(
                f,
                "frame size {s} out of range ({MIN_WIRE_SIZE}..={MAX_WIRE_SIZE} bytes on the wire, FCS included)"
            ),
            FrameError::Flows(n) => write!(f, "flow count {n} out of range (1..=1024)"),
            FrameError::Dscp(d) => write!(f, "DSCP {d} out of range (0..=63)"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Builds one frame per flow, each `spec.size - FCS_LEN` bytes long.
pub fn build_frames(spec: &FrameSpec) -> Result<Vec<Vec<u8>>, FrameError> {
    if !(MIN_WIRE_SIZE..=MAX_WIRE_SIZE).contains(&spec.size) {
        return Err(FrameError::Size(spec.size));
    }
    if !(1..=1024).contains(&spec.flows) {
        return Err(FrameError::Flows(spec.flows));
    }
    if spec.dscp > 63 {
        return Err(FrameError::Dscp(spec.dscp));
    }
    let frame_len = spec.size - FCS_LEN;
    let payload: Vec<u8> = (0..frame_len - HEADERS_LEN).map(|i| i as u8).collect();
    let mut frames = Vec::with_capacity(spec.flows as usize);
    for flow in 0..spec.flows {
        let mut ip =
            etherparse::Ipv4Header::new(0, 64, etherparse::IpNumber::UDP, spec.src_ip.octets(), spec.dst_ip.octets())
                .expect("payload length is bounded by MAX_WIRE_SIZE");
        ip.dscp = etherparse::IpDscp::try_new(spec.dscp).expect("checked above");
        let builder = PacketBuilder::ethernet2(spec.src_mac, spec.dst_mac)
            .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
            .udp(BASE_SRC_PORT + flow, DST_PORT);
        let mut buf = Vec::with_capacity(frame_len);
        builder.write(&mut buf, &payload).expect("writing into a Vec cannot fail");
        debug_assert_eq!(buf.len(), frame_len);
        frames.push(buf);
    }
    Ok(frames)
}

/// Parses `aa:bb:cc:dd:ee:ff` ([`rocefab_wire::ethernet::MacAddr`], the one MAC parser).
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    s.parse::<rocefab_wire::ethernet::MacAddr>().map(|m| m.0).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};

    use super::*;

    fn spec() -> FrameSpec {
        FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(10, 77, 1, 1),
            dst_ip: Ipv4Addr::new(10, 77, 2, 1),
            size: 64,
            flows: 4,
            dscp: 24,
        }
    }

    #[test]
    fn sixty_four_byte_frames_have_valid_checksums_and_distinct_flows() {
        let frames = build_frames(&spec()).unwrap();
        assert_eq!(frames.len(), 4);
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.len(), 60);
            let p = SlicedPacket::from_ethernet(f).unwrap();
            let eth = p.link.unwrap();
            let eth = eth.to_header().unwrap();
            let eth = match eth {
                etherparse::LinkHeader::Ethernet2(e) => e,
                other => panic!("not Ethernet II: {other:?}"),
            };
            assert_eq!(eth.source, [2, 0, 0, 0, 0, 1]);
            assert_eq!(eth.destination, [2, 0, 0, 0, 0, 2]);
            let Some(NetSlice::Ipv4(ip)) = p.net else { panic!("not IPv4") };
            let iph = ip.header().to_header();
            assert_eq!(iph.header_checksum, iph.calc_header_checksum(), "IPv4 header checksum");
            assert_eq!(iph.dscp.value(), 24);
            assert_eq!(iph.total_len, 46);
            let Some(TransportSlice::Udp(udp)) = p.transport else { panic!("not UDP") };
            let uh = udp.to_header();
            assert_eq!(uh.source_port, BASE_SRC_PORT + i as u16);
            assert_eq!(uh.destination_port, DST_PORT);
            assert_ne!(uh.checksum, 0, "UDP checksum must be computed");
            assert_eq!(uh.checksum, uh.calc_checksum_ipv4(&iph, udp.payload()).unwrap(), "UDP checksum");
            assert_eq!(udp.payload().len(), 18);
        }
    }

    #[test]
    fn larger_sizes_grow_the_payload() {
        let frames = build_frames(&FrameSpec { size: 128, flows: 1, ..spec() }).unwrap();
        assert_eq!(frames[0].len(), 124);
        let jumbo = build_frames(&FrameSpec { size: MAX_WIRE_SIZE, flows: 1, ..spec() }).unwrap();
        assert_eq!(jumbo[0].len(), 4096);
    }

    #[test]
    fn out_of_range_parameters_are_rejected() {
        assert_eq!(build_frames(&FrameSpec { size: 63, ..spec() }), Err(FrameError::Size(63)));
        assert_eq!(build_frames(&FrameSpec { size: 4101, ..spec() }), Err(FrameError::Size(4101)));
        assert_eq!(build_frames(&FrameSpec { flows: 0, ..spec() }), Err(FrameError::Flows(0)));
        assert_eq!(build_frames(&FrameSpec { dscp: 64, ..spec() }), Err(FrameError::Dscp(64)));
        assert!(FrameError::Size(63).to_string().contains("63"));
    }

    #[test]
    fn mac_parsing() {
        assert_eq!(parse_mac("02:0a:00:00:00:ff").unwrap(), [2, 10, 0, 0, 0, 255]);
        assert!(parse_mac("02:0a:00:00:00").is_err());
        assert!(parse_mac("02:0a:00:00:00:ff:01").is_err());
        assert!(parse_mac("02:0a:00:00:00:fg").is_err());
        assert!(parse_mac("2:0a:00:00:00:ff").is_err());
    }
}
