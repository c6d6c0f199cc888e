//! The per-switch configuration that `rocefab up` compiles from a topology file and hands to
//! each switch daemon (`rocefab-switchd --config <file>`), as JSON in the fabric's run directory.
//!
//! Everything the data plane needs is resolved here: port names inside the switch's network
//! namespace, MAC addresses, line rates, next hops with their MACs, ECMP groups and routes.
//! The daemon resolves interface names to ifindexes itself, after entering the namespace.
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use serde::{Deserialize, Serialize};

use dataplane_common::limits::NUM_TC;

/// A MAC address, serialised as `"aa:bb:cc:dd:ee:ff"`: the one MAC type, `rocefab-wire`'s.
pub use rocefab_wire::ethernet::MacAddr as Mac;

/// Errors loading or validating a [`SwitchConfig`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: line {line}, column {column}: {msg}")]
    Parse { path: String, line: usize, column: usize, msg: String },
    #[error("switch config: {0}")]
    Invalid(String),
}

/// One switch's data-plane configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchConfig {
    /// Switch name from the topology (e.g. `rail1`, `spine2`).
    pub name: String,
    /// `rail`, `spine` or `super-spine`.
    pub role: String,
    /// Network namespace the switch's ports live in (the daemon enters it after binding metrics).
    pub netns: Option<String>,
    /// ECMP hash seed for this switch.
    pub hash_seed: u32,
    /// Prometheus `/metrics` listen address, bound in the namespace the daemon starts in.
    pub metrics_listen: SocketAddr,
    /// DSCP (index) → traffic class (value 0..=7); 64 entries.
    #[serde(default = "default_dscp_map")]
    pub dscp_to_tc: Vec<u8>,
    /// Per-queue buffer limit in bytes (tail drop above it).
    #[serde(default = "default_queue_limit")]
    pub queue_limit_bytes: u64,
    /// XDP attach mode: `driver` (default) or `skb`.
    #[serde(default = "default_xdp_mode")]
    pub xdp_mode: String,
    /// Ports; the position in this list is the port index used by the XDP maps.
    pub ports: Vec<PortConfig>,
    /// Next hops; the position is the next-hop id.
    pub nexthops: Vec<NextHopConfig>,
    /// ECMP groups of next-hop ids; the position is the group id.
    pub groups: Vec<Vec<u32>>,
    /// Routes (longest prefix match).
    pub routes: Vec<RouteConfig>,
    /// Lossless QoS: shared buffer, PFC thresholds, watchdog.
    #[serde(default)]
    pub qos: QosConfig,
    /// LLDP/DCBX agent on every port.
    #[serde(default)]
    pub lldp: LldpConfig,
    /// Chassis ID the switch's LLDPDUs carry (its system MAC); default: the first port's MAC.
    #[serde(default)]
    pub chassis_mac: Option<Mac>,
    /// Time dilation D (docs/src/emulated-time.md): line rates and times in this file are
    /// emulated; the daemon divides rates by D and multiplies durations by D where they meet the
    /// wall clock, and reports in emulated units. 1 = real time.
    #[serde(default = "default_time_dilation")]
    pub time_dilation: f64,
    /// Egress choice among ECMP members, per traffic class.
    #[serde(default)]
    pub load_balance: LbConfig,
    /// `routing: bgp`: the data path also takes the kernel's FIB (the routes FRR installs), beside
    /// `routes`, which then hold only the switch's own addresses and attached GPUs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fib: bool,
}

/// How a switch picks among the members of a next-hop group (book ch. 10 and 12): per traffic
/// class, with one flowlet gap for the switch. Loaded into the XDP program's `PARAMS`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LbConfig {
    /// Mode of traffic class tc (index).
    pub modes: [LbMode; NUM_TC],
    /// Flowlet gap δ in emulated µs (the daemon multiplies it by the time dilation).
    pub flowlet_gap_us: u64,
}

/// Default flowlet gap δ, emulated µs.
pub const DEFAULT_FLOWLET_GAP_US: u64 = 50;

impl Default for LbConfig {
    fn default() -> Self {
        LbConfig { modes: [LbMode::Ecmp; NUM_TC], flowlet_gap_us: DEFAULT_FLOWLET_GAP_US }
    }
}

/// One traffic class's egress choice ([`dataplane_common::lb::mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LbMode {
    /// The flow's 5-tuple hash.
    #[default]
    Ecmp,
    /// A new member only after a gap longer than δ.
    Flowlet,
    /// Flowlets; a new flowlet takes the shallowest egress queue.
    Adaptive,
    /// Per packet, members in turn.
    SprayRoundRobin,
    /// Per packet, a random member.
    SprayRandom,
}

