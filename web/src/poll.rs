//! The pollers of `rocefab web`: plain threads that read the fabric's daemons and files, and one
//! that turns what they read into [`Frame`]s for the page.
//!
//! - one thread per switch daemon: `GET /sample` every interval (≤ 250 ms wall), and about once
//!   a second `GET /metrics` for the PFC watchdog's storms and restores; a daemon that stops
//!   answering is shown as down and logged, never waited for longer than a request timeout;
//! - one thread for the hosts: the jobs `rocefab run` started (`<run dir>/jobs/<collective>/
//!   <host>.json`, their `metrics_listen`) and their `GET /sample` (per-QP DCQCN state);
//! - one thread for LLDP: every node's `GET /lldp` every 2 s, checked against the cabling as
//!   `rocefab lldp --check` does; a link whose check fails (miscabled, DCBX mismatch, a neighbour
//!   missing for three checks in a row) is logged;
//! - the frame thread: reloads `state.json` (failed links and switches) and the fabric's event
//!   log (`rocefab events`) once a second and sends a frame whenever a new sample arrived (at
//!   most every half interval, at least once a second) to every open event stream.
//!
//! All of them stop when [`Hub::stop`] is set.
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use lldp_agent::NodeReport;
use rocefab_contracts::host_sample::HostSample;
use rocefab_contracts::sample::SwitchSample;
use serde::Serialize;
use tokio::sync::broadcast;

use super::live::{self, Frame, Inputs, LogEntry, Stamped, SwitchObs};
use super::view::View;
use control::fabric::cabling::{check_links, LinkEnd, LinkStatus};
use control::fabric::daemon_http::scrape;
use control::fabric::rundir::{self, EmulatedClock, State};

/// How long one request to a daemon may take.
const TIMEOUT: Duration = Duration::from_millis(500);
/// How often LLDP is checked.
const LLDP_EVERY: Duration = Duration::from_secs(2);
/// Checks in a row a missing neighbour must persist before it is logged (neighbours appear a
/// few seconds after `up` and vanish a TTL after a failure, which the failure log already says).
const LLDP_MISSING_CHECKS: u32 = 3;
/// A host sample older than this is a finished job.
const HOST_STALE: Duration = Duration::from_millis(1500);
/// Most entries the event log keeps.
const MAX_LOG: usize = 2000;

/// What every thread shares.
#[derive(Default)]
struct Shared {
    switches: BTreeMap<String, SwitchObs>,
    /// Latest answer of each job's host, by its address: (host, when, sample).
    hosts: BTreeMap<SocketAddr, (String, Instant, HostSample)>,
    lldp: BTreeMap<String, NodeReport>,
    log: Vec<LogEntry>,
    unsent: Vec<LogEntry>,
    latest: Option<Arc<str>>,
    /// Bumped by every new sample.
    generation: u64,
    failed_links: BTreeSet<usize>,
    failed_switches: BTreeSet<String>,
    fabric_up: bool,
}

/// The live state of one fabric and the channel frames go out on.
pub struct Hub {
    pub fabric: String,
    pub view: View,
    pub clock: EmulatedClock,
    pub interval: Duration,
    /// The switch daemons (`node`, base URL) and the LLDP agents (`node`, `/lldp` URL).
    switch_urls: Vec<(String, String)>,
    lldp_urls: Vec<(String, String)>,
    /// The links as `rocefab lldp --check` compares them.
    lldp_links: Vec<(LinkEnd, LinkEnd)>,
    shared: Mutex<Shared>,
    pub frames: broadcast::Sender<Arc<str>>,
    pub stop: AtomicBool,
}

/// The `hello` message of an event stream: the log so far.
#[derive(Serialize)]
struct Hello<'a> {
    log: &'a [LogEntry],
}

