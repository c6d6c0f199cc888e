//! Egress scheduling between the eight queues of a port.
//!
//! Strict priority (IEEE 802.1Q-2018 §8.6.8.1, "strict priority transmission selection"):
//! the highest-numbered non-empty queue always goes first. The [`Scheduler`] enum is the seam
//! where deficit-weighted round robin (802.1Q ETS, §8.6.8.3) plugs in later.
use crate::queue::PortQueues;

/// Transmission selection algorithm of one egress port.
#[derive(Debug, Clone, Default)]
pub enum Scheduler {
    /// Queue 7 first, then 6, …, then 0.
    #[default]
    StrictPriority,
}

impl Scheduler {
    /// The queue to serve next, or `None` when all are empty.
    #[inline]
    pub fn pick<D: Copy + Default>(&mut self, q: &PortQueues<D>) -> Option<usize> {
        self.pick_unpaused(q, 0)
    }

    /// The queue to serve next among those not in `paused` (bit per queue: the priorities a PFC
    /// frame from the peer stopped), or `None`.
    #[inline]
    pub fn pick_unpaused<D: Copy + Default>(&mut self, q: &PortQueues<D>, paused: u8) -> Option<usize> {
        match self {
            Scheduler::StrictPriority => strict_priority(q.nonempty() & !paused),
        }
    }
}

/// Highest set bit of the non-empty bitmap.
#[inline(always)]
pub fn strict_priority(nonempty: u8) -> Option<usize> {
    (nonempty != 0).then(|| 7 - nonempty.leading_zeros() as usize)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::queue::PortStatsRef;
    use crate::stats::SwitchStats;

    #[test]
    fn highest_nonempty_bit() {
        assert_eq!(strict_priority(0), None);
        assert_eq!(strict_priority(0b1), Some(0));
        assert_eq!(strict_priority(0b1000_1001), Some(7));
        assert_eq!(strict_priority(0b0000_1001), Some(3));
        for tc in 0..8 {
            assert_eq!(strict_priority(1 << tc), Some(tc));
        }
    }

    #[test]
    fn strict_priority_order_across_queues() {
        let stats = Arc::new(SwitchStats::new(1));
        let mut q: PortQueues<(u8, u32)> = PortQueues::new(64, 1 << 20, PortStatsRef::new(stats, 0));
        // Interleave arrivals: 0, 3, 7, 0, 3, 7, ...
        for i in 0..4u32 {
            for tc in [0u8, 3, 7] {
                q.enqueue(tc, (tc, i), 100).unwrap();
            }
        }
        let mut s = Scheduler::StrictPriority;
        let mut order = vec![];
        while let Some(tc) = s.pick(&q) {
            order.push(q.dequeue(tc).unwrap().0);
        }
        let want: Vec<(u8, u32)> =
            [7u8, 3, 0].iter().flat_map(|&tc| (0..4).map(move |i| (tc, i))).collect();
        assert_eq!(order, want);

        // A higher-priority arrival overtakes queued lower-priority frames.
        q.enqueue(0, (0, 10), 100).unwrap();
        q.enqueue(0, (0, 11), 100).unwrap();
        assert_eq!(s.pick(&q), Some(0));
        q.dequeue(0);
        q.enqueue(7, (7, 10), 100).unwrap();
        assert_eq!(s.pick(&q), Some(7));
    }
}
