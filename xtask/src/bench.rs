//! `cargo xtask bench`: one forwarder between two host namespaces, 64-byte UDP frames from an
//! AF_XDP generator written in Rust (`rocefab-bench gen`), measured in one run for
//!
//! 1. the Linux bridge (kernel),
//! 2. the minimal AF_XDP L2 forwarder (`rocefab-bench l2fwd`),
//! 3. the rocefab switch (`rocefab-switchd`, a two-port SwitchConfig),
//!
//! printing sent and delivered packet rates, loss, and the forwarder process's CPU time per
//! delivered packet, then the ratios the foundation issue targets: rocefab ≥ 1.5 × the bridge
//! and ≥ 0.8 × the minimal forwarder. Missing a target is reported, not an error.
//!
//! Method, per forwarder: bring it up in `rfb-dut`; 0.5 s warm-up of the generator (not
//! counted); start the sink; read the forwarder's utime+stime; run the generator for
//! `--duration`; wait 100 ms for queues to drain; read CPU time again and stop the sink.
//! delivered/s = sink count / generator time; loss = 1 − delivered/sent. The generator runs on
//! `--gen-cpu`, the forwarder process on `--dut-cpu`; kernel work (veth, bridge, sink drop) runs
//! in softirq on whichever CPU transmitted, which for the bridge is the generator's CPU.
//! Namespaces and veths come from [`topo`]; everything is removed on exit, error or Ctrl-C.
//!
//! `--fabric` measures a whole 3-hop path instead, against Linux routers: see [`fabric`].
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use rocefab_contracts::config::{Mac, NextHopConfig, PortConfig, RouteConfig, SwitchConfig};

mod fabric;
mod proc;
mod reaction;
mod scale;
mod topo;

use proc::{check_interrupt, Child};
use topo::*;

/// A forwarder under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dut {
    /// Linux bridge in rfb-dut.
    Bridge,
    /// Minimal AF_XDP L2 forwarder (rocefab-bench l2fwd).
    L2fwd,
    /// The rocefab switch daemon (rocefab-switchd).
    Rocefab,
}

