//! Egress scheduling between the eight queues of a port: strict priority for the strict queues,
//! deficit-weighted round robin (DWRR) for the others, configured as the book's NX-OS
//! "bandwidth remaining percent" (`qos.ets`, default queues 0 and 3 at 50/50).
//!
//! - Strict priority (IEEE 802.1Q-2018 §8.6.8.1): the strict queues (`qos.strict`, default
//!   queue 7, the CNPs) go first, the highest-numbered non-empty one first. As NX-OS's
//!   "priority level 1", a strict queue goes ahead of every weighted queue whatever its number
//!   (802.1Q orders the algorithms by traffic-class number; with strict 7 above ETS 0 and 3, the
//!   default, the two agree).
//! - ETS (§8.6.8.3) as deficit round robin (Shreedhar & Varghese, SIGCOMM 1995): the weighted
//!   queues (those with a percent) share what the strict queues leave. Their turns go round in
//!   queue order; a turn adds the queue's quantum to its deficit and sends head frames while
//!   the head fits in the deficit, taking each frame's bytes off it. The quanta are proportional
//!   to the percents, the smallest being [`QUANTUM_UNIT_BYTES`] (one 9216-byte jumbo frame), so
//!   every turn sends at least one frame, a pick visits at most eight queues, and a 50/50 split
//!   alternates one jumbo frame's worth of bytes. A queue that empties ends its turn and its
//!   deficit goes back to 0 (standard DWRR: an idle queue saves no credit).
//! - Unweighted queues (neither strict nor in `qos.ets`, i.e. 0 %) get nothing while a weighted
//!   queue can send; when none can, they are served in strict order among themselves, so their
//!   frames are never stranded (the switch stays work-conserving).
//! - PFC: a paused queue is skipped as if empty, but keeps its deficit: the part of its turn the
//!   pause interrupted is sent when its next turn comes (at most one quantum on top of that
//!   turn's). It earns nothing while paused, so a pause neither costs it its share nor lets it
//!   hoard credit.
//!
//! The data path asks [`Scheduler::pick_unpaused`] for the queue to serve, dequeues its head and
//! reports the frame with [`Scheduler::sent`]. A pick that is not followed by a dequeue (the
//! shaper said wait) changes nothing the next pick would not repeat: the same queue comes back
//! without a second quantum. Nothing here allocates; a pick is O(8).
use dataplane_common::limits::NUM_TC;
use rocefab_contracts::config::QosConfig;

use crate::queue::PortQueues;

/// Quantum of the weighted queue with the smallest percent: one 9216-byte frame (the MTU of
/// the RoCEv2 class, docs/src/lossless-qos.md). No frame is longer, so each turn sends one.
pub const QUANTUM_UNIT_BYTES: u32 = 9216;

/// Transmission selection of one egress port: strict priority, then DWRR.
#[derive(Debug, Clone)]
pub struct Scheduler {
    /// Bit per strict queue.
    strict: u8,
    /// Bit per weighted (DWRR) queue: a percent above 0 and not strict.
    weighted: u8,
    /// Bytes a weighted queue's turn adds to its deficit.
    quantum: [u32; NUM_TC],
    /// Bytes a weighted queue may still send (in its turn, or left from a turn a pause cut).
    deficit: [u32; NUM_TC],
    /// The weighted queue whose turn it is; `NUM_TC` before the first turn.
    cur: usize,
}

impl Default for Scheduler {
    /// The book's default: queue 7 strict, queues 0 and 3 at 50/50.
    fn default() -> Self {
        Scheduler::from_qos(&QosConfig::default())
    }
}

