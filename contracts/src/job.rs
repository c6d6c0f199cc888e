//! The job file a controller gives each `rocefab-hostd` (JSON), and the report it writes back.
//!
//! Connection setup is out of band, as with RDMA CM or an MPI/NCCL bootstrap: the controller
//! picks QP numbers, starting PSNs, R_Keys and virtual addresses for both ends of every RC
//! connection and writes them into each host's job file.
//!
//! ```json
//! { "name": "w", "timeout_ms": 30000,
//!   "nics": [ { "name": "gpu0", "mac": "02:00:00:00:01:01", "ip": "10.0.1.1",
//!               "line_rate_bps": 1000000000 } ],
//!   "qps": [ { "qpn": 256, "nic": 0, "peer_qpn": 257, "peer_ip": "10.0.1.2",
//!              "next_hop_mac": "02:00:00:00:02:01",
//!              "send": { "psn": 100, "remote_va": 65536, "rkey": 7, "len": 67108864, "seed": 1 } } ] }
//! ```
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use crate::time::Dilation;
use serde::{Deserialize, Serialize};

/// Errors reading or validating a job file.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("reading job file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("job file {path}: {source}")]
    Parse { path: String, source: serde_json::Error },
    #[error("job {job:?}: {what}")]
    Invalid { job: String, what: String },
}

/// Default job timeout (wall clock): 60 s.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Default local ACK timeout of a job file, emulated: 100 ms (longer than any pause a
/// 0xFFFF-quanta PFC frame causes at ≥ 1 Gb/s, 33.6 ms, so PFC alone never looks like loss).
/// At a large time dilation use [`default_retransmit_timeout_ns`] instead (`rocefab run` does).
pub const DEFAULT_RETRANSMIT_TIMEOUT_NS: u64 = 100_000_000;
/// The emulated local ACK timeout never defaults below 1 ms: ~12 times the longest pause one
/// PFC frame causes at 400G (0xFFFF quanta = 83.9 µs).
pub const MIN_DEFAULT_RETRANSMIT_TIMEOUT_NS: u64 = 1_000_000;

/// The default local ACK timeout at time dilation `d`, emulated: 100 ms of wall clock (what a
/// loaded 2-core machine needs not to mistake its own scheduling delays for loss), but at least
/// [`MIN_DEFAULT_RETRANSMIT_TIMEOUT_NS`] emulated. So the wall-clock timeout is
/// max(100 ms, 1 ms × D): 100 ms up to D = 100, 8 s at D = 8000 — instead of the 800 s a
/// fixed 100 ms emulated would take there.
pub fn default_retransmit_timeout_ns(d: Dilation) -> u64 {
    d.to_emulated_ns(DEFAULT_RETRANSMIT_TIMEOUT_NS).max(MIN_DEFAULT_RETRANSMIT_TIMEOUT_NS)
}

/// [`default_retransmit_timeout_ns`], but at least four times what a requester's window of
/// `window_bytes` takes to serialise at the slowest NIC's emulated `line_rate_bps`: a timeout
/// shorter than one window's serialisation fires before the window's first ACK can return when
/// the QP shares its link, and go-back-N then resends the window for ever (seen at 1 Gbit/s and
/// D = 100: 1 ms against a 128 KiB window's 1.05 ms, every ring QP out of retries).
pub fn default_retransmit_timeout_for(d: Dilation, window_bytes: u64, line_rate_bps: u64) -> u64 {
    let window_ns = (u128::from(window_bytes) * 8 * 1_000_000_000 / u128::from(line_rate_bps.max(1))) as u64;
    default_retransmit_timeout_ns(d).max(window_ns.saturating_mul(4))
}
/// Default requester window in packets.
pub const DEFAULT_WINDOW_PACKETS: u32 = 128;
/// Default requester window in payload bytes for jobs built for a fabric (`rocefab run`):
/// 128 KiB, i.e. [`DEFAULT_WINDOW_PACKETS`] at path MTU 1024. A window is what one QP can
/// have queued in a switch; without PFC the sum over the QPs sharing an egress queue must
/// stay under its limit (1 MiB by default) or the tail drops feed go-back-N. 128 KiB keeps
/// 7 QPs (an 8-rank incast or all-to-all) or 4 colliding ECMP flows under 1 MiB at any MTU;
/// a fixed packet count would double the bytes at path MTU 2048.
pub const DEFAULT_WINDOW_BYTES: u32 = 128 * 1024;

/// The window in packets for [`DEFAULT_WINDOW_BYTES`] at `mtu` (at least 1).
pub fn window_packets_for(mtu: crate::rdma::PathMtu) -> u32 {
    (DEFAULT_WINDOW_BYTES / mtu.bytes()).max(1)
}
/// Default bytes per RDMA WRITE message (longer transfers are posted as several messages).
pub const DEFAULT_MESSAGE_BYTES: u64 = 1 << 30;

/// Default [`Job::snapshot_interval_ms`].
pub const DEFAULT_SNAPSHOT_INTERVAL_MS: u64 = 100;

