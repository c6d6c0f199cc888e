//! PFC watchdog, in the manner of SONiC's PFC watchdog and NX-OS `priority-flow-control
//! watch-dog` (book ch. 11, "Priority Flow Control Watchdog"; IEEE 802.1Qbb; docs/src/lossless-qos.md).
//!
//! Per egress port and lossless priority: a queue paused continuously for longer than the
//! detection time is stormed ([`WdEvent::Storm`]). With action `drop`, frames to the stormed
//! queue (and from the ingress group of that port and priority) are dropped instead of waiting
//! behind the pause; with `forward`, further pauses are ignored for that queue; with `alert`,
//! only the event is raised. The queue is restored ([`WdEvent::Restore`]) once the restoration
//! time has passed with no pause frame received for it.
//!
//! Pure logic: polled with the current time (ns) and the pause state from [`crate::pfc::PfcRx`].
use dataplane_common::limits::NUM_TC;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WdAction {
    Drop,
    Forward,
    Alert,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WdParams {
    pub detect_ns: u64,
    pub restore_ns: u64,
    pub action: WdAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WdEvent {
    Storm { port: usize, prio: u8, paused_for_ns: u64 },
    Restore { port: usize, prio: u8 },
}

#[derive(Debug, Clone, Copy, Default)]
struct Q {
    /// Start of the continuous pause seen by polling (0 = not paused at the last poll).
    paused_since: Option<u64>,
    stormed: bool,
}

/// The watchdog of one switch.
#[derive(Debug)]
pub struct Watchdog {
    lossless: u8,
    p: WdParams,
    q: Vec<[Q; NUM_TC]>,
    stormed: Vec<u8>,
}

impl Watchdog {
    pub fn new(ports: usize, lossless: u8, p: WdParams) -> Self {
        Watchdog { lossless, p, q: vec![[Q::default(); NUM_TC]; ports], stormed: vec![0; ports] }
    }

    pub fn action(&self) -> WdAction {
        self.p.action
    }

    /// One poll of `port`: `paused_mask` is what the peer paused now, `last_pause_rx_ns` when
    /// the last pausing frame arrived per priority (0 = never).
    pub fn poll(
        &mut self,
        port: usize,
        paused_mask: u8,
        last_pause_rx_ns: &[u64; 8],
        now_ns: u64,
        out: &mut impl FnMut(WdEvent),
    ) {
        for (prio, &last_rx) in last_pause_rx_ns.iter().enumerate() {
            if self.lossless & (1 << prio) == 0 {
                continue;
            }
            let q = &mut self.q[port][prio];
            let paused = paused_mask & (1 << prio) != 0;
            if q.stormed {
                // Restored once no pause frame arrived for the restoration time.
                if now_ns.saturating_sub(last_rx) >= self.p.restore_ns {
                    q.stormed = false;
                    q.paused_since = None;
                    self.stormed[port] &= !(1 << prio);
                    out(WdEvent::Restore { port, prio: prio as u8 });
                }
                continue;
            }
            if !paused {
                q.paused_since = None;
                continue;
            }
            let since = *q.paused_since.get_or_insert(now_ns);
            if now_ns - since >= self.p.detect_ns {
                q.stormed = true;
                self.stormed[port] |= 1 << prio;
                out(WdEvent::Storm { port, prio: prio as u8, paused_for_ns: now_ns - since });
            }
        }
    }

    /// Start of the pause as the caller knows it (from [`crate::pfc::PfcRx::paused_since`]):
    /// lets detection count from the first pause frame rather than from the first poll.
    pub fn note_pause_start(&mut self, port: usize, prio: u8, since_ns: u64) {
        let q = &mut self.q[port][(prio & 7) as usize];
        if !q.stormed {
            q.paused_since = Some(q.paused_since.map_or(since_ns, |s| s.min(since_ns)));
        }
    }

    /// Queues currently stormed.
    #[inline]
    pub fn stormed_mask(&self, port: usize) -> u8 {
        self.stormed[port]
    }

    /// What the scheduler treats as paused: with `forward`, stormed queues ignore pauses.
    #[inline]
    pub fn effective_paused(&self, port: usize, paused_mask: u8) -> u8 {
        match self.p.action {
            WdAction::Forward => paused_mask & !self.stormed[port],
            _ => paused_mask,
        }
    }

    /// With `drop`: frames to a stormed queue (port, prio), or from the ingress group of a
    /// stormed queue, are dropped.
    #[inline]
    pub fn drops(&self, port: usize, prio: u8) -> bool {
        self.p.action == WdAction::Drop && self.stormed[port] & (1 << (prio & 7)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn wd(action: WdAction) -> Watchdog {
        Watchdog::new(2, 1 << 3, WdParams { detect_ns: 200 * MS, restore_ns: 200 * MS, action })
    }

    fn run(w: &mut Watchdog, port: usize, mask: u8, last: u64, now: u64) -> Vec<WdEvent> {
        let mut v = vec![];
        w.poll(port, mask, &[last; 8], now, &mut |e| v.push(e));
        v
    }

    #[test]
    fn storm_after_detect_time_of_continuous_pause_then_restore() {
        let mut w = wd(WdAction::Drop);
        let mut storms = vec![];
        // Polled every 10 ms with the pause refreshed all the time.
        for t in (0..=300).step_by(10) {
            storms.extend(run(&mut w, 0, 1 << 3, t * MS, t * MS));
        }
        assert_eq!(storms, vec![WdEvent::Storm { port: 0, prio: 3, paused_for_ns: 200 * MS }]);
        assert_eq!(w.stormed_mask(0), 1 << 3);
        assert!(w.drops(0, 3) && !w.drops(0, 0) && !w.drops(1, 3));
        assert_eq!(w.effective_paused(0, 1 << 3), 1 << 3, "drop keeps the pause");
        // Pauses stop at 300 ms: restored 200 ms later, not before.
        assert!(run(&mut w, 0, 0, 300 * MS, 499 * MS).is_empty());
        assert_eq!(run(&mut w, 0, 0, 300 * MS, 500 * MS), vec![WdEvent::Restore { port: 0, prio: 3 }]);
        assert_eq!(w.stormed_mask(0), 0);
        assert!(!w.drops(0, 3));
    }

    #[test]
    fn a_pause_that_ends_before_detect_time_is_no_storm() {
        let mut w = wd(WdAction::Drop);
        let mut ev = vec![];
        for t in (0..1000).step_by(10) {
            // 150 ms paused, 10 ms free, repeatedly.
            let mask = if t % 160 < 150 { 1 << 3 } else { 0 };
            ev.extend(run(&mut w, 0, mask, t * MS, t * MS));
        }
        assert!(ev.is_empty(), "{ev:?}");
    }

    #[test]
    fn lossy_priorities_are_not_watched() {
        let mut w = wd(WdAction::Drop);
        for t in (0..1000).step_by(10) {
            assert!(run(&mut w, 0, 1 << 0, t * MS, t * MS).is_empty());
        }
    }

    #[test]
    fn forward_ignores_pauses_and_alert_only_reports() {
        let mut f = wd(WdAction::Forward);
        run(&mut f, 1, 1 << 3, 0, 0);
        assert_eq!(run(&mut f, 1, 1 << 3, 200 * MS, 200 * MS).len(), 1);
        assert_eq!(f.effective_paused(1, 0b1000_1000), 0b1000_0000);
        assert!(!f.drops(1, 3));
        let mut a = wd(WdAction::Alert);
        run(&mut a, 1, 1 << 3, 0, 0);
        assert_eq!(run(&mut a, 1, 1 << 3, 200 * MS, 200 * MS).len(), 1);
        assert_eq!(a.effective_paused(1, 1 << 3), 1 << 3);
        assert!(!a.drops(1, 3));
    }

    #[test]
    fn detection_counts_from_the_first_pause_frame() {
        let mut w = wd(WdAction::Drop);
        w.note_pause_start(0, 3, 5 * MS);
        assert!(run(&mut w, 0, 1 << 3, 200 * MS, 204 * MS).is_empty());
        assert_eq!(run(&mut w, 0, 1 << 3, 205 * MS, 205 * MS).len(), 1);
    }
}
