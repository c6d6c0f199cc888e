//! RoCE: InfiniBand transport headers carried over UDP port 4791 (RoCEv2) or directly over
//! Ethernet behind a GRH (RoCE v1, EtherType 0x8915).
//!
//! Standards: InfiniBand Architecture Specification vol. 1 Release 1.4 (IBTA), chapter 9
//! "Transport layer": the BTH §9.2; the extension headers of §9.3 (DETH, RETH, AtomicETH,
//! AETH, AtomicAckETH, ImmDt, IETH); which header each opcode carries, Table 38 "Header fields
//! for each opcode", and the opcodes themselves, Table 37 "OpCode field" (§9.2.1); the
//! operations §9.4 and the RC/UC/UD rules §9.5 ff. Annex A17 "RoCEv2" gives the UDP
//! encapsulation on port 4791, the ICRC over masked IP/UDP headers (§A17.3.3) and the Congestion
//! Notification Packet, CNP, opcode 0x81 (§A17.9.3); Annex A16 "RoCE" the v1 framing (GRH,
//! vol. 1 §8.3, right after the Ethernet header).
//!
//! ```text
//! Ethernet | IPv4 / IPv6 | UDP dst 4791 | BTH (12) | extension headers | payload | pad | ICRC (4)
//! Ethernet 0x8915 | GRH (40)             | BTH (12) | extension headers | payload | pad | ICRC (4)
//!
//! extension headers, in this order, as the opcode requires (Table 38):
//!   [DETH 8] (UD) [RETH 16 | AtomicETH 28] [AETH 4] [AtomicAckETH 8] [ImmDt 4 | IETH 4]
//! CNP: BTH (opcode 0x81, BECN=1) | 16 reserved bytes | ICRC (4)
//! ```
//!
//! Opcodes: the RC set 0x00–0x17 (0x15 is reserved for RC: RESYNC exists for RD only), the UC
//! subset 0x20–0x2B (SEND and RDMA WRITE; UC has no READ or atomics), UD 0x64/0x65 and CNP 0x81
//! have names; everything else (RD, XRC, vendor opcodes) is [`Opcode::Unknown`] and its bytes
//! after the BTH are reported as payload.
//!
//! Layout of this module (smoltcp style): [`bth`], [`deth`], [`reth`], [`atomic_eth`],
//! [`aeth`], [`atomic_ack_eth`], [`ieth`] and [`grh`] hold the zero-copy `Packet` views and
//! `Repr`s of each header; [`Packet`] / [`Repr`] here cover the whole InfiniBand part of a UDP
//! payload (BTH through ICRC) with the extension headers implied by the opcode ([`Layout`]);
//! [`icrc`] computes and verifies the ICRC; [`frame`] builds and parses whole Ethernet frames
//! with `etherparse`.

