//! Building an [`Engine`] from a [`Job`]: the NICs (classes, PFC, pacer), the QPs (requesters
//! with their buffers and posted writes, responders with their regions) and the collective,
//! with the job's emulated rates and timers put on the wall clock at its time dilation D
//! (docs/src/emulated-time.md: rates / D, timers × D).
use std::collections::{HashMap, VecDeque};

use super::index::IndexTable;
use super::pacer::NicPacer;
use super::reduce::{Coll, CollectiveSpecError, SendRing};
// The engine's Dilation (one import to follow when the time types move crates).
use super::{AltRoute, Dilation, Engine, Nic, NicConfig, NicCounters, Qp, CTRL_QUEUE_CAPACITY, ROCE_IPV4_OVERHEAD};
use crate::dcqcn::{CnpPacer, DcqcnProfile, NpKey, NpSettings};
use crate::nic::job::{self, Job, NicSpec, QpSpec, RecvSpec, SendSpec};
use crate::nic::pattern;
use crate::pfc::NicPfc;
use crate::psn::Psn;
use crate::receiver::{MemoryRegion, Receiver, ReceiverConfig};
use crate::segment::{PathMtu, SegmentMode, WriteMessage};
use crate::sender::{Sender, SenderConfig};
use crate::uet::{PdcReceiver, PdcSender};
use rocefab_wire::roce::udp_src_port_for_qp;

/// Errors building an engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("nic {nic} ({name}): {what}")]
    Nic { nic: usize, name: String, what: String },
    #[error("qp {qpn}: {what}")]
    Qp { qpn: u32, what: String },
    #[error("{0}")]
    Job(String),
    #[error(transparent)]
    Collective(#[from] CollectiveSpecError),
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
    // The QP's DCQCN limiter gathers no credit, as the NIC's pacer: after a pause or an idle
    // spell one packet leaves at once and the next at the QP's rate (ns-3 HPCC's per-QP
    // `m_nextAvail`, `rdma-hw.cc`), not a bucket's worth at line rate right after a cut.
    cfg.burst_bytes = 0;
    cfg.retransmit_timeout_ns = d.duration(retransmit_timeout_ns).max(1);
    cfg.dcqcn = Some(profile.rp(line_rate_bps).dilated(d));
    cfg
}

/// The NIC's notification points on the wall clock at time dilation `d`: `profile`'s CNP
/// interval (emulated) × D, and `settings`' mode and scope.
pub fn np_pacer(profile: DcqcnProfile, settings: NpSettings, d: Dilation) -> CnpPacer {
    CnpPacer::new(d.duration(profile.cnp_interval_ns()), settings)
}

