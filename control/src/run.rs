//! `rocefab run <fabric> incast|alltoall|allreduce|broadcast --size 64MiB [--segment write-only]
//! [--json]`: runs a
//! collective on a running fabric with one GPU-host emulator (`rocefab-hostd`) per host
//! namespace.
//!
//! The controller does what an NCCL bootstrap does out of band: it numbers ranks like torchrun
//! (global rank = node rank × GPUs per host + local rank; node rank = host order in the
//! topology), builds the schedule ([`gpu_host::collective::Schedule`]; ring AllReduce is
//! ReduceScatter then AllGather), picks QP numbers, PSNs, R_Keys and staging addresses for
//! every connection ([`gpu_host::nic::collective_job`]) and writes one job file per host into
//! the fabric's run directory. It starts every hostd (metrics bound on 127.0.0.1 in the root
//! namespace, then `setns` into the host), waits until all are ready, starts them together,
//! collects their reports and prints job completion time, per-QP goodput, retransmissions,
//! NAKs, out-of-order arrivals, CNPs and PFC pause time — a table, or JSON with `--json`.
//! A hostd that reported keeps its QPs up (the job's `linger_ms`) until every host has
//! reported and the controller stops them all: a peer whose final ACK was lost retransmits and
//! is answered, as by a real RC QP, instead of exhausting its retries against a host that has
//! gone.
//!
//! `--segment` picks how requesters cut their writes: `first-middle-last` (standard RC; a
//! reordered packet is a sequence error, NAK and go-back-N) or `write-only` (every packet an
//! RDMA WRITE Only with its own RETH, and responders place out-of-order arrivals: the mode
//! packet spraying needs, book ch. 12 Fig. 12-7; see `gpu_host::receiver`).
//!
//! Emulated time: the fabric's `time_dilation` D goes into every job; the hosts report in
//! emulated time, and so does this report (its header says so, the JSON carries
//! `time_dilation`). When the measurements say the machine rather than the model limited the
//! run ([`crate::bottleneck`]: CPUs saturated while links sat below rate, or senders slow with
//! nothing in the model holding them back), the run warns on stderr and in `warnings`.
//!
//! Every NIC marks and honours the classes its host's NIC agent (`rocefab-nicd`) negotiated
//! with the switch port by DCBX ([`gpu_host::nic::agent::classes_from`] on the agent's
//! `GET /lldp`); without an answering agent, the topology's `lldp.nic` classes.
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use gpu_host::nic::agent::{classes_from, AgentConfig};
use gpu_host::nic::collective_job::{self, BuildOptions, HostDesc, HostNic, Kind};
use gpu_host::nic::engine::path_mtu_for_link;
use dataplane_common::time::Dilation;
use gpu_host::nic::job::{default_retransmit_timeout_ns, window_packets_for, NicClasses, Report, DEFAULT_WINDOW_PACKETS};
use gpu_host::segment::SegmentMode;
use lldp_agent::NodeReport;
use serde::Serialize;

use crate::bottleneck;
use crate::fabric::scrape;
use crate::plan::{compile, HostPlan};
use crate::rundir::{self, State};
use crate::topology::Topology;

/// Which collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Collective {
    /// N:1 incast: every rank writes its buffer to rank 0, which sums them.
    Incast,
    /// All-to-all personalised exchange.
    Alltoall,
    /// Ring AllReduce (ReduceScatter then AllGather).
    Allreduce,
    /// Chain broadcast from rank 0.
    Broadcast,
}

impl Collective {
    fn kind(self) -> Kind {
        match self {
            Collective::Incast => Kind::Incast,
            Collective::Alltoall => Kind::AllToAll,
            Collective::Allreduce => Kind::AllReduce,
            Collective::Broadcast => Kind::Broadcast,
        }
    }
}

/// How requesters cut RDMA WRITEs into packets (`--segment`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Segment {
    /// First/Middle/Last (standard RC): reordering is a sequence error, NAK and go-back-N.
    #[default]
    FirstMiddleLast,
    /// Every packet a WRITE Only with its own RETH; responders place out-of-order arrivals.
    WriteOnly,
}

