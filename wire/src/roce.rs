//! RoCEv2: InfiniBand transport headers carried over UDP port 4791.
//!
//! Standards: InfiniBand Architecture Specification vol. 1 (IBTA), chapter 9 "Transport layer"
//! (BTH §9.2, RETH §9.3.3, AETH §9.3.5, ImmDt §9.3.6, opcodes Table 37), and Annex A17 "RoCEv2"
//! (UDP encapsulation on port 4791, the ICRC over masked IP/UDP headers §A17.3.3, and the
//! Congestion Notification Packet, CNP, opcode 0x81 §A17.9.3).
//!
//! ```text
//! Ethernet | IPv4 / IPv6 | UDP dst 4791 | BTH (12) | [RETH 16] [AETH 4] [ImmDt 4] | payload | pad | ICRC (4)
//! CNP:                                   BTH (opcode 0x81, BECN=1) | 16 reserved bytes         | ICRC (4)
//! ```
//!
//! Layout of this module (smoltcp style): [`bth`], [`reth`], [`aeth`] hold the zero-copy
//! `Packet` views and `Repr`s of each header; [`Packet`] / [`Repr`] here cover the whole
//! InfiniBand part of a UDP payload (BTH through ICRC) with the extension headers implied by
//! the opcode; [`icrc`] computes and verifies the ICRC; [`frame`] builds and parses whole
//! Ethernet frames with `etherparse`.

pub mod aeth;
pub mod bth;
pub mod frame;
pub mod icrc;
pub mod reth;

pub use frame::{cnp, udp_src_port_for_qp, IpInfo, ParsedFrame, RoceFrame};
pub use icrc::{icrc_ipv4, icrc_ipv6, verify, IcrcStatus};
/// The ECN codepoint type of the IP headers (re-exported from `etherparse`).
pub use etherparse::IpEcn;

/// The IANA UDP destination port of RoCEv2.
pub const UDP_PORT: u16 = 4791;
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
    Bth,
    Reth,
    Aeth,
    ImmDt,
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
            Layer::Bth => "BTH",
            Layer::Reth => "RETH",
            Layer::Aeth => "AETH",
            Layer::ImmDt => "ImmDt",
            Layer::CnpPadding => "CNP padding",
            Layer::Payload => "payload",
            Layer::Icrc => "ICRC",
        })
    }
}

/// Errors of the RoCEv2 parsers and emitters.
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
    #[error("IP version {0} is neither 4 nor 6")]
    IpVersion(u8),
    #[error("IPv4 header length {0} is below 20")]
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

