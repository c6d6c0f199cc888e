//! `cargo xtask fidelity`: the canonical single-switch N->1 incast of issue 23 on rocefab, side
//! by side with the same scenario run in htsim (docs/src/fidelity.md,
//! sim/htsim/README.md).
//!
//! For each mode (PFC-only, DCQCN+PFC), line rate (100G, 400G) and sender count N (4, 8) it
//! writes a copy of `topologies/fidelity-incast.yaml` to `target/fidelity/` (N + 1 hosts, the
//! rate, the time dilation that gives every host link [`FidelityArgs::wall_mbps`] on the wall
//! clock, `wred: off` for PFC-only), brings the fabric up, runs
//! `rocefab run fid incast --size S --json --timeline <file>.json` for each size (2, 16 MiB),
//! brings it down, and prints every metric beside the simulator's with the ratio. Every step is
//! bounded in wall-clock time (`rocefab up`/`down` 60 s, a run 60 s + 4x its transfer at the wall
//! rate), and all of them together by `--limit-min` (25); the fabric goes down also when a step
//! fails.
//!
//! Which field of rocefab's JSON feeds each metric is [`METRICS`], and nowhere else: a metric
//! rocefab does not report yet is printed as "not reported", never estimated.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::util::{is_root, root};

/// The canonical topology (16 hosts x 1 GPU on one switch).
const TOPOLOGY: &str = "topologies/fidelity-incast.yaml";
/// Its fabric name.
const FABRIC: &str = "fid";
/// The simulator's results (`sim/htsim/run.sh` writes them).
const SIM_RESULTS: &str = "sim/htsim/results.json";
/// Where the variant topologies, the run reports and the timelines go by default.
const OUT_DIR: &str = "target/fidelity";
/// `qos.wred` of DCQCN+PFC mode: step ECN at 25 packets of 4096 B (marks every ECT packet once
/// the queue holds more than 102400 B; WRED needs min < max).
const STEP_ECN: &str = "{ queues: [3], min: 102400, max: 102401, probability: 100, at: dequeue }";
/// Wall-clock bound of `rocefab up` and of `rocefab down` (each took under 10 s here).
const UP_LIMIT: Duration = Duration::from_secs(60);
/// The least time left that still starts a step.
const MIN_STEP: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug, Clone)]
pub struct FidelityArgs {
    /// Modes to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Mode::Pfc, Mode::Dcqcn])]
    pub modes: Vec<Mode>,
    /// Sender counts N (N senders into rank 0).
    #[arg(long, value_delimiter = ',', default_values_t = [4u32, 8])]
    pub senders: Vec<u32>,
    /// Bytes per sender, MiB.
    #[arg(long, value_delimiter = ',', default_values_t = [2u64, 16])]
    pub sizes_mib: Vec<u64>,
    /// Host line rates, Gbit/s.
    #[arg(long, value_delimiter = ',', default_values_t = [100u64, 400])]
    pub rates_gbps: Vec<u64>,
    /// Wall-clock rate of a host link, Mbit/s: each variant runs at time dilation
    /// D = line rate / this (400G: D 8000 at the default 50).
    #[arg(long, default_value_t = 50)]
    pub wall_mbps: u64,
    /// The sender NICs' DCQCN profile (`dcqcn:` of the topology): `htsim` has htsim's
    /// parameters, `hpcc-dcqcn` ns-3 HPCC's (`run.py --cc dcqcn`, as `sim/ns3-hpcc` runs it).
    #[arg(long, default_value = "htsim")]
    pub dcqcn_profile: String,
    /// The receivers' notification point, `cnp` (the topology's `dcqcn: { np: { cnp } }`):
    /// `immediate` (the paper's NP, rocefab's default) or `deferred` (htsim's). Unset: the
    /// topology's default.
    #[arg(long)]
    pub np_cnp: Option<String>,
    /// The notification point's pacing scope (`dcqcn: { np: { scope } }`): `qp`, `ip_pair` or
    /// `port`. Unset: the topology's default.
    #[arg(long)]
    pub np_scope: Option<String>,
    /// Requester ACK timeout, emulated ms (htsim's RoCE source: 5 ms minimum RTO).
    #[arg(long, default_value_t = 5)]
    pub retransmit_timeout_ms: u64,
    /// Requester window of every QP, packets. Default: the whole transfer, as in the
    /// simulators (htsim's `RoceSrc` paces at its rate with no window: `roce.cpp` sends while
    /// `_highest_sent * MSS <= size`). `rocefab run`'s own default, 128 KiB (32 packets at path
    /// MTU 4096), is less than a 400G sender's share of the path in this scenario (2 x 1 us of
    /// cable both ways at 400G is 200 KB before any queue) and would cap the queue by the
    /// window instead of by PFC.
    #[arg(long)]
    pub window_packets: Option<u32>,
    /// Use the rocefab binaries in this directory instead of building them (release).
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    /// The simulator's results file.
    #[arg(long, default_value = SIM_RESULTS)]
    pub sim: PathBuf,
    /// Where the variant topologies, run reports and timelines go (relative to the repository).
    /// Runs with another DCQCN profile keep theirs apart with a directory of their own.
    #[arg(long, default_value = OUT_DIR)]
    pub out_dir: PathBuf,
    /// Only print the table from the reports a previous run left in `--out-dir`.
    #[arg(long)]
    pub table_only: bool,
    /// Wall-clock limit of all runs together, minutes: a step that would end after it is not
    /// started (its variants say so) and every step's own bound is cut to what is left.
    #[arg(long, default_value_t = 25)]
    pub limit_min: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// PFC only: no ECN marking, so DCQCN never acts.
    Pfc,
    /// DCQCN + PFC: step ECN at 25 packets, DCQCN at the senders.
    Dcqcn,
}

