//! Whole UET Ethernet frames: Ethernet II / IPv4 or IPv6 / UDP 4793 (the source port is the
//! entropy), or IP protocol 253 with the 4-byte entropy header (research file §1), around a
//! PDS header, an optional SES header and the payload. Built and parsed with `etherparse` for
//! the lower layers, as `roce::frame` does. The IPv4 UDP checksum is sent as zero; the IPv6 one
//! is computed (RFC 8200 §8.1). There is no ICRC: without TSS, UET relies on the Ethernet FCS.

use core::net::IpAddr;

use etherparse::{
    Ethernet2Header, IpEcn, IpNumber, Ipv4Header, Ipv6Header, LinkSlice, NetSlice, SlicedPacket, TransportSlice,
    UdpHeader,
};

use crate::ethernet::{self, IpHeaderError};

use super::ses::{
    self, MediumRequest, Response, ResponseWithData, SmallRequest, SmallResponseWithData, StandardRequest,
};
use super::{next_header, Packet, Repr, ENTROPY_HEADER_LEN, IP_PROTOCOL, UDP_PORT};

const ETH_LEN: usize = 14;
const UDP_LEN: usize = 8;
/// Minimum Ethernet frame length without FCS; shorter frames are zero-padded.
pub const ETH_MIN_LEN: usize = 60;

/// Why a frame cannot be built or is not a UET frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("not an IP frame (EtherType {0:#06x})")]
    NotIp(u16),
    #[error("fragmented IP packet")]
    Fragmented,
    #[error("not UET: {0}")]
    NotUet(&'static str),
    #[error("{layer} truncated: need {needed} bytes, have {available}")]
    Truncated { layer: &'static str, needed: usize, available: usize },
    #[error(transparent)]
    Pds(#[from] super::Error),
    #[error(transparent)]
    Ses(#[from] ses::Error),
    #[error("frame needs {needed} bytes, the buffer or the length field has {available}")]
    TooBig { needed: usize, available: usize },
    #[error("source and destination IP of different families")]
    MixedFamilies,
    #[error("{0}")]
    Lower(#[from] etherparse::err::packet::SliceError),
}

/// How the PDS header is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    /// UDP: the source port carries the entropy.
    Udp { src_port: u16, dst_port: u16 },
    /// Native: IP protocol `protocol`, the entropy header first.
    Ip { protocol: u8, entropy: u16 },
}

impl Encap {
    /// UDP to port 4793 with `entropy` as the source port.
    pub fn udp(entropy: u16) -> Encap {
        Encap::Udp { src_port: entropy, dst_port: UDP_PORT }
    }

    /// The entropy value switches hash on.
    pub fn entropy(self) -> u16 {
        match self {
            Encap::Udp { src_port, .. } => src_port,
            Encap::Ip { entropy, .. } => entropy,
        }
    }

    fn len(self) -> usize {
        match self {
            Encap::Udp { .. } => UDP_LEN,
            Encap::Ip { .. } => ENTROPY_HEADER_LEN,
        }
    }
}

/// The SES header that follows the PDS header (by its `next_header`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ses {
    /// `next_header` 0, or an SES header this crate does not lay out (kept in the payload).
    None,
    Request(StandardRequest),
    Response(Response),
    SmallRequest(SmallRequest),
    MediumRequest(MediumRequest),
    ResponseWithData(ResponseWithData),
    SmallResponseWithData(SmallResponseWithData),
}

impl Ses {
    /// The header's length on the wire.
    pub fn len(&self) -> usize {
        match self {
            Ses::None => 0,
            Ses::Request(_) => ses::STANDARD_REQUEST_LEN,
            Ses::Response(_) => ses::RESPONSE_LEN,
            Ses::SmallRequest(_) => ses::SMALL_REQUEST_LEN,
            Ses::MediumRequest(_) => ses::MEDIUM_REQUEST_LEN,
            Ses::ResponseWithData(_) => ses::RESPONSE_WITH_DATA_LEN,
            Ses::SmallResponseWithData(_) => ses::SMALL_RESPONSE_WITH_DATA_LEN,
        }
    }

    /// Whether there is no SES header.
    pub fn is_empty(&self) -> bool {
        matches!(self, Ses::None)
    }

    /// The PDS `next_header` value announcing this header.
    pub fn next_header(&self) -> Option<u8> {
        match self {
            Ses::None => None,
            Ses::Request(_) => Some(next_header::STANDARD_REQUEST),
            Ses::Response(_) => Some(next_header::RESPONSE),
            Ses::SmallRequest(_) => Some(next_header::SMALL_REQUEST),
            Ses::MediumRequest(_) => Some(next_header::MEDIUM_REQUEST),
            Ses::ResponseWithData(_) => Some(next_header::RESPONSE_WITH_DATA),
            Ses::SmallResponseWithData(_) => Some(next_header::SMALL_RESPONSE_WITH_DATA),
        }
    }

    /// Parses the header `next_header` announces at the start of `b`, and its length
    /// ([`Ses::None`] for 0 and for values that name no header).
    pub fn parse(next: u8, b: &[u8]) -> Result<(Ses, usize), ses::Error> {
        let s = match next {
            next_header::STANDARD_REQUEST => Ses::Request(StandardRequest::parse(b)?),
            next_header::RESPONSE => Ses::Response(Response::parse(b)?),
            next_header::SMALL_REQUEST => Ses::SmallRequest(SmallRequest::parse(b)?),
            next_header::MEDIUM_REQUEST => Ses::MediumRequest(MediumRequest::parse(b)?),
            next_header::RESPONSE_WITH_DATA => Ses::ResponseWithData(ResponseWithData::parse(b)?),
            next_header::SMALL_RESPONSE_WITH_DATA => Ses::SmallResponseWithData(SmallResponseWithData::parse(b)?),
            _ => Ses::None,
        };
        Ok((s, s.len()))
    }

    /// Writes the header into the first [`Ses::len`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        match self {
            Ses::None => {}
            Ses::Request(r) => r.emit(b),
            Ses::Response(r) => r.emit(b),
            Ses::SmallRequest(r) => r.emit(b),
            Ses::MediumRequest(r) => r.emit(b),
            Ses::ResponseWithData(r) => r.emit(b),
            Ses::SmallResponseWithData(r) => r.emit(b),
        }
    }
}