/// A responder's configuration on the wall clock at time dilation `d`: the ACK coalescing delay
/// × D; with `write_only`, out-of-order placement
/// with a reordering window of a quarter of its requesters' local ACK timeout
/// `local_ack_timeout_ns` (emulated; by default [`job::default_retransmit_timeout_ns`], at
/// least 100 ms of wall clock, so the window is at least 25 ms and scheduling delays of a
/// loaded machine are not mistaken for loss; a longer timeout widens it alike).
pub fn receiver_config(mtu: PathMtu, write_only: bool, d: Dilation, local_ack_timeout_ns: u64) -> ReceiverConfig {
    let mut cfg = ReceiverConfig::new(mtu);
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

impl Engine {
    /// Builds the engine for `job` at `now`; `path_mtus[i]` is NIC `i`'s path MTU (from the job
    /// or the link MTU). Requester buffers are filled with their pattern and every write posted.
    pub fn from_job(job: &Job, path_mtus: &[PathMtu], now: u64) -> Result<Engine, EngineError> {
        let d = job.dilation().map_err(|x| EngineError::Job(x.to_string()))?;
        let local_ack_timeout_ns = local_ack_timeout_ns(job, d);
        let mut nics = Vec::with_capacity(job.nics.len());
        for (i, n) in job.nics.iter().enumerate() {
            nics.push(build_nic(i, n, path_mtus.get(i).copied(), d, now)?);
        }
        let mut qps = Vec::with_capacity(job.qps.len());
        let by_qpn = IndexTable::new(&job.qps.iter().map(|q| q.qpn).collect::<Vec<_>>())
            .map_err(|qpn| EngineError::Qp { qpn, what: "duplicate qpn".into() })?;
        let coll = CollBytes::of(job);
        let mut np = np_pacer(job.dcqcn, job.dcqcn_np, d);
        for q in &job.qps {
            let e = qp_error(q.qpn);
            let nic = nics.get(q.nic).ok_or_else(|| e(format!("nic {} does not exist", q.nic)))?;
            let mut qp = new_qp(q)?;
            if let Some(a) = &q.alt {
                let alt = nics.get(a.nic).ok_or_else(|| e(format!("alt.nic {} does not exist", a.nic)))?;
                if alt.cfg.path_mtu != nic.cfg.path_mtu {
                    return Err(e(format!(
                        "alt.nic {} has path MTU {} and nic {} {}: a QP keeps its path MTU when it migrates",
                        alt.cfg.name,
                        alt.cfg.path_mtu.bytes(),
                        nic.cfg.name,
                        nic.cfg.path_mtu.bytes()
                    )));
                }
            }
            if nic.cfg.uet.is_some() {
                let id = u16::try_from(qps.len() + 1).map_err(|_| e("a UET host has at most 65,535 PDCs".into()))?;
                qp.pdc = Some(super::uet::Pdc::new(id));
                // A PDC sprays over every path: no alternate path to migrate to.
                qp.alt = None;
            }
            if let Some(s) = &q.send {
                attach_requester(&mut qp, job, s, coll.sends.get(&q.qpn).copied(), nic, d, now)?;
                if let Some(sender) = qp.sender.as_mut().filter(|_| q.alt.is_some()) {
                    sender.set_alternate_path_armed(true);
                }
            }
            if let Some(r) = &q.recv {
                attach_responder(&mut qp, r, coll.recvs.get(&q.qpn).copied(), nic, d, local_ack_timeout_ns, now)?;
            }
            qp.np = np.domain(NpKey { qp: qps.len(), port: q.nic, local: nic.cfg.ip, peer: q.peer_ip });
            nics[q.nic].qps.push(qps.len());
            qps.push(qp);
        }
        let coll = job
            .collective
            .as_ref()
            .map(|c| {
                let nvlink = job.nvlink.map(|n| (d.rate(n.bandwidth_bps).max(1), d.duration(n.latency_ns)));
                Coll::new(c, &by_qpn, qps.len(), nvlink, |h| d.duration(h), |qi| nics[qps[qi].nic].cfg.path_mtu.bytes())
            })
            .transpose()?;
        let milestones =
            Vec::with_capacity(job.collective.as_ref().map_or(0, |c| c.locals.iter().filter(|l| l.milestone).count()));
        let mut e = Engine { nics, qps, by_qpn, start: now, start_unix_ns: 0, coll, dilation: d, np, milestones };
        e.progress(now);
        Ok(e)
    }
}

/// The requesters' local ACK timeout, which the responders' reordering window follows: the
/// longest this job's requesters use (`rocefab run` gives every host the same), else the
/// default.
fn local_ack_timeout_ns(job: &Job, d: Dilation) -> u64 {
    job.qps
        .iter()
        .filter_map(|q| q.send.as_ref().map(|s| s.retransmit_timeout_ns))
        .max()
        .unwrap_or_else(|| job::default_retransmit_timeout_ns(d))
}

/// NIC `i` of the job, `n`, with path MTU `path_mtu` (`None`: not given) on the wall clock at
/// dilation `d`.
fn build_nic(i: usize, n: &NicSpec, path_mtu: Option<PathMtu>, d: Dilation, now: u64) -> Result<Nic, EngineError> {
    let e = |what: String| EngineError::Nic { nic: i, name: n.name.clone(), what };
    let mac = job::parse_mac(&n.mac).ok_or_else(|| e(format!("bad mac {:?}", n.mac)))?;
    let path_mtu = path_mtu.ok_or_else(|| e("no path MTU given".into()))?;
    let cfg = NicConfig {
        name: n.name.clone(),
        mac,
        ip: n.ip,
        line_rate_bps: d.rate(n.line_rate_bps),
        emulated_line_rate_bps: n.line_rate_bps,
        path_mtu,
        write_only: n.write_only,
        dcqcn: n.dcqcn && n.uet.is_none(),
        classes: n.classes,
        uet: n.uet,
    };
    n.classes.validate().map_err(|x| e(format!("{}: classes: {x}", n.name)))?;
    let pfc = NicPfc::new(cfg.line_rate_bps, n.classes.pfc_enable).map_err(|x| e(x.to_string()))?;
    let pacer = NicPacer::new(cfg.line_rate_bps, now);
    Ok(Nic {
        cfg,
        pfc,
        pacer,
        link_up: true,
        acks: VecDeque::with_capacity(CTRL_QUEUE_CAPACITY),
        cnps: VecDeque::with_capacity(CTRL_QUEUE_CAPACITY),
        uet_ctrl: VecDeque::with_capacity(if n.uet.is_some() { CTRL_QUEUE_CAPACITY } else { 0 }),
        qps: Vec::new(),
        rr: 0,
        c: NicCounters::default(),
    })
}

/// The error of QP `qpn` saying `what`.
fn qp_error(qpn: u32) -> impl Fn(String) -> EngineError {
    move |what| EngineError::Qp { qpn, what }
}

/// QP `q` without its requester or responder.
fn new_qp(q: &QpSpec) -> Result<Qp, EngineError> {
    let e = qp_error(q.qpn);
    let peer_mac =
        job::parse_mac(&q.next_hop_mac).ok_or_else(|| e(format!("bad next_hop_mac {:?}", q.next_hop_mac)))?;
    let alt = q
        .alt
        .as_ref()
        .map(|a| {
            let peer_mac = job::parse_mac(&a.next_hop_mac)
                .ok_or_else(|| e(format!("bad alt.next_hop_mac {:?}", a.next_hop_mac)))?;
            Ok::<_, EngineError>(AltRoute { nic: a.nic, peer_ip: a.peer_ip, peer_mac })
        })
        .transpose()?;
    Ok(Qp {
        alt,
        migrated: None,
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
        np: 0,
        cnps_sent: 0,
        pdc: None,
    })
}

/// A requester's collective transfers: their bytes in all and the largest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SendBytes {
    total: u64,
    largest: u64,
}