impl Mode {
    /// The simulator's name of the mode (`mode` in its results).
    fn sim_name(self) -> &'static str {
        match self {
            Mode::Pfc => "pfc",
            Mode::Dcqcn => "dcqcn",
        }
    }
    fn title(self) -> &'static str {
        match self {
            Mode::Pfc => "PFC-only",
            Mode::Dcqcn => "DCQCN+PFC",
        }
    }
}

/// One run of the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub mode: Mode,
    pub senders: u32,
    pub size_bytes: u64,
    pub rate_gbps: u64,
}

impl Variant {
    /// File stem of its report and timeline under target/fidelity/.
    fn stem(&self) -> String {
        format!("{}-n{}-{}mib-{}g", self.mode.sim_name(), self.senders, self.size_bytes >> 20, self.rate_gbps)
    }
    fn title(&self) -> String {
        format!(
            "{}, N = {}, {} MiB per sender, {}G",
            self.mode.title(),
            self.senders,
            self.size_bytes >> 20,
            self.rate_gbps
        )
    }
}

/// The JSON documents of one rocefab run: the `rocefab run --json` report and the `timeline`
/// part of its `--timeline FILE.json`.
#[derive(Default)]
pub struct Docs {
    pub run: Option<Value>,
    pub timeline: Option<Value>,
}

/// Where rocefab's value of a metric comes from.
pub enum Source {
    /// A number at a JSON pointer in the run report.
    Run(&'static str),
    /// A number at a JSON pointer in the timeline file.
    Timeline(&'static str),
    /// The sum over an array of the run report: (array pointer, pointer inside each element).
    RunSum(&'static str, &'static str),
    /// The same over an array of the timeline file.
    TimelineSum(&'static str, &'static str),
    /// Computed from several fields.
    Derived(fn(&Docs) -> Option<f64>),
}

/// One compared metric. Both sides give it in the same raw unit (ns, bit/s, bytes, counts);
/// `scale` divides it for printing.
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub scale: f64,
    /// Its key in the simulator's results.
    pub sim: &'static str,
    pub rocefab: Source,
}

/// Every compared metric, and which JSON field feeds it on rocefab's side. A field rocefab
/// adds later is one `Source` here.
pub const METRICS: &[Metric] = &[
    Metric { name: "JCT", unit: "us", scale: 1e3, sim: "jct_ns", rocefab: Source::Run("/completion_ns") },
    Metric {
        name: "aggregate goodput",
        unit: "Gbit/s",
        scale: 1e9,
        sim: "aggregate_goodput_bps",
        rocefab: Source::Derived(aggregate_goodput_bps),
    },
    Metric { name: "Jain (per-sender goodput)", unit: "", scale: 1.0, sim: "jain", rocefab: Source::Derived(jain) },
    Metric {
        name: "max bottleneck queue",
        unit: "KB",
        scale: 1e3,
        sim: "max_queue_bytes",
        rocefab: Source::Timeline("/timeline/bottleneck/peak_depth_bytes"),
    },
    Metric {
        name: "avg bottleneck queue (time-weighted)",
        unit: "KB",
        scale: 1e3,
        sim: "avg_queue_bytes",
        rocefab: Source::Timeline("/timeline/bottleneck/average_depth_bytes"),
    },
    Metric {
        name: "pause onsets",
        unit: "",
        scale: 1.0,
        sim: "pause_onsets",
        rocefab: Source::RunSum("/pfc", "/pause_onsets"),
    },
    Metric {
        name: "PFC frames (to the senders)",
        unit: "",
        scale: 1.0,
        sim: "pfc_frames",
        rocefab: Source::RunSum("/nics", "/pfc_frames_received"),
    },
    Metric {
        name: "ECN marks",
        unit: "",
        scale: 1.0,
        sim: "ecn_marks",
        rocefab: Source::TimelineSum("/timeline/ecn_marks", "/v"),
    },
    Metric { name: "CNPs", unit: "", scale: 1.0, sim: "cnps", rocefab: Source::Run("/cnps_received") },
];

/// N x size x 8 / JCT: every sender's bytes over the job's time, as the simulator computes it.
fn aggregate_goodput_bps(d: &Docs) -> Option<f64> {
    let run = d.run.as_ref()?;
    let size = run.pointer("/size_bytes")?.as_f64()?;
    let ranks = run.pointer("/ranks")?.as_f64()?;
    let ns = run.pointer("/completion_ns")?.as_f64()?;
    (ns > 0.0 && ranks > 1.0).then(|| size * (ranks - 1.0) * 8.0 / (ns / 1e9))
}

/// Jain's index over the sending QPs' goodputs (QPs that moved bytes and report a goodput).
fn jain(d: &Docs) -> Option<f64> {
    let qps = d.run.as_ref()?.pointer("/qps")?.as_array()?;
    let x: Vec<f64> = qps
        .iter()
        .filter(|q| q.pointer("/bytes").and_then(Value::as_u64).unwrap_or(0) > 0)
        .filter_map(|q| q.pointer("/goodput_bps").and_then(Value::as_f64))
        .collect();
    jain_index(&x)
}

/// (Σx)² / (n Σx²); None for no values or all zero.
pub fn jain_index(x: &[f64]) -> Option<f64> {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && s2 > 0.0).then(|| s * s / (x.len() as f64 * s2))
}

