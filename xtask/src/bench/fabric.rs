//! `cargo xtask bench --fabric`: the same 3-hop path (host → rail → spine → rail → host) built
//! twice, from Linux routers and from rocefab, measured in one run, each measure reported as
//! kernel value, rocefab value and ratio rocefab / kernel against the targets of issue 13.
//!
//! The two paths:
//! - **kernel-routed**: namespaces `rfk-a` – `rfk-r1` – `rfk-sp` – `rfk-r2` – `rfk-b` joined by
//!   veth pairs, IPv4 routing with `ip_forward=1` in the three router namespaces, static
//!   neighbours, IPv6 off, the MTU of the rocefab fabric, and on every veth the offloads rocefab
//!   turns off on its links (`ethtool -K <dev> tx off gro off tso off gso off`: TX checksum,
//!   GRO, TSO, GSO; RX checksum offload stays on as on rocefab's links). What a containerlab user
//!   gets.
//! - **rocefab**: `topologies/bench-3hop.yaml` through `rocefab up` (release binaries): host1 on
//!   rail1, host2 on rail2, one spine, 400G links at time dilation 1 so the shapers never limit,
//!   RoCEv2 lossless on priority 3 as the real fabric configures it.
//!
//! Measures (kernel first, then rocefab, per measure, so background load hits both alike):
//! - ping RTT p50/p99 idle (`ping -i 0.01`, per-reply times) and under load (while iperf3 runs);
//! - UDP goodput (UDP payload bits per second delivered) of `rocefab-bench gen` frames at each
//!   `--sizes` (wire size, FCS included; DSCP 24, so rocefab takes the lossless path); the sink
//!   counts them behind `XDP_DROP` on host B's veth. A size larger than the fabric MTU + 18 is
//!   reported as not measurable: rocefab links carry at most 3500 bytes (veth XDP driver mode);
//! - forwarder CPU per delivered byte, during the first measured UDP size: kernel = irq +
//!   softirq time of all CPUs (/proc/stat deltas): every kernel hop (IPv4 forward, veth
//!   transmit, the sink's XDP drop) runs in softirq, while the generator's own `sendto` is system
//!   time and not counted (the kernel here has tick-based accounting: a tick in softirq counts as
//!   softirq even inside a syscall); rocefab = utime+stime of the switches' `rocefab-switchd`
//!   processes (their threads and the kernel work in their syscalls, including the next hop's
//!   XDP program and the sink's drop when they run there; softirq run in other processes'
//!   context, e.g. rail1's XDP program during the generator's `sendto`, is not counted);
//! - iperf3 TCP goodput, one stream, server in host B, client in host A;
//! - RoCEv2 goodput of a two-rank write (`rocefab run fbench3 incast`: rank 1 writes its buffer
//!   to rank 0 through the three switches; rocefab only);
//! - 64-byte switch pps against the Linux bridge: one round of the single-switch `cargo xtask
//!   bench` ([`super::measure`]);
//! - AllReduce on `topologies/pod-64gpu.yaml` (a copy named `fbpod`): aggregate goodput (bytes
//!   every QP sent / JCT) against [`TODAY_ALLREDUCE_GBPS`], and the wall time of `rocefab run`
//!   outside the JCT as a fraction of the JCT (`--no-allreduce` skips it).
//!
//! Every namespace, fabric and process is removed on exit, error or Ctrl-C (guards below and in
//! [`super::proc`]); every wait is bounded.
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::proc::{self, check_interrupt, Child};
use super::{BenchArgs, Ctx, Dut};

/// AllReduce aggregate goodput on pod-64gpu before issue 13, Gbit/s: 64 ranks × 16 MiB, JCT
/// 17.6 s (issue 13 "Other measurements"; the kernel-routed baseline measured
/// 2026-11-22, docs/src/benchmark.md). The "≥ 3× today's" target compares with it.
pub const TODAY_ALLREDUCE_GBPS: f64 = 0.96;

/// The rocefab fabric's name (from `topologies/bench-3hop.yaml`) and the AllReduce fabric's.
const FABRIC: &str = "fbench3";
const POD_FABRIC: &str = "fbpod";
/// Prefix of the kernel-routed path's namespaces.
const KPREFIX: &str = "rfk-";

/// One row of the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub measure: String,
    pub unit: String,
    pub kernel: Option<f64>,
    pub rocefab: Option<f64>,
    /// rocefab / kernel.
    pub ratio: Option<f64>,
    pub target: Option<Target>,
    /// Whether the target was met (None: no target, or not measured).
    pub met: Option<bool>,
    pub note: Option<String>,
}

impl Row {
    fn new(
        measure: impl Into<String>,
        unit: &str,
        kernel: Option<f64>,
        rocefab: Option<f64>,
        target: Option<Target>,
    ) -> Row {
        let ratio = match (kernel, rocefab) {
            (Some(k), Some(r)) if k > 0.0 => Some(r / k),
            _ => None,
        };
        let mut row =
            Row { measure: measure.into(), unit: unit.into(), kernel, rocefab, ratio, target, met: None, note: None };
        row.met = target.and_then(|t| t.check(&row));
        row
    }

    fn note(mut self, n: impl Into<String>) -> Row {
        self.note = Some(n.into());
        self
    }
}

/// What a target bounds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Of {
    /// rocefab / kernel.
    Ratio,
    /// The rocefab value itself.
    Value,
}

/// A target of issue 13: `of` ≥ `bound` (`at_least`) or ≤ `bound`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Target {
    pub of: Of,
    pub at_least: bool,
    pub bound: f64,
}

impl Target {
    const fn ratio_at_least(bound: f64) -> Target {
        Target { of: Of::Ratio, at_least: true, bound }
    }
    const fn ratio_at_most(bound: f64) -> Target {
        Target { of: Of::Ratio, at_least: false, bound }
    }