/// One host's job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    /// Job name (reports, metrics).
    pub name: String,
    /// Give up after this long (ms); the report then says which QPs did not finish.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// XDP attach mode of the host program: "driver" (default) or "skb".
    #[serde(default = "default_xdp_mode")]
    pub xdp_mode: String,
    /// Fault injection: drop every N-th received RoCEv2 frame in XDP (`rocefab_test_drop_nth`);
    /// 0 (default) attaches the plain `rocefab_host_xdp`.
    #[serde(default)]
    pub drop_nth: u32,
    /// Serve Prometheus metrics here while the job runs.
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
    /// After a job that finished reported, keep its QPs up (answering a peer's retransmitted
    /// duplicates with ACKs) and metrics served this long, ms of wall clock, or until SIGTERM /
    /// SIGINT; 0 (default): exit right after the report.
    #[serde(default)]
    pub linger_ms: u64,
    /// How often the data thread publishes a report snapshot to the metrics and `GET /sample`,
    /// ms of wall-clock time (100; `rocefab run --timeline` asks for 10).
    #[serde(default = "default_snapshot_interval")]
    pub snapshot_interval_ms: u64,
    /// The GPU NICs of this host.
    pub nics: Vec<NicSpec>,
    /// RC queue pairs.
    pub qps: Vec<QpSpec>,
    /// Collective transfers over those QPs (see [`CollectiveSpec`]).
    #[serde(default)]
    pub collective: Option<CollectiveSpec>,
    /// Time dilation D ≥ 1 (docs/src/emulated-time.md). NIC line rates and the QPs' retransmit
    /// timeouts in this file are emulated: the engine divides rates by D and multiplies
    /// durations by D (DCQCN, CNP interval, ACK coalescing, PFC quanta follow), and the report
    /// is in emulated time. `timeout_ms` and `linger_ms` are wall clock. 1 = real time.
    #[serde(default = "default_time_dilation")]
    pub time_dilation: f64,
    /// The DCQCN parameter set of every NIC's RP and NP (emulated units, × D as above).
    #[serde(default)]
    pub dcqcn: crate::dcqcn::DcqcnProfile,
    /// The NIC's NP: CNPs for marks within the interval, and what shares an interval
    /// (default: the paper's, immediate per QP).
    #[serde(default)]
    pub dcqcn_np: crate::dcqcn::NpSettings,
    /// The host's NVLink (emulated): collective transfers between two of its ranks
    /// ([`CollLocal::dst_rank`]) take it instead of the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<NvlinkSpec>,
}

/// An emulated NVLink between the GPUs of one host: each GPU sends one transfer at a time at
/// `bandwidth_bps`, and a transfer lands `latency_ns` after its last byte left (emulated; the
/// engine puts both on the wall clock at the job's time dilation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkSpec {
    pub bandwidth_bps: u64,
    pub latency_ns: u64,
}

fn default_time_dilation() -> f64 {
    1.0
}

/// The part of a collective (ring AllReduce, incast, all-to-all, broadcast) this host runs:
/// its ranks' buffers, the RDMA WRITEs it issues (each once its dependencies arrived), the
/// writes it receives (applied to a rank buffer as sum or copy when their message completes)
/// and the expected final contents.
///
/// Each connection (ordered rank pair) is one RC QP pair; a responder QP's region is a staging
/// area with one slot per transfer. RC delivers messages in order, so the k-th message that
/// completes on a responder QP is the k-th entry of `recvs` for that QP (by id); requesters
/// post their transfers in id order for the same reason.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveSpec {
    /// Collective name (reports).
    pub kind: String,
    /// Local ranks.
    pub ranks: Vec<RankSpec>,
    /// Writes this host issues.
    #[serde(default)]
    pub sends: Vec<CollSend>,
    /// Writes this host receives.
    #[serde(default)]
    pub recvs: Vec<CollRecv>,
    /// Transfers inside one rank (no network), e.g. an all-to-all's own slot.
    #[serde(default)]
    pub locals: Vec<CollLocal>,
    /// Expected final contents.
    #[serde(default)]
    pub expect: Vec<ExpectSpec>,
}

/// A local rank: a buffer of `bytes`, whose first `input_bytes` hold pattern `seed`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankSpec {
    pub rank: u32,
    pub bytes: u64,
    pub input_bytes: u64,
    pub seed: u64,
}

/// Receiver operation on u32 little-endian elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollOp {
    /// Element-wise wrapping add.
    Sum,
    /// Overwrite.
    Copy,
}

/// An RDMA WRITE of `len` bytes at `src_offset` of rank `rank`'s buffer, over requester QP
/// `qpn`, to `remote_va` (the peer's staging slot), once every transfer in `deps` is done here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollSend {
    pub id: usize,
    pub qpn: u32,
    pub rank: u32,
    pub src_offset: u64,
    pub len: u64,
    pub remote_va: u64,
    #[serde(default)]
    pub deps: Vec<usize>,
}

/// A write arriving on responder QP `qpn` into its staging slot `staging_offset`, applied to
/// rank `rank`'s buffer at `dst_offset` with `op`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollRecv {
    pub id: usize,
    pub qpn: u32,
    pub rank: u32,
    pub staging_offset: u64,
    pub dst_offset: u64,
    pub len: u64,
    pub op: CollOp,
}

/// A transfer within rank `rank`'s buffer, run once `deps` are done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollLocal {
    pub id: usize,
    /// The rank whose buffer is read.
    pub rank: u32,
    pub src_offset: u64,
    pub dst_offset: u64,
    pub len: u64,
    pub op: CollOp,
    #[serde(default)]
    pub deps: Vec<usize>,
    /// Another rank of the host that receives the bytes over the job's NVLink ([`NvlinkSpec`]);
    /// `None`: within `rank`, at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_rank: Option<u32>,
    /// Emulated ns the transfer occupies its rank before it completes (a training job's compute
    /// gap); only within a rank (`dst_rank` `None`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hold_ns: u64,
    /// The report gives the time this transfer completed, with the host's counters then
    /// ([`Report::milestones`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub milestone: bool,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// Rank `rank`'s bytes `offset..offset+len` must equal, as u32 little-endian elements, the
/// wrapping sum over `terms` of pattern `seed` starting at pattern byte offset `pattern_offset`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    pub rank: u32,
    pub offset: u64,
    pub len: u64,
    /// (seed, pattern_offset) pairs.
    pub terms: Vec<(u64, u64)>,
}