fn num(doc: Option<&Value>, ptr: &str) -> Option<f64> {
    doc?.pointer(ptr)?.as_f64()
}

fn sum(doc: Option<&Value>, array: &str, field: &str) -> Option<f64> {
    let a = doc?.pointer(array)?.as_array()?;
    a.iter().map(|e| e.pointer(field).and_then(Value::as_f64)).sum()
}

impl Source {
    /// rocefab's value, or None where its JSON does not carry it.
    pub fn value(&self, d: &Docs) -> Option<f64> {
        match self {
            Source::Run(p) => num(d.run.as_ref(), p),
            Source::Timeline(p) => num(d.timeline.as_ref(), p),
            Source::RunSum(a, f) => sum(d.run.as_ref(), a, f),
            Source::TimelineSum(a, f) => sum(d.timeline.as_ref(), a, f),
            Source::Derived(f) => f(d),
        }
    }
}

/// The simulator's row of a variant.
pub fn sim_row<'a>(sim: &'a [Value], v: &Variant) -> Option<&'a Value> {
    sim.iter().find(|r| {
        r["mode"].as_str() == Some(v.mode.sim_name())
            && r["senders"].as_u64() == Some(u64::from(v.senders))
            && r["size_bytes"].as_u64() == Some(v.size_bytes)
            && r["line_rate_gbps"].as_f64() == Some(v.rate_gbps as f64)
    })
}

fn show(x: Option<f64>, scale: f64) -> String {
    match x {
        None => "not reported".into(),
        Some(v) => {
            let v = v / scale;
            if v == v.trunc() && v.abs() < 1e15 {
                format!("{v:.0}")
            } else if v.abs() >= 100.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.3}")
            }
        }
    }
}

/// The simulator's name in its results (`"simulator"` of a row: htsim, ns3-hpcc).
fn sim_name(row: Option<&Value>) -> &str {
    row.and_then(|r| r.get("simulator")).and_then(Value::as_str).unwrap_or("simulator")
}

/// The side-by-side table of one variant (markdown). `outcome` is why rocefab has no numbers
/// (a fabric that did not come up, a run that failed), if so.
pub fn table(v: &Variant, d: &Docs, sim: Option<&Value>, outcome: Option<&str>) -> String {
    let mut s = format!("### {}\n\n", v.title());
    if let Some(r) = d.run.as_ref() {
        let dil = r.pointer("/time_dilation").and_then(Value::as_f64).unwrap_or(1.0);
        let ok = r.pointer("/ok").and_then(Value::as_bool).unwrap_or(false);
        s += &format!("rocefab: time dilation {dil}, job {}\n", if ok { "ok" } else { "NOT ok" });
        if let Some(w) = r.pointer("/warnings").and_then(Value::as_array).filter(|w| !w.is_empty()) {
            for w in w.iter().filter_map(Value::as_str) {
                s += &format!("rocefab warning: {w}\n");
            }
        }
    }
    if let Some(o) = outcome {
        s += &format!("rocefab: not run: {o}\n");
    }
    let name = sim_name(sim);
    match sim {
        None => s += "the simulator: no row for this variant in the results file\n",
        Some(r) if r.get("complete").and_then(Value::as_bool) == Some(false) => {
            let note = r.get("note").and_then(Value::as_str).unwrap_or("no reason given");
            s += &format!("{name}: did not finish ({note})\n");
        }
        Some(_) => {}
    }
    let sim_numbers = sim.is_some_and(|r| METRICS.iter().any(|m| r.get(m.sim).and_then(Value::as_f64).is_some()));
    if outcome.is_some() && !sim_numbers {
        return s; // nothing to tabulate on either side
    }
    s += &format!("\n| metric | unit | rocefab | {name} | rocefab / {name} |\n|---|---|---:|---:|---:|\n");
    for m in METRICS {
        let r = if outcome.is_some() { None } else { m.rocefab.value(d) };
        let h = sim.and_then(|x| x.get(m.sim)).and_then(Value::as_f64);
        let ratio = match (r, h) {
            (Some(r), Some(h)) if h != 0.0 => format!("{:.2}", r / h),
            (Some(r), Some(_)) => {
                if r == 0.0 {
                    "both 0".into()
                } else {
                    format!("{name} 0")
                }
            }
            _ => "-".into(),
        };
        let rs = if outcome.is_some() { "not run".into() } else { show(r, m.scale) };
        let hs = if h.is_some() { show(h, m.scale) } else { "-".into() };
        s += &format!("| {} | {} | {rs} | {hs} | {ratio} |\n", m.name, m.unit);
    }
    s
}

