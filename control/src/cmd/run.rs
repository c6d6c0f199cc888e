//! `rocefab run [fabric] incast|alltoall|allreduce|broadcast --size 64MiB [--segment write-only]
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
//! run ([`crate::job::bottleneck`]: CPUs saturated while links sat below rate, or senders slow with
//! nothing in the model holding them back), the run warns on stderr and in `warnings`.
//!
//! Every NIC marks and honours the classes its host's NIC agent (`rocefab-nicd`) negotiated
//! with the switch port by DCBX ([`gpu_host::nic::agent::classes_from`] on the agent's
//! `GET /lldp`); without an answering agent, the topology's `lldp.nic` classes.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use gpu_host::nic::collective_job::{self, Kind};
use gpu_host::nic::engine::path_mtu_for_link;

use crate::fabric::rundir::{self};
use crate::job::bottleneck;
use crate::job::hosts::build_options;
use crate::job::hosts::check_memory;
use crate::job::hosts::hosts_of;
use crate::job::hosts::FabricHosts;
use crate::job::launch::execute;
use crate::job::launch::live_switches;
use crate::job::launch::locate_hostd;
use crate::job::launch::Executed;
use crate::job::launch::Launch;
use crate::job::parse_size;
use crate::job::report::fabric_causes;
use crate::job::report::first_errors;
use crate::job::report::render_output;
use crate::job::report::summarize;
use crate::job::report::RunReport;
use crate::job::JobArgs;

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

/// Arguments of `rocefab run`.
#[derive(clap::Args, Debug, Clone)]
#[command(override_usage = "rocefab run [FABRIC] <COLLECTIVE> [OPTIONS]")]
pub struct RunArgs {
    /// `[FABRIC] COLLECTIVE`: the fabric (default: the only running one, as every command
    /// names it) and the collective: incast, alltoall, allreduce or broadcast.
    #[arg(value_names = ["FABRIC", "COLLECTIVE"], num_args = 1..=2, required = true)]
    pub at: Vec<String>,
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
    #[arg(long, value_name = "FILE", value_parser = crate::job::timeline::parse_output)]
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
    pub failover: crate::job::failover::FailoverArgs,
}

/// What `rocefab run`'s `[FABRIC] COLLECTIVE` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub fabric: String,
    pub collective: Collective,
}

impl RunArgs {
    /// The fabric (the only one running when not named) and the collective.
    pub fn target(&self) -> anyhow::Result<Target> {
        let (fabric, collective) = self.words()?;
        Ok(Target { fabric: crate::fabric::pick_fabric(fabric)?, collective })
    }

    /// `[FABRIC] COLLECTIVE` as given: the fabric, if named, and the collective.
    fn words(&self) -> anyhow::Result<(Option<&str>, Collective)> {
        let (fabric, word) = crate::text::fabric_and_node(&self.at, None, "COLLECTIVE")?;
        let collective = <Collective as clap::ValueEnum>::from_str(word, true)
            .map_err(|_| anyhow::anyhow!("{word:?} is not a collective: incast, alltoall, allreduce or broadcast"))?;
        Ok((fabric, collective))
    }
}