/// One GPU NIC port (a veth in the host namespace).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    /// Interface name in the host namespace.
    pub name: String,
    /// Source MAC (`aa:bb:cc:dd:ee:ff`).
    pub mac: String,
    /// Source IP (IPv4 or IPv6).
    pub ip: IpAddr,
    /// NIC line rate, bits/s, emulated: the transmit shaper (at rate / D) and the PFC quanta
    /// length.
    pub line_rate_bps: u64,
    /// InfiniBand path MTU in bytes (256..4096); default: the largest that fits the link MTU.
    #[serde(default)]
    pub path_mtu: Option<u32>,
    /// Send every packet as RDMA WRITE Only (spray-safe) instead of First/Middle/Last, and
    /// place WRITE Only packets that arrive out of order (`gpu_host::receiver`). Both ends of a
    /// connection should agree.
    #[serde(default)]
    pub write_only: bool,
    /// DCQCN reaction point on the QPs of this NIC (default true).
    #[serde(default = "default_true")]
    pub dcqcn: bool,
    /// Priorities and DSCPs of this NIC's traffic; the controller fills them from what the
    /// host's DCBX agent negotiated (default: the reference design's 24 → 3, 48 → 7).
    #[serde(default)]
    pub classes: NicClasses,
    /// Ultra Ethernet Transport instead of RoCEv2: every QP of this NIC is a RUD Packet
    /// Delivery Context (`gpu_host::uet`). Both ends of a connection must agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uet: Option<UetSpec>,
}

/// A NIC's UET settings (the job's JobID, this host's PIDonFEP, spraying, the trim DSCP its
/// receivers recognise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UetSpec {
    /// The SES JobID (24 bits).
    pub job_id: u32,
    /// The SES PIDonFEP of this host's process (12 bits).
    pub pid_on_fep: u16,
    /// A different entropy (UDP source port) per packet; false: one per PDC.
    #[serde(default = "default_true")]
    pub spray: bool,
    /// The DSCP switches remark trimmed packets with: a packet carrying it is trimmed (as SAI
    /// PR #2155 tells them apart); besides, a payload shorter than its SES header says is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim_dscp: Option<u8>,
    /// UDP destination port (default 4793).
    #[serde(default = "default_uet_port")]
    pub udp_port: u16,
    /// The native encapsulation instead of UDP: this IP protocol (253 in uet-ref-prov) and the
    /// 4-byte entropy header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_protocol: Option<u8>,
    /// Reliable Ordered Delivery (ROD) instead of RUD: one entropy per PDC, packets accepted
    /// in PSN order only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ordered: bool,
}

fn default_uet_port() -> u16 {
    4793
}

/// DSCP and PFC priority of a NIC's RoCEv2 data (and ACK/NAK) frames and of its CNPs, and the
/// PFC enable vector. A PFC pause of `data_priority` stops data and ACKs; one of `cnp_priority`
/// stops CNPs; either only if its bit is set in `pfc_enable` (802.1Qbb: a PFC frame for a
/// priority without PFC is counted and ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicClasses {
    pub data_dscp: u8,
    pub data_priority: u8,
    pub cnp_dscp: u8,
    pub cnp_priority: u8,
    /// Bit p: PFC enabled on priority p (DCBX-negotiated; default priority 3).
    #[serde(default = "default_pfc_enable")]
    pub pfc_enable: u8,
}

fn default_pfc_enable() -> u8 {
    1 << 3
}

impl Default for NicClasses {
    fn default() -> Self {
        NicClasses { data_dscp: 24, data_priority: 3, cnp_dscp: 48, cnp_priority: 7, pfc_enable: default_pfc_enable() }
    }
}

impl NicClasses {
    /// Checks the ranges (DSCP 0..=63, priority 0..=7).
    pub fn validate(&self) -> Result<(), String> {
        if self.data_dscp > 63 || self.cnp_dscp > 63 {
            return Err(format!("DSCP must be 0..=63 (data {}, cnp {})", self.data_dscp, self.cnp_dscp));
        }
        if self.data_priority > 7 || self.cnp_priority > 7 {
            return Err(format!("priority must be 0..=7 (data {}, cnp {})", self.data_priority, self.cnp_priority));
        }
        Ok(())
    }
}

/// One RC queue pair. It may be a requester (`send`), a responder (`recv`) or both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QpSpec {
    /// Local QP number (24 bits).
    pub qpn: u32,
    /// Index into `nics`.
    pub nic: usize,
    /// The remote QP number.
    pub peer_qpn: u32,
    /// The remote NIC's IP.
    pub peer_ip: IpAddr,
    /// Destination MAC of frames to the peer (the peer itself or the gateway).
    pub next_hop_mac: String,
    /// Requester side.
    #[serde(default)]
    pub send: Option<SendSpec>,
    /// Responder side.
    #[serde(default)]
    pub recv: Option<RecvSpec>,
    /// Free-form label (e.g. "rank 0 -> rank 1") for reports and metrics.
    #[serde(default)]
    pub label: String,
    /// The alternate path (IBTA automatic path migration, APM): where the QP goes when its
    /// path fails. `None`: no alternate path loaded (a path failure ends in retry exhaustion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt: Option<AltPath>,
}

/// A QP's alternate path (IBTA Vol. 1 17.2.8, "Automatic Path Migration"): another local NIC
/// port and the peer's address on its side of the fabric. A dual-port NIC's connections load
/// the other port at both ends (book Fig. 13-5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AltPath {
    /// Index into `nics` (not the QP's own `nic`).
    pub nic: usize,
    /// The peer's IP on the alternate path.
    pub peer_ip: IpAddr,
    /// Destination MAC of frames on the alternate path (its gateway).
    pub next_hop_mac: String,
}

/// What a requester writes: `len` bytes of the deterministic pattern `seed` (see
/// `gpu_host::nic::pattern`) to `remote_va` / `rkey` of the peer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendSpec {
    /// First PSN (the responder's `recv.psn`).
    pub psn: u32,
    /// Remote address of the first byte.
    pub remote_va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Bytes to write (0 when the QP only carries collective steps).
    pub len: u64,
    /// Pattern seed of the data.
    #[serde(default)]
    pub seed: u64,
    /// Bytes per RDMA WRITE message.
    #[serde(default = "default_message_bytes")]
    pub message_bytes: u64,
    /// Outstanding packets.
    #[serde(default = "default_window")]
    pub window_packets: u32,
    /// Local ACK timeout, emulated ns.
    #[serde(default = "default_rto")]
    pub retransmit_timeout_ns: u64,
}