    /// Met, not met, or None when the bounded quantity was not measured.
    pub fn check(&self, row: &Row) -> Option<bool> {
        let x = match self.of {
            Of::Ratio => row.ratio?,
            Of::Value => row.rocefab?,
        };
        Some(if self.at_least { x >= self.bound } else { x <= self.bound })
    }

    fn label(&self, unit: &str) -> String {
        let op = if self.at_least { "≥" } else { "≤" };
        match self.of {
            Of::Ratio => format!("{op} {}×", self.bound),
            Of::Value => format!("{op} {} {unit}", self.bound),
        }
    }
}

/// The whole report (`--json` prints it).
#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub mtu: u32,
    pub duration_s: f64,
    pub rows: Vec<Row>,
    /// Measures that failed, with the error.
    pub errors: BTreeMap<String, String>,
}

// ---------------------------------------------------------------------------------------------
// Pure parts: ping, iperf3, /proc/stat

/// Round-trip times (ms) of every reply line of `ping` output (`... time=0.084 ms`).
pub fn parse_ping(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.contains(" bytes from "))
        .filter_map(|l| {
            let t = l.split_once("time=")?.1;
            let (v, unit) = t.trim().split_once(' ').unwrap_or((t.trim(), "ms"));
            let v: f64 = v.parse().ok()?;
            match unit.trim() {
                "ms" => Some(v),
                "s" => Some(v * 1e3),
                "us" | "µs" => Some(v / 1e3),
                _ => None,
            }
        })
        .collect()
}

/// Nearest-rank percentile `p` (0 < p ≤ 100) of `v`; None when `v` is empty.
pub fn percentile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    Some(s[rank.clamp(1, s.len()) - 1])
}

/// Receiver-side goodput (bit/s) of `iperf3 -J` client output; fails with iperf3's own error.
pub fn parse_iperf3(json: &str) -> anyhow::Result<f64> {
    let v: serde_json::Value = serde_json::from_str(json).context("iperf3 output is not JSON")?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        bail!("iperf3: {e}");
    }
    v["end"]["sum_received"]["bits_per_second"].as_f64().context("iperf3 output lacks end.sum_received.bits_per_second")
}

/// irq + softirq clock ticks of all CPUs, from the aggregate `cpu` line of /proc/stat
/// (fields: user nice system idle iowait irq softirq steal ...).
pub fn parse_kernel_ticks(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let f: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    Some(f.get(5)? + f.get(6)?)
}

fn kernel_cpu_ns() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    let ticks = parse_kernel_ticks(&text).context("parsing /proc/stat")?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(ticks * 1_000_000_000 / hz)
}

// ---------------------------------------------------------------------------------------------
// Processes

