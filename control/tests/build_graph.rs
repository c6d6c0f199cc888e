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
    for pure in [
        "gpu-host",
        "switch-model",
        "rocefab-contracts",
        "rocefab-wire",
        "lldp-agent",
        "rocefab-units",
        "rocefab-model",
    ] {
        let t = tree(pure);
        let bad: Vec<&String> =
            t.iter().filter(|l| FORBIDDEN.contains(&crate_name(l)) || crate_name(l) == "rocefab-plumbing").collect();
        assert!(bad.is_empty(), "{pure} depends on {bad:?}");
    }
}

#[test]
fn the_contracts_are_plain_serde_types() {
    // What daemons and CLI exchange (configs, the NIC agent's config and its DCBX settings, jobs,
    // reports, streams) needs serde, the frame vocabulary and the eBPF ABI constants, and libc
    // for the one clock reading of the data path's clock (`time::MonoClock`), nothing else: no
    // agent, model, runtime or metrics crate.
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
    assert_eq!(direct, ["dataplane-common", "libc", "rocefab-wire", "serde", "serde_json", "thiserror"]);
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

/// The top-level modules of the crate in `src` that each imports (`crate::m`, `crate::{m, ..}`,
/// and `super::m` from a file directly under `src`), from the code outside comments and
/// `#[cfg(test)]` sections: module -> the modules it imports.
fn module_imports(src: &std::path::Path) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    files(src, &mut all);
    let module = |p: &std::path::Path| {
        let rel = p.strip_prefix(src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        first.trim_end_matches(".rs").to_string()
    };
    let names: std::collections::BTreeSet<String> =
        all.iter().map(|p| module(p)).filter(|m| m != "lib" && m != "main" && m != "bin").collect();
    let mut graph: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for p in &all {
        let from = module(p);
        if !names.contains(&from) {
            continue;
        }
        let text = std::fs::read_to_string(p).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let top_level = p.parent() == Some(src);
        let edges = graph.entry(from.clone()).or_default();
        for line in code.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
            let mut take = |rest: &str| {
                let group = rest.strip_prefix('{').map(|g| g.split('}').next().unwrap_or(""));
                let heads: Vec<&str> = match group {
                    Some(g) => g.split(',').collect(),
                    None => vec![rest],
                };
                for h in heads {
                    let name: String = h.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if names.contains(&name) && name != from {
                        edges.insert(name);
                    }
                }
            };
            for (i, _) in line.match_indices("crate::") {
                take(&line[i + "crate::".len()..]);
            }
            if top_level {
                for (i, _) in line.match_indices("super::") {
                    take(&line[i + "super::".len()..]);
                }
            }
        }
    }
    graph
}

/// A circle in `graph`, if there is one (the modules on it, the first repeated at the end).
fn a_circle(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        m: &str,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for n in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(g, n, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = Default::default();
    graph.keys().find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

/// Issue 40: no two modules of a crate import each other, directly or round a circle (the CLI
/// had two: capture <-> replay <-> replay_rx, and fabric -> fail -> fabric through the route
/// convergence and the daemon HTTP client).
#[test]
fn no_module_of_any_crate_imports_round_a_circle() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crates = 0;
    for e in std::fs::read_dir(&root).unwrap() {
        let src = e.unwrap().path().join("src");
        if !src.join("lib.rs").exists() && !src.join("main.rs").exists() {
            continue;
        }
        crates += 1;
        let g = module_imports(&src);
        assert!(
            a_circle(&g).is_none(),
            "{}: modules importing round a circle: {:?}",
            src.display(),
            a_circle(&g).unwrap()
        );
    }
    assert!(crates >= 15, "found only {crates} crates under {}", root.display());
    // The check itself: the CLI's modules import each other, and a circle is found.
    let cli = module_imports(&root.join("control/src"));
    assert!(cli["cmd"].contains("fabric") && cli["job"].contains("fabric"), "{cli:?}");
    let mut with_circle = cli.clone();
    with_circle.get_mut("fabric").unwrap().insert("cmd".into());
    assert!(a_circle(&with_circle).is_some());
}

/// The CLI's layers (issue 40), from the bottom: the shared text parsers and formatters, and the
/// worker layouts (`workers`: `--switch-workers`, `--host-workers`); the
/// running fabric (`fabric/`: state, daemons, links, routing, captures, the cabling check);
/// what runs on a fabric (`job/`, `replay/`); the subcommands (`cmd/`). Each module imports
/// only from layers below its own, so nothing in `fabric/` knows a command or a job.
const CLI_LAYERS: &[&[&str]] = &[&["text", "pipe", "progress", "workers"], &["fabric"], &["job", "replay"], &["cmd"]];

/// The arrows of `graph` that do not run down the layers: (from, to).
fn against_the_layers(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<(String, String)> {
    let layer = |m: &str| CLI_LAYERS.iter().position(|l| l.contains(&m));
    let mut bad = Vec::new();
    for (from, to) in graph.iter().flat_map(|(f, ts)| ts.iter().map(move |t| (f, t))) {
        match (layer(from), layer(to)) {
            (Some(a), Some(b)) if a > b => {}
            _ => bad.push((from.clone(), to.clone())),
        }
    }
    bad
}

#[test]
fn the_cli_imports_only_down_its_layers() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = module_imports(&src);
    let unplaced: Vec<&String> = g.keys().filter(|m| !CLI_LAYERS.iter().any(|l| l.contains(&m.as_str()))).collect();
    assert!(unplaced.is_empty(), "modules of control/src on no layer: {unplaced:?}");
    let bad = against_the_layers(&g);
    assert!(bad.is_empty(), "imports that do not run down the layers {CLI_LAYERS:?}: {bad:?}");
    // The check itself: an import from the fabric up to a command is caught.
    let mut up = g.clone();
    up.get_mut("fabric").unwrap().insert("cmd".into());
    assert_eq!(against_the_layers(&up), [("fabric".to_string(), "cmd".to_string())]);
}
