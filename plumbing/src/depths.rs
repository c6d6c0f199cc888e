//! The egress queue depths the data-plane thread publishes for the XDP program's WRED/ECN
//! decision (docs/src/wred-ecn-dcqcn.md: an mmapable array map lets userspace publish depths without a
//! syscall per packet).
//!
//! The `DEPTHS` map is a `BPF_F_MMAPABLE` array of `u64` (bytes charged to egress queue
//! (port, tc), index [`dataplane_common::depth_index`]). The daemon maps it shared and stores a
//! queue's depth every time the buffer's charge of that queue changes, so the value XDP reads is
//! never older than the frames that passed XDP but are not enqueued yet: the frames waiting in
//! the ports' RX rings for the data-plane thread. The switch counts, per depth band found at
//! enqueue, how many ECT packets arrived and how many of them XDP marked
//! (`rocefab_wred_band_*`), which shows whether that lag bends the marking curve.
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use dataplane_common::{depth_index, limits::NUM_TC, DEPTHS_LEN};

enum Backing {
    /// A shared mapping of the BPF array map.
    Map { len_bytes: usize },
    /// Plain memory, for tests and for a data plane without the XDP program.
    Heap(#[allow(dead_code)] Box<[AtomicU64]>),
}

/// Where the data-plane thread stores queue depths. Single writer (the data-plane thread);
/// stores are relaxed atomics, one per buffer charge change.
pub struct DepthBoard {
    slots: NonNull<AtomicU64>,
    backing: Backing,
}

// SAFETY: the slots are atomics in memory the board owns (heap) or maps (kept until drop).
unsafe impl Send for DepthBoard {}

impl DepthBoard {
    /// Maps the `DEPTHS` array map shared (read/write) through its fd.
    pub fn map(fd: BorrowedFd<'_>) -> io::Result<DepthBoard> {
        let len_bytes = DEPTHS_LEN as usize * std::mem::size_of::<u64>();
        let len = NonZeroUsize::new(len_bytes).expect("DEPTHS_LEN > 0");
        use nix::sys::mman::{mmap, MapFlags, ProtFlags};
        // SAFETY: a new shared mapping of a BPF array map's value area: the kernel checks the
        // map is mmapable and the length within it; nothing else in this process aliases it.
        let p = unsafe { mmap(None, len, ProtFlags::PROT_READ | ProtFlags::PROT_WRITE, MapFlags::MAP_SHARED, fd, 0) }
            .map_err(io::Error::from)?;
        Ok(DepthBoard { slots: p.cast(), backing: Backing::Map { len_bytes } })
    }

    /// A board in plain memory (no XDP program reads it).
    pub fn heap() -> DepthBoard {
        let mut b: Box<[AtomicU64]> = (0..DEPTHS_LEN).map(|_| AtomicU64::new(0)).collect();
        let slots = NonNull::new(b.as_mut_ptr()).expect("boxed slice");
        DepthBoard { slots, backing: Backing::Heap(b) }
    }

    #[inline(always)]
    fn slot(&self, port: usize, tc: u8) -> Option<&AtomicU64> {
        let i = depth_index(port as u32, u32::from(tc) % NUM_TC as u32) as usize;
        // SAFETY: `i` is checked against the DEPTHS_LEN slots the board holds; AtomicU64 is valid
        // for any bit pattern and the memory lives as long as `self`.
        (i < DEPTHS_LEN as usize).then(|| unsafe { &*self.slots.as_ptr().add(i) })
    }

    /// Stores the depth of queue (`port`, `tc`).
    #[inline(always)]
    pub fn publish(&self, port: usize, tc: u8, bytes: u64) {
        if let Some(s) = self.slot(port, tc) {
            s.store(bytes, Ordering::Relaxed);
        }
    }

    /// The published depth of queue (`port`, `tc`).
    pub fn get(&self, port: usize, tc: u8) -> u64 {
        self.slot(port, tc).map_or(0, |s| s.load(Ordering::Relaxed))
    }
}

impl Drop for DepthBoard {
    fn drop(&mut self) {
        if let Backing::Map { len_bytes } = self.backing {
            // SAFETY: unmaps exactly the mapping `map` created; no reference into it outlives self.
            if let Err(e) = unsafe { nix::sys::mman::munmap(self.slots.cast(), len_bytes) } {
                tracing::warn!("munmap of the DEPTHS map: {e}");
            }
        }
    }
}

impl std::fmt::Debug for DepthBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.backing {
            Backing::Map { .. } => "DepthBoard(mmap)",
            Backing::Heap(_) => "DepthBoard(heap)",
        })
    }
}

/// Depth bands of the WRED curve for the enqueue-side check: band 0 below min, bands
/// 1..=[`RAMP_BANDS`] equal slices of [min, max), the last band at and above max.
pub const RAMP_BANDS: usize = 16;
/// Number of bands.
pub const BANDS: usize = RAMP_BANDS + 2;

/// The band of a depth for thresholds `min` < `max`.
#[inline(always)]
pub fn band_of(depth: u64, min: u64, max: u64) -> usize {
    if depth < min {
        0
    } else if depth >= max || max <= min {
        BANDS - 1
    } else {
        1 + ((depth - min) * RAMP_BANDS as u64 / (max - min)) as usize
    }
}

/// The depth range `[lo, hi)` of band `b` (`hi` = `u64::MAX` for the last).
pub fn band_range(b: usize, min: u64, max: u64) -> (u64, u64) {
    match b {
        0 => (0, min),
        b if b >= BANDS - 1 => (max, u64::MAX),
        b => {
            let w = |k: u64| min + (max - min) * k / RAMP_BANDS as u64;
            (w(b as u64 - 1), w(b as u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_board_stores_per_queue() {
        let b = DepthBoard::heap();
        b.publish(3, 3, 150_000);
        b.publish(63, 7, 1);
        assert_eq!(b.get(3, 3), 150_000);
        assert_eq!(b.get(3, 2), 0);
        assert_eq!(b.get(63, 7), 1);
        // Out of range: ignored, never a panic.
        b.publish(64, 0, 9);
        assert_eq!(b.get(64, 0), 0);
    }

    #[test]
    fn bands_cover_the_curve() {
        let (min, max) = (150_000, 3_000_000);
        assert_eq!(band_of(0, min, max), 0);
        assert_eq!(band_of(149_999, min, max), 0);
        assert_eq!(band_of(150_000, min, max), 1);
        assert_eq!(band_of(2_999_999, min, max), RAMP_BANDS);
        assert_eq!(band_of(3_000_000, min, max), BANDS - 1);
        for b in 0..BANDS {
            let (lo, hi) = band_range(b, min, max);
            assert_eq!(band_of(lo, min, max), b);
            if hi != u64::MAX {
                assert_eq!(band_of(hi - 1, min, max), b);
                assert_eq!(band_of(hi, min, max), b + 1);
            }
        }
    }
}
