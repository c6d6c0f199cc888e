//! Prometheus exposition of a switch's statistics (text format 0.0.4,
//! <https://prometheus.io/docs/instrumenting/exposition_formats/>), served by [`rocefab_plumbing::http`].
//!
//! The data-plane thread never touches the registry: it writes single-writer atomics
//! ([`switch_model::stats`]); on each scrape [`Metrics::render`] copies them into label handles that
//! were resolved once at startup, together with the XDP program's per-CPU counters and the
//! kernel's per-socket AF_XDP counters (`XDP_STATISTICS`, [`crate::xsk::XskStatistics`]): the
//! frames the XDP program redirected but the socket could not take (RX ring full, fill ring
//! empty) are otherwise invisible.
//!
//! Times are emulated (docs/src/emulated-time.md): the wall-clock time the data path measures
//! divided by the switch's time dilation D, which `rocefab_time_dilation` exports.
use std::sync::Arc;

use dataplane_common::counter;
use dataplane_common::limits::NUM_TC;
use prometheus::{
    Counter, CounterVec, Encoder, Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use rocefab_contracts::config::SwitchConfig;
use rocefab_contracts::time::Dilation;

use crate::xsk::XskStatistics;
use switch_model::stats::{Stat, SwitchStats};

/// Errors building the metric set.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("registering metric {name}: {source}")]
    Register { name: String, source: prometheus::Error },
}

struct QueueHandles {
    enqueued_packets: IntCounter,
    enqueued_bytes: IntCounter,
    dequeued_packets: IntCounter,
    dequeued_bytes: IntCounter,
    dropped_packets: IntCounter,
    dropped_bytes: IntCounter,
    depth_bytes: IntGauge,
    depth_peak_bytes: IntGauge,
    sojourn_max_seconds: prometheus::Gauge,
    depth_packets: IntGauge,
    depth_cell_bytes: IntGauge,
    depth_peak_cell_bytes: IntGauge,
    depth_area: Counter,
    ecn_marked_dequeue: IntCounter,
    wred_dropped_dequeue: IntCounter,
    admission_dropped: IntCounter,
    no_frame_dropped: IntCounter,
    pfcwd_dropped: IntCounter,
    trimmed_packets: IntCounter,
    trimmed_bytes: IntCounter,
    trim_dropped: IntCounter,
    /// Per depth band, (ECT enqueued, CE among them): WRED queues only.
    wred_bands: Vec<(IntCounter, IntCounter)>,
}

/// PFC and priority-group handles of one (port, priority).
struct PrioHandles {
    pfc_tx: IntCounter,
    pause_onsets: IntCounter,
    pfc_rx: IntCounter,
    pfc_rx_ignored: IntCounter,
    paused_seconds: Counter,
    /// 1 while the peer's PFC pauses this egress priority.
    paused_now: IntGauge,
    pg_bytes: IntGauge,
    pg_peak_bytes: IntGauge,
    headroom_peak_bytes: IntGauge,
    headroom_overflow: IntCounter,
    storms: IntCounter,
    restores: IntCounter,
}

struct PortHandles {
    rx_packets: IntCounter,
    rx_bytes: IntCounter,
    tx_packets: IntCounter,
    tx_bytes: IntCounter,
    rx_invalid: IntCounter,
    rx_lldp: IntCounter,
    rx_lldp_dropped: IntCounter,
    rx_mac_control: IntCounter,
    rewrite_errors: IntCounter,
    mac_control_malformed: IntCounter,
    own_pool_empty: IntCounter,
    carrier_dropped: IntCounter,
    tx_ring_unsent: IntGauge,
    stalls: IntCounter,
    stalled_seconds: Counter,
    longest_stall_seconds: Gauge,
    last_tx_time: Gauge,
    carrier_lost_time: Gauge,
    queues: Vec<QueueHandles>,
    prio: Vec<PrioHandles>,
    xdp: Vec<IntCounter>,
    xsk: XskHandles,
}

/// One port socket's kernel AF_XDP counters.
struct XskHandles {
    rx_dropped: IntCounter,
    rx_ring_full: IntCounter,
    fill_ring_empty: IntCounter,
    rx_invalid_descs: IntCounter,
    tx_invalid_descs: IntCounter,
    tx_ring_empty: IntCounter,
}

/// The switch's metric registry with every labelled handle pre-resolved.
pub struct Metrics {
    registry: Registry,
    stats: Arc<SwitchStats>,
    ports: Vec<PortHandles>,
    free_frames: IntGauge,
    xdp_read_errors: IntCounter,
    xsk_read_errors: IntCounter,
    /// The switch label value, escaped for the exposition format.
    switch: String,
    /// Converts the data path's wall-clock times to emulated time.
    dilation: Dilation,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("ports", &self.ports.len()).finish()
    }
}

/// Brings a Prometheus counter up to `v` (counters only go up; the sources are monotonic).
/// Registers a freshly built collector with `registry` under `name`, returning a handle to it.
fn register<C: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    name: &str,
    built: prometheus::Result<C>,
) -> Result<C, MetricsError> {
    let c = built.map_err(|source| MetricsError::Register { name: name.into(), source })?;
    registry.register(Box::new(c.clone())).map_err(|source| MetricsError::Register { name: name.into(), source })?;
    Ok(c)
}

fn sync(c: &IntCounter, v: u64) {
    let cur = c.get();
    if v > cur {
        c.inc_by(v - cur);
    }
}

/// Brings a float counter up to `v`.
fn sync_f64(c: &Counter, v: f64) {
    let cur = c.get();
    if v > cur {
        c.inc_by(v - cur);
    }
}

fn sync_stat(c: &IntCounter, s: &Stat) {
    sync(c, s.get());
}

/// The band handles of queue `q` of `port` when it runs WRED, else none.
fn wred_band_handles(
    cfg: &SwitchConfig,
    port: &str,
    q: &str,
    ect: &IntCounterVec,
    ce: &IntCounterVec,
) -> Vec<(IntCounter, IntCounter)> {
    let w = &cfg.qos.wred;
    let tc: u8 = q.parse().unwrap_or(0);
    if w.queues & (1 << tc) == 0 {
        return Vec::new();
    }
    (0..switch_model::depths::BANDS)
        .map(|b| {
            let (lo, hi) = switch_model::depths::band_range(b, w.min_bytes, w.max_bytes);
            let (b, lo, hi) =
                (b.to_string(), lo.to_string(), if hi == u64::MAX { "+Inf".to_string() } else { hi.to_string() });
            let l = [port, q, b.as_str(), lo.as_str(), hi.as_str()];
            (ect.with_label_values(&l), ce.with_label_values(&l))
        })
        .collect()
}

/// Registers metric families with a registry, each with the constant label `switch`.
struct Families<'a> {
    registry: &'a Registry,
    switch: &'a str,
}

impl Families<'_> {
    fn opts(&self, name: &str, help: &str) -> Opts {
        Opts::new(name, help).const_label("switch", self.switch)
    }

    fn counter_vec(&self, name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, MetricsError> {
        register(self.registry, name, IntCounterVec::new(self.opts(name, help), labels))
    }

    fn gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> Result<IntGaugeVec, MetricsError> {
        register(self.registry, name, IntGaugeVec::new(self.opts(name, help), labels))
    }
}

/// Per-port counters of the data path (label `port`).
struct PortFamilies {
    rx_packets: IntCounterVec,
    rx_bytes: IntCounterVec,
    tx_packets: IntCounterVec,
    tx_bytes: IntCounterVec,
    rx_invalid: IntCounterVec,
    rx_lldp: IntCounterVec,
    rx_lldp_dropped: IntCounterVec,
    rx_mac_control: IntCounterVec,
    rewrite_errors: IntCounterVec,
    mc_bad: IntCounterVec,
    own_empty: IntCounterVec,
    carrier_dropped: IntCounterVec,
    tx_ring_unsent: prometheus::IntGaugeVec,
    stalls: IntCounterVec,
    stalled: CounterVec,
    longest_stall: prometheus::GaugeVec,
    last_tx_time: prometheus::GaugeVec,
    carrier_lost_time: prometheus::GaugeVec,
    line_rate: prometheus::GaugeVec,
}