/// Runs `cmd` in its own process group, collecting its output; on timeout, or on Ctrl-C when
/// `interruptible` (cleanup commands are not), the group gets SIGTERM, then SIGKILL 5 s later.
pub(super) fn output_within(mut cmd: Command, timeout: Duration, interruptible: bool) -> anyhow::Result<Output> {
    let shown = format!("{cmd:?}");
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setpgid is async-signal-safe and touches no parent memory.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().with_context(|| format!("starting {shown}"))?;
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("piped")));
    let err = reader(Box::new(child.stderr.take().expect("piped")));
    let end = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        let interrupted = if interruptible { check_interrupt() } else { Ok(()) };
        if interrupted.is_err() || Instant::now() > end {
            let pg = -(child.id() as i32);
            // SAFETY: kill(2) on the process group we created.
            unsafe { libc::kill(pg, libc::SIGTERM) };
            let stop = Instant::now() + Duration::from_secs(5);
            while child.try_wait()?.is_none() && Instant::now() < stop {
                std::thread::sleep(Duration::from_millis(20));
            }
            // SAFETY: as above.
            unsafe { libc::kill(pg, libc::SIGKILL) };
            let _ = child.wait();
            interrupted?;
            bail!("{shown}: not done within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output { status, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() })
}

/// [`output_within`], failing unless the command succeeded.
fn run_ok(cmd: Command, timeout: Duration, interruptible: bool) -> anyhow::Result<Output> {
    let shown = format!("{cmd:?}");
    let o = output_within(cmd, timeout, interruptible)?;
    if !o.status.success() {
        bail!("{shown} failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok(o)
}

fn in_ns(ns: &str, prog: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, prog]);
    c
}

/// `ip -j ARGS` parsed as JSON.
fn ip_json(args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let mut c = Command::new("ip");
    c.arg("-j").args(args);
    let o = run_ok(c, Duration::from_secs(10), true)?;
    serde_json::from_slice(&o.stdout).with_context(|| format!("ip -j {}: not JSON", args.join(" ")))
}

// ---------------------------------------------------------------------------------------------
// The two paths

/// One end-to-end path: the generator/client side A and the sink/server side B.
#[derive(Clone, Debug)]
struct Path3 {
    ns_a: String,
    if_a: String,
    ip_a: String,
    mac_a: String,
    /// MAC of A's gateway: the destination of the generator's frames.
    gw_mac: String,
    ns_b: String,
    if_b: String,
    ip_b: String,
}

impl Path3 {
    /// Reads addresses and the gateway of A's route to B from the namespaces.
    fn discover(ns_a: &str, if_a: &str, ns_b: &str, if_b: &str) -> anyhow::Result<Path3> {
        let addr = |ns: &str, dev: &str| -> anyhow::Result<String> {
            let v = ip_json(&["-n", ns, "-4", "addr", "show", "dev", dev])?;
            v[0]["addr_info"][0]["local"]
                .as_str()
                .map(str::to_string)
                .with_context(|| format!("{ns}:{dev} has no IPv4 address"))
        };
        let ip_a = addr(ns_a, if_a)?;
        let ip_b = addr(ns_b, if_b)?;
        let v = ip_json(&["-n", ns_a, "link", "show", "dev", if_a])?;
        let mac_a = v[0]["address"].as_str().context("no MAC")?.to_string();
        if v[0].get("xdp").is_some() {
            bail!("{ns_a}:{if_a} has an XDP program attached (the generator needs the veth to itself)");
        }
        let v = ip_json(&["-n", ns_a, "route", "get", &ip_b, "from", &ip_a])?;
        let gw = v[0]["gateway"].as_str().with_context(|| format!("{ns_a}: no gateway towards {ip_b}"))?.to_string();
        let v = ip_json(&["-n", ns_a, "neigh", "show", &gw, "dev", if_a])?;
        let gw_mac =
            v[0]["lladdr"].as_str().with_context(|| format!("{ns_a}: no neighbour entry for {gw}"))?.to_string();
        let v = ip_json(&["-n", ns_b, "link", "show", "dev", if_b])?;
        if v[0].get("xdp").is_some() {
            bail!("{ns_b}:{if_b} has an XDP program attached (the sink attaches its own)");
        }
        Ok(Path3 {
            ns_a: ns_a.into(),
            if_a: if_a.into(),
            ip_a,
            mac_a,
            gw_mac,
            ns_b: ns_b.into(),
            if_b: if_b.into(),
            ip_b,
        })
    }
}

/// The kernel-routed path; dropping it deletes its namespaces (and so the veths).
struct KernelFabric {
    created: Vec<String>,
}

/// (namespace, interface, address/len, MAC) of both ends of each of the four links.
const KLINKS: [[(&str, &str, &str, &str); 2]; 4] = [
    [
        ("rfk-a", "rfk-a0", "10.78.1.1/24", "02:fc:00:01:00:01"),
        ("rfk-r1", "rfk-r1a", "10.78.1.254/24", "02:fc:00:01:00:fe"),
    ],
    [
        ("rfk-r1", "rfk-r1s", "10.78.255.0/31", "02:fc:00:ff:00:00"),
        ("rfk-sp", "rfk-spa", "10.78.255.1/31", "02:fc:00:ff:00:01"),
    ],
    [
        ("rfk-sp", "rfk-spb", "10.78.255.2/31", "02:fc:00:ff:00:02"),
        ("rfk-r2", "rfk-r2s", "10.78.255.3/31", "02:fc:00:ff:00:03"),
    ],
    [
        ("rfk-r2", "rfk-r2b", "10.78.2.254/24", "02:fc:00:02:00:fe"),
        ("rfk-b", "rfk-b0", "10.78.2.1/24", "02:fc:00:02:00:01"),
    ],
];
/// (namespace, destination, next hop) routes.
const KROUTES: [(&str, &str, &str); 6] = [
    ("rfk-a", "default", "10.78.1.254"),
    ("rfk-r1", "10.78.2.0/24", "10.78.255.1"),
    ("rfk-sp", "10.78.1.0/24", "10.78.255.0"),
    ("rfk-sp", "10.78.2.0/24", "10.78.255.3"),
    ("rfk-r2", "10.78.1.0/24", "10.78.255.2"),
    ("rfk-b", "default", "10.78.2.254"),
];

impl KernelFabric {
    fn create(mtu: u32) -> anyhow::Result<KernelFabric> {
        let mut f = KernelFabric { created: Vec::new() };
        let mtu = mtu.to_string();
        for ns in ["rfk-a", "rfk-r1", "rfk-sp", "rfk-r2", "rfk-b"] {
            super::ip(&["netns", "add", ns])?;
            f.created.push(ns.into());
            let fwd = if ns.starts_with("rfk-r") || ns == "rfk-sp" { 1 } else { 0 };
            let mut c = in_ns(ns, "sysctl");
            c.args(["-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])
                .arg(format!("net.ipv4.ip_forward={fwd}"));
            run_ok(c, Duration::from_secs(10), true)?;
            super::ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        for [(n1, i1, a1, m1), (n2, i2, a2, m2)] in KLINKS {
            super::ip(&[
                "link", "add", i1, "netns", n1, "address", m1, "mtu", &mtu, "type", "veth", "peer", "name", i2,
                "netns", n2, "address", m2, "mtu", &mtu,
            ])?;
            for (ns, dev, addr) in [(n1, i1, a1), (n2, i2, a2)] {
                super::ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
                let mut c = in_ns(ns, "ethtool");
                c.args(["-K", dev, "tx", "off", "gro", "off", "tso", "off", "gso", "off"]);
                run_ok(c, Duration::from_secs(10), true)?;
                super::ip(&["-n", ns, "link", "set", dev, "up"])?;
            }
            // Static neighbours both ways, as rocefab's links have.
            let host = |a: &str| a.split('/').next().unwrap_or(a).to_string();
            super::ip(&["-n", n1, "neigh", "replace", &host(a2), "lladdr", m2, "dev", i1, "nud", "permanent"])?;
            super::ip(&["-n", n2, "neigh", "replace", &host(a1), "lladdr", m1, "dev", i2, "nud", "permanent"])?;
        }
        for (ns, dst, via) in KROUTES {
            super::ip(&["-n", ns, "route", "replace", dst, "via", via])?;
        }
        Ok(f)
    }

    fn path() -> anyhow::Result<Path3> {
        Path3::discover("rfk-a", "rfk-a0", "rfk-b", "rfk-b0")
    }
}

impl Drop for KernelFabric {
    fn drop(&mut self) {
        for ns in self.created.drain(..).rev() {
            if let Err(e) = super::ip(&["netns", "del", &ns]) {
                eprintln!("xtask bench: cleanup: {e:#}");
            }
        }
    }
}

/// Removes `rfk-` namespaces and the two rocefab fabrics a killed run left behind.
fn cleanup_stale(rocefab: &Path) -> anyhow::Result<()> {
    let out = Command::new("ip").args(["netns", "list"]).output().context("ip netns list")?;
    for ns in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(KPREFIX))
    {
        eprintln!("xtask bench: removing stale namespace {ns}");
        super::ip(&["netns", "del", ns])?;
    }
    for name in [FABRIC, POD_FABRIC] {
        if Path::new("/run/rocefab").join(name).exists() {
            eprintln!("xtask bench: removing stale fabric {name}");
            RocefabFabric { bin: rocefab.into(), name: name.into() }.down()?;
        }
    }
    Ok(())
}

/// A fabric brought up with `rocefab up`; dropping it runs `rocefab down`.
pub(super) struct RocefabFabric {
    pub(super) bin: PathBuf,
    pub(super) name: String,
}

impl RocefabFabric {
    pub(super) fn up(bin: &Path, name: &str, topology: &Path, timeout: Duration) -> anyhow::Result<RocefabFabric> {
        // The guard first: a failing `up` may leave a partial fabric, which `down` removes.
        let f = RocefabFabric { bin: bin.into(), name: name.into() };
        let mut c = Command::new(bin);
        c.arg("up").arg(topology).args(["--timeout", &timeout.as_secs().max(1).to_string()]);
        run_ok(c, timeout + Duration::from_secs(60), true)
            .with_context(|| format!("rocefab up {}", topology.display()))?;
        Ok(f)
    }

    pub(super) fn down(&self) -> anyhow::Result<()> {
        let mut c = Command::new(&self.bin);
        c.args(["down", &self.name]);
        run_ok(c, Duration::from_secs(120), false).map(|_| ())
    }

    fn ns(&self, node: &str) -> String {
        format!("rf-{}-{node}", self.name)
    }

    /// Pids of the fabric's switch daemons.
    fn switchd_pids(&self) -> Vec<u32> {
        daemon_pids(&self.name, "/rocefab-switchd")
    }
}

impl Drop for RocefabFabric {
    fn drop(&mut self) {
        if let Err(e) = self.down() {
            eprintln!("xtask bench: cleanup: rocefab down {}: {e:#}", self.name);
        }
    }
}

/// Pids of fabric `name`'s daemons whose program path ends with `program` (`/rocefab-switchd`;
/// `/rocefab-` for every daemon): their command line names the fabric's run directory.
pub(super) fn daemon_pids(name: &str, program: &str) -> Vec<u32> {
    let needle = format!("/run/rocefab/{name}/");
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&raw);
        let argv0 = cmdline.split('\0').next().unwrap_or("");
        let matches = if program.ends_with('-') { argv0.contains(program) } else { argv0.ends_with(program) };
        if matches && cmdline.contains(&needle) {
            v.push(pid);
        }
    }
    v
}

/// `template` with its `fabric:` and `mtu:` lines replaced, written into `dir`.
pub(super) fn topology_copy(template: &Path, dir: &Path, name: &str, mtu: Option<u32>) -> anyhow::Result<PathBuf> {
    let src = std::fs::read_to_string(template).with_context(|| format!("reading {}", template.display()))?;
    let text: Vec<String> = src
        .lines()
        .map(|l| match (l.starts_with("fabric:"), l.starts_with("mtu:"), mtu) {
            (true, _, _) => format!("fabric: {name}"),
            (_, true, Some(m)) => format!("mtu: {m}"),
            _ => l.to_string(),
        })
        .collect();
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(&p, text.join("\n") + "\n").with_context(|| format!("writing {}", p.display()))?;
    Ok(p)
}

// ---------------------------------------------------------------------------------------------
// Measurements

struct Env<'a> {
    a: &'a BenchArgs,
    bench_bin: &'a Path,
    rocefab_bin: &'a Path,
    run_dir: &'a Path,
}

