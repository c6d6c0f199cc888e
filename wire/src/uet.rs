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
//! RUD_CC/ROD_CC (16):   the request | ccc_id (8) | credit_target (24)
//! RUDI req/resp (8):    prologue | reserved (16) | pkt_id (32)
//! UUD request (4):      prologue | reserved (16)
//! CONTROL (16):         prologue (next header = control type) | probe_opaque (16) | PSN (32) |
//!                       SPDCID | DPDCID | payload (32)
//! ```
//!
//! Where the sources disagree this module follows the reading two of them share (the
//! research file's D-numbers): UDP port 4793 (D1: xdp2 and Wireshark; uet-ref-prov's 49150
//! predates the assignment); the PSN offsets signed (D4: uet-ref-prov's `int16_t` and
//! Wireshark's signed reads); the ACK's 0x40 flag kept as a raw bit (D5: reserved in xdp2 and
//! Wireshark, EPSN in uet-ref-prov); the SYN packet's `pdc_info` kept as its raw 4 bits (D3:
//! use_rsv_pdc is 0x8 of them in xdp2 and Wireshark, 0x1 in uet-ref-prov). Unknown packet types
//! and NACK codes are kept with their values. ACK_CCX and NACK_CCX are not laid out: their
//! extension is 8 bytes long in xdp2 and 16 in Wireshark and uet-ref-prov (D7, D8), so only
//! their prologue is read.

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

/// An enum over a byte's named values that keeps every other value: each value is spelled
/// once, here, for both directions and the name.
macro_rules! named_values {
    ($(#[$doc:meta])* $ty:ident, $mask:literal, $other:ident { $( $(#[$m:meta])* $name:ident = $val:literal, $text:literal; )* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $ty {
            $( $(#[$m])* $name, )*
            /// Any other value, kept as is.
            $other(u8),
        }
        impl From<u8> for $ty {
            fn from(v: u8) -> Self {
                match v & $mask { $( $val => $ty::$name, )* x => $ty::$other(x) }
            }
        }
        impl From<$ty> for u8 {
            fn from(v: $ty) -> u8 {
                match v { $( $ty::$name => $val, )* $ty::$other(x) => x & $mask }
            }
        }
        impl $ty {
            /// The name the sources give the value (upper case, as in Wireshark), or `UNKNOWN`.
            pub fn name(self) -> &'static str {
                match self { $( $ty::$name => $text, )* $ty::$other(_) => "UNKNOWN" }
            }
        }
        impl core::fmt::Display for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self {
                    $ty::$other(x) => write!(f, "UNKNOWN({x:#04x})"),
                    _ => f.write_str(self.name()),
                }
            }
        }
    };
}

pub mod frame;
pub mod ses;

named_values! {
    /// A PDS packet type (the prologue's 5 bits; research file §2: the three sources agree on
    /// 1-14).
    PdsType, 0x1f, Unknown {
        Tss = 1, "TSS";
        RudRequest = 2, "RUD_REQ";
        RodRequest = 3, "ROD_REQ";
        RudiRequest = 4, "RUDI_REQ";
        RudiResponse = 5, "RUDI_RESP";
        UudRequest = 6, "UUD_REQ";
        Ack = 7, "ACK";
        AckCc = 8, "ACK_CC";
        AckCcx = 9, "ACK_CCX";
        Nack = 10, "NACK";
        Control = 11, "CONTROL";
        NackCcx = 12, "NACK_CCX";
        RudCcRequest = 13, "RUD_CC_REQ";
        RodCcRequest = 14, "ROD_CC_REQ";
    }
}

