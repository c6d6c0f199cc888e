//! Egress queues: per port, one FIFO per traffic class (IEEE 802.1Q priorities 0..=7), with
//! byte and packet accounting and a per-queue byte limit (tail drop above it).
//!
//! Frames stay where they are (in UMEM); a queue holds descriptors `D` and their lengths in a
//! ring preallocated at startup, so enqueue and dequeue never allocate.
use std::sync::Arc;

use dataplane_common::limits::NUM_TC;

use crate::stats::{PortStats, QueueStats};

/// A fixed-capacity FIFO of `(descriptor, length)` with a byte limit.
#[derive(Debug)]
pub struct Fifo<D> {
    slots: Box<[(D, u32)]>,
    head: usize,
    len: usize,
    depth_bytes: u64,
    limit_bytes: u64,
}

/// Why a frame was not enqueued (the descriptor is handed back to the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Depth + frame would exceed the byte limit.
    ByteLimit,
    /// All descriptor slots are in use.
    Full,
}

impl<D: Copy + Default> Fifo<D> {
    /// A FIFO with room for `capacity` descriptors (≥ 1) and at most `limit_bytes` queued.
    pub fn new(capacity: usize, limit_bytes: u64) -> Self {
        Fifo {
            slots: vec![(D::default(), 0); capacity.max(1)].into_boxed_slice(),
            head: 0,
            len: 0,
            depth_bytes: 0,
            limit_bytes,
        }
    }

    /// Appends, or returns the descriptor with the reason for the tail drop.
    #[inline]
    pub fn push(&mut self, d: D, bytes: u32) -> Result<(), (D, DropReason)> {
        if self.depth_bytes + bytes as u64 > self.limit_bytes {
            return Err((d, DropReason::ByteLimit));
        }
        if self.len == self.slots.len() {
            return Err((d, DropReason::Full));
        }
        let mut tail = self.head + self.len;
        if tail >= self.slots.len() {
            tail -= self.slots.len();
        }
        self.slots[tail] = (d, bytes);
        self.len += 1;
        self.depth_bytes += bytes as u64;
        Ok(())
    }

    /// The descriptor at the head.
    #[inline]
    pub fn head(&self) -> Option<&D> {
        (self.len > 0).then(|| &self.slots[self.head].0)
    }

    /// Length of the frame at the head.
    #[inline]
    pub fn head_len(&self) -> Option<u32> {
        (self.len > 0).then(|| self.slots[self.head].1)
    }