/// RTTs (ms) of `count` pings from A to B, 10 ms apart.
fn ping(p: &Path3, count: usize) -> anyhow::Result<Vec<f64>> {
    let mut c = in_ns(&p.ns_a, "ping");
    c.args(["-n", "-i", "0.01", "-W", "1", "-c", &count.to_string(), "-I", &p.ip_a, &p.ip_b]);
    let o = output_within(c, Duration::from_millis(10 * count as u64) + Duration::from_secs(10), true)?;
    let rtts = parse_ping(&String::from_utf8_lossy(&o.stdout));
    if rtts.is_empty() {
        bail!("no ping replies from {} ({}): {}", p.ip_b, o.status, String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok(rtts)
}

/// One UDP run's result.
struct Udp {
    goodput_gbps: f64,
    /// Forwarder CPU ns per delivered byte.
    cpu_ns_per_byte: Option<f64>,
    loss: f64,
}

/// Which forwarder CPU to count during a UDP run.
enum CpuOf<'a> {
    /// All CPUs' irq+softirq time.
    Kernel,
    /// These processes' utime+stime.
    Processes(&'a [u32]),
}

fn run_gen(e: &Env<'_>, p: &Path3, size: usize, d: Duration) -> anyhow::Result<(u64, f64)> {
    let mut c = Command::new(e.bench_bin);
    c.arg("gen").env("RUST_LOG", "warn");
    c.args(["--netns", &p.ns_a, "--iface", &p.if_a, "--src-mac", &p.mac_a, "--dst-mac", &p.gw_mac]);
    c.args(["--src-ip", &p.ip_a, "--dst-ip", &p.ip_b, "--size", &size.to_string(), "--flows", &e.a.flows.to_string()]);
    c.args(["--dscp", &e.a.dscp.to_string(), "--duration", &format!("{}ms", d.as_millis())]);
    let mut g = Child::spawn("generator", c, Some(e.a.gen_cpu), e.a.nice, e.run_dir.join("gen.stderr"))?;
    let v = g.next_json(d + Duration::from_secs(15))?;
    g.wait(Duration::from_secs(5))?;
    let sent = v["sent"].as_u64().context("generator output lacks \"sent\"")?;
    let secs = v["elapsed_s"].as_f64().context("generator output lacks \"elapsed_s\"")?;
    Ok((sent, secs))
}

fn udp(e: &Env<'_>, p: &Path3, size: usize, cpu: Option<CpuOf<'_>>) -> anyhow::Result<Udp> {
    // Warm-up, not counted.
    run_gen(e, p, size, Duration::from_millis(300))?;
    proc::sleep(Duration::from_millis(100))?;
    let mut c = Command::new(e.bench_bin);
    c.arg("sink").env("RUST_LOG", "warn");
    c.args(["--netns", &p.ns_b, "--iface", &p.if_b, "--drop", "xdp"]);
    c.args(["--duration", &format!("{}ms", (e.a.duration + Duration::from_secs(30)).as_millis())]);
    let mut sink = Child::spawn("sink", c, Some(e.a.gen_cpu), e.a.nice, e.run_dir.join("sink.stderr"))?;
    sink.next_json(Duration::from_secs(10)).context("waiting for the sink")?;
    let read_cpu = || -> anyhow::Result<Option<u64>> {
        Ok(match &cpu {
            None => None,
            Some(CpuOf::Kernel) => Some(kernel_cpu_ns()?),
            Some(CpuOf::Processes(pids)) => {
                Some(pids.iter().map(|&p| proc::process_cpu_ns(p)).sum::<anyhow::Result<u64>>()?)
            }
        })
    };
    let cpu0 = read_cpu()?;
    let (sent, secs) = run_gen(e, p, size, e.a.duration)?;
    // Queues drain.
    proc::sleep(Duration::from_millis(100))?;
    let cpu1 = read_cpu()?;
    sink.terminate(Duration::from_secs(5))?;
    let v = sink.next_json(Duration::from_secs(5))?;
    let delivered = v["delivered"].as_u64().context("sink output lacks \"delivered\"")?;
    let payload = (size - 4 - 42) as f64;
    let bytes = delivered as f64 * (size - 4) as f64;
    let cpu_ns = match (cpu0, cpu1) {
        (Some(a), Some(b)) if delivered > 0 => Some(b.saturating_sub(a) as f64 / bytes),
        _ => None,
    };
    Ok(Udp {
        goodput_gbps: delivered as f64 * payload * 8.0 / secs / 1e9,
        cpu_ns_per_byte: cpu_ns,
        loss: if sent == 0 { 0.0 } else { (1.0 - delivered as f64 / sent as f64).max(0.0) },
    })
}

/// iperf3 TCP goodput (Gbit/s) A → B, with the RTTs of pings sent while it runs.
fn iperf3_with_ping(e: &Env<'_>, p: &Path3) -> anyhow::Result<(f64, Vec<f64>)> {
    let mut c = in_ns(&p.ns_b, "iperf3");
    // --forceflush: the "listening" line must arrive while the server runs, not at its exit.
    c.args(["-s", "-1", "--forceflush", "-B", &p.ip_b, "-p", "5201"]);
    let mut server = Child::spawn("iperf3 server", c, None, 0, e.run_dir.join("iperf3-server.stderr"))?;
    server.wait_line("listening", Duration::from_secs(10))?;
    let secs = e.a.duration.as_secs().max(2);
    let mut c = in_ns(&p.ns_a, "iperf3");
    c.args(["-c", &p.ip_b, "-B", &p.ip_a, "-p", "5201", "-J", "-t", &secs.to_string()]);
    let client = std::thread::spawn(move || output_within(c, Duration::from_secs(secs + 20), true));
    // Pings start once the TCP stream has ramped up and end before it does.
    proc::sleep(Duration::from_millis(500))?;
    let count = ((secs as usize * 1000 - 1000) / 10).clamp(10, 200);
    let rtts = ping(p, count);
    let o = client.join().map_err(|_| anyhow::anyhow!("iperf3 client thread panicked"))??;
    let _ = server.wait(Duration::from_secs(5));
    let gbps = parse_iperf3(&String::from_utf8_lossy(&o.stdout))? / 1e9;
    Ok((gbps, rtts?))
}

/// `rocefab run FABRIC KIND --size SIZE --json`: (report, wall seconds).
fn rocefab_run(
    e: &Env<'_>,
    fabric: &str,
    kind: &str,
    size: &str,
    timeout: Duration,
) -> anyhow::Result<(serde_json::Value, f64)> {
    let mut c = Command::new(e.rocefab_bin);
    c.args(["run", fabric, kind, "--size", size, "--json", "--timeout", &timeout.as_secs().to_string()]);
    let t0 = Instant::now();
    let o = output_within(c, timeout + Duration::from_secs(60), true)?;
    let wall = t0.elapsed().as_secs_f64();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).with_context(|| {
        format!("rocefab run {kind} ({}): no JSON report: {}", o.status, String::from_utf8_lossy(&o.stderr).trim())
    })?;
    if v["ok"].as_bool() != Some(true) {
        bail!("rocefab run {kind} failed: {}", v["errors"]);
    }
    Ok((v, wall))
}

/// (aggregate goodput Gbit/s = bytes every QP sent × 8 / JCT, JCT in wall seconds).
pub fn job_goodput(report: &serde_json::Value) -> anyhow::Result<(f64, f64)> {
    let jct_ns = report["completion_ns"].as_f64().filter(|&n| n > 0.0).context("report lacks completion_ns")?;
    let d = report["time_dilation"].as_f64().unwrap_or(1.0).max(1.0);
    let bytes: f64 =
        report["qps"].as_array().context("report lacks qps")?.iter().filter_map(|q| q["bytes"].as_f64()).sum();
    // completion_ns and rates are emulated; the wall-clock JCT is D times longer.
    Ok((bytes * 8.0 / jct_ns, jct_ns * d / 1e9))
}

// ---------------------------------------------------------------------------------------------
// The run

fn attempt<T>(
    errors: &mut BTreeMap<String, String>,
    what: &str,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<Option<T>> {
    eprintln!("xtask bench --fabric: {what} ...");
    match f() {
        Ok(v) => Ok(Some(v)),
        Err(e) => {
            check_interrupt()?;
            eprintln!("xtask bench --fabric:   {what} failed: {e:#}");
            errors.insert(what.to_string(), format!("{e:#}"));
            Ok(None)
        }
    }
}

pub fn run(a: &BenchArgs, ctx: &Ctx<'_>, rocefab_bin: &Path) -> anyhow::Result<()> {
    for prog in ["ping", "iperf3", "ethtool"] {
        if !crate::util::have(prog) {
            bail!("{prog} is missing (cargo xtask setup installs it)");
        }
    }
    if !(68..=3500).contains(&a.fabric_mtu) {
        bail!("--fabric-mtu {}: rocefab links carry 68..=3500 bytes", a.fabric_mtu);
    }
    let e = Env { a, bench_bin: &ctx.bench_bin, rocefab_bin, run_dir: ctx.run_dir };
    let root = crate::util::root();
    cleanup_stale(rocefab_bin)?;
    let mut errors = BTreeMap::new();
    let mut rows = Vec::new();
    {
        let _k = KernelFabric::create(a.fabric_mtu).context("creating the kernel-routed path")?;
        let topo = topology_copy(&root.join("topologies/bench-3hop.yaml"), ctx.run_dir, FABRIC, Some(a.fabric_mtu))?;
        eprintln!("xtask bench --fabric: rocefab up {} ...", topo.display());
        let rf = RocefabFabric::up(rocefab_bin, FABRIC, &topo, Duration::from_secs(30))?;
        let kp = KernelFabric::path()?;
        let rp = Path3::discover(&rf.ns("host1"), "gpu0", &rf.ns("host2"), "gpu0")?;
        // One shared process (the default) or one per switch (`ROCEFAB_SWITCH_WORKERS=per-switch`).
        let switchd = rf.switchd_pids();
        if switchd.len() != 1 && switchd.len() != 3 {
            bail!("expected 1 or 3 rocefab-switchd processes of fabric {FABRIC}, found {}", switchd.len());
        }

        // Idle RTT.
        let n = a.ping_count;
        let k = attempt(&mut errors, "ping idle, kernel", || ping(&kp, n))?;
        let r = attempt(&mut errors, "ping idle, rocefab", || ping(&rp, n))?;
        let pct = |v: &Option<Vec<f64>>, p: f64| v.as_deref().and_then(|v| percentile(v, p));
        rows.push(Row::new("ping RTT idle p50", "ms", pct(&k, 50.0), pct(&r, 50.0), Some(Target::ratio_at_most(1.5))));
        rows.push(Row::new("ping RTT idle p99", "ms", pct(&k, 99.0), pct(&r, 99.0), None));

        // UDP goodput per size; CPU per byte during the first measurable one.
        let max_wire = a.fabric_mtu as usize + 18;
        let mut cpu_row = None;
        for &size in &a.sizes {
            let name = format!("UDP goodput, {size}-byte frames");
            // "Goodput at MTU frames ≥ 1.0×": every size from a 1500-byte MTU frame up.
            let target = (size >= 1518).then_some(Target::ratio_at_least(1.0));
            if size > max_wire || size < 64 {
                rows.push(Row::new(&name, "Gbit/s", None, None, target).note(format!(
                    "not measurable: {size}-byte frames exceed the fabric MTU {} (+18); rocefab links carry at most 3500 bytes (veth XDP driver mode)",
                    a.fabric_mtu
                )));
                continue;
            }
            let with_cpu = cpu_row.is_none();
            let k = attempt(&mut errors, &format!("{name}, kernel"), || {
                udp(&e, &kp, size, with_cpu.then_some(CpuOf::Kernel))
            })?;
            let r = attempt(&mut errors, &format!("{name}, rocefab"), || {
                udp(&e, &rp, size, with_cpu.then_some(CpuOf::Processes(&switchd)))
            })?;
            let loss = |u: &Option<Udp>| u.as_ref().map_or("-".to_string(), |u| format!("{:.1}%", u.loss * 100.0));
            rows.push(
                Row::new(
                    &name,
                    "Gbit/s",
                    k.as_ref().map(|u| u.goodput_gbps),
                    r.as_ref().map(|u| u.goodput_gbps),
                    target,
                )
                .note(format!("loss kernel {}, rocefab {}", loss(&k), loss(&r))),
            );
            if with_cpu {
                let per_kb = |u: &Option<Udp>| u.as_ref().and_then(|u| u.cpu_ns_per_byte).map(|n| n * 1000.0);
                cpu_row = Some(
                    Row::new(
                        format!("forwarder CPU per delivered kB ({size}-byte UDP)"),
                        "ns/kB",
                        per_kb(&k),
                        per_kb(&r),
                        None,
                    )
                    .note(format!(
                        "kernel: irq+softirq time of all CPUs; rocefab: utime+stime of the switches' {} rocefab-switchd process{}",
                        switchd.len(),
                        if switchd.len() == 1 { "" } else { "es" }
                    )),
                );
            }
        }
        rows.extend(cpu_row);

        // TCP, and RTT under its load.
        let k = attempt(&mut errors, "iperf3 TCP + loaded ping, kernel", || iperf3_with_ping(&e, &kp))?;
        let r = attempt(&mut errors, "iperf3 TCP + loaded ping, rocefab", || iperf3_with_ping(&e, &rp))?;
        rows.push(Row::new(
            "iperf3 TCP goodput, 1 stream",
            "Gbit/s",
            k.as_ref().map(|x| x.0),
            r.as_ref().map(|x| x.0),
            Some(Target::ratio_at_least(1.0)),
        ));
        let lp = |v: &Option<(f64, Vec<f64>)>, p: f64| v.as_ref().and_then(|v| percentile(&v.1, p));
        rows.push(Row::new("ping RTT under TCP load p50", "ms", lp(&k, 50.0), lp(&r, 50.0), None));
        rows.push(Row::new("ping RTT under TCP load p99", "ms", lp(&k, 99.0), lp(&r, 99.0), None));

        // RoCEv2: one write from rank 1 (host2) to rank 0 (host1).
        let r = attempt(&mut errors, "RoCEv2 two-rank write, rocefab", || {
            rocefab_run(&e, FABRIC, "incast", &a.roce_size, Duration::from_secs(120)).and_then(|(v, _)| job_goodput(&v))
        })?;
        rows.push(
            Row::new(format!("RoCEv2 write goodput, 2 ranks, {}", a.roce_size), "Gbit/s", None, r.map(|x| x.0), None)
                .note("rocefab only: the kernel path has no RoCE NIC"),
        );
    }

    // 64-byte frames through one switch against the Linux bridge (one round).
    {
        let one = BenchArgs { size: 64, repeat: 1, ..a.clone() };
        let c = Ctx {
            args: &one,
            bench_bin: ctx.bench_bin.clone(),
            switchd_bin: ctx.switchd_bin.clone(),
            run_dir: ctx.run_dir,
        };
        super::cleanup_stale()?;
        let _t = super::Topology::create().context("creating the rfb- namespaces")?;
        let b = attempt(&mut errors, "64-byte pps, Linux bridge", || super::measure(&c, Dut::Bridge))?;
        let r = attempt(&mut errors, "64-byte pps, rocefab switch", || super::measure(&c, Dut::Rocefab))?;
        rows.push(
            Row::new(
                "64-byte switch pps (kernel: Linux bridge)",
                "Mpps",
                b.map(|m| m.delivered_mpps),
                r.map(|m| m.delivered_mpps),
                Some(Target::ratio_at_least(2.0)),
            )
            .note("single switch, cargo xtask bench, one round"),
        );
    }

    if !a.no_allreduce {
        let r = attempt(&mut errors, "AllReduce on pod-64gpu", || -> anyhow::Result<(f64, f64, f64)> {
            let topo = topology_copy(&root.join("topologies/pod-64gpu.yaml"), ctx.run_dir, POD_FABRIC, None)?;
            let _pod = RocefabFabric::up(rocefab_bin, POD_FABRIC, &topo, Duration::from_secs(180))?;
            let (v, wall) = rocefab_run(&e, POD_FABRIC, "allreduce", &a.allreduce_size, Duration::from_secs(600))?;
            let (gbps, jct) = job_goodput(&v)?;
            Ok((gbps, jct, wall))
        })?;
        rows.push(
            Row::new(
                format!("AllReduce aggregate goodput, pod-64gpu, {}/rank (kernel: today's)", a.allreduce_size),
                "Gbit/s",
                Some(TODAY_ALLREDUCE_GBPS),
                r.map(|x| x.0),
                Some(Target::ratio_at_least(3.0)),
            )
            .note("kernel column: rocefab before issue 13 (0.96 Gbit/s, 16 MiB/rank)"),
        );
        let outside = r.map(|(_, jct, wall)| (wall - jct).max(0.0) / jct * 100.0);
        let mut row = Row::new(
            "AllReduce wall time outside the JCT",
            "% of JCT",
            None,
            outside,
            Some(Target { of: Of::Value, at_least: false, bound: 20.0 }),
        );
        if let Some((_, jct, wall)) = r {
            row = row.note(format!("rocefab run took {wall:.1} s around a {jct:.1} s JCT"));
        }
        rows.push(row);
    }

    let report = Report { mtu: a.fabric_mtu, duration_s: a.duration.as_secs_f64(), rows, errors };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    if !report.errors.is_empty() {
        let names: Vec<&str> = report.errors.keys().map(String::as_str).collect();
        bail!("could not measure: {}", names.join(", "));
    }
    Ok(())
}

/// The table for people.
pub fn render(r: &Report) -> String {
    let mut s = format!(
        "\n3-hop path host → rail → spine → rail → host, MTU {}, {:.1} s per throughput run; kernel = Linux routers in namespaces\n\n",
        r.mtu, r.duration_s
    );
    s += "| measure | kernel | rocefab | rocefab / kernel | target | met |\n|---|---|---|---|---|---|\n";
    let v = |x: Option<f64>| {
        x.map_or("–".to_string(), |x| if x.abs() >= 100.0 { format!("{x:.0}") } else { format!("{x:.3}") })
    };
    for row in &r.rows {
        let met = match (row.target, row.met) {
            (None, _) => "",
            (Some(_), Some(true)) => "met",
            (Some(_), Some(false)) => "NOT met",
            (Some(_), None) => "not measured",
        };
        s += &format!(
            "| {} ({}) | {} | {} | {} | {} | {} |\n",
            row.measure,
            row.unit,
            v(row.kernel),
            v(row.rocefab),
            row.ratio.map_or("–".to_string(), |x| format!("{x:.2}×")),
            row.target.map_or(String::new(), |t| t.label(&row.unit)),
            met
        );
    }
    let notes: Vec<&Row> = r.rows.iter().filter(|row| row.note.is_some()).collect();
    if !notes.is_empty() {
        s += "\n";
        for row in notes {
            s += &format!("{}: {}\n", row.measure, row.note.as_deref().unwrap_or(""));
        }
    }
    for (what, e) in &r.errors {
        s += &format!("\n{what} failed:\n{e}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const PING: &str = "PING 10.78.2.1 (10.78.2.1) from 10.78.1.1 : 56(84) bytes of data.\n\
        64 bytes from 10.78.2.1: icmp_seq=1 ttl=61 time=0.084 ms\n\
        64 bytes from 10.78.2.1: icmp_seq=2 ttl=61 time=1.20 ms\n\
        From 10.78.1.254 icmp_seq=3 Destination Host Unreachable\n\
        64 bytes from 10.78.2.1: icmp_seq=4 ttl=61 time=0.090 ms\n\
        \n--- 10.78.2.1 ping statistics ---\n4 packets transmitted, 3 received, 25% packet loss, time 31ms\n\
        rtt min/avg/max/mdev = 0.084/0.458/1.200/0.525 ms\n";

    #[test]
    fn ping_replies_are_parsed_and_the_summary_and_errors_are_not() {
        assert_eq!(parse_ping(PING), vec![0.084, 1.2, 0.090]);
        assert!(parse_ping("ping: connect: Network is unreachable\n").is_empty());
        assert_eq!(parse_ping("64 bytes from x: icmp_seq=1 ttl=64 time=12 ms"), vec![12.0]);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(100.0));
        assert_eq!(percentile(&v, 99.0), Some(198.0));
        assert_eq!(percentile(&v, 100.0), Some(200.0));
        assert_eq!(percentile(&[3.0], 99.0), Some(3.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn iperf3_receiver_goodput_and_errors() {
        let ok =
            r#"{"start":{},"end":{"sum_sent":{"bits_per_second":2.6e9},"sum_received":{"bits_per_second":2.5e9}}}"#;
        assert_eq!(parse_iperf3(ok).unwrap(), 2.5e9);
        let err = r#"{"start":{},"end":{},"error":"unable to connect to server: Connection refused"}"#;
        assert!(parse_iperf3(err).unwrap_err().to_string().contains("Connection refused"));
        assert!(parse_iperf3(r#"{"end":{}}"#).is_err());
        assert!(parse_iperf3("iperf3: error").is_err());
    }

    #[test]
    fn kernel_ticks_are_irq_and_softirq_of_the_aggregate_line() {
        let text = "cpu  100 5 30 1000 7 2 11 0 0 0\ncpu0 50 5 15 500 3 1 5 0 0 0\nintr 1\n";
        assert_eq!(parse_kernel_ticks(text), Some(13));
        assert_eq!(parse_kernel_ticks("cpu0 1 2 3 4 5 6 7\n"), None);
    }

    #[test]
    fn ratios_and_targets() {
        let at_least = Some(Target::ratio_at_least(1.0));
        let r = Row::new("goodput", "Gbit/s", Some(2.0), Some(2.5), at_least);
        assert_eq!(r.ratio, Some(1.25));
        assert_eq!(r.met, Some(true));
        assert_eq!(Row::new("goodput", "Gbit/s", Some(2.0), Some(1.0), at_least).met, Some(false));
        // Idle RTT: lower is better.
        let rtt = Some(Target::ratio_at_most(1.5));
        assert_eq!(Row::new("rtt", "ms", Some(0.1), Some(0.15), rtt).met, Some(true));
        assert_eq!(Row::new("rtt", "ms", Some(0.1), Some(0.4), rtt).met, Some(false));
        // Missing either side: no ratio, target not measured.
        let r = Row::new("rtt", "ms", None, Some(0.4), rtt);
        assert_eq!((r.ratio, r.met), (None, None));
        assert_eq!(Row::new("x", "ms", Some(0.0), Some(1.0), rtt).ratio, None);
        // A bound on the value itself.
        let outside = Target { of: Of::Value, at_least: false, bound: 20.0 };
        let value = Some(outside);
        assert_eq!(Row::new("outside", "%", None, Some(19.0), value).met, Some(true));
        assert_eq!(Row::new("outside", "%", None, Some(171.0), value).met, Some(false));
        assert_eq!(Target::ratio_at_least(3.0).label("Gbit/s"), "≥ 3×");
        assert_eq!(outside.label("% of JCT"), "≤ 20 % of JCT");
    }

    #[test]
    fn table_shows_every_row_with_its_verdict() {
        let report = Report {
            mtu: 1500,
            duration_s: 5.0,
            rows: vec![
                Row::new("ping RTT idle p50", "ms", Some(0.084), Some(0.405), Some(Target::ratio_at_most(1.5))),
                Row::new("RoCEv2 write", "Gbit/s", None, Some(1.5), None).note("rocefab only"),
                Row::new("UDP 4200", "Gbit/s", None, None, Some(Target::ratio_at_least(1.0))),
            ],
            errors: BTreeMap::from([("iperf3".to_string(), "refused".to_string())]),
        };
        let t = render(&report);
        assert!(t.contains("| ping RTT idle p50 (ms) | 0.084 | 0.405 | 4.82× | ≤ 1.5× | NOT met |"), "{t}");
        assert!(t.contains("| RoCEv2 write (Gbit/s) | – | 1.500 | – |  |  |"), "{t}");
        assert!(t.contains("| UDP 4200 (Gbit/s) | – | – | – | ≥ 1× | not measured |"), "{t}");
        assert!(t.contains("RoCEv2 write: rocefab only"), "{t}");
        assert!(t.contains("iperf3 failed:\nrefused"), "{t}");
    }

    #[test]
    fn job_goodput_is_every_qps_bytes_over_the_jct() {
        let v = serde_json::json!({
            "completion_ns": 2_000_000_000u64, "time_dilation": 1.0,
            "qps": [{"bytes": 125_000_000u64}, {"bytes": 125_000_000u64}]
        });
        let (gbps, jct) = job_goodput(&v).unwrap();
        assert!((gbps - 1.0).abs() < 1e-9, "{gbps}");
        assert!((jct - 2.0).abs() < 1e-9, "{jct}");
        assert!(job_goodput(&serde_json::json!({"completion_ns": 0, "qps": []})).is_err());
    }

    #[test]
    fn topology_copy_renames_the_fabric_and_sets_the_mtu() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.yaml");
        std::fs::write(&t, "# c\nfabric: fbench3\nmtu: 1500\nhosts:\n  count: 2\n").unwrap();
        let p = topology_copy(&t, dir.path(), "fbx", Some(3000)).unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap(), "# c\nfabric: fbx\nmtu: 3000\nhosts:\n  count: 2\n");
        let p = topology_copy(&t, dir.path(), "fby", None).unwrap();
        assert!(std::fs::read_to_string(p).unwrap().contains("mtu: 1500\n"));
    }
}
