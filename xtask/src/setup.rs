//! `cargo xtask setup [--check]`: installs what a fresh Debian 12 machine lacks, idempotently
//! (the README's "Set-up commands" say what and why), and checks that the eBPF toolchain fits together.
//!
//! Each step checks first and does nothing if satisfied:
//! 1. Debian packages ([`APT_PACKAGES`]);
//! 2. the dated nightly pinned in `dataplane-ebpf/rust-toolchain.toml`, with `rust-src`;
//! 3. bpf-linker [`BPF_LINKER_VERSION`], built against the LLVM major of that nightly.
//!
//! The nightly emits LLVM bitcode that bpf-linker reads with the LLVM it was built against; a
//! newer bitcode fails with "ERROR llvm: Invalid record". So the LLVM major of the pinned rustc
//! (`rustc -vV`) must equal bpf-linker's (the `libLLVM.so.N` it links, or the `llvm-N` feature it
//! was installed with). When they differ, setup rebuilds bpf-linker against the right LLVM if
//! Debian's `llvm-N-dev` exists, and otherwise fails with one line naming both versions and the
//! fix. `--check` reports every problem, one line each, and installs nothing.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use crate::util::{have, root, run as sh};

/// Debian packages: LLVM 22 for bpf-linker, the libxdp-sys build environment, iproute2 and
/// friends for namespaces, and the independent oracles used by tests (tshark, scapy, promtool
/// from `prometheus`, lldpad/lldptool as a DCBX peer, lldpd/lldpcli as a second LLDP agent beside
/// the NIC agent), libpcap for capture filters, iperf3
/// for `cargo xtask bench --fabric`'s TCP measurement, perf for
/// `bench/scripts/profile-fabric.sh`, FRR (zebra, bgpd, bfdd, vtysh) for `routing: bgp`, and
/// headless Chromium with chromedriver for the browser test of `rocefab web`.
const APT_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "clang-22",
    "m4",
    "make",
    "gcc",
    "pkg-config",
    "libelf-dev",
    "zlib1g-dev",
    "libbpf-dev",
    "iproute2",
    "iputils-ping",
    "bpftool",
    "ethtool",
    "tshark",
    "python3-scapy",
    "tcpdump",
    "procps",
    "prometheus",
    "lldpad",
    "lldpd",
    "libpcap-dev",
    "iperf3",
    "linux-perf",
    "frr",
    "chromium",
    "chromium-driver",
];

pub const BPF_LINKER_VERSION: &str = "0.13.0";

/// Options of `cargo xtask setup`.
#[derive(Debug, Default, clap::Args)]
pub struct SetupArgs {
    /// Report what is missing or mismatched, one line each, and install nothing.
    #[arg(long)]
    pub check: bool,
    /// The eBPF crate's toolchain file (default: dataplane-ebpf/rust-toolchain.toml).
    #[arg(long, value_name = "FILE")]
    pub toolchain_file: Option<PathBuf>,
}

pub fn run(a: &SetupArgs) -> anyhow::Result<()> {
    let file = a.toolchain_file.clone().unwrap_or_else(|| root().join("dataplane-ebpf/rust-toolchain.toml"));
    if a.check {
        return check(&file);
    }
    apt()?;
    let toolchain = pinned_toolchain(&file)?;
    pinned_nightly(&toolchain)?;
    lint_components(&toolchain)?;
    bpf_linker(&toolchain)?;
    mdbook()?;
    Ok(())
}

/// mdBook, which `cargo xtask docs` builds the book in `docs/` with, pinned (its HTML and its
/// warnings change between versions); without the live-reload server.
pub const MDBOOK_VERSION: &str = "0.5.4";

/// mdBook: the first `mdbook` on PATH, else where `cargo install` puts it (`$CARGO_HOME/bin`,
/// default `~/.cargo/bin`, which a fresh shell may not have on PATH yet).
pub fn mdbook_path() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("mdbook")).find(|f| f.is_file()));
    on_path.unwrap_or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"));
        home.join("bin/mdbook")
    })
}

