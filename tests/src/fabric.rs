//! Helpers for fabric tests: run the built `rocefab` binary, bring a uniquely named copy of a
//! shipped topology up under a guard whose `Drop` runs `rocefab down`, scrape switch metrics.
//!
//! Binaries come from `$ROCEFAB_BIN_DIR` (default `<workspace>/target/debug`): build them first
//! with `cargo build -p control -p dataplane-user`.
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use rocefab_contracts::config::SwitchConfig;
use serde_json::Value;

use crate::scratch::{temp_dir, TempDir};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// The directory of the fabric binaries, each checked once per test process to be newer than
/// every source it was built from (see [`stale_binaries`]): a test never drives a stale daemon.
pub fn bin_dir() -> PathBuf {
    static CHECKED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let dir = std::env::var_os("ROCEFAB_BIN_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| workspace().join("target/debug"));
            let binaries: Vec<&str> = rocefab_test_support::fabric_build::binaries().collect();
            let stale = stale_binaries(&dir, &binaries);
            assert!(
                stale.is_empty(),
                "stale binaries in {}: {}; rebuild them with `{}` (`cargo xtask test` does)",
                dir.display(),
                stale.join("; "),
                rocefab_test_support::fabric_build::build_command()
            );
            dir
        })
        .clone()
}

/// Which of `names` in `dir` are missing or older than a file they were built from: the sources
/// cargo's dep-info file beside each binary (`<name>.d`) lists and, for a binary that embeds the
/// XDP object, the eBPF crate's sources (its build script builds them). A binary without its
/// dep-info file cannot be checked and counts as stale.
pub fn stale_binaries(dir: &Path, names: &[&str]) -> Vec<String> {
    let mut stale = Vec::new();
    for name in names {
        let bin = dir.join(name);
        let Ok(built) = std::fs::metadata(&bin).and_then(|m| m.modified()) else {
            stale.push(format!("{} is missing", bin.display()));
            continue;
        };
        let dep = dir.join(format!("{name}.d"));
        let Ok(text) = std::fs::read_to_string(&dep) else {
            stale.push(format!("{} has no dep-info file {} to check it against", bin.display(), dep.display()));
            continue;
        };
        let mut sources = dep_info_sources(&text);
        if sources.iter().any(|s| s.ends_with("rocefab-xdp")) {
            sources.extend(rust_files(&workspace().join("dataplane-ebpf/src")));
        }
        let newer: Vec<String> = sources
            .iter()
            .filter(|s| std::fs::metadata(s).and_then(|m| m.modified()).is_ok_and(|t| t > built))
            .map(|s| s.display().to_string())
            .collect();
        if let Some(first) = newer.first() {
            stale.push(format!("{name} is older than {first} (and {} more sources)", newer.len() - 1));
        }
    }
    stale
}

/// The prerequisites of a make-style dep-info file (`target: a b\ c`), unescaping spaces.
fn dep_info_sources(text: &str) -> Vec<PathBuf> {
    let Some(line) = text.lines().next() else { return Vec::new() };
    let Some((_, deps)) = line.split_once(": ") else { return Vec::new() };
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => cur.push(chars.next().expect("peeked")),
            ' ' => {
                if !cur.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut cur)));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(PathBuf::from(cur));
    }
    out
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// Path of the `rocefab` binary; panics with a build hint if it is missing.
pub fn rocefab_bin() -> PathBuf {
    let p = bin_dir().join("rocefab");
    assert!(p.is_file(), "{} not found: run `cargo build -p control -p dataplane-user` first", p.display());
    p
}

/// Runs `rocefab args...`.
pub fn rocefab(args: &[&str]) -> Output {
    Command::new(rocefab_bin()).args(args).output().expect("run rocefab")
}

