//! The `DEPTHS` map shared with the switch daemon: a `BPF_F_MMAPABLE` array of `u64` (bytes
//! charged to egress queue (port, tc), index [`dataplane_common::depth_index`]) mapped
//! read/write, so the data path publishes queue depths for the XDP program's WRED/ECN decision
//! without a syscall per packet (docs/src/wred-ecn-dcqcn.md). The switch model's
//! `switch_model::depths::DepthBoard` stores into it ([`DepthsMap::slots`]); this owns the
//! mapping and unmaps it when dropped.
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use dataplane_common::DEPTHS_LEN;

/// The `DEPTHS` map's value area, mapped shared.
pub struct DepthsMap {
    slots: NonNull<AtomicU64>,
    len_bytes: usize,
}

// SAFETY: the mapping is process memory; the owner only unmaps it (on drop).
unsafe impl Send for DepthsMap {}

impl DepthsMap {
    /// Maps the `DEPTHS` array map shared (read/write) through its fd.
    pub fn map(fd: BorrowedFd<'_>) -> io::Result<DepthsMap> {
        let len_bytes = DEPTHS_LEN as usize * std::mem::size_of::<u64>();
        let len = NonZeroUsize::new(len_bytes).expect("DEPTHS_LEN > 0");
        use nix::sys::mman::{mmap, MapFlags, ProtFlags};
        // SAFETY: a new shared mapping of a BPF array map's value area: the kernel checks the
        // map is mmapable and the length within it; nothing else in this process aliases it.
        let p = unsafe { mmap(None, len, ProtFlags::PROT_READ | ProtFlags::PROT_WRITE, MapFlags::MAP_SHARED, fd, 0) }
            .map_err(io::Error::from)?;
        Ok(DepthsMap { slots: p.cast(), len_bytes })
    }

    /// The `DEPTHS_LEN` slots, valid (aligned, read/write) while `self` lives.
    pub fn slots(&self) -> NonNull<AtomicU64> {
        self.slots
    }
}

impl Drop for DepthsMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` created; the board that used it is dropped
        // with (it owns) this.
        if let Err(e) = unsafe { nix::sys::mman::munmap(self.slots.cast(), self.len_bytes) } {
            tracing::warn!("munmap of the DEPTHS map: {e}");
        }
    }
}

impl std::fmt::Debug for DepthsMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DepthsMap({} bytes)", self.len_bytes)
    }
}