/// The installed mdBook's version, if any (`mdbook v0.5.4` prints `0.5.4`).
fn mdbook_version() -> Option<String> {
    let o = Command::new(mdbook_path()).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&o.stdout);
    Some(text.trim().trim_start_matches("mdbook").trim().trim_start_matches('v').to_string())
}

/// Installs [`MDBOOK_VERSION`] unless it is there.
fn mdbook() -> anyhow::Result<()> {
    if mdbook_version().as_deref() == Some(MDBOOK_VERSION) {
        return Ok(());
    }
    eprintln!("xtask setup: installing mdbook {MDBOOK_VERSION} (cargo xtask docs)");
    sh(Command::new("cargo").args([
        "install",
        "mdbook",
        "--version",
        MDBOOK_VERSION,
        "--locked",
        "--no-default-features",
        "--features",
        "search",
    ]))
}

/// The toolchain `cargo xtask test` formats and lints with, pinned: a newer rustfmt formats
/// differently and a newer clippy brings new lints, so a floating `stable` would turn a fresh
/// machine's `-D warnings` red without a change in the tree (1.99's clippy did). The workspace
/// still builds with the machine's stable, 1.95 or newer (`rust-version`).
pub const LINT_TOOLCHAIN: &str = "1.95.0";

/// [`LINT_TOOLCHAIN`] with rustfmt and clippy, and the pinned nightly's clippy (the eBPF crate
/// is linted with its own toolchain).
fn lint_components(toolchain: &str) -> anyhow::Result<()> {
    if !has_component(Some(LINT_TOOLCHAIN), "rustfmt") || !has_component(Some(LINT_TOOLCHAIN), "clippy") {
        eprintln!("xtask setup: installing {LINT_TOOLCHAIN} with rustfmt and clippy (formatting and lints)");
        sh(Command::new("rustup").args([
            "toolchain",
            "install",
            LINT_TOOLCHAIN,
            "--profile",
            "minimal",
            "--component",
            "rustfmt,clippy",
        ]))?;
    }
    if !has_component(Some(toolchain), "clippy") {
        eprintln!("xtask setup: adding clippy to {toolchain}");
        sh(Command::new("rustup").args(["component", "add", "clippy", "--toolchain", toolchain]))?;
    }
    Ok(())
}