impl LbMode {
    /// The value the XDP program reads ([`dataplane_common::lb::mode`]).
    pub fn code(self) -> u8 {
        use dataplane_common::lb::mode;
        match self {
            LbMode::Ecmp => mode::ECMP,
            LbMode::Flowlet => mode::FLOWLET,
            LbMode::Adaptive => mode::ADAPTIVE,
            LbMode::SprayRoundRobin => mode::SPRAY_ROUND_ROBIN,
            LbMode::SprayRandom => mode::SPRAY_RANDOM,
        }
    }

    /// How the topology file and `rocefab plan` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            LbMode::Ecmp => "ecmp",
            LbMode::Flowlet => "flowlet",
            LbMode::Adaptive => "adaptive",
            LbMode::SprayRoundRobin => "spray round-robin",
            LbMode::SprayRandom => "spray random",
        }
    }

    /// Whether the mode keeps flowlet state (and uses δ).
    pub fn uses_flowlets(self) -> bool {
        matches!(self, LbMode::Flowlet | LbMode::Adaptive)
    }
}

fn default_time_dilation() -> f64 {
    1.0
}

/// LLDP agent timing (IEEE 802.1AB msgTxInterval, TTL, msgFastTx, txFastInit), shared by the
/// switch daemon and the host NIC agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LldpConfig {
    /// Run the agent (send and receive LLDP) at all.
    pub enabled: bool,
    /// Transmit interval, ms (30 s).
    pub tx_interval_ms: u64,
    /// TTL advertised, s (120 s); neighbours age out when it runs out.
    pub ttl_s: u16,
    /// Interval of the fast-start LLDPDUs after link up or a new neighbour, ms (1 s).
    pub fast_interval_ms: u64,
    /// Number of fast-start LLDPDUs (4).
    pub fast_count: u32,
}

impl Default for LldpConfig {
    fn default() -> Self {
        LldpConfig { enabled: true, tx_interval_ms: 30_000, ttl_s: 120, fast_interval_ms: 1_000, fast_count: 4 }
    }
}

/// The switch's shared buffer, PFC and PFC watchdog settings (book ch. 11, IEEE 802.1Qbb; docs/src/lossless-qos.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QosConfig {
    /// Bit p set: priority p is lossless (PFC). Default priority 3; 0 when PFC is off.
    pub lossless_priorities: u8,
    /// Bit p set: queue p is strict priority. Default queue 7 (CNPs).
    pub strict_priorities: u8,
    /// "Bandwidth remaining percent" of each queue (index) among the non-strict queues, shared
    /// by deficit-weighted round robin (ETS); 0 = no share: the queue is served only when no
    /// weighted queue can send. The non-zero entries sum to 100. Default: queues 0 and 3 at
    /// 50 % each (the book's NX-OS example).
    pub ets_percent: [u8; NUM_TC],
    /// Shared buffer of the switch, bytes.
    pub buffer_bytes: u64,
    /// Accounting cell, bytes; 0 = frame bytes.
    pub cell_bytes: u32,
    pub xoff_bytes: u64,
    pub xon_bytes: u64,
    pub headroom_bytes: u64,
    /// Quanta of the PFC frames the switch sends.
    pub pause_quanta: u16,
    pub watchdog: WatchdogConfig,
    /// WRED with ECN marking on egress queues.
    pub wred: WredConfig,
    /// Packet trimming on lossy egress queues; off by default.
    pub trim: TrimConfig,
}

/// `SAI_SWITCH_ATTR_PACKET_TRIM_SIZE` @default (OCP SAI PR #2077,
/// `doc/SAI-Proposal-Packet-Trimming.md`): a trimmed frame's length in bytes.
pub const TRIM_DEFAULT_SIZE: u32 = 128;
/// Smallest trim size: a minimum Ethernet frame with its FCS (a trimmed frame never needs
/// padding), room for Ethernet, IPv4 and UDP headers.
pub const TRIM_MIN_SIZE: u32 = 64;
/// Largest trim size: the top of the range NVIDIA's Spectrum switches take (Cumulus Linux 5.14,
/// "Packet Trimming": 256..=1024 bytes); always within the first UMEM chunk of a frame.
pub const TRIM_MAX_SIZE: u32 = 1024;

/// Packet trimming (OCP SAI PR #2077: `SAI_BUFFER_PROFILE_PACKET_ADMISSION_FAIL_ACTION_DROP_AND_TRIM`
/// on a queue's buffer profile, `SAI_SWITCH_ATTR_PACKET_TRIM_SIZE`, `_DSCP_VALUE`,
/// `_QUEUE_INDEX`; SONiC's packet-trimming HLD; docs/src/lossless-qos.md "Packet trimming"): an
/// IP/UDP frame longer than `size` that admission would drop on one of `queues` is cut to `size`
/// bytes (Ethernet header included), remarked to `dscp` and queued on `queue` of the same
/// egress port, with an admission of its own (`switch_model::trim`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrimConfig {
    /// Bit tc set: lossy egress queue tc trims what it would drop; 0 turns trimming off (the
    /// default). Lossless queues never trim.
    pub queues: u8,
    /// Length of a trimmed frame, bytes, from the first byte of the Ethernet header, FCS not
    /// counted ([`TRIM_DEFAULT_SIZE`]).
    pub size: u32,
    /// DSCP of trimmed packets (48: rocefab's default map sends it to strict queue 7 at the
    /// next hop too; SONiC's HLD example uses 48 as well).
    pub dscp: u8,
    /// Egress queue of trimmed packets (7, strict by default). Must be lossy.
    pub queue: u8,
}

