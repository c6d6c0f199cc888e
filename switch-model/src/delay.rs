//! Delay lines: the cable and the pipelines between two ports, in emulated time (README
//! "Emulated time", DESIGN "Latency").
//!
//! A frame that leaves a port spends the link's propagation delay on the cable (plus the
//! switch's forwarding latency and, toward a NIC, the NIC's pipeline) before the peer sees it.
//! The data path models that with one departure-time queue per port and direction: a frame
//! enters the line with the time it is due and leaves it at that time. It is due when its last
//! bit reaches the peer: its first bit left at its departure in the shaper's schedule (or when
//! the XDP program saw the NIC's frame), not before the previous frame's last bit, and arrives
//! the delay later (on the wall clock, i.e. the emulated delay × D); its last bit one
//! serialisation time after that. The peer, switch or NIC, acts on a whole frame (store and
//! forward, as htsim and ns-3 model it). Due times are in entry order, so a FIFO is the whole
//! timer wheel: ordering per link is kept by construction, and nothing sleeps per frame (the
//! data-plane thread wakes at the head's due time).
//!
//! Every frame on a line holds its UMEM frame (it is on the cable, not in the switch's buffer:
//! it carries no buffer charge). A line holds at most what the link can carry during its delay,
//! counted at the smallest frame ([`DelayLine::capacity_for`]); the switch's UMEM has that
//! many frames more per line. A full egress line makes the scheduler wait (the frame stays
//! queued, as behind a busy serialiser); a full ingress line leaves frames in the kernel's RX
//! ring until the line drains.
use crate::queue::Fifo;

/// Bytes a minimum-size frame occupies on the wire: 64 bytes with FCS, preamble and SFD 8,
/// inter-frame gap 12 (IEEE 802.3 clause 4).
pub const MIN_WIRE_FRAME_BYTES: u64 = rocefab_contracts::memory::MIN_WIRE_FRAME_BYTES;

/// A frame on a delay line: its descriptor and when it is due (ns on the data-plane clock).
#[derive(Debug, Clone, Copy, Default)]
pub struct OnLine<D> {
    pub d: D,
    pub due: u64,
}

/// One direction of one port's delay.
#[derive(Debug)]
pub struct DelayLine<D> {
    delay_ns: u64,
    fifo: Fifo<OnLine<D>>,
    /// When the last frame pushed with [`DelayLine::push_serialised`] has fully arrived (its due
    /// time).
    busy_until: u64,
    /// Sub-ns remainder of the serialisation times, in units of 1/rate ns.
    rem: u64,
}

impl<D: Copy + Default> DelayLine<D> {
    /// A line of `delay_ns` (wall clock) that holds `capacity` frames.
    pub fn new(delay_ns: u64, capacity: usize) -> Self {
        DelayLine { delay_ns, fifo: Fifo::new(capacity, u64::MAX), busy_until: 0, rem: 0 }
    }

    /// Frames a line of `delay_ns` at `rate_bps` (both on the wall clock, so the product is the
    /// emulated bandwidth-delay product: D cancels) can hold at the smallest frame, plus `slack`
    /// frames for a pass's batch and the shaper's burst; 0 for no delay.
    pub fn capacity_for(rate_bps: u64, delay_ns: u64, slack: usize) -> usize {
        rocefab_contracts::memory::delay_line_capacity(rate_bps, delay_ns, slack)
    }

    /// The line's delay on the wall clock (ns); 0 means frames do not use the line.
    #[inline]
    pub fn delay_ns(&self) -> u64 {
        self.delay_ns
    }

    /// Puts a frame of `wire_bytes` (frame, FCS, preamble and gap) whose first bit entered the
    /// line at `at` on a cable of `rate_bps`: it is due when its last bit reaches the peer, one
    /// delay plus its serialisation time later (the peer, switch or NIC, acts on a frame once it
    /// has all of it: store and forward, as both packet simulators model it), and its first bit
    /// not before the previous frame's last (a cable carries no more than its line rate,
    /// whatever burst the sender's kernel handed over at once). Hands the frame back when the
    /// line is full.
    #[inline]
    pub fn push_serialised(&mut self, d: D, at: u64, wire_bytes: u32, rate_bps: u64) -> Result<(), D> {
        let first_bit = at.saturating_add(self.delay_ns).max(self.busy_until);
        let num = wire_bytes as u64 * 8 * 1_000_000_000 + self.rem;
        let (ser, rem) = match (num.checked_div(rate_bps), num.checked_rem(rate_bps)) {
            (Some(ns), Some(rem)) => (ns, rem),
            _ => (0, 0),
        };
        let due = first_bit.saturating_add(ser);
        self.fifo.push(OnLine { d, due }, 0).map_err(|(o, _)| o.d)?;
        (self.busy_until, self.rem) = (due, rem);
        Ok(())
    }

    /// When the head frame is due, if there is one.
    #[inline]
    pub fn next_due(&self) -> Option<u64> {
        self.fifo.head().map(|o| o.due)
    }

