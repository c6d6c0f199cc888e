//! The report of a job: per-QP and per-NIC lines summed over the hosts' reports, stalls,
//! migrations, the causes the fabric gives, as a table or JSON.
use std::path::PathBuf;

use rocefab_contracts::job::{QpStall, Report};
use serde::Serialize;

use crate::job::Segment;

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
    /// What the model expects of the job if the machine kept up ([`crate::job::expect`]):
    /// `None` when it cannot say (routes from BGP, no collective).
    pub expected: Option<crate::job::expect::Expectation>,
    /// `first-middle-last` or `write-only` (`--segment`; RoCEv2 only).
    pub segment: String,
    /// `rocev2` or `uet` (`--transport`).
    pub transport: String,
    /// UET runs: the PDCs' totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uet: Option<UetTotals>,
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
    /// Signs that the machine, not the model, limited the run ([`crate::job::bottleneck`]).
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
    /// Switch ports whose AF_XDP socket lost frames in the kernel during the job, before the data
    /// plane took them (the machine's doing: a lossless fabric loses nothing in the model).
    pub kernel_rx_lost: Vec<rocefab_contracts::sample::PortLoss>,
    /// Egress port priorities whose PFC watchdog declared a storm or dropped frames during the
    /// job.
    pub watchdog: Vec<rocefab_contracts::sample::WatchdogUse>,
    /// The fabric's events (failures, restores: `rocefab events`) while the job ran.
    pub events: Vec<String>,
    /// The failure `--fail-link` injected, measured ([`crate::job::failover`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failover: Option<crate::job::failover::Failover>,
}