/// Per QP number, what the job's collective sends on it and receives on it (bytes).
struct CollBytes {
    sends: HashMap<u32, SendBytes>,
    recvs: HashMap<u32, u64>,
}

impl CollBytes {
    fn of(job: &Job) -> CollBytes {
        let mut sends: HashMap<u32, SendBytes> = HashMap::new();
        let mut recvs: HashMap<u32, u64> = HashMap::new();
        if let Some(c) = &job.collective {
            for x in &c.sends {
                let b = sends.entry(x.qpn).or_default();
                b.total += x.len;
                b.largest = b.largest.max(x.len);
            }
            for x in &c.recvs {
                *recvs.entry(x.qpn).or_default() += x.len;
            }
        }
        CollBytes { sends, recvs }
    }
}

/// The bytes of requester `s`'s send buffer on a NIC of path MTU `path_mtu` (bytes): a
/// collective-only requester copies each transfer into a ring of twice its largest transfer and
/// window (never more than their sum), any other holds its own data and every collective
/// transfer after it.
fn send_buffer_bytes(s: &SendSpec, coll: Option<SendBytes>, path_mtu: u32) -> u64 {
    let c = coll.unwrap_or_default();
    if s.len == 0 && c.total > 0 {
        let window = u64::from(s.window_packets) * u64::from(path_mtu);
        c.total.min(2 * (c.largest + window))
    } else {
        s.len + c.total
    }
}

/// The data an engine for `job` allocates, in bytes, when every NIC has path MTU `path_mtu`
/// (bytes): the requesters' send buffers, the responders' regions and the collective's rank
/// buffers, as [`Engine::from_job`] sizes them. The controller adds it to a job's memory need.
pub fn data_bytes(job: &Job, path_mtu: u32) -> u64 {
    let coll = CollBytes::of(job);
    let qps: u64 = job
        .qps
        .iter()
        .map(|q| {
            q.send.as_ref().map_or(0, |s| send_buffer_bytes(s, coll.sends.get(&q.qpn).copied(), path_mtu))
                + q.recv.as_ref().map_or(0, |r| r.len)
        })
        .sum();
    let ranks: u64 = job.collective.iter().flat_map(|c| c.ranks.iter()).map(|r| r.bytes).sum();
    qps + ranks
}

