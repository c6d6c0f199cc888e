//! Load balancing on the rail-spine fabric (issue 11, tests 2 and 3): rail1 reaches rail 2
//! through two uplinks (spine1, spine2); flows go host1:gpu0 (10.0.1.1) → host3:gpu1
//! (10.0.2.3), UDP to port 9000, sent with `rocefab send`. Per-uplink use is read from rail1's
//! metrics (per-port bytes, per-queue packets) and its XDP counters (`flowlet_path_changes`,
//! `sprayed_packets`, counted on the ingress port facing host1).
//!
//! The flowlet tests need real gaps between packets in a live fabric, so they pause between
//! bursts of `rocefab send`: the gaps are the stimulus (δ = 200 ms, gaps ≥ 400 ms, packets
//! within a burst 50–200 µs apart); the decision itself is tested with an injected clock in
//! `xdp_lb_test_run.rs`. Needs root (and python3-scapy for the PFC agent).
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use dataplane_common::{ecmp_index, flow_hash};
use rocefab_tests::fabric::{metric, Fabric};
use rocefab_tests::proc::require_tool;
use rocefab_tests::scapy::Agent;

const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 3);
const DPORT: u16 = 9000;
/// UDP payload: 1442-byte frames.
const SIZE: &str = "1400";

/// rail1's uplinks towards rail 2, in ECMP member order: (port name on rail1, spine name,
/// spine's port name facing rail1).
fn uplinks(f: &Fabric) -> Vec<(String, String, String)> {
    let rail1 = f.config("rail1");
    let route = rail1
        .routes
        .iter()
        .find(|r| r.prefix == IpAddr::V4(Ipv4Addr::new(10, 0, 2, 0)) && r.len == 24)
        .expect("rail1 route to rail 2");
    rail1.groups[route.group.expect("not local") as usize]
        .iter()
        .map(|&nh| {
            let p = &rail1.ports[rail1.nexthops[nh as usize].port as usize];
            let (spine, spine_port) = p.peer.split_once(':').expect("peer is spine:port");
            (p.name.clone(), spine.to_string(), spine_port.to_string())
        })
        .collect()
}

/// The ECMP member index rail1 gives the flow from source port `sport`.
fn ecmp_member(f: &Fabric, sport: u16) -> usize {
    let h =
        flow_hash([u32::from(SRC), 0, 0, 0], [u32::from(DST), 0, 0, 0], 17, sport, DPORT, f.config("rail1").hash_seed);
    ecmp_index(h, 2) as usize
}

/// `count` packets of DSCP `dscp` round-robin over source ports `first..=last` at `pps`.
fn send(f: &Fabric, dscp: u8, first: u16, last: u16, count: u32, pps: u32) {
    f.send(&[
        "--from",
        "host1:gpu0",
        "--to",
        "host3:gpu1",
        "--dscp",
        &dscp.to_string(),
        "--count",
        &count.to_string(),
        "--size",
        SIZE,
        "--sport-range",
        &format!("{first}:{last}"),
        "--dport",
        &DPORT.to_string(),
        "--rate-pps",
        &pps.to_string(),
    ]);
}

/// rail1's XDP counter `name` on the port facing host1.
fn xdp(f: &Fabric, t: &str, name: &str) -> f64 {
    metric(t, &format!("rocefab_xdp_{name}_total"), &[("port", &f.port_to("rail1", "host1:gpu0"))])
}

/// Per-uplink values of metric `name` (labels: the uplink's port, plus `extra`).
fn per_uplink(t: &str, up: &[(String, String, String)], name: &str, extra: &[(&str, &str)]) -> Vec<f64> {
    up.iter()
        .map(|(p, _, _)| {
            let mut l = vec![("port", p.as_str())];
            l.extend_from_slice(extra);
            metric(t, name, &l)
        })
        .collect()
}

fn delta(after: &[f64], before: &[f64]) -> Vec<f64> {
    after.iter().zip(before).map(|(a, b)| a - b).collect()
}