named_values! {
    /// A NACK code (research file §6: xdp2 `enum uet_pds_nack_code` X-P:568-598, Wireshark
    /// WS 588-615 and uet-ref-prov RP:225-257 agree on the values; the names are Wireshark's
    /// and xdp2's).
    NackCode, 0xff, Other {
        /// The packet was trimmed in the fabric.
        Trimmed = 0x01, "TRIMMED";
        /// The packet was trimmed at the last hop.
        TrimmedLastHop = 0x02, "TRIMMED_LASTHOP";
        /// An ACK carrying read response data was trimmed.
        TrimmedAck = 0x03, "TRIMMED_ACK";
        NoPdcAvail = 0x04, "NO_PDC_AVAIL";
        NoCccAvail = 0x05, "NO_CCC_AVAIL";
        NoBitmap = 0x06, "NO_BITMAP";
        NoPktBuffer = 0x07, "NO_PKT_BUFFER";
        NoGtdDelAvail = 0x08, "NO_GTD_DEL_AVAIL";
        NoSesMsgAvail = 0x09, "NO_SES_MSG_AVAIL";
        NoResource = 0x0a, "NO_RESOURCE";
        /// The PSN is outside the receiver's tracking window.
        PsnOutOfWindow = 0x0b, "PSN_OOR_WINDOW";
        /// A PSN arrived out of order on a ROD PDC.
        RodOutOfOrder = 0x0d, "ROD_OOO";
        /// The DPDCID is not known and the packet is not a SYN.
        InvalidDpdcid = 0x0e, "INVALID_DPDCID";
        PdcHdrMismatch = 0x0f, "PDC_HDR_MISMATCH";
        Closing = 0x10, "CLOSING";
        ClosingInErr = 0x11, "CLOSING_IN_ERR";
        PktNotRcvd = 0x12, "PKT_NOT_RCVD";
        GtdRespUnavail = 0x13, "GTD_RESP_UNAVAIL";
        AckWithData = 0x14, "ACK_WITH_DATA";
        InvalidSyn = 0x15, "INVALID_SYN";
        PdcModeMismatch = 0x16, "PDC_MODE_MISMATCH";
        /// The payload carries the new start PSN.
        NewStartPsn = 0x17, "NEW_START_PSN";
        RcvdSesProcg = 0x18, "RCVD_SES_PROCG";
        UnexpEvent = 0x19, "UNEXP_EVENT";
        RcvrInferLoss = 0x1a, "RCVR_INFER_LOSS";
        ExpNackNormal = 0xfd, "EXP_NACK_NORMAL";
        ExpNackErr = 0xfe, "EXP_NACK_ERR";
        ExpNackFatal = 0xff, "EXP_NACK_FATAL";
    }
}

named_values! {
    /// A control packet's type (the prologue's next header field; research file §7: the three
    /// sources agree on 0-8, NEGOTIATION 9 is in xdp2 and uet-ref-prov, D9).
    ControlType, 0x0f, Unknown {
        Noop = 0, "NOOP";
        AckReq = 1, "ACK_REQ";
        Clear = 2, "CLEAR";
        ClearReq = 3, "CLEAR_REQ";
        Close = 4, "CLOSE";
        CloseReq = 5, "CLOSE_REQ";
        Probe = 6, "PROBE";
        Credit = 7, "CREDIT";
        CreditReq = 8, "CREDIT_REQ";
        Negotiation = 9, "NEGOTIATION";
    }
}

/// The SES header a PDS header's `next_header` announces (research file §2; all sources agree).
pub mod next_header {
    pub const NONE: u8 = 0;
    pub const SMALL_REQUEST: u8 = 1;
    pub const MEDIUM_REQUEST: u8 = 2;
    pub const STANDARD_REQUEST: u8 = 3;
    pub const RESPONSE: u8 = 4;
    pub const RESPONSE_WITH_DATA: u8 = 5;
    pub const SMALL_RESPONSE_WITH_DATA: u8 = 6;
}

