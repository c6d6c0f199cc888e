//! Issue 42 (Ultra Ethernet Transport on real frames), on the rail-spine fabric with its default
//! flow ECMP: the switches hash the UDP source port, and a UET NIC puts a different entropy
//! there per packet, so every packet of a PDC may take either spine.
//!
//! - `uet_alltoall_sprays_every_packet_by_entropy`: a UET all-to-all is verified with more
//!   than 10 % of its packets out of order, no retransmission, and each rail switch's two
//!   uplinks within 5 % of each other in bytes; then AllReduce, incast and broadcast over UET,
//!   all verified.
//! - `uet_with_one_entropy_per_pdc_keeps_each_pdc_on_one_path`: the same all-to-all with one
//!   entropy per PDC (`--uet-entropy pdc`) has nothing out of order, so the reordering above
//!   comes from the per-packet entropy.
//!
//! The local ACK timeout is 2 s (as in fabric_spray_reorder): a busy 2-core machine can hold
//! an ACK back longer than hostd's 100 ms, and a timeout's retransmission would have nothing to
//! do with the transport. The fabric (`rf-huet*` namespaces) is brought down by its guard.
//!
//! Build first, then run as root:
//! `cargo build -p control -p dataplane-user -p host-daemons &&
//!  cargo test -p rocefab-tests --test fabric_uet -- --test-threads=1`
use rocefab_tests::fabric::{failure, metric, rocefab, stdout, Fabric};
use serde_json::Value;

/// Runs `kind` of `size` per rank over UET with `extra` arguments; the JSON report, asserting
/// every rank verified.
fn run(f: &Fabric, kind: &str, size: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "run",
        &f.name,
        kind,
        "--size",
        size,
        "--transport",
        "uet",
        "--json",
        "--timeout",
        "120",
        "--metrics-port-base",
        "9830",
        "--retransmit-timeout-ms",
        "2000",
    ];
    args.extend_from_slice(extra);
    let o = rocefab(&args);
    assert!(o.status.success(), "rocefab run {kind} --transport uet failed: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("JSON report: {e}\n{}", stdout(&o)));
    assert_eq!(
        (r["ok"].as_bool(), r["verified_ranks"].as_u64(), r["transport"].as_str()),
        (Some(true), Some(8), Some("uet")),
        "{kind}: every rank verified over UET: {r:#}"
    );
    r
}

/// Data packets of a report: every requester's bytes in packets of the 1024-byte path MTU.
fn packets(r: &Value) -> u64 {
    r["qps"].as_array().unwrap().iter().map(|q| q["bytes"].as_u64().unwrap().div_ceil(1024)).sum()
}

/// `switch`'s ports towards the spines.
fn uplinks(f: &Fabric, switch: &str) -> Vec<String> {
    let c = f.config(switch);
    let up: Vec<String> = c.ports.iter().filter(|p| p.peer.starts_with("spine")).map(|p| p.name.clone()).collect();
    assert_eq!(up.len(), 2, "{switch} has two uplinks: {up:?}");
    up
}

fn tx_bytes(f: &Fabric, switch: &str, ports: &[String]) -> Vec<f64> {
    let t = f.metrics(switch);
    ports.iter().map(|p| metric(&t, "rocefab_port_tx_bytes_total", &[("port", p)])).collect()
}

#[test]
fn uet_alltoall_sprays_every_packet_by_entropy() {
    let f = Fabric::up("rail-spine.yaml", "huet");
    let rails = ["rail1", "rail2"];
    let up: Vec<Vec<String>> = rails.iter().map(|s| uplinks(&f, s)).collect();
    let before: Vec<Vec<f64>> = rails.iter().zip(&up).map(|(s, u)| tx_bytes(&f, s, u)).collect();
    let r = run(&f, "alltoall", "4MiB", &[]);
    let (ooo, n) = (r["out_of_order_packets"].as_u64().unwrap(), packets(&r));
    eprintln!("UET all-to-all: {ooo} of {n} packets out of order");
    // Half the pairs cross the spines (rank 2h on rail1, 2h + 1 on rail2), and about half of
    // their packets overtake or are overtaken on the other spine.
    assert!(ooo * 10 > n, "only {ooo} of {n} packets out of order: {r:#}");
    assert_eq!(r["retransmitted_packets"], 0, "{r:#}");
    assert_eq!(r["uet"]["retransmitted_on_timeout"], 0, "{r:#}");
    for (i, s) in rails.iter().enumerate() {
        let after = tx_bytes(&f, s, &up[i]);
        let b: Vec<f64> = after.iter().zip(&before[i]).map(|(a, b)| a - b).collect();
        let spread = (b[0] - b[1]).abs() / b[0].max(b[1]);
        eprintln!("{s}: uplink bytes {b:?}, spread {:.2} %", spread * 100.0);
        // 4 MiB per rank: each rail sends 4 ranks x 4 peers on the other rail x 512 KiB.
        assert!(b.iter().sum::<f64>() >= 8.0 * 1024.0 * 1024.0, "{s}: uplinks carried only {b:?}");
        assert!(spread <= 0.05, "{s}: uplinks differ by {:.1} %: {b:?}", spread * 100.0);
    }
    for kind in ["allreduce", "incast", "broadcast"] {
        let r = run(&f, kind, "1MiB", &[]);
        eprintln!("UET {kind}: {} out of order", r["out_of_order_packets"]);
    }
}

#[test]
fn uet_with_one_entropy_per_pdc_keeps_each_pdc_on_one_path() {
    let f = Fabric::up("rail-spine.yaml", "huet2");
    let r = run(&f, "alltoall", "1MiB", &["--uet-entropy", "pdc"]);
    assert_eq!(r["out_of_order_packets"], 0, "one path per PDC: {r:#}");
}
