//! The egress queue depths the data path publishes for the XDP program's WRED/ECN decision
//! (docs/src/wred-ecn-dcqcn.md): one `u64` slot per egress queue (port, tc), index
//! [`dataplane_common::depth_index`], stored every time the buffer's charge of that queue
//! changes, so the value XDP reads is never older than the frames that passed XDP but are not
//! enqueued yet. The slots are the `DEPTHS` map's value area, mapped shared by the switch
//! daemon (`crate::depths::DepthsMap`), or plain memory ([`DepthBoard::heap`]) for
//! tests and a data path without the XDP program. The switch counts, per depth band found at
//! enqueue ([`band_of`]), how many ECT packets arrived and how many XDP marked
//! (`rocefab_wred_band_*`), which shows whether that lag bends the marking curve.
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use dataplane_common::{depth_index, limits::NUM_TC, DEPTHS_LEN};

/// What keeps the slots alive.
enum Backing {
    /// A mapping owned elsewhere, released when this owner drops.
    Mapped(#[allow(dead_code)] Box<dyn Send>),
    /// Plain memory.
    Heap(#[allow(dead_code)] Box<[AtomicU64]>),
}

/// Where the data-plane thread stores queue depths. Single writer (the data-plane thread);
/// stores are relaxed atomics, one per buffer charge change.
pub struct DepthBoard {
    slots: NonNull<AtomicU64>,
    backing: Backing,
}

// SAFETY: the slots are atomics in memory the board owns (heap) or keeps mapped (its owner,
// which is Send, lives as long as the board).
unsafe impl Send for DepthBoard {}

impl DepthBoard {
    /// A board over [`DEPTHS_LEN`] slots at `slots`, kept valid by `owner` (which unmaps them
    /// when dropped).
    ///
    /// # Safety
    /// `slots` points at `DEPTHS_LEN` `u64`s, aligned, readable and writable, that nothing in
    /// this process accesses except through this board, and that stay valid until `owner` is
    /// dropped.
    pub unsafe fn mapped(slots: NonNull<AtomicU64>, owner: Box<dyn Send>) -> DepthBoard {
        DepthBoard { slots, backing: Backing::Mapped(owner) }
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

impl std::fmt::Debug for DepthBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.backing {
            Backing::Mapped(_) => "DepthBoard(mapped)",
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