/// A responder's memory region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecvSpec {
    /// Expected first PSN.
    pub psn: u32,
    /// Virtual address of the region.
    pub va: u64,
    /// Its R_Key.
    pub rkey: u32,
    /// Region size and bytes expected.
    pub len: u64,
    /// Verify the region equals this pattern seed when the job ends.
    #[serde(default)]
    pub expect_seed: Option<u64>,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}
fn default_snapshot_interval() -> u64 {
    DEFAULT_SNAPSHOT_INTERVAL_MS
}
fn default_xdp_mode() -> String {
    "driver".into()
}
fn default_true() -> bool {
    true
}
fn default_message_bytes() -> u64 {
    DEFAULT_MESSAGE_BYTES
}
fn default_window() -> u32 {
    DEFAULT_WINDOW_PACKETS
}
fn default_rto() -> u64 {
    DEFAULT_RETRANSMIT_TIMEOUT_NS
}

/// `rocefab-hostd --hosts FILE`: the hosts of a job that one process runs, each in its own
/// network namespace with its own job file and log, their NICs driven by `workers` data threads.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostsFile {
    /// Data threads; each drives the NICs of every `workers`-th host from one loop (at least 1).
    pub workers: u16,
    pub hosts: Vec<HostEntry>,
}

/// One host of a [`HostsFile`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// The host's name: it prefixes the host's lines on stdout (`<name>\t<json>`).
    pub name: String,
    /// Its network namespace (`ip netns` name).
    pub netns: String,
    /// Its job file.
    pub job: std::path::PathBuf,
    /// Its log file (the process's own lines go to stderr).
    pub log: std::path::PathBuf,
}

impl HostsFile {
    /// Reads and checks a hosts file: at least one host and one worker, names unique and
    /// without tabs or newlines (they prefix output lines).
    pub fn load(path: &Path) -> Result<HostsFile, JobError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| JobError::Read { path: p.clone(), source })?;
        let f: HostsFile = serde_json::from_str(&text).map_err(|source| JobError::Parse { path: p.clone(), source })?;
        let bad = |what: String| JobError::Invalid { job: p.clone(), what };
        if f.workers == 0 {
            return Err(bad("workers: 0 (at least 1)".into()));
        }
        if f.hosts.is_empty() {
            return Err(bad("hosts: empty".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, h) in f.hosts.iter().enumerate() {
            if h.name.is_empty() || h.name.contains(['\t', '\n', '\r']) {
                return Err(bad(format!("hosts[{i}].name {:?}: empty or with a tab or newline", h.name)));
            }
            if !seen.insert(h.name.as_str()) {
                return Err(bad(format!("hosts[{i}].name {:?} appears twice", h.name)));
            }
        }
        Ok(f)
    }
}

/// Parses `aa:bb:cc:dd:ee:ff` ([`rocefab_wire::ethernet::MacAddr`], the one MAC parser).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    s.parse::<rocefab_wire::ethernet::MacAddr>().ok().map(|m| m.0)
}

/// Formats a MAC as `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(m: [u8; 6]) -> String {
    rocefab_wire::ethernet::MacAddr(m).to_string()
}