/// Gives `qp` its requester for `s` on `nic`: the sender on the wall clock, its send buffer
/// (the pattern, room for the collective's transfers or a ring for them) and `s`'s writes
/// posted.
fn attach_requester(
    qp: &mut Qp,
    job: &Job,
    s: &SendSpec,
    coll: Option<SendBytes>,
    nic: &Nic,
    d: Dilation,
    now: u64,
) -> Result<(), EngineError> {
    let e = qp_error(qp.spec.qpn);
    let mut requester = match (qp.pdc.as_ref(), nic.cfg.uet) {
        (Some(p), Some(u)) => Requester::Uet(PdcSender::new(uet_sender_config(s, nic, &u, qp.sport, d), p.local_id)),
        _ => Requester::Rc(Sender::new(requester_config(s, nic, d, job.dcqcn), now).map_err(|x| e(x.to_string()))?),
    };
    let len = usize::try_from(s.len).map_err(|_| e("send.len too large".into()))?;
    let coll_bytes = coll.map_or(0, |c| c.total);
    qp.send_total = s.len + coll_bytes;
    let cap = send_buffer_bytes(s, coll, nic.cfg.path_mtu.bytes());
    let cap_len = usize::try_from(cap).map_err(|_| e("send bytes too large".into()))?;
    if s.len == 0 && coll_bytes > 0 {
        qp.send_buf = prefaulted(cap_len, cap_len);
        qp.send_ring = Some(SendRing { cap, posted: VecDeque::new() });
    } else {
        // Room for every collective transfer appended later, faulted in now.
        qp.send_buf = prefaulted(0, cap_len);
        qp.send_buf.extend_from_slice(&pattern::generate(len, s.seed));
    }
    let mut off = 0u64;
    let mut wr = 0u64;
    while off < s.len {
        let n = (s.len - off).min(s.message_bytes);
        let posted = match &mut requester {
            Requester::Rc(sender) => {
                let msg = WriteMessage { remote_va: s.remote_va + off, rkey: s.rkey, len: n as u32 };
                sender.post_write(wr, off, msg).map_err(|x| x.to_string())
            }
            Requester::Uet(tx) => tx.post_write(wr, off, s.remote_va + off, n).map_err(|x| x.to_string()),
        };
        posted.map_err(|x| e(format!("posting write {wr}: {x}")))?;
        off += n;
        wr += 1;
    }
    if qp.send_total == 0 {
        qp.send_done = Some(now);
    }
    match requester {
        Requester::Rc(sender) => qp.sender = Some(sender),
        Requester::Uet(tx) => qp.pdc.as_mut().expect("a UET QP has its PDC").tx = Some(tx),
    }
    Ok(())
}

/// A requester being built: RC or a UET PDC's sending end (short-lived, so unboxed).
#[allow(clippy::large_enum_variant)]
enum Requester {
    Rc(Sender),
    Uet(PdcSender),
}

/// Packets a UET receiver tracks beyond its cumulative PSN (at least any sender's window).
pub const UET_RECEIVE_WINDOW_PACKETS: u32 = 4096;

/// The wall-clock configuration of a UET PDC's sending end for `s` on `nic` at dilation `d`:
/// packets of the path MTU (so a collective's transfers have the packet counts RoCEv2's have),
/// the job's window (at most [`UET_RECEIVE_WINDOW_PACKETS`]) as both the sequence window and
/// the largest congestion window, ten packets as the initial one, the job's local ACK timeout × D as the retransmission timeout,
/// IBTA's retry count of 7.
fn uet_sender_config(s: &SendSpec, nic: &Nic, u: &job::UetSpec, sport: u16, d: Dilation) -> crate::uet::SenderConfig {
    let mtu = nic.cfg.path_mtu.bytes();
    let window = s.window_packets.clamp(1, UET_RECEIVE_WINDOW_PACKETS);
    crate::uet::SenderConfig {
        max_payload: mtu,
        start_psn: s.psn,
        window_packets: window,
        // RFC 6928's initial window of ten packets, slow start from there.
        init_cwnd_bytes: u64::from(window.min(10)) * u64::from(mtu),
        max_cwnd_bytes: u64::from(window) * u64::from(mtu),
        rto_ns: d.duration(s.retransmit_timeout_ns).max(1),
        max_retransmissions: 7,
        entropy: super::uet::entropy(u, sport),
        ordered: u.ordered,
    }
}

/// The wall-clock configuration of a requester for `s` on `nic` at dilation `d`.
fn requester_config(s: &SendSpec, nic: &Nic, d: Dilation, profile: DcqcnProfile) -> SenderConfig {
    let mut cfg = sender_config(nic.cfg.emulated_line_rate_bps, s.retransmit_timeout_ns, d, profile);
    cfg.mtu = nic.cfg.path_mtu;
    cfg.mode = if nic.cfg.write_only { SegmentMode::WriteOnlyPerPacket } else { SegmentMode::FirstMiddleLast };
    cfg.initial_psn = Psn::new(s.psn);
    cfg.max_outstanding_packets = s.window_packets;
    if !nic.cfg.dcqcn {
        cfg.dcqcn = None;
    }
    if nic.cfg.ip.is_ipv6() {
        cfg.per_packet_overhead_bytes += 20;
    }
    cfg
}

