//! `rocefab prometheus-config` as a user runs it, on a fabric's run-directory state (no fabric
//! needs to run: the command reads `state.json` and the topology): promtool accepts what it
//! prints, it says clearly when the fabric is not up, and it ends quietly on a closed pipe.
//! `tests/tests/prometheus_live.rs` scrapes a live fabric with it.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rocefab_test_support::promtool::promtool_check_config;

const BIN: &str = env!("CARGO_BIN_EXE_rocefab");

/// A run directory base holding fabric `rs` (rail-spine.yaml) in state `phase`, with its four
/// switch daemons and four NIC agents.
fn run_dir(phase: &str) -> tempfile::TempDir {
    let base = tempfile::tempdir().unwrap();
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml");
    let daemon = |kind: &str, node: &str, port: u16| {
        serde_json::json!({ "kind": kind, "switch": node, "netns": format!("rf-rs-{node}"), "pid": 1,
                            "config": format!("/run/rocefab/rs/{node}.json"), "log": format!("/run/rocefab/rs/{node}.log"),
                            "metrics_url": format!("http://127.0.0.1:{port}/metrics") })
    };
    let mut daemons: Vec<_> =
        ["rail1", "rail2", "spine1", "spine2"].iter().zip(9400..).map(|(s, p)| daemon("switch", s, p)).collect();
    daemons.extend(["host1", "host2", "host3", "host4"].iter().zip(9404..).map(|(h, p)| daemon("host", h, p)));
    let st = serde_json::json!({ "fabric": "rs", "topology": topo, "phase": phase, "namespaces": [], "links": [],
                                 "daemons": daemons });
    std::fs::create_dir_all(base.path().join("rs")).unwrap();
    std::fs::write(base.path().join("rs/state.json"), st.to_string()).unwrap();
    base
}

fn rocefab(base: &Path, args: &[&str]) -> Output {
    Command::new(BIN).env("ROCEFAB_RUN_DIR", base).args(args).output().expect("run rocefab")
}

#[test]
fn promtool_accepts_the_configuration() {
    let base = run_dir("up");
    let o = rocefab(base.path(), &["prometheus-config", "--scrape-interval", "2s", "--hostd-port-base", "9800"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let file: PathBuf = base.path().join("prometheus.yml");
    std::fs::write(&file, &text).unwrap();
    promtool_check_config(&file);
    let c: serde_json::Value = yaml_serde::from_str(&text).unwrap();
    assert_eq!(c["global"]["scrape_interval"], "2s");
    let jobs = c["scrape_configs"].as_array().unwrap();
    let targets = |i: usize| -> Vec<&str> {
        jobs[i]["static_configs"].as_array().unwrap().iter().map(|s| s["targets"][0].as_str().unwrap()).collect()
    };
    assert_eq!(targets(0), ["127.0.0.1:9400", "127.0.0.1:9401", "127.0.0.1:9402", "127.0.0.1:9403"]);
    assert_eq!(targets(1), ["127.0.0.1:9404", "127.0.0.1:9405", "127.0.0.1:9406", "127.0.0.1:9407"]);
    assert_eq!(targets(2), ["127.0.0.1:9800", "127.0.0.1:9801", "127.0.0.1:9802", "127.0.0.1:9803"]);
    assert!(text.contains("--metrics-port-base 9800 (down between jobs)"), "{text}");
}

#[test]
fn a_fabric_that_is_not_up_is_a_clear_error() {
    let base = run_dir("creating");
    let o = rocefab(base.path(), &["prometheus-config", "rs"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("fabric rs is not up (its state is \"creating\")"), "{err}");
    let o = rocefab(base.path(), &["prometheus-config", "nope"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err.trim_end(),
        format!("rocefab: fabric nope is not up (no {})", base.path().join("nope/state.json").display())
    );
    let empty = tempfile::tempdir().unwrap();
    let o = rocefab(empty.path(), &["prometheus-config"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no fabric is running"), "{o:?}");
}

#[test]
fn a_closed_pipe_ends_it_quietly() {
    let base = run_dir("up");
    let mut child = Command::new(BIN)
        .env("ROCEFAB_RUN_DIR", base.path())
        .arg("prometheus-config")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!((child.wait().unwrap().code(), err.as_str()), (Some(0), ""));
}