/// Every variant, in run order (one fabric per mode, rate and N; both sizes on it).
pub fn variants(a: &FidelityArgs) -> Vec<Variant> {
    let mut out = Vec::new();
    for &mode in &a.modes {
        for &rate_gbps in &a.rates_gbps {
            for &senders in &a.senders {
                for &mib in &a.sizes_mib {
                    out.push(Variant { mode, senders, size_bytes: mib << 20, rate_gbps });
                }
            }
        }
    }
    out
}

/// The time dilation that runs a `rate_gbps` link at `wall_mbps` on the wall clock.
pub fn dilation(rate_gbps: u64, wall_mbps: u64) -> u64 {
    (rate_gbps * 1000 / wall_mbps.max(1)).max(1)
}

/// The canonical topology text with one variant's settings: hosts, line rate, time dilation,
/// DCQCN profile, and `wred: off` for PFC-only. Each key it sets must be in the file already
/// (once, at the indentation shown), so a changed canonical file fails here, not silently.
pub fn variant_topology(base: &str, v: &Variant, dilation: u64, dcqcn: &str) -> anyhow::Result<String> {
    let mut text = base.to_string();
    let hosts = v.senders + 1;
    let mut set = |key: &str, value: String| -> anyhow::Result<()> {
        let hits: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.starts_with(key) && l[key.len()..].starts_with(':'))
            .map(|(i, _)| i)
            .collect();
        if hits.len() != 1 {
            bail!("{TOPOLOGY}: expected one line starting with `{key}:`, found {}", hits.len());
        }
        text = text
            .lines()
            .enumerate()
            .map(|(i, l)| if i == hits[0] { format!("{key}: {value}") } else { l.to_string() })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n";
        Ok(())
    };
    set("  count", hosts.to_string())?;
    set("    host_rail", format!("{}Gbps", v.rate_gbps))?;
    set("time_dilation", dilation.to_string())?;
    set("dcqcn", dcqcn.to_string())?;
    set(
        "  wred",
        match v.mode {
            Mode::Pfc => "off".into(),
            Mode::Dcqcn => STEP_ECN.into(),
        },
    )?;
    Ok(text)
}

/// The topology's `dcqcn:` value for these arguments: the profile and, when either is given, the
/// notification point's settings.
pub fn dcqcn_line(a: &FidelityArgs) -> String {
    let np: Vec<String> = [("cnp", &a.np_cnp), ("scope", &a.np_scope)]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}: {v}")))
        .collect();
    if np.is_empty() {
        format!("{{ profile: {} }}", a.dcqcn_profile)
    } else {
        format!("{{ profile: {}, np: {{ {} }} }}", a.dcqcn_profile, np.join(", "))
    }
}

/// Runs `cmd` with stdout captured, killing it (and only it) if it outlives `limit`.
fn run_bounded(cmd: &mut Command, limit: Duration) -> anyhow::Result<(bool, String, String)> {
    let shown = format!("{cmd:?}");
    let mut child: Child =
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().with_context(|| format!("starting {shown}"))?;
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().context("waiting")? {
            break Some(st);
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (o, e) = (t_out.join().unwrap_or_default(), t_err.join().unwrap_or_default());
    match status {
        None => bail!("{shown} did not end within {} s: killed; stderr: {}", limit.as_secs(), tail(&e)),
        Some(st) => Ok((st.success(), o, e)),
    }
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().rev().take(3).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// Brings the fabric down when dropped.
struct Down<'a> {
    rocefab: &'a Path,
}

impl Drop for Down<'_> {
    fn drop(&mut self) {
        eprintln!("== rocefab down {FABRIC}");
        if let Err(e) = run_bounded(Command::new(self.rocefab).args(["down", FABRIC]), UP_LIMIT) {
            eprintln!("rocefab down {FABRIC}: {e:#}");
        }
    }
}

