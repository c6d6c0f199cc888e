//! `cargo xtask test`: every test the project has, in one command.
//!
//! 0. the toolchain check (`cargo xtask setup --check`): the pinned eBPF nightly and bpf-linker
//!    agree on their LLVM major, every Debian package is there,
//! 1. formatting and lints: `cargo fmt --check` (the workspace and the fuzz crate) and
//!    `cargo clippy --workspace --all-targets -- -D warnings`, plus clippy on the eBPF crate with
//!    its own pinned nightly for `bpfel-unknown-none`,
//!    then the docs (`cargo xtask docs`): the book in docs/ builds without warnings, every
//!    relative link of it and the README resolves, every quoted command and option exists,
//! 2. unprivileged workspace tests (`cargo test` over the default members, criterion benches in
//!    test mode so they run once),
//! 3. privileged tests (the `rocefab-tests` crate: BPF_PROG_TEST_RUN, namespace fabrics, external
//!    oracles) — run serially, as root; not being root is an error, never a skip,
//! 4. every fuzz target for a bounded time,
//! 5. a leak check: no `rf*` network namespace, rocefab/FRR/capture process, root-namespace veth,
//!    `/dev/shm/rocefab-*` or `/run/rocefab/*` entry may survive the suite that was not there
//!    before it.
//!
//! Every phase runs even if an earlier one failed; the summary lists each phase's outcome.
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use crate::util::{is_root, root, run};

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Seconds per fuzz target.
    #[arg(long, default_value_t = 10)]
    pub fuzz_seconds: u64,
    /// Skip nothing by default; `--only <phase>` runs a single phase (for development).
    #[arg(long, value_enum)]
    pub only: Option<Phase>,
}

/// The phases `--only` can pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Formatting and clippy.
    Lint,
    /// The book and the README: build, links, quoted commands.
    Docs,
    /// The unprivileged workspace tests and the criterion benches once.
    Unit,
    /// The privileged tests (root): XDP test runs, namespace fabrics, oracles.
    Privileged,
    /// Every fuzz target for a bounded time.
    Fuzz,
}

/// Environment a privileged test run must not inherit: each overrides which daemon, FRR or XDP
/// object the fabric runs, so a stale or foreign one would be tested instead of this build's;
/// `ROCEFAB_SWITCH_WORKERS` and `ROCEFAB_HOST_WORKERS` would change how every fabric's switches
/// and every job's hosts are laid out over processes (the tests run the default, and those that
/// need another layout say so on their command line).
pub const CLEARED_ENV: [&str; 7] = [
    "ROCEFAB_SWITCHD",
    "ROCEFAB_NICD",
    "ROCEFAB_HOSTD",
    "ROCEFAB_FRR_DIR",
    "ROCEFAB_XDP_OBJECT",
    "ROCEFAB_SWITCH_WORKERS",
    "ROCEFAB_HOST_WORKERS",
];

