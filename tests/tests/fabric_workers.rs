//! Privileged: `rocefab up --switch-workers 2` runs every switch of rail-spine in one
//! `rocefab-switchd` process whose two worker threads drive their data planes. From the outside
//! each switch is what it was: its own namespace, ports, metrics listener, counters and log; jobs
//! cross the fabric verified; `rocefab fail switch` stops one switch inside the shared process
//! (the others and the process go on) and `rocefab restore switch` brings it back in a process
//! of its own; a job during which the shared process dies names its switches together;
//! `rocefab down` leaves no daemon behind.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::collections::BTreeSet;

use rocefab_tests::fabric::{failure, metric, rocefab, run_json, stdout, Fabric};
use rocefab_tests::proc::threads;
use serde_json::Value;

/// `rocefab status --json`'s switch daemons: (switch, pid, alive).
fn switch_daemons(f: &Fabric) -> Vec<(String, Option<u64>, bool)> {
    let o = rocefab(&["status", &f.name, "--json"]);
    assert!(o.status.success(), "rocefab status: {}", failure(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["switch"].as_str().unwrap().to_string(), d["pid"].as_u64(), d["alive"].as_bool().unwrap()))
        .collect()
}

/// A verified 4 MiB AllReduce over all 8 ranks (at D 1 on 2 cores the machine is the bottleneck:
/// a 2 s local ACK timeout, as the other fabric tests give it).
fn allreduce(f: &Fabric) {
    run_json(&[&f.name, "allreduce", "--size", "4MiB", "--timeout", "120", "--retransmit-timeout-ms", "2000"], 8);
}

#[test]
fn one_switch_process_runs_the_fabric_and_a_switch_fails_alone() {
    let f = Fabric::guard("rail-spine.yaml", "rfwk");
    let o = rocefab(&["up", f.topology.to_str().unwrap(), "--switch-workers", "2"]);
    assert!(o.status.success(), "rocefab up --switch-workers 2: {}", failure(&o));

    // One process for the four switches: two data-plane workers, a control thread each.
    let daemons = switch_daemons(&f);
    assert_eq!(daemons.len(), 4, "{daemons:?}");
    let pids: BTreeSet<Option<u64>> = daemons.iter().map(|d| d.1).collect();
    assert_eq!(pids.len(), 1, "the switches run in more than one process: {daemons:?}");
    assert!(daemons.iter().all(|d| d.2), "{daemons:?}");
    let pid = daemons[0].1.unwrap();
    let names = threads(pid as u32);
    let workers: Vec<&String> = names.iter().filter(|n| n.starts_with("dp-")).collect();
    assert_eq!(workers, ["dp-worker-0", "dp-worker-1"], "{names:?}");
    for sw in ["rail1", "rail2", "spine1", "spine2"] {
        assert!(names.contains(&format!("sw-{sw}")), "no control thread for {sw}: {names:?}");
    }

    // Each switch logs to its own file, as a process of its own would: its start-up and control
    // lines, and its data plane's from the worker; the process's own lines to switches.log.
    let dir = rocefab_tests::fabric::run_dir(&f.name);
    for sw in ["rail1", "rail2", "spine1", "spine2"] {
        let log = std::fs::read_to_string(dir.join(format!("{sw}.log"))).unwrap_or_default();
        assert!(log.contains(&format!("switch={sw}")) && log.contains("start-up 5/5"), "{sw}.log:\n{log}");
        assert_eq!(log.matches("data plane running").count(), 1, "{sw}.log:\n{log}");
        let others: Vec<&str> =
            log.lines().filter(|l| l.contains("switch=") && !l.contains(&format!("switch={sw}"))).collect();
        assert!(others.is_empty(), "{sw}.log has other switches' lines: {others:?}");
    }
    let process = std::fs::read_to_string(dir.join("switches.log")).unwrap_or_default();
    assert!(!process.contains("data plane running") && !process.contains("start-up"), "switches.log:\n{process}");

    // Jobs cross the rails through both spines, each switch counting its own frames.
    let up = |sw: &str| f.port_to("rail1", &format!("{sw}:eth1"));
    let (to1, to2) = (up("spine1"), up("spine2"));
    let tx = |port: &str| metric(&f.metrics("rail1"), "rocefab_port_tx_packets_total", &[("port", port)]);
    let rx_spine = |sw: &str| metric(&f.metrics(sw), "rocefab_port_rx_packets_total", &[("port", "eth1")]);
    let before = (tx(&to1), tx(&to2), rx_spine("spine1"), rx_spine("spine2"));
    allreduce(&f);
    let after = (tx(&to1), tx(&to2), rx_spine("spine1"), rx_spine("spine2"));
    assert!(after.0 - before.0 > 1000.0 && after.1 - before.1 > 1000.0, "rail1 to the spines: {before:?} {after:?}");
    // What rail1 sent to a spine, that spine received (LLDP aside: a few frames a second).
    for (sent, got) in [(after.0 - before.0, after.2 - before.2), (after.1 - before.1, after.3 - before.3)] {
        assert!((got - sent).abs() <= 10.0, "sent {sent}, received {got}");
    }

    // spine1 fails alone: its listener goes, the process and the others stay.
    let o = rocefab(&["fail", "switch", &f.name, "spine1"]);
    assert!(o.status.success(), "rocefab fail switch: {}", failure(&o));
    let daemons = switch_daemons(&f);
    for (sw, p, alive) in &daemons {
        if sw == "spine1" {
            assert_eq!((*p, *alive), (None, false), "{daemons:?}");
        } else {
            assert_eq!((*p, *alive), (Some(pid), true), "{daemons:?}");
        }
    }
    let names = threads(pid as u32);
    assert!(!names.contains(&"sw-spine1".to_string()) && names.contains(&"sw-spine2".to_string()), "{names:?}");
    assert!(rocefab_tests::http::get(f.config("spine1").metrics_listen, "/metrics").is_err(), "spine1 still serves");
    let before = tx(&to2);
    allreduce(&f);
    assert!(tx(&to2) - before > 2000.0, "the job did not go through spine2");

    // Back, in a process of its own; jobs cross it again.
    let o = rocefab(&["restore", "switch", &f.name, "spine1"]);
    assert!(o.status.success(), "rocefab restore switch: {}", failure(&o));
    let daemons = switch_daemons(&f);
    let spine1 = daemons.iter().find(|d| d.0 == "spine1").unwrap();
    assert!(spine1.2 && spine1.1.is_some() && spine1.1 != Some(pid), "{daemons:?}");
    let before = tx(&to1);
    allreduce(&f);
    assert!(tx(&to1) - before > 1000.0, "the job did not go through the restored spine1");

    // The shared process dies during a job: the job fails naming its three switches together
    // (spine1, in its own process since the restore, is not among them).
    let (r, _) = f.alltoall_killing("spine2", pid);
    let first = r["errors"][0].as_str().unwrap_or_default();
    let want = format!("switches rail1, rail2, spine2 (their shared rocefab-switchd, pid {pid}) died during the job");
    assert!(first.starts_with(&want), "the first error: {first}\nall: {:#}", r["errors"]);
    assert!(!r["errors"].to_string().contains("switch spine1"), "{:#}", r["errors"]);

    let o = rocefab(&["down", &f.name]);
    assert!(o.status.success(), "rocefab down: {}", failure(&o));
    for p in [Some(pid), spine1.1].into_iter().flatten() {
        // Gone, or a zombie left for its parent (it was started detached, `setsid`).
        let state = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let state = state.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("gone").to_string();
        assert!(["gone", "Z", "X"].contains(&state.as_str()), "switch daemon {p} outlived down (state {state})");
    }
}
