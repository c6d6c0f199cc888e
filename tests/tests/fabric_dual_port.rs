//! Privileged: dual-port NICs (book ch. 13, Fig. 13-5), `topologies/dual-port.yaml`: each GPU's
//! NIC has two ports, one to each of the two switches of its rail, in separate subnets.
//!
//! A verified 8-rank all-to-all spreads every GPU's QPs over both ports (a GPU's k-th
//! connection takes port k % 2 at both ends): in the report each port carries QPs, no GPU's ports differ by more than
//! one QP, and both switches of every rail forward RoCEv2 from the hosts (their host ports count
//! at least a port's share of the job's packets).
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::collections::BTreeMap;

use rocefab_tests::fabric::{rocefab, stderr, stdout, Fabric};
use serde_json::Value;

const SWITCHES: [&str; 4] = ["rail1a", "rail1b", "rail2a", "rail2b"];

#[test]
fn a_dual_port_nic_spreads_its_qps_over_both_switches_of_its_rail() {
    let f = Fabric::up("dual-port.yaml", "rfdp");
    assert_eq!(f.port_to("rail1b", "host3:gpu0p1"), "eth3");
    let rx = |sw: &str| f.metric_sum(&[sw], "rocefab_port_rx_packets_total", &[]);
    let before: Vec<f64> = SWITCHES.iter().map(|s| rx(s)).collect();
    let o = rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--json", "--timeout", "120"]);
    assert!(o.status.success(), "rocefab run: {}\n{}", stdout(&o), stderr(&o));
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