impl Default for TrimConfig {
    fn default() -> Self {
        TrimConfig { queues: 0, size: TRIM_DEFAULT_SIZE, dscp: 48, queue: 7 }
    }
}

/// WRED/ECN of the egress queues (NX-OS `random-detect minimum-threshold 150 kbytes
/// maximum-threshold 3000 kbytes drop-probability 7 weight 0 ecn`, book ch. 11).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WredConfig {
    /// Bit tc set: egress queue tc runs WRED. Default queue 3 (RoCEv2); 0 turns WRED off.
    pub queues: u8,
    /// No marking below this queue depth, bytes (150 KB).
    pub min_bytes: u64,
    /// Every ECT packet marked at and above this depth, bytes (3000 KB).
    pub max_bytes: u64,
    /// Marking probability at the maximum threshold, percent (7).
    pub probability_percent: u8,
    /// Seed of the marking generator (per CPU: seed ^ cpu), so a run can be repeated.
    pub seed: u32,
    /// Where packets are marked: as they are enqueued (the XDP program, on the depth they
    /// find), or as they are dequeued (the data-plane thread, on the depth they leave behind).
    pub at: WredAt,
}

/// Where WRED/ECN marks a packet. Enqueue stays the default: on `rail-spine-400g.yaml` (7:1
/// incast, DCQCN `dcqcn-paper`, D 8000) marking at dequeue did not bring the CNPs measurably closer
/// to the simulators' 50 µs (docs/src/wred-ecn-dcqcn.md has the runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum WredAt {
    /// At ingress, by the XDP program, on the egress queue's depth the packet finds.
    #[default]
    Enqueue,
    /// At transmit, by the data-plane thread, on the depth the packet leaves behind (ns-3
    /// HPCC's `SwitchNode::SwitchNotifyDequeue`, htsim): the mark reaches the receiver without
    /// the queueing delay.
    Dequeue,
}

impl Default for WredConfig {
    fn default() -> Self {
        WredConfig {
            queues: 1 << 3,
            min_bytes: 150_000,
            max_bytes: 3_000_000,
            probability_percent: 7,
            seed: 0x5eed,
            at: WredAt::default(),
        }
    }
}

/// PFC watchdog (SONiC defaults).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchdogConfig {
    pub enabled: bool,
    pub detect_us: u64,
    pub restore_us: u64,
    pub poll_us: u64,
    pub action: WatchdogAction,
}

/// What the PFC watchdog does with a stormed queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum WatchdogAction {
    #[default]
    Drop,
    Forward,
    Alert,
}

impl Default for QosConfig {
    fn default() -> Self {
        QosConfig {
            lossless_priorities: 1 << 3,
            strict_priorities: 1 << 7,
            ets_percent: DEFAULT_ETS_PERCENT,
            buffer_bytes: 16 << 20,
            cell_bytes: 256,
            xoff_bytes: 3_200_000,
            xon_bytes: 120_000,
            headroom_bytes: 512_000,
            pause_quanta: 0xffff,
            watchdog: WatchdogConfig::default(),
            wred: WredConfig::default(),
            trim: TrimConfig::default(),
        }
    }
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig {
            enabled: true,
            detect_us: 200_000,
            restore_us: 200_000,
            poll_us: 10_000,
            action: WatchdogAction::Drop,
        }
    }
}

/// Default ETS shares: queue 0 (lossy) and queue 3 (RoCEv2) at 50 % each.
pub const DEFAULT_ETS_PERCENT: [u8; NUM_TC] = [50, 0, 0, 50, 0, 0, 0, 0];

/// Smallest Ethernet frame without FCS: what a buffer charges at least per held frame.
pub const MIN_FRAME_BYTES: u64 = 60;

/// Most UMEM frames a switch's buffer may need (4 KiB each: 1 GiB of UMEM).
pub const MAX_BUFFER_FRAMES: u64 = 1 << 18;

/// UMEM frames a buffer of `buffer_bytes` needs to hold only smallest frames: one frame per
/// minimal charge (a 60-byte frame, or the whole cells it takes).
pub fn buffer_frames(buffer_bytes: u64, cell_bytes: u32) -> u64 {
    let min_charge = match cell_bytes {
        0 => MIN_FRAME_BYTES,
        c => MIN_FRAME_BYTES.div_ceil(u64::from(c)) * u64::from(c),
    };
    buffer_bytes.div_ceil(min_charge)
}

