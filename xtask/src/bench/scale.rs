//! `cargo xtask bench --scale`: how a fabric of the book's size fits one machine (issue 24).
//! For each topology (default `pod-64gpu` and `multi-pod-512gpu`, each as a renamed copy) it
//! brings the fabric up and measures: time to up (and `rocefab up`'s phase lines), the memory
//! of all its daemons (RSS, of which anonymous and shared, plus the drop of the machine's
//! MemAvailable, which also counts pinned UMEM and kernel objects), their threads, their CPU
//! and wake-ups (context switches) over `--scale-idle` of an idle fabric, `rocefab lldp --check`,
//! a ping from the first GPU to the last (across pods in a multi-pod fabric), a 1 MiB AllReduce
//! over every rank (verified; JCT emulated and on the wall clock, wall seconds per emulated
//! millisecond (in wall ms); during it: where the CPU time and wake-ups went, the frame-hops the switches
//! made per second and per CPU-second of the machine, the machine's wake-ups per frame-hop, the
//! lowest MemAvailable) and an all-to-all (JCT, and the wall time outside it as a share of the
//! JCT); a job `rocefab run` found machine-bound is marked so. Then time to down and the namespaces left. `--scale-dilation` then searches the
//! lowest time dilation at which a 400G version of the last topology runs the AllReduce
//! without the machine-bound warning. Every step is bounded in wall time; a failing step is
//! reported and the rest goes on; the fabric always goes down.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use super::fabric::{daemon_pids, output_within, topology_copy, RocefabFabric};
use super::proc::{check_interrupt, process_cpu_ns, sleep};

/// Targets of issue 24 for the 512-GPU fabric.
pub const TARGET_UP_S: f64 = 30.0;
pub const TARGET_MEM_GIB: f64 = 6.0;
pub const TARGET_IDLE_PCT: f64 = 5.0;
pub const TARGET_OUTSIDE: f64 = 0.20;
pub const TARGET_DOWN_S: f64 = 10.0;

/// One collective's outcome.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Job {
    pub ok: bool,
    pub verified: Option<bool>,
    pub ranks: u64,
    /// The fabric's time dilation D.
    pub time_dilation: f64,
    /// Job completion time, emulated, ms.
    pub jct_emulated_ms: f64,
    /// What the model expects of the job if the machine keeps up (`expected` of the report),
    /// emulated ms.
    pub expected_ms: Option<f64>,
    /// Job completion time on the wall clock (emulated JCT x D), s.
    pub jct_s: f64,
    /// `rocefab run`'s own wall time, s.
    pub wall_s: f64,
    /// (wall - JCT) / JCT.
    pub outside_over_jct: f64,
    pub machine_bound: bool,
    /// The run's first machine-bound warning, if any.
    pub warning: Option<String>,
    pub error: Option<String>,
}

/// Where a busy fabric (during the AllReduce) spends CPU time and wake-ups: the switch daemons,
/// the NIC agents, and the rest of the machine (the job's `rocefab-hostd` processes, `rocefab
/// run` and anything else), from the daemons' `/proc/<pid>` and the machine's `/proc/stat`.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Busy {
    pub wall_s: f64,
    /// CPU seconds per wall second (2.0 = both cores of this machine busy).
    pub cpu_switches: f64,
    pub cpu_nic_agents: f64,
    pub cpu_rest: f64,
    /// Context switches per wall second.
    pub wakeups_switches: f64,
    pub wakeups_nic_agents: f64,
    pub wakeups_rest: f64,
    /// Frames every switch handed to its ports' TX rings (`rocefab_port_tx_packets_total`, LLDP
    /// and PFC included): one per frame-hop.
    pub frame_hops: u64,
    /// CPU seconds of the whole machine (every process and the kernel).
    pub machine_cpu_s: f64,
    /// Context switches of the whole machine (`ctxt` of /proc/stat).
    pub machine_wakeups: u64,
}

impl Busy {
    pub fn frame_hops_per_s(&self) -> f64 {
        self.frame_hops as f64 / self.wall_s
    }

    /// Frame-hops per CPU second of the machine: the useful work it does per unit of what it
    /// has (comparable with the single-switch bench's frames per second on one core).
    pub fn frame_hops_per_cpu_s(&self) -> f64 {
        self.frame_hops as f64 / self.machine_cpu_s
    }

    pub fn wakeups_per_frame_hop(&self) -> f64 {
        self.machine_wakeups as f64 / self.frame_hops as f64
    }
}

/// The machine's busy CPU time (ns, every CPU, not idle or iowait: [`super::proc::cpu_times`])
/// and its context switches so far (`ctxt` of /proc/stat).
fn machine_cpu_and_ctxt() -> (u64, u64) {
    let busy: u64 = super::proc::cpu_times().unwrap_or_default().iter().map(|(b, _)| b).sum();
    let ctxt = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("ctxt "))?.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    (busy * 1_000_000_000 / super::proc::clock_ticks(), ctxt)
}

/// CPU ns and context switches of `pids` together.
fn pids_cpu_and_ctxt(pids: &[u32]) -> (u64, u64) {
    (pids.iter().filter_map(|&p| process_cpu_ns(p).ok()).sum(), pids.iter().map(|&p| ctx_switches(p)).sum())
}

/// The measurements of one topology.
#[derive(Debug, Default, Serialize)]
pub struct Row {
    pub topology: String,
    pub switches: u64,
    pub hosts: u64,
    pub links: u64,
    pub up_s: Option<f64>,
    pub up_phases: Vec<String>,
    pub daemons: u64,
    pub threads: u64,
    pub rss_mib: f64,
    pub rss_anon_mib: f64,
    pub rss_shmem_mib: f64,
    pub mem_available_drop_mib: f64,
    /// The most MemAvailable was below its value before up while the AllReduce ran (sampled
    /// every 100 ms), MiB.
    pub mem_available_drop_job_mib: Option<f64>,
    /// CPU of all daemons over the idle window, % of one core.
    pub idle_cpu_pct: Option<f64>,
    /// Context switches of all daemons' threads per second while idle (their wake-ups).
    pub idle_wakeups_per_s: Option<f64>,
    /// During the AllReduce: where the machine's CPU time and wake-ups went.
    pub busy: Option<Busy>,
    pub lldp_check_ok: Option<bool>,
    pub ping: Option<String>,
    pub ping_ok: Option<bool>,
    pub allreduce: Option<Job>,
    pub alltoall: Option<Job>,
    pub down_s: Option<f64>,
    pub namespaces_left: Option<u64>,
    /// `--scale-bgp`: FRR's daemons (zebra, bgpd, bfdd per switch), their RSS and PSS (each
    /// process's share of shared pages, so the libraries count once), MiB.
    pub frr_daemons: u64,
    pub frr_rss_mib: f64,
    pub frr_pss_mib: f64,
    /// `--scale-bgp`: how long `rocefab up` waited for BGP to converge, s.
    pub bgp_converged_s: Option<f64>,
    /// The same AllReduce in htsim, as `sim/htsim/run_allreduce.sh` recorded it (multi-pod-512gpu
    /// only): not run by the bench.
    pub htsim: Option<Htsim>,
    pub errors: Vec<String>,
}

