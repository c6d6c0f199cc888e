//! The NIC pacer: one token bucket per NIC at its (wall-clock) line rate that charges every
//! frame its wire size (frame + FCS + preamble + inter-frame gap, IEEE 802.3 clause 4), so the
//! frames leave no faster than the link could carry them. Control frames go whenever the
//! bucket allows; data waits for a burst's worth of credit ([`NicPacer::burst_ready_at`]) so
//! the data thread wakes once per burst, not once per frame.
use super::ROCE_IPV4_OVERHEAD;
use crate::segment::PathMtu;
use crate::sender::RateLimiter;

/// Bytes on the wire per frame beyond what AF_XDP carries: FCS 4 + preamble/SFD 8 + IFG 12.
pub const WIRE_OVERHEAD_BYTES: u32 = 24;
/// Frames the NIC shaper may release back to back. The data thread wakes for transmission only
/// when this many frames' worth of credit has built up (see [`super::Engine::next_deadline`]), so a
/// sender at line rate costs one wake-up and one TX kick per burst instead of one per frame;
/// the long-run rate stays the line rate. 16 frames of 1 KiB MTU are ~17 KB (~140 µs at
/// 1 Gb/s): far below a switch queue (1 MiB by default).
pub const PACER_BURST_FRAMES: u32 = 16;

/// Wire bytes of the largest data frame at `path_mtu`: payload, IPv6-sized RoCEv2 headers,
/// Ethernet header and [`WIRE_OVERHEAD_BYTES`].
fn full_frame_bytes(path_mtu: PathMtu) -> u32 {
    path_mtu.bytes() + ROCE_IPV4_OVERHEAD + 20 + 14 + WIRE_OVERHEAD_BYTES
}

/// A NIC's shaper and the credit its data thread waits for.
#[derive(Clone, Copy, Debug)]
pub(super) struct NicPacer {
    shaper: RateLimiter,
    /// Shaper credit (bytes) the data thread waits for before waking to send data.
    wake_credit: u32,
    /// Wire bytes of a full frame.
    frame: u32,
}

impl NicPacer {
    /// A full shaper at `line_rate_bps` for frames of `path_mtu` at `now`. A burst of full
    /// frames lets the daemon batch wake-ups and TX kicks without exceeding the line rate over
    /// any longer interval.
    pub(super) fn new(line_rate_bps: u64, path_mtu: PathMtu, now: u64) -> NicPacer {
        let frame = full_frame_bytes(path_mtu);
        let burst = PACER_BURST_FRAMES * frame;
        let shaper = RateLimiter::new(line_rate_bps, line_rate_bps, burst, now);
        NicPacer { shaper, wake_credit: burst - frame, frame }
    }

    /// The shaper's burst in bytes (the wake-up credit plus one frame).
    pub(super) fn burst(&self) -> u32 {
        self.wake_credit + self.frame
    }

    /// May a frame leave at `now`?
    pub(super) fn ready(&mut self, now: u64) -> bool {
        self.shaper.ready(now)
    }

    /// Earliest time ≥ `now` at which a frame may leave.
    pub(super) fn ready_at(&mut self, now: u64) -> u64 {
        self.shaper.ready_at(now)
    }

    /// Earliest time ≥ `now` at which a burst's worth of credit has built up: data waits for
    /// it (control frames do not). Charging a copy of the shaper with the credit gives that time.
    pub(super) fn burst_ready_at(&self, now: u64) -> u64 {
        let mut p = self.shaper;
        p.consume(self.wake_credit, now);
        p.ready_at(now)
    }

    /// Charges a frame of `len` bytes (as AF_XDP carries it) sent at `now` with its wire size.
    pub(super) fn charge_frame(&mut self, len: usize, now: u64) {
        self.shaper.consume(len as u32 + WIRE_OVERHEAD_BYTES, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::{AckPacket, AckSyndrome};
    use crate::nic::engine::testkit::engines;

    #[test]
    fn the_pacer_releases_a_burst_of_full_frames_then_waits_for_wire_time() {
        // 1 Gb/s, MTU 1024: a full frame is 1024 + 60 + 20 + 14 + 24 = 1142 wire bytes; the
        // burst is 16 of them. Middle frames of 1082 bytes are 1106 on the wire (8848 ns).
        let mut p = NicPacer::new(1_000_000_000, PathMtu::Mtu1024, 0);
        assert_eq!(p.burst(), 16 * 1142);
        assert_eq!(p.burst_ready_at(0), 0, "a full shaper holds a burst");
        for k in 0..17 {
            assert!(p.ready(0), "frame {k} of a burst");
            p.charge_frame(1082, 0);
        }
        // 16 × 1142 − 17 × 1106 = −530 bytes: 4240 ns at 1 Gb/s until the next frame.
        assert!(!p.ready(0));
        assert_eq!(p.ready_at(0), 4_240);
        // Data waits for 15 more full frames of credit: (530 + 15 × 1142) × 8 ns.
        assert_eq!(p.burst_ready_at(0), (530 + 15 * 1142) * 8);
        assert!(!p.ready(4_239) && p.ready(4_240));
        assert_eq!(p.burst_ready_at(4_240), (530 + 15 * 1142) * 8, "the credit builds on the wall clock");
    }

    #[test]
    fn data_wake_ups_wait_for_a_burst_of_shaper_credit_and_keep_line_rate() {
        // 1 Gb/s, MTU 1024: a Middle frame is 14 + 20 + 8 + 12 + 1024 + 4 = 1082 bytes, plus
        // 24 bytes of FCS, preamble and gap on the wire: 1106 bytes, 8848 ns.
        let (mut a, _) = engines(4_000_000, 1_000_000_000, false);
        let frame_ns = 8_848u64;
        let mut buf = vec![0u8; 9000];
        let mut now = 0;
        let mut sent = 0u64;
        let mut wakes = 0u64;
        while now < 20_000_000 {
            let mut burst = 0;
            while a.next_tx(0, &mut buf, now).is_some() {
                burst += 1;
            }
            assert!(burst <= PACER_BURST_FRAMES as u64 + 1, "burst {burst} at {now}");
            sent += burst;
            wakes += 1;
            let next = a.next_deadline(now).unwrap();
            if wakes > 2 {
                // Steady state: the next wake-up is a burst away, not one frame.
                assert!(next - now >= (PACER_BURST_FRAMES as u64 - 2) * frame_ns, "woke after {} ns", next - now);
            }
            now = next.max(now + 1);
            // The window (32 packets) would close: ACK everything sent so far.
            let qp = a.by_qpn.get(17).unwrap();
            let s = a.qps[qp].sender.as_mut().unwrap();
            let una = s.snd_nxt().sub(1);
            s.on_ack(&AckPacket { syndrome: AckSyndrome::Ack, psn: una, msn: 0 }, now).unwrap();
        }
        // Line rate over the run: at most one burst above 20 ms / 8848 ns.
        let max = 20_000_000 / frame_ns + PACER_BURST_FRAMES as u64 + 1;
        assert!(sent <= max && sent >= max - 2 * PACER_BURST_FRAMES as u64, "sent {sent}, line rate allows {max}");
        assert!(wakes * (PACER_BURST_FRAMES as u64 - 2) <= sent, "{wakes} wake-ups for {sent} frames");
    }
}