/// The zero-copy view of a fixed-length header (smoltcp style): `Packet<T>` over a buffer with
/// `new_unchecked`, `new_checked`, `check_len` (reports `$layer` when the buffer is shorter
/// than the module's `LEN`) and `into_inner`. The header's module adds its field accessors.
macro_rules! fixed_len_packet {
    ($name:literal, $layer:expr) => {
        #[doc = concat!("A read/write view of a ", $name, " at the start of a buffer.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wrap without checking the length.
            pub const fn new_unchecked(buffer: T) -> Self {
                Packet { buffer }
            }
            #[doc = concat!("Wrap, checking that the buffer holds a whole ", $name, ".")]
            pub fn new_checked(buffer: T) -> Result<Self, Error> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }
            /// Ensure that no getter panics.
            pub fn check_len(&self) -> Result<(), Error> {
                let len = self.buffer.as_ref().len();
                if len < LEN {
                    Err(Error::Truncated { layer: $layer, needed: LEN, available: len })
                } else {
                    Ok(())
                }
            }
            /// The wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod deth;
pub mod frame;
pub mod grh;
pub mod icrc;
pub mod ieth;
pub mod reth;

/// The ECN codepoint type of the IP headers (re-exported from `etherparse`).
pub use etherparse::IpEcn;
pub use frame::{cnp, udp_src_port_for_qp, AnyFrame, IpInfo, ParsedFrame, ParsedV1Frame, RoceFrame};
pub use icrc::{icrc_ipv4, icrc_ipv6, verify, IcrcStatus};

/// The IANA UDP destination port of RoCEv2.
pub const UDP_PORT: u16 = 4791;
/// The EtherType of RoCE v1 (IBTA Annex A16).
pub const ETHERTYPE_ROCE_V1: u16 = 0x8915;
/// DSCP RoCEv2 data is sent with in the reference design.
pub const DSCP_DATA: u8 = 24;
/// DSCP CNPs are sent with in the reference design.
pub const DSCP_CNP: u8 = 48;
/// Length of the CNP's reserved bytes after the BTH (Annex A17.9.3).
pub const CNP_PAD_LEN: usize = 16;
/// Length of the Immediate Data extension header.
pub const IMMDT_LEN: usize = 4;

/// The protocol layer an error refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    Ethernet,
    Ipv4,
    Ipv6,
    Udp,
    /// The RoCE v1 Global Route Header.
    Grh,
    Bth,
    Deth,
    Reth,
    AtomicEth,
    Aeth,
    AtomicAckEth,
    ImmDt,
    Ieth,
    CnpPadding,
    Payload,
    Icrc,
}

impl core::fmt::Display for Layer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Layer::Ethernet => "Ethernet",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Udp => "UDP",
            Layer::Grh => "GRH",
            Layer::Bth => "BTH",
            Layer::Deth => "DETH",
            Layer::Reth => "RETH",
            Layer::AtomicEth => "AtomicETH",
            Layer::Aeth => "AETH",
            Layer::AtomicAckEth => "AtomicAckETH",
            Layer::ImmDt => "ImmDt",
            Layer::Ieth => "IETH",
            Layer::CnpPadding => "CNP padding",
            Layer::Payload => "payload",
            Layer::Icrc => "ICRC",
        })
    }
}

/// Errors of the RoCE parsers and emitters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{layer} truncated: need {needed} bytes, have {available}")]
    Truncated { layer: Layer, needed: usize, available: usize },
    #[error("BTH pad count {pad} is larger than the {available} payload bytes")]
    PadCount { pad: u8, available: usize },
    #[error("Ethernet/IP/UDP: {0}")]
    Lower(#[from] etherparse::err::packet::SliceError),
    #[error("EtherType 0x{0:04x} is neither IPv4 nor IPv6")]
    NotIp(u16),
    #[error("EtherType 0x{0:04x} is not RoCE v1 (0x8915)")]
    NotRoceV1(u16),
    #[error("GRH next header 0x{0:02x} is not an IBA transport header (0x1b)")]
    GrhNextHeader(u8),
    #[error("IP version {0} is neither 4 nor 6")]
    IpVersion(u8),
    #[error("IPv4 header length {0} is below 20: expected 20..=60 bytes (IHL 5..=15)")]
    Ipv4HeaderLen(usize),
    #[error("IP protocol / next header {0} is not UDP (17)")]
    NotUdp(u8),
    #[error("UDP destination port {0} is not the RoCEv2 port 4791")]
    NotRocePort(u16),
    #[error("IP fragment: RoCEv2 packets are never fragmented")]
    Fragmented,
    #[error("opcode {opcode} needs {what}")]
    Layout { opcode: Opcode, what: &'static str },
    #[error("source and destination IP addresses are of different families")]
    MixedFamilies,
    #[error("frame of {needed} bytes does not fit {available} (or exceeds the IP length limit)")]
    TooBig { needed: usize, available: usize },
}

/// The transport service an opcode belongs to: its top three bits (IBTA vol. 1 Table 37).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// 000: Reliable Connection.
    Rc,
    /// 001: Unreliable Connection.
    Uc,
    /// 010: Reliable Datagram.
    Rd,
    /// 011: Unreliable Datagram.
    Ud,
    /// 100: CNP (Annex A17 / A10).
    Cnp,
    /// 101: Extended Reliable Connection.
    Xrc,
    /// 110, 111: manufacturer specific.
    Vendor,
}