/// `cc_type` of an ACK_CC (xdp2 `enum uet_pds_cc_type`, Wireshark's value table).
pub mod cc_type {
    pub const NSCC: u8 = 0;
    pub const CREDIT: u8 = 1;
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
    /// ACK_CC: cc_type (4) | cc_flags (4).
    pub const CC_TYPE: usize = 12;
    pub const MPR: usize = 13;
    pub const SACK_PSN_OFFSET: Range<usize> = 14..16;
    pub const SACK_BITMAP: Range<usize> = 16..24;
    pub const CC_STATE: Range<usize> = 24..32;
    /// RUD_CC/ROD_CC request: ccc_id, then credit_target (24 bits).
    pub const CCC_ID: usize = 12;
    pub const CREDIT_TARGET: Range<usize> = 13..16;
    /// Control packet: the payload word.
    pub const CONTROL_PAYLOAD: Range<usize> = 12..16;
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

/// Flags of a control packet (research file §7).
pub mod control_flags {
    /// RUD 0, ROD 1 (xdp2 `rsvd_isrod`, uet-ref-prov ISROD; reserved in Wireshark, D10).
    pub const ISROD: u8 = 0x20;
    pub const RETX: u8 = 0x10;
    pub const AR: u8 = 0x08;
    pub const SYN: u8 = 0x04;
}

/// Flags of a RUDI request or response (research file §8; D11).
pub mod rudi_flags {
    pub const M: u8 = 0x20;
    pub const RETX: u8 = 0x10;
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
/// Length of an ACK_CC: the ACK and its 20-byte extension (research file §5).
pub const ACK_CC_LEN: usize = 32;
/// Length of a RUD_CC/ROD_CC request (research file §3).
pub const REQUEST_CC_LEN: usize = 16;
/// Length of a RUDI request or response (research file §8).
pub const RUDI_LEN: usize = 8;
/// Length of a UUD request (research file §8).
pub const UUD_LEN: usize = 4;
/// Length of a control packet (research file §7).
pub const CONTROL_LEN: usize = 16;

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
            PdsType::RudCcRequest | PdsType::RodCcRequest => REQUEST_CC_LEN,
            PdsType::RudiRequest | PdsType::RudiResponse => RUDI_LEN,
            PdsType::UudRequest => UUD_LEN,
            PdsType::Control => CONTROL_LEN,
            PdsType::Ack => ACK_LEN,
            PdsType::AckCc => ACK_CC_LEN,
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
                PdsType::AckCc => "ACK_CC",
                PdsType::Nack => "NACK",
                PdsType::RudCcRequest | PdsType::RodCcRequest => "CC request",
                PdsType::RudiRequest | PdsType::RudiResponse => "RUDI header",
                PdsType::UudRequest => "UUD request",
                PdsType::Control => "control packet",
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

    /// A SYN request: the 4-bit pdc_info the DPDCID field carries instead (kept raw, D3).
    pub fn syn_pdc_info(&self) -> u8 {
        (self.dpdcid() >> 12) as u8
    }

    /// A SYN request: PSN minus the PDC's start PSN (12 bits).
    pub fn syn_psn_offset(&self) -> u16 {
        self.dpdcid() & 0x0fff
    }

    /// ACK_CC: the congestion control type (0 NSCC, 1 credit).
    pub fn cc_type(&self) -> u8 {
        self.buffer.as_ref()[field::CC_TYPE] >> 4
    }

    /// ACK_CC: the reserved cc_flags nibble.
    pub fn cc_flags(&self) -> u8 {
        self.buffer.as_ref()[field::CC_TYPE] & 0x0f
    }

    /// ACK_CC: the maximum PSN range (mpr).
    pub fn mpr(&self) -> u8 {
        self.buffer.as_ref()[field::MPR]
    }

    /// ACK_CC: the first PSN the SACK bitmap covers, as an offset from CACK_PSN (signed, D4).
    pub fn sack_psn_offset(&self) -> i16 {
        self.u16_at(field::SACK_PSN_OFFSET) as i16
    }