impl Dut {
    fn label(self) -> &'static str {
        match self {
            Dut::Bridge => "Linux bridge",
            Dut::L2fwd => "minimal AF_XDP L2 forwarder",
            Dut::Rocefab => "rocefab switch",
        }
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Measurement time per forwarder (5s, 500ms, 1m).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Frame size on the wire, FCS included.
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// UDP flows (distinct source ports).
    #[arg(long, default_value_t = 16)]
    pub flows: u16,
    /// DSCP of the generated frames (24 → rocefab's lossless priority 3, so every frame goes
    /// through ingress-group accounting and the xOFF check; 0 → lossy queue 0).
    #[arg(long, default_value_t = 24)]
    pub dscp: u8,
    /// Rounds over all forwarders (interleaved, so background load hits all alike); the round
    /// with the median delivered rate is reported per forwarder.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Forwarders to measure, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "bridge,l2fwd,rocefab")]
    pub only: Vec<Dut>,
    /// CPU for the generator (and the sink process).
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// CPU for the forwarder process (AF_XDP forwarder, rocefab-switchd).
    #[arg(long, default_value_t = 1)]
    pub dut_cpu: usize,
    /// Nice level of the benchmark processes (shields them from background load).
    #[arg(long, default_value_t = -10, allow_negative_numbers = true)]
    pub nice: i32,
    /// How the sink discards frames: stack (no address, IPv4 input drops) or xdp (XDP_DROP).
    #[arg(long, default_value = "stack")]
    pub sink_drop: String,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Do not run `cargo build --release` first.
    #[arg(long)]
    pub no_build: bool,
    /// Instead of the forwarding rates: measure the PFC reaction time (xOFF crossing → PFC
    /// frame handed to the wire) over this many bursts and print p50 and p99.
    #[arg(long)]
    pub pfc_reaction: Option<usize>,
    /// Instead of one switch: the 3-hop path host → rail → spine → rail → host, Linux routers
    /// against rocefab (ping, UDP at --sizes, iperf3, RoCEv2, CPU per byte), plus one round of
    /// 64-byte pps against the bridge and the AllReduce on pod-64gpu; `--duration` is the
    /// length of each throughput run.
    #[arg(long)]
    pub fabric: bool,
    /// Instead of one switch: bring up fabrics of the book's size (`--scale-topologies`) one
    /// after the other and report time to up, the daemons' memory, idle CPU and wake-ups,
    /// `rocefab lldp --check`, a ping, a verified 1 MiB AllReduce and an all-to-all, time to
    /// down and namespaces left; then, for each topology, the lowest time dilation at which its
    /// 1 MiB AllReduce is model-bound (JCT at D and 2D within 10 %, verified, no machine-bound
    /// warning), and the same for a 400G version of the last topology over `--scale-dilations`.
    #[arg(long)]
    pub scale: bool,
    /// --scale: topologies (names in topologies/, without .yaml).
    #[arg(long, value_delimiter = ',', default_value = "pod-64gpu,multi-pod-512gpu")]
    pub scale_topologies: Vec<String>,
    /// --scale: how long the idle fabric's CPU and wake-ups are measured.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub scale_idle: Duration,
    /// --scale: input bytes per rank of the all-to-all (split over its peers).
    #[arg(long, default_value = "64KiB", value_parser = size_arg)]
    pub scale_alltoall_size: String,
    /// --scale: time dilations to try, lowest first, for the 400G AllReduce.
    #[arg(long, value_delimiter = ',', default_value = "16000,32000,64000,128000,256000,512000,1024000,2048000")]
    pub scale_dilations: Vec<u64>,
    /// --scale: how many doublings of each topology's own time dilation its model-bound search
    /// tries (the topology as written; 0: none).
    #[arg(long, default_value_t = 10)]
    pub scale_search_steps: u32,
    /// --scale: only the searches (no table of the fabrics as written).
    #[arg(long)]
    pub scale_search_only: bool,
    /// --scale: start the model-bound search at this time dilation instead of each topology's own.
    #[arg(long)]
    pub scale_search_from: Option<u64>,
    /// --scale: skip the 400G search only.
    #[arg(long)]
    pub scale_no_400g: bool,
    /// --scale: skip the searches for the lowest model-bound time dilation.
    #[arg(long)]
    pub scale_no_dilation: bool,
    /// --scale: run the topologies with `routing: bgp` (FRR in every switch namespace) and
    /// report FRR's daemons, their memory and BGP's convergence at up.
    #[arg(long)]
    pub scale_bgp: bool,
    /// --fabric: skip the AllReduce on pod-64gpu (~1 min).
    #[arg(long)]
    pub no_allreduce: bool,
    /// --fabric: UDP frame sizes on the wire, FCS included.
    #[arg(long, value_delimiter = ',', default_value = "1518,4200")]
    pub sizes: Vec<usize>,
    /// --fabric: the MTU of both paths (68..=3500, rocefab's veth XDP limit).
    #[arg(long, default_value_t = 1500)]
    pub fabric_mtu: u32,
    /// --fabric: pings per RTT measurement (10 ms apart).
    #[arg(long, default_value_t = 200)]
    pub ping_count: usize,
    /// --fabric: bytes of the two-rank RoCEv2 write.
    #[arg(long, default_value = "64MiB", value_parser = size_arg)]
    pub roce_size: String,
    /// --fabric: input bytes per rank of the AllReduce (today's baseline used 16MiB).
    #[arg(long, default_value = "16MiB", value_parser = size_arg)]
    pub allreduce_size: String,
}

/// A size option passed on to `rocefab run --size`, checked here with the same parser
/// (rocefab-units: 512KB is 512,000 bytes, 512KiB 524,288) so a typo fails before any fabric is up.
fn size_arg(s: &str) -> Result<String, String> {
    rocefab_units::parse_bytes(s).map(|_| s.to_string())
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    // The one duration parser (rocefab-units); a bare number is seconds, as on rocefab's options.
    let d = rocefab_units::parse_duration(s, rocefab_units::Bare::Seconds)?;
    if d.is_zero() {
        return Err(format!("{s:?}: a duration must be above 0"));
    }
    Ok(d)
}