impl Hub {
    /// A hub for `st`'s fabric drawn as `view`; `lldp_links` empty when LLDP is off.
    pub fn new(
        st: &State,
        view: View,
        clock: EmulatedClock,
        interval: Duration,
        lldp_links: Vec<(LinkEnd, LinkEnd)>,
    ) -> Hub {
        let switch_urls = st
            .daemons
            .iter()
            .filter(|d| !d.is_host())
            .map(|d| (d.node().to_string(), d.url("").trim_end_matches('/').to_string()))
            .collect();
        let lldp_urls = st.daemons.iter().map(|d| (d.node().to_string(), d.url("/lldp"))).collect();
        let (frames, _) = broadcast::channel(16);
        let shared = Shared {
            fabric_up: true,
            failed_links: st.failed_links.iter().copied().collect(),
            failed_switches: st.failed_switches.iter().cloned().collect(),
            ..Default::default()
        };
        Hub {
            fabric: st.fabric.clone(),
            view,
            clock,
            interval,
            switch_urls,
            lldp_urls,
            lldp_links,
            shared: Mutex::new(shared),
            frames,
            stop: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A poller that panicked leaves consistent maps behind: keep serving.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps `d`, in short steps so a stop is seen quickly; false once stopped.
    fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while !self.stopped() {
            let now = Instant::now();
            if now >= end {
                return true;
            }
            std::thread::sleep((end - now).min(Duration::from_millis(50)));
        }
        false
    }

    /// Emulated ns since the fabric came up, of the wall-clock Unix time `wall_ns`.
    pub fn emulated(&self, wall_ns: u64) -> u64 {
        self.clock.emulated_unix_ns(wall_ns).saturating_sub(self.clock.zero_unix_ns)
    }

    /// Adds an entry to the event log, now.
    fn log(&self, kind: &'static str, text: String) {
        let t_ns = self.emulated(rundir::unix_now_ns());
        self.push_log(LogEntry { t_ns, kind, text });
    }

    fn push_log(&self, e: LogEntry) {
        let mut s = self.lock();
        s.log.push(e.clone());
        if s.log.len() > MAX_LOG {
            let cut = s.log.len() - MAX_LOG;
            s.log.drain(..cut);
        }
        s.unsent.push(e);
        s.generation += 1;
    }

    /// The first messages of a new event stream: `hello` (the log so far) and the latest frame
    /// (without the log entries it brought, which `hello` has).
    pub fn hello(&self) -> (String, Option<Arc<str>>) {
        let s = self.lock();
        (serde_json::to_string(&Hello { log: &s.log }).unwrap_or_default(), s.latest.clone())
    }

    /// The latest sample of a switch.
    pub fn switch_sample(&self, node: &str) -> Option<SwitchSample> {
        self.lock().switches.get(node).and_then(|o| o.cur.as_ref()).map(|c| c.sample.clone())
    }

    /// The latest neighbour table of a node.
    pub fn lldp(&self, node: &str) -> Option<NodeReport> {
        self.lock().lldp.get(node).cloned()
    }

    /// The QPs of the jobs `node` runs now.
    pub fn host_sample(&self, node: &str) -> Option<HostSample> {
        let s = self.lock();
        s.hosts.values().filter(|(h, at, _)| h == node && at.elapsed() < HOST_STALE).map(|x| x.2.clone()).next()
    }

    /// Starts every poller thread.
    pub fn start(self: &Arc<Self>) -> anyhow::Result<()> {
        for (name, base) in &self.switch_urls {
            let (hub, name, base) = (Arc::clone(self), name.clone(), base.clone());
            std::thread::Builder::new().name(format!("web-{name}")).spawn(move || hub.switch_loop(&name, &base))?;
        }
        let hub = Arc::clone(self);
        std::thread::Builder::new().name("web-hosts".into()).spawn(move || hub.hosts_loop())?;
        if !self.lldp_links.is_empty() {
            let hub = Arc::clone(self);
            std::thread::Builder::new().name("web-lldp".into()).spawn(move || hub.lldp_loop())?;
        }
        let hub = Arc::clone(self);
        std::thread::Builder::new().name("web-frames".into()).spawn(move || hub.frame_loop())?;
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Switches

    fn switch_loop(&self, name: &str, base: &str) {
        let url = format!("{base}/sample");
        let mut was_up: Option<bool> = None;
        let mut storms = StormWatch::default();
        let mut round = 0u64;
        while !self.stopped() {
            let t0 = Instant::now();
            let answer = scrape(&url, TIMEOUT)
                .map_err(|e| format!("{e:#}"))
                .and_then(|b| serde_json::from_str::<SwitchSample>(&b).map_err(|e| format!("{url}: {e}")));
            let (up, err, failed) = {
                let mut s = self.lock();
                let o = s.switches.entry(name.to_string()).or_default();
                match answer {
                    Ok(sample) => o.push(Stamped { wall_unix_ns: rundir::unix_now_ns(), sample }),
                    Err(e) => o.fail(e),
                }
                let (up, err) = (o.up(), o.last_error.clone());
                s.generation += 1;
                (up, err, s.failed_switches.contains(name))
            };
            // Logged: a daemon that stops answering (or never answered), and its return.
            let changed = match was_up {
                None => !up,
                Some(w) => w != up,
            };
            if changed && !failed {
                let text = if up {
                    format!("{name}: switch daemon answers again")
                } else {
                    format!("{name}: switch daemon does not answer ({})", err.unwrap_or_default())
                };
                self.log("daemon", text);
            }
            was_up = Some(up);
            // The watchdog's counters, about once a second.
            let every = (Duration::from_secs(1).as_millis() / self.interval.as_millis().max(1)).max(1) as u64;
            if up && round.is_multiple_of(every) {
                if let Ok(text) = scrape(&format!("{base}/metrics"), TIMEOUT) {
                    for line in storms.update(&text) {
                        self.log("storm", format!("{name}:{line}"));
                    }
                }
            }
            round += 1;
            if !self.sleep(self.interval.saturating_sub(t0.elapsed())) {
                break;
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Hosts running a job

    fn hosts_loop(&self) {
        let jobs = rundir::dir(&self.fabric).join("jobs");
        let mut targets: Vec<(SocketAddr, String)> = Vec::new();
        let mut scanned: Option<Instant> = None;
        while !self.stopped() {
            let t0 = Instant::now();
            if scanned.is_none_or(|s| s.elapsed() >= Duration::from_secs(1)) {
                targets = job_hosts(&jobs);
                scanned = Some(t0);
            }
            for (addr, host) in &targets {
                let url = format!("http://{addr}/sample");
                let got = scrape(&url, TIMEOUT).ok().and_then(|b| serde_json::from_str::<HostSample>(&b).ok());
                let mut s = self.lock();
                match got {
                    Some(sample) => {
                        s.hosts.insert(*addr, (host.clone(), Instant::now(), sample));
                        s.generation += 1;
                    }
                    None => {
                        if s.hosts.get(addr).is_some_and(|h| h.1.elapsed() >= HOST_STALE) {
                            s.hosts.remove(addr);
                            s.generation += 1;
                        }
                    }
                }
            }
            if !self.sleep(self.interval.saturating_sub(t0.elapsed())) {
                break;
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // LLDP

    fn lldp_loop(&self) {
        let mut watch = LldpWatch::default();
        while !self.stopped() {
            let t0 = Instant::now();
            let answers: Vec<(String, Option<NodeReport>)> = std::thread::scope(|sc| {
                let handles: Vec<_> = self
                    .lldp_urls
                    .iter()
                    .map(|(node, url)| {
                        sc.spawn(move || {
                            let r = scrape(url, TIMEOUT).ok().and_then(|b| serde_json::from_str::<NodeReport>(&b).ok());
                            (node.clone(), r)
                        })
                    })
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            let reports: Vec<NodeReport> = answers.iter().filter_map(|(_, r)| r.clone()).collect();
            let (failed_links, failed_switches) = {
                let mut s = self.lock();
                for (node, r) in answers {
                    match r {
                        Some(r) => s.lldp.insert(node, r),
                        None => s.lldp.remove(&node),
                    };
                }
                (s.failed_links.clone(), s.failed_switches.clone())
            };
            // Cut links and the links of failed switches are the failure log's to report.
            let cut = |a: &LinkEnd, b: &LinkEnd| {
                failed_switches.contains(&a.node)
                    || failed_switches.contains(&b.node)
                    || self.view.links.iter().any(|l| {
                        failed_links.contains(&l.id)
                            && ((l.a == a.to_string() && l.b == b.to_string())
                                || (l.a == b.to_string() && l.b == a.to_string()))
                    })
            };
            let links: Vec<(LinkEnd, LinkEnd)> = self.lldp_links.iter().filter(|(a, b)| !cut(a, b)).cloned().collect();
            for line in watch.update(&check_links(&links, &reports)) {
                self.log("lldp", line);
            }
            if !self.sleep(LLDP_EVERY.saturating_sub(t0.elapsed())) {
                break;
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Frames

    fn frame_loop(&self) {
        let tick = (self.interval / 2).max(Duration::from_millis(20));
        let mut events_seen = 0usize;
        let mut refreshed: Option<Instant> = None;
        let mut sent_generation = u64::MAX;
        let mut sent_at = Instant::now();
        let mut seq = 0u64;
        while !self.stopped() {
            if refreshed.is_none_or(|r| r.elapsed() >= Duration::from_secs(1)) {
                refreshed = Some(Instant::now());
                self.refresh(&mut events_seen);
            }
            let generation = self.lock().generation;
            if generation != sent_generation || sent_at.elapsed() >= Duration::from_secs(1) {
                seq += 1;
                let text: Arc<str> = self.build_frame(seq).into();
                sent_generation = generation;
                sent_at = Instant::now();
                // No open stream is no error.
                let _ = self.frames.send(text);
            }
            if !self.sleep(tick) {
                break;
            }
        }
    }

    /// Reloads the fabric's state (failed links and switches) and its event log.
    fn refresh(&self, events_seen: &mut usize) {
        match State::load(&self.fabric) {
            Ok(st) => {
                let mut s = self.lock();
                if !s.fabric_up {
                    s.generation += 1;
                }
                s.fabric_up = true;
                s.failed_links = st.failed_links.iter().copied().collect();
                s.failed_switches = st.failed_switches.iter().cloned().collect();
            }
            Err(_) => {
                let mut s = self.lock();
                if s.fabric_up {
                    s.fabric_up = false;
                    s.generation += 1;
                    drop(s);
                    self.log(
                        "failure",
                        format!("fabric {} is down (no {})", self.fabric, rundir::state_path(&self.fabric).display()),
                    );
                }
                return;
            }
        }
        let events = control::fabric::events::read_log(&self.fabric).unwrap_or_default();
        if events.len() < *events_seen {
            *events_seen = 0;
        }
        for e in &events[*events_seen..] {
            let kind = event_kind(&e.event);
            let detail = if e.detail.is_empty() { String::new() } else { format!(": {}", e.detail) };
            self.push_log(LogEntry { t_ns: e.emulated_ns, kind, text: format!("{} {}{detail}", e.event, e.target) });
        }
        *events_seen = events.len();
    }

    fn build_frame(&self, seq: u64) -> String {
        let t_ns = self.emulated(rundir::unix_now_ns());
        let mut s = self.lock();
        s.hosts.retain(|_, h| h.1.elapsed() < HOST_STALE);
        let hosts: Vec<(String, HostSample)> = s.hosts.values().map(|(h, _, x)| (h.clone(), x.clone())).collect();
        let log = std::mem::take(&mut s.unsent);
        let inp = Inputs {
            view: &self.view,
            switches: &s.switches,
            hosts: &hosts,
            failed_links: &s.failed_links,
            failed_switches: &s.failed_switches,
            time_dilation: self.clock.time_dilation,
        };
        let mut f: Frame = live::frame(&inp, seq, t_ns, s.fabric_up, log);
        let text = serde_json::to_string(&f).unwrap_or_default();
        // A new stream gets the whole log in its `hello`: the latest frame without its entries.
        f.log.clear();
        s.latest = Some(serde_json::to_string(&f).unwrap_or_default().into());
        text
    }
}

/// The kind of an entry of the fabric's event log (`rocefab events`): a PFC storm's start and
/// end, a restoration (`link up`, `switch up`), or a failure.
fn event_kind(event: &str) -> &'static str {
    if event.contains("storm") {
        "storm"
    } else if event.ends_with(" up") {
        "restore"
    } else {
        "failure"
    }
}

/// The jobs' hosts under `<run dir>/jobs`: (metrics address, host) of every job file, the most
/// recent file for an address.
fn job_hosts(jobs: &Path) -> Vec<(SocketAddr, String)> {
    let mut best: BTreeMap<SocketAddr, (SystemTime, String)> = BTreeMap::new();
    let Ok(dirs) = std::fs::read_dir(jobs) else { return Vec::new() };
    for d in dirs.flatten() {
        let Ok(files) = std::fs::read_dir(d.path()) else { continue };
        for f in files.flatten() {
            let p = f.path();
            if p.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Some(host) = p.file_stem().and_then(|s| s.to_str()).map(str::to_string) else { continue };
            let mtime = f.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            let addr = std::fs::read(&p)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v.get("metrics_listen").and_then(|a| a.as_str()).and_then(|a| a.parse().ok()));
            if let Some(addr) = addr {
                if best.get(&addr).is_none_or(|(t, _)| *t < mtime) {
                    best.insert(addr, (mtime, host));
                }
            }
        }
    }
    best.into_iter().map(|(a, (_, h))| (a, h)).collect()
}

/// Storms and restores of the PFC watchdog, from a switch's `/metrics` scrapes.
#[derive(Default)]
struct StormWatch {
    /// (port, priority) → (storms, restores) at the last scrape; None before the first.
    last: Option<BTreeMap<(String, String), (f64, f64)>>,
}

impl StormWatch {
    /// Lines (`eth1 priority 3: ...`) for what changed since the last scrape.
    fn update(&mut self, text: &str) -> Vec<String> {
        let mut now: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
        for s in rocefab_contracts::promtext::samples(text) {
            let storm = match s.name {
                "rocefab_pfcwd_storms_total" => true,
                "rocefab_pfcwd_restores_total" => false,
                _ => continue,
            };
            let key = (s.label("port").unwrap_or_default(), s.label("priority").unwrap_or_default());
            let e = now.entry(key).or_default();
            if storm {
                e.0 += s.value;
            } else {
                e.1 += s.value;
            }
        }
        let mut out = Vec::new();
        if let Some(last) = &self.last {
            for ((port, prio), (storms, restores)) in &now {
                let (s0, r0) = last.get(&(port.clone(), prio.clone())).copied().unwrap_or_default();
                if *storms > s0 {
                    out.push(format!("{port} priority {prio}: PFC watchdog detected a PFC storm"));
                }
                if *restores > r0 {
                    out.push(format!("{port} priority {prio}: PFC watchdog restored the queue"));
                }
            }
        }
        self.last = Some(now);
        out
    }
}

/// LLDP check results over time: what to log.
#[derive(Default)]
struct LldpWatch {
    /// `a <-> b` → (status line, checks in a row with it, logged).
    links: BTreeMap<String, (String, u32, bool)>,
}

impl LldpWatch {
    fn update(&mut self, results: &[control::fabric::cabling::LinkCheck]) -> Vec<String> {
        let mut out = Vec::new();
        for r in results {
            let key = format!("{} <-> {}", r.a, r.b);
            let line = r.status.to_string();
            let e = self.links.entry(key.clone()).or_insert_with(|| ("ok".into(), 0, false));
            if e.0 == line {
                e.1 += 1;
            } else {
                if r.status == LinkStatus::Ok && e.2 {
                    out.push(format!("LLDP {key}: ok again"));
                }
                *e = (line.clone(), 1, false);
            }
            let needed = match r.status {
                LinkStatus::Ok | LinkStatus::LinkDown { .. } => continue,
                LinkStatus::MissingNeighbour { .. } | LinkStatus::NoData { .. } => LLDP_MISSING_CHECKS,
                _ => 1,
            };
            if !e.2 && e.1 >= needed {
                e.2 = true;
                out.push(format!("LLDP {key}: {line}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::fabric::cabling::LinkCheck;

    #[test]
    fn storms_and_restores_are_reported_once_after_the_first_scrape() {
        let mut w = StormWatch::default();
        let m = |s: u32, r: u32| {
            format!(
                "# TYPE rocefab_pfcwd_storms_total counter\nrocefab_pfcwd_storms_total{{port=\"eth1\",priority=\"3\",switch=\"rail1\"}} {s}\nrocefab_pfcwd_restores_total{{port=\"eth1\",priority=\"3\",switch=\"rail1\"}} {r}\n"
            )
        };
        assert!(w.update(&m(2, 1)).is_empty(), "storms before the view started are not news");
        assert_eq!(w.update(&m(3, 1)), ["eth1 priority 3: PFC watchdog detected a PFC storm"]);
        assert!(w.update(&m(3, 1)).is_empty());
        assert_eq!(w.update(&m(3, 2)), ["eth1 priority 3: PFC watchdog restored the queue"]);
    }

    #[test]
    fn lldp_mismatches_are_logged_once_and_missing_neighbours_only_when_they_persist() {
        let mut w = LldpWatch::default();
        let check = |status: LinkStatus| LinkCheck { a: "host1:gpu0".into(), b: "rail1:eth1".into(), status };
        let mismatch = || check(LinkStatus::DcbxMismatch { details: vec!["rail1:eth1: PFC".into()] });
        let missing = || check(LinkStatus::MissingNeighbour { at: vec!["rail1:eth1".into()], also: vec![] });
        assert!(w.update(&[check(LinkStatus::Ok)]).is_empty());
        assert_eq!(w.update(&[mismatch()]), ["LLDP host1:gpu0 <-> rail1:eth1: DCBX mismatch: rail1:eth1: PFC"]);
        assert!(w.update(&[mismatch()]).is_empty(), "logged once");
        assert_eq!(w.update(&[check(LinkStatus::Ok)]), ["LLDP host1:gpu0 <-> rail1:eth1: ok again"]);
        assert!(w.update(&[missing()]).is_empty());
        assert!(w.update(&[missing()]).is_empty());
        assert_eq!(w.update(&[missing()]).len(), 1, "the third check in a row logs it");
        // A missing neighbour that comes back before it was logged is no news either way.
        let mut w = LldpWatch::default();
        assert!(w.update(&[missing()]).is_empty() && w.update(&[check(LinkStatus::Ok)]).is_empty());
    }

    #[test]
    fn a_new_stream_gets_the_log_once_and_frames_carry_only_new_entries() {
        let view =
            View { fabric: "t".into(), time_dilation: 1.0, width: 1.0, height: 1.0, nodes: vec![], links: vec![] };
        let clock = EmulatedClock { time_dilation: 1.0, zero_unix_ns: rundir::unix_now_ns() };
        let hub = Hub::new(
            &State { fabric: "t".into(), ..State::default() },
            view,
            clock,
            Duration::from_millis(200),
            vec![],
        );
        hub.log("failure", "link down a -- b".into());
        let sent = hub.build_frame(1);
        assert!(sent.contains("link down a -- b"), "{sent}");
        let (hello, latest) = hub.hello();
        assert!(hello.contains("link down a -- b"), "{hello}");
        let latest = latest.expect("a frame was built");
        assert!(latest.contains("\"log\":[]") && latest.contains("\"seq\":1"), "{latest}");
        // The next frame has nothing new to log.
        assert!(hub.build_frame(2).contains("\"log\":[]"));
    }

    #[test]
    fn event_log_entries_are_failures_restorations_or_storms() {
        assert_eq!(event_kind("link down"), "failure");
        assert_eq!(event_kind("switch down"), "failure");
        assert_eq!(event_kind("link up"), "restore");
        assert_eq!(event_kind("switch up"), "restore");
        assert_eq!(event_kind("pfc storm start"), "storm");
        assert_eq!(event_kind("pfc storm end"), "storm");
    }

    #[test]
    fn job_files_give_each_address_its_latest_host() {
        let dir = std::env::temp_dir().join(format!("rocefab-web-jobs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("incast")).unwrap();
        std::fs::create_dir_all(dir.join("alltoall")).unwrap();
        std::fs::write(dir.join("incast/host1.json"), r#"{"metrics_listen":"127.0.0.1:9900"}"#).unwrap();
        std::fs::write(dir.join("incast/host1.log"), "not a job").unwrap();
        std::fs::write(dir.join("incast/host2.json"), r#"{"name":"x"}"#).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(dir.join("alltoall/host3.json"), r#"{"metrics_listen":"127.0.0.1:9900"}"#).unwrap();
        let h = job_hosts(&dir);
        assert_eq!(h, [("127.0.0.1:9900".parse().unwrap(), "host3".to_string())]);
        assert!(job_hosts(&dir.join("none")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