impl Transport {
    /// The transport of an opcode byte.
    pub const fn of(opcode: u8) -> Transport {
        match opcode >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            _ => Transport::Vendor,
        }
    }
    /// Short upper-case name (`RC`).
    pub const fn name(self) -> &'static str {
        match self {
            Transport::Rc => "RC",
            Transport::Uc => "UC",
            Transport::Rd => "RD",
            Transport::Ud => "UD",
            Transport::Cnp => "CNP",
            Transport::Xrc => "XRC",
            Transport::Vendor => "vendor",
        }
    }
}

impl core::fmt::Display for Transport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! opcodes {
    ($( $(#[$m:meta])* $name:ident = $val:literal, $text:literal; )*) => {
        /// BTH OpCode (IBTA vol. 1 Table 37; CNP from Annex A17). Unknown values are kept.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Opcode {
            $( $(#[$m])* $name, )*
            /// Any other opcode (reserved, RD, XRC, vendor), kept as is.
            Unknown(u8),
        }
        impl From<u8> for Opcode {
            fn from(v: u8) -> Self {
                match v { $( $val => Opcode::$name, )* x => Opcode::Unknown(x) }
            }
        }
        impl From<Opcode> for u8 {
            fn from(v: Opcode) -> u8 {
                match v { $( Opcode::$name => $val, )* Opcode::Unknown(x) => x }
            }
        }
        impl Opcode {
            /// Every named opcode.
            pub const ALL: &'static [Opcode] = &[$( Opcode::$name, )*];
            /// Short kebab-case name (`write-only`, `uc-send-first`), or `unknown`.
            pub fn name(self) -> &'static str {
                match self { $( Opcode::$name => $text, )* Opcode::Unknown(_) => "unknown" }
            }
            /// Parse the short name (`write-only`) or a number (`10`, `0x0a`).
            pub fn from_name(s: &str) -> Option<Opcode> {
                $( if s.eq_ignore_ascii_case($text) { return Some(Opcode::$name); } )*
                let n = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                    u8::from_str_radix(h, 16).ok()
                } else {
                    s.parse::<u8>().ok()
                };
                n.map(Opcode::from)
            }
        }
    };
}

opcodes! {
    /// RC SEND First.
    SendFirst = 0x00, "send-first";
    /// RC SEND Middle.
    SendMiddle = 0x01, "send-middle";
    /// RC SEND Last.
    SendLast = 0x02, "send-last";
    /// RC SEND Last with Immediate (ImmDt).
    SendLastImm = 0x03, "send-last-imm";
    /// RC SEND Only.
    SendOnly = 0x04, "send-only";
    /// RC SEND Only with Immediate (ImmDt).
    SendOnlyImm = 0x05, "send-only-imm";
    /// RC RDMA WRITE First (RETH).
    WriteFirst = 0x06, "write-first";
    /// RC RDMA WRITE Middle.
    WriteMiddle = 0x07, "write-middle";
    /// RC RDMA WRITE Last.
    WriteLast = 0x08, "write-last";
    /// RC RDMA WRITE Last with Immediate (ImmDt).
    WriteLastImm = 0x09, "write-last-imm";
    /// RC RDMA WRITE Only (RETH).
    WriteOnly = 0x0a, "write-only";
    /// RC RDMA WRITE Only with Immediate (RETH, ImmDt).
    WriteOnlyImm = 0x0b, "write-only-imm";
    /// RC RDMA READ Request (RETH).
    ReadRequest = 0x0c, "read-request";
    /// RC RDMA READ Response First (AETH).
    ReadResponseFirst = 0x0d, "read-response-first";
    /// RC RDMA READ Response Middle.
    ReadResponseMiddle = 0x0e, "read-response-middle";
    /// RC RDMA READ Response Last (AETH).
    ReadResponseLast = 0x0f, "read-response-last";
    /// RC RDMA READ Response Only (AETH).
    ReadResponseOnly = 0x10, "read-response-only";
    /// RC Acknowledge (AETH).
    Acknowledge = 0x11, "ack";
    /// RC ATOMIC Acknowledge (AETH, AtomicAckETH).
    AtomicAcknowledge = 0x12, "atomic-ack";
    /// RC CmpSwap (AtomicETH).
    CompareSwap = 0x13, "compare-swap";
    /// RC FetchAdd (AtomicETH).
    FetchAdd = 0x14, "fetch-add";
    /// RC SEND Last with Invalidate (IETH).
    SendLastInv = 0x16, "send-last-inv";
    /// RC SEND Only with Invalidate (IETH).
    SendOnlyInv = 0x17, "send-only-inv";
    /// UC SEND First.
    UcSendFirst = 0x20, "uc-send-first";
    /// UC SEND Middle.
    UcSendMiddle = 0x21, "uc-send-middle";
    /// UC SEND Last.
    UcSendLast = 0x22, "uc-send-last";
    /// UC SEND Last with Immediate (ImmDt).
    UcSendLastImm = 0x23, "uc-send-last-imm";
    /// UC SEND Only.
    UcSendOnly = 0x24, "uc-send-only";
    /// UC SEND Only with Immediate (ImmDt).
    UcSendOnlyImm = 0x25, "uc-send-only-imm";
    /// UC RDMA WRITE First (RETH).
    UcWriteFirst = 0x26, "uc-write-first";
    /// UC RDMA WRITE Middle.
    UcWriteMiddle = 0x27, "uc-write-middle";
    /// UC RDMA WRITE Last.
    UcWriteLast = 0x28, "uc-write-last";
    /// UC RDMA WRITE Last with Immediate (ImmDt).
    UcWriteLastImm = 0x29, "uc-write-last-imm";
    /// UC RDMA WRITE Only (RETH).
    UcWriteOnly = 0x2a, "uc-write-only";
    /// UC RDMA WRITE Only with Immediate (RETH, ImmDt).
    UcWriteOnlyImm = 0x2b, "uc-write-only-imm";
    /// UD SEND Only (DETH).
    UdSendOnly = 0x64, "ud-send-only";
    /// UD SEND Only with Immediate (DETH, ImmDt).
    UdSendOnlyImm = 0x65, "ud-send-only-imm";
    /// RoCEv2 Congestion Notification Packet (Annex A17.9.3; 16 reserved bytes).
    Cnp = 0x81, "cnp";
}

impl core::fmt::Display for Opcode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (0x{:02x})", self.name(), u8::from(*self))
    }
}

