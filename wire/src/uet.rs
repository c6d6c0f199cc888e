//! Ultra Ethernet Transport (UET), UEC Specification 1.0: the Packet Delivery Sublayer (PDS)
//! headers a NIC exchanges per packet.
//!
//! Sources, read field by field (docs/research/uet-wire-formats.md has every citation and the
//! 26 places where they disagree):
//! - xdp2 `src/include/uet/pds.h` (xdp2-dev/xdp2 @3d3d6a31): the structures, big-endian bit
//!   order from their `__BIG_ENDIAN_BITFIELD` branches;
//! - Wireshark `epan/dissectors/packet-uet.c` (@2e69f352, citing UE-Specification 1.0.1): the
//!   offsets its dissectors read and the masks of its fields;
//! - the UEC's reference provider `ultraethernet/uet-ref-prov` `uet_pkt_hdr.h` (@17649d9f).
//!
//! ```text
//! Ethernet | IPv4/IPv6 | UDP dst 4793 (sport = entropy) | PDS header | SES header | payload
//! Ethernet | IPv4/IPv6 proto 253 | entropy header (4)   | PDS header | SES header | payload
//!
//! PDS prologue, the first 16 bits of every PDS header (big-endian):
//!   type (5) | next header, or control type (4) | flags (7)
//! RUD/ROD request (12): prologue | clear_psn_offset (16) | PSN (32) | SPDCID (16) | DPDCID (16)
//!   (with SYN: pdc_info (4) | psn_offset (12) in place of the DPDCID)
//! ACK (12):             prologue | ack_psn_offset (16) | CACK_PSN (32) | SPDCID | DPDCID
//! NACK (16):            prologue | nack_code (8) | vendor_code (8) | NACK_PSN (32) | SPDCID |
//!                       DPDCID | payload (32)
//! ```
//!
//! Where the sources disagree this module follows the reading two of them share (the
//! research file's D-numbers): UDP port 4793 (D1: xdp2 and Wireshark; uet-ref-prov's 49150
//! predates the assignment); the PSN offsets signed (D4: uet-ref-prov's `int16_t` and
//! Wireshark's signed reads); the ACK's 0x40 flag kept as a raw bit (D5: reserved in xdp2 and
//! Wireshark, EPSN in uet-ref-prov); the SYN packet's `pdc_info` kept as its raw 4 bits (D3:
//! use_rsv_pdc is 0x8 of them in xdp2 and Wireshark, 0x1 in uet-ref-prov). Unknown packet types
//! and NACK codes are kept with their values.

/// UDP destination port of UET over UDP (IANA; xdp2 `pds.h` `UET_UDP_PORT_NUM`, Wireshark's
/// registration).
pub const UDP_PORT: u16 = 4793;

/// IP protocol number of the native encapsulation (uet-ref-prov `uet_pkt_hdr.h`; an RFC 3692
/// experimental value, so a configurable default).
pub const IP_PROTOCOL: u8 = 253;

/// Length of the native encapsulation's entropy header: entropy (16) | reserved (16).
pub const ENTROPY_HEADER_LEN: usize = 4;

/// Why a PDS header does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("UET PDS {what} truncated: need {needed} bytes, have {available}")]
    Truncated { what: &'static str, needed: usize, available: usize },
}

/// A PDS packet type (the prologue's 5 bits); values the specification does not name are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PdsType {
    Tss,
    RudRequest,
    RodRequest,
    RudiRequest,
    RudiResponse,
    UudRequest,
    Ack,
    AckCc,
    AckCcx,
    Nack,
    Control,
    NackCcx,
    RudCcRequest,
    RodCcRequest,
    Unknown(u8),
}

impl From<u8> for PdsType {
    fn from(v: u8) -> Self {
        match v & 0x1f {
            1 => PdsType::Tss,
            2 => PdsType::RudRequest,
            3 => PdsType::RodRequest,
            4 => PdsType::RudiRequest,
            5 => PdsType::RudiResponse,
            6 => PdsType::UudRequest,
            7 => PdsType::Ack,
            8 => PdsType::AckCc,
            9 => PdsType::AckCcx,
            10 => PdsType::Nack,
            11 => PdsType::Control,
            12 => PdsType::NackCcx,
            13 => PdsType::RudCcRequest,
            14 => PdsType::RodCcRequest,
            other => PdsType::Unknown(other),
        }
    }
}

