//! Privileged: a cut spine link during an AllReduce on rail-spine with static routing (book
//! ch. 10-11).
//!
//! `rocefab fail link rail1:<port to spine1>` takes both ends down while the job's frames cross
//! it. Both switches see the carrier go (their `rocefab_port_carrier` gauge), rewrite their ECMP
//! groups without the port (`rocefab_route_updates_total`), and send nothing more on it: from
//! the moment the command returns, rail1's port transmits at most what was already queued, while
//! the job still completes with verified data over the other spine, and its report lists the
//! failure. `rocefab restore link` puts the port back in the groups and a second job uses it
//! again; `rocefab events` lists both, in emulated and wall-clock time.
//!
//! `rocefab routes` shows every switch's data path equal to static routing's computation without
//! the cut link.
//!
//! A PFC storm from a NIC (`rocefab fail nic host2:gpu0 --pfc-storm --for 1s`): rail1's PFC
//! watchdog on the port to host2 detects it and restores the queue after it, rail1 passes no
//! pause on to any other port (the storm stays contained), and the event log has its start and
//! end.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.

use std::time::{Duration, Instant};

use rocefab_tests::fabric::{metric, rocefab, stderr, stdout, Fabric};
use serde_json::Value;

#[test]
fn a_cut_spine_link_leaves_the_ecmp_groups_and_the_allreduce_completes() {
    let f = Fabric::up("rail-spine.yaml", "rffl");
    let up1 = f.port_to("rail1", "spine1:eth1");
    let down1 = f.port_to("spine1", &format!("rail1:{up1}"));
    let at = |sw: &str, name: &str, port: &str| metric(&f.metrics(sw), name, &[("port", port)]);
    let updates = |sw: &str| metric(&f.metrics(sw), "rocefab_route_updates_total", &[]);
    assert_eq!((at("rail1", "rocefab_port_carrier", &up1), updates("rail1"), updates("spine1")), (1.0, 0.0, 0.0));

    let job = rocefab_tests::fabric::allreduce_crossing(&f, &up1);
    let o = rocefab(&["fail", "link", &f.name, &format!("rail1:{up1}")]);
    assert!(o.status.success(), "rocefab fail link: {}\n{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("link rail1:{up1} -- spine1:{down1} down")), "{out}");
    assert!(out.contains(&format!("rail1:{up1} saw the carrier loss after")), "{out}");
    assert!(out.contains(&format!("spine1:{down1} saw the carrier loss after")), "{out}");
    let tx_at_fail = at("rail1", "rocefab_port_tx_packets_total", &up1);
    assert_eq!(at("rail1", "rocefab_port_carrier", &up1), 0.0);
    assert_eq!(at("spine1", "rocefab_port_carrier", &down1), 0.0);
    // rail1's groups toward the other rail (via both spines) lost a member; spine1's group
    // toward rail1 lost its only one.
    assert!(updates("rail1") >= 1.0 && updates("spine1") >= 1.0, "{} {}", updates("rail1"), updates("spine1"));

    // Every switch's data path holds what static routing computes without the link: rail1 and
    // rail2 reach each other through spine2 only.
    let o = rocefab(&["routes", &f.name, "--json"]);
    assert!(o.status.success(), "rocefab routes: {}", stderr(&o));
    let held: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(held.len(), 4);
    for sw in &held {
        for r in sw["routes"].as_array().unwrap() {
            assert_eq!(r["data_path"], r["computed"], "{}: {r}", sw["switch"]);
        }
    }
    let rail1 = held.iter().find(|s| s["switch"] == "rail1").unwrap();
    let to_rail2 = rail1["routes"].as_array().unwrap().iter().find(|r| r["prefix"] == "10.0.2.0/24").unwrap();
    assert_eq!(to_rail2["data_path"], serde_json::json!(["spine2:eth1"]));

    let done = job.wait_with_output().unwrap();
    assert!(done.status.success(), "rocefab run: {}\n{}", stdout(&done), stderr(&done));
    let r: Value = serde_json::from_str(&stdout(&done)).unwrap();
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(8)), "{r:#}");
    let events = r["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e.as_str().unwrap().contains("link down rail1:")), "{events:?}");
    // Nothing new was sent on the cut link after the switch took it out of its groups (a frame
    // or two already handed to the port's ring may still count).
    let after = at("rail1", "rocefab_port_tx_packets_total", &up1);
    assert!(after - tx_at_fail <= 2.0, "rail1 sent {} frames on the cut link", after - tx_at_fail);

    // Back: the groups take the port again, and a job crosses it.
    let before = updates("rail1");
    let o = rocefab(&["restore", "link", &f.name, &format!("spine1:{down1}")]);
    assert!(o.status.success(), "rocefab restore link: {}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(&format!("link rail1:{up1} -- spine1:{down1} up")), "{}", stdout(&o));
    assert!(updates("rail1") > before);
    assert_eq!(at("rail1", "rocefab_port_carrier", &up1), 1.0);
    let tx = at("rail1", "rocefab_port_tx_packets_total", &up1);
    let o =
        rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--timeout", "120", "--retransmit-timeout-ms", "2000"]);
    assert!(o.status.success(), "rocefab run: {}\n{}", stdout(&o), stderr(&o));
    assert!(at("rail1", "rocefab_port_tx_packets_total", &up1) > tx + 100.0, "the restored link carries traffic again");

    let o = rocefab(&["events", &f.name, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = log.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["link down", "link up"]);
    assert!(log[0]["emulated_ns"].as_u64().unwrap() < log[1]["emulated_ns"].as_u64().unwrap());
    assert!(log.iter().all(|e| e["target"] == format!("rail1:{up1} -- spine1:{down1}")), "{log:?}");
}

#[test]
fn a_pfc_storm_from_a_nic_is_detected_and_contained() {
    let f = Fabric::up("rail-spine.yaml", "rfst");
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let prio = [("port", to_h2.as_str()), ("priority", "3")];
    let pfc_tx = |sw: &str| f.metric_sum(&[sw], "rocefab_pfc_tx_frames_total", &[]);
    let (rail1_tx, spine_tx) = (pfc_tx("rail1"), pfc_tx("spine1") + pfc_tx("spine2"));
    let m = f.metrics("rail1");
    assert_eq!(metric(&m, "rocefab_pfcwd_storms_total", &prio), 0.0);

    let o = rocefab(&["fail", "nic", &f.name, "host2:gpu0", "--pfc-storm", "--for", "1s"]);
    assert!(o.status.success(), "rocefab fail nic: {}\n{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    // 1 Gbit/s: 65535 quanta are 33.6 ms; refreshed every 10 ms (half of that, at most 10 ms) for
    // 1 s: 100 frames.
    let sent: f64 = out
        .split("over: ")
        .nth(1)
        .and_then(|x| x.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!((95.0..=101.0).contains(&sent), "{out}");
    let m = f.metrics("rail1");
    assert!(metric(&m, "rocefab_pfc_rx_frames_total", &prio) >= sent - 2.0, "rail1 received the storm");
    assert_eq!(metric(&m, "rocefab_pfcwd_storms_total", &prio), 1.0, "the watchdog saw one storm");
    // Contained: neither rail1 nor the spines sent any PFC frame.
    assert_eq!((pfc_tx("rail1"), pfc_tx("spine1") + pfc_tx("spine2")), (rail1_tx, spine_tx));
    // The queue comes back once the pauses have stopped.
    let t0 = Instant::now();
    while metric(&f.metrics("rail1"), "rocefab_pfcwd_restores_total", &prio) < 1.0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "no restore within 5 s of the storm's end");
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = rocefab(&["events", &f.name, "--json"]);
    let kinds: Vec<String> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["pfc storm start", "pfc storm end"]);
}

/// `rocefab fail switch spine1` during an AllReduce: its cables go dark, its daemon stops, the
/// routes without it go to the other switches, and the job completes verified over spine2.
/// `rocefab restore switch` starts its daemon again with its cables and routes, and the next job
/// crosses it.
#[test]
fn a_failed_spine_is_routed_around_and_comes_back() {
    let f = Fabric::up("rail-spine.yaml", "rfsw");
    let up1 = f.port_to("rail1", "spine1:eth1");
    let at = |sw: &str, name: &str, port: &str| metric(&f.metrics(sw), name, &[("port", port)]);
    let job = rocefab_tests::fabric::allreduce_crossing(&f, &up1);
    let o = rocefab(&["fail", "switch", &f.name, "spine1"]);
    assert!(o.status.success(), "rocefab fail switch: {}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("switch spine1 down: daemon stopped, 2 links dark"), "{}", stdout(&o));
    let spine1d = || {
        let config = format!("{}/spine1.json", rocefab_tests::fabric::run_dir(&f.name).display());
        rocefab_tests::fabric::pids_with_cmdline(&config).len()
    };
    assert_eq!(spine1d(), 0, "spine1's daemon is gone");
    assert_eq!(at("rail1", "rocefab_port_carrier", &up1), 0.0);
    let done = job.wait_with_output().unwrap();
    assert!(done.status.success(), "rocefab run: {}\n{}", stdout(&done), stderr(&done));
    let r: Value = serde_json::from_str(&stdout(&done)).unwrap();
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(8)), "{r:#}");
    assert!(r["events"].as_array().unwrap().iter().any(|e| e.as_str().unwrap().contains("switch down spine1")));

    let o = rocefab(&["restore", "switch", &f.name, "spine1"]);
    assert!(o.status.success(), "rocefab restore switch: {}\n{}", stdout(&o), stderr(&o));
    assert_eq!(spine1d(), 1, "spine1's daemon is back");
    assert_eq!((at("rail1", "rocefab_port_carrier", &up1), at("spine1", "rocefab_port_carrier", "eth1")), (1.0, 1.0));
    let tx = at("rail1", "rocefab_port_tx_packets_total", &up1);
    let o =
        rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--timeout", "120", "--retransmit-timeout-ms", "2000"]);
    assert!(o.status.success(), "rocefab run: {}\n{}", stdout(&o), stderr(&o));
    assert!(at("rail1", "rocefab_port_tx_packets_total", &up1) > tx + 100.0, "spine1 carries traffic again");
    let o = rocefab(&["events", &f.name, "--json"]);
    let kinds: Vec<String> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["switch down", "switch up"]);
}