impl Opcode {
    /// The transport service (the opcode's top three bits).
    pub fn transport(self) -> Transport {
        Transport::of(u8::from(self))
    }
}

/// One extension header (or the CNP's reserved bytes) between the BTH and the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ext {
    Deth,
    Reth,
    AtomicEth,
    Aeth,
    AtomicAckEth,
    ImmDt,
    Ieth,
    CnpPad,
}

impl Ext {
    /// Every extension header in the order it follows the BTH (IBTA vol. 1 §9.3, Table 38;
    /// no opcode carries both RETH and AtomicETH, nor both ImmDt and IETH).
    pub const ORDER: [Ext; 8] =
        [Ext::Deth, Ext::Reth, Ext::AtomicEth, Ext::Aeth, Ext::AtomicAckEth, Ext::ImmDt, Ext::Ieth, Ext::CnpPad];

    /// Its length in bytes.
    pub const fn wire_len(self) -> usize {
        match self {
            Ext::Deth => deth::LEN,
            Ext::Reth => reth::LEN,
            Ext::AtomicEth => atomic_eth::LEN,
            Ext::Aeth => aeth::LEN,
            Ext::AtomicAckEth => atomic_ack_eth::LEN,
            Ext::ImmDt => IMMDT_LEN,
            Ext::Ieth => ieth::LEN,
            Ext::CnpPad => CNP_PAD_LEN,
        }
    }