    /// Takes the head frame if it is due at `now`: the frame and its due time.
    #[inline]
    pub fn pop_due(&mut self, now: u64) -> Option<(D, u64)> {
        match self.fifo.head() {
            Some(o) if o.due <= now => self.fifo.pop().map(|(o, _)| (o.d, o.due)),
            _ => None,
        }
    }

    /// Takes the head frame whatever its due time (shutdown).
    pub fn pop_any(&mut self) -> Option<D> {
        self.fifo.pop().map(|(o, _)| o.d)
    }

    pub fn len(&self) -> usize {
        self.fifo.len()
    }
    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }
    pub fn is_full(&self) -> bool {
        self.fifo.len() == self.fifo.capacity()
    }
    /// Free slots.
    pub fn room(&self) -> usize {
        self.fifo.capacity() - self.fifo.len()
    }
    pub fn capacity(&self) -> usize {
        self.fifo.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame that takes no time on the wire (an unbounded rate): due one delay after `at`.
    fn push<D: Copy + Default>(l: &mut DelayLine<D>, d: D, at: u64) -> Result<(), D> {
        l.push_serialised(d, at, 84, u64::MAX)
    }

    #[test]
    fn capacity_is_the_bandwidth_delay_product_at_the_smallest_frame() {
        assert_eq!(DelayLine::<u32>::capacity_for(400_000_000_000, 0, 64), 0, "no delay, no line");
        // 400G x 1 us = 50,000 bytes = 596 minimum frames (595.2 rounded up), + 64 slack.
        assert_eq!(DelayLine::<u32>::capacity_for(400_000_000_000, 1_000, 64), 596 + 64);
        // At D 8000 the wall rate is / D and the wall delay x D: the same line.
        assert_eq!(DelayLine::<u32>::capacity_for(50_000_000, 8_000_000, 64), 596 + 64);
        // A tiny product still holds a frame.
        assert_eq!(DelayLine::<u32>::capacity_for(1_000, 1, 0), 1);
    }

    #[test]
    fn frames_leave_one_delay_after_they_entered_in_entry_order() {
        let mut l = DelayLine::new(1_000, 4);
        push(&mut l, 1u32, 10).unwrap();
        push(&mut l, 2, 10).unwrap();
        push(&mut l, 3, 500).unwrap();
        assert_eq!(l.next_due(), Some(1_010));
        assert_eq!(l.pop_due(1_009), None, "not before its due time");
        assert_eq!(l.pop_due(1_010), Some((1, 1_010)));
        assert_eq!(l.pop_due(5_000), Some((2, 1_010)));
        assert_eq!(l.next_due(), Some(1_500));
        assert_eq!(l.pop_due(5_000), Some((3, 1_500)));
        assert_eq!((l.pop_due(u64::MAX), l.next_due()), (None, None));
    }

    #[test]
    fn a_burst_handed_over_at_once_arrives_at_line_rate_each_frame_at_its_last_bit() {
        // 1 Gb/s: a 1538-byte wire frame takes 12,304 ns; each is due when its last bit is in.
        let mut l = DelayLine::new(1_000, 8);
        for k in 0..3u32 {
            l.push_serialised(k, 500, 1538, 1_000_000_000).unwrap();
        }
        assert_eq!(l.pop_due(u64::MAX), Some((0, 1_500 + 12_304)));
        assert_eq!(l.pop_due(u64::MAX), Some((1, 1_500 + 2 * 12_304)));
        assert_eq!(l.pop_due(u64::MAX), Some((2, 1_500 + 3 * 12_304)));
        // A frame after a gap arrives one delay and its own serialisation (672 ns) after it was
        // sent.
        l.push_serialised(3, 100_000, 84, 1_000_000_000).unwrap();
        assert_eq!(l.pop_due(u64::MAX), Some((3, 101_672)));
        // A frame sent while the previous one is still arriving starts behind it.
        l.push_serialised(4, 100_100, 84, 1_000_000_000).unwrap();
        assert_eq!(l.pop_due(u64::MAX), Some((4, 101_672 + 672)));
    }

    #[test]
    fn sub_nanosecond_serialisation_times_add_up() {
        // 400 Gb/s: an 84-byte wire frame is 1.68 ns; a thousand back to back take 1,680 ns.
        let mut l = DelayLine::new(1_000, 1_000);
        for k in 0..1_000u32 {
            l.push_serialised(k, 0, 84, 400_000_000_000).unwrap();
        }
        let mut last = 0;
        while let Some((_, due)) = l.pop_due(u64::MAX) {
            last = due;
        }
        assert_eq!(last, 1_000 + 1_680);
    }

    #[test]
    fn a_full_line_hands_the_frame_back() {
        let mut l = DelayLine::new(10, 2);
        push(&mut l, 1u32, 0).unwrap();
        push(&mut l, 2, 0).unwrap();
        assert!(l.is_full() && l.room() == 0);
        assert_eq!(push(&mut l, 3, 0), Err(3));
        assert_eq!(l.pop_any(), Some(1));
        assert_eq!(l.room(), 1);
    }
}