impl Job {
    /// Reads and validates a job file.
    pub fn load(path: &Path) -> Result<Job, JobError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| JobError::Read { path: p.clone(), source })?;
        let job: Job = serde_json::from_str(&text).map_err(|source| JobError::Parse { path: p, source })?;
        job.validate()?;
        Ok(job)
    }

    /// The checked time dilation.
    pub fn dilation(&self) -> Result<Dilation, JobError> {
        Dilation::new(self.time_dilation)
            .map_err(|e| JobError::Invalid { job: self.name.clone(), what: format!("time_dilation: {e}") })
    }

    /// Checks references and ranges; the error names the offending entry.
    pub fn validate(&self) -> Result<(), JobError> {
        let bad = |what: String| Err(JobError::Invalid { job: self.name.clone(), what });
        self.dilation()?;
        if self.nics.is_empty() {
            return bad("no nics".into());
        }
        if self.snapshot_interval_ms == 0 {
            return bad("snapshot_interval_ms must be at least 1".into());
        }
        if self.nvlink.is_some_and(|n| n.bandwidth_bps == 0) {
            return bad("nvlink.bandwidth_bps must be > 0".into());
        }
        if self.xdp_mode != "driver" && self.xdp_mode != "skb" {
            return bad(format!("xdp_mode {:?}: expected \"driver\" or \"skb\"", self.xdp_mode));
        }
        for (i, n) in self.nics.iter().enumerate() {
            if parse_mac(&n.mac).is_none() {
                return bad(format!("nics[{i}] ({}): mac {:?} is not aa:bb:cc:dd:ee:ff", n.name, n.mac));
            }
            if n.line_rate_bps == 0 {
                return bad(format!("nics[{i}] ({}): line_rate_bps must be > 0", n.name));
            }
            if let Some(m) = n.path_mtu {
                if crate::rdma::PathMtu::from_bytes(m).is_err() {
                    return bad(format!("nics[{i}] ({}): path_mtu {m} is not 256/512/1024/2048/4096", n.name));
                }
            }
        }
        let mut seen = std::collections::HashSet::with_capacity(self.qps.len());
        for (i, q) in self.qps.iter().enumerate() {
            let what = |w: &str| format!("qps[{i}] (qpn {}): {w}", q.qpn);
            if q.qpn > crate::rdma::PSN_MASK || q.peer_qpn > crate::rdma::PSN_MASK {
                return bad(what("qpn and peer_qpn must fit 24 bits"));
            }
            if !seen.insert(q.qpn) {
                return bad(what("duplicate qpn"));
            }
            let Some(nic) = self.nics.get(q.nic) else {
                return bad(what(&format!("nic {} does not exist ({} nics)", q.nic, self.nics.len())));
            };
            if nic.ip.is_ipv4() != q.peer_ip.is_ipv4() {
                return bad(what("peer_ip and the nic's ip are of different families"));
            }
            if let Some(alt) = &q.alt {
                let Some(an) = self.nics.get(alt.nic) else {
                    return bad(what(&format!("alt.nic {} does not exist ({} nics)", alt.nic, self.nics.len())));
                };
                if alt.nic == q.nic {
                    return bad(what("alt.nic is the QP's own nic: an alternate path takes another port"));
                }
                if an.ip.is_ipv4() != alt.peer_ip.is_ipv4() {
                    return bad(what("alt.peer_ip and the alternate nic's ip are of different families"));
                }
                if parse_mac(&alt.next_hop_mac).is_none() {
                    return bad(what(&format!("alt.next_hop_mac {:?} is not aa:bb:cc:dd:ee:ff", alt.next_hop_mac)));
                }
            }
            if parse_mac(&q.next_hop_mac).is_none() {
                return bad(what(&format!("next_hop_mac {:?} is not aa:bb:cc:dd:ee:ff", q.next_hop_mac)));
            }
            if let Some(s) = &q.send {
                if s.message_bytes == 0 || s.message_bytes > u64::from(u32::MAX) {
                    return bad(what("send.message_bytes must be in 1..=4294967295"));
                }
                if s.window_packets == 0 || s.retransmit_timeout_ns == 0 {
                    return bad(what("send.window_packets and send.retransmit_timeout_ns must be > 0"));
                }
                if s.psn > crate::rdma::PSN_MASK {
                    return bad(what("send.psn must fit 24 bits"));
                }
            }
            if let Some(r) = &q.recv {
                if r.psn > crate::rdma::PSN_MASK {
                    return bad(what("recv.psn must fit 24 bits"));
                }
                if usize::try_from(r.len).is_err() {
                    return bad(what("recv.len too large"));
                }
            }
        }
        if let Some(c) = &self.collective {
            self.validate_collective(c)?;
        }
        Ok(())
    }

    fn validate_collective(&self, c: &CollectiveSpec) -> Result<(), JobError> {
        let bad = |what: String| Err(JobError::Invalid { job: self.name.clone(), what });
        // Lookups by rank, QP number and transfer id: a host of a 512-rank all-to-all has
        // 8,176 QPs and as many transfers.
        let ranks: std::collections::HashMap<u32, &RankSpec> = c.ranks.iter().map(|x| (x.rank, x)).collect();
        let qps: std::collections::HashMap<u32, &QpSpec> = self.qps.iter().map(|q| (q.qpn, q)).collect();
        let rank = |r: u32| ranks.get(&r).copied();
        for (i, r) in c.ranks.iter().enumerate() {
            if r.input_bytes > r.bytes || r.bytes % 4 != 0 || usize::try_from(r.bytes).is_err() {
                return bad(format!(
                    "collective.ranks[{i}] (rank {}): bytes must be a multiple of 4 and ≥ input_bytes",
                    r.rank
                ));
            }
        }
        let mut ids = std::collections::HashSet::new();
        let in_buf =
            |r: u32, off: u64, len: u64| rank(r).is_some_and(|x| off.checked_add(len).is_some_and(|e| e <= x.bytes));
        for s in &c.sends {
            if qps.get(&s.qpn).is_none_or(|q| q.send.is_none()) {
                return bad(format!("collective send {}: qpn {} is not a local requester QP", s.id, s.qpn));
            }
            if !in_buf(s.rank, s.src_offset, s.len) {
                return bad(format!(
                    "collective send {}: rank {} range {}+{} outside its buffer",
                    s.id, s.rank, s.src_offset, s.len
                ));
            }
            if s.len == 0 || s.len > u64::from(u32::MAX) {
                return bad(format!("collective send {}: len {} not in 1..2^32", s.id, s.len));
            }
        }
        for r in &c.recvs {
            let Some(region) = qps.get(&r.qpn).and_then(|q| q.recv.as_ref()) else {
                return bad(format!("collective recv {}: qpn {} is not a local responder QP", r.id, r.qpn));
            };
            if !in_buf(r.rank, r.dst_offset, r.len) || r.staging_offset + r.len > region.len || r.len % 4 != 0 {
                return bad(format!(
                    "collective recv {}: ranges outside the rank buffer or the staging region, or not whole u32s",
                    r.id
                ));
            }
            ids.insert(r.id);
        }
        for l in &c.locals {
            let dst = l.dst_rank.unwrap_or(l.rank);
            if dst != l.rank && self.nvlink.is_none() {
                return bad(format!(
                    "collective local {}: rank {} -> rank {dst} crosses NVLink but the job has no nvlink",
                    l.id, l.rank
                ));
            }
            if dst != l.rank && l.hold_ns > 0 {
                return bad(format!("collective local {}: a hold (compute gap) stays on its rank", l.id));
            }
            if !in_buf(l.rank, l.src_offset, l.len) || !in_buf(dst, l.dst_offset, l.len) || l.len % 4 != 0 {
                return bad(format!(
                    "collective local {}: ranges outside rank {}'s or rank {dst}'s buffer",
                    l.id, l.rank
                ));
            }
            ids.insert(l.id);
        }
        for (id, deps) in c.sends.iter().map(|s| (s.id, &s.deps)).chain(c.locals.iter().map(|l| (l.id, &l.deps))) {
            if let Some(d) = deps.iter().find(|d| !ids.contains(d)) {
                return bad(format!("collective transfer {id}: dependency {d} is not received or run on this host"));
            }
        }
        for e in &c.expect {
            if !in_buf(e.rank, e.offset, e.len) || e.offset % 4 != 0 || e.len % 4 != 0 {
                return bad(format!(
                    "collective expect for rank {}: range {}+{} outside its buffer or unaligned",
                    e.rank, e.offset, e.len
                ));
            }
        }
        Ok(())
    }
}

