//! IEEE 802.1Qbb priority-based flow control timing, both directions (802.1Q-2018 clause 36;
//! IEEE 802.1Qbb; docs/src/lossless-qos.md; book ch. 11, Fig. 11-4..11-6). Frames are built and parsed with
//! `rocefab_wire::mac_control`; this module only keeps time.
//!
//! - [`PfcTx`], per ingress port and priority: a group in XOFF sends a pause of the configured
//!   quanta and repeats it at half the pause time, so the peer never resumes while the group is
//!   above xON; XON (quanta 0) ends it.
//! - [`PfcRx`], per egress port and priority: a PFC frame with quanta q pauses the priority for
//!   q × 512 bit-times at the port's speed, quanta 0 resumes at once, an 802.3x PAUSE pauses
//!   every priority. Only priorities in the port's PFC enable vector (802.1Qbb clause 36.1.3,
//!   DCBX's PFC Configuration TLV, SONiC's `pfc_enable`: the switch's lossless priorities) are
//!   honoured; a PFC frame's bits for other priorities are reported back to be counted, and
//!   change nothing. Keeps the cumulative paused time and when the last pause arrived (for the
//!   watchdog, [`crate::pfcwd`]).
//!
//! Pure logic: time is passed in (ns), nothing allocates after construction.
use dataplane_common::limits::NUM_TC;

/// Pause duration of `quanta` at `rate_bps`: quanta × 512 bit-times, in ns (rounded up).
pub fn quanta_to_ns(quanta: u16, rate_bps: u64) -> u64 {
    let bits = u128::from(quanta) * 512 * 1_000_000_000;
    bits.div_ceil(u128::from(rate_bps.max(1))) as u64
}

/// Generation side: when to refresh XOFFs.
#[derive(Debug)]
pub struct PfcTx {
    quanta: u16,
    /// Refresh interval per port (half the pause duration, at least 1 ns).
    refresh_ns: Vec<u64>,
    /// Next refresh per (port, priority); `u64::MAX` when not in XOFF.
    due: Vec<[u64; NUM_TC]>,
}

impl PfcTx {
    pub fn new(ports: usize, quanta: u16, rate_bps: &[u64]) -> Self {
        assert_eq!(rate_bps.len(), ports);
        PfcTx {
            quanta,
            refresh_ns: rate_bps.iter().map(|&r| (quanta_to_ns(quanta, r) / 2).max(1)).collect(),
            due: vec![[u64::MAX; NUM_TC]; ports],
        }
    }

    /// The group entered XOFF: returns the quanta to send now and arms the refresh.
    pub fn on_xoff(&mut self, port: usize, prio: u8, now_ns: u64) -> u16 {
        self.due[port][(prio & 7) as usize] = now_ns + self.refresh_ns[port];
        self.quanta
    }

    /// The group left XOFF (the caller sends quanta 0).
    pub fn on_xon(&mut self, port: usize, prio: u8, _now_ns: u64) {
        self.due[port][(prio & 7) as usize] = u64::MAX;
    }

    /// Calls `out(port, prio, quanta)` for every refresh due at `now_ns` and re-arms it.
    pub fn due_refresh(&mut self, now_ns: u64, out: &mut impl FnMut(usize, u8, u16)) {
        for (port, due) in self.due.iter_mut().enumerate() {
            for (prio, t) in due.iter_mut().enumerate() {
                if *t <= now_ns {
                    *t = now_ns + self.refresh_ns[port];
                    out(port, prio as u8, self.quanta);
                }
            }
        }
    }

