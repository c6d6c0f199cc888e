//! Emulated time (docs/src/emulated-time.md; Gupta et al., "To Infinity and Beyond:
//! Time-Warped Network Emulation", NSDI 2006).
//!
//! A topology states link rates, thresholds and timers as on the real fabric (400G links, µs
//! timers) plus one time-dilation factor D ≥ 1. Bytes never scale. Where a rate meets the wall
//! clock it is divided by D, where a duration meets it it is multiplied by D; every report
//! converts back. A fabric at D therefore moves bytes D times slower than the one it models and
//! shows the same dynamics D times stretched.
//!
//! [`Dilation`] is that conversion, in one place for the switch daemon, the host emulator and
//! the controller. D = 1 is exact (integers pass through untouched); otherwise conversions
//! round to the nearest integer, saturating at `u64::MAX`.
//!
//! [`MonoClock`] is the data path's clock (CLOCK_MONOTONIC, as the XDP programs'
//! `bpf_ktime_get_ns`), the clock of capture stamps and of the switch model's statistics.
use core::fmt;

/// A time-dilation factor D: finite, ≥ 1 (fractional allowed).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Dilation(f64);

/// A time-dilation factor that cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum DilationError {
    #[error("{0} is not a finite number")]
    NotFinite(f64),
    #[error("{0} is below 1: time dilation slows the fabric down (D ≥ 1; 1 = real time)")]
    BelowOne(f64),
}

impl Default for Dilation {
    fn default() -> Self {
        Dilation::REAL_TIME
    }
}

impl fmt::Display for Dilation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

fn round_u64(x: f64) -> u64 {
    // `as` saturates (and maps NaN to 0); D is finite and ≥ 1 so NaN cannot arise here.
    x.round() as u64
}

impl Dilation {
    /// D = 1: emulated time is wall time.
    pub const REAL_TIME: Dilation = Dilation(1.0);

    /// Checks `d`: finite and ≥ 1.
    pub fn new(d: f64) -> Result<Dilation, DilationError> {
        if !d.is_finite() {
            return Err(DilationError::NotFinite(d));
        }
        if d < 1.0 {
            return Err(DilationError::BelowOne(d));
        }
        Ok(Dilation(d))
    }

    /// The factor D.
    pub fn factor(self) -> f64 {
        self.0
    }

    /// D = 1.
    pub fn is_real_time(self) -> bool {
        self.0 == 1.0
    }

    /// The wall-clock rate of an emulated rate (bits/s or anything per second): `bps / D`,
    /// at least 1 (a shaper or pacer needs a positive rate).
    pub fn rate(self, emulated_bps: u64) -> u64 {
        if self.is_real_time() {
            return emulated_bps;
        }
        round_u64(emulated_bps as f64 / self.0).max(1)
    }

    /// The wall-clock length of an emulated duration (any unit: ns, µs, ms): `t × D`.
    pub fn duration(self, emulated: u64) -> u64 {
        if self.is_real_time() {
            return emulated;
        }
        round_u64(emulated as f64 * self.0)
    }

    /// The emulated length of a wall-clock duration (any unit): `t / D`.
    pub fn to_emulated(self, wall: u64) -> u64 {
        if self.is_real_time() {
            return wall;
        }
        round_u64(wall as f64 / self.0)
    }

    /// The emulated length of a wall-clock duration in ns.
    pub fn to_emulated_ns(self, wall_ns: u64) -> u64 {
        self.to_emulated(wall_ns)
    }

    /// The emulated length of a wall-clock duration in (fractional) seconds.
    pub fn to_emulated_secs(self, wall_s: f64) -> f64 {
        wall_s / self.0
    }

    /// The emulated rate of a measured wall-clock rate: `bps × D`.
    pub fn to_emulated_bps(self, wall_bps: f64) -> f64 {
        wall_bps * self.0
    }

    /// The emulated rate of a wall-clock integer rate: `bps × D`, saturating.
    pub fn to_emulated_rate(self, wall_bps: u64) -> u64 {
        self.duration(wall_bps)
    }
}

/// CLOCK_MONOTONIC in ns (the clock of `bpf_ktime_get_ns` and of [`std::time::Instant`]).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the live local; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_REALTIME in ns since the Unix epoch.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as in `monotonic_ns`.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A data-path clock on CLOCK_MONOTONIC: ns since its origin, so that the XDP program's
/// `bpf_ktime_get_ns` (also CLOCK_MONOTONIC) converts exactly ([`MonoClock::from_ktime`]).
#[derive(Debug, Clone, Copy)]
pub struct MonoClock {
    origin: u64,
}