    /// The layer named in errors.
    pub const fn layer(self) -> Layer {
        match self {
            Ext::Deth => Layer::Deth,
            Ext::Reth => Layer::Reth,
            Ext::AtomicEth => Layer::AtomicEth,
            Ext::Aeth => Layer::Aeth,
            Ext::AtomicAckEth => Layer::AtomicAckEth,
            Ext::ImmDt => Layer::ImmDt,
            Ext::Ieth => Layer::Ieth,
            Ext::CnpPad => Layer::CnpPadding,
        }
    }
}

/// Which extension headers follow the BTH for an opcode (IBTA vol. 1 Table 38).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub deth: bool,
    pub reth: bool,
    pub atomic_eth: bool,
    pub aeth: bool,
    pub atomic_ack_eth: bool,
    pub immdt: bool,
    pub ieth: bool,
    /// CNP: 16 reserved bytes and no payload.
    pub cnp_pad: bool,
}

impl Layout {
    /// True when the layout has `e`.
    pub const fn has(&self, e: Ext) -> bool {
        match e {
            Ext::Deth => self.deth,
            Ext::Reth => self.reth,
            Ext::AtomicEth => self.atomic_eth,
            Ext::Aeth => self.aeth,
            Ext::AtomicAckEth => self.atomic_ack_eth,
            Ext::ImmDt => self.immdt,
            Ext::Ieth => self.ieth,
            Ext::CnpPad => self.cnp_pad,
        }
    }

    /// Bytes of extension headers between BTH and payload.
    pub const fn ext_len(&self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < Ext::ORDER.len() {
            if self.has(Ext::ORDER[i]) {
                n += Ext::ORDER[i].wire_len();
            }
            i += 1;
        }
        n
    }

    /// Offset of `e` from the start of the BTH, when the layout has it.
    pub const fn offset(&self, e: Ext) -> Option<usize> {
        if !self.has(e) {
            return None;
        }
        let mut off = bth::LEN;
        let mut i = 0;
        while i < Ext::ORDER.len() {
            let x = Ext::ORDER[i];
            if x as u8 == e as u8 {
                return Some(off);
            }
            if self.has(x) {
                off += x.wire_len();
            }
            i += 1;
        }
        None
    }

    /// The extension headers present, in wire order.
    pub fn iter(self) -> impl Iterator<Item = Ext> {
        Ext::ORDER.into_iter().filter(move |e| self.has(*e))
    }
}

impl Opcode {
    /// The extension headers this opcode carries (IBTA vol. 1 Table 38). Unknown opcodes carry
    /// none (everything after the BTH is reported as payload).
    pub const fn layout(self) -> Layout {
        use Opcode::*;
        const NONE: Layout = Layout {
            deth: false,
            reth: false,
            atomic_eth: false,
            aeth: false,
            atomic_ack_eth: false,
            immdt: false,
            ieth: false,
            cnp_pad: false,
        };
        match self {
            WriteFirst | WriteOnly | ReadRequest | UcWriteFirst | UcWriteOnly => Layout { reth: true, ..NONE },
            WriteOnlyImm | UcWriteOnlyImm => Layout { reth: true, immdt: true, ..NONE },
            SendLastImm | SendOnlyImm | WriteLastImm | UcSendLastImm | UcSendOnlyImm | UcWriteLastImm => {
                Layout { immdt: true, ..NONE }
            }
            ReadResponseFirst | ReadResponseLast | ReadResponseOnly | Acknowledge => Layout { aeth: true, ..NONE },
            AtomicAcknowledge => Layout { aeth: true, atomic_ack_eth: true, ..NONE },
            CompareSwap | FetchAdd => Layout { atomic_eth: true, ..NONE },
            SendLastInv | SendOnlyInv => Layout { ieth: true, ..NONE },
            UdSendOnly => Layout { deth: true, ..NONE },
            UdSendOnlyImm => Layout { deth: true, immdt: true, ..NONE },
            Cnp => Layout { cnp_pad: true, ..NONE },
            _ => NONE,
        }
    }
}

