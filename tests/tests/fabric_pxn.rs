//! Privileged: PXN on a rail-only fabric (book ch. 13, "Cross-Rail Communication over NVLink"),
//! `topologies/rail-only-pxn.yaml`: 4 hosts x 4 GPUs, a switch per rail, no spines.
//!
//! With `hosts.pxn`, a verified 16-rank all-to-all and ring AllReduce run although no switch
//! joins two rails: a send to another rail crosses NVLink to the local GPU on the destination's
//! rail first (the report counts NVLink bytes), and no rail switch sees a frame for another rail
//! (their XDP route-miss counters stay at 0). Without PXN the same all-to-all's cross-rail frames
//! have no route: the switches count them as route misses and the job fails.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use rocefab_tests::fabric::{rocefab, stderr, stdout, Fabric};
use serde_json::Value;

const RAILS: [&str; 4] = ["rail1", "rail2", "rail3", "rail4"];

fn run(f: &Fabric, kind: &str) -> (bool, Value, String) {
    let o = rocefab(&["run", &f.name, kind, "--size", "256KiB", "--json", "--timeout", "60"]);
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap_or(Value::Null);
    (o.status.success(), r, stderr(&o))
}

#[test]
fn pxn_carries_cross_rail_traffic_over_nvlink_and_the_right_rail() {
    let f = Fabric::up("rail-only-pxn.yaml", "rfpx");
    let plan = rocefab(&["plan", f.topology.to_str().unwrap()]);
    assert!(stdout(&plan).contains("4 hosts x 4 GPUs, NVLink 3.6Tbps 1000 ns, PXN,"), "{}", stdout(&plan));
    // Route misses during the jobs (a host's own chatter at link-up is not the jobs').
    let before = f.metric_sum(&RAILS, "rocefab_xdp_route_miss_total", &[]);
    // What crosses NVLink, exactly: the 16 ranks (host h, GPU g = rank 4h + g) exchange chunks of
    // 256 KiB / 16 = 16 KiB. All-to-all: each rank's chunk for another GPU of its host goes over
    // NVLink (3 peers), and its chunk for a GPU of another rail on another host makes its NVLink
    // hop to the local GPU on that rail first (9 peers); the 3 peers on its own rail are reached
    // by the network alone. Ring AllReduce: rank r sends to r + 1 in each of 2 (N - 1) = 30 steps;
    // 12 of the 16 edges join GPUs of one host, the other 4 (GPU 3 of host h to GPU 0 of host
    // h + 1) change rail, so every edge crosses NVLink once.
    let chunk = 256 * 1024 / 16;
    for (kind, nvlink) in [("alltoall", 16 * (3 + 9) * chunk), ("allreduce", 16 * 30 * chunk)] {
        let (ok, r, err) = run(&f, kind);
        assert!(ok, "{kind}: {err}\n{r:#}");
        assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(16)), "{kind}: {r:#}");
        assert_eq!(r["nvlink_bytes"].as_u64(), Some(nvlink), "{kind}: NVLink bytes");
    }
    let misses = f.metric_sum(&RAILS, "rocefab_xdp_route_miss_total", &[]) - before;
    if misses != 0.0 {
        // What the switches saw: per-port misses, and any carrier change or group rewrite.
        for sw in RAILS {
            let m = f.metrics(sw);
            eprintln!(
                "{sw}: {}",
                m.lines().filter(|l| l.starts_with("rocefab_xdp_route_miss_total{")).collect::<Vec<_>>().join(" ")
            );
            let log = std::fs::read_to_string(rocefab_tests::fabric::run_dir(&f.name).join(format!("{sw}.log")))
                .unwrap_or_default();
            for l in log.lines().filter(|l| l.contains("carrier") || l.contains("group")) {
                eprintln!("{sw}: {l}");
            }
        }
    }
    assert_eq!(misses, 0.0, "frames for another rail during the jobs (before them: {before})");
    drop(f);

    // Without PXN the cross-rail sends have nowhere to go.
    let f = Fabric::up_replacing("rail-only-pxn.yaml", "rfpy", "  pxn: true", "  pxn: false");
    let (ok, r, err) = run(&f, "alltoall");
    assert!(!ok && r["ok"] != true, "a rail-only all-to-all without PXN verified: {r:#}");
    assert!(f.metric_sum(&RAILS, "rocefab_xdp_route_miss_total", &[]) > 0.0, "no route misses: {err}");
}
