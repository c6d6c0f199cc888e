//! The GPU-host emulator `rocefab-hostd` (its binary only parses the arguments and calls
//! [`run`], or [`crate::hosts::run`] for `--hosts`): the emulated RDMA NICs of one GPU host, run inside the host's network
//! namespace. Reads a job file (QPs, PSNs, R_Keys, data seeds chosen by the controller),
//! attaches the host XDP program to every NIC veth, opens one AF_XDP socket per NIC, runs the
//! RoCEv2 RC engine on a dedicated data thread until every QP has finished (or the timeout),
//! and prints one JSON report on stdout (after a `{"ready":...}` line once the sockets are up).
//! Prometheus metrics (and `GET /sample`, [`rocefab_contracts::host_sample`]) are served on `metrics_listen`
//! when the job sets it.
//!
//! Emulated time: the job's line rates and timers are emulated with a `time_dilation` D; the
//! engine ([`gpu_host::nic::engine::Engine::from_job`]) runs them D times slower on the wall
//! clock, and the report and metrics are in emulated time. `timeout_ms`/`linger_ms` are wall.
//!
//! After the report, a job that finished keeps its QPs up for `linger_ms` or until SIGTERM /
//! SIGINT (`rocefab run` stops every hostd once all have reported): a peer whose final ACK was
//! lost retransmits, and this host answers the duplicate with an ACK again, as a real RC QP
//! does until it is destroyed.
//!
//! With `--netns`, the host's NIC agent (`rocefab-nicd`) may be capturing its NICs: hostd maps
//! the agent's mirror ring ([`crate::mirror`], `/dev/shm/rocefab-<netns>-nicmirror`) and
//! the data thread copies the frames of captured NICs into it. Without the ring (no nicd, e.g.
//! in tests) nothing is mirrored.
//!
//! SIGUSR1 means "the job timed out" (`rocefab run` sends it at its `--timeout`): the data
//! thread ends at once and the report, marked as a timeout, says what every unfinished QP was
//! waiting for (`stalls`: last PSN acknowledged, PSNs outstanding, timeouts and retries left,
//! PFC pause, last progress) and what every incomplete rank waited for. Should the data thread
//! not stop within [`STOP_GRACE`], hostd prints its last snapshot (at most
//! `snapshot_interval_ms` old), says so in the error, and exits.
//!
//! Exit status: 0 when the report says `ok`, 1 otherwise (including errors).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use gpu_host::nic::engine::{path_mtu_for_link, Engine};
use gpu_host::segment::PathMtu;
use nix::sys::signal::Signal;
use rocefab_contracts::job::{Job, Report};
use rocefab_plumbing::daemon::Signals;
use rocefab_plumbing::host_loader::{counter, HostXdp, DROP_NTH_PROGRAM_NAME, PROGRAM_NAME};

use crate::daemon::{self, Clock, Exit, Host};
use crate::links::LinkWatch;
use crate::metrics::Metrics;
use crate::mirror::{self, MirrorError, MirrorProducer};
use crate::xsk::XskPort;

/// `rocefab-hostd`'s command line: one host's job (`--job`), or the jobs of many hosts in one
/// process (`--hosts`, [`crate::hosts`]).
#[derive(Parser, Debug)]
#[command(name = "rocefab-hostd", about = "rocefab GPU-host emulator: AF_XDP RoCEv2 NICs running one job")]
pub struct Args {
    /// Job file (JSON) of one host.
    #[arg(long, required_unless_present = "hosts")]
    pub job: Option<PathBuf>,
    /// Hosts file (JSON: workers, and each host's name, namespace, job file and log): every
    /// host's NICs in this one process, its lines on stdout prefixed with its name and a tab.
    #[arg(long, conflicts_with_all = ["job", "report", "netns"])]
    pub hosts: Option<PathBuf>,
    /// Also write the report to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Enter this network namespace (`ip netns` name) after binding the metrics listener in
    /// the current one, so the controller can scrape it from the root namespace.
    #[arg(long)]
    pub netns: Option<String>,
    /// After the ready line, wait for a line on stdin before sending anything (the controller
    /// starts every host of a job at once).
    #[arg(long)]
    pub wait_go: bool,
}

pub(crate) static STOP: AtomicBool = AtomicBool::new(false);
/// Ends the linger once the program is detached (raised by the main thread after SIGTERM).
pub(crate) static SERVE_STOP: AtomicBool = AtomicBool::new(false);
/// SIGUSR1 arrived: the controller's deadline for the job passed.
pub(crate) static TIMED_OUT: AtomicBool = AtomicBool::new(false);

