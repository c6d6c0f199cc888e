//! Whole RoCEv2 Ethernet frames: Ethernet II / IPv4 or IPv6 / UDP (via `etherparse`) around the
//! InfiniBand headers of this module, with the ICRC computed on build and verified on parse.
//! [`ParsedFrame::parse_captured`] decodes the headers of a frame a capture's snap length cut
//! short (`tcpdump -s 128`), reporting the ICRC as not captured.
//!
//! RoCE v1 frames (EtherType 0x8915, IBTA Annex A16: Ethernet / GRH / BTH ..., no IP or UDP)
//! are decoded by [`ParsedV1Frame`]; [`AnyFrame`] picks v1 or v2 by the (inner) EtherType.
//! Their ICRC is reported, not verified ([`IcrcStatus::NotChecked`]).
//!
//! RoCEv2 conventions (IBTA Annex A17): UDP destination port 4791; the UDP source port carries
//! per-QP entropy for ECMP ([`udp_src_port_for_qp`]); the IPv4 UDP checksum is sent as zero,
//! the IPv6 one is computed (IPv6 forbids a zero UDP checksum, RFC 8200 §8.1). The reference
//! design marks data with DSCP 24 / ECT(0) and CNPs with DSCP 48.

use core::net::IpAddr;

use etherparse::err::packet::SliceError;
use etherparse::{
    Ethernet2Header, IpEcn, IpNumber, Ipv4Header, Ipv4HeaderSlice, Ipv6Header, Ipv6HeaderSlice, LaxLinkExtSlice,
    LaxNetSlice, LaxSlicedPacket, LinkExtSlice, LinkSlice, NetSlice, SlicedPacket, TransportSlice, UdpHeader,
};

use crate::ethernet::{self, VlanWalk};

use super::{
    aeth, atomic_ack_eth, atomic_eth, bth, deth, grh, icrc, ieth, reth, Error, IcrcStatus, Layer, Opcode, Packet, Repr,
};

const ETH_LEN: usize = 14;
const UDP_LEN: usize = 8;
/// Minimum Ethernet frame length without FCS; shorter frames are zero-padded.
pub const ETH_MIN_LEN: usize = 60;

/// The UDP source port RoCEv2 stacks derive from a QP pair: Linux `rdma_calc_flow_label`
/// followed by `rdma_flow_label_to_udp_sport` (include/rdma/ib_verbs.h), giving a port in
/// 0xC000..=0xFFFF.
pub fn udp_src_port_for_qp(local_qp: u32, remote_qp: u32) -> u16 {
    let mut v = u64::from(local_qp) * u64::from(remote_qp);
    v ^= v >> 20;
    v ^= v >> 40;
    let fl = (v & 0xfffff) as u32;
    let low = (fl & 0x03fff) ^ ((fl & 0xfc000) >> 14);
    (low as u16) | 0xc000
}

/// Builder for one RoCEv2 Ethernet frame. Fields are public; [`RoceFrame::new`] fills the
/// defaults of the reference design.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoceFrame<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// Both addresses must be of the same family.
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    /// 6 bits.
    pub dscp: u8,
    pub ecn: IpEcn,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv6 flow label (20 bits); ignored for IPv4.
    pub flow_label: u32,
    pub udp_src_port: u16,
    pub udp_dst_port: u16,
    /// The InfiniBand headers. `bth.pad_count` is recomputed from the payload length on emit.
    pub headers: Repr,
    pub payload: &'a [u8],
}

impl<'a> RoceFrame<'a> {
    /// A frame with DSCP 24, ECT(0), TTL 64, UDP source port derived from the destination QP,
    /// destination port 4791.
    pub fn new(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src_ip: IpAddr,
        dst_ip: IpAddr,
        headers: Repr,
        payload: &'a [u8],
    ) -> Self {
        RoceFrame {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            dscp: super::DSCP_DATA,
            ecn: IpEcn::Ect0,
            ttl: 64,
            flow_label: 0,
            udp_src_port: udp_src_port_for_qp(headers.bth.dest_qp, headers.bth.dest_qp),
            udp_dst_port: super::UDP_PORT,
            headers,
            payload,
        }
    }

