//! A switch's `GET /sample` answer, which `rocefab run --timeline` polls and the machine-bound
//! check reads: per-port counters, queue depths and the thresholds the timeline draws.
use dataplane_common::limits::NUM_TC;
use serde::{Deserialize, Serialize};

/// The thresholds the timeline draws as horizontal lines (bytes, as configured). They act on
/// depths counted in whole cells of `cell_bytes` ([`PortSample::depth_cell_bytes`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    /// WRED minimum: no ECN mark below this egress queue depth.
    pub wred_min_bytes: u64,
    /// WRED maximum: every ECT packet marked at and above it.
    pub wred_max_bytes: u64,
    /// Bit tc set: egress queue tc runs WRED.
    pub wred_queues: u8,
    /// Ingress priority group: PFC XOFF sent when it crosses this.
    pub xoff_bytes: u64,
    /// Ingress priority group: PFC XON sent when it falls below this.
    pub xon_bytes: u64,
    /// Bit p set: priority p is lossless (PFC).
    pub lossless_priorities: u8,
    /// Accounting cell of the shared buffer, bytes (0 = frame bytes): every threshold above
    /// acts on depths counted in whole cells.
    #[serde(default)]
    pub cell_bytes: u32,
}

/// One port of a [`SwitchSample`]; arrays are indexed by traffic class / priority 0..=7.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortSample {
    /// Interface name in the switch's namespace.
    pub name: String,
    /// What is on the other end (`host1:gpu0`, `spine1:eth3`).
    pub peer: String,
    /// Line rate of the port, emulated bit/s (as configured).
    #[serde(default)]
    pub line_rate_bps: u64,
    /// Frames dequeued for transmission per egress queue since the daemon started.
    #[serde(default)]
    pub tx_packets: [u64; NUM_TC],
    /// Bytes (Ethernet frame without FCS) dequeued for transmission per egress queue.
    #[serde(default)]
    pub tx_bytes: [u64; NUM_TC],
    /// Egress queue depth now, frame bytes.
    pub depth_bytes: [u64; NUM_TC],
    /// Highest egress queue depth since the daemon started, frame bytes.
    pub peak_depth_bytes: [u64; NUM_TC],
    /// Egress queue depth now as the shared buffer charges it: whole cells × the cell size
    /// ([`Thresholds::cell_bytes`]). What WRED and the buffer thresholds act on.
    #[serde(default)]
    pub depth_cell_bytes: [u64; NUM_TC],
    /// Highest `depth_cell_bytes` since the daemon started.
    #[serde(default)]
    pub peak_depth_cell_bytes: [u64; NUM_TC],
    /// Time integral of `depth_cell_bytes` from the daemon's start to [`SwitchSample::clock_ns`],
    /// byte × emulated ns: exact (added at every enqueue and dequeue on the data-plane clock).
    /// The time-weighted average depth between two samples is the difference of this over the
    /// difference of `clock_ns` ([`average_depth`]).
    #[serde(default)]
    pub depth_area_byte_ns: [f64; NUM_TC],
    /// PFC frames sent out of this port with the priority's bit set (XOFF, refresh, XON).
    pub pfc_tx_frames: [u64; NUM_TC],
    /// Pause onsets of this ingress port per priority: XOFFs sent because its priority group
    /// crossed xOFF (not paused → paused at the peer); refreshes and XONs are not counted.
    #[serde(default)]
    pub pause_onsets: [u64; NUM_TC],
    /// PFC frames received on this port with the priority's bit set.
    pub pfc_rx_frames: [u64; NUM_TC],
    /// The peer pauses this egress priority now.
    pub paused: [bool; NUM_TC],
    /// Total time this egress priority has been paused by the peer, emulated ns (wall ÷ D).
    pub paused_ns: [u64; NUM_TC],
    /// Packets that arrived on this port and the XDP program marked CE (ECN).
    pub ecn_marked: u64,
    /// Packets that arrived on this port and the XDP program dropped by WRED (Not-ECT).
    pub wred_dropped: u64,
    /// Packets marked CE as they left this port's queues (`wred.at: dequeue`).
    #[serde(default)]
    pub ecn_marked_dequeue: u64,
    /// Not-ECT packets WRED dropped as they left this port's queues (`wred.at: dequeue`).
    #[serde(default)]
    pub wred_dropped_dequeue: u64,
    /// TX stalls of this port since the daemon started: it had frames queued that the peer did
    /// not pause and sent nothing for longer than a few frame times (the machine's doing, not
    /// the model's).
    #[serde(default)]
    pub stalls: u64,
    /// Their total time, emulated ns.
    #[serde(default)]
    pub stalled_ns: u64,
    /// The longest since the daemon started.
    #[serde(default)]
    pub longest_stall: Option<StallSample>,
    /// The latest stalls, oldest first (a bounded log: `stalls` says how many there were).
    #[serde(default)]
    pub recent_stalls: Vec<StallSample>,
    /// The frame time a stall is measured against: the serialisation time of the largest frame
    /// the port had sent (at least a 1514-byte one), emulated ns; a stall is longer than four.
    #[serde(default)]
    pub stall_frame_ns: u64,
}

/// One TX stall of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallSample {
    /// When it began, emulated ns on the switch's clock ([`SwitchSample::clock_ns`]).
    pub at_ns: u64,
    /// How long the port sent nothing, emulated ns.
    pub ns: u64,
}

/// The time-weighted average depth of queue `tc` of port `port` between two samples of the
/// same switch (`before`, `after`), bytes; `None` when no time passed or the port is missing.
pub fn average_depth(before: &SwitchSample, after: &SwitchSample, port: usize, tc: usize) -> Option<f64> {
    let (a, b) = (before.ports.get(port)?, after.ports.get(port)?);
    let dt = after.clock_ns.checked_sub(before.clock_ns).filter(|&t| t > 0)?;
    Some((b.depth_area_byte_ns[tc] - a.depth_area_byte_ns[tc]).max(0.0) / dt as f64)
}

/// A switch's `GET /sample` answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchSample {
    pub switch: String,
    /// Time dilation D of the switch's configuration (1 = real time).
    pub time_dilation: f64,
    pub thresholds: Thresholds,
    /// The XDP counters could not be read for this sample (`ecn_marked` and `wred_dropped` are 0).
    #[serde(default)]
    pub xdp_unread: bool,
    /// The switch's data-plane clock when the sample was taken, emulated ns since the daemon
    /// started (the time base of [`PortSample::depth_area_byte_ns`] and the stalls).
    #[serde(default)]
    pub clock_ns: u64,
    pub ports: Vec<PortSample>,
}