/// Per-QP results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QpReport {
    pub qpn: u32,
    pub peer_qpn: u32,
    pub nic: String,
    pub label: String,
    /// Requester: payload bytes of the messages to send / acknowledged.
    pub send_bytes: u64,
    pub send_completed_bytes: u64,
    pub packets_sent: u64,
    pub retransmitted_packets: u64,
    pub timeouts: u64,
    pub naks_received: u64,
    pub cnps_received: u64,
    /// Time from job start until the last byte was acknowledged (requester), ns.
    pub send_done_ns: Option<u64>,
    /// Goodput of the requester: acknowledged payload bits / send_done_ns.
    pub goodput_bps: Option<f64>,
    /// DCQCN rate at the end, bits/s.
    pub rate_bps: u64,
    /// DCQCN α of the requester (the reaction point's congestion estimate, 0..=1) at the
    /// report's time; 0 without DCQCN.
    #[serde(default)]
    pub alpha: f64,
    /// Responder: bytes expected / placed.
    pub recv_bytes: u64,
    pub bytes_placed: u64,
    pub packets_received: u64,
    pub duplicates: u64,
    /// Request packets that arrived ahead of the expected PSN (a hole before them): placed
    /// with out-of-order placement (Write-Only), else dropped and NAKed like `out_of_sequence`.
    #[serde(default)]
    pub out_of_order: u64,
    pub out_of_sequence: u64,
    pub naks_sent: u64,
    pub acks_sent: u64,
    pub ce_marked: u64,
    pub cnps_sent: u64,
    pub recv_done_ns: Option<u64>,
    /// Responder: region equals the expected pattern (None: not checked).
    pub verified: Option<bool>,
    /// QP error, if any.
    pub error: Option<String>,
    /// The QP's move to its alternate path, if it moved (`nic` is then the alternate port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<Migration>,
    /// A UET NIC's QP: its Packet Delivery Context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdc: Option<PdcReport>,
}

/// A UET PDC's counters (both ends; `retransmitted_packets`, `timeouts`, `naks_*`,
/// `out_of_order` of the [`QpReport`] hold the sums).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdcReport {
    /// This end's PDC id and the peer's (0 until learnt).
    pub spdcid: u16,
    pub dpdcid: u16,
    /// Packets sent again on a NACK, and on a timeout.
    pub retransmitted_on_nack: u64,
    pub retransmitted_on_timeout: u64,
    /// NACKs received: for trimmed packets, other codes.
    pub nacks_trimmed: u64,
    pub nacks_other: u64,
    /// Congestion window at the report (bytes) and its cuts.
    pub cwnd_bytes: u64,
    pub window_cuts: u64,
    /// Responder: trimmed packets received (each NACKed), packets dropped (outside the window
    /// or before a SYN).
    pub trimmed_received: u64,
    pub dropped: u64,
    /// Distinct entropy values the requester used.
    pub entropies: u32,
}

/// A QP's path migration (APM): from which port, when, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    /// The port it left.
    pub from_nic: String,
    /// When, emulated ns since the job's start.
    pub at_ns: u64,
    pub cause: MigrationCause,
}

/// Why a QP migrated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MigrationCause {
    /// Its port lost carrier (the NIC saw its own link go down).
    LinkDown,
    /// The requester ran out of retries on the primary path (IBTA: path failure detected by
    /// the retry count; qib/hfi1 migrate there instead of failing the QP).
    RetryExhausted,
    /// A packet of the QP with MigReq set arrived on the alternate path: the peer migrated.
    PeerMigrated,
}

impl MigrationCause {
    /// As metrics label it (the JSON name).
    pub fn label(self) -> &'static str {
        match self {
            MigrationCause::LinkDown => "link_down",
            MigrationCause::RetryExhausted => "retry_exhausted",
            MigrationCause::PeerMigrated => "peer_migrated",
        }
    }

    /// As the text report says it.
    pub fn describe(self) -> &'static str {
        match self {
            MigrationCause::LinkDown => "its port lost carrier",
            MigrationCause::RetryExhausted => "retries exhausted on the primary path",
            MigrationCause::PeerMigrated => "the peer migrated (MigReq on the alternate path)",
        }
    }
}

/// Per-NIC results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NicReport {
    pub name: String,
    pub line_rate_bps: u64,
    pub path_mtu: u32,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_bad_icrc: u64,
    pub rx_malformed: u64,
    pub rx_unknown_qp: u64,
    pub rx_ignored: u64,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    pub ctrl_queue_overflows: u64,
    /// PFC frames (and 802.3x PAUSE) received.
    pub pfc_frames_received: u64,
    /// Of those, PFC frames naming a priority on which PFC is not enabled (those bits ignored).
    #[serde(default)]
    pub pfc_ignored_frames: u64,
    /// PFC priority of the NIC's RoCEv2 data (what the `*_prio3` fields count; 3 by default).
    #[serde(default)]
    pub data_priority: u8,
    /// DSCP of the NIC's RoCEv2 data frames.
    #[serde(default)]
    pub data_dscp: u8,
    /// Frames that paused / resumed the data priority (priority 3 by default).
    pub pfc_pause_frames_prio3: u64,
    pub pfc_resume_frames_prio3: u64,
    /// Time the data priority (RoCEv2 data, 3 by default) was paused, ns.
    pub pfc_paused_ns_prio3: u64,
    /// The data priority is paused at the report's time.
    #[serde(default)]
    pub pfc_paused_now: bool,
    /// Counters of the host XDP program by name (rx, roce, mac_control, pass, …).
    pub xdp: std::collections::BTreeMap<String, u64>,
}