    fn ib_len(&self) -> usize {
        let mut h = self.headers;
        h.bth.pad_count = super::pad_for(self.payload.len());
        h.buffer_len(self.payload.len())
    }

    fn ip_hdr_len(&self) -> usize {
        match self.src_ip {
            IpAddr::V4(_) => Ipv4Header::MIN_LEN,
            IpAddr::V6(_) => Ipv6Header::LEN,
        }
    }

    /// Length of the emitted frame (without FCS), including the padding to 60 bytes.
    pub fn frame_len(&self) -> usize {
        (ETH_LEN + self.ip_hdr_len() + UDP_LEN + self.ib_len()).max(ETH_MIN_LEN)
    }

    /// Write the frame into the start of `buf` and return its length ([`frame_len`](Self::frame_len)).
    /// Allocates nothing.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let mut headers = self.headers;
        headers.bth.pad_count = super::pad_for(self.payload.len());
        headers.check_layout()?;
        let ib_len = headers.buffer_len(self.payload.len());
        let ip_hlen = self.ip_hdr_len();
        let natural = ETH_LEN + ip_hlen + UDP_LEN + ib_len;
        let total = natural.max(ETH_MIN_LEN);
        if buf.len() < total {
            return Err(Error::TooBig { needed: total, available: buf.len() });
        }
        let udp_total = UDP_LEN + ib_len;
        let udp_len = u16::try_from(udp_total)
            .map_err(|_| Error::TooBig { needed: udp_total, available: usize::from(u16::MAX) })?;
        let buf = &mut buf[..total];
        let (eth, rest) = buf.split_at_mut(ETH_LEN);
        let (ip, rest) = rest.split_at_mut(ip_hlen);
        let (udp, rest) = rest.split_at_mut(UDP_LEN);
        let (ib, pad) = rest.split_at_mut(ib_len);
        pad.fill(0);
        headers.emit(ib, self.payload)?;
        let ether_type = ethernet::emit_ip_header(
            ip,
            self.src_ip,
            self.dst_ip,
            self.dscp,
            self.ecn,
            self.ttl,
            self.flow_label,
            IpNumber::UDP,
            udp_len,
        )
        .map_err(|e| match e {
            ethernet::IpHeaderError::TooBig => Error::TooBig { needed: natural, available: usize::from(u16::MAX) },
            ethernet::IpHeaderError::MixedFamilies => Error::MixedFamilies,
        })?;
        let udp_hdr = UdpHeader {
            source_port: self.udp_src_port,
            destination_port: self.udp_dst_port,
            length: udp_len,
            checksum: 0,
        };
        udp.copy_from_slice(&udp_hdr.to_bytes());
        eth.copy_from_slice(
            &Ethernet2Header { source: self.src_mac, destination: self.dst_mac, ether_type }.to_bytes(),
        );
        // The ICRC masks the UDP checksum, so it can be computed first.
        let ip_packet_len = ip_hlen + udp_total;
        let ip_packet = &mut buf[ETH_LEN..ETH_LEN + ip_packet_len];
        icrc::fill(ip_packet)?;
        if let (IpAddr::V6(s), IpAddr::V6(d)) = (self.src_ip, self.dst_ip) {
            let (_, rest) = ip_packet.split_at_mut(ip_hlen);
            let (udp, ib) = rest.split_at_mut(UDP_LEN);
            let c = udp_hdr
                .calc_checksum_ipv6_raw(s.octets(), d.octets(), ib)
                .map_err(|_| Error::TooBig { needed: natural, available: usize::from(u16::MAX) })?;
            udp[6..8].copy_from_slice(&c.to_be_bytes());
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

    /// Parse a whole Ethernet frame; see [`ParsedFrame::parse`].
    pub fn parse(frame: &[u8]) -> Result<ParsedFrame<'_>, Error> {
        ParsedFrame::parse(frame)
    }
}