    /// Earliest refresh, if any group is in XOFF.
    pub fn next_deadline(&self) -> Option<u64> {
        self.due.iter().flat_map(|d| d.iter().copied()).filter(|&t| t != u64::MAX).min()
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct RxPrio {
    /// Paused until this time (ns); paused while `now < until`.
    until: u64,
    /// Start of the current pause (valid while paused).
    since: u64,
    /// Paused time of pauses that ended.
    total: u64,
    /// Arrival of the last frame that paused (quanta > 0) this priority; 0 = never.
    last_rx: u64,
}

/// Reception side: which priorities of each egress port the peer has paused.
#[derive(Debug)]
pub struct PfcRx {
    rate_bps: Vec<u64>,
    /// PFC enable vector: bit i set = a PFC pause of priority i is honoured.
    enabled: u8,
    prio: Vec<[RxPrio; NUM_TC]>,
}

impl PfcRx {
    /// `pfc_enable`: the priorities whose PFC pauses are honoured (bit per priority).
    pub fn new(ports: usize, rate_bps: &[u64], pfc_enable: u8) -> Self {
        assert_eq!(rate_bps.len(), ports);
        PfcRx { rate_bps: rate_bps.to_vec(), enabled: pfc_enable, prio: vec![[RxPrio::default(); NUM_TC]; ports] }
    }

    fn set(&mut self, port: usize, prio: usize, quanta: u16, now_ns: u64) {
        let r = &mut self.prio[port][prio];
        let paused = now_ns < r.until;
        if quanta == 0 {
            if paused {
                r.total += now_ns - r.since;
                r.until = now_ns;
                r.since = now_ns;
            }
            return;
        }
        if !paused {
            // Close the previous pause at its expiry, open a new one.
            if r.until > r.since {
                r.total += r.until - r.since;
            }
            r.since = now_ns;
        }
        r.until = now_ns + quanta_to_ns(quanta, self.rate_bps[port]);
        r.last_rx = now_ns.max(1);
    }

    /// An 802.1Qbb PFC frame: bit i of the frame's `class_enable` vector → priority i paused
    /// for `quanta[i]`, if PFC is enabled on priority i. Returns the frame's bits for priorities
    /// on which PFC is not enabled: those are ignored (the caller counts them).
    pub fn on_pfc(&mut self, port: usize, class_enable: u8, quanta: [u16; 8], now_ns: u64) -> u8 {
        let honoured = class_enable & self.enabled;
        for (prio, q) in quanta.iter().enumerate() {
            if honoured & (1 << prio) != 0 {
                self.set(port, prio, *q, now_ns);
            }
        }
        class_enable & !self.enabled
    }

    /// An 802.3x PAUSE frame: every priority, whatever the PFC enable vector.
    pub fn on_pause(&mut self, port: usize, quanta: u16, now_ns: u64) {
        for prio in 0..NUM_TC {
            self.set(port, prio, quanta, now_ns);
        }
    }

    /// Bit per priority paused at `now_ns`.
    #[inline]
    pub fn paused_mask(&self, port: usize, now_ns: u64) -> u8 {
        let mut m = 0;
        for (prio, r) in self.prio[port].iter().enumerate() {
            if now_ns < r.until {
                m |= 1 << prio;
            }
        }
        m
    }

    /// Cumulative paused time up to `now_ns`, the current pause included.
    pub fn paused_ns_total(&self, port: usize, prio: u8, now_ns: u64) -> u64 {
        let r = &self.prio[port][(prio & 7) as usize];
        let current = if r.until > r.since { r.until.min(now_ns).saturating_sub(r.since) } else { 0 };
        r.total + current
    }

    /// When the earliest pause of the port expires, if any is running (or ran: a past time).
    pub fn next_expiry(&self, port: usize) -> Option<u64> {
        self.prio[port].iter().filter(|r| r.until > r.since).map(|r| r.until).min()
    }

    /// Arrival time of the last pausing frame per priority (0 = never).
    pub fn last_pause_rx_ns(&self, port: usize) -> [u64; NUM_TC] {
        std::array::from_fn(|p| self.prio[port][p].last_rx)
    }

    /// When the last pause of `prio` on `port` ended or ends (its XON or its expiry; 0 if it was
    /// never paused): a frame of that priority cannot have left before it.
    #[inline]
    pub fn resumed_at(&self, port: usize, prio: u8) -> u64 {
        self.prio[port][(prio & 7) as usize].until
    }

    /// Start of the current pause of (port, prio), if paused at `now_ns`.
    pub fn paused_since(&self, port: usize, prio: u8, now_ns: u64) -> Option<u64> {
        let r = &self.prio[port][(prio & 7) as usize];
        (now_ns < r.until).then_some(r.since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G400: u64 = 400_000_000_000;
    const G1: u64 = 1_000_000_000;

    #[test]
    fn quanta_durations() {
        // Book ch. 11: 1 quanta = 1.28 ns at 400G, 0xFFFF ≈ 83.9 µs.
        assert_eq!(quanta_to_ns(1, G400), 2); // 1.28 ns, rounded up
        assert_eq!(quanta_to_ns(0xffff, G400), 83_885); // 83 884.8 ns
        assert_eq!(quanta_to_ns(0xffff, G1), 33_553_920);
        assert_eq!(quanta_to_ns(100, G1), 51_200);
        assert_eq!(quanta_to_ns(0, G1), 0);
    }

    #[test]
    fn xoff_is_refreshed_at_half_the_pause_until_xon() {
        let mut t = PfcTx::new(2, 1000, &[G1, G1]); // 512 µs pause, refresh every 256 µs
        assert_eq!(t.next_deadline(), None);
        assert_eq!(t.on_xoff(1, 3, 1_000), 1000);
        assert_eq!(t.next_deadline(), Some(257_000));
        let mut sent = vec![];
        t.due_refresh(256_999, &mut |p, q, n| sent.push((p, q, n)));
        assert!(sent.is_empty());
        t.due_refresh(257_000, &mut |p, q, n| sent.push((p, q, n)));
        assert_eq!(sent, vec![(1, 3, 1000)]);
        assert_eq!(t.next_deadline(), Some(513_000));
        t.on_xon(1, 3, 300_000);
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn pause_expires_and_quanta_zero_resumes() {
        let mut r = PfcRx::new(2, &[G1, G1], 0xff);
        r.on_pfc(0, 1 << 3, [0, 0, 0, 100, 0, 0, 0, 0], 1_000);
        assert_eq!(r.paused_mask(0, 1_000), 1 << 3);
        assert_eq!(r.paused_mask(1, 1_000), 0, "other ports are not paused");
        assert_eq!(r.paused_mask(0, 52_199), 1 << 3);
        assert_eq!(r.paused_mask(0, 52_200), 0, "100 quanta at 1G = 51.2 µs");
        assert_eq!(r.paused_ns_total(0, 3, 100_000), 51_200);
        // Quanta 0 resumes at once.
        r.on_pfc(0, 1 << 3, [0, 0, 0, 0xffff, 0, 0, 0, 0], 200_000);
        r.on_pfc(0, 1 << 3, [0; 8], 210_000);
        assert_eq!(r.paused_mask(0, 210_000), 0);
        assert_eq!(r.paused_ns_total(0, 3, 300_000), 51_200 + 10_000);
        // Bits not set leave other priorities alone, even with quanta.
        r.on_pfc(0, 1 << 4, [7; 8], 400_000);
        assert_eq!(r.paused_mask(0, 400_000), 1 << 4);
        assert_eq!(r.last_pause_rx_ns(0)[4], 400_000);
        assert_eq!(r.last_pause_rx_ns(0)[3], 200_000);
    }

    #[test]
    fn refreshes_extend_one_continuous_pause() {
        let mut r = PfcRx::new(1, &[G1], 1 << 3);
        for i in 0..10u64 {
            r.on_pfc(0, 1 << 3, [0, 0, 0, 100, 0, 0, 0, 0], i * 25_600);
        }
        // Last at 230 400 + 51 200 = 281 600.
        assert_eq!(r.paused_since(0, 3, 100_000), Some(0));
        assert_eq!(r.next_expiry(0), Some(281_600));
        assert_eq!(r.paused_ns_total(0, 3, 1_000_000), 281_600);
        assert_eq!(r.paused_ns_total(0, 3, 100_000), 100_000);
    }

    #[test]
    fn pause_8023x_stops_every_priority() {
        // 802.3x PAUSE is not PFC: it stops every priority even with PFC on priority 3 only.
        let mut r = PfcRx::new(1, &[G1], 1 << 3);
        r.on_pause(0, 10, 0);
        assert_eq!(r.paused_mask(0, 0), 0xff);
        assert_eq!(r.paused_mask(0, 5_120), 0);
        r.on_pause(0, 10, 10_000);
        r.on_pause(0, 0, 11_000);
        assert_eq!(r.paused_mask(0, 11_000), 0);
        for p in 0..8 {
            assert_eq!(r.paused_ns_total(0, p, 20_000), 5_120 + 1_000);
        }
    }

    #[test]
    fn pfc_for_a_priority_without_pfc_is_ignored_and_reported() {
        // pfc: [3]. A PFC frame for priority 0 (10000 quanta) must not hold queue 0.
        let mut r = PfcRx::new(2, &[G1, G1], 1 << 3);
        assert_eq!(r.on_pfc(0, 1 << 0, [10_000, 0, 0, 0, 0, 0, 0, 0], 1_000), 1 << 0);
        assert_eq!(r.paused_mask(0, 1_000), 0);
        assert_eq!(r.paused_ns_total(0, 0, 10_000_000), 0);
        assert_eq!(r.last_pause_rx_ns(0)[0], 0, "the watchdog sees no pause either");
        assert_eq!(r.next_expiry(0), None);
        // A frame naming 0 and 3: 3 is honoured, 0 reported.
        assert_eq!(r.on_pfc(0, 0b1001, [10_000, 0, 0, 100, 0, 0, 0, 0], 2_000), 1 << 0);
        assert_eq!(r.paused_mask(0, 2_000), 1 << 3);
        assert_eq!(r.paused_mask(0, 2_000 + 51_200), 0);
        // An enabled priority alone reports nothing.
        assert_eq!(r.on_pfc(1, 1 << 3, [0, 0, 0, 100, 0, 0, 0, 0], 3_000), 0);
        // With PFC off everywhere, every bit is reported and nothing pauses.
        let mut off = PfcRx::new(1, &[G1], 0);
        assert_eq!(off.on_pfc(0, 0xff, [0xffff; 8], 0), 0xff);
        assert_eq!(off.paused_mask(0, 0), 0);
        // ... while an 802.3x PAUSE still stops everything.
        off.on_pause(0, 10, 0);
        assert_eq!(off.paused_mask(0, 0), 0xff);
    }
}