/// A run of `sim/htsim/allreduce-results.json`.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Htsim {
    pub jct_ns: f64,
    pub wall_s: f64,
    pub commit: String,
}

/// htsim's 1 MiB AllReduce of `topology` at its rates as written, from `results` (the JSON
/// `sim/htsim/run_allreduce.sh` writes); `None` for another topology or an unfinished run.
pub fn htsim_allreduce(topology: &str, results: &str) -> Option<Htsim> {
    if topology != "multi-pod-512gpu" {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(results).ok()?;
    let r = v.as_array()?.iter().find(|r| r["run"] == "1g" && r["complete"] == true)?;
    Some(Htsim {
        jct_ns: r["jct_ns"].as_f64()?,
        wall_s: r["wall_s"].as_f64()?,
        commit: r["htsim_commit"].as_str().unwrap_or("").to_string(),
    })
}

/// The whole report (`--json`).
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    /// The searches for the lowest model-bound time dilation: each topology as written, then
    /// the last one at 400G.
    pub searches: Vec<Search>,
}

pub struct ScaleArgs<'a> {
    pub topologies: &'a [String],
    /// Run the topologies with `routing: bgp` (FRR in every switch namespace).
    pub bgp: bool,
    pub idle: Duration,
    pub alltoall_size: &'a str,
    /// The 400G search's time dilations, lowest first (empty: no 400G search).
    pub dilations: &'a [u64],
    /// Doublings of each topology's own time dilation that its search tries (0: none).
    pub search_steps: u32,
    /// The search's first time dilation instead of each topology's own.
    pub search_from: Option<u64>,
    /// Only the searches, not the table.
    pub search_only: bool,
    pub json: bool,
}

fn read_status(pid: u32) -> Option<(u64, u64, u64, u64)> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |k: &str| {
        t.lines().find(|l| l.starts_with(k)).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).unwrap_or(0)
    };
    Some((kb("VmRSS:"), kb("RssAnon:"), kb("RssShmem:"), kb("Threads:")))
}

/// Context switches of every thread of `pid`.
fn ctx_switches(pid: u32) -> u64 {
    let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    d.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with("voluntary_ctxt_switches:") || l.starts_with("nonvoluntary_ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

pub fn mem_available_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The `/metrics` URLs of fabric `name`'s switches (`rocefab status --json`).
fn switch_metrics_urls(rocefab: &Path, name: &str) -> Vec<String> {
    let out = rocefab_cmd(rocefab, &["status", name, "--json"]).output().map(|o| o.stdout).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
    v["daemons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["metrics_url"].as_str().map(str::to_string))
        .collect()
}

/// Frames all the switches at `urls` handed to their ports so far.
fn frames_sent(urls: &[String]) -> anyhow::Result<u64> {
    let mut n = 0.0;
    for u in urls {
        let text = crate::util::http_get(u)?;
        n += rocefab_contracts::promtext::samples(&text)
            .filter(|s| s.name == "rocefab_port_tx_packets_total")
            .map(|s| s.value)
            .sum::<f64>();
    }
    if urls.is_empty() {
        bail!("no switch metrics to read");
    }
    Ok(n as u64)
}

/// The lowest MemAvailable seen (KiB), sampled every 100 ms from a thread until [`MemWatch::stop`].
struct MemWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl MemWatch {
    fn start() -> MemWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut low = mem_available_kib();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                low = low.min(mem_available_kib());
            }
            low
        });
        MemWatch { stop, thread }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_else(|_| mem_available_kib())
    }
}

/// `rocefab <args>`.
fn rocefab_cmd(rocefab: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(rocefab);
    c.args(args);
    c
}

fn namespaces_of(name: &str) -> u64 {
    let out = Command::new("ip").args(["netns", "list"]).output().map(|o| o.stdout).unwrap_or_default();
    let prefix = format!("rf-{name}-");
    String::from_utf8_lossy(&out).lines().filter(|l| l.starts_with(&prefix)).count() as u64
}

/// The local ACK timeout of the bench's AllReduces and all-to-all, emulated ms (`rocefab run
/// --retransmit-timeout-ms`): 10 s of wall clock at D 100.
const JOB_RETRANSMIT_TIMEOUT_MS: &str = "100";

/// `rocefab run <fabric> <kind> --size <size> --json`.
fn job(rocefab: &Path, fabric: &str, kind: &str, size: &str, timeout: Duration, extra: &[&str]) -> Job {
    let mut c = Command::new(rocefab);
    c.args(["run", fabric, kind, "--size", size, "--json", "--timeout", &timeout.as_secs().to_string()]);
    c.args(extra);
    let t0 = Instant::now();
    let o = match output_within(c, timeout + Duration::from_secs(60), true) {
        Ok(o) => o,
        Err(e) => return Job { error: Some(format!("{e:#}")), ..Job::default() },
    };
    let wall_s = t0.elapsed().as_secs_f64();
    let v: serde_json::Value = match serde_json::from_slice(&o.stdout) {
        Ok(v) => v,
        Err(_) => {
            let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
            return Job { wall_s, error: Some(format!("no JSON report ({}): {err}", o.status)), ..Job::default() };
        }
    };
    job_from_report(&v, wall_s)
}

