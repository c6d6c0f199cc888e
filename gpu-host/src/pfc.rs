//! NIC-side Priority Flow Control state (IEEE 802.1Qbb; 802.3x Annex 31B/31D MAC Control
//! PAUSE): a received PFC frame pauses each priority whose class-enable bit is set for
//! `quanta × 512` bit times at the port speed (one quantum = 512 bit times; at 400 Gb/s
//! 0xFFFF quanta ≈ 83.9 µs, IEEE 802.1Qbb and book ch. 11). A quanta of 0 resumes the priority
//! at once; a newer frame replaces the running timer. Paused time is accounted per
//! priority; frames are counted. Pure: every call takes `now` in nanoseconds.
//!
//! Only priorities in the port's PFC enable vector are paused (802.1Qbb clause 36.1.3): the
//! NIC is DCBX-willing and adopts the switch's vector (IEEE 802.1Qaz PFC Configuration TLV,
//! [`crate::nic::agent::classes_from`]). A PFC frame's bits for other priorities are counted
//! ([`NicPfc::ignored_frames`]) and change nothing; an 802.3x PAUSE still pauses every
//! priority.

/// Number of priorities.
pub const PRIORITIES: usize = 8;
/// Bit times per pause quantum.
pub const BIT_TIMES_PER_QUANTUM: u64 = 512;

/// PFC state errors.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum PfcError {
    /// Priority outside 0..=7.
    #[error("invalid priority {0}: must be 0..=7")]
    InvalidPriority(u8),
    /// Line rate of zero.
    #[error("line rate must be > 0 bit/s")]
    ZeroLineRate,
}