pub fn run(a: &RunArgs) -> anyhow::Result<()> {
    let t = a.target()?;
    let baseline = if a.failover.compare {
        if !a.json {
            eprintln!("--compare: the job without the failure first");
        }
        let plain = RunArgs { timeline: Vec::new(), failover: Default::default(), ..a.clone() };
        let (rep, _) = run_job(&plain, &t, None)?;
        Some(crate::job::failover::Baseline {
            ok: rep.ok,
            completion_ns: rep.completion_ns,
            retransmitted_packets: rep.retransmitted_packets,
        })
    } else {
        None
    };
    let armed = crate::job::failover::arm(&t.fabric, &a.failover)?;
    let (mut rep, dir) = run_job(a, &t, armed)?;
    if let Some(f) = rep.failover.as_mut() {
        f.baseline = baseline;
    }
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&rep)?)?;
    let (out, err) = render_output(&rep, a.json)?;
    for l in err {
        eprintln!("{l}");
    }
    print!("{out}");
    let kind = t.collective.kind();
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
fn run_job(
    a: &RunArgs,
    t: &Target,
    armed: Option<crate::job::failover::Armed>,
) -> anyhow::Result<(RunReport, PathBuf)> {
    // Every step below that waits (readiness, the job, the reports) ends by this deadline.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(a.timeout);
    let kind = t.collective.kind();
    let fh = hosts_of(&t.fabric)?;
    let hostd = locate_hostd()?;
    let opts = build_options(&format!("{}-{}", t.fabric, kind.name()), &fh, &a.job, a.timeout, true);
    let mut built = collective_job::build(kind, &fh.hosts, a.size, &opts).context("building the collective")?;
    check_memory(&format!("{} on {}", kind.name(), t.fabric), &fh, &built.jobs)?;
    let FabricHosts { hosts, netns, mtu: link_mtu, dilation, .. } = fh;
    let ipv6 = hosts.iter().flat_map(|h| h.nics.iter()).any(|n| n.ip.is_ipv6());
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    let interval = Duration::from_millis(a.timeline_interval_ms);
    let timeline = crate::job::timeline::RunTimeline::prepare(
        &t.fabric,
        kind.name(),
        &a.timeline,
        a.timeline_port.as_deref(),
        interval,
        &names,
        &mut built.jobs,
    )?;
    let dir = rundir::dir(&t.fabric).join("jobs").join(kind.name());
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
        fabric: &t.fabric,
        host_workers: a.job.host_workers.resolve_hosts(
            crate::workers::available_cores(),
            hosts.len(),
            built.jobs.iter().map(|j| j.qps.len()).max().unwrap_or(0),
        ),
    };
    let switches_alive = live_switches(&t.fabric);
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
            running = armed.map(crate::job::failover::Armed::start).transpose()?;
            Ok(())
        },
    );
    // The injection ends (and the link is back) whatever became of the job.
    let failover = running.map(crate::job::failover::Running::finish).transpose();
    let Executed { reports, timed_out, first_failure, errors, cpu_busy, switches_before, switches_after, recording } =
        executed?;
    let failover = failover?;
    // The addresses the jobs were given, so the report and the hosts agree.
    let metrics = built.jobs.iter().filter_map(|j| j.metrics_listen).map(|l| format!("http://{l}/metrics")).collect();
    let mut rep =
        summarize(&t.fabric, kind.name(), a.job.segment, a.size, built.layout.world_size(), &reports, metrics);
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
    rep.events = crate::fabric::events::events_between(
        &t.fabric,
        rundir::unix_now_ns().saturating_sub(started.elapsed().as_nanos() as u64),
        rundir::unix_now_ns(),
    );
    rep.queues = rocefab_contracts::sample::queue_use(&switches_before, &switches_after, Some(rep.completion_ns));
    rep.pfc = rocefab_contracts::sample::pfc_use(&switches_before, &switches_after);
    rep.tx_stalls = rocefab_contracts::sample::port_stalls(&switches_before, &switches_after);
    rep.kernel_rx_lost = rocefab_contracts::sample::kernel_rx_losses(&switches_before, &switches_after);
    rep.expected = crate::fabric::Fabric::open(Some(&t.fabric)).ok().and_then(|f| {
        let switches: Vec<_> = f.plan().switches.iter().map(|s| s.config.clone()).collect();
        crate::job::expect::expect(&switches, &names, &built.jobs)
    });
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
        kernel_rx_lost: rep.kernel_rx_lost.clone(),
        // Judged for the ring AllReduce only, whose every NIC sends one transfer at a time: there
        // the bound is tight (rail-spine at D 16: 1.07). An all-to-all's NICs interleave many
        // QPs, each behind its own window and ACKs, which the bound does not model: the shared-NIC
        // all-to-all at D 100 took 1.30 times it in a CI run with every CPU to spare.
        expected_ns: rep
            .expected
            .as_ref()
            .filter(|_| ended_normally && kind == Kind::AllReduce)
            .map(|e| e.completion_ns),
        job_ns: rep.completion_ns,
    });
    rep.warnings.extend(fabric_notes);
    if let Some(f) = &failover {
        on_failover_clock(&mut rep.migrations, &reports, f.started_unix_ns, dilation.factor());
    }
    rep.failover = failover;
    Ok((rep, dir))
}