    /// Removes the head.
    #[inline]
    pub fn pop(&mut self) -> Option<(D, u32)> {
        if self.len == 0 {
            return None;
        }
        let e = self.slots[self.head];
        self.head += 1;
        if self.head == self.slots.len() {
            self.head = 0;
        }
        self.len -= 1;
        self.depth_bytes -= e.1 as u64;
        Some(e)
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn depth_bytes(&self) -> u64 {
        self.depth_bytes
    }
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

/// The eight queues of one egress port plus their counters.
#[derive(Debug)]
pub struct PortQueues<D> {
    fifos: [Fifo<D>; NUM_TC],
    /// Bit `tc` set when queue `tc` is non-empty (lets strict priority pick in O(1)).
    nonempty: u8,
    stats: PortStatsRef,
}

/// Where a [`PortQueues`] publishes its counters: the port's entry in the switch stats.
#[derive(Debug)]
pub struct PortStatsRef {
    stats: Arc<crate::stats::SwitchStats>,
    port: usize,
}

impl PortStatsRef {
    pub fn new(stats: Arc<crate::stats::SwitchStats>, port: usize) -> Self {
        assert!(port < stats.ports.len(), "port {port} has no stats entry");
        PortStatsRef { stats, port }
    }
    #[inline(always)]
    fn port(&self) -> &PortStats {
        &self.stats.ports[self.port]
    }
    #[inline(always)]
    fn queue(&self, tc: usize) -> &QueueStats {
        &self.port().queues[tc]
    }
}

impl<D: Copy + Default> PortQueues<D> {
    /// Eight queues of `capacity` descriptors and `limit_bytes` each, counting into `stats`.
    pub fn new(capacity: usize, limit_bytes: u64, stats: PortStatsRef) -> Self {
        PortQueues { fifos: std::array::from_fn(|_| Fifo::new(capacity, limit_bytes)), nonempty: 0, stats }
    }

    /// Eight queues with their own descriptor capacities and no byte limit: admission is decided
    /// before enqueueing, by the shared buffer ([`crate::buffer`]).
    pub fn with_capacities(capacity: [usize; NUM_TC], stats: PortStatsRef) -> Self {
        PortQueues { fifos: std::array::from_fn(|tc| Fifo::new(capacity[tc], u64::MAX)), nonempty: 0, stats }
    }

    /// Enqueues on traffic class `tc` (0..=7; larger values are clamped to 7). On tail drop the
    /// descriptor comes back so the caller can recycle its buffer.
    #[inline]
    pub fn enqueue(&mut self, tc: u8, d: D, bytes: u32) -> Result<(), D> {
        let tc = (tc as usize).min(NUM_TC - 1);
        let q = self.stats.queue(tc);
        match self.fifos[tc].push(d, bytes) {
            Ok(()) => {
                self.nonempty |= 1 << tc;
                q.enqueued_packets.inc();
                q.enqueued_bytes.add(bytes as u64);
                let depth = self.fifos[tc].depth_bytes();
                q.depth_bytes.set(depth);
                q.peak_depth_bytes.raise(depth);
                q.depth_packets.set(self.fifos[tc].len() as u64);
                Ok(())
            }
            Err((d, _why)) => {
                q.dropped_packets.inc();
                q.dropped_bytes.add(bytes as u64);
                Err(d)
            }
        }
    }

    /// Dequeues the head of queue `tc`.
    #[inline]
    pub fn dequeue(&mut self, tc: usize) -> Option<(D, u32)> {
        let f = &mut self.fifos[tc];
        let e = f.pop()?;
        if f.is_empty() {
            self.nonempty &= !(1 << tc);
        }
        let q = self.stats.queue(tc);
        q.dequeued_packets.inc();
        q.dequeued_bytes.add(e.1 as u64);
        q.depth_bytes.set(f.depth_bytes());
        q.depth_packets.set(f.len() as u64);
        Some(e)
    }

    /// Bitmap of non-empty queues (bit i = queue i).
    #[inline(always)]
    pub fn nonempty(&self) -> u8 {
        self.nonempty
    }

    /// Length of the head frame of queue `tc`.
    #[inline]
    pub fn head_len(&self, tc: usize) -> Option<u32> {
        self.fifos[tc].head_len()
    }

    pub fn queue(&self, tc: usize) -> &Fifo<D> {
        &self.fifos[tc]
    }

    /// Total queued packets over the 8 queues.
    pub fn total_packets(&self) -> usize {
        self.fifos.iter().map(Fifo::len).sum()
    }

    /// Removes every descriptor of queue `tc` (PFC watchdog drop), without counting them as
    /// dequeued; `f` gets each descriptor and its length.
    pub fn drain_queue(&mut self, tc: usize, mut f: impl FnMut(D, u32)) {
        let fifo = &mut self.fifos[tc];
        while let Some((d, len)) = fifo.pop() {
            f(d, len);
        }
        self.nonempty &= !(1 << tc);
        let q = self.stats.queue(tc);
        q.depth_bytes.set(0);
        q.depth_packets.set(0);
    }

    /// Removes every queued descriptor (shutdown), without counting them as dequeued.
    pub fn drain(&mut self, mut f: impl FnMut(D)) {
        for (tc, fifo) in self.fifos.iter_mut().enumerate() {
            while let Some((d, _)) = fifo.pop() {
                f(d);
            }
            let q = self.stats.queue(tc);
            q.depth_bytes.set(0);
            q.depth_packets.set(0);
        }
        self.nonempty = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::SwitchStats;

    fn port(limit: u64, cap: usize) -> (PortQueues<u32>, Arc<SwitchStats>) {
        let stats = Arc::new(SwitchStats::new(2));
        (PortQueues::new(cap, limit, PortStatsRef::new(stats.clone(), 1)), stats)
    }

    #[test]
    fn fifo_order_and_wraparound() {
        let mut f = Fifo::<u32>::new(3, 1 << 20);
        for round in 0..5u32 {
            for i in 0..3 {
                f.push(round * 10 + i, 100 + i).unwrap();
            }
            assert_eq!(f.push(99, 1), Err((99, DropReason::Full)));
            assert_eq!(f.depth_bytes(), 303);
            for i in 0..3 {
                assert_eq!(f.head_len(), Some(100 + i));
                assert_eq!(f.pop(), Some((round * 10 + i, 100 + i)));
            }
            assert_eq!(f.pop(), None);
            assert_eq!(f.depth_bytes(), 0);
        }
    }

    #[test]
    fn accounting_and_tail_drop_at_byte_limit() {
        // limit 4000 bytes: three 1500-byte frames do not fit, two do (3000), a 1000-byte one
        // exactly fills the queue (4000), anything more is dropped.
        let (mut q, stats) = port(4000, 64);
        assert!(q.enqueue(3, 1, 1500).is_ok());
        assert!(q.enqueue(3, 2, 1500).is_ok());
        assert_eq!(q.enqueue(3, 3, 1500), Err(3));
        assert!(q.enqueue(3, 4, 1000).is_ok());
        assert_eq!(q.enqueue(3, 5, 1), Err(5));
        // Other queues have their own limit.
        assert!(q.enqueue(0, 6, 1500).is_ok());
        let s = &stats.ports[1].queues[3];
        assert_eq!(s.enqueued_packets.get(), 3);
        assert_eq!(s.enqueued_bytes.get(), 4000);
        assert_eq!(s.dropped_packets.get(), 2);
        assert_eq!(s.dropped_bytes.get(), 1501);
        assert_eq!(s.depth_bytes.get(), 4000);
        assert_eq!(s.depth_packets.get(), 3);
        assert_eq!(stats.ports[1].queues[0].depth_bytes.get(), 1500);
        assert_eq!(stats.ports[0].queues[3].enqueued_packets.get(), 0, "port 0 untouched");
        assert_eq!(q.nonempty(), 0b0000_1001);

        assert_eq!(q.dequeue(3), Some((1, 1500)));
        assert_eq!(s.dequeued_packets.get(), 1);
        assert_eq!(s.dequeued_bytes.get(), 1500);
        assert_eq!(s.depth_bytes.get(), 2500);
        // Room again after the dequeue.
        assert!(q.enqueue(3, 7, 1500).is_ok());
        assert_eq!(s.depth_bytes.get(), 4000);
        let mut out = vec![];
        while let Some((d, _)) = q.dequeue(3) {
            out.push(d);
        }
        assert_eq!(out, vec![2, 4, 7]);
        assert_eq!(q.nonempty(), 0b0000_0001);
        assert_eq!(s.depth_bytes.get(), 0);
        assert_eq!(s.depth_packets.get(), 0);
        assert_eq!(s.peak_depth_bytes.get(), 4000, "the watermark stays at the highest depth");
        assert_eq!(stats.ports[1].queues[0].peak_depth_bytes.get(), 1500);
    }

    #[test]
    fn descriptor_capacity_drops_too() {
        let (mut q, stats) = port(1 << 20, 2);
        assert!(q.enqueue(7, 1, 60).is_ok());
        assert!(q.enqueue(7, 2, 60).is_ok());
        assert_eq!(q.enqueue(7, 3, 60), Err(3));
        assert_eq!(stats.ports[1].queues[7].dropped_packets.get(), 1);
    }

    #[test]
    fn drain_returns_everything() {
        let (mut q, stats) = port(1 << 20, 8);
        for i in 0..8u32 {
            q.enqueue(i as u8, i, 100).unwrap();
        }
        assert_eq!(q.total_packets(), 8);
        let mut got = vec![];
        q.drain(|d| got.push(d));
        got.sort();
        assert_eq!(got, (0..8).collect::<Vec<_>>());
        assert_eq!(q.nonempty(), 0);
        assert!(stats.ports[1].queues.iter().all(|s| s.depth_bytes.get() == 0));
    }
}
