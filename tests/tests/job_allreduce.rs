//! `rocefab run` on the rail-spine fabric (4 hosts × 2 GPUs, rails through rail switches and
//! spines): a ring AllReduce across all 8 GPUs with one `rocefab-hostd` per host namespace,
//! verified data, a JSON report and per-host Prometheus metrics while it runs. The fabric
//! (`rf-hjt-*` namespaces) is brought down by the guard, also on failure.
//!
//! Build first, then run as root:
//! `cargo build -p control -p dataplane-user -p host-daemons &&
//!  cargo test -p rocefab-tests --test job_allreduce -- --test-threads=1`
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocefab_tests::fabric::{failure, pids_with_cmdline, rocefab, run_json, stderr, stdout, Fabric};
use serde_json::Value;

const METRICS_BASE: u16 = 9780;

/// host's `/metrics` on the loopback port, while it answers.
fn get(port: u16) -> Option<String> {
    rocefab_tests::http::get(([127, 0, 0, 1], port).into(), "/metrics").ok()
}

/// Per-rank buffer of the AllReduce test: the size issue 4's "done when" names.
const ALLREDUCE_MIB: u64 = 64;

#[test]
fn job_ring_allreduce_on_rail_spine_completes_with_verified_data() {
    let f = Fabric::up("rail-spine.yaml", "hjt");

    // Scrape host1's metrics while the job runs (the hostds serve them only meanwhile).
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let scraper = std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(200);
        let mut last = None;
        while !stop2.load(Ordering::Relaxed) && Instant::now() < end {
            if let Some(t) = get(METRICS_BASE) {
                if t.contains("rocefab_host_qp_packets_sent_total") {
                    last = Some(t);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        last
    });
    let port = METRICS_BASE.to_string();
    let size = format!("{ALLREDUCE_MIB}MiB");
    let o = rocefab(&[
        "run",
        &f.name,
        "allreduce",
        "--size",
        &size,
        "--json",
        "--timeout",
        "150",
        "--metrics-port-base",
        &port,
    ]);
    stop.store(true, Ordering::Relaxed);
    let scraped = scraper.join().unwrap();
    assert!(o.status.success(), "rocefab run failed: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("JSON report: {e}\n{}", stdout(&o)));

    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(r["collective"], "allreduce");
    assert_eq!(r["ranks"], 8, "4 hosts × 2 GPUs");
    assert_eq!(r["verified_ranks"], 8, "every rank holds the element-wise sum of all inputs");
    assert!(r["completion_ns"].as_u64().unwrap() > 0);
    let qps = r["qps"].as_array().unwrap();
    assert_eq!(qps.len(), 8, "one ring connection per rank");
    for (i, q) in qps.iter().enumerate() {
        // Rank i (host i/2 + 1, gpu i%2) sends to rank i+1: torchrun numbering.
        assert_eq!(q["label"], format!("rank {i} -> rank {}", (i + 1) % 8));
        assert_eq!(q["host"], format!("host{}", i / 2 + 1));
        assert_eq!(q["nic"], format!("gpu{}", i % 2));
        // 2(N−1) chunks of 1/N of the buffer: size × 14/8.
        assert_eq!(q["bytes"], ALLREDUCE_MIB * 1024 * 1024 * 14 / 8);
        assert!(q["goodput_bps"].as_f64().unwrap() > 0.0);
        assert!(q["retransmitted_packets"].is_u64() && q["cnps_received"].is_u64());
    }
    assert_eq!(r["nics"].as_array().unwrap().len(), 8);
    assert!(r["nics"].as_array().unwrap().iter().all(|n| n["pfc_paused_ns"].is_u64()));

    let m = scraped.expect("host1's metrics endpoint never answered while the job ran");
    assert!(m.contains("rocefab_host_qp_packets_sent_total{label=\"rank 0 -> rank 1\""), "{m}");
    assert!(m.contains("rocefab_host_nic_pfc_paused_seconds_total{nic=\"gpu0\""), "{m}");

    // The job leaves no emulator behind.
    let left = pids_with_cmdline(&format!("/run/rocefab/{}/jobs", f.name));
    assert!(left.is_empty(), "hostd processes left: {left:?}");
}

#[test]
fn job_incast_alltoall_and_broadcast_on_rail_spine_verify_every_rank() {
    let f = Fabric::up("rail-spine.yaml", "hjc");
    for (c, conns) in [("incast", 7), ("alltoall", 56), ("broadcast", 7)] {
        let r = run_json(&[&f.name, c, "--size", "1MiB", "--timeout", "120", "--metrics-port-base", "9790"], 8);
        assert_eq!(r["qps"].as_array().unwrap().len(), conns, "{c}: connections");
    }
}

#[test]
fn job_run_on_a_fabric_that_is_not_up_fails_clearly() {
    let o = rocefab(&["run", "hjnope", "allreduce", "--size", "1MiB"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("fabric \"hjnope\" is not up"), "{e}");
    let o = rocefab(&["run", "hjnope", "allreduce", "--size", "12XB"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unknown size unit \"XB\""), "{}", stderr(&o));
}
