//! Live statistics shared between the data-plane thread (the only writer) and the metrics
//! exporter (readers, on scrape).
//!
//! Every value is an [`AtomicU64`] written by exactly one thread with a plain load + store
//! (`Relaxed`), which compiles to an ordinary memory add on x86: no lock prefix, no lock shared
//! with the control side, nothing allocated per packet. Readers see each value tear-free.
//!
//! Values that must be read together (a queue's depth-time integral with the time and depth it
//! was taken at, a port's stall log) sit behind a [`SeqLock`]: the writer never waits, a reader
//! retries while a write is under way.
use std::sync::atomic::{fence, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

use rocefab_contracts::time::MonoClock;

use dataplane_common::limits::NUM_TC;

/// A single-writer statistic. Only one thread may call [`Stat::add`] / [`Stat::set`];
/// any thread may call [`Stat::get`].
#[derive(Debug, Default)]
pub struct Stat(AtomicU64);

impl Stat {
    /// Adds `n` (single writer: a load and a store, not an atomic read-modify-write).
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    /// Adds one.
    #[inline(always)]
    pub fn inc(&self) {
        self.add(1);
    }
    /// Overwrites the value (gauges).
    #[inline(always)]
    pub fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }
    /// Raises a watermark to `v` if `v` is higher (single writer: a compare and, only when it
    /// rises, a store).
    #[inline(always)]
    pub fn raise(&self, v: u64) {
        if v > self.0.load(Relaxed) {
            self.0.store(v, Relaxed);
        }
    }
    /// Current value.
    #[inline(always)]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// `N` words written together by one thread and read consistently by any other (a sequence
/// lock: the writer makes the sequence odd, stores, makes it even; a reader retries when the
/// sequence was odd or changed while it read). The writer never blocks; nothing is allocated.
#[derive(Debug)]
pub struct SeqLock<const N: usize> {
    seq: AtomicU64,
    words: [AtomicU64; N],
}

impl<const N: usize> Default for SeqLock<N> {
    fn default() -> Self {
        SeqLock { seq: AtomicU64::new(0), words: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl<const N: usize> SeqLock<N> {
    /// Single writer: `f` changes the current words, which are then published together.
    #[inline(always)]
    pub fn update(&self, f: impl FnOnce(&mut [u64; N])) {
        // The single writer always sees its own last stores.
        let mut w: [u64; N] = std::array::from_fn(|i| self.words[i].load(Relaxed));
        f(&mut w);
        let s = self.seq.load(Relaxed);
        self.seq.store(s.wrapping_add(1), Relaxed);
        fence(Release);
        for (a, v) in self.words.iter().zip(w) {
            a.store(v, Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Release);
    }

    /// A consistent copy of the words (retries while the writer is in the middle of an update).
    pub fn read(&self) -> [u64; N] {
        let mut tries = 0u32;
        loop {
            let s1 = self.seq.load(Acquire);
            let w: [u64; N] = std::array::from_fn(|i| self.words[i].load(Relaxed));
            fence(Acquire);
            let s2 = self.seq.load(Relaxed);
            if s1 == s2 && s1.is_multiple_of(2) {
                return w;
            }
            tries += 1;
            if tries > 16 {
                // The writer was preempted mid-update: let it run.
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// The time integral of a queue's depth (depth × time, exact: added at every change of the
/// depth with the data-plane pass clock), for the time-weighted average depth over any
/// interval: the difference of two readings of [`DepthArea::area_at`] over the time between them.
/// Words: area (low, high 64 bits, byte·ns of the data-plane clock), the time of the last
/// change (ns), the depth since then (bytes).
#[derive(Debug, Default)]
pub struct DepthArea(SeqLock<4>);

impl DepthArea {
    /// Single writer: the depth becomes `depth` bytes at `now_ns` (the pass clock, never
    /// decreasing); the depth it had since the last change is added for the time in between.
    #[inline(always)]
    pub fn set(&self, now_ns: u64, depth: u64) {
        self.0.update(|w| {
            let dt = now_ns.saturating_sub(w[2]);
            let area = (u128::from(w[1]) << 64 | u128::from(w[0])).wrapping_add(u128::from(w[3]) * u128::from(dt));
            *w = [area as u64, (area >> 64) as u64, w[2].max(now_ns), depth];
        });
    }

    /// The integral from the clock's origin to `now_ns` (byte·ns; `now_ns` at or after the last
    /// change: the depth since then counts up to it), and the depth now.
    pub fn area_at(&self, now_ns: u64) -> (u128, u64) {
        let w = self.0.read();
        let area = u128::from(w[1]) << 64 | u128::from(w[0]);
        (area + u128::from(w[3]) * u128::from(now_ns.saturating_sub(w[2])), w[3])
    }
}

/// How many of a port's latest stalls its [`StallLog`] keeps.
pub const STALL_LOG_LEN: usize = 8;

/// One TX stall of a port: it had frames queued that the peer did not pause and sent nothing
/// from `at_ns` for `ns` (data-plane clock, wall ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stall {
    pub at_ns: u64,
    pub ns: u64,
}

/// A port's TX stalls ([`crate::stall`]): how many, their total time, the longest, and the
/// latest [`STALL_LOG_LEN`] (when and how long). Words: count, total ns, longest (at, ns),
/// the frame time the threshold counts in (ns), then the ring of (at, ns).
#[derive(Debug, Default)]
pub struct StallLog(SeqLock<{ 5 + 2 * STALL_LOG_LEN }>);

/// What a [`StallLog`] holds, read consistently.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StallRecord {
    pub count: u64,
    pub total_ns: u64,
    pub longest: Stall,
    /// Serialisation time of the largest frame the port had sent when the last stall was
    /// logged, wall ns: a stall is logged when it is longer than
    /// [`crate::stall::STALL_FRAME_TIMES`] of these.
    pub frame_ns: u64,
    /// The latest stalls, oldest first (at most [`STALL_LOG_LEN`]).
    pub latest: Vec<Stall>,
}

impl StallLog {
    /// Single writer: logs a stall (`frame_ns`: the frame time its threshold counted in).
    pub fn log(&self, s: Stall, frame_ns: u64) {
        self.0.update(|w| {
            let slot = 5 + 2 * (w[0] as usize % STALL_LOG_LEN);
            w[slot] = s.at_ns;
            w[slot + 1] = s.ns;
            w[0] += 1;
            w[1] = w[1].wrapping_add(s.ns);
            if s.ns > w[3] {
                (w[2], w[3]) = (s.at_ns, s.ns);
            }
            w[4] = frame_ns;
        });
    }

    /// A consistent copy (allocates: control side only).
    pub fn read(&self) -> StallRecord {
        let w = self.0.read();
        let count = w[0];
        let kept = (count as usize).min(STALL_LOG_LEN);
        let latest = (0..kept)
            .map(|k| {
                let i = (count as usize - kept + k) % STALL_LOG_LEN;
                Stall { at_ns: w[5 + 2 * i], ns: w[6 + 2 * i] }
            })
            .collect();
        StallRecord { count, total_ns: w[1], longest: Stall { at_ns: w[2], ns: w[3] }, frame_ns: w[4], latest }
    }
}

/// Counters of one egress queue.
#[derive(Debug, Default)]
pub struct QueueStats {
    pub enqueued_packets: Stat,
    pub enqueued_bytes: Stat,
    pub dequeued_packets: Stat,
    pub dequeued_bytes: Stat,
    /// Tail drops (queue over its byte limit or out of descriptor slots).
    pub dropped_packets: Stat,
    pub dropped_bytes: Stat,
    /// Current depth in frame bytes (gauge).
    pub depth_bytes: Stat,
    /// Current depth in packets (gauge).
    pub depth_packets: Stat,
    /// Highest depth in frame bytes since the daemon started (watermark, raised on enqueue).
    pub peak_depth_bytes: Stat,
    /// Longest time a frame waited in the queue since the daemon started: from its enqueue (the
    /// pass that admitted it; on a delayed port, the end of its receive line) to its departure
    /// in the port's shaper schedule (when it starts on the emulated wire, as a capture stamps
    /// it). Wall ns on the data-plane clock (watermark, raised at dequeue).
    pub sojourn_max_ns: Stat,
    /// Current depth as the shared buffer charges it: whole cells × cell size (frame bytes when
    /// the cell is 0). What WRED, the queue limit and the buffer thresholds act on (gauge).
    pub depth_cell_bytes: Stat,
    /// Highest `depth_cell_bytes` since the daemon started (raised on admission).
    pub peak_depth_cell_bytes: Stat,
    /// Highest `depth_cell_bytes` since the current peak window opened ([`SwitchStats::open_peak_window`]:
    /// `rocefab run` opens one per job), raised on admission beside the daemon's watermark.
    pub window_peak_cell_bytes: WindowPeak,
    /// Time integral of `depth_cell_bytes` (updated with it, at admission and release).
    pub depth_cell_area: DepthArea,
    /// Frames WRED marked CE as they were dequeued (`wred.at: dequeue`; the XDP program counts
    /// the marks at enqueue, per ingress port).
    pub ecn_marked_dequeue: Stat,
    /// Not-ECT frames WRED dropped as they were dequeued (`wred.at: dequeue`).
    pub wred_dropped_dequeue: Stat,
    /// Dropped at admission by the shared buffer (lossy: queue or shared pool full, or no UMEM
    /// frame left for the configured buffer).
    pub admission_dropped_packets: Stat,
    /// Of those, dropped because every UMEM frame of the buffer's shared budget was held.
    pub no_frame_dropped_packets: Stat,
    /// Dropped by the PFC watchdog (action drop) while this queue was stormed.
    pub pfcwd_dropped_packets: Stat,
    /// Frames this queue failed to admit that were trimmed instead (`qos.trim`,
    /// [`crate::trim`]; SAI `SAI_QUEUE_STAT_TRIM_PACKETS`): cut and offered to the trim queue.
    /// As in SAI, the originals also count as admission drops above.
    pub trimmed_packets: Stat,
    /// Bytes cut off those frames (their lengths less the trim size).
    pub trimmed_bytes: Stat,
    /// Of the trimmed frames, those the trim queue did not admit either (SAI
    /// `SAI_QUEUE_STAT_DROPPED_TRIM_PACKETS`); the rest were queued there.
    pub trim_dropped_packets: Stat,
    /// WRED queues: ECT or CE packets enqueued, per depth band the packet found at enqueue
    /// ([`crate::depths::band_of`]).
    pub wred_band_ect: [Stat; crate::depths::BANDS],
    /// Of those, the ones that were CE at enqueue (marked by this switch's XDP, or upstream).
    pub wred_band_ce: [Stat; crate::depths::BANDS],
}

/// Per priority of one port: PFC sent and received, the ingress priority group's occupancy,
/// and the PFC watchdog of the egress queue with that number.
#[derive(Debug, Default)]
pub struct PrioStats {
    /// PFC frames sent out of this port with this priority's bit set (XOFF, refresh and XON).
    pub pfc_tx_frames: Stat,
    /// Pause onsets: XOFFs sent because the ingress group crossed xOFF (the priority goes from
    /// not paused to paused at the peer). Not refreshes, not XONs.
    pub pause_onsets: Stat,
    /// PFC frames received on this port with this priority's bit set (802.3x PAUSE counts for
    /// every priority).
    pub pfc_rx_frames: Stat,
    /// Of those PFC frames, the ones ignored because PFC is not enabled on this priority (not
    /// in the port's PFC enable vector, the lossless priorities).
    pub pfc_rx_ignored_frames: Stat,
    /// Cumulative time this egress priority was paused by the peer, ns.
    pub paused_ns: Stat,
    /// Bytes charged to the ingress priority group (port, priority), gauge.
    pub pg_bytes: Stat,
    /// Highest `pg_bytes` since the daemon started (watermark, raised on admission).
    pub pg_peak_bytes: Stat,
    /// Highest headroom the group held since the daemon started: the lossless bytes admitted
    /// past xOFF (or past a full shared pool), watermark raised on admission.
    pub headroom_peak_bytes: Stat,
    /// Lossless frames lost because the group's headroom was full.
    pub headroom_overflow: Stat,
    /// PFC watchdog storms detected / restored on this egress queue.
    pub pfcwd_storms: Stat,
    pub pfcwd_restores: Stat,
}

/// Counters of one switch port, as seen by the daemon (the XDP program keeps its own).
#[derive(Debug, Default)]
pub struct PortStats {
    /// Frames received on the port's AF_XDP socket (Ethernet bytes; the Decision metadata is not counted).
    pub rx_packets: Stat,
    pub rx_bytes: Stat,
    /// Frames handed to the port's TX ring.
    pub tx_packets: Stat,
    pub tx_bytes: Stat,
    /// Descriptors without a valid Decision in their XDP metadata, or with out-of-range fields.
    pub rx_invalid: Stat,
    /// LLDP frames steered to userspace (handed to the control side's LLDP/DCBX agent).
    pub rx_lldp: Stat,
    /// LLDP frames not handed to the agent: its ring was full or the frame longer than 1514 bytes.
    pub rx_lldp_dropped: Stat,
    /// MAC-control (PAUSE/PFC) frames steered to userspace.
    pub rx_mac_control: Stat,
    /// Forwarded frames the L3 rewrite refused (truncated, unknown EtherType, TTL ≤ 1).
    pub rewrite_errors: Stat,
    /// MAC-control frames that did not parse (too short, bad EtherType) or had an unknown opcode.
    pub rx_mac_control_malformed: Stat,
    /// Frames the switch wanted to originate (PFC) but found no frame in its reserved pool for.
    pub own_pool_empty: Stat,
    /// Bit p set: the peer's PFC pauses egress priority p of this port now (gauge, written by
    /// the data-plane thread where it publishes paused time).
    pub paused_mask: Stat,
    /// Times the port had frames queued that the peer did not pause and sent nothing for
    /// longer than a few frame times ([`crate::stall`]).
    pub stalls: StallLog,
    /// Set by the control side's carrier watch while the kernel reports the port without
    /// carrier, at once (the routing's debounce only delays moving its ECMP groups); the data
    /// plane reads it every pass and then drops what it holds for the port (the only field the
    /// control side writes).
    pub no_carrier: std::sync::atomic::AtomicBool,
    /// Frames dropped because the port had no carrier: queued for it when the carrier went,
    /// on its line (the cable's latency) or the switch's control queue, or arriving for it
    /// before its ECMP groups moved. A switch ASIC flushes a down port's queues the same way,
    /// so that a lossless queue that can never drain does not pause its senders for good.
    pub carrier_dropped: Stat,
    /// Frames on the port's AF_XDP TX ring that the kernel has not taken yet (gauge). The
    /// kernel takes none while the interface is administratively down (`sendto` fails with
    /// ENETDOWN) and would send them when it is up again: `rocefab restore` brings that end up
    /// alone first, without carrier, so that the kernel drops them as a dead cable, and waits
    /// for this to read 0.
    pub tx_ring_unsent: Stat,
    /// The data-plane clock (ns, at least 1) of the pass that last handed frames to the port
    /// (its TX ring, or its cable when it has a latency), as `tx_packets` counts them; 0: none
    /// yet. A cut link's report reads it: how long an end kept sending into the dead link.
    pub last_tx_at: Stat,
    /// The data-plane clock (ns, at least 1) at which the data plane first acted on the port's
    /// present carrier loss ([`PortStats::no_carrier`]); 0 while it acts on the port as having
    /// carrier. Written by the data-plane thread, after [`PortStats::tx_ring_unsent`] (read on
    /// the same pass) and before it drops anything: from then on it hands the port nothing, so
    /// `last_tx_at` is at most this until the carrier is back. `rocefab fail` waits for it
    /// before it empties the TX ring.
    pub carrier_lost_at: Stat,
    /// Per traffic class egress queues of this port.
    pub queues: [QueueStats; NUM_TC],
    /// Per priority PFC and priority-group counters.
    pub prio: [PrioStats; NUM_TC],
}

/// All statistics of one switch.
#[derive(Debug)]
pub struct SwitchStats {
    pub ports: Vec<PortStats>,
    /// UMEM frames not in use (free pool), gauge.
    pub free_frames: Stat,
    /// PFC reaction time: an ingress group crossing xOFF → its PFC frame handed to the wire.
    pub pfc_reaction: Histogram,
    /// The data-plane clock: every time above (stall starts, [`DepthArea`] changes) is ns on it.
    pub clock: MonoClock,
    /// Number of the current peak window (0: none opened since the daemon started).
    pub peak_window: AtomicU64,
}

impl SwitchStats {
    pub fn new(ports: usize) -> Self {
        Self::with_clock(ports, MonoClock::new())
    }

    /// Statistics whose data-plane clock is `clock` (tests inject one).
    pub fn with_clock(ports: usize, clock: MonoClock) -> Self {
        SwitchStats {
            ports: (0..ports).map(|_| PortStats::default()).collect(),
            free_frames: Stat::default(),
            pfc_reaction: Histogram::default(),
            clock,
            peak_window: AtomicU64::new(0),
        }
    }

    /// Opens a new peak window (the control side; `POST /peak-window`): every queue's window
    /// peak restarts from its depth now. Returns the window's number.
    pub fn open_peak_window(&self) -> u64 {
        for p in &self.ports {
            for q in &p.queues {
                q.window_peak_cell_bytes.restart(q.depth_cell_bytes.get());
            }
        }
        self.peak_window.fetch_add(1, Relaxed) + 1
    }
}

/// A watermark over a window the control side opens ([`SwitchStats::open_peak_window`]) while the
/// data-plane thread raises it: the one statistic with two writers. The data plane's raise is a
/// load and a store, as [`Stat::raise`]; one racing a restart can only store a depth the queue
/// had at the restart's instant, which belongs to the new window, or miss a rise that happened
/// in that same instant. No lock, no read-modify-write on the data path.
#[derive(Debug, Default)]
pub struct WindowPeak(AtomicU64);

impl WindowPeak {
    /// The data plane: raises the watermark to `v` if `v` is higher.
    #[inline(always)]
    pub fn raise(&self, v: u64) {
        if v > self.0.load(Relaxed) {
            self.0.store(v, Relaxed);
        }
    }
    /// The control side: a new window starting at depth `v`.
    pub fn restart(&self, v: u64) {
        self.0.store(v, Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Upper bounds of the [`Histogram`] buckets, ns (1 µs … 10 ms; the last bucket is +Inf).
pub const HISTOGRAM_BOUNDS_NS: [u64; 20] = [
    1_000, 2_000, 3_000, 5_000, 7_500, 10_000, 15_000, 20_000, 30_000, 50_000, 75_000, 100_000, 150_000, 200_000,
    300_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000,
];

/// A single-writer latency histogram with fixed buckets ([`HISTOGRAM_BOUNDS_NS`] and +Inf).
#[derive(Debug, Default)]
pub struct Histogram {
    /// Non-cumulative count per bucket; the last is +Inf.
    pub buckets: [Stat; HISTOGRAM_BOUNDS_NS.len() + 1],
    pub sum_ns: Stat,
    pub count: Stat,
}

impl Histogram {
    /// Records one observation (single writer).
    #[inline]
    pub fn observe(&self, ns: u64) {
        let i = HISTOGRAM_BOUNDS_NS.partition_point(|&b| b < ns);
        self.buckets[i].inc();
        self.sum_ns.add(ns);
        self.count.inc();
    }

    /// The `q`-quantile (0..=1) as the upper bound of the bucket holding it, ns; `None` when
    /// empty, `u64::MAX` when it falls into +Inf.
    pub fn quantile_upper_ns(&self, q: f64) -> Option<u64> {
        let total = self.count.get();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.get();
            if seen >= rank {
                return Some(HISTOGRAM_BOUNDS_NS.get(i).copied().unwrap_or(u64::MAX));
            }
        }
        Some(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A known depth-time profile, times injected (ns on the pass clock): the integral is the
    /// sum of depth × duration of every step, the average that over the interval.
    #[test]
    fn depth_area_integrates_a_known_profile_exactly() {
        let a = DepthArea::default();
        assert_eq!(a.area_at(1_000), (0, 0));
        // 0 until 100, 1000 B until 300, 4000 B until 350 (two changes in the same pass at 300:
        // 2500 then 4000, the first lasting 0 ns), 500 B until 1000, then empty.
        a.set(100, 1_000);
        a.set(300, 2_500);
        a.set(300, 4_000);
        a.set(350, 500);
        a.set(1_000, 0);
        let area = 1_000 * 200 + 4_000 * 50 + 500 * 650;
        assert_eq!(a.area_at(1_000), (area, 0));
        assert_eq!(a.area_at(5_000), (area, 0), "an empty queue adds nothing");
        // Over [0, 1000] the time-weighted average is 725 B (the peak is 4000 B).
        assert_eq!(a.area_at(1_000).0 as f64 / 1_000.0, 725.0);
        // A depth still standing counts up to the reading's time.
        a.set(2_000, 10_000);
        assert_eq!(a.area_at(2_500), (area + 10_000 * 500, 10_000));
        // Between two readings: the average over that interval only.
        let (a1, _) = a.area_at(2_100);
        let (a2, _) = a.area_at(2_600);
        assert_eq!((a2 - a1) / 500, 10_000);
    }

    #[test]
    fn depth_area_does_not_overflow_64_bits() {
        // 16 MiB standing for 10^6 s of wall clock: 1.7e22 byte·ns, beyond u64.
        let a = DepthArea::default();
        a.set(0, 16 << 20);
        let t = 1_000_000 * 1_000_000_000u64;
        a.set(t, 0);
        assert_eq!(a.area_at(t).0, (16u128 << 20) * u128::from(t));
    }

    /// A reader never sees a half-written update: the writer keeps every word equal.
    #[test]
    fn seqlock_reads_are_consistent_under_a_concurrent_writer() {
        let l = std::sync::Arc::new(SeqLock::<6>::default());
        let w = l.clone();
        let writer = std::thread::spawn(move || {
            for k in 1..=200_000u64 {
                w.update(|x| *x = [k; 6]);
            }
        });
        let mut last = 0;
        while !writer.is_finished() {
            let r = l.read();
            assert!(r.iter().all(|&v| v == r[0]), "torn read {r:?}");
            assert!(r[0] >= last, "went back from {last} to {}", r[0]);
            last = r[0];
        }
        writer.join().unwrap();
        assert_eq!(l.read(), [200_000; 6]);
    }

    #[test]
    fn stall_log_keeps_the_count_total_longest_and_latest() {
        let log = StallLog::default();
        assert_eq!(log.read(), StallRecord::default());
        for i in 0..11u64 {
            // The longest is the 4th (i = 3).
            let ns = if i == 3 { 900 } else { 100 + i };
            log.log(Stall { at_ns: 1_000 * i, ns }, 50);
        }
        let r = log.read();
        assert_eq!((r.count, r.frame_ns), (11, 50));
        assert_eq!(r.total_ns, 900 + (0..11).filter(|&i| i != 3).map(|i| 100 + i).sum::<u64>());
        assert_eq!(r.longest, Stall { at_ns: 3_000, ns: 900 });
        // The last eight, oldest first.
        assert_eq!(r.latest.len(), STALL_LOG_LEN);
        assert_eq!(
            r.latest.iter().map(|s| s.at_ns).collect::<Vec<_>>(),
            (3..11).map(|i| 1_000 * i).collect::<Vec<_>>()
        );
        assert_eq!(r.latest[0].ns, 900);
    }

    #[test]
    fn histogram_buckets_and_quantiles() {
        let h = Histogram::default();
        assert_eq!(h.quantile_upper_ns(0.5), None);
        for ns in [500, 1_000, 1_001, 40_000, 40_000, 20_000_000] {
            h.observe(ns);
        }
        assert_eq!(h.buckets[0].get(), 2, "≤ 1 µs");
        assert_eq!(h.buckets[1].get(), 1, "≤ 2 µs");
        assert_eq!(h.buckets[HISTOGRAM_BOUNDS_NS.len()].get(), 1, "+Inf");
        assert_eq!(h.count.get(), 6);
        assert_eq!(h.quantile_upper_ns(0.5), Some(2_000));
        assert_eq!(h.quantile_upper_ns(0.8), Some(50_000));
        assert_eq!(h.quantile_upper_ns(0.99), Some(u64::MAX));
    }
}