/// Gives `qp` its responder for `r` on `nic`: the receiver on the wall clock with its region,
/// and the bytes it waits for (a collective's responder receives every transfer into its
/// staging region, which may be a ring smaller than their sum, `collective_job`).
#[allow(clippy::too_many_arguments)]
fn attach_responder(
    qp: &mut Qp,
    r: &RecvSpec,
    coll_recv_bytes: Option<u64>,
    nic: &Nic,
    d: Dilation,
    local_ack_timeout_ns: u64,
    now: u64,
) -> Result<(), EngineError> {
    let e = qp_error(qp.spec.qpn);
    let mut cfg = receiver_config(nic.cfg.path_mtu, nic.cfg.write_only, d, local_ack_timeout_ns);
    cfg.initial_psn = Psn::new(r.psn);
    let len = usize::try_from(r.len).map_err(|_| e("recv.len too large".into()))?;
    let mr = MemoryRegion { va: r.va, rkey: r.rkey, data: prefaulted(len, len) };
    if let Some(p) = qp.pdc.as_mut() {
        let rc = crate::uet::ReceiverConfig {
            window_packets: UET_RECEIVE_WINDOW_PACKETS,
            // uet-htsim's UecSink::_bytes_unacked_threshold.
            ack_every_bytes: 16384,
            ack_delay_ns: cfg.ack_delay_ns.unwrap_or(0),
            ordered: nic.cfg.uet.is_some_and(|u| u.ordered),
        };
        p.rx = Some(super::uet::PdcRx { r: PdcReceiver::new(rc), region: mr, start_psn: r.psn });
    } else {
        qp.receiver = Some(Receiver::new(cfg, vec![mr]).map_err(|x| e(x.to_string()))?);
    }
    qp.recv_len = coll_recv_bytes.unwrap_or(r.len);
    if qp.recv_len == 0 {
        qp.recv_done = Some(now);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::engine::testkit::{jobs, run_with_delay};

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
        let r = receiver_config(PathMtu::Mtu1024, false, dil, job::default_retransmit_timeout_ns(dil));
        let b = Engine::from_job(&jb, &[PathMtu::Mtu1024], 0).unwrap();
        assert_eq!(b.cnp_pacer().interval_ns(), crate::dcqcn::DEFAULT_CNP_INTERVAL_NS * 1000);
        assert_eq!(b.cnp_pacer().settings(), NpSettings::default());
        // The job's profile reaches both ends: ConnectX's 300 µs timer and 4 µs CNP interval.
        ja.dcqcn = DcqcnProfile::Connectx;
        let cx = Engine::from_job(&ja, &[PathMtu::Mtu1024], 0).unwrap();
        assert_eq!(cx.sender(17).unwrap().config().dcqcn, Some(DcqcnProfile::Connectx.rp(10_000_000_000).dilated(dil)));
        assert_eq!(cx.cnp_pacer().interval_ns(), 4_000 * 1000);
        // ns-3 HPCC's NP: a CNP for every CE-marked packet, interval 0 at any dilation.
        assert_eq!(np_pacer(DcqcnProfile::HpccDcqcn, NpSettings::default(), dil).interval_ns(), 0);
        // The job's NP settings reach the pacer.
        let deferred = NpSettings { cnp: crate::dcqcn::CnpMode::Deferred, scope: crate::dcqcn::CnpScope::IpPair };
        jb.dcqcn_np = deferred;
        assert_eq!(Engine::from_job(&jb, &[PathMtu::Mtu1024], 0).unwrap().cnp_pacer().settings(), deferred);
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
    fn prefaulted_buffers_are_zeroed_with_the_requested_room() {
        let v = prefaulted(3, 10_000);
        assert_eq!(v, [0, 0, 0]);
        assert!(v.capacity() >= 10_000);
        let w = prefaulted(5000, 10);
        assert!(w.len() == 5000 && w.iter().all(|&b| b == 0));
    }

    #[test]
    fn link_mtu_picks_the_largest_fitting_path_mtu() {
        assert_eq!(path_mtu_for_link(1500, false), Some(PathMtu::Mtu1024));
        assert_eq!(path_mtu_for_link(3500, false), Some(PathMtu::Mtu2048));
        assert_eq!(path_mtu_for_link(2108, false), Some(PathMtu::Mtu2048));
        assert_eq!(path_mtu_for_link(2107, false), Some(PathMtu::Mtu1024));
        assert_eq!(path_mtu_for_link(9000, true), Some(PathMtu::Mtu4096));
        assert_eq!(path_mtu_for_link(9216, false), Some(PathMtu::Mtu4096));
        assert_eq!(path_mtu_for_link(300, false), None);
    }
}
