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
//! Every wait has a deadline from `--timeout` (wall clock from the command's start): readiness,
//! the reports, then [`REPORT_GRACE`] for hosts asked to report at the deadline (SIGUSR1: the
//! report lists what every unfinished QP and rank waited for, [`rocefab_contracts::job::QpStall`]),
//! and bounded SIGTERM/SIGKILL waits to reap every hostd. A host that fails first (errored QP,
//! unverified data, crash) ends the job at once: its peers could only wait for it.
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
use gpu_host::nic::agent::classes_from;
use gpu_host::nic::collective_job::{self, BuildOptions, HostDesc, HostNic, Kind};
use gpu_host::nic::engine::path_mtu_for_link;
use lldp_agent::NodeReport;
use rocefab_contracts::agent::AgentConfig;
use rocefab_contracts::job::{
    default_retransmit_timeout_for, window_packets_for, NicClasses, QpStall, Report, DEFAULT_WINDOW_PACKETS,
};
use rocefab_contracts::rdma::SegmentMode;
use rocefab_contracts::time::Dilation;
use serde::Serialize;

use crate::bottleneck;
use crate::fabric::daemon_http::scrape;
use crate::fabric::rundir::{self, State};
use crate::plan::{compile, HostPlan};
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

/// The options of every job on a fabric (`rocefab run`, `rocefab train`): how the QPs are set
/// up, the data's seed and where the hosts serve metrics.
#[derive(clap::Args, Debug, Clone)]
pub struct JobArgs {
    /// How requesters cut their writes: first-middle-last (standard RC) or write-only (every
    /// packet a WRITE Only with its RETH; responders place out-of-order arrivals, for spraying).
    #[arg(long, value_enum, default_value_t = Segment::FirstMiddleLast)]
    pub segment: Segment,
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
    /// clock but at least 1 ms emulated, i.e. max(100 ms, 1 ms × time_dilation) on the wall clock,
    /// and at least four times a window's serialisation at the slowest NIC's line rate.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub retransmit_timeout_ms: Option<u64>,
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
    /// Give up after this many seconds of wall clock from the start of the command (setting the
    /// hosts up, the job, the reports): hosts still running then report what every unfinished QP
    /// was waiting for, and the command exits non-zero.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// How the job's QPs are set up, shared with `rocefab train`.
    #[command(flatten)]
    pub job: JobArgs,
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
    /// A link cut during the job, measured.
    #[command(flatten)]
    pub failover: crate::failover::FailoverArgs,
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
    /// The responder's QP number (the BTH destination QP of this connection's data).
    pub peer_qpn: u32,
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

/// A QP end that moved to its alternate path (APM on a dual-port NIC).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MigrationLine {
    pub host: String,
    pub qpn: u32,
    pub label: String,
    /// The port it is on now.
    pub to_nic: String,
    /// The port it left, when and why ([`rocefab_contracts::job::Migration`]).
    #[serde(flatten)]
    pub migration: rocefab_contracts::job::Migration,
}

/// The job report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunReport {
    pub fabric: String,
    pub collective: String,
    pub size_bytes: u64,
    pub ranks: u32,
    pub hosts: usize,
    /// Hosts whose report arrived.
    pub hosts_reported: usize,
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
    /// Bytes the collective moved between GPUs of a host over NVLink (no network frames).
    pub nvlink_bytes: u64,
    /// QP ends that moved to their alternate port (dual-port NICs), in the order they moved.
    pub migrations: Vec<MigrationLine>,
    pub metrics: Vec<String>,
    pub qps: Vec<QpLine>,
    pub nics: Vec<NicLine>,
    pub errors: Vec<String>,
    /// Time dilation D of the fabric: every time and rate above is emulated (wall / D).
    pub time_dilation: f64,
    /// Signs that the machine, not the model, limited the run ([`crate::bottleneck`]).
    pub warnings: Vec<String>,
    /// The job did not end by `--timeout`: the hosts still running were told to stop and report.
    pub timed_out: bool,
    /// What every QP that had not finished was waiting for when its host reported.
    pub stalls: Vec<StallLine>,
    /// Every switch egress queue that held anything during the job: its time-weighted average
    /// depth and its peak, bytes (emulated time; the buffer's cells).
    pub queues: Vec<rocefab_contracts::sample::QueueUse>,
    /// Every switch ingress port priority that sent PFC during the job: pause onsets (xOFF
    /// crossings) and PFC frames (refreshes and XONs included).
    pub pfc: Vec<rocefab_contracts::sample::PfcUse>,
    /// Switch ports that had frames queued and sent nothing for more than four frame times
    /// during the job (the machine's doing), emulated.
    pub tx_stalls: Vec<rocefab_contracts::sample::PortStalls>,
    /// Egress port priorities whose PFC watchdog declared a storm or dropped frames during the
    /// job.
    pub watchdog: Vec<rocefab_contracts::sample::WatchdogUse>,
    /// The fabric's events (failures, restores: `rocefab events`) while the job ran.
    pub events: Vec<String>,
    /// The failure `--fail-link` injected, measured ([`crate::failover`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failover: Option<crate::failover::Failover>,
}

/// An unfinished QP of one host ([`rocefab_contracts::job::QpStall`]).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StallLine {
    pub host: String,
    #[serde(flatten)]
    pub qp: QpStall,
}

