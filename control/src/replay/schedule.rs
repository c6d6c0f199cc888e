//! When each frame is due: the capture's timestamps relative to the first injected frame
//! (divided by `--speed`), `--pps` evenly spaced, or `--topspeed` all at 0; `--loop N` repeats
//! one loop's offsets with the capture's mean gap between loops. The schedule is in emulated
//! time; [`Schedule::dilated`] puts it on the wall clock of a fabric at time dilation D.

use std::time::Duration;

use rocefab_contracts::time::Dilation;

use super::args::ReplayArgs;

/// How to time the frames.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// The capture's timing, divided by a factor (1 = as captured).
    Speed(f64),
    /// Evenly spaced at N frames per second.
    Pps(u64),
    /// As fast as possible.
    Topspeed,
}

impl Pace {
    /// `--speed` / `--pps` / `--topspeed` (conflicts are clap's business).
    pub fn from_args(a: &ReplayArgs) -> Pace {
        match (a.topspeed, a.pps, a.speed) {
            (true, _, _) => Pace::Topspeed,
            (_, Some(n), _) => Pace::Pps(n),
            (_, _, s) => Pace::Speed(s.unwrap_or(1.0)),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Pace::Speed(s) if *s == 1.0 => "original timing".into(),
            Pace::Speed(s) => format!("original timing x{s}"),
            Pace::Pps(n) => format!("{n} frames/s"),
            Pace::Topspeed => "top speed".into(),
        }
    }
}

/// When each frame is due, in nanoseconds from the start: one loop's offsets, repeated
/// `loops` times every `period_ns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Offsets of one loop's frames (non-decreasing).
    pub offsets_ns: Vec<u64>,
    /// Start of loop k = k × period: the loop's span plus its mean gap.
    pub period_ns: u64,
    pub loops: u32,
}

impl Schedule {
    /// The schedule of frames captured at `timestamps` (the first frame is due at 0; a
    /// timestamp earlier than its predecessor's counts as equal).
    pub fn new(timestamps: &[Duration], pace: Pace, loops: u32) -> Schedule {
        let t0 = timestamps.first().copied().unwrap_or_default();
        let mut offsets_ns: Vec<u64> = Vec::with_capacity(timestamps.len());
        let mut prev = 0u64;
        for (i, ts) in timestamps.iter().enumerate() {
            let captured = u64::try_from(ts.saturating_sub(t0).as_nanos()).unwrap_or(u64::MAX);
            let t = match pace {
                Pace::Speed(s) => (captured as f64 / s).round().min(u64::MAX as f64) as u64,
                Pace::Pps(n) => ((i as u128 * 1_000_000_000) / u128::from(n.max(1))) as u64,
                Pace::Topspeed => 0,
            };
            prev = prev.max(t);
            offsets_ns.push(prev);
        }
        let span = offsets_ns.last().copied().unwrap_or(0);
        let mean_gap = match (pace, offsets_ns.len()) {
            (Pace::Pps(n), _) => 1_000_000_000 / n.max(1),
            (_, n) if n > 1 => span / (n as u64 - 1),
            _ => 0,
        };
        Schedule { offsets_ns, period_ns: span.saturating_add(mean_gap), loops: loops.max(1) }
    }

    /// Frames to send over all loops.
    pub fn len(&self) -> u64 {
        self.offsets_ns.len() as u64 * u64::from(self.loops)
    }

    pub fn is_empty(&self) -> bool {
        self.offsets_ns.is_empty()
    }

    /// Index (into one loop's frames) of send number `k`.
    pub fn frame(&self, k: u64) -> usize {
        (k % self.offsets_ns.len() as u64) as usize
    }

    /// Due time of send number `k`, ns from the start.
    pub fn at(&self, k: u64) -> u64 {
        let n = self.offsets_ns.len() as u64;
        (k / n).saturating_mul(self.period_ns).saturating_add(self.offsets_ns[(k % n) as usize])
    }

    /// The same schedule on the wall clock of a fabric at time dilation `d`: every due time
    /// and the loop period multiplied by D.
    pub fn dilated(&self, d: Dilation) -> Schedule {
        Schedule {
            offsets_ns: self.offsets_ns.iter().map(|&t| d.duration(t)).collect(),
            period_ns: d.duration(self.period_ns),
            loops: self.loops,
        }
    }

    /// Due time of the last send: the schedule's length.
    pub fn duration_ns(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.at(self.len() - 1)
        }
    }
}