impl PortFamilies {
    fn register(f: &Families<'_>) -> Result<Self, MetricsError> {
        let p = &["port"];
        let rx_packets =
            f.counter_vec("rocefab_port_rx_packets_total", "Frames received from the port's AF_XDP socket", p)?;
        let rx_bytes =
            f.counter_vec("rocefab_port_rx_bytes_total", "Ethernet bytes received from the port's AF_XDP socket", p)?;
        let tx_packets =
            f.counter_vec("rocefab_port_tx_packets_total", "Frames handed to the port's AF_XDP TX ring", p)?;
        let tx_bytes =
            f.counter_vec("rocefab_port_tx_bytes_total", "Ethernet bytes handed to the port's AF_XDP TX ring", p)?;
        let rx_invalid = f.counter_vec(
            "rocefab_port_rx_invalid_total",
            "Received descriptors without a valid Decision in their XDP metadata (dropped)",
            p,
        )?;
        let rx_lldp = f.counter_vec("rocefab_port_rx_lldp_total", "LLDP frames received by the daemon", p)?;
        let rx_lldp_dropped = f.counter_vec(
            "rocefab_port_rx_lldp_dropped_total",
            "LLDP frames not handed to the LLDP agent (its ring was full or the frame too long)",
            p,
        )?;
        let rx_mac_control = f.counter_vec(
            "rocefab_port_rx_mac_control_total",
            "MAC control (PAUSE/PFC) frames received by the daemon",
            p,
        )?;
        let rewrite_errors = f.counter_vec(
            "rocefab_port_rewrite_errors_total",
            "Routed frames dropped because the L3 rewrite refused them",
            p,
        )?;
        let mc_bad = f.counter_vec("rocefab_port_rx_mac_control_malformed_total", "MAC control frames that did not parse, were longer than a minimum-size frame, or had an unknown opcode (dropped)", p)?;
        let own_empty = f.counter_vec(
            "rocefab_port_own_frames_not_sent_total",
            "Frames the switch originates (PFC) that found no reserved frame or a full control queue",
            p,
        )?;
        let carrier_dropped = f.counter_vec(
            "rocefab_port_carrier_dropped_packets_total",
            "Frames dropped because the port had no carrier: queued for it when the carrier went, on its cable, or arriving for it before its ECMP groups moved",
            p,
        )?;
        let tx_ring_unsent = register(
            f.registry,
            "rocefab_port_tx_ring_frames",
            prometheus::IntGaugeVec::new(
                f.opts(
                    "rocefab_port_tx_ring_frames",
                    "Frames on the port's AF_XDP TX ring the kernel has not taken yet (none are taken while the interface is administratively down)",
                ),
                p,
            ),
        )?;
        let stalls = f.counter_vec(
            "rocefab_port_tx_stalls_total",
            "Times the port had frames queued that the peer did not pause and sent nothing for longer than four frame times (the machine's doing: the data path did not run or the kernel did not take the TX ring)",
            p,
        )?;
        let stalled = register(
            f.registry,
            "rocefab_port_tx_stalled_seconds_total",
            CounterVec::new(
                f.opts(
                    "rocefab_port_tx_stalled_seconds_total",
                    "Total time of the port's TX stalls (rocefab_port_tx_stalls_total), emulated seconds (wall / rocefab_time_dilation)",
                ),
                p,
            ),
        )?;
        let longest_stall = register(
            f.registry,
            "rocefab_port_tx_longest_stall_seconds",
            prometheus::GaugeVec::new(
                f.opts(
                    "rocefab_port_tx_longest_stall_seconds",
                    "The port's longest TX stall since the daemon started, emulated seconds",
                ),
                p,
            ),
        )?;
        let stamp =
            |name: &str, help: &str| register(f.registry, name, prometheus::GaugeVec::new(f.opts(name, help), p));
        let last_tx_time = stamp(
            "rocefab_port_last_tx_timestamp_seconds",
            "Unix time (wall clock, not emulated) of the data-plane pass that last handed frames to the port, as rocefab_port_tx_packets_total counts them; 0: none yet",
        )?;
        let carrier_lost_time = stamp(
            "rocefab_port_carrier_lost_timestamp_seconds",
            "Unix time (wall clock, not emulated) at which the data plane first acted on the port's present carrier loss: from then on it hands the port no frame until the carrier is back; 0 while it acts on the port as having carrier",
        )?;
        let line_rate = register(
            f.registry,
            "rocefab_port_line_rate_bytes_per_second",
            prometheus::GaugeVec::new(
                f.opts(
                    "rocefab_port_line_rate_bytes_per_second",
                    "Line rate the port's egress shaper enforces, bytes per emulated second (the topology's rate / 8; rocefab_port_tx_bytes_total counts Ethernet bytes without preamble, inter-frame gap and FCS)",
                ),
                p,
            ),
        )?;
        Ok(PortFamilies {
            line_rate,
            stalls,
            stalled,
            longest_stall,
            last_tx_time,
            carrier_lost_time,
            rx_packets,
            rx_bytes,
            tx_packets,
            tx_bytes,
            rx_invalid,
            rx_lldp,
            rx_lldp_dropped,
            rx_mac_control,
            rewrite_errors,
            mc_bad,
            own_empty,
            carrier_dropped,
            tx_ring_unsent,
        })
    }

    fn handles(
        &self,
        port: &str,
        queues: Vec<QueueHandles>,
        prio: Vec<PrioHandles>,
        xdp: Vec<IntCounter>,
        xsk: XskHandles,
    ) -> PortHandles {
        let l = [port];
        PortHandles {
            rx_packets: self.rx_packets.with_label_values(&l),
            rx_bytes: self.rx_bytes.with_label_values(&l),
            tx_packets: self.tx_packets.with_label_values(&l),
            tx_bytes: self.tx_bytes.with_label_values(&l),
            rx_invalid: self.rx_invalid.with_label_values(&l),
            rx_lldp: self.rx_lldp.with_label_values(&l),
            rx_lldp_dropped: self.rx_lldp_dropped.with_label_values(&l),
            rx_mac_control: self.rx_mac_control.with_label_values(&l),
            rewrite_errors: self.rewrite_errors.with_label_values(&l),
            mac_control_malformed: self.mc_bad.with_label_values(&l),
            own_pool_empty: self.own_empty.with_label_values(&l),
            carrier_dropped: self.carrier_dropped.with_label_values(&l),
            tx_ring_unsent: self.tx_ring_unsent.with_label_values(&l),
            stalls: self.stalls.with_label_values(&l),
            stalled_seconds: self.stalled.with_label_values(&l),
            longest_stall_seconds: self.longest_stall.with_label_values(&l),
            last_tx_time: self.last_tx_time.with_label_values(&l),
            carrier_lost_time: self.carrier_lost_time.with_label_values(&l),
            queues,
            prio,
            xdp,
            xsk,
        }
    }
}

/// Per egress queue counters and depth gauges (labels `port`, `queue`).
struct QueueFamilies {
    enq_p: IntCounterVec,
    enq_b: IntCounterVec,
    deq_p: IntCounterVec,
    deq_b: IntCounterVec,
    drop_p: IntCounterVec,
    drop_b: IntCounterVec,
    depth_b: IntGaugeVec,
    depth_p: IntGaugeVec,
    depth_peak: IntGaugeVec,
    sojourn_max: prometheus::GaugeVec,
    depth_cell: IntGaugeVec,
    depth_peak_cell: IntGaugeVec,
    depth_area: CounterVec,
    ecn_deq: IntCounterVec,
    wred_deq: IntCounterVec,
    adm_drop: IntCounterVec,
    no_frame_drop: IntCounterVec,
    wd_drop: IntCounterVec,
    trim_p: IntCounterVec,
    trim_b: IntCounterVec,
    trim_drop: IntCounterVec,
}