/// Pause duration in ns for `quanta` at `line_rate_bps`, rounded up to whole ns.
pub fn quanta_to_ns(quanta: u16, line_rate_bps: u64) -> u64 {
    if line_rate_bps == 0 {
        return u64::MAX;
    }
    let bits = u128::from(quanta) * u128::from(BIT_TIMES_PER_QUANTUM) * 1_000_000_000;
    let ns = bits.div_ceil(u128::from(line_rate_bps));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Per-priority pause counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcPriorityCounters {
    /// Frames that paused this priority (quanta > 0).
    pub pause_frames: u64,
    /// Frames that resumed it (quanta 0).
    pub resume_frames: u64,
    /// PFC frames with this priority's bit set, ignored because PFC is not enabled on it.
    pub ignored_frames: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PrioState {
    /// Current pause interval `[start, until)`, if one was started and not yet accounted.
    start: u64,
    until: u64,
    active: bool,
    accounted_ns: u64,
    counters: PfcPriorityCounters,
}

impl PrioState {
    /// Closes an expired interval (or truncates at `at`) into the accounted total.
    fn settle(&mut self, at: u64) {
        if self.active {
            let end = self.until.min(at).max(self.start);
            self.accounted_ns += end - self.start;
            self.active = false;
        }
    }

    fn paused_at(&self, now: u64) -> bool {
        self.active && now < self.until
    }
}

/// PFC pause state of one NIC port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicPfc {
    line_rate_bps: u64,
    /// PFC enable vector: bit i set = PFC pauses of priority i are honoured.
    pfc_enable: u8,
    prio: [PrioState; PRIORITIES],
    frames_received: u64,
    /// PFC frames that named at least one priority without PFC.
    ignored_frames: u64,
}

impl NicPfc {
    /// A port of `line_rate_bps` with nothing paused, honouring PFC for the priorities set in
    /// `pfc_enable` (bit per priority).
    pub fn new(line_rate_bps: u64, pfc_enable: u8) -> Result<NicPfc, PfcError> {
        if line_rate_bps == 0 {
            return Err(PfcError::ZeroLineRate);
        }
        Ok(NicPfc {
            line_rate_bps,
            pfc_enable,
            prio: [PrioState::default(); PRIORITIES],
            frames_received: 0,
            ignored_frames: 0,
        })
    }

    /// The PFC enable vector.
    pub fn pfc_enable(&self) -> u8 {
        self.pfc_enable
    }

    /// Line rate.
    pub fn line_rate_bps(&self) -> u64 {
        self.line_rate_bps
    }

    /// Applies a received PFC frame: bit `i` of `class_enable` selects priority `i`, whose
    /// timer is set from `quanta[i]` (0 = resume now) if PFC is enabled on `i`; bits of
    /// priorities without PFC are counted and ignored.
    pub fn on_pfc_frame(&mut self, class_enable: u8, quanta: &[u16; PRIORITIES], now: u64) {
        self.frames_received += 1;
        let ignored = class_enable & !self.pfc_enable;
        if ignored != 0 {
            self.ignored_frames += 1;
        }
        for (i, &q) in quanta.iter().enumerate() {
            if ignored & (1 << i) != 0 {
                self.prio[i].counters.ignored_frames += 1;
            } else if class_enable & (1 << i) != 0 {
                self.apply(i, q, now);
            }
        }
    }

    /// Applies an 802.3x global PAUSE: all priorities.
    pub fn on_global_pause(&mut self, quanta: u16, now: u64) {
        self.frames_received += 1;
        for i in 0..PRIORITIES {
            self.apply(i, quanta, now);
        }
    }

    fn apply(&mut self, i: usize, quanta: u16, now: u64) {
        let dur = quanta_to_ns(quanta, self.line_rate_bps);
        let p = &mut self.prio[i];
        if quanta == 0 {
            p.counters.resume_frames += 1;
            p.settle(now);
            return;
        }
        p.counters.pause_frames += 1;
        if p.paused_at(now) {
            // Refresh: the new timer replaces the old one; the interval continues.
            p.until = now.saturating_add(dur);
        } else {
            p.settle(now);
            p.start = now;
            p.until = now.saturating_add(dur);
            p.active = true;
        }
    }

    fn check(prio: u8) -> Result<usize, PfcError> {
        if (prio as usize) < PRIORITIES {
            Ok(prio as usize)
        } else {
            Err(PfcError::InvalidPriority(prio))
        }
    }

    /// Is `prio` paused at `now`?
    pub fn is_paused(&self, prio: u8, now: u64) -> Result<bool, PfcError> {
        Ok(self.prio[Self::check(prio)?].paused_at(now))
    }

    /// When `prio` resumes (`None` if it is not paused at `now`).
    pub fn resume_time(&self, prio: u8, now: u64) -> Result<Option<u64>, PfcError> {
        let p = &self.prio[Self::check(prio)?];
        Ok(p.paused_at(now).then_some(p.until))
    }

    /// The earliest future resume time among paused priorities.
    pub fn next_resume(&self, now: u64) -> Option<u64> {
        self.prio.iter().filter(|p| p.paused_at(now)).map(|p| p.until).min()
    }

    /// Bitmap of priorities paused at `now`.
    pub fn paused_mask(&self, now: u64) -> u8 {
        self.prio.iter().enumerate().filter(|(_, p)| p.paused_at(now)).fold(0, |m, (i, _)| m | (1 << i))
    }

    /// Total time `prio` has spent paused up to `now`, ns.
    pub fn paused_ns(&self, prio: u8, now: u64) -> Result<u64, PfcError> {
        let mut p = self.prio[Self::check(prio)?];
        p.settle(now);
        Ok(p.accounted_ns)
    }

    /// Frame counters of `prio`.
    pub fn counters(&self, prio: u8) -> Result<PfcPriorityCounters, PfcError> {
        Ok(self.prio[Self::check(prio)?].counters)
    }

    /// PFC / PAUSE frames received.
    pub fn frames_received(&self) -> u64 {
        self.frames_received
    }

    /// PFC frames that named a priority on which PFC is not enabled (those bits were ignored).
    pub fn ignored_frames(&self) -> u64 {
        self.ignored_frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G400: u64 = 400_000_000_000;
    const G1: u64 = 1_000_000_000;

    fn q(p: usize, v: u16) -> [u16; 8] {
        let mut a = [0; 8];
        a[p] = v;
        a
    }

    #[test]
    fn quanta_arithmetic() {
        // 400G: 1 quantum = 512 × 2.5 ps = 1.28 ns; 0xFFFF ≈ 83.9 µs.
        assert_eq!(quanta_to_ns(0xFFFF, G400), 83_885); // 33 553 920 bits / 400G = 83 884.8 ns, rounded up
        assert_eq!(quanta_to_ns(100, G400), 128);
        // 1G: 0xFFFF × 512 ns = 33.554 ms.
        assert_eq!(quanta_to_ns(0xFFFF, G1), 33_553_920);
        assert_eq!(quanta_to_ns(1, G1), 512);
        assert_eq!(quanta_to_ns(0, G1), 0);
        assert_eq!(quanta_to_ns(3, 100_000_000_000), 16); // 15.36 ns → 16
    }

    #[test]
    fn pause_expires_after_quanta_time() {
        let mut p = NicPfc::new(G1, 1 << 3).unwrap();
        p.on_pfc_frame(1 << 3, &q(3, 0xFFFF), 1_000);
        assert!(p.is_paused(3, 1_000).unwrap());
        assert!(!p.is_paused(0, 1_000).unwrap(), "other priorities unaffected");
        assert_eq!(p.paused_mask(2_000), 0b1000);
        assert_eq!(p.next_resume(1_000), Some(1_000 + 33_553_920));
        assert!(p.is_paused(3, 1_000 + 33_553_919).unwrap());
        assert!(!p.is_paused(3, 1_000 + 33_553_920).unwrap());
        assert_eq!(p.next_resume(1_000 + 33_553_920), None);
        assert_eq!(p.paused_ns(3, 100_000_000).unwrap(), 33_553_920);
        assert_eq!(p.paused_ns(3, 1_000 + 10).unwrap(), 10, "partial interval counted");
    }

    #[test]
    fn class_enable_bits_select_priorities() {
        let mut p = NicPfc::new(G400, 0xff).unwrap();
        // Quanta for priorities whose bit is not set are ignored.
        p.on_pfc_frame(0b0000_1000, &[500; 8], 0);
        assert_eq!(p.paused_mask(1), 0b1000);
        p.on_pfc_frame(0b1000_0001, &[100, 0, 0, 0, 0, 0, 0, 200], 0);
        assert_eq!(p.paused_mask(1), 0b1000_1001);
        assert_eq!(p.next_resume(1), Some(128));
        assert_eq!(p.resume_time(7, 1).unwrap(), Some(256));
        assert_eq!(p.frames_received(), 2);
    }

    #[test]
    fn quanta_zero_resumes_at_once_and_refresh_extends() {
        let mut p = NicPfc::new(G1, 1 << 3).unwrap();
        p.on_pfc_frame(1 << 3, &q(3, 1000), 0); // 512 µs
        p.on_pfc_frame(1 << 3, &q(3, 1000), 100_000); // refresh → until 612 µs
        assert!(p.is_paused(3, 600_000).unwrap());
        p.on_pfc_frame(1 << 3, &q(3, 0), 300_000); // XON
        assert!(!p.is_paused(3, 300_000).unwrap());
        assert_eq!(p.paused_ns(3, 1_000_000).unwrap(), 300_000);
        // A second episode adds to the total.
        p.on_pfc_frame(1 << 3, &q(3, 10), 2_000_000);
        assert_eq!(p.paused_ns(3, 3_000_000).unwrap(), 300_000 + 5_120);
        let c = p.counters(3).unwrap();
        assert_eq!((c.pause_frames, c.resume_frames), (3, 1));
        // A refresh with a smaller quanta shortens the pause (timer replaced).
        p.on_pfc_frame(1 << 3, &q(3, 1000), 4_000_000);
        p.on_pfc_frame(1 << 3, &q(3, 1), 4_000_100);
        assert_eq!(p.resume_time(3, 4_000_100).unwrap(), Some(4_000_612));
    }

    #[test]
    fn global_pause_pauses_all() {
        // 802.3x PAUSE is not PFC: every priority, whatever the PFC enable vector.
        let mut p = NicPfc::new(G1, 1 << 3).unwrap();
        p.on_global_pause(2, 0);
        assert_eq!(p.paused_mask(0), 0xFF);
        assert_eq!(p.next_resume(0), Some(1024));
        p.on_global_pause(0, 10);
        assert_eq!(p.paused_mask(10), 0);
    }

    #[test]
    fn invalid_inputs() {
        assert_eq!(NicPfc::new(0, 1 << 3), Err(PfcError::ZeroLineRate));
        let p = NicPfc::new(G1, 1 << 3).unwrap();
        assert_eq!(p.is_paused(8, 0), Err(PfcError::InvalidPriority(8)));
        assert_eq!(p.paused_ns(200, 0), Err(PfcError::InvalidPriority(200)));
    }

    #[test]
    fn pfc_on_a_priority_without_pfc_is_counted_and_ignored() {
        // The switch runs PFC on 3 only; a PFC frame for priority 0 must not stop priority 0.
        let mut p = NicPfc::new(G1, 1 << 3).unwrap();
        p.on_pfc_frame(1 << 0, &q(0, 10_000), 0);
        assert_eq!(p.paused_mask(0), 0);
        assert_eq!(p.next_resume(0), None);
        assert_eq!(p.paused_ns(0, 10_000_000).unwrap(), 0);
        assert_eq!(
            p.counters(0).unwrap(),
            PfcPriorityCounters { pause_frames: 0, resume_frames: 0, ignored_frames: 1 }
        );
        assert_eq!((p.frames_received(), p.ignored_frames()), (1, 1));
        // Both bits: 3 pauses, 0 is ignored.
        p.on_pfc_frame(0b1001, &[10_000, 0, 0, 100, 0, 0, 0, 0], 1_000);
        assert_eq!(p.paused_mask(1_000), 1 << 3);
        assert_eq!(p.counters(0).unwrap().ignored_frames, 2);
        assert_eq!(p.counters(3).unwrap().pause_frames, 1);
        // An enabled priority alone is not an ignored frame.
        p.on_pfc_frame(1 << 3, &q(3, 0), 2_000);
        assert_eq!((p.frames_received(), p.ignored_frames()), (3, 2));
        // Another vector (DCBX adopted priority 4): 4 pauses, 3 does not.
        let mut p4 = NicPfc::new(G1, 1 << 4).unwrap();
        p4.on_pfc_frame(0b1_1000, &[0, 0, 0, 100, 100, 0, 0, 0], 0);
        assert_eq!(p4.paused_mask(0), 1 << 4);
        assert_eq!(p4.pfc_enable(), 1 << 4);
    }
}
