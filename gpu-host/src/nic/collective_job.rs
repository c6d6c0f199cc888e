//! Turns a [`Schedule`] (ring AllReduce = ReduceScatter then AllGather, incast, all-to-all,
//! broadcast; book ch. 14) over a set of hosts into one [`Job`] per host: ranks numbered as
//! torchrun does (global rank = node rank × GPUs per host + local rank, [`RankLayout`]), one
//! RC QP pair per ordered rank pair that exchanges data, staging slots in the responder's
//! region, dependencies, and the closed-form expected result of every rank.
//!
//! Staging is a ring ([`staging_ring_bytes`]): a connection whose transfers add up to more
//! than twice its largest transfer plus two requester windows reuses its slots, so a
//! 64-rank AllReduce of 16 MiB stages in 1.5 MiB per connection instead of 31.5 MiB. Reuse
//! is safe because a responder applies a transfer the moment its PSN range completes, before
//! it ACKs it, and a requester never sends a packet more than its window beyond the oldest
//! unacknowledged one: a slot's bytes are only rewritten at least a window after the
//! transfer that used them was applied.
//!
//! Elements are u32 (wrapping sum); rank `r`'s input is pattern `seed_base + r`.
use std::net::IpAddr;

use super::job::{
    AltPath, CollLocal, CollOp, CollRecv, CollSend, CollectiveSpec, ExpectSpec, Job, NicSpec, QpSpec, RankSpec,
    RecvSpec, SendSpec, DEFAULT_MESSAGE_BYTES, DEFAULT_RETRANSMIT_TIMEOUT_NS, DEFAULT_WINDOW_PACKETS,
};
use crate::collective::{chunk_range, CollectiveError, Op, Phase, RankLayout, Schedule, Transfer};
use crate::segment::SegmentMode;

/// Bytes per element.
pub const ELEM: u64 = 4;
/// Responder staging regions start here (virtual address).
pub const STAGING_VA: u64 = 0x1_0000_0000;

/// Errors building the jobs.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Collective(#[from] CollectiveError),
    #[error("{0}")]
    Invalid(String),
}

/// Which collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AllReduce,
    Incast,
    AllToAll,
    Broadcast,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "allreduce",
            Kind::Incast => "incast",
            Kind::AllToAll => "alltoall",
            Kind::Broadcast => "broadcast",
        }
    }
}

/// One GPU NIC of a host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostNic {
    pub name: String,
    pub mac: String,
    pub ip: IpAddr,
    /// Destination MAC of every frame (the rail switch port: an L3 hop).
    pub gateway_mac: String,
    pub line_rate_bps: u64,
    /// DSCPs and priorities of its traffic (from the host's DCBX agent).
    pub classes: super::job::NicClasses,
}

/// One host: its NICs (local rank `g` uses `nics[g % nics.len()]`, i.e. NIC per GPU or a
/// shared NIC) and its GPU count.
#[derive(Clone, Debug, PartialEq)]
pub struct HostDesc {
    pub name: String,
    pub gpus: u32,
    pub nics: Vec<HostNic>,
    /// The GPUs' NVLink, if any: transfers between two ranks of the host take it (no QP, no
    /// network frame).
    pub nvlink: Option<super::job::NvlinkSpec>,
    /// PXN (NCCL's PCI x NVLink, for rail-only fabrics): a send to a GPU of another host on
    /// another rail first crosses NVLink to the local GPU on the destination's rail, which sends
    /// it over its own NIC. Needs `nvlink` and a NIC per GPU.
    pub pxn: bool,
    /// Ports per GPU NIC: 1, or 2 for a dual-port NIC (`nics` then lists GPU g's ports at
    /// 2g and 2g+1, and a GPU's k-th connection takes port k % 2 at both ends).
    pub ports: u32,
}

/// Options.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildOptions {
    pub job_name: String,
    pub timeout_ms: u64,
    pub seed_base: u64,
    /// When set, the `i`-th host of `hosts` (0-based: host1 of a fabric is `i` = 0) serves
    /// metrics on `127.0.0.1:(base + i)`.
    pub metrics_port_base: Option<u16>,
    pub window_packets: u32,
    /// Local ACK timeout of every requester, emulated ns.
    pub retransmit_timeout_ns: u64,
    /// Time dilation D of the fabric: line rates and timers in the jobs are emulated.
    pub time_dilation: f64,
    /// How requesters cut their writes ([`SegmentMode::WriteOnlyPerPacket`] also turns on
    /// the responders' out-of-order placement).
    pub segment: SegmentMode,
    /// The DCQCN parameter set of every NIC.
    pub dcqcn: crate::dcqcn::DcqcnProfile,
    /// The NICs' notification point (CNPs within the interval, what shares one).
    pub dcqcn_np: crate::dcqcn::NpSettings,
    /// Whether the NICs run DCQCN at all (off: line rate whatever the CNPs say).
    pub dcqcn_on: bool,
    /// Ultra Ethernet Transport instead of RoCEv2 (`None`: RoCEv2).
    pub uet: Option<UetOptions>,
}

/// The UET options of a job's NICs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UetOptions {
    /// A different entropy per packet (spraying).
    pub spray: bool,
    /// The DSCP trimmed packets carry, if the fabric remarks them.
    pub trim_dscp: Option<u8>,
    /// DSCP of data and ACKs, and the priority the fabric maps it to (a PFC pause of it stops
    /// the NIC, if PFC is on for it).
    pub dscp: u8,
    pub priority: u8,
    /// Over IP with this protocol and the entropy header instead of UDP.
    pub ip_protocol: Option<u8>,
    /// ROD instead of RUD.
    pub ordered: bool,
}

/// The SES JobID of a job named `name`: 24 bits of its FNV-1a hash (every host of a job
/// derives the same).
pub fn uet_job_id(name: &str) -> u32 {
    let h = name.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    (h ^ (h >> 24)) & 0xff_ffff
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            job_name: "job".into(),
            timeout_ms: 120_000,
            seed_base: 1,
            metrics_port_base: None,
            window_packets: DEFAULT_WINDOW_PACKETS,
            retransmit_timeout_ns: DEFAULT_RETRANSMIT_TIMEOUT_NS,
            time_dilation: 1.0,
            segment: SegmentMode::FirstMiddleLast,
            dcqcn: Default::default(),
            dcqcn_np: Default::default(),
            dcqcn_on: true,
            uet: None,
        }
    }
}

/// One RC connection (requester rank → responder rank).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    pub src_rank: u32,
    pub dst_rank: u32,
    pub src_qpn: u32,
    pub dst_qpn: u32,
    /// Bytes of every transfer on the connection.
    pub bytes: u64,
    /// Size of the responder's staging region (a ring when smaller than `bytes`).
    pub staging_bytes: u64,
}

/// Largest RoCEv2 path MTU (bytes per packet): the staging ring's bound on a window's bytes,
/// whatever path MTU the hosts pick.
const MAX_PATH_MTU: u64 = 4096;

/// Staging bytes for a connection carrying `total` bytes in transfers of at most `largest`
/// bytes, with requester windows of `window_packets`: the whole stream when that is smaller,
/// else a ring of 2 × (largest + one window at the largest MTU). Slots never straddle the
/// ring's end (a transfer that does not fit starts again at 0), which costs at most
/// `largest` bytes of each lap; the rest keeps a window plus a transfer between a slot's
/// last use and its reuse (see the module docs).
pub fn staging_ring_bytes(total: u64, largest: u64, window_packets: u32) -> u64 {
    let ring = 2 * (largest + u64::from(window_packets) * MAX_PATH_MTU);
    total.min(ring.next_multiple_of(MAX_PATH_MTU))
}

/// The jobs and what they were built from.
#[derive(Clone, Debug)]
pub struct Built {
    pub layout: RankLayout,
    pub schedule: Schedule,
    pub conns: Vec<Conn>,
    /// One job per host, in `hosts` order.
    pub jobs: Vec<Job>,
}

fn fnv(x: u64) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in x.to_le_bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The schedule of `kind` over `ranks` ranks of `elems` u32 elements (root 0 where needed).
pub fn schedule(kind: Kind, ranks: u32, elems: usize) -> Result<Schedule, CollectiveError> {
    match kind {
        Kind::AllReduce => Schedule::ring_allreduce(ranks, elems),
        Kind::Incast => Schedule::incast(ranks, 0, elems),
        Kind::AllToAll => Schedule::all_to_all(ranks, elems),
        Kind::Broadcast => Schedule::broadcast(ranks, 0, elems),
    }
}

