//! Builds the XDP object (`dataplane-ebpf`, binary `rocefab-xdp`) for `bpfel-unknown-none` and
//! copies it to `$OUT_DIR/rocefab-xdp`, where `src/loader.rs` embeds it (only with the `bpf` feature: without it nothing is built) with
//! `aya::include_bytes_aligned!`.
//!
//! This is aya-template's / `aya_build::build_ebpf`'s approach, written out because aya-build
//! 0.2.1 requires rustc 1.98 (docs/src/setup.md): a nested
//! `cargo +<pinned nightly> build -p dataplane-ebpf --release --target bpfel-unknown-none -Z build-std=core`
//! with bpf-linker as the linker and the rustflags that put BTF into the object. The nightly is
//! the dated one pinned in `dataplane-ebpf/rust-toolchain.toml` (its LLVM must match
//! bpf-linker's), never the floating `nightly` channel.
//!
//! The nested build uses its own target dir (`<target>/bpf`, shared by all profiles so that
//! `core` is built once), which avoids cargo's lock on the outer target dir.
//!
//! `ROCEFAB_XDP_OBJECT=/path/to/rocefab-xdp` skips the nested build and embeds that file instead
//! (for machines without the nightly toolchain, e.g. to build docs).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const SETUP_HINT: &str =
    "run `cargo xtask setup` (installs the pinned nightly with rust-src and bpf-linker 0.13.0, see the README's Set-up commands)";

fn main() {
    if let Err(e) = run() {
        // A build script reports failure by exiting non-zero; cargo prints stderr.
        eprintln!("error: building the rocefab XDP program failed: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    // Without the `bpf` feature (the CLI's build: netns, links, AF_PACKET only) there is no
    // loader to embed the object, so neither the nightly nor bpf-linker is needed.
    if env::var_os("CARGO_FEATURE_BPF").is_none() {
        return Ok(());
    }
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| format!("CARGO_MANIFEST_DIR: {e}"))?);
    let out_dir = PathBuf::from(env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?);
    let workspace = manifest_dir.parent().ok_or("plumbing has no parent directory")?.to_path_buf();
    let dst = out_dir.join("rocefab-xdp");

    println!("cargo::rerun-if-env-changed=ROCEFAB_XDP_OBJECT");
    if let Some(obj) = env::var_os("ROCEFAB_XDP_OBJECT") {
        println!("cargo::rerun-if-changed={}", Path::new(&obj).display());
        std::fs::copy(&obj, &dst).map_err(|e| {
            format!("copying ROCEFAB_XDP_OBJECT={} to {}: {e}", Path::new(&obj).display(), dst.display())
        })?;
        return Ok(());
    }

    for dir in [
        "dataplane-ebpf/src",
        "dataplane-ebpf/Cargo.toml",
        "dataplane-ebpf/rust-toolchain.toml",
        "dataplane-common/src",
        "dataplane-common/Cargo.toml",
    ] {
        println!("cargo::rerun-if-changed={}", workspace.join(dir).display());
    }

    let toolchain = pinned_toolchain(&workspace.join("dataplane-ebpf/rust-toolchain.toml"))?;
    let plus = format!("+{toolchain}");
    check_toolchain(&plus)?;

    let target_dir = bpf_target_dir(&out_dir, &workspace);
    let mut cmd = Command::new("cargo");
    cmd.current_dir(&workspace)
        .args([plus.as_str(), "build", "--package", "dataplane-ebpf", "--bin", "rocefab-xdp", "--release"])
        .args(["--target", "bpfel-unknown-none", "-Z", "build-std=core"])
        // aya-ebpf's build-dependency aya-build 0.2.1 declares rust-version 1.98 (it builds on
        // the 1.97 nightly). With Cargo.lock pinned to aya-build 0.2.0 (rust-version 1.87)
        // this flag is a no-op; it keeps the nested build working if the lock floats again.
        .arg("--ignore-rust-version")
        .arg("--target-dir")
        .arg(&target_dir);
    // Cargo passes its own compiler, wrappers and flags to build scripts; the nested cargo must
    // pick the nightly toolchain's rustc and only our BPF flags.
    for var in [
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "CARGO",
    ] {
        cmd.env_remove(var);
    }
    // \x1f separates CARGO_ENCODED_RUSTFLAGS entries. debuginfo + --btf emit .BTF/.BTF.ext.
    cmd.env(
        "CARGO_ENCODED_RUSTFLAGS",
        ["--cfg=bpf_target_arch=\"x86_64\"", "-C", "debuginfo=2", "-C", "link-arg=--btf"].join("\x1f"),
    );
    cmd.env("CARGO_TARGET_BPFEL_UNKNOWN_NONE_LINKER", "bpf-linker");

    let status =
        cmd.status().map_err(|e| format!("spawning `cargo {plus} build -p dataplane-ebpf`: {e}; {SETUP_HINT}"))?;
    if !status.success() {
        return Err(format!(
            "`cargo {plus} build -p dataplane-ebpf --target bpfel-unknown-none` failed ({status}); if the toolchain is missing, {SETUP_HINT}"
        ));
    }
    let built = target_dir.join("bpfel-unknown-none/release/rocefab-xdp");
    std::fs::copy(&built, &dst).map_err(|e| format!("copying {} to {}: {e}", built.display(), dst.display()))?;
    Ok(())
}

/// `<outer target dir>/bpf`, found from OUT_DIR (`<target>[/<triple>]/<profile>/build/<pkg>/out`).
fn bpf_target_dir(out_dir: &Path, workspace: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()) // <profile>
        .and_then(|profile| profile.parent()) // <target> (or <target>/<triple>)
        .map(|t| t.join("bpf"))
        .unwrap_or_else(|| workspace.join("target/bpf"))
}

#[path = "../dataplane-ebpf/toolchain_pin.rs"]
mod toolchain_pin;
use toolchain_pin::pinned_toolchain;

/// Fails early, with the setup hint, when the pinned nightly, its rust-src or bpf-linker is missing.
fn check_toolchain(plus: &str) -> Result<(), String> {
    let linker = Command::new("bpf-linker").arg("--version").output();
    if !matches!(linker, Ok(ref o) if o.status.success()) {
        return Err(format!("bpf-linker not found on PATH; {SETUP_HINT}"));
    }
    let sysroot = Command::new("rustc")
        .args([plus, "--print", "sysroot"])
        .env_remove("RUSTC")
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .map_err(|e| format!("running `rustc {plus} --print sysroot`: {e}; {SETUP_HINT}"))?;
    if !sysroot.status.success() {
        return Err(format!("the pinned toolchain is not installed (`rustc {plus}` failed); {SETUP_HINT}"));
    }
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    let core_src = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
    if !core_src.exists() {
        return Err(format!("{plus} has no rust-src ({} missing); {SETUP_HINT}", core_src.display()));
    }
    Ok(())
}
