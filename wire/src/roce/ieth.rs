//! Invalidate Extended Transport Header (IETH), IBTA vol. 1 §9.3 "Extended transport
//! headers" (SEND Last with Invalidate 0x16 and SEND Only with Invalidate 0x17, Table 38; the
//! Base Memory Management Extensions use it to invalidate a remote memory region on receipt).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  R_Key (to be invalidated)                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use super::{Error, Layer};

mod field {
    use core::ops::Range;
    pub const RKEY: Range<usize> = 0..4;
    pub const END: usize = 4;
}

/// Length of the IETH in bytes.
pub const LEN: usize = field::END;

fixed_len_packet!("IETH", Layer::Ieth);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The R_Key to invalidate.
    pub fn r_key(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::RKEY];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the R_Key to invalidate.
    pub fn set_r_key(&mut self, v: u32) {
        self.buffer.as_mut()[field::RKEY].copy_from_slice(&v.to_be_bytes());
    }
}

/// A high-level representation of an IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    pub r_key: u32,
}

impl Repr {
    /// Parse an IETH view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Ok(Repr { r_key: p.r_key() })
    }
    /// Bytes needed to emit.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_r_key(self.r_key);
    }
}