/// A QoS setting that cannot work: the field (as the topology file names it) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosProblem {
    pub field: &'static str,
    pub msg: String,
}

impl QosConfig {
    /// Checks the settings against each other for a switch with `ports` ports whose lossy
    /// queues hold at most `queue_limit_bytes`: xON below xOFF, the reserved headroom and the
    /// thresholds inside the buffer, the buffer within [`MAX_BUFFER_FRAMES`] UMEM frames, the
    /// watchdog's times non-zero, the ETS shares 1..=100 % summing to 100 on non-strict queues.
    pub fn check(&self, ports: usize, queue_limit_bytes: u64) -> Result<(), QosProblem> {
        let bad = |field: &'static str, msg: String| Err(QosProblem { field, msg });
        self.check_trim()?;
        self.check_ets()?;
        let lossless = u64::from(self.lossless_priorities.count_ones());
        if self.cell_bytes != 0 && !(64..=16384).contains(&self.cell_bytes) {
            return bad(
                "cell",
                format!("{} bytes: a cell is 64..=16384 bytes, or 0 to count frame bytes", self.cell_bytes),
            );
        }
        let frames = buffer_frames(self.buffer_bytes, self.cell_bytes);
        if self.buffer_bytes == 0 {
            return bad("buffer", "0 bytes: the switch needs a buffer".into());
        }
        if frames > MAX_BUFFER_FRAMES {
            return bad(
                "buffer",
                format!(
                    "{} bytes needs {frames} UMEM frames at the smallest frame (at most {MAX_BUFFER_FRAMES}): use a larger cell or a smaller buffer",
                    self.buffer_bytes
                ),
            );
        }
        if queue_limit_bytes > self.buffer_bytes {
            return bad(
                "queue_limit",
                format!("{queue_limit_bytes} bytes is more than the {}-byte buffer", self.buffer_bytes),
            );
        }
        if lossless == 0 {
            return self.check_wred();
        }
        let reserved = ports as u64 * lossless * self.headroom_bytes;
        if reserved >= self.buffer_bytes {
            return bad(
                "headroom",
                format!(
                    "{} bytes × {ports} ports × {lossless} lossless priorities = {reserved} bytes reserved, not less than the {}-byte buffer",
                    self.headroom_bytes, self.buffer_bytes
                ),
            );
        }
        if self.headroom_bytes < 2 * 1518 {
            return bad(
                "headroom",
                format!("{} bytes: headroom must hold at least two full frames (3036 bytes)", self.headroom_bytes),
            );
        }
        let shared = self.buffer_bytes - reserved;
        if self.xoff_bytes == 0 || self.xoff_bytes > shared {
            return bad(
                "xoff",
                format!(
                    "{} bytes: must be 1..={shared} (the shared pool: buffer minus {reserved} bytes of headroom)",
                    self.xoff_bytes
                ),
            );
        }
        if self.xon_bytes >= self.xoff_bytes {
            return bad("xon", format!("{} bytes is not below xoff ({} bytes)", self.xon_bytes, self.xoff_bytes));
        }
        if self.pause_quanta == 0 {
            return bad("pause_quanta", "0 would pause nothing: use 1..=65535".into());
        }
        let w = &self.watchdog;
        if w.enabled {
            if w.detect_us == 0 || w.restore_us == 0 || w.poll_us == 0 {
                return bad("watchdog", "detect, restore and poll must be longer than 0".into());
            }
            if w.poll_us > w.detect_us {
                return bad("watchdog.poll", format!("{} µs is longer than detect ({} µs)", w.poll_us, w.detect_us));
            }
        }
        self.check_wred()
    }
}

impl QosConfig {
    /// The WRED thresholds: 0 < min ≤ max (min = max is a step: every ECT packet marked from
    /// that depth on), the probability 0..=100 %, max within the u32 the XDP program compares
    /// with. Thresholds that break the reference design's rule of thumb are allowed:
    /// [`QosConfig::warnings`] reports them.
    pub fn check_wred(&self) -> Result<(), QosProblem> {
        let w = &self.wred;
        let bad = |field: &'static str, msg: String| Err(QosProblem { field, msg });
        if w.queues == 0 {
            return Ok(());
        }
        if w.min_bytes == 0 || w.min_bytes > w.max_bytes {
            return bad(
                "wred.min",
                format!("{} bytes: must be above 0 and at most wred.max ({} bytes)", w.min_bytes, w.max_bytes),
            );
        }
        if w.max_bytes > u64::from(u32::MAX) {
            return bad("wred.max", format!("{} bytes is more than 4 GB", w.max_bytes));
        }
        if w.probability_percent > 100 {
            return bad("wred.probability", format!("{} % is more than 100 %", w.probability_percent));
        }
        Ok(())
    }