/// The totals of a UET run's PDCs ([`rocefab_contracts::job::PdcReport`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct UetTotals {
    /// Trimmed packets the receivers saw (each NACKed).
    pub trimmed_received: u64,
    /// NACKs for trimmed packets the senders received, and others.
    pub nacks_trimmed: u64,
    pub nacks_other: u64,
    /// Packets sent again on a NACK, and on a timeout.
    pub retransmitted_on_nack: u64,
    pub retransmitted_on_timeout: u64,
    /// Congestion window cuts (ECN-marked ACKs, trims, timeouts).
    pub window_cuts: u64,
    /// Packets dropped by receivers (outside the window, before a SYN).
    pub dropped: u64,
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
        expected: None,
        segment: segment.name().into(),
        transport: "rocev2".into(),
        uet: None,
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
        kernel_rx_lost: Vec::new(),
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
            if let Some(p) = &q.pdc {
                r.transport = "uet".into();
                let u = r.uet.get_or_insert_with(UetTotals::default);
                u.trimmed_received += p.trimmed_received;
                u.nacks_trimmed += p.nacks_trimmed;
                u.nacks_other += p.nacks_other;
                u.retransmitted_on_nack += p.retransmitted_on_nack;
                u.retransmitted_on_timeout += p.retransmitted_on_timeout;
                u.window_cuts += p.window_cuts;
                u.dropped += p.dropped;
            }
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
        if r.uet.is_some() { "UET RUD" } else { r.segment.as_str() },
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
    if let Some(u) = &r.uet {
        s += &format!(
            "UET: trimmed packets received {} (NACKed), NACKs received {} for trims / {} other, sent again {} on NACK / {} on timeout, window cuts {}, dropped by receivers {}\n",
            u.trimmed_received,
            u.nacks_trimmed,
            u.nacks_other,
            u.retransmitted_on_nack,
            u.retransmitted_on_timeout,
            u.window_cuts,
            u.dropped
        );
    }
    if let Some(e) = &r.expected {
        s += &format!(
            "the model expects {} if the machine keeps up (measured {:.2} times that): critical path {}, busiest link {} ({})\n",
            duration(e.completion_ns),
            r.completion_ns as f64 / e.completion_ns.max(1) as f64,
            duration(e.critical_path_ns),
            duration(e.busiest_link_ns),
            e.busiest_link
        );
    }
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
    for l in r.failover.iter().flat_map(crate::job::failover::render) {
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

/// The fabric's part in a job: the switch daemons of `alive_before` that died during it, the one
/// whose log changed first named first (with the log's last line), unless a failure was injected
/// (`injected`: the switches it stopped are its doing); then every PFC watchdog storm. Switches
/// that shared the dead process (`up --switch-workers`) are named together, once.
pub fn fabric_causes(
    alive_before: &[(String, u32, PathBuf)],
    wd: &[rocefab_contracts::sample::WatchdogUse],
    injected: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if !injected {
        // Dead processes in the order they were first named, each with its switches.
        let mut procs: Vec<(u32, &PathBuf, Vec<&str>)> = Vec::new();
        for (sw, pid, log) in alive_before.iter().filter(|(_, pid, _)| !crate::fabric::daemons::pid_alive(*pid)) {
            match procs.iter_mut().find(|p| p.0 == *pid) {
                Some(p) => p.2.push(sw),
                None => procs.push((*pid, log, vec![sw.as_str()])),
            }
        }
        let mut dead: Vec<(std::time::SystemTime, String)> = procs
            .into_iter()
            .map(|(pid, log, switches)| {
                // A process of many switches writes its own last words (a panic) in its log.
                let log = if switches.len() > 1 { crate::fabric::daemons::shared_switch_log(log) } else { log.clone() };
                let changed = std::fs::metadata(&log).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
                let last = std::fs::read_to_string(&log)
                    .ok()
                    .and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_string))
                    .map_or_else(String::new, |l| format!("; its log ends: {}", l.trim()));
                let who = match switches[..] {
                    [one] => format!("switch {one} (rocefab-switchd pid {pid})"),
                    ref many => format!("switches {} (their shared rocefab-switchd, pid {pid})", many.join(", ")),
                };
                (changed, format!("{who} died during the job{last}"))
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

/// How many unfinished QPs and errors the text report lists before "and N more".
const STALLS_SHOWN: usize = 64;

/// How many of a failed job's errors its final error line names.
const ERRORS_SHOWN: usize = 8;

/// The first [`ERRORS_SHOWN`] of `errors` joined with "; ", then how many more (a 512-rank
/// all-to-all that fails may have hundreds; the JSON report keeps every one).
pub fn first_errors(errors: &[String]) -> String {
    let mut s = errors.iter().take(ERRORS_SHOWN).map(String::as_str).collect::<Vec<_>>().join("; ");
    if errors.len() > ERRORS_SHOWN {
        s.push_str(&format!("; and {} more (`--json` lists them all)", errors.len() - ERRORS_SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_host::nic::collective_job::Kind;
    use rocefab_contracts::job::{NicReport, QpReport, RankReport};

    /// Issue 41: switches that shared a process that died are named together, once; a switch
    /// with its own dead process alone; live ones not at all.
    #[test]
    fn dead_switch_processes_are_named_once_with_their_switches() {
        let dir = tempfile::tempdir().unwrap();
        let log = |sw: &str| dir.path().join(format!("{sw}.log"));
        // The shared process's panic is in its log, not in its switches' own.
        std::fs::write(dir.path().join("switches.log"), "starting\nworker 0 panicked\n\n").unwrap();
        for sw in ["rail1", "spine1", "spine2"] {
            std::fs::write(log(sw), format!("{sw}: port carrier changed\n")).unwrap();
        }
        std::fs::write(log("spine9"), "killed\n").unwrap();
        let dead = |n: usize| -> Vec<u32> {
            let mut c: Vec<_> = (0..n).map(|_| std::process::Command::new("true").spawn().unwrap()).collect();
            c.iter_mut().map(|c| c.wait().map(|_| c.id()).unwrap()).collect()
        };
        let [shared, own] = dead(2)[..] else { unreachable!() };
        let live = std::process::id();
        let before: Vec<(String, u32, PathBuf)> =
            [("rail1", shared), ("rail2", live), ("spine1", shared), ("spine9", own), ("spine2", shared)]
                .into_iter()
                .map(|(s, p)| (s.to_string(), p, log(s)))
                .collect();
        let causes = fabric_causes(&before, &[], false);
        assert_eq!(causes.len(), 2, "{causes:#?}");
        let shared_line = format!(
            "switches rail1, spine1, spine2 (their shared rocefab-switchd, pid {shared}) died during the job; its log ends: worker 0 panicked"
        );
        assert!(causes.iter().any(|c| c.starts_with(&shared_line)), "{causes:#?}");
        let own_line = format!("switch spine9 (rocefab-switchd pid {own}) died during the job; its log ends: killed");
        assert!(causes.iter().any(|c| c.starts_with(&own_line)), "{causes:#?}");
        assert!(!causes.iter().any(|c| c.contains("rail2")), "{causes:#?}");
        assert!(fabric_causes(&before, &[], true).is_empty(), "an injected failure's switches are not causes");
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
            started_unix_ns: 0,
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