/// A RoCEv2 CNP (Annex A17.9.3): BTH opcode 0x81 with BECN set, P_Key 0xffff, the notified QP
/// as DestQP, 16 reserved bytes; sent with DSCP 48 and Not-ECT.
pub fn cnp(src_mac: [u8; 6], dst_mac: [u8; 6], src_ip: IpAddr, dst_ip: IpAddr, dest_qp: u32) -> RoceFrame<'static> {
    let mut b = bth::Repr::new(Opcode::Cnp, dest_qp, 0);
    b.becn = true;
    let mut f = RoceFrame::new(src_mac, dst_mac, src_ip, dst_ip, Repr::new(b), &[]);
    f.dscp = super::DSCP_CNP;
    f.ecn = IpEcn::NotEct;
    f
}

/// The IP fields of a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpInfo {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dscp: u8,
    pub ecn: IpEcn,
    /// TTL / hop limit.
    pub ttl: u8,
}

impl IpInfo {
    /// The fields of an IPv4 header whose payload must be UDP (else [`Error::NotUdp`]).
    fn udp_over_ipv4(h: &Ipv4HeaderSlice<'_>) -> Result<Self, Error> {
        if h.protocol() != IpNumber::UDP {
            return Err(Error::NotUdp(h.protocol().0));
        }
        Ok(IpInfo {
            src: IpAddr::V4(h.source_addr()),
            dst: IpAddr::V4(h.destination_addr()),
            dscp: h.dcp().value(),
            ecn: h.ecn(),
            ttl: h.ttl(),
        })
    }

    /// The fields of an IPv6 header whose next header must be UDP (else [`Error::NotUdp`]).
    fn udp_over_ipv6(h: &Ipv6HeaderSlice<'_>) -> Result<Self, Error> {
        if h.next_header() != IpNumber::UDP {
            return Err(Error::NotUdp(h.next_header().0));
        }
        Ok(IpInfo {
            src: IpAddr::V6(h.source_addr()),
            dst: IpAddr::V6(h.destination_addr()),
            dscp: h.dscp().value(),
            ecn: h.ecn(),
            ttl: h.hop_limit(),
        })
    }
}

/// A parsed RoCEv2 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFrame<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// 802.1Q tag (PCP, VID) when present.
    pub vlan: Option<(u8, u16)>,
    pub ip: IpInfo,
    pub udp_src_port: u16,
    pub udp_dst_port: u16,
    pub udp_checksum: u16,
    pub headers: Repr,
    /// The payload without pad bytes, as far as it was captured.
    pub payload: &'a [u8],
    /// Length of the payload on the wire (without pad bytes): `payload.len()` unless the
    /// capture cut the frame ([`ParsedFrame::parse_captured`]).
    pub payload_len: usize,
    pub icrc: IcrcStatus,
}

/// The error that stopped `etherparse`'s lax slicer, as a truncation naming our layer when it
/// is one.
fn lax_error(e: &SliceError) -> Error {
    use etherparse::err::Layer as L;
    if let SliceError::Len(l) = e {
        let layer = match l.layer {
            L::Ethernet2Header | L::VlanHeader | L::EtherPayload => Some(Layer::Ethernet),
            L::Ipv4Header | L::Ipv4Packet => Some(Layer::Ipv4),
            L::Ipv6Header | L::Ipv6Packet | L::Ipv6ExtHeader | L::Ipv6FragHeader => Some(Layer::Ipv6),
            L::UdpHeader | L::UdpPayload => Some(Layer::Udp),
            _ => None,
        };
        if let Some(layer) = layer {
            return Error::Truncated { layer, needed: l.required_len, available: l.len };
        }
    }
    Error::Lower(e.clone())
}

fn offset_in(outer: &[u8], inner: &[u8]) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