    /// Consistent settings that break the reference design's rule of thumb for a lossless WRED
    /// queue, xON < WRED min < WRED max < xOFF (marking starts before pausing stops, and ends
    /// before pausing starts; book ch. 11): allowed, since simulators' scenarios state other
    /// thresholds (an ECN step above xOFF), and reported as warnings at load.
    pub fn warnings(&self) -> Vec<QosProblem> {
        let w = &self.wred;
        let mut out = Vec::new();
        if w.queues == 0 || self.lossless_priorities & w.queues == 0 {
            return out;
        }
        if w.min_bytes <= self.xon_bytes {
            out.push(QosProblem {
                field: "wred.min",
                msg: format!(
                    "{} bytes is not above xon ({} bytes): the rule of thumb is xON < WRED min < WRED max < xOFF",
                    w.min_bytes, self.xon_bytes
                ),
            });
        }
        if w.max_bytes >= self.xoff_bytes {
            out.push(QosProblem {
                field: "wred.max",
                msg: format!(
                    "{} bytes is not below xoff ({} bytes): the rule of thumb is xON < WRED min < WRED max < xOFF",
                    w.max_bytes, self.xoff_bytes
                ),
            });
        }
        out
    }

    /// Packet trimming: a size of [`TRIM_MIN_SIZE`]..=[`TRIM_MAX_SIZE`] bytes, a DSCP of
    /// 0..=63, and a lossy trim queue that is not one of the queues that trim, none of which is
    /// lossless (lossless queues pause their senders instead of dropping).
    pub fn check_trim(&self) -> Result<(), QosProblem> {
        let t = &self.trim;
        let bad = |field: &'static str, msg: String| Err(QosProblem { field, msg });
        if t.queues == 0 {
            return Ok(());
        }
        if !(TRIM_MIN_SIZE..=TRIM_MAX_SIZE).contains(&t.size) {
            return bad(
                "trim.size",
                format!("{} bytes: a trimmed frame is {TRIM_MIN_SIZE}..={TRIM_MAX_SIZE} bytes", t.size),
            );
        }
        if t.dscp > 63 {
            return bad("trim.dscp", format!("DSCP {} does not exist (0..=63)", t.dscp));
        }
        if t.queue >= NUM_TC as u8 {
            return bad("trim.queue", format!("queue {} does not exist (0..=7)", t.queue));
        }
        if self.lossless_priorities & (1 << t.queue) != 0 {
            return bad("trim.queue", format!("queue {} is lossless (qos.pfc): the trim queue must be lossy", t.queue));
        }
        let lossless = t.queues & self.lossless_priorities;
        if lossless != 0 {
            return bad(
                "trim.queues",
                format!(
                    "queue {} is lossless (qos.pfc): lossless queues pause their senders and never trim",
                    lossless.trailing_zeros()
                ),
            );
        }
        if t.queues & (1 << t.queue) != 0 {
            return bad("trim.queues", format!("queue {} is the trim queue (trim.queue) and cannot trim too", t.queue));
        }
        Ok(())
    }

    /// The ETS shares: each 0..=100, none on a strict queue, summing to 100 (or none at all when
    /// every queue is strict).
    pub fn check_ets(&self) -> Result<(), QosProblem> {
        let bad = |msg: String| Err(QosProblem { field: "ets", msg });
        if let Some(tc) = (0..NUM_TC).find(|&tc| self.ets_percent[tc] > 100) {
            return bad(format!("queue {tc}: {} % is more than 100 %", self.ets_percent[tc]));
        }
        if let Some(tc) = (0..NUM_TC).find(|&tc| self.ets_percent[tc] != 0 && self.strict_priorities & (1 << tc) != 0) {
            return bad(format!("queue {tc} is strict (qos.strict) and cannot have a bandwidth share too"));
        }
        let sum: u32 = self.ets_percent.iter().map(|&p| u32::from(p)).sum();
        if sum == 0 && self.strict_priorities == 0xff {
            return Ok(());
        }
        if sum != 100 {
            return bad(format!(
                "the shares add up to {sum} %, not 100 % (the default is {{ 0: 50, 3: 50 }}; queues not listed get no share)"
            ));
        }
        Ok(())
    }
}

/// A switch port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Interface name inside the switch's namespace.
    pub name: String,
    /// The port's own MAC (source MAC of everything sent out of it, PFC and LLDP included).
    pub mac: Mac,
    /// Line rate enforced by the egress shaper, bits per second.
    pub line_rate_bps: u64,
    /// The port's IP addresses with prefix length (e.g. `10.0.1.254/24`), informational.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// What is on the other end (`host1:gpu0`, `spine1:eth3`), for metrics labels and status.
    #[serde(default)]
    pub peer: String,
    /// Emulated delay (ns) between a frame leaving this port's scheduler and the peer seeing it:
    /// the switch's forwarding latency, the cable's propagation delay and, toward a NIC, the
    /// NIC's receive pipeline. PFC frames and every other frame the switch sends take it too.
    #[serde(default)]
    pub tx_delay_ns: u64,
    /// Emulated delay (ns) between the peer sending a frame and this switch seeing it, applied
    /// here when the peer does not apply it itself (a NIC: its transmit pipeline and the cable).
    #[serde(default)]
    pub rx_delay_ns: u64,
}

