//! Running a job: a `rocefab-hostd` per host, started together once all are ready, supervised
//! to the deadline, reports collected, every process reaped; the switches and CPUs sampled
//! around it.
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use gpu_host::nic::collective_job::HostDesc;
use rocefab_contracts::job::Report;

use crate::fabric::daemon_http::scrape;
use crate::fabric::rundir::State;
use crate::job::bottleneck;
use crate::job::hosts::classes_line;

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
    pub recording: Option<crate::job::timeline::Recording>,
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
    timeline: Option<crate::job::timeline::RunTimeline>,
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

/// The machine's CPU times now (`None` when `/proc/stat` cannot be read).
fn read_cpu_times() -> Option<bottleneck::CpuTimes> {
    bottleneck::parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
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
pub fn live_switches(fabric: &str) -> Vec<(String, u32, PathBuf)> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