/// Builds the report from the hosts' reports (`(host name, report)`).
pub fn summarize(
    fabric: &str,
    collective: &str,
    segment: Segment,
    size: u64,
    ranks: u32,
    hosts: &[(String, Report)],
    metrics: Vec<String>,
) -> RunReport {
    let mut r = RunReport {
        fabric: fabric.into(),
        collective: collective.into(),
        size_bytes: size,
        ranks,
        hosts: hosts.len(),
        hosts_reported: hosts.len(),
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
        nvlink_bytes: hosts.iter().map(|(_, h)| h.nvlink_bytes).sum(),
        migrations: Vec::new(),
        metrics,
        qps: Vec::new(),
        nics: Vec::new(),
        errors: Vec::new(),
        time_dilation: hosts.first().map_or(1.0, |(_, h)| if h.time_dilation > 0.0 { h.time_dilation } else { 1.0 }),
        warnings: Vec::new(),
        timed_out: false,
        stalls: Vec::new(),
        queues: Vec::new(),
        pfc: Vec::new(),
        tx_stalls: Vec::new(),
        watchdog: Vec::new(),
        events: Vec::new(),
        failover: None,
    };
    // Every QP by (qpn, peer qpn), for finding a requester's peer responder (a 512-rank
    // all-to-all has 523,264 QP ends: a search per requester took minutes).
    let by_pair: std::collections::HashMap<(u32, u32), &rocefab_contracts::job::QpReport> =
        hosts.iter().flat_map(|(_, o)| o.qps.iter()).map(|o| ((o.qpn, o.peer_qpn), o)).collect();
    for (host, h) in hosts {
        r.verified_ranks += h.ranks.iter().filter(|k| k.verified == Some(true)).count() as u32;
        if let Some(e) = &h.error {
            r.errors.push(format!("{host}: {e}"));
        }
        for k in h.ranks.iter().filter(|k| k.verified != Some(true)) {
            match &k.waiting_for {
                Some(w) => r.errors.push(format!("{host}: rank {} incomplete, waiting for {w}", k.rank)),
                None => r
                    .errors
                    .push(format!("{host}: rank {} not verified (first wrong byte {:?})", k.rank, k.first_mismatch)),
            }
        }
        r.stalls.extend(h.stalls.iter().map(|s| StallLine { host: host.clone(), qp: s.clone() }));
        for q in h.qps.iter().filter(|q| q.send_bytes > 0) {
            // The peer responder's CNPs for this connection.
            let peer = by_pair.get(&(q.peer_qpn, q.qpn)).copied();
            r.qps.push(QpLine {
                host: host.clone(),
                nic: q.nic.clone(),
                qpn: q.qpn,
                peer_qpn: q.peer_qpn,
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
            if let Some(m) = &q.migration {
                r.migrations.push(MigrationLine {
                    host: host.clone(),
                    qpn: q.qpn,
                    label: q.label.clone(),
                    to_nic: q.nic.clone(),
                    migration: m.clone(),
                });
            }
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
    r.migrations.sort_by(|a, b| (a.migration.at_ns, &a.host, a.qpn).cmp(&(b.migration.at_ns, &b.host, b.qpn)));
    r.ok &= r.verified_ranks == ranks && r.errors.is_empty();
    r
}

/// Most QP ends the text report lists one by one as migrated.
const MIGRATIONS_LISTED: usize = 16;

/// The path migrations, for people: a count per cause, then the first ones.
fn render_migrations(m: &[MigrationLine]) -> String {
    use rocefab_contracts::job::MigrationCause as C;
    if m.is_empty() {
        return String::new();
    }
    let by = |c: C| m.iter().filter(|x| x.migration.cause == c).count();
    let mut s = format!(
        "path migrations (APM, dual-port NICs): {} QP ends moved to their alternate port ({} lost carrier on their port, {} ran out of retries, {} followed their peer)\n",
        m.len(),
        by(C::LinkDown),
        by(C::RetryExhausted),
        by(C::PeerMigrated)
    );
    for x in m.iter().take(MIGRATIONS_LISTED) {
        s += &format!(
            "  {} {:#x} ({}): {} -> {} at {}: {}\n",
            x.host,
            x.qpn,
            x.label,
            x.migration.from_nic,
            x.to_nic,
            duration(x.migration.at_ns),
            x.migration.cause.describe()
        );
    }
    if m.len() > MIGRATIONS_LISTED {
        s += &format!("  ... and {} more (--json lists them all)\n", m.len() - MIGRATIONS_LISTED);
    }
    s
}

/// The table for people.
pub fn render_table(r: &RunReport) -> String {
    let mut s = String::new();
    let gbps = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.3}", b / 1e9));
    s += &format!(
        "{} {} on fabric {}: {} ranks on {} hosts, {} per rank, {} writes; emulated time (time dilation {})\n",
        if r.ok {
            "OK"
        } else if r.timed_out {
            "TIMED OUT"
        } else {
            "FAILED"
        },
        r.collective,
        r.fabric,
        r.ranks,
        r.hosts,
        human(r.size_bytes),
        r.segment,
        r.time_dilation
    );
    s += &format!(
        "job completion time {}, verified ranks {}/{}, retransmitted packets {}, NAKs {}, out-of-order arrivals {}, CNPs sent {} / received {}, PFC pause {:.3} ms\n",
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
    if r.nvlink_bytes > 0 {
        s += &format!("NVLink bytes {} (inside the hosts, no network frames)\n", human(r.nvlink_bytes));
    }
    s += &render_migrations(&r.migrations);
    s += "\n";
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
    s += &format!(
        "\n{:<8} {:<6} {:>9} {:>9} {:>10} {:>14}\n",
        "HOST", "NIC", "CNP TX", "CNP RX", "PFC RX", "PFC PAUSE ms"
    );
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
    if !r.queues.is_empty() {
        s += &format!("\n{:<32} {:>5} {:>14} {:>14}\n", "SWITCH QUEUE", "TC", "AVG DEPTH B", "PEAK DEPTH B");
        for q in &r.queues {
            s += &format!(
                "{:<32} {:>5} {:>14.0} {:>14}\n",
                format!("{}:{} (to {})", q.switch, q.port, q.peer),
                q.tc,
                q.average_depth_bytes,
                format!("{}{}", if q.peak_known { "" } else { "≥" }, q.peak_depth_bytes)
            );
        }
    }
    if !r.pfc.is_empty() {
        s += &format!("\n{:<32} {:>5} {:>14} {:>14}\n", "SWITCH INGRESS PORT", "PRIO", "PAUSE ONSETS", "PFC FRAMES");
        for f in &r.pfc {
            s += &format!(
                "{:<32} {:>5} {:>14} {:>14}\n",
                format!("{}:{} (to {})", f.switch, f.port, f.peer),
                f.priority,
                f.pause_onsets,
                f.pfc_frames
            );
        }
    }
    if !r.metrics.is_empty() {
        s += &format!("\nmetrics (while the job ran): {}\n", r.metrics.join(" "));
    }
    if !r.stalls.is_empty() {
        s += &format!(
            "\n{} QPs had not finished when their hosts reported (emulated time since the start):\n",
            r.stalls.len()
        );
        for st in r.stalls.iter().take(STALLS_SHOWN) {
            s += &format!("{}: {}\n", st.host, st.qp.describe());
        }
        if r.stalls.len() > STALLS_SHOWN {
            s += &format!(
                "and {} more QPs (every one is in `--json` and in the run's report.json)\n",
                r.stalls.len() - STALLS_SHOWN
            );
        }
    }
    for e in r.errors.iter().take(STALLS_SHOWN) {
        s += &format!("error: {e}\n");
    }
    if r.errors.len() > STALLS_SHOWN {
        s += &format!("and {} more errors (in `--json` and the run's report.json)\n", r.errors.len() - STALLS_SHOWN);
    }
    for e in &r.events {
        s += &format!("event during the job: {e}\n");
    }
    for l in r.failover.iter().flat_map(crate::failover::render) {
        s += &format!("{l}\n");
    }
    for w in &r.warnings {
        s += &format!("warning: {w}\n");
    }
    s
}

/// What `rocefab run` prints: (stdout, stderr lines). Each warning once: the table ends with
/// them; with `--json` they are in the JSON and, for whoever watches stderr, there.
pub fn render_output(r: &RunReport, json: bool) -> anyhow::Result<(String, Vec<String>)> {
    if json {
        let err = r.warnings.iter().map(|w| format!("warning: {w}")).collect();
        Ok((serde_json::to_string_pretty(r)? + "\n", err))
    } else {
        Ok((render_table(r), Vec::new()))
    }
}

use crate::text::duration;

pub(crate) fn human(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

/// Every switch's `GET /sample` now (those that answer within 500 ms, and not past `until`).
fn switch_samples(fabric: &str, until: Instant) -> Vec<rocefab_contracts::sample::SwitchSample> {
    let Ok(st) = State::load(fabric) else { return Vec::new() };
    let mut out = Vec::new();
    for d in st.daemons.iter().filter(|d| !d.is_host()) {
        let left = until.saturating_duration_since(Instant::now()).min(Duration::from_millis(500));
        if left.is_zero() {
            break;
        }
        if let Some(s) = scrape(&d.url("/sample"), left).ok().and_then(|b| serde_json::from_str(&b).ok()) {
            out.push(s);
        }
    }
    out
}

/// The switch daemons of `fabric` running now: (switch, pid, log).
fn live_switches(fabric: &str) -> Vec<(String, u32, PathBuf)> {
    let Ok(st) = State::load(fabric) else { return Vec::new() };
    st.daemons
        .iter()
        .filter(|d| !d.is_host())
        .filter_map(|d| Some((d.node().to_string(), d.pid?, d.log.clone(), d.config.clone())))
        .filter(|(_, pid, _, cfg)| {
            crate::fabric::daemons::pid_alive(*pid) && crate::fabric::daemons::is_our_daemon(*pid, cfg)
        })
        .map(|(n, pid, log, _)| (n, pid, log))
        .collect()
}

/// The fabric's part in a job: the switch daemons of `alive_before` that died during it, the one
/// whose log changed first named first (with the log's last line), unless a failure was injected
/// (`injected`: the switches it stopped are its doing); then every PFC watchdog storm.
fn fabric_causes(
    alive_before: &[(String, u32, PathBuf)],
    wd: &[rocefab_contracts::sample::WatchdogUse],
    injected: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if !injected {
        let mut dead: Vec<(std::time::SystemTime, String)> = alive_before
            .iter()
            .filter(|(_, pid, _)| !crate::fabric::daemons::pid_alive(*pid))
            .map(|(sw, pid, log)| {
                let changed = std::fs::metadata(log).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
                let last = std::fs::read_to_string(log)
                    .ok()
                    .and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_string))
                    .map_or_else(String::new, |l| format!("; its log ends: {}", l.trim()));
                (changed, format!("switch {sw} (rocefab-switchd pid {pid}) died during the job{last}"))
            })
            .collect();
        dead.sort();
        if dead.len() > 1 {
            dead[0].1.push_str(" (first: its log changed last before the others')");
        }
        out.extend(dead.into_iter().map(|d| d.1));
    }
    for w in wd {
        let began = match w.storms {
            0 => "stormed since before the job".to_string(),
            1 => "1 storm began during the job".to_string(),
            n => format!("{n} storms began during the job"),
        };
        out.push(format!(
            "PFC watchdog: switch {} port {} (to {}) priority {} was stormed ({began}: the peer kept the queue paused past the detection time); the watchdog dropped {} frame{} of priority {} on {} to or from that port",
            w.switch,
            w.port,
            w.peer,
            w.priority,
            w.dropped_frames,
            if w.dropped_frames == 1 { "" } else { "s" },
            w.priority,
            w.switch,
        ));
    }
    out
}

/// Opens a peak window on every switch (`POST /peak-window`, those that answer within 500 ms,
/// and not past `until`): the job's report then carries each queue's own peak, not the
/// highest since `up` ([`rocefab_contracts::sample::queue_use`]).
fn open_peak_windows(fabric: &str, until: Instant) {
    let Ok(st) = State::load(fabric) else { return };
    for d in st.daemons.iter().filter(|d| !d.is_host()) {
        let left = until.saturating_duration_since(Instant::now()).min(Duration::from_millis(500));
        if left.is_zero() {
            break;
        }
        // A switch that does not answer keeps its samples without a shared window: its queues
        // are reported as before (the watermark if it rose, else a lower bound).
        let _ = crate::fabric::daemon_http::http_request("POST", &d.url("/peak-window"), None, left);
    }
}

/// The machine's CPU times now (`None` when `/proc/stat` cannot be read).
fn read_cpu_times() -> Option<bottleneck::CpuTimes> {
    bottleneck::parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

pub(crate) fn locate_hostd() -> anyhow::Result<PathBuf> {
    crate::fabric::process::sibling(
        "rocefab-hostd",
        Some("ROCEFAB_HOSTD"),
        "GPU-host emulator",
        "build it with `cargo build -p host-daemons`, or set ROCEFAB_HOSTD",
    )
}

/// Readiness (sockets up, XDP attached) takes at most this long, and never past `--timeout`.
const READY_LIMIT: Duration = Duration::from_secs(120);
/// After `--timeout`, how long the hosts that have not reported have to report what they
/// were waiting for (they are sent SIGUSR1; hostd's own grace for a stuck data thread is 2 s).
pub const REPORT_GRACE: Duration = Duration::from_secs(3);
/// How long hostds have to exit after SIGTERM, and again after SIGKILL.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// Makes the process `cmd` starts get SIGTERM when the thread that starts it ends
/// (`PR_SET_PDEATHSIG`): a job's per-host processes end with the `rocefab run` (or `train`) that
/// started them, also when it is killed and runs no cleanup; otherwise they would run on to their
/// own timeout, holding their metrics ports. Start them from the thread that waits for them.
pub(crate) fn ends_with_parent(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only makes two system calls (no
    // allocation, no lock).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the prctl: no signal will come, so do not start at all.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    }
}

/// One started hostd (or another per-host process of a job: `prog`).
pub(crate) struct Hostd {
    pub host: String,
    prog: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    /// Lines read from its stdout so far (the ready line, then the report).
    pub lines: Vec<String>,
    /// Its stdout ended.
    pub eof: bool,
}

impl Hostd {
    fn signal(&mut self, sig: libc::c_int) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: kill(2) on our own child's pid, which is not reaped yet (try_wait).
            unsafe { libc::kill(self.child.id() as i32, sig) };
        }
    }

    /// The last lines of its log, for an error message.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        format!("log {}: {}", self.log.display(), tail.into_iter().rev().collect::<Vec<_>>().join(" | "))
    }

    /// Why it has fewer lines than expected: it exited (how), or it is still running.
    pub fn silence(&mut self, waiting: &str) -> String {
        let prog = self.prog;
        let how = match self.child.try_wait() {
            Ok(Some(st)) => {
                let pid = self.child.id();
                format!(
                    "{prog} {} {waiting}",
                    crate::fabric::process::describe_exit(st, || crate::fabric::process::oom_killed(pid))
                )
            }
            _ if self.eof => format!("{prog} closed its output {waiting}"),
            _ => format!("{prog} gave no answer {waiting}"),
        };
        format!("{}: {how} ({})", self.host, self.log_tail())
    }
}

/// Every hostd of a job, with their stdout lines merged into one channel (so waiting for all
/// of them has one deadline). Stopped and reaped, all at once and within bounded time, when
/// dropped.
pub(crate) struct Hostds {
    prog: &'static str,
    pub procs: Vec<Hostd>,
    rx: mpsc::Receiver<(usize, Option<String>)>,
    tx: mpsc::Sender<(usize, Option<String>)>,
}

impl Hostds {
    fn new() -> Hostds {
        Hostds::named("rocefab-hostd")
    }

    /// No processes yet; `prog` names them in messages.
    pub fn named(prog: &'static str) -> Hostds {
        let (tx, rx) = mpsc::channel();
        Hostds { prog, procs: Vec::new(), rx, tx }
    }

    /// Takes over a spawned hostd; a thread forwards its stdout lines (then `None` at EOF).
    pub fn push(&mut self, host: String, mut child: Child, log: PathBuf) {
        let i = self.procs.len();
        let out = child.stdout.take().expect("piped");
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send((i, Some(l))).is_err() {
                    return;
                }
            }
            let _ = tx.send((i, None));
        });
        let stdin = child.stdin.take();
        self.procs.push(Hostd { host, prog: self.prog, child, stdin, log, lines: Vec::new(), eof: false });
    }

    /// Collects lines until every hostd has `n` of them or has closed its stdout, or `until`.
    fn wait_lines(&mut self, n: usize, until: Instant) {
        self.wait_lines_or_failure(n, until, |_| false);
    }

    /// [`Hostds::wait_lines`], returning early with the index of the first hostd that `failed`
    /// says failed (given its `n`-th line), or that closed its stdout with fewer lines.
    pub fn wait_lines_or_failure(&mut self, n: usize, until: Instant, failed: impl Fn(&str) -> bool) -> Option<usize> {
        while self.procs.iter().any(|p| p.lines.len() < n && !p.eof) {
            let left = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((i, Some(l))) => {
                    let p = &mut self.procs[i];
                    p.lines.push(l);
                    if p.lines.len() == n && failed(&p.lines[n - 1]) {
                        return Some(i);
                    }
                }
                Ok((i, None)) => {
                    let p = &mut self.procs[i];
                    p.eof = true;
                    if p.lines.len() < n {
                        return Some(i);
                    }
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// Stops every hostd still running (SIGTERM, then SIGKILL after [`EXIT_GRACE`]) and reaps
    /// them; returns a line for each that would not go.
    pub fn stop(&mut self) -> Vec<String> {
        for p in &mut self.procs {
            // A hostd still waiting for its start line ends on EOF (SIGTERM does not interrupt
            // that read).
            drop(p.stdin.take());
            p.signal(libc::SIGTERM);
        }
        let mut left = Vec::new();
        for sig in [Some(libc::SIGKILL), None] {
            let end = Instant::now() + EXIT_GRACE;
            while Instant::now() < end && self.procs.iter_mut().any(|p| matches!(p.child.try_wait(), Ok(None))) {
                std::thread::sleep(Duration::from_millis(20));
            }
            left.clear();
            for p in &mut self.procs {
                if matches!(p.child.try_wait(), Ok(None)) {
                    if let Some(s) = sig {
                        p.signal(s);
                    }
                    left.push(format!(
                        "{}: {} (pid {}) did not exit after SIGTERM and SIGKILL",
                        p.host,
                        p.prog,
                        p.child.id()
                    ));
                }
            }
            if left.is_empty() {
                break;
            }
        }
        left
    }
}

impl Drop for Hostds {
    fn drop(&mut self) {
        for l in self.stop() {
            eprintln!("warning: {l}");
        }
    }
}

/// The default window in packets for a fabric whose links have `link_mtu`: 128 KiB of
/// payload at the path MTU the hosts will use ([`rocefab_contracts::job::DEFAULT_WINDOW_BYTES`]).
pub fn default_window_packets(link_mtu: u32, ipv6: bool) -> u32 {
    path_mtu_for_link(link_mtu, ipv6).map_or(DEFAULT_WINDOW_PACKETS, window_packets_for)
}

/// The classes of each NIC of `nics` (by name): negotiated ([`classes_from`]) when the agent
/// config has the NIC and the report has its port, else `configured`.
pub fn classes_for(
    nics: &[String],
    agent: &AgentConfig,
    report: &NodeReport,
    configured: NicClasses,
) -> Vec<NicClasses> {
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
            let report =
                serde_json::from_str::<NodeReport>(&body).map_err(|e| format!("{url}: not a neighbour table: {e}"))?;
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
            format!(
                "{} data dscp {} prio {}, cnp dscp {} prio {}",
                n.name, c.data_dscp, c.data_priority, c.cnp_dscp, c.cnp_priority
            )
        })
        .collect();
    Some(format!("{}: classes {}", h.name, nics.join("; ")))
}

