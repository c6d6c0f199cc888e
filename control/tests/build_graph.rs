//! The crate graph the README's Architecture section draws: the CLI (`rocefab`) builds on
//! stable Rust without the eBPF toolchain, so nothing it links may pull aya, tokio, axum,
//! xsk-rs/libxdp or a daemon crate, and the one plumbing crate it uses must come without its
//! `bpf` feature (whose build script runs the nightly + bpf-linker build) and without `runtime`.
use std::process::Command;

/// `cargo tree` of `package` (normal and build edges, as `rocefab` is built), one `name version|features` per line.
fn tree(package: &str) -> Vec<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new(env!("CARGO"))
        .current_dir(root)
        .args(["tree", "-p", package, "--edges", "normal,build", "--prefix", "none", "--format", "{p}|{f}"])
        .output()
        .expect("running cargo tree");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8").lines().map(str::to_string).collect()
}

fn crate_name(line: &str) -> &str {
    line.split(' ').next().unwrap_or("")
}

const FORBIDDEN: &[&str] =
    &["aya", "aya-obj", "tokio", "axum", "xsk-rs", "libxdp-sys", "afxdp", "dataplane-user", "host-daemons"];

#[test]
fn the_cli_links_no_ebpf_runtime_or_daemon_crate() {
    let t = tree("control");
    assert!(t.iter().any(|l| crate_name(l) == "rocefab-contracts"), "cargo tree looks wrong: {t:?}");
    let bad: Vec<&String> = t.iter().filter(|l| FORBIDDEN.contains(&crate_name(l))).collect();
    assert!(bad.is_empty(), "control depends on {bad:?}");
    let plumbing: Vec<&String> = t.iter().filter(|l| crate_name(l) == "rocefab-plumbing").collect();
    assert!(!plumbing.is_empty(), "control uses the plumbing crate for netns and AF_PACKET: {t:?}");
    for l in plumbing {
        let features = l.rsplit('|').next().unwrap_or("");
        assert!(
            !features.split(',').any(|f| f == "bpf" || f == "runtime"),
            "control builds rocefab-plumbing with features {features:?} (the eBPF build or tokio)"
        );
    }
}

#[test]
fn the_pure_models_link_no_kernel_plumbing() {
    for pure in ["gpu-host", "rocefab-contracts", "rocefab-wire", "lldp-agent", "rocefab-units"] {
        let t = tree(pure);
        let bad: Vec<&String> =
            t.iter().filter(|l| FORBIDDEN.contains(&crate_name(l)) || crate_name(l) == "rocefab-plumbing").collect();
        assert!(bad.is_empty(), "{pure} depends on {bad:?}");
    }
}

#[test]
fn the_host_daemons_do_not_depend_on_the_switch() {
    let t = tree("host-daemons");
    assert!(t.iter().any(|l| crate_name(l) == "rocefab-plumbing"), "{t:?}");
    assert!(!t.iter().any(|l| crate_name(l) == "dataplane-user"), "host-daemons depends on the switch crate");
}