impl Segment {
    fn mode(self) -> SegmentMode {
        match self {
            Segment::FirstMiddleLast => SegmentMode::FirstMiddleLast,
            Segment::WriteOnly => SegmentMode::WriteOnlyPerPacket,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Segment::FirstMiddleLast => "first-middle-last",
            Segment::WriteOnly => "write-only",
        }
    }
}

/// Arguments of `rocefab run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Name of a running fabric (`rocefab up`).
    pub fabric: String,
    /// The collective.
    #[arg(value_enum)]
    pub collective: Collective,
    /// Input bytes per rank: a number with an optional KiB/MiB/GiB (or K/M/G, KB/MB/GB) suffix.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub size: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// How requesters cut their writes: first-middle-last (standard RC) or write-only (every
    /// packet a WRITE Only with its RETH; responders place out-of-order arrivals, for spraying).
    #[arg(long, value_enum, default_value_t = Segment::FirstMiddleLast)]
    pub segment: Segment,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// First port of the hosts' Prometheus metrics while the job runs: host1 serves on
    /// 127.0.0.1:BASE, the n-th host of the fabric (host<n>) on BASE + n - 1; the report lists
    /// every URL.
    #[arg(long, default_value_t = 9700)]
    pub metrics_port_base: u16,
    /// Pattern seed of rank 0's data (rank r uses seed + r).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Requester window of every QP, in packets (go-back-N: also the most a loss resends).
    /// Default: 128 KiB of payload at the fabric's path MTU (128 packets at MTU 1500).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub window_packets: Option<u32>,
    /// Local ACK timeout of every requester, in emulated milliseconds. Default: 100 ms of wall
    /// clock but at least 1 ms emulated, i.e. max(100 ms, 1 ms × time_dilation) on the wall clock.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub retransmit_timeout_ms: Option<u64>,
    /// Sample the switches and hosts while the job runs and draw the DCQCN timeline (book
    /// Fig. 11-7) against emulated time: FILE.svg the plot, FILE.json the samples and series;
    /// may be given twice.
    #[arg(long, value_name = "FILE", value_parser = crate::timeline::parse_output)]
    pub timeline: Vec<PathBuf>,
    /// The timeline's bottleneck queue, as switch:port (default: the egress queue with the
    /// highest peak depth).
    #[arg(long, value_name = "SWITCH:PORT")]
    pub timeline_port: Option<String>,
    /// Wall-clock sampling interval of --timeline, ms.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub timeline_interval_ms: u64,
}

/// Parses `64MiB`, `4096`, `512KB` (512,000) into bytes, as topology files do
/// ([`rocefab_units::parse_bytes`]); zero is refused.
pub fn parse_size(s: &str) -> Result<u64, String> {
    match rocefab_units::parse_bytes(s) {
        Ok(0) => Err(format!("size {s:?} is zero")),
        r => r.map_err(|e| format!("size {e}")),
    }
}

/// One QP's line in the report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct QpLine {
    pub host: String,
    pub nic: String,
    pub qpn: u32,
    pub label: String,
    pub bytes: u64,
    pub goodput_bps: Option<f64>,
    pub retransmitted_packets: u64,
    pub timeouts: u64,
    pub naks_received: u64,
    /// The peer responder's count of this connection's packets that arrived ahead of the
    /// expected PSN (placed in Write-Only mode, dropped and NAKed otherwise).
    pub out_of_order_at_peer: u64,
    pub cnps_received: u64,
    pub cnps_sent_by_peer: u64,
}

/// One host NIC's line.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NicLine {
    pub host: String,
    pub nic: String,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    pub pfc_frames_received: u64,
    /// Time the NIC's RoCEv2 data priority was paused, emulated ns.
    pub pfc_paused_ns: u64,
    /// The PFC priority and DSCP of its RoCEv2 data (negotiated by DCBX).
    pub data_priority: u8,
    pub data_dscp: u8,
}

