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
//! "Continuously" is the receiver's own record ([`PfcRx::paused_since`]: the pause frame that
//! opened the pause now running, refreshes included), read afresh at every poll. The watchdog
//! keeps no pause start of its own: the data-plane thread polls only while something is paused
//! or stormed, so a start remembered from one poll to the next would outlive a pause that ended
//! between them, and an ordinary pause seconds later would inherit it and be declared a storm.
//!
//! Pure logic: [`Watchdog::tick`] is what the data-plane thread calls on every pass of its loop,
//! with the current time (ns) and the pause state; it decides itself when to poll.
use dataplane_common::limits::NUM_TC;

use crate::pfc::PfcRx;

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
    /// Poll interval (at least 1 ns is used).
    pub poll_ns: u64,
    pub action: WdAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WdEvent {
    Storm { port: usize, prio: u8, paused_for_ns: u64 },
    Restore { port: usize, prio: u8 },
}

/// The watchdog of one switch.
#[derive(Debug)]
pub struct Watchdog {
    lossless: u8,
    p: WdParams,
    /// Stormed queues, bit per priority, per port.
    stormed: Vec<u8>,
    /// Next poll while something is watched.
    next_poll: u64,
}

impl Watchdog {
    pub fn new(ports: usize, lossless: u8, p: WdParams) -> Self {
        Watchdog { lossless, p, stormed: vec![0; ports], next_poll: 0 }
    }

    pub fn action(&self) -> WdAction {
        self.p.action
    }

    /// One pass of the data-plane loop at `now_ns`: while any port is paused or any queue
    /// stormed, polls every port once per poll interval and pushes what happened to `out` (at
    /// most one event per queue, so `out` never grows past ports × 8). Returns when it wants to
    /// run next (`u64::MAX`: nothing to watch).
    pub fn tick(&mut self, rx: &PfcRx, now_ns: u64, out: &mut Vec<WdEvent>) -> u64 {
        let ports = self.stormed.len();
        let watching = (0..ports).any(|p| rx.paused_mask(p, now_ns) & self.lossless != 0 || self.stormed[p] != 0);
        if !watching {
            return u64::MAX;
        }
        if now_ns < self.next_poll {
            return self.next_poll;
        }
        self.next_poll = now_ns + self.p.poll_ns.max(1);
        for port in 0..ports {
            self.poll(port, rx, now_ns, out);
        }
        self.next_poll
    }