/// Builder of one UET frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UetFrame<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// Both addresses must be of the same family.
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    /// 6 bits.
    pub dscp: u8,
    pub ecn: IpEcn,
    pub ttl: u8,
    pub encap: Encap,
    /// Its `next_header` is set from `ses` on emit when `ses` is a header.
    pub pds: Repr,
    pub ses: Ses,
    pub payload: &'a [u8],
}

impl UetFrame<'_> {
    fn ip_hdr_len(&self) -> usize {
        match self.src_ip {
            IpAddr::V4(_) => Ipv4Header::MIN_LEN,
            IpAddr::V6(_) => Ipv6Header::LEN,
        }
    }

    fn uet_len(&self) -> usize {
        self.pds.buffer_len() + self.ses.len() + self.payload.len()
    }

    /// Length of the emitted frame (without FCS), padded to 60 bytes.
    pub fn frame_len(&self) -> usize {
        (ETH_LEN + self.ip_hdr_len() + self.encap.len() + self.uet_len()).max(ETH_MIN_LEN)
    }

    /// Writes the frame into the start of `buf` and returns its length. Allocates nothing.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let ip_hlen = self.ip_hdr_len();
        let l4_len = self.encap.len() + self.uet_len();
        let natural = ETH_LEN + ip_hlen + l4_len;
        let total = natural.max(ETH_MIN_LEN);
        if buf.len() < total {
            return Err(Error::TooBig { needed: total, available: buf.len() });
        }
        let l4_len16 = u16::try_from(l4_len).map_err(|_| Error::TooBig { needed: l4_len, available: 65535 })?;
        let buf = &mut buf[..total];
        let (eth, rest) = buf.split_at_mut(ETH_LEN);
        let (ip, rest) = rest.split_at_mut(ip_hlen);
        let (l4, rest) = rest.split_at_mut(self.encap.len());
        let (pds, rest) = rest.split_at_mut(self.pds.buffer_len());
        let (ses_b, rest) = rest.split_at_mut(self.ses.len());
        let (payload, pad) = rest.split_at_mut(self.payload.len());
        pad.fill(0);
        payload.copy_from_slice(self.payload);
        let mut pds_repr = self.pds;
        if let Some(nh) = self.ses.next_header() {
            pds_repr.set_next_header(nh);
        }
        pds_repr.emit(&mut Packet::new_unchecked(&mut *pds));
        self.ses.emit(ses_b);
        let protocol = match self.encap {
            Encap::Udp { .. } => IpNumber::UDP,
            Encap::Ip { protocol, .. } => IpNumber(protocol),
        };
        let ether_type = ethernet::emit_ip_header(
            ip,
            self.src_ip,
            self.dst_ip,
            self.dscp,
            self.ecn,
            self.ttl,
            0,
            protocol,
            l4_len16,
        )
        .map_err(|e| match e {
            IpHeaderError::TooBig => Error::TooBig { needed: natural, available: 65535 },
            IpHeaderError::MixedFamilies => Error::MixedFamilies,
        })?;
        eth.copy_from_slice(
            &Ethernet2Header { source: self.src_mac, destination: self.dst_mac, ether_type }.to_bytes(),
        );
        match self.encap {
            Encap::Udp { src_port, dst_port } => {
                let h = UdpHeader { source_port: src_port, destination_port: dst_port, length: l4_len16, checksum: 0 };
                l4.copy_from_slice(&h.to_bytes());
                if let (IpAddr::V6(s), IpAddr::V6(d)) = (self.src_ip, self.dst_ip) {
                    let at = ETH_LEN + ip_hlen;
                    let c = h
                        .calc_checksum_ipv6_raw(s.octets(), d.octets(), &buf[at + UDP_LEN..natural])
                        .map_err(|_| Error::TooBig { needed: natural, available: 65535 })?;
                    buf[at + 6..at + 8].copy_from_slice(&c.to_be_bytes());
                }
            }
            Encap::Ip { entropy, .. } => {
                l4[..2].copy_from_slice(&entropy.to_be_bytes());
                l4[2..4].fill(0);
            }
        }
        Ok(total)
    }

    /// The frame as a new vector.
    pub fn to_vec(&self) -> Result<Vec<u8>, Error> {
        let mut v = vec![0u8; self.frame_len()];
        let n = self.emit(&mut v)?;
        v.truncate(n);
        Ok(v)
    }
}