/// Test 2: four elephant flows whose 5-tuples all hash onto the same uplink. As class 0
/// (ECMP) one uplink carries them all; as class 3 (`spray: round-robin`) the two uplinks carry
/// the same bytes within 5 %.
#[test]
fn spraying_balances_elephants_that_collide_under_ecmp() {
    let f = Fabric::up_with(
        "rail-spine.yaml",
        "rflb1",
        "load_balance:\n  classes: { 3: { mode: spray, spray: round-robin } }\n",
    );
    let up = uplinks(&f);
    // Four consecutive source ports that all hash onto one member: a collision.
    let first = (49152u16..60000).find(|&s| (s..s + 4).all(|p| ecmp_member(&f, p) == ecmp_member(&f, s))).unwrap();
    let hot = ecmp_member(&f, first);
    const N: u32 = 4000;
    let bytes = |t: &str| per_uplink(t, &up, "rocefab_port_tx_bytes_total", &[]);
    let packets = |t: &str| per_uplink(t, &up, "rocefab_port_tx_packets_total", &[]);

    for (dscp, spray) in [(0u8, false), (24, true)] {
        let before = f.metrics("rail1");
        send(&f, dscp, first, first + 3, N, 20_000);
        let after = f.wait_metrics("rail1", |t| {
            delta(&packets(t), &packets(&before)).iter().sum::<f64>() >= f64::from(N) * 0.99
        });
        let b = delta(&bytes(&after), &bytes(&before));
        let sprayed = xdp(&f, &after, "sprayed_packets") - xdp(&f, &before, "sprayed_packets");
        let total: f64 = b.iter().sum();
        assert!(total >= f64::from(N) * 0.99 * 1442.0, "dscp {dscp}: uplinks carried only {total} bytes: {b:?}");
        eprintln!(
            "dscp {dscp}: uplink bytes {b:?} ({:?}), sprayed {sprayed}",
            up.iter().map(|u| &u.1).collect::<Vec<_>>()
        );
        if spray {
            let spread = (b[0] - b[1]).abs() / b[0].max(b[1]);
            assert!(spread <= 0.05, "spray: uplinks differ by {:.1} %: {b:?}", spread * 100.0);
            assert!(sprayed >= f64::from(N) * 0.99, "sprayed_packets grew by {sprayed}");
        } else {
            assert!(
                b[1 - hot] < total * 0.01,
                "ecmp: the flows collide on {}, yet {} carried {b:?}",
                up[hot].1,
                up[1 - hot].1
            );
            assert_eq!(sprayed, 0.0, "class 0 is not sprayed");
        }
    }
}

/// Test 3a: with `flowlet` on class 3 and δ = 200 ms, a continuous flow stays on its uplink;
/// a flow sent as five bursts ≥ 400 ms apart changes uplink at every gap (two members: the new
/// flowlet always takes the other one): 4 path changes, bursts 1, 3, 5 on its ECMP uplink.
#[test]
fn flowlets_move_only_after_gaps_longer_than_delta() {
    let f = Fabric::up_with(
        "rail-spine.yaml",
        "rflb2",
        "load_balance:\n  classes: { 3: { mode: flowlet } }\n  flowlet_gap: 200ms\n",
    );
    let up = uplinks(&f);
    let q3 = |t: &str| per_uplink(t, &up, "rocefab_queue_enqueued_packets_total", &[("queue", "3")]);

    // Continuous: 3000 packets, 200 µs apart (0.6 s in all).
    let before = f.metrics("rail1");
    send(&f, 24, 50_000, 50_000, 3000, 5_000);
    let after = f.wait_metrics("rail1", |t| delta(&q3(t), &q3(&before)).iter().sum::<f64>() >= 3000.0);
    let d = delta(&q3(&after), &q3(&before));
    let m = ecmp_member(&f, 50_000);
    assert_eq!((d[m], d[1 - m]), (3000.0, 0.0), "a continuous flow stays on its ECMP uplink {}", up[m].1);
    assert_eq!(xdp(&f, &after, "flowlet_path_changes") - xdp(&f, &before, "flowlet_path_changes"), 0.0);

    // Gapped: five bursts of 100 packets (50 µs apart), 400 ms of silence between bursts.
    let before = f.metrics("rail1");
    for burst in 0..5 {
        if burst > 0 {
            std::thread::sleep(Duration::from_millis(400));
        }
        send(&f, 24, 50_001, 50_001, 100, 20_000);
    }
    let after = f.wait_metrics("rail1", |t| delta(&q3(t), &q3(&before)).iter().sum::<f64>() >= 500.0);
    let d = delta(&q3(&after), &q3(&before));
    let m = ecmp_member(&f, 50_001);
    assert_eq!((d[m], d[1 - m]), (300.0, 200.0), "bursts alternate uplinks starting on {}", up[m].1);
    assert_eq!(xdp(&f, &after, "flowlet_path_changes") - xdp(&f, &before, "flowlet_path_changes"), 4.0);
}