/// One forwarder's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measurement {
    pub forwarder: Dut,
    pub sent: u64,
    pub delivered: u64,
    pub seconds: f64,
    pub sent_mpps: f64,
    pub delivered_mpps: f64,
    pub loss: f64,
    /// Forwarder process utime+stime per delivered packet (None for the kernel bridge).
    pub dut_cpu_ns_per_pkt: Option<f64>,
    /// Busy fraction of each CPU during the run (all processes, softirq included).
    pub cpu_busy: Vec<f64>,
    /// The forwarder's own counters after the run (rocefab: /metrics; l2fwd: AF_XDP stats).
    pub dut_counters: BTreeMap<String, f64>,
}

#[derive(Debug, serde::Serialize)]
struct Report {
    frame_size: usize,
    flows: u16,
    duration_s: f64,
    gen_cpu: usize,
    dut_cpu: usize,
    sink_drop: String,
    results: Vec<Measurement>,
    errors: BTreeMap<String, String>,
    rocefab_over_bridge: Option<f64>,
    rocefab_over_minimal: Option<f64>,
    target_bridge_met: Option<bool>,
    target_minimal_met: Option<bool>,
}

struct Ctx<'a> {
    args: &'a BenchArgs,
    bench_bin: PathBuf,
    switchd_bin: PathBuf,
    run_dir: &'a Path,
}

/// Removes the run directory on drop.
struct RunDir(PathBuf);
impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn run(a: &BenchArgs) -> anyhow::Result<()> {
    proc::install_interrupt_handler()?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("xtask bench needs root (namespaces, veths, XDP, AF_XDP)");
    }
    if a.sink_drop != "stack" && a.sink_drop != "xdp" {
        bail!("--sink-drop {:?}: expected stack or xdp", a.sink_drop);
    }
    if a.only.is_empty() || a.repeat == 0 {
        bail!("nothing to measure (--only is empty or --repeat 0)");
    }
    let root = crate::util::root();
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    if !a.no_build {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut c = Command::new(cargo);
        c.current_dir(&root).args([
            "build",
            "--release",
            "-p",
            "rocefab-bench",
            "-p",
            "dataplane-user",
            "-p",
            "control",
        ]);
        if a.fabric || a.scale {
            // rocefab-hostd and rocefab-nicd.
            c.args(["-p", "host-daemons"]);
        }
        crate::util::run(&mut c).context("building the benchmark binaries")?;
    }
    check_interrupt()?;
    let ctx_bins = (target.join("release/rocefab-bench"), target.join("release/rocefab-switchd"));
    if !ctx_bins.0.exists() {
        bail!("{} is missing (run without --no-build)", ctx_bins.0.display());
    }
    if (a.only.contains(&Dut::Rocefab) || a.pfc_reaction.is_some() || a.fabric) && !ctx_bins.1.exists() {
        bail!("{} is missing (cargo build --release -p dataplane-user)", ctx_bins.1.display());
    }
    let run_dir = RunDir(std::env::temp_dir().join(format!("rfb-bench-{}", std::process::id())));
    std::fs::create_dir_all(&run_dir.0).with_context(|| format!("creating {}", run_dir.0.display()))?;

    let ctx = Ctx { args: a, bench_bin: ctx_bins.0, switchd_bin: ctx_bins.1, run_dir: &run_dir.0 };
    if a.scale {
        let rocefab = target.join("release/rocefab");
        if !rocefab.exists() {
            bail!("{} is missing (run without --no-build)", rocefab.display());
        }
        let sa = scale::ScaleArgs {
            topologies: &a.scale_topologies,
            bgp: a.scale_bgp,
            idle: a.scale_idle,
            alltoall_size: &a.scale_alltoall_size,
            dilations: if a.scale_no_dilation || a.scale_no_400g { &[] } else { &a.scale_dilations },
            search_steps: if a.scale_no_dilation { 0 } else { a.scale_search_steps },
            search_from: a.scale_search_from,
            search_only: a.scale_search_only,
            json: a.json,
        };
        return scale::run(&rocefab, ctx.run_dir, &sa);
    }
    if a.fabric {
        let rocefab = target.join("release/rocefab");
        if !rocefab.exists() {
            bail!("{} is missing (run without --no-build)", rocefab.display());
        }
        return fabric::run(a, &ctx, &rocefab);
    }
    cleanup_stale()?;
    let _topo = Topology::create().context("creating the rfb- namespaces")?;

    if let Some(bursts) = a.pfc_reaction {
        return reaction::run(&ctx, bursts);
    }

    let mut all: BTreeMap<Dut, Vec<Measurement>> = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for round in 0..a.repeat {
        for &dut in &a.only {
            if errors.contains_key(dut.label()) {
                continue;
            }
            eprintln!("xtask bench: round {}/{}: {} ...", round + 1, a.repeat, dut.label());
            match measure(&ctx, dut) {
                Ok(m) => {
                    eprintln!(
                        "xtask bench:   sent {:.3} Mpps, delivered {:.3} Mpps, loss {:.1}%",
                        m.sent_mpps,
                        m.delivered_mpps,
                        m.loss * 100.0
                    );
                    all.entry(dut).or_default().push(m);
                }
                Err(e) => {
                    check_interrupt()?;
                    eprintln!("xtask bench:   {} failed: {e:#}", dut.label());
                    errors.insert(dut.label().to_string(), format!("{e:#}"));
                }
            }
        }
    }
    let results: Vec<Measurement> = all.into_values().map(median).collect();
    let rate = |d: Dut| results.iter().find(|m| m.forwarder == d).map(|m| m.delivered_mpps);
    let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => Some(x / y),
        _ => None,
    };
    let over_bridge = ratio(rate(Dut::Rocefab), rate(Dut::Bridge));
    let over_min = ratio(rate(Dut::Rocefab), rate(Dut::L2fwd));
    let report = Report {
        frame_size: a.size,
        flows: a.flows,
        duration_s: a.duration.as_secs_f64(),
        gen_cpu: a.gen_cpu,
        dut_cpu: a.dut_cpu,
        sink_drop: a.sink_drop.clone(),
        results,
        errors,
        rocefab_over_bridge: over_bridge,
        rocefab_over_minimal: over_min,
        target_bridge_met: over_bridge.map(|r| r >= 1.5),
        target_minimal_met: over_min.map(|r| r >= 0.8),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    if !report.errors.is_empty() {
        let names: Vec<&str> = report.errors.keys().map(String::as_str).collect();
        bail!("could not measure: {}", names.join(", "));
    }
    Ok(())
}