impl Scheduler {
    /// Strict queues `strict` (bit per queue), DWRR between the others by `percent` (per queue;
    /// 0 = unweighted). A percent of a strict queue is ignored.
    pub fn new(strict: u8, percent: [u8; NUM_TC]) -> Scheduler {
        let weighted =
            (0..NUM_TC).filter(|&tc| percent[tc] != 0 && strict & (1 << tc) == 0).fold(0u8, |m, tc| m | (1 << tc));
        let min =
            (0..NUM_TC).filter(|&tc| weighted & (1 << tc) != 0).map(|tc| u32::from(percent[tc])).min().unwrap_or(1);
        let quantum = std::array::from_fn(|tc| {
            if weighted & (1 << tc) != 0 {
                (u32::from(percent[tc]) * QUANTUM_UNIT_BYTES).div_ceil(min)
            } else {
                0
            }
        });
        Scheduler { strict, weighted, quantum, deficit: [0; NUM_TC], cur: NUM_TC }
    }

    /// The scheduler a switch's QoS configures: `strict_priorities` and `ets_percent`.
    pub fn from_qos(q: &QosConfig) -> Scheduler {
        Scheduler::new(q.strict_priorities, q.ets_percent)
    }

    /// Strict priority between all eight queues.
    pub fn strict_priority() -> Scheduler {
        Scheduler::new(0xff, [0; NUM_TC])
    }

    /// Bytes a turn of queue `tc` adds to its deficit (0 for a strict or unweighted queue).
    pub fn quantum(&self, tc: usize) -> u32 {
        self.quantum[tc]
    }

    /// The queue to serve next, or `None` when all are empty.
    #[inline]
    pub fn pick<D: Copy + Default>(&mut self, q: &PortQueues<D>) -> Option<usize> {
        self.pick_unpaused(q, 0)
    }

    /// The queue to serve next among those not in `paused` (bit per queue: the priorities a PFC
    /// frame from the peer stopped), or `None`. Dequeue its head, then call [`Scheduler::sent`].
    #[inline]
    pub fn pick_unpaused<D: Copy + Default>(&mut self, q: &PortQueues<D>, paused: u8) -> Option<usize> {
        let ready = q.nonempty() & !paused;
        let strict = ready & self.strict;
        if strict != 0 {
            return strict_priority(strict);
        }
        let weighted = ready & self.weighted;
        if weighted != 0 {
            return Some(self.dwrr(q, weighted));
        }
        // Only unweighted queues can send: strict order among them.
        strict_priority(ready)
    }

    /// The weighted queue to serve among `ready` (non-empty, not paused, weighted; not 0).
    #[inline]
    fn dwrr<D: Copy + Default>(&mut self, q: &PortQueues<D>, ready: u8) -> usize {
        let head = |tc: usize| q.head_len(tc).unwrap_or(0);
        let mut tc = self.cur;
        if tc < NUM_TC && ready & (1 << tc) != 0 && head(tc) <= self.deficit[tc] {
            return tc; // the turn goes on
        }
        // The turn is over (head does not fit, queue empty or paused): the next ready queue's
        // turn. Its quantum is at least any frame, so the first visit serves (a longer frame
        // would take more rounds, as in DRR).
        loop {
            tc = next_in(ready, tc);
            self.deficit[tc] = self.deficit[tc].saturating_add(self.quantum[tc]);
            self.cur = tc;
            if head(tc) <= self.deficit[tc] {
                return tc;
            }
        }
    }

    /// Queue `tc`'s head of `len` bytes was dequeued (call after every dequeue of a picked
    /// queue, with the queues as they are now). A weighted queue pays `len` from its deficit; one
    /// left empty ends its turn with deficit 0.
    #[inline]
    pub fn sent<D: Copy + Default>(&mut self, q: &PortQueues<D>, tc: usize, len: u32) {
        if self.weighted & (1 << tc) == 0 {
            return;
        }
        self.deficit[tc] = if q.nonempty() & (1 << tc) == 0 { 0 } else { self.deficit[tc].saturating_sub(len) };
    }

    /// Queue `tc` was emptied other than by dequeueing (PFC watchdog drop): it keeps no credit.
    pub fn emptied(&mut self, tc: usize) {
        self.deficit[tc] = 0;
    }
}

