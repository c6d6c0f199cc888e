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
//! 5. a leak check: no `rf*` network namespace may survive the suite.
//!
//! Every phase runs even if an earlier one failed; the summary lists each phase's outcome.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use crate::util::{is_root, root, run};

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Seconds per fuzz target.
    #[arg(long, default_value_t = 10)]
    pub fuzz_seconds: u64,
    /// Skip nothing by default; `--only lint|docs|unit|privileged|fuzz` runs a single phase (for development).
    #[arg(long)]
    pub only: Option<String>,
}

pub fn run_all(args: &TestArgs) -> anyhow::Result<()> {
    let root = root();
    let bin_dir = root.join("target/debug");
    let want = |p: &str| args.only.as_deref().is_none_or(|o| o == p);
    let mut results: Vec<(&str, anyhow::Result<String>)> = Vec::new();
    let namespaces_before = rf_namespaces()?;

    results.push((
        "toolchain (cargo xtask setup --check)",
        crate::setup::check(&root.join("dataplane-ebpf/rust-toolchain.toml"))
            .map(|_| "pinned eBPF nightly and bpf-linker on the same LLVM, packages present".to_string()),
    ));

    if want("lint") {
        results.push(("formatting (cargo fmt --check)", fmt_check(&root)));
        results.push(("lints (cargo clippy -D warnings, workspace and eBPF crate)", clippy(&root)));
    }
    if want("docs") {
        results.push(("docs (cargo xtask docs: the book builds, links resolve, commands exist)", crate::docs::run()));
    }
    if want("unit") {
        results.push((
            "unprivileged tests (cargo test)",
            run_tests(Command::new("cargo").current_dir(&root).args(["test", "--all-targets", "--no-fail-fast"])),
        ));
        results.push((
            "criterion benches, once in test mode",
            run(Command::new("cargo").current_dir(&root).args(["test", "-p", "rocefab-wire", "--benches"]))
                .map(|_| "each benchmark ran once".to_string()),
        ));
    }
    if want("privileged") {
        let r = if !is_root() {
            Err(anyhow::anyhow!("privileged tests need root (namespaces, XDP, BPF_PROG_TEST_RUN): run as root"))
        } else {
            // Build the binaries the tests drive, then the tests themselves; run them one at a time.
            crate::util::build_fabric(false).and_then(|_| {
                run_tests(
                    Command::new("cargo")
                        .current_dir(&root)
                        .args(["test", "-p", "rocefab-tests", "--no-fail-fast", "--", "--test-threads=1"])
                        .env("ROCEFAB_BIN_DIR", &bin_dir),
                )
            })
        };
        results.push(("privileged tests (rocefab-tests, serial, root)", r));
    }
    if want("fuzz") {
        let a = crate::fuzz::FuzzArgs::with_seconds(args.fuzz_seconds);
        results.push((
            "fuzz targets",
            crate::fuzz::run(&a).map(|_| format!("every target, {} s each, no crash", a.seconds)),
        ));
    }
    results.push(("no leftover network namespaces", leak_check(&namespaces_before)));

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

/// Runs a `cargo test` command, streaming its output, and sums the `test result:` lines.
/// A run that executed no test at all is an error, as is any failed test; the error names each
/// failed test with the first line of its panic, so the summary alone says what broke.
fn run_tests(cmd: &mut Command) -> anyhow::Result<String> {
    let shown = format!("{cmd:?}");
    let mut child = cmd.stdout(Stdio::piped()).spawn().with_context(|| format!("starting {shown}"))?;
    let stdout = child.stdout.take().context("test stdout")?;
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

/// Network namespaces whose names rocefab and its tests use (`rf…`).
fn rf_namespaces() -> anyhow::Result<Vec<String>> {
    let out = Command::new("ip").args(["netns", "list"]).output().context("ip netns list")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("rf"))
        .map(str::to_string)
        .collect())
}

/// Fails if the suite left `rf…` namespaces that were not there before it started.
fn leak_check(before: &[String]) -> anyhow::Result<String> {
    let left: Vec<String> = rf_namespaces()?.into_iter().filter(|n| !before.contains(n)).collect();
    if !left.is_empty() {
        bail!("network namespaces left behind by the tests: {}", left.join(" "));
    }
    Ok(if before.is_empty() {
        "none".to_string()
    } else {
        format!("none new (already there before the run: {})", before.join(" "))
    })
}

#[cfg(test)]
mod tests {
    use super::{count_before, Failures};

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
