//! `cargo xtask fuzz`: runs every cargo-fuzz target in `fuzz/fuzz_targets` for a bounded
//! time with the dated nightly pinned in `dataplane-ebpf/rust-toolchain.toml` (libFuzzer needs
//! `-Zsanitizer`), installing cargo-fuzz
//! first if it is missing. Any crash, or a target file without a `[[bin]]` entry in
//! `fuzz/Cargo.toml`, fails the run.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

use crate::util;

/// Options of `cargo xtask fuzz`.
#[derive(Debug, clap::Args)]
pub struct FuzzArgs {
    /// Seconds of fuzzing per target (libFuzzer `-max_total_time`).
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// Run only these targets (default: every file in fuzz/fuzz_targets).
    #[arg(long = "target", value_name = "NAME")]
    pub targets: Vec<String>,
}

impl FuzzArgs {
    /// Every target, `seconds` each.
    pub fn with_seconds(seconds: u64) -> Self {
        FuzzArgs { seconds, targets: vec![] }
    }
}

/// Installs cargo-fuzz if needed, then fuzzes each target; fails if any target crashes.
pub fn run(a: &FuzzArgs) -> anyhow::Result<()> {
    if a.seconds == 0 {
        bail!("--seconds must be at least 1");
    }
    let fuzz_dir = util::root().join("fuzz");
    let nightly =
        format!("+{}", crate::setup::pinned_toolchain(&util::root().join("dataplane-ebpf/rust-toolchain.toml"))?);
    ensure_cargo_fuzz()?;

    let on_disk = targets_on_disk(&fuzz_dir)?;
    let registered = registered_targets(&fuzz_dir)?;
    let unregistered: Vec<&String> = on_disk.iter().filter(|t| !registered.contains(t)).collect();
    if !unregistered.is_empty() {
        bail!(
            "fuzz target file(s) {unregistered:?} in {} have no [[bin]] entry in {}",
            fuzz_dir.join("fuzz_targets").display(),
            fuzz_dir.join("Cargo.toml").display()
        );
    }
    let targets: Vec<String> = if a.targets.is_empty() {
        on_disk
    } else {
        for t in &a.targets {
            if !registered.contains(t) {
                bail!("unknown fuzz target {t:?}; known: {registered:?}");
            }
        }
        a.targets.clone()
    };
    if targets.is_empty() {
        bail!("no fuzz targets found in {}", fuzz_dir.join("fuzz_targets").display());
    }

    let mut failed = vec![];
    for t in &targets {
        eprintln!("xtask fuzz: {t} for {} s", a.seconds);
        let res = util::run(
            Command::new("cargo")
                .current_dir(&fuzz_dir)
                .args([nightly.as_str(), "fuzz", "run", t, "--"])
                .arg(format!("-max_total_time={}", a.seconds)),
        );
        if let Err(e) = res {
            eprintln!("xtask fuzz: {t} FAILED: {e:#} (reproducer in {})", fuzz_dir.join("artifacts").join(t).display());
            failed.push(t.clone());
        }
    }
    if !failed.is_empty() {
        bail!("fuzz targets failed: {failed:?}");
    }
    eprintln!("xtask fuzz: {} target(s) ran {} s each without crashes", targets.len(), a.seconds);
    Ok(())
}

/// Pinned like every other tool: a floating install can need a newer rustc than ours.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

fn ensure_cargo_fuzz() -> anyhow::Result<()> {
    let have = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains(CARGO_FUZZ_VERSION))
        .unwrap_or(false);
    if !have {
        eprintln!("xtask fuzz: installing cargo-fuzz");
        util::run(Command::new("cargo").args([
            "install",
            "cargo-fuzz",
            "--version",
            CARGO_FUZZ_VERSION,
            "--locked",
            "--force",
        ]))
        .context("installing cargo-fuzz")?;
    }
    Ok(())
}

/// Target names: the `*.rs` files in `fuzz/fuzz_targets`, sorted.
fn targets_on_disk(fuzz_dir: &Path) -> anyhow::Result<Vec<String>> {
    let dir = fuzz_dir.join("fuzz_targets");
    let mut v = vec![];
    for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e.with_context(|| format!("reading {}", dir.display()))?.path();
        if p.extension().is_some_and(|x| x == "rs") {
            if let Some(s) = p.file_stem().and_then(|s| s.to_str()) {
                v.push(s.to_string());
            }
        }
    }
    v.sort();
    Ok(v)
}

/// Target names cargo-fuzz knows (`cargo fuzz list`, i.e. the `[[bin]]` entries).
fn registered_targets(fuzz_dir: &Path) -> anyhow::Result<Vec<String>> {
    let out = Command::new("cargo")
        .current_dir(fuzz_dir)
        .args(["fuzz", "list"])
        .output()
        .context("running cargo fuzz list")?;
    if !out.status.success() {
        bail!("cargo fuzz list failed in {}: {}", fuzz_dir.display(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect())
}