impl QueueFamilies {
    fn register(f: &Families<'_>) -> Result<Self, MetricsError> {
        let pq = &["port", "queue"];
        let enq_p = f.counter_vec("rocefab_queue_enqueued_packets_total", "Frames enqueued on the egress queue", pq)?;
        let enq_b = f.counter_vec("rocefab_queue_enqueued_bytes_total", "Bytes enqueued on the egress queue", pq)?;
        let deq_p = f.counter_vec("rocefab_queue_dequeued_packets_total", "Frames dequeued for transmission", pq)?;
        let deq_b = f.counter_vec("rocefab_queue_dequeued_bytes_total", "Bytes dequeued for transmission", pq)?;
        let drop_p =
            f.counter_vec("rocefab_queue_dropped_packets_total", "Frames tail-dropped at the queue limit", pq)?;
        let drop_b = f.counter_vec("rocefab_queue_dropped_bytes_total", "Bytes tail-dropped at the queue limit", pq)?;
        let depth_b = f.gauge_vec(
            "rocefab_queue_depth_bytes",
            "Current queue depth in frame bytes (Ethernet frames without FCS); WRED and the buffer thresholds act on rocefab_queue_depth_cell_bytes",
            pq,
        )?;
        let depth_p = f.gauge_vec("rocefab_queue_depth_packets", "Current queue depth in frames", pq)?;
        let depth_peak = f.gauge_vec(
            "rocefab_queue_depth_peak_bytes",
            "Highest queue depth in frame bytes since the daemon started",
            pq,
        )?;
        let sojourn_max = register(
            f.registry,
            "rocefab_queue_sojourn_max_seconds",
            prometheus::GaugeVec::new(
                f.opts(
                    "rocefab_queue_sojourn_max_seconds",
                    "Longest time a frame waited in the egress queue since the daemon started, from its enqueue to its departure in the port's shaper schedule, emulated seconds (wall / rocefab_time_dilation)",
                ),
                pq,
            ),
        )?;
        let depth_cell = f.gauge_vec(
            "rocefab_queue_depth_cell_bytes",
            "Current queue depth as the shared buffer charges it: whole cells times the cell size (qos.cell, 256 bytes by default). WRED, the queue limit and xOFF/xON act on this unit",
            pq,
        )?;
        let depth_peak_cell = f.gauge_vec(
            "rocefab_queue_depth_peak_cell_bytes",
            "Highest rocefab_queue_depth_cell_bytes since the daemon started",
            pq,
        )?;
        let depth_area = register(
            f.registry,
            "rocefab_queue_depth_cell_byte_seconds_total",
            CounterVec::new(
                f.opts(
                    "rocefab_queue_depth_cell_byte_seconds_total",
                    "Time integral of rocefab_queue_depth_cell_bytes, bytes x emulated seconds (exact: added at every enqueue and dequeue); its increase over an interval divided by the interval in emulated seconds is the time-weighted average depth",
                ),
                pq,
            ),
        )?;
        let ecn_deq = f.counter_vec(
            "rocefab_queue_ecn_marked_dequeue_packets_total",
            "Frames WRED marked CE as they left the queue (wred.at: dequeue; marks at enqueue are rocefab_xdp_ecn_marked_total, per ingress port)",
            pq,
        )?;
        let wred_deq = f.counter_vec(
            "rocefab_queue_wred_dropped_dequeue_packets_total",
            "Not-ECT frames WRED dropped as they left the queue (wred.at: dequeue)",
            pq,
        )?;
        let adm_drop = f.counter_vec(
            "rocefab_queue_admission_dropped_packets_total",
            "Frames dropped at admission by the shared buffer (lossy queue or shared pool full, or no UMEM frame left)",
            pq,
        )?;
        let no_frame_drop = f.counter_vec(
            "rocefab_queue_no_frame_dropped_packets_total",
            "Lossy frames dropped at admission because every UMEM frame of the shared buffer was held \
             (the UMEM holds the buffer at a realistic frame mix, not at its smallest frame); also counted \
             in rocefab_queue_admission_dropped_packets_total",
            pq,
        )?;
        let wd_drop = f.counter_vec(
            "rocefab_pfcwd_dropped_packets_total",
            "Frames the PFC watchdog dropped for a stormed queue (action drop)",
            pq,
        )?;
        let trim_p = f.counter_vec(
            "rocefab_queue_trimmed_packets_total",
            "Frames this queue failed to admit that were trimmed instead (qos.trim, SAI_QUEUE_STAT_TRIM_PACKETS): \
             cut to the trim size and offered to the trim queue of the same port; as in SAI, the originals also \
             count in rocefab_queue_admission_dropped_packets_total",
            pq,
        )?;
        let trim_b = f.counter_vec(
            "rocefab_queue_trimmed_bytes_total",
            "Bytes cut off the frames trimmed on this queue: their lengths less the trim size",
            pq,
        )?;
        let trim_drop = f.counter_vec(
            "rocefab_queue_trim_dropped_packets_total",
            "Frames trimmed on this queue that the trim queue did not admit either (SAI_QUEUE_STAT_DROPPED_TRIM_PACKETS); \
             the others were queued there",
            pq,
        )?;
        Ok(QueueFamilies {
            enq_p,
            enq_b,
            deq_p,
            deq_b,
            drop_p,
            drop_b,
            depth_b,
            depth_p,
            depth_peak,
            sojourn_max,
            depth_cell,
            depth_peak_cell,
            depth_area,
            ecn_deq,
            wred_deq,
            adm_drop,
            no_frame_drop,
            wd_drop,
            trim_p,
            trim_b,
            trim_drop,
        })
    }

    fn handles(&self, l: [&str; 2], wred_bands: Vec<(IntCounter, IntCounter)>) -> QueueHandles {
        QueueHandles {
            enqueued_packets: self.enq_p.with_label_values(&l),
            enqueued_bytes: self.enq_b.with_label_values(&l),
            dequeued_packets: self.deq_p.with_label_values(&l),
            dequeued_bytes: self.deq_b.with_label_values(&l),
            dropped_packets: self.drop_p.with_label_values(&l),
            dropped_bytes: self.drop_b.with_label_values(&l),
            depth_bytes: self.depth_b.with_label_values(&l),
            depth_peak_bytes: self.depth_peak.with_label_values(&l),
            sojourn_max_seconds: self.sojourn_max.with_label_values(&l),
            depth_packets: self.depth_p.with_label_values(&l),
            depth_cell_bytes: self.depth_cell.with_label_values(&l),
            depth_peak_cell_bytes: self.depth_peak_cell.with_label_values(&l),
            depth_area: self.depth_area.with_label_values(&l),
            ecn_marked_dequeue: self.ecn_deq.with_label_values(&l),
            wred_dropped_dequeue: self.wred_deq.with_label_values(&l),
            admission_dropped: self.adm_drop.with_label_values(&l),
            no_frame_dropped: self.no_frame_drop.with_label_values(&l),
            pfcwd_dropped: self.wd_drop.with_label_values(&l),
            trimmed_packets: self.trim_p.with_label_values(&l),
            trimmed_bytes: self.trim_b.with_label_values(&l),
            trim_dropped: self.trim_drop.with_label_values(&l),
            wred_bands,
        }
    }
}

/// WRED depth-band counters (labels `port`, `queue`, `band`, `depth_from_bytes`, `depth_to_bytes`).
struct WredFamilies {
    wred_ect: IntCounterVec,
    wred_ce: IntCounterVec,
}

impl WredFamilies {
    fn register(f: &Families<'_>) -> Result<Self, MetricsError> {
        let pqb = &["port", "queue", "band", "depth_from_bytes", "depth_to_bytes"];
        let wred_ect = f.counter_vec(
            "rocefab_wred_band_ect_packets_total",
            "ECT or CE packets enqueued on a WRED queue, by the queue depth they found at enqueue (band 0 below min, the last at and above max)",
            pqb,
        )?;
        let wred_ce = f.counter_vec(
            "rocefab_wred_band_ce_packets_total",
            "Of rocefab_wred_band_ect_packets_total, the packets that were CE at enqueue (marked by this switch's WRED or upstream)",
            pqb,
        )?;
        Ok(WredFamilies { wred_ect, wred_ce })
    }
}

/// PFC and ingress priority-group metrics per (port, priority).
struct PrioFamilies {
    pfc_tx: IntCounterVec,
    onsets: IntCounterVec,
    pfc_rx: IntCounterVec,
    pfc_rx_ignored: IntCounterVec,
    paused: CounterVec,
    paused_now: IntGaugeVec,
    pg_b: IntGaugeVec,
    pg_peak: IntGaugeVec,
    hr_peak: IntGaugeVec,
    hr_over: IntCounterVec,
    storms: IntCounterVec,
    restores: IntCounterVec,
}