/// The job report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunReport {
    pub fabric: String,
    pub collective: String,
    pub size_bytes: u64,
    pub ranks: u32,
    pub hosts: usize,
    /// Every rank finished with its expected result.
    pub ok: bool,
    pub verified_ranks: u32,
    /// Job completion time: the slowest host's time from the common start to its last
    /// transfer, emulated ns.
    pub completion_ns: u64,
    /// `first-middle-last` or `write-only` (`--segment`).
    pub segment: String,
    pub retransmitted_packets: u64,
    /// PSN sequence error NAKs sent by the responders.
    pub naks_sent: u64,
    /// Request packets that arrived ahead of the expected PSN, over every responder QP.
    pub out_of_order_packets: u64,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    pub pfc_paused_ns: u64,
    pub metrics: Vec<String>,
    pub qps: Vec<QpLine>,
    pub nics: Vec<NicLine>,
    pub errors: Vec<String>,
    /// Time dilation D of the fabric: every time and rate above is emulated (wall / D).
    pub time_dilation: f64,
    /// Signs that the machine, not the model, limited the run ([`crate::bottleneck`]).
    pub warnings: Vec<String>,
}

/// Builds the report from the hosts' reports (`(host name, report)`).
pub fn summarize(fabric: &str, kind: Kind, segment: Segment, size: u64, ranks: u32, hosts: &[(String, Report)], metrics: Vec<String>) -> RunReport {
    let mut r = RunReport {
        fabric: fabric.into(),
        collective: kind.name().into(),
        size_bytes: size,
        ranks,
        hosts: hosts.len(),
        ok: hosts.iter().all(|(_, h)| h.ok),
        verified_ranks: 0,
        completion_ns: hosts.iter().map(|(_, h)| h.elapsed_ns).max().unwrap_or(0),
        segment: segment.name().into(),
        retransmitted_packets: 0,
        naks_sent: 0,
        out_of_order_packets: 0,
        cnps_sent: 0,
        cnps_received: 0,
        pfc_paused_ns: 0,
        metrics,
        qps: Vec::new(),
        nics: Vec::new(),
        errors: Vec::new(),
        time_dilation: hosts.first().map_or(1.0, |(_, h)| if h.time_dilation > 0.0 { h.time_dilation } else { 1.0 }),
        warnings: Vec::new(),
    };
    for (host, h) in hosts {
        r.verified_ranks += h.ranks.iter().filter(|k| k.verified == Some(true)).count() as u32;
        if let Some(e) = &h.error {
            r.errors.push(format!("{host}: {e}"));
        }
        for k in h.ranks.iter().filter(|k| k.verified != Some(true)) {
            r.errors.push(format!("{host}: rank {} not verified (first wrong byte {:?})", k.rank, k.first_mismatch));
        }
        for q in h.qps.iter().filter(|q| q.send_bytes > 0) {
            // The peer responder's CNPs for this connection.
            let peer = hosts.iter().flat_map(|(_, o)| o.qps.iter()).find(|o| o.qpn == q.peer_qpn && o.peer_qpn == q.qpn);
            r.qps.push(QpLine {
                host: host.clone(),
                nic: q.nic.clone(),
                qpn: q.qpn,
                label: q.label.clone(),
                bytes: q.send_completed_bytes,
                goodput_bps: q.goodput_bps,
                retransmitted_packets: q.retransmitted_packets,
                timeouts: q.timeouts,
                naks_received: q.naks_received,
                out_of_order_at_peer: peer.map_or(0, |p| p.out_of_order),
                cnps_received: q.cnps_received,
                cnps_sent_by_peer: peer.map_or(0, |p| p.cnps_sent),
            });
            r.retransmitted_packets += q.retransmitted_packets;
        }
        for q in &h.qps {
            r.naks_sent += q.naks_sent;
            r.out_of_order_packets += q.out_of_order;
        }
        for n in &h.nics {
            r.cnps_sent += n.cnps_sent;
            r.cnps_received += n.cnps_received;
            r.pfc_paused_ns += n.pfc_paused_ns_prio3;
            r.nics.push(NicLine {
                host: host.clone(),
                nic: n.name.clone(),
                cnps_sent: n.cnps_sent,
                cnps_received: n.cnps_received,
                pfc_frames_received: n.pfc_frames_received,
                pfc_paused_ns: n.pfc_paused_ns_prio3,
                data_priority: n.data_priority,
                data_dscp: n.data_dscp,
            });
        }
    }
    r.ok &= r.verified_ranks == ranks && r.errors.is_empty();
    r
}