/// How long the main thread waits for the data thread's report after a stop signal before it
/// prints the last snapshot instead.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

fn on_signal(sig: Signal) {
    if sig == Signal::SIGUSR1 {
        TIMED_OUT.store(true, Ordering::Relaxed);
    }
    STOP.store(true, Ordering::Relaxed);
}

/// The daemon's logging: to stderr (no colour codes unless it is a terminal: `rocefab run` sends
/// stderr to a log file and quotes its tail in errors), each host's lines to its own log file
/// when one process runs many (`shared`, [`crate::hosts`]: no colour codes there either).
pub fn init_logging(shared: bool) {
    let ansi = !shared && std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(rocefab_plumbing::log_route::Routed::new(std::io::stderr()))
        .with_ansi(ansi)
        .init();
}

/// The daemon's exit: 0 when the report (every report) says `ok`, 1 otherwise (an error is
/// printed first).
pub fn exit(result: Result<bool>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rocefab-hostd: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Maps the NIC agent's mirror ring and gives each port its capture number there; `None`
/// (logged) when there is no usable ring.
pub(crate) fn open_mirror(path: &std::path::Path, ports: &mut [XskPort]) -> Option<MirrorProducer> {
    let m = match MirrorProducer::open(path) {
        Ok(m) => m,
        Err(e @ MirrorError::Absent { .. }) => {
            tracing::debug!("{e}: AF_XDP frames are not mirrored to captures");
            return None;
        }
        Err(e) => {
            tracing::warn!("{e}: AF_XDP frames are not mirrored to captures");
            return None;
        }
    };
    for p in ports.iter_mut() {
        p.mirror_port = m.port_of(&p.name);
        if p.mirror_port.is_none() {
            tracing::warn!(nic = %p.name, path = %path.display(), "the NIC agent does not know this NIC: it cannot be captured");
        }
    }
    tracing::debug!(path = %path.display(), nics = ?m.names(), "mirroring captured NICs");
    Some(m)
}

/// Runs the job of `args` (module docs): `true` when the report says `ok`.
pub fn run(args: Args) -> Result<bool> {
    let job_file = args.job.as_deref().context("no --job")?;
    let job = Job::load(job_file).context("loading the job")?;
    block_signals()?;
    let metrics = Arc::new(Metrics::new(&job).context("creating metrics")?);
    let _server = serve_metrics(&job, args.netns.as_deref(), &metrics)?;
    let clock = Clock::new();
    let (xdp, mut host) = open_host(None, &job, args.netns.as_deref(), &clock)?;
    if args.wait_go {
        wait_for_go()?;
    }
    let deadline = clock.now().saturating_add(job.timeout_ms.saturating_mul(1_000_000));
    start_engine(&mut host.engine, &clock);
    tracing::info!(job = %job.name, nics = host.ports.len(), qps = job.qps.len(), "running");

    // The latest snapshot, for a data thread that does not stop when told to.
    let last = Arc::new(std::sync::Mutex::new(None::<Report>));
    let nic = DataThread { host, clock, deadline };
    let (report_rx, data) = nic.spawn(&job, metrics.clone(), last.clone())?;
    let (report, exit, data) = wait_for_report(&report_rx, data, &last, &job)?;
    finish(report, exit, xdp, data, &metrics, &job, args.report.as_deref())
}

/// Sets up the NICs of `job` in the current namespace (`netns`, when the NIC agent's mirror
/// ring is to be found): the XDP program on them, their sockets, the mirror ring, the carrier
/// watch and the engine; then prints the ready line (prefixed with `host` when one process runs
/// many). The program stays attached while the returned [`HostXdp`] lives.
pub(crate) fn open_host(host: Option<&str>, job: &Job, netns: Option<&str>, clock: &Clock) -> Result<(HostXdp, Host)> {
    let mtus = path_mtus(job)?;
    let program = if job.drop_nth > 0 { DROP_NTH_PROGRAM_NAME } else { PROGRAM_NAME };
    let names: Vec<String> = job.nics.iter().map(|n| n.name.clone()).collect();
    let (xdp, mut ports) = open_nics(job, &names, program)?;
    let mirror = netns.and_then(|ns| open_mirror(&mirror::shm_path(ns), &mut ports));
    let links = LinkWatch::open(&names).context("watching the NICs' carrier (rtnetlink)")?;
    let engine = Engine::from_job(job, &mtus, clock.now()).context("setting up QPs")?;
    for (i, p) in ports.iter_mut().enumerate() {
        p.stamps = crate::xsk::CaptureStamps::new(clock.mono(), engine.nic_line_rate_bps(i));
    }
    tracing::info!(ms = clock.now() / 1_000_000, program, "QPs and buffers set up");
    announce_ready(host, job, program, &mtus)?;
    Ok((xdp, Host { engine, ports, mirror, links: Some(links) }))
}

/// The job starts now: the engine's clock and its Unix offset for the report.
pub(crate) fn start_engine(engine: &mut Engine, clock: &Clock) {
    let start = clock.now();
    engine.set_start(start);
    engine.set_start_unix(clock.mono().unix_offset_ns().wrapping_add(start));
}

/// Blocks SIGINT, SIGTERM and SIGUSR1 before any other thread starts, so every thread inherits
/// the block and the signals reach only the signalfd, whose thread raises the flags the data
/// thread polls; and asks for wake-ups from ppoll as close to the deadline as the kernel can
/// (default slack 50 µs).
pub(crate) fn block_signals() -> Result<()> {
    Signals::block_set(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGUSR1])
        .context("signal setup")?
        .spawn_handler(on_signal)
        .context("starting the signal thread")?;
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes plain integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
    Ok(())
}