impl PrioFamilies {
    fn register(f: &Families<'_>) -> Result<Self, MetricsError> {
        let pp = &["port", "priority"];
        let pfc_tx = f.counter_vec(
            "rocefab_pfc_tx_frames_total",
            "PFC frames sent out of the port for the priority (XOFF, refresh, XON)",
            pp,
        )?;
        let onsets = f.counter_vec(
            "rocefab_pfc_pause_onsets_total",
            "Pause onsets of the ingress port's priority: XOFFs sent because its priority group crossed xOFF (not paused to paused at the peer); refreshes and XONs are counted in rocefab_pfc_tx_frames_total only",
            pp,
        )?;
        let pfc_rx = f.counter_vec(
            "rocefab_pfc_rx_frames_total",
            "PFC frames received on the port for the priority (802.3x PAUSE counts for every priority)",
            pp,
        )?;
        let pfc_rx_ignored = f.counter_vec(
            "rocefab_pfc_rx_ignored_frames_total",
            "PFC frames received on the port with the priority's bit set, ignored because PFC is not enabled on the priority (not lossless)",
            pp,
        )?;
        let paused = register(
            f.registry,
            "rocefab_pfc_paused_seconds_total",
            CounterVec::new(
                f.opts(
                    "rocefab_pfc_paused_seconds_total",
                    "Time the egress priority was paused by the peer's PFC, emulated seconds (wall seconds / rocefab_time_dilation)",
                ),
                pp,
            ),
        )?;
        let paused_now = f.gauge_vec(
            "rocefab_pfc_paused",
            "1 while the peer's PFC pauses the egress priority (as of the data path's last pass), else 0",
            pp,
        )?;
        let pg_b = f.gauge_vec(
            "rocefab_ingress_pg_bytes",
            "Bytes charged to the ingress priority group (port, priority)",
            pp,
        )?;
        let pg_peak = f.gauge_vec(
            "rocefab_ingress_pg_peak_bytes",
            "Highest rocefab_ingress_pg_bytes since the daemon started (watermark)",
            pp,
        )?;
        let hr_peak = f.gauge_vec(
            "rocefab_ingress_pg_headroom_peak_bytes",
            "Highest headroom the lossless ingress priority group held since the daemon started: bytes admitted past xOFF or a full shared pool (watermark; rocefab_headroom_overflow_total counts the losses past it)",
            pp,
        )?;
        let hr_over = f.counter_vec(
            "rocefab_headroom_overflow_total",
            "Lossless frames lost because the ingress priority group's headroom was full",
            pp,
        )?;
        let storms =
            f.counter_vec("rocefab_pfcwd_storms_total", "PFC storms the watchdog detected on the egress queue", pp)?;
        let restores =
            f.counter_vec("rocefab_pfcwd_restores_total", "Stormed egress queues the watchdog restored", pp)?;
        Ok(PrioFamilies {
            pfc_tx,
            onsets,
            pfc_rx,
            pfc_rx_ignored,
            paused,
            paused_now,
            pg_b,
            pg_peak,
            hr_peak,
            hr_over,
            storms,
            restores,
        })
    }

    fn handles(&self, l: [&str; 2]) -> PrioHandles {
        PrioHandles {
            pfc_tx: self.pfc_tx.with_label_values(&l),
            pause_onsets: self.onsets.with_label_values(&l),
            pfc_rx: self.pfc_rx.with_label_values(&l),
            pfc_rx_ignored: self.pfc_rx_ignored.with_label_values(&l),
            paused_seconds: self.paused.with_label_values(&l),
            paused_now: self.paused_now.with_label_values(&l),
            pg_bytes: self.pg_b.with_label_values(&l),
            pg_peak_bytes: self.pg_peak.with_label_values(&l),
            headroom_peak_bytes: self.hr_peak.with_label_values(&l),
            headroom_overflow: self.hr_over.with_label_values(&l),
            storms: self.storms.with_label_values(&l),
            restores: self.restores.with_label_values(&l),
        }
    }
}

/// The kernel's AF_XDP socket counters per port (`XDP_STATISTICS`).
struct XskFamilies {
    xsk_rx_dropped: IntCounterVec,
    xsk_rx_ring_full: IntCounterVec,
    xsk_fill_empty: IntCounterVec,
    xsk_rx_invalid: IntCounterVec,
    xsk_tx_invalid: IntCounterVec,
    xsk_tx_empty: IntCounterVec,
}

impl XskFamilies {
    fn register(f: &Families<'_>) -> Result<Self, MetricsError> {
        let p = &["port"];
        let xsk_rx_dropped = f.counter_vec(
            "rocefab_xsk_rx_dropped_total",
            "Frames the kernel dropped on the port's AF_XDP socket for a reason other than a full RX \
             ring, mostly an empty fill ring (XDP_STATISTICS rx_dropped)",
            p,
        )?;
        let xsk_rx_ring_full = f.counter_vec(
            "rocefab_xsk_rx_ring_full_total",
            "Frames dropped because the port's AF_XDP RX ring was full (XDP_STATISTICS rx_ring_full)",
            p,
        )?;
        let xsk_fill_empty = f.counter_vec(
            "rocefab_xsk_fill_ring_empty_total",
            "Times the kernel found the port's fill ring empty when it needed a buffer \
             (XDP_STATISTICS rx_fill_ring_empty_descs)",
            p,
        )?;
        let xsk_rx_invalid = f.counter_vec(
            "rocefab_xsk_rx_invalid_descs_total",
            "Invalid descriptors on the port's AF_XDP RX ring (XDP_STATISTICS rx_invalid_descs)",
            p,
        )?;
        let xsk_tx_invalid = f.counter_vec(
            "rocefab_xsk_tx_invalid_descs_total",
            "Invalid descriptors on the port's AF_XDP TX ring (XDP_STATISTICS tx_invalid_descs)",
            p,
        )?;
        let xsk_tx_empty = f.counter_vec(
            "rocefab_xsk_tx_ring_empty_total",
            "Times the kernel found the port's AF_XDP TX ring empty (XDP_STATISTICS tx_ring_empty_descs)",
            p,
        )?;
        Ok(XskFamilies {
            xsk_rx_dropped,
            xsk_rx_ring_full,
            xsk_fill_empty,
            xsk_rx_invalid,
            xsk_tx_invalid,
            xsk_tx_empty,
        })
    }

    fn handles(&self, port: &str) -> XskHandles {
        let l = [port];
        XskHandles {
            rx_dropped: self.xsk_rx_dropped.with_label_values(&l),
            rx_ring_full: self.xsk_rx_ring_full.with_label_values(&l),
            fill_ring_empty: self.xsk_fill_empty.with_label_values(&l),
            rx_invalid_descs: self.xsk_rx_invalid.with_label_values(&l),
            tx_invalid_descs: self.xsk_tx_invalid.with_label_values(&l),
            tx_ring_empty: self.xsk_tx_empty.with_label_values(&l),
        }
    }
}

/// One counter family per XDP program counter (label `port`), in [`counter::NAMES`] order, with
/// the counter's [`counter::HELP`].
fn register_xdp(f: &Families<'_>) -> Result<Vec<IntCounterVec>, MetricsError> {
    let p = &["port"];
    counter::NAMES
        .iter()
        .zip(counter::HELP)
        .map(|(n, help)| {
            f.counter_vec(&format!("rocefab_xdp_{n}_total"), &format!("{help} (XDP program, summed over CPUs)"), p)
        })
        .collect()
}

/// The scrape side's own metrics: free UMEM frames, and the scrapes that could not read the
/// XDP counters or the AF_XDP statistics.
fn register_scrape_metrics(f: &Families<'_>) -> Result<(IntGauge, IntCounter, IntCounter), MetricsError> {
    let free_frames = register(
        f.registry,
        "rocefab_umem_free_frames",
        IntGauge::with_opts(f.opts("rocefab_umem_free_frames", "UMEM frames in the free pool")),
    )?;
    let xdp_read_errors = register(
        f.registry,
        "rocefab_xdp_map_read_errors_total",
        IntCounter::with_opts(
            f.opts("rocefab_xdp_map_read_errors_total", "Scrapes that could not read the XDP counters map"),
        ),
    )?;
    let xsk_read_errors = register(
        f.registry,
        "rocefab_xsk_stats_read_errors_total",
        IntCounter::with_opts(f.opts(
            "rocefab_xsk_stats_read_errors_total",
            "Scrapes that could not read the AF_XDP sockets' XDP_STATISTICS",
        )),
    )?;
    Ok((free_frames, xdp_read_errors, xsk_read_errors))
}

/// `rocefab_time_dilation`, set to `dilation`'s factor.
fn register_time_dilation(f: &Families<'_>, dilation: Dilation) -> Result<(), MetricsError> {
    let time_dilation = register(
        f.registry,
        "rocefab_time_dilation",
        Gauge::with_opts(f.opts(
            "rocefab_time_dilation",
            "Time dilation D of the fabric: rates run D times slower and timers D times longer than the emulated fabric's; every time metric is emulated (wall / D)",
        )),
    )?;
    time_dilation.set(dilation.factor());
    Ok(())
}

