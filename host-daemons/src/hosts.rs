//! `rocefab-hostd --hosts FILE`: the NICs of every host of a job in one process
//! ([`rocefab_contracts::job::HostsFile`]: each host's name, namespace, job file and log).
//!
//! A process per host puts as many data threads on the machine as there are hosts (64 for the
//! book's 512-GPU fabric), and on a small machine each frame a host receives then costs a
//! wake-up, an inter-processor interrupt and two context switches. Here `workers` data threads
//! each drive the NICs of every `workers`-th host from one loop: a pass of each host in turn
//! (receive, timers, transmit: [`Host::pass`]) while any moved a frame, then one `ppoll(2)` on
//! all their sockets until the earliest of their deadlines.
//!
//! From the outside each host is what its own `rocefab-hostd --job` is: set up in its own
//! namespace (the XDP program on its NICs, an AF_XDP socket per NIC, the NIC agent's mirror
//! ring, its carrier watch), its metrics on its job's `metrics_listen` (all served by one
//! thread), its lines in its own log ([`rocefab_plumbing::log_route`]), its ready line and its
//! report on stdout, prefixed with its name and a tab (`host1\t{"ready":true,...}`), its linger
//! after the report. The signals mean what they mean to a single host, for every host not yet
//! reported: SIGUSR1 the controller's deadline, SIGTERM/SIGINT stop (and end the lingers).
//!
//! Exit status: 0 when every host's report says `ok`, 1 otherwise (including errors).
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rocefab_contracts::job::{HostsFile, Job, Report};
use rocefab_plumbing::host_loader::HostXdp;
use rocefab_plumbing::log_route::{self, Route};

use crate::daemon::{self, Clock, Exit, Host};
use crate::hostd::{self, SERVE_STOP, STOP, STOP_GRACE, TIMED_OUT};
use crate::metrics::Metrics;

/// A host as its worker drives it.
struct Unit {
    /// Its index in the hosts file.
    index: usize,
    /// Its NICs while its job runs (then handed to its own thread: [`Unit::end`]).
    host: Option<Host>,
    route: Route,
    job_name: String,
    deadline: u64,
    tick_ns: u64,
    next_tick: u64,
    linger_ns: u64,
    metrics: Arc<Metrics>,
    last: Arc<Mutex<Option<Report>>>,
    /// Its last pass moved a frame: it gets the next one whatever its deadline.
    busy: bool,
    /// When it next needs a pass if nothing arrives ([`Host::wake`] after an idle pass).
    due: u64,
}

/// The threads of hosts whose job ended (verifying, reporting, lingering), joined at the end.
type Ended = Arc<Mutex<Vec<std::thread::JoinHandle<()>>>>;

/// What a host's setup leaves for the main thread.
struct Setup {
    name: String,
    route: Route,
    netns: String,
    job: Job,
    xdp: HostXdp,
    metrics: Arc<Metrics>,
    last: Arc<Mutex<Option<Report>>>,
}

/// A report from a worker: host index, report, why its loop ended.
type Reported = (usize, Report, Exit);

