//! Datagram Extended Transport Header (DETH), IBTA vol. 1 §9.3 "Extended transport headers"
//! (carried by every UD packet right after the BTH, Table 38; RD packets carry it after the RDETH).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                            Q_Key                              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Reserved    |                 Source QP                     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Q_Key: the queue key the destination QP checks (a Q_Key with the high bit set is a
//! "controlled" Q_Key, §10.2.4). Source QP: the sender's QP number (24 bits). The reserved
//! byte is written as zero.

use super::{Error, Layer};

mod field {
    use core::ops::Range;
    pub const QKEY: Range<usize> = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Range<usize> = 5..8;
    pub const END: usize = 8;
}

/// Length of the DETH in bytes.
pub const LEN: usize = field::END;

fixed_len_packet!("DETH", Layer::Deth);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Queue key.
    pub fn q_key(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::QKEY];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// The reserved byte (zero when sent by a conforming sender).
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }
    /// Source QP (24 bits).
    pub fn src_qp(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::SRC_QP];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the queue key.
    pub fn set_q_key(&mut self, v: u32) {
        self.buffer.as_mut()[field::QKEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the source QP (masked to 24 bits); the reserved byte before it is written as zero.
    pub fn set_src_qp(&mut self, v: u32) {
        let b = self.buffer.as_mut();
        b[field::RESERVED] = 0;
        b[field::SRC_QP].copy_from_slice(&(v & super::bth::MASK_24).to_be_bytes()[1..]);
    }
}

/// A high-level representation of a DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    pub q_key: u32,
    /// 24 bits; higher bits are dropped on emit.
    pub src_qp: u32,
}

impl Repr {
    /// Parse a DETH view (the reserved byte is ignored).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Ok(Repr { q_key: p.q_key(), src_qp: p.src_qp() })
    }
    /// Bytes needed to emit.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_q_key(self.q_key);
        p.set_src_qp(self.src_qp);
    }
}