/// Test 3b: `adaptive` on class 3. A flow B starts on its ECMP uplink U (both queues empty:
/// the tie goes to the ECMP member); then U's queue 3 is held congested (spine1 or spine2
/// pauses priority 3 towards rail1 with scapy PFC, and a flow A fills it); B's next flowlets,
/// after gaps > δ, all leave on the other uplink: one path change, U gets nothing more of B.
#[test]
fn adaptive_moves_flowlets_off_a_congested_uplink() {
    require_tool("/usr/bin/python3", &["-c", "import scapy.contrib.mac_control"]);
    let f = Fabric::up_with(
        "rail-spine.yaml",
        "rflb3",
        "load_balance:\n  classes: { 3: { mode: adaptive } }\n  flowlet_gap: 200ms\nqos:\n  watchdog: off\n",
    );
    let up = uplinks(&f);
    let q3 = |t: &str| per_uplink(t, &up, "rocefab_queue_enqueued_packets_total", &[("queue", "3")]);
    // A and B hash onto the same uplink U.
    let b_port = 50_000u16;
    let u = ecmp_member(&f, b_port);
    let a_port = (40_000u16..).find(|&s| ecmp_member(&f, s) == u).unwrap();
    let changes = |t: &str| xdp(&f, t, "flowlet_path_changes");

    // B's first flowlet, queues empty: on U.
    let t0 = f.metrics("rail1");
    send(&f, 24, b_port, b_port, 50, 20_000);
    let t1 = f.wait_metrics("rail1", |t| delta(&q3(t), &q3(&t0))[u] >= 50.0);
    assert_eq!(delta(&q3(&t1), &q3(&t0)), if u == 0 { [50.0, 0.0] } else { [0.0, 50.0] }, "B starts on {}", up[u].1);

    // Hold U congested: its spine pauses priority 3 (65535 quanta every 5 ms for 8 s), A fills it.
    let (_, spine, spine_port) = &up[u];
    let mut agent = Agent::start(&f, spine, spine_port);
    assert_eq!(agent.cmd("storm 65535 5 8000 3"), "started");
    std::thread::sleep(Duration::from_millis(300)); // B's gap: longer than δ
    send(&f, 24, a_port, a_port, 300, 10_000);
    let depth = |t: &str| metric(t, "rocefab_queue_depth_bytes", &[("port", &up[u].0), ("queue", "3")]);
    let held = f.wait_metrics("rail1", |t| depth(t) >= 250.0 * 1442.0);
    let a = delta(&q3(&held), &q3(&t1));
    assert!(
        depth(&held) >= 250.0 * 1442.0,
        "{}'s queue 3 holds only {} bytes; A enqueued {a:?}",
        up[u].1,
        depth(&held)
    );
    assert_eq!(a[1 - u], 0.0, "A is one flowlet, on U");

    // B again: three flowlets, 400 ms apart, all on the other uplink.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(400));
        send(&f, 24, b_port, b_port, 50, 20_000);
    }
    let t2 = f.wait_metrics("rail1", |t| delta(&q3(t), &q3(&held))[1 - u] >= 150.0);
    let d = delta(&q3(&t2), &q3(&held));
    assert!(depth(&t2) >= 250.0 * 1442.0, "{} stayed congested throughout", up[u].1);
    assert_eq!(d[u], 0.0, "B's flowlets avoid the congested {}: {d:?}", up[u].1);
    // The sender may lose a packet to a full socket buffer (ENOBUFS), not to the fabric.
    assert!(d[1 - u] >= 147.0, "B's flowlets went to {}: {d:?}", up[1 - u].1);
    assert_eq!(changes(&t2) - changes(&t0), 1.0, "B moved once, off {}, and stayed", up[u].1);
    // Release the pause so that the fabric drains before it is torn down.
    assert!(agent.0.line(Duration::from_secs(10)).starts_with("done"));
    assert_eq!(agent.cmd("pfc 0"), "sent");
}