/// Longest per-port delay a switch accepts (emulated): 10 ms, two thousand kilometres of fibre.
pub const MAX_PORT_DELAY_NS: u64 = 10_000_000;

/// A next hop: leave through `port`, rewrite the destination MAC to `mac`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextHopConfig {
    pub port: u32,
    pub mac: Mac,
}

/// A route: `prefix/len` → ECMP group, or `local` (deliver to the switch's own stack).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    pub prefix: IpAddr,
    pub len: u8,
    /// Group id, or `None` for a local route.
    pub group: Option<u32>,
}

fn default_dscp_map() -> Vec<u8> {
    dataplane_common::dscp::default_table().to_vec()
}
fn default_queue_limit() -> u64 {
    // 1 MiB per queue: enough to build visible queues at 1 Gbit/s, small enough to tail-drop.
    1 << 20
}
fn default_xdp_mode() -> String {
    "driver".to_string()
}

impl SwitchConfig {
    /// Reads and validates a config file (JSON).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: p.clone(), source })?;
        let cfg: SwitchConfig = serde_json::from_str(&text).map_err(|e| ConfigError::Parse {
            path: p,
            line: e.line(),
            column: e.column(),
            msg: e.to_string(),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The checked time-dilation factor ([`crate::time::Dilation`]).
    pub fn dilation(&self) -> Result<crate::time::Dilation, crate::time::DilationError> {
        crate::time::Dilation::new(self.time_dilation)
    }

    /// Writes the config as pretty JSON.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let text = serde_json::to_string_pretty(self).expect("SwitchConfig serialises");
        std::fs::write(path, text).map_err(|source| ConfigError::Io { path: path.display().to_string(), source })
    }

    /// Checks internal references: port, next-hop and group ids, prefix lengths, map sizes.
    pub fn validate(&self) -> Result<(), ConfigError> {
        use dataplane_common::limits::*;
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.ports.is_empty() || self.ports.len() > MAX_PORTS as usize {
            return bad(format!("{}: {} ports (1..={MAX_PORTS} allowed)", self.name, self.ports.len()));
        }
        if self.dscp_to_tc.len() != 64 {
            return bad(format!("{}: dscp_to_tc has {} entries, expected 64", self.name, self.dscp_to_tc.len()));
        }
        if let Some(d) = self.dscp_to_tc.iter().position(|&tc| tc as usize >= NUM_TC) {
            return bad(format!(
                "{}: dscp_to_tc[{d}] = {} is not a traffic class 0..=7",
                self.name, self.dscp_to_tc[d]
            ));
        }
        if self.xdp_mode != "driver" && self.xdp_mode != "skb" {
            return bad(format!("{}: xdp_mode {:?} (expected driver or skb)", self.name, self.xdp_mode));
        }
        for (i, p) in self.ports.iter().enumerate() {
            if p.line_rate_bps == 0 {
                return bad(format!("{}: port {i} ({}) has line_rate_bps 0", self.name, p.name));
            }
            for (field, v) in [("tx_delay_ns", p.tx_delay_ns), ("rx_delay_ns", p.rx_delay_ns)] {
                if v > MAX_PORT_DELAY_NS {
                    return bad(format!(
                        "{}: port {i} ({}) has {field} {v} (at most {MAX_PORT_DELAY_NS} ns)",
                        self.name, p.name
                    ));
                }
            }
        }
        if self.nexthops.len() > MAX_NEXTHOPS as usize || self.groups.len() > MAX_GROUPS as usize {
            return bad(format!("{}: too many next hops or groups", self.name));
        }
        for (i, nh) in self.nexthops.iter().enumerate() {
            if nh.port as usize >= self.ports.len() {
                return bad(format!("{}: nexthop {i} uses port {} (have {})", self.name, nh.port, self.ports.len()));
            }
        }
        for (g, members) in self.groups.iter().enumerate() {
            if members.is_empty() || members.len() > MAX_GROUP_MEMBERS {
                return bad(format!(
                    "{}: group {g} has {} members (1..={MAX_GROUP_MEMBERS})",
                    self.name,
                    members.len()
                ));
            }
            if let Some(m) = members.iter().find(|&&m| m as usize >= self.nexthops.len()) {
                return bad(format!("{}: group {g} names nexthop {m} (have {})", self.name, self.nexthops.len()));
            }
        }
        for r in &self.routes {
            let max = if r.prefix.is_ipv4() { 32 } else { 128 };
            if r.len > max {
                return bad(format!("{}: route {}/{} has prefix length > {max}", self.name, r.prefix, r.len));
            }
            if let Some(g) = r.group {
                if g as usize >= self.groups.len() {
                    return bad(format!(
                        "{}: route {}/{} names group {g} (have {})",
                        self.name,
                        r.prefix,
                        r.len,
                        self.groups.len()
                    ));
                }
            }
        }
        if let Err(e) = self.dilation() {
            return bad(format!("{}: time_dilation: {e}", self.name));
        }
        if self.load_balance.flowlet_gap_us == 0 {
            return bad(format!("{}: load_balance.flowlet_gap_us is 0 (δ must be longer than 0)", self.name));
        }
        if let Err(p) = self.qos.check(self.ports.len(), self.queue_limit_bytes) {
            return bad(format!("{}: qos.{}: {}", self.name, p.field, p.msg));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SwitchConfig {
        SwitchConfig {
            name: "rail1".into(),
            role: "rail".into(),
            netns: Some("rf-x-rail1".into()),
            hash_seed: 7,
            metrics_listen: "127.0.0.1:9400".parse().unwrap(),
            dscp_to_tc: default_dscp_map(),
            queue_limit_bytes: default_queue_limit(),
            xdp_mode: "driver".into(),
            ports: vec![PortConfig {
                name: "p0".into(),
                mac: "02:00:00:00:00:01".parse().unwrap(),
                line_rate_bps: 1_000_000_000,
                addresses: vec!["10.0.1.254/24".into()],
                peer: "host1:gpu0".into(),
                tx_delay_ns: 1_600,
                rx_delay_ns: 1_000,
            }],
            nexthops: vec![NextHopConfig { port: 0, mac: "02:00:00:00:01:01".parse().unwrap() }],
            groups: vec![vec![0]],
            routes: vec![RouteConfig { prefix: "10.0.1.1".parse().unwrap(), len: 32, group: Some(0) }],
            qos: QosConfig::default(),
            lldp: LldpConfig::default(),
            chassis_mac: None,
            time_dilation: 1.0,
            load_balance: LbConfig::default(),
            fib: false,
        }
    }

    #[test]
    fn json_round_trip_and_validate() {
        let c = sample();
        c.validate().unwrap();
        let text = serde_json::to_string(&c).unwrap();
        assert!(text.contains("\"02:00:00:00:00:01\""));
        let back: SwitchConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);
        let mut lb = c.clone();
        lb.load_balance.modes[3] = LbMode::SprayRoundRobin;
        let text = serde_json::to_string(&lb).unwrap();
        assert!(text.contains("\"spray-round-robin\""), "{text}");
        assert_eq!(serde_json::from_str::<SwitchConfig>(&text).unwrap(), lb);
    }

    #[test]
    fn validation_names_the_bad_reference() {
        let mut c = sample();
        c.groups = vec![vec![3]];
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("group 0 names nexthop 3"), "{e}");
        let mut c = sample();
        c.routes[0].len = 33;
        assert!(c.validate().unwrap_err().to_string().contains("prefix length"));
        let mut c = sample();
        c.time_dilation = 0.5;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("rail1: time_dilation: 0.5 is below 1"), "{e}");
        let mut c = sample();
        c.load_balance.flowlet_gap_us = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("rail1: load_balance.flowlet_gap_us is 0"), "{e}");
        let mut c = sample();
        c.ports[0].rx_delay_ns = MAX_PORT_DELAY_NS + 1;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("rail1: port 0 (p0) has rx_delay_ns 10000001 (at most 10000000 ns)"), "{e}");
        c.ports[0].rx_delay_ns = MAX_PORT_DELAY_NS;
        c.validate().unwrap();
    }

    #[test]
    fn port_delays_default_to_none_in_older_configs() {
        let mut v = serde_json::to_value(sample()).unwrap();
        let port = v["ports"][0].as_object_mut().unwrap();
        port.remove("tx_delay_ns");
        port.remove("rx_delay_ns");
        let c: SwitchConfig = serde_json::from_value(v).unwrap();
        assert_eq!((c.ports[0].tx_delay_ns, c.ports[0].rx_delay_ns), (0, 0));
    }

    #[test]
    fn qos_check_names_the_field() {
        let q = QosConfig::default();
        assert_eq!(q.check(24, 1 << 20), Ok(()));
        let field = |q: &QosConfig, ports| q.check(ports, 1 << 20).unwrap_err().field;
        assert_eq!(field(&QosConfig { xon_bytes: 3_200_000, ..q.clone() }, 4), "xon");
        assert_eq!(field(&QosConfig { xoff_bytes: 15 << 20, ..q.clone() }, 4), "xoff");
        // 33 ports × 512 KB of headroom reserve more than 16 MiB.
        assert_eq!(field(&q, 33), "headroom");
        assert_eq!(field(&QosConfig { cell_bytes: 0, ..q.clone() }, 4), "buffer");
        assert_eq!(field(&QosConfig { cell_bytes: 7, ..q.clone() }, 4), "cell");
        assert_eq!(field(&QosConfig { pause_quanta: 0, ..q.clone() }, 4), "pause_quanta");
        let wd = WatchdogConfig { poll_us: 300_000, ..WatchdogConfig::default() };
        assert_eq!(field(&QosConfig { watchdog: wd, ..q.clone() }, 4), "watchdog.poll");
        // PFC off: the lossless thresholds do not matter.
        assert_eq!(QosConfig { lossless_priorities: 0, xon_bytes: 9 << 20, ..q.clone() }.check(4, 1 << 20), Ok(()));
        assert_eq!(q.check(4, 32 << 20).unwrap_err().field, "queue_limit");
        // ETS: shares on non-strict queues, summing to 100.
        assert_eq!(QosConfig { ets_percent: [70, 0, 0, 30, 0, 0, 0, 0], ..q.clone() }.check(4, 1 << 20), Ok(()));
        let ets = |p: [u8; 8], strict: u8| {
            QosConfig { ets_percent: p, strict_priorities: strict, ..q.clone() }.check(4, 1 << 20)
        };
        assert_eq!(ets([60, 0, 0, 50, 0, 0, 0, 0], 1 << 7).unwrap_err().field, "ets");
        assert!(ets([60, 0, 0, 50, 0, 0, 0, 0], 1 << 7).unwrap_err().msg.contains("110 %"));
        assert!(ets([50, 0, 0, 0, 0, 0, 0, 50], 1 << 7).unwrap_err().msg.contains("queue 7 is strict"));
        assert!(ets([0, 0, 0, 0, 0, 0, 0, 200], 0).unwrap_err().msg.contains("more than 100"));
        assert!(ets([0; 8], 1 << 7).unwrap_err().msg.contains("0 %"));
        assert_eq!(ets([0; 8], 0xff), Ok(()));
        assert_eq!(ets([100, 0, 0, 0, 0, 0, 0, 0], 0), Ok(()));
        let mut c = sample();
        c.qos.xon_bytes = c.qos.xoff_bytes;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("rail1: qos.xon: 3200000 bytes is not below xoff"), "{e}");
    }

    #[test]
    fn wred_rule_of_thumb_is_a_warning_inconsistent_thresholds_an_error() {
        let q = QosConfig::default();
        assert_eq!((q.check(4, 1 << 20), q.warnings()), (Ok(()), vec![]));
        let wred = |min_bytes, max_bytes| QosConfig {
            wred: WredConfig { min_bytes, max_bytes, ..WredConfig::default() },
            xoff_bytes: 60_000,
            xon_bytes: 48_000,
            ..q.clone()
        };
        // The simulator's scenario: an ECN step at 100 KB above xOFF at 60 KB. Allowed, warned.
        let step = wred(100_000, 100_000);
        assert_eq!(step.check(4, 1 << 20), Ok(()));
        let w = step.warnings();
        assert_eq!(w.iter().map(|p| p.field).collect::<Vec<_>>(), ["wred.max"]);
        assert!(w[0].msg.contains("100000 bytes is not below xoff (60000 bytes)"), "{w:?}");
        // Marking from below xON: warned too, on the minimum.
        let low = wred(40_000, 50_000);
        assert_eq!(low.check(4, 1 << 20), Ok(()));
        assert_eq!(low.warnings().iter().map(|p| p.field).collect::<Vec<_>>(), ["wred.min"]);
        // Inside the rule: no warning.
        assert_eq!(wred(50_000, 55_000).warnings(), vec![]);
        // A lossy WRED queue: no PFC thresholds to compare with.
        assert_eq!(QosConfig { lossless_priorities: 0, ..step.clone() }.warnings(), vec![]);
        // Still errors: min above max, min 0, xON not below xOFF.
        assert_eq!(wred(100_001, 100_000).check(4, 1 << 20).unwrap_err().field, "wred.min");
        assert_eq!(wred(0, 100_000).check(4, 1 << 20).unwrap_err().field, "wred.min");
        assert_eq!(QosConfig { xon_bytes: 60_000, ..step }.check(4, 1 << 20).unwrap_err().field, "xon");
    }

    #[test]
    fn buffer_frames_counts_the_smallest_charge() {
        assert_eq!(buffer_frames(16 << 20, 256), 65536);
        assert_eq!(buffer_frames(600, 0), 10);
        assert_eq!(buffer_frames(601, 0), 11);
        assert_eq!(buffer_frames(1024, 64), 16);
    }

    #[test]
    fn mac_parse_errors() {
        assert!("02:00:00:00:00".parse::<Mac>().is_err());
        assert!("02:00:00:00:00:0g".parse::<Mac>().is_err());
        assert!("02:00:00:00:00:01:02".parse::<Mac>().is_err());
        assert_eq!("02:0a:00:00:00:ff".parse::<Mac>().unwrap().to_string(), "02:0a:00:00:00:ff");
    }
}
