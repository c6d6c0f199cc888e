//! Egress shaper: paces a port at its line rate, counting what a frame really occupies on the
//! wire (IEEE 802.3 clause 4/35: preamble + SFD 8 bytes, inter-frame gap 12 bytes, FCS 4 bytes,
//! frames padded to the 60-byte minimum before the FCS).
//!
//! A virtual clock: `next` is when the link becomes free. A frame may start when `next ≤ now`;
//! sending it moves `next` to `max(next, now − burst) + serialisation time`. After an idle
//! period at most `burst` worth of frames go back to back (the token-bucket depth), after that
//! frames depart exactly one serialisation time apart, so queues build when ingress exceeds the
//! line rate. Time is injected (`now` in nanoseconds on any monotonic clock): no sleeps in tests.
//! Serialisation times are exact in integer arithmetic (remainders carried), so there is no drift.

pub use rocefab_wire::ethernet::{wire_bytes, FCS, IFG, PREAMBLE_SFD, WIRE_OVERHEAD};
/// Minimum frame length without FCS (shorter frames are padded).
pub const MIN_FRAME: u64 = rocefab_contracts::config::MIN_FRAME_BYTES;
const _: () = assert!(MIN_FRAME == rocefab_wire::ethernet::MIN_FRAME_LEN as u64);
/// Default bucket depth: three maximum-size (1500-byte MTU) frames on the wire, so four such
/// frames may leave back to back after an idle period.
pub const DEFAULT_BURST_BYTES: u64 = 3 * (1514 + WIRE_OVERHEAD);

/// Pacing state of one egress port.
#[derive(Debug, Clone)]
pub struct Shaper {
    rate_bps: u64,
    /// Time the link is free again (ns).
    next: u64,
    /// Sub-nanosecond remainder of `next`, in units of 1/rate_bps ns.
    rem: u64,
    burst_ns: u64,
}

impl Shaper {
    /// A shaper at `rate_bps` (> 0) allowing bursts of `burst_bytes` on the wire.
    pub fn new(rate_bps: u64, burst_bytes: u64) -> Self {
        assert!(rate_bps > 0, "line rate must be positive");
        let burst_ns = ((burst_bytes as u128 * 8 * 1_000_000_000) / rate_bps as u128) as u64;
        Shaper { rate_bps, next: 0, rem: 0, burst_ns }
    }

    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// `Ok(())` when a frame may start at `now`, else `Err(t)`: the earliest start time.
    #[inline]
    pub fn poll(&self, now: u64) -> Result<(), u64> {
        if self.next <= now {
            Ok(())
        } else {
            Err(self.next)
        }
    }

    /// Earliest time the next frame may start.
    #[inline]
    pub fn next_departure(&self) -> u64 {
        self.next
    }

    /// When the next frame leaves in the schedule, for a capture's stamp: the time the shaper
    /// let it go (`next`), but not before `not_before` (the pass that sends it, or the departure
    /// a shaped port was waiting for: a late wake-up does not move the schedule).
    #[inline]
    pub fn departure(&self, not_before: u64) -> u64 {
        self.next.max(not_before)
    }

    /// Accounts a frame of `frame_len` bytes that starts at `now` (call after `poll` said Ok).
    #[inline]
    pub fn sent(&mut self, now: u64, frame_len: u32) {
        let floor = now.saturating_sub(self.burst_ns);
        if self.next < floor {
            self.next = floor;
            self.rem = 0;
        }
        self.advance(frame_len);
    }

    /// Accounts a frame of `frame_len` bytes that starts at `start` on a link whose frames are
    /// timed exactly (every switch port's queued frames): no burst credit, the next
    /// frame starts no earlier than this one's end. `start` is [`Shaper::departure`] of the
    /// frame's arrival, so an idle link sends a frame when it arrived, not when the data-plane
    /// thread got to it.
    #[inline]
    pub fn sent_at(&mut self, start: u64, frame_len: u32) {
        if self.next < start {
            self.next = start;
            self.rem = 0;
        }
        self.advance(frame_len);
    }

    /// Moves the schedule on by one frame's serialisation time.
    #[inline]
    fn advance(&mut self, frame_len: u32) {
        // ns = bits * 1e9 / rate, remainder carried in units of 1/rate ns. Any real frame and
        // rate fit in 64 bits (a 9 KB frame is 7.4e13 bit·ns, rem < rate); the u128 path (a
        // library call) is only the fallback for absurd values.
        let bits_ns = wire_bytes(frame_len).checked_mul(8 * 1_000_000_000).and_then(|b| b.checked_add(self.rem));
        match bits_ns {
            Some(num) => {
                self.next += num / self.rate_bps;
                self.rem = num % self.rate_bps;
            }
            None => {
                let num = wire_bytes(frame_len) as u128 * 8 * 1_000_000_000 + self.rem as u128;
                let rate = self.rate_bps as u128;
                self.next += (num / rate) as u64;
                self.rem = (num % rate) as u64;
            }
        }
    }

