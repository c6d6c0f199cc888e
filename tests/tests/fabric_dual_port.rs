//! Privileged: dual-port NICs (book ch. 13, Fig. 13-5), `topologies/dual-port.yaml`: each GPU's
//! NIC has two ports, one to each of the two switches of its rail, in separate subnets.
//!
//! A verified 8-rank all-to-all spreads every GPU's QPs over both ports (a GPU's k-th
//! connection takes port k % 2 at both ends): in the report each port carries QPs, no GPU's ports differ by more than
//! one QP, and both switches of every rail forward RoCEv2 from the hosts (their host ports count
//! at least a port's share of the job's packets).
//!
//! A port cut during an all-to-all (`--fail-link host1:gpu0p0`) moves the QPs on it to the
//! other port (IBTA automatic path migration): host1's ends of them at once (their port lost
//! carrier), their peers when a frame with MigReq reaches them on the alternate path or when
//! their retries run out; nothing else moves, the job verifies, and tshark sees MigReq set on
//! the moved QPs' frames on the other switch, and on no other frame.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::collections::{BTreeMap, BTreeSet};

use rocefab_tests::capture::{start_rocefab_capture, stop_rocefab_capture};
use rocefab_tests::fabric::{failure, rocefab, stdout, Fabric};
use rocefab_tests::scratch::{file, temp_dir};
use rocefab_tests::tshark::fields as tshark;
use serde_json::Value;

const SWITCHES: [&str; 4] = ["rail1a", "rail1b", "rail2a", "rail2b"];

