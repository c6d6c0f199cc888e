//! Privileged: DCBX willing negotiation and cabling checks on live fabrics (book ch. 11, DCBX;
//! IEEE 802.1Qaz). Every switch port runs an LLDP/DCBX agent (not willing) and every GPU NIC one
//! in `rocefab-nicd` (willing by default).
//!
//! 1. Willing: the switches run RoCEv2 lossless on priority 4 with DSCP 26 instead of the
//!    default 24 → 3. The NICs adopt that from DCBX, advertise it, send RoCEv2 with DSCP 26, and
//!    honour PFC pauses on priority 4 during a 7:1 incast (no drop, no retransmission). With the
//!    NICs not willing, the mismatch is reported by `rocefab lldp --check`, the metric and the log.
//! 2. Cabling: `rocefab lldp --check` passes on a fresh fabric, names the links when two GPU
//!    NIC veths are swapped by hand between hosts, and names the missing neighbour when a host's
//!    agent is killed (aged out at its short TTL).
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::process::Output;
use std::time::{Duration, Instant};

use rocefab_tests::fabric::{
    metric, nic_sum, pids_with_cmdline, rocefab, run_dir, scrape, series, stdout, text, Fabric,
};
use rocefab_tests::proc::sh;

/// `rocefab lldp <fabric> [args]`.
fn lldp(f: &Fabric, args: &[&str]) -> Output {
    let mut a = vec!["lldp", f.name.as_str()];
    a.extend_from_slice(args);
    rocefab(&a)
}

