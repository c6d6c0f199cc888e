//! Live statistics shared between the data-plane thread (the only writer) and the metrics
//! exporter (readers, on scrape).
//!
//! Every value is an [`AtomicU64`] written by exactly one thread with a plain load + store
//! (`Relaxed`), which compiles to an ordinary memory add on x86: no lock prefix, no lock shared
//! with the control side, nothing allocated per packet. Readers see each value tear-free.
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
    /// Current depth as the shared buffer charges it: whole cells × cell size (frame bytes when
    /// the cell is 0). What WRED, the queue limit and the buffer thresholds act on (gauge).
    pub depth_cell_bytes: Stat,
    /// Highest `depth_cell_bytes` since the daemon started (raised on admission).
    pub peak_depth_cell_bytes: Stat,
    /// Dropped at admission by the shared buffer (lossy: queue or shared pool full, or no UMEM
    /// frame left for the configured buffer).
    pub admission_dropped_packets: Stat,
    /// Dropped by the PFC watchdog (action drop) while this queue was stormed.
    pub pfcwd_dropped_packets: Stat,
    /// WRED queues: ECT or CE packets enqueued, per depth band the packet found at enqueue
    /// ([`rocefab_plumbing::depths::band_of`]).
    pub wred_band_ect: [Stat; rocefab_plumbing::depths::BANDS],
    /// Of those, the ones that were CE at enqueue (marked by this switch's XDP, or upstream).
    pub wred_band_ce: [Stat; rocefab_plumbing::depths::BANDS],
}

/// Per priority of one port: PFC sent and received, the ingress priority group's occupancy,
/// and the PFC watchdog of the egress queue with that number.
#[derive(Debug, Default)]
pub struct PrioStats {
    /// PFC frames sent out of this port with this priority's bit set (XOFF, refresh and XON).
    pub pfc_tx_frames: Stat,
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
}

impl SwitchStats {
    pub fn new(ports: usize) -> Self {
        SwitchStats {
            ports: (0..ports).map(|_| PortStats::default()).collect(),
            free_frames: Stat::default(),
            pfc_reaction: Histogram::default(),
        }
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