pub fn run_all(args: &TestArgs) -> anyhow::Result<()> {
    let root = root();
    let bin_dir = root.join("target/debug");
    let want = |p: Phase| args.only.is_none_or(|o| o == p);
    let mut results: Vec<(&str, anyhow::Result<String>)> = Vec::new();
    let before = Leftovers::now()?;

    results.push((
        "toolchain (cargo xtask setup --check)",
        crate::setup::check(&root.join("dataplane-ebpf/rust-toolchain.toml"))
            .map(|_| "pinned eBPF nightly and bpf-linker on the same LLVM, packages present".to_string()),
    ));

    if want(Phase::Lint) {
        results.push(("formatting (cargo fmt --check)", fmt_check(&root)));
        results.push(("lints (cargo clippy -D warnings, workspace and eBPF crate)", clippy(&root)));
    }
    if want(Phase::Docs) {
        results.push(("docs (cargo xtask docs: the book builds, links resolve, commands exist)", crate::docs::run()));
    }
    if want(Phase::Unit) {
        results.push((
            "unprivileged tests (cargo test)",
            run_tests(
                "unit",
                Command::new("cargo").current_dir(&root).args(["test", "--all-targets", "--no-fail-fast"]),
            ),
        ));
        results.push((
            "criterion benches, once in test mode",
            run(Command::new("cargo").current_dir(&root).args(["test", "-p", "rocefab-wire", "--benches"]))
                .map(|_| "each benchmark ran once".to_string()),
        ));
    }
    if want(Phase::Privileged) {
        let r = if !is_root() {
            Err(anyhow::anyhow!("privileged tests need root (namespaces, XDP, BPF_PROG_TEST_RUN): run as root"))
        } else {
            // Build the binaries the tests drive, then the tests themselves; run them one at a time.
            crate::util::build_fabric(false).and_then(|_| {
                let mut c = Command::new("cargo");
                c.current_dir(&root)
                    .args(["test", "-p", "rocefab-tests", "--no-fail-fast", "--", "--test-threads=1"])
                    .env("ROCEFAB_BIN_DIR", &bin_dir);
                for v in CLEARED_ENV {
                    c.env_remove(v);
                }
                run_tests("privileged", &mut c)
            })
        };
        results.push(("privileged tests (rocefab-tests, serial, root)", r));
    }
    if want(Phase::Fuzz) {
        let a = crate::fuzz::FuzzArgs::with_seconds(args.fuzz_seconds);
        results.push((
            "fuzz targets",
            crate::fuzz::run(&a).map(|_| format!("every target, {} s each, no crash", a.seconds)),
        ));
    }
    results.push((
        "nothing left behind (namespaces, processes, root veths, /dev/shm, /run/rocefab)",
        Leftovers::now().and_then(|after| after.new_since(&before)),
    ));

    eprintln!("\n==== cargo xtask test summary ====");
    let mut failed = 0;
    for (name, r) in &results {
        match r {
            Ok(what) => eprintln!("  ok      {name}: {what}"),
            Err(e) => {
                failed += 1;
                eprintln!("  FAILED  {name}: {e:#}");
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} test phases failed", results.len());
    }
    eprintln!("all {} test phases passed", results.len());
    Ok(())
}

/// `cargo fmt --check` over the workspace and the fuzz crate (its own workspace): the tree is
/// formatted with the root `rustfmt.toml`.
fn fmt_check(root: &std::path::Path) -> anyhow::Result<String> {
    let lint = crate::setup::LINT_TOOLCHAIN;
    run(pinned(lint).current_dir(root).args(["fmt", "--all", "--check"]))?;
    run(pinned(lint).current_dir(root.join("fuzz")).args(["fmt", "--check"]))?;
    Ok(format!("workspace and fuzz crate formatted (rustfmt of {lint})"))
}

/// `cargo +toolchain`, whatever toolchain the xtask itself runs under.
fn pinned(toolchain: &str) -> Command {
    let mut c = Command::new("cargo");
    c.env_remove("RUSTUP_TOOLCHAIN").arg(format!("+{toolchain}"));
    c
}

/// Clippy with warnings as errors: the workspace on the pinned lint toolchain (every target, the
/// privileged tests' crate included), then the eBPF crate with its pinned nightly for
/// `bpfel-unknown-none` (its own target dir, as plumbing's build script uses for the object).
fn clippy(root: &std::path::Path) -> anyhow::Result<String> {
    let lint = crate::setup::LINT_TOOLCHAIN;
    run(pinned(lint).current_dir(root).args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    let toolchain = crate::setup::pinned_toolchain(&root.join("dataplane-ebpf/rust-toolchain.toml"))?;
    run(pinned(&toolchain)
        .current_dir(root)
        .args(["clippy", "-p", "dataplane-ebpf", "--release", "--target", "bpfel-unknown-none", "-Z", "build-std=core"])
        .args(["--target-dir", "target/bpf-clippy", "--", "-D", "warnings"]))?;
    Ok(format!("no warning in the workspace (clippy of {lint}) nor in dataplane-ebpf ({toolchain})"))
}

/// The checked-in floors: per phase, the tests that must pass and the test binaries that must
/// report. A phase that loses a test binary or some of its tests fails here even when everything
/// that did run passed; one with more fails too until the file is raised, so the figures the book
/// quotes from it are always the suite's.
pub const FLOORS: &str = "xtask/test-floors.json";

#[derive(Debug, serde::Deserialize)]
struct Floor {
    tests: u64,
    binaries: u64,
}

fn floor(phase: &str) -> anyhow::Result<Floor> {
    let path = root().join(FLOORS);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut all: std::collections::BTreeMap<String, Floor> =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    all.remove(phase).with_context(|| format!("{} has no floor for the {phase} phase", path.display()))
}

/// The test executables `cmd` (a `cargo test ...` command) builds: the same command with
/// `--no-run --message-format=json`, read for artifacts built in test mode.
fn test_executables(cmd: &Command) -> anyhow::Result<Vec<String>> {
    let mut list = Command::new(cmd.get_program());
    if let Some(d) = cmd.get_current_dir() {
        list.current_dir(d);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => list.env(k, v),
            None => list.env_remove(k),
        };
    }
    let args: Vec<_> = cmd.get_args().collect();
    let cargo_args = args.split(|a| *a == "--").next().unwrap_or(&[]);
    list.args(cargo_args).args(["--no-run", "--message-format=json"]).stderr(Stdio::inherit());
    let out = list.output().with_context(|| format!("starting {list:?}"))?;
    if !out.status.success() {
        bail!("{list:?} failed: {}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter_map(|m| m["executable"].as_str().map(str::to_string))
        .collect())
}

/// Runs a `cargo test` command, streaming its output, and sums the `test result:` lines.
/// A run that executed no test at all is an error, as is any failed test; the error names each
/// failed test with the first line of its panic, so the summary alone says what broke. Every
/// test executable cargo builds for the command must have run (its `Running` line), and the
/// passed tests and reporting binaries must reach the phase's floor in [`FLOORS`].
fn run_tests(phase: &str, cmd: &mut Command) -> anyhow::Result<String> {
    let floor = floor(phase)?;
    let executables = test_executables(cmd)?;
    let shown = format!("{cmd:?}");
    let mut child =
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().with_context(|| format!("starting {shown}"))?;
    let stdout = child.stdout.take().context("test stdout")?;
    let stderr = child.stderr.take().context("test stderr")?;
    // cargo names each binary it runs on stderr: `Running tests/x.rs (target/debug/deps/x-…)`.
    let ran = std::thread::spawn(move || {
        let mut ran = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if let Some(path) = line.trim().strip_prefix("Running ").and_then(|l| l.rsplit_once(" (")) {
                ran.push(path.1.trim_end_matches(')').to_string());
            }
        }
        ran
    });
    let (mut passed, mut failed, mut ignored, mut binaries) = (0u64, 0u64, 0u64, 0u64);
    let mut failures = Failures::default();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        println!("{line}");
        failures.see(&line);
        if let Some(rest) = line.strip_prefix("test result: ") {
            binaries += 1;
            passed += count_before(rest, " passed");
            failed += count_before(rest, " failed");
            ignored += count_before(rest, " ignored");
        }
    }
    let st = child.wait()?;
    let ran = ran.join().map_err(|_| anyhow::anyhow!("reading {shown}'s stderr"))?;
    let summary = format!("{passed} passed, {failed} failed, {ignored} ignored in {binaries} test binaries");
    if !st.success() || failed > 0 {
        bail!("{shown}: {summary} ({st}){}", failures.listing());
    }
    if passed == 0 {
        bail!("{shown} executed no test");
    }
    if ignored > 0 {
        bail!("{shown}: {summary}: nothing may be skipped, remove the #[ignore]");
    }
    let root = root();
    let never_ran: Vec<&String> = executables
        .iter()
        .filter(|e| !ran.iter().any(|r| Path::new(e) == root.join(r) || e.ends_with(r.as_str())))
        .collect();
    if !never_ran.is_empty() {
        bail!("{shown}: {summary}, but cargo built test binaries that never ran: {never_ran:?}");
    }
    if passed < floor.tests || binaries < floor.binaries {
        bail!(
            "{shown}: {summary}, under the {phase} floor of {} tests in {} binaries ({FLOORS}): \
             tests or test binaries went missing",
            floor.tests,
            floor.binaries
        );
    }
    if passed > floor.tests || binaries > floor.binaries {
        // The floors are the figures the book shows (docs/src/setup.md includes the file).
        bail!(
            "{shown}: {summary}, more than the {phase} floor of {} tests in {} binaries: raise it in \
             {FLOORS} (the book quotes it)",
            floor.tests,
            floor.binaries
        );
    }
    Ok(summary)
}