impl<'a> ParsedFrame<'a> {
    /// Parse an Ethernet II frame (without FCS; trailing Ethernet padding is ignored) carrying
    /// RoCEv2, and verify its ICRC. A bad ICRC is reported in [`ParsedFrame::icrc`], not as an
    /// error; truncation at any layer is an error naming the layer and lengths.
    pub fn parse(frame: &'a [u8]) -> Result<Self, Error> {
        let sp = SlicedPacket::from_ethernet(frame)?;
        let Some(LinkSlice::Ethernet2(eth)) = &sp.link else {
            return Err(Error::Truncated { layer: Layer::Ethernet, needed: ETH_LEN, available: frame.len() });
        };
        let vlan = sp.link_exts.iter().find_map(|e| match e {
            LinkExtSlice::Vlan(v) => Some((v.priority_code_point().value(), v.vlan_identifier().value())),
            _ => None,
        });
        let (ip, ip_start) = match &sp.net {
            Some(NetSlice::Ipv4(v4)) => {
                if v4.is_payload_fragmented() {
                    return Err(Error::Fragmented);
                }
                let h = v4.header();
                (IpInfo::udp_over_ipv4(&h)?, offset_in(frame, h.slice()))
            }
            Some(NetSlice::Ipv6(v6)) => {
                if v6.is_payload_fragmented() {
                    return Err(Error::Fragmented);
                }
                let h = v6.header();
                (IpInfo::udp_over_ipv6(&h)?, offset_in(frame, h.slice()))
            }
            _ => return Err(Error::NotIp(eth.ether_type().0)),
        };
        let Some(TransportSlice::Udp(udp)) = &sp.transport else {
            return Err(Error::Truncated { layer: Layer::Udp, needed: UDP_LEN, available: 0 });
        };
        if udp.destination_port() != super::UDP_PORT {
            return Err(Error::NotRocePort(udp.destination_port()));
        }
        let ib_bytes = udp.payload();
        let ib = Packet::new_checked(ib_bytes)?;
        let headers = Repr::parse(&ib)?;
        let ip_end = offset_in(frame, ib_bytes) + ib_bytes.len();
        let icrc = icrc::verify(&frame[ip_start..ip_end])?;
        Ok(ParsedFrame {
            src_mac: eth.source(),
            dst_mac: eth.destination(),
            vlan,
            ip,
            udp_src_port: udp.source_port(),
            udp_dst_port: udp.destination_port(),
            udp_checksum: udp.checksum(),
            headers,
            payload: ib.payload(),
            payload_len: ib.payload().len(),
            icrc,
        })
    }