/// Which UDP port and IP protocol carry UET (both configurable, research file D1/D2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub udp_port: u16,
    pub ip_protocol: u8,
}

impl Default for Ports {
    fn default() -> Self {
        Ports { udp_port: UDP_PORT, ip_protocol: IP_PROTOCOL }
    }
}

/// A parsed UET frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedUetFrame<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub dscp: u8,
    pub ecn: IpEcn,
    pub ttl: u8,
    pub encap: Encap,
    pub pds: Repr,
    pub ses: Ses,
    /// What follows the headers, as far as the IP length says (a trimmed packet's is short).
    pub payload: &'a [u8],
}

impl<'a> ParsedUetFrame<'a> {
    /// Parses an Ethernet II frame carrying UET on the default port and protocol.
    pub fn parse(frame: &'a [u8]) -> Result<Self, Error> {
        Self::parse_with(frame, Ports::default())
    }

    /// Parses an Ethernet II frame carrying UET over UDP to `ports.udp_port` or over IP
    /// protocol `ports.ip_protocol`. Errors name the layer and lengths; a frame of another
    /// protocol is [`Error::NotUet`].
    pub fn parse_with(frame: &'a [u8], ports: Ports) -> Result<Self, Error> {
        // The error path allocates nothing either: a malformed frame on a live port is counted.
        let sp = SlicedPacket::from_ethernet(frame)?;
        let Some(LinkSlice::Ethernet2(eth)) = &sp.link else {
            return Err(Error::Truncated { layer: "Ethernet", needed: ETH_LEN, available: frame.len() });
        };
        let (src_ip, dst_ip, dscp, ecn, ttl, protocol, ip_payload) = match &sp.net {
            Some(NetSlice::Ipv4(v4)) => {
                if v4.is_payload_fragmented() {
                    return Err(Error::Fragmented);
                }
                let h = v4.header();
                let p = v4.payload();
                (
                    IpAddr::V4(h.source_addr()),
                    IpAddr::V4(h.destination_addr()),
                    h.dcp().value(),
                    h.ecn(),
                    h.ttl(),
                    h.protocol().0,
                    p.payload,
                )
            }
            Some(NetSlice::Ipv6(v6)) => {
                if v6.is_payload_fragmented() {
                    return Err(Error::Fragmented);
                }
                let h = v6.header();
                let p = v6.payload();
                (
                    IpAddr::V6(h.source_addr()),
                    IpAddr::V6(h.destination_addr()),
                    h.dscp().value(),
                    h.ecn(),
                    h.hop_limit(),
                    p.ip_number.0,
                    p.payload,
                )
            }
            _ => return Err(Error::NotIp(eth.ether_type().0)),
        };
        let (encap, uet) = if protocol == IpNumber::UDP.0 {
            let Some(TransportSlice::Udp(udp)) = &sp.transport else {
                return Err(Error::Truncated { layer: "UDP", needed: UDP_LEN, available: ip_payload.len() });
            };
            if udp.destination_port() != ports.udp_port {
                return Err(Error::NotUet("UDP destination port"));
            }
            (Encap::Udp { src_port: udp.source_port(), dst_port: udp.destination_port() }, udp.payload())
        } else if protocol == ports.ip_protocol {
            if ip_payload.len() < ENTROPY_HEADER_LEN {
                return Err(Error::Truncated {
                    layer: "entropy header",
                    needed: ENTROPY_HEADER_LEN,
                    available: ip_payload.len(),
                });
            }
            let entropy = u16::from_be_bytes([ip_payload[0], ip_payload[1]]);
            (Encap::Ip { protocol, entropy }, &ip_payload[ENTROPY_HEADER_LEN..])
        } else {
            return Err(Error::NotUet("IP protocol"));
        };
        let p = Packet::new_checked(uet)?;
        let pds = Repr::parse(&p)?;
        let rest = &uet[p.header_len()..];
        let (ses, used) = if pds.is_request_or_ack() { Ses::parse(pds.next_header(), rest)? } else { (Ses::None, 0) };
        Ok(ParsedUetFrame {
            src_mac: eth.source(),
            dst_mac: eth.destination(),
            src_ip,
            dst_ip,
            dscp,
            ecn,
            ttl,
            encap,
            pds,
            ses,
            payload: &rest[used..],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uet::{request_flags, ses::StdTail};
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn request(psn: u32) -> Repr {
        Repr::Request {
            ordered: false,
            next_header: 0,
            flags: request_flags::AR,
            clear_psn_offset: 0,
            psn,
            spdcid: 5,
            dpdcid: 6,
        }
    }

    fn ses() -> StandardRequest {
        StandardRequest {
            opcode: ses::Opcode::Write,
            version: 0,
            flags: ses::flags::SOM | ses::flags::EOM,
            message_id: 1,
            ri_generation: 0,
            job_id: 77,
            pid_on_fep: 1,
            resource_index: 2,
            buffer_offset: 4096,
            initiator: 3,
            memory_key: 9,
            tail: StdTail::HeaderData(0),
            request_length: 100,
        }
    }

    #[test]
    fn udp_and_native_frames_round_trip() {
        let payload = [0x5au8; 100];
        for (src, dst) in [
            (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1))),
            (IpAddr::V6(Ipv6Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
        ] {
            for encap in [Encap::udp(0xc123), Encap::Ip { protocol: IP_PROTOCOL, entropy: 0xbeef }] {
                let f = UetFrame {
                    src_mac: [2, 0, 0, 0, 0, 1],
                    dst_mac: [2, 0, 0, 0, 0, 2],
                    src_ip: src,
                    dst_ip: dst,
                    dscp: 26,
                    ecn: IpEcn::Ect0,
                    ttl: 64,
                    encap,
                    pds: request(10),
                    ses: Ses::Request(ses()),
                    payload: &payload,
                };
                let b = f.to_vec().unwrap();
                let hdr = if src.is_ipv4() { 20 } else { 40 };
                assert_eq!(b.len(), 14 + hdr + encap.len() + 12 + 44 + 100);
                let p = ParsedUetFrame::parse(&b).unwrap();
                assert_eq!(p.encap, encap);
                assert_eq!(p.encap.entropy(), encap.entropy());
                assert_eq!((p.dscp, p.ecn, p.src_ip, p.dst_ip), (26, IpEcn::Ect0, src, dst));
                assert_eq!(p.pds.next_header(), next_header::STANDARD_REQUEST);
                assert_eq!(p.ses, Ses::Request(ses()));
                assert_eq!(p.payload, &payload[..]);
            }
        }
    }

    #[test]
    fn other_ports_and_short_headers_are_refused() {
        let f = UetFrame {
            src_mac: [0; 6],
            dst_mac: [0; 6],
            src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            dscp: 0,
            ecn: IpEcn::NotEct,
            ttl: 64,
            encap: Encap::Udp { src_port: 1, dst_port: 4791 },
            pds: request(1),
            ses: Ses::None,
            payload: &[],
        };
        let b = f.to_vec().unwrap();
        assert_eq!(b.len(), ETH_MIN_LEN, "padded");
        assert_eq!(ParsedUetFrame::parse(&b).unwrap_err(), Error::NotUet("UDP destination port"));
        let p = ParsedUetFrame::parse_with(&b, Ports { udp_port: 4791, ip_protocol: IP_PROTOCOL }).unwrap();
        assert_eq!((p.pds, p.ses, p.payload.len()), (request(1), Ses::None, 0), "the padding is not payload");
        // A standard request cut to 30 bytes (the IP and UDP lengths say so).
        let g = UetFrame { encap: Encap::udp(1), ses: Ses::Request(ses()), ..f };
        let mut b = g.to_vec().unwrap();
        b.truncate(14 + 20 + 8 + 12 + 30);
        let ip_len = (20 + 8 + 12 + 30) as u16;
        b[16..18].copy_from_slice(&ip_len.to_be_bytes());
        b[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        assert!(matches!(ParsedUetFrame::parse(&b), Err(Error::Ses(_))));
    }

    #[test]
    fn every_ses_header_rides_behind_its_next_header() {
        use crate::uet::ses::{ResponseOpcode, ReturnCode, ShortCommon};
        let common = ShortCommon {
            opcode: ses::Opcode::Write,
            version: 0,
            flags: ses::flags::SOM | ses::flags::EOM,
            request_length: 8,
            ri_generation: 1,
            job_id: 2,
            pid_on_fep: 3,
            resource_index: 4,
        };
        let sess = [
            (Ses::SmallRequest(SmallRequest { common, buffer_offset: 5 }), next_header::SMALL_REQUEST),
            (
                Ses::MediumRequest(MediumRequest { common, header_data_or_offset: 6, initiator: 7, memory_key: 8 }),
                next_header::MEDIUM_REQUEST,
            ),
            (
                Ses::ResponseWithData(ResponseWithData {
                    list: 0,
                    opcode: ResponseOpcode::ResponseWithData,
                    version: 0,
                    return_code: ReturnCode::Ok,
                    message_id: 9,
                    byte4: 0,
                    job_id: 2,
                    read_request_message_id: 10,
                    payload_length: 8,
                    modified_length: 8,
                    message_offset: 0,
                }),
                next_header::RESPONSE_WITH_DATA,
            ),
            (
                Ses::SmallResponseWithData(SmallResponseWithData {
                    list: 0,
                    opcode: ResponseOpcode::ResponseWithData,
                    version: 0,
                    return_code: ReturnCode::Ok,
                    payload_length: 8,
                    job_id: 2,
                    original_request_psn: 11,
                }),
                next_header::SMALL_RESPONSE_WITH_DATA,
            ),
        ];
        for (s, nh) in sess {
            let f = UetFrame {
                src_mac: [0; 6],
                dst_mac: [0; 6],
                src_ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
                dst_ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
                dscp: 0,
                ecn: IpEcn::NotEct,
                ttl: 1,
                encap: Encap::Ip { protocol: IP_PROTOCOL, entropy: 1 },
                pds: Repr::Rudi { response: false, next_header: 0, flags: 0, pkt_id: 12 },
                ses: s,
                payload: &[0xee; 8],
            };
            let b = f.to_vec().unwrap();
            assert_eq!(b.len(), 14 + 40 + 4 + 8 + s.len() + 8);
            let p = ParsedUetFrame::parse(&b).unwrap();
            assert_eq!((p.pds.next_header(), p.ses, p.payload), (nh, s, &[0xee; 8][..]));
            // One byte short of the SES header: an SES error, not a panic.
            let cut = &b[..14 + 40 + 4 + 8 + s.len() - 1];
            let mut cut = cut.to_vec();
            let plen = (4 + 8 + s.len() - 1) as u16;
            cut[18..20].copy_from_slice(&plen.to_be_bytes());
            assert!(matches!(ParsedUetFrame::parse(&cut), Err(Error::Ses(_))), "{s:?}");
        }
    }
}