impl Metrics {
    /// The registry, for the control side's own families (LLDP agent, captures): they are
    /// rendered with the rest.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Registers every metric for `cfg`'s ports (label `port` = interface name, `switch` = name).
    pub fn new(cfg: &SwitchConfig, stats: Arc<SwitchStats>) -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let f = Families { registry: &registry, switch: &cfg.name };
        let port = PortFamilies::register(&f)?;
        let queue = QueueFamilies::register(&f)?;
        let wred = WredFamilies::register(&f)?;
        let prio = PrioFamilies::register(&f)?;
        let xdp = register_xdp(&f)?;
        let xsk = XskFamilies::register(&f)?;
        let ports = cfg
            .ports
            .iter()
            .map(|p| {
                let name = p.name.as_str();
                let queues = (0..NUM_TC)
                    .map(|q| {
                        let q = q.to_string();
                        let bands = wred_band_handles(cfg, name, &q, &wred.wred_ect, &wred.wred_ce);
                        queue.handles([name, q.as_str()], bands)
                    })
                    .collect();
                let prios = (0..NUM_TC).map(|q| prio.handles([name, q.to_string().as_str()])).collect();
                let xdp = xdp.iter().map(|v| v.with_label_values(&[name])).collect();
                // Set once: the line rate is the configuration's (emulated, as in the topology).
                port.line_rate.with_label_values(&[name]).set(p.line_rate_bps as f64 / 8.0);
                port.handles(name, queues, prios, xdp, xsk.handles(name))
            })
            .collect();
        let (free_frames, xdp_read_errors, xsk_read_errors) = register_scrape_metrics(&f)?;
        let dilation = cfg.dilation().unwrap_or_default();
        register_time_dilation(&f, dilation)?;
        let switch = cfg.name.replace('\\', "\\\\").replace('"', "\\\"");
        Ok(Metrics { registry, stats, ports, free_frames, xdp_read_errors, xsk_read_errors, switch, dilation })
    }

    /// Refreshes everything from the live statistics, `xdp` (per port, per counter id; `None`
    /// when the map could not be read) and `xsk` (per port socket; `None` when `XDP_STATISTICS`
    /// could not be read) and returns the text exposition.
    pub fn render(&self, xdp: Option<&[[u64; counter::COUNT as usize]]>, xsk: Option<&[XskStatistics]>) -> String {
        let now = self.stats.clock.now();
        let d = self.dilation.factor();
        // A data-plane stamp (ns on its clock, 0: none) as Unix seconds.
        let zero = self.stats.clock.unix_offset_ns();
        let unix_secs = |ns: u64| if ns == 0 { 0.0 } else { zero.wrapping_add(ns) as f64 / 1e9 };
        for (h, s) in self.ports.iter().zip(&self.stats.ports) {
            let st = s.stalls.read();
            sync(&h.stalls, st.count);
            sync_f64(&h.stalled_seconds, st.total_ns as f64 / 1e9 / d);
            h.longest_stall_seconds.set(st.longest.ns as f64 / 1e9 / d);
            sync_stat(&h.rx_packets, &s.rx_packets);
            sync_stat(&h.rx_bytes, &s.rx_bytes);
            sync_stat(&h.tx_packets, &s.tx_packets);
            sync_stat(&h.tx_bytes, &s.tx_bytes);
            sync_stat(&h.rx_invalid, &s.rx_invalid);
            sync_stat(&h.rx_lldp, &s.rx_lldp);
            sync_stat(&h.rx_lldp_dropped, &s.rx_lldp_dropped);
            sync_stat(&h.rx_mac_control, &s.rx_mac_control);
            sync_stat(&h.rewrite_errors, &s.rewrite_errors);
            sync_stat(&h.mac_control_malformed, &s.rx_mac_control_malformed);
            sync_stat(&h.own_pool_empty, &s.own_pool_empty);
            sync_stat(&h.carrier_dropped, &s.carrier_dropped);
            h.tx_ring_unsent.set(s.tx_ring_unsent.get() as i64);
            h.last_tx_time.set(unix_secs(s.last_tx_at.get()));
            h.carrier_lost_time.set(unix_secs(s.carrier_lost_at.get()));
            let paused_mask = s.paused_mask.get();
            for (prio, (ph, ps)) in h.prio.iter().zip(&s.prio).enumerate() {
                ph.paused_now.set(((paused_mask >> prio) & 1) as i64);
                sync_stat(&ph.pfc_tx, &ps.pfc_tx_frames);
                sync_stat(&ph.pause_onsets, &ps.pause_onsets);
                sync_stat(&ph.pfc_rx, &ps.pfc_rx_frames);
                sync_stat(&ph.pfc_rx_ignored, &ps.pfc_rx_ignored_frames);
                let secs = self.dilation.to_emulated_secs(ps.paused_ns.get() as f64 / 1e9);
                let cur = ph.paused_seconds.get();
                if secs > cur {
                    ph.paused_seconds.inc_by(secs - cur);
                }
                ph.pg_bytes.set(ps.pg_bytes.get() as i64);
                ph.pg_peak_bytes.set(ps.pg_peak_bytes.get() as i64);
                ph.headroom_peak_bytes.set(ps.headroom_peak_bytes.get() as i64);
                sync_stat(&ph.headroom_overflow, &ps.headroom_overflow);
                sync_stat(&ph.storms, &ps.pfcwd_storms);
                sync_stat(&ph.restores, &ps.pfcwd_restores);
            }
            for (qh, qs) in h.queues.iter().zip(&s.queues) {
                sync_stat(&qh.enqueued_packets, &qs.enqueued_packets);
                sync_stat(&qh.enqueued_bytes, &qs.enqueued_bytes);
                sync_stat(&qh.dequeued_packets, &qs.dequeued_packets);
                sync_stat(&qh.dequeued_bytes, &qs.dequeued_bytes);
                sync_stat(&qh.dropped_packets, &qs.dropped_packets);
                sync_stat(&qh.dropped_bytes, &qs.dropped_bytes);
                qh.depth_bytes.set(qs.depth_bytes.get() as i64);
                qh.depth_peak_bytes.set(qs.peak_depth_bytes.get() as i64);
                qh.sojourn_max_seconds.set(qs.sojourn_max_ns.get() as f64 / 1e9 / d);
                qh.depth_packets.set(qs.depth_packets.get() as i64);
                qh.depth_cell_bytes.set(qs.depth_cell_bytes.get() as i64);
                qh.depth_peak_cell_bytes.set(qs.peak_depth_cell_bytes.get() as i64);
                sync_f64(&qh.depth_area, qs.depth_cell_area.area_at(now).0 as f64 / 1e9 / d);
                sync_stat(&qh.ecn_marked_dequeue, &qs.ecn_marked_dequeue);
                sync_stat(&qh.wred_dropped_dequeue, &qs.wred_dropped_dequeue);
                sync_stat(&qh.admission_dropped, &qs.admission_dropped_packets);
                sync_stat(&qh.no_frame_dropped, &qs.no_frame_dropped_packets);
                sync_stat(&qh.pfcwd_dropped, &qs.pfcwd_dropped_packets);
                sync_stat(&qh.trimmed_packets, &qs.trimmed_packets);
                sync_stat(&qh.trimmed_bytes, &qs.trimmed_bytes);
                sync_stat(&qh.trim_dropped, &qs.trim_dropped_packets);
                for ((ect, ce), (se, sc)) in qh.wred_bands.iter().zip(qs.wred_band_ect.iter().zip(&qs.wred_band_ce)) {
                    sync_stat(ect, se);
                    sync_stat(ce, sc);
                }
            }
        }
        match xdp {
            Some(rows) => {
                for (h, row) in self.ports.iter().zip(rows) {
                    for (c, &v) in h.xdp.iter().zip(row.iter()) {
                        sync(c, v);
                    }
                }
            }
            None => self.xdp_read_errors.inc(),
        }
        match xsk {
            Some(rows) => {
                for (h, st) in self.ports.iter().zip(rows) {
                    sync(&h.xsk.rx_dropped, st.rx_dropped);
                    sync(&h.xsk.rx_ring_full, st.rx_ring_full);
                    sync(&h.xsk.fill_ring_empty, st.rx_fill_ring_empty_descs);
                    sync(&h.xsk.rx_invalid_descs, st.rx_invalid_descs);
                    sync(&h.xsk.tx_invalid_descs, st.tx_invalid_descs);
                    sync(&h.xsk.tx_ring_empty, st.tx_ring_empty_descs);
                }
            }
            None => self.xsk_read_errors.inc(),
        }
        self.free_frames.set(self.stats.free_frames.get() as i64);
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for well-formed families; an error would be a bug in
        // the registry, reported in the body rather than crashing the daemon.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            return format!("# encoding error: {e}\n");
        }
        let mut text = String::from_utf8(out).unwrap_or_else(|e| format!("# encoding error: {e}\n"));
        self.render_reaction(&mut text);
        text
    }

    /// `rocefab_pfc_reaction_seconds`, a histogram the data path fills into fixed buckets
    /// ([`switch_model::stats::Histogram`]; the prometheus crate's histogram cannot take bucket counts).
    fn render_reaction(&self, out: &mut String) {
        use std::fmt::Write as _;
        let h = &self.stats.pfc_reaction;
        let sw = &self.switch;
        let name = "rocefab_pfc_reaction_seconds";
        let _ = writeln!(out, "# HELP {name} Time from an ingress priority group crossing xOFF to its PFC frame handed to the wire, emulated seconds (wall / rocefab_time_dilation)");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cum = 0;
        for (i, b) in h.buckets.iter().enumerate() {
            cum += b.get();
            let le = match switch_model::stats::HISTOGRAM_BOUNDS_NS.get(i) {
                Some(&ns) => format!("{}", ns as f64 / 1e9),
                None => "+Inf".to_string(),
            };
            let _ = writeln!(out, "{name}_bucket{{switch=\"{sw}\",le=\"{le}\"}} {cum}");
        }
        let _ = writeln!(out, "{name}_sum{{switch=\"{sw}\"}} {}", h.sum_ns.get() as f64 / 1e9);
        // The +Inf bucket, so a scrape taken mid-update stays consistent.
        let _ = writeln!(out, "{name}_count{{switch=\"{sw}\"}} {cum}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::config::{NextHopConfig, PortConfig};

    fn cfg() -> SwitchConfig {
        SwitchConfig {
            name: "sw1".into(),
            role: "rail".into(),
            netns: None,
            hash_seed: 1,
            metrics_listen: "127.0.0.1:0".parse().unwrap(),
            dscp_to_tc: dataplane_common::dscp::default_table().to_vec(),
            queue_limit_bytes: 1 << 20,
            xdp_mode: "driver".into(),
            ports: ["eth0", "eth1"]
                .iter()
                .map(|n| PortConfig {
                    name: n.to_string(),
                    mac: "02:00:00:00:00:01".parse().unwrap(),
                    line_rate_bps: 1_000_000_000,
                    addresses: vec![],
                    peer: String::new(),
                    tx_delay_ns: 0,
                    rx_delay_ns: 0,
                })
                .collect(),
            nexthops: vec![NextHopConfig { port: 1, mac: "02:00:00:00:00:02".parse().unwrap() }],
            groups: vec![vec![0]],
            routes: vec![],
            qos: Default::default(),
            lldp: Default::default(),
            chassis_mac: None,
            time_dilation: 1.0,
            load_balance: Default::default(),
            fib: false,
        }
    }

    fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        rocefab_contracts::promtext::samples(text).find(|s| s.name == name && s.has(labels)).map(|s| s.value)
    }

    #[test]
    fn render_reflects_stats_and_xdp_counters() {
        let stats = Arc::new(SwitchStats::new(2));
        let m = Metrics::new(&cfg(), stats.clone()).unwrap();
        stats.ports[1].queues[3].enqueued_packets.add(5);
        stats.ports[1].queues[3].depth_bytes.set(4500);
        stats.ports[0].rx_packets.add(7);
        let mut xdp = vec![[0u64; counter::COUNT as usize]; 2];
        xdp[0][counter::ROUTE_MISS as usize] = 11;
        xdp[1][counter::UNKNOWN_ETHERTYPE as usize] = 4;
        let t = m.render(Some(&xdp), Some(&[XskStatistics::default(); 2]));
        let unknown = "rocefab_xdp_unknown_ethertype_dropped_total";
        assert_eq!(value(&t, unknown, &[("switch", "sw1"), ("port", "eth1")]), Some(4.0));
        assert_eq!(value(&t, unknown, &[("port", "eth0")]), Some(0.0));
        assert!(
            t.contains(&format!("# HELP {unknown} Frames dropped in XDP because their EtherType is none the switch")),
            "each XDP counter has its own help"
        );
        let q = [("switch", "sw1"), ("port", "eth1"), ("queue", "3")];
        assert_eq!(value(&t, "rocefab_queue_enqueued_packets_total", &q), Some(5.0));
        assert_eq!(value(&t, "rocefab_queue_depth_bytes", &q), Some(4500.0));
        stats.ports[1].queues[3].peak_depth_bytes.set(9000);
        let t = m.render(Some(&xdp), Some(&[XskStatistics::default(); 2]));
        assert_eq!(value(&t, "rocefab_queue_depth_peak_bytes", &q), Some(9000.0));
        // 36 frames of 250 bytes: 9000 frame bytes, 36 cells = 9216 bytes to the buffer.
        stats.ports[1].queues[3].depth_cell_bytes.set(9216);
        stats.ports[1].queues[3].peak_depth_cell_bytes.set(9216);
        stats.ports[1].prio[0].pfc_rx_ignored_frames.add(3);
        let t = m.render(Some(&xdp), Some(&[XskStatistics::default(); 2]));
        assert_eq!(value(&t, "rocefab_queue_depth_cell_bytes", &q), Some(9216.0));
        assert_eq!(value(&t, "rocefab_queue_depth_peak_cell_bytes", &q), Some(9216.0));
        assert_eq!(value(&t, "rocefab_queue_depth_bytes", &q), Some(4500.0));
        assert_eq!(value(&t, "rocefab_pfc_rx_ignored_frames_total", &[("port", "eth1"), ("priority", "0")]), Some(3.0));
        assert_eq!(value(&t, "rocefab_pfc_rx_ignored_frames_total", &[("port", "eth1"), ("priority", "3")]), Some(0.0));
        assert!(
            t.contains("# HELP rocefab_queue_depth_cell_bytes Current queue depth as the shared buffer charges it"),
            "the help says the unit"
        );
        assert_eq!(value(&t, "rocefab_port_rx_packets_total", &[("port", "eth0")]), Some(7.0));
        assert_eq!(value(&t, "rocefab_port_line_rate_bytes_per_second", &[("port", "eth1")]), Some(125_000_000.0));
        assert_eq!(value(&t, "rocefab_xdp_route_miss_total", &[("port", "eth0"), ("switch", "sw1")]), Some(11.0));
        assert_eq!(value(&t, "rocefab_xdp_redirect_failed_total", &[("port", "eth1")]), Some(0.0));
        assert!(t.contains("# HELP rocefab_queue_dropped_packets_total"));
        // Second scrape: counters follow, gauges go down too.
        stats.ports[1].queues[3].enqueued_packets.add(2);
        stats.ports[1].queues[3].depth_bytes.set(0);
        xdp[0][counter::ROUTE_MISS as usize] = 12;
        let t = m.render(Some(&xdp), Some(&[XskStatistics::default(); 2]));
        assert_eq!(value(&t, "rocefab_queue_enqueued_packets_total", &q), Some(7.0));
        assert_eq!(value(&t, "rocefab_queue_depth_bytes", &q), Some(0.0));
        assert_eq!(value(&t, "rocefab_xdp_route_miss_total", &[("port", "eth0")]), Some(12.0));
        let t = m.render(None, Some(&[XskStatistics::default(); 2]));
        assert_eq!(value(&t, "rocefab_xdp_map_read_errors_total", &[]), Some(1.0));
    }

    #[test]
    fn an_exhausted_frame_pool_is_an_admission_drop_of_the_queue() {
        use rocefab_contracts::memory::BufferChunks;
        use switch_model::buffer::{Admit, BufferParams, Reject, SharedBuffer};
        let stats = Arc::new(SwitchStats::new(2));
        let m = Metrics::new(&cfg(), stats.clone()).unwrap();
        // A buffer with bytes for thousands of frames but UMEM frames for four.
        let mut b = SharedBuffer::new(BufferParams {
            ports: 2,
            buffer_bytes: 1 << 20,
            cell_bytes: 256,
            lossless: 1 << 3,
            xoff_bytes: 500_000,
            xon_bytes: 100_000,
            headroom_bytes: 100_000,
            queue_limit_bytes: 1 << 20,
            chunk_bytes: 2048,
            frames: BufferChunks { shared: 4, headroom: 2 },
        });
        // What the data path does with every frame it forwards ([`crate::dataplane`] admit).
        let offer = |b: &mut SharedBuffer, tc: u8| match b.admit(0, tc, 1, tc, 1000) {
            Ok((a, _)) => Some(a),
            Err(r) => {
                crate::dataplane::count_reject(&stats, 0, 1, tc, 1000, r);
                None
            }
        };
        for _ in 0..4 {
            assert_eq!(offer(&mut b, 0), Some(Admit::Shared));
        }
        for _ in 0..3 {
            assert_eq!(offer(&mut b, 0), None); // lossy: out of frames, dropped at admission
        }
        // Lossless: the headroom's two frames, then a headroom overflow (not a pool drop).
        assert_eq!(offer(&mut b, 3), Some(Admit::Headroom));
        assert_eq!(offer(&mut b, 3), Some(Admit::Headroom));
        assert_eq!(offer(&mut b, 3), None);
        assert_eq!(b.admit(0, 0, 1, 0, 1000), Err(Reject::NoFrame));
        let t = m.render(None, None);
        let q0 = [("switch", "sw1"), ("port", "eth1"), ("queue", "0")];
        let q3 = [("switch", "sw1"), ("port", "eth1"), ("queue", "3")];
        assert_eq!(value(&t, "rocefab_queue_no_frame_dropped_packets_total", &q0), Some(3.0));
        assert_eq!(value(&t, "rocefab_queue_admission_dropped_packets_total", &q0), Some(3.0));
        assert_eq!(value(&t, "rocefab_queue_dropped_bytes_total", &q0), Some(3000.0));
        assert_eq!(value(&t, "rocefab_queue_no_frame_dropped_packets_total", &q3), Some(0.0));
        assert_eq!(value(&t, "rocefab_headroom_overflow_total", &[("port", "eth0"), ("priority", "3")]), Some(1.0));
        assert!(t.contains("# HELP rocefab_queue_no_frame_dropped_packets_total Lossy frames dropped at admission because every UMEM frame"));
    }

    #[test]
    fn trims_count_per_queue_beside_the_admission_drops() {
        use rocefab_contracts::config::TrimConfig;
        use rocefab_contracts::memory::BufferChunks;
        use switch_model::buffer::{BufferParams, SharedBuffer};
        let stats = Arc::new(SwitchStats::new(2));
        let m = Metrics::new(&cfg(), stats.clone()).unwrap();
        // Lossy queues of two 1536-byte charges (1514-byte frames in 256-byte cells).
        let mut b = SharedBuffer::new(BufferParams {
            ports: 2,
            buffer_bytes: 1 << 20,
            cell_bytes: 256,
            lossless: 1 << 3,
            xoff_bytes: 500_000,
            xon_bytes: 100_000,
            headroom_bytes: 3036,
            queue_limit_bytes: 3072,
            chunk_bytes: 4096,
            frames: BufferChunks { shared: 1000, headroom: 10 },
        });
        let trim = TrimConfig { queues: 1, ..TrimConfig::default() };
        // What the data path does with a frame it forwards to port 1 (dataplane::admit and
        // trim_rejected, without the frame): five to queue 0, which trims, two to queue 1, which
        // does not.
        let offer = |b: &mut SharedBuffer, tc: u8| match b.admit(0, tc, 1, tc, 1514) {
            Ok(_) => "queued",
            Err(r) => {
                crate::dataplane::count_reject(&stats, 0, 1, tc, 1514, r);
                if !crate::dataplane::trims(&trim, tc, r) {
                    return "dropped";
                }
                let queued = b.admit(0, trim.queue, 1, trim.queue, trim.size).is_ok();
                crate::dataplane::count_trim(&stats, 1, tc, 1514 - trim.size as usize, queued);
                "trimmed"
            }
        };
        let fates: Vec<&str> = (0..5).map(|_| offer(&mut b, 0)).collect();
        assert_eq!(fates, ["queued", "queued", "trimmed", "trimmed", "trimmed"]);
        assert_eq!([offer(&mut b, 1), offer(&mut b, 1), offer(&mut b, 1)], ["queued", "queued", "dropped"]);
        assert!(!crate::dataplane::trims(&trim, 3, switch_model::buffer::Reject::HeadroomOverflow));
        let t = m.render(None, None);
        let q = |tc: &'static str| [("switch", "sw1"), ("port", "eth1"), ("queue", tc)];
        assert_eq!(value(&t, "rocefab_queue_trimmed_packets_total", &q("0")), Some(3.0));
        assert_eq!(value(&t, "rocefab_queue_trimmed_bytes_total", &q("0")), Some(3.0 * 1386.0));
        assert_eq!(value(&t, "rocefab_queue_trim_dropped_packets_total", &q("0")), Some(0.0));
        // As in SAI, the trimmed originals are admission drops too.
        assert_eq!(value(&t, "rocefab_queue_admission_dropped_packets_total", &q("0")), Some(3.0));
        assert_eq!(value(&t, "rocefab_queue_trimmed_packets_total", &q("1")), Some(0.0));
        assert_eq!(value(&t, "rocefab_queue_admission_dropped_packets_total", &q("1")), Some(1.0));
        assert_eq!(b.queue_bytes(1, 7), 3 * 256, "three trimmed frames of one cell each on the trim queue");
        assert!(t.contains(
            "# HELP rocefab_queue_trimmed_packets_total Frames this queue failed to admit that were trimmed"
        ));
    }

    #[test]
    fn ingress_group_and_headroom_watermarks_stay_at_their_highest() {
        use rocefab_contracts::memory::BufferChunks;
        use switch_model::buffer::{BufferParams, SharedBuffer};
        let stats = Arc::new(SwitchStats::new(2));
        let m = Metrics::new(&cfg(), stats.clone()).unwrap();
        let mut b = SharedBuffer::new(BufferParams {
            ports: 2,
            buffer_bytes: 1 << 20,
            cell_bytes: 0,
            lossless: 1 << 3,
            xoff_bytes: 3_000,
            xon_bytes: 1_000,
            headroom_bytes: 10_000,
            queue_limit_bytes: 1 << 20,
            chunk_bytes: 2048,
            frames: BufferChunks { shared: 64, headroom: 16 },
        });
        // Three 1000-byte frames fill the group to xOFF, two more go to the headroom.
        for _ in 0..5 {
            b.admit(0, 3, 1, 3, 1000).unwrap();
            crate::dataplane::publish_admitted_pg(&stats, &b, 0, 3);
        }
        for _ in 0..4 {
            b.release(0, 3, 1, 3, 1000);
        }
        stats.ports[0].prio[3].pg_bytes.set(b.pg_bytes(0, 3));
        let t = m.render(None, None);
        let g = [("switch", "sw1"), ("port", "eth0"), ("priority", "3")];
        assert_eq!(value(&t, "rocefab_ingress_pg_bytes", &g), Some(1000.0));
        assert_eq!(value(&t, "rocefab_ingress_pg_peak_bytes", &g), Some(5000.0));
        assert_eq!(value(&t, "rocefab_ingress_pg_headroom_peak_bytes", &g), Some(2000.0));
        assert_eq!(value(&t, "rocefab_ingress_pg_peak_bytes", &[("port", "eth0"), ("priority", "0")]), Some(0.0));
    }

    /// `promtool check metrics` (Debian package `prometheus`, installed by `cargo xtask setup`)
    /// finds nothing to complain about in a scrape. The live-daemon counterpart is in
    /// `tests/tests/promtool_live.rs`.
    #[test]
    fn promtool_accepts_the_exposition() {
        let stats = Arc::new(SwitchStats::new(2));
        let m = Metrics::new(&cfg(), stats.clone()).unwrap();
        stats.ports[0].queues[3].enqueued_packets.add(1);
        stats.pfc_reaction.observe(12_000);
        stats.pfc_reaction.observe(40_000_000);
        let xdp = vec![[1u64; counter::COUNT as usize]; 2];
        let t = m.render(Some(&xdp), Some(&[XskStatistics::default(); 2]));
        rocefab_test_support::promtool::promtool_check("a switch daemon's scrape", &t);
        assert!(t.contains("rocefab_pfc_reaction_seconds_bucket{switch=\"sw1\",le=\"0.000015\"} 1\n"), "{t}");
        assert!(t.contains("rocefab_pfc_reaction_seconds_bucket{switch=\"sw1\",le=\"+Inf\"} 2\n"), "{t}");
        assert!(t.contains("rocefab_pfc_reaction_seconds_count{switch=\"sw1\"} 2\n"), "{t}");
    }

    #[test]
    fn onsets_depth_integral_dequeue_marks_and_stalls_are_exported() {
        let stats = Arc::new(SwitchStats::new(2));
        let mut c = cfg();
        c.time_dilation = 1000.0;
        let m = Metrics::new(&c, stats.clone()).unwrap();
        stats.ports[0].prio[3].pfc_tx_frames.add(7);
        stats.ports[0].prio[3].pause_onsets.add(3);
        // 1 MB for 2 ms of wall clock, then empty: 2000 byte·s wall, 2 byte·s emulated at D 1000.
        let a = &stats.ports[1].queues[3].depth_cell_area;
        a.set(1_000_000, 1_000_000);
        a.set(3_000_000, 0);
        stats.ports[1].queues[3].ecn_marked_dequeue.add(4);
        stats.ports[1].queues[3].wred_dropped_dequeue.add(1);
        stats.ports[1].stalls.log(switch_model::stats::Stall { at_ns: 5, ns: 3_000_000 }, 1_000);
        stats.ports[1].stalls.log(switch_model::stats::Stall { at_ns: 9, ns: 1_000_000 }, 1_000);
        let t = m.render(None, None);
        let pp = [("port", "eth0"), ("priority", "3")];
        assert_eq!(value(&t, "rocefab_pfc_pause_onsets_total", &pp), Some(3.0));
        assert_eq!(value(&t, "rocefab_pfc_tx_frames_total", &pp), Some(7.0));
        let pq = [("port", "eth1"), ("queue", "3")];
        let area = value(&t, "rocefab_queue_depth_cell_byte_seconds_total", &pq).unwrap();
        assert!((area - 2.0).abs() < 1e-9, "{area}");
        assert_eq!(value(&t, "rocefab_queue_ecn_marked_dequeue_packets_total", &pq), Some(4.0));
        assert_eq!(value(&t, "rocefab_queue_wred_dropped_dequeue_packets_total", &pq), Some(1.0));
        let p = [("port", "eth1")];
        assert_eq!(value(&t, "rocefab_port_tx_stalls_total", &p), Some(2.0));
        let stalled = value(&t, "rocefab_port_tx_stalled_seconds_total", &p).unwrap();
        assert!((stalled - 4e-6).abs() < 1e-15, "{stalled}");
        let longest = value(&t, "rocefab_port_tx_longest_stall_seconds", &p).unwrap();
        assert!((longest - 3e-6).abs() < 1e-15, "{longest}");
        assert_eq!(value(&t, "rocefab_port_tx_stalls_total", &[("port", "eth0")]), Some(0.0));
        // A frame waited 2.5 ms of wall clock in the queue: 2.5 µs emulated at D 1000.
        assert_eq!(value(&t, "rocefab_queue_sojourn_max_seconds", &pq), Some(0.0));
        stats.ports[1].queues[3].sojourn_max_ns.raise(2_500_000);
        stats.ports[1].queues[3].sojourn_max_ns.raise(1_000_000);
        let t = m.render(None, None);
        let sojourn = value(&t, "rocefab_queue_sojourn_max_seconds", &pq).unwrap();
        assert!((sojourn - 2.5e-6).abs() < 1e-15, "{sojourn}");
    }

    #[test]
    fn times_are_exported_in_emulated_seconds_with_the_dilation() {
        let stats = Arc::new(SwitchStats::new(2));
        let mut c = cfg();
        c.time_dilation = 8000.0;
        let m = Metrics::new(&c, stats.clone()).unwrap();
        // 4 s of wall-clock pause at D 8000 is 0.5 ms of emulated pause.
        stats.ports[1].prio[3].paused_ns.set(4_000_000_000);
        stats.ports[1].paused_mask.set(1 << 3);
        let t = m.render(None, None);
        // Paused now: priority 3 of eth1 only.
        assert_eq!(value(&t, "rocefab_pfc_paused", &[("port", "eth1"), ("priority", "3")]), Some(1.0));
        assert_eq!(value(&t, "rocefab_pfc_paused", &[("port", "eth1"), ("priority", "4")]), Some(0.0));
        assert_eq!(value(&t, "rocefab_pfc_paused", &[("port", "eth0"), ("priority", "3")]), Some(0.0));
        stats.ports[1].paused_mask.set(0);
        assert_eq!(
            value(&m.render(None, None), "rocefab_pfc_paused", &[("port", "eth1"), ("priority", "3")]),
            Some(0.0)
        );
        let paused = value(&t, "rocefab_pfc_paused_seconds_total", &[("port", "eth1"), ("priority", "3")]).unwrap();
        assert!((paused - 4.0 / 8000.0).abs() < 1e-12, "{paused}");
        assert_eq!(value(&t, "rocefab_time_dilation", &[("switch", "sw1")]), Some(8000.0));
        assert!(t.contains("# HELP rocefab_pfc_paused_seconds_total Time the egress priority was paused by the peer's PFC, emulated seconds"), "{t}");
        assert!(t.contains("# HELP rocefab_pfc_reaction_seconds Time from an ingress priority group crossing xOFF to its PFC frame handed to the wire, emulated seconds"), "{t}");
        let t = Metrics::new(&cfg(), Arc::new(SwitchStats::new(2))).unwrap().render(None, None);
        assert_eq!(value(&t, "rocefab_time_dilation", &[]), Some(1.0));
    }

    #[test]
    fn render_exports_xsk_socket_statistics() {
        let stats = Arc::new(SwitchStats::new(2));
        let m = Metrics::new(&cfg(), stats).unwrap();
        let mut xsk = [XskStatistics::default(); 2];
        xsk[0] = XskStatistics {
            rx_dropped: 11,
            rx_invalid_descs: 12,
            tx_invalid_descs: 13,
            rx_ring_full: 14,
            rx_fill_ring_empty_descs: 15,
            tx_ring_empty_descs: 16,
        };
        xsk[1].rx_ring_full = 3;
        let t = m.render(Some(&[[0; counter::COUNT as usize]; 2]), Some(&xsk));
        let p0 = [("switch", "sw1"), ("port", "eth0")];
        let p1 = [("switch", "sw1"), ("port", "eth1")];
        let names = [
            ("rocefab_xsk_rx_dropped_total", 11.0),
            ("rocefab_xsk_rx_invalid_descs_total", 12.0),
            ("rocefab_xsk_tx_invalid_descs_total", 13.0),
            ("rocefab_xsk_rx_ring_full_total", 14.0),
            ("rocefab_xsk_fill_ring_empty_total", 15.0),
            ("rocefab_xsk_tx_ring_empty_total", 16.0),
        ];
        for (name, v) in names {
            assert_eq!(value(&t, name, &p0), Some(v), "{name} on eth0");
            assert!(t.contains(&format!("# HELP {name} ")), "{name} has no help string");
            assert!(t.contains(&format!("# TYPE {name} counter")), "{name} is not a counter");
        }
        assert_eq!(value(&t, "rocefab_xsk_rx_ring_full_total", &p1), Some(3.0));
        assert_eq!(value(&t, "rocefab_xsk_rx_dropped_total", &p1), Some(0.0));
        assert_eq!(value(&t, "rocefab_xsk_stats_read_errors_total", &[]), Some(0.0));
        // The kernel counters are monotonic: the next scrape follows them.
        xsk[0].rx_ring_full = 100;
        let t = m.render(None, Some(&xsk));
        assert_eq!(value(&t, "rocefab_xsk_rx_ring_full_total", &p0), Some(100.0));
        // A failed read keeps the last values and counts the error.
        let t = m.render(None, None);
        assert_eq!(value(&t, "rocefab_xsk_rx_ring_full_total", &p0), Some(100.0));
        assert_eq!(value(&t, "rocefab_xsk_stats_read_errors_total", &[]), Some(1.0));
    }
}
