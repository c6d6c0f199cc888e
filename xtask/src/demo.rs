//! `cargo xtask demo`: the main job, end to end, on real frames.
//!
//! Builds rocefab, brings up `topologies/rail-spine.yaml` at time dilation [`DILATION`] (a copy
//! in `target/demo/` with `time_dilation` added), sends UDP in three traffic classes
//! from a GPU on rail 1 to a GPU on rail 2 of another host (DSCP 24 → queue 3, DSCP 48 →
//! queue 7, DSCP 0 → queue 0; 64 source ports so ECMP uses both spines), then prints each
//! switch's per-port, per-queue counters scraped from its Prometheus endpoint, the metrics URLs,
//! runs a ring AllReduce over every GPU with the emulated RoCEv2 NICs (`rocefab run`), and tears
//! the fabric down — also when a step fails or on Ctrl-C. Then the lossless part: it brings up
//! `topologies/rail-spine-incast.yaml` (rank 0's link at 100 Mbit/s), runs a 7:1 incast into
//! rank 0 and prints the PFC counters of every switch port, hop by hop, with the drops (none).
//! Last, congestion control: `topologies/rail-spine-400g.yaml` (400G hosts, 800G spines, time
//! dilation 8000) runs a 7:1 incast with WRED/ECN and DCQCN and writes the DCQCN timeline (book
//! Fig. 11-7) to `target/demo/dcqcn-timeline.svg` and `.json`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::util::{http_get, is_root, root, run};

const TOPOLOGY: &str = "topologies/rail-spine.yaml";
const FABRIC: &str = "rs";
const INCAST_TOPOLOGY: &str = "topologies/rail-spine-incast.yaml";
const INCAST_FABRIC: &str = "rsi";
const INCAST_SIZE: &str = "4MiB";
const DCQCN_TOPOLOGY: &str = "topologies/rail-spine-400g.yaml";
const DCQCN_FABRIC: &str = "rs400";
/// Where the demo writes the DCQCN timeline (book Fig. 11-7): `.svg` and `.json`.
const TIMELINE: &str = "target/demo/dcqcn-timeline";
/// (DSCP, label) of the three classes sent.
const CLASSES: [(u8, &str); 3] = [(24, "RoCEv2 (DSCP 24)"), (48, "CNP (DSCP 48)"), (0, "best effort (DSCP 0)")];
const PACKETS_PER_CLASS: u64 = 2000;
/// UDP payload bytes of the demo's packets.
const PACKET_BYTES: u64 = 1000;
/// Time dilation D of the demo's rail-spine fabric. At D = 1 (real time) this 2-core machine
/// cannot carry eight emulated 1 Gbit/s NICs through three switch hops: the AllReduce's links run
/// at 10 % of their rate with the CPUs saturated and `rocefab run` warns that the machine, not
/// the model, was the bottleneck. Measured on this machine (busy with other builds, 2026-11-25,
/// release build, `rocefab run rs allreduce --size 16MiB`, two runs each): emulated completion
/// 2.29/2.39 s at D = 1, 0.77/1.08 s at D = 4 (both warn), 0.74/0.68 s at D = 8, 0.64/0.68 s at
/// D = 16, 0.58/0.67 s at D = 32 (no warning: a rail-spine uplink, two ring flows on it, ran at
/// its line rate). From D = 8 on, D and 2D agree within the runs' spread; 16 leaves room for a
/// busier machine and takes ~11 s of wall clock.
const DILATION: u32 = 16;
/// The rail-spine links' emulated rate (topologies/rail-spine.yaml).
const LINE_RATE_BPS: u64 = 1_000_000_000;
/// Size of the demo's AllReduce per rank.
const ALLREDUCE_SIZE: &str = "16MiB";

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Runs `rocefab down` when dropped, so the fabric never outlives the demo.
struct FabricGuard {
    rocefab: PathBuf,
    fabric: &'static str,
}

impl Drop for FabricGuard {
    fn drop(&mut self) {
        eprintln!("\n== tearing down fabric {}", self.fabric);
        let _ = Command::new(&self.rocefab).args(["down", self.fabric]).status();
    }
}

