//! `cargo xtask fuzz`: runs every cargo-fuzz target in `fuzz/fuzz_targets` for a bounded
//! time with the dated nightly pinned in `dataplane-ebpf/rust-toolchain.toml` (libFuzzer needs
//! `-Zsanitizer`), installing cargo-fuzz
//! first if it is missing, each from its checked-in seed corpus ([`SEEDS`]). Any crash, a target
//! file without a `[[bin]]` entry in `fuzz/Cargo.toml`, or a target without seeds fails the run.

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
        let seeds = seed_dirs(&util::root(), t)?;
        eprintln!("xtask fuzz: {t} for {} s, seeded from {}", a.seconds, seeds.join(", "));
        // The first corpus directory is libFuzzer's own (kept out of git); the seeds are read.
        let corpus = fuzz_dir.join("corpus").join(t);
        std::fs::create_dir_all(&corpus).with_context(|| format!("creating {}", corpus.display()))?;
        let res = util::run(
            Command::new("cargo")
                .current_dir(&fuzz_dir)
                .args([nightly.as_str(), "fuzz", "run", t])
                .arg(&corpus)
                .args(seeds.iter().map(|s| util::root().join(s)))
                .arg("--")
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

/// The checked-in seed inputs of each target, relative to the repository: the wire targets'
/// in `fuzz/seeds/<target>/` (frames built with scapy by `fuzz/seeds/make-wire-seeds.py`), the
/// topology parser's the shipped topologies, the NX-OS importer's the importer's test fixtures.
const SEEDS: &[(&str, &str)] = &[
    ("dcbx", "fuzz/seeds/dcbx"),
    ("lldp", "fuzz/seeds/lldp"),
    ("mac_control", "fuzz/seeds/mac_control"),
    ("roce", "fuzz/seeds/roce"),
    ("uet_pds", "fuzz/seeds/uet_pds"),
    ("uet_frame", "fuzz/seeds/uet_frame"),
    ("uet_ses", "fuzz/seeds/uet_ses"),
    // Whole Ethernet/IPv4/UDP frames (RoCEv2): what a switch trims.
    ("trim", "fuzz/seeds/roce"),
    ("topology", "topologies"),
    ("nxos_qos", "control/tests/fixtures/nxos"),
];

/// The seed directories of `target`; a target without seeds, or whose seed directory is empty
/// or missing, is an error (a fuzzer starting from nothing reaches little in 10 s).
fn seed_dirs(root: &Path, target: &str) -> anyhow::Result<Vec<String>> {
    let dirs: Vec<String> = SEEDS.iter().filter(|(t, _)| *t == target).map(|(_, d)| d.to_string()).collect();
    if dirs.is_empty() {
        bail!("fuzz target {target} has no seed corpus: add one to SEEDS in xtask/src/fuzz.rs");
    }
    for d in &dirs {
        let n =
            std::fs::read_dir(root.join(d)).map(|r| r.flatten().filter(|e| e.path().is_file()).count()).unwrap_or(0);
        if n == 0 {
            bail!("the seed corpus {d} of fuzz target {target} is missing or empty");
        }
    }
    Ok(dirs)
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

#[cfg(test)]
mod tests {
    use super::{seed_dirs, targets_on_disk, SEEDS};
    use crate::util::root;

    #[test]
    fn every_fuzz_target_has_a_seed_corpus_on_disk() {
        let targets = targets_on_disk(&root().join("fuzz")).unwrap();
        assert!(targets.len() >= 6, "{targets:?}");
        for t in &targets {
            seed_dirs(&root(), t).unwrap();
        }
        for (t, _) in SEEDS {
            assert!(targets.iter().any(|x| x == t), "seeds for {t}, which is no target");
        }
        assert!(seed_dirs(&root(), "nope").unwrap_err().to_string().contains("no seed corpus"));
    }
}