/// Expected final contents of rank `r`'s buffer as (offset, len, terms) in bytes.
fn expectations(kind: Kind, s: &Schedule, r: u32, seed: impl Fn(u32) -> u64) -> Vec<ExpectSpec> {
    let n = s.ranks;
    let bytes = s.elems as u64 * ELEM;
    match kind {
        Kind::AllReduce => {
            vec![ExpectSpec { rank: r, offset: 0, len: bytes, terms: (0..n).map(|k| (seed(k), 0)).collect() }]
        }
        Kind::Incast if r == 0 => {
            vec![ExpectSpec { rank: r, offset: 0, len: bytes, terms: (0..n).map(|k| (seed(k), 0)).collect() }]
        }
        Kind::Incast => vec![ExpectSpec { rank: r, offset: 0, len: bytes, terms: vec![(seed(r), 0)] }],
        Kind::Broadcast => vec![ExpectSpec { rank: r, offset: 0, len: bytes, terms: vec![(seed(0), 0)] }],
        Kind::AllToAll => (0..n)
            .map(|i| {
                // Slot i of the output holds rank i's chunk r.
                let src = chunk_range(s.elems, n, r);
                let dst = chunk_range(s.elems, n, i);
                ExpectSpec {
                    rank: r,
                    offset: (s.elems + dst.start) as u64 * ELEM,
                    len: dst.len() as u64 * ELEM,
                    terms: vec![(seed(i), src.start as u64 * ELEM)],
                }
            })
            .collect(),
    }
}

/// Builds one job per host for `kind` with `bytes_per_rank` of input per rank.
pub fn build(kind: Kind, hosts: &[HostDesc], bytes_per_rank: u64, opts: &BuildOptions) -> Result<Built, BuildError> {
    let gpus = check_inputs(hosts, bytes_per_rank)?;
    let layout = RankLayout::new(hosts.len() as u32, gpus)?;
    let n = layout.world_size();
    let elems = usize::try_from(bytes_per_rank / ELEM).map_err(|_| BuildError::Invalid("size too large".into()))?;
    let sched = schedule(kind, n, elems)?;
    let seed = |r: u32| opts.seed_base.wrapping_add(u64::from(r));
    assemble(kind.name(), sched, layout, hosts, opts, &[], |s, r| expectations(kind, s, r, seed))
}

/// A training job ([`crate::training`]) over `hosts`: the jobs, and the schedule's milestones
/// (each marked in its host's job, so the reports say when it was reached). Every rank's
/// buffer (parameters, then one gradient region per iteration) starts as its pattern.
pub fn build_training(
    spec: &crate::training::TrainingSpec,
    hosts: &[HostDesc],
    opts: &BuildOptions,
) -> Result<(Built, crate::training::Training), BuildError> {
    let gpus = check_inputs(hosts, ELEM)?;
    let layout = RankLayout::new(hosts.len() as u32, gpus)?;
    if spec.layout != layout {
        return Err(BuildError::Invalid(format!(
            "the training spec's layout {:?} is not the fabric's ({} hosts x {gpus} GPUs)",
            spec.layout,
            hosts.len()
        )));
    }
    let training = spec.build()?;
    let n = layout.world_size();
    let seed = |r: u32| opts.seed_base.wrapping_add(u64::from(r));
    let p = spec.params as u64 * ELEM;
    let expect = |_: &Schedule, r: u32| {
        let mut e = vec![ExpectSpec { rank: r, offset: 0, len: p, terms: vec![(seed(0), 0)] }];
        for it in 1..=u64::from(spec.iterations) {
            e.push(ExpectSpec { rank: r, offset: it * p, len: p, terms: (0..n).map(|k| (seed(k), it * p)).collect() });
        }
        e
    };
    let marks: Vec<usize> = training.milestones.iter().map(|m| m.id).collect();
    let built = assemble("train", training.schedule.clone(), layout, hosts, opts, &marks, expect)?;
    Ok((built, training))
}

/// One job per host running `sched` over `hosts` (ranks numbered by `layout`; every rank's input
/// is its whole schedule input `sched.elems`, pattern seed_base + rank), with `expect(sched, r)`
/// as rank r's expected contents and the local transfers in `milestones` marked as such.
fn assemble(
    name: &str,
    mut sched: Schedule,
    layout: RankLayout,
    hosts: &[HostDesc],
    opts: &BuildOptions,
    milestones: &[usize],
    expect: impl Fn(&Schedule, u32) -> Vec<ExpectSpec>,
) -> Result<Built, BuildError> {
    let n = layout.world_size();
    let gpus = layout.procs_per_node;
    if hosts.iter().any(|h| h.pxn) {
        if hosts.iter().any(|h| h.nvlink.is_none() || h.nics.len() as u32 != gpus * h.ports) {
            return Err(BuildError::Invalid("PXN needs NVLink and a NIC per GPU on every host".into()));
        }
        relay_through_pxn(&mut sched, &layout);
    }
    let seed = |r: u32| opts.seed_base.wrapping_add(u64::from(r));
    let place = |r: u32| locate(&layout, hosts, r);

    // Transfers between two ranks of a host with NVLink take it: no connection.
    let on_nvlink = |t: &Transfer| {
        let (Ok((a, _)), Ok((b, _))) = (layout.locate(t.src_rank), layout.locate(t.dst_rank)) else { return false };
        t.src_rank != t.dst_rank && a == b && hosts[a as usize].nvlink.is_some()
    };
    let (conns, slot) = connections(&sched, opts.window_packets, on_nvlink);
    check_deps(&sched)?;
    let mut jobs: Vec<Job> = hosts.iter().enumerate().map(|(i, h)| host_job(name, i, h, opts)).collect();
    for r in 0..n {
        let (host, _) = place(r)?;
        let c = jobs[host].collective.as_mut().expect("set above");
        c.ranks.push(RankSpec {
            rank: r,
            bytes: sched.buffer_elems as u64 * ELEM,
            input_bytes: sched.elems as u64 * ELEM,
            seed: seed(r),
        });
        c.expect.extend(expect(&sched, r));
    }
    // A dual-port NIC spreads a GPU's connections: its k-th connection takes port k % 2 (at both
    // ends, so a connection stays on one side of a dual-rail fabric).
    let mut per_src = vec![0usize; n as usize];
    for (ci, c) in conns.iter().enumerate() {
        let k = &mut per_src[c.src_rank as usize];
        let port = *k % hosts[place(c.src_rank)?.0].ports as usize;
        *k += 1;
        add_qp_pair(&mut jobs, hosts, ci, c, port, opts, place)?;
    }
    for (id, t) in sched.transfers.iter().enumerate() {
        add_transfer(&mut jobs, id, t, slot[id].map(|(ci, staging)| (&conns[ci], staging)), place)?;
    }
    let marked: std::collections::HashSet<usize> = milestones.iter().copied().collect();
    for j in &mut jobs {
        if !marked.is_empty() {
            for l in &mut j.collective.as_mut().expect("set above").locals {
                l.milestone = marked.contains(&l.id);
            }
        }
        j.snapshot_interval_ms = snapshot_interval_ms(j.qps.len());
        j.validate().map_err(|e| BuildError::Invalid(e.to_string()))?;
    }
    Ok(Built { layout, schedule: sched, conns, jobs })
}

/// How often a host of `qps` QP ends publishes a snapshot (its metrics, `GET /sample`), ms:
/// [`super::job::DEFAULT_SNAPSHOT_INTERVAL_MS`], and 50 µs a QP beyond 2,000 QPs. A snapshot
/// walks every QP on the data thread; on a 2-core machine running 64 hosts of a 512-rank
/// all-to-all (8,176 QPs each), snapshots every 100 ms took more CPU than the hosts had.
pub fn snapshot_interval_ms(qps: usize) -> u64 {
    super::job::DEFAULT_SNAPSHOT_INTERVAL_MS.max(qps as u64 / 20)
}

/// Rewrites every transfer from rank a to a rank b of another host on another rail (local index)
/// as NCCL's PXN does: a copy over NVLink from a to a' (a's host, b's local index) into a staging
/// range appended to a' 's buffer, then the network transfer a' -> b from there (keeping the
/// original id, so what depended on it still does). Rank buffers grow by the largest staging
/// any relay needs.
fn relay_through_pxn(sched: &mut Schedule, layout: &RankLayout) {
    let base = sched.buffer_elems;
    let mut staged = vec![0usize; sched.ranks as usize];
    let n = sched.transfers.len();
    for id in 0..n {
        let t = &sched.transfers[id];
        let (Ok((ha, la)), Ok((hb, lb))) = (layout.locate(t.src_rank), layout.locate(t.dst_rank)) else { continue };
        if ha == hb || la == lb {
            continue;
        }
        let relay = ha * layout.procs_per_node + lb;
        let at = base + staged[relay as usize];
        staged[relay as usize] += t.elems();
        let stage = at..at + t.elems();
        let hop = Transfer {
            phase: t.phase,
            step: t.step,
            src_rank: t.src_rank,
            dst_rank: relay,
            chunk: t.chunk,
            src: t.src.clone(),
            dst: stage.clone(),
            op: Op::Copy,
            deps: t.deps.clone(),
            hold_ns: 0,
        };
        let hop_id = sched.transfers.len();
        sched.transfers.push(hop);
        let t = &mut sched.transfers[id];
        t.src_rank = relay;
        t.src = stage;
        t.deps = vec![hop_id];
    }
    sched.buffer_elems = base + staged.iter().copied().max().unwrap_or(0);
}