    /// One poll of `port` at `now_ns`.
    fn poll(&mut self, port: usize, rx: &PfcRx, now_ns: u64, out: &mut Vec<WdEvent>) {
        let last_rx = rx.last_pause_rx_ns(port);
        for prio in 0..NUM_TC as u8 {
            let bit = 1u8 << prio;
            if self.lossless & bit == 0 {
                continue;
            }
            if self.stormed[port] & bit != 0 {
                // Restored once no pause frame arrived for the restoration time.
                if now_ns.saturating_sub(last_rx[prio as usize]) >= self.p.restore_ns {
                    self.stormed[port] &= !bit;
                    out.push(WdEvent::Restore { port, prio });
                }
                continue;
            }
            let Some(since) = rx.paused_since(port, prio, now_ns) else {
                continue;
            };
            let paused_for_ns = now_ns.saturating_sub(since);
            if paused_for_ns >= self.p.detect_ns {
                self.stormed[port] |= bit;
                out.push(WdEvent::Storm { port, prio, paused_for_ns });
            }
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
    const G1: u64 = 1_000_000_000;

    /// The shipped watchdog (rail-spine: drop, detect 200 ms, restore 200 ms, poll 10 ms) on two
    /// 1 Gbit/s ports with priority 3 lossless.
    fn wd(action: WdAction) -> (Watchdog, PfcRx) {
        let p = WdParams { detect_ns: 200 * MS, restore_ns: 200 * MS, poll_ns: 10 * MS, action };
        (Watchdog::new(2, 1 << 3, p), PfcRx::new(2, &[G1; 2], 1 << 3))
    }

    /// What happens on the wire, at a time: a PFC frame on a port, or any other frame (the
    /// data-plane thread wakes and runs its loop, the watchdog's tick included).
    #[derive(Clone, Copy)]
    enum Wire {
        Pfc { port: usize, enable: u8, quanta: u16 },
        Frame,
    }

    /// Drives the watchdog as the data-plane thread does (`DataPlane::run`): one tick per pass of
    /// the loop, and a pass runs when something arrives on the wire, when the watchdog asked to be
    /// woken, and when a pause expires (the loop wakes for that too); nothing else. Returns the
    /// events with when they happened.
    fn thread(w: &mut Watchdog, rx: &mut PfcRx, wire: &[(u64, Wire)], until: u64) -> Vec<(u64, WdEvent)> {
        let mut events = Vec::with_capacity(16);
        let mut seen = vec![];
        let mut wake = u64::MAX;
        let mut next = 0;
        let mut now = 0;
        while now <= until {
            while next < wire.len() && wire[next].0 <= now {
                if let Wire::Pfc { port, enable, quanta } = wire[next].1 {
                    rx.on_pfc(port, enable, [quanta; 8], now);
                }
                next += 1;
            }
            events.clear();
            wake = w.tick(rx, now, &mut events);
            seen.extend(events.iter().map(|&e| (now, e)));
            let expiry = (0..2).filter_map(|p| rx.next_expiry(p)).filter(|&t| t > now).min().unwrap_or(u64::MAX);
            let arrival = wire.get(next).map_or(u64::MAX, |e| e.0);
            let t = wake.min(expiry).min(arrival);
            if t == u64::MAX {
                break;
            }
            now = t.max(now + 1);
        }
        let _ = wake;
        seen
    }

    fn pfc(t_ms: u64, quanta: u16) -> (u64, Wire) {
        (t_ms * MS, Wire::Pfc { port: 0, enable: 1 << 3, quanta })
    }

    /// Issue 38: one 65535-quanta pause (33.5 ms at 1 Gbit/s), ~400 ms with nothing paused, then
    /// a 10000-quanta pause (5.1 ms), with traffic arriving all the time. No pause lasted 200 ms:
    /// no storm. (Before the fix the second pause inherited the first's start, which no poll had
    /// cleared, and was declared a 437.7 ms storm.)
    #[test]
    fn an_ordinary_pause_after_an_idle_gap_is_no_storm() {
        let (mut w, mut rx) = wd(WdAction::Drop);
        let mut wire = vec![pfc(0, 65535), pfc(404, 10000)];
        wire.extend((0..600).step_by(3).map(|t| (t * MS + 1, Wire::Frame)));
        wire.sort_by_key(|e| e.0);
        let ev = thread(&mut w, &mut rx, &wire, 1000 * MS);
        assert_eq!(ev, vec![]);
        assert_eq!(w.stormed_mask(0), 0);
        assert!(!w.drops(0, 3));
        // The second pause held priority 3 for its own 5.12 ms, nothing more.
        assert_eq!(rx.paused_ns_total(0, 3, 1000 * MS), 33_553_920 + 5_120_000);
    }

    /// The same with no other traffic at all, and two full pauses 239 ms apart (issue 38's
    /// second reproduction).
    #[test]
    fn two_full_pauses_far_apart_are_no_storm() {
        let (mut w, mut rx) = wd(WdAction::Drop);
        let ev = thread(&mut w, &mut rx, &[pfc(0, 65535), pfc(239, 65535)], 2000 * MS);
        assert_eq!(ev, vec![]);
    }

    #[test]
    fn storm_after_detect_time_of_continuous_pause_then_restore() {
        let (mut w, mut rx) = wd(WdAction::Drop);
        // A full pause refreshed every 5 ms from 3 ms to 300 ms (continuous), then silence.
        let wire: Vec<_> = (0..60).map(|i| pfc(3 + 5 * i, 65535)).collect();
        let ev = thread(&mut w, &mut rx, &wire, 800 * MS);
        // Detected at the first poll 200 ms after the first frame: the thread's first tick is at
        // 3 ms, then every 10 ms.
        let last = 3 + 5 * 59;
        assert_eq!(
            ev,
            vec![
                (203 * MS, WdEvent::Storm { port: 0, prio: 3, paused_for_ns: 200 * MS }),
                // Restored at the first poll 200 ms after the last pause frame.
                (((last + 200 - 3u64).div_ceil(10) * 10 + 3) * MS, WdEvent::Restore { port: 0, prio: 3 }),
            ]
        );
        assert_eq!(w.stormed_mask(0), 0);
        assert!(!w.drops(0, 3));
    }

    #[test]
    fn while_stormed_drop_drops_and_keeps_the_pause() {
        let (mut w, mut rx) = wd(WdAction::Drop);
        let wire: Vec<_> = (0..50).map(|i| pfc(5 * i, 65535)).collect();
        let ev = thread(&mut w, &mut rx, &wire, 240 * MS);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(w.stormed_mask(0), 1 << 3);
        assert!(w.drops(0, 3) && !w.drops(0, 0) && !w.drops(1, 3));
        assert_eq!(w.effective_paused(0, 1 << 3), 1 << 3, "drop keeps the pause");
    }

    #[test]
    fn pauses_that_end_before_detect_time_are_no_storm() {
        let (mut w, mut rx) = wd(WdAction::Drop);
        // 150 ms paused (refreshed every 10 ms), 10 ms free, repeatedly, for a second.
        // (19532 quanta: 10.0004 ms at 1 Gbit/s, so each refresh lands inside the running pause.)
        let wire: Vec<_> = (0..1000).step_by(10).filter(|t| t % 160 < 150).map(|t| pfc(t, 19532)).collect();
        let ev = thread(&mut w, &mut rx, &wire, 1200 * MS);
        assert!(ev.is_empty(), "{ev:?}");
    }

    #[test]
    fn lossy_priorities_are_not_watched() {
        let (mut w, mut rx) = wd(WdAction::Drop);
        let wire: Vec<_> =
            (0..100).map(|i| (i * 5 * MS, Wire::Pfc { port: 0, enable: 1 << 0, quanta: 65535 })).collect();
        assert!(thread(&mut w, &mut rx, &wire, 600 * MS).is_empty());
        // (PfcRx does not even honour priority 0: PFC is not enabled on it.)
        rx.on_pause(0, 65535, 700 * MS);
        let mut out = vec![];
        w.tick(&rx, 700 * MS, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn forward_ignores_pauses_and_alert_only_reports() {
        let storm: Vec<_> =
            (0..60).map(|i| (i * 5 * MS, Wire::Pfc { port: 1, enable: 1 << 3, quanta: 65535 })).collect();
        let (mut f, mut rx) = wd(WdAction::Forward);
        assert_eq!(thread(&mut f, &mut rx, &storm, 250 * MS).len(), 1);
        assert_eq!(f.effective_paused(1, 0b1000_1000), 0b1000_0000);
        assert!(!f.drops(1, 3));
        let (mut a, mut rx) = wd(WdAction::Alert);
        assert_eq!(thread(&mut a, &mut rx, &storm, 250 * MS).len(), 1);
        assert_eq!(a.effective_paused(1, 1 << 3), 1 << 3);
        assert!(!a.drops(1, 3));
    }

    /// Detection counts from the pause frame that opened the pause, not from the first poll.
    #[test]
    fn detection_counts_from_the_first_pause_frame() {
        let (mut w, mut rx) = wd(WdAction::Drop);
        let mut out = vec![];
        for i in 0..40 {
            rx.on_pfc(0, 1 << 3, [65535; 8], 5 * MS + i * 5 * MS);
        }
        assert_eq!(w.tick(&rx, 204 * MS, &mut out), 214 * MS);
        assert!(out.is_empty());
        w.tick(&rx, 214 * MS, &mut out);
        assert_eq!(out, vec![WdEvent::Storm { port: 0, prio: 3, paused_for_ns: 209 * MS }]);
    }
}