/// The failed tests of a `cargo test` run, read from its output: each `test NAME ... FAILED` line,
/// and the first line of the panic message in NAME's `---- NAME stdout ----` section.
#[derive(Debug, Default)]
struct Failures {
    failed: Vec<(String, Option<String>)>,
    /// The test whose captured output is being read, and whether its panic line came.
    section: Option<(usize, bool)>,
}

impl Failures {
    fn see(&mut self, line: &str) {
        if let Some(name) = line.strip_prefix("test ").and_then(|l| l.strip_suffix(" ... FAILED")) {
            self.failed.push((name.to_string(), None));
        } else if let Some(name) = line.strip_prefix("---- ").and_then(|l| l.strip_suffix(" stdout ----")) {
            self.section = self.failed.iter().position(|(n, _)| n == name).map(|i| (i, false));
        } else if let Some((i, seen)) = &mut self.section {
            if line.starts_with("thread '") && line.contains("panicked at") {
                *seen = true;
            } else if *seen && !line.trim().is_empty() {
                self.failed[*i].1.get_or_insert_with(|| line.trim().to_string());
                self.section = None;
            }
        }
    }

    /// `"; failed: a (why), b (why)"`, or nothing when no test line said FAILED.
    fn listing(&self) -> String {
        if self.failed.is_empty() {
            return String::new();
        }
        let names: Vec<String> = self
            .failed
            .iter()
            .map(|(name, why)| match why {
                Some(w) => format!("{name} ({})", w.chars().take(200).collect::<String>()),
                None => name.clone(),
            })
            .collect();
        format!("; failed: {}", names.join(", "))
    }
}