/// The measurement of the round with the median delivered rate.
fn median(mut v: Vec<Measurement>) -> Measurement {
    v.sort_by(|a, b| a.delivered_mpps.total_cmp(&b.delivered_mpps));
    v.swap_remove(v.len() / 2)
}

fn print_table(r: &Report) {
    println!(
        "\n{}-byte frames, {} flows, {:.1} s per forwarder; generator on CPU {}, forwarder process on CPU {}; sink drop: {}\n",
        r.frame_size, r.flows, r.duration_s, r.gen_cpu, r.dut_cpu, r.sink_drop
    );
    println!("| forwarder | sent Mpps | delivered Mpps | loss | DUT CPU ns/pkt | CPU busy (per CPU) |");
    println!("|---|---|---|---|---|---|");
    for m in &r.results {
        let cpu = m.dut_cpu_ns_per_pkt.map(|n| format!("{n:.0}")).unwrap_or_else(|| "– (kernel)".into());
        let busy: Vec<String> = m.cpu_busy.iter().map(|b| format!("{:.0}%", b * 100.0)).collect();
        println!(
            "| {} | {:.3} | {:.3} | {:.1}% | {} | {} |",
            m.forwarder.label(),
            m.sent_mpps,
            m.delivered_mpps,
            m.loss * 100.0,
            cpu,
            busy.join(" / ")
        );
    }
    for (dut, e) in &r.errors {
        println!("| {dut} | failed: {} | | | | |", e.lines().next().unwrap_or(""));
    }
    let f = |x: Option<f64>, suffix: &str| x.map(|v| format!("{v:.2}{suffix}")).unwrap_or_else(|| "n/a".into());
    println!(
        "\nrocefab / bridge = {}   rocefab / minimal forwarder = {}",
        f(r.rocefab_over_bridge, "×"),
        f(r.rocefab_over_minimal, "")
    );
    let t = |m: Option<bool>| match m {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "not measured",
    };
    println!("target ≥ 1.5× Linux bridge: {}", t(r.target_bridge_met));
    println!("target ≥ 0.80 × minimal AF_XDP forwarder: {}", t(r.target_minimal_met));
    for m in r.results.iter().filter(|m| !m.dut_counters.is_empty()) {
        println!("\n{} counters (since it started, warm-up included):", m.forwarder.label());
        for (k, v) in &m.dut_counters {
            println!("  {k} {v}");
        }
    }
    for (dut, e) in &r.errors {
        println!("\n{dut} failed:\n{e}");
    }
}