/// Pad bytes needed after `payload_len` bytes so the payload ends on a 4-byte boundary.
pub const fn pad_for(payload_len: usize) -> u8 {
    ((4 - payload_len % 4) % 4) as u8
}

/// Checks that the BTH and every extension header its opcode requires fit `b`; returns the
/// length of those headers.
fn check_headers(b: &[u8]) -> Result<usize, Error> {
    let layout = bth::Packet::new_checked(b)?.opcode().layout();
    let mut off = bth::LEN;
    for e in layout.iter() {
        let len = e.wire_len();
        if b.len() < off + len {
            return Err(Error::Truncated { layer: e.layer(), needed: len, available: b.len() - off });
        }
        off += len;
    }
    Ok(off)
}

/// A view of the InfiniBand part of a RoCE packet (a RoCEv2 UDP payload, or what follows a
/// RoCE v1 GRH): BTH, extension headers, payload, pad and ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap, checking every length the opcode implies.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensure that no accessor panics: BTH, the opcode's extension headers, the pad count and
    /// the ICRC all fit.
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        let off = check_headers(b)?;
        if b.len() < off + icrc::LEN {
            return Err(Error::Truncated { layer: Layer::Icrc, needed: icrc::LEN, available: b.len() - off });
        }
        let data = b.len() - off - icrc::LEN;
        let pad = self.bth().pad_count();
        if usize::from(pad) > data {
            return Err(Error::PadCount { pad, available: data });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The BTH view.
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        bth::Packet::new_unchecked(&self.buffer.as_ref()[..bth::LEN])
    }

    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        self.bth().opcode()
    }

    /// The bytes of extension header `e`, when the opcode carries it.
    fn ext(&self, e: Ext) -> Option<&[u8]> {
        let off = self.opcode().layout().offset(e)?;
        Some(&self.buffer.as_ref()[off..off + e.wire_len()])
    }

    /// The DETH view, when the opcode carries one (UD).
    pub fn deth(&self) -> Option<deth::Packet<&[u8]>> {
        self.ext(Ext::Deth).map(deth::Packet::new_unchecked)
    }

    /// The RETH view, when the opcode carries one.
    pub fn reth(&self) -> Option<reth::Packet<&[u8]>> {
        self.ext(Ext::Reth).map(reth::Packet::new_unchecked)
    }

    /// The AtomicETH view, when the opcode carries one (CmpSwap, FetchAdd).
    pub fn atomic_eth(&self) -> Option<atomic_eth::Packet<&[u8]>> {
        self.ext(Ext::AtomicEth).map(atomic_eth::Packet::new_unchecked)
    }

    /// The AETH view, when the opcode carries one.
    pub fn aeth(&self) -> Option<aeth::Packet<&[u8]>> {
        self.ext(Ext::Aeth).map(aeth::Packet::new_unchecked)
    }

    /// The AtomicAckETH view, when the opcode carries one (ATOMIC Acknowledge).
    pub fn atomic_ack_eth(&self) -> Option<atomic_ack_eth::Packet<&[u8]>> {
        self.ext(Ext::AtomicAckEth).map(atomic_ack_eth::Packet::new_unchecked)
    }

    /// The immediate data, when the opcode carries it.
    pub fn immediate(&self) -> Option<u32> {
        self.ext(Ext::ImmDt).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The IETH view, when the opcode carries one (SEND with Invalidate).
    pub fn ieth(&self) -> Option<ieth::Packet<&[u8]>> {
        self.ext(Ext::Ieth).map(ieth::Packet::new_unchecked)
    }

    /// Bytes of BTH plus extension headers.
    pub fn header_len(&self) -> usize {
        bth::LEN + self.opcode().layout().ext_len()
    }

    /// The ICRC as stored (little-endian on the wire).
    pub fn icrc(&self) -> u32 {
        let b = self.buffer.as_ref();
        let n = b.len();
        u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload without the pad bytes.
    pub fn payload(&self) -> &'a [u8] {
        let b: &'a [u8] = self.buffer.as_ref();
        let end = b.len() - icrc::LEN - usize::from(self.bth().pad_count());
        &b[self.header_len()..end]
    }
}