    /// ACK_CC: the SACK bitmap.
    pub fn sack_bitmap(&self) -> u64 {
        let b = &self.buffer.as_ref()[field::SACK_BITMAP];
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// ACK_CC: the 8 bytes of congestion control state ([`NsccState`] for NSCC).
    pub fn cc_state(&self) -> u64 {
        let b = &self.buffer.as_ref()[field::CC_STATE];
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// RUD_CC/ROD_CC request: the congestion control context id.
    pub fn ccc_id(&self) -> u8 {
        self.buffer.as_ref()[field::CCC_ID]
    }

    /// RUD_CC/ROD_CC request: the credit target (24 bits, big-endian, D12).
    pub fn credit_target(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::CREDIT_TARGET];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }

    /// Control packet: its payload word (its meaning depends on the control type).
    pub fn control_payload(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::CONTROL_PAYLOAD];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

/// The NSCC state of an ACK_CC (bytes 24-31; xdp2 `pds.h` X-P:336-340, Wireshark's offsets
/// except its restore_cwnd/rcv_cwnd_pend byte, D6): service_time (16) | restore_cwnd (1) |
/// rcv_cwnd_pend (7) | rcvd_bytes (24) | ooo_count (16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NsccState {
    pub service_time: u16,
    pub restore_cwnd: bool,
    /// 7 bits.
    pub rcv_cwnd_pend: u8,
    /// 24 bits.
    pub rcvd_bytes: u32,
    pub ooo_count: u16,
}

impl NsccState {
    /// The fields of an ACK_CC's 8 state bytes.
    pub fn from_u64(v: u64) -> NsccState {
        NsccState {
            service_time: (v >> 48) as u16,
            restore_cwnd: (v >> 47) & 1 == 1,
            rcv_cwnd_pend: ((v >> 40) & 0x7f) as u8,
            rcvd_bytes: ((v >> 16) & 0xff_ffff) as u32,
            ooo_count: v as u16,
        }
    }