/// Runs the job of every host in `path` (module docs): `true` when every report says `ok`.
pub fn run(path: &Path, wait_go: bool) -> Result<bool> {
    let file = HostsFile::load(path)?;
    let logs: Vec<_> = file.hosts.iter().map(|h| h.log.clone()).collect();
    let routes = log_route::open(&logs)?;
    let mut jobs = Vec::new();
    for h in &file.hosts {
        jobs.push(Job::load(&h.job).with_context(|| format!("{}: loading the job", h.name))?);
    }
    hostd::block_signals()?;
    // Every listener is bound here, in the namespace the controller scrapes from, before the
    // setup enters the hosts' namespaces.
    let mut servers = Vec::new();
    let mut metrics = Vec::new();
    for (h, job) in file.hosts.iter().zip(&jobs) {
        let m = Arc::new(Metrics::new(job).with_context(|| format!("{}: creating metrics", h.name))?);
        if let Some(addr) = job.metrics_listen {
            let l =
                TcpListener::bind(addr).with_context(|| format!("{}: binding the metrics listener {addr}", h.name))?;
            servers.push((l, m.clone()));
        }
        metrics.push(m);
    }
    let _server = crate::metrics::serve_all(servers).context("starting the metrics server")?;

    let clock = Clock::new();
    let t = std::time::Instant::now();
    // Each host is set up on a thread of its own, in its own namespace (a thread's namespace is
    // its own): the XDP attaches and socket binds wait for the kernel's grace periods, which then
    // overlap instead of adding up.
    let set_ups: Vec<Result<(Setup, Unit)>> = std::thread::scope(|sc| {
        let threads: Vec<_> = file
            .hosts
            .iter()
            .zip(jobs)
            .zip(metrics)
            .enumerate()
            .map(|(i, ((h, job), m))| {
                let (route, clock) = (routes[i], &clock);
                sc.spawn(move || {
                    let _on = log_route::scoped(Some(route));
                    set_up(i, &h.name, &h.netns, job, m, route, clock)
                        .with_context(|| format!("{}: setting up its NICs in namespace {}", h.name, h.netns))
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|_| Err(anyhow!("a host's setup panicked")))).collect()
    });
    let mut setups = Vec::new();
    let mut units = Vec::new();
    for r in set_ups {
        let (setup, unit) = r?;
        setups.push(setup);
        units.push(unit);
    }
    tracing::info!(hosts = units.len(), ms = t.elapsed().as_millis() as u64, "every host set up");
    if wait_go {
        hostd::wait_for_go()?;
    }
    for u in &mut units {
        hostd::start_engine(&mut u.host.as_mut().expect("set up").engine, &clock);
        u.deadline = clock.now().saturating_add(setups[u.index].job.timeout_ms.saturating_mul(1_000_000));
    }
    tracing::info!(hosts = units.len(), workers = file.workers, "running");
    let (tx, rx) = mpsc::channel::<Reported>();
    let ended: Ended = Arc::default();
    let mut workers = Vec::new();
    for (w, group) in deal(units, file.workers as usize).into_iter().enumerate() {
        let hosts: Vec<usize> = group.iter().map(|u| u.index).collect();
        let (tx, ended) = (tx.clone(), ended.clone());
        let handle = std::thread::Builder::new()
            .name(format!("rocefab-nic{w}"))
            .spawn(move || work(group, clock, &tx, &ended))
            .context("spawning a data thread")?;
        workers.push(Worker { hosts, handle: Some(handle) });
    }
    drop(tx);
    let ok = collect(&rx, &mut workers, &setups)?;
    let setups_names: Vec<String> = setups.iter().map(|s| s.name.clone()).collect();
    for w in &mut workers {
        w.join(&setups_names)?;
    }
    // Every host reported. The lingers end on SIGTERM/SIGINT or their own time: the programs
    // are detached first (frames from then on reach the kernel), then each host's thread takes
    // what its RX rings still hold, stops and closes its sockets.
    let lingering = || ended.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|h| !h.is_finished());
    while lingering() && !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = std::time::Instant::now();
    // In parallel, as at the setup: each detach and socket close waits for a grace period.
    each_on_its_thread(setups, |s| {
        let _on = log_route::scoped(Some(s.route));
        if let Err(e) = rocefab_plumbing::netns::enter(&s.netns) {
            tracing::warn!("entering {} to detach the XDP program: {e}", s.netns);
        }
        drop(s.xdp);
    });
    SERVE_STOP.store(true, Ordering::Relaxed);
    for h in std::mem::take(&mut *ended.lock().unwrap_or_else(PoisonError::into_inner)) {
        h.join().map_err(|_| anyhow!("a host's thread panicked after its report"))?;
    }
    tracing::info!(ms = t.elapsed().as_millis() as u64, "every host's XDP program detached and sockets closed");
    Ok(ok)
}

/// Sets host `i` up in its namespace `netns`: its NICs (the XDP program, their sockets), the NIC
/// agent's mirror ring, the carrier watch and the engine; prints its ready line.
fn set_up(
    i: usize,
    name: &str,
    netns: &str,
    job: Job,
    metrics: Arc<Metrics>,
    route: Route,
    clock: &Clock,
) -> Result<(Setup, Unit)> {
    rocefab_plumbing::netns::enter(netns).with_context(|| format!("entering network namespace {netns}"))?;
    let (xdp, host) = hostd::open_host(Some(name), &job, Some(netns), clock)?;
    tracing::info!(job = %job.name, nics = host.ports.len(), qps = job.qps.len(), "ready");
    let last = Arc::new(Mutex::new(None));
    let unit = Unit {
        index: i,
        host: Some(host),
        route,
        job_name: job.name.clone(),
        deadline: u64::MAX,
        tick_ns: job.snapshot_interval_ms.saturating_mul(1_000_000).max(1),
        next_tick: 0,
        linger_ns: job.linger_ms.saturating_mul(1_000_000),
        metrics: metrics.clone(),
        last: last.clone(),
        busy: true,
        due: 0,
    };
    Ok((Setup { name: name.to_string(), route, netns: netns.to_string(), job, xdp, metrics, last }, unit))
}

/// Runs `f` on each of `items`, each on a thread of its own, and waits for all.
fn each_on_its_thread<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync) {
    let f = &f;
    std::thread::scope(|sc| {
        for x in items {
            sc.spawn(move || f(x));
        }
    });
}

