//! The emulated RDMA NIC's protocol engine: glues the pure RC state machines ([`Sender`],
//! [`Receiver`], [`NicPfc`]) to RoCEv2 Ethernet frames (`rocefab_wire::roce`, IBTA Vol. 1
//! ch. 9 + Annex A17) and MAC control frames (IEEE 802.1Qbb / 802.3x, `rocefab_wire::mac_control`).
//!
//! Still pure: frames come in through [`Engine::on_frame`] and go out through
//! [`Engine::next_tx`], time is the caller's `now` (ns), so two engines are wired back to back
//! in unit tests. The AF_XDP layer ([`super::xsk`]) and the daemon loop live elsewhere.
//!
//! * Classes: each NIC's DSCPs and PFC priorities come from its [`job::NicClasses`] (what the
//!   host's DCBX agent negotiated; default DSCP 24 → priority 3 for data, 48 → 7 for CNPs).
//! * Transmit: per NIC, CNPs (DSCP 48, priority 7) first, then ACK/NAKs (DSCP 24, priority 3),
//!   then data packets of the NIC's requester QPs round robin. A NIC shaper charges every frame
//!   with its wire size (frame + FCS + preamble + inter-frame gap) at the NIC line rate; each
//!   QP's own limiter carries its DCQCN rate.
//! * Data frames: RDMA WRITE First/Middle/Last (or Only per packet), DSCP 24, ECN ECT(0), UDP
//!   source port = per-QP entropy ([`udp_src_port_for_qp`]), ICRC computed by the wire crate.
//! * Write-Only mode ([`job::NicSpec::write_only`]): requesters send every packet as a WRITE
//!   Only with its own RETH and responders place packets that arrive out of order (spraying)
//!   at their addresses; a collective step completes when its whole PSN range has arrived.
//!   Without it, reordering is a sequence error (NAK, go-back-N), as on a plain RC NIC.
//! * PFC: a received PFC frame pauses the data priority (data and ACKs) for quanta × 512 bit times at
//!   the NIC line rate; quanta 0 resumes at once; 802.3x PAUSE pauses every priority.
//! * DCQCN: CE-marked data makes the responder send a CNP (at most one per QP per 50 µs,
//!   [`Receiver`]); a received CNP drives [`Sender::on_cnp`].
//!
//! * Emulated time (README "Emulated time"): the job's rates and timers are emulated;
//!   [`Engine::from_job`] is where the host applies the time dilation D (line rate, DCQCN rates
//!   / D; DCQCN timers, CNP interval, ACK coalescing delay, retransmit timeout × D; PFC quanta
//!   are timed at the wall line rate, so pauses stretch too), and [`Engine::report`] converts
//!   back to emulated time.
//!
//! Per-packet paths allocate nothing: control queues are preallocated and bounded (overflow is
//! counted), QP lookup is a dense table indexed by QPN offset built at setup ([`IndexTable`]).
use std::collections::VecDeque;
use std::net::IpAddr;

use rocefab_contracts::time::Dilation;
use rocefab_wire::mac_control::MacControlRepr;
use rocefab_wire::roce::{
    self, aeth, bth, reth, udp_src_port_for_qp, IpEcn, Opcode as WireOpcode, ParsedFrame, RoceFrame,
};

use super::job::{self, CollOp, CollectiveSpec, Job, NicReport, QpReport, QpStall, RankReport, Report};
use super::pattern;
use crate::dcqcn::DcqcnProfile;
use crate::desc::{AckPacket, AckSyndrome, Opcode, Reth, WritePacket};
use crate::pfc::NicPfc;
use crate::psn::Psn;
use crate::receiver::{MemoryRegion, Receiver, ReceiverConfig};
use crate::segment::{packet_count, PathMtu, SegmentMode, WriteMessage};
use crate::sender::{RateLimiter, Sender, SenderConfig};

/// Bytes on the wire per frame beyond what AF_XDP carries: FCS 4 + preamble/SFD 8 + IFG 12.
pub const WIRE_OVERHEAD_BYTES: u32 = 24;
/// Capacity of each per-NIC control queue (ACK/NAK and CNP).
pub const CTRL_QUEUE_CAPACITY: usize = 4096;
/// Frames the NIC shaper may release back to back. The data thread wakes for transmission only
/// when this many frames' worth of credit has built up (see [`Engine::next_deadline`]), so a
/// sender at line rate costs one wake-up and one TX kick per burst instead of one per frame;
/// the long-run rate stays the line rate. 16 frames of 1 KiB MTU are ~17 KB (~140 µs at
/// 1 Gb/s): far below a switch queue (1 MiB by default).
pub const PACER_BURST_FRAMES: u32 = 16;
/// IPv4 + UDP + BTH + RETH + ICRC bytes around a payload (IPv6: 20 more).
pub const ROCE_IPV4_OVERHEAD: u32 = 20 + 8 + 12 + 16 + 4;

/// Errors building an engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("nic {nic} ({name}): {what}")]
    Nic { nic: usize, name: String, what: String },
    #[error("qp {qpn}: {what}")]
    Qp { qpn: u32, what: String },
    #[error("{0}")]
    Job(String),
}

/// A requester's configuration on the wall clock for a NIC of emulated `line_rate_bps` and an
/// emulated local ACK timeout, at time dilation `d`: the rates / D, the timeout and DCQCN's
/// timers × D (the DCQCN parameters are `profile`'s cited emulated ones, see [`crate::dcqcn`]).
pub fn sender_config(
    line_rate_bps: u64,
    retransmit_timeout_ns: u64,
    d: Dilation,
    profile: DcqcnProfile,
) -> SenderConfig {
    let mut cfg = SenderConfig::new(d.rate(line_rate_bps));
    cfg.retransmit_timeout_ns = d.duration(retransmit_timeout_ns).max(1);
    cfg.dcqcn = Some(profile.rp(line_rate_bps).dilated(d));
    cfg
}

/// A responder's configuration on the wall clock at time dilation `d`: the NP's CNP interval
/// (`profile`'s, emulated) and the ACK coalescing delay × D; with `write_only`, out-of-order placement
/// with a reordering window of a quarter of its requesters' local ACK timeout
/// `local_ack_timeout_ns` (emulated; by default [`job::default_retransmit_timeout_ns`], at
/// least 100 ms of wall clock, so the window is at least 25 ms and scheduling delays of a
/// loaded machine are not mistaken for loss; a longer timeout widens it alike).
pub fn receiver_config(
    mtu: PathMtu,
    write_only: bool,
    d: Dilation,
    profile: DcqcnProfile,
    local_ack_timeout_ns: u64,
) -> ReceiverConfig {
    let mut cfg = ReceiverConfig::new(mtu);
    cfg.cnp_interval_ns = d.duration(profile.cnp_interval_ns());
    cfg.ack_delay_ns = cfg.ack_delay_ns.map(|t| d.duration(t));
    cfg.out_of_order = write_only;
    cfg.reorder_window_ns = Some(d.duration(local_ack_timeout_ns / 4));
    cfg
}

/// The largest IB path MTU whose RoCEv2 packets fit a link MTU (IP packet size).
pub fn path_mtu_for_link(link_mtu: u32, ipv6: bool) -> Option<PathMtu> {
    let overhead = ROCE_IPV4_OVERHEAD + if ipv6 { 20 } else { 0 };
    [PathMtu::Mtu4096, PathMtu::Mtu2048, PathMtu::Mtu1024, PathMtu::Mtu512, PathMtu::Mtu256]
        .into_iter()
        .find(|m| m.bytes() + overhead <= link_mtu)
}

/// Per-NIC counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicCounters {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_bad_icrc: u64,
    pub rx_malformed: u64,
    pub rx_unknown_qp: u64,
    pub rx_ignored: u64,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    pub ctrl_overflows: u64,
}

/// One NIC port's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct NicConfig {
    pub name: String,
    pub mac: [u8; 6],
    pub ip: IpAddr,
    /// Wall-clock line rate (the job's emulated rate / D).
    pub line_rate_bps: u64,
    /// The job's emulated line rate (reports).
    pub emulated_line_rate_bps: u64,
    pub path_mtu: PathMtu,
    /// Requesters send every packet as a WRITE Only; responders place out of order.
    pub write_only: bool,
    pub dcqcn: bool,
    /// DSCPs and PFC priorities of data/ACK frames and CNPs.
    pub classes: job::NicClasses,
}

struct Nic {
    cfg: NicConfig,
    pfc: NicPfc,
    pacer: RateLimiter,
    /// Shaper credit (bytes) the data thread waits for before waking to send data.
    wake_credit: u32,
    acks: VecDeque<(usize, AckPacket)>,
    cnps: VecDeque<usize>,
    qps: Vec<usize>,
    rr: usize,
    c: NicCounters,
}

impl Nic {
    /// The shaper's burst in bytes (the wake-up credit plus one frame).
    fn pacer_burst(&self) -> u32 {
        self.wake_credit + self.cfg.path_mtu.bytes() + ROCE_IPV4_OVERHEAD + 20 + 14 + WIRE_OVERHEAD_BYTES
    }
}

struct Qp {
    spec: job::QpSpec,
    nic: usize,
    peer_mac: [u8; 6],
    sport: u16,
    sender: Option<Sender>,
    send_buf: Vec<u8>,
    /// A collective requester's `send_buf` as a ring (else transfers are appended).
    send_ring: Option<SendRing>,
    send_total: u64,
    send_acked: u64,
    send_done: Option<u64>,
    receiver: Option<Receiver>,
    recv_len: u64,
    recv_done: Option<u64>,
    error: Option<String>,
}

/// A collective requester's send buffer used as a ring: a transfer's bytes are copied in when
/// it is posted (so a retransmission sends what was posted, whatever the rank buffer holds
/// later) and are free again once it completed; RC completes in posting order. A transfer
/// never straddles the end. Sized like the responders' staging rings (two transfers and two
/// windows), it keeps a 64-rank AllReduce's requesters at 1.5 MiB each instead of the
/// 31.5 MiB that appending every transfer needs.
#[derive(Debug)]
struct SendRing {
    /// Ring size in bytes (the length of the QP's `send_buf`).
    cap: u64,
    /// (start, len) of the posted transfers that have not completed, oldest first.
    posted: VecDeque<(u64, u64)>,
}

impl SendRing {
    /// Where a transfer of `len` bytes fits now, if anywhere.
    fn place(&self, len: u64) -> Option<u64> {
        let (Some(&(tail, _)), Some(&(start, l))) = (self.posted.front(), self.posted.back()) else {
            return (len <= self.cap).then_some(0);
        };
        let head = start + l;
        if head > tail {
            // In use: tail..head.
            if head + len <= self.cap {
                Some(head)
            } else {
                (len <= tail).then_some(0)
            }
        } else {
            // In use: tail..cap and 0..head.
            (head + len <= tail).then_some(head)
        }
    }
}

/// Collective state: rank buffers and the progress of the transfers (see
/// [`CollectiveSpec`]).
struct Coll {
    spec: CollectiveSpec,
    bufs: Vec<Vec<u8>>,
    rank_idx: IndexTable,
    /// Completed transfers, by transfer id.
    done: Vec<bool>,
    /// (qp index, indices into `spec.sends` in id order, next to post).
    sendq: Vec<(usize, Vec<usize>, usize)>,
    /// (qp index, transfers in id order, applied so far).
    recvq: Vec<(usize, Vec<RecvStep>, usize)>,
    locals_done: Vec<bool>,
}