/// What a job needs to know of the running fabric's hosts.
pub(crate) struct FabricHosts {
    /// In topology order (= torchrun node rank).
    pub hosts: Vec<HostDesc>,
    /// Each host's network namespace, in the same order.
    pub netns: Vec<String>,
    /// The fabric's link MTU.
    pub mtu: u32,
    /// The time dilation the fabric came up with.
    pub dilation: Dilation,
    pub dcqcn: rocefab_contracts::dcqcn::DcqcnProfile,
    pub dcqcn_np: rocefab_contracts::dcqcn::NpSettings,
}

/// The hosts of a running fabric. Prints a warning for every host whose NIC agent does not
/// answer.
pub(crate) fn hosts_of(fabric: &str) -> anyhow::Result<FabricHosts> {
    let crate::fabric::Fabric { st, topo } = crate::fabric::Fabric::with_state(crate::fabric::load_state(fabric)?)?;
    let plan = compile(&topo, 0);
    let configured = topo.lldp.nic.classes();
    let hosts = host_descs(&topo, &plan, |h| {
        let (classes, warning) = host_classes(&st, h, configured);
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        classes
    })?;
    let netns = plan.hosts.iter().map(|h| h.netns.clone()).collect();
    if hosts.is_empty() {
        bail!("fabric {fabric} has no hosts");
    }
    // The switches run at the dilation of `up`, whatever the topology file says now.
    Ok(FabricHosts {
        hosts,
        netns,
        mtu: plan.mtu,
        dilation: st.clock()?.dilation(),
        dcqcn: topo.dcqcn,
        dcqcn_np: topo.dcqcn_np,
    })
}

