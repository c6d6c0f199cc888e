//! Atomic Acknowledge Extended Transport Header (AtomicAckETH), IBTA vol. 1 §9.3 "Extended
//! transport headers" (ATOMIC Acknowledge 0x12, after the AETH, Table 38).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Original Remote Data (63..32)                |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Original Remote Data (31..0)                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The value the remote 64-bit location held before the Compare & Swap / Fetch & Add.

use super::{Error, Layer};

mod field {
    use core::ops::Range;
    pub const ORIG: Range<usize> = 0..8;
    pub const END: usize = 8;
}

/// Length of the AtomicAckETH in bytes.
pub const LEN: usize = field::END;

fixed_len_packet!("AtomicAckETH", Layer::AtomicAckEth);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The original remote data.
    pub fn orig_remote_data(&self) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.buffer.as_ref()[field::ORIG]);
        u64::from_be_bytes(a)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the original remote data.
    pub fn set_orig_remote_data(&mut self, v: u64) {
        self.buffer.as_mut()[field::ORIG].copy_from_slice(&v.to_be_bytes());
    }
}

/// A high-level representation of an AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    pub orig_remote_data: u64,
}

impl Repr {
    /// Parse an AtomicAckETH view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Ok(Repr { orig_remote_data: p.orig_remote_data() })
    }
    /// Bytes needed to emit.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_orig_remote_data(self.orig_remote_data);
    }
}