/// The table for people.
pub fn render_table(r: &RunReport) -> String {
    let mut s = String::new();
    let gbps = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.3}", b / 1e9));
    s += &format!(
        "{} {} on fabric {}: {} ranks on {} hosts, {} per rank, {} writes; emulated time (time dilation {})\n",
        if r.ok { "OK" } else { "FAILED" },
        r.collective,
        r.fabric,
        r.ranks,
        r.hosts,
        human(r.size_bytes),
        r.segment,
        r.time_dilation
    );
    s += &format!(
        "job completion time {}, verified ranks {}/{}, retransmitted packets {}, NAKs {}, out-of-order arrivals {}, CNPs sent {} / received {}, PFC pause {:.3} ms\n\n",
        duration(r.completion_ns),
        r.verified_ranks,
        r.ranks,
        r.retransmitted_packets,
        r.naks_sent,
        r.out_of_order_packets,
        r.cnps_sent,
        r.cnps_received,
        r.pfc_paused_ns as f64 / 1e6
    );
    s += &format!(
        "{:<8} {:<6} {:>6} {:<22} {:>10} {:>13} {:>8} {:>6} {:>8} {:>9} {:>9}\n",
        "HOST", "NIC", "QPN", "CONNECTION", "BYTES", "GOODPUT Gb/s", "RETX", "NAK", "OOO", "CNP RX", "CNP TX"
    );
    for q in &r.qps {
        s += &format!(
            "{:<8} {:<6} {:>6} {:<22} {:>10} {:>13} {:>8} {:>6} {:>8} {:>9} {:>9}\n",
            q.host,
            q.nic,
            format!("{:#x}", q.qpn),
            q.label,
            human(q.bytes),
            gbps(q.goodput_bps),
            q.retransmitted_packets,
            q.naks_received,
            q.out_of_order_at_peer,
            q.cnps_received,
            q.cnps_sent_by_peer
        );
    }
    s += &format!("\n{:<8} {:<6} {:>9} {:>9} {:>10} {:>14}\n", "HOST", "NIC", "CNP TX", "CNP RX", "PFC RX", "PFC PAUSE ms");
    for n in &r.nics {
        s += &format!(
            "{:<8} {:<6} {:>9} {:>9} {:>10} {:>14.3}\n",
            n.host,
            n.nic,
            n.cnps_sent,
            n.cnps_received,
            n.pfc_frames_received,
            n.pfc_paused_ns as f64 / 1e6
        );
    }
    if !r.metrics.is_empty() {
        s += &format!("\nmetrics (while the job ran): {}\n", r.metrics.join(" "));
    }
    for e in &r.errors {
        s += &format!("error: {e}\n");
    }
    for w in &r.warnings {
        s += &format!("warning: {w}\n");
    }
    s
}

/// A duration with a unit that keeps 4 significant digits: `2.551 s`, `1.069 ms`, `645.3 µs`.
fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

fn human(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

/// The machine's CPU times now (`None` when `/proc/stat` cannot be read).
fn read_cpu_times() -> Option<bottleneck::CpuTimes> {
    bottleneck::parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn locate_hostd() -> anyhow::Result<PathBuf> {
    let p = match std::env::var_os("ROCEFAB_HOSTD") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().context("current_exe")?.parent().unwrap_or(Path::new(".")).join("rocefab-hostd"),
    };
    if !p.is_file() {
        bail!("GPU-host emulator {} not found (build it with `cargo build -p gpu-host`, or set ROCEFAB_HOSTD)", p.display());
    }
    Ok(p)
}

/// A started hostd: stopped (SIGTERM, then SIGKILL) and reaped on drop.
struct Hostd {
    host: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    log: PathBuf,
}

impl Hostd {
    /// Asks it to stop (SIGTERM): a hostd that reported keeps its QPs up (answering peers that
    /// retransmit after a lost final ACK) until this.
    fn terminate(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        }
    }

    fn line(&self, until: Instant) -> anyhow::Result<String> {
        let wait = until.saturating_duration_since(Instant::now());
        self.lines.recv_timeout(wait).map_err(|_| {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            anyhow!("{}: rocefab-hostd gave no output in time (log {}: {})", self.host, self.log.display(), tail.into_iter().rev().collect::<Vec<_>>().join(" | "))
        })
    }
}