/// Binds the metrics listener (when the job sets one) in the namespace we were started in (so
/// the controller can scrape it from there), enters the host's namespace `netns`, then starts
/// the server thread.
fn serve_metrics(
    job: &Job,
    netns: Option<&str>,
    metrics: &Arc<Metrics>,
) -> Result<Option<std::thread::JoinHandle<()>>> {
    let listener = match job.metrics_listen {
        Some(addr) => {
            Some(std::net::TcpListener::bind(addr).with_context(|| format!("binding the metrics listener {addr}"))?)
        }
        None => None,
    };
    if let Some(ns) = netns {
        rocefab_plumbing::netns::enter(ns).with_context(|| format!("entering network namespace {ns}"))?;
    }
    match listener {
        Some(l) => Ok(Some(crate::metrics::serve(l, metrics.clone()).context("starting the metrics server")?)),
        None => Ok(None),
    }
}

/// Each NIC's path MTU: the job's, or the largest RoCEv2 MTU its link MTU carries.
pub(crate) fn path_mtus(job: &Job) -> Result<Vec<PathMtu>> {
    let mut mtus = Vec::new();
    for n in &job.nics {
        let m = match n.path_mtu {
            Some(b) => PathMtu::from_bytes(b).map_err(|e| anyhow::anyhow!("{}: {e}", n.name))?,
            None => {
                let l = rocefab_plumbing::link::link_mtu(&n.name)
                    .with_context(|| format!("SIOCGIFMTU on {} (is it in this namespace?)", n.name))?;
                path_mtu_for_link(l, n.ip.is_ipv6())
                    .with_context(|| format!("{}: link MTU {l} is too small for RoCEv2 (needs ≥ 316)", n.name))?
            }
        };
        mtus.push(m);
    }
    Ok(mtus)
}

/// Loads the host XDP program `program` on the job's NICs `names`, opens and registers one
/// AF_XDP socket per NIC, then attaches the program: sockets are registered before it is
/// attached, so a frame it redirects never finds a missing socket (it would be dropped, e.g. a
/// PFC pause at the start of the job).
pub(crate) fn open_nics(job: &Job, names: &[String], program: &str) -> Result<(HostXdp, Vec<XskPort>)> {
    let mut xdp = HostXdp::load_detached(names, program).context("loading the host XDP program")?;
    xdp.set_drop_nth(job.drop_nth).context("setting drop_nth")?;
    let d = job.dilation()?;
    let mut ports = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let wall_rate = d.rate(job.nics[i].line_rate_bps);
        let p = XskPort::open(n, wall_rate).with_context(|| format!("opening the AF_XDP socket of {n}"))?;
        xdp.register_xsk(i as u32, p.fd()).with_context(|| format!("registering the socket of {n}"))?;
        ports.push(p);
    }
    xdp.attach(&job.xdp_mode).context("attaching the host XDP program")?;
    Ok((xdp, ports))
}

/// The `{"ready":...}` line on stdout, once the sockets are up.
pub(crate) fn announce_ready(host: Option<&str>, job: &Job, program: &str, mtus: &[PathMtu]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if let Some(h) = host {
        write!(out, "{h}\t")?;
    }
    writeln!(
        out,
        "{}",
        serde_json::json!({"ready": true, "job": job.name, "program": program,
        "path_mtu": mtus.iter().map(|m| m.bytes()).collect::<Vec<_>>()})
    )?;
    out.flush()?;
    Ok(())
}