macro_rules! opcodes {
    ($( $(#[$m:meta])* $name:ident = $val:literal, $text:literal; )*) => {
        /// BTH OpCode (IBTA vol. 1 Table 37; CNP from Annex A17). Unknown values are kept.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Opcode {
            $( $(#[$m])* $name, )*
            /// Any other opcode (UC/RD/UD, atomics, vendor), kept as is.
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
            /// Short kebab-case name (`write-only`), or `unknown`.
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
    /// RC SEND Last with Immediate.
    SendLastImm = 0x03, "send-last-imm";
    /// RC SEND Only.
    SendOnly = 0x04, "send-only";
    /// RC SEND Only with Immediate.
    SendOnlyImm = 0x05, "send-only-imm";
    /// RC RDMA WRITE First (RETH).
    WriteFirst = 0x06, "write-first";
    /// RC RDMA WRITE Middle.
    WriteMiddle = 0x07, "write-middle";
    /// RC RDMA WRITE Last.
    WriteLast = 0x08, "write-last";
    /// RC RDMA WRITE Last with Immediate.
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
    /// RoCEv2 Congestion Notification Packet (Annex A17.9.3; 16 reserved bytes).
    Cnp = 0x81, "cnp";
}

impl core::fmt::Display for Opcode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (0x{:02x})", self.name(), u8::from(*self))
    }
}

/// Which extension headers follow the BTH for an opcode (IBTA vol. 1 §9.4 / Table 37).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub reth: bool,
    pub aeth: bool,
    pub immdt: bool,
    /// CNP: 16 reserved bytes and no payload.
    pub cnp_pad: bool,
}

impl Layout {
    /// Bytes of extension headers between BTH and payload.
    pub const fn ext_len(&self) -> usize {
        (if self.reth { reth::LEN } else { 0 })
            + (if self.aeth { aeth::LEN } else { 0 })
            + (if self.immdt { IMMDT_LEN } else { 0 })
            + (if self.cnp_pad { CNP_PAD_LEN } else { 0 })
    }
}

impl Opcode {
    /// The extension headers this opcode carries. Unknown opcodes carry none (everything after
    /// the BTH is reported as payload).
    pub const fn layout(self) -> Layout {
        use Opcode::*;
        let (reth, aeth, immdt, cnp_pad) = match self {
            WriteFirst | WriteOnly | ReadRequest => (true, false, false, false),
            WriteOnlyImm => (true, false, true, false),
            SendLastImm | SendOnlyImm | WriteLastImm => (false, false, true, false),
            ReadResponseFirst | ReadResponseLast | ReadResponseOnly | Acknowledge => {
                (false, true, false, false)
            }
            Cnp => (false, false, false, true),
            _ => (false, false, false, false),
        };
        Layout { reth, aeth, immdt, cnp_pad }
    }
}

/// Pad bytes needed after `payload_len` bytes so the payload ends on a 4-byte boundary.
pub const fn pad_for(payload_len: usize) -> u8 {
    ((4 - payload_len % 4) % 4) as u8
}

/// A view of the InfiniBand part of a RoCEv2 UDP payload: BTH, extension headers, payload,
/// pad and ICRC.
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
        let bth = bth::Packet::new_checked(b)?;
        let layout = bth.opcode().layout();
        let mut off = bth::LEN;
        for (present, layer, len) in [
            (layout.reth, Layer::Reth, reth::LEN),
            (layout.aeth, Layer::Aeth, aeth::LEN),
            (layout.immdt, Layer::ImmDt, IMMDT_LEN),
            (layout.cnp_pad, Layer::CnpPadding, CNP_PAD_LEN),
        ] {
            if present {
                if b.len() < off + len {
                    return Err(Error::Truncated { layer, needed: len, available: b.len() - off });
                }
                off += len;
            }
        }
        if b.len() < off + icrc::LEN {
            return Err(Error::Truncated { layer: Layer::Icrc, needed: icrc::LEN, available: b.len() - off });
        }
        let data = b.len() - off - icrc::LEN;
        let pad = bth.pad_count();
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

    fn offsets(&self) -> (Layout, usize, usize, usize) {
        let layout = self.opcode().layout();
        let reth_off = bth::LEN;
        let aeth_off = reth_off + if layout.reth { reth::LEN } else { 0 };
        let imm_off = aeth_off + if layout.aeth { aeth::LEN } else { 0 };
        (layout, reth_off, aeth_off, imm_off)
    }

    /// The RETH view, when the opcode carries one.
    pub fn reth(&self) -> Option<reth::Packet<&[u8]>> {
        let (l, off, _, _) = self.offsets();
        l.reth.then(|| reth::Packet::new_unchecked(&self.buffer.as_ref()[off..off + reth::LEN]))
    }

    /// The AETH view, when the opcode carries one.
    pub fn aeth(&self) -> Option<aeth::Packet<&[u8]>> {
        let (l, _, off, _) = self.offsets();
        l.aeth.then(|| aeth::Packet::new_unchecked(&self.buffer.as_ref()[off..off + aeth::LEN]))
    }

    /// The immediate data, when the opcode carries it.
    pub fn immediate(&self) -> Option<u32> {
        let (l, _, _, off) = self.offsets();
        l.immdt.then(|| {
            let b = &self.buffer.as_ref()[off..off + IMMDT_LEN];
            u32::from_be_bytes([b[0], b[1], b[2], b[3]])
        })
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

/// The InfiniBand headers of one RoCEv2 packet. Which of `reth` / `aeth` / `immediate` must be
/// present follows from `bth.opcode` ([`Opcode::layout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub bth: bth::Repr,
    pub reth: Option<reth::Repr>,
    pub aeth: Option<aeth::Repr>,
    pub immediate: Option<u32>,
}

impl Repr {
    /// Headers with only a BTH; add the extension headers the opcode needs.
    pub fn new(bth: bth::Repr) -> Self {
        Repr { bth, reth: None, aeth: None, immediate: None }
    }

    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        let bth = bth::Repr::parse(&p.bth())?;
        let reth = p.reth().map(|r| reth::Repr::parse(&r)).transpose()?;
        let aeth = p.aeth().map(|a| aeth::Repr::parse(&a)).transpose()?;
        Ok(Repr { bth, reth, aeth, immediate: p.immediate() })
    }

    /// Parse only the BTH and the extension headers its opcode requires from the start of `b`
    /// (the payload, pad and ICRC may be missing, as in a snaplen-truncated capture). Returns
    /// the headers and their length; a header cut short is an error naming it.
    pub fn parse_headers(b: &[u8]) -> Result<(Self, usize), Error> {
        let bth_view = bth::Packet::new_checked(b)?;
        let layout = bth_view.opcode().layout();
        let mut off = bth::LEN;
        for (present, layer, len) in [
            (layout.reth, Layer::Reth, reth::LEN),
            (layout.aeth, Layer::Aeth, aeth::LEN),
            (layout.immdt, Layer::ImmDt, IMMDT_LEN),
            (layout.cnp_pad, Layer::CnpPadding, CNP_PAD_LEN),
        ] {
            if present {
                if b.len() < off + len {
                    return Err(Error::Truncated { layer, needed: len, available: b.len() - off });
                }
                off += len;
            }
        }
        // Every accessor below reads only the header bytes checked above.
        let p = Packet::new_unchecked(&b[..off]);
        let bth = bth::Repr::parse(&p.bth())?;
        let reth = p.reth().map(|r| reth::Repr::parse(&r)).transpose()?;
        let aeth = p.aeth().map(|a| aeth::Repr::parse(&a)).transpose()?;
        Ok((Repr { bth, reth, aeth, immediate: p.immediate() }, off))
    }

    /// Check that the present extension headers are exactly those the opcode implies.
    pub fn check_layout(&self) -> Result<(), Error> {
        let l = self.bth.opcode.layout();
        let opcode = self.bth.opcode;
        let err = |what| Err(Error::Layout { opcode, what });
        match (l.reth, self.reth.is_some()) {
            (true, false) => return err("a RETH"),
            (false, true) => return err("no RETH"),
            _ => {}
        }
        match (l.aeth, self.aeth.is_some()) {
            (true, false) => return err("an AETH"),
            (false, true) => return err("no AETH"),
            _ => {}
        }
        match (l.immdt, self.immediate.is_some()) {
            (true, false) => err("immediate data"),
            (false, true) => err("no immediate data"),
            _ => Ok(()),
        }
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
    /// and UDP headers, so [`icrc::fill`] or [`RoceFrame`] computes it). CNP reserved bytes are
    /// zeroed.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<(), Error> {
        self.check_layout()?;
        let need = self.buffer_len(payload.len());
        if buf.len() != need {
            return Err(Error::TooBig { needed: need, available: buf.len() });
        }
        let l = self.bth.opcode.layout();
        self.bth.emit(&mut bth::Packet::new_unchecked(&mut buf[..bth::LEN]));
        let mut off = bth::LEN;
        if let Some(r) = &self.reth {
            r.emit(&mut reth::Packet::new_unchecked(&mut buf[off..off + reth::LEN]));
            off += reth::LEN;
        }
        if let Some(a) = &self.aeth {
            a.emit(&mut aeth::Packet::new_unchecked(&mut buf[off..off + aeth::LEN]));
            off += aeth::LEN;
        }
        if let Some(i) = self.immediate {
            buf[off..off + IMMDT_LEN].copy_from_slice(&i.to_be_bytes());
            off += IMMDT_LEN;
        }
        if l.cnp_pad {
            buf[off..off + CNP_PAD_LEN].fill(0);
            off += CNP_PAD_LEN;
        }
        buf[off..off + payload.len()].copy_from_slice(payload);
        off += payload.len();
        buf[off..].fill(0);
        Ok(())
    }
}