/// A [`Job`] from `rocefab run --json`'s report and the command's wall time.
pub fn job_from_report(v: &serde_json::Value, wall_s: f64) -> Job {
    let d = v["time_dilation"].as_f64().unwrap_or(1.0).max(1.0);
    let jct_s = v["completion_ns"].as_f64().unwrap_or(0.0) * d / 1e9;
    let ranks = v["ranks"].as_u64().unwrap_or(0);
    let verified = v["verified_ranks"].as_u64().map(|n| n == ranks && ranks > 0);
    let errors = v["errors"].as_array().map(|e| e.len()).unwrap_or(0);
    Job {
        ok: v["ok"].as_bool() == Some(true),
        verified,
        ranks,
        time_dilation: d,
        jct_emulated_ms: v["completion_ns"].as_f64().unwrap_or(0.0) / 1e6,
        expected_ms: v["expected"]["completion_ns"].as_f64().map(|ns| ns / 1e6),
        jct_s,
        wall_s,
        outside_over_jct: if jct_s > 0.0 { (wall_s - jct_s) / jct_s } else { f64::NAN },
        machine_bound: v["warnings"].as_array().is_some_and(|w| !w.is_empty()),
        warning: v["warnings"].as_array().and_then(|w| w.first()).and_then(|w| w.as_str()).map(str::to_string),
        error: (errors > 0).then(|| v["errors"].to_string()),
    }
}

fn measure(rocefab: &Path, run_dir: &Path, topology: &str, idx: usize, a: &ScaleArgs<'_>) -> anyhow::Result<Row> {
    let root = crate::util::root();
    let template = root.join("topologies").join(format!("{topology}.yaml"));
    let name = format!("bsc{idx}");
    let topo = topology_copy(&template, run_dir, &name, None)?;
    if a.bgp {
        let mut text = std::fs::read_to_string(&topo)?;
        text += "routing: bgp\n";
        std::fs::write(&topo, text).with_context(|| format!("writing {}", topo.display()))?;
    }
    let mut row = Row { topology: topology.to_string(), ..Row::default() };
    row.htsim = std::fs::read_to_string(root.join("sim/htsim/allreduce-results.json"))
        .ok()
        .and_then(|t| htsim_allreduce(topology, &t));
    let before = mem_available_kib();
    let guard = RocefabFabric { bin: rocefab.to_path_buf(), name: name.clone() };
    eprintln!("xtask bench --scale: rocefab up {topology} ...");
    let t0 = Instant::now();
    let up = output_within(rocefab_cmd(rocefab, &["up", &topo.to_string_lossy()]), Duration::from_secs(600), true)?;
    let up_s = t0.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&up.stderr).to_string();
    row.up_phases = stderr.lines().filter(|l| l.starts_with("up: ")).map(String::from).collect();
    if !up.status.success() {
        row.errors.push(format!("rocefab up: {}", stderr.trim()));
        drop(guard);
        return Ok(row);
    }
    row.up_s = Some(up_s);
    (row.hosts, row.switches, row.links) = up_counts(&String::from_utf8_lossy(&up.stdout));
    let pids = daemon_pids(&name, "/rocefab-");
    row.daemons = pids.len() as u64;
    for &p in &pids {
        if let Some((rss, anon, shmem, threads)) = read_status(p) {
            row.rss_mib += rss as f64 / 1024.0;
            row.rss_anon_mib += anon as f64 / 1024.0;
            row.rss_shmem_mib += shmem as f64 / 1024.0;
            row.threads += threads;
        }
    }
    row.mem_available_drop_mib = before.saturating_sub(mem_available_kib()) as f64 / 1024.0;
    if a.bgp {
        row.bgp_converged_s = row.up_phases.iter().find_map(|l| bgp_converged(l));
        for prog in ["/zebra", "/bgpd", "/bfdd"] {
            for p in daemon_pids(&name, prog) {
                row.frr_daemons += 1;
                row.frr_rss_mib += read_status(p).map_or(0, |s| s.0) as f64 / 1024.0;
                row.frr_pss_mib += pss_kib(p) as f64 / 1024.0;
            }
        }
    }
    // Idle: let the start-up's LLDP fast start pass first.
    sleep(Duration::from_secs(5))?;
    let cpu0: u64 = pids.iter().filter_map(|&p| process_cpu_ns(p).ok()).sum();
    let cs0: u64 = pids.iter().map(|&p| ctx_switches(p)).sum();
    let t = Instant::now();
    sleep(a.idle)?;
    let secs = t.elapsed().as_secs_f64();
    let cpu1: u64 = pids.iter().filter_map(|&p| process_cpu_ns(p).ok()).sum();
    let cs1: u64 = pids.iter().map(|&p| ctx_switches(p)).sum();
    row.idle_cpu_pct = Some(cpu1.saturating_sub(cpu0) as f64 / 1e9 / secs * 100.0);
    row.idle_wakeups_per_s = Some(cs1.saturating_sub(cs0) as f64 / secs);
    check_interrupt()?;
    eprintln!("xtask bench --scale: {topology}: lldp --check, ping, AllReduce, all-to-all ...");
    let lldp = output_within(
        rocefab_cmd(rocefab, &["lldp", &name, "--check", "--timeout", "10"]),
        Duration::from_secs(300),
        true,
    )?;
    row.lldp_check_ok = Some(lldp.status.success());
    if !lldp.status.success() {
        row.errors
            .push(format!("lldp --check: {}", String::from_utf8_lossy(&lldp.stdout).lines().last().unwrap_or("")));
    }
    let last = format!("host{}:gpu0", row.hosts.max(1));
    let ping = output_within(
        rocefab_cmd(rocefab, &["ping", &name, "host1:gpu0", &last, "-c", "5"]),
        Duration::from_secs(120),
        true,
    )?;
    row.ping_ok = Some(ping.status.success());
    row.ping = String::from_utf8_lossy(&ping.stdout).lines().last().map(|l| format!("host1:gpu0 -> {last}: {l}"));
    let (switchds, nicds) = (daemon_pids(&name, "/rocefab-switchd"), daemon_pids(&name, "/rocefab-nicd"));
    let urls = switch_metrics_urls(rocefab, &name);
    let hops0 = frames_sent(&urls);
    let (m0, s0, n0) = (machine_cpu_and_ctxt(), pids_cpu_and_ctxt(&switchds), pids_cpu_and_ctxt(&nicds));
    let lowest = MemWatch::start();
    let t = Instant::now();
    // The same local ACK timeout as the all-to-all's: at D 100 the default (100 ms of wall
    // clock) is shorter than a saturated 2-core machine may leave a host's data thread waiting,
    // and one QP out of retries lost a bench's 512-rank AllReduce (2026-11-27).
    row.allreduce = Some(job(
        rocefab,
        &name,
        "allreduce",
        "1MiB",
        Duration::from_secs(900),
        &["--retransmit-timeout-ms", JOB_RETRANSMIT_TIMEOUT_MS],
    ));
    let wall_s = t.elapsed().as_secs_f64();
    let (m1, s1, n1) = (machine_cpu_and_ctxt(), pids_cpu_and_ctxt(&switchds), pids_cpu_and_ctxt(&nicds));
    row.mem_available_drop_job_mib = Some(before.saturating_sub(lowest.stop()) as f64 / 1024.0);
    let frame_hops = match (hops0, frames_sent(&urls)) {
        (Ok(a), Ok(b)) => b.saturating_sub(a),
        (Err(e), _) | (_, Err(e)) => {
            row.errors.push(format!("frame-hops: {e:#}"));
            0
        }
    };
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let (sc, nc, mc) = (d(s0.0, s1.0), d(n0.0, n1.0), d(m0.0, m1.0));
    let (sw, nw, mw) = (d(s0.1, s1.1), d(n0.1, n1.1), d(m0.1, m1.1));
    row.busy = Some(Busy {
        wall_s,
        cpu_switches: sc / 1e9 / wall_s,
        cpu_nic_agents: nc / 1e9 / wall_s,
        cpu_rest: (mc - sc - nc).max(0.0) / 1e9 / wall_s,
        wakeups_switches: sw / wall_s,
        wakeups_nic_agents: nw / wall_s,
        wakeups_rest: (mw - sw - nw).max(0.0) / wall_s,
        frame_hops,
        machine_cpu_s: mc / 1e9,
        machine_wakeups: mw as u64,
    });
    check_interrupt()?;
    // Every receiver of a 512-rank all-to-all is a 511-way incast: its link drains the first
    // packets of all its peers in ~0.8 ms (emulated, 1 Gbit/s), about the default local ACK
    // timeout at D 100 (1 ms), and go-back-N retries then feed the incast until QPs run out of
    // retries. A NIC's local ACK timeout is set per QP (4.096 µs x 2^n, tens of ms in
    // practice): the bench gives the all-to-all 100 ms, emulated.
    row.alltoall = Some(job(
        rocefab,
        &name,
        "alltoall",
        a.alltoall_size,
        Duration::from_secs(900),
        &["--retransmit-timeout-ms", JOB_RETRANSMIT_TIMEOUT_MS],
    ));
    check_interrupt()?;
    eprintln!("xtask bench --scale: rocefab down {topology} ...");
    let t0 = Instant::now();
    let down = guard.down();
    row.down_s = Some(t0.elapsed().as_secs_f64());
    std::mem::forget(guard);
    if let Err(e) = down {
        row.errors.push(format!("rocefab down: {e:#}"));
    }
    row.namespaces_left = Some(namespaces_of(&name));
    Ok(row)
}