/// Every host has GPUs (as many as the others) and NICs, and the size is whole elements:
/// the GPUs per host.
fn check_inputs(hosts: &[HostDesc], bytes_per_rank: u64) -> Result<u32, BuildError> {
    if hosts.is_empty() || hosts.iter().any(|h| h.nics.is_empty() || h.gpus == 0) {
        return Err(BuildError::Invalid("every host needs at least one GPU and one NIC".into()));
    }
    if hosts.iter().any(|h| h.ports == 0 || h.nics.len() % h.ports as usize != 0) {
        return Err(BuildError::Invalid("a host's NIC ports must be whole NICs of `ports` ports".into()));
    }
    let gpus = hosts[0].gpus;
    if hosts.iter().any(|h| h.gpus != gpus) {
        return Err(BuildError::Invalid("hosts differ in GPU count (torchrun needs equal --nproc-per-node)".into()));
    }
    if bytes_per_rank == 0 || !bytes_per_rank.is_multiple_of(ELEM) {
        return Err(BuildError::Invalid(format!("size {bytes_per_rank} must be a positive multiple of {ELEM} bytes")));
    }
    Ok(gpus)
}

/// Rank `r`'s (host index, NIC index: its first port) in `hosts`.
fn locate(layout: &RankLayout, hosts: &[HostDesc], r: u32) -> Result<(usize, usize), BuildError> {
    let (node, local) = layout.locate(r)?;
    let h = &hosts[node as usize];
    let ports = h.ports as usize;
    Ok((node as usize, (local as usize % (h.nics.len() / ports)) * ports))
}

/// The connections of `sched` in order of first use, and per transfer id its (connection,
/// staging offset), `None` for a local transfer or one `on_nvlink`. Staging slots are given in id order per
/// connection (the order its transfers are posted), in a ring of [`staging_ring_bytes`].
fn connections(
    sched: &Schedule,
    window_packets: u32,
    on_nvlink: impl Fn(&Transfer) -> bool,
) -> (Vec<Conn>, Vec<Option<(usize, u64)>>) {
    let mut conns: Vec<Conn> = Vec::new();
    // (src rank, dst rank) -> index in `conns`: a 512-rank all-to-all has 261,632 of them.
    let mut by_pair: std::collections::HashMap<(u32, u32), usize> = std::collections::HashMap::new();
    let mut slot: Vec<Option<(usize, u64)>> = vec![None; sched.transfers.len()];
    for (id, t) in sched.transfers.iter().enumerate() {
        if t.is_local() || on_nvlink(t) {
            continue;
        }
        let len = t.elems() as u64 * ELEM;
        let ci = match by_pair.get(&(t.src_rank, t.dst_rank)) {
            Some(&i) => i,
            None => {
                let i = conns.len() as u32;
                conns.push(Conn {
                    src_rank: t.src_rank,
                    dst_rank: t.dst_rank,
                    src_qpn: 0x100 + 2 * i,
                    dst_qpn: 0x101 + 2 * i,
                    bytes: 0,
                    staging_bytes: 0,
                });
                by_pair.insert((t.src_rank, t.dst_rank), i as usize);
                i as usize
            }
        };
        slot[id] = Some((ci, 0));
        conns[ci].bytes += len;
        conns[ci].staging_bytes = conns[ci].staging_bytes.max(len);
    }
    // Staging slots, in id order per connection (the order its transfers are posted).
    for c in &mut conns {
        c.staging_bytes = staging_ring_bytes(c.bytes, c.staging_bytes, window_packets);
    }
    let mut next = vec![0u64; conns.len()];
    for (id, t) in sched.transfers.iter().enumerate() {
        let Some((ci, at)) = slot[id].as_mut() else { continue };
        let len = t.elems() as u64 * ELEM;
        if next[*ci] + len > conns[*ci].staging_bytes {
            next[*ci] = 0;
        }
        *at = next[*ci];
        next[*ci] += len;
    }
    (conns, slot)
}

/// Dependencies must be satisfied on the sender's host (received there or local).
fn check_deps(sched: &Schedule) -> Result<(), BuildError> {
    for (id, t) in sched.transfers.iter().enumerate() {
        for &d in &t.deps {
            if sched.transfers[d].dst_rank != t.src_rank {
                return Err(BuildError::Invalid(format!(
                    "transfer {id} depends on {d}, which does not arrive at rank {}",
                    t.src_rank
                )));
            }
        }
    }
    Ok(())
}

/// The job of host `i`, `h`: its NICs and an empty collective named `kind`.
fn host_job(kind: &str, i: usize, h: &HostDesc, opts: &BuildOptions) -> Job {
    Job {
        name: format!("{}-{}", opts.job_name, h.name),
        timeout_ms: opts.timeout_ms,
        xdp_mode: "driver".into(),
        drop_nth: 0,
        metrics_listen: opts.metrics_port_base.map(|b| std::net::SocketAddr::from(([127, 0, 0, 1], b + i as u16))),
        // The QPs stay up after the report until the controller, holding every report,
        // stops the hosts (or the job's own timeout passes): a peer whose final ACK was
        // lost gets it again instead of exhausting its retries against a host that has gone.
        linger_ms: opts.timeout_ms,
        time_dilation: opts.time_dilation,
        dcqcn: opts.dcqcn,
        dcqcn_np: opts.dcqcn_np,
        nvlink: h.nvlink,
        snapshot_interval_ms: super::job::DEFAULT_SNAPSHOT_INTERVAL_MS,
        nics: h
            .nics
            .iter()
            .map(|n| NicSpec {
                name: n.name.clone(),
                mac: n.mac.clone(),
                ip: n.ip,
                line_rate_bps: n.line_rate_bps,
                path_mtu: None,
                write_only: opts.segment == SegmentMode::WriteOnlyPerPacket,
                dcqcn: opts.dcqcn_on && opts.uet.is_none(),
                classes: match opts.uet {
                    Some(u) => super::job::NicClasses { data_dscp: u.dscp, data_priority: u.priority, ..n.classes },
                    None => n.classes,
                },
                uet: opts.uet.map(|u| super::job::UetSpec {
                    job_id: uet_job_id(&opts.job_name),
                    pid_on_fep: (i & 0xfff) as u16,
                    spray: u.spray,
                    trim_dscp: u.trim_dscp,
                    udp_port: rocefab_wire::uet::UDP_PORT,
                    ip_protocol: u.ip_protocol,
                    ordered: u.ordered,
                }),
            })
            .collect(),
        qps: Vec::new(),
        collective: Some(CollectiveSpec { kind: kind.into(), ..Default::default() }),
    }
}

/// Connection `ci`, `c`: its requester QP in the source rank's job and its responder QP in
/// the destination rank's (`place`: a rank's host and first NIC port; `port` is added at both ends).
#[allow(clippy::too_many_arguments)]
fn add_qp_pair(
    jobs: &mut [Job],
    hosts: &[HostDesc],
    ci: usize,
    c: &Conn,
    port: usize,
    opts: &BuildOptions,
    place: impl Fn(u32) -> Result<(usize, usize), BuildError>,
) -> Result<(), BuildError> {
    let (sh, sn) = place(c.src_rank)?;
    let (dh, dn) = place(c.dst_rank)?;
    let (sn, dn) = (sn + port, dn + port);
    let psn = fnv(ci as u64 ^ opts.seed_base) & 0x00ff_ffff;
    let rkey = 0x1000 + ci as u32;
    let (snic, dnic) = (&hosts[sh].nics[sn], &hosts[dh].nics[dn]);
    if snic.ip.is_ipv4() != dnic.ip.is_ipv4() {
        return Err(BuildError::Invalid(format!("ranks {} and {} use different IP families", c.src_rank, c.dst_rank)));
    }
    let label = format!("rank {} -> rank {}", c.src_rank, c.dst_rank);
    // A dual-port NIC loads the other port at both ends as the QP's alternate path (APM): a
    // connection that loses its port moves to the other side of the dual-rail fabric.
    let (salt, dalt) = if hosts[sh].ports == 2 && hosts[dh].ports == 2 {
        let (sa, da) = (sn - port + (1 - port), dn - port + (1 - port));
        let (sanic, danic) = (&hosts[sh].nics[sa], &hosts[dh].nics[da]);
        let alt = |nic: usize, peer: &HostNic, local: &HostNic| AltPath {
            nic,
            peer_ip: peer.ip,
            next_hop_mac: local.gateway_mac.clone(),
        };
        (Some(alt(sa, danic, sanic)), Some(alt(da, sanic, danic)))
    } else {
        (None, None)
    };
    jobs[sh].qps.push(QpSpec {
        qpn: c.src_qpn,
        nic: sn,
        peer_qpn: c.dst_qpn,
        peer_ip: dnic.ip,
        next_hop_mac: snic.gateway_mac.clone(),
        send: Some(SendSpec {
            psn,
            remote_va: STAGING_VA,
            rkey,
            len: 0,
            seed: 0,
            message_bytes: DEFAULT_MESSAGE_BYTES,
            window_packets: opts.window_packets,
            retransmit_timeout_ns: opts.retransmit_timeout_ns,
        }),
        recv: None,
        label: label.clone(),
        alt: salt,
    });
    jobs[dh].qps.push(QpSpec {
        qpn: c.dst_qpn,
        nic: dn,
        peer_qpn: c.src_qpn,
        peer_ip: snic.ip,
        next_hop_mac: dnic.gateway_mac.clone(),
        send: None,
        recv: Some(RecvSpec { psn, va: STAGING_VA, rkey, len: c.staging_bytes, expect_seed: None }),
        label,
        alt: dalt,
    });
    Ok(())
}