/// Whether `cargo [+toolchain] <fmt|clippy> --version` runs.
fn has_component(toolchain: Option<&str>, component: &str) -> bool {
    let sub = if component == "rustfmt" { "fmt" } else { component };
    let mut c = Command::new("cargo");
    if let Some(t) = toolchain {
        c.arg(format!("+{t}")).env_remove("RUSTUP_TOOLCHAIN");
    }
    c.args([sub, "--version"]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    c.status().is_ok_and(|s| s.success())
}

/// `--check`: every problem on its own line; an error if there is any.
pub fn check(file: &Path) -> anyhow::Result<()> {
    let mut problems = vec![];
    let missing = missing_packages();
    if !missing.is_empty() {
        problems.push(format!("missing Debian packages: {}; fix: cargo xtask setup", missing.join(" ")));
    }
    match pinned_toolchain(file) {
        Err(e) => problems.push(format!("{e:#}")),
        Ok(toolchain) => {
            if let Err(e) = toolchain_problems(&toolchain) {
                problems.push(format!("{e:#}"));
            }
            for (on, component) in
                [(LINT_TOOLCHAIN, "rustfmt"), (LINT_TOOLCHAIN, "clippy"), (toolchain.as_str(), "clippy")]
            {
                if !has_component(Some(on), component) {
                    problems.push(format!("{component} is not installed for {on}; fix: cargo xtask setup"));
                }
            }
        }
    }
    match mdbook_version() {
        Some(v) if v == MDBOOK_VERSION => {}
        Some(v) => problems.push(format!("mdbook is version {v}, want {MDBOOK_VERSION}; fix: cargo xtask setup")),
        None => problems.push(format!("mdbook {MDBOOK_VERSION} is not installed; fix: cargo xtask setup")),
    }
    if problems.is_empty() {
        eprintln!("xtask setup --check: toolchain ok");
        return Ok(());
    }
    for p in &problems {
        eprintln!("xtask setup --check: {p}");
    }
    bail!("{} setup problem(s); see above", problems.len())
}

/// The pinned nightly, its rust-src and bpf-linker, checked without installing anything.
fn toolchain_problems(toolchain: &str) -> anyhow::Result<()> {
    if !has_rust_src(toolchain) {
        bail!("toolchain {toolchain} with rust-src is not installed; fix: cargo xtask setup");
    }
    let rustc = rustc_llvm_major(toolchain)?;
    let linker = installed_bpf_linker()?;
    match verdict(toolchain, rustc, linker.as_ref(), llvm_dev_installed(rustc)) {
        Verdict::Ok => Ok(()),
        Verdict::Install(why) | Verdict::Rebuild(why) => bail!("{why}; fix: cargo xtask setup"),
        Verdict::Impossible(why) => bail!("{why}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The pinned toolchain

#[path = "../../dataplane-ebpf/toolchain_pin.rs"]
mod pin;

/// The `channel` of a `rust-toolchain.toml`, which must be a dated nightly.
pub fn pinned_toolchain(file: &Path) -> anyhow::Result<String> {
    pin::pinned_toolchain(file).map_err(anyhow::Error::msg)
}

fn has_rust_src(toolchain: &str) -> bool {
    let out = Command::new("rustc")
        .arg(format!("+{toolchain}"))
        .args(["--print", "sysroot"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let sysroot = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml").exists()
        }
        _ => false,
    }
}

fn pinned_nightly(toolchain: &str) -> anyhow::Result<()> {
    if has_rust_src(toolchain) {
        return Ok(());
    }
    eprintln!("xtask setup: installing {toolchain} with rust-src");
    sh(Command::new("rustup").args([
        "toolchain",
        "install",
        toolchain,
        "--profile",
        "minimal",
        "--component",
        "rust-src",
    ]))
}

/// LLVM major of `rustc +toolchain -vV` ("LLVM version: 22.1.4").
fn rustc_llvm_major(toolchain: &str) -> anyhow::Result<u32> {
    let out = Command::new("rustc")
        .arg(format!("+{toolchain}"))
        .arg("-vV")
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .with_context(|| format!("running rustc +{toolchain} -vV"))?;
    if !out.status.success() {
        bail!("rustc +{toolchain} -vV failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    parse_rustc_llvm(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("rustc +{toolchain} -vV printed no \"LLVM version\" line"))
}

pub fn parse_rustc_llvm(vv: &str) -> Option<u32> {
    vv.lines().find_map(|l| l.strip_prefix("LLVM version:")).and_then(|v| v.trim().split('.').next()?.parse().ok())
}

// ---------------------------------------------------------------------------------------------
// bpf-linker

/// An installed bpf-linker: its version and the LLVM major it was built against (if known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linker {
    pub version: String,
    pub llvm: Option<u32>,
}

fn installed_bpf_linker() -> anyhow::Result<Option<Linker>> {
    if !have("bpf-linker") {
        return Ok(None);
    }
    let v = Command::new("bpf-linker").arg("--version").output().context("bpf-linker --version")?;
    let version = String::from_utf8_lossy(&v.stdout).trim().trim_start_matches("bpf-linker").trim().to_string();
    Ok(Some(Linker { version, llvm: linker_llvm_major() }))
}

/// The LLVM major bpf-linker was built against: the `libLLVM.so.N` / `libLLVM-N.so` it links
/// dynamically (what actually runs), else the `llvm-N` feature cargo recorded when installing it.
fn linker_llvm_major() -> Option<u32> {
    let path = Command::new("sh").args(["-c", "command -v bpf-linker"]).output().ok()?;
    let path = String::from_utf8_lossy(&path.stdout).trim().to_string();
    if let Ok(o) = Command::new("ldd").arg(&path).output() {
        if let Some(n) = parse_ldd_llvm(&String::from_utf8_lossy(&o.stdout)) {
            return Some(n);
        }
    }
    let crates2 = cargo_home().join(".crates2.json");
    parse_crates2_llvm(&std::fs::read_to_string(crates2).ok()?)
}

pub fn parse_ldd_llvm(ldd: &str) -> Option<u32> {
    ldd.lines().find_map(|l| {
        let l = l.trim();
        let rest = l.strip_prefix("libLLVM.so.").or_else(|| l.strip_prefix("libLLVM-"))?;
        rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    })
}

/// The `llvm-N` feature of the bpf-linker entry in cargo's install record.
pub fn parse_crates2_llvm(json: &str) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let (_, entry) = v.get("installs")?.as_object()?.iter().find(|(k, _)| k.starts_with("bpf-linker "))?;
    entry.get("features")?.as_array()?.iter().find_map(|f| f.as_str()?.strip_prefix("llvm-")?.parse().ok())
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"))
}

fn llvm_dev_installed(major: u32) -> bool {
    Path::new(&format!("/usr/lib/llvm-{major}/lib/libLLVM.so")).exists()
}

/// What setup must do about bpf-linker.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Not installed, or another version: install it.
    Install(String),
    /// Built against another LLVM than the pinned rustc: rebuild it.
    Rebuild(String),
    /// Cannot be fixed here (no llvm-N-dev for rustc's LLVM): one line naming both and the fix.
    Impossible(String),
}

/// Decides from the pinned toolchain's LLVM major, the installed linker and whether Debian's
/// LLVM of that major is there to build against.
pub fn verdict(toolchain: &str, rustc_llvm: u32, linker: Option<&Linker>, llvm_dev: bool) -> Verdict {
    let cannot = |what: String| {
        Verdict::Impossible(format!(
            "{what}, and /usr/lib/llvm-{rustc_llvm} (Debian llvm-{rustc_llvm}-dev) is missing to build it against; \
             fix: pin dataplane-ebpf/rust-toolchain.toml to a nightly with LLVM 22 (nightly-2026-05-19), which Debian's llvm-22-dev matches"
        ))
    };
    match linker {
        None => {
            let why = format!("bpf-linker is not installed ({toolchain} has LLVM {rustc_llvm})");
            if llvm_dev {
                Verdict::Install(why)
            } else {
                cannot(why)
            }
        }
        Some(l) if l.version != BPF_LINKER_VERSION => {
            let why = format!("bpf-linker is version {:?}, want {BPF_LINKER_VERSION}", l.version);
            if llvm_dev {
                Verdict::Install(why)
            } else {
                cannot(why)
            }
        }
        Some(Linker { llvm: Some(n), .. }) if *n == rustc_llvm => Verdict::Ok,
        Some(Linker { llvm, .. }) => {
            let built = llvm.map_or("an unknown LLVM".to_string(), |n| format!("LLVM {n}"));
            let why = format!("eBPF toolchain {toolchain} has LLVM {rustc_llvm} but bpf-linker {BPF_LINKER_VERSION} is built against {built}");
            if llvm_dev {
                Verdict::Rebuild(why)
            } else {
                cannot(why)
            }
        }
    }
}

fn bpf_linker(toolchain: &str) -> anyhow::Result<()> {
    let rustc = rustc_llvm_major(toolchain)?;
    let linker = installed_bpf_linker()?;
    match verdict(toolchain, rustc, linker.as_ref(), llvm_dev_installed(rustc)) {
        Verdict::Ok => Ok(()),
        Verdict::Impossible(why) => bail!("{why}"),
        Verdict::Install(why) | Verdict::Rebuild(why) => {
            eprintln!("xtask setup: {why}: building bpf-linker {BPF_LINKER_VERSION} against LLVM {rustc}");
            sh(Command::new("cargo")
                .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION, "--locked", "--force"])
                .args(["--no-default-features", "--features", &format!("llvm-{rustc}")])
                .env("LLVM_PREFIX", format!("/usr/lib/llvm-{rustc}")))
            .context("building bpf-linker")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Debian packages

fn dpkg_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

fn missing_packages() -> Vec<&'static str> {
    APT_PACKAGES.iter().copied().filter(|p| !dpkg_installed(p)).collect()
}

fn apt() -> anyhow::Result<()> {
    let missing = missing_packages();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask setup: installing {}", missing.join(" "));
    if !crate::util::is_root() {
        bail!("missing Debian packages ({}); run as root or install them with apt-get", missing.join(" "));
    }
    sh(Command::new("apt-get").arg("update").arg("-q"))?;
    // tshark's debconf question (non-root capture) must not block a non-interactive install.
    sh(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
    .context("apt-get install")
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "nightly-2026-05-19";

    #[test]
    fn dated_nightly_only() {
        assert!(pin::is_dated_nightly("nightly-2026-05-19"));
        for bad in ["nightly", "stable", "1.95.0", "nightly-2026-5-19", "nightly-latest", "beta-2026-05-19"] {
            assert!(!pin::is_dated_nightly(bad), "{bad}");
        }
    }

    #[test]
    fn llvm_versions_from_tool_output() {
        let vv = "rustc 1.97.0-nightly (e50aa6fba 2026-05-19)\nbinary: rustc\nLLVM version: 22.1.4\n";
        assert_eq!(parse_rustc_llvm(vv), Some(22));
        assert_eq!(parse_rustc_llvm("rustc 1.0\n"), None);
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibLLVM.so.22.1 => /usr/lib/llvm-22/lib/libLLVM.so.22.1 (0x7f)\n";
        assert_eq!(parse_ldd_llvm(ldd), Some(22));
        assert_eq!(parse_ldd_llvm("\tlibLLVM-19.so => /usr/lib/x (0x1)\n"), Some(19));
        assert_eq!(parse_ldd_llvm("\tnot a dynamic executable\n"), None);
        let crates2 = r#"{"installs":{"bpf-linker 0.13.0 (registry+https://github.com/rust-lang/crates.io-index)":{"features":["llvm-22"],"no_default_features":true}}}"#;
        assert_eq!(parse_crates2_llvm(crates2), Some(22));
        assert_eq!(parse_crates2_llvm(r#"{"installs":{}}"#), None);
    }

    #[test]
    fn verdicts() {
        let l = |llvm| Linker { version: BPF_LINKER_VERSION.into(), llvm };
        assert_eq!(verdict(T, 22, Some(&l(Some(22))), true), Verdict::Ok);
        assert_eq!(verdict(T, 22, Some(&l(Some(22))), false), Verdict::Ok);
        assert!(matches!(verdict(T, 22, None, true), Verdict::Install(_)));
        assert!(matches!(verdict(T, 22, Some(&l(Some(21))), true), Verdict::Rebuild(_)));
        assert!(matches!(verdict(T, 22, Some(&l(None)), true), Verdict::Rebuild(_)));
        let old = Linker { version: "0.9.13".into(), llvm: Some(22) };
        assert!(matches!(verdict(T, 22, Some(&old), true), Verdict::Install(_)));
        // The failure of 2026-11: a floating nightly with LLVM 23, bpf-linker on Debian's LLVM 22.
        let Verdict::Impossible(line) = verdict("nightly", 23, Some(&l(Some(22))), false) else { panic!() };
        assert!(!line.contains('\n'));
        for want in ["LLVM 23", "LLVM 22", "llvm-23-dev", "fix: pin dataplane-ebpf/rust-toolchain.toml"] {
            assert!(line.contains(want), "{want:?} not in {line:?}");
        }
    }
}
