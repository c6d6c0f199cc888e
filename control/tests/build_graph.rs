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
    for pure in ["gpu-host", "rocefab-contracts", "rocefab-wire", "lldp-agent", "rocefab-units", "rocefab-model"] {
        let t = tree(pure);
        let bad: Vec<&String> =
            t.iter().filter(|l| FORBIDDEN.contains(&crate_name(l)) || crate_name(l) == "rocefab-plumbing").collect();
        assert!(bad.is_empty(), "{pure} depends on {bad:?}");
    }
}

#[test]
fn the_contracts_are_plain_serde_types() {
    // What daemons and CLI exchange (configs, the NIC agent's config and its DCBX settings, jobs,
    // reports, streams) needs serde, the frame vocabulary and the eBPF ABI constants, nothing
    // else: no agent, model, runtime or metrics crate.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new(env!("CARGO"))
        .current_dir(root)
        .args(["tree", "-p", "rocefab-contracts", "--edges", "normal,build", "--depth", "1", "--prefix", "none"])
        .args(["--format", "{p}"])
        .output()
        .expect("running cargo tree");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut direct: Vec<&str> = text.lines().map(crate_name).filter(|n| *n != "rocefab-contracts").collect();
    direct.sort_unstable();
    direct.dedup();
    assert_eq!(direct, ["dataplane-common", "rocefab-wire", "serde", "serde_json", "thiserror"]);
}

#[test]
fn the_nic_agent_config_the_cli_writes_is_the_contract_type() {
    use std::any::TypeId;
    // The old paths are re-exports of the contract types, not copies that could drift apart.
    assert_eq!(
        TypeId::of::<gpu_host::nic::agent::AgentConfig>(),
        TypeId::of::<rocefab_contracts::agent::AgentConfig>()
    );
    assert_eq!(TypeId::of::<gpu_host::nic::agent::AgentNic>(), TypeId::of::<rocefab_contracts::agent::AgentNic>());
    assert_eq!(TypeId::of::<lldp_agent::Dcb>(), TypeId::of::<rocefab_contracts::dcb::Dcb>());
    // What `rocefab up` writes for a host (control's plan) is that type.
    let _: fn(
        &control::plan::HostPlan,
        &[control::plan::LinkPlan],
        &control::lldp::LldpSettings,
        std::net::SocketAddr,
    ) -> rocefab_contracts::agent::AgentConfig = control::plan::agent_config;
}

#[test]
fn the_host_daemons_do_not_depend_on_the_switch() {
    let t = tree("host-daemons");
    assert!(t.iter().any(|l| crate_name(l) == "rocefab-plumbing"), "{t:?}");
    assert!(!t.iter().any(|l| crate_name(l) == "dataplane-user"), "host-daemons depends on the switch crate");
}
