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
use rocefab_contracts::job::{HostEntry, HostsFile, Report};

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

/// What each host adds to the exit grace of a process of many (`rocefab-hostd --hosts`): a
/// killed process's kernel teardown closes its AF_XDP sockets one by one (the book's 512-GPU
/// fabric: 64 hosts, 512 sockets, more than 3 s after SIGKILL on the 2-core machine).
const EXIT_PER_HOST: Duration = Duration::from_millis(100);

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

/// One started process of a job: a host's own `rocefab-hostd` (or another per-host process:
/// `prog`), or the `rocefab-hostd --hosts` shared by several hosts.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its own log: the host's log for a process per host, the process's for a shared one.
    log: PathBuf,
    /// The hosts it runs (indices into [`Hostds::procs`]).
    hosts: Vec<usize>,
}

impl Proc {
    fn signal(&mut self, sig: libc::c_int) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: kill(2) on our own child's pid, which is not reaped yet (try_wait).
            unsafe { libc::kill(self.child.id() as i32, sig) };
        }
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// How long it may take to exit once told to (or killed): [`EXIT_GRACE`], and for a process
    /// of many hosts [`EXIT_PER_HOST`] more for each (the kernel closes a dying process's AF_XDP
    /// sockets one after the other, each waiting for a grace period).
    fn exit_grace(&self) -> Duration {
        if self.hosts.len() > 1 {
            EXIT_GRACE + EXIT_PER_HOST * self.hosts.len() as u32
        } else {
            EXIT_GRACE
        }
    }

    /// Waits up to `grace` for it to exit (a process whose output ended is exiting: its status
    /// then says how it ended).
    fn wait_exit(&mut self, grace: Duration) {
        let end = Instant::now() + grace;
        while Instant::now() < end && self.running() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// One host of a job, as the controller sees it: its lines so far and where they come from.
pub(crate) struct Hostd {
    pub host: String,
    /// Its process (an index into [`Hostds`]'s processes).
    proc: usize,
    /// Its log.
    log: PathBuf,
    /// Lines read from its stdout so far (the ready line, then the report).
    pub lines: Vec<String>,
    /// Its stdout ended.
    pub eof: bool,
}

/// The last lines of `log`, for an error message.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    format!("log {}: {}", log.display(), tail.into_iter().rev().collect::<Vec<_>>().join(" | "))
}