/// Waits for the controller's start line on stdin (`--wait-go`).
pub(crate) fn wait_for_go() -> Result<()> {
    let mut line = String::new();
    let n = std::io::stdin().read_line(&mut line).context("waiting for the start line on stdin")?;
    if n == 0 {
        bail!("stdin closed before the start line (the controller went away)");
    }
    if STOP.load(Ordering::Relaxed) {
        bail!("stopped before the start");
    }
    Ok(())
}

/// What the data thread owns: the host's NICs, its clock and its deadline.
struct DataThread {
    host: Host,
    clock: Clock,
    /// When the job times out (`clock` ns).
    deadline: u64,
}

type DataHandle = std::thread::JoinHandle<Result<()>>;

impl DataThread {
    /// Starts the data thread; the main thread only waits (and the metrics server reads
    /// snapshots published every `snapshot_interval_ms`, the latest also in `last`). Once the
    /// job has ended the data thread verifies and reports on the channel returned, then, when the
    /// job finished and `linger_ms` asks for it, keeps the QPs up (daemon::serve) until
    /// SIGTERM/SIGINT or the linger time.
    fn spawn(
        self,
        job: &Job,
        metrics: Arc<Metrics>,
        last: Arc<std::sync::Mutex<Option<Report>>>,
    ) -> Result<(std::sync::mpsc::Receiver<(Report, Exit)>, DataHandle)> {
        let DataThread { mut host, clock, deadline } = self;
        let job_name = job.name.clone();
        let snapshot_interval = Duration::from_millis(job.snapshot_interval_ms);
        let linger_ns = job.linger_ms.saturating_mul(1_000_000);
        let (report_tx, report_rx) = std::sync::mpsc::channel::<(Report, Exit)>();
        let data = std::thread::Builder::new()
            .name("rocefab-nic".into())
            .spawn(move || -> Result<()> {
                let (exit, end) = daemon::run(&mut host, &clock, deadline, &STOP, snapshot_interval, |e, now| {
                    publish_snapshot(e, &job_name, now, &metrics, &last)
                })?;
                let report = verified_report(&host, &job_name, end, &clock);
                let _ = report_tx.send((report, exit));
                if exit == Exit::Finished && linger_ns > 0 {
                    let until = clock.now().saturating_add(linger_ns);
                    daemon::serve(&mut host, &clock, until, &SERVE_STOP)?;
                }
                Ok(())
            })
            .context("spawning the data thread")?;
        Ok((report_rx, data))
    }
}

/// A snapshot of the job's report at `now`, for the metrics and as the last word of a data
/// thread that does not stop ([`stuck_report`]).
pub(crate) fn publish_snapshot(
    engine: &Engine,
    job_name: &str,
    now: u64,
    metrics: &Metrics,
    last: &std::sync::Mutex<Option<Report>>,
) {
    let r = engine.report_with(job_name, now, false);
    metrics.update(&r);
    *last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(r);
}

/// The job's report at its end `end`, its data verified, with each NIC's AF_XDP socket
/// counters.
pub(crate) fn verified_report(host: &Host, job_name: &str, end: u64, clock: &Clock) -> Report {
    let verify_start = clock.now();
    let mut report = host.engine.report(job_name, end);
    tracing::info!(ms = (clock.now() - verify_start) / 1_000_000, "report verified");
    for (nic, port) in report.nics.iter_mut().zip(&host.ports) {
        if let Ok((dropped, ring_full, fill_empty)) = port.stats() {
            nic.xdp.insert("xsk_rx_dropped".into(), dropped);
            nic.xdp.insert("xsk_rx_ring_full".into(), ring_full);
            nic.xdp.insert("xsk_rx_fill_ring_empty".into(), fill_empty);
        }
    }
    report
}

