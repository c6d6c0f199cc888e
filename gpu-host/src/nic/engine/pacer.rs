//! The NIC pacer: the NIC's transmitter at its (wall-clock) line rate. Every frame is charged
//! its wire size (frame + FCS + preamble + inter-frame gap, IEEE 802.3 clause 4), and a frame
//! leaves no earlier than one serialisation time of the previous frame after the previous one
//! left: the transmitter is busy for exactly that long, and an idle or paused transmitter
//! gathers no credit (a real NIC cannot send faster than its line rate to make up for time it
//! did not send). So after a PFC pause or an idle period one frame leaves at once, the next one
//! serialisation time later, and over any window the bytes sent are at most line rate × window
//! plus one frame. The data thread wakes once per frame when it has data to send
//! ([`super::Engine::next_deadline`]); a wake-up late by at most a frame time (and
//! [`crate::sender::LATE_WAKE_NS`]) is not idle time, the frame is timed from when the wire
//! went free ([`RateLimiter`]), and the switch port's receive line still delivers no faster than
//! the line rate.
use crate::sender::RateLimiter;

/// Bytes on the wire per frame beyond what AF_XDP carries: FCS 4 + preamble/SFD 8 + IFG 12.
pub const WIRE_OVERHEAD_BYTES: u32 = 24;

/// A NIC's transmitter: when the frame on the wire has been serialised.
#[derive(Clone, Copy, Debug)]
pub(super) struct NicPacer {
    /// A token bucket of depth zero: the balance is never positive, a frame may start when it is
    /// zero (the previous frame's serialisation is over) and its wire bytes take it negative.
    shaper: RateLimiter,
}

impl NicPacer {
    /// An idle transmitter at `line_rate_bps` at `now`.
    pub(super) fn new(line_rate_bps: u64, now: u64) -> NicPacer {
        NicPacer { shaper: RateLimiter::new(line_rate_bps, line_rate_bps, 0, now) }
    }

    /// May a frame leave at `now`?
    pub(super) fn ready(&mut self, now: u64) -> bool {
        self.shaper.ready(now)
    }

    /// Earliest time ≥ `now` at which a frame may leave: `now`, or when the previous frame's
    /// serialisation ends.
    pub(super) fn ready_at(&mut self, now: u64) -> u64 {
        self.shaper.ready_at(now)
    }

    /// Charges a frame of `len` bytes (as AF_XDP carries it) sent at `now` with its wire size.
    pub(super) fn charge_frame(&mut self, len: usize, now: u64) {
        self.shaper.consume(len as u32 + WIRE_OVERHEAD_BYTES, now);
    }
}