/// Every process of a job's hosts (a process per host, or one shared by all: `rocefab-hostd
/// --hosts`), with their stdout lines merged into one channel by host (so waiting for all of
/// them has one deadline). Stopped and reaped, all at once and within bounded time, when
/// dropped.
pub(crate) struct Hostds {
    prog: &'static str,
    pub procs: Vec<Hostd>,
    children: Vec<Proc>,
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
        Hostds { prog, procs: Vec::new(), children: Vec::new(), rx, tx }
    }

    /// Takes over a spawned process of one host; a thread forwards its stdout lines (then
    /// `None` at EOF).
    pub fn push(&mut self, host: String, child: Child, log: PathBuf) {
        self.push_shared(vec![(host, log.clone())], child, log, false);
    }

    /// Takes over a spawned process running `hosts` (name, log), each of its stdout lines
    /// prefixed with its host's name and a tab when `prefixed` (`rocefab-hostd --hosts`); a
    /// thread forwards each line to its host (then `None` to each at EOF). `log` is the
    /// process's own.
    pub fn push_shared(&mut self, hosts: Vec<(String, PathBuf)>, mut child: Child, log: PathBuf, prefixed: bool) {
        let first = self.procs.len();
        let index: std::collections::HashMap<String, usize> =
            hosts.iter().enumerate().map(|(k, (h, _))| (h.clone(), first + k)).collect();
        let all: Vec<usize> = (first..first + hosts.len()).collect();
        let out = child.stdout.take().expect("piped");
        let tx = self.tx.clone();
        let ends = all.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let (i, line) = if prefixed {
                    // A line of no host of ours (not one hostd prints) goes to none.
                    match l.split_once('\t').and_then(|(h, rest)| Some((*index.get(h)?, rest.to_string()))) {
                        Some(x) => x,
                        None => continue,
                    }
                } else {
                    (first, l)
                };
                if tx.send((i, Some(line))).is_err() {
                    return;
                }
            }
            for i in ends {
                let _ = tx.send((i, None));
            }
        });
        let stdin = child.stdin.take();
        let proc = self.children.len();
        self.children.push(Proc { child, stdin, log, hosts: all });
        for (host, log) in hosts {
            self.procs.push(Hostd { host, proc, log, lines: Vec::new(), eof: false });
        }
    }

    /// Sends `sig` to the processes of the hosts `which` picks (each process once).
    fn signal(&mut self, which: impl Fn(&Hostd) -> bool, sig: libc::c_int) {
        let mut done = std::collections::HashSet::new();
        for h in self.procs.iter().filter(|h| which(h)) {
            if done.insert(h.proc) {
                self.children[h.proc].signal(sig);
            }
        }
    }

    /// Writes the start line to every process.
    fn go(&mut self) -> anyhow::Result<()> {
        for c in &mut self.children {
            let mut s = c.stdin.take().expect("stdin");
            let who = c.hosts.iter().map(|&i| self.procs[i].host.as_str()).collect::<Vec<_>>().join(", ");
            writeln!(s, "go").with_context(|| format!("starting {who}"))?;
        }
        Ok(())
    }

    /// Why host `i` has fewer lines than expected: its process exited (how), or it is still
    /// running.
    pub fn silence(&mut self, i: usize, waiting: &str) -> String {
        let prog = self.prog;
        let h = &self.procs[i];
        let (eof, log) = (h.eof, h.log.clone());
        let c = &mut self.children[h.proc];
        if eof {
            c.wait_exit(c.exit_grace());
        }
        let shared = c.hosts.len() > 1;
        let pid = c.child.id();
        let who =
            if shared { format!("{prog} (shared by {} hosts, pid {pid})", c.hosts.len()) } else { prog.to_string() };
        let how = match c.child.try_wait() {
            Ok(Some(st)) => format!(
                "{who} {} {waiting}",
                crate::fabric::process::describe_exit(st, || crate::fabric::process::oom_killed(pid))
            ),
            _ if eof => format!("{who} closed its output {waiting}"),
            _ => format!("{who} gave no answer {waiting}"),
        };
        let logs = if shared { format!("{}; process {}", log_tail(&log), log_tail(&c.log)) } else { log_tail(&log) };
        format!("{}: {how} ({logs})", self.procs[i].host)
    }

    /// Collects lines until every host has `n` of them or its process closed its stdout, or
    /// `until`.
    fn wait_lines(&mut self, n: usize, until: Instant) {
        self.wait_lines_or_failure(n, until, |_| false);
    }

    /// [`Hostds::wait_lines`], returning early with the index of the first host that `failed`
    /// says failed (given its `n`-th line), or whose process closed its stdout with fewer lines.
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
                    // A process's output ends for all its hosts at once.
                    let proc = self.procs[i].proc;
                    for &k in &self.children[proc].hosts {
                        self.procs[k].eof = true;
                    }
                    if self.procs[i].lines.len() < n {
                        return Some(i);
                    }
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// Stops every process still running (SIGTERM, then SIGKILL after [`EXIT_GRACE`]) and
    /// reaps them; returns a line for each that would not go.
    pub fn stop(&mut self) -> Vec<String> {
        for c in &mut self.children {
            // A hostd still waiting for its start line ends on EOF (SIGTERM does not interrupt
            // that read).
            drop(c.stdin.take());
            c.signal(libc::SIGTERM);
        }
        let mut left = Vec::new();
        let grace = self.children.iter().map(Proc::exit_grace).max().unwrap_or(EXIT_GRACE);
        for sig in [Some(libc::SIGKILL), None] {
            let end = Instant::now() + grace;
            while Instant::now() < end && self.children.iter_mut().any(Proc::running) {
                std::thread::sleep(Duration::from_millis(20));
            }
            left.clear();
            for c in &mut self.children {
                if c.running() {
                    if let Some(s) = sig {
                        c.signal(s);
                    }
                    let who = c.hosts.iter().map(|&i| self.procs[i].host.as_str()).collect::<Vec<_>>().join(", ");
                    left.push(format!(
                        "{who}: {} (pid {}) did not exit after SIGTERM and SIGKILL",
                        self.prog,
                        c.child.id()
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
    /// Every host in one `rocefab-hostd --hosts` with this many data threads; `None`: a
    /// process per host (`--host-workers`).
    pub host_workers: Option<u16>,
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
    spawn_hostds(l, hostd, &mut procs)?;
    let ready_by = (started + READY_LIMIT).min(deadline);
    procs.wait_lines(1, ready_by);
    let mut not_ready = Vec::new();
    for i in 0..procs.procs.len() {
        let p = &procs.procs[i];
        match p.lines.first() {
            Some(l) if l.contains("\"ready\":true") => {}
            Some(l) => not_ready.push(format!("{}: unexpected first line from rocefab-hostd: {l}", p.host)),
            None => {
                let w = format!("before it was ready (waited {:.1} s)", started.elapsed().as_secs_f64());
                not_ready.push(procs.silence(i, &w));
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
        if let Some(w) = l.host_workers {
            eprintln!("{}", shared_line(procs.procs.len(), w));
        }
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
    procs.go()?;
    at_go()?;
    // A host that failed (an errored QP, data that do not verify, a crash) means the job cannot
    // succeed, and its peers may wait for it until the timeout: stop the others at once.
    let failed =
        procs.wait_lines_or_failure(2, deadline, |l| serde_json::from_str::<Report>(l).map_or(true, |r| !r.ok));
    let after_s = started.elapsed().as_secs_f64();
    // Hosts still running at the deadline report what they were waiting for (SIGUSR1; SIGTERM
    // when another host failed first).
    let running = |p: &Hostd| p.lines.len() < 2 && !p.eof;
    let timed_out = failed.is_none() && procs.procs.iter().any(running);
    let asked: Vec<String> = procs.procs.iter().filter(|p| running(p)).map(|p| p.host.clone()).collect();
    procs.signal(running, if timed_out { libc::SIGUSR1 } else { libc::SIGTERM });
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
    for i in 0..procs.procs.len() {
        let p = &procs.procs[i];
        let Some(l) = p.lines.get(1).cloned() else {
            let w = if asked.contains(&p.host) {
                format!("without a report, also {} s after it was asked for one", REPORT_GRACE.as_secs())
            } else {
                "without a report".to_string()
            };
            missing.push(procs.silence(i, &w));
            continue;
        };
        let p = &procs.procs[i];
        let r: Report = serde_json::from_str(&l).with_context(|| format!("{}: parsing the report {l:?}", p.host))?;
        // The host's full report (per-QP NAK/duplicate counters, host XDP and AF_XDP socket
        // drop counters, what unfinished QPs waited for) next to its job file, for diagnosis.
        let path = dir.join(format!("{}.report.json", p.host));
        std::fs::write(&path, &l).with_context(|| format!("writing {}", path.display()))?;
        reports.push((p.host.clone(), r));
    }
    // A host that did not answer the timeout's request for a report will not answer SIGTERM
    // either (stopped, or its data thread stuck).
    procs.signal(|p| p.lines.len() < 2, libc::SIGKILL);
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

/// Writes each host's job file and starts its `rocefab-hostd`: one per host, or one for all
/// (`rocefab-hostd --hosts`, its own lines in `hosts.log`, each host's in `<host>.log`).
fn spawn_hostds(l: &Launch, hostd: &Path, procs: &mut Hostds) -> anyhow::Result<()> {
    let dir = l.dir;
    let mut entries = Vec::new();
    for ((h, ns), job) in l.hosts.iter().zip(l.netns).zip(l.jobs) {
        let path = dir.join(format!("{}.json", h.name));
        std::fs::write(&path, serde_json::to_vec(job)?).with_context(|| format!("writing {}", path.display()))?;
        let log = dir.join(format!("{}.log", h.name));
        let logf = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        if l.host_workers.is_some() {
            entries.push(HostEntry { name: h.name.clone(), netns: ns.clone(), job: path, log });
            continue;
        }
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
    let Some(workers) = l.host_workers else { return Ok(()) };
    let hosts: Vec<(String, PathBuf)> = entries.iter().map(|e| (e.name.clone(), e.log.clone())).collect();
    let file = dir.join("hosts.json");
    let body = serde_json::to_vec(&HostsFile { workers, hosts: entries })?;
    std::fs::write(&file, body).with_context(|| format!("writing {}", file.display()))?;
    let log = dir.join("hosts.log");
    let logf = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let child = ends_with_parent(&mut Command::new(hostd))
        .arg("--hosts")
        .arg(&file)
        .arg("--wait-go")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(logf)
        .spawn()
        .with_context(|| format!("starting {} --hosts {}", hostd.display(), file.display()))?;
    procs.push_shared(hosts, child, log, true);
    Ok(())
}

/// The progress line saying how the hosts' NICs run.
fn shared_line(hosts: usize, workers: u16) -> String {
    format!(
        "the {hosts} hosts' NICs run in one rocefab-hostd with {workers} data thread{}",
        if workers == 1 { "" } else { "s" }
    )
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
        while Instant::now() < end && h.children[1].running() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let why = h.silence(1, "without a report");
        assert!(why.starts_with("host2: rocefab-hostd exited with code 3 without a report (log "), "{why}");
        assert!(why.ends_with(": setting up)"), "{why}");
        assert!(h.silence(0, "x").starts_with("host1: rocefab-hostd gave no answer x"));
        // SIGTERM is ignored: SIGKILL after EXIT_GRACE ends it.
        let t = Instant::now();
        assert!(h.stop().is_empty());
        let took = t.elapsed();
        assert!(took >= EXIT_GRACE && took < EXIT_GRACE + Duration::from_secs(2), "{took:?}");
        let st = h.children[0].child.try_wait().unwrap().expect("reaped");
        assert!(
            crate::fabric::process::describe_exit(st, || Some(false)).starts_with("was killed by signal 9 (SIGKILL)")
        );
        let _ = std::fs::remove_file(&log);
    }

    /// One process for several hosts (`rocefab-hostd --hosts`): its lines reach their host by
    /// the name in front, lines of no host are dropped, its end ends every host's stream, and a
    /// silent host is named with the shared process, whose log is quoted beside the host's.
    #[test]
    fn a_shared_process_s_lines_reach_their_hosts() {
        let dir = tempfile::tempdir().unwrap();
        let (l1, l2, lp) = (dir.path().join("h1.log"), dir.path().join("h2.log"), dir.path().join("hosts.log"));
        std::fs::write(&l1, "h1 set up\n").unwrap();
        std::fs::write(&l2, "h2 set up\n").unwrap();
        std::fs::write(&lp, "process started\n").unwrap();
        let script = "printf 'h2\\tready2\\nnoise\\nh9\\tother\\nh1\\tready1\\nh2\\treport2\\n'; exit 4";
        let child =
            Command::new("sh").args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut h = Hostds::new();
        h.push_shared(vec![("h1".into(), l1), ("h2".into(), l2)], child, lp, true);
        let t = Instant::now();
        assert_eq!(h.wait_lines_or_failure(2, t + Duration::from_secs(20), |_| false), Some(0), "h1 ended short");
        assert_eq!(h.procs[0].lines, ["ready1"]);
        assert_eq!(h.procs[1].lines, ["ready2", "report2"]);
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end && h.children[0].running() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let why = h.silence(0, "without a report");
        let pid = h.children[0].child.id();
        assert!(
            why.starts_with(&format!(
                "h1: rocefab-hostd (shared by 2 hosts, pid {pid}) exited with code 4 without a report (log "
            )),
            "{why}"
        );
        assert!(
            why.contains("h1.log: h1 set up; process log ") && why.ends_with("hosts.log: process started)"),
            "{why}"
        );
        assert!(h.stop().is_empty());
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