/// The InfiniBand headers of one RoCE packet. Which of the optional headers must be present
/// follows from `bth.opcode` ([`Opcode::layout`]); [`Repr::new`] starts with none of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub bth: bth::Repr,
    /// UD.
    pub deth: Option<deth::Repr>,
    pub reth: Option<reth::Repr>,
    /// CmpSwap, FetchAdd.
    pub atomic_eth: Option<atomic_eth::Repr>,
    pub aeth: Option<aeth::Repr>,
    /// ATOMIC Acknowledge.
    pub atomic_ack_eth: Option<atomic_ack_eth::Repr>,
    /// ImmDt.
    pub immediate: Option<u32>,
    /// SEND with Invalidate.
    pub ieth: Option<ieth::Repr>,
}

impl Repr {
    /// Headers with only a BTH; add the extension headers the opcode needs.
    pub fn new(bth: bth::Repr) -> Self {
        Repr {
            bth,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immediate: None,
            ieth: None,
        }
    }

    /// Reads the headers from a view whose header lengths were checked.
    fn from_view<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        Ok(Repr {
            bth: bth::Repr::parse(&p.bth())?,
            deth: p.deth().map(|x| deth::Repr::parse(&x)).transpose()?,
            reth: p.reth().map(|x| reth::Repr::parse(&x)).transpose()?,
            atomic_eth: p.atomic_eth().map(|x| atomic_eth::Repr::parse(&x)).transpose()?,
            aeth: p.aeth().map(|x| aeth::Repr::parse(&x)).transpose()?,
            atomic_ack_eth: p.atomic_ack_eth().map(|x| atomic_ack_eth::Repr::parse(&x)).transpose()?,
            immediate: p.immediate(),
            ieth: p.ieth().map(|x| ieth::Repr::parse(&x)).transpose()?,
        })
    }

    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Self::from_view(p)
    }

    /// Parse only the BTH and the extension headers its opcode requires from the start of `b`
    /// (the payload, pad and ICRC may be missing, as in a snaplen-truncated capture). Returns
    /// the headers and their length; a header cut short is an error naming it.
    pub fn parse_headers(b: &[u8]) -> Result<(Self, usize), Error> {
        let off = check_headers(b)?;
        // Every accessor reads only the header bytes checked above.
        let p = Packet::new_unchecked(&b[..off]);
        Ok((Self::from_view(&p)?, off))
    }

    /// True when the optional header `e` is set (the CNP's reserved bytes always count as set).
    pub fn has(&self, e: Ext) -> bool {
        match e {
            Ext::Deth => self.deth.is_some(),
            Ext::Reth => self.reth.is_some(),
            Ext::AtomicEth => self.atomic_eth.is_some(),
            Ext::Aeth => self.aeth.is_some(),
            Ext::AtomicAckEth => self.atomic_ack_eth.is_some(),
            Ext::ImmDt => self.immediate.is_some(),
            Ext::Ieth => self.ieth.is_some(),
            Ext::CnpPad => self.bth.opcode.layout().cnp_pad,
        }
    }

    /// Check that the present extension headers are exactly those the opcode implies.
    pub fn check_layout(&self) -> Result<(), Error> {
        let l = self.bth.opcode.layout();
        let opcode = self.bth.opcode;
        for e in Ext::ORDER {
            let what = match (l.has(e), self.has(e)) {
                (true, false) => match e {
                    Ext::Deth => "a DETH",
                    Ext::Reth => "a RETH",
                    Ext::AtomicEth => "an AtomicETH",
                    Ext::Aeth => "an AETH",
                    Ext::AtomicAckEth => "an AtomicAckETH",
                    Ext::ImmDt => "immediate data",
                    Ext::Ieth => "an IETH",
                    Ext::CnpPad => continue,
                },
                (false, true) => match e {
                    Ext::Deth => "no DETH",
                    Ext::Reth => "no RETH",
                    Ext::AtomicEth => "no AtomicETH",
                    Ext::Aeth => "no AETH",
                    Ext::AtomicAckEth => "no AtomicAckETH",
                    Ext::ImmDt => "no immediate data",
                    Ext::Ieth => "no IETH",
                    Ext::CnpPad => continue,
                },
                _ => continue,
            };
            return Err(Error::Layout { opcode, what });
        }
        Ok(())
    }

    /// Bytes of BTH and extension headers.
    pub fn header_len(&self) -> usize {
        bth::LEN + self.bth.opcode.layout().ext_len()
    }

    /// Bytes of the whole InfiniBand part for a payload of `payload_len` bytes: headers,
    /// payload, `bth.pad_count` pad bytes, ICRC.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len + usize::from(self.bth.pad_count & 3) + icrc::LEN
    }

    /// Write the headers, the payload and zero pad bytes into `buf` (which must be exactly
    /// [`buffer_len`](Self::buffer_len) long); the ICRC bytes are zeroed (the ICRC covers the IP
    /// and UDP headers, so [`icrc::fill`] or [`RoceFrame`] computes it). CNP reserved bytes
    /// and the DETH's reserved byte are zeroed.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<(), Error> {
        self.check_layout()?;
        let need = self.buffer_len(payload.len());
        if buf.len() != need {
            return Err(Error::TooBig { needed: need, available: buf.len() });
        }
        self.bth.emit(&mut bth::Packet::new_unchecked(&mut buf[..bth::LEN]));
        let mut off = bth::LEN;
        for e in self.bth.opcode.layout().iter() {
            let b = &mut buf[off..off + e.wire_len()];
            match e {
                Ext::Deth => self.deth.unwrap_or_default().emit(&mut deth::Packet::new_unchecked(b)),
                Ext::Reth => self.reth.unwrap_or_default().emit(&mut reth::Packet::new_unchecked(b)),
                Ext::AtomicEth => self.atomic_eth.unwrap_or_default().emit(&mut atomic_eth::Packet::new_unchecked(b)),
                Ext::Aeth => {
                    if let Some(a) = &self.aeth {
                        a.emit(&mut aeth::Packet::new_unchecked(b));
                    }
                }
                Ext::AtomicAckEth => {
                    self.atomic_ack_eth.unwrap_or_default().emit(&mut atomic_ack_eth::Packet::new_unchecked(b));
                }
                Ext::ImmDt => b.copy_from_slice(&self.immediate.unwrap_or_default().to_be_bytes()),
                Ext::Ieth => self.ieth.unwrap_or_default().emit(&mut ieth::Packet::new_unchecked(b)),
                Ext::CnpPad => b.fill(0),
            }
            off += e.wire_len();
        }
        buf[off..off + payload.len()].copy_from_slice(payload);
        off += payload.len();
        buf[off..].fill(0);
        Ok(())
    }
}