/// Puts the hosts' migrations on the failure injection's clock (started at Unix ns `go_unix`):
/// each host's times count from its own go, which a loaded machine gives it up to a few ms
/// apart from the injection's (a QP moved 20 µs emulated "before" the cut at D 32 in a
/// fresh-clone CI run). A host that did not say when it started keeps its times.
fn on_failover_clock(
    migrations: &mut [crate::job::report::MigrationLine],
    reports: &[(String, rocefab_contracts::job::Report)],
    go_unix: u64,
    dilation: f64,
) {
    let starts: std::collections::HashMap<&str, u64> =
        reports.iter().filter(|(_, r)| r.started_unix_ns > 0).map(|(h, r)| (h.as_str(), r.started_unix_ns)).collect();
    for m in migrations.iter_mut() {
        if let Some(&s) = starts.get(m.host.as_str()) {
            let shift = (s as i64 - go_unix as i64) as f64 / dilation.max(1.0);
            m.migration.at_ns = (m.migration.at_ns as f64 + shift).max(0.0).round() as u64;
        }
    }
    migrations.sort_by(|a, b| (a.migration.at_ns, &a.host, a.qpn).cmp(&(b.migration.at_ns, &b.host, b.qpn)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_put_on_the_failure_injections_clock() {
        use crate::job::report::MigrationLine;
        use rocefab_contracts::job::{Migration, Report};
        let line = |host: &str, at_ns| MigrationLine {
            host: host.into(),
            qpn: 1,
            label: String::new(),
            to_nic: "gpu0p1".into(),
            migration: Migration {
                from_nic: "gpu0p0".into(),
                at_ns,
                cause: rocefab_contracts::job::MigrationCause::LinkDown,
            },
        };
        // At D 32: host1 started 640 µs of wall clock (20 µs emulated) after the injection,
        // host2 320 µs before it; host3 did not say.
        let go = 1_000_000_000_000u64;
        let reports = vec![
            ("host1".to_string(), Report { started_unix_ns: go + 640_000, ..Default::default() }),
            ("host2".to_string(), Report { started_unix_ns: go - 320_000, ..Default::default() }),
            ("host3".to_string(), Report::default()),
        ];
        let mut m = vec![line("host1", 3_079_930), line("host2", 3_000_000), line("host3", 5)];
        on_failover_clock(&mut m, &reports, go, 32.0);
        let got: Vec<(&str, u64)> = m.iter().map(|l| (l.host.as_str(), l.migration.at_ns)).collect();
        assert_eq!(got, [("host3", 5), ("host2", 2_990_000), ("host1", 3_099_930)]);
    }

    /// Issue 40: `rocefab run` names the fabric as every command does, first and optional.
    #[test]
    fn the_fabric_comes_first_and_may_be_left_out() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            a: RunArgs,
        }
        let words = |line: &[&str]| {
            let cli =
                Cli::try_parse_from(std::iter::once("run").chain(line.iter().copied())).map_err(|e| e.to_string())?;
            cli.a.words().map(|(f, c)| (f.map(str::to_string), c)).map_err(|e| e.to_string())
        };
        assert_eq!(words(&["incast", "--size", "4MiB"]), Ok((None, Collective::Incast)));
        assert_eq!(words(&["rs", "allreduce"]), Ok((Some("rs".into()), Collective::Allreduce)));
        assert!(words(&["rs", "allgather"]).unwrap_err().contains("\"allgather\" is not a collective"));
        assert!(words(&["rs", "incast", "x"]).is_err(), "three words");
        assert!(words(&[]).is_err(), "no collective");
    }
}