    /// Parse a frame as a capture recorded it: `frame` holds the captured bytes, `orig_len`
    /// the length the frame had on the wire (pcap `orig_len`). A complete frame
    /// (`frame.len() >= orig_len`) is exactly [`ParsedFrame::parse`]. A frame cut by the snap
    /// length is parsed leniently: Ethernet/VLAN/IP/UDP with `etherparse`'s lax slicer, then
    /// the BTH and the extension headers its opcode requires, which must all have been
    /// captured (else an error naming the layer). The payload is what was captured of it
    /// ([`payload_len`](Self::payload_len) is its length on the wire, from the UDP length) and
    /// the ICRC is [`IcrcStatus::NotCaptured`]. If the capture cut only Ethernet padding, the
    /// ICRC is verified as usual.
    pub fn parse_captured(frame: &'a [u8], orig_len: usize) -> Result<Self, Error> {
        if frame.len() >= orig_len {
            return Self::parse(frame);
        }
        let sp = LaxSlicedPacket::from_ethernet(frame).map_err(|e| Error::Truncated {
            layer: Layer::Ethernet,
            needed: e.required_len,
            available: e.len,
        })?;
        let stop = |sp: &LaxSlicedPacket<'_>| sp.stop_err.as_ref().map(|(e, _)| lax_error(e));
        let Some(LinkSlice::Ethernet2(eth)) = &sp.link else {
            return Err(Error::Truncated { layer: Layer::Ethernet, needed: ETH_LEN, available: frame.len() });
        };
        let vlan = sp.link_exts.iter().find_map(|e| match e {
            LaxLinkExtSlice::Vlan(v) => Some((v.priority_code_point().value(), v.vlan_identifier().value())),
            _ => None,
        });
        let ip = match &sp.net {
            Some(LaxNetSlice::Ipv4(v4)) => {
                if v4.is_payload_fragmented() {
                    return Err(Error::Fragmented);
                }
                IpInfo::udp_over_ipv4(&v4.header())?
            }
            Some(LaxNetSlice::Ipv6(v6)) => {
                if v6.is_payload_fragmented() {
                    return Err(Error::Fragmented);
                }
                IpInfo::udp_over_ipv6(&v6.header())?
            }
            _ => return Err(stop(&sp).unwrap_or(Error::NotIp(eth.ether_type().0))),
        };
        let Some(TransportSlice::Udp(udp)) = &sp.transport else {
            let available = sp.ip_payload().map_or(0, |p| p.payload.len());
            return Err(stop(&sp).unwrap_or(Error::Truncated { layer: Layer::Udp, needed: UDP_LEN, available }));
        };
        if udp.destination_port() != super::UDP_PORT {
            return Err(Error::NotRocePort(udp.destination_port()));
        }
        let ib_bytes = udp.payload();
        let (headers, hdr_len) = Repr::parse_headers(ib_bytes)?;
        // The InfiniBand part on the wire, from the UDP length; it must hold the headers, the
        // pad bytes and the ICRC, and fit the frame's length on the wire.
        let udp_start = offset_in(frame, udp.slice());
        let udp_len = usize::from(udp.length());
        if udp_start + udp_len > orig_len {
            return Err(Error::Truncated { layer: Layer::Udp, needed: udp_start + udp_len, available: orig_len });
        }
        let ib_wire = udp_len.saturating_sub(UDP_LEN);
        let pad = usize::from(headers.bth.pad_count);
        let Some(payload_len) = ib_wire.checked_sub(hdr_len + pad + icrc::LEN) else {
            return Err(Error::Truncated { layer: Layer::Icrc, needed: hdr_len + pad + icrc::LEN, available: ib_wire });
        };
        if ib_bytes.len() >= ib_wire {
            // Only Ethernet padding is missing: the ICRC can be verified.
            return Self::parse(frame);
        }
        let payload = &ib_bytes[hdr_len..ib_bytes.len().min(hdr_len + payload_len)];
        Ok(ParsedFrame {
            src_mac: eth.source(),
            dst_mac: eth.destination(),
            vlan,
            ip,
            udp_src_port: udp.source_port(),
            udp_dst_port: udp.destination_port(),
            udp_checksum: udp.checksum(),
            headers,
            payload,
            payload_len,
            icrc: IcrcStatus::NotCaptured { captured: frame.len(), orig_len },
        })
    }

    /// True when the capture holds the whole payload.
    pub fn payload_complete(&self) -> bool {
        self.payload.len() == self.payload_len
    }

    /// The BTH.
    pub fn bth(&self) -> &bth::Repr {
        &self.headers.bth
    }
    /// The RETH, if any.
    pub fn reth(&self) -> Option<&reth::Repr> {
        self.headers.reth.as_ref()
    }
    /// The AETH, if any.
    pub fn aeth(&self) -> Option<&aeth::Repr> {
        self.headers.aeth.as_ref()
    }
    /// The DETH, if any.
    pub fn deth(&self) -> Option<&deth::Repr> {
        self.headers.deth.as_ref()
    }
    /// The AtomicETH, if any.
    pub fn atomic_eth(&self) -> Option<&atomic_eth::Repr> {
        self.headers.atomic_eth.as_ref()
    }
    /// The AtomicAckETH, if any.
    pub fn atomic_ack_eth(&self) -> Option<&atomic_ack_eth::Repr> {
        self.headers.atomic_ack_eth.as_ref()
    }
    /// The IETH, if any.
    pub fn ieth(&self) -> Option<&ieth::Repr> {
        self.headers.ieth.as_ref()
    }
}