impl Coll {
    fn complete(&self) -> bool {
        self.sendq.iter().all(|(_, l, n)| *n == l.len())
            && self.recvq.iter().all(|(_, l, n)| *n == l.len())
            && self.locals_done.iter().all(|d| *d)
    }
}

/// Whether transfer `id` completed (`done` indexed by transfer id).
fn is_done(done: &[bool], id: usize) -> bool {
    done.get(id).copied().unwrap_or(false)
}

/// Largest transfer id a collective may use (its completion flags are a dense table).
const MAX_TRANSFER_ID: usize = 1 << 24;

/// Keys (QPNs, ranks) to dense indices without hashing: a table indexed by key − smallest key
/// when the keys span at most [`IndexTable::DENSE_SPAN`] values (QPNs and ranks handed out by
/// one controller are consecutive), else a sorted list searched by bisection. Built at setup;
/// a lookup allocates nothing.
#[derive(Clone, Debug)]
enum IndexTable {
    Dense { base: u32, slots: Vec<u32> },
    Sorted(Vec<(u32, usize)>),
}

impl IndexTable {
    /// Widest key range stored densely (256 KiB of slots).
    const DENSE_SPAN: u64 = 1 << 16;
    const EMPTY: u32 = u32::MAX;

    /// The table of `keys` (key `keys[i]` maps to `i`); `Err(key)` names a duplicate.
    fn new(keys: &[u32]) -> Result<IndexTable, u32> {
        let mut sorted: Vec<(u32, usize)> = keys.iter().copied().zip(0..).collect();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(w[0].0);
        }
        let (Some(&(lo, _)), Some(&(hi, _))) = (sorted.first(), sorted.last()) else {
            return Ok(IndexTable::Sorted(sorted));
        };
        if u64::from(hi - lo) < Self::DENSE_SPAN && keys.len() < Self::EMPTY as usize {
            let mut slots = vec![Self::EMPTY; (hi - lo) as usize + 1];
            for (k, i) in sorted {
                slots[(k - lo) as usize] = i as u32;
            }
            return Ok(IndexTable::Dense { base: lo, slots });
        }
        Ok(IndexTable::Sorted(sorted))
    }

    fn get(&self, key: u32) -> Option<usize> {
        match self {
            IndexTable::Dense { base, slots } => {
                let i = *slots.get(key.wrapping_sub(*base) as usize)?;
                (i != Self::EMPTY).then_some(i as usize)
            }
            IndexTable::Sorted(v) => v.binary_search_by_key(&key, |e| e.0).ok().map(|i| v[i].1),
        }
    }
}

/// An incoming collective transfer: its index into `spec.recvs`, and the number of packets its
/// responder QP has completed once the transfer's whole PSN range arrived.
type RecvStep = (usize, u64);

/// A zeroed buffer of `len` bytes with room for `capacity`, every page of it already
/// touched. `vec![0; n]` maps lazily zeroed pages, so the kernel would clear each page on its
/// first write during the job (page faults in the per-packet placement and in the collective's
/// send-buffer appends: ~30% of the host emulator's CPU on a 64 MiB AllReduce). The value
/// passes through `black_box` so the allocation cannot be folded into `calloc`.
fn prefaulted(len: usize, capacity: usize) -> Vec<u8> {
    let capacity = capacity.max(len);
    let mut v = Vec::with_capacity(capacity);
    v.resize(capacity, std::hint::black_box(0u8));
    v.truncate(len);
    v
}