/// The data thread's report and why its loop ended. When a stop signal came and the thread
/// has not reported within [`STOP_GRACE`], prints its last snapshot ([`stuck_report`]) and
/// exits the process with status 1 without it.
fn wait_for_report(
    report_rx: &std::sync::mpsc::Receiver<(Report, Exit)>,
    data: DataHandle,
    last: &std::sync::Mutex<Option<Report>>,
    job: &Job,
) -> Result<(Report, Exit, DataHandle)> {
    let mut stop_seen: Option<std::time::Instant> = None;
    loop {
        match report_rx.recv_timeout(Duration::from_millis(50)) {
            Ok((report, exit)) => return Ok((report, exit, data)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                // The data thread ended without a report: its error says why.
                data.join().map_err(|_| anyhow::anyhow!("the data thread panicked"))??;
                bail!("the data thread ended without a report");
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if !STOP.load(Ordering::Relaxed) {
            continue;
        }
        let since = *stop_seen.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() >= STOP_GRACE {
            // The data thread is stuck: report the last snapshot and leave without it.
            let last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            let r = stuck_report(last, &job.name, TIMED_OUT.load(Ordering::Relaxed), job.snapshot_interval_ms);
            println!("{}", serde_json::to_string(&r)?);
            std::io::stdout().flush()?;
            tracing::error!("the data thread did not stop; exiting without it");
            std::process::exit(1);
        }
    }
}

/// Completes the report (XDP counters, why the job ended), prints it (and writes it to
/// `report_path`), then ends the linger: on SIGTERM/SIGINT or its deadline the program is
/// detached first (frames from then on reach the kernel and its packet taps), then the data
/// thread takes what its RX rings still hold and stops, so no frame is left unread in between.
fn finish(
    mut report: Report,
    exit: Exit,
    xdp: HostXdp,
    data: DataHandle,
    metrics: &Metrics,
    job: &Job,
    report_path: Option<&std::path::Path>,
) -> Result<bool> {
    let counters = xdp.counters().context("reading host XDP counters")?;
    add_xdp_counters(&mut report, &counters);
    settle_report(&mut report, exit, TIMED_OUT.load(Ordering::Relaxed), job.timeout_ms);
    metrics.update(&report);

    let text = serde_json::to_string(&report)?;
    if let Some(p) = report_path {
        std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
    }
    println!("{text}");
    std::io::stdout().flush()?;
    while !data.is_finished() && !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(xdp);
    SERVE_STOP.store(true, Ordering::Relaxed);
    data.join().map_err(|_| anyhow::anyhow!("the data thread panicked"))??;
    if !report.ok {
        tracing::warn!(error = ?report.error, "job did not complete");
    }
    outcome(&report)
}

/// The report of a data thread that did not stop within [`STOP_GRACE`]: its last snapshot
/// (`last`, none when it never published one), not ok, saying why it was stopped.
pub(crate) fn stuck_report(last: Option<Report>, job: &str, timed_out: bool, snapshot_interval_ms: u64) -> Report {
    let mut r = last.unwrap_or_default();
    r.job = job.to_string();
    r.ok = false;
    r.error = Some(format!(
        "{}; the data thread did not stop within {} ms: this is its last snapshot (up to {} ms old)",
        if timed_out { "timed out (the controller's deadline passed)" } else { "stopped by signal" },
        STOP_GRACE.as_millis(),
        snapshot_interval_ms
    ));
    r
}

/// The host XDP program's counters (`counters[nic][counter id]`) into each NIC's `xdp` map.
pub(crate) fn add_xdp_counters(report: &mut Report, counters: &[[u64; counter::COUNT as usize]]) {
    for (i, nic) in report.nics.iter_mut().enumerate() {
        for (id, name) in counter::NAMES.iter().enumerate() {
            nic.xdp.insert((*name).to_string(), counters[i][id]);
        }
    }
}

/// Marks the report of a job that did not finish (`exit`) as not ok, saying why (`timed_out`:
/// SIGUSR1 came, the controller's deadline), and takes a QP's error when there is no other.
pub(crate) fn settle_report(report: &mut Report, exit: Exit, timed_out: bool, timeout_ms: u64) {
    match exit {
        Exit::Finished => {}
        Exit::Timeout => {
            report.ok = false;
            report.error = Some(format!("timeout after {timeout_ms} ms (wall clock)"));
        }
        Exit::Stopped if timed_out => {
            report.ok = false;
            report.error = Some("timed out (the controller's deadline passed)".into());
        }
        Exit::Stopped => {
            report.ok = false;
            report.error = Some("stopped by signal".into());
        }
    }
    if report.error.is_none() {
        report.error = report.qps.iter().find(|q| q.error.is_some()).map(qp_error_line);
    }
}

/// A failed QP's error with the QP it is about: its number, label and port, and where it moved
/// from if it migrated (a dual-port NIC's QP may fail on its alternate path).
fn qp_error_line(q: &rocefab_contracts::job::QpReport) -> String {
    let moved = q
        .migration
        .as_ref()
        .map_or_else(String::new, |m| format!(", moved from {} at {} ns ({})", m.from_nic, m.at_ns, m.cause.label()));
    format!("QP {:#x} ({}) on {}{moved}: {}", q.qpn, q.label, q.nic, q.error.as_deref().unwrap_or_default())
}

/// The exit: `true` for an ok report, `false` for one that says what went wrong, an error for
/// a report that is not ok without saying why (verification failed).
pub(crate) fn outcome(report: &Report) -> Result<bool> {
    if report.ok {
        Ok(true)
    } else if report.error.is_none() {
        bail!("job finished but the report is not ok (verification failed)")
    } else {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::job::{NicReport, QpReport};

    fn report(ok: bool) -> Report {
        Report { job: "j".into(), ok, qps: vec![QpReport::default(); 2], ..Default::default() }
    }

    #[test]
    fn a_job_that_did_not_finish_says_why() {
        let mut r = report(true);
        settle_report(&mut r, Exit::Finished, false, 500);
        assert_eq!((r.ok, r.error.as_deref()), (true, None));
        for (exit, timed_out, why) in [
            (Exit::Timeout, false, "timeout after 500 ms (wall clock)"),
            (Exit::Stopped, true, "timed out (the controller's deadline passed)"),
            (Exit::Stopped, false, "stopped by signal"),
        ] {
            let mut r = report(true);
            settle_report(&mut r, exit, timed_out, 500);
            assert_eq!((r.ok, r.error.as_deref()), (false, Some(why)), "{exit:?} {timed_out}");
            assert!(!outcome(&r).unwrap(), "a report that says why exits 1 without an error");
        }
    }

    #[test]
    fn a_qp_error_is_the_report_error_when_there_is_no_other() {
        let mut r = report(false);
        r.qps[1] = QpReport {
            qpn: 0x103,
            label: "rank 0 -> rank 2".into(),
            nic: "gpu0p1".into(),
            error: Some("retry count exceeded".into()),
            migration: Some(rocefab_contracts::job::Migration {
                from_nic: "gpu0p0".into(),
                at_ns: 3_100_000,
                cause: rocefab_contracts::job::MigrationCause::LinkDown,
            }),
            ..Default::default()
        };
        settle_report(&mut r, Exit::Finished, false, 500);
        assert_eq!(
            r.error.as_deref(),
            Some("QP 0x103 (rank 0 -> rank 2) on gpu0p1, moved from gpu0p0 at 3100000 ns (link_down): retry count exceeded")
        );
        let mut r = report(false);
        r.qps[0].error = Some("retry count exceeded".into());
        settle_report(&mut r, Exit::Timeout, false, 500);
        assert_eq!(r.error.as_deref(), Some("timeout after 500 ms (wall clock)"), "the job's own reason first");
    }

    #[test]
    fn a_report_not_ok_without_a_reason_is_an_error() {
        assert!(outcome(&report(true)).unwrap());
        let e = outcome(&report(false)).unwrap_err().to_string();
        assert_eq!(e, "job finished but the report is not ok (verification failed)");
    }

    #[test]
    fn a_stuck_data_thread_reports_its_last_snapshot() {
        let mut last = report(true);
        last.elapsed_ns = 42;
        let r = stuck_report(Some(last), "allreduce", true, 250);
        assert_eq!((r.job.as_str(), r.ok, r.elapsed_ns), ("allreduce", false, 42));
        assert_eq!(
            r.error.as_deref(),
            Some(
                "timed out (the controller's deadline passed); the data thread did not stop within 2000 ms: \
                 this is its last snapshot (up to 250 ms old)"
            )
        );
        let r = stuck_report(None, "allreduce", false, 250);
        assert!(r.error.unwrap().starts_with("stopped by signal; "));
        assert!(r.qps.is_empty());
    }

    #[test]
    fn xdp_counters_land_in_each_nics_map_by_name() {
        let mut r = report(true);
        r.nics = vec![NicReport::default(); 2];
        let c: Vec<[u64; counter::COUNT as usize]> = vec![[1, 2, 3, 4, 5, 6, 7], [10, 20, 30, 40, 50, 60, 70]];
        add_xdp_counters(&mut r, &c);
        assert_eq!(r.nics[0].xdp["rx"], 1);
        assert_eq!(r.nics[1].xdp["roce"], 20);
        assert_eq!(r.nics[1].xdp["test_seen"], 70);
        assert_eq!(r.nics[0].xdp.len(), counter::COUNT as usize);
    }
}