/// The lowest queue of `set` (not empty) above `tc`, else the lowest of `set`: the next turn
/// of a round in queue order.
#[inline(always)]
fn next_in(set: u8, tc: usize) -> usize {
    let above = if tc + 1 >= NUM_TC { 0 } else { set & (0xffu8 << (tc + 1)) };
    (if above != 0 { above } else { set }).trailing_zeros() as usize
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

    /// Eight queues of `(queue, sequence)` descriptors, no byte limit.
    fn port() -> PortQueues<(u8, u32)> {
        let stats = Arc::new(SwitchStats::new(1));
        PortQueues::with_capacities([1 << 16; NUM_TC], PortStatsRef::new(stats, 0))
    }

    fn percent(p: &[(usize, u8)]) -> [u8; NUM_TC] {
        let mut a = [0; NUM_TC];
        for &(tc, v) in p {
            a[tc] = v;
        }
        a
    }

    /// A seeded xorshift for frame sizes: the same sequence on every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        /// 64..=9000 bytes, mostly small or large as on a fabric.
        fn frame_len(&mut self) -> u32 {
            match self.next() % 4 {
                0 => 64,
                1 => 9000,
                _ => 64 + (self.next() % (9000 - 64 + 1)) as u32,
            }
        }
    }

    /// Picks, dequeues and reports `n` frames with `paused`; per queue the bytes and frames sent.
    fn serve(s: &mut Scheduler, q: &mut PortQueues<(u8, u32)>, paused: u8, n: usize) -> ([u64; NUM_TC], Vec<u8>) {
        let mut bytes = [0u64; NUM_TC];
        let mut order = vec![];
        for _ in 0..n {
            let Some(tc) = s.pick_unpaused(q, paused) else { break };
            assert_eq!(paused & (1 << tc), 0, "picked paused queue {tc}");
            let (d, len) = q.dequeue(tc).expect("picked queue has a frame");
            assert_eq!(d.0 as usize, tc);
            s.sent(q, tc, len);
            bytes[tc] += u64::from(len);
            order.push(tc as u8);
        }
        (bytes, order)
    }

    /// Keeps every queue of `tcs` holding at least `depth` frames of random sizes (more than the
    /// next [`serve`] takes, so the queues stay backlogged).
    fn top_up(q: &mut PortQueues<(u8, u32)>, tcs: &[u8], depth: usize, rng: &mut Rng, seq: &mut u32) {
        for &tc in tcs {
            while q.queue(tc as usize).len() < depth {
                *seq += 1;
                q.enqueue(tc, (tc, *seq), rng.frame_len()).unwrap();
            }
        }
    }

    fn share(bytes: &[u64; NUM_TC], tc: usize) -> f64 {
        bytes[tc] as f64 / bytes.iter().sum::<u64>() as f64
    }

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
    fn next_turn_goes_round_in_queue_order() {
        assert_eq!(next_in(0b1001, NUM_TC), 0);
        assert_eq!(next_in(0b1001, 0), 3);
        assert_eq!(next_in(0b1001, 3), 0);
        assert_eq!(next_in(0b1001, 1), 3);
        assert_eq!(next_in(0b1000_0001, 7), 0);
        assert_eq!(next_in(0b1000, 3), 3);
    }

    #[test]
    fn quanta_are_proportional_and_the_smallest_is_one_jumbo_frame() {
        let s = Scheduler::new(1 << 7, percent(&[(0, 70), (3, 30)]));
        assert_eq!(s.quantum(3), QUANTUM_UNIT_BYTES);
        assert_eq!(s.quantum(0), 70 * QUANTUM_UNIT_BYTES / 30);
        assert_eq!((s.quantum(7), s.quantum(1)), (0, 0));
        let d = Scheduler::default();
        assert_eq!((d.quantum(0), d.quantum(3)), (QUANTUM_UNIT_BYTES, QUANTUM_UNIT_BYTES));
        assert_eq!(Scheduler::new(0, percent(&[(1, 1), (2, 99)])).quantum(2), 99 * QUANTUM_UNIT_BYTES);
    }

    #[test]
    fn strict_priority_order_across_queues() {
        let mut q = port();
        // Interleave arrivals: 0, 3, 7, 0, 3, 7, ...
        for i in 0..4u32 {
            for tc in [0u8, 3, 7] {
                q.enqueue(tc, (tc, i), 100).unwrap();
            }
        }
        let mut s = Scheduler::strict_priority();
        let mut order = vec![];
        while let Some(tc) = s.pick(&q) {
            let (d, len) = q.dequeue(tc).unwrap();
            s.sent(&q, tc, len);
            order.push(d);
        }
        let want: Vec<(u8, u32)> = [7u8, 3, 0].iter().flat_map(|&tc| (0..4).map(move |i| (tc, i))).collect();
        assert_eq!(order, want);

        // A higher-priority arrival overtakes queued lower-priority frames.
        q.enqueue(0, (0, 10), 100).unwrap();
        q.enqueue(0, (0, 11), 100).unwrap();
        assert_eq!(s.pick(&q), Some(0));
        q.dequeue(0);
        q.enqueue(7, (7, 10), 100).unwrap();
        assert_eq!(s.pick(&q), Some(7));
    }

    #[test]
    fn backlogged_queues_get_their_byte_shares_with_mixed_frame_sizes() {
        for (a, b) in [(70u8, 30u8), (50, 50), (90, 10), (1, 99)] {
            let mut s = Scheduler::new(1 << 7, percent(&[(0, a), (3, b)]));
            let mut q = port();
            let (mut rng, mut seq) = (Rng(0x9e37_79b9_7f4a_7c15), 0);
            let mut bytes = [0u64; NUM_TC];
            // 200k frames (~900 MB): many rounds of the largest quantum (100 jumbo frames).
            for _ in 0..2000 {
                top_up(&mut q, &[0, 3], 128, &mut rng, &mut seq);
                let (b, _) = serve(&mut s, &mut q, 0, 100);
                for tc in 0..NUM_TC {
                    bytes[tc] += b[tc];
                }
            }
            let want = f64::from(a) / 100.0;
            let got = share(&bytes, 0);
            assert!(
                (got - want).abs() < 0.01,
                "{a}/{b}: queue 0 sent {got:.4} of the bytes, want {want:.2} ± 0.01 ({bytes:?})"
            );
            assert_eq!(bytes.iter().sum::<u64>(), bytes[0] + bytes[3]);
        }
    }

    #[test]
    fn default_is_fifty_fifty_alternating_about_a_jumbo_frame() {
        let mut s = Scheduler::default();
        let mut q = port();
        for i in 0..100u32 {
            q.enqueue(0, (0, i), 1500).unwrap();
            q.enqueue(3, (3, i), 1500).unwrap();
        }
        // Nine turns each: queue 0 at once, then 3, alternating.
        let (bytes, order) = serve(&mut s, &mut q, 0, 110);
        assert_eq!(bytes[0], bytes[3]);
        // 9216-byte quanta: six 1500-byte frames per turn, then the other queue.
        assert_eq!(&order[..18], &[0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn strict_queue_always_goes_first() {
        let mut s = Scheduler::new(1 << 7, percent(&[(0, 70), (3, 30)]));
        let mut q = port();
        let (mut rng, mut seq) = (Rng(7), 0);
        for round in 0..200 {
            top_up(&mut q, &[0, 3], 4, &mut rng, &mut seq);
            // A CNP arrives in the middle of a DWRR turn: it is the very next frame out.
            q.enqueue(7, (7, round), 64).unwrap();
            q.enqueue(7, (7, round + 1000), 64).unwrap();
            let (_, order) = serve(&mut s, &mut q, 0, 5);
            assert_eq!(&order[..2], &[7, 7], "round {round}: {order:?}");
            assert!(order[2..].iter().all(|&tc| tc == 0 || tc == 3), "{order:?}");
        }
        // A strict queue's frames do not eat into the weighted queues' shares.
        let mut bytes = [0u64; NUM_TC];
        for i in 0..2000 {
            top_up(&mut q, &[0, 3], 64, &mut rng, &mut seq);
            q.enqueue(7, (7, i), 64).unwrap();
            let (b, _) = serve(&mut s, &mut q, 0, 50);
            for tc in 0..NUM_TC {
                bytes[tc] += b[tc];
            }
        }
        let got = bytes[0] as f64 / (bytes[0] + bytes[3]) as f64;
        assert!((got - 0.7).abs() < 0.01, "{got}");
    }

    #[test]
    fn unweighted_queues_are_served_only_when_the_weighted_ones_are_empty() {
        let mut s = Scheduler::default(); // 0 and 3 weighted, 7 strict; 1, 2, 4, 5, 6 unweighted
        let mut q = port();
        for i in 0..20u32 {
            q.enqueue(1, (1, i), 1000).unwrap();
            q.enqueue(5, (5, i), 1000).unwrap();
        }
        for i in 0..30u32 {
            q.enqueue(0, (0, i), 1000).unwrap();
            q.enqueue(3, (3, i), 1000).unwrap();
        }
        let (_, order) = serve(&mut s, &mut q, 0, 100);
        // 60 weighted frames first, then the unweighted ones in strict order: 5 before 1.
        assert!(order[..60].iter().all(|&tc| tc == 0 || tc == 3), "{order:?}");
        assert!(order[60..80].iter().all(|&tc| tc == 5) && order[80..].iter().all(|&tc| tc == 1), "{order:?}");
        // A weighted arrival takes over at once again.
        for i in 0..3u32 {
            q.enqueue(1, (1, 100 + i), 1000).unwrap();
        }
        q.enqueue(3, (3, 100), 1000).unwrap();
        assert_eq!(serve(&mut s, &mut q, 0, 4).1, [3, 1, 1, 1]);
        // Weighted queues paused: the unweighted ones are served rather than nothing.
        q.enqueue(0, (0, 100), 1000).unwrap();
        q.enqueue(2, (2, 100), 1000).unwrap();
        assert_eq!(s.pick_unpaused(&q, 1 << 0), Some(2));
        assert_eq!(s.pick_unpaused(&q, 0), Some(0));
    }

    #[test]
    fn a_paused_queue_lets_the_other_take_everything_then_gets_its_share_again() {
        let mut s = Scheduler::new(1 << 7, percent(&[(0, 70), (3, 30)]));
        let mut q = port();
        let (mut rng, mut seq) = (Rng(42), 0);
        let mut run = |s: &mut Scheduler, q: &mut PortQueues<(u8, u32)>, paused: u8, rounds: usize| {
            let mut bytes = [0u64; NUM_TC];
            for _ in 0..rounds {
                top_up(q, &[0, 3], 128, &mut rng, &mut seq);
                let (b, _) = serve(s, q, paused, 100);
                for tc in 0..NUM_TC {
                    bytes[tc] += b[tc];
                }
            }
            bytes
        };
        run(&mut s, &mut q, 0, 7); // stop somewhere inside a round
                                   // Queue 0 (70 %) paused by PFC: queue 3 takes the whole link.
        let b = run(&mut s, &mut q, 1 << 0, 300);
        assert_eq!(b[0], 0);
        assert!(b[3] > 0);
        // Pause over: 70/30 again, queue 0 having kept what was left of its cut turn (at most
        // one quantum), no more.
        let b = run(&mut s, &mut q, 0, 1000);
        let got = share(&b, 0);
        assert!((got - 0.7).abs() < 0.01, "after the pause queue 0 sent {got:.4} of the bytes");
        // Queue 3 paused instead, then released: the same.
        let b = run(&mut s, &mut q, 1 << 3, 100);
        assert_eq!(b[3], 0);
        let got = share(&run(&mut s, &mut q, 0, 1000), 3);
        assert!((got - 0.3).abs() < 0.01, "after the pause queue 3 sent {got:.4} of the bytes");
    }

    #[test]
    fn a_pause_keeps_the_cut_turn_but_earns_nothing() {
        let mut s = Scheduler::new(0, percent(&[(0, 50), (3, 50)]));
        let mut q = port();
        for i in 0..40u32 {
            q.enqueue(0, (0, i), 1000).unwrap();
            q.enqueue(3, (3, i), 1000).unwrap();
        }
        // Queue 0's turn: 9216 bytes, two 1000-byte frames sent, then a pause.
        assert_eq!(serve(&mut s, &mut q, 0, 2).1, [0, 0]);
        // Paused for a long time: queue 3 sends 30 frames, its turns coming back to back.
        assert_eq!(serve(&mut s, &mut q, 1 << 0, 30).1, [3; 30]);
        // Queue 3 is 3 frames into its 4th turn (9 frames a turn, 216 bytes carried each time:
        // 6864 bytes left, 6 frames). Then queue 0 sends the 7216 bytes left of its cut turn
        // plus one quantum: 16 frames, then 3 again.
        let (_, order) = serve(&mut s, &mut q, 0, 6 + 16 + 1);
        assert_eq!(&order[..6], &[3; 6], "{order:?}");
        assert_eq!(&order[6..22], &[0; 16], "{order:?}");
        assert_eq!(order[22], 3, "{order:?}");
    }

    #[test]
    fn an_emptied_queue_starts_its_next_turn_from_zero() {
        let mut s = Scheduler::new(0, percent(&[(0, 50), (3, 50)]));
        let mut q = port();
        // Queue 0 sends one small frame and empties: its deficit is gone, not saved.
        q.enqueue(0, (0, 0), 100).unwrap();
        for i in 0..30u32 {
            q.enqueue(3, (3, i), 1000).unwrap();
        }
        assert_eq!(serve(&mut s, &mut q, 0, 1).1, [0]);
        for i in 1..30u32 {
            q.enqueue(0, (0, i), 1000).unwrap();
        }
        // 3's turn (9 frames), then 0's: 9 frames, not 9 + the 9116 bytes it did not use.
        let (_, order) = serve(&mut s, &mut q, 0, 19);
        assert_eq!(order, [[3u8; 9].as_slice(), &[0; 9], &[3]].concat());
    }

    #[test]
    fn a_pick_the_shaper_does_not_follow_changes_nothing() {
        let mut s = Scheduler::new(0, percent(&[(0, 50), (3, 50)]));
        let mut q = port();
        for i in 0..20u32 {
            q.enqueue(0, (0, i), 1000).unwrap();
            q.enqueue(3, (3, i), 1000).unwrap();
        }
        let mut order = vec![];
        for _ in 0..27 {
            // Ask three times, serve once.
            let tc = s.pick(&q).unwrap();
            assert_eq!(s.pick(&q), Some(tc));
            assert_eq!(s.pick(&q), Some(tc));
            let (_, len) = q.dequeue(tc).unwrap();
            s.sent(&q, tc, len);
            order.push(tc as u8);
        }
        assert_eq!(order, [[0u8; 9], [3; 9], [0; 9]].concat());
    }

    #[test]
    fn a_frame_longer_than_the_quantum_waits_for_enough_turns() {
        // Not possible on the data path (UMEM frames are 4 KiB), but the DRR rule still holds.
        let mut s = Scheduler::new(0, percent(&[(0, 50), (3, 50)]));
        let mut q = port();
        q.enqueue(0, (0, 0), 3 * QUANTUM_UNIT_BYTES).unwrap();
        for i in 0..40u32 {
            q.enqueue(3, (3, i), QUANTUM_UNIT_BYTES).unwrap();
        }
        let (_, order) = serve(&mut s, &mut q, 0, 4);
        // 0 (1 quantum), 3, 0 (2), 3, 0 (3): the long frame goes in its third turn.
        assert_eq!(order, [3, 3, 0, 3]);
    }
}