/// Transfer `id`, `t`, into the jobs: a local transfer on its rank's host, else a send on the
/// source's host and a receive on the destination's over connection `conn` at its staging
/// offset.
fn add_transfer(
    jobs: &mut [Job],
    id: usize,
    t: &Transfer,
    conn: Option<(&Conn, u64)>,
    place: impl Fn(u32) -> Result<(usize, usize), BuildError>,
) -> Result<(), BuildError> {
    let bytes = |r: &std::ops::Range<usize>| (r.start as u64 * ELEM, r.len() as u64 * ELEM);
    let (src_off, len) = bytes(&t.src);
    let (dst_off, _) = bytes(&t.dst);
    let op = match t.op {
        Op::Sum => CollOp::Sum,
        Op::Copy => CollOp::Copy,
    };
    let (sh, _) = place(t.src_rank)?;
    match conn {
        None => jobs[sh].collective.as_mut().expect("set").locals.push(CollLocal {
            id,
            rank: t.src_rank,
            src_offset: src_off,
            dst_offset: dst_off,
            len,
            op,
            deps: t.deps.clone(),
            dst_rank: (t.dst_rank != t.src_rank).then_some(t.dst_rank),
            hold_ns: t.hold_ns,
            milestone: false,
        }),
        Some((c, staging)) => {
            jobs[sh].collective.as_mut().expect("set").sends.push(CollSend {
                id,
                qpn: c.src_qpn,
                rank: t.src_rank,
                src_offset: src_off,
                len,
                remote_va: STAGING_VA + staging,
                deps: t.deps.clone(),
            });
            let (dh, _) = place(t.dst_rank)?;
            jobs[dh].collective.as_mut().expect("set").recvs.push(CollRecv {
                id,
                qpn: c.dst_qpn,
                rank: t.dst_rank,
                staging_offset: staging,
                dst_offset: dst_off,
                len,
                op,
            });
        }
    }
    Ok(())
}