/// Serialisation time in ns of `wire_bytes` at `rate_bps`, rounded up.
#[cfg(test)]
fn serialisation_ns(wire_bytes: u64, rate_bps: u64) -> u64 {
    (wire_bytes * 8 * 1_000_000_000).div_ceil(rate_bps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::{AckPacket, AckSyndrome};
    use crate::nic::engine::testkit::engines;
    use crate::nic::engine::Engine;
    use rocefab_wire::ethernet::{MacAddr, PrioritySet};
    use rocefab_wire::mac_control::{MacControlRepr, PfcRepr};

    #[test]
    fn a_frame_leaves_one_serialisation_time_after_the_previous_one_and_idle_gathers_no_credit() {
        // 1 Gb/s: a Middle frame of 1082 bytes is 1106 on the wire, 8848 ns.
        let mut p = NicPacer::new(1_000_000_000, 0);
        assert!(p.ready(0), "an idle transmitter sends at once");
        p.charge_frame(1082, 0);
        assert_eq!(p.ready_at(0), 8_848);
        assert!(!p.ready(0) && !p.ready(8_847), "the wire is busy for the whole frame");
        assert!(p.ready(8_848));
        // Idle for 10 ms: the frame sent then still blocks the next one for its own wire time.
        p.charge_frame(1082, 10_000_000);
        assert!(!p.ready(10_000_000), "10 ms idle gathered no credit for a second frame");
        assert_eq!(p.ready_at(10_000_000), 10_008_848);
        // Sent late (the thread woke 3 µs after the wire went free, less than a frame time and
        // than LATE_WAKE_NS): a late wake-up is not idle time, the frame is timed from when the
        // wire went free, so wake-up latency does not slow a backlogged NIC.
        assert!(p.ready(10_011_848));
        p.charge_frame(1082, 10_011_848);
        assert_eq!(p.ready_at(10_011_848), 10_017_696);
        // Later than a frame time after the wire went free: idle, timed from when it left.
        p.charge_frame(1082, 10_027_000);
        assert_eq!(p.ready_at(10_027_000), 10_035_848);
        // A small frame (an ACK of 62 bytes, 86 on the wire) holds the wire 688 ns.
        p.charge_frame(62, 10_035_848);
        assert_eq!(p.ready_at(10_035_848), 10_036_536);
    }

    /// Drives requester `a` (its window acknowledged as it goes) from 0 to `end` on an
    /// injected clock, waking exactly at [`Engine::next_deadline`] or when the next of `frames`
    /// (time, MAC control frame), in time order, arrives. Returns every data frame's (send
    /// time, wire bytes) and the number of wake-ups.
    fn drive_sender(a: &mut Engine, end: u64, frames: &[(u64, Vec<u8>)]) -> (Vec<(u64, u64)>, u64) {
        drive_sender_cut(a, end, frames, None)
    }

    /// [`drive_sender`], and a CNP cuts the requester's DCQCN rate at `cnp_at` (the time of one
    /// of `frames`, handled just before that frame).
    fn drive_sender_cut(
        a: &mut Engine,
        end: u64,
        frames: &[(u64, Vec<u8>)],
        cnp_at: Option<u64>,
    ) -> (Vec<(u64, u64)>, u64) {
        let mut buf = vec![0u8; 9000];
        let mut now = 0;
        let mut sent = Vec::new();
        let mut wakes = 0;
        let mut next_frame = 0;
        while now < end {
            wakes += 1;
            while next_frame < frames.len() && frames[next_frame].0 <= now {
                if cnp_at == Some(frames[next_frame].0) {
                    let qp = a.by_qpn.get(17).unwrap();
                    a.qps[qp].sender.as_mut().unwrap().on_cnp(now);
                }
                a.on_frame(0, &frames[next_frame].1, now);
                next_frame += 1;
            }
            a.poll(now);
            while let Some(n) = a.next_tx(0, &mut buf, now) {
                sent.push((now, n as u64 + u64::from(WIRE_OVERHEAD_BYTES)));
            }
            // The window (32 packets) would close: ACK everything sent so far.
            let qp = a.by_qpn.get(17).unwrap();
            let s = a.qps[qp].sender.as_mut().unwrap();
            let una = s.snd_nxt().sub(1);
            s.on_ack(&AckPacket { syndrome: AckSyndrome::Ack, psn: una, msn: 0 }, now).unwrap();
            let next = a.next_deadline(now).unwrap_or(u64::MAX).min(frames.get(next_frame).map_or(u64::MAX, |f| f.0));
            if next == u64::MAX {
                break;
            }
            now = next.max(now + 1);
        }
        (sent, wakes)
    }

    /// Bytes sent over every window between two sends never exceed line rate × window + one
    /// frame, and no two frames leave less than the first one's serialisation time apart.
    fn assert_line_rate(sent: &[(u64, u64)], rate: u64) {
        for w in sent.windows(2) {
            let ((t0, b0), (t1, _)) = (w[0], w[1]);
            assert!(t1 - t0 >= serialisation_ns(b0, rate) - 1, "frames at {t0} and {t1}: {b0} wire bytes need more");
        }
        for i in 0..sent.len() {
            let mut bytes = 0u64;
            for &(t, b) in &sent[i..] {
                bytes += b;
                let window = t - sent[i].0;
                let allowed = u128::from(rate) * u128::from(window) / 1_000_000_000 / 8 + u128::from(b);
                assert!(
                    u128::from(bytes) <= allowed,
                    "{bytes} bytes in {window} ns from {}: line rate allows {allowed}",
                    sent[i].0
                );
            }
        }
    }

    #[test]
    fn a_paced_sender_wakes_per_frame_and_keeps_line_rate_over_every_window() {
        // 1 Gb/s, MTU 1024: a Middle frame is 14 + 20 + 8 + 12 + 1024 + 4 = 1082 bytes, plus
        // 24 bytes of FCS, preamble and gap on the wire: 1106 bytes, 8848 ns.
        let (mut a, _) = engines(4_000_000, 1_000_000_000, false);
        let (sent, wakes) = drive_sender(&mut a, 20_000_000, &[]);
        assert_line_rate(&sent, 1_000_000_000);
        // Woken exactly when the wire is free, the sender runs at line rate: 20 ms / 8848 ns,
        // less the first frames' RETH (16 bytes more on a First).
        let frames = sent.len() as u64;
        assert!((20_000_000 / 8_848 - 1..=20_000_000 / 8_848 + 1).contains(&frames), "sent {frames} frames");
        assert!(sent.windows(2).all(|w| w[1].0 > w[0].0), "one frame per wake-up");
        assert!(wakes <= frames + 2, "{wakes} wake-ups for {frames} frames");
    }

    /// A PFC pause of priority 3 for 0xffff quanta and its resume (quanta 0), from the switch.
    fn pause_and_resume() -> (Vec<u8>, Vec<u8>) {
        let src = MacAddr([2, 0, 0, 0, 0, 0x0b]);
        let frame = |q| MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), q)).to_frame(src).to_vec();
        (frame(0xffff), frame(0))
    }

    #[test]
    fn after_a_pause_one_frame_leaves_then_the_next_a_serialisation_time_later() {
        // A PFC pause of 0xffff quanta (33.5 ms at 1 Gb/s) at 1 ms, resumed by quanta 0 at
        // 11 ms: the sender was paused 10 ms, which a credit-gathering shaper would have let it
        // send as a burst at XON.
        let (mut a, _) = engines(4_000_000, 1_000_000_000, false);
        let (pause, resume) = pause_and_resume();
        let (sent, _) = drive_sender(&mut a, 20_000_000, &[(1_000_000, pause), (11_000_000, resume)]);
        let gap = sent.windows(2).find(|w| w[1].0 - w[0].0 > 1_000_000).expect("the pause shows as a gap");
        let xon = gap[1].0;
        assert_eq!(xon, 11_000_000, "resumed by quanta 0");
        let after: Vec<u64> = sent.iter().map(|s| s.0).filter(|&t| t >= xon).take(5).collect();
        assert_eq!(after.iter().filter(|&&t| t == xon).count(), 1, "one frame at XON: {after:?}");
        assert!(after.windows(2).all(|w| w[1] - w[0] >= 8_848 - 1), "then one per wire time: {after:?}");
        assert_line_rate(&sent, 1_000_000_000);
    }

    #[test]
    fn after_a_pause_a_qp_cut_by_dcqcn_sends_one_frame_then_at_its_own_rate() {
        // As above, and a CNP halves the QP's DCQCN rate at XON: its limiter, like the NIC's
        // pacer, gathered no credit while paused (ns-3's per-QP m_nextAvail), so one frame
        // leaves at XON and the next ones at the QP's 500 Mbit/s, 17.3 µs apart, not a burst at
        // line rate until a bucket is spent.
        let (mut a, _) = engines(4_000_000, 1_000_000_000, true);
        let (pause, resume) = pause_and_resume();
        let (sent, _) =
            drive_sender_cut(&mut a, 20_000_000, &[(1_000_000, pause), (11_000_000, resume)], Some(11_000_000));
        let qp = a.by_qpn.get(17).unwrap();
        let rate = a.qps[qp].sender.as_ref().unwrap().rate_bps();
        assert!(rate >= 500_000_000, "the cut took the rate to half, and it only recovers: {rate}");
        let after: Vec<u64> = sent.iter().map(|s| s.0).filter(|&t| t >= 11_000_000).take(3).collect();
        assert_eq!(after[0], 11_000_000, "one frame at XON: {after:?}");
        // A Middle packet is charged 1024 + 62 bytes at 500 Mbit/s: 17,376 ns.
        assert!(after.windows(2).all(|w| w[1] - w[0] >= 17_000), "then at the QP's rate: {after:?}");
    }
}