/// [`ethernet::walk_vlan_tags`] with its truncation errors as this module's
/// [`Error::Truncated`] at the Ethernet layer.
fn inner_ether_type(frame: &[u8]) -> Result<VlanWalk, Error> {
    ethernet::walk_vlan_tags(frame).map_err(|e| {
        let (needed, available) = e.truncation().unwrap_or((ETH_LEN, frame.len()));
        Error::Truncated { layer: Layer::Ethernet, needed, available }
    })
}

/// A parsed RoCE v1 frame: Ethernet (EtherType 0x8915, optionally VLAN-tagged) / GRH / the
/// InfiniBand headers / payload / ICRC (IBTA Annex A16).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedV1Frame<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// 802.1Q tag (PCP, VID) when present.
    pub vlan: Option<(u8, u16)>,
    pub grh: grh::Repr,
    pub headers: Repr,
    /// The payload without pad bytes, as far as it was captured.
    pub payload: &'a [u8],
    /// Length of the payload on the wire (without pad bytes).
    pub payload_len: usize,
    /// [`IcrcStatus::NotChecked`] with the stored value, or [`IcrcStatus::NotCaptured`].
    pub icrc: IcrcStatus,
}

impl<'a> ParsedV1Frame<'a> {
    /// Ethernet, VLAN tags and a whole GRH announcing a BTH: the GRH, and the Ethernet
    /// information with `payload_offset` moved to the InfiniBand part.
    fn grh(frame: &'a [u8]) -> Result<(grh::Repr, VlanWalk), Error> {
        let mut eth = inner_ether_type(frame)?;
        if eth.ether_type != super::ETHERTYPE_ROCE_V1 {
            return Err(Error::NotRoceV1(eth.ether_type));
        }
        let g = grh::Repr::parse(&grh::Packet::new_checked(&frame[eth.payload_offset..])?)?;
        if g.next_header != grh::NEXT_HEADER_IBA {
            return Err(Error::GrhNextHeader(g.next_header));
        }
        eth.payload_offset += grh::LEN;
        Ok((g, eth))
    }

    /// Parse a whole RoCE v1 frame. The GRH's PayLen bounds the InfiniBand part (bytes after
    /// it, such as Ethernet padding, are ignored); truncation at any layer is an error naming
    /// the layer and lengths. The ICRC is not verified ([`IcrcStatus::NotChecked`]).
    pub fn parse(frame: &'a [u8]) -> Result<Self, Error> {
        let (grh, VlanWalk { payload_offset: ib_start, outer, .. }) = Self::grh(frame)?;
        let vlan = outer.map(|t| (t.pcp.value(), t.vid));
        let ib_len = usize::from(grh.payload_len);
        let available = frame.len() - ib_start;
        if available < ib_len {
            return Err(Error::Truncated { layer: Layer::Grh, needed: ib_len, available });
        }
        let ib = Packet::new_checked(&frame[ib_start..ib_start + ib_len])?;
        let headers = Repr::parse(&ib)?;
        Ok(ParsedV1Frame {
            src_mac: mac(&frame[6..12]),
            dst_mac: mac(&frame[..6]),
            vlan,
            grh,
            headers,
            payload: ib.payload(),
            payload_len: ib.payload().len(),
            icrc: IcrcStatus::NotChecked { stored: ib.icrc() },
        })
    }