impl Drop for Hostd {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
            let end = Instant::now() + Duration::from_secs(3);
            while Instant::now() < end && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The default window in packets for a fabric whose links have `link_mtu`: 128 KiB of
/// payload at the path MTU the hosts will use ([`gpu_host::nic::job::DEFAULT_WINDOW_BYTES`]).
pub fn default_window_packets(link_mtu: u32, ipv6: bool) -> u32 {
    path_mtu_for_link(link_mtu, ipv6).map_or(DEFAULT_WINDOW_PACKETS, window_packets_for)
}

/// The classes of each NIC of `nics` (by name): negotiated ([`classes_from`]) when the agent
/// config has the NIC and the report has its port, else `configured`.
pub fn classes_for(nics: &[String], agent: &AgentConfig, report: &NodeReport, configured: NicClasses) -> Vec<NicClasses> {
    nics.iter()
        .map(|name| {
            let nic = agent.nics.iter().find(|n| &n.name == name);
            let port = report.ports.iter().find(|p| &p.port == name);
            match (nic, port) {
                (Some(n), Some(p)) => classes_from(n, p),
                _ => configured,
            }
        })
        .collect()
}

/// The classes of every NIC of host `h`, from its NIC agent if `up` started one; a warning when
/// the agent is recorded but gives no answer.
fn host_classes(st: &State, h: &HostPlan, configured: NicClasses) -> (Vec<NicClasses>, Option<String>) {
    let fallback = vec![configured; h.nics.len()];
    let Some(d) = st.daemons.iter().find(|d| d.is_host() && d.node() == h.name) else {
        return (fallback, None);
    };
    let url = d.url("/lldp");
    let got = std::fs::read_to_string(&d.config)
        .map_err(|e| format!("reading {}: {e}", d.config.display()))
        .and_then(|t| serde_json::from_str::<AgentConfig>(&t).map_err(|e| format!("{}: {e}", d.config.display())))
        .and_then(|agent| {
            let body = scrape(&url, Duration::from_secs(2)).map_err(|e| format!("{e:#}"))?;
            let report = serde_json::from_str::<NodeReport>(&body).map_err(|e| format!("{url}: not a neighbour table: {e}"))?;
            Ok((agent, report))
        });
    match got {
        Ok((agent, report)) => {
            let names: Vec<String> = h.nics.iter().map(|n| n.ifname.clone()).collect();
            (classes_for(&names, &agent, &report, configured), None)
        }
        Err(e) => {
            let c = configured;
            let w = format!(
                "warning: {}: NIC agent did not answer ({e}); using the configured classes (data dscp {} prio {}, cnp dscp {} prio {})",
                h.name, c.data_dscp, c.data_priority, c.cnp_dscp, c.cnp_priority
            );
            (fallback, Some(w))
        }
    }
}

/// One line naming the classes of a host's NICs, if any differs from the default 24/3/48/7.
pub fn classes_line(h: &HostDesc) -> Option<String> {
    if h.nics.iter().all(|n| n.classes == NicClasses::default()) {
        return None;
    }
    let nics: Vec<String> = h
        .nics
        .iter()
        .map(|n| {
            let c = &n.classes;
            format!("{} data dscp {} prio {}, cnp dscp {} prio {}", n.name, c.data_dscp, c.data_priority, c.cnp_dscp, c.cnp_priority)
        })
        .collect();
    Some(format!("{}: classes {}", h.name, nics.join("; ")))
}

/// What a job needs to know of the running fabric's hosts.
struct FabricHosts {
    /// In topology order (= torchrun node rank).
    hosts: Vec<HostDesc>,
    /// Each host's network namespace, in the same order.
    netns: Vec<String>,
    /// The fabric's link MTU.
    mtu: u32,
    /// The time dilation the fabric came up with.
    dilation: Dilation,
    dcqcn: gpu_host::dcqcn::DcqcnProfile,
}

/// The hosts of a running fabric. Prints a warning for every host whose NIC agent does not
/// answer.
fn hosts_of(fabric: &str) -> anyhow::Result<FabricHosts> {
    let st = State::load(fabric).with_context(|| format!("fabric {fabric:?} is not up (no {})", rundir::state_path(fabric).display()))?;
    let topo = Topology::load(&st.topology)?;
    let plan = compile(&topo, 0);
    let mut hosts = Vec::new();
    let mut netns = Vec::new();
    let configured = topo.lldp.nic.classes();
    for h in &plan.hosts {
        let (classes, warning) = host_classes(&st, h, configured);
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        let nics = h
            .nics
            .iter()
            .zip(classes)
            .map(|(n, classes)| {
                let rate = plan
                    .links
                    .iter()
                    .find(|l| (l.a.netns == h.netns && l.a.ifname == n.ifname) || (l.b.netns == h.netns && l.b.ifname == n.ifname))
                    .map(|l| l.line_rate_bps)
                    .ok_or_else(|| anyhow!("{}:{}: no link in the plan", h.name, n.ifname))?;
                Ok(HostNic {
                    name: n.ifname.clone(),
                    mac: n.mac.to_string(),
                    ip: n.addr.into(),
                    gateway_mac: n.gateway_mac.to_string(),
                    line_rate_bps: rate,
                    classes,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        hosts.push(HostDesc { name: h.name.clone(), gpus: topo.gpus_per_host, nics });
        netns.push(h.netns.clone());
    }
    if hosts.is_empty() {
        bail!("fabric {fabric} has no hosts");
    }
    // The switches run at the dilation of `up`, whatever the topology file says now.
    Ok(FabricHosts { hosts, netns, mtu: plan.mtu, dilation: st.clock()?.dilation(), dcqcn: topo.dcqcn })
}

pub fn run(a: &RunArgs) -> anyhow::Result<()> {
    let kind = a.collective.kind();
    let FabricHosts { hosts, netns, mtu: link_mtu, dilation, dcqcn } = hosts_of(&a.fabric)?;
    let ipv6 = hosts.iter().flat_map(|h| h.nics.iter()).any(|n| n.ip.is_ipv6());
    let window_packets = a.window_packets.unwrap_or_else(|| default_window_packets(link_mtu, ipv6));
    let hostd = locate_hostd()?;
    let opts = BuildOptions {
        job_name: format!("{}-{}", a.fabric, kind.name()),
        timeout_ms: a.timeout.saturating_mul(1000),
        seed_base: a.seed,
        metrics_port_base: Some(a.metrics_port_base),
        window_packets,
        retransmit_timeout_ns: a.retransmit_timeout_ms.map_or_else(|| default_retransmit_timeout_ns(dilation), |ms| ms.saturating_mul(1_000_000)),
        time_dilation: dilation.factor(),
        segment: a.segment.mode(),
        dcqcn,
    };
    let mut built = collective_job::build(kind, &hosts, a.size, &opts).context("building the collective")?;
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    let interval = Duration::from_millis(a.timeline_interval_ms);
    let timeline = crate::timeline::RunTimeline::prepare(&a.fabric, kind.name(), &a.timeline, a.timeline_port.as_deref(), interval, &names, &mut built.jobs)?;
    let dir = rundir::dir(&a.fabric).join("jobs").join(kind.name());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;

    let mut procs: Vec<Hostd> = Vec::new();
    for ((h, ns), job) in hosts.iter().zip(&netns).zip(&built.jobs) {
        let path = dir.join(format!("{}.json", h.name));
        std::fs::write(&path, serde_json::to_vec_pretty(job)?).with_context(|| format!("writing {}", path.display()))?;
        let log = dir.join(format!("{}.log", h.name));
        let logf = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = Command::new(&hostd)
            .arg("--job")
            .arg(&path)
            .args(["--netns", ns, "--wait-go"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(logf)
            .spawn()
            .with_context(|| format!("starting {} for {}", hostd.display(), h.name))?;
        let out = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        procs.push(Hostd { host: h.name.clone(), child, stdin, lines: rx, log });
    }
    let ready_by = Instant::now() + Duration::from_secs(120);
    for p in &procs {
        let l = p.line(ready_by)?;
        if !l.contains("\"ready\":true") {
            bail!("{}: unexpected first line from rocefab-hostd: {l}", p.host);
        }
    }
    if !a.json {
        eprintln!("{} ranks on {} hosts ready; starting {}", built.layout.world_size(), procs.len(), kind.name());
        for l in hosts.iter().filter_map(classes_line) {
            eprintln!("{l}");
        }
    }
    let cpu_before = read_cpu_times();
    let recording = timeline.map(|t| t.start(Duration::from_secs(a.timeout + 30))).transpose()?;
    for p in &mut procs {
        let mut s = p.stdin.take().expect("stdin");
        writeln!(s, "go").with_context(|| format!("starting {}", p.host))?;
    }
    let done_by = Instant::now() + Duration::from_secs(a.timeout + 30);
    let mut reports = Vec::new();
    for p in &procs {
        let l = p.line(done_by)?;
        let r: Report = serde_json::from_str(&l).with_context(|| format!("{}: parsing the report {l:?}", p.host))?;
        // The host's full report (per-QP NAK/duplicate counters, host XDP and AF_XDP socket
        // drop counters) next to its job file, for diagnosis.
        let path = dir.join(format!("{}.report.json", p.host));
        std::fs::write(&path, &l).with_context(|| format!("writing {}", path.display()))?;
        reports.push((p.host.clone(), r));
    }
    let cpu_busy = read_cpu_times().zip(cpu_before).and_then(|(after, before)| bottleneck::busy_fraction(before, after));
    // Every host has reported, so no peer waits for an ACK any more: end the lingers, all at
    // once, then reap.
    for p in &mut procs {
        p.terminate();
    }
    drop(procs);
    if let Some(r) = recording {
        for l in r.finish()? {
            eprintln!("{l}");
        }
    }
    // The addresses the jobs were given, so the report and the hosts agree.
    let metrics = built.jobs.iter().filter_map(|j| j.metrics_listen).map(|l| format!("http://{l}/metrics")).collect();
    let mut rep = summarize(&a.fabric, kind, a.segment, a.size, built.layout.world_size(), &reports, metrics);
    rep.warnings = bottleneck::warnings(&bottleneck::Measured {
        time_dilation: dilation.factor(),
        cpu_busy,
        nics: bottleneck::nic_use(&reports),
        senders_busy_throughout: kind != Kind::Broadcast,
    });
    for w in &rep.warnings {
        eprintln!("warning: {w}");
    }
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&rep)?)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        print!("{}", render_table(&rep));
    }
    if !rep.ok {
        bail!("{} did not complete with verified data: {}", kind.name(), rep.errors.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_host::nic::job::{NicReport, QpReport, RankReport};

    #[test]
    fn metrics_port_base_help_says_host1_gets_the_base() {
        use clap::Args;
        let cmd = RunArgs::augment_args(clap::Command::new("run"));
        let arg = cmd.get_arguments().find(|a| a.get_long() == Some("metrics-port-base")).unwrap();
        let help = arg.get_long_help().or(arg.get_help()).unwrap().to_string();
        assert!(help.contains("host1 serves on 127.0.0.1:BASE, the n-th host of the fabric (host<n>) on BASE + n - 1"), "{help}");
    }

    #[test]
    fn default_window_is_128_kib_of_payload_at_the_fabric_path_mtu() {
        assert_eq!(default_window_packets(1500, false), 128); // path MTU 1024
        assert_eq!(default_window_packets(3500, false), 64); // path MTU 2048
        assert_eq!(default_window_packets(2107, false), 128); // 2048 needs 2108 with IPv4
        assert_eq!(default_window_packets(2108, true), 128); // IPv6 headers: path MTU 1024
        assert_eq!(default_window_packets(600, false), 256); // path MTU 512
    }

    #[test]
    fn sizes_parse_with_units_and_errors_name_the_problem() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert!(parse_size("1G").unwrap_err().contains("1GiB"), "a bare G is ambiguous");
        assert_eq!(parse_size("4096"), Ok(4096));
        // SI as in topology files: 512KB is 512,000 bytes, 512KiB 524,288.
        assert_eq!(parse_size("512KB"), Ok(512_000));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("512KB"), crate::qos::parse_byte_size("512KB"));
        assert!(parse_size("12XB").unwrap_err().contains("unknown size unit"));
        assert!(parse_size("MiB").unwrap_err().contains("expected a size"));
        assert!(parse_size("0").is_err());
    }

    #[test]
    fn summary_aggregates_hosts_and_flags_unverified_ranks() {
        let host = |qpn: u32, peer: u32, ok: bool| Report {
            job: "j".into(),
            time_dilation: 8000.0,
            ok,
            error: None,
            elapsed_ns: 2_000_000_000 + u64::from(qpn),
            qps: vec![
                QpReport { qpn, peer_qpn: peer, nic: "gpu0".into(), send_bytes: 10, send_completed_bytes: 10, retransmitted_packets: 3, goodput_bps: Some(8e8), ..Default::default() },
                QpReport { qpn: qpn + 1, peer_qpn: peer - 1, nic: "gpu0".into(), cnps_sent: 4, out_of_order: 5, naks_sent: 1, ..Default::default() },
            ],
            nics: vec![NicReport { name: "gpu0".into(), cnps_sent: 4, cnps_received: 2, pfc_paused_ns_prio3: 1_000_000, ..Default::default() }],
            ranks: vec![RankReport { rank: qpn, complete: true, verified: Some(ok), first_mismatch: (!ok).then_some(8) }],
        };
        let hosts = vec![("host1".to_string(), host(0x100, 0x103, true)), ("host2".to_string(), host(0x102, 0x101, true))];
        let r = summarize("f", Kind::AllReduce, Segment::WriteOnly, 64, 2, &hosts, vec![]);
        assert!(r.ok && r.verified_ranks == 2, "{r:?}");
        assert_eq!(r.completion_ns, 2_000_000_000 + 0x102);
        assert_eq!((r.retransmitted_packets, r.cnps_sent, r.cnps_received, r.pfc_paused_ns), (6, 8, 4, 2_000_000));
        assert_eq!(r.qps.len(), 2);
        assert_eq!(r.qps[0].cnps_sent_by_peer, 4, "peer responder 0x103 answers requester 0x100");
        assert_eq!(r.qps[0].out_of_order_at_peer, 5, "counted by the peer responder");
        assert_eq!((r.out_of_order_packets, r.naks_sent, r.segment.as_str()), (10, 2, "write-only"));
        let t = render_table(&r);
        assert!(t.starts_with("OK allreduce on fabric f: 2 ranks on 2 hosts"), "{t}");
        assert!(t.contains(", write-only writes;"), "{t}");
        assert!(t.contains("NAKs 2, out-of-order arrivals 10,"), "{t}");
        assert!(t.lines().next().unwrap().ends_with("; emulated time (time dilation 8000)"), "{t}");
        assert_eq!(r.time_dilation, 8000.0);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["time_dilation"], 8000.0);
        assert_eq!(json["warnings"], serde_json::json!([]));
        assert_eq!((json["out_of_order_packets"].as_u64(), json["qps"][0]["out_of_order_at_peer"].as_u64()), (Some(10), Some(5)));
        let mut w = r.clone();
        w.warnings.push("raise time_dilation".into());
        assert!(render_table(&w).contains("\nwarning: raise time_dilation\n"));
        assert!(t.contains("0.800"), "goodput in Gb/s: {t}");

        let bad = vec![("host1".to_string(), host(0x100, 0x103, true)), ("host2".to_string(), host(0x102, 0x101, false))];
        let r = summarize("f", Kind::AllReduce, Segment::FirstMiddleLast, 64, 2, &bad, vec![]);
        assert!(!r.ok);
        assert!(r.errors.iter().any(|e| e.contains("host2: rank 258 not verified (first wrong byte Some(8))")), "{:?}", r.errors);
    }
}