/// `"ok. 7 passed; 0 failed"` → 7 for `" passed"`.
fn count_before(s: &str, what: &str) -> u64 {
    s.find(what)
        .and_then(|i| s[..i].rsplit(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// What a test run can leave behind, by kind: `rf…` network namespaces, rocefab, FRR and capture
/// processes (`pid comm`), veths in the root namespace, `/dev/shm/rocefab-*` and `/run/rocefab/*`.
#[derive(Debug, Default, PartialEq)]
struct Leftovers {
    kinds: Vec<(&'static str, Vec<String>)>,
}

/// Process names (`/proc/<pid>/comm`, at most 15 bytes) a fabric or a test starts.
const PROCESSES: [&str; 10] = [
    "rocefab",
    "rocefab-switchd",
    "rocefab-nicd",
    "rocefab-hostd",
    "rocefab-web",
    "zebra",
    "bgpd",
    "staticd",
    "watchfrr",
    "tcpdump",
];

impl Leftovers {
    fn now() -> anyhow::Result<Leftovers> {
        let out = Command::new("ip").args(["netns", "list"]).output().context("ip netns list")?;
        let namespaces = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with("rf"))
            .map(str::to_string)
            .collect();
        let out = Command::new("ip").args(["-o", "link", "show", "type", "veth"]).output().context("ip link show")?;
        let veths = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .collect();
        let mut processes = Vec::new();
        for e in std::fs::read_dir("/proc").context("reading /proc")?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|b| b.is_ascii_digit()) || name == std::process::id().to_string() {
                continue;
            }
            if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
                if PROCESSES.contains(&comm.trim()) {
                    processes.push(format!("{name} {}", comm.trim()));
                }
            }
        }
        let entries = |dir: &str, prefix: &str| -> Vec<String> {
            std::fs::read_dir(dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.starts_with(prefix))
                        .map(|n| format!("{dir}/{n}"))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(Leftovers {
            kinds: vec![
                ("network namespaces", namespaces),
                ("processes", processes),
                ("root-namespace veths", veths),
                ("shared memory", entries("/dev/shm", "rocefab-")),
                ("run directories", entries("/run/rocefab", "")),
            ],
        })
    }

    /// Fails naming everything here that `before` did not have.
    fn new_since(&self, before: &Leftovers) -> anyhow::Result<String> {
        let mut left = Vec::new();
        let mut already = Vec::new();
        for (kind, now) in &self.kinds {
            let was = before.kinds.iter().find(|(k, _)| k == kind).map(|(_, v)| v.as_slice()).unwrap_or(&[]);
            let new: Vec<&str> = now.iter().filter(|n| !was.contains(n)).map(String::as_str).collect();
            if !new.is_empty() {
                left.push(format!("{kind}: {}", new.join(", ")));
            }
            if !was.is_empty() {
                already.push(format!("{kind}: {}", was.join(", ")));
            }
        }
        if !left.is_empty() {
            bail!("left behind by the tests: {}", left.join("; "));
        }
        Ok(if already.is_empty() {
            "none".to_string()
        } else {
            format!("none new (already there before the run: {})", already.join("; "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{count_before, Failures, Leftovers};

    #[test]
    fn leftovers_name_only_what_is_new() {
        let before = Leftovers { kinds: vec![("processes", vec!["7 zebra".into()]), ("veths", vec![])] };
        let same = Leftovers { kinds: vec![("processes", vec!["7 zebra".into()]), ("veths", vec![])] };
        assert_eq!(same.new_since(&before).unwrap(), "none new (already there before the run: processes: 7 zebra)");
        let more = Leftovers {
            kinds: vec![("processes", vec!["7 zebra".into(), "9 bgpd".into()]), ("veths", vec!["rf1".into()])],
        };
        let e = more.new_since(&before).unwrap_err().to_string();
        assert_eq!(e, "left behind by the tests: processes: 9 bgpd; veths: rf1");
    }

    #[test]
    fn names_each_failed_test_with_its_panic_line() {
        let out = "\
test a::passes ... ok
test fabric_x::cuts_a_port ... FAILED
test other ... FAILED

failures:

---- fabric_x::cuts_a_port stdout ----
setting up
thread 'fabric_x::cuts_a_port' panicked at tests/tests/fabric_x.rs:10:5:
8 QP ends should move, 7 did
note: run with `RUST_BACKTRACE=1`

---- other stdout ----
no panic line here
";
        let mut f = Failures::default();
        out.lines().for_each(|l| f.see(l));
        assert_eq!(f.listing(), "; failed: fabric_x::cuts_a_port (8 QP ends should move, 7 did), other");
        assert_eq!(Failures::default().listing(), "");
    }

    #[test]
    fn counts_from_cargo_test_result_lines() {
        let l = "ok. 15 passed; 2 failed; 3 ignored; 0 measured; 0 filtered out; finished in 2.89s";
        assert_eq!(count_before(l, " passed"), 15);
        assert_eq!(count_before(l, " failed"), 2);
        assert_eq!(count_before(l, " ignored"), 3);
        assert_eq!(count_before("FAILED. 0 passed; 1 failed;", " passed"), 0);
    }
}