/// `template` with every `line_rate` class x `rate_x` (400: the 400G version of a 1 Gbit/s
/// scale) and time dilation `d`.
pub fn at_rates(template: &str, rate_x: u64, d: u64) -> String {
    let mut out = Vec::new();
    for l in template.lines() {
        let t = l.trim_start();
        let line = if t.starts_with("time_dilation:") {
            format!("time_dilation: {d}")
        } else if let Some((k, v)) = t.split_once(':').filter(|(k, _)| {
            ["host_rail", "rail_spine", "spine_super_spine"].contains(&k.trim()) && l.starts_with("    ")
        }) {
            match v.split_whitespace().next().and_then(|x| x.strip_suffix("Gbps")).and_then(|g| g.parse::<u64>().ok()) {
                Some(g) => format!("{}{}: {}Gbps", &l[..l.len() - t.len()], k.trim(), g * rate_x),
                None => l.to_string(),
            }
        } else {
            l.to_string()
        };
        out.push(line);
    }
    if !out.iter().any(|l| l.starts_with("time_dilation:")) {
        let at = out.iter().position(|l| l.starts_with("mtu:")).map_or(0, |i| i + 1);
        out.insert(at, format!("time_dilation: {d}"));
    }
    out.join("\n") + "\n"
}

/// How far apart the JCTs at D and 2D may be for D to count as model-bound (issue 41).
pub const MODEL_BOUND_TOLERANCE: f64 = 0.10;

/// The time dilation a topology file sets (1 when it sets none).
pub fn own_dilation(template: &str) -> u64 {
    template
        .lines()
        .find_map(|l| l.strip_prefix("time_dilation:"))
        .and_then(|v| v.split('#').next()?.trim().parse::<f64>().ok())
        .map_or(1, |d| d.max(1.0) as u64)
}

/// The search for the lowest time dilation at which one topology's 1 MiB AllReduce is a model
/// result rather than the machine's.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Search {
    pub topology: String,
    /// Every line rate x this (1: as written; 400: the 400G version of a 1 Gbit/s scale).
    pub rate_x: u64,
    /// Every run, in the order made: (D, its outcome).
    pub tries: Vec<(u64, Job)>,
    /// The lowest D that is model-bound: the runs at D and 2D both verified, neither
    /// machine-bound, their emulated JCTs within [`MODEL_BOUND_TOLERANCE`] of each other.
    pub lowest: Option<u64>,
    /// Why the search stopped before finding one, if it did.
    pub stopped: Option<String>,
}

/// Whether the run at `d` is clean: verified, not machine-bound.
fn clean(j: &Job) -> bool {
    j.ok && j.verified == Some(true) && !j.machine_bound && j.jct_emulated_ms > 0.0
}

/// Whether `d` is model-bound by the runs in `tries` (`None`: the run at `d` or `2d` is missing).
pub fn model_bound(tries: &[(u64, Job)], d: u64) -> Option<bool> {
    let at = |x: u64| tries.iter().find(|(y, _)| *y == x).map(|(_, j)| j);
    let (a, b) = (at(d)?, at(2 * d));
    if !clean(a) {
        return Some(false);
    }
    let b = b?;
    Some(clean(b) && (a.jct_emulated_ms - b.jct_emulated_ms).abs() <= MODEL_BOUND_TOLERANCE * b.jct_emulated_ms)
}

/// The wall-clock limit of one AllReduce of the search.
const SEARCH_JOB_TIMEOUT: Duration = Duration::from_secs(900);