/// Ring AllReduce steps for a person: "RS step s: rank r → r+1 chunk c" lines.
pub fn describe(t: &Transfer) -> String {
    let phase = match t.phase {
        Phase::ReduceScatter => "reduce-scatter",
        Phase::AllGather => "all-gather",
        Phase::Incast => "incast",
        Phase::AllToAll => "all-to-all",
        Phase::Broadcast => "broadcast",
        Phase::Compute => "compute",
        Phase::Milestone => "milestone",
    };
    format!("{phase} step {}: rank {} -> rank {} chunk {}", t.step, t.src_rank, t.dst_rank, t.chunk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::engine::Engine;
    use crate::segment::PathMtu;
    use std::collections::BTreeMap;

    fn hosts(n: usize, gpus: u32) -> Vec<HostDesc> {
        (0..n)
            .map(|h| HostDesc {
                nvlink: None,
                pxn: false,
                ports: 1,
                name: format!("host{}", h + 1),
                gpus,
                nics: (0..gpus)
                    .map(|g| HostNic {
                        name: format!("gpu{g}"),
                        mac: format!("02:00:00:00:{:02x}:{:02x}", g + 1, h + 1),
                        ip: format!("10.0.{}.{}", g + 1, h + 1).parse().unwrap(),
                        gateway_mac: format!("02:00:00:ff:{:02x}:01", g + 1),
                        line_rate_bps: 10_000_000_000,
                        classes: Default::default(),
                    })
                    .collect(),
            })
            .collect()
    }

    /// Runs every host's engine with an ideal switch in between (delivery by destination IP
    /// after 3 µs) until all finish; returns the reports.
    fn run(b: &Built) -> Vec<crate::nic::job::Report> {
        run_over(b, |_, _| Some(3_000))
    }

    /// Like [`run`], with the one-way delay of the `k`-th frame on the wire (`f`) chosen by
    /// `delay` (`None`: dropped); frames are delivered in order of arrival time.
    fn run_over(b: &Built, delay: impl FnMut(u64, &[u8]) -> Option<u64>) -> Vec<crate::nic::job::Report> {
        let (engines, now) = run_engines(b, delay);
        engines.iter().zip(&b.jobs).map(|(e, j)| e.report(&j.name, now)).collect()
    }

    /// Like [`run_over`]; frames `delay` pushes to `inject` (trimmed copies) are delivered 3 µs
    /// after they were sent in place of the originals.
    fn run_over_with(
        b: &Built,
        delay: impl FnMut(u64, &[u8]) -> Option<u64>,
        inject: &std::cell::RefCell<Vec<Vec<u8>>>,
    ) -> Vec<crate::nic::job::Report> {
        let (engines, now) = run_engines_with(b, delay, Some(inject));
        engines.iter().zip(&b.jobs).map(|(e, j)| e.report(&j.name, now)).collect()
    }

    /// The engines of [`run_over`] once all finished, and the time then.
    fn run_engines(b: &Built, delay: impl FnMut(u64, &[u8]) -> Option<u64>) -> (Vec<Engine>, u64) {
        run_engines_with(b, delay, None)
    }

    fn run_engines_with(
        b: &Built,
        mut delay: impl FnMut(u64, &[u8]) -> Option<u64>,
        inject: Option<&std::cell::RefCell<Vec<Vec<u8>>>>,
    ) -> (Vec<Engine>, u64) {
        let mut engines: Vec<Engine> =
            b.jobs.iter().map(|j| Engine::from_job(j, &vec![PathMtu::Mtu1024; j.nics.len()], 0).unwrap()).collect();
        let addr: Vec<(IpAddr, usize, usize)> = b
            .jobs
            .iter()
            .enumerate()
            .flat_map(|(h, j)| j.nics.iter().enumerate().map(move |(k, n)| (n.ip, h, k)))
            .collect();
        // (arrival time, sequence number) -> (host, nic, frame)
        let mut wire: BTreeMap<(u64, u64), (usize, usize, Vec<u8>)> = BTreeMap::new();
        let mut seq = 0u64;
        let mut buf = vec![0u8; 9000];
        let mut now = 0u64;
        for _ in 0..5_000_000 {
            if engines.iter().all(|e| e.finished()) {
                break;
            }
            for (h, e) in engines.iter_mut().enumerate() {
                e.poll(now);
                for k in 0..e.nic_count() {
                    while let Some(len) = e.next_tx(k, &mut buf, now) {
                        let f = &buf[..len];
                        let dst: IpAddr = std::net::Ipv4Addr::new(f[30], f[31], f[32], f[33]).into();
                        let &(_, dh, dk) =
                            addr.iter().find(|a| a.0 == dst).unwrap_or_else(|| panic!("host {h}: no route to {dst}"));
                        if let Some(d) = delay(seq, f) {
                            wire.insert((now + d, seq), (dh, dk, f.to_vec()));
                        }
                        seq += 1;
                        for t in inject.map(|v| std::mem::take(&mut *v.borrow_mut())).into_iter().flatten() {
                            wire.insert((now + 3_000, seq), (dh, dk, t));
                            seq += 1;
                        }
                    }
                }
            }
            while let Some(e) = wire.first_entry().filter(|e| e.key().0 <= now) {
                let (dh, dk, f) = e.remove();
                engines[dh].on_frame(dk, &f, now);
            }
            let next =
                engines.iter_mut().filter_map(|e| e.next_deadline(now)).chain(wire.keys().next().map(|k| k.0)).min();
            now = next.unwrap_or(now + 1_000).clamp(now + 1, now + 1_000_000);
        }
        assert!(engines.iter().all(|e| e.finished()), "collective stalled at {now} ns");
        (engines, now)
    }

    /// Totals over every QP of the reports: (retransmitted, NAKs sent, out-of-order arrivals).
    fn totals(reports: &[crate::nic::job::Report]) -> (u64, u64, u64) {
        let qps = || reports.iter().flat_map(|r| r.qps.iter());
        (
            qps().map(|q| q.retransmitted_packets).sum(),
            qps().map(|q| q.naks_sent).sum(),
            qps().map(|q| q.out_of_order).sum(),
        )
    }

    fn all_verified(reports: &[crate::nic::job::Report]) -> bool {
        reports.iter().all(|r| r.ok && r.ranks.iter().all(|k| k.verified == Some(true)))
    }

    /// A data frame (RDMA WRITE, BTH opcode 0x06..=0x0a after Ethernet 14 + IPv4 20 + UDP 8).
    fn is_data(f: &[u8]) -> bool {
        f.len() > 42 && (0x06..=0x0a).contains(&f[42])
    }

    /// Every 5th data frame takes a path 20 µs longer, so the next ~20 frames overtake it.
    fn sprayed(k: u64, f: &[u8]) -> Option<u64> {
        Some(if is_data(f) && k.is_multiple_of(5) { 23_000 } else { 3_000 })
    }

    #[test]
    fn reordered_allreduce_needs_no_retransmission_in_write_only_mode_only() {
        let opts = |segment| BuildOptions { segment, ..Default::default() };
        let b = build(Kind::AllReduce, &hosts(2, 2), 400_000, &opts(SegmentMode::WriteOnlyPerPacket)).unwrap();
        assert!(b.jobs.iter().all(|j| j.nics.iter().all(|n| n.write_only)));
        let wo = run_over(&b, sprayed);
        let (retx, naks, ooo) = totals(&wo);
        assert!(all_verified(&wo), "{wo:#?}");
        assert!(ooo > 0, "frames were reordered");
        assert_eq!((retx, naks), (0, 0), "Write-Only: reordering alone costs nothing ({ooo} out of order)");

        let b = build(Kind::AllReduce, &hosts(2, 2), 400_000, &opts(SegmentMode::FirstMiddleLast)).unwrap();
        let fml = run_over(&b, sprayed);
        let (retx, naks, ooo) = totals(&fml);
        assert!(all_verified(&fml), "{fml:#?}");
        assert!(
            ooo > 0 && naks > 0 && retx > 0,
            "First/Middle/Last: go-back-N on reordering ({retx} retx, {naks} NAKs, {ooo} out of order)"
        );
    }

    /// A UET data frame: UDP to 4793 (Ethernet 14 + IPv4 20: port at 36) and a RUD or ROD
    /// request (PDS type 2 or 3 in the top 5 bits of byte 42).
    fn is_uet_data(f: &[u8]) -> bool {
        f.len() > 42 && f[36..38] == [0x12, 0xb9] && matches!(f[42] >> 3, 2 | 3)
    }

    /// `f` as a trimming switch leaves it (SAI: cut to 128 bytes, IPv4 total length and
    /// header checksum fixed; the UDP length fixed too, its checksum 0).
    fn trim(f: &[u8]) -> Vec<u8> {
        let mut t = f[..128].to_vec();
        fix_lengths(&mut t);
        t
    }

    /// An IPv4/UDP frame cut short: its IP total length and header checksum (etherparse), its
    /// UDP length and a zero UDP checksum made to fit what is left.
    fn fix_lengths(f: &mut [u8]) {
        let ip = (f.len() - 14) as u16;
        let mut h = etherparse::Ipv4Header::from_slice(&f[14..34]).unwrap().0;
        h.total_len = ip;
        h.header_checksum = h.calc_header_checksum();
        f[14..34].copy_from_slice(&h.to_bytes());
        f[38..40].copy_from_slice(&(ip - 20).to_be_bytes());
        f[40..42].fill(0);
    }

    /// Runs `b` with every 5th data frame 20 µs late (spraying) and every `trim_every`-th data
    /// frame trimmed (0: none) or, with `drop_nth`, that one data frame lost.
    fn run_uet(b: &Built, trim_every: u64, drop_nth: Option<u64>) -> (Vec<crate::nic::job::Report>, u64) {
        let (mut data, mut trims) = (0u64, 0u64);
        let trimmed: std::cell::RefCell<Vec<Vec<u8>>> = Default::default();
        let reports = {
            let delay = |k: u64, f: &[u8]| -> Option<u64> {
                if !is_uet_data(f) {
                    return Some(3_000);
                }
                data += 1;
                if drop_nth == Some(data) {
                    return None;
                }
                if trim_every > 0 && data.is_multiple_of(trim_every) && f.len() > 128 {
                    trims += 1;
                    trimmed.borrow_mut().push(trim(f));
                    return None;
                }
                Some(if k.is_multiple_of(5) { 23_000 } else { 3_000 })
            };
            run_over_with(b, delay, &trimmed)
        };
        (reports, trims)
    }

    #[test]
    fn every_collective_runs_verified_over_uet_with_spraying_and_trimming() {
        let opts = BuildOptions {
            uet: Some(UetOptions {
                spray: true,
                trim_dscp: None,
                dscp: 24,
                priority: 3,
                ip_protocol: None,
                ordered: false,
            }),
            ..Default::default()
        };
        for kind in [Kind::AllReduce, Kind::AllToAll, Kind::Incast, Kind::Broadcast] {
            let b = build(kind, &hosts(3, 2), 300_000, &opts).unwrap();
            assert!(b.jobs.iter().all(|j| j.nics.iter().all(|n| n.uet.is_some() && !n.dcqcn)));
            let (r, trims) = run_uet(&b, 20, None);
            assert!(all_verified(&r), "{kind:?}: {r:#?}");
            let pdcs: Vec<_> = r.iter().flat_map(|x| x.qps.iter()).filter_map(|q| q.pdc.clone()).collect();
            let sum = |f: fn(&crate::nic::job::PdcReport) -> u64| pdcs.iter().map(f).sum::<u64>();
            assert!(trims > 0, "{kind:?}");
            assert_eq!(sum(|p| p.trimmed_received), trims, "{kind:?}: every trimmed packet was seen as trimmed");
            assert_eq!(sum(|p| p.nacks_trimmed), trims, "{kind:?}: and NACKed");
            assert_eq!(sum(|p| p.retransmitted_on_nack), trims, "{kind:?}: and sent again");
            assert_eq!(sum(|p| p.retransmitted_on_timeout), 0, "{kind:?}: without a timeout");
            let (_, _, ooo) = totals(&r);
            assert!(ooo > 0, "{kind:?}: sprayed packets arrived out of order");
            assert!(pdcs.iter().filter(|p| p.entropies > 0).all(|p| p.entropies > 8), "{kind:?}: {pdcs:?}");
        }
    }

    #[test]
    fn uet_runs_natively_over_ip_with_the_entropy_header() {
        let u =
            UetOptions { spray: true, trim_dscp: None, dscp: 26, priority: 0, ip_protocol: Some(253), ordered: false };
        let b =
            build(Kind::AllToAll, &hosts(3, 2), 120_000, &BuildOptions { uet: Some(u), ..Default::default() }).unwrap();
        let mut entropies = std::collections::HashSet::new();
        let r = run_over(&b, |k, f| {
            // IPv4 protocol 253, DSCP 26; the entropy header's first 16 bits after the IP header.
            assert_eq!((f[23], f[15] >> 2), (253, 26), "a native UET frame");
            entropies.insert(u16::from_be_bytes([f[34], f[35]]));
            Some(if k.is_multiple_of(5) { 23_000 } else { 3_000 })
        });
        assert!(all_verified(&r), "{r:#?}");
        assert!(totals(&r).2 > 0, "sprayed packets arrived out of order");
        assert!(entropies.len() > 100, "{} entropy values", entropies.len());
    }

    /// Malformed and stray UET frames arriving with a job's traffic are counted and dropped;
    /// the job is not disturbed. Derived from the job's first data frame (UDP 4793, IPv4): cut
    /// inside the PDS header, cut inside the SES header, an unassigned PDS type, a request for a
    /// QP the host does not have, an ACK and a NACK for PDCs it does not have.
    #[test]
    fn malformed_uet_frames_are_counted_and_dropped() {
        let u = UetOptions { spray: true, trim_dscp: None, dscp: 26, priority: 0, ip_protocol: None, ordered: false };
        let b =
            build(Kind::Incast, &hosts(3, 1), 100_000, &BuildOptions { uet: Some(u), ..Default::default() }).unwrap();
        let bad: std::cell::RefCell<Vec<Vec<u8>>> = Default::default();
        let mut made = false;
        let reports = run_over_with(
            &b,
            |_, f| {
                if !made && is_uet_data(f) {
                    made = true;
                    let mut v = Vec::new();
                    for cut in [42 + 6, 42 + 12 + 20] {
                        let mut x = f[..cut].to_vec();
                        fix_lengths(&mut x);
                        v.push(x);
                    }
                    let mut x = f.to_vec();
                    x[42] = (x[42] & 0x07) | (31 << 3);
                    v.push(x);
                    let mut x = f.to_vec();
                    // SES memory key (bytes 24-31 of the SES header): QP 0xabcdef is not here.
                    x[42 + 12 + 24..42 + 12 + 28].copy_from_slice(&0xabcdefu32.to_be_bytes());
                    v.push(x);
                    for (t, len) in [(8u8, 32usize), (10, 16)] {
                        // An ACK_CC and a NACK to PDC 999.
                        let mut x = f[..42 + len].to_vec();
                        x[42..44].copy_from_slice(&(u16::from(t) << 11).to_be_bytes());
                        x[52..54].copy_from_slice(&999u16.to_be_bytes());
                        fix_lengths(&mut x);
                        v.push(x);
                    }
                    *bad.borrow_mut() = v;
                }
                Some(3_000)
            },
            &bad,
        );
        assert!(all_verified(&reports), "{reports:#?}");
        let nics = || reports.iter().flat_map(|r| r.nics.iter());
        let sum = |f: fn(&crate::nic::job::NicReport) -> u64| nics().map(f).sum::<u64>();
        assert_eq!(sum(|n| n.rx_malformed), 2, "the two cut frames");
        assert_eq!(sum(|n| n.rx_ignored), 1, "the unassigned PDS type");
        assert_eq!(sum(|n| n.rx_unknown_qp), 3, "the unknown QP and the two unknown PDCs");
    }

    /// ROD over a link that trims every 20th data frame: each trim is NACKed (TRIMMED) and its
    /// sender goes back to it; the packets behind it arrive past the hole and are dropped (a hole
    /// not NACKed yet gets one ROD_OOO NACK); every collective still completes verified, on one
    /// path per PDC, without a timeout.
    #[test]
    fn rod_goes_back_over_trims_and_every_collective_completes_in_order() {
        let u = UetOptions { spray: true, trim_dscp: None, dscp: 26, priority: 0, ip_protocol: None, ordered: true };
        for kind in [Kind::AllReduce, Kind::AllToAll, Kind::Incast, Kind::Broadcast] {
            let b = build(kind, &hosts(3, 2), 240_000, &BuildOptions { uet: Some(u), ..Default::default() }).unwrap();
            let mut data = 0u64;
            let trimmed: std::cell::RefCell<Vec<Vec<u8>>> = Default::default();
            let r = run_over_with(
                &b,
                |_, f| {
                    if is_uet_data(f) {
                        assert_eq!(f[42] >> 3, 3, "ROD requests");
                        data += 1;
                        if data.is_multiple_of(20) && f.len() > 128 {
                            trimmed.borrow_mut().push(trim(f));
                            return None;
                        }
                    }
                    Some(3_000)
                },
                &trimmed,
            );
            assert!(all_verified(&r), "{kind:?}: {r:#?}");
            let pdcs: Vec<_> = r.iter().flat_map(|x| x.qps.iter()).filter_map(|q| q.pdc.clone()).collect();
            let sum = |f: fn(&crate::nic::job::PdcReport) -> u64| pdcs.iter().map(f).sum::<u64>();
            assert!(sum(|p| p.trimmed_received) > 0, "{kind:?}");
            assert_eq!(sum(|p| p.retransmitted_on_timeout), 0, "{kind:?}: {pdcs:?}");
            assert!(sum(|p| p.dropped) > 0, "{kind:?}: packets past a hole are dropped");
            assert!(
                sum(|p| p.retransmitted_on_nack) > sum(|p| p.trimmed_received),
                "{kind:?}: the senders go back, sending what followed a trim again too: {pdcs:?}"
            );
            assert!(pdcs.iter().all(|p| p.entropies <= 1), "{kind:?}: one path per ROD PDC");
        }
    }

    #[test]
    fn a_lost_uet_packet_is_sent_again_after_the_timeout() {
        let opts = BuildOptions {
            uet: Some(UetOptions {
                spray: false,
                trim_dscp: None,
                dscp: 24,
                priority: 3,
                ip_protocol: None,
                ordered: false,
            }),
            ..Default::default()
        };
        let b = build(Kind::Incast, &hosts(3, 1), 200_000, &opts).unwrap();
        let (r, _) = run_uet(&b, 0, Some(30));
        assert!(all_verified(&r), "{r:#?}");
        let pdcs: Vec<_> = r.iter().flat_map(|x| x.qps.iter()).filter_map(|q| q.pdc.clone()).collect();
        assert_eq!(pdcs.iter().map(|p| p.retransmitted_on_timeout).sum::<u64>(), 1);
        assert_eq!(pdcs.iter().map(|p| p.nacks_trimmed).sum::<u64>(), 0);
        assert!(pdcs.iter().all(|p| p.entropies <= 1), "one entropy per PDC without spraying: {pdcs:?}");
    }

    #[test]
    fn host1_serves_metrics_on_the_base_port() {
        let opts = BuildOptions { metrics_port_base: Some(9700), ..Default::default() };
        let b = build(Kind::Incast, &hosts(3, 1), 4096, &opts).unwrap();
        let ports: Vec<(String, Option<u16>)> =
            b.jobs.iter().map(|j| (j.name.clone(), j.metrics_listen.map(|l| l.port()))).collect();
        assert!(ports[0].0.ends_with("host1") && ports[2].0.ends_with("host3"), "{ports:?}");
        assert_eq!(ports.iter().map(|p| p.1).collect::<Vec<_>>(), vec![Some(9700), Some(9701), Some(9702)]);
    }

    #[test]
    fn a_loss_under_reordering_in_write_only_mode_is_naked_after_the_reordering_window() {
        let opts = BuildOptions { segment: SegmentMode::WriteOnlyPerPacket, ..Default::default() };
        let b = build(Kind::Incast, &hosts(3, 1), 200_000, &opts).unwrap();
        let mut data = 0;
        let reports = run_over(&b, |k, f| {
            if is_data(f) {
                data += 1;
                if data == 30 {
                    return None;
                }
            }
            sprayed(k, f)
        });
        let (retx, naks, ooo) = totals(&reports);
        assert!(all_verified(&reports), "{reports:#?}");
        assert!(ooo > 0 && naks >= 1 && retx >= 1, "{retx} retx, {naks} NAKs, {ooo} out of order");
        let timeouts: u64 = reports.iter().flat_map(|r| r.qps.iter()).map(|q| q.timeouts).sum();
        assert_eq!(timeouts, 0, "the hole's NAK repaired the loss before the requester timed out");
    }

    fn check(kind: Kind, nhosts: usize, gpus: u32, bytes: u64) {
        let b = build(kind, &hosts(nhosts, gpus), bytes, &BuildOptions::default()).unwrap();
        let reports = run(&b);
        let ranks: usize = reports.iter().map(|r| r.ranks.len()).sum();
        assert_eq!(ranks, nhosts * gpus as usize);
        for r in &reports {
            assert!(r.ok, "{kind:?}: {r:#?}");
            assert!(r.ranks.iter().all(|k| k.verified == Some(true)), "{kind:?}: {:?}", r.ranks);
        }
    }

    /// With NVLink, transfers between two GPUs of a host take it: no QP joins two of its ranks,
    /// every collective still verifies, and the bytes it moved are the intra-host transfers'.
    #[test]
    fn nvlink_carries_the_transfers_inside_a_host() {
        let nvlink = crate::nic::job::NvlinkSpec { bandwidth_bps: 100_000_000_000, latency_ns: 2_000 };
        for (kind, bytes) in [(Kind::AllToAll, 64_000u64), (Kind::AllReduce, 40_000), (Kind::Broadcast, 8_000)] {
            let mut hs = hosts(2, 4);
            for h in &mut hs {
                h.nvlink = Some(nvlink);
            }
            let b = build(kind, &hs, bytes, &BuildOptions::default()).unwrap();
            let host_of = |r: u32| r / 4;
            assert!(b.conns.iter().all(|c| host_of(c.src_rank) != host_of(c.dst_rank)), "{kind:?}: {:?}", b.conns);
            let intra: u64 = b
                .schedule
                .transfers
                .iter()
                .filter(|t| t.src_rank != t.dst_rank && host_of(t.src_rank) == host_of(t.dst_rank))
                .map(|t| t.elems() as u64 * ELEM)
                .sum();
            assert!(intra > 0, "{kind:?} has transfers inside a host");
            let reports = run(&b);
            assert!(all_verified(&reports), "{kind:?}: {reports:#?}");
            assert_eq!(reports.iter().map(|r| r.nvlink_bytes).sum::<u64>(), intra, "{kind:?}");
        }
    }

    /// PXN: with a NIC per GPU and NVLink, no connection joins two rails (local indices), yet
    /// every collective verifies: cross-rail sends cross NVLink to the GPU on the destination's
    /// rail first.
    #[test]
    fn pxn_keeps_every_connection_on_one_rail() {
        let nvlink = crate::nic::job::NvlinkSpec { bandwidth_bps: 100_000_000_000, latency_ns: 1_000 };
        for (kind, bytes) in [(Kind::AllToAll, 96_000u64), (Kind::AllReduce, 48_000), (Kind::Broadcast, 12_000)] {
            let mut hs = hosts(3, 4);
            for h in &mut hs {
                (h.nvlink, h.pxn) = (Some(nvlink), true);
            }
            let b = build(kind, &hs, bytes, &BuildOptions::default()).unwrap();
            assert!(!b.conns.is_empty(), "{kind:?}");
            for c in &b.conns {
                assert_eq!(c.src_rank % 4, c.dst_rank % 4, "{kind:?}: a connection across rails: {c:?}");
            }
            let reports = run(&b);
            assert!(all_verified(&reports), "{kind:?}: {reports:#?}");
            assert!(reports.iter().map(|r| r.nvlink_bytes).sum::<u64>() > 0, "{kind:?}");
        }
        // PXN without NVLink is refused.
        let mut hs = hosts(2, 2);
        hs[0].pxn = true;
        let e = build(Kind::AllToAll, &hs, 1024, &BuildOptions::default()).unwrap_err();
        assert!(e.to_string().contains("PXN needs NVLink"), "{e}");
    }

    /// Dual-port NICs: a GPU's connections alternate between its two ports, both ends on the
    /// same port index, and the collectives verify.
    #[test]
    fn dual_port_nics_alternate_a_gpus_connections_between_its_ports() {
        for kind in [Kind::AllToAll, Kind::AllReduce] {
            let mut hs = hosts(2, 4);
            for h in &mut hs {
                h.ports = 2;
                // Port p of GPU g: NIC 2g + p, its own address.
                h.nics = h
                    .nics
                    .iter()
                    .flat_map(|n| {
                        (0..2u8).map(move |p| {
                            let mut n = n.clone();
                            n.name = format!("{}p{p}", n.name);
                            if let IpAddr::V4(a) = n.ip {
                                let o = a.octets();
                                n.ip = std::net::Ipv4Addr::new(o[0], o[1] + 100 * p, o[2], o[3]).into();
                            }
                            n
                        })
                    })
                    .collect();
            }
            let b = build(kind, &hs, 64_000, &BuildOptions::default()).unwrap();
            let mut per_port = BTreeMap::new();
            for j in &b.jobs {
                for q in j.qps.iter().filter(|q| q.send.is_some()) {
                    *per_port.entry((j.name.clone(), q.nic)).or_insert(0u32) += 1;
                    let local_port = q.nic % 2;
                    let (pj, peer) = b
                        .jobs
                        .iter()
                        .flat_map(|o| o.qps.iter().map(move |p| (o, p)))
                        .find(|(_, o)| o.qpn == q.peer_qpn)
                        .unwrap();
                    assert_eq!(peer.nic % 2, local_port, "{kind:?}: qp {:#x} changes port", q.qpn);
                    // The alternate path (APM): the other port at both ends.
                    let (qa, pa) = (q.alt.as_ref().unwrap(), peer.alt.as_ref().unwrap());
                    assert_eq!((qa.nic, pa.nic), (q.nic ^ 1, peer.nic ^ 1));
                    assert_eq!(qa.peer_ip, pj.nics[pa.nic].ip, "{kind:?}: qp {:#x}", q.qpn);
                    assert_eq!(pa.peer_ip, j.nics[qa.nic].ip);
                }
            }
            if kind == Kind::AllToAll {
                // 7 connections per GPU: 4 on port 0, 3 on port 1.
                assert!(per_port.values().all(|&n| n == 4 || n == 3), "{per_port:?}");
                assert_eq!(per_port.len(), 2 * 8);
            }
            assert!(all_verified(&run(&b)), "{kind:?}");
            let single = build(kind, &hosts(2, 4), 64_000, &BuildOptions::default()).unwrap();
            assert!(single.jobs.iter().flat_map(|j| &j.qps).all(|q| q.alt.is_none()), "one port: no alternate path");
        }
    }

    /// An NVLink transfer lands one serialisation (len / bandwidth) and the latency after it
    /// starts, and a GPU's transfers queue behind each other on its link.
    #[test]
    fn an_nvlink_transfer_takes_its_serialisation_and_latency() {
        // Three GPUs of one host, 1 Gbit/s NVLink, 10 µs: an all-to-all of 3 x 6000 bytes sends
        // 2000 bytes from each GPU to each other: a GPU's first lands at 16 µs + 10 µs, its second,
        // queued behind it on the GPU's link, at 32 µs + 10 µs.
        let mut hs = hosts(1, 3);
        hs[0].nvlink = Some(crate::nic::job::NvlinkSpec { bandwidth_bps: 1_000_000_000, latency_ns: 10_000 });
        let b = build(Kind::AllToAll, &hs, 6_000, &BuildOptions::default()).unwrap();
        assert!(b.conns.is_empty() && b.jobs[0].qps.is_empty());
        let mut e = Engine::from_job(&b.jobs[0], &[PathMtu::Mtu1024; 3], 0).unwrap();
        assert_eq!(e.next_deadline(0), Some(26_000));
        e.poll(26_000);
        assert!(!e.finished());
        assert_eq!(e.next_deadline(26_000), Some(42_000));
        e.poll(41_999);
        assert!(!e.finished());
        e.poll(42_000);
        assert!(e.finished());
        let r = e.report("j", 42_000);
        assert!(r.ok && r.ranks.iter().all(|k| k.verified == Some(true)), "{r:#?}");
        assert_eq!((r.nvlink_bytes, r.elapsed_ns), (12_000, 42_000));
    }

    /// A training job on two hosts of two GPUs: the reports' milestones, by id.
    fn train(
        compute_ns: u64,
        rings: crate::training::RingOrder,
    ) -> (crate::training::Training, Vec<crate::nic::job::Report>) {
        use crate::training::{BroadcastAlgo, TrainingSpec};
        let spec = TrainingSpec {
            layout: RankLayout::new(2, 2).unwrap(),
            params: 16_384,
            iterations: 2,
            bucket: 4096,
            compute_ns,
            broadcast: BroadcastAlgo::Tree,
            rings,
        };
        let (b, tr) = build_training(&spec, &hosts(2, 2), &BuildOptions::default()).unwrap();
        assert_eq!(
            b.jobs.iter().flat_map(|j| &j.collective.as_ref().unwrap().locals).filter(|l| l.milestone).count(),
            tr.milestones.len()
        );
        (tr, run(&b))
    }

    #[test]
    fn a_training_job_verifies_holds_its_compute_gaps_and_overlaps_buckets_with_compute() {
        use crate::training::{Mark, RingOrder};
        for rings in [RingOrder::Ranks, RingOrder::RailAligned] {
            let (tr, reports) = train(400_000, rings);
            assert!(all_verified(&reports), "{rings:?}");
            let at: BTreeMap<usize, u64> =
                reports.iter().flat_map(|r| r.milestones.iter().map(|m| (m.id, m.at_ns))).collect();
            assert_eq!(at.len(), 4 * (1 + 2 * 4 + 2), "every milestone of every rank, once");
            // Each compute hold takes its quarter of the gap, to the ns (the engines' clock is
            // the test's).
            for m in &tr.milestones {
                if let Mark::BucketReady { iteration, bucket } = m.mark {
                    let prev = tr
                        .milestones
                        .iter()
                        .find(|p| {
                            p.rank == m.rank
                                && match (bucket, p.mark) {
                                    (0, Mark::BroadcastDone) => iteration == 1,
                                    (0, Mark::IterationDone { iteration: i }) => i + 1 == iteration,
                                    (b, Mark::BucketReady { iteration: i, bucket: pb }) => {
                                        i == iteration && pb + 1 == b
                                    }
                                    _ => false,
                                }
                        })
                        .unwrap();
                    assert_eq!(at[&m.id] - at[&prev.id], 100_000, "{m:?}");
                }
            }
            let (bcast, its) = tr.times(|id| at.get(&id).copied()).unwrap();
            assert!(bcast > 0 && its.len() == 2);
            for it in &its {
                assert_eq!(it.compute_ns, 400_000);
                assert!(it.exposed_ns > 0 && it.exposed_ns < it.comm_ns, "{it:?}");
                assert!(it.end_ns - it.start_ns >= it.compute_ns + it.exposed_ns);
            }
            // Counters grow along a host's milestones.
            for r in &reports {
                assert!(r.milestones.windows(2).all(|w| w[0].tx_bytes <= w[1].tx_bytes && w[0].at_ns <= w[1].at_ns));
                assert!(r.milestones.last().unwrap().tx_bytes > 0);
            }
        }
        // Without compute to hide behind, all of the AllReduce is exposed; with a long gap only
        // the last bucket's is.
        let exposed = |c| {
            let (tr, reports) = train(c, RingOrder::Ranks);
            let at: BTreeMap<usize, u64> =
                reports.iter().flat_map(|r| r.milestones.iter().map(|m| (m.id, m.at_ns))).collect();
            tr.times(|id| at.get(&id).copied()).unwrap().1[1].exposed_ns
        };
        let (none, hidden) = (exposed(0), exposed(4_000_000));
        assert!(hidden * 2 < none, "exposed {hidden} ns with a 4 ms gap, {none} ns without");
    }

    #[test]
    fn ring_allreduce_over_emulated_nics_sums_every_rank() {
        check(Kind::AllReduce, 2, 2, 40_000);
        check(Kind::AllReduce, 3, 1, 12_000 + 4); // uneven chunks
    }

    #[test]
    fn verification_finds_a_single_wrong_byte_in_any_rank() {
        // 2 hosts × 2 GPUs, 300 KiB per rank: several verification chunks per rank.
        let b = build(Kind::AllReduce, &hosts(2, 2), 300 * 1024, &BuildOptions::default()).unwrap();
        let (mut engines, now) = run_engines(&b, |_, _| Some(3_000));
        assert!(engines.iter().zip(&b.jobs).all(|(e, j)| e.report(&j.name, now).ok));
        for (rank, pos) in [(0u32, 0usize), (1, 150_001), (2, 300 * 1024 - 1), (3, 65_536 * 3 + 2)] {
            let h = (rank / 2) as usize;
            let buf = engines[h].rank_buffer_mut(rank).unwrap();
            buf[pos] ^= 0x10;
            let r = engines[h].report("j", now);
            let k = r.ranks.iter().find(|k| k.rank == rank).unwrap();
            assert_eq!((k.verified, k.first_mismatch), (Some(false), Some(pos as u64 & !3)), "rank {rank} byte {pos}");
            assert!(!r.ok);
            assert!(
                r.ranks.iter().filter(|k| k.rank != rank).all(|k| k.verified == Some(true)),
                "only rank {rank} is wrong: {:?}",
                r.ranks
            );
            engines[h].rank_buffer_mut(rank).unwrap()[pos] ^= 0x10;
            assert!(engines[h].report("j", now).ok, "restored");
        }
        // Two wrong words: the first is reported.
        let buf = engines[1].rank_buffer_mut(3).unwrap();
        buf[200_000] ^= 1;
        buf[100_000] ^= 1;
        let r = engines[1].report("j", now);
        assert_eq!(r.ranks.iter().find(|k| k.rank == 3).unwrap().first_mismatch, Some(100_000));
    }

    #[test]
    fn staging_rings_reuse_slots_and_the_allreduce_still_verifies() {
        assert_eq!(staging_ring_bytes(1 << 20, 1 << 20, 128), 1 << 20, "one transfer: its own size");
        assert_eq!(staging_ring_bytes(100 << 20, 256 << 10, 128), 2 * ((256 << 10) + 128 * 4096));
        // 16 ranks, 1 MiB each: 30 transfers of 64 KiB per connection; window 4 packets
        // gives a 160 KiB ring, so slots are reused about every two transfers.
        let opts = BuildOptions { window_packets: 4, ..Default::default() };
        let b = build(Kind::AllReduce, &hosts(4, 4), 1 << 20, &opts).unwrap();
        let c = &b.conns[0];
        assert_eq!((c.bytes, c.staging_bytes), (30 * (64 << 10), 160 << 10));
        for j in &b.jobs {
            let coll = j.collective.as_ref().unwrap();
            for q in j.qps.iter().filter(|q| q.recv.is_some()) {
                let region = q.recv.as_ref().unwrap().len;
                let mut slots: Vec<(u64, u64)> =
                    coll.recvs.iter().filter(|r| r.qpn == q.qpn).map(|r| (r.staging_offset, r.len)).collect();
                assert!(slots.iter().all(|&(o, l)| o + l <= region), "every slot inside the region");
                let n = slots.len();
                slots.sort();
                slots.dedup();
                assert!(slots.len() < n, "slots are reused");
            }
        }
        let reports = run(&b);
        assert!(all_verified(&reports), "{reports:#?}");
        let placed: u64 = reports.iter().flat_map(|r| r.qps.iter()).map(|q| q.bytes_placed).sum();
        assert_eq!(placed, 16 * 30 * (64 << 10), "every byte of every transfer placed");
        // Losses (go-back-N) and, in Write-Only mode, reordering: a reused slot is never
        // overwritten before its transfer was applied.
        let mut k = 0;
        let lossy = run_over(&b, |_, f| {
            k += 1;
            (!(is_data(f) && k % 97 == 0)).then_some(3_000)
        });
        assert!(all_verified(&lossy) && totals(&lossy).0 > 0, "{:?}", totals(&lossy));
        let wo = BuildOptions { window_packets: 4, segment: SegmentMode::WriteOnlyPerPacket, ..Default::default() };
        let sprayed_run = run_over(&build(Kind::AllReduce, &hosts(4, 4), 1 << 20, &wo).unwrap(), sprayed);
        assert!(all_verified(&sprayed_run) && totals(&sprayed_run).2 > 0, "{:?}", totals(&sprayed_run));
    }

    #[test]
    fn incast_alltoall_and_broadcast_produce_their_results() {
        check(Kind::Incast, 3, 1, 20_000);
        check(Kind::AllToAll, 2, 2, 16_384);
        check(Kind::Broadcast, 2, 2, 10_000);
    }

    #[test]
    fn ranks_are_numbered_like_torchrun_and_connections_follow_the_ring() {
        let b = build(Kind::AllReduce, &hosts(2, 2), 4096, &BuildOptions::default()).unwrap();
        // Rank 1 is host1/gpu1, rank 2 is host2/gpu0.
        let c = b.jobs[0].collective.as_ref().unwrap();
        assert_eq!(c.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(
            b.conns.iter().map(|c| (c.src_rank, c.dst_rank)).collect::<Vec<_>>(),
            vec![(0, 1), (1, 2), (2, 3), (3, 0)]
        );
        // Each ring connection carries 2(N−1) chunks of N chunks: 6/4 of the buffer.
        assert!(b.conns.iter().all(|c| c.bytes == 4096 * 6 / 4));
        // Rank 1 → rank 2 leaves host1 on gpu1 towards 10.0.1.2 (host2 gpu0).
        let q = b.jobs[0].qps.iter().find(|q| q.label == "rank 1 -> rank 2").unwrap();
        assert_eq!((q.nic, q.peer_ip.to_string()), (1, "10.0.1.2".to_string()));
        assert!(build(Kind::AllReduce, &hosts(2, 2), 4095, &BuildOptions::default()).is_err());
    }

    #[test]
    fn window_and_ack_timeout_options_reach_every_requester() {
        let opts = BuildOptions {
            window_packets: 77,
            retransmit_timeout_ns: 5_000_000,
            time_dilation: 8000.0,
            ..Default::default()
        };
        let b = build(Kind::AllReduce, &hosts(2, 2), 4096, &opts).unwrap();
        assert!(b.jobs.iter().all(|j| j.time_dilation == 8000.0 && j.validate().is_ok()));
        let sends: Vec<_> = b.jobs.iter().flat_map(|j| j.qps.iter()).filter_map(|q| q.send.as_ref()).collect();
        assert_eq!(sends.len(), 4);
        assert!(sends.iter().all(|s| s.window_packets == 77 && s.retransmit_timeout_ns == 5_000_000), "{sends:?}");
    }

    #[test]
    fn the_notification_point_settings_reach_every_hosts_job_file() {
        use crate::dcqcn::{CnpMode, CnpScope, NpSettings};
        let np = NpSettings { cnp: CnpMode::Deferred, scope: CnpScope::IpPair };
        let opts = BuildOptions { dcqcn_np: np, ..Default::default() };
        let b = build(Kind::AllReduce, &hosts(2, 2), 4096, &opts).unwrap();
        for j in &b.jobs {
            // hostd reads the job file: the settings survive it, as snake_case names.
            let text = serde_json::to_string(j).unwrap();
            assert!(text.contains(r#""dcqcn_np":{"cnp":"deferred","scope":"ip_pair"}"#), "{text}");
            let back: Job = serde_json::from_str(&text).unwrap();
            assert_eq!(back.dcqcn_np, np);
            assert_eq!(Engine::from_job(&back, &[PathMtu::Mtu4096; 2], 0).unwrap().cnp_pacer().settings(), np);
        }
        // A job file without them runs the paper's NP.
        let mut v: serde_json::Value = serde_json::to_value(&b.jobs[0]).unwrap();
        v.as_object_mut().unwrap().remove("dcqcn_np");
        assert_eq!(serde_json::from_value::<Job>(v).unwrap().dcqcn_np, NpSettings::default());
    }
}
