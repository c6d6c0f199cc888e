//! `cargo xtask test`: every test the project has, in one command.
//!
//! 1. unprivileged workspace tests (`cargo test` over the default members, criterion benches in
//!    test mode so they run once),
//! 2. privileged tests (the `rocefab-tests` crate: BPF_PROG_TEST_RUN, namespace fabrics, external
//!    oracles) — run serially, as root; not being root is an error, never a skip,
//! 3. every fuzz target for a bounded time,
//! 4. a leak check: no `rf*` network namespace may survive the suite.
//!
//! Every phase runs even if an earlier one failed; the summary lists each phase's outcome.
use std::process::Command;

use anyhow::bail;

use crate::util::{is_root, root, run};

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Seconds per fuzz target.
    #[arg(long, default_value_t = 10)]
    pub fuzz_seconds: u64,
    /// Skip nothing by default; `--only unit|privileged|fuzz` runs a single phase (for development).
    #[arg(long)]
    pub only: Option<String>,
}

pub fn run_all(args: &TestArgs) -> anyhow::Result<()> {
    let root = root();
    let bin_dir = root.join("target/debug");
    let want = |p: &str| args.only.as_deref().is_none_or(|o| o == p);
    let mut results: Vec<(&str, anyhow::Result<()>)> = Vec::new();

    if want("unit") {
        results.push((
            "unprivileged tests (cargo test)",
            run(Command::new("cargo").current_dir(&root).args(["test", "--all-targets", "--no-fail-fast"])),
        ));
        results.push((
            "criterion benches, once in test mode",
            run(Command::new("cargo").current_dir(&root).args(["test", "-p", "rocefab-wire", "--benches"])),
        ));
    }
    if want("privileged") {
        let r = if !is_root() {
            Err(anyhow::anyhow!("privileged tests need root (namespaces, XDP, BPF_PROG_TEST_RUN): run as root"))
        } else {
            // Build the binaries the tests drive, then the tests themselves; run them one at a time.
            run(Command::new("cargo").current_dir(&root).args(["build", "-p", "control", "-p", "dataplane-user"])).and_then(
                |_| {
                    run(Command::new("cargo")
                        .current_dir(&root)
                        .args(["test", "-p", "rocefab-tests", "--no-fail-fast", "--", "--test-threads=1"])
                        .env("ROCEFAB_BIN_DIR", &bin_dir))
                },
            )
        };
        results.push(("privileged tests (rocefab-tests, serial, root)", r));
    }
    if want("fuzz") {
        let a = crate::fuzz::FuzzArgs::with_seconds(args.fuzz_seconds);
        results.push(("fuzz targets", crate::fuzz::run(&a)));
    }
    results.push(("no leftover network namespaces", leak_check()));

    eprintln!("\n==== cargo xtask test summary ====");
    let mut failed = 0;
    for (name, r) in &results {
        match r {
            Ok(()) => eprintln!("  ok      {name}"),
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

fn leak_check() -> anyhow::Result<()> {
    let out = Command::new("ip").args(["netns", "list"]).output()?;
    let left: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("rf"))
        .map(str::to_string)
        .collect();
    if !left.is_empty() {
        bail!("network namespaces left behind by the tests: {}", left.join(" "));
    }
    Ok(())
}