impl From<PdsType> for u8 {
    fn from(t: PdsType) -> u8 {
        match t {
            PdsType::Tss => 1,
            PdsType::RudRequest => 2,
            PdsType::RodRequest => 3,
            PdsType::RudiRequest => 4,
            PdsType::RudiResponse => 5,
            PdsType::UudRequest => 6,
            PdsType::Ack => 7,
            PdsType::AckCc => 8,
            PdsType::AckCcx => 9,
            PdsType::Nack => 10,
            PdsType::Control => 11,
            PdsType::NackCcx => 12,
            PdsType::RudCcRequest => 13,
            PdsType::RodCcRequest => 14,
            PdsType::Unknown(v) => v & 0x1f,
        }
    }
}

/// A NACK code (xdp2 `enum uet_pds_nack_code`, Wireshark's and uet-ref-prov's tables agree on
/// the values); the others are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NackCode {
    /// 0x01: the packet was trimmed in the fabric.
    Trimmed,
    /// 0x02: the packet was trimmed at the last hop.
    TrimmedLastHop,
    /// 0x03: an ACK carrying read response data was trimmed.
    TrimmedAck,
    /// 0x0B: the PSN is outside the receiver's tracking window.
    PsnOutOfWindow,
    /// 0x0D: a PSN arrived out of order on a ROD PDC.
    RodOutOfOrder,
    /// 0x0E: the DPDCID is not known and the packet is not a SYN.
    InvalidDpdcid,
    Other(u8),
}

impl From<u8> for NackCode {
    fn from(v: u8) -> Self {
        match v {
            0x01 => NackCode::Trimmed,
            0x02 => NackCode::TrimmedLastHop,
            0x03 => NackCode::TrimmedAck,
            0x0b => NackCode::PsnOutOfWindow,
            0x0d => NackCode::RodOutOfOrder,
            0x0e => NackCode::InvalidDpdcid,
            other => NackCode::Other(other),
        }
    }
}