/// What `rocefab-hostd` prints (one JSON object) when the job ends. Times, rates and goodput
/// are emulated (wall clock converted back with `time_dilation`); bytes and counts are as
/// measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub job: String,
    /// The job's time dilation D (0 in a report from before emulated time: read it as 1).
    #[serde(default)]
    pub time_dilation: f64,
    /// Every QP finished (and verified where asked) within the timeout.
    pub ok: bool,
    pub error: Option<String>,
    /// Job duration until the last QP finished (or the timeout), ns.
    pub elapsed_ns: u64,
    /// When the job's clock started (its go), Unix ns (CLOCK_REALTIME; 0: not known): what the
    /// emulated times of this report count from, so that another clock's instants (a failure
    /// injected) can be put on it.
    #[serde(default)]
    pub started_unix_ns: u64,
    pub qps: Vec<QpReport>,
    pub nics: Vec<NicReport>,
    /// Per local rank of a collective: its buffer matches the expected result.
    #[serde(default)]
    pub ranks: Vec<RankReport>,
    /// What every QP that had not finished was waiting for when the report was made (empty when
    /// every QP finished): the diagnosis of a job that timed out or was stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<QpStall>,
    /// Bytes the collective moved between the host's GPUs over NVLink (no network frames).
    #[serde(default)]
    pub nvlink_bytes: u64,
    /// When each local transfer marked [`CollLocal::milestone`] completed, in completion order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub milestones: Vec<MilestoneReport>,
}

/// A milestone transfer's completion: its id, when (emulated ns since the job's start) and the
/// host's cumulative counters at that moment (so a training job reports them per iteration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneReport {
    pub id: usize,
    pub at_ns: u64,
    /// Bytes the host's NICs sent (frames, all QPs).
    pub tx_bytes: u64,
    /// Packets the host's requesters sent again (go-back-N).
    pub retransmitted_packets: u64,
    /// CNPs the host's NICs received.
    pub cnps_received: u64,
    /// PFC frames the host's NICs received.
    pub pfc_frames_received: u64,
}

/// An unfinished QP's state when the report was made: what it was waiting for. PSNs are the
/// 24-bit wire values; times are emulated ns since the job's start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QpStall {
    pub qpn: u32,
    pub peer_qpn: u32,
    pub nic: String,
    pub label: String,
    /// `requester` or `responder`.
    pub role: String,
    /// Requester: the last PSN the responder acknowledged (`None`: none yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_acked_psn: Option<u32>,
    /// Requester: the first and last PSN sent and not acknowledged (`None`: none outstanding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outstanding_psns: Option<(u32, u32)>,
    /// Requester: how many PSNs that is.
    #[serde(default)]
    pub outstanding_packets: u32,
    /// Requester: posted packets not (re)sent yet (the window, the rate or PFC held them).
    #[serde(default)]
    pub unsent_packets: u32,
    /// Requester: local ACK timeouts so far, and how many more it tolerates before it errors.
    #[serde(default)]
    pub timeouts: u64,
    #[serde(default)]
    pub retries_left: u32,
    /// Responder: the next PSN it expects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_psn: Option<u32>,
    /// Responder: bytes placed of the bytes it expects.
    #[serde(default)]
    pub placed_bytes: u64,
    #[serde(default)]
    pub expected_bytes: u64,
    /// The NIC's data priority is paused by PFC now.
    pub paused_now: bool,
    /// The last progress: an ACK that acknowledged new PSNs (requester) or a packet placed
    /// (responder); `None`: none since the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_progress_ns: Option<u64>,
    /// The last frame of this QP's peer: an ACK/NAK (requester) or a request packet (responder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heard_ns: Option<u64>,
    /// When the report was made.
    #[serde(default)]
    pub at_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// One phrase: what it was waiting for.
    pub waiting_for: String,
}

impl QpStall {
    /// One line for people: the QP, what it waited for, and the numbers behind it.
    pub fn describe(&self) -> String {
        let ms = |ns: u64| format!("{:.3} ms", ns as f64 / 1e6);
        let mut s = format!("QP {:#x} {} ({}) on {}: {}", self.qpn, self.role, self.label, self.nic, self.waiting_for);
        if self.role == "requester" {
            match self.last_acked_psn {
                Some(p) => s += &format!("; last acked PSN {p}"),
                None => s += "; no PSN acked yet",
            }
            match self.outstanding_psns {
                Some((a, b)) => s += &format!(", outstanding PSNs {a}..={b} ({})", self.outstanding_packets),
                None => s += ", nothing outstanding",
            }
            s += &format!(
                ", {} unsent, {} timeouts ({} retries left)",
                self.unsent_packets, self.timeouts, self.retries_left
            );
        } else {
            if let Some(e) = self.expected_psn {
                s += &format!("; expected PSN {e}");
            }
            s += &format!(", placed {} of {} bytes", self.placed_bytes, self.expected_bytes);
        }
        s += if self.paused_now { ", paused by PFC now" } else { ", not paused" };
        match self.last_progress_ns {
            Some(t) => {
                s += &format!(", last progress at {} ({} before the report)", ms(t), ms(self.at_ns.saturating_sub(t)))
            }
            None => s += ", no progress since the start",
        }
        if let Some(t) = self.last_heard_ns {
            s += &format!(", peer last heard at {}", ms(t));
        }
        if let Some(e) = &self.error {
            s += &format!(", error: {e}");
        }
        s
    }
}