/// Runs `rocefab` with extra environment.
pub fn rocefab_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(rocefab_bin());
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run rocefab")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
/// stdout then stderr, for failure messages and for output that may go to either.
pub fn text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// A failed command for an assertion message: its exit status and the last line of its stderr
/// (where `rocefab` puts its error) first, so that the first line of a panic (all a test
/// summary shows) says why; then the whole stdout and stderr.
pub fn failure(o: &Output) -> String {
    let err = stderr(o);
    let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(no stderr)");
    format!("{}: {last}\n--- stdout ---\n{}--- stderr ---\n{err}", o.status, stdout(o))
}

/// Writes a copy of `topologies/<template>` with the fabric renamed to `name`, in a temp dir of
/// its own (removed when the returned guard drops).
fn topology_copy(template: &str, name: &str) -> (TempDir, PathBuf) {
    let src = std::fs::read_to_string(workspace().join("topologies").join(template)).expect("read topology");
    let renamed: Vec<String> =
        src.lines().map(|l| if l.starts_with("fabric:") { format!("fabric: {name}") } else { l.to_string() }).collect();
    let dir = temp_dir(&format!("rocefab-test-{name}-"));
    let p = dir.path().join(template);
    std::fs::write(&p, renamed.join("\n") + "\n").expect("write topology copy");
    (dir, p)
}

/// Run directory of a fabric (`/run/rocefab/<name>`).
pub fn run_dir(name: &str) -> PathBuf {
    PathBuf::from("/run/rocefab").join(name)
}

/// Namespaces named `rf-<fabric>-*`.
pub fn fabric_namespaces(name: &str) -> Vec<String> {
    let prefix = format!("rf-{name}-");
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Pids whose command line mentions the fabric's run directory (its switch daemons and the
/// hosts' NIC agents).
pub fn daemon_pids(name: &str) -> Vec<u32> {
    let needle = format!("{}/", run_dir(name).display());
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if String::from_utf8_lossy(&raw).contains(&needle) {
                v.push(pid);
            }
        }
    }
    v
}

/// FNV-1a, as `control::plan` uses for the fabric byte of every MAC (`02:<fnv(fabric)>:..`).
fn fnv1a(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// veth interfaces in the root namespace carrying this fabric's MACs.
pub fn root_veths_of(name: &str) -> Vec<String> {
    let out = Command::new("ip").args(["-o", "link", "show", "type", "veth"]).output().expect("ip link");
    let prefixes = [format!("02:{:02x}:01:", fnv1a(name) as u8), format!("02:{:02x}:02:", fnv1a(name) as u8)];
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| prefixes.iter().any(|p| l.contains(&format!("link/ether {p}"))))
        .map(|l| l.to_string())
        .collect()
}

/// `GET /metrics` on `addr`: the scrape; panics unless the answer is a 200.
pub fn scrape(addr: SocketAddr) -> String {
    crate::http::get(addr, "/metrics").unwrap_or_else(|e| panic!("{e:#}"))
}

/// Sum of the samples of `name` whose labels include all of `labels`.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    rocefab_contracts::promtext::sum(text, name, labels)
}

/// Like [`metric`], but panics when no sample matches: use it wherever the value asserted may be
/// 0 ("nothing dropped"), which a missing series would satisfy too.
pub fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    rocefab_contracts::promtext::sum_present(text, name, labels)
        .unwrap_or_else(|| panic!("no sample of {name} with labels {labels:?} in the scrape"))
}

/// A running fabric; `Drop` runs `rocefab down <name>`, then removes the directory of its
/// topology file.
pub struct Fabric {
    pub name: String,
    pub topology: PathBuf,
    _dir: TempDir,
}

impl Fabric {
    /// Brings up a renamed copy of `topologies/<template>`; panics with rocefab's error on failure
    /// (after `down`, through `Drop`).
    pub fn up(template: &str, name: &str) -> Fabric {
        Self::up_with(template, name, "")
    }

