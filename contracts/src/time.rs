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

#[cfg(test)]
mod tests {
    use super::*;

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
