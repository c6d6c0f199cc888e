//! Issue 23 (fidelity): cable, switch and NIC latency in emulated time.
//!
//! The rail-spine fabric at 100G (100 Mbit/s of wall clock) with 2 µs host cables (400 m),
//! 5 µs rail-spine cables (1 km), 1 µs switch forwarding latency and 500 ns NIC pipelines at time dilation 1000 (so 1 µs emulated is 1 ms of wall
//! clock; the ping test at 4000):
//! - `idle_ping_rtt_is_the_configured_path_within_10_percent`: `rocefab ping` states the
//!   configured round trip (checked here by hand from the topology) and measures an idle ping
//!   whose median emulated RTT is within 10 % of it, over one switch (same rail) and three
//!   (cross rail, through a spine). Without the delay lines the RTT would be ~0.3 µs emulated,
//!   far below; with a delay applied twice or not at all on one side, outside the 10 %.
//! - `delayed_links_keep_every_flows_order`: a Write-Only ring AllReduce over the same
//!   delayed links (flow ECMP) is verified with no packet out of order, no NAK and no
//!   retransmission: the delay lines are FIFOs, PFC frames included.
//!
//! The fabric (`rf-hdl-*` namespaces) is brought down by the guard, also on failure.
//! Build first, then run as root:
//! `cargo build -p control -p dataplane-user -p host-daemons &&
//!  cargo test -p rocefab-tests --test fabric_delay -- --test-threads=1`
use rocefab_tests::fabric::{allreduce_in_order, delayed_rail_spine, failure, rocefab, stdout, Fabric};
use serde_json::Value;

fn delayed_fabric(name: &str) -> Fabric {
    Fabric::up_edited("rail-spine.yaml", name, delayed_rail_spine)
}

fn ping(f: &Fabric, from: &str, to: &str) -> Value {
    let o = rocefab(&["ping", &f.name, from, to, "-c", "40", "-i", "30ms", "--json"]);
    assert!(o.status.success(), "rocefab ping {from} {to} failed: {}", failure(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("JSON: {e}\n{}", stdout(&o)))
}

fn within_10_percent(r: &Value, configured_ns: u64) {
    assert_eq!(r["configured_rtt_min_ns"].as_u64(), Some(configured_ns), "configured path: {r:#}");
    assert_eq!(r["configured_rtt_max_ns"].as_u64(), Some(configured_ns), "equal-cost paths, equal delays: {r:#}");
    assert!(r["replies"].as_u64().unwrap() >= 36, "replies: {r:#}");
    let p50 = r["rtt_p50_ns"].as_u64().unwrap() as f64;
    let err = p50 / configured_ns as f64 - 1.0;
    assert!(
        err.abs() <= 0.10,
        "median RTT {p50} ns emulated is {:+.1} % of the configured {configured_ns} ns: {r:#}",
        err * 100.0
    );
    // Never faster than the cables and pipelines allow (a frame that skipped a line would be).
    assert!(r["rtt_min_ns"].as_u64().unwrap() >= configured_ns, "a reply came back early: {r:#}");
}

/// The ping test runs at time dilation 4000, not 1000: the median RTT's 10 % of a 12 µs path is
/// 1.2 ms of wall clock at D 1000, within reach of a data-plane thread woken late on a loaded
/// machine (issue 39: it depended on the machine being idle); at D 4000 it is 4.8 ms. The
/// bound is unchanged in emulated time.
#[test]
fn idle_ping_rtt_is_the_configured_path_within_10_percent() {
    let f = Fabric::up_edited("rail-spine.yaml", "hdl", |t| {
        let t = delayed_rail_spine(t);
        assert!(t.contains("time_dilation: 1000\n"), "delayed_rail_spine changed");
        t.replace("time_dilation: 1000\n", "time_dilation: 4000\n")
    });
    // Same rail: NIC 500 + cable 2000 | rail1 1000 + cable 2000 + NIC 500 = 6000 ns each way.
    let same = ping(&f, "host1:gpu0", "host2:gpu0");
    within_10_percent(&same, 2 * 6_000);
    assert_eq!(same["forward"]["switches"], 1);
    // Cross rail: NIC 500 + cable 2000 | rail1 1000 + 5000 | spine 1000 + 5000 | rail2 1000 +
    // 2000 + NIC 500 = 18000 ns each way.
    let cross = ping(&f, "host1:gpu0", "host2:gpu1");
    within_10_percent(&cross, 2 * 18_000);
    assert_eq!(cross["forward"]["switches"], 3);
}

#[test]
fn delayed_links_keep_every_flows_order() {
    let f = delayed_fabric("hdo");
    let r = allreduce_in_order(&f, &["--metrics-port-base", "9830"]);
    // Every QP of the ring moved its share (half of them cross rails, through a spine).
    let qps = r["qps"].as_array().unwrap();
    assert_eq!(qps.len(), 8, "{r:#}");
    assert!(qps.iter().all(|q| q["bytes"].as_u64().unwrap() > 0), "{r:#}");
}