impl MonoClock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        MonoClock { origin: monotonic_ns() }
    }
    /// A clock whose zero is CLOCK_MONOTONIC `origin_ns` (tests inject it).
    pub const fn with_origin(origin_ns: u64) -> Self {
        MonoClock { origin: origin_ns }
    }
    /// ns since the origin.
    #[inline]
    pub fn now(&self) -> u64 {
        monotonic_ns().saturating_sub(self.origin)
    }
    /// A CLOCK_MONOTONIC reading (`bpf_ktime_get_ns`) on this clock.
    #[inline]
    pub fn from_ktime(&self, ktime_ns: u64) -> u64 {
        ktime_ns.saturating_sub(self.origin)
    }
    /// Unix time (ns) of this clock's zero: one offset between CLOCK_REALTIME and
    /// CLOCK_MONOTONIC, measured now (the pair of readings closest together of a few tries).
    pub fn unix_offset_ns(&self) -> u64 {
        let mut best = (u64::MAX, 0u64);
        for _ in 0..5 {
            let a = monotonic_ns();
            let r = realtime_ns();
            let b = monotonic_ns();
            if b - a < best.0 {
                best = (b - a, r.wrapping_sub(a + (b - a) / 2));
            }
        }
        // realtime − monotonic, plus the origin: Unix time of this clock's zero.
        best.1.wrapping_add(self.origin)
    }
}

impl Default for MonoClock {
    fn default() -> Self {
        MonoClock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ktime_converts_with_one_offset() {
        let c = MonoClock::new();
        let k = monotonic_ns();
        let now = c.now();
        assert!(c.from_ktime(k) <= now && now - c.from_ktime(k) < 1_000_000_000);
        // Unix time of the clock's zero: the wall clock now minus the clock's reading.
        let off = c.unix_offset_ns();
        let wall = realtime_ns();
        let est = off + c.now();
        assert!(est.abs_diff(wall) < 50_000_000, "offset {off}: {est} vs wall {wall}");
    }

    #[test]
    fn real_time_is_exact() {
        let d = Dilation::default();
        assert!(d.is_real_time());
        for v in [0, 1, 999, u64::MAX - 1, u64::MAX] {
            assert_eq!(d.rate(v), v);
            assert_eq!(d.duration(v), v);
            assert_eq!(d.to_emulated_ns(v), v);
            assert_eq!(d.to_emulated_rate(v), v);
        }
    }

    #[test]
    fn rates_divide_and_durations_multiply() {
        let d = Dilation::new(8000.0).unwrap();
        // 400G emulated runs at 50 Mbit/s on the wall clock; 800G at 100 Mbit/s.
        assert_eq!(d.rate(400_000_000_000), 50_000_000);
        assert_eq!(d.rate(800_000_000_000), 100_000_000);
        // The DCQCN NP's 50 µs CNP interval lasts 400 ms on the wall clock.
        assert_eq!(d.duration(50_000), 400_000_000);
        // And back.
        assert_eq!(d.to_emulated_ns(400_000_000), 50_000);
        assert_eq!(d.to_emulated_rate(50_000_000), 400_000_000_000);
        assert_eq!(d.to_emulated_bps(50e6), 400e9);
        assert_eq!(d.to_emulated_secs(8.0), 1e-3);
        // A rate never reaches 0; durations saturate.
        assert_eq!(d.rate(1), 1);
        assert_eq!(d.duration(u64::MAX), u64::MAX);
    }

    #[test]
    fn fractional_factors_round_to_nearest() {
        let d = Dilation::new(2.5).unwrap();
        assert_eq!(d.rate(1_000_000_000), 400_000_000);
        assert_eq!(d.duration(3), 8); // 7.5 rounds up
        assert_eq!(d.to_emulated(7), 3); // 2.8
        for ns in [1u64, 17, 1_000, 83_886, 123_456_789] {
            let back = d.to_emulated_ns(d.duration(ns));
            assert!(back.abs_diff(ns) <= 1, "{ns} -> {back}");
        }
    }

    #[test]
    fn bad_factors_are_refused() {
        assert_eq!(Dilation::new(0.5), Err(DilationError::BelowOne(0.5)));
        assert_eq!(Dilation::new(0.0), Err(DilationError::BelowOne(0.0)));
        assert_eq!(Dilation::new(-3.0), Err(DilationError::BelowOne(-3.0)));
        assert!(matches!(Dilation::new(f64::NAN), Err(DilationError::NotFinite(_))));
        assert!(matches!(Dilation::new(f64::INFINITY), Err(DilationError::NotFinite(_))));
        assert!(Dilation::new(1.0).unwrap().is_real_time());
        assert!(Dilation::new(0.5).unwrap_err().to_string().contains("below 1"));
    }
}
