//! TX stalls of an egress port: the port had frames queued that its peer did not pause, and
//! sent nothing for longer than [`STALL_FRAME_TIMES`] serialisation times of the largest frame it
//! has sent. Nothing in the model does that (the shaper lets a frame go every serialisation time
//! while the queue holds one): a stall is the machine's doing (the data-plane thread did not
//! run, or the kernel did not take the TX ring), and `rocefab run` reports it ([`crate::stats::StallLog`],
//! docs/src/emulated-time.md).
//!
//! Per port, [`StallWatch`] keeps when the port last sent or last became able to send:
//! - at each transmit step, before the scheduler: [`StallWatch::step`] with whether anything
//!   is queued and not paused (no: the clock is off; yes, and it was off: it starts now);
//! - on every frame dequeued: [`StallWatch::dequeued`] returns the stall that ended, if the
//!   time since is longer than the threshold, and restarts the clock at now;
//! - when a frame is admitted to a port with nothing queued: [`StallWatch::idle`] (an empty
//!   port is not stalled, however long since it last sent).
//!
//! Pure logic: time is passed in (ns), nothing allocates.
use crate::stats::Stall;

/// A stall is longer than this many serialisation times of the largest frame the port sent.
pub const STALL_FRAME_TIMES: u64 = 4;

/// Smallest frame the threshold counts in (bytes without FCS): a full 1500-byte-MTU frame, so
/// a port that has sent only small frames does not log every scheduling hiccup.
pub const STALL_MIN_FRAME: u32 = 1514;

/// Stall tracking of one port.
#[derive(Debug, Clone, Copy)]
pub struct StallWatch {
    /// Since when the port has had something to send and sent nothing (ns); `None` while it
    /// has nothing it may send.
    from: Option<u64>,
    /// Largest frame dequeued so far (bytes without FCS).
    largest: u32,
}

impl Default for StallWatch {
    fn default() -> Self {
        StallWatch { from: None, largest: STALL_MIN_FRAME }
    }
}

impl StallWatch {
    /// A transmit step at `now`: `sendable` when frames are queued that the peer does not pause.
    #[inline]
    pub fn step(&mut self, now: u64, sendable: bool) {
        if !sendable {
            self.from = None;
        } else if self.from.is_none() {
            self.from = Some(now);
        }
    }

    /// A frame was admitted to the port while nothing was queued on it.
    #[inline]
    pub fn idle(&mut self) {
        self.from = None;
    }

    /// A frame of `len` bytes was dequeued at `now` on a port at `rate_bps` (wall clock): the
    /// stall it ends, if the port had been able to send for longer than the threshold without
    /// sending, and the frame time the threshold counted in (ns).
    #[inline]
    pub fn dequeued(&mut self, now: u64, len: u32, rate_bps: u64) -> Option<(Stall, u64)> {
        let from = self.from.replace(now);
        self.largest = self.largest.max(len);
        let gap = now.saturating_sub(from?);
        let frame_ns = self.frame_ns(rate_bps);
        (gap > STALL_FRAME_TIMES * frame_ns).then_some((Stall { at_ns: from?, ns: gap }, frame_ns))
    }

    /// Serialisation time of the largest frame sent (at least [`STALL_MIN_FRAME`]) at `rate_bps`, ns.
    pub fn frame_ns(&self, rate_bps: u64) -> u64 {
        rocefab_wire::ethernet::serialisation_ns(self.largest, rate_bps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 Gbit/s: a 1514-byte frame (+ 24 bytes preamble, IFG, FCS) takes 12 304 ns.
    const RATE: u64 = 1_000_000_000;

    #[test]
    fn frame_time_is_the_largest_frame_on_the_wire() {
        let mut w = StallWatch::default();
        assert_eq!(w.frame_ns(RATE), 12_304);
        w.step(0, true);
        assert_eq!(w.dequeued(0, 4096 + 18, RATE), None);
        assert_eq!(w.frame_ns(RATE), (4114 + 24) * 8);
        // Smaller frames do not lower it.
        assert_eq!(w.dequeued(1, 64, RATE), None);
        assert_eq!(w.frame_ns(RATE), (4114 + 24) * 8);
    }

    #[test]
    fn frames_a_serialisation_time_apart_are_no_stall_a_long_gap_is() {
        let mut w = StallWatch::default();
        let ft = w.frame_ns(RATE);
        w.step(1_000, true);
        // Paced at line rate: one frame per frame time, for a while.
        let mut t = 1_000;
        for _ in 0..100 {
            assert_eq!(w.dequeued(t, 1514, RATE), None, "at {t}");
            w.step(t, true);
            t += ft;
        }
        // Exactly the threshold is not a stall; one ns more is, from the last departure.
        let last = t - ft;
        assert_eq!(w.dequeued(last + STALL_FRAME_TIMES * ft, 1514, RATE), None);
        let now = last + STALL_FRAME_TIMES * ft;
        let later = now + STALL_FRAME_TIMES * ft + 1;
        w.step(later - 5, true);
        assert_eq!(w.dequeued(later, 1514, RATE), Some((Stall { at_ns: now, ns: STALL_FRAME_TIMES * ft + 1 }, ft)));
    }

    #[test]
    fn paused_or_empty_time_is_no_stall() {
        let mut w = StallWatch::default();
        let ft = w.frame_ns(RATE);
        w.step(0, true);
        assert_eq!(w.dequeued(0, 1514, RATE), None);
        // The peer pauses everything queued for a long time: no stall.
        w.step(ft, false);
        w.step(100 * ft, false);
        // Resumed at 200 frame times: the clock starts there.
        w.step(200 * ft, true);
        assert_eq!(w.dequeued(201 * ft, 1514, RATE), None);
        // The port empties; a frame arrives much later: idle time is no stall.
        w.idle();
        w.step(5_000 * ft, true);
        assert_eq!(w.dequeued(5_000 * ft, 1514, RATE), None);
        // But data that waits 10 frame times from when it could first go is one.
        w.idle();
        w.step(6_000 * ft, true);
        w.step(6_005 * ft, true);
        assert_eq!(w.dequeued(6_010 * ft, 1514, RATE), Some((Stall { at_ns: 6_000 * ft, ns: 10 * ft }, ft)));
    }
}