/// The forwarder being measured; dropping it stops/removes it.
enum Running {
    Bridge(#[allow(dead_code, reason = "held for its Drop")] Bridge),
    /// A forwarder process; `metrics` is the switch daemon's Prometheus endpoint.
    Process(Child, Option<std::net::SocketAddr>),
}

fn bench_cmd(ctx: &Ctx<'_>, sub: &str) -> Command {
    let mut c = Command::new(&ctx.bench_bin);
    c.arg(sub).env("RUST_LOG", "warn");
    c
}

fn start_dut(ctx: &Ctx<'_>, dut: Dut) -> anyhow::Result<Running> {
    let a = ctx.args;
    match dut {
        Dut::Bridge => Ok(Running::Bridge(Bridge::create()?)),
        Dut::L2fwd => {
            let mut c = bench_cmd(ctx, "l2fwd");
            c.args(["--netns", NS_DUT, "--in", DUT_IN, "--out", DUT_OUT]);
            let mut child = Child::spawn("l2fwd", c, Some(a.dut_cpu), a.nice, ctx.run_dir.join("l2fwd.stderr"))?;
            child.next_json(Duration::from_secs(10)).context("waiting for l2fwd to attach")?;
            Ok(Running::Process(child, None))
        }
        Dut::Rocefab => start_switchd(ctx, switch_config(free_port()?)),
    }
}

/// Starts `rocefab-switchd` with `cfg` on the DUT CPU; returns once the switch is up.
fn start_switchd(ctx: &Ctx<'_>, cfg: SwitchConfig) -> anyhow::Result<Running> {
    let a = ctx.args;
    cfg.validate().context("benchmark switch config")?;
    let path = ctx.run_dir.join("rfb-dut.json");
    cfg.save(&path)?;
    let mut c = Command::new(&ctx.switchd_bin);
    c.arg("--config").arg(&path).env("RUST_LOG", "info");
    let mut child = Child::spawn("rocefab-switchd", c, Some(a.dut_cpu), a.nice, ctx.run_dir.join("switchd.stderr"))?;
    child.wait_stderr("switch up", Duration::from_secs(30))?;
    Ok(Running::Process(child, Some(cfg.metrics_listen)))
}

/// A TCP port on 127.0.0.1 that nobody listens on right now.
fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// The two-port rocefab switch: port 0 faces the generator, port 1 the sink; routes to both
/// /24s; line rate 100 Gbit/s so the shaper never limits.
pub fn switch_config(metrics_port: u16) -> SwitchConfig {
    SwitchConfig {
        name: "rfb-dut".into(),
        role: "rail".into(),
        netns: Some(NS_DUT.into()),
        hash_seed: 0,
        metrics_listen: std::net::SocketAddr::from(([127, 0, 0, 1], metrics_port)),
        dscp_to_tc: dataplane_common::dscp::default_table().to_vec(),
        queue_limit_bytes: 1 << 20,
        xdp_mode: "driver".into(),
        ports: vec![
            PortConfig {
                name: DUT_IN.into(),
                mac: Mac(DUT_IN_MAC),
                line_rate_bps: 100_000_000_000,
                addresses: vec![format!("{DUT_IN_IP}/24")],
                peer: format!("{NS_GEN}:{GEN_IF}"),
                tx_delay_ns: 0,
                rx_delay_ns: 0,
            },
            PortConfig {
                name: DUT_OUT.into(),
                mac: Mac(DUT_OUT_MAC),
                line_rate_bps: 100_000_000_000,
                addresses: vec![format!("{DUT_OUT_IP}/24")],
                peer: format!("{NS_SINK}:{SINK_IF}"),
                tx_delay_ns: 0,
                rx_delay_ns: 0,
            },
        ],
        nexthops: vec![NextHopConfig { port: 0, mac: Mac(GEN_MAC) }, NextHopConfig { port: 1, mac: Mac(SINK_MAC) }],
        groups: vec![vec![0], vec![1]],
        routes: vec![
            RouteConfig { prefix: GEN_NET.parse().expect("valid"), len: 24, group: Some(0) },
            RouteConfig { prefix: SINK_NET.parse().expect("valid"), len: 24, group: Some(1) },
        ],
        qos: Default::default(),
        // The benchmark measures forwarding only.
        lldp: rocefab_contracts::config::LldpConfig { enabled: false, ..Default::default() },
        chassis_mac: None,
        time_dilation: 1.0,
        load_balance: Default::default(),
        fib: false,
    }
}

/// Runs the generator for `d` and returns (sent, seconds).
fn run_gen(ctx: &Ctx<'_>, dut: Dut, d: Duration) -> anyhow::Result<(u64, f64)> {
    let a = ctx.args;
    // The bridge and the L2 forwarder pass frames unchanged, so they carry the sink's MAC;
    // the rocefab switch routes, so frames are addressed to its ingress port.
    let dst_mac = if dut == Dut::Rocefab { DUT_IN_MAC } else { SINK_MAC };
    let mut c = bench_cmd(ctx, "gen");
    c.args(["--netns", NS_GEN, "--iface", GEN_IF, "--src-mac", &mac_str(GEN_MAC), "--dst-mac", &mac_str(dst_mac)])
        .args(["--src-ip", GEN_IP, "--dst-ip", SINK_IP])
        .args(["--size", &a.size.to_string(), "--flows", &a.flows.to_string(), "--dscp", &a.dscp.to_string()])
        .args(["--duration", &format!("{}ms", d.as_millis())]);
    let mut g = Child::spawn("generator", c, Some(a.gen_cpu), a.nice, ctx.run_dir.join("gen.stderr"))?;
    let v = g.next_json(d + Duration::from_secs(15))?;
    g.wait(Duration::from_secs(5))?;
    let sent = v["sent"].as_u64().context("generator output lacks \"sent\"")?;
    let secs = v["elapsed_s"].as_f64().context("generator output lacks \"elapsed_s\"")?;
    Ok((sent, secs))
}

fn measure(ctx: &Ctx<'_>, dut: Dut) -> anyhow::Result<Measurement> {
    let a = ctx.args;
    let mut running = start_dut(ctx, dut)?;
    // Warm-up (not counted): fills caches, page pools and the bridge's state.
    run_gen(ctx, dut, Duration::from_millis(500))?;
    proc::sleep(Duration::from_millis(200))?;

    let mut c = bench_cmd(ctx, "sink");
    c.args(["--netns", NS_SINK, "--iface", SINK_IF, "--drop", &a.sink_drop]);
    c.args(["--duration", &format!("{}ms", (a.duration + Duration::from_secs(30)).as_millis())]);
    let mut sink = Child::spawn("sink", c, Some(a.gen_cpu), a.nice, ctx.run_dir.join("sink.stderr"))?;
    sink.next_json(Duration::from_secs(10)).context("waiting for the sink")?;

    let pid = match &running {
        Running::Process(p, _) => Some(p.pid()),
        Running::Bridge(_) => None,
    };
    let cpu0 = pid.map(proc::process_cpu_ns).transpose()?;
    let sys0 = proc::cpu_times()?;
    let (sent, secs) = run_gen(ctx, dut, a.duration)?;
    proc::sleep(Duration::from_millis(100))?;
    let cpu1 = pid.map(proc::process_cpu_ns).transpose()?;
    let sys1 = proc::cpu_times()?;
    let mut counters = BTreeMap::new();
    if let Running::Process(p, metrics) = &mut running {
        p.check_alive().context("the forwarder died during the run")?;
        if let Some(addr) = metrics {
            match scrape_counters(*addr) {
                Ok(c) => counters = c,
                Err(e) => eprintln!("xtask bench:   scraping {addr}: {e:#}"),
            }
        }
    }
    sink.terminate(Duration::from_secs(5))?;
    let v = sink.next_json(Duration::from_secs(5))?;
    let delivered = v["delivered"].as_u64().context("sink output lacks \"delivered\"")?;
    if let Running::Process(p, metrics) = &mut running {
        let st = p.terminate(Duration::from_secs(10))?;
        if !st.success() {
            bail!("forwarder exited with {st}:\n{}", p.stderr_tail());
        }
        if metrics.is_none() {
            // The minimal forwarder reports its AF_XDP statistics on exit.
            if let Ok(serde_json::Value::Object(m)) = p.next_json(Duration::from_secs(2)) {
                counters.extend(m.into_iter().filter_map(|(k, v)| Some((k, v.as_f64()?))));
            }
        }
    }
    drop(running);

    let cpu_busy = sys0
        .iter()
        .zip(&sys1)
        .map(|(b, e)| {
            let total = e.1.saturating_sub(b.1);
            if total == 0 {
                0.0
            } else {
                e.0.saturating_sub(b.0) as f64 / total as f64
            }
        })
        .collect();
    let ns_per_pkt = match (cpu0, cpu1) {
        (Some(x), Some(y)) if delivered > 0 => Some(y.saturating_sub(x) as f64 / delivered as f64),
        _ => None,
    };
    Ok(Measurement {
        forwarder: dut,
        sent,
        delivered,
        seconds: secs,
        sent_mpps: sent as f64 / secs / 1e6,
        delivered_mpps: delivered as f64 / secs / 1e6,
        loss: if sent == 0 { 0.0 } else { (1.0 - delivered as f64 / sent as f64).max(0.0) },
        dut_cpu_ns_per_pkt: ns_per_pkt,
        cpu_busy,
        dut_counters: counters,
    })
}

/// Non-zero packet counters from the switch daemon's `/metrics` (bytes and gauges left out).
fn scrape_counters(addr: std::net::SocketAddr) -> anyhow::Result<BTreeMap<String, f64>> {
    Ok(parse_counters(&scrape_text(addr)?))
}

/// The switch's /metrics text.
fn scrape_text(addr: std::net::SocketAddr) -> anyhow::Result<String> {
    crate::util::http_get(&format!("http://{addr}/metrics"))
}

/// `name{labels} value` lines of Prometheus text whose name ends in `_total` but not
/// `_bytes_total`, with a non-zero value.
fn parse_counters(text: &str) -> BTreeMap<String, f64> {
    rocefab_contracts::promtext::samples(text)
        .filter(|s| s.name.ends_with("_total") && !s.name.ends_with("_bytes_total") && s.value != 0.0)
        .map(|s| {
            let series = if s.raw_labels().is_empty() {
                s.name.to_string()
            } else {
                format!("{}{{{}}}", s.name, s.raw_labels())
            };
            (series, s.value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_switch_config_is_valid_and_routes_to_the_sink() {
        let c = switch_config(9999);
        c.validate().unwrap();
        let r = c.routes.iter().find(|r| r.prefix.to_string() == SINK_NET).unwrap();
        let nh = c.nexthops[c.groups[r.group.unwrap() as usize][0] as usize];
        assert_eq!(c.ports[nh.port as usize].name, DUT_OUT);
        assert_eq!(nh.mac, Mac(SINK_MAC));
        assert!(c.ports.iter().all(|p| p.line_rate_bps >= 100_000_000_000));
    }

    #[test]
    fn median_picks_the_middle_round() {
        let m = |d: f64| Measurement {
            forwarder: Dut::Bridge,
            sent: 0,
            delivered: 0,
            seconds: 1.0,
            sent_mpps: 0.0,
            delivered_mpps: d,
            loss: 0.0,
            dut_cpu_ns_per_pkt: None,
            cpu_busy: vec![],
            dut_counters: BTreeMap::new(),
        };
        assert_eq!(median(vec![m(3.0), m(1.0), m(2.0)]).delivered_mpps, 2.0);
        assert_eq!(median(vec![m(5.0)]).delivered_mpps, 5.0);
    }

    #[test]
    fn prometheus_packet_counters_only() {
        let text = "# HELP x\nrocefab_xdp_rx_total{port=\"a\"} 40\nrocefab_port_rx_bytes_total{port=\"a\"} 2400\n\
                    rocefab_xdp_drop_total{port=\"a\"} 0\nrocefab_umem_free_frames 6144\nrocefab_port_tx_packets_total{port=\"b\"} 7\n";
        let c = parse_counters(text);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c["rocefab_xdp_rx_total{port=\"a\"}"], 40.0);
        assert_eq!(c["rocefab_port_tx_packets_total{port=\"b\"}"], 7.0);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("300ms").unwrap(), Duration::from_millis(300));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("x").is_err());
    }
}