pub fn run_demo() -> anyhow::Result<()> {
    if !is_root() {
        bail!("the demo creates network namespaces and attaches XDP programs: run it as root");
    }
    let root = root();
    eprintln!("== building rocefab (release)");
    crate::util::build_fabric(true)?;
    let bin = root.join("target/release");
    let rocefab = bin.join("rocefab");

    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }

    let topology = dilated_topology(&root)?;
    eprintln!("== rocefab up {TOPOLOGY} at time dilation {DILATION} ({})", topology.display());
    run(Command::new(&rocefab)
        .current_dir(&root)
        .arg("up")
        .arg(&topology)
        .env("ROCEFAB_SWITCHD", bin.join("rocefab-switchd")))?;
    let guard = FabricGuard { rocefab: rocefab.clone(), fabric: FABRIC };
    run(Command::new(&rocefab).args(["status", FABRIC]))?;

    let daemons = daemons(&rocefab, FABRIC)?;
    let before = scrape_all(&daemons)?;

    eprintln!("\n== ping host1:gpu0 (rail 1, 10.0.1.1) -> host2:gpu1 (rail 2, 10.0.2.2): rail1 -> spine -> rail2");
    run(Command::new(&rocefab)
        .args(["exec", FABRIC, "host1", "--", "ping", "-c", "3", "-i", "0.2", "-I", "10.0.1.1", "10.0.2.2"]))?;

    for (dscp, label) in CLASSES {
        check_interrupted()?;
        eprintln!(
            "\n== sending {PACKETS_PER_CLASS} UDP packets, {label}, host1:gpu0 -> host2:gpu1 over 64 source ports"
        );
        run(Command::new(&rocefab).args([
            "send",
            FABRIC,
            "--from",
            "host1:gpu0",
            "--to",
            "host2:gpu1",
            "--dscp",
            &dscp.to_string(),
            "--count",
            &PACKETS_PER_CLASS.to_string(),
            "--size",
            &PACKET_BYTES.to_string(),
            "--sport-range",
            "49152:49215",
            "--rate-pps",
            &send_pps().to_string(),
        ]))?;
    }
    // Let the shapers drain the queues before reading the counters.
    std::thread::sleep(Duration::from_millis(500));
    let after = scrape_all(&daemons)?;
    print_queue_table(&before, &after);
    println!("\nMetrics endpoints (Prometheus text format):");
    for (sw, url) in &daemons {
        println!("  {sw:<8} {url}");
    }

    check_interrupted()?;
    // Every link's two agents have exchanged LLDPDUs by now (fast start at `up`); the check
    // compares them with the topology's cabling and DCBX settings.
    eprintln!("\n== rocefab lldp --check {FABRIC}: every link's LLDP neighbours against the topology");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !Command::new(&rocefab)
        .args(["lldp", FABRIC, "--check"])
        .stdout(std::process::Stdio::null())
        .status()?
        .success()
    {
        if std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    run(Command::new(&rocefab).args(["lldp", FABRIC, "--check"]))?;
    eprintln!(
        "\n== rocefab lldp {FABRIC} rail1: rail1's LLDP/DCBX neighbour table (like `show lldp neighbors detail`)"
    );
    run(Command::new(&rocefab).args(["lldp", FABRIC, "rail1"]))?;

    check_interrupted()?;
    eprintln!("\n== rocefab run {FABRIC} allreduce --size {ALLREDUCE_SIZE}: ring AllReduce over every GPU, RoCEv2 RC WRITEs from emulated NICs, emulated time at D {DILATION}");
    run(Command::new(&rocefab).args(["run", FABRIC, "allreduce", "--size", ALLREDUCE_SIZE]))?;
    drop(guard);

    check_interrupted()?;
    eprintln!("\n== rocefab up {INCAST_TOPOLOGY}: rail-spine with rank 0 (host1:gpu0) behind a 100 Mbit/s link, PFC on priority 3");
    run(Command::new(&rocefab)
        .current_dir(&root)
        .args(["up", INCAST_TOPOLOGY])
        .env("ROCEFAB_SWITCHD", bin.join("rocefab-switchd")))?;
    let _guard = FabricGuard { rocefab: rocefab.clone(), fabric: INCAST_FABRIC };
    let incast_daemons = self::daemons(&rocefab, INCAST_FABRIC)?;
    let before = scrape_pfc(&incast_daemons)?;
    eprintln!("\n== rocefab run {INCAST_FABRIC} incast --size {INCAST_SIZE}: seven GPUs write to rank 0 (2 s ACK timeout, longer than the pauses)");
    run(Command::new(&rocefab).args([
        "run",
        INCAST_FABRIC,
        "incast",
        "--size",
        INCAST_SIZE,
        "--retransmit-timeout-ms",
        "2000",
    ]))?;
    let after = scrape_pfc(&incast_daemons)?;
    print_pfc_table(&before, &after, &peers(INCAST_FABRIC, &incast_daemons));
    drop(_guard);

    check_interrupted()?;
    eprintln!("\n== rocefab up {DCQCN_TOPOLOGY}: the same layout described as a 400G/800G fabric, time dilation 8000, WRED/ECN on queue 3");
    run(Command::new(&rocefab)
        .current_dir(&root)
        .args(["up", DCQCN_TOPOLOGY])
        .env("ROCEFAB_SWITCHD", bin.join("rocefab-switchd")))?;
    let _guard = FabricGuard { rocefab: rocefab.clone(), fabric: DCQCN_FABRIC };
    std::fs::create_dir_all(root.join("target/demo")).context("creating target/demo")?;
    let (svg, json) = (root.join(format!("{TIMELINE}.svg")), root.join(format!("{TIMELINE}.json")));
    eprintln!("\n== rocefab run {DCQCN_FABRIC} incast --size {INCAST_SIZE} --timeline …: 7:1 incast with DCQCN, report in emulated time, the Figure 11-7 timeline");
    run(Command::new(&rocefab)
        .args(["run", DCQCN_FABRIC, "incast", "--size", INCAST_SIZE])
        .arg("--timeline")
        .arg(&svg)
        .arg("--timeline")
        .arg(&json))?;
    println!("\nDCQCN timeline: {} (samples: {})", svg.display(), json.display());
    Ok(())
}