    /// Serialisation time of a frame in nanoseconds (rounded down).
    pub fn frame_time_ns(&self, frame_len: u32) -> u64 {
        ((wire_bytes(frame_len) as u128 * 8 * 1_000_000_000) / self.rate_bps as u128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::{PortQueues, PortStatsRef};
    use crate::stats::SwitchStats;
    use std::sync::Arc;

    const GBPS: u64 = 1_000_000_000;

    #[test]
    fn timed_frames_start_at_arrival_or_when_the_previous_one_ends() {
        let mut s = Shaper::new(GBPS, DEFAULT_BURST_BYTES);
        let ft = s.frame_time_ns(1514); // 1538 wire bytes: 12,304 ns at 1 Gb/s
        assert_eq!(ft, 12_304);
        // An idle link: the frame leaves when it arrived (here before the pass that sends it).
        assert_eq!(s.departure(5_000_000), 5_000_000);
        s.sent_at(5_000_000, 1514);
        // The next one, arrived meanwhile, waits for the first to end: no burst credit.
        assert_eq!(s.departure(5_000_100), 5_000_000 + ft);
        s.sent_at(5_000_000 + ft, 1514);
        assert_eq!(s.poll(5_000_000 + 2 * ft - 1), Err(5_000_000 + 2 * ft));
        // After an idle stretch no credit built up either: one frame at arrival, then spaced.
        s.sent_at(9_000_000, 1514);
        assert_eq!(s.departure(9_000_000), 9_000_000 + ft);
    }

    #[test]
    fn wire_overhead() {
        assert_eq!(wire_bytes(1514), 1538);
        assert_eq!(wire_bytes(42), 84, "short frames are padded to 60 + 24");
        assert_eq!(wire_bytes(60), 84);
        assert_eq!(Shaper::new(GBPS, 0).frame_time_ns(1500), 12_192);
        assert_eq!(Shaper::new(GBPS, 0).frame_time_ns(60), 672);
    }

    /// Runs `n` back-to-back frames queued at `start` through the shaper, jumping the clock to
    /// each departure the shaper asks for, and returns the departure times.
    fn departures(s: &mut Shaper, start: u64, n: usize, len: u32) -> Vec<u64> {
        let mut now = start;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match s.poll(now) {
                Ok(()) => {
                    s.sent(now, len);
                    out.push(now);
                }
                Err(t) => {
                    assert!(t > now, "poll must name a future time");
                    now = t;
                }
            }
        }
        out
    }

    #[test]
    fn thousand_full_frames_at_one_gigabit() {
        let mut s = Shaper::new(GBPS, DEFAULT_BURST_BYTES);
        let start = 1_000_000_000; // arbitrary clock origin, after a long idle period
        let t = departures(&mut s, start, 1000, 1500);
        let ft = 12_192u64; // (1500 + 24) * 8 ns
        let burst_frames = DEFAULT_BURST_BYTES * 8 / ft; // whole frames of credit
        for (i, &ti) in t.iter().enumerate() {
            let ideal = start + (i as u64).saturating_sub(burst_frames) * ft;
            assert!(ti.abs_diff(ideal) <= ft, "frame {i} left at {ti}, ideal {ideal}");
        }
        // Steady state is exactly one serialisation time apart.
        for w in t[10..].windows(2) {
            assert_eq!(w[1] - w[0], ft);
        }
        // The long-run rate is the line rate: 1000 frames take 1000 frame times minus the burst.
        let span = t[999] - t[0];
        assert!(span.abs_diff((999 - burst_frames) * ft) <= ft, "span {span}");
    }

    #[test]
    fn departures_follow_the_schedule_not_a_late_wake_up() {
        // As the data path stamps sent frames for a capture: a backlog at 1 Gbit/s; the thread
        // wakes exactly when the shaper asks for a while, then 40 µs late and sends every frame
        // whose time has come in one batch. The stamps are the schedule's, one frame time
        // apart; with the old rule (the pass's clock) the batch would share one stamp.
        use rocefab_wire::ethernet::{serialisation_ns, LineStamp};
        let mut s = Shaper::new(GBPS, DEFAULT_BURST_BYTES);
        let mut line = LineStamp::default();
        let ft = serialisation_ns(1500, GBPS);
        let mut now = 1_000_000;
        let mut not_before = now;
        let mut stamps = Vec::new();
        let mut batches = Vec::new();
        for wake in 0..20 {
            let mut batch = 0;
            while s.poll(now).is_ok() {
                stamps.push(line.stamp(s.departure(not_before), ft));
                s.sent(now, 1500);
                batch += 1;
            }
            batches.push(batch);
            let due = s.poll(now).unwrap_err();
            now = if wake == 12 { due + 40_000 } else { due };
            not_before = due.min(now);
        }
        // The idle link's burst (4 frames), then one frame per wake-up, then the late wake-up's
        // batch of 4.
        assert_eq!(batches[0], 4, "{batches:?}");
        assert_eq!(batches[13], 4, "{batches:?}");
        assert!(
            stamps.windows(2).all(|w| w[1] - w[0] == ft),
            "{:?}",
            stamps.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
        );
    }

    #[test]
    fn no_drift_with_fractional_frame_times() {
        // 3 Gbit/s: a 1514-byte frame is 1538*8/3 = 4101.33.. ns.
        let mut s = Shaper::new(3 * GBPS, 0);
        let t = departures(&mut s, 0, 3001, 1514);
        assert_eq!(t[3000] - t[0], 1538 * 8 * 1000, "3000 frames take exactly 12.304 ms");
    }

    #[test]
    fn wide_arithmetic_fallback_matches_exact_time() {
        // A u32::MAX-byte "frame" overflows the 64-bit fast path; alternate it with ordinary
        // frames and check the departure against exact 128-bit arithmetic.
        let rate = 3_000_000_007u64;
        let mut s = Shaper::new(rate, 0);
        let lens = [u32::MAX, 1514, 60, u32::MAX, 999];
        let mut bits = 0u128;
        for &l in &lens {
            let now = s.next_departure();
            s.sent(now, l);
            bits += wire_bytes(l) as u128 * 8;
            assert_eq!(s.next_departure() as u128, bits * 1_000_000_000 / rate as u128, "after a {l}-byte frame");
        }
    }

    #[test]
    fn idle_link_allows_only_the_burst() {
        let mut s = Shaper::new(GBPS, DEFAULT_BURST_BYTES);
        let now = 5_000_000;
        let mut sent = 0;
        while s.poll(now).is_ok() {
            s.sent(now, 1514);
            sent += 1;
            assert!(sent < 100, "shaper never stops");
        }
        assert_eq!(sent, 4, "3 frames of credit plus the one that starts now");
        assert_eq!(s.poll(now), Err(s.next_departure()));
        // Long idle restores the credit but never more than the burst.
        let later = now + 1_000_000_000;
        let mut sent = 0;
        while s.poll(later).is_ok() {
            s.sent(later, 1514);
            sent += 1;
        }
        assert_eq!(sent, 4);
    }

    #[test]
    fn ingress_at_twice_line_rate_builds_the_queue() {
        // Ingress: one 1500-byte frame every 6096 ns (2 Gbit/s); egress shaped at 1 Gbit/s.
        let stats = Arc::new(SwitchStats::new(1));
        let mut q: PortQueues<u32> = PortQueues::new(4096, 1 << 30, PortStatsRef::new(stats.clone(), 0));
        let mut s = Shaper::new(GBPS, DEFAULT_BURST_BYTES);
        let gap = 6_096u64;
        let n = 2000u32;
        let mut sent = 0u32;
        let mut max_depth = 0u64;
        for i in 0..n {
            let now = 1_000_000 + i as u64 * gap;
            q.enqueue(3, i, 1500).unwrap();
            while let (Ok(()), Some(len)) = (s.poll(now), q.head_len(3)) {
                q.dequeue(3);
                s.sent(now, len);
                sent += 1;
            }
            max_depth = max_depth.max(stats.ports[0].queues[3].depth_bytes.get());
        }
        // About half the frames left; the rest are queued (± the burst).
        assert!((sent as i64 - (n / 2) as i64).abs() <= 5, "sent {sent}");
        let depth = stats.ports[0].queues[3].depth_packets.get();
        assert_eq!(depth, (n - sent) as u64);
        assert!(max_depth >= 990 * 1500, "queue should build to ~1000 frames, max {max_depth}");
    }

    #[test]
    fn egress_below_line_rate_keeps_queue_empty() {
        let mut s = Shaper::new(GBPS, DEFAULT_BURST_BYTES);
        // 0.5 Gbit/s offered: every frame finds the link free.
        for i in 0..1000u64 {
            let now = i * 24_384;
            assert_eq!(s.poll(now), Ok(()), "frame {i}");
            s.sent(now, 1500);
        }
    }
}