#[test]
fn a_dual_port_nic_spreads_its_qps_over_both_switches_of_its_rail() {
    let f = Fabric::up("dual-port.yaml", "rfdp");
    assert_eq!(f.port_to("rail1b", "host3:gpu0p1"), "eth3");
    let rx = |sw: &str| f.metric_sum(&[sw], "rocefab_port_rx_packets_total", &[]);
    let before: Vec<f64> = SWITCHES.iter().map(|s| rx(s)).collect();
    let o = rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--json", "--timeout", "120"]);
    assert!(o.status.success(), "rocefab run: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(8)), "{r:#}");

    // Requester QPs per (host, port).
    let mut per_port: BTreeMap<(String, String), u32> = BTreeMap::new();
    for q in r["qps"].as_array().unwrap() {
        *per_port.entry((q["host"].as_str().unwrap().into(), q["nic"].as_str().unwrap().into())).or_default() += 1;
    }
    assert_eq!(per_port.len(), 4 * 4, "every port of every host carries QPs: {per_port:?}");
    for h in 1..=4 {
        for g in 0..2 {
            let n = |p: u32| per_port[&(format!("host{h}"), format!("gpu{g}p{p}"))];
            assert!(n(0).abs_diff(n(1)) <= 1, "host{h} gpu{g}: {} and {} QPs", n(0), n(1));
        }
    }
    // Both switches of each rail forwarded the job: 1 MiB x 8 ranks x 7/8 over 4 switches
    // is ~1,800 1-KiB packets each, plus ACKs.
    for (i, s) in SWITCHES.iter().enumerate() {
        let d = rx(s) - before[i];
        assert!(d > 1_000.0, "{s} forwarded only {d} packets of the all-to-all");
    }
}

#[test]
fn a_port_cut_during_an_all_to_all_moves_its_qps_to_the_other_port() {
    // D = 32: the debug-built daemons of 4 hosts and 6 switches, and the capture of host1's two
    // ports, keep up with room to spare. At D = 1 the same job retransmits after spurious
    // timeouts. At D = 8 they keep up on an idle machine, but not when it slows down (seen in CI,
    // and every time with the fabric held to one CPU by a cgroup quota): rail1b's port to
    // host1:gpu0p1, which carries all of rank 0's traffic after the cut, then queues 7 MB (56 ms
    // at 1 Gbit/s) because hostd drains it late on the wall clock, the ACKs behind that queue
    // come after the 12.5 ms timeout, go-back-N resends fill it further, and healthy QPs run out
    // of retries. Held to one CPU the test failed 1 run in 4 at D = 16 and none in 10 at D = 32
    // (nor 3 of 3 held to 0.7 CPU).
    const D: u64 = 32;
    let f = Fabric::up_with("dual-port.yaml", "rfdm", &format!("time_dilation: {D}\n"));
    let (dead, alive) = (f.port_to("rail1a", "host1:gpu0p0"), f.port_to("rail1b", "host1:gpu0p1"));
    let dir = temp_dir("rocefab-test-rfdm-");
    let out = file(&dir, "ports.pcapng");
    let cap = start_rocefab_capture(&out, &[&f.name, &format!("rail1a:{dead},rail1b:{alive}")]);
    let o = rocefab(&[
        "run",
        &f.name,
        "alltoall",
        "--size",
        "4MiB",
        "--json",
        "--timeout",
        "120",
        "--fail-link",
        "host1:gpu0p0",
        "--fail-at",
        "3ms",
    ]);
    stop_rocefab_capture(cap);
    assert!(o.status.success(), "rocefab run: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(8)), "{r:#}");
    let cut = r["failover"]["cut_at_ns"].as_u64().unwrap();

    let moved: Vec<&Value> = r["migrations"].as_array().unwrap().iter().collect();
    let key = |m: &Value| (m["host"].as_str().unwrap().to_string(), m["qpn"].as_u64().unwrap());
    let migration = |host: &str, qpn: u64| moved.iter().find(|m| key(m) == (host.to_string(), qpn));
    // Where each requester was before the cut: where it is, or where it moved from.
    let was_on = |q: &Value| {
        let host = q["host"].as_str().unwrap();
        migration(host, q["qpn"].as_u64().unwrap())
            .map_or_else(|| q["nic"].as_str().unwrap().to_string(), |m| m["from_nic"].as_str().unwrap().into())
    };
    // The QP ends host1's gpu0p0 carried (a connection keeps one port index at both ends): rank
    // 0's requesters on it, and its responders to the requesters on port 0 that write to it.
    let mut on_port = BTreeSet::new();
    let mut peers = BTreeSet::new();
    for q in r["qps"].as_array().unwrap() {
        let (host, label) = (q["host"].as_str().unwrap(), q["label"].as_str().unwrap());
        let (qpn, peer) = (q["qpn"].as_u64().unwrap(), q["peer_qpn"].as_u64().unwrap());
        if host == "host1" && label.starts_with("rank 0 ->") && was_on(q) == "gpu0p0" {
            on_port.insert(("host1".to_string(), qpn));
            peers.insert(peer);
        }
        if label.ends_with("-> rank 0") && was_on(q).ends_with("p0") {
            on_port.insert(("host1".to_string(), peer));
            peers.insert(qpn);
        }
    }
    assert_eq!(on_port.len(), 8, "rank 0 has 7 connections each way, 4 of each on port 0: {on_port:?}");
    let link_down: BTreeSet<_> = moved.iter().filter(|m| m["cause"] == "link_down").map(|m| key(m)).collect();
    assert_eq!(link_down, on_port, "exactly the QP ends on the cut port lost carrier: {moved:#?}");
    for m in moved.iter().filter(|m| m["cause"] == "link_down") {
        assert_eq!((m["from_nic"].as_str(), m["to_nic"].as_str()), (Some("gpu0p0"), Some("gpu0p1")));
        let at = m["at_ns"].as_u64().unwrap();
        eprintln!("{:?} moved {} ns (emulated) after the cut", key(m), at as i64 - cut as i64);
        // The cut sets both ends down at once (in-process), then hostd reads the notification
        // (every 1 ms of wall clock while busy): well under 100 ms of wall clock, 3.125 ms
        // emulated. The report puts the hosts' migrations on the injection's clock (each host's
        // own starts when it hears the go: 0.65 ms of wall clock after the injection's in a CI
        // run, when a QP seemed to move 20 µs emulated before the cut).
        assert!((cut..cut + 100_000_000 / D).contains(&at), "moved at {at} ns, cut at {cut} ns");
    }
    // Each moved QP's other end followed, by MigReq or by running out of retries (those whose
    // host1 end only answers), and nothing else moved.
    let others: Vec<&&Value> = moved.iter().filter(|m| m["cause"] != "link_down").collect();
    assert_eq!(others.len(), on_port.len(), "{moved:#?}");
    for m in &others {
        assert!(peers.contains(&m["qpn"].as_u64().unwrap()), "a QP moved that was not on the cut port: {m:#}");
        assert!(["peer_migrated", "retry_exhausted"].contains(&m["cause"].as_str().unwrap()), "{m:#}");
        let (from, to) = (m["from_nic"].as_str().unwrap(), m["to_nic"].as_str().unwrap());
        assert!(from.ends_with("p0") && to == format!("{}p1", &from[..from.len() - 2]), "{m:#}");
    }
    assert!(others.iter().any(|m| m["cause"] == "peer_migrated"), "rank 0's writes carried MigReq: {moved:#?}");
    // Every requester of rank 0 ends on gpu0p1.
    for q in r["qps"].as_array().unwrap().iter().filter(|q| q["label"].as_str().unwrap().starts_with("rank 0 ->")) {
        assert_eq!(q["nic"], "gpu0p1", "{q:#}");
    }

    // On the wire (tshark): MigReq only on the moved QPs' frames, all of them through host1's
    // other port; the cut port never carried one.
    let frames = tshark(&out, "infiniband", &["frame.interface_name", "infiniband.bth.m", "infiniband.bth.destqp"]);
    let with_m: Vec<&Vec<String>> = frames.iter().filter(|f| f[1] == "1" || f[1] == "True").collect();
    assert!(!with_m.is_empty(), "no frame with MigReq among {} RoCEv2 frames", frames.len());
    assert!(with_m.iter().all(|f| f[0] == format!("rail1b:{alive}")), "MigReq seen on the cut port: {with_m:?}");
    let qpns: BTreeSet<u64> = on_port.iter().map(|(_, q)| *q).chain(peers.iter().copied()).collect();
    for f in &with_m {
        let q = u64::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap_or_else(|_| f[2].parse().unwrap());
        assert!(qpns.contains(&q), "MigReq on a frame to QP {q:#x}, which did not move");
    }
    assert!(
        frames.iter().any(|f| f[0] == format!("rail1a:{dead}") && f[1] != "1" && f[1] != "True"),
        "the cut port carried the job before the cut"
    );

    // Restored after the job: the port has its routes again (the kernel flushed them when it went
    // down), so host1's kernel reaches host2's GPU 1 from it, through rail1a and a spine.
    let table = f.exec("host1", &["ip", "route", "show", "table", "101"]);
    assert!(stdout(&table).contains("default via 10.0.1.254 dev gpu0p0"), "{}", stdout(&table));
    // (Without them the kernel found a way out of another port: gpu1p0's route in the main table.)
    let via = f.exec("host1", &["ip", "route", "get", "10.0.3.2", "from", "10.0.1.1"]);
    assert!(stdout(&via).contains("via 10.0.1.254 dev gpu0p0"), "{}", stdout(&via));
    let ping = f.exec("host1", &["ping", "-c", "1", "-W", "2", "-I", "10.0.1.1", "10.0.3.2"]);
    assert!(ping.status.success(), "ping from the restored port: {}", failure(&ping));
    // And the same job uses both ports of every GPU again.
    let o = rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--json", "--timeout", "120"]);
    assert!(o.status.success(), "rocefab run after the restore: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["migrations"], serde_json::json!([]), "{r:#}");
    assert!(r["qps"].as_array().unwrap().iter().any(|q| q["host"] == "host1" && q["nic"] == "gpu0p0"), "{r:#}");
}