/// Wall-clock bound of one `rocefab run`: setting up, the transfer at the wall rate with a
/// factor 4 for pauses and DCQCN's slow start, and the reports.
pub fn run_limit(v: &Variant, wall_mbps: u64) -> Duration {
    let bits = (v.size_bytes * u64::from(v.senders) * 8) as f64;
    let transfer_s = bits / (wall_mbps.max(1) as f64 * 1e6);
    Duration::from_secs(60 + (4.0 * transfer_s).ceil() as u64)
}

fn report_path(dir: &Path, v: &Variant) -> PathBuf {
    dir.join(format!("{}.run.json", v.stem()))
}
fn timeline_path(dir: &Path, v: &Variant) -> PathBuf {
    dir.join(format!("{}.timeline.json", v.stem()))
}
fn outcome_path(dir: &Path, v: &Variant) -> PathBuf {
    dir.join(format!("{}.not-run.txt", v.stem()))
}

fn read_json(p: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(p).ok()?;
    serde_json::from_str(&text).ok()
}

/// The documents of a variant from target/fidelity/ (a timeline keeps only its `timeline`).
fn load_docs(dir: &Path, v: &Variant) -> Docs {
    Docs { run: read_json(&report_path(dir, v)), timeline: read_json(&timeline_path(dir, v)) }
}

pub fn run(a: &FidelityArgs) -> anyhow::Result<()> {
    let root = root();
    let dir = root.join(&a.out_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let sim_path = if a.sim.is_absolute() { a.sim.clone() } else { root.join(&a.sim) };
    let sim: Vec<Value> = match std::fs::read_to_string(&sim_path) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("parsing {}", sim_path.display()))?,
        Err(e) => {
            eprintln!("no simulator results at {} ({e}): rocefab's side only", sim_path.display());
            Vec::new()
        }
    };
    let all = variants(a);
    if !a.table_only {
        if !is_root() {
            bail!("the fidelity runs create network namespaces and attach XDP programs: run as root");
        }
        let bin = match &a.bin_dir {
            Some(b) => b.clone(),
            None => {
                eprintln!("== building rocefab (release)");
                crate::util::build_fabric(true)?;
                root.join("target/release")
            }
        };
        let started = Instant::now();
        let deadline = started + Duration::from_secs(a.limit_min.saturating_mul(60));
        run_all(a, &root, &dir, &bin, &all, deadline)?;
        eprintln!("== all variants: {:.0} s of wall clock", started.elapsed().as_secs_f64());
    }
    println!("## rocefab against {} ({})\n", sim_name(sim.first()), sim_path.display());
    for v in &all {
        let outcome = std::fs::read_to_string(outcome_path(&dir, v)).ok();
        let docs = load_docs(&dir, v);
        println!("{}", table(v, &docs, sim_row(&sim, v), outcome.as_deref().map(str::trim)));
    }
    Ok(())
}

/// `limit`, cut to what is left before `deadline`; None when that is under [`MIN_STEP`].
pub fn step_limit(limit: Duration, deadline: Instant, now: Instant) -> Option<Duration> {
    let left = deadline.saturating_duration_since(now);
    (left >= MIN_STEP).then(|| limit.min(left))
}

fn run_all(
    a: &FidelityArgs,
    root: &Path,
    dir: &Path,
    bin: &Path,
    all: &[Variant],
    deadline: Instant,
) -> anyhow::Result<()> {
    let rocefab = bin.join("rocefab");
    if !rocefab.is_file() {
        bail!("{} not found (build it, or drop --bin-dir to build release binaries)", rocefab.display());
    }
    let base = std::fs::read_to_string(root.join(TOPOLOGY)).with_context(|| format!("reading {TOPOLOGY}"))?;
    let mut i = 0;
    while i < all.len() {
        // the variants sharing one fabric: same mode, rate and N
        let first = all[i];
        let group: Vec<Variant> = all[i..]
            .iter()
            .take_while(|v| v.mode == first.mode && v.rate_gbps == first.rate_gbps && v.senders == first.senders)
            .copied()
            .collect();
        i += group.len();
        for v in &group {
            for p in [report_path(dir, v), timeline_path(dir, v), outcome_path(dir, v)] {
                let _ = std::fs::remove_file(p);
            }
        }
        let d = dilation(first.rate_gbps, a.wall_mbps);
        let topo = dir.join(format!("{}-n{}-{}g.yaml", first.mode.sim_name(), first.senders, first.rate_gbps));
        std::fs::write(&topo, variant_topology(&base, &first, d, &dcqcn_line(a))?)
            .with_context(|| format!("writing {}", topo.display()))?;
        // every step ends UP_LIMIT before the deadline, leaving room for the `rocefab down`
        let now = Instant::now();
        let steps_by = deadline.checked_sub(UP_LIMIT).unwrap_or(now);
        let Some(up_limit) = step_limit(UP_LIMIT, steps_by, now) else {
            for v in &group {
                let o = format!("the --limit-min {} min of all runs was reached first", a.limit_min);
                std::fs::write(outcome_path(dir, v), o)?;
            }
            continue;
        };
        eprintln!("== rocefab up {} (time dilation {d})", topo.display());
        let up = run_bounded(
            Command::new(&rocefab).arg("up").arg(&topo).env("ROCEFAB_SWITCHD", bin.join("rocefab-switchd")),
            up_limit,
        );
        let guard = Down { rocefab: &rocefab };
        let up_error = match up {
            Ok((true, _, _)) => None,
            Ok((false, _, e)) => Some(format!("rocefab up failed: {}", tail(&e))),
            Err(e) => Some(format!("{e:#}")),
        };
        for v in &group {
            let outcome = match &up_error {
                Some(e) => Some(e.clone()),
                None => match step_limit(run_limit(v, a.wall_mbps), steps_by, Instant::now()) {
                    Some(limit) => run_variant(a, &rocefab, dir, v, limit)?,
                    None => Some(format!("the --limit-min {} min of all runs was reached first", a.limit_min)),
                },
            };
            if let Some(o) = outcome {
                eprintln!("{}: not run: {o}", v.title());
                std::fs::write(outcome_path(dir, v), o)?;
            }
        }
        drop(guard);
    }
    Ok(())
}