/// Polls `rocefab lldp <fabric> --check` until `done(output)` or 20 s; returns the last output.
fn check_until(f: &Fabric, done: impl Fn(&Output) -> bool) -> Output {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let o = lldp(f, &["--check"]);
        if done(&o) || Instant::now() >= end {
            return o;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The neighbour tables of every node, from `rocefab lldp --json`.
fn tables(f: &Fabric) -> Vec<serde_json::Value> {
    let o = lldp(f, &["--json"]);
    assert!(o.status.success(), "rocefab lldp --json: {}", text(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("rocefab lldp --json: {e}: {}", stdout(&o)))
}

/// The port `port` of node `node` in the tables.
fn port<'a>(t: &'a [serde_json::Value], node: &str, port: &str) -> &'a serde_json::Value {
    let n = t.iter().find(|n| n["node"] == node).unwrap_or_else(|| panic!("no node {node} in {t:?}"));
    n["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == port)
        .unwrap_or_else(|| panic!("{node} has no port {port}"))
}

/// `topologies/rail-spine-incast.yaml` renamed, with its `pfc: [3]` line replaced by `qos` and
/// `lldp` appended, brought up.
fn incast_fabric(name: &str, qos: &str, lldp: &str) -> Fabric {
    Fabric::up_edited("rail-spine-incast.yaml", name, |t| {
        assert!(t.contains("  pfc: [3]"), "rail-spine-incast.yaml changed");
        t.replacen("  pfc: [3]", qos, 1) + lldp
    })
}

/// The switches' QoS of test 1: RoCEv2 at DSCP 26 on lossless priority 4.
const QOS_PRIO4: &str = "  classes: { 26: 4, 48: 7 }\n  pfc: [4]";

fn host_agent_metrics(f: &Fabric, host: &str) -> String {
    scrape(f.nicd_addr(host))
}

#[test]
fn willing_nics_adopt_the_switch_priorities_and_honour_their_pauses() {
    let f = incast_fabric("rfw", QOS_PRIO4, "lldp:\n  tx_interval: 1s\n  ttl: 4s\n");
    // Every link agrees once the NICs have adopted the switch's settings.
    let o = check_until(&f, |o| o.status.success());
    assert!(o.status.success(), "rocefab lldp --check on a fresh fabric:\n{}", text(&o));
    let t = tables(&f);
    for h in 1..=4 {
        for (g, rail) in [(0, "rail1"), (1, "rail2")] {
            let nic = port(&t, &format!("host{h}"), &format!("gpu{g}"));
            assert_eq!(nic["oper"]["pfc_enable"], 1 << 4, "host{h}:gpu{g} operational PFC: {nic}");
            assert_eq!(nic["oper"]["pfc_from"], "peer", "host{h}:gpu{g}: {nic}");
            // What the NIC advertises, as the switch port received it.
            let sw_port = f.port_to(rail, &format!("host{h}:gpu{g}"));
            let seen = &port(&t, rail, &sw_port)["neighbour"]["dcb"];
            assert_eq!(seen["pfc_willing"], true, "{rail}:{sw_port} sees {seen}");
            assert_eq!(seen["pfc_enable"], 1 << 4, "{rail}:{sw_port} sees {seen}");
            let app = seen["app"].as_array().unwrap();
            assert!(app.iter().any(|a| a["selector"] == 3 && a["protocol"] == 4791 && a["priority"] == 4), "{seen}");
            assert!(app.iter().any(|a| a["selector"] == 5 && a["protocol"] == 26 && a["priority"] == 4), "{seen}");
        }
    }
    let m = host_agent_metrics(&f, "host2");
    assert_eq!(metric(&m, "rocefab_dcbx_oper_pfc_enabled", &[("port", "gpu1"), ("priority", "4")]), 1.0, "{m}");
    assert_eq!(series(&m, "rocefab_dcbx_oper_pfc_enabled", &[("port", "gpu1"), ("priority", "3")]), 0.0);

    // The 7:1 incast into host1:gpu0 (100 Mbit/s) with the negotiated classes.
    let (out, max_pg) = rocefab_tests::fabric::run_incast(&f, 4);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("rocefab run --json: {e}: {out}"));
    assert_eq!(r["ok"], true, "{r}");
    assert!(
        max_pg >= 64_000.0,
        "never congested: rail1's largest priority-4 ingress group held {max_pg} bytes (xOFF 64 kB)"
    );
    for n in r["nics"].as_array().unwrap() {
        assert_eq!((n["data_priority"].as_u64(), n["data_dscp"].as_u64()), (Some(4), Some(26)), "{n}");
    }
    // The traffic went through queue 4 (DSCP 26), never queue 3, and the pauses were priority 4.
    let to_h1 = f.port_to("rail1", "host1:gpu0");
    let m = f.metrics("rail1");
    assert!(metric(&m, "rocefab_queue_enqueued_packets_total", &[("port", &to_h1), ("queue", "4")]) > 1000.0);
    assert_eq!(series(&m, "rocefab_queue_enqueued_packets_total", &[("port", &to_h1), ("queue", "3")]), 0.0);
    let sum = |name: &str, labels: &[(&str, &str)]| f.metric_sum(&["rail1", "rail2", "spine1", "spine2"], name, labels);
    assert!(sum("rocefab_pfc_tx_frames_total", &[("priority", "4")]) > 0.0);
    assert_eq!(sum("rocefab_pfc_tx_frames_total", &[("priority", "3")]), 0.0);
    // The senders honoured the priority-4 pauses: paused time counted, nothing lost.
    let paused = nic_sum(&r, "gpu1", "pfc_paused_ns");
    assert!(paused > 0, "the sender NICs were never paused on priority 4: {}", r["nics"]);
    assert_eq!(sum("rocefab_headroom_overflow_total", &[]), 0.0);
    assert_eq!(sum("rocefab_queue_dropped_packets_total", &[]), 0.0);
    assert_eq!(r["retransmitted_packets"], 0, "{r}");
    drop(f);

    // NICs that are not willing keep priority 3: two non-willing ends that disagree.
    let f = incast_fabric("rfw", QOS_PRIO4, "lldp:\n  tx_interval: 1s\n  ttl: 4s\n  nic: { willing: false }\n");
    // Once both ends have heard each other (fast start), the link shows the mismatch.
    let to_h3 = f.port_to("rail1", "host3:gpu0");
    let h3_line = |out: &str| {
        out.lines().find(|l| l.contains(&format!("rail1:{to_h3} ")) && l.contains("host3:gpu0 ")).map(str::to_string)
    };
    let o = check_until(&f, |o| h3_line(&text(o)).is_some_and(|l| l.contains("DCBX mismatch")));
    let out = text(&o);
    assert!(!o.status.success(), "--check passed with non-willing NICs on PFC {{3}} and switches on {{4}}:\n{out}");
    let line = h3_line(&out).unwrap_or_else(|| panic!("no line names rail1:{to_h3} <-> host3:gpu0:\n{out}"));
    assert!(line.contains("DCBX mismatch") && line.contains("PFC"), "{line}");
    let m = f.metrics("rail1");
    assert_eq!(metric(&m, "rocefab_dcbx_mismatch", &[("port", &to_h3), ("kind", "pfc")]), 1.0, "{m}");
    assert_eq!(
        metric(&host_agent_metrics(&f, "host3"), "rocefab_dcbx_mismatch", &[("port", "gpu0"), ("kind", "pfc")]),
        1.0
    );
    let log = std::fs::read_to_string(run_dir(&f.name).join("rail1.log")).unwrap_or_default();
    assert!(log.contains("DCBX mismatch: PFC enable differs"), "rail1's log has no mismatch line");
    let t = tables(&f);
    assert_eq!(port(&t, "host3", "gpu0")["oper"]["pfc_from"], "local");
}

/// Moves interface `ifname` of namespace `from` to namespace `to` under the name `new_name`.
fn move_if(from: &str, ifname: &str, to: &str, new_name: &str) {
    sh("ip", &["-n", from, "link", "set", ifname, "down"]);
    sh("ip", &["-n", from, "link", "set", ifname, "name", new_name]);
    sh("ip", &["-n", from, "link", "set", new_name, "netns", to]);
}

fn set_up(ns: &str, ifname: &str) {
    sh("ip", &["-n", ns, "link", "set", ifname, "up"]);
}

/// The pid of `host`'s `rocefab-nicd`.
fn nicd_pid(f: &Fabric, host: &str) -> u32 {
    let needle = run_dir(&f.name).join(format!("{host}.nicd.json")).display().to_string();
    *pids_with_cmdline(&needle).first().unwrap_or_else(|| panic!("no rocefab-nicd for {host}"))
}

#[test]
fn check_passes_on_a_fresh_fabric_and_names_swapped_and_missing_links() {
    let f = Fabric::up_with("rail-spine.yaml", "rfk", "lldp:\n  tx_interval: 1s\n  ttl: 3s\n");
    let o = check_until(&f, |o| o.status.success());
    let out = text(&o);
    assert!(o.status.success(), "fresh fabric:\n{out}");
    assert!(out.lines().filter(|l| l.contains(" ok")).count() >= 12, "one ok line per link:\n{out}");

    // Swap the cables of host1:gpu0 and host2:gpu0 (both on rail1) by moving the host ends.
    let (h1, h2) = (f.netns("host1"), f.netns("host2"));
    move_if(&h1, "gpu0", &h2, "swap1");
    move_if(&h2, "gpu0", &h1, "gpu0");
    set_up(&h1, "gpu0");
    sh("ip", &["-n", &h2, "link", "set", "swap1", "name", "gpu0"]);
    set_up(&h2, "gpu0");
    let p1 = f.port_to("rail1", "host1:gpu0");
    let p2 = f.port_to("rail1", "host2:gpu0");
    // Each swapped link is named, seen from either end: rail1's port now hears the other host,
    // and the host's NIC hears the other rail1 port.
    let link_line = |out: &str, host: &str, port: &str| -> Option<String> {
        out.lines()
            .find(|l| l.contains(&format!("{host}:gpu0 ")) && l.contains(&format!("rail1:{port} ")))
            .map(str::to_string)
    };
    let miscabled = |out: &str, host: &str, port: &str, other_host: &str, other_port: &str| {
        link_line(out, host, port).is_some_and(|l| {
            l.contains("miscabled")
                && (l.contains(&format!("found {other_host}:gpu0")) || l.contains(&format!("found rail1:{other_port}")))
        })
    };
    let o = check_until(&f, |o| {
        let t = text(o);
        miscabled(&t, "host1", &p1, "host2", &p2) && miscabled(&t, "host2", &p2, "host1", &p1)
    });
    let out = text(&o);
    assert!(!o.status.success(), "--check passed with swapped cables:\n{out}");
    assert!(miscabled(&out, "host1", &p1, "host2", &p2), "host1:gpu0 <-> rail1:{p1} not reported miscabled:\n{out}");
    assert!(miscabled(&out, "host2", &p2, "host1", &p1), "host2:gpu0 <-> rail1:{p2} not reported miscabled:\n{out}");
    let l3 = out.lines().find(|l| l.contains("host3:gpu0 ")).unwrap_or_else(|| panic!("{out}"));
    assert!(l3.contains(" ok"), "an untouched link is reported: {l3}");

    // host3's agent dies without a shutdown LLDPDU: its links age out after the 3 s TTL.
    let pid = nicd_pid(&f, "host3");
    // SAFETY: plain kill(2) on a pid we found in /proc.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    let p3 = f.port_to("rail1", "host3:gpu0");
    let o = check_until(&f, |o| link_line(&text(o), "host3", &p3).is_some_and(|l| l.contains("missing neighbour")));
    let out = text(&o);
    let waited = killed.elapsed();
    let l = link_line(&out, "host3", &p3).unwrap_or_else(|| panic!("no line for host3:gpu0 <-> rail1:{p3}:\n{out}"));
    assert!(l.contains("missing neighbour"), "{l}");
    assert!(waited >= Duration::from_secs(2), "aged out after {waited:?}, before the 3 s TTL could run out");
    let m = f.metrics("rail1");
    assert!(metric(&m, "rocefab_lldp_ageouts_total", &[("port", &p3)]) >= 1.0, "{m}");
    assert_eq!(series(&m, "rocefab_lldp_neighbors", &[("port", &p3)]), 0.0);
}