    /// The 8 state bytes (wider values are masked).
    pub fn to_u64(self) -> u64 {
        (u64::from(self.service_time) << 48)
            | (u64::from(self.restore_cwnd) << 47)
            | (u64::from(self.rcv_cwnd_pend & 0x7f) << 40)
            | (u64::from(self.rcvd_bytes & 0xff_ffff) << 16)
            | u64::from(self.ooo_count)
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
    /// An ACK with the congestion control extension: SACK and the CC state.
    AckCc {
        next_header: u8,
        flags: u8,
        ack_psn_offset: i16,
        cack_psn: u32,
        spdcid: u16,
        dpdcid: u16,
        cc_type: u8,
        cc_flags: u8,
        mpr: u8,
        sack_psn_offset: i16,
        sack_bitmap: u64,
        /// [`NsccState::to_u64`] for NSCC; kept raw for the other types.
        cc_state: u64,
    },
    /// A RUD_CC (`ordered` false) or ROD_CC request: a request and its CC state.
    RequestCc {
        ordered: bool,
        next_header: u8,
        flags: u8,
        clear_psn_offset: i16,
        psn: u32,
        spdcid: u16,
        dpdcid: u16,
        ccc_id: u8,
        /// 24 bits.
        credit_target: u32,
    },
    /// A RUDI request or (`response`) response: a packet id instead of a PSN and PDCs.
    Rudi {
        response: bool,
        next_header: u8,
        flags: u8,
        pkt_id: u32,
    },
    /// A UUD request: the prologue and 2 reserved bytes.
    Uud {
        next_header: u8,
        flags: u8,
    },
    /// A control packet; its control type sits where other types have the next header.
    Control {
        ctl_type: ControlType,
        flags: u8,
        /// PROBE: the opaque value; reserved otherwise.
        probe_opaque: u16,
        psn: u32,
        spdcid: u16,
        /// With SYN: pdc_info and psn_offset, as in a request.
        dpdcid: u16,
        payload: u32,
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
            t @ (PdsType::RudCcRequest | PdsType::RodCcRequest) => Repr::RequestCc {
                ordered: t == PdsType::RodCcRequest,
                next_header,
                flags,
                clear_psn_offset: p.psn_offset(),
                psn: p.psn(),
                spdcid: p.spdcid(),
                dpdcid: p.dpdcid(),
                ccc_id: p.ccc_id(),
                credit_target: p.credit_target(),
            },
            t @ (PdsType::RudiRequest | PdsType::RudiResponse) => {
                Repr::Rudi { response: t == PdsType::RudiResponse, next_header, flags, pkt_id: p.psn() }
            }
            PdsType::UudRequest => Repr::Uud { next_header, flags },
            PdsType::Control => Repr::Control {
                ctl_type: ControlType::from(next_header),
                flags,
                probe_opaque: p.psn_offset() as u16,
                psn: p.psn(),
                spdcid: p.spdcid(),
                dpdcid: p.dpdcid(),
                payload: p.control_payload(),
            },
            PdsType::Ack => Repr::Ack {
                next_header,
                flags,
                ack_psn_offset: p.psn_offset(),
                cack_psn: p.psn(),
                spdcid: p.spdcid(),
                dpdcid: p.dpdcid(),
            },
            PdsType::AckCc => Repr::AckCc {
                next_header,
                flags,
                ack_psn_offset: p.psn_offset(),
                cack_psn: p.psn(),
                spdcid: p.spdcid(),
                dpdcid: p.dpdcid(),
                cc_type: p.cc_type(),
                cc_flags: p.cc_flags(),
                mpr: p.mpr(),
                sack_psn_offset: p.sack_psn_offset(),
                sack_bitmap: p.sack_bitmap(),
                cc_state: p.cc_state(),
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

    /// The packet type.
    pub fn pds_type(&self) -> PdsType {
        match *self {
            Repr::Request { ordered: false, .. } => PdsType::RudRequest,
            Repr::Request { ordered: true, .. } => PdsType::RodRequest,
            Repr::RequestCc { ordered: false, .. } => PdsType::RudCcRequest,
            Repr::RequestCc { ordered: true, .. } => PdsType::RodCcRequest,
            Repr::Rudi { response: false, .. } => PdsType::RudiRequest,
            Repr::Rudi { response: true, .. } => PdsType::RudiResponse,
            Repr::Uud { .. } => PdsType::UudRequest,
            Repr::Control { .. } => PdsType::Control,
            Repr::Ack { .. } => PdsType::Ack,
            Repr::AckCc { .. } => PdsType::AckCc,
            Repr::Nack { .. } => PdsType::Nack,
            Repr::Other { pds_type, .. } => pds_type,
        }
    }

    /// The next header (SES header) field, or a control packet's control type.
    pub fn next_header(&self) -> u8 {
        match *self {
            Repr::Request { next_header, .. }
            | Repr::RequestCc { next_header, .. }
            | Repr::Rudi { next_header, .. }
            | Repr::Uud { next_header, .. }
            | Repr::Ack { next_header, .. }
            | Repr::AckCc { next_header, .. }
            | Repr::Nack { next_header, .. }
            | Repr::Other { next_header, .. } => next_header,
            Repr::Control { ctl_type, .. } => ctl_type.into(),
        }
    }

    /// Sets the next header field (a control packet's control type).
    pub fn set_next_header(&mut self, v: u8) {
        match self {
            Repr::Request { next_header, .. }
            | Repr::RequestCc { next_header, .. }
            | Repr::Rudi { next_header, .. }
            | Repr::Uud { next_header, .. }
            | Repr::Ack { next_header, .. }
            | Repr::AckCc { next_header, .. }
            | Repr::Nack { next_header, .. }
            | Repr::Other { next_header, .. } => *next_header = v,
            Repr::Control { ctl_type, .. } => *ctl_type = ControlType::from(v),
        }
    }

    /// The 7 flag bits.
    pub fn flags(&self) -> u8 {
        match *self {
            Repr::Request { flags, .. }
            | Repr::RequestCc { flags, .. }
            | Repr::Rudi { flags, .. }
            | Repr::Uud { flags, .. }
            | Repr::Control { flags, .. }
            | Repr::Ack { flags, .. }
            | Repr::AckCc { flags, .. }
            | Repr::Nack { flags, .. }
            | Repr::Other { flags, .. } => flags,
        }
    }

    /// Whether the type's next header field names an SES header (requests, RUDI, UUD and
    /// ACKs; a control packet's is its control type, a NACK carries none).
    pub fn is_request_or_ack(&self) -> bool {
        matches!(
            self,
            Repr::Request { .. }
                | Repr::RequestCc { .. }
                | Repr::Rudi { .. }
                | Repr::Uud { .. }
                | Repr::Ack { .. }
                | Repr::AckCc { .. }
        )
    }

    /// Bytes [`Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::Request { .. } => REQUEST_LEN,
            Repr::RequestCc { .. } => REQUEST_CC_LEN,
            Repr::Rudi { .. } => RUDI_LEN,
            Repr::Uud { .. } => UUD_LEN,
            Repr::Control { .. } => CONTROL_LEN,
            Repr::Ack { .. } => ACK_LEN,
            Repr::AckCc { .. } => ACK_CC_LEN,
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
            Repr::RequestCc {
                ordered,
                next_header,
                flags,
                clear_psn_offset,
                psn,
                spdcid,
                dpdcid,
                ccc_id,
                credit_target,
            } => {
                let t = if ordered { PdsType::RodCcRequest } else { PdsType::RudCcRequest };
                p.set_prologue(t, next_header, flags);
                p.set_u16(field::OFFSET, clear_psn_offset as u16);
                p.set_u32(field::PSN, psn);
                p.set_u16(field::SPDCID, spdcid);
                p.set_u16(field::DPDCID, dpdcid);
                p.buffer.as_mut()[field::CCC_ID] = ccc_id;
                p.buffer.as_mut()[field::CREDIT_TARGET].copy_from_slice(&credit_target.to_be_bytes()[1..]);
            }
            Repr::Rudi { response, next_header, flags, pkt_id } => {
                let t = if response { PdsType::RudiResponse } else { PdsType::RudiRequest };
                p.set_prologue(t, next_header, flags);
                p.set_u16(field::OFFSET, 0);
                p.set_u32(field::PSN, pkt_id);
            }
            Repr::Uud { next_header, flags } => {
                p.set_prologue(PdsType::UudRequest, next_header, flags);
                p.set_u16(field::OFFSET, 0);
            }
            Repr::Control { ctl_type, flags, probe_opaque, psn, spdcid, dpdcid, payload } => {
                p.set_prologue(PdsType::Control, ctl_type.into(), flags);
                p.set_u16(field::OFFSET, probe_opaque);
                p.set_u32(field::PSN, psn);
                p.set_u16(field::SPDCID, spdcid);
                p.set_u16(field::DPDCID, dpdcid);
                p.set_u32(field::CONTROL_PAYLOAD, payload);
            }
            Repr::Ack { next_header, flags, ack_psn_offset, cack_psn, spdcid, dpdcid } => {
                p.set_prologue(PdsType::Ack, next_header, flags);
                p.set_u16(field::OFFSET, ack_psn_offset as u16);
                p.set_u32(field::PSN, cack_psn);
                p.set_u16(field::SPDCID, spdcid);
                p.set_u16(field::DPDCID, dpdcid);
            }
            Repr::AckCc {
                next_header,
                flags,
                ack_psn_offset,
                cack_psn,
                spdcid,
                dpdcid,
                cc_type,
                cc_flags,
                mpr,
                sack_psn_offset,
                sack_bitmap,
                cc_state,
            } => {
                p.set_prologue(PdsType::AckCc, next_header, flags);
                p.set_u16(field::OFFSET, ack_psn_offset as u16);
                p.set_u32(field::PSN, cack_psn);
                p.set_u16(field::SPDCID, spdcid);
                p.set_u16(field::DPDCID, dpdcid);
                let b = p.buffer.as_mut();
                b[field::CC_TYPE] = (cc_type << 4) | (cc_flags & 0x0f);
                b[field::MPR] = mpr;
                p.set_u16(field::SACK_PSN_OFFSET, sack_psn_offset as u16);
                p.buffer.as_mut()[field::SACK_BITMAP].copy_from_slice(&sack_bitmap.to_be_bytes());
                p.buffer.as_mut()[field::CC_STATE].copy_from_slice(&cc_state.to_be_bytes());
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
    fn an_ack_cc_with_sack_and_nscc_state_round_trips() {
        let st = NsccState {
            service_time: 0x1234,
            restore_cwnd: true,
            rcv_cwnd_pend: 5,
            rcvd_bytes: 0xabcdef,
            ooo_count: 7,
        };
        let ack = Repr::AckCc {
            next_header: next_header::RESPONSE,
            flags: 0,
            ack_psn_offset: 3,
            cack_psn: 100,
            spdcid: 1,
            dpdcid: 2,
            cc_type: cc_type::NSCC,
            cc_flags: 0,
            mpr: 64,
            sack_psn_offset: 1,
            sack_bitmap: 0b1011,
            cc_state: st.to_u64(),
        };
        let mut b = [0u8; ACK_CC_LEN];
        ack.emit(&mut Packet::new_unchecked(&mut b[..]));
        // type 8 << 11 | next header 4 << 7 = 0x4200; state bytes 24-31 as laid out in §5.
        assert_eq!(&b[..4], &[0x42, 0x00, 0x00, 0x03]);
        assert_eq!(&b[12..16], &[0x00, 64, 0x00, 0x01]);
        assert_eq!(&b[16..24], &[0, 0, 0, 0, 0, 0, 0, 0b1011]);
        assert_eq!(&b[24..32], &[0x12, 0x34, 0x85, 0xab, 0xcd, 0xef, 0x00, 0x07]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), ack);
        assert_eq!(NsccState::from_u64(p.cc_state()), st);
        assert!(Packet::new_checked(&b[..31]).is_err());
    }

    #[test]
    fn cc_requests_rudi_uud_and_control_packets_lay_out_as_the_sources_say() {
        // ROD_CC request (type 14 << 11 | next header 3 << 7 | RETX = 0x7190), ccc_id and a
        // big-endian credit_target (research file §3, D12).
        let cc = Repr::RequestCc {
            ordered: true,
            next_header: next_header::STANDARD_REQUEST,
            flags: request_flags::RETX,
            clear_psn_offset: 0x1234,
            psn: 0x9876_5432,
            spdcid: 0x3456,
            dpdcid: 0x9abc,
            ccc_id: 0x77,
            credit_target: 0x88_7766,
        };
        #[rustfmt::skip]
        let want: [u8; 16] = [0x71, 0x90, 0x12, 0x34, 0x98, 0x76, 0x54, 0x32, 0x34, 0x56, 0x9a, 0xbc,
                              0x77, 0x88, 0x77, 0x66];
        let mut b = [0xa5u8; REQUEST_CC_LEN];
        cc.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, want);
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(), cc);
        assert!(Packet::new_checked(&b[..15]).is_err());
        // RUDI response (type 5, next header 4, M): reserved, pkt_id (§8).
        let rudi = Repr::Rudi { response: true, next_header: next_header::RESPONSE, flags: rudi_flags::M, pkt_id: 7 };
        let mut b = [0xa5u8; RUDI_LEN];
        rudi.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, [0x2a, 0x20, 0, 0, 0, 0, 0, 7]);
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(), rudi);
        // UUD request (type 6, next header 3): prologue and 2 reserved bytes.
        let uud = Repr::Uud { next_header: next_header::STANDARD_REQUEST, flags: 0 };
        let mut b = [0xa5u8; UUD_LEN];
        uud.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, [0x31, 0x80, 0, 0]);
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(), uud);
        // Control CREDIT_REQ (type 11 << 11 | 8 << 7 | ISROD | RETX = 0x5c30) (§7).
        let ctl = Repr::Control {
            ctl_type: ControlType::CreditReq,
            flags: control_flags::ISROD | control_flags::RETX,
            probe_opaque: 0x9876,
            psn: 0xcdef_0123,
            spdcid: 0xcdef,
            dpdcid: 0xfedc,
            payload: 1,
        };
        let mut b = [0xa5u8; CONTROL_LEN];
        ctl.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, [0x5c, 0x30, 0x98, 0x76, 0xcd, 0xef, 0x01, 0x23, 0xcd, 0xef, 0xfe, 0xdc, 0, 0, 0, 1]);
        let back = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(back, ctl);
        assert_eq!((back.pds_type(), back.next_header(), back.is_request_or_ack()), (PdsType::Control, 8, false));
        assert_eq!(ControlType::from(9).name(), "NEGOTIATION");
        assert!(Packet::new_checked(&b[..15]).is_err());
    }

    #[test]
    fn names_follow_the_sources() {
        assert_eq!(PdsType::AckCc.to_string(), "ACK_CC");
        assert_eq!(NackCode::Trimmed.to_string(), "TRIMMED");
        assert_eq!(NackCode::from(0x1a).to_string(), "RCVR_INFER_LOSS");
        assert_eq!(NackCode::from(0x0c).to_string(), "UNKNOWN(0x0c)", "0x0c is unassigned");
        assert_eq!(NackCode::from(0x1b).to_string(), "UNKNOWN(0x1b)");
        assert_eq!(u8::from(PdsType::from(0xe2)), 2, "the type is 5 bits");
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