/// The jobs' view of the plan's hosts, in topology order (= torchrun node rank): NICs with their
/// link rates and `classes(host)` (one per NIC), GPUs, NVLink, PXN, ports per NIC.
pub fn host_descs(
    topo: &Topology,
    plan: &crate::plan::Plan,
    mut classes: impl FnMut(&HostPlan) -> Vec<NicClasses>,
) -> anyhow::Result<Vec<HostDesc>> {
    let mut hosts = Vec::new();
    for h in &plan.hosts {
        let nics = h
            .nics
            .iter()
            .zip(classes(h))
            .map(|(n, classes)| {
                let rate = plan
                    .links
                    .iter()
                    .find(|l| {
                        (l.a.netns == h.netns && l.a.ifname == n.ifname)
                            || (l.b.netns == h.netns && l.b.ifname == n.ifname)
                    })
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
        hosts.push(HostDesc {
            name: h.name.clone(),
            gpus: topo.gpus_per_host,
            nics,
            nvlink: topo.nvlink,
            pxn: topo.pxn,
            ports: topo.nic_model.ports(),
        });
    }
    Ok(hosts)
}

/// How many unfinished QPs and errors the text report lists before "and N more".
const STALLS_SHOWN: usize = 64;

/// How many of a failed job's errors its final error line names.
const ERRORS_SHOWN: usize = 8;

/// The first [`ERRORS_SHOWN`] of `errors` joined with "; ", then how many more (a 512-rank
/// all-to-all that fails may have hundreds; the JSON report keeps every one).
fn first_errors(errors: &[String]) -> String {
    let mut s = errors.iter().take(ERRORS_SHOWN).map(String::as_str).collect::<Vec<_>>().join("; ");
    if errors.len() > ERRORS_SHOWN {
        s.push_str(&format!("; and {} more (`--json` lists them all)", errors.len() - ERRORS_SHOWN));
    }
    s
}

/// Where and what [`execute`] runs.
pub(crate) struct Launch<'a> {
    /// The job's name in messages (`allreduce`, `train`).
    pub what: &'a str,
    pub fabric: &'a str,
    /// Where the job files, logs and reports go.
    pub dir: &'a Path,
    pub hosts: &'a [HostDesc],
    /// Each host's namespace, in `hosts` order.
    pub netns: &'a [String],
    /// Each host's job, in `hosts` order.
    pub jobs: &'a [rocefab_contracts::job::Job],
    /// When the command started and when every wait ends (`--timeout`).
    pub started: Instant,
    pub deadline: Instant,
    pub timeout_s: u64,
    /// No progress lines on stderr (`--json`).
    pub quiet: bool,
}

/// What [`execute`] gives back.
pub(crate) struct Executed {
    /// Every report that came, by host.
    pub reports: Vec<(String, Report)>,
    pub timed_out: bool,
    /// The host that failed first and stopped the job, if one did.
    pub first_failure: Option<String>,
    /// Hosts that did not report, the first failure, processes not reaped.
    pub errors: Vec<String>,
    pub cpu_busy: Option<f64>,
    pub switches_before: Vec<rocefab_contracts::sample::SwitchSample>,
    pub switches_after: Vec<rocefab_contracts::sample::SwitchSample>,
    pub recording: Option<crate::timeline::Recording>,
}

/// Runs `l.jobs` on their hosts: a `rocefab-hostd` per host, started together once all are
/// ready and `before_go` returned (called right before they are told to go), their reports
/// collected by the deadline (hosts still running then report what they wait for), every
/// process reaped. `at_go` is called right after every host was told to go: the job's start on
/// this process's clock, as near the hosts' own start (each takes the line from its stdin) as
/// this process can see it.
pub(crate) fn execute(
    l: &Launch,
    hostd: &Path,
    timeline: Option<crate::timeline::RunTimeline>,
    before_go: impl FnOnce() -> anyhow::Result<()>,
    at_go: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<Executed> {
    let (dir, started, deadline) = (l.dir, l.started, l.deadline);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;

    let mut procs = Hostds::new();
    for ((h, ns), job) in l.hosts.iter().zip(l.netns).zip(l.jobs) {
        let path = dir.join(format!("{}.json", h.name));
        std::fs::write(&path, serde_json::to_vec(job)?).with_context(|| format!("writing {}", path.display()))?;
        let log = dir.join(format!("{}.log", h.name));
        let logf = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = ends_with_parent(&mut Command::new(hostd))
            .arg("--job")
            .arg(&path)
            .args(["--netns", ns, "--wait-go"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(logf)
            .spawn()
            .with_context(|| format!("starting {} for {}", hostd.display(), h.name))?;
        procs.push(h.name.clone(), child, log);
    }
    let ready_by = (started + READY_LIMIT).min(deadline);
    procs.wait_lines(1, ready_by);
    let mut not_ready = Vec::new();
    for p in &mut procs.procs {
        match p.lines.first() {
            Some(l) if l.contains("\"ready\":true") => {}
            Some(l) => not_ready.push(format!("{}: unexpected first line from rocefab-hostd: {l}", p.host)),
            None => {
                let w = format!("before it was ready (waited {:.1} s)", started.elapsed().as_secs_f64());
                not_ready.push(p.silence(&w));
            }
        }
    }
    if !not_ready.is_empty() {
        let what = if Instant::now() >= deadline {
            format!("timed out after {} s (--timeout) before the job started", l.timeout_s)
        } else {
            "hosts did not get ready".into()
        };
        bail!("{} {what}: {}", l.what, not_ready.join("; "));
    }
    if !l.quiet {
        let ranks: u32 = l.hosts.iter().map(|h| h.gpus).sum();
        eprintln!("{ranks} ranks on {} hosts ready; starting {}", procs.procs.len(), l.what);
        for line in l.hosts.iter().filter_map(classes_line) {
            eprintln!("{line}");
        }
    }
    let cpu_before = read_cpu_times();
    open_peak_windows(l.fabric, deadline);
    let switches_before = switch_samples(l.fabric, deadline);
    let limit = deadline.saturating_duration_since(Instant::now()) + REPORT_GRACE;
    let recording = timeline.map(|t| t.start(limit)).transpose()?;
    before_go()?;
    for p in &mut procs.procs {
        let mut s = p.stdin.take().expect("stdin");
        writeln!(s, "go").with_context(|| format!("starting {}", p.host))?;
    }
    at_go()?;
    // A host that failed (an errored QP, data that do not verify, a crash) means the job cannot
    // succeed, and its peers may wait for it until the timeout: stop the others at once.
    let failed =
        procs.wait_lines_or_failure(2, deadline, |l| serde_json::from_str::<Report>(l).map_or(true, |r| !r.ok));
    let after_s = started.elapsed().as_secs_f64();
    // Hosts still running at the deadline report what they were waiting for (SIGUSR1; SIGTERM
    // when another host failed first).
    let mut asked = Vec::new();
    let timed_out = failed.is_none() && procs.procs.iter().any(|p| p.lines.len() < 2 && !p.eof);
    for p in &mut procs.procs {
        if p.lines.len() < 2 && !p.eof {
            p.signal(if timed_out { libc::SIGUSR1 } else { libc::SIGTERM });
            asked.push(p.host.clone());
        }
    }
    if !asked.is_empty() {
        procs.wait_lines(2, Instant::now() + REPORT_GRACE);
    }
    let first_failure = failed.filter(|_| !asked.is_empty()).map(|i| {
        format!(
            "{} failed at {after_s:.1} s, so the job was stopped there: {} reported what they were waiting for",
            procs.procs[i].host,
            asked.join(", ")
        )
    });
    let mut reports = Vec::new();
    let mut missing = Vec::new();
    for p in &mut procs.procs {
        let Some(l) = p.lines.get(1).cloned() else {
            let w = if asked.contains(&p.host) {
                format!("without a report, also {} s after it was asked for one", REPORT_GRACE.as_secs())
            } else {
                "without a report".to_string()
            };
            missing.push(p.silence(&w));
            continue;
        };
        let r: Report = serde_json::from_str(&l).with_context(|| format!("{}: parsing the report {l:?}", p.host))?;
        // The host's full report (per-QP NAK/duplicate counters, host XDP and AF_XDP socket
        // drop counters, what unfinished QPs waited for) next to its job file, for diagnosis.
        let path = dir.join(format!("{}.report.json", p.host));
        std::fs::write(&path, &l).with_context(|| format!("writing {}", path.display()))?;
        reports.push((p.host.clone(), r));
    }
    // A host that did not answer the timeout's request for a report will not answer SIGTERM
    // either (stopped, or its data thread stuck).
    for p in procs.procs.iter_mut().filter(|p| p.lines.len() < 2) {
        p.signal(libc::SIGKILL);
    }
    let cpu_busy =
        read_cpu_times().zip(cpu_before).and_then(|(after, before)| bottleneck::busy_fraction(before, after));
    let switches_after = switch_samples(l.fabric, deadline + REPORT_GRACE);
    // Every host has reported (or timed out), so no peer waits for an ACK any more: end the
    // lingers, all at once, then reap.
    let unreaped = procs.stop();
    drop(procs);
    let mut errors = missing;
    errors.extend(first_failure.clone());
    errors.extend(unreaped);
    Ok(Executed { reports, timed_out, first_failure, errors, cpu_busy, switches_before, switches_after, recording })
}

/// The build options of job `name` on the fabric `f` with `s`, a `timeout` (s) and DCQCN on or off.
pub(crate) fn build_options(name: &str, f: &FabricHosts, s: &JobArgs, timeout: u64, dcqcn_on: bool) -> BuildOptions {
    let ipv6 = f.hosts.iter().flat_map(|h| h.nics.iter()).any(|n| n.ip.is_ipv6());
    let window_packets = s.window_packets.unwrap_or_else(|| default_window_packets(f.mtu, ipv6));
    let path_mtu = path_mtu_for_link(f.mtu, ipv6).map_or(1024, |m| m.bytes() as u64);
    let slowest = f.hosts.iter().flat_map(|h| h.nics.iter()).map(|n| n.line_rate_bps).min().unwrap_or(1);
    BuildOptions {
        job_name: name.into(),
        timeout_ms: timeout.saturating_mul(1000),
        seed_base: s.seed,
        metrics_port_base: Some(s.metrics_port_base),
        window_packets,
        retransmit_timeout_ns: s.retransmit_timeout_ms.map_or_else(
            || default_retransmit_timeout_for(f.dilation, u64::from(window_packets) * path_mtu, slowest),
            |ms| ms.saturating_mul(1_000_000),
        ),
        time_dilation: f.dilation.factor(),
        segment: s.segment.mode(),
        dcqcn: f.dcqcn,
        dcqcn_np: f.dcqcn_np,
        dcqcn_on,
    }
}

/// Refuses a job whose processes would not fit the machine before starting any of them (an
/// all-to-all over 512 ranks has 523,264 QP ends: the OOM killer would pick for us).
pub(crate) fn check_memory(what: &str, f: &FabricHosts, jobs: &[rocefab_contracts::job::Job]) -> anyhow::Result<()> {
    let ipv6 = f.hosts.iter().flat_map(|h| h.nics.iter()).any(|n| n.ip.is_ipv6());
    // A NIC's UMEM depends on the MTU only (its rings are fixed: `nic_memory`).
    let nic_umem = rocefab_contracts::memory::nic_memory(0, f.mtu).umem_bytes();
    let path_mtu = gpu_host::nic::engine::path_mtu_for_link(f.mtu, ipv6).map_or(f.mtu, |m| m.bytes());
    let need = crate::memory::job_need(jobs, nic_umem, path_mtu);
    let qp_ends = jobs.iter().map(|j| j.qps.len()).sum();
    let available = crate::memory::available()?.mem_available;
    crate::memory::check_job_fits(what, qp_ends, need, available).map_err(anyhow::Error::msg)
}

pub fn run(a: &RunArgs) -> anyhow::Result<()> {
    let baseline = if a.failover.compare {
        if !a.json {
            eprintln!("--compare: the job without the failure first");
        }
        let plain = RunArgs { timeline: Vec::new(), failover: Default::default(), ..a.clone() };
        let (rep, _) = run_job(&plain, None)?;
        Some(crate::failover::Baseline {
            ok: rep.ok,
            completion_ns: rep.completion_ns,
            retransmitted_packets: rep.retransmitted_packets,
        })
    } else {
        None
    };
    let armed = crate::failover::arm(&a.fabric, &a.failover)?;
    let (mut rep, dir) = run_job(a, armed)?;
    if let Some(f) = rep.failover.as_mut() {
        f.baseline = baseline;
    }
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&rep)?)?;
    let (out, err) = render_output(&rep, a.json)?;
    for l in err {
        eprintln!("{l}");
    }
    print!("{out}");
    let kind = a.collective.kind();
    if rep.timed_out {
        let hosts_stuck = rep.stalls.iter().map(|s| s.host.as_str()).collect::<std::collections::BTreeSet<_>>().len();
        bail!(
            "{} timed out after {} s (--timeout): {} QPs on {} hosts had not finished ({} of {} hosts reported){}",
            kind.name(),
            a.timeout,
            rep.stalls.len(),
            hosts_stuck,
            rep.hosts_reported,
            rep.hosts,
            if a.json {
                "; `stalls` in the JSON report says what each was waiting for"
            } else {
                "; what each was waiting for is listed above"
            }
        );
    }
    if !rep.ok {
        bail!("{} did not complete with verified data: {}", kind.name(), first_errors(&rep.errors));
    }
    Ok(())
}

/// Runs the job once (with the failure `armed` injects, if any): its report and its directory.
fn run_job(a: &RunArgs, armed: Option<crate::failover::Armed>) -> anyhow::Result<(RunReport, PathBuf)> {
    // Every step below that waits (readiness, the job, the reports) ends by this deadline.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(a.timeout);
    let kind = a.collective.kind();
    let fh = hosts_of(&a.fabric)?;
    let hostd = locate_hostd()?;
    let opts = build_options(&format!("{}-{}", a.fabric, kind.name()), &fh, &a.job, a.timeout, true);
    let mut built = collective_job::build(kind, &fh.hosts, a.size, &opts).context("building the collective")?;
    check_memory(&format!("{} on {}", kind.name(), a.fabric), &fh, &built.jobs)?;
    let FabricHosts { hosts, netns, mtu: link_mtu, dilation, .. } = fh;
    let ipv6 = hosts.iter().flat_map(|h| h.nics.iter()).any(|n| n.ip.is_ipv6());
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    let interval = Duration::from_millis(a.timeline_interval_ms);
    let timeline = crate::timeline::RunTimeline::prepare(
        &a.fabric,
        kind.name(),
        &a.timeline,
        a.timeline_port.as_deref(),
        interval,
        &names,
        &mut built.jobs,
    )?;
    let dir = rundir::dir(&a.fabric).join("jobs").join(kind.name());
    let launch = Launch {
        what: kind.name(),
        dir: &dir,
        hosts: &hosts,
        netns: &netns,
        jobs: &built.jobs,
        started,
        deadline,
        timeout_s: a.timeout,
        quiet: a.json,
        fabric: &a.fabric,
    };
    let switches_alive = live_switches(&a.fabric);
    let mut running = None;
    // The failure's clock starts once the hosts were told to go, as their job clocks do (a
    // cut stamped from before would read later than the hosts' view of it: 30 us emulated at
    // D 32 in a fresh-clone CI run, once the cut's own instant was exact).
    let executed = execute(
        &launch,
        &hostd,
        timeline,
        || Ok(()),
        || {
            running = armed.map(crate::failover::Armed::start).transpose()?;
            Ok(())
        },
    );
    // The injection ends (and the link is back) whatever became of the job.
    let failover = running.map(crate::failover::Running::finish).transpose();
    let Executed { reports, timed_out, first_failure, errors, cpu_busy, switches_before, switches_after, recording } =
        executed?;
    let failover = failover?;
    // The addresses the jobs were given, so the report and the hosts agree.
    let metrics = built.jobs.iter().filter_map(|j| j.metrics_listen).map(|l| format!("http://{l}/metrics")).collect();
    let mut rep =
        summarize(&a.fabric, kind.name(), a.job.segment, a.size, built.layout.world_size(), &reports, metrics);
    if let Some(r) = recording {
        for l in r.finish(Some(rep.completion_ns))? {
            eprintln!("{l}");
        }
    }
    rep.hosts = hosts.len();
    rep.hosts_reported = reports.len();
    rep.timed_out = timed_out;
    rep.watchdog = rocefab_contracts::sample::watchdog_use(&switches_before, &switches_after);
    // What the fabric did to the job leads its errors: the hosts only see retries run out.
    let causes = fabric_causes(&switches_alive, &rep.watchdog, failover.is_some());
    let failed = !errors.is_empty() || !rep.errors.is_empty() || reports.len() != hosts.len() || !rep.ok;
    let fabric_notes = if failed {
        rep.errors.splice(0..0, causes);
        Vec::new()
    } else {
        causes
    };
    rep.errors.extend(errors);
    rep.ok &= rep.errors.is_empty() && reports.len() == hosts.len();
    // Also for a job that failed or timed out (a machine that cannot keep up makes QPs exhaust
    // their retries), but then only from the CPUs: its senders were held by whatever stalled.
    // A failure injected (`--fail-link`) leaves senders waiting for their timeouts: not the
    // machine's doing.
    let ended_normally = !timed_out && first_failure.is_none() && reports.len() == hosts.len() && failover.is_none();
    rep.events = crate::fail::events_between(
        &a.fabric,
        rundir::unix_now_ns().saturating_sub(started.elapsed().as_nanos() as u64),
        rundir::unix_now_ns(),
    );
    rep.queues = rocefab_contracts::sample::queue_use(&switches_before, &switches_after, Some(rep.completion_ns));
    rep.pfc = rocefab_contracts::sample::pfc_use(&switches_before, &switches_after);
    rep.tx_stalls = rocefab_contracts::sample::port_stalls(&switches_before, &switches_after);
    rep.warnings = bottleneck::warnings(&bottleneck::Measured {
        time_dilation: dilation.factor(),
        // Rates averaged over a job that waited out a failure say nothing about the machine.
        cpu_busy: cpu_busy.filter(|_| failover.is_none()),
        nics: bottleneck::nic_use(&reports),
        senders_busy_throughout: kind != Kind::Broadcast
            && !(kind == Kind::AllReduce
                && bottleneck::ring_step_is_latency_bound(
                    a.size,
                    built.layout.world_size() as u64,
                    path_mtu_for_link(link_mtu, ipv6).map_or(1024, |m| m.bytes() as u64),
                ))
            && ended_normally,
        links: bottleneck::link_use(&switches_before, &switches_after, rep.completion_ns),
        stalls: rep.tx_stalls.clone(),
        job_ns: rep.completion_ns,
    });
    rep.warnings.extend(fabric_notes);
    rep.failover = failover;
    Ok((rep, dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::job::{NicReport, QpReport, RankReport};

    #[test]
    fn a_job_process_ends_when_the_thread_that_started_it_ends() {
        use std::os::unix::process::ExitStatusExt;
        // The starting thread ends at once; its child, which would sleep 30 s, gets SIGTERM.
        let mut child = std::thread::spawn(|| {
            ends_with_parent(Command::new("sleep").arg("30").stdout(Stdio::null())).spawn().unwrap()
        })
        .join()
        .unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > end {
                let _ = child.kill();
                panic!("the child outlived the thread that started it by 10 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");
        // Started from a thread that lives on, it runs to its end.
        let st = ends_with_parent(Command::new("sh").args(["-c", "exit 7"])).status().unwrap();
        assert_eq!(st.code(), Some(7));
    }

    #[test]
    fn a_failed_jobs_error_line_names_the_first_errors_and_counts_the_rest() {
        let errors: Vec<String> = (0..20).map(|i| format!("host{i}: retry count exceeded")).collect();
        let line = first_errors(&errors);
        assert!(line.starts_with("host0: retry count exceeded; host1: "), "{line}");
        assert!(line.contains("host7: retry count exceeded; and 12 more (`--json` lists them all)"), "{line}");
        assert!(!line.contains("host8:"), "{line}");
        assert_eq!(first_errors(&errors[..2]), "host0: retry count exceeded; host1: retry count exceeded");
    }

    #[test]
    fn metrics_port_base_help_says_host1_gets_the_base() {
        use clap::Args;
        let cmd = RunArgs::augment_args(clap::Command::new("run"));
        let arg = cmd.get_arguments().find(|a| a.get_long() == Some("metrics-port-base")).unwrap();
        let help = arg.get_long_help().or(arg.get_help()).unwrap().to_string();
        assert!(
            help.contains("host1 serves on 127.0.0.1:BASE, the n-th host of the fabric (host<n>) on BASE + n - 1"),
            "{help}"
        );
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
    fn migrated_qps_are_counted_by_cause_listed_in_time_order_and_in_the_json() {
        use rocefab_contracts::job::{Migration, MigrationCause};
        let moved = |qpn: u32, at_ns: u64, cause: MigrationCause| QpReport {
            qpn,
            nic: "gpu0p1".into(),
            label: format!("rank {qpn} -> rank 9"),
            migration: Some(Migration { from_nic: "gpu0p0".into(), at_ns, cause }),
            ..Default::default()
        };
        let host = |qps: Vec<QpReport>| Report { job: "j".into(), ok: true, qps, ..Default::default() };
        let hosts = vec![
            ("host1".to_string(), host(vec![moved(1, 300, MigrationCause::LinkDown), QpReport::default()])),
            ("host2".to_string(), host(vec![moved(2, 100, MigrationCause::PeerMigrated)])),
        ];
        let r = summarize("f", Kind::AllToAll.name(), Segment::FirstMiddleLast, 64, 0, &hosts, vec![]);
        assert_eq!(
            r.migrations.iter().map(|m| (m.host.as_str(), m.qpn)).collect::<Vec<_>>(),
            [("host2", 2), ("host1", 1)]
        );
        assert_eq!(
            (r.migrations[1].migration.from_nic.as_str(), r.migrations[1].to_nic.as_str()),
            ("gpu0p0", "gpu0p1")
        );
        let t = render_table(&r);
        assert!(
            t.contains("path migrations (APM, dual-port NICs): 2 QP ends moved to their alternate port (1 lost carrier on their port, 0 ran out of retries, 1 followed their peer)\n"),
            "{t}"
        );
        assert!(t.contains("  host1 0x1 (rank 1 -> rank 9): gpu0p0 -> gpu0p1 at "), "{t}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["migrations"][0]["cause"], "peer_migrated");
        assert_eq!(
            (json["migrations"][1]["from_nic"].as_str(), json["migrations"][1]["at_ns"].as_u64()),
            (Some("gpu0p0"), Some(300))
        );
        let none = summarize("f", Kind::AllToAll.name(), Segment::FirstMiddleLast, 64, 0, &[], vec![]);
        assert!(!render_table(&none).contains("path migrations"), "said only when a QP moved");
    }

    #[test]
    fn summary_aggregates_hosts_and_flags_unverified_ranks() {
        let host = |qpn: u32, peer: u32, ok: bool| Report {
            job: "j".into(),
            time_dilation: 8000.0,
            ok,
            error: None,
            nvlink_bytes: 0,
            milestones: Vec::new(),
            elapsed_ns: 2_000_000_000 + u64::from(qpn),
            qps: vec![
                QpReport {
                    qpn,
                    peer_qpn: peer,
                    nic: "gpu0".into(),
                    send_bytes: 10,
                    send_completed_bytes: 10,
                    retransmitted_packets: 3,
                    goodput_bps: Some(8e8),
                    ..Default::default()
                },
                QpReport {
                    qpn: qpn + 1,
                    peer_qpn: peer - 1,
                    nic: "gpu0".into(),
                    cnps_sent: 4,
                    out_of_order: 5,
                    naks_sent: 1,
                    ..Default::default()
                },
            ],
            nics: vec![NicReport {
                name: "gpu0".into(),
                cnps_sent: 4,
                cnps_received: 2,
                pfc_paused_ns_prio3: 1_000_000,
                ..Default::default()
            }],
            ranks: vec![RankReport {
                rank: qpn,
                complete: true,
                verified: Some(ok),
                first_mismatch: (!ok).then_some(8),
                waiting_for: None,
            }],
            stalls: vec![],
        };
        let hosts =
            vec![("host1".to_string(), host(0x100, 0x103, true)), ("host2".to_string(), host(0x102, 0x101, true))];
        let r = summarize("f", Kind::AllReduce.name(), Segment::WriteOnly, 64, 2, &hosts, vec![]);
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
        assert_eq!(
            (json["out_of_order_packets"].as_u64(), json["qps"][0]["out_of_order_at_peer"].as_u64()),
            (Some(10), Some(5))
        );
        let mut w = r.clone();
        w.warnings.push("raise time_dilation".into());
        assert!(render_table(&w).contains("\nwarning: raise time_dilation\n"));
        assert!(t.contains("0.800"), "goodput in Gb/s: {t}");

        let bad =
            vec![("host1".to_string(), host(0x100, 0x103, true)), ("host2".to_string(), host(0x102, 0x101, false))];
        let r = summarize("f", Kind::AllReduce.name(), Segment::FirstMiddleLast, 64, 2, &bad, vec![]);
        assert!(!r.ok);
        assert!(
            r.errors.iter().any(|e| e.contains("host2: rank 258 not verified (first wrong byte Some(8))")),
            "{:?}",
            r.errors
        );
    }

    #[test]
    fn a_timed_out_report_lists_the_stuck_qps_and_ranks() {
        let stall = QpStall {
            qpn: 0x101,
            peer_qpn: 0x102,
            nic: "gpu0".into(),
            label: "rank 2 to rank 0".into(),
            role: "requester".into(),
            last_acked_psn: Some(4_000),
            outstanding_psns: Some((4_001, 4_128)),
            outstanding_packets: 128,
            timeouts: 3,
            retries_left: 4,
            paused_now: true,
            last_progress_ns: Some(1_500_000),
            at_ns: 9_500_000,
            waiting_for: "the ACK of PSN 4001 (its priority is paused by PFC)".into(),
            ..Default::default()
        };
        let host = Report {
            job: "j".into(),
            time_dilation: 1.0,
            error: Some("timed out (the controller's deadline passed)".into()),
            ranks: vec![RankReport {
                rank: 2,
                waiting_for: Some("transfer 7 on QP 0x103 (rank 1 to rank 2): 3 of 16 packets".into()),
                ..Default::default()
            }],
            stalls: vec![stall],
            ..Default::default()
        };
        let mut r = summarize(
            "f",
            Kind::Incast.name(),
            Segment::FirstMiddleLast,
            64,
            2,
            &[("host2".to_string(), host)],
            vec![],
        );
        r.timed_out = true;
        assert!(!r.ok);
        assert_eq!(r.stalls.len(), 1);
        assert!(
            r.errors.iter().any(|e| e
                == "host2: rank 2 incomplete, waiting for transfer 7 on QP 0x103 (rank 1 to rank 2): 3 of 16 packets"),
            "{:?}",
            r.errors
        );
        let t = render_table(&r);
        assert!(t.starts_with("TIMED OUT incast on fabric f"), "{t}");
        assert!(
            t.contains("\nhost2: QP 0x101 requester (rank 2 to rank 0) on gpu0: the ACK of PSN 4001 (its priority is paused by PFC); last acked PSN 4000, outstanding PSNs 4001..=4128 (128), 0 unsent, 3 timeouts (4 retries left), paused by PFC now, last progress at 1.500 ms (8.000 ms before the report)\n"),
            "{t}"
        );
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["timed_out"], true);
        assert_eq!(
            (j["stalls"][0]["host"].as_str(), j["stalls"][0]["last_acked_psn"].as_u64()),
            (Some("host2"), Some(4_000))
        );
        assert_eq!(j["stalls"][0]["outstanding_psns"], serde_json::json!([4001, 4128]));
        assert_eq!(j["stalls"][0]["paused_now"], true);
    }

    /// A child that prints `ready`, ignores SIGTERM and never reports, and one that exits at once.
    #[test]
    fn hostds_that_hang_or_ignore_sigterm_end_within_bounds() {
        let log = std::env::temp_dir().join(format!("rocefab-run-test-{}.log", std::process::id()));
        std::fs::write(&log, "setting up\n").unwrap();
        let spawn = |script: &str| {
            Command::new("sh").args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap()
        };
        let mut h = Hostds::new();
        h.push("host1".into(), spawn("trap '' TERM; echo ready; exec sleep 60"), log.clone());
        h.push("host2".into(), spawn("exit 3"), log.clone());
        let t = Instant::now();
        // The first wait returns early when host2's end arrives before host1's line (an early
        // end is a failure the caller acts on); the second then waits for host1 alone.
        h.wait_lines(1, t + Duration::from_secs(20));
        h.wait_lines(1, t + Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(5), "returns once each answered or ended: {:?}", t.elapsed());
        assert_eq!(h.procs[0].lines, ["ready"]);
        assert!(h.procs[1].eof && h.procs[1].lines.is_empty());
        let t = Instant::now();
        h.wait_lines(2, t + Duration::from_millis(300));
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_millis(1300), "{waited:?}");
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end && !matches!(h.procs[1].child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let why = h.procs[1].silence("without a report");
        assert!(why.starts_with("host2: rocefab-hostd exited with code 3 without a report (log "), "{why}");
        assert!(why.ends_with(": setting up)"), "{why}");
        assert!(h.procs[0].silence("x").starts_with("host1: rocefab-hostd gave no answer x"));
        // SIGTERM is ignored: SIGKILL after EXIT_GRACE ends it.
        let t = Instant::now();
        assert!(h.stop().is_empty());
        let took = t.elapsed();
        assert!(took >= EXIT_GRACE && took < EXIT_GRACE + Duration::from_secs(2), "{took:?}");
        let st = h.procs[0].child.try_wait().unwrap().expect("reaped");
        assert!(
            crate::fabric::process::describe_exit(st, || Some(false)).starts_with("was killed by signal 9 (SIGKILL)")
        );
        let _ = std::fs::remove_file(&log);
    }

    /// One host fails while another would wait for it until the timeout: the wait ends with the
    /// failure, not at the deadline.
    #[test]
    fn waiting_for_reports_ends_at_the_first_failure() {
        let spawn = |script: &str| {
            Command::new("sh").args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap()
        };
        let log = PathBuf::from("/nonexistent");
        let mut h = Hostds::new();
        h.push("host1".into(), spawn("echo ready; exec sleep 60"), log.clone());
        h.push("host2".into(), spawn("echo ready; sleep 0.2; echo failed; exec sleep 60"), log.clone());
        let t = Instant::now();
        let first = h.wait_lines_or_failure(2, t + Duration::from_secs(30), |l| l == "failed");
        assert_eq!(first, Some(1));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // A host that ends without its report is a failure too.
        let mut h = Hostds::new();
        h.push("host1".into(), spawn("echo ready; exec sleep 60"), log.clone());
        h.push("host2".into(), spawn("echo ready; exit 1"), log);
        let t = Instant::now();
        assert_eq!(h.wait_lines_or_failure(2, t + Duration::from_secs(30), |_| false), Some(1));
        assert!(t.elapsed() < Duration::from_secs(5));
        // Without failures it waits until the deadline.
        let t = Instant::now();
        assert_eq!(h.wait_lines_or_failure(2, t + Duration::from_millis(300), |_| false), None);
        assert!(t.elapsed() >= Duration::from_millis(300));
    }

    /// `cargo xtask demo` printed the machine-bound warning twice: on stderr and in the table.
    #[test]
    fn each_warning_is_printed_once() {
        let mut r = summarize("f", Kind::AllReduce.name(), Segment::FirstMiddleLast, 64, 0, &[], vec![]);
        r.warnings = vec!["the machine, not the model, was the bottleneck: raise time_dilation".into()];
        let count = |(out, err): (String, Vec<String>)| (out + &err.join("\n")).matches("was the bottleneck").count();
        assert_eq!(count(render_output(&r, false).unwrap()), 1, "table");
        let (out, err) = render_output(&r, true).unwrap();
        assert_eq!(err, ["warning: the machine, not the model, was the bottleneck: raise time_dilation"]);
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(j["warnings"].as_array().unwrap().len(), 1);
    }
}