/// RoCE payload bytes per packet in the scenario (path MTU 4096).
const PATH_MTU: u64 = 4096;

/// The requester window of variant `v`: `--window-packets`, else the whole transfer.
pub fn window_packets(a: &FidelityArgs, v: &Variant) -> u32 {
    a.window_packets.unwrap_or_else(|| u32::try_from(v.size_bytes.div_ceil(PATH_MTU)).unwrap_or(u32::MAX).max(1))
}

/// One `rocefab run`; Some(why) when it gave no report.
fn run_variant(
    a: &FidelityArgs,
    rocefab: &Path,
    dir: &Path,
    v: &Variant,
    limit: Duration,
) -> anyhow::Result<Option<String>> {
    let timeline = timeline_path(dir, v);
    eprintln!(
        "== rocefab run {FABRIC} incast --size {}MiB ({}; at most {} s)",
        v.size_bytes >> 20,
        v.title(),
        limit.as_secs()
    );
    let res = run_bounded(
        Command::new(rocefab)
            .args(["run", FABRIC, "incast", "--json", "--size"])
            .arg(format!("{}MiB", v.size_bytes >> 20))
            .arg("--timeout")
            .arg((limit.as_secs().saturating_sub(10)).to_string())
            .arg("--retransmit-timeout-ms")
            .arg(a.retransmit_timeout_ms.to_string())
            .arg("--window-packets")
            .arg(window_packets(a, v).to_string())
            .arg("--timeline")
            .arg(&timeline),
        limit,
    );
    let (_ok, out, err) = match res {
        Ok(r) => r,
        Err(e) => return Ok(Some(format!("{e:#}"))),
    };
    // A failed job (ok: false) still prints its report: keep it, the table says NOT ok.
    let Ok(report) = serde_json::from_str::<Value>(out.trim()) else {
        return Ok(Some(format!("rocefab run printed no JSON report: {}", tail(&err))));
    };
    std::fs::write(report_path(dir, v), serde_json::to_vec_pretty(&report)?)?;
    // Keep only the derived timeline; its raw samples are large.
    if let Some(t) = read_json(&timeline) {
        let slim = serde_json::json!({ "timeline": t.get("timeline").cloned().unwrap_or(Value::Null) });
        std::fs::write(&timeline, serde_json::to_vec(&slim)?)?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(mode: Mode) -> Variant {
        Variant { mode, senders: 4, size_bytes: 2 << 20, rate_gbps: 400 }
    }

    #[test]
    fn jain_of_equal_and_skewed_goodputs() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        // one sender of four gets everything: 1/n
        assert_eq!(jain_index(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
        let j = jain_index(&[1.0, 2.0]).unwrap();
        assert!((j - 0.9).abs() < 1e-12, "{j}");
    }

    #[test]
    fn variants_group_by_fabric_and_dilation_keeps_the_wall_rate() {
        let a = FidelityArgs {
            modes: vec![Mode::Pfc, Mode::Dcqcn],
            senders: vec![4, 8],
            sizes_mib: vec![2, 16],
            rates_gbps: vec![100, 400],
            wall_mbps: 50,
            dcqcn_profile: "dcqcn-paper".into(),
            np_cnp: None,
            np_scope: None,
            retransmit_timeout_ms: 5,
            window_packets: None,
            out_dir: OUT_DIR.into(),
            bin_dir: None,
            sim: SIM_RESULTS.into(),
            table_only: true,
            limit_min: 25,
        };
        let all = variants(&a);
        assert_eq!(all.len(), 16);
        assert_eq!(all[0], Variant { mode: Mode::Pfc, senders: 4, size_bytes: 2 << 20, rate_gbps: 100 });
        assert_eq!(all[1].size_bytes, 16 << 20);
        assert_eq!(all[2].senders, 8);
        assert_eq!(all[15], Variant { mode: Mode::Dcqcn, senders: 8, size_bytes: 16 << 20, rate_gbps: 400 });
        assert_eq!(dilation(400, 50), 8000);
        assert_eq!(dilation(100, 50), 2000);
        // 8 x 16 MiB at 50 Mbit/s: 21.5 s of transfer, x4, + 60 s
        let big = Variant { mode: Mode::Pfc, senders: 8, size_bytes: 16 << 20, rate_gbps: 400 };
        assert_eq!(run_limit(&big, 50), Duration::from_secs(60 + 86));
        // No window by default, as in the simulators: the whole transfer at path MTU 4096.
        assert_eq!(window_packets(&a, &big), 4096);
        assert_eq!(window_packets(&a, &all[0]), 512);
        assert_eq!(window_packets(&FidelityArgs { window_packets: Some(32), ..a.clone() }, &big), 32);
        // The notification point's settings join the profile only when given.
        assert_eq!(dcqcn_line(&a), "{ profile: dcqcn-paper }");
        let np = FidelityArgs { np_cnp: Some("deferred".into()), np_scope: Some("port".into()), ..a.clone() };
        assert_eq!(dcqcn_line(&np), "{ profile: dcqcn-paper, np: { cnp: deferred, scope: port } }");
        let scope = FidelityArgs { np_scope: Some("ip_pair".into()), ..a.clone() };
        assert_eq!(dcqcn_line(&scope), "{ profile: dcqcn-paper, np: { scope: ip_pair } }");
    }

    #[test]
    fn the_variant_topology_changes_exactly_its_keys() {
        let base = std::fs::read_to_string(root().join(TOPOLOGY)).unwrap();
        let t = variant_topology(&base, &Variant { rate_gbps: 100, ..v(Mode::Pfc) }, 2000, "{ profile: ns3-hpcc }")
            .unwrap();
        assert!(t.contains("\n  count: 5\n"), "{t}");
        assert!(t.contains("\n    host_rail: 100Gbps\n"), "{t}");
        assert!(t.contains("\ntime_dilation: 2000\n"), "{t}");
        assert!(t.contains("\ndcqcn: { profile: ns3-hpcc }\n"), "{t}");
        assert!(t.contains("\n  wred: off\n"), "{t}");
        // count, host_rail, time_dilation, dcqcn (wred is off in the file already)
        let changed = base.lines().zip(t.lines()).filter(|(a, b)| a != b).count();
        assert_eq!(changed, 4);
        let d = variant_topology(&base, &v(Mode::Dcqcn), 8000, "{ profile: dcqcn-paper }").unwrap();
        assert!(
            d.contains("\n  wred: { queues: [3], min: 102400, max: 102401, probability: 100, at: dequeue }\n"),
            "{d}"
        );
        assert_eq!(d.lines().filter(|l| l.trim_start().starts_with("wred:")).count(), 1, "{d}");
        // a key the file lacks is an error naming it
        let e = variant_topology("fabric: x\n", &v(Mode::Pfc), 1, "p").unwrap_err().to_string();
        assert!(e.contains("`  count:`"), "{e}");
    }

    #[test]
    fn steps_are_cut_to_the_time_left_and_not_started_without_it() {
        let now = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(step_limit(s(60), now + s(600), now), Some(s(60)));
        assert_eq!(step_limit(s(60), now + s(30), now), Some(s(30)));
        assert_eq!(step_limit(s(60), now + s(9), now), None);
        assert_eq!(step_limit(s(60), now, now + s(5)), None);
    }

    #[test]
    fn sim_rows_match_on_every_coordinate() {
        let rows = vec![
            json!({"mode": "pfc", "senders": 4, "size_bytes": 2097152, "line_rate_gbps": 100.0, "jct_ns": 1}),
            json!({"mode": "pfc", "senders": 4, "size_bytes": 2097152, "line_rate_gbps": 400.0, "jct_ns": 2}),
            json!({"mode": "dcqcn", "senders": 4, "size_bytes": 2097152, "line_rate_gbps": 400.0, "jct_ns": 3}),
        ];
        assert_eq!(sim_row(&rows, &v(Mode::Pfc)).unwrap()["jct_ns"], 2);
        assert_eq!(sim_row(&rows, &v(Mode::Dcqcn)).unwrap()["jct_ns"], 3);
        assert!(sim_row(&rows, &Variant { senders: 8, ..v(Mode::Pfc) }).is_none());
    }

    /// Captured from `cargo xtask fidelity` (PFC-only, N = 4, 2 MiB, 400G): the run report and
    /// the timeline's derived part, trimmed of series the table does not read.
    fn captured() -> Docs {
        let dir = root().join("xtask/testdata/fidelity");
        Docs {
            run: read_json(&dir.join("pfc-n4-2mib-400g.run.json")),
            timeline: read_json(&dir.join("pfc-n4-2mib-400g.timeline.json")),
        }
    }

    #[test]
    fn metrics_from_captured_rocefab_json() {
        let d = captured();
        let run = d.run.as_ref().expect("captured run report");
        let by = |name: &str| METRICS.iter().find(|m| m.name == name).unwrap().rocefab.value(&d);
        let jct = run["completion_ns"].as_f64().unwrap();
        assert_eq!(by("JCT"), Some(jct));
        let agg = by("aggregate goodput").unwrap();
        assert!((agg - 4.0 * 2097152.0 * 8.0 / (jct / 1e9)).abs() < 1.0, "{agg}");
        let senders: Vec<f64> = run["qps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["bytes"].as_u64().unwrap() > 0)
            .filter_map(|q| q["goodput_bps"].as_f64())
            .collect();
        assert_eq!(senders.len(), 4, "four sending QPs in the capture");
        assert_eq!(by("Jain (per-sender goodput)"), jain_index(&senders));
        let peak = d.timeline.as_ref().unwrap()["timeline"]["bottleneck"]["peak_depth_bytes"].as_f64();
        assert!(peak.unwrap() > 0.0);
        assert_eq!(by("max bottleneck queue"), peak);
        let frames: f64 =
            run["nics"].as_array().unwrap().iter().map(|n| n["pfc_frames_received"].as_f64().unwrap()).sum();
        assert!(frames > 0.0, "a 4:1 incast pauses its senders");
        assert_eq!(by("PFC frames (to the senders)"), Some(frames));
        assert_eq!(by("CNPs"), run["cnps_received"].as_f64());
        // not in this capture (taken before rocefab reported them): no number at all
        assert_eq!(by("avg bottleneck queue (time-weighted)"), None);
        assert_eq!(by("pause onsets"), None);
    }

    #[test]
    fn table_prints_ratios_and_never_invents_a_number() {
        let d = captured();
        let jct = d.run.as_ref().unwrap()["completion_ns"].as_f64().unwrap();
        let sim = json!({"jct_ns": jct / 2.0, "avg_queue_bytes": 1000.0, "pause_onsets": 7, "ecn_marks": 0,
                         "cnps": 0, "jain": 1.0});
        let t = table(&v(Mode::Pfc), &d, Some(&sim), None);
        let row = |name: &str| t.lines().find(|l| l.starts_with(&format!("| {name} |"))).unwrap().to_string();
        assert!(row("JCT").ends_with("| 2.00 |"), "{t}");
        assert!(row("avg bottleneck queue (time-weighted)").contains("| not reported | 1 | - |"), "{t}");
        assert!(row("pause onsets").contains("| not reported | 7 | - |"), "{t}");
        // rocefab reports it but the simulator's row lacks it: no ratio, and no "not reported"
        // (that is for rocefab's side)
        let frames = row("PFC frames (to the senders)");
        assert!(frames.ends_with("| 464 | - | - |"), "{t}");
        assert!(row("CNPs").ends_with("| 0 | 0 | both 0 |"), "{t}");
        // a variant rocefab could not run shows why and no rocefab numbers
        let t = table(&v(Mode::Dcqcn), &Docs::default(), Some(&sim), Some("rocefab up failed: qos.wred.max"));
        assert!(t.contains("rocefab: not run: rocefab up failed: qos.wred.max"), "{t}");
        assert_eq!(t.lines().filter(|l| l.contains("| not run |")).count(), METRICS.len(), "{t}");
        // neither side has numbers: the reasons only, no table of dashes
        let unfinished = json!({"simulator": "htsim", "complete": false, "note": "not finished"});
        let t = table(&v(Mode::Dcqcn), &Docs::default(), Some(&unfinished), Some("rocefab up failed"));
        assert!(t.contains("htsim: did not finish (not finished)") && !t.contains("| metric |"), "{t}");
        // no simulator row, or one that did not finish
        let t = table(&v(Mode::Pfc), &d, None, None);
        assert!(t.contains("the simulator: no row for this variant"), "{t}");
        // the simulator's name comes from its row
        let ns3 = json!({"simulator": "ns3-hpcc", "jct_ns": jct, "cnps": 0});
        let t = table(&v(Mode::Pfc), &d, Some(&ns3), None);
        assert!(t.contains("| metric | unit | rocefab | ns3-hpcc | rocefab / ns3-hpcc |"), "{t}");
        assert!(t.lines().any(|l| l.starts_with("| JCT |") && l.ends_with("| 1.00 |")), "{t}");
        let unfinished =
            json!({"simulator": "htsim", "complete": false, "note": "not finished after 120 s of wall clock"});
        let t = table(&v(Mode::Pfc), &d, Some(&unfinished), None);
        assert!(t.contains("htsim: did not finish (not finished after 120 s of wall clock)"), "{t}");
        assert!(t.contains("| JCT | us | 200.5 | - | - |"), "{t}");
    }
}