/// Runs the 1 MiB AllReduce of `template` (line rates x `rate_x`) at each of `dilations`
/// (lowest first) and at twice the first clean one, until a D is model-bound. One fabric at a
/// time, each brought up at its D and taken down after its run. A D whose expected wall time
/// (the model's JCT x D, from an earlier run) exceeds [`SEARCH_JOB_TIMEOUT`] stops the search.
fn search(
    rocefab: &Path,
    run_dir: &Path,
    topology: &str,
    template: &str,
    rate_x: u64,
    dilations: &[u64],
) -> anyhow::Result<Search> {
    let mut s = Search { topology: topology.to_string(), rate_x, ..Search::default() };
    let rates = if rate_x == 1 { "as written".to_string() } else { format!("x {rate_x}") };
    let mut expected_ms: Option<f64> = None;
    let mut run = |s: &mut Search, d: u64| -> anyhow::Result<bool> {
        if s.tries.iter().any(|(x, _)| *x == d) {
            return Ok(true);
        }
        if let Some(e) = expected_ms.filter(|e| Duration::from_secs_f64(e * d as f64 / 1e3) > SEARCH_JOB_TIMEOUT) {
            s.stopped = Some(format!(
                "at D {d} the model's JCT ({e:.3} ms) takes {:.0} s of wall clock, more than the {} s a run may take",
                e * d as f64 / 1e3,
                SEARCH_JOB_TIMEOUT.as_secs()
            ));
            return Ok(false);
        }
        check_interrupt()?;
        eprintln!("xtask bench --scale: {topology}, line rates {rates}, time dilation {d}: AllReduce ...");
        let name = "bscd";
        let text = at_rates(template, rate_x, d)
            .replace(&format!("fabric: {}", fabric_name(template)), &format!("fabric: {name}"));
        let p: PathBuf = run_dir.join(format!("{name}.yaml"));
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        let j = (|| -> anyhow::Result<Job> {
            let _f = RocefabFabric::up(rocefab, name, &p, Duration::from_secs(300))?;
            Ok(job(
                rocefab,
                name,
                "allreduce",
                "1MiB",
                SEARCH_JOB_TIMEOUT,
                &["--retransmit-timeout-ms", JOB_RETRANSMIT_TIMEOUT_MS],
            ))
        })()
        .unwrap_or_else(|e| Job { error: Some(format!("{e:#}")), ..Job::default() });
        expected_ms = expected_ms.or(j.expected_ms);
        s.tries.push((d, j));
        Ok(true)
    };
    for &d in dilations {
        if !run(&mut s, d)? {
            return Ok(s);
        }
        if model_bound(&s.tries, d) == Some(false) {
            continue;
        }
        if !run(&mut s, 2 * d)? {
            return Ok(s);
        }
        if model_bound(&s.tries, d) == Some(true) {
            s.lowest = Some(d);
            return Ok(s);
        }
    }
    s.stopped.get_or_insert_with(|| "no D tried is model-bound".into());
    Ok(s)
}