impl From<NackCode> for u8 {
    fn from(c: NackCode) -> u8 {
        match c {
            NackCode::Trimmed => 0x01,
            NackCode::TrimmedLastHop => 0x02,
            NackCode::TrimmedAck => 0x03,
            NackCode::PsnOutOfWindow => 0x0b,
            NackCode::RodOutOfOrder => 0x0d,
            NackCode::InvalidDpdcid => 0x0e,
            NackCode::Other(v) => v,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const PROLOGUE: Range<usize> = 0..2;
    /// Request: clear_psn_offset; ACK: ack_psn_offset (or probe_opaque).
    pub const OFFSET: Range<usize> = 2..4;
    /// NACK: nack_code and vendor_code.
    pub const NACK_CODE: usize = 2;
    pub const VENDOR_CODE: usize = 3;
    /// Request: PSN; ACK: CACK_PSN; NACK: NACK_PSN (or packet id).
    pub const PSN: Range<usize> = 4..8;
    pub const SPDCID: Range<usize> = 8..10;
    pub const DPDCID: Range<usize> = 10..12;
    pub const NACK_PAYLOAD: Range<usize> = 12..16;
}

const TYPE_SHIFT: u16 = 11;
const NEXT_SHIFT: u16 = 7;
const NEXT_MASK: u16 = 0x0f;
const FLAGS_MASK: u16 = 0x7f;

/// Flags of a RUD/ROD request (the prologue's low 7 bits).
pub mod request_flags {
    pub const RETX: u8 = 0x10;
    pub const AR: u8 = 0x08;
    pub const SYN: u8 = 0x04;
}

/// Flags of an ACK.
pub mod ack_flags {
    /// Reserved in xdp2 and Wireshark, EPSN in uet-ref-prov (D5).
    pub const BIT6: u8 = 0x40;
    /// The acknowledged packet arrived ECN-marked.
    pub const M: u8 = 0x20;
    pub const RETX: u8 = 0x10;
    /// A probe: bytes 2-3 are the probe's opaque value.
    pub const P: u8 = 0x08;
    /// The request field (0 none, 1 clear, 2 close).
    pub const REQ_MASK: u8 = 0x06;
    pub const REQ_SHIFT: u8 = 1;
}

/// Flags of a NACK.
pub mod nack_flags {
    pub const M: u8 = 0x20;
    pub const RETX: u8 = 0x10;
    /// NACK type: 0 RUD/ROD (bytes 4-7 a PSN), 1 RUDI (a packet id).
    pub const NT: u8 = 0x08;
}

/// Length of a RUD/ROD request and of an ACK.
pub const REQUEST_LEN: usize = 12;
/// Length of an ACK.
pub const ACK_LEN: usize = 12;
/// Length of a NACK.
pub const NACK_LEN: usize = 16;

/// A read/write view of a PDS header at the start of a buffer: the prologue, and the fields
/// each type has at its offsets (the caller checks the type, then the length with
/// [`Packet::check_len`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking the length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap, checking that the buffer holds the whole header its type has (the prologue alone
    /// for a type this module does not lay out).
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The header's length by its type (2, the prologue, for the types not laid out here).
    pub fn header_len(&self) -> usize {
        match self.pds_type() {
            PdsType::RudRequest | PdsType::RodRequest => REQUEST_LEN,
            PdsType::Ack => ACK_LEN,
            PdsType::Nack => NACK_LEN,
            _ => field::PROLOGUE.end,
        }
    }

    /// Ensure that no getter of its type panics.
    pub fn check_len(&self) -> Result<(), Error> {
        let available = self.buffer.as_ref().len();
        if available < field::PROLOGUE.end {
            return Err(Error::Truncated { what: "prologue", needed: field::PROLOGUE.end, available });
        }
        let needed = self.header_len();
        if available < needed {
            let what = match self.pds_type() {
                PdsType::Ack => "ACK",
                PdsType::Nack => "NACK",
                _ => "request",
            };
            return Err(Error::Truncated { what, needed, available });
        }
        Ok(())
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    fn prologue(&self) -> u16 {
        self.u16_at(field::PROLOGUE)
    }

    /// The packet type.
    pub fn pds_type(&self) -> PdsType {
        PdsType::from((self.prologue() >> TYPE_SHIFT) as u8)
    }

    /// The next header (the SES header that follows), or a control packet's control type.
    pub fn next_header(&self) -> u8 {
        ((self.prologue() >> NEXT_SHIFT) & NEXT_MASK) as u8
    }

    /// The 7 flag bits (their meaning depends on the type).
    pub fn flags(&self) -> u8 {
        (self.prologue() & FLAGS_MASK) as u8
    }

    /// Request: clear_psn_offset; ACK: ack_psn_offset (signed, D4).
    pub fn psn_offset(&self) -> i16 {
        self.u16_at(field::OFFSET) as i16
    }

    /// Request: the PSN; ACK: the cumulative ACK PSN; NACK: the NACKed PSN (or packet id).
    pub fn psn(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::PSN];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Source PDC id.
    pub fn spdcid(&self) -> u16 {
        self.u16_at(field::SPDCID)
    }

    /// Destination PDC id (a SYN request carries pdc_info and psn_offset here instead).
    pub fn dpdcid(&self) -> u16 {
        self.u16_at(field::DPDCID)
    }

    /// NACK: its code.
    pub fn nack_code(&self) -> NackCode {
        NackCode::from(self.buffer.as_ref()[field::NACK_CODE])
    }

    /// NACK: the vendor code.
    pub fn vendor_code(&self) -> u8 {
        self.buffer.as_ref()[field::VENDOR_CODE]
    }

    /// NACK: the payload word (for NEW_START_PSN, the new start PSN).
    pub fn nack_payload(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::NACK_PAYLOAD];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the prologue (the type's 5 bits, the next header's 4, the flags' 7; wider values
    /// are masked).
    pub fn set_prologue(&mut self, t: PdsType, next_header: u8, flags: u8) {
        let v = (u16::from(u8::from(t)) << TYPE_SHIFT)
            | ((u16::from(next_header) & NEXT_MASK) << NEXT_SHIFT)
            | (u16::from(flags) & FLAGS_MASK);
        self.buffer.as_mut()[field::PROLOGUE].copy_from_slice(&v.to_be_bytes());
    }

    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    fn set_u32(&mut self, r: core::ops::Range<usize>, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }
}

/// A PDS header of the types this module lays out; any other type keeps its prologue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr {
    /// A RUD (`ordered` false) or ROD request.
    Request {
        ordered: bool,
        next_header: u8,
        flags: u8,
        clear_psn_offset: i16,
        psn: u32,
        spdcid: u16,
        dpdcid: u16,
    },
    Ack {
        next_header: u8,
        flags: u8,
        ack_psn_offset: i16,
        cack_psn: u32,
        spdcid: u16,
        dpdcid: u16,
    },
    Nack {
        next_header: u8,
        flags: u8,
        code: NackCode,
        vendor_code: u8,
        psn: u32,
        spdcid: u16,
        dpdcid: u16,
        payload: u32,
    },
    Other {
        pds_type: PdsType,
        next_header: u8,
        flags: u8,
    },
}

impl Repr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, Error> {
        p.check_len()?;
        let (next_header, flags) = (p.next_header(), p.flags());
        Ok(match p.pds_type() {
            t @ (PdsType::RudRequest | PdsType::RodRequest) => Repr::Request {
                ordered: t == PdsType::RodRequest,
                next_header,
                flags,
                clear_psn_offset: p.psn_offset(),
                psn: p.psn(),
                spdcid: p.spdcid(),
                dpdcid: p.dpdcid(),
            },
            PdsType::Ack => Repr::Ack {
                next_header,
                flags,
                ack_psn_offset: p.psn_offset(),
                cack_psn: p.psn(),
                spdcid: p.spdcid(),
                dpdcid: p.dpdcid(),
            },
            PdsType::Nack => Repr::Nack {
                next_header,
                flags,
                code: p.nack_code(),
                vendor_code: p.vendor_code(),
                psn: p.psn(),
                spdcid: p.spdcid(),
                dpdcid: p.dpdcid(),
                payload: p.nack_payload(),
            },
            pds_type => Repr::Other { pds_type, next_header, flags },
        })
    }

    /// Bytes [`Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::Request { .. } => REQUEST_LEN,
            Repr::Ack { .. } => ACK_LEN,
            Repr::Nack { .. } => NACK_LEN,
            Repr::Other { .. } => field::PROLOGUE.end,
        }
    }

    /// Writes the header at the start of `p` (at least [`Repr::buffer_len`] bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        match *self {
            Repr::Request { ordered, next_header, flags, clear_psn_offset, psn, spdcid, dpdcid } => {
                let t = if ordered { PdsType::RodRequest } else { PdsType::RudRequest };
                p.set_prologue(t, next_header, flags);
                p.set_u16(field::OFFSET, clear_psn_offset as u16);
                p.set_u32(field::PSN, psn);
                p.set_u16(field::SPDCID, spdcid);
                p.set_u16(field::DPDCID, dpdcid);
            }
            Repr::Ack { next_header, flags, ack_psn_offset, cack_psn, spdcid, dpdcid } => {
                p.set_prologue(PdsType::Ack, next_header, flags);
                p.set_u16(field::OFFSET, ack_psn_offset as u16);
                p.set_u32(field::PSN, cack_psn);
                p.set_u16(field::SPDCID, spdcid);
                p.set_u16(field::DPDCID, dpdcid);
            }
            Repr::Nack { next_header, flags, code, vendor_code, psn, spdcid, dpdcid, payload } => {
                p.set_prologue(PdsType::Nack, next_header, flags);
                let b = p.buffer.as_mut();
                b[field::NACK_CODE] = code.into();
                b[field::VENDOR_CODE] = vendor_code;
                p.set_u32(field::PSN, psn);
                p.set_u16(field::SPDCID, spdcid);
                p.set_u16(field::DPDCID, dpdcid);
                p.set_u32(field::NACK_PAYLOAD, payload);
            }
            Repr::Other { pds_type, next_header, flags } => p.set_prologue(pds_type, next_header, flags),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RUD request with SYN and ACK request, next header 3 (standard SES request), laid out by
    /// hand from the sources' tables (research file §2-3): type 2 << 11 | 3 << 7 | AR | SYN.
    const RUD_SYN: [u8; 12] = [0x11, 0x8c, 0xff, 0xfe, 0x00, 0x01, 0x02, 0x03, 0x12, 0x34, 0x80, 0x05];

    #[test]
    fn a_request_decodes_field_by_field() {
        let p = Packet::new_checked(&RUD_SYN[..]).unwrap();
        assert_eq!((p.pds_type(), p.next_header(), p.flags()), (PdsType::RudRequest, 3, 0x0c));
        assert_eq!(p.flags() & request_flags::SYN, request_flags::SYN);
        assert_eq!(p.flags() & request_flags::AR, request_flags::AR);
        assert_eq!(p.flags() & request_flags::RETX, 0);
        assert_eq!(p.psn_offset(), -2, "clear_psn_offset is signed (D4)");
        assert_eq!((p.psn(), p.spdcid(), p.dpdcid()), (0x0001_0203, 0x1234, 0x8005));
        let r = Repr::parse(&p).unwrap();
        let mut out = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, RUD_SYN);
    }

    #[test]
    fn an_ack_and_a_trimmed_nack_round_trip() {
        let ack = Repr::Ack {
            next_header: 0,
            flags: ack_flags::M | (1 << ack_flags::REQ_SHIFT),
            ack_psn_offset: 7,
            cack_psn: 0xdead_beef,
            spdcid: 9,
            dpdcid: 10,
        };
        let mut b = [0u8; ACK_LEN];
        ack.emit(&mut Packet::new_unchecked(&mut b[..]));
        // type 7 << 11 = 0x3800; M 0x20 | request 1 (0x02).
        assert_eq!(b, [0x38, 0x22, 0x00, 0x07, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x09, 0x00, 0x0a]);
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(), ack);

        let nack = Repr::Nack {
            next_header: 0,
            flags: nack_flags::RETX,
            code: NackCode::Trimmed,
            vendor_code: 0,
            psn: 41,
            spdcid: 1,
            dpdcid: 2,
            payload: 42,
        };
        let mut b = [0u8; NACK_LEN];
        nack.emit(&mut Packet::new_unchecked(&mut b[..]));
        // type 10 << 11 = 0x5000.
        assert_eq!(b, [0x50, 0x10, 0x01, 0x00, 0, 0, 0, 41, 0, 1, 0, 2, 0, 0, 0, 42]);
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(), nack);
    }

    #[test]
    fn unknown_types_and_codes_are_kept_and_short_headers_refused() {
        // Type 31 (unassigned), next header 15, flags 0x7f.
        let b = [0xff, 0xff];
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r, Repr::Other { pds_type: PdsType::Unknown(31), next_header: 15, flags: 0x7f });
        let mut out = [0u8; 2];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
        assert_eq!(u8::from(NackCode::from(0x1a)), 0x1a);
        let e = Packet::new_checked(&RUD_SYN[..11]).unwrap_err();
        assert_eq!(e, Error::Truncated { what: "request", needed: 12, available: 11 });
        assert_eq!(e.to_string(), "UET PDS request truncated: need 12 bytes, have 11");
        let nack = [0x50, 0x10, 0x01, 0x00, 0, 0, 0, 41, 0, 1, 0, 2, 0, 0, 0];
        assert!(Packet::new_checked(&nack[..]).is_err());
        assert!(Packet::new_checked(&[0x38u8][..]).is_err());
    }
}