/// `topologies/rail-spine.yaml` with `time_dilation: DILATION` added, written to
/// `target/demo/rail-spine.yaml` (the fabric keeps its name, `rs`).
fn dilated_topology(root: &Path) -> anyhow::Result<PathBuf> {
    let src = root.join(TOPOLOGY);
    let text = std::fs::read_to_string(&src).with_context(|| format!("reading {}", src.display()))?;
    if text.lines().any(|l| l.starts_with("time_dilation:")) {
        bail!("{}: already sets time_dilation; the demo adds its own ({DILATION})", src.display());
    }
    let dir = root.join("target/demo");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let out = dir.join("rail-spine.yaml");
    let text = format!("{}\n# cargo xtask demo: the machine, not the model, limits this fabric at real time\ntime_dilation: {DILATION}\n", text.trim_end());
    std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

/// The UDP send rate (packets/s, wall clock): 20 000, or less so that one class's packets use at
/// most half of a link's wall-clock rate at [`DILATION`].
fn send_pps() -> u64 {
    (LINE_RATE_BPS / u64::from(DILATION) / (8 * PACKET_BYTES) / 2).min(20_000)
}

/// Per (switch, port, peer): priority-3 PFC sent, received, seconds paused; lossless drops.
type PfcSamples = BTreeMap<(String, String), [f64; 5]>;

fn scrape_pfc(daemons: &[(String, String)]) -> anyhow::Result<PfcSamples> {
    let mut all = PfcSamples::new();
    for (sw, url) in daemons {
        let body = http_get(url).with_context(|| format!("scraping {sw} at {url}"))?;
        for (metric, labels, value) in parse_prometheus(&body) {
            let col = match (metric.as_str(), labels.get("priority").or(labels.get("queue")).map(String::as_str)) {
                ("rocefab_pfc_tx_frames_total", Some("3")) => 0,
                ("rocefab_pfc_rx_frames_total", Some("3")) => 1,
                ("rocefab_pfc_paused_seconds_total", Some("3")) => 2,
                ("rocefab_headroom_overflow_total", Some("3")) => 3,
                ("rocefab_queue_dropped_packets_total", Some("3")) => 4,
                _ => continue,
            };
            let port = labels.get("port").cloned().unwrap_or_default();
            all.entry((sw.clone(), port)).or_default()[col] += value;
        }
    }
    Ok(all)
}

/// (switch, port) → what is on the other end, from the switch configs `rocefab up` wrote.
fn peers(fabric: &str, daemons: &[(String, String)]) -> BTreeMap<(String, String), String> {
    let mut m = BTreeMap::new();
    for (sw, _) in daemons {
        let path = Path::new("/run/rocefab").join(fabric).join(format!("{sw}.json"));
        if let Ok(cfg) = rocefab_contracts::config::SwitchConfig::load(&path) {
            for p in cfg.ports {
                m.insert((sw.clone(), p.name), p.peer);
            }
        }
    }
    m
}

fn print_pfc_table(before: &PfcSamples, after: &PfcSamples, peers: &BTreeMap<(String, String), String>) {
    println!("\nPFC during the lossless incast, priority 3, every switch port that sent or received PFC:");
    println!("| switch | port | peer | PFC sent | PFC received | paused (s) | headroom overflow | queue 3 drops |");
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    let mut drops = 0.0;
    for (key, a) in after {
        let b = before.get(key).copied().unwrap_or_default();
        let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
        drops += d[3] + d[4];
        if d[0] > 0.0 || d[1] > 0.0 {
            let peer = peers.get(key).map(String::as_str).unwrap_or("?");
            println!("| {} | {} | {peer} | {} | {} | {:.3} | {} | {} |", key.0, key.1, d[0], d[1], d[2], d[3], d[4]);
        }
    }
    println!("Lossless frames dropped anywhere in the fabric: {drops}");
}

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn check_interrupted() -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

/// (switch, metrics URL) from `rocefab status --json`.
fn daemons(rocefab: &Path, fabric: &str) -> anyhow::Result<Vec<(String, String)>> {
    let out = Command::new(rocefab).args(["status", fabric, "--json"]).output().context("rocefab status --json")?;
    if !out.status.success() {
        bail!("rocefab status --json: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("parsing rocefab status --json")?;
    let list = v["daemons"].as_array().context("status JSON has no daemons array")?;
    list.iter()
        .map(|d| {
            let sw = d["switch"].as_str().context("daemon without switch")?;
            let url = d["metrics_url"].as_str().context("daemon without metrics_url")?;
            Ok((sw.to_string(), url.to_string()))
        })
        .collect()
}

/// Key: (switch, port, queue, metric) → value.
type Samples = BTreeMap<(String, String, String, String), f64>;

fn scrape_all(daemons: &[(String, String)]) -> anyhow::Result<Samples> {
    let mut all = Samples::new();
    for (sw, url) in daemons {
        let body = http_get(url).with_context(|| format!("scraping {sw} at {url}"))?;
        for (metric, labels, value) in parse_prometheus(&body) {
            if !metric.starts_with("rocefab_queue_") {
                continue;
            }
            let port = labels.get("port").cloned().unwrap_or_default();
            let queue = labels.get("queue").cloned().unwrap_or_default();
            all.insert((sw.clone(), port, queue, metric), value);
        }
    }
    Ok(all)
}

fn print_queue_table(before: &Samples, after: &Samples) {
    let delta = |k: &(String, String, String, String)| {
        after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0)
    };
    println!("\nPer-switch, per-queue counters during the demo (queues that carried traffic):");
    println!("| switch | port | queue | enqueued | dequeued | dropped | depth now (bytes) |");
    println!("|---|---|---|---:|---:|---:|---:|");
    for key in after.keys().filter(|k| k.3 == "rocefab_queue_enqueued_packets_total") {
        let enq = delta(key);
        if enq <= 0.0 {
            continue;
        }
        let with = |m: &str| (key.0.clone(), key.1.clone(), key.2.clone(), m.to_string());
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            key.0,
            key.1,
            key.2,
            enq,
            delta(&with("rocefab_queue_dequeued_packets_total")),
            delta(&with("rocefab_queue_dropped_packets_total")),
            after.get(&with("rocefab_queue_depth_bytes")).copied().unwrap_or(0.0),
        );
    }
}

/// Prometheus text exposition lines `name{a="x",b="y"} value` (rocefab-contracts' parser).
fn parse_prometheus(body: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    rocefab_contracts::promtext::samples(body)
        .map(|s| (s.name.to_string(), s.labels().map(|(k, v)| (k.to_string(), v)).collect(), s.value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prometheus_text() {
        let body =
            "# HELP x\nrocefab_queue_enqueued_packets_total{switch=\"rail1\",port=\"eth3\",queue=\"3\"} 42\nup 1\n";
        let p = parse_prometheus(body);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].0, "rocefab_queue_enqueued_packets_total");
        assert_eq!(p[0].1["queue"], "3");
        assert_eq!(p[0].1["port"], "eth3");
        assert_eq!(p[0].2, 42.0);
        assert!(p[1].1.is_empty());
    }

    #[test]
    fn the_demo_fabric_is_rail_spine_at_its_dilation_and_sends_below_the_wall_rate() {
        let root = root();
        let t = dilated_topology(&root).unwrap();
        let text = std::fs::read_to_string(&t).unwrap();
        let orig = std::fs::read_to_string(root.join(TOPOLOGY)).unwrap();
        assert!(
            text.starts_with(orig.trim_end()) && text.ends_with(&format!("\ntime_dilation: {DILATION}\n")),
            "{text}"
        );
        assert!(text.lines().any(|l| l == format!("fabric: {FABRIC}")));
        // One class's UDP (payload bytes only, so the wire carries a little more) stays under half
        // the links' wall-clock rate.
        assert!(send_pps() * PACKET_BYTES * 8 <= LINE_RATE_BPS / u64::from(DILATION) / 2, "{}", send_pps());
        assert!(send_pps() * 10 >= 20_000 / u64::from(DILATION), "not needlessly slow: {}", send_pps());
    }
}
