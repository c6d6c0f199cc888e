//! ACK Extended Transport Header (AETH), IBTA vol. 1 §9.3.5 and §9.7.5.1 (syndrome encoding).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |r| T |  value  |              Message Sequence Number          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Syndrome: r = reserved (0); T = 00 ACK (value = credit count), 01 RNR NAK (value = RNR
//! timer), 10 reserved, 11 NAK (value = NAK code: 0 PSN sequence error, 1 invalid request,
//! 2 remote access error, 3 remote operational error, 4 invalid RD request).

use super::{Error, Layer};

mod field {
    use core::ops::Range;
    pub const SYNDROME: usize = 0;
    pub const MSN: Range<usize> = 1..4;
    pub const END: usize = 4;
}

/// Length of the AETH in bytes.
pub const LEN: usize = field::END;

const TYPE_SHIFT: u8 = 5;
const TYPE_MASK: u8 = 0x60;
const VALUE_MASK: u8 = 0x1f;

/// NAK codes (IBTA vol. 1 Table 48 "NAK codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    PsnSequenceError,
    InvalidRequest,
    RemoteAccessError,
    RemoteOperationalError,
    InvalidRdRequest,
    /// A reserved code, kept as is (5 bits).
    Unknown(u8),
}

impl From<u8> for NakCode {
    fn from(v: u8) -> Self {
        match v & VALUE_MASK {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            x => NakCode::Unknown(x),
        }
    }
}

impl From<NakCode> for u8 {
    fn from(v: NakCode) -> u8 {
        match v {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Unknown(x) => x & VALUE_MASK,
        }
    }
}

impl core::fmt::Display for NakCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NakCode::PsnSequenceError => f.write_str("psn-sequence-error"),
            NakCode::InvalidRequest => f.write_str("invalid-request"),
            NakCode::RemoteAccessError => f.write_str("remote-access-error"),
            NakCode::RemoteOperationalError => f.write_str("remote-operational-error"),
            NakCode::InvalidRdRequest => f.write_str("invalid-rd-request"),
            NakCode::Unknown(x) => write!(f, "nak-code-{x}"),
        }
    }
}

/// The AETH syndrome byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a 5-bit credit count (0x1f = credits invalid).
    Ack { credits: u8 },
    /// Receiver not ready, with the 5-bit RNR timer code.
    RnrNak { timer: u8 },
    /// Negative acknowledgement.
    Nak(NakCode),
    /// Reserved type 10 (or the reserved top bit set): the raw byte.
    Reserved(u8),
}

impl From<u8> for Syndrome {
    fn from(b: u8) -> Self {
        if b & 0x80 != 0 {
            return Syndrome::Reserved(b);
        }
        let v = b & VALUE_MASK;
        match (b & TYPE_MASK) >> TYPE_SHIFT {
            0 => Syndrome::Ack { credits: v },
            1 => Syndrome::RnrNak { timer: v },
            3 => Syndrome::Nak(NakCode::from(v)),
            _ => Syndrome::Reserved(b),
        }
    }
}

impl From<Syndrome> for u8 {
    fn from(s: Syndrome) -> u8 {
        match s {
            Syndrome::Ack { credits } => credits & VALUE_MASK,
            Syndrome::RnrNak { timer } => (1 << TYPE_SHIFT) | (timer & VALUE_MASK),
            Syndrome::Nak(c) => (3 << TYPE_SHIFT) | u8::from(c),
            Syndrome::Reserved(b) => b,
        }
    }
}

impl core::fmt::Display for Syndrome {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Syndrome::Ack { credits } => write!(f, "ack credits={credits}"),
            Syndrome::RnrNak { timer } => write!(f, "rnr-nak timer={timer}"),
            Syndrome::Nak(c) => write!(f, "nak {c}"),
            Syndrome::Reserved(b) => write!(f, "reserved 0x{b:02x}"),
        }
    }
}

fixed_len_packet!("AETH", Layer::Aeth);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The raw syndrome byte.
    pub fn syndrome_raw(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    /// The decoded syndrome.
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from(self.syndrome_raw())
    }
    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::MSN];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the syndrome byte.
    pub fn set_syndrome(&mut self, s: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = s.into();
    }
    /// Set the MSN (masked to 24 bits).
    pub fn set_msn(&mut self, v: u32) {
        self.buffer.as_mut()[field::MSN].copy_from_slice(&(v & super::bth::MASK_24).to_be_bytes()[1..]);
    }
}

/// A high-level representation of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub syndrome: Syndrome,
    /// 24 bits; higher bits are dropped on emit.
    pub msn: u32,
}

impl Repr {
    /// Parse an AETH view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Ok(Repr { syndrome: p.syndrome(), msn: p.msn() })
    }
    /// Bytes needed to emit.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_syndrome(self.syndrome);
        p.set_msn(self.msn);
    }
}
