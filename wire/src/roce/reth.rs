//! RDMA Extended Transport Header (RETH), IBTA vol. 1 §9.3.3 (RDMA WRITE First/Only,
//! RDMA READ Request).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                   Virtual Address (63..32)                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                   Virtual Address (31..0)                     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                            R_Key                              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                          DMA Length                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use super::{Error, Layer};

mod field {
    use core::ops::Range;
    pub const VA: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    pub const DMA_LEN: Range<usize> = 12..16;
    pub const END: usize = 16;
}

/// Length of the RETH in bytes.
pub const LEN: usize = field::END;

fixed_len_packet!("RETH", Layer::Reth);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual address.
    pub fn va(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[field::VA]);
        u64::from_be_bytes(b)
    }
    /// Remote key.
    pub fn r_key(&self) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.buffer.as_ref()[field::RKEY]);
        u32::from_be_bytes(b)
    }
    /// DMA length in bytes (of the whole message).
    pub fn dma_len(&self) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.buffer.as_ref()[field::DMA_LEN]);
        u32::from_be_bytes(b)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the virtual address.
    pub fn set_va(&mut self, v: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the remote key.
    pub fn set_r_key(&mut self, v: u32) {
        self.buffer.as_mut()[field::RKEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the DMA length.
    pub fn set_dma_len(&mut self, v: u32) {
        self.buffer.as_mut()[field::DMA_LEN].copy_from_slice(&v.to_be_bytes());
    }
}

/// A high-level representation of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    pub va: u64,
    pub r_key: u32,
    pub dma_len: u32,
}

impl Repr {
    /// Parse a RETH view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Ok(Repr { va: p.va(), r_key: p.r_key(), dma_len: p.dma_len() })
    }
    /// Bytes needed to emit.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_va(self.va);
        p.set_r_key(self.r_key);
        p.set_dma_len(self.dma_len);
    }
}