/// Deals `units` to `workers` groups, host `i` to group `i % workers` (no empty group).
fn deal<T>(units: Vec<T>, workers: usize) -> Vec<Vec<T>> {
    let n = workers.clamp(1, units.len().max(1));
    let mut groups: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
    for (i, u) in units.into_iter().enumerate() {
        groups[i % n].push(u);
    }
    groups
}

/// The main thread's wait for every host's report: each is completed (XDP counters, why the
/// job ended), published and printed as it comes. Returns whether all are ok. After a stop
/// signal, hosts that have not reported within [`STOP_GRACE`] get their last snapshot printed
/// instead, and the process exits with status 1 (their data thread is stuck).
fn collect(rx: &mpsc::Receiver<Reported>, workers: &mut [Worker], setups: &[Setup]) -> Result<bool> {
    let mut reported = vec![false; setups.len()];
    let mut ok = true;
    let mut stop_seen: Option<std::time::Instant> = None;
    let names: Vec<String> = setups.iter().map(|s| s.name.clone()).collect();
    while reported.iter().any(|r| !r) {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok((i, report, exit)) => {
                ok &= publish(&setups[i], report, exit)?;
                reported[i] = true;
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                for w in workers.iter_mut() {
                    w.join(&names)?;
                }
                let missing: Vec<&str> =
                    names.iter().zip(&reported).filter(|(_, r)| !**r).map(|(n, _)| n.as_str()).collect();
                bail!("every data thread ended without a report from {}", missing.join(", "));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        // A worker that failed ends early: its error says why (one that ended well handed each
        // of its hosts to a thread that reports).
        for w in workers.iter_mut() {
            if w.handle.as_ref().is_some_and(|h| h.is_finished()) {
                w.join(&names)?;
            }
        }
        if !STOP.load(Ordering::Relaxed) {
            continue;
        }
        let since = *stop_seen.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() >= STOP_GRACE {
            for (_, s) in setups.iter().enumerate().filter(|(i, _)| !reported[*i]) {
                let last = s.last.lock().unwrap_or_else(PoisonError::into_inner).take();
                let r = hostd::stuck_report(
                    last,
                    &s.job.name,
                    TIMED_OUT.load(Ordering::Relaxed),
                    s.job.snapshot_interval_ms,
                );
                print_line(&s.name, &serde_json::to_string(&r)?)?;
                let _on = log_route::scoped(Some(s.route));
                tracing::error!("the data thread did not stop; exiting without it");
            }
            std::process::exit(1);
        }
    }
    Ok(ok)
}

/// Completes host `s`'s report (XDP counters, why the job ended), publishes it in its metrics
/// and prints it; returns whether it is ok.
fn publish(s: &Setup, mut report: Report, exit: Exit) -> Result<bool> {
    let counters = s.xdp.counters().with_context(|| format!("{}: reading host XDP counters", s.name))?;
    hostd::add_xdp_counters(&mut report, &counters);
    hostd::settle_report(&mut report, exit, TIMED_OUT.load(Ordering::Relaxed), s.job.timeout_ms);
    s.metrics.update(&report);
    print_line(&s.name, &serde_json::to_string(&report)?)?;
    let _on = log_route::scoped(Some(s.route));
    match hostd::outcome(&report) {
        Ok(true) => {}
        Ok(false) => tracing::warn!(error = ?report.error, "job did not complete"),
        Err(e) => tracing::warn!("{e}"),
    }
    Ok(report.ok)
}

/// One of host `name`'s lines on stdout: `name\tline`.
fn print_line(name: &str, line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{name}\t{line}")?;
    out.flush()?;
    Ok(())
}

/// A data thread and the hosts it drives.
struct Worker {
    hosts: Vec<usize>,
    handle: Option<std::thread::JoinHandle<Result<()>>>,
}

impl Worker {
    /// Its hosts' names (`names`: every host's, in order).
    fn names(&self, names: &[String]) -> String {
        self.hosts.iter().map(|&i| names[i].as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Waits for it to end (once): its error, or a panic, names its hosts.
    fn join(&mut self, names: &[String]) -> Result<()> {
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow!("the data thread of {} panicked", self.names(names)))?
                .with_context(|| format!("the data thread of {}", self.names(names))),
            None => Ok(()),
        }
    }
}

/// A worker's loop over its hosts (module docs) until each one's job has ended.
fn work(mut units: Vec<Unit>, clock: Clock, tx: &mpsc::Sender<Reported>, ended: &Ended) -> Result<()> {
    daemon::set_timer_slack();
    let mut fds = Vec::new();
    let mut ranges = Vec::new();
    for u in &units {
        let from = fds.len();
        u.host.as_ref().expect("running").pollfds(&mut fds);
        ranges.push(from..fds.len());
    }
    let now = clock.now();
    for u in &mut units {
        let _on = log_route::scoped(Some(u.route));
        u.host.as_mut().expect("running").start_links(now);
    }
    loop {
        let now = clock.now();
        let mut work = 0;
        let mut live = 0;
        for (u, range) in units.iter_mut().zip(&ranges) {
            let Some(host) = u.host.as_mut() else { continue };
            let _on = log_route::scoped(Some(u.route));
            // A carrier change moves QPs: the host gets a pass.
            u.busy |= host.watch_links(&mut fds[range.clone()], now)?;
            live += 1;
            // A host with nothing received, idle since its last pass and not yet due sleeps as
            // its own thread would: its engine is not asked (its timers and the checks of its
            // QPs cost in proportion to them, thousands in an all-to-all).
            let received = host.receive(now)?;
            if received == 0 && !u.busy && now < u.due.min(u.deadline).min(u.next_tick) && !STOP.load(Ordering::Relaxed)
            {
                continue;
            }
            if let Some(exit) = u.ended(now) {
                u.end(exit, now, &clock, tx, ended)?;
                live -= 1;
                // Out of the ppoll set: its thread polls its sockets now.
                for f in &mut fds[range.clone()] {
                    f.fd = -1;
                }
                continue;
            }
            let host = u.host.as_mut().expect("running");
            let pass = host.run(now)?;
            let moved = received + pass.work;
            work += moved;
            u.busy = moved > 0;
            if !u.busy {
                u.due = host.wake(clock.now(), pass);
            }
        }
        if live == 0 {
            return Ok(());
        }
        if work > 0 {
            continue;
        }
        // Nothing moved: sleep until the earliest of every host's deadlines.
        let now = clock.now();
        let wake = units
            .iter()
            .filter(|u| u.host.is_some())
            .map(|u| u.due.min(u.deadline).min(u.next_tick))
            .min()
            .unwrap_or(u64::MAX);
        if wake > now {
            daemon::sleep(&mut fds, wake - now)?;
        }
    }
}

impl Unit {
    /// Publishes a snapshot when one is due; says why the job ended if it did at `now`.
    fn ended(&mut self, now: u64) -> Option<Exit> {
        let host = self.host.as_mut()?;
        if now >= self.next_tick {
            hostd::publish_snapshot(&host.engine, &self.job_name, now, &self.metrics, &self.last);
            self.next_tick = now.saturating_add(self.tick_ns);
        }
        if host.done() {
            Some(Exit::Finished)
        } else if now >= self.deadline {
            Some(Exit::Timeout)
        } else if STOP.load(Ordering::Relaxed) {
            Some(Exit::Stopped)
        } else {
            None
        }
    }

    /// The job ended at `now` (`exit`): the host goes to a thread of its own, which verifies its
    /// data and reports on `tx` (so neither the worker nor its other hosts wait for a
    /// verification), then keeps a finished host's QPs up for its linger (until SERVE_STOP or
    /// the linger's end, as [`daemon::serve`] does for a single host) and closes its sockets.
    fn end(&mut self, exit: Exit, now: u64, clock: &Clock, tx: &mpsc::Sender<Reported>, ended: &Ended) -> Result<()> {
        let mut host = self.host.take().expect("running");
        let (index, route, job_name, clock, tx) = (self.index, self.route, self.job_name.clone(), *clock, tx.clone());
        let linger_ns = if exit == Exit::Finished { self.linger_ns } else { 0 };
        let handle = std::thread::Builder::new()
            .name(format!("rocefab-end{index}"))
            .spawn(move || {
                let _on = log_route::scoped(Some(route));
                let report = hostd::verified_report(&host, &job_name, now, &clock);
                let _ = tx.send((index, report, exit));
                if linger_ns > 0 {
                    let until = clock.now().saturating_add(linger_ns);
                    if let Err(e) = daemon::serve(&mut host, &clock, until, &SERVE_STOP) {
                        tracing::warn!("serving the finished QPs: {e}");
                    }
                }
            })
            .context("spawning a host's thread for its report")?;
        ended.lock().unwrap_or_else(PoisonError::into_inner).push(handle);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_dealt_in_turn_and_no_worker_is_idle() {
        let g = deal((0..7).collect(), 3);
        assert_eq!(g, vec![vec![0, 3, 6], vec![1, 4], vec![2, 5]]);
        assert_eq!(deal((0..2).collect(), 8), vec![vec![0], vec![1]]);
        assert_eq!(deal((0..3).collect(), 0), vec![vec![0, 1, 2]]);
    }
}
