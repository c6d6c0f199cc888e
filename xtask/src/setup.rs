//! `cargo xtask setup`: installs what a fresh Debian 12 machine lacks, idempotently
//! (recipe from ../shared/TOOLCHAIN.md). Each step checks first and does nothing if satisfied.
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

use crate::util::{have, run as sh};

/// Debian packages: LLVM 22 for bpf-linker, the libxdp-sys build environment, iproute2 and
/// friends for namespaces, and the independent oracles used by tests (tshark, scapy).
const APT_PACKAGES: &[&str] = &[
    "llvm-22-dev", "clang-22", "m4", "make", "gcc", "pkg-config", "libelf-dev", "zlib1g-dev",
    "libbpf-dev", "iproute2", "iputils-ping", "bpftool", "ethtool", "tshark", "python3-scapy",
    "tcpdump", "procps",
];

const BPF_LINKER_VERSION: &str = "0.13.0";

pub fn run() -> anyhow::Result<()> {
    apt()?;
    nightly_rust_src()?;
    bpf_linker()?;
    Ok(())
}

fn dpkg_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

fn apt() -> anyhow::Result<()> {
    let missing: Vec<&str> = APT_PACKAGES.iter().copied().filter(|p| !dpkg_installed(p)).collect();
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


fn nightly_rust_src() -> anyhow::Result<()> {
    let out = Command::new("rustup").args(["component", "list", "--installed", "--toolchain", "nightly"]).output();
    let have_src = out.as_ref().map(|o| String::from_utf8_lossy(&o.stdout).contains("rust-src")).unwrap_or(false);
    if have_src {
        return Ok(());
    }
    eprintln!("xtask setup: adding rust-src to the nightly toolchain");
    sh(Command::new("rustup").args(["toolchain", "install", "nightly", "--profile", "minimal", "--component", "rust-src"]))
}

fn bpf_linker() -> anyhow::Result<()> {
    if have("bpf-linker") {
        let v = Command::new("bpf-linker").arg("--version").output().context("bpf-linker --version")?;
        if String::from_utf8_lossy(&v.stdout).contains(BPF_LINKER_VERSION) {
            return Ok(());
        }
    }
    eprintln!("xtask setup: building bpf-linker {BPF_LINKER_VERSION} against LLVM 22");
    if !Path::new("/usr/lib/llvm-22").exists() {
        bail!("/usr/lib/llvm-22 is missing (apt package llvm-22-dev)");
    }
    sh(Command::new("cargo")
        .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION, "--locked", "--no-default-features", "--features", "llvm-22"])
        .env("LLVM_PREFIX", "/usr/lib/llvm-22"))
}