    /// `rocefab status --json`'s daemons, switches then NIC agents (whatever process runs each),
    /// as (node, alive).
    pub fn daemons(&self) -> Vec<(String, bool)> {
        let o = rocefab(&["status", &self.name, "--json"]);
        assert!(o.status.success(), "rocefab status {}: {}", self.name, failure(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("rocefab status --json");
        let of = |list: &str, node: &str| -> Vec<(String, bool)> {
            v[list]
                .as_array()
                .unwrap_or_else(|| panic!("no {list} in {v}"))
                .iter()
                .map(|d| (d[node].as_str().expect("node").to_string(), d["alive"].as_bool().expect("alive")))
                .collect()
        };
        let mut all = of("daemons", "switch");
        all.extend(of("nic_agents", "host"));
        all
    }

    /// A 64 MiB all-to-all whose traffic `pid` is SIGKILLed under, once `switch` has received
    /// 1000 frames of it: the failed job's JSON report and its stderr.
    pub fn alltoall_killing(&self, switch: &str, pid: u64) -> (Value, String) {
        let mut run = crate::proc::Proc::drained(
            "rocefab run alltoall",
            Command::new(rocefab_bin())
                .args(["run", &self.name, "alltoall", "--size", "64MiB", "--json", "--timeout", "60"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped()),
        );
        let rx = |t: &str| metric(t, "rocefab_port_rx_packets_total", &[]);
        let base = rx(&self.metrics(switch));
        self.wait_metrics(switch, |t| rx(t) - base >= 1000.0);
        // SAFETY: kill(2) on a daemon of this test's fabric; no memory involved.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0, "kill {pid}");
        let o = run.output();
        assert!(!o.status.success(), "the job survived the death of pid {pid}");
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        let r = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        (r, stderr)
    }

    /// Like [`Fabric::up`], with a `rocefab-switchd` process per switch (`up --switch-workers
    /// per-switch`) instead of the default shared workers: for the tests of what a switch's own
    /// process does (a crash of one switch, a process per switch counted).
    pub fn up_per_switch(template: &str, name: &str) -> Fabric {
        let f = Self::guard(template, name);
        let o = rocefab(&["up", f.topology.to_str().unwrap(), "--switch-workers", "per-switch"]);
        assert!(
            o.status.success(),
            "rocefab up {name} --switch-workers per-switch failed:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        f
    }

    /// Like [`Fabric::up`], with the topology line `from` replaced by `to` (it must be there).
    pub fn up_replacing(template: &str, name: &str, from: &str, to: &str) -> Fabric {
        Self::up_edited(template, name, |text| {
            assert!(text.lines().any(|l| l == from), "{template} has no line {from:?}");
            text.lines().map(|l| if l == from { to } else { l }).collect::<Vec<_>>().join("\n") + "\n"
        })
    }

    /// Like [`Fabric::up`], with `extra` YAML appended to the topology (e.g. a `qos:` section).
    pub fn up_with(template: &str, name: &str, extra: &str) -> Fabric {
        Self::up_edited(template, name, |text| text + extra)
    }

    /// Brings up the topology `yaml` (its `fabric:` must be `name`), written to a temp dir.
    pub fn up_yaml(name: &str, yaml: &str) -> Fabric {
        assert!(fabric_namespaces(name).is_empty(), "namespaces of {name} exist before the test");
        let dir = temp_dir(&format!("rocefab-test-{name}-"));
        let topology = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&topology, yaml).expect("write topology");
        let f = Fabric { name: name.to_string(), topology, _dir: dir };
        f.start();
        f
    }

    /// Brings up a renamed copy of `template` whose text `edit` changed (`edit` may assert
    /// that the template still has the shape it expects).
    pub fn up_edited(template: &str, name: &str, edit: impl FnOnce(String) -> String) -> Fabric {
        let f = Self::guard(template, name);
        let text = std::fs::read_to_string(&f.topology).expect("topology copy");
        std::fs::write(&f.topology, edit(text)).expect("write topology copy");
        f.start();
        f
    }

    /// `rocefab up` of the topology; panics with its output when it fails (after `down`,
    /// through `Drop`).
    fn start(&self) {
        let o = rocefab(&["up", self.topology.to_str().unwrap()]);
        assert!(o.status.success(), "rocefab up {} failed:\n{}{}", self.name, stdout(&o), stderr(&o));
    }

    /// The network namespace of a node.
    pub fn netns(&self, node: &str) -> String {
        format!("rf-{}-{node}", self.name)
    }

    /// The name of `switch`'s port whose peer is `peer` (`host2:gpu0`, `spine1:eth1`).
    pub fn port_to(&self, switch: &str, peer: &str) -> String {
        let c = self.config(switch);
        c.ports.iter().find(|p| p.peer == peer).unwrap_or_else(|| panic!("{switch} has no port to {peer}")).name.clone()
    }

    /// A guard for a fabric a test is about to bring up itself (e.g. expecting `up` to fail):
    /// `topology` is a renamed copy of `topologies/<template>` in a directory of its own, which
    /// the test may change; nothing is started here, but `Drop` runs `rocefab down <name>` and
    /// removes the directory, so whatever a wrong `up` created is removed even if the test panics.
    pub fn guard(template: &str, name: &str) -> Fabric {
        assert!(fabric_namespaces(name).is_empty(), "namespaces of {name} exist before the test");
        let (dir, topology) = topology_copy(template, name);
        Fabric { name: name.to_string(), topology, _dir: dir }
    }

    /// Runs a command inside a node: `rocefab exec <name> <node> -- args`.
    pub fn exec(&self, node: &str, args: &[&str]) -> Output {
        let mut a = vec!["exec", &self.name, node, "--"];
        a.extend_from_slice(args);
        rocefab(&a)
    }

    /// `rocefab send <name> args...`; panics on failure.
    pub fn send(&self, args: &[&str]) -> String {
        let mut a = vec!["send", &self.name];
        a.extend_from_slice(args);
        let o = rocefab(&a);
        assert!(o.status.success(), "rocefab send failed: {}", stderr(&o));
        stdout(&o)
    }

    /// The switch config `rocefab up` wrote.
    pub fn config(&self, switch: &str) -> SwitchConfig {
        SwitchConfig::load(&run_dir(&self.name).join(format!("{switch}.json"))).expect("switch config")
    }

    pub fn metrics(&self, switch: &str) -> String {
        scrape(self.config(switch).metrics_listen)
    }

    /// The NIC agent configuration `rocefab up` wrote for `host` (`<host>.nicd.json`).
    pub fn nicd_config(&self, host: &str) -> Value {
        let p = run_dir(&self.name).join(format!("{host}.nicd.json"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Where `host`'s NIC agent serves `/metrics`, `/lldp` and `/capture`.
    pub fn nicd_addr(&self, host: &str) -> SocketAddr {
        self.nicd_config(host)["listen"].as_str().expect("listen").parse().expect("listen address")
    }

    /// The sum of [`metric`] over the scrapes of `switches`.
    pub fn metric_sum(&self, switches: &[&str], name: &str, labels: &[(&str, &str)]) -> f64 {
        switches.iter().map(|s| metric(&self.metrics(s), name, labels)).sum()
    }

    /// Like [`Fabric::metric_sum`], but panics when a switch exports no matching sample (see
    /// [`series`]): for sums asserted to be 0.
    pub fn series_sum(&self, switches: &[&str], name: &str, labels: &[(&str, &str)]) -> f64 {
        switches
            .iter()
            .map(|s| {
                rocefab_contracts::promtext::sum_present(&self.metrics(s), name, labels)
                    .unwrap_or_else(|| panic!("{s}: no sample of {name} with labels {labels:?}"))
            })
            .sum()
    }

    /// The switch's metrics once two scrapes in a row, 20 ms apart, agree on every sample of
    /// `names` (what was in flight has been counted): panics after 10 s. For "counters settle"
    /// without a fixed sleep.
    pub fn settled(&self, switch: &str, names: &[&str]) -> String {
        let pick = |t: &str| -> Vec<String> {
            rocefab_contracts::promtext::samples(t)
                .filter(|x| names.contains(&x.name))
                .map(|x| format!("{}{{{}}} {}", x.name, x.raw_labels(), x.value))
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = self.metrics(switch);
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let t = self.metrics(switch);
            if pick(&t) == pick(&last) {
                return t;
            }
            assert!(Instant::now() < deadline, "{switch}: {names:?} still changing after 10 s");
            last = t;
        }
    }

    /// Polls `f` over the switch's metrics until it returns true or 10 s pass; returns the
    /// last scrape (the traffic crosses asynchronous daemons, so counters settle shortly after).
    pub fn wait_metrics(&self, switch: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let t = self.metrics(switch);
            if f(&t) || Instant::now() >= deadline {
                return t;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let o = rocefab(&["down", &self.name]);
        if !o.status.success() && !stderr(&o).contains("is not running") {
            eprintln!("rocefab down {}: {}", self.name, stderr(&o));
        }
        // `_dir` (the topology's directory) is removed after this.
    }
}

pub use rocefab_test_support::promtool::promtool_check;

/// Pids of the processes whose command line (arguments joined with spaces) contains `needle`
/// (e.g. a daemon's config path).
pub fn pids_with_cmdline(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        if let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            // Arguments are NUL-separated: joined with spaces, a needle may span several.
            let line: Vec<u8> = raw.iter().map(|&b| if b == 0 { b' ' } else { b }).collect();
            if String::from_utf8_lossy(&line).contains(needle) {
                v.push(pid);
            }
        }
    }
    v
}

/// The sum of the integer `field` (0 where absent) over the NICs named `nic` (`gpu1`) of a
/// `rocefab run --json` report.
pub fn nic_sum(report: &Value, nic: &str, field: &str) -> u64 {
    report["nics"]
        .as_array()
        .expect("nics")
        .iter()
        .filter(|n| n["nic"] == nic)
        .map(|n| n[field].as_u64().unwrap_or(0))
        .sum()
}

/// `rocefab run <fabric> incast --size 4MiB --json` (every rank writes to rank 0 = host1:gpu0)
/// with a 2 s ACK timeout (longer than the pauses a 7:1 incast into a slow link builds); while it
/// runs, the largest ingress-group occupancy rail1 reports for `priority`. Returns the report
/// (JSON text) and that largest occupancy in bytes. The run is killed if the caller panics.
pub fn run_incast(f: &Fabric, priority: u8) -> (String, f64) {
    let mut run = crate::proc::Proc::drained(
        "rocefab run incast",
        Command::new(rocefab_bin())
            .args(["run", &f.name, "incast", "--size", "4MiB", "--json"])
            .args(["--retransmit-timeout-ms", "2000", "--timeout", "60"])
            .stdout(std::process::Stdio::piped()),
    );
    let end = Instant::now() + Duration::from_secs(70);
    let series = format!("priority=\"{priority}\"");
    let mut max_pg: f64 = 0.0;
    while run.child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < end, "rocefab run did not finish");
        let t = f.metrics("rail1");
        for l in t.lines().filter(|l| l.starts_with("rocefab_ingress_pg_bytes{") && l.contains(&series)) {
            max_pg = max_pg.max(l.rsplit_once(' ').and_then(|(_, v)| v.parse().ok()).unwrap_or(0.0));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = String::from_utf8_lossy(&run.output().stdout).into_owned();
    (out, max_pg)
}

/// `rail-spine.yaml`'s text as the delay tests run it: 100G links, 2 µs host cables, 5 µs
/// rail-spine cables, 1 µs switch forwarding latency, 500 ns NIC pipelines, time dilation 1000.
pub fn delayed_rail_spine(text: String) -> String {
    let from = "  rail_spine: full-mesh";
    assert!(text.lines().any(|l| l == from), "rail-spine.yaml has no line {from:?}");
    let text =
        text.replace("host_rail: 1Gbps", "host_rail: 100Gbps").replace("rail_spine: 1Gbps", "rail_spine: 100Gbps");
    text.replace(from, &format!("{from}\n  delay: {{ host_rail: 2us, rail_spine: 5us }}"))
        + "time_dilation: 1000\nlatency: { switch: 1us, nic: 500ns }\n"
}

/// `rocefab run <args> --json`: the report of a run that succeeded with every one of `ranks`
/// ranks verified (panics with the command's output or the report otherwise).
pub fn run_json(args: &[&str], ranks: u64) -> Value {
    let mut a = vec!["run"];
    a.extend_from_slice(args);
    a.push("--json");
    let o = rocefab(&a);
    assert!(o.status.success(), "rocefab {}: {}", a.join(" "), failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("JSON report: {e}\n{}", stdout(&o)));
    assert_eq!(
        (r["ok"].as_bool(), r["verified_ranks"].as_u64()),
        (Some(true), Some(ranks)),
        "rocefab {}: {r:#}",
        a.join(" ")
    );
    r
}

/// A 1 MiB Write-Only ring AllReduce on the 8 ranks of `f` (`extra` appended to `rocefab run`):
/// asserts every rank verified and no packet out of order, NAKed or retransmitted; the report.
pub fn allreduce_in_order(f: &Fabric, extra: &[&str]) -> Value {
    let mut args = vec![f.name.as_str(), "allreduce", "--size", "1MiB", "--segment", "write-only"];
    args.extend_from_slice(&["--timeout", "120"]);
    args.extend_from_slice(extra);
    let r = run_json(&args, 8);
    assert_eq!(
        (r["out_of_order_packets"].as_u64(), r["naks_sent"].as_u64(), r["retransmitted_packets"].as_u64()),
        (Some(0), Some(0), Some(0)),
        "each flow's order kept: {r:#}"
    );
    r
}

/// Starts a 16 MiB AllReduce on `f` in the background (`--json`, a 2 s retransmit timeout: the
/// frames lost with a failure are resent after it) and returns once rail1's port `port` has sent
/// 2,000 frames of it (the job's traffic crosses that port then); panics after 120 s. The job
/// is stopped if the test panics before it ends (`Proc::output` waits for it).
pub fn allreduce_crossing(f: &Fabric, port: &str) -> crate::proc::Proc {
    let job = crate::proc::Proc::spawn(
        "rocefab run allreduce",
        std::process::Command::new(rocefab_bin())
            .args(["run", &f.name, "allreduce", "--size", "16MiB", "--json", "--timeout", "240"])
            .args(["--retransmit-timeout-ms", "2000"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    let tx = || metric(&f.metrics("rail1"), "rocefab_port_tx_packets_total", &[("port", port)]);
    let t0 = std::time::Instant::now();
    while tx() < 2_000.0 {
        assert!(t0.elapsed() < std::time::Duration::from_secs(120), "the AllReduce never crossed rail1:{port}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    job
}

/// Seconds since the epoch of `ip -ts`'s `[2026-11-28T23:22:46.011026]` (run under TZ=UTC).
pub fn ip_ts_epoch(stamp: &str) -> f64 {
    let s = stamp.trim_start_matches('[').trim_end_matches(']');
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond]");
    let t = time::PrimitiveDateTime::parse(s, format).unwrap_or_else(|e| panic!("ip -ts stamp {stamp:?}: {e}"));
    t.assume_utc().unix_timestamp_nanos() as f64 / 1e9
}

/// The kernel's link events in a switch's namespace (`ip -ts monitor link`), seen before
/// anything is cut: an observer of the cut that is not rocefab (line-buffered: `ip` does not
/// flush a pipe per event). `ip` stamps an event when it reads it; it runs at real-time priority
/// (SCHED_FIFO 50) so that a machine busy with the fabric's daemons does not delay its reading.
pub struct LinkMonitor {
    p: crate::proc::Proc,
}

impl LinkMonitor {
    pub fn start(f: &Fabric, node: &str) -> LinkMonitor {
        let ns = f.netns(node);
        let mut p = crate::proc::Proc::spawn(
            "ip monitor link",
            std::process::Command::new("timeout")
                .args(["60", "chrt", "-f", "50", "stdbuf", "-oL", "ip", "-ts", "-n", &ns, "monitor", "link"])
                .env("TZ", "UTC")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null()),
        );
        // Subscribed once it reports a change made after it started (lo's alias: harmless);
        // one made before it subscribed is not reported, so change it until one is.
        for i in 0.. {
            assert!(i < 100, "ip monitor link in {ns} reported none of 100 changes of lo's alias");
            let o = std::process::Command::new("ip")
                .args(["-n", &ns, "link", "set", "lo", "alias", &format!("rocefab-test-monitor-{i}")])
                .output()
                .unwrap();
            assert!(o.status.success(), "ip link set lo alias: {}", String::from_utf8_lossy(&o.stderr));
            if p.try_line(std::time::Duration::from_millis(100)).is_some_and(|l| l.contains(": lo: ")) {
                break;
            }
        }
        LinkMonitor { p }
    }

    /// When the kernel first reported `dev` without carrier (its own end set down, or its
    /// peer's), seconds since the epoch.
    pub fn first_down(&mut self, dev: &str) -> f64 {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            assert!(std::time::Instant::now() < end, "the kernel reported no carrier loss on {dev} within 10 s");
            let l = self.p.line(std::time::Duration::from_secs(10));
            let Some((stamp, rest)) = l.split_once("] ") else { continue };
            let named = rest.split(": ").nth(1).is_some_and(|n| n.split('@').next() == Some(dev));
            if named && (rest.contains("state DOWN") || rest.contains("NO-CARRIER")) {
                return ip_ts_epoch(stamp);
            }
        }
    }
}

#[cfg(test)]
mod stale_tests {
    use std::time::{Duration, SystemTime};

    use super::{dep_info_sources, stale_binaries};

    fn touch(p: &std::path::Path, age_s: u64) {
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(p).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(age_s)).unwrap();
    }

    #[test]
    fn a_binary_older_than_a_source_in_its_dep_info_is_stale() {
        let dir = crate::scratch::temp_dir("rocefab-stale-");
        let (bin, src) = (dir.path().join("d"), dir.path().join("a b.rs"));
        touch(&bin, 100);
        touch(&src, 200);
        std::fs::write(
            dir.path().join("d.d"),
            format!("{}: {}\n", bin.display(), src.display().to_string().replace(' ', "\\ ")),
        )
        .unwrap();
        assert_eq!(stale_binaries(dir.path(), &["d"]), Vec::<String>::new());
        touch(&src, 10);
        let s = stale_binaries(dir.path(), &["d"]);
        assert_eq!(s.len(), 1);
        assert!(s[0].contains("a b.rs"), "{s:?}");
        // no dep-info, or no binary: cannot be trusted
        std::fs::remove_file(dir.path().join("d.d")).unwrap();
        assert!(stale_binaries(dir.path(), &["d"])[0].contains("no dep-info"));
        assert!(stale_binaries(dir.path(), &["e"])[0].contains("missing"));
    }

    #[test]
    fn dep_info_paths_keep_escaped_spaces() {
        assert_eq!(
            dep_info_sources("/t/x: /a/b.rs /c\\ d/e.rs  /f.rs\n\n/a/b.rs:\n"),
            vec!["/a/b.rs", "/c d/e.rs", "/f.rs"].into_iter().map(std::path::PathBuf::from).collect::<Vec<_>>()
        );
    }
}

#[cfg(test)]
mod ip_ts_tests {
    /// Against `date -u -d` (GNU coreutils) on the same stamp: an independent reading.
    #[test]
    fn ip_ts_stamps_read_as_date_reads_them() {
        for stamp in ["2026-11-28T23:22:46.011026", "2024-02-29T00:00:00.000001", "1999-12-31T23:59:59.999999"] {
            let o = std::process::Command::new("date").args(["-u", "-d", stamp, "+%s.%N"]).output().unwrap();
            assert!(o.status.success());
            let want: f64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
            let got = super::ip_ts_epoch(&format!("[{stamp}]"));
            assert!((got - want).abs() < 1e-6, "{stamp}: {got} vs date's {want}");
        }
    }
}