    /// Parse a frame as a capture recorded it (`orig_len`: its length on the wire), as
    /// [`ParsedFrame::parse_captured`] does for RoCEv2: a frame cut by the snap length keeps
    /// its headers, which must have been captured, and reports the ICRC as not captured.
    pub fn parse_captured(frame: &'a [u8], orig_len: usize) -> Result<Self, Error> {
        if frame.len() >= orig_len {
            return Self::parse(frame);
        }
        let (grh, VlanWalk { payload_offset: ib_start, outer, .. }) = Self::grh(frame)?;
        let vlan = outer.map(|t| (t.pcp.value(), t.vid));
        let ib_wire = usize::from(grh.payload_len);
        if ib_start + ib_wire > orig_len {
            return Err(Error::Truncated { layer: Layer::Grh, needed: ib_start + ib_wire, available: orig_len });
        }
        let ib_bytes = &frame[ib_start..];
        if ib_bytes.len() >= ib_wire {
            // Only bytes after the ICRC are missing.
            return Self::parse(frame);
        }
        let (headers, hdr_len) = Repr::parse_headers(ib_bytes)?;
        let pad = usize::from(headers.bth.pad_count);
        let Some(payload_len) = ib_wire.checked_sub(hdr_len + pad + icrc::LEN) else {
            return Err(Error::Truncated { layer: Layer::Icrc, needed: hdr_len + pad + icrc::LEN, available: ib_wire });
        };
        let payload = &ib_bytes[hdr_len..ib_bytes.len().min(hdr_len + payload_len)];
        Ok(ParsedV1Frame {
            src_mac: mac(&frame[6..12]),
            dst_mac: mac(&frame[..6]),
            vlan,
            grh,
            headers,
            payload,
            payload_len,
            icrc: IcrcStatus::NotCaptured { captured: frame.len(), orig_len },
        })
    }

    /// True when the capture holds the whole payload.
    pub fn payload_complete(&self) -> bool {
        self.payload.len() == self.payload_len
    }

    /// The BTH.
    pub fn bth(&self) -> &bth::Repr {
        &self.headers.bth
    }
}

fn mac(b: &[u8]) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(b);
    m
}

/// A RoCEv2 or RoCE v1 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyFrame<'a> {
    V2(ParsedFrame<'a>),
    V1(ParsedV1Frame<'a>),
}

impl<'a> AnyFrame<'a> {
    /// RoCE v1 when the EtherType after any VLAN tags is 0x8915, else
    /// [`ParsedFrame::parse`] (whose errors say why a frame is not RoCEv2).
    pub fn parse(frame: &'a [u8]) -> Result<Self, Error> {
        match inner_ether_type(frame) {
            Ok(VlanWalk { ether_type: super::ETHERTYPE_ROCE_V1, .. }) => ParsedV1Frame::parse(frame).map(AnyFrame::V1),
            _ => ParsedFrame::parse(frame).map(AnyFrame::V2),
        }
    }

    /// As [`parse`](Self::parse), for a frame a capture may have cut (`orig_len`: its length
    /// on the wire).
    pub fn parse_captured(frame: &'a [u8], orig_len: usize) -> Result<Self, Error> {
        match inner_ether_type(frame) {
            Ok(VlanWalk { ether_type: super::ETHERTYPE_ROCE_V1, .. }) => {
                ParsedV1Frame::parse_captured(frame, orig_len).map(AnyFrame::V1)
            }
            _ => ParsedFrame::parse_captured(frame, orig_len).map(AnyFrame::V2),
        }
    }

    /// The InfiniBand headers.
    pub fn headers(&self) -> &Repr {
        match self {
            AnyFrame::V2(p) => &p.headers,
            AnyFrame::V1(p) => &p.headers,
        }
    }

    /// The payload as far as it was captured.
    pub fn payload(&self) -> &'a [u8] {
        match self {
            AnyFrame::V2(p) => p.payload,
            AnyFrame::V1(p) => p.payload,
        }
    }

    /// The ICRC status.
    pub fn icrc(&self) -> IcrcStatus {
        match self {
            AnyFrame::V2(p) => p.icrc,
            AnyFrame::V1(p) => p.icrc,
        }
    }
}
