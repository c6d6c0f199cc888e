//! 24-bit Packet Sequence Numbers (InfiniBand Architecture Specification Vol. 1, §9.7.1
//! "Packet sequence numbers"; RoCEv2 carries the same BTH.PSN field).
//!
//! A PSN is a 24-bit counter that wraps from `0xFF_FFFF` to `0`. Ordering is only defined
//! inside a window: the IBTA rules treat a PSN as "ahead" of another when it lies within
//! 2^23 forward of it (half the sequence space), and "behind" otherwise. This module gives
//! that ordering as [`Psn::diff`] (signed distance), [`Psn::is_after`] and [`Psn::is_before`];
//! `Psn` deliberately does not implement `Ord`, because the relation is not transitive
//! across the whole space.

use core::fmt;

pub use rocefab_contracts::rdma::{PSN_BITS, PSN_HALF, PSN_MASK};

/// A 24-bit packet sequence number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Zero.
    pub const ZERO: Psn = Psn(0);
    /// Largest PSN (`0xFF_FFFF`).
    pub const MAX: Psn = Psn(PSN_MASK);

    /// Builds a PSN from the low 24 bits of `v` (the upper 8 bits are discarded,
    /// as the BTH field is 24 bits wide).
    pub const fn new(v: u32) -> Psn {
        Psn(v & PSN_MASK)
    }

    /// Builds a PSN, rejecting values that do not fit in 24 bits.
    pub const fn try_new(v: u32) -> Option<Psn> {
        if v > PSN_MASK {
            None
        } else {
            Some(Psn(v))
        }
    }

    /// The raw 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    #[must_use]
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & PSN_MASK)
    }

    /// `self - n` modulo 2^24.
    #[must_use]
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & PSN_MASK)
    }

    /// The next PSN (`self + 1`, wrapping).
    #[must_use]
    pub const fn next(self) -> Psn {
        self.add(1)
    }

    /// Forward distance from `self` to `later`, in `0..2^24`: how many increments take
    /// `self` to `later`.
    pub const fn forward_distance(self, later: Psn) -> u32 {
        later.0.wrapping_sub(self.0) & PSN_MASK
    }

    /// Signed distance `self - other` in `-2^23 ..= 2^23 - 1`: positive when `self` is
    /// ahead of `other` (within 2^23 forward), negative when behind.
    pub const fn diff(self, other: Psn) -> i32 {
        let d = self.0.wrapping_sub(other.0) & PSN_MASK;
        // Sign-extend the 24-bit difference.
        ((d << (32 - PSN_BITS)) as i32) >> (32 - PSN_BITS)
    }

    /// `self` is strictly ahead of `other` (within 2^23 forward).
    pub const fn is_after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// `self` is strictly behind `other`.
    pub const fn is_before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// `self` lies in the half-open window `[start, start + len)` (modulo 2^24).
    pub const fn in_window(self, start: Psn, len: u32) -> bool {
        start.forward_distance(self) < len
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({:#08x})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

impl From<Psn> for u32 {
    fn from(p: Psn) -> u32 {
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_from_max_to_zero() {
        assert_eq!(Psn::MAX.next(), Psn::ZERO);
        assert_eq!(Psn::new(0xFF_FFFE).add(5), Psn::new(3));
        assert_eq!(Psn::ZERO.sub(1), Psn::MAX);
        assert_eq!(Psn::new(0x0100_0005), Psn::new(5), "upper bits are discarded");
        assert_eq!(Psn::try_new(0x100_0000), None);
        assert_eq!(Psn::try_new(0xFF_FFFF), Some(Psn::MAX));
    }

    #[test]
    fn ordering_across_wrap() {
        let a = Psn::new(0xFF_FFF0);
        let b = Psn::new(0x00_0010);
        assert_eq!(a.forward_distance(b), 0x20);
        assert_eq!(b.diff(a), 0x20);
        assert_eq!(a.diff(b), -0x20);
        assert!(b.is_after(a));
        assert!(a.is_before(b));
        assert!(!a.is_after(a) && !a.is_before(a));
        assert!(b.in_window(a, 0x21));
        assert!(!b.in_window(a, 0x20));
    }

    #[test]
    fn half_space_boundary() {
        let z = Psn::ZERO;
        // 2^23 - 1 forward is ahead; exactly 2^23 forward counts as behind (sign bit set).
        assert!(Psn::new(PSN_HALF - 1).is_after(z));
        assert_eq!(Psn::new(PSN_HALF - 1).diff(z), (PSN_HALF - 1) as i32);
        assert!(Psn::new(PSN_HALF).is_before(z));
        assert_eq!(Psn::new(PSN_HALF).diff(z), -(PSN_HALF as i32));
        assert!(Psn::new(PSN_HALF + 1).is_before(z));
    }

    proptest! {
        #[test]
        fn add_then_diff_roundtrips(start in 0u32..=PSN_MASK, n in 0u32..PSN_HALF) {
            let a = Psn::new(start);
            let b = a.add(n);
            prop_assert_eq!(b.diff(a), n as i32);
            prop_assert_eq!(a.diff(b), -(n as i32));
            prop_assert_eq!(a.forward_distance(b), n);
            prop_assert_eq!(b.sub(n), a);
            prop_assert_eq!(n > 0, b.is_after(a));
            prop_assert_eq!(n > 0, a.is_before(b));
        }

        #[test]
        fn diff_is_antisymmetric(x in 0u32..=PSN_MASK, y in 0u32..=PSN_MASK) {
            let (a, b) = (Psn::new(x), Psn::new(y));
            let d = a.diff(b);
            prop_assert!((-(PSN_HALF as i32)..=(PSN_HALF as i32 - 1)).contains(&d));
            if d != -(PSN_HALF as i32) {
                prop_assert_eq!(b.diff(a), -d);
            }
            prop_assert_eq!(b.add(d as u32 & PSN_MASK), a);
            prop_assert!(a.value() <= PSN_MASK);
        }

        #[test]
        fn add_composes(x in 0u32..=PSN_MASK, m in any::<u32>(), n in any::<u32>()) {
            let a = Psn::new(x);
            prop_assert_eq!(a.add(m).add(n), a.add(m.wrapping_add(n)));
        }
    }
}