/// Collective result of one rank.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: u32,
    /// Every transfer into and out of this rank finished.
    pub complete: bool,
    /// The buffer equals the expected result (None: not checked).
    pub verified: Option<bool>,
    /// Byte offset of the first wrong element.
    pub first_mismatch: Option<u64>,
    /// A rank whose collective had not completed: the transfers it was waiting for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rocefab-hostd --hosts`: a hosts file names each host once, without characters that
    /// would break its prefixed output lines, and has a worker.
    #[test]
    fn a_hosts_file_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hosts.json");
        let load = |body: &str| {
            std::fs::write(&p, body).unwrap();
            HostsFile::load(&p).map_err(|e| e.to_string())
        };
        let h = |n: &str| format!(r#"{{"name":"{n}","netns":"ns-{n}","job":"/j/{n}.json","log":"/j/{n}.log"}}"#);
        let f = load(&format!(r#"{{"workers":2,"hosts":[{},{}]}}"#, h("host1"), h("host2"))).unwrap();
        assert_eq!((f.workers, f.hosts.len(), f.hosts[1].netns.as_str()), (2, 2, "ns-host2"));
        let e = load(&format!(r#"{{"workers":1,"hosts":[{},{}]}}"#, h("host1"), h("host1"))).unwrap_err();
        assert!(e.ends_with(r#"hosts[1].name "host1" appears twice"#), "{e}");
        let e = load(&format!(r#"{{"workers":1,"hosts":[{}]}}"#, h("a\\tb"))).unwrap_err();
        assert!(e.contains(r#"hosts[0].name "a\tb": empty or with a tab or newline"#), "{e}");
        let e = load(&format!(r#"{{"workers":0,"hosts":[{}]}}"#, h("host1"))).unwrap_err();
        assert!(e.ends_with("workers: 0 (at least 1)"), "{e}");
        assert!(load(r#"{"workers":1,"hosts":[]}"#).unwrap_err().ends_with("hosts: empty"));
        let e = load(r#"{"workers":1,"hosts":[],"extra":1}"#).unwrap_err();
        assert!(e.contains("unknown field `extra`"), "{e}");
    }

    #[test]
    fn a_migration_causes_metric_label_is_its_json_name() {
        for c in [MigrationCause::LinkDown, MigrationCause::RetryExhausted, MigrationCause::PeerMigrated] {
            assert_eq!(serde_json::to_value(c).unwrap(), c.label());
        }
    }

    #[test]
    fn the_default_timeout_outlasts_four_windows_on_slow_links() {
        let d = |x: f64| Dilation::new(x).unwrap();
        // 1 Gbit/s, D = 100: 128 KiB takes 1.049 ms, so 4.194 ms instead of 1 ms.
        assert_eq!(default_retransmit_timeout_for(d(100.0), 131_072, 1_000_000_000), 4_194_304);
        // 400G at D = 8000: the window is 2.6 µs; the 1 ms floor stays.
        assert_eq!(default_retransmit_timeout_for(d(8000.0), 131_072, 400_000_000_000), 1_000_000);
        // Real time: 100 ms of wall clock stays.
        assert_eq!(default_retransmit_timeout_for(d(1.0), 131_072, 1_000_000_000), 100_000_000);
    }

    fn job() -> Job {
        serde_json::from_str(
            r#"{"name":"t","nics":[{"name":"gpu0","mac":"02:00:00:00:00:01","ip":"10.0.0.1","line_rate_bps":1000000000}],
                "qps":[{"qpn":256,"nic":0,"peer_qpn":257,"peer_ip":"10.0.0.2","next_hop_mac":"02:00:00:00:00:02",
                        "send":{"psn":5,"remote_va":4096,"rkey":7,"len":100,"seed":3}}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn defaults_and_validation() {
        let j = job();
        j.validate().unwrap();
        assert_eq!(j.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(j.snapshot_interval_ms, DEFAULT_SNAPSHOT_INTERVAL_MS);
        assert_eq!(j.xdp_mode, "driver");
        let s = j.qps[0].send.as_ref().unwrap();
        assert_eq!(s.window_packets, DEFAULT_WINDOW_PACKETS);
        assert!(j.nics[0].dcqcn);

        let mut b = j.clone();
        b.qps[0].nic = 3;
        assert!(b.validate().unwrap_err().to_string().contains("nic 3 does not exist"));
        let mut b = j.clone();
        b.qps[0].peer_ip = "fd00::2".parse().unwrap();
        assert!(b.validate().unwrap_err().to_string().contains("different families"));
        let mut b = j.clone();
        b.nics[0].mac = "02:00:00:00:00".into();
        assert!(b.validate().unwrap_err().to_string().contains("nics[0] (gpu0): mac"));
        let mut b = j.clone();
        b.qps.push(b.qps[0].clone());
        assert!(b.validate().unwrap_err().to_string().contains("duplicate qpn"));
        let mut b = j.clone();
        b.nics[0].path_mtu = Some(1500);
        assert!(b.validate().unwrap_err().to_string().contains("path_mtu 1500"));
        assert_eq!(j.time_dilation, 1.0);
        let mut b = j;
        b.time_dilation = 0.25;
        assert!(b.validate().unwrap_err().to_string().contains("time_dilation: 0.25 is below 1"));
    }

    #[test]
    fn default_retransmit_timeout_keeps_a_wall_floor_and_an_emulated_floor() {
        let at = |d: f64| default_retransmit_timeout_ns(Dilation::new(d).unwrap());
        assert_eq!(at(1.0), DEFAULT_RETRANSMIT_TIMEOUT_NS, "real time: unchanged");
        for d in [1.0, 2.5, 10.0, 100.0, 1000.0, 8000.0, 50_000.0] {
            let dil = Dilation::new(d).unwrap();
            let wall = dil.duration(at(d));
            assert!(wall + 1 >= DEFAULT_RETRANSMIT_TIMEOUT_NS, "D {d}: wall {wall} ns below the floor");
            assert!(at(d) >= MIN_DEFAULT_RETRANSMIT_TIMEOUT_NS, "D {d}: emulated {} ns", at(d));
            // Longer than the longest pause of one PFC frame at 400G.
            assert!(at(d) > 83_886, "65535 quanta of 512 bit times at 400 Gb/s are 83.9 us");
        }
        assert_eq!(Dilation::new(8000.0).unwrap().duration(at(8000.0)), 8_000_000_000, "8 s of wall clock at D 8000");
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_name() {
        let e = serde_json::from_str::<Job>(r#"{"name":"t","nics":[],"qps":[],"bogus":1}"#).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn mac_parse_and_format() {
        assert_eq!(parse_mac("02:0a:ff:00:10:01"), Some([2, 10, 255, 0, 16, 1]));
        assert_eq!(parse_mac("02:0a:ff:00:10"), None);
        assert_eq!(parse_mac("02:0a:ff:00:10:01:02"), None);
        assert_eq!(parse_mac("2:0a:ff:00:10:01"), None);
        assert_eq!(format_mac([2, 10, 255, 0, 16, 1]), "02:0a:ff:00:10:01");
    }
}
