//! Atomic Extended Transport Header (AtomicETH), IBTA vol. 1 §9.3 "Extended transport
//! headers" (Compare & Swap 0x13 and Fetch & Add 0x14 requests, Table 38; the operations
//! themselves are described in §9.4).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Virtual Address (63..32)                     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Virtual Address (31..0)                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                            R_Key                              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Swap (or Add) Data (63..32)                  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Swap (or Add) Data (31..0)                   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     Compare Data (63..32)                     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     Compare Data (31..0)                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Virtual Address: the 8-byte aligned remote address; Swap/Add Data: the value written
//! (Compare & Swap) or added (Fetch & Add); Compare Data: the value compared with (Compare &
//! Swap only; Fetch & Add ignores it).

use super::{Error, Layer};

mod field {
    use core::ops::Range;
    pub const VA: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    pub const SWAP_ADD: Range<usize> = 12..20;
    pub const COMPARE: Range<usize> = 20..28;
    pub const END: usize = 28;
}

/// Length of the AtomicETH in bytes.
pub const LEN: usize = field::END;

fixed_len_packet!("AtomicETH", Layer::AtomicEth);

fn get64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Remote virtual address.
    pub fn va(&self) -> u64 {
        get64(&self.buffer.as_ref()[field::VA])
    }
    /// Remote key.
    pub fn r_key(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::RKEY];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Swap data (Compare & Swap) or add data (Fetch & Add).
    pub fn swap_add(&self) -> u64 {
        get64(&self.buffer.as_ref()[field::SWAP_ADD])
    }
    /// Compare data.
    pub fn compare(&self) -> u64 {
        get64(&self.buffer.as_ref()[field::COMPARE])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the remote virtual address.
    pub fn set_va(&mut self, v: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the remote key.
    pub fn set_r_key(&mut self, v: u32) {
        self.buffer.as_mut()[field::RKEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the swap / add data.
    pub fn set_swap_add(&mut self, v: u64) {
        self.buffer.as_mut()[field::SWAP_ADD].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the compare data.
    pub fn set_compare(&mut self, v: u64) {
        self.buffer.as_mut()[field::COMPARE].copy_from_slice(&v.to_be_bytes());
    }
}

/// A high-level representation of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    pub va: u64,
    pub r_key: u32,
    /// Swap data (Compare & Swap) or add data (Fetch & Add).
    pub swap_add: u64,
    pub compare: u64,
}

impl Repr {
    /// Parse an AtomicETH view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Ok(Repr { va: p.va(), r_key: p.r_key(), swap_add: p.swap_add(), compare: p.compare() })
    }
    /// Bytes needed to emit.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_va(self.va);
        p.set_r_key(self.r_key);
        p.set_swap_add(self.swap_add);
        p.set_compare(self.compare);
    }
}