pub fn run(rocefab: &Path, run_dir: &Path, a: &ScaleArgs<'_>) -> anyhow::Result<()> {
    if a.topologies.is_empty() {
        bail!("--scale-topologies is empty");
    }
    let mut report = Report::default();
    for (i, t) in a.topologies.iter().enumerate().filter(|_| !a.search_only) {
        match measure(rocefab, run_dir, t, i + 1, a) {
            Ok(r) => report.rows.push(r),
            Err(e) => {
                check_interrupt()?;
                report.rows.push(Row { topology: t.clone(), errors: vec![format!("{e:#}")], ..Row::default() });
            }
        }
    }
    if a.search_steps > 0 {
        for t in a.topologies {
            check_interrupt()?;
            let template = std::fs::read_to_string(crate::util::root().join("topologies").join(format!("{t}.yaml")))?;
            let own = a.search_from.unwrap_or_else(|| own_dilation(&template)).max(1);
            let ds: Vec<u64> = (0..=a.search_steps).map(|k| own << k).collect();
            report.searches.push(search(rocefab, run_dir, t, &template, 1, &ds)?);
        }
    }
    if let Some(t) = a.topologies.last().filter(|_| !a.dilations.is_empty()) {
        let template = std::fs::read_to_string(crate::util::root().join("topologies").join(format!("{t}.yaml")))?;
        report.searches.push(search(rocefab, run_dir, t, &template, 400, a.dilations)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// Seconds from `rocefab up`'s line `up: BGP switches 52 converged in 12.3 s`.
pub fn bgp_converged(line: &str) -> Option<f64> {
    let rest = line.strip_prefix("up: BGP switches ")?;
    let (_, t) = rest.split_once(" converged in ")?;
    t.strip_suffix(" s")?.parse().ok()
}

/// A process's proportional set size (`Pss` of /proc/PID/smaps_rollup), KiB; 0 if unreadable.
fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|t| t.lines().find_map(|l| l.strip_prefix("Pss:")?.trim().strip_suffix("kB")?.trim().parse().ok()))
        .unwrap_or(0)
}

/// (hosts, switches, links) from `rocefab up`'s last line (`fabric x is up: 8 hosts, 6
/// switches, 72 links, 8 NIC agents; ...`).
pub fn up_counts(stdout: &str) -> (u64, u64, u64) {
    let line = stdout.lines().find(|l| l.contains(" is up: ")).unwrap_or("");
    let count = |what: &str| {
        line.split([':', ',', ';'])
            .map(str::trim)
            .find_map(|p| p.strip_suffix(what)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (count("hosts"), count("switches"), count("links"))
}

fn fabric_name(template: &str) -> String {
    template.lines().find_map(|l| l.strip_prefix("fabric:")).map(|s| s.trim().to_string()).unwrap_or_default()
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// A table line: its name, how a topology's value is shown, the target.
type Line = (&'static str, Box<dyn Fn(&Row) -> String>, String);

/// The table (one column per topology).
pub fn render(r: &Report) -> String {
    if r.rows.is_empty() {
        // --scale-search-only
        return r.searches.iter().map(render_search).collect();
    }
    let mut s = String::from("| measure |");
    for row in &r.rows {
        s += &format!(" {} |", row.topology);
    }
    s += " target (512 GPUs) |\n|---|";
    s += &"---|".repeat(r.rows.len() + 1);
    s += "\n";
    let job = |j: &Option<Job>, f: &dyn Fn(&Job) -> String| j.as_ref().map_or("-".into(), f);
    let lines: Vec<Line> = vec![
        (
            "switches / hosts / links",
            Box::new(|w: &Row| format!("{} / {} / {}", w.switches, w.hosts, w.links)),
            String::new(),
        ),
        ("time to up, s", Box::new(|w: &Row| opt(w.up_s, 1)), format!("< {TARGET_UP_S}")),
        ("daemons (threads)", Box::new(|w: &Row| format!("{} ({})", w.daemons, w.threads)), String::new()),
        (
            "daemons' memory: RSS (anon + shared), GiB",
            Box::new(|w: &Row| {
                format!("{:.2} ({:.2} + {:.2})", w.rss_mib / 1024.0, w.rss_anon_mib / 1024.0, w.rss_shmem_mib / 1024.0)
            }),
            format!("< {TARGET_MEM_GIB}"),
        ),
        (
            "MemAvailable drop at up, GiB",
            Box::new(|w: &Row| format!("{:.2}", w.mem_available_drop_mib / 1024.0)),
            String::new(),
        ),
        (
            "FRR (--scale-bgp): daemons, RSS / PSS GiB, BGP converged at up in s",
            Box::new(|w: &Row| {
                if w.frr_daemons == 0 {
                    return "-".into();
                }
                format!(
                    "{}, {:.2} / {:.2}, {}",
                    w.frr_daemons,
                    w.frr_rss_mib / 1024.0,
                    w.frr_pss_mib / 1024.0,
                    opt(w.bgp_converged_s, 1)
                )
            }),
            String::new(),
        ),
        ("idle CPU, % of one core", Box::new(|w: &Row| opt(w.idle_cpu_pct, 1)), format!("< {TARGET_IDLE_PCT}")),
        ("idle wake-ups (context switches) / s", Box::new(|w: &Row| opt(w.idle_wakeups_per_s, 0)), String::new()),
        (
            "during the AllReduce: CPUs busy (switches + NIC agents + job and rest)",
            Box::new(|w: &Row| {
                w.busy.as_ref().map_or("-".into(), |b| {
                    format!("{:.2} + {:.2} + {:.2} cores", b.cpu_switches, b.cpu_nic_agents, b.cpu_rest)
                })
            }),
            String::new(),
        ),
        (
            "during the AllReduce: wake-ups / s (switches + NIC agents + job and rest)",
            Box::new(|w: &Row| {
                w.busy.as_ref().map_or("-".into(), |b| {
                    format!("{:.0} + {:.0} + {:.0}", b.wakeups_switches, b.wakeups_nic_agents, b.wakeups_rest)
                })
            }),
            String::new(),
        ),
        (
            "during the AllReduce: frame-hops / s, per CPU-second of the machine",
            Box::new(|w: &Row| {
                w.busy
                    .as_ref()
                    .filter(|b| b.frame_hops > 0)
                    .map_or("-".into(), |b| format!("{:.0}, {:.0}", b.frame_hops_per_s(), b.frame_hops_per_cpu_s()))
            }),
            String::new(),
        ),
        (
            "during the AllReduce: the machine's wake-ups per frame-hop",
            Box::new(|w: &Row| {
                w.busy
                    .as_ref()
                    .filter(|b| b.frame_hops > 0)
                    .map_or("-".into(), |b| format!("{:.3}", b.wakeups_per_frame_hop()))
            }),
            String::new(),
        ),
        (
            "MemAvailable drop during the AllReduce, GiB",
            Box::new(|w: &Row| opt(w.mem_available_drop_job_mib.map(|m| m / 1024.0), 2)),
            String::new(),
        ),
        (
            "rocefab lldp --check",
            Box::new(|w: &Row| w.lldp_check_ok.map_or("-".into(), |o| if o { "ok" } else { "FAILED" }.into())),
            "ok".into(),
        ),
        (
            "ping first GPU -> last GPU",
            Box::new(|w: &Row| w.ping_ok.map_or("-".into(), |o| if o { "ok" } else { "FAILED" }.into())),
            "ok".into(),
        ),
        (
            "AllReduce 1 MiB: verified, JCT emulated ms (wall s); wall ms per emulated ms",
            Box::new(move |w: &Row| {
                job(&w.allreduce, &|j| {
                    format!(
                        "{} ranks {}, {:.2} ({:.2}){}; {:.2}",
                        j.ranks,
                        if j.verified == Some(true) { "verified" } else { "NOT verified" },
                        j.jct_emulated_ms,
                        j.jct_s,
                        if j.machine_bound { ", MACHINE-BOUND" } else { "" },
                        j.wall_s * 1e3 / j.jct_emulated_ms
                    )
                })
            }),
            "verified".into(),
        ),
        (
            "AllReduce: the model expects, emulated ms (measured / expected)",
            Box::new(move |w: &Row| {
                job(&w.allreduce, &|j| {
                    j.expected_ms.map_or("-".into(), |e| format!("{e:.2} ({:.2})", j.jct_emulated_ms / e))
                })
            }),
            "1.00".into(),
        ),
        (
            "AllReduce in htsim (sim/htsim, recorded): JCT ms, wall s",
            Box::new(|w: &Row| {
                w.htsim.as_ref().map_or("-".into(), |h| format!("{:.2}, {:.2}", h.jct_ns / 1e6, h.wall_s))
            }),
            String::new(),
        ),
        (
            "AllReduce: wall outside the JCT / JCT",
            Box::new(move |w: &Row| job(&w.allreduce, &|j| format!("{:.2}", j.outside_over_jct))),
            format!("< {TARGET_OUTSIDE}"),
        ),
        (
            "all-to-all: JCT s, outside / JCT",
            Box::new(move |w: &Row| {
                job(&w.alltoall, &|j| {
                    if j.error.as_deref().is_some_and(|e| e.contains(" needs about ")) {
                        // `rocefab run` refused it before starting anything: it would not fit.
                        "refused: does not fit memory".to_string()
                    } else {
                        format!(
                            "{} {:.2}{}, {:.2}",
                            if j.ok { "ok" } else { "FAILED" },
                            j.jct_s,
                            if j.machine_bound { " MACHINE-BOUND" } else { "" },
                            j.outside_over_jct
                        )
                    }
                })
            }),
            String::new(),
        ),
        ("time to down, s", Box::new(|w: &Row| opt(w.down_s, 1)), format!("< {TARGET_DOWN_S}")),
        ("namespaces left", Box::new(|w: &Row| w.namespaces_left.map_or("-".into(), |n| n.to_string())), "0".into()),
    ];
    for (name, f, target) in &lines {
        s += &format!("| {name} |");
        for row in &r.rows {
            s += &format!(" {} |", f(row));
        }
        s += &format!(" {target} |\n");
    }
    for row in &r.rows {
        for p in &row.up_phases {
            s += &format!("\n{}: {p}", row.topology);
        }
        for e in &row.errors {
            s += &format!("\n{}: error: {e}", row.topology);
        }
        for (what, j) in [("AllReduce", &row.allreduce), ("all-to-all", &row.alltoall)] {
            if let Some(e) = j.as_ref().and_then(|j| j.error.as_ref()) {
                let short: String = e.chars().take(400).collect();
                s += &format!("\n{}: {what}: {short}", row.topology);
            }
        }
    }
    s += "\n";
    let bound = r.rows.iter().flat_map(|w| [&w.allreduce, &w.alltoall]).flatten().any(|j| j.machine_bound);
    if bound {
        s += "MACHINE-BOUND: `rocefab run` found the machine, not the model, the bottleneck of that job \
              (its CPUs busy while links ran below line rate): its JCT is the machine's, not a model result.\n";
    }
    for x in &r.searches {
        s += &render_search(x);
    }
    s
}

/// The lines of one search: each run, then the lowest model-bound D or why there is none.
pub fn render_search(x: &Search) -> String {
    let rates = if x.rate_x == 1 { String::new() } else { format!(" at line rates x {}", x.rate_x) };
    let mut s = String::new();
    for (d, j) in &x.tries {
        let what = if let Some(e) = &j.error {
            format!("FAILED: {}", e.chars().take(300).collect::<String>())
        } else {
            format!(
                "JCT {:.3} ms emulated ({:.1} s wall){}{}{}",
                j.jct_emulated_ms,
                j.jct_s,
                j.expected_ms
                    .map_or(String::new(), |e| format!(", {:.2} x the model's {e:.3} ms", j.jct_emulated_ms / e)),
                if j.verified == Some(true) { ", verified" } else { ", NOT verified" },
                if j.machine_bound { ", MACHINE-BOUND" } else { "" },
            )
        };
        s += &format!("{}{rates}, 1 MiB AllReduce at D {d}: {what}\n", x.topology);
    }
    s += &format!(
        "{}{rates}: lowest model-bound D (JCT at D and 2D within {:.0} %, verified, no machine-bound warning): {}\n",
        x.topology,
        MODEL_BOUND_TOLERANCE * 100.0,
        match (x.lowest, &x.stopped) {
            (Some(d), _) => d.to_string(),
            (None, Some(why)) => format!("none ({why})"),
            (None, None) => "none".into(),
        }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_400g_copy_scales_every_link_class_and_sets_the_dilation() {
        let t = "fabric: x\nmtu: 1500\nlinks:\n  line_rate:\n    host_rail: 1Gbps\n    rail_spine: 8Gbps\n    spine_super_spine: 8Gbps  # c\n  rail_spine: full-mesh\n";
        let c = at_rates(t, 400, 2000);
        assert!(c.contains("\nmtu: 1500\ntime_dilation: 2000\n"), "{c}");
        assert!(
            c.contains("    host_rail: 400Gbps\n    rail_spine: 3200Gbps\n    spine_super_spine: 3200Gbps\n"),
            "{c}"
        );
        assert!(c.contains("  rail_spine: full-mesh\n"), "{c}");
        let c = at_rates("fabric: x\ntime_dilation: 16\n", 400, 500);
        assert_eq!(c, "fabric: x\ntime_dilation: 500\n");
    }

    #[test]
    fn bgp_convergence_is_read_from_the_up_line() {
        assert_eq!(bgp_converged("up: BGP switches 52 converged in 12.3 s"), Some(12.3));
        assert_eq!(bgp_converged("up: BGP switches 52 started in 70.0 s"), None);
        assert_eq!(bgp_converged("up: FRR 52 started in 1.0 s"), None);
    }

    #[test]
    fn up_counts_read_the_up_line() {
        let l = "fabric pod is up: 8 hosts, 6 switches, 72 links, 8 NIC agents; `rocefab status pod` for details\n";
        assert_eq!(up_counts(l), (8, 6, 72));
        assert_eq!(up_counts(""), (0, 0, 0));
    }

    #[test]
    fn a_job_report_gives_verification_and_the_time_outside_the_jct() {
        let v = serde_json::json!({"ok": true, "ranks": 512, "verified_ranks": 512, "completion_ns": 2.0e9,
                                    "time_dilation": 1.0, "warnings": [], "errors": []});
        let j = job_from_report(&v, 2.2);
        assert!(j.ok && j.verified == Some(true) && !j.machine_bound && j.error.is_none());
        assert!((j.outside_over_jct - 0.1).abs() < 1e-9, "{j:?}");
        let v = serde_json::json!({"ok": false, "ranks": 4, "verified_ranks": 3, "completion_ns": 1.0e6,
                                    "time_dilation": 1000.0, "warnings": ["the machine ..."], "errors": ["x"]});
        let j = job_from_report(&v, 2.0);
        assert!(!j.ok && j.verified == Some(false) && j.machine_bound && j.error.is_some());
        assert_eq!(j.warning.as_deref(), Some("the machine ..."));
        assert!((j.jct_s - 1.0).abs() < 1e-9 && (j.outside_over_jct - 1.0).abs() < 1e-9, "{j:?}");
    }

    #[test]
    fn a_collective_refused_for_memory_is_shown_as_refused_not_failed() {
        let refused = Job {
            error: Some("no JSON report (exit status: 1): rocefab: alltoall on x needs about 15.01 GiB ...".into()),
            ..Job::default()
        };
        let failed = Job { error: Some("no JSON report (exit status: 1): boom".into()), ..Job::default() };
        let row = |j: Job| Report {
            rows: vec![Row { topology: "t".into(), alltoall: Some(j), ..Row::default() }],
            ..Report::default()
        };
        let (refused, failed) = (render(&row(refused)), render(&row(failed)));
        assert!(refused.contains("| refused: does not fit memory |") && !refused.contains("FAILED"), "{refused}");
        assert!(failed.contains("FAILED"), "{failed}");
    }

    #[test]
    fn a_machine_bound_allreduce_is_marked_and_its_work_rates_shown() {
        let v = serde_json::json!({"ok": true, "ranks": 512, "verified_ranks": 512, "completion_ns": 2.5e8,
                                    "time_dilation": 100.0, "warnings": ["the machine, not the model"], "errors": [],
                                    "expected": {"completion_ns": 1.0e7}});
        let j = job_from_report(&v, 30.0);
        assert_eq!((j.jct_emulated_ms, j.time_dilation, j.expected_ms), (250.0, 100.0, Some(10.0)));
        let busy = Busy {
            wall_s: 30.0,
            frame_hops: 3_000_000,
            machine_cpu_s: 60.0,
            machine_wakeups: 600_000,
            ..Busy::default()
        };
        let r = Report {
            rows: vec![Row {
                topology: "t".into(),
                allreduce: Some(j),
                busy: Some(busy),
                mem_available_drop_job_mib: Some(2048.0),
                ..Row::default()
            }],
            ..Report::default()
        };
        let t = render(&r);
        // 250 ms emulated, 25 s of wall clock; `rocefab run` took 30 s: 120 ms per emulated ms.
        assert!(t.contains("| 512 ranks verified, 250.00 (25.00), MACHINE-BOUND; 120.00 |"), "{t}");
        assert!(t.contains("MACHINE-BOUND: `rocefab run` found the machine"), "{t}");
        assert!(
            t.contains("| AllReduce: the model expects, emulated ms (measured / expected) | 10.00 (25.00) |"),
            "{t}"
        );
        assert!(
            t.contains("| during the AllReduce: frame-hops / s, per CPU-second of the machine | 100000, 50000 |"),
            "{t}"
        );
        assert!(t.contains("| during the AllReduce: the machine's wake-ups per frame-hop | 0.200 |"), "{t}");
        assert!(t.contains("| MemAvailable drop during the AllReduce, GiB | 2.00 |"), "{t}");
        let mut quiet = r;
        quiet.rows[0].allreduce.as_mut().unwrap().machine_bound = false;
        let t = render(&quiet);
        assert!(!t.contains("MACHINE-BOUND"), "{t}");
    }

    #[test]
    fn htsim_is_read_for_the_512_gpu_fabric_only_from_its_finished_run() {
        let text = r#"[{"run": "1g", "complete": true, "jct_ns": 29582806, "wall_s": 2.27, "htsim_commit": "40ccb05"},
                       {"run": "400g", "complete": true, "jct_ns": 72913, "wall_s": 1.8}]"#;
        let h = htsim_allreduce("multi-pod-512gpu", text).unwrap();
        assert_eq!((h.jct_ns, h.wall_s, h.commit.as_str()), (29582806.0, 2.27, "40ccb05"));
        assert!(htsim_allreduce("pod-64gpu", text).is_none());
        assert!(htsim_allreduce("multi-pod-512gpu", r#"[{"run": "1g", "complete": false}]"#).is_none());
        let r = Report {
            rows: vec![Row { topology: "multi-pod-512gpu".into(), htsim: Some(h), ..Row::default() }],
            ..Report::default()
        };
        assert!(
            render(&r).contains("| AllReduce in htsim (sim/htsim, recorded): JCT ms, wall s | 29.58, 2.27 |"),
            "{}",
            render(&r)
        );
    }

    fn try_at(d: u64, jct_ms: f64, machine_bound: bool) -> (u64, Job) {
        let j = Job {
            ok: true,
            verified: Some(true),
            ranks: 64,
            time_dilation: d as f64,
            jct_emulated_ms: jct_ms,
            expected_ms: Some(16.0),
            jct_s: jct_ms * d as f64 / 1e3,
            machine_bound,
            ..Job::default()
        };
        (d, j)
    }

    #[test]
    fn a_dilation_is_model_bound_when_it_and_twice_it_agree_within_ten_percent() {
        let tries =
            vec![try_at(1, 900.0, true), try_at(2, 450.0, true), try_at(4, 20.0, false), try_at(8, 18.0, false)];
        assert_eq!(model_bound(&tries, 1), Some(false), "machine-bound at D");
        assert_eq!(model_bound(&tries, 2), Some(false));
        // 20 against 18: 11 % apart.
        assert_eq!(model_bound(&tries, 4), Some(false));
        assert_eq!(model_bound(&tries, 8), None, "no run at 16 yet");
        let mut tries = tries;
        tries.push(try_at(16, 17.5, false));
        // 18 against 17.5: 2.9 %.
        assert_eq!(model_bound(&tries, 8), Some(true));
        // A machine-bound 2D, or an unverified one, does not confirm D.
        let mut t2 = tries.clone();
        t2.last_mut().unwrap().1.machine_bound = true;
        assert_eq!(model_bound(&t2, 8), Some(false));
        let mut t3 = tries;
        t3.last_mut().unwrap().1.verified = Some(false);
        assert_eq!(model_bound(&t3, 8), Some(false));
    }

    #[test]
    fn a_topology_s_own_dilation_starts_its_search() {
        assert_eq!(own_dilation("fabric: x\nmtu: 1500\ntime_dilation: 100 # slow\n"), 100);
        assert_eq!(own_dilation("fabric: x\nmtu: 1500\n"), 1);
    }

    #[test]
    fn a_search_shows_every_run_and_its_outcome() {
        let x = Search {
            topology: "pod-64gpu".into(),
            rate_x: 1,
            tries: vec![try_at(4, 20.0, true), try_at(8, 18.0, false), try_at(16, 17.5, false)],
            lowest: Some(8),
            stopped: None,
        };
        let t = render_search(&x);
        assert!(
            t.contains("pod-64gpu, 1 MiB AllReduce at D 4: JCT 20.000 ms emulated (0.1 s wall), 1.25 x the model's 16.000 ms, verified, MACHINE-BOUND\n"),
            "{t}"
        );
        assert!(t.ends_with("pod-64gpu: lowest model-bound D (JCT at D and 2D within 10 %, verified, no machine-bound warning): 8\n"), "{t}");
        let none = Search { rate_x: 400, lowest: None, stopped: Some("no D tried is model-bound".into()), ..x };
        assert!(
            render_search(&none).contains("pod-64gpu at line rates x 400, 1 MiB AllReduce at D 16: "),
            "{}",
            render_search(&none)
        );
        assert!(render_search(&none).ends_with(": none (no D tried is model-bound)\n"), "{}", render_search(&none));
    }
}