/// Applies `op` from `src` into `dst` (u32 little-endian elements; equal lengths).
fn apply_op(op: CollOp, src: &[u8], dst: &mut [u8]) {
    match op {
        CollOp::Copy => dst.copy_from_slice(src),
        CollOp::Sum => {
            for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                let v = u32::from_le_bytes([d[0], d[1], d[2], d[3]])
                    .wrapping_add(u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// Words per verification chunk: 64 KiB of expected sums, which stay in the L2 cache while
/// every rank that shares them is compared.
const VERIFY_CHUNK_WORDS: usize = 16 * 1024;

/// For every expectation of `expect`, the first byte offset (4-aligned) in its rank's buffer
/// (`bufs`, indexed through `rank_idx`) whose u32 word differs from the expected sum of
/// patterns, `None` when every word matches. Each word is compared exactly (a single wrong
/// byte is found); what makes it cheap is computing the expected words once per distinct
/// (range, terms) — an AllReduce's ranks all expect the same sum — chunk by chunk with
/// [`pattern::add_words32`], and splitting the chunks over the machine's cores.
fn verify_collective(expect: &[job::ExpectSpec], bufs: &[Vec<u8>], rank_idx: &IndexTable) -> Vec<Option<u64>> {
    let mut groups: Vec<(&job::ExpectSpec, Vec<usize>)> = Vec::new();
    for (i, e) in expect.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| g.offset == e.offset && g.len == e.len && g.terms == e.terms) {
            Some((_, users)) => users.push(i),
            None => groups.push((e, vec![i])),
        }
    }
    let words_of = |e: &job::ExpectSpec| usize::try_from(e.len.div_ceil(4)).unwrap_or(usize::MAX);
    let total: usize = groups.iter().map(|(g, _)| words_of(g).div_ceil(VERIFY_CHUNK_WORDS)).sum();
    let parts = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8).min(total.max(1));
    // Part `part` of `parts` checks that share of every group's chunks.
    let run = |part: usize| -> Vec<Option<u64>> {
        let mut first = vec![None; expect.len()];
        let mut acc = vec![0u32; VERIFY_CHUNK_WORDS];
        for (g, users) in &groups {
            let words = words_of(g);
            let chunks = words.div_ceil(VERIFY_CHUNK_WORDS);
            for k in chunks * part / parts..chunks * (part + 1) / parts {
                if users.iter().all(|&u| first[u].is_some()) {
                    break;
                }
                let w0 = k * VERIFY_CHUNK_WORDS;
                let acc = &mut acc[..VERIFY_CHUNK_WORDS.min(words - w0)];
                acc.fill(0);
                for &(seed, po) in &g.terms {
                    pattern::add_words32(acc, seed, po + 4 * w0 as u64);
                }
                let start = g.offset + 4 * w0 as u64;
                for &u in users {
                    if first[u].is_some() {
                        continue;
                    }
                    let buf = rank_idx.get(expect[u].rank).and_then(|i| bufs.get(i)).map_or(&[][..], |b| &b[..]);
                    first[u] = first_difference(buf, start, acc);
                }
            }
        }
        first
    };
    let mut first = run(0);
    std::thread::scope(|s| {
        let run = &run;
        let others: Vec<_> = (1..parts)
            .map(|p| {
                std::thread::Builder::new().name("rocefab-verify".into()).spawn_scoped(s, move || run(p)).map_err(|_| p)
            })
            .collect();
        for h in others {
            // A part whose thread could not start runs here.
            let theirs = match h {
                Ok(h) => h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
                Err(p) => run(p),
            };
            for (m, t) in first.iter_mut().zip(theirs) {
                *m = match (*m, t) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
    });
    first
}

/// The byte offset of the first u32 (little-endian) of `buf` from `start` on that differs from
/// `want`, or that `buf` does not hold.
fn first_difference(buf: &[u8], start: u64, want: &[u32]) -> Option<u64> {
    let s = usize::try_from(start).ok()?;
    let have = buf.get(s..).unwrap_or(&[]);
    let same =
        have.chunks_exact(4).zip(want).take_while(|(h, w)| u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == **w).count();
    (same < want.len()).then(|| start + 4 * same as u64)
}

/// All NICs and QPs of one emulated host.
pub struct Engine {
    nics: Vec<Nic>,
    qps: Vec<Qp>,
    by_qpn: IndexTable,
    start: u64,
    coll: Option<Coll>,
    dilation: Dilation,
}

impl Engine {
    /// Builds the engine for `job` at `now`; `path_mtus[i]` is NIC `i`'s path MTU (from the job
    /// or the link MTU). Requester buffers are filled with their pattern and every write posted.
    pub fn from_job(job: &Job, path_mtus: &[PathMtu], now: u64) -> Result<Engine, EngineError> {
        let d = job.dilation().map_err(|x| EngineError::Job(x.to_string()))?;
        // The requesters' local ACK timeout, which the responders' reordering window follows:
        // the longest this job's requesters use (`rocefab run` gives every host the same), else
        // the default.
        let local_ack_timeout_ns = job
            .qps
            .iter()
            .filter_map(|q| q.send.as_ref().map(|s| s.retransmit_timeout_ns))
            .max()
            .unwrap_or_else(|| job::default_retransmit_timeout_ns(d));
        let mut nics = Vec::with_capacity(job.nics.len());
        for (i, n) in job.nics.iter().enumerate() {
            let e = |what: String| EngineError::Nic { nic: i, name: n.name.clone(), what };
            let mac = job::parse_mac(&n.mac).ok_or_else(|| e(format!("bad mac {:?}", n.mac)))?;
            let path_mtu = *path_mtus.get(i).ok_or_else(|| e("no path MTU given".into()))?;
            let cfg = NicConfig {
                name: n.name.clone(),
                mac,
                ip: n.ip,
                line_rate_bps: d.rate(n.line_rate_bps),
                emulated_line_rate_bps: n.line_rate_bps,
                path_mtu,
                write_only: n.write_only,
                dcqcn: n.dcqcn,
                classes: n.classes,
            };
            n.classes.validate().map_err(|x| e(format!("{}: classes: {x}", n.name)))?;
            let pfc = NicPfc::new(cfg.line_rate_bps, n.classes.pfc_enable).map_err(|x| e(x.to_string()))?;
            // A burst of full frames lets the daemon batch wake-ups and TX kicks without
            // exceeding the line rate over any longer interval.
            let frame = path_mtu.bytes() + ROCE_IPV4_OVERHEAD + 20 + 14 + WIRE_OVERHEAD_BYTES;
            let burst = PACER_BURST_FRAMES * frame;
            let pacer = RateLimiter::new(cfg.line_rate_bps, cfg.line_rate_bps, burst, now);
            nics.push(Nic {
                cfg,
                pfc,
                pacer,
                wake_credit: burst - frame,
                acks: VecDeque::with_capacity(CTRL_QUEUE_CAPACITY),
                cnps: VecDeque::with_capacity(CTRL_QUEUE_CAPACITY),
                qps: Vec::new(),
                rr: 0,
                c: NicCounters::default(),
            });
        }
        let mut qps = Vec::with_capacity(job.qps.len());
        let by_qpn = IndexTable::new(&job.qps.iter().map(|q| q.qpn).collect::<Vec<_>>())
            .map_err(|qpn| EngineError::Qp { qpn, what: "duplicate qpn".into() })?;
        for q in &job.qps {
            let e = |what: String| EngineError::Qp { qpn: q.qpn, what };
            let nic = nics.get(q.nic).ok_or_else(|| e(format!("nic {} does not exist", q.nic)))?;
            let peer_mac =
                job::parse_mac(&q.next_hop_mac).ok_or_else(|| e(format!("bad next_hop_mac {:?}", q.next_hop_mac)))?;
            let mut qp = Qp {
                spec: q.clone(),
                nic: q.nic,
                peer_mac,
                sport: udp_src_port_for_qp(q.qpn, q.peer_qpn),
                sender: None,
                send_buf: Vec::new(),
                send_ring: None,
                send_total: 0,
                send_acked: 0,
                send_done: None,
                receiver: None,
                recv_len: 0,
                recv_done: None,
                error: None,
            };
            if let Some(s) = &q.send {
                let mut cfg = sender_config(nic.cfg.emulated_line_rate_bps, s.retransmit_timeout_ns, d, job.dcqcn);
                cfg.mtu = nic.cfg.path_mtu;
                cfg.mode =
                    if nic.cfg.write_only { SegmentMode::WriteOnlyPerPacket } else { SegmentMode::FirstMiddleLast };
                cfg.initial_psn = Psn::new(s.psn);
                cfg.max_outstanding_packets = s.window_packets;
                // The QP's own limiter allows the NIC shaper's burst, so at line rate it never
                // splits a burst the NIC may send.
                cfg.burst_bytes = cfg.burst_bytes.max(nics[q.nic].pacer_burst());
                if !nic.cfg.dcqcn {
                    cfg.dcqcn = None;
                }
                if nic.cfg.ip.is_ipv6() {
                    cfg.per_packet_overhead_bytes += 20;
                }
                let mut sender = Sender::new(cfg, now).map_err(|x| e(x.to_string()))?;
                let len = usize::try_from(s.len).map_err(|_| e("send.len too large".into()))?;
                let coll_bytes: u64 =
                    job.collective.iter().flat_map(|c| c.sends.iter()).filter(|x| x.qpn == q.qpn).map(|x| x.len).sum();
                qp.send_total = s.len + coll_bytes;
                if s.len == 0 && coll_bytes > 0 {
                    let largest = job
                        .collective
                        .iter()
                        .flat_map(|c| c.sends.iter())
                        .filter(|x| x.qpn == q.qpn)
                        .map(|x| x.len)
                        .max()
                        .unwrap_or(0);
                    let window = u64::from(s.window_packets) * u64::from(nic.cfg.path_mtu.bytes());
                    let cap = coll_bytes.min(2 * (largest + window));
                    let cap_len = usize::try_from(cap).map_err(|_| e("send bytes too large".into()))?;
                    qp.send_buf = prefaulted(cap_len, cap_len);
                    qp.send_ring = Some(SendRing { cap, posted: VecDeque::new() });
                } else {
                    // Room for every collective transfer appended later, faulted in now.
                    let total = usize::try_from(qp.send_total).map_err(|_| e("send bytes too large".into()))?;
                    qp.send_buf = prefaulted(0, total);
                    qp.send_buf.extend_from_slice(&pattern::generate(len, s.seed));
                }
                let mut off = 0u64;
                let mut wr = 0u64;
                while off < s.len {
                    let n = (s.len - off).min(s.message_bytes);
                    let msg = WriteMessage { remote_va: s.remote_va + off, rkey: s.rkey, len: n as u32 };
                    sender.post_write(wr, off, msg).map_err(|x| e(format!("posting write {wr}: {x}")))?;
                    off += n;
                    wr += 1;
                }
                if qp.send_total == 0 {
                    qp.send_done = Some(now);
                }
                qp.sender = Some(sender);
            }
            if let Some(r) = &q.recv {
                let mut cfg = receiver_config(nic.cfg.path_mtu, nic.cfg.write_only, d, job.dcqcn, local_ack_timeout_ns);
                cfg.initial_psn = Psn::new(r.psn);
                let len = usize::try_from(r.len).map_err(|_| e("recv.len too large".into()))?;
                let mr = MemoryRegion { va: r.va, rkey: r.rkey, data: prefaulted(len, len) };
                qp.receiver = Some(Receiver::new(cfg, vec![mr]).map_err(|x| e(x.to_string()))?);
                // A collective's responder receives every transfer into its staging region,
                // which may be a ring smaller than their sum (`collective_job`).
                let coll_recvs = job.collective.iter().flat_map(|c| c.recvs.iter()).filter(|x| x.qpn == q.qpn);
                qp.recv_len = if coll_recvs.clone().next().is_some() { coll_recvs.map(|x| x.len).sum() } else { r.len };
                if qp.recv_len == 0 {
                    qp.recv_done = Some(now);
                }
            }
            nics[q.nic].qps.push(qps.len());
            qps.push(qp);
        }
        let coll = job.collective.as_ref().map(|c| -> Result<Coll, EngineError> {
            let bufs = c
                .ranks
                .iter()
                .map(|r| {
                    let mut b = pattern::generate(r.input_bytes as usize, r.seed);
                    b.resize(r.bytes as usize, 0);
                    b
                })
                .collect();
            let rank_idx = IndexTable::new(&c.ranks.iter().map(|r| r.rank).collect::<Vec<_>>())
                .map_err(|r| EngineError::Job(format!("collective: rank {r} listed twice")))?;
            let max_id = c
                .sends
                .iter()
                .map(|x| x.id)
                .chain(c.recvs.iter().map(|x| x.id))
                .chain(c.locals.iter().map(|x| x.id))
                .max();
            if max_id.is_some_and(|m| m >= MAX_TRANSFER_ID) {
                return Err(EngineError::Job(format!("collective: transfer ids must be below {MAX_TRANSFER_ID}")));
            }
            let used = c
                .sends
                .iter()
                .map(|x| x.rank)
                .chain(c.recvs.iter().map(|x| x.rank))
                .chain(c.locals.iter().map(|x| x.rank));
            if let Some(r) = used.chain(c.expect.iter().map(|e| e.rank)).find(|&r| rank_idx.get(r).is_none()) {
                return Err(EngineError::Job(format!("collective: rank {r} is not one of this host's ranks")));
            }
            let queue = |qpns: Vec<(u32, usize, usize)>| -> Result<Vec<(usize, Vec<usize>, usize)>, EngineError> {
                let mut by: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
                for (qpn, id, idx) in qpns {
                    let qi =
                        by_qpn.get(qpn).ok_or_else(|| EngineError::Qp { qpn, what: "collective QP missing".into() })?;
                    match by.iter_mut().find(|(q, _)| *q == qi) {
                        Some((_, l)) => l.push((id, idx)),
                        None => by.push((qi, vec![(id, idx)])),
                    }
                }
                Ok(by
                    .into_iter()
                    .map(|(q, mut l)| {
                        l.sort();
                        (q, l.into_iter().map(|(_, i)| i).collect(), 0)
                    })
                    .collect())
            };
            // A transfer is one message of len / PMTU packets in either segment mode, so the
            // k-th transfer on a responder QP ends where the packet counts of 1..=k add up.
            let recvq = queue(c.recvs.iter().enumerate().map(|(i, x)| (x.qpn, x.id, i)).collect())?
                .into_iter()
                .map(|(qi, list, n)| {
                    let mtu = nics[qps[qi].nic].cfg.path_mtu.bytes();
                    let mut end = 0u64;
                    let list = list
                        .into_iter()
                        .map(|i| {
                            end += u64::from(packet_count(c.recvs[i].len as u32, mtu));
                            (i, end)
                        })
                        .collect();
                    (qi, list, n)
                })
                .collect();
            Ok(Coll {
                sendq: queue(c.sends.iter().enumerate().map(|(i, x)| (x.qpn, x.id, i)).collect())?,
                recvq,
                locals_done: vec![false; c.locals.len()],
                spec: c.clone(),
                bufs,
                rank_idx,
                done: vec![false; max_id.map_or(0, |m| m + 1)],
            })
        });
        let coll = coll.transpose()?;
        let mut e = Engine { nics, qps, by_qpn, start: now, coll, dilation: d };
        e.progress();
        Ok(e)
    }

    /// Runs the collective forward: applies every completed incoming write to its rank
    /// buffer, runs ready local transfers and posts every send whose dependencies are done.
    /// Allocates only when a send is posted (its data is copied into the QP's send buffer, so
    /// later changes to the rank buffer cannot alter a retransmission).
    fn progress(&mut self) {
        let Engine { qps, coll, .. } = self;
        let Some(c) = coll.as_mut() else { return };
        loop {
            let mut changed = false;
            for (qi, list, applied) in c.recvq.iter_mut() {
                let qp = &qps[*qi];
                let (Some(rx), Some(spec)) = (qp.receiver.as_ref(), qp.spec.recv.as_ref()) else { continue };
                // Completion by PSN range: with out-of-order placement a transfer's packets may
                // all be placed while an earlier one still misses some.
                let completed = rx.counters().packets_completed;
                while *applied < list.len() && list[*applied].1 <= completed {
                    let r = &c.spec.recvs[list[*applied].0];
                    let Some(region) = rx.region(spec.rkey) else { break };
                    let src = &region.data[r.staging_offset as usize..(r.staging_offset + r.len) as usize];
                    let b = &mut c.bufs[c.rank_idx.get(r.rank).expect("collective rank")];
                    apply_op(r.op, src, &mut b[r.dst_offset as usize..(r.dst_offset + r.len) as usize]);
                    c.done[r.id] = true;
                    *applied += 1;
                    changed = true;
                }
            }
            for (i, l) in c.spec.locals.iter().enumerate() {
                if c.locals_done[i] || !l.deps.iter().all(|&d| is_done(&c.done, d)) {
                    continue;
                }
                let b = &mut c.bufs[c.rank_idx.get(l.rank).expect("collective rank")];
                let src = b[l.src_offset as usize..(l.src_offset + l.len) as usize].to_vec();
                apply_op(l.op, &src, &mut b[l.dst_offset as usize..(l.dst_offset + l.len) as usize]);
                c.locals_done[i] = true;
                c.done[l.id] = true;
                changed = true;
            }
            for (qi, list, next) in c.sendq.iter_mut() {
                while *next < list.len() {
                    let x = &c.spec.sends[list[*next]];
                    if !x.deps.iter().all(|&d| is_done(&c.done, d)) {
                        break;
                    }
                    let qp = &mut qps[*qi];
                    let b = &c.bufs[c.rank_idx.get(x.rank).expect("collective rank")];
                    let src = &b[x.src_offset as usize..(x.src_offset + x.len) as usize];
                    let off = match qp.send_ring.as_mut() {
                        Some(ring) => {
                            // Posted once earlier transfers complete and free their bytes.
                            let Some(at) = ring.place(x.len) else { break };
                            ring.posted.push_back((at, x.len));
                            qp.send_buf[at as usize..(at + x.len) as usize].copy_from_slice(src);
                            at
                        }
                        None => {
                            let off = qp.send_buf.len() as u64;
                            qp.send_buf.extend_from_slice(src);
                            off
                        }
                    };
                    let rkey = qp.spec.send.as_ref().map_or(0, |s| s.rkey);
                    let msg = WriteMessage { remote_va: x.remote_va, rkey, len: x.len as u32 };
                    if let Some(s) = qp.sender.as_mut() {
                        if let Err(e) = s.post_write(x.id as u64, off, msg) {
                            qp.error.get_or_insert_with(|| format!("posting collective transfer {}: {e}", x.id));
                        }
                    }
                    *next += 1;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// Declares `now` the job start (completion times in reports count from here): for a
    /// daemon that sets up first and waits for a start signal.
    pub fn set_start(&mut self, now: u64) {
        self.start = now;
    }

    /// Number of NICs.
    pub fn nic_count(&self) -> usize {
        self.nics.len()
    }

    /// Wall-clock line rate of NIC `i` (emulated / D).
    pub fn nic_line_rate_bps(&self, i: usize) -> u64 {
        self.nics[i].cfg.line_rate_bps
    }

    /// Counters of NIC `i`.
    pub fn nic_counters(&self, i: usize) -> NicCounters {
        self.nics[i].c
    }

    /// PFC state of NIC `i`.
    pub fn nic_pfc(&self, i: usize) -> &NicPfc {
        &self.nics[i].pfc
    }

    /// The requester of `qpn`, if it has one.
    pub fn sender(&self, qpn: u32) -> Option<&Sender> {
        self.by_qpn.get(qpn).and_then(|i| self.qps[i].sender.as_ref())
    }

    /// The responder of `qpn`, if it has one.
    pub fn receiver(&self, qpn: u32) -> Option<&Receiver> {
        self.by_qpn.get(qpn).and_then(|i| self.qps[i].receiver.as_ref())
    }

    fn push_ack(nic: &mut Nic, qp: usize, ack: AckPacket) {
        if nic.acks.len() >= CTRL_QUEUE_CAPACITY {
            nic.c.ctrl_overflows += 1;
        } else {
            nic.acks.push_back((qp, ack));
        }
    }

    fn push_cnp(nic: &mut Nic, qp: usize) {
        if nic.cnps.len() >= CTRL_QUEUE_CAPACITY {
            nic.c.ctrl_overflows += 1;
        } else {
            nic.cnps.push_back(qp);
        }
    }

    /// Processes one frame received on NIC `nic` at `now`. Malformed frames, bad ICRCs and
    /// unknown QPs are counted and dropped.
    pub fn on_frame(&mut self, nic_idx: usize, frame: &[u8], now: u64) {
        let Some(nic) = self.nics.get_mut(nic_idx) else { return };
        nic.c.rx_frames += 1;
        nic.c.rx_bytes += frame.len() as u64;
        if frame.len() >= 14 && frame[12..14] == [0x88, 0x08] {
            match MacControlRepr::parse_frame(frame) {
                Ok((_, MacControlRepr::Pfc(p))) => nic.pfc.on_pfc_frame(p.enabled.bits(), &p.quanta, now),
                Ok((_, MacControlRepr::Pause { quanta })) => nic.pfc.on_global_pause(quanta, now),
                Ok((_, MacControlRepr::Unknown { .. })) => nic.c.rx_ignored += 1,
                Err(_) => nic.c.rx_malformed += 1,
            }
            return;
        }
        let p = match ParsedFrame::parse(frame) {
            Ok(p) => p,
            Err(_) => {
                nic.c.rx_malformed += 1;
                return;
            }
        };
        if !p.icrc.is_good() {
            nic.c.rx_bad_icrc += 1;
            return;
        }
        let bth = p.bth();
        let Some(qi) = self.by_qpn.get(bth.dest_qp) else {
            nic.c.rx_unknown_qp += 1;
            return;
        };
        let qp = &mut self.qps[qi];
        if qp.nic != nic_idx {
            nic.c.rx_unknown_qp += 1;
            return;
        }
        match bth.opcode {
            WireOpcode::Acknowledge => {
                let (Some(sender), Some(a)) = (qp.sender.as_mut(), p.aeth()) else {
                    nic.c.rx_ignored += 1;
                    return;
                };
                let Some(syndrome) = AckSyndrome::from_aeth_syndrome(u8::from(a.syndrome)) else {
                    nic.c.rx_ignored += 1;
                    return;
                };
                let ack = AckPacket { syndrome, psn: Psn::new(bth.psn), msn: a.msn };
                if let Err(e) = sender.on_ack(&ack, now) {
                    qp.error.get_or_insert_with(|| e.to_string());
                }
                let mut freed = false;
                while let Some(c) = sender.pop_completion() {
                    qp.send_acked += u64::from(c.len);
                    if let Some(ring) = qp.send_ring.as_mut() {
                        freed |= ring.posted.pop_front().is_some();
                    }
                }
                if qp.send_done.is_none() && qp.send_acked >= qp.send_total {
                    qp.send_done = Some(now);
                }
                if freed && self.coll.is_some() {
                    // A transfer waiting for room in the send ring may go now.
                    self.progress();
                }
            }
            WireOpcode::Cnp => {
                nic.c.cnps_received += 1;
                match qp.sender.as_mut() {
                    Some(s) => s.on_cnp(now),
                    None => nic.c.rx_ignored += 1,
                }
            }
            op => {
                let (Some(opcode), Some(receiver)) = (Opcode::from_code(u8::from(op)), qp.receiver.as_mut()) else {
                    nic.c.rx_ignored += 1;
                    return;
                };
                let pkt = WritePacket {
                    opcode,
                    psn: Psn::new(bth.psn),
                    ack_req: bth.ack_req,
                    reth: p.reth().map(|r| Reth { va: r.va, rkey: r.r_key, len: r.dma_len }),
                    payload_offset: 0,
                    payload_len: p.payload.len() as u32,
                };
                let ce = p.ip.ecn == IpEcn::CongestionExperienced;
                let out = receiver.on_packet(&pkt, p.payload, ce, now);
                let message_done = matches!(out.event, crate::receiver::RxEvent::Placed { message_complete: true });
                if let Some(ack) = out.ack {
                    Self::push_ack(nic, qi, ack);
                }
                if out.cnp {
                    Self::push_cnp(nic, qi);
                }
                if qp.recv_done.is_none() && receiver.counters().bytes_placed >= qp.recv_len {
                    qp.recv_done = Some(now);
                }
                if message_done && self.coll.is_some() {
                    self.progress();
                }
            }
        }
    }

    /// Runs the timers (requester ACK timeout and DCQCN, responder ACK coalescing) at `now`.
    pub fn poll(&mut self, now: u64) {
        for (qi, qp) in self.qps.iter_mut().enumerate() {
            if let Some(s) = qp.sender.as_mut() {
                if qp.error.is_none() {
                    if let Err(e) = s.poll(now) {
                        qp.error = Some(e.to_string());
                    }
                }
            }
            if let Some(r) = qp.receiver.as_mut() {
                if let Some(ack) = r.poll(now) {
                    Self::push_ack(&mut self.nics[qp.nic], qi, ack);
                }
            }
        }
    }

    /// Writes the next frame NIC `nic` may transmit at `now` into `buf` and returns its
    /// length; `None` when the shaper, PFC or the requesters have nothing to send now.
    pub fn next_tx(&mut self, nic_idx: usize, buf: &mut [u8], now: u64) -> Option<usize> {
        let nic = self.nics.get_mut(nic_idx)?;
        if !nic.pacer.ready(now) {
            return None;
        }
        let paused = nic.pfc.paused_mask(now);
        let cl = nic.cfg.classes;
        let mut len = None;
        if paused & (1 << cl.cnp_priority) == 0 {
            if let Some(qi) = nic.cnps.pop_front() {
                let qp = &self.qps[qi];
                let mut f = roce::cnp(nic.cfg.mac, qp.peer_mac, nic.cfg.ip, qp.spec.peer_ip, qp.spec.peer_qpn);
                f.udp_src_port = qp.sport;
                f.dscp = cl.cnp_dscp;
                len = Some(f.emit(buf));
                nic.c.cnps_sent += 1;
            }
        }
        if len.is_none() && paused & (1 << cl.data_priority) == 0 {
            if let Some((qi, ack)) = nic.acks.pop_front() {
                let qp = &self.qps[qi];
                let b = bth::Repr::new(WireOpcode::Acknowledge, qp.spec.peer_qpn, ack.psn.value());
                let mut h = roce::Repr::new(b);
                h.aeth =
                    Some(aeth::Repr { syndrome: aeth::Syndrome::from(ack.syndrome.aeth_syndrome()), msn: ack.msn });
                let mut f = RoceFrame::new(nic.cfg.mac, qp.peer_mac, nic.cfg.ip, qp.spec.peer_ip, h, &[]);
                f.udp_src_port = qp.sport;
                f.dscp = cl.data_dscp;
                len = Some(f.emit(buf));
            }
        }
        if len.is_none() && paused & (1 << cl.data_priority) == 0 {
            let n = nic.qps.len();
            for k in 0..n {
                let qi = nic.qps[(nic.rr + k) % n];
                let qp = &mut self.qps[qi];
                if qp.error.is_some() {
                    continue;
                }
                let Some(tx) = qp.sender.as_mut().and_then(|s| s.next_packet(now)) else { continue };
                nic.rr = (nic.rr + k + 1) % n;
                let start = tx.local_addr as usize;
                let payload = &qp.send_buf[start..start + tx.pkt.payload_len as usize];
                let mut b =
                    bth::Repr::new(WireOpcode::from(tx.pkt.opcode.code()), qp.spec.peer_qpn, tx.pkt.psn.value());
                b.ack_req = tx.pkt.ack_req;
                let mut h = roce::Repr::new(b);
                h.reth = tx.pkt.reth.map(|r| reth::Repr { va: r.va, r_key: r.rkey, dma_len: r.len });
                let mut f = RoceFrame::new(nic.cfg.mac, qp.peer_mac, nic.cfg.ip, qp.spec.peer_ip, h, payload);
                f.udp_src_port = qp.sport;
                f.dscp = cl.data_dscp;
                len = Some(f.emit(buf));
                break;
            }
        }
        match len? {
            Ok(n) => {
                nic.pacer.consume(n as u32 + WIRE_OVERHEAD_BYTES, now);
                nic.c.tx_frames += 1;
                nic.c.tx_bytes += n as u64;
                Some(n)
            }
            Err(_) => {
                nic.c.tx_errors += 1;
                None
            }
        }
    }

    /// The earliest time something may happen without a frame arriving: a frame may be sent,
    /// a pause expires, or a timer fires. `None`: nothing pending.
    pub fn next_deadline(&mut self, now: u64) -> Option<u64> {
        let mut t: Option<u64> = None;
        let mut at = |x: u64| t = Some(t.map_or(x, |t| t.min(x)));
        for nic in &mut self.nics {
            let paused = nic.pfc.paused_mask(now);
            if let Some(r) = nic.pfc.next_resume(now) {
                at(r);
            }
            let ready = nic.pacer.ready_at(now);
            // Data waits until a burst's worth of credit has built up (control frames do not):
            // charging a copy of the shaper with the credit gives that time.
            let burst_ready = {
                let mut p = nic.pacer;
                p.consume(nic.wake_credit, now);
                p.ready_at(now)
            };
            let cl = nic.cfg.classes;
            if (!nic.cnps.is_empty() && paused & (1 << cl.cnp_priority) == 0)
                || (!nic.acks.is_empty() && paused & (1 << cl.data_priority) == 0)
            {
                at(ready);
            }
            for &qi in &nic.qps {
                let qp = &mut self.qps[qi];
                if qp.error.is_some() {
                    continue;
                }
                if let Some(r) = qp.receiver.as_ref().and_then(|r| r.next_deadline()) {
                    at(r);
                }
                // A requester whose data are all acknowledged sends nothing more: its DCQCN
                // timers (a cut sender's rate increase every T) would only wake the data thread,
                // during the job and while a finished host lingers.
                if paused & (1 << cl.data_priority) == 0 && qp.send_done.is_none() {
                    if let Some(s) = qp.sender.as_mut().and_then(|s| s.next_event_time(now)) {
                        at(s.max(burst_ready));
                    }
                }
            }
        }
        t
    }

    /// Every QP finished (or failed) and the collective, if any, ran to its end; a responder
    /// that received all its data is finished only once it owes no ACK (neither a coalesced one
    /// [`Engine::poll`] will send nor one queued for transmission): its requester would
    /// otherwise time out and retransmit to a host that has gone.
    pub fn finished(&self) -> bool {
        if self.qps.iter().any(|q| q.error.is_some()) {
            return true;
        }
        if self.coll.as_ref().is_some_and(|c| !c.complete()) {
            return false;
        }
        // ACKs queued for transmission are still owed.
        if self.nics.iter().any(|n| !n.acks.is_empty()) {
            return false;
        }
        self.qps.iter().all(|q| {
            q.error.is_some()
                || ((q.sender.is_none() || q.send_done.is_some())
                    && q.receiver.as_ref().is_none_or(|r| q.recv_done.is_some() && !r.owes_ack()))
        })
    }

    /// When the last QP finished, if all did.
    pub fn finish_time(&self) -> Option<u64> {
        let mut t = self.start;
        for q in &self.qps {
            if q.sender.is_some() {
                t = t.max(q.send_done?);
            }
            if q.receiver.is_some() {
                t = t.max(q.recv_done?);
            }
        }
        Some(t)
    }

    /// The responder region of `qpn`.
    pub fn region(&self, qpn: u32) -> Option<&[u8]> {
        let q = &self.qps[self.by_qpn.get(qpn)?];
        let r = q.spec.recv.as_ref()?;
        Some(&q.receiver.as_ref()?.region(r.rkey)?.data)
    }

    /// The report at `now`, verifying every responder region that has an `expect_seed`.
    pub fn report(&self, job: &str, now: u64) -> Report {
        self.report_with(job, now, true)
    }

    /// The report at `now`; `verify` compares responder regions with their pattern (costly
    /// for large regions: periodic snapshots skip it).
    pub fn report_with(&self, job: &str, now: u64, verify: bool) -> Report {
        let d = self.dilation;
        let mut ok = true;
        let qps = self
            .qps
            .iter()
            .map(|q| {
                let mut r = QpReport {
                    qpn: q.spec.qpn,
                    peer_qpn: q.spec.peer_qpn,
                    nic: self.nics[q.nic].cfg.name.clone(),
                    label: q.spec.label.clone(),
                    error: q.error.clone(),
                    ..Default::default()
                };
                if let Some(s) = &q.sender {
                    let c = s.counters();
                    r.send_bytes = q.send_total;
                    r.send_completed_bytes = q.send_acked;
                    r.packets_sent = c.packets_sent;
                    r.retransmitted_packets = c.retransmitted_packets;
                    r.timeouts = c.timeouts;
                    r.naks_received = c.naks_received;
                    r.cnps_received = c.cnps_received;
                    r.rate_bps = d.to_emulated_rate(s.rate_bps());
                    r.alpha = s.reaction_point().map_or(0.0, |rp| rp.alpha());
                    r.send_done_ns = q.send_done.map(|t| d.to_emulated_ns(t - self.start));
                    r.goodput_bps = r.send_done_ns.filter(|&d| d > 0).map(|d| q.send_acked as f64 * 8e9 / d as f64);
                    ok &= q.send_done.is_some();
                }
                if let Some(rx) = &q.receiver {
                    let c = rx.counters();
                    r.recv_bytes = q.recv_len;
                    r.bytes_placed = c.bytes_placed;
                    r.packets_received = c.packets_received;
                    r.duplicates = c.duplicates;
                    r.out_of_sequence = c.out_of_sequence;
                    r.out_of_order = c.out_of_order;
                    r.naks_sent = c.naks_sent;
                    r.acks_sent = c.acks_sent;
                    r.ce_marked = c.ce_marked;
                    r.cnps_sent = c.cnps_sent;
                    r.recv_done_ns = q.recv_done.map(|t| d.to_emulated_ns(t - self.start));
                    ok &= q.recv_done.is_some();
                    if let Some(seed) = q.spec.recv.as_ref().and_then(|r| r.expect_seed).filter(|_| verify) {
                        let v = self.region(q.spec.qpn).is_some_and(|d| pattern::first_mismatch(d, seed).is_none());
                        r.verified = Some(v);
                        ok &= v;
                    }
                }
                ok &= q.error.is_none();
                r
            })
            .collect();
        let nics = self
            .nics
            .iter()
            .map(|n| {
                let dp = n.cfg.classes.data_priority;
                let c = n.pfc.counters(dp).unwrap_or_default();
                NicReport {
                    name: n.cfg.name.clone(),
                    line_rate_bps: n.cfg.emulated_line_rate_bps,
                    path_mtu: n.cfg.path_mtu.bytes(),
                    tx_frames: n.c.tx_frames,
                    tx_bytes: n.c.tx_bytes,
                    rx_frames: n.c.rx_frames,
                    rx_bytes: n.c.rx_bytes,
                    rx_bad_icrc: n.c.rx_bad_icrc,
                    rx_malformed: n.c.rx_malformed,
                    rx_unknown_qp: n.c.rx_unknown_qp,
                    rx_ignored: n.c.rx_ignored,
                    cnps_sent: n.c.cnps_sent,
                    cnps_received: n.c.cnps_received,
                    ctrl_queue_overflows: n.c.ctrl_overflows,
                    pfc_frames_received: n.pfc.frames_received(),
                    pfc_ignored_frames: n.pfc.ignored_frames(),
                    pfc_pause_frames_prio3: c.pause_frames,
                    pfc_resume_frames_prio3: c.resume_frames,
                    pfc_paused_ns_prio3: d.to_emulated_ns(n.pfc.paused_ns(dp, now).unwrap_or(0)),
                    pfc_paused_now: n.pfc.is_paused(dp, now).unwrap_or(false),
                    data_priority: dp,
                    data_dscp: n.cfg.classes.data_dscp,
                    xdp: Default::default(),
                }
            })
            .collect();
        let mut ranks = Vec::new();
        if let Some(c) = &self.coll {
            let complete = c.complete();
            ok &= complete;
            let first = verify.then(|| verify_collective(&c.spec.expect, &c.bufs, &c.rank_idx));
            for r in &c.spec.ranks {
                let waiting_for = (!complete).then(|| self.rank_waiting_for(c, r.rank));
                let mut rr = RankReport { rank: r.rank, complete, verified: None, first_mismatch: None, waiting_for };
                if let Some(first) = &first {
                    // The rank's first failing expectation, in the job's order.
                    let mismatch =
                        c.spec.expect.iter().zip(first).filter(|(e, _)| e.rank == r.rank).find_map(|(_, m)| *m);
                    rr.verified = Some(mismatch.is_none() && complete);
                    rr.first_mismatch = mismatch;
                    ok &= mismatch.is_none();
                }
                ranks.push(rr);
            }
        }
        let end =
            if self.coll.as_ref().is_some_and(|c| !c.complete()) { now } else { self.finish_time().unwrap_or(now) };
        let elapsed_ns = d.to_emulated_ns(end - self.start);
        let stalls = self.stalls(now);
        Report {
            job: job.to_string(),
            time_dilation: d.factor(),
            ok,
            error: None,
            elapsed_ns,
            qps,
            nics,
            ranks,
            stalls,
        }
    }

    /// What every unfinished QP is waiting for at `now` (a requester with data not acknowledged,
    /// a responder that has not received everything or still owes an ACK, a QP in error): the
    /// last PSN acknowledged, the PSNs outstanding, timeouts and retries left, whether PFC
    /// pauses its NIC's data priority, and when it last made progress. Empty when every QP
    /// finished.
    pub fn stalls(&self, now: u64) -> Vec<QpStall> {
        let d = self.dilation;
        let since = |t: u64| d.to_emulated_ns(t.saturating_sub(self.start));
        let mut out = Vec::new();
        for q in &self.qps {
            let nic = &self.nics[q.nic];
            let paused_now = nic.pfc.is_paused(nic.cfg.classes.data_priority, now).unwrap_or(false);
            let base = QpStall {
                qpn: q.spec.qpn,
                peer_qpn: q.spec.peer_qpn,
                nic: nic.cfg.name.clone(),
                label: q.spec.label.clone(),
                paused_now,
                at_ns: since(now),
                error: q.error.clone(),
                ..Default::default()
            };
            let pause = if paused_now { " (its priority is paused by PFC)" } else { "" };
            if let Some(s) = &q.sender {
                if q.send_done.is_none() || q.error.is_some() {
                    let una = s.snd_una();
                    let out_n = s.outstanding();
                    let waiting_for = if q.error.is_some() {
                        "nothing: the QP is in the error state".to_string()
                    } else if out_n > 0 {
                        format!("the ACK of PSN {}{pause}", una.value())
                    } else if s.unsent() > 0 {
                        format!("its turn to send PSN {}{pause}", s.snd_nxt().value())
                    } else {
                        "data to send (a collective dependency)".to_string()
                    };
                    out.push(QpStall {
                        role: "requester".into(),
                        // ACKs are cumulative: everything before the oldest unacknowledged PSN.
                        last_acked_psn: s.last_progress().map(|_| una.sub(1).value()),
                        outstanding_psns: (out_n > 0).then(|| (una.value(), s.high_water().sub(1).value())),
                        outstanding_packets: out_n,
                        unsent_packets: s.unsent(),
                        timeouts: s.counters().timeouts,
                        retries_left: s.retries_left(),
                        last_progress_ns: s.last_progress().map(since),
                        last_heard_ns: s.last_ack().map(since),
                        waiting_for,
                        ..base.clone()
                    });
                }
            }
            if let Some(r) = &q.receiver {
                let placed = r.counters().bytes_placed;
                if q.recv_done.is_none() || r.owes_ack() || (q.error.is_some() && q.sender.is_none()) {
                    let waiting_for = if q.recv_done.is_none() {
                        let hole = if r.pending_out_of_order() > 0 {
                            format!(" ({} packets placed after the hole)", r.pending_out_of_order())
                        } else {
                            String::new()
                        };
                        format!("request PSN {} from its peer{hole}", r.expected_psn().value())
                    } else {
                        format!("sending the ACK it owes{pause}")
                    };
                    out.push(QpStall {
                        role: "responder".into(),
                        expected_psn: Some(r.expected_psn().value()),
                        placed_bytes: placed,
                        expected_bytes: q.recv_len,
                        last_progress_ns: r.last_placed().map(since),
                        last_heard_ns: r.last_packet().map(since),
                        waiting_for,
                        ..base
                    });
                }
            }
        }
        out
    }

    /// What rank `rank` of an incomplete collective waits for: its first transfer not yet
    /// received (with how many of its packets arrived) and its first write not yet posted.
    fn rank_waiting_for(&self, c: &Coll, rank: u32) -> String {
        let mut parts = Vec::new();
        for (qi, list, applied) in &c.recvq {
            let Some(&(ri, need)) = list.get(*applied) else { continue };
            let r = &c.spec.recvs[ri];
            if r.rank != rank {
                continue;
            }
            let qp = &self.qps[*qi];
            let got = qp.receiver.as_ref().map_or(0, |x| x.counters().packets_completed);
            let first = if *applied == 0 { 0 } else { list[*applied - 1].1 };
            parts.push(format!(
                "transfer {} on QP {:#x} ({}): {} of {} packets",
                r.id,
                qp.spec.qpn,
                qp.spec.label,
                got.saturating_sub(first).min(need - first),
                need - first
            ));
        }
        for (qi, list, next) in &c.sendq {
            let qp = &self.qps[*qi];
            let Some(&si) = list.get(*next) else {
                // Every write posted: waiting for their acknowledgements, if any is missing.
                let mine = list.iter().any(|&i| c.spec.sends[i].rank == rank);
                if mine && qp.send_acked < qp.send_total {
                    parts.push(format!(
                        "its writes on QP {:#x} ({}) to complete: {} of {} bytes",
                        qp.spec.qpn, qp.spec.label, qp.send_acked, qp.send_total
                    ));
                }
                continue;
            };
            let x = &c.spec.sends[si];
            if x.rank != rank {
                continue;
            }
            let why = match x.deps.iter().find(|&&d| !is_done(&c.done, d)) {
                Some(dep) => format!("waits for transfer {dep}"),
                None => "waits for room in its send ring".to_string(),
            };
            parts.push(format!("write {} on QP {:#x} ({}) not posted: {why}", x.id, qp.spec.qpn, qp.spec.label));
        }
        if parts.is_empty() {
            parts.push("nothing of its own: its transfers are done, other ranks of the host are not".into());
        }
        parts.join("; ")
    }

    /// Rank `rank`'s collective buffer.
    pub fn rank_buffer(&self, rank: u32) -> Option<&[u8]> {
        let c = self.coll.as_ref()?;
        Some(&c.bufs[c.rank_idx.get(rank)?])
    }

    /// Rank `rank`'s collective buffer, writable (tests corrupt it to check verification).
    #[cfg(test)]
    pub(crate) fn rank_buffer_mut(&mut self, rank: u32) -> Option<&mut [u8]> {
        let c = self.coll.as_mut()?;
        let i = c.rank_idx.get(rank)?;
        Some(&mut c.bufs[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_wire::ethernet::{MacAddr, PrioritySet};
    use rocefab_wire::mac_control::PfcRepr;

    const A_MAC: &str = "02:00:00:00:00:0a";
    const B_MAC: &str = "02:00:00:00:00:0b";

    fn jobs(len: u64, rate: u64, dcqcn: bool) -> (Job, Job) {
        let a = format!(
            r#"{{"name":"a","nics":[{{"name":"a0","mac":"{A_MAC}","ip":"10.9.0.1","line_rate_bps":{rate},"dcqcn":{dcqcn}}}],
               "qps":[{{"qpn":17,"nic":0,"peer_qpn":33,"peer_ip":"10.9.0.2","next_hop_mac":"{B_MAC}",
                        "send":{{"psn":16777000,"remote_va":8192,"rkey":5,"len":{len},"seed":9,"window_packets":32,
                                 "retransmit_timeout_ns":2000000}}}}]}}"#
        );
        let b = format!(
            r#"{{"name":"b","nics":[{{"name":"b0","mac":"{B_MAC}","ip":"10.9.0.2","line_rate_bps":{rate}}}],
               "qps":[{{"qpn":33,"nic":0,"peer_qpn":17,"peer_ip":"10.9.0.1","next_hop_mac":"{A_MAC}",
                        "recv":{{"psn":16777000,"va":8192,"rkey":5,"len":{len},"expect_seed":9}}}}]}}"#
        );
        (serde_json::from_str(&a).unwrap(), serde_json::from_str(&b).unwrap())
    }

    /// A wire between two engines with a fixed one-way delay; `tamper` may drop (return
    /// false) or modify a frame in flight.
    struct Link {
        delay: u64,
        q: VecDeque<(u64, usize, Vec<u8>)>,
    }

    fn run(
        a: &mut Engine,
        b: &mut Engine,
        now: u64,
        until: u64,
        tamper: impl FnMut(usize, &mut Vec<u8>, u64) -> bool,
        at_time: impl FnMut(u64, &mut Engine),
    ) -> u64 {
        run_with_delay(5_000, a, b, now, until, tamper, at_time)
    }

    fn run_with_delay(
        delay: u64,
        a: &mut Engine,
        b: &mut Engine,
        now: u64,
        until: u64,
        tamper: impl FnMut(usize, &mut Vec<u8>, u64) -> bool,
        at_time: impl FnMut(u64, &mut Engine),
    ) -> u64 {
        drive(delay, false, a, b, now, until, tamper, at_time)
    }

    /// [`run_with_delay`]; with `serve`, a finished engine keeps running, as hostd's data
    /// thread does while it lingers (`daemon::serve`), instead of exiting.
    #[expect(clippy::too_many_arguments, reason = "run_with_delay's inputs and the mode")]
    fn drive(
        delay: u64,
        serve: bool,
        a: &mut Engine,
        b: &mut Engine,
        mut now: u64,
        until: u64,
        mut tamper: impl FnMut(usize, &mut Vec<u8>, u64) -> bool,
        mut at_time: impl FnMut(u64, &mut Engine),
    ) -> u64 {
        let mut link = Link { delay, q: VecDeque::new() };
        let mut buf = vec![0u8; 9000];
        while now < until && !(a.finished() && b.finished()) {
            at_time(now, a);
            for (dir, e) in [(0usize, &mut *a), (1, &mut *b)] {
                // A finished engine has exited, as hostd ends its data thread without linger: it
                // sends nothing more and what reaches it is lost.
                if e.finished() && !serve {
                    continue;
                }
                e.poll(now);
                while let Some(n) = e.next_tx(0, &mut buf, now) {
                    let mut f = buf[..n].to_vec();
                    if tamper(dir, &mut f, now) {
                        link.q.push_back((now + link.delay, dir, f));
                    }
                }
            }
            while link.q.front().is_some_and(|(t, _, _)| *t <= now) {
                let (_, dir, f) = link.q.pop_front().unwrap();
                let to = if dir == 0 { &mut *b } else { &mut *a };
                if serve || !to.finished() {
                    to.on_frame(0, &f, now);
                }
            }
            let mut next = [a.next_deadline(now), b.next_deadline(now), link.q.front().map(|x| x.0)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + 1_000_000);
            next = next.clamp(now + 1, now + 1_000_000);
            now = next;
        }
        now
    }

    fn engines(len: u64, rate: u64, dcqcn: bool) -> (Engine, Engine) {
        let (ja, jb) = jobs(len, rate, dcqcn);
        (Engine::from_job(&ja, &[PathMtu::Mtu1024], 0).unwrap(), Engine::from_job(&jb, &[PathMtu::Mtu1024], 0).unwrap())
    }

    #[test]
    fn transfer_completes_with_verified_data_across_psn_wrap() {
        let (mut a, mut b) = engines(300_000, 10_000_000_000, true);
        let mut opcodes = std::collections::BTreeSet::new();
        let end = run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, _| {
                let p = ParsedFrame::parse(f).unwrap();
                assert!(p.icrc.is_good());
                if dir == 0 {
                    assert_eq!(p.ip.dscp, 24);
                    assert_eq!(p.ip.ecn, IpEcn::Ect0);
                    assert_eq!(p.udp_src_port, udp_src_port_for_qp(17, 33));
                    assert_eq!(p.bth().dest_qp, 33);
                }
                opcodes.insert(u8::from(p.bth().opcode));
                true
            },
            |_, _| {},
        );
        assert!(a.finished() && b.finished(), "stalled at {end}");
        let r = b.report("b", end);
        assert!(r.ok, "{r:?}");
        assert_eq!(r.qps[0].verified, Some(true));
        assert_eq!(r.qps[0].bytes_placed, 300_000);
        assert_eq!(opcodes, [0x06, 0x07, 0x08, 0x11].into_iter().collect(), "First/Middle/Last and ACK");
        let ra = a.report("a", end);
        assert!(ra.ok && ra.qps[0].send_completed_bytes == 300_000 && ra.qps[0].retransmitted_packets == 0);
        // 300 kB at 10 Gb/s takes ≥ 240 µs of serialization: the NIC shaper is honoured.
        assert!(ra.qps[0].send_done_ns.unwrap() > 240_000, "{ra:?}");
    }

    #[test]
    fn a_lost_final_ack_is_answered_again_by_a_responder_that_keeps_serving() {
        // 20 000 bytes: PSNs 16777000..=16777019. The ACK of the last PSN is lost once.
        fn lose_final_ack(lost: &mut bool) -> impl FnMut(usize, &mut Vec<u8>, u64) -> bool + '_ {
            move |dir, f, _| {
                let p = ParsedFrame::parse(f).unwrap();
                if dir == 1 && !*lost && u8::from(p.bth().opcode) == 0x11 && p.bth().psn == 16_777_000 + 19 {
                    *lost = true;
                    return false;
                }
                true
            }
        }
        // The responder exits once it finished (no linger): the requester retransmits into the
        // void until its retries run out.
        let (mut a, mut b) = engines(20_000, 10_000_000_000, false);
        let mut lost = false;
        let end = drive(5_000, false, &mut a, &mut b, 0, 10_000_000_000, lose_final_ack(&mut lost), |_, _| {});
        assert!(lost && b.finished());
        let ra = a.report("a", end);
        assert!(!ra.ok && ra.qps[0].error.is_some(), "without a serving responder the requester fails: {ra:?}");
        // The responder keeps serving: the duplicate is re-ACKed and the requester completes.
        let (mut a, mut b) = engines(20_000, 10_000_000_000, false);
        let mut lost = false;
        let end = drive(5_000, true, &mut a, &mut b, 0, 10_000_000_000, lose_final_ack(&mut lost), |_, _| {});
        assert!(lost && a.finished() && b.finished(), "stalled at {end}");
        let (ra, rb) = (a.report("a", end), b.report("b", end));
        assert!(ra.ok && rb.ok, "{ra:?} {rb:?}");
        assert_eq!(ra.qps[0].send_completed_bytes, 20_000);
        assert!(ra.qps[0].retransmitted_packets >= 1, "the requester timed out and retransmitted: {ra:?}");
        assert!(rb.qps[0].duplicates >= 1, "the responder saw the duplicate: {rb:?}");
    }

    #[test]
    fn the_reordering_window_is_a_quarter_of_the_jobs_local_ack_timeout() {
        let (ja, mut jb) = jobs(20_000, 10_000_000_000, false);
        // A responder-only job: a quarter of the default timeout (100 ms at D 1).
        let b = Engine::from_job(&jb, &[PathMtu::Mtu1024], 0).unwrap();
        assert_eq!(b.receiver(33).unwrap().config().reorder_window_ns, Some(25_000_000));
        // With a requester of its own at 2 s (`rocefab run --retransmit-timeout-ms 2000` gives
        // every host the same), its responders wait 500 ms before they call a hole a loss.
        let mut send = ja.qps[0].clone();
        send.qpn = 34;
        send.send.as_mut().unwrap().retransmit_timeout_ns = 2_000_000_000;
        jb.qps.push(send);
        let b = Engine::from_job(&jb, &[PathMtu::Mtu1024], 0).unwrap();
        assert_eq!(b.receiver(33).unwrap().config().reorder_window_ns, Some(500_000_000));
    }

    #[test]
    fn dropped_packets_are_recovered_by_nak_and_go_back_n() {
        let (mut a, mut b) = engines(200_000, 10_000_000_000, false);
        let mut n = 0;
        let mut dropped = 0;
        run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, _| {
                if dir == 0 && f[12..14] == [8, 0] {
                    n += 1;
                    if n % 50 == 0 {
                        dropped += 1;
                        return false;
                    }
                }
                let _ = f;
                true
            },
            |_, _| {},
        );
        assert!(dropped > 2);
        let ra = a.report("a", 0);
        let rb = b.report("b", 0);
        assert!(rb.ok, "{rb:?}");
        assert_eq!(rb.qps[0].verified, Some(true));
        assert!(ra.qps[0].retransmitted_packets >= dropped, "{ra:?}");
        assert!(ra.qps[0].naks_received >= 1 && rb.qps[0].naks_sent >= 1);
    }

    #[test]
    fn corrupted_frames_fail_the_icrc_and_are_counted() {
        let (mut a, mut b) = engines(20_000, 10_000_000_000, false);
        let mut n = 0;
        run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, _| {
                n += 1;
                if dir == 0 && n == 3 {
                    let last = f.len() - 10;
                    f[last] ^= 0xff; // payload byte: only the ICRC can tell
                }
                true
            },
            |_, _| {},
        );
        let rb = b.report("b", 0);
        assert!(rb.ok && rb.qps[0].verified == Some(true), "{rb:?}");
        assert_eq!(rb.nics[0].rx_bad_icrc, 1);
    }

    #[test]
    fn ce_marks_produce_paced_cnps_that_cut_the_sender_rate() {
        let (mut a, mut b) = engines(400_000, 10_000_000_000, true);
        let mut cnps_on_wire = Vec::new();
        let mut buf_ce = 0;
        let end = run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, now| {
                if dir == 0 {
                    // Mark every data frame CE (ECN bits of the IPv4 TOS byte) and fix the header
                    // checksum; the ICRC masks the TOS byte, so it stays valid.
                    f[15] |= 0x03;
                    f[24] = 0;
                    f[25] = 0;
                    let c =
                        etherparse::Ipv4HeaderSlice::from_slice(&f[14..34]).unwrap().to_header().calc_header_checksum();
                    f[24..26].copy_from_slice(&c.to_be_bytes());
                    buf_ce += 1;
                } else {
                    let p = ParsedFrame::parse(f).unwrap();
                    if p.bth().opcode == WireOpcode::Cnp {
                        assert_eq!(p.ip.dscp, 48);
                        assert_eq!(p.bth().dest_qp, 17);
                        assert!(p.icrc.is_good());
                        cnps_on_wire.push(now);
                    }
                }
                true
            },
            |_, _| {},
        );
        let ra = a.report("a", 0);
        let rb = b.report("b", 0);
        assert!(rb.ok, "{rb:?}");
        assert!(cnps_on_wire.len() >= 2, "{cnps_on_wire:?}");
        assert!(cnps_on_wire.windows(2).all(|w| w[1] - w[0] >= 50_000), "≤ 1 CNP per 50 µs: {cnps_on_wire:?}");
        assert_eq!(rb.qps[0].cnps_sent, cnps_on_wire.len() as u64);
        assert_eq!(ra.qps[0].cnps_received, cnps_on_wire.len() as u64);
        assert_eq!(rb.qps[0].ce_marked, buf_ce as u64, "every data frame arrived CE-marked");
        assert!(ra.qps[0].rate_bps < 10_000_000_000, "DCQCN cut the rate: {}", ra.qps[0].rate_bps);
        // Finished, the cut requester has no timer left to wake for (its rate increase would
        // wake a lingering hostd every T, as the responder's would not).
        assert!(a.finished() && b.finished());
        assert_eq!((a.next_deadline(end), b.next_deadline(end)), (None, None));
    }

    #[test]
    fn dilated_jobs_run_on_the_wall_clock_at_rate_over_d_and_report_emulated_time() {
        let d = 1000.0;
        let dil = Dilation::new(d).unwrap();
        let (mut ja, mut jb) = jobs(400_000, 10_000_000_000, true);
        (ja.time_dilation, jb.time_dilation) = (d, d);
        let a = Engine::from_job(&ja, &[PathMtu::Mtu1024], 0).unwrap();
        // The requester on the wall clock: rates / D, timers × D, built from emulated params.
        let c = a.sender(17).unwrap().config();
        assert_eq!(c.line_rate_bps, 10_000_000);
        assert_eq!(c.retransmit_timeout_ns, 2_000_000_000, "2 ms emulated × 1000");
        let emulated = crate::dcqcn::DcqcnConfig::with_line_rate(10_000_000_000);
        assert_eq!(c.dcqcn, Some(emulated.dilated(dil)));
        let dc = c.dcqcn.unwrap();
        assert_eq!((dc.min_rate_bps, dc.rate_ai_bps), (emulated.min_rate_bps / 1000, emulated.rate_ai_bps / 1000));
        assert_eq!(dc.rate_increase_period_ns, emulated.rate_increase_period_ns * 1000);
        let r = receiver_config(
            PathMtu::Mtu1024,
            false,
            dil,
            DcqcnProfile::default(),
            job::default_retransmit_timeout_ns(dil),
        );
        assert_eq!(r.cnp_interval_ns, crate::dcqcn::DEFAULT_CNP_INTERVAL_NS * 1000);
        // The job's profile reaches both ends: ConnectX's 300 µs timer and 4 µs CNP interval.
        ja.dcqcn = DcqcnProfile::Connectx;
        let cx = Engine::from_job(&ja, &[PathMtu::Mtu1024], 0).unwrap();
        assert_eq!(cx.sender(17).unwrap().config().dcqcn, Some(DcqcnProfile::Connectx.rp(10_000_000_000).dilated(dil)));
        assert_eq!(
            receiver_config(
                PathMtu::Mtu1024,
                false,
                dil,
                DcqcnProfile::Connectx,
                job::default_retransmit_timeout_ns(dil)
            )
            .cnp_interval_ns,
            4_000 * 1000
        );
        assert_eq!(r.ack_delay_ns, ReceiverConfig::new(PathMtu::Mtu1024).ack_delay_ns.map(|t| t * 1000));

        // The same transfer at D = 1 and D = 1000: the wall clock stretches by D, the reports
        // (emulated) agree; the test wire's 5 µs (emulated) delay is stretched like the rest.
        let report = |d: f64| {
            let (mut ja, mut jb) = jobs(400_000, 10_000_000_000, true);
            (ja.time_dilation, jb.time_dilation) = (d, d);
            let mut a = Engine::from_job(&ja, &[PathMtu::Mtu1024], 0).unwrap();
            let mut b = Engine::from_job(&jb, &[PathMtu::Mtu1024], 0).unwrap();
            let end =
                run_with_delay(dil_of(d).duration(5_000), &mut a, &mut b, 0, u64::MAX / 2, |_, _, _| true, |_, _| {});
            (a.report("a", end), b.report("b", end), a.finish_time().unwrap())
        };
        fn dil_of(d: f64) -> Dilation {
            Dilation::new(d).unwrap()
        }
        let (ra1, rb1, wall1) = report(1.0);
        let (ra, rb, wall) = report(d);
        assert!(ra.ok && rb.ok && ra1.ok && rb1.ok, "{ra:?} {rb:?}");
        assert_eq!((ra.time_dilation, ra1.time_dilation), (d, 1.0));
        let near = |x: f64, y: f64| (x - y).abs() <= 0.02 * y;
        assert!(near(wall as f64, wall1 as f64 * d), "wall-clock finish {wall} vs {wall1} × {d}");
        assert!(near(ra.elapsed_ns as f64, ra1.elapsed_ns as f64), "{} vs {}", ra.elapsed_ns, ra1.elapsed_ns);
        let (t, t1) = (ra.qps[0].send_done_ns.unwrap(), ra1.qps[0].send_done_ns.unwrap());
        assert!(near(t as f64, t1 as f64), "{t} vs {t1}");
        let (g, g1) = (ra.qps[0].goodput_bps.unwrap(), ra1.qps[0].goodput_bps.unwrap());
        assert!(near(g, g1), "goodput {g} vs {g1}");
        assert!(g > 1e9, "emulated goodput near the 10 Gb/s line rate: {g}");
        assert_eq!(ra.qps[0].rate_bps, ra1.qps[0].rate_bps, "line rate, no CNP: 10 Gb/s emulated");
        assert_eq!(ra.nics[0].line_rate_bps, 10_000_000_000);
        assert!(near(rb.qps[0].recv_done_ns.unwrap() as f64, rb1.qps[0].recv_done_ns.unwrap() as f64));
    }

    #[test]
    fn pfc_pause_time_is_reported_in_emulated_time() {
        // 0xffff quanta at 1 Gb/s emulated is 33.55 ms emulated; at D 4 it lasts 134 ms of wall
        // clock and is reported as 33.55 ms.
        let (mut ja, jb) = jobs(4_000_000, 1_000_000_000, false);
        ja.time_dilation = 4.0;
        let mut a = Engine::from_job(&ja, &[PathMtu::Mtu1024], 0).unwrap();
        let _ = jb;
        let pause =
            MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), 0xffff)).to_frame(MacAddr([2, 0, 0, 0, 0, 0x0b]));
        a.on_frame(0, &pause, 1_000);
        let quanta_ns = crate::pfc::quanta_to_ns(0xffff, 1_000_000_000);
        assert!(a.nic_pfc(0).is_paused(3, 1_000 + quanta_ns * 4 - 10).unwrap());
        assert!(!a.nic_pfc(0).is_paused(3, 1_000 + quanta_ns * 4 + 10).unwrap());
        let r = a.report("a", 1_000 + quanta_ns * 4 + 1_000_000);
        assert!(
            r.nics[0].pfc_paused_ns_prio3.abs_diff(quanta_ns) <= 1,
            "{} vs {quanta_ns}",
            r.nics[0].pfc_paused_ns_prio3
        );
    }

    #[test]
    fn a_stalled_job_reports_what_each_qp_waits_for() {
        // 300 000 bytes = 293 packets from PSN 16777000 (wrapping at 2^24); window 32, ACK
        // timeout 2 ms, 7 retries. The responder's ACKs are lost from the first one that
        // acknowledges past PSN 16777100 on: the requester keeps a full window outstanding and
        // times out every 2 ms.
        let (mut a, mut b) = engines(300_000, 10_000_000_000, false);
        let first = 16_777_000u32;
        let mut last_delivered: Option<(u32, u64)> = None;
        let end = run(
            &mut a,
            &mut b,
            0,
            5_000_000,
            |dir, f, now| {
                let p = ParsedFrame::parse(f).unwrap();
                if dir == 1 && p.bth().opcode == WireOpcode::Acknowledge {
                    let psn = p.bth().psn;
                    if Psn::new(first).forward_distance(Psn::new(psn)) > 100 {
                        return false;
                    }
                    last_delivered = Some((psn, now + 5_000));
                }
                true
            },
            |_, _| {},
        );
        assert!(!a.finished() && !b.finished(), "the transfer cannot finish without ACKs");
        let (acked, acked_at) = last_delivered.expect("some ACKs arrived");
        let r = a.report("a", end);
        assert!(!r.ok);
        assert_eq!(r.stalls.len(), 1, "{:#?}", r.stalls);
        let st = &r.stalls[0];
        assert_eq!((st.qpn, st.peer_qpn, st.role.as_str(), st.nic.as_str()), (17, 33, "requester", "a0"));
        assert_eq!(st.last_acked_psn, Some(acked));
        let first_out = Psn::new(acked).next().value();
        assert_eq!(st.outstanding_psns, Some((first_out, Psn::new(first_out).add(31).value())), "a full window of 32");
        assert_eq!(st.outstanding_packets, 32);
        // Timeouts at 2 ms and 4 ms after the last progress, none yet at 5 ms when it came after 1 ms.
        let expected_timeouts = (end - acked_at) / 2_000_000;
        assert!(acked_at < 1_000_000 && expected_timeouts == 2, "acked at {acked_at}, end {end}");
        assert_eq!((st.timeouts, st.retries_left), (2, 5));
        assert_eq!(st.last_progress_ns, Some(acked_at), "the ACK's arrival");
        assert_eq!(st.last_heard_ns, Some(acked_at));
        assert_eq!(st.at_ns, end);
        assert!(!st.paused_now);
        assert_eq!(st.waiting_for, format!("the ACK of PSN {first_out}"));
        let line = st.describe();
        assert!(line.contains(&format!("last acked PSN {acked}, outstanding PSNs {first_out}..=")), "{line}");
        assert!(line.contains("2 timeouts (5 retries left), not paused"), "{line}");

        // The responder received everything that was sent (the go-back-N resends are
        // duplicates): it waits for the PSN after the window.
        let rb = b.report("b", end);
        assert_eq!(rb.stalls.len(), 1, "{:#?}", rb.stalls);
        let sb = &rb.stalls[0];
        let next = Psn::new(first_out).add(32).value();
        assert_eq!((sb.role.as_str(), sb.expected_psn), ("responder", Some(next)));
        assert_eq!(sb.placed_bytes, u64::from(Psn::new(first).forward_distance(Psn::new(next))) * 1024);
        assert_eq!(sb.expected_bytes, 300_000);
        assert_eq!(sb.waiting_for, format!("request PSN {next} from its peer"));
        assert!(
            sb.last_heard_ns.unwrap() > sb.last_progress_ns.unwrap(),
            "duplicates kept arriving after the last placement"
        );

        // A PFC pause on the data priority shows in the report made while it holds.
        let pause =
            MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), 0xffff)).to_frame(MacAddr([2, 0, 0, 0, 0, 0x0b]));
        a.on_frame(0, &pause, end);
        let st = &a.report("a", end + 1_000).stalls[0];
        assert!(st.paused_now);
        assert!(st.waiting_for.ends_with("(its priority is paused by PFC)"), "{}", st.waiting_for);
        assert!(st.describe().contains(", paused by PFC now"));

        // A finished transfer reports no stalls.
        let (mut a, mut b) = engines(30_000, 10_000_000_000, false);
        let end = run(&mut a, &mut b, 0, 1_000_000_000, |_, _, _| true, |_, _| {});
        assert!(a.finished() && b.finished());
        assert!(a.report("a", end).stalls.is_empty() && b.report("b", end).stalls.is_empty());
    }

    #[test]
    fn pfc_pauses_data_for_the_quanta_and_quanta_zero_resumes() {
        // 1 Gb/s: 0xffff quanta = 65535 × 512 ns = 33.55 ms.
        let (mut a, mut b) = engines(4_000_000, 1_000_000_000, false);
        let pause =
            MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), 0xffff)).to_frame(MacAddr([2, 0, 0, 0, 0, 0x0b]));
        let resume =
            MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), 0)).to_frame(MacAddr([2, 0, 0, 0, 0, 0x0b]));
        let mut data_times = Vec::new();
        let mut sent_pause = false;
        let mut sent_resume = false;
        run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, now| {
                if dir == 0 && ParsedFrame::parse(f).is_ok_and(|p| p.bth().opcode != WireOpcode::Acknowledge) {
                    data_times.push(now);
                }
                true
            },
            |now, a| {
                if now >= 2_000_000 && !sent_pause {
                    a.on_frame(0, &pause, now);
                    sent_pause = true;
                }
                if now >= 50_000_000 && !sent_resume {
                    a.on_frame(0, &pause, now);
                    sent_resume = true;
                }
                if now >= 55_000_000 && sent_resume && a.nic_pfc(0).is_paused(3, now).unwrap() {
                    a.on_frame(0, &resume, now);
                }
            },
        );
        let gaps: Vec<u64> = data_times.windows(2).map(|w| w[1] - w[0]).filter(|&g| g > 1_000_000).collect();
        assert_eq!(gaps.len(), 2, "{gaps:?}");
        assert!((33_000_000..34_200_000).contains(&gaps[0]), "full pause {gaps:?}");
        assert!((4_500_000..5_600_000).contains(&gaps[1]), "resumed by quanta 0 after 5 ms: {gaps:?}");
        let ra = a.report("a", 100_000_000);
        assert_eq!(ra.nics[0].pfc_pause_frames_prio3, 2);
        assert_eq!(ra.nics[0].pfc_resume_frames_prio3, 1);
        let paused = ra.nics[0].pfc_paused_ns_prio3;
        assert!((38_000_000..39_700_000).contains(&paused), "{paused}");
        assert!(b.report("b", 0).ok);
    }

    #[test]
    fn data_wake_ups_wait_for_a_burst_of_shaper_credit_and_keep_line_rate() {
        // 1 Gb/s, MTU 1024: a Middle frame is 14 + 20 + 8 + 12 + 1024 + 4 = 1082 bytes, plus
        // 24 bytes of FCS, preamble and gap on the wire: 1106 bytes, 8848 ns.
        let (mut a, _) = engines(4_000_000, 1_000_000_000, false);
        let frame_ns = 8_848u64;
        let mut buf = vec![0u8; 9000];
        let mut now = 0;
        let mut sent = 0u64;
        let mut wakes = 0u64;
        while now < 20_000_000 {
            let mut burst = 0;
            while a.next_tx(0, &mut buf, now).is_some() {
                burst += 1;
            }
            assert!(burst <= PACER_BURST_FRAMES as u64 + 1, "burst {burst} at {now}");
            sent += burst;
            wakes += 1;
            let next = a.next_deadline(now).unwrap();
            if wakes > 2 {
                // Steady state: the next wake-up is a burst away, not one frame.
                assert!(next - now >= (PACER_BURST_FRAMES as u64 - 2) * frame_ns, "woke after {} ns", next - now);
            }
            now = next.max(now + 1);
            // The window (32 packets) would close: ACK everything sent so far.
            let qp = a.by_qpn.get(17).unwrap();
            let s = a.qps[qp].sender.as_mut().unwrap();
            let una = s.snd_nxt().sub(1);
            s.on_ack(&AckPacket { syndrome: AckSyndrome::Ack, psn: una, msn: 0 }, now).unwrap();
        }
        // Line rate over the run: at most one burst above 20 ms / 8848 ns.
        let max = 20_000_000 / frame_ns + PACER_BURST_FRAMES as u64 + 1;
        assert!(sent <= max && sent >= max - 2 * PACER_BURST_FRAMES as u64, "sent {sent}, line rate allows {max}");
        assert!(wakes * (PACER_BURST_FRAMES as u64 - 2) <= sent, "{wakes} wake-ups for {sent} frames");
    }

    #[test]
    fn prefaulted_buffers_are_zeroed_with_the_requested_room() {
        let v = prefaulted(3, 10_000);
        assert_eq!(v, [0, 0, 0]);
        assert!(v.capacity() >= 10_000);
        let w = prefaulted(5000, 10);
        assert!(w.len() == 5000 && w.iter().all(|&b| b == 0));
    }

    #[test]
    fn index_tables_find_every_key_dense_or_sorted_and_reject_duplicates() {
        let dense = IndexTable::new(&[0x107, 0x101, 0x103]).unwrap();
        assert!(matches!(dense, IndexTable::Dense { .. }));
        let sparse = IndexTable::new(&[5, 0xff_fff0, 70_000]).unwrap();
        assert!(matches!(sparse, IndexTable::Sorted(_)));
        for (t, keys) in [(&dense, [0x107, 0x101, 0x103]), (&sparse, [5, 0xff_fff0, 70_000])] {
            for (i, k) in keys.into_iter().enumerate() {
                assert_eq!(t.get(k), Some(i), "{t:?} key {k}");
            }
            for k in [0, 4, 6, 0x100, 0x102, 0x108, 69_999, 0xff_ffff, u32::MAX] {
                assert_eq!(t.get(k), None, "{t:?} key {k}");
            }
        }
        assert_eq!(IndexTable::new(&[]).unwrap().get(0), None);
        assert_eq!(IndexTable::new(&[9, 3, 9]).unwrap_err(), 9);
    }

    #[test]
    fn send_rings_place_transfers_without_overlap_or_straddling() {
        let mut r = SendRing { cap: 100, posted: VecDeque::new() };
        assert_eq!(r.place(101), None, "larger than the ring");
        let post = |r: &mut SendRing, len| {
            let at = r.place(len);
            if let Some(at) = at {
                r.posted.push_back((at, len));
            }
            at
        };
        assert_eq!(post(&mut r, 40), Some(0));
        assert_eq!(post(&mut r, 40), Some(40));
        assert_eq!(post(&mut r, 30), None, "20 bytes left at the end, 0 at the start");
        r.posted.pop_front();
        assert_eq!(post(&mut r, 30), Some(0), "wraps to the freed start");
        assert_eq!(post(&mut r, 11), None, "only 10 bytes between head 30 and tail 40");
        assert_eq!(post(&mut r, 10), Some(30));
        r.posted.pop_front();
        assert_eq!(post(&mut r, 60), Some(40), "tail 0..40 in use, 40..100 free");
        r.posted.clear();
        assert_eq!(post(&mut r, 100), Some(0), "an empty ring starts at 0");
    }

    #[test]
    fn link_mtu_picks_the_largest_fitting_path_mtu() {
        assert_eq!(path_mtu_for_link(1500, false), Some(PathMtu::Mtu1024));
        assert_eq!(path_mtu_for_link(3500, false), Some(PathMtu::Mtu2048));
        assert_eq!(path_mtu_for_link(2108, false), Some(PathMtu::Mtu2048));
        assert_eq!(path_mtu_for_link(2107, false), Some(PathMtu::Mtu1024));
        assert_eq!(path_mtu_for_link(9000, true), Some(PathMtu::Mtu4096));
        assert_eq!(path_mtu_for_link(300, false), None);
    }
}
