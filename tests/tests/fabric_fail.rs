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

use rocefab_tests::fabric::{failure, metric, rocefab, run_json, series, stderr, stdout, Fabric, LinkMonitor};
use serde_json::Value;

/// The index of `port` among switch `sw`'s ports in its configuration `c`.
fn port_index(c: &rocefab_contracts::config::SwitchConfig, sw: &str, port: &str) -> u32 {
    c.ports.iter().position(|x| x.name == port).unwrap_or_else(|| panic!("{sw} has no port {port}")) as u32
}

/// How many of `sw`'s ECMP groups (its configuration, as `rocefab up` wrote it) hold a next hop
/// on `port`.
fn groups_with_port(f: &Fabric, sw: &str, port: &str) -> f64 {
    let c = f.config(sw);
    let p = port_index(&c, sw, port);
    c.groups.iter().filter(|g| g.iter().any(|&nh| c.nexthops[nh as usize].port == p)).count() as f64
}

/// How many of `sw`'s ECMP groups as its data path holds them now (`GET /routes`: each group's
/// live members) hold a next hop on `port`.
fn groups_holding(f: &Fabric, sw: &str, port: &str) -> f64 {
    let c = f.config(sw);
    let p = port_index(&c, sw, port);
    let body = rocefab_tests::http::get(c.metrics_listen, "/routes").unwrap_or_else(|e| panic!("{e:#}"));
    let held: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{sw} GET /routes: {e}: {body}"));
    let groups = held["groups"].as_array().unwrap_or_else(|| panic!("{sw} GET /routes: no groups: {body}"));
    groups
        .iter()
        .filter(|g| g.as_array().unwrap().iter().any(|nh| c.nexthops[nh.as_u64().unwrap() as usize].port == p))
        .count() as f64
}

#[test]
fn a_cut_spine_link_leaves_the_ecmp_groups_and_the_allreduce_completes() {
    let f = Fabric::up("rail-spine.yaml", "rffl");
    let up1 = f.port_to("rail1", "spine1:eth1");
    let down1 = f.port_to("spine1", &format!("rail1:{up1}"));
    let at = |sw: &str, name: &str, port: &str| metric(&f.metrics(sw), name, &[("port", port)]);
    let updates = |sw: &str| series(&f.metrics(sw), "rocefab_route_updates_total", &[]);
    let replaced = |sw: &str| series(&f.metrics(sw), "rocefab_routes_replaced_total", &[]);
    // Both switches' group rewrites and routes taken, once rail1's have stopped changing.
    let counts = || {
        let settled = f.settled("rail1", &["rocefab_route_updates_total", "rocefab_routes_replaced_total"]);
        (
            series(&settled, "rocefab_route_updates_total", &[]),
            updates("spine1"),
            series(&settled, "rocefab_routes_replaced_total", &[]),
            replaced("spine1"),
        )
    };
    assert_eq!((at("rail1", "rocefab_port_carrier", &up1), updates("rail1"), updates("spine1")), (1.0, 0.0, 0.0));
    assert_eq!((replaced("rail1"), replaced("spine1")), (0.0, 0.0));

    let mut job = rocefab_tests::fabric::allreduce_crossing(&f, &up1);
    let o = rocefab(&["fail", "link", &f.name, &format!("rail1:{up1}")]);
    assert!(o.status.success(), "rocefab fail link: {}", failure(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("link rail1:{up1} -- spine1:{down1} down")), "{out}");
    assert!(out.contains(&format!("rail1:{up1} saw the carrier loss after")), "{out}");
    assert!(out.contains(&format!("spine1:{down1} saw the carrier loss after")), "{out}");
    // The routes are pushed once both switches took the port out of their groups, after their
    // 100 ms link-down debounce: the time each took is printed, and is at least the debounce.
    for end in [format!("rail1:{up1}"), format!("spine1:{down1}")] {
        let took = out
            .split(&format!("{end} took the port out of its ECMP groups after "))
            .nth(1)
            .and_then(|r| r.split(" ms").next())
            .and_then(|ms| ms.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{end}: no time out of the groups: {out}"));
        assert!(took >= 100.0, "{end} left its groups {took} ms after the cut, within the 100 ms debounce");
    }
    let tx_at_fail = at("rail1", "rocefab_port_tx_packets_total", &up1);
    assert_eq!(at("rail1", "rocefab_port_carrier", &up1), 0.0);
    assert_eq!(at("spine1", "rocefab_port_carrier", &down1), 0.0);
    assert_eq!((at("rail1", "rocefab_port_oper_up", &up1), at("spine1", "rocefab_port_oper_up", &down1)), (0.0, 0.0));
    // Nothing waits on either end's TX ring to go out when the link is back: `rocefab fail`
    // had each end empty it into the dead link.
    let ring = |sw: &str, port: &str| series(&f.metrics(sw), "rocefab_port_tx_ring_frames", &[("port", port)]);
    assert_eq!((ring("rail1", &up1), ring("spine1", &down1)), (0.0, 0.0), "frames held on a cut port's TX ring");
    // Each end's data plane acted on the carrier loss (its stamp, Unix seconds) before `rocefab
    // fail` emptied the ring, and handed the port nothing after that.
    let stamp = |sw: &str, name: &str, port: &str| series(&f.metrics(sw), name, &[("port", port)]);
    let lost_at = |sw: &str, port: &str| stamp(sw, "rocefab_port_carrier_lost_timestamp_seconds", port);
    let last_tx = |sw: &str, port: &str| stamp(sw, "rocefab_port_last_tx_timestamp_seconds", port);
    for (sw, port) in [("rail1", &up1), ("spine1", &down1)] {
        let lost = lost_at(sw, port);
        assert!(lost > 0.0, "{sw}:{port}: its data plane did not act on the carrier loss");
        assert!(last_tx(sw, port) <= lost, "{sw}:{port} handed frames to the port after it acted on the carrier loss");
    }
    let rail1_lost = lost_at("rail1", &up1);
    // rail1's groups toward the other rail (via both spines) lost a member; spine1's group
    // toward rail1 lost its only one. Each switch rewrote exactly the groups of its
    // configuration that hold a next hop on the cut port, once, for the carrier (after its
    // debounce, before `rocefab fail` returned); then it took the routes pushed without the
    // link, once. Nothing more comes later.
    let (want_rail1, want_spine1) = (groups_with_port(&f, "rail1", &up1), groups_with_port(&f, "spine1", &down1));
    assert!(want_rail1 >= 1.0 && want_spine1 >= 1.0, "the cut port is in no ECMP group");
    assert_eq!(groups_holding(&f, "rail1", &up1), 0.0, "rail1's data path still has the cut port");
    assert_eq!(
        counts(),
        (want_rail1, want_spine1, 1.0, 1.0),
        "per cut: each group holding the port rewritten once for the carrier, then the routes pushed once"
    );

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

    let done = job.output();
    assert!(done.status.success(), "rocefab run: {}", failure(&done));
    let r: Value = serde_json::from_str(&stdout(&done)).unwrap();
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(8)), "{r:#}");
    let events = r["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e.as_str().unwrap().contains("link down rail1:")), "{events:?}");
    // Nothing new was sent on the cut link after the switch took it out of its groups (a frame
    // or two already handed to the port's ring may still count).
    let after = at("rail1", "rocefab_port_tx_packets_total", &up1);
    assert!(after - tx_at_fail <= 2.0, "rail1 sent {} frames on the cut link", after - tx_at_fail);

    // Back: the carrier returns, but the routes pushed without the link hold no next hop on the
    // port, so no group changes for it; the routes pushed with the link (once more each) put
    // the port back in its groups, and a job crosses it.
    let o = rocefab(&["restore", "link", &f.name, &format!("spine1:{down1}")]);
    assert!(o.status.success(), "rocefab restore link: {}", failure(&o));
    assert!(stdout(&o).contains(&format!("link rail1:{up1} -- spine1:{down1} up")), "{}", stdout(&o));
    assert_eq!(
        counts(),
        (want_rail1, want_spine1, 2.0, 2.0),
        "per restore: no carrier rewrite, the routes pushed once"
    );
    assert_eq!(groups_holding(&f, "rail1", &up1), want_rail1, "rail1's data path has the port back");
    assert_eq!(at("rail1", "rocefab_port_carrier", &up1), 1.0);
    assert_eq!(at("rail1", "rocefab_port_oper_up", &up1), 1.0);
    let up2 = f.port_to("rail1", "spine2:eth1");
    let (tx1, tx2) =
        (at("rail1", "rocefab_port_tx_packets_total", &up1), at("rail1", "rocefab_port_tx_packets_total", &up2));
    let o =
        rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--timeout", "120", "--retransmit-timeout-ms", "2000"]);
    assert!(o.status.success(), "rocefab run: {}", failure(&o));
    // The restored link takes its share of rail1's traffic to the spines: the AllToAll's QPs
    // between the rails (data one way, ACKs the other) hash over both spines, about half each;
    // at least an eighth of the frames must cross it.
    let (d1, d2) = (
        at("rail1", "rocefab_port_tx_packets_total", &up1) - tx1,
        at("rail1", "rocefab_port_tx_packets_total", &up2) - tx2,
    );
    eprintln!("after the restore rail1 sent {d1} frames to spine1 and {d2} to spine2");
    // With the carrier back its data plane no longer acts on a loss, and sends on the port.
    assert_eq!(lost_at("rail1", &up1), 0.0, "rail1's data plane still acts on the carrier loss");
    assert!(last_tx("rail1", &up1) > rail1_lost, "rail1 has not sent on the restored port");
    assert!(
        d1 + d2 > 1000.0 && d1 >= (d1 + d2) / 8.0,
        "the restored link carried {d1} of rail1's {} frames to the spines",
        d1 + d2
    );

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
    assert_eq!(series(&m, "rocefab_pfcwd_storms_total", &prio), 0.0);

    let o = rocefab(&["fail", "nic", &f.name, "host2:gpu0", "--pfc-storm", "--for", "1s"]);
    assert!(o.status.success(), "rocefab fail nic: {}", failure(&o));
    let out = stdout(&o);
    // 1 Gbit/s: 65535 quanta are 33.6 ms; refreshed every 10 ms (half of that, at most 10 ms) for
    // 1 s: 100 frames, each due at its own time from the start (one late wake-up on a busy
    // machine does not delay the rest; it drifted to 93 before), the last possibly too late.
    let sent: f64 = out
        .split("over: ")
        .nth(1)
        .and_then(|x| x.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!((99.0..=100.0).contains(&sent), "{out}");
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
    let mut job = rocefab_tests::fabric::allreduce_crossing(&f, &up1);
    let o = rocefab(&["fail", "switch", &f.name, "spine1"]);
    assert!(o.status.success(), "rocefab fail switch: {}", failure(&o));
    assert!(stdout(&o).contains("switch spine1 down: daemon stopped, 2 links dark"), "{}", stdout(&o));
    // spine1 as `rocefab status` sees it, and whether its listener answers (whether it ran in
    // a process of its own or in the switches' shared one).
    let spine1 = || {
        let alive = f.daemons().iter().find(|d| d.0 == "spine1").expect("spine1 in rocefab status").1;
        (alive, rocefab_tests::http::get(f.config("spine1").metrics_listen, "/metrics").is_ok())
    };
    assert_eq!(spine1(), (false, false), "spine1's daemon is gone");
    assert_eq!(at("rail1", "rocefab_port_carrier", &up1), 0.0);
    let done = job.output();
    assert!(done.status.success(), "rocefab run: {}", failure(&done));
    let r: Value = serde_json::from_str(&stdout(&done)).unwrap();
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(8)), "{r:#}");
    assert!(r["events"].as_array().unwrap().iter().any(|e| e.as_str().unwrap().contains("switch down spine1")));

    let o = rocefab(&["restore", "switch", &f.name, "spine1"]);
    assert!(o.status.success(), "rocefab restore switch: {}", failure(&o));
    assert_eq!(spine1(), (true, true), "spine1's daemon is back");
    assert_eq!((at("rail1", "rocefab_port_carrier", &up1), at("spine1", "rocefab_port_carrier", "eth1")), (1.0, 1.0));
    let tx = at("rail1", "rocefab_port_tx_packets_total", &up1);
    let o =
        rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--timeout", "120", "--retransmit-timeout-ms", "2000"]);
    assert!(o.status.success(), "rocefab run: {}", failure(&o));
    assert!(at("rail1", "rocefab_port_tx_packets_total", &up1) > tx + 100.0, "spine1 carries traffic again");
    let o = rocefab(&["events", &f.name, "--json"]);
    let kinds: Vec<String> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["switch down", "switch up"]);
}

/// `rocefab run --fail-link rail1:<port to spine1> --fail-at 50ms --compare`: the same
/// AllReduce first without the failure, then with the spine uplink cut 50 ms into it. The report
/// says when the cut came, how long each end kept sending into the link (until its data plane
/// acted on the carrier loss), the frames lost on it, and both jobs side by side;
/// the `--timeline` picture draws the cut.
#[test]
fn a_cut_during_an_allreduce_is_measured_against_the_same_job_without_it() {
    let f = Fabric::up("rail-spine.yaml", "rffo");
    let up1 = f.port_to("rail1", "spine1:eth1");
    let down1 = f.port_to("spine1", &format!("rail1:{up1}"));
    let svg = std::env::temp_dir().join(format!("rocefab-rffo-{}.svg", std::process::id()));
    // The link's counters at both ends, around the whole command (the baseline job too).
    let link = |f: &Fabric| {
        let (r, s) = (f.metrics("rail1"), f.metrics("spine1"));
        let c = |t: &str, n: &str, p: &str| series(t, n, &[("port", p)]);
        [
            c(&r, "rocefab_port_tx_packets_total", &up1),
            c(&s, "rocefab_port_rx_packets_total", &down1),
            c(&s, "rocefab_port_tx_packets_total", &down1),
            c(&r, "rocefab_port_rx_packets_total", &up1),
            c(&r, "rocefab_port_carrier_dropped_packets_total", &up1)
                + c(&s, "rocefab_port_carrier_dropped_packets_total", &down1),
        ]
    };
    let before = link(&f);
    // The kernel's own account of the cut, in rail1's namespace: not rocefab's clock.
    let mut mon = LinkMonitor::start(&f, "rail1");
    let r = run_json(
        &[
            &f.name,
            "allreduce",
            "--size",
            "16MiB",
            "--timeout",
            "240",
            "--retransmit-timeout-ms",
            "2000",
            "--fail-link",
            &format!("rail1:{up1}"),
            "--fail-at",
            "50ms",
            "--compare",
            "--timeline",
            svg.to_str().unwrap(),
        ],
        8,
    );
    let fo = &r["failover"];
    assert_eq!(fo["link"], format!("rail1:{up1} -- spine1:{down1}"), "{fo:#}");
    // At D = 1: the cut 50 ms into the job (plus the time to start it).
    let cut = fo["cut_at_ns"].as_u64().unwrap();
    assert!((50_000_000..90_000_000).contains(&cut), "cut at {cut} ns: {fo:#}");
    // The kernel reported rail1's port down after rocefab's cut instant, not before: the
    // instant is not stamped after the fact (it once started after the switches saw the
    // carrier loss, 30-65 ms late). How much after is bounded on an idle fabric
    // (a_cut_link_ages_out_of_lldp_and_a_flapping_link_is_logged): under this job the kernel
    // itself takes milliseconds to close a veth whose NAPI is busy (8.8 ms seen) before it
    // announces the change.
    let kernel = mon.first_down(&up1);
    let stamped = fo["cut_unix_ns"].as_u64().unwrap() as f64 / 1e9;
    eprintln!("the kernel announced the cut {:.3} ms after rocefab's stamp", (kernel - stamped) * 1e3);
    assert!(
        kernel >= stamped,
        "the kernel reported {up1} down {:.3} ms before rocefab's cut instant: {fo:#}",
        (stamped - kernel) * 1e3
    );
    let ends = fo["ends"].as_array().unwrap();
    assert_eq!(ends.len(), 2, "{fo:#}");
    // A switch hands a port without carrier nothing (what it holds for it is dropped, counted):
    // each end stopped sending into the cut link when its data plane acted on the carrier loss,
    // by the switch's own stamps (not a polling of its counters), however late the machine let
    // it see the loss.
    for e in ends {
        let lost = e["carrier_lost_after_ns"]
            .as_u64()
            .unwrap_or_else(|| panic!("{}: its data plane never acted on the carrier loss: {fo:#}", e["end"]));
        if let Some(t) = e["last_frame_after_ns"].as_u64() {
            assert!(t <= lost, "{} sent into the cut link {t} ns after the cut, after it acted on the carrier loss at {lost} ns: {fo:#}", e["end"]);
        }
        eprintln!("{}: acted on the carrier loss {:.3} ms after the cut", e["end"], lost as f64 / 1e6);
    }
    // The check above bites because the job's frames keep arriving for the cut port after its
    // data plane acted (until its ECMP groups move, 100 ms later): a switch that sent them
    // would be caught (a broken build sent 40 ms after the cut). It drops them instead (the
    // frames dropped for want of carrier, asserted below). Whether an end sent anything
    // between the cut and acting on it is the machine's timing, not asserted: seen, rail1's
    // last frame before the cut and spine1's 6.5 ms after it (acting at 7.4 ms) on a loaded
    // machine; neither, with both ends acting within 1.4 ms, in a fresh-clone CI run.
    // Frames were lost (handed to the dead link, or dropped by rail1 for want of carrier), so
    // the job retransmitted and took longer than the same job without it.
    let lost = fo["frames_lost"].as_u64().unwrap();
    assert!(lost > 0, "the cut lost no frame: {fo:#}");
    eprintln!("frames lost: {lost} reported");
    // What the link's own counters say was lost over the whole command: sent by one end and
    // not received by the other, both ways, plus what the ends dropped for want of carrier.
    // The report reads the same counters over the failure's window only; outside it the link
    // loses nothing, so the two agree but for frames in flight at the scrapes (an LLDPDU each
    // way at most: the jobs have ended).
    let after = link(&f);
    let d: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let counted = (d[0] - d[1]).max(0.0) + (d[2] - d[3]).max(0.0) + d[4];
    eprintln!("frames lost by the counters: {counted}, of which dropped for want of carrier {}", d[4]);
    // What makes the stamps' check above bite: frames the ends held for the port, or that came
    // for it, after the carrier went.
    assert!(d[4] > 0.0, "no frame was dropped for want of carrier at either end: {fo:#}");
    assert!(
        (counted - lost as f64).abs() <= 2.0,
        "the report says {lost} frames lost, the link's counters {counted} (tx {} rx {} / tx {} rx {}, carrier drops {}): {fo:#}",
        d[0],
        d[1],
        d[2],
        d[3],
        d[4]
    );
    let base = &fo["baseline"];
    assert_eq!((base["ok"].as_bool(), base["retransmitted_packets"].as_u64()), (Some(true), Some(0)), "{fo:#}");
    assert!(r["retransmitted_packets"].as_u64().unwrap() > 0, "{r:#}");
    assert!(
        r["completion_ns"].as_u64().unwrap() > base["completion_ns"].as_u64().unwrap(),
        "the failure cost nothing? {} vs {}",
        r["completion_ns"],
        base["completion_ns"]
    );
    // Restored after the job: the port is back.
    assert!(fo["restored_at_ns"].as_u64().unwrap() > cut);
    assert_eq!(metric(&f.metrics("rail1"), "rocefab_port_carrier", &[("port", up1.as_str())]), 1.0);
    let events: Vec<&str> = r["events"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert!(events.iter().any(|e| e.contains(&format!("link down rail1:{up1}"))), "{events:?}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    std::fs::remove_file(&svg).unwrap();
    assert!(drawn.contains(&format!("link down rail1:{up1} -- spine1:{down1}")), "the timeline draws the cut");
}

/// A cut link's LLDP neighbours age out at their TTL (IEEE 802.1AB: the last LLDPDU's TTL, here
/// 3 s sent every 1 s) and `rocefab lldp --check` says the link is down, which ends still list
/// their neighbour, then that both aged it out; the restored link is checked clean again.
#[test]
fn a_cut_link_ages_out_of_lldp() {
    let f = Fabric::up_with("rail-spine.yaml", "rfla", "lldp:\n  tx_interval: 1s\n  ttl: 3s\n");
    let up1 = f.port_to("rail1", "spine1:eth1");
    let down1 = f.port_to("spine1", &format!("rail1:{up1}"));
    let check = || {
        let o = rocefab(&["lldp", &f.name, "--check", "--json"]);
        let links: Vec<Value> = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
        (o.status.success(), links.into_iter().find(|l| l["a"] == format!("rail1:{up1}")).unwrap())
    };
    let t0 = Instant::now();
    while !check().0 {
        assert!(t0.elapsed() < Duration::from_secs(15), "LLDP never checked clean: {:?}", check());
        std::thread::sleep(Duration::from_millis(200));
    }
    let ageouts = |sw: &str, port: &str| metric(&f.metrics(sw), "rocefab_lldp_ageouts_total", &[("port", port)]);
    let before = (ageouts("rail1", &up1), ageouts("spine1", &down1));

    let mut mon = LinkMonitor::start(&f, "rail1");
    // An idle machine: what is bounded is rocefab, not the kernel's work on a busy one.
    rocefab_tests::proc::wait_for_quiet();
    let o = rocefab(&["fail", "link", &f.name, &format!("rail1:{up1}")]);
    assert!(o.status.success(), "rocefab fail link: {}", failure(&o));
    let cut = Instant::now();
    // The cut's time in the event log is when rocefab changed the link, not later: the kernel
    // announced rail1's port down after it. How soon after is the kernel's own closing of the
    // veth (it announces at the end of dev_close): 0.17-0.37 ms here, 1.28 ms in a fresh-clone
    // CI run, up to 8.8 ms under load. rocefab's old spawned `ip` added about 2 ms (1.9 and
    // 3.0 ms seen), which this oracle cannot tell from a slow close: no upper bound.
    let kernel = mon.first_down(&up1);
    let o = rocefab(&["events", &f.name, "--json"]);
    let logged = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "link down")
        .unwrap_or_else(|| panic!("no link down event: {}", stdout(&o)));
    let late = kernel - logged["wall_unix_ns"].as_u64().expect("wall_unix_ns") as f64 / 1e9;
    eprintln!("the kernel announced the cut {:.3} ms after the logged time", late * 1e3);
    assert!(late >= 0.0, "the kernel announced the cut {:.3} ms before the logged time: {logged}", -late * 1e3);
    let (ok, link) = check();
    assert!(!ok, "a cut link fails the check");
    assert_eq!(link["status"], "link_down", "{link:#}");
    assert!(!link["listed"].as_array().unwrap().is_empty(), "just cut: the neighbours are still listed: {link:#}");
    let aged = loop {
        let (_, link) = check();
        assert_eq!(link["status"], "link_down", "{link:#}");
        if link["listed"].as_array().unwrap().is_empty() {
            break cut.elapsed();
        }
        assert!(cut.elapsed() < Duration::from_secs(5), "not aged out 5 s after the cut: {link:#}");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The last LLDPDU came at most one interval (1 s) before the cut, with a TTL of 3 s.
    assert!(aged >= Duration::from_millis(1_900) && aged <= Duration::from_millis(3_400), "aged out after {aged:?}");
    assert_eq!((ageouts("rail1", &up1), ageouts("spine1", &down1)), (before.0 + 1.0, before.1 + 1.0));

    let o = rocefab(&["restore", "link", &f.name, &format!("rail1:{up1}")]);
    assert!(o.status.success(), "rocefab restore link: {}", failure(&o));
    let back = Instant::now();
    while !check().0 {
        // A fast start on the carrier's return: an LLDPDU within the fast interval (1 s).
        assert!(back.elapsed() < Duration::from_secs(3), "LLDP not back 3 s after the restore: {:?}", check());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Time dilation of [`a_flapping_link_is_logged_at_its_period`]: each change is a command's
/// sleep, two threads entering the link's namespaces and the ioctls, whose lateness on a loaded
/// 2-core machine (8 ms seen with two CPU hogs and a build) is the machine's; at D 10 it is a
/// tenth of that in emulated time.
const FLAP_DILATION: u64 = 10;

/// A flapping link (`--flap 300ms --for 1200ms`, emulated) goes down and up twice, 300 ms apart,
/// each change an event that the switches' carrier watch saw (3 s of wall clock outlasts their
/// 100 ms wall-clock debounce).
#[test]
fn a_flapping_link_is_logged_at_its_period() {
    let f = Fabric::up_with("rail-spine.yaml", "rffp", &format!("time_dilation: {FLAP_DILATION}\n"));
    let up1 = f.port_to("rail1", "spine1:eth1");
    let counts = || {
        let m = f.metrics("rail1");
        (series(&m, "rocefab_route_updates_total", &[]), series(&m, "rocefab_routes_replaced_total", &[]))
    };
    let (u0, r0) = counts();
    let o = rocefab(&["fail", "link", &f.name, &format!("rail1:{up1}"), "--flap", "300ms", "--for", "1200ms"]);
    assert!(o.status.success(), "rocefab fail link --flap: {}", failure(&o));
    for i in 1..=4 {
        assert!(stdout(&o).contains(&format!("(flap {i} of 4)")), "{}", stdout(&o));
    }
    // Two losses, each outlasting the debounce: rail1 rewrites the groups holding the port for
    // each, then takes the routes pushed without the link; at each return the routes pushed
    // with it put the port back (no carrier rewrite: the pushed groups did not hold it).
    let (u1, r1) = counts();
    assert_eq!(
        (u1 - u0, r1 - r0),
        (2.0 * groups_with_port(&f, "rail1", &up1), 4.0),
        "carrier rewrites and routes pushed for two flaps"
    );
    assert_eq!(
        groups_holding(&f, "rail1", &up1),
        groups_with_port(&f, "rail1", &up1),
        "the port is back in its groups"
    );
    assert_eq!(metric(&f.metrics("rail1"), "rocefab_port_carrier", &[("port", up1.as_str())]), 1.0, "it ends up");
    let o = rocefab(&["events", &f.name, "--json"]);
    let log: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let flaps: Vec<&Value> = log.iter().filter(|e| e["detail"].as_str().unwrap().starts_with("flap ")).collect();
    let kinds: Vec<&str> = flaps.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["link down", "link up", "link down", "link up"]);
    // 300 ms apart in emulated time, each change at its own time from the first (never early:
    // the command sleeps until it is due) and late by at most 20 ms of wall clock (2 ms here).
    for w in flaps.windows(2) {
        let gap = w[1]["emulated_ns"].as_u64().unwrap() - w[0]["emulated_ns"].as_u64().unwrap();
        assert!(
            (298_000_000..=303_000_000).contains(&gap),
            "flap changes {gap} ns apart (emulated, D {FLAP_DILATION})"
        );
    }
}

/// Issue 38: a PFC storm that kills a job (rocefab run's default retransmission timeout, so the
/// QPs into rank 2 run out of retries while rail1's watchdog drops their frames) is named first
/// in the run's error, with the stormed port, its peer and the frames dropped; before, the error
/// was only "retry count exceeded ... rank 1 -> rank 2".
#[test]
fn a_job_killed_by_a_pfc_storm_says_so_first() {
    let f = Fabric::up("rail-spine.yaml", "rfsk");
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let prio = [("port", to_h2.as_str()), ("priority", "3")];
    let mut storm = rocefab_tests::proc::Proc::drained(
        "rocefab fail nic --pfc-storm",
        std::process::Command::new(rocefab_tests::fabric::rocefab_bin())
            .args(["fail", "nic", &f.name, "host2:gpu0", "--pfc-storm", "--for", "10s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    // The watchdog has declared the storm: from the job's start every frame to or from host2's
    // port is dropped, and 7 local ACK timeouts (100 ms each) end the QPs into rank 2 within the
    // storm's 10 s.
    let t0 = Instant::now();
    while metric(&f.metrics("rail1"), "rocefab_pfcwd_storms_total", &prio) < 1.0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "rail1 declared no storm");
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = rocefab(&["run", &f.name, "alltoall", "--size", "8MiB", "--json", "--timeout", "120"]);
    assert!(storm.output().status.success());
    assert!(!o.status.success(), "the job survived the storm: {}", stdout(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", failure(&o)));
    let first = r["errors"][0].as_str().unwrap_or_default();
    let named = format!("PFC watchdog: switch rail1 port {to_h2} (to host2:gpu0) priority 3 was stormed");
    assert!(first.starts_with(&named), "the first error: {first}\nall: {:#}", r["errors"]);
    // The frames the watchdog dropped during the job: thousands (the job's share of rank 2),
    // no more than the switch counted in all (frames still in flight after the report's last
    // sample are counted later; the exact count is checked on a verified job below).
    let w = &r["watchdog"][0];
    let in_job = w["dropped_frames"].as_u64().unwrap();
    let total = metric(&f.metrics("rail1"), "rocefab_pfcwd_dropped_packets_total", &[("queue", "3")]);
    assert!(in_job >= 1000 && in_job as f64 <= total, "{w} (rail1 counted {total})");
    assert!(first.contains(&format!("the watchdog dropped {in_job} frames of priority 3 on rail1")), "{first}");
    assert!(stderr(&o).contains(&named), "the command's error line: {}", stderr(&o));
}

/// A PFC storm from host2:gpu0 while an all-to-all runs: rail1's watchdog drops what waits for
/// the stormed queue (the QPs into rank 2 lose frames and retransmit after the storm), nothing
/// spreads (no switch sends PFC, no other NIC is paused), and the rest of the fabric keeps its
/// goodput: the 42 QPs that do not touch rank 2 move their data at least 90 % as fast together,
/// and the slowest of them at least 80 % as fast, as in the same job without the storm.
#[test]
fn a_pfc_storm_during_an_alltoall_leaves_the_rest_of_the_fabric_its_goodput() {
    let f = Fabric::up("rail-spine.yaml", "rfsg");
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let job =
        || run_json(&[&f.name, "alltoall", "--size", "8MiB", "--timeout", "120", "--retransmit-timeout-ms", "2000"], 8);
    // host2:gpu0 is rank 2 (host index 1 x 2 GPUs + local rank 0).
    let touches_rank2 = |q: &Value| {
        let l = q["label"].as_str().unwrap();
        l.split(" -> ").any(|x| x == "rank 2")
    };
    let rest = |r: &Value| -> (f64, f64, usize) {
        let g: Vec<f64> = r["qps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| !touches_rank2(q))
            .map(|q| q["goodput_bps"].as_f64().unwrap())
            .collect();
        (g.iter().sum(), g.iter().copied().fold(f64::INFINITY, f64::min), g.len())
    };
    let base = job();
    assert_eq!(base["retransmitted_packets"].as_u64(), Some(0), "{base:#}");
    let pfc_tx = || f.metric_sum(&["rail1", "rail2", "spine1", "spine2"], "rocefab_pfc_tx_frames_total", &[]);
    let prio = [("port", to_h2.as_str()), ("priority", "3")];
    let queue = [("port", to_h2.as_str()), ("queue", "3")];
    let (tx0, dropped0) = (pfc_tx(), metric(&f.metrics("rail1"), "rocefab_pfcwd_dropped_packets_total", &queue));
    let dropped_all0 = metric(&f.metrics("rail1"), "rocefab_pfcwd_dropped_packets_total", &[("queue", "3")]);

    let mut storm = rocefab_tests::proc::Proc::spawn(
        "rocefab fail nic --pfc-storm",
        std::process::Command::new(rocefab_tests::fabric::rocefab_bin())
            .args(["fail", "nic", &f.name, "host2:gpu0", "--pfc-storm", "--for", "4s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    let t0 = Instant::now();
    while metric(&f.metrics("rail1"), "rocefab_pfc_rx_frames_total", &prio) < 1.0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "the storm never reached rail1");
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = job();
    let s = storm.output();
    assert!(s.status.success(), "rocefab fail nic: {}", failure(&s));
    // The storm hit the job: the watchdog dropped the stormed queue's frames, which the QPs into
    // rank 2 resent.
    let m = f.metrics("rail1");
    assert_eq!(metric(&m, "rocefab_pfcwd_storms_total", &prio), 1.0);
    assert!(metric(&m, "rocefab_pfcwd_dropped_packets_total", &queue) > dropped0, "the watchdog dropped nothing");
    assert!(r["retransmitted_packets"].as_u64().unwrap() > 0, "{r:#}");
    // The report says so (issue 38): rail1's stormed port and its peer (stormed before the job
    // began or during it), and exactly the frames of priority 3 rail1's watchdog dropped
    // (counted on the queues they were headed for), also as a warning of the verified job.
    let wd = r["watchdog"].as_array().expect("watchdog in the report");
    let dropped = metric(&m, "rocefab_pfcwd_dropped_packets_total", &[("queue", "3")]) - dropped_all0;
    assert_eq!(wd.len(), 1, "{wd:?}");
    assert_eq!(
        (wd[0]["switch"].as_str(), wd[0]["port"].as_str(), wd[0]["peer"].as_str(), wd[0]["priority"].as_u64()),
        (Some("rail1"), Some(to_h2.as_str()), Some("host2:gpu0"), Some(3)),
        "{wd:?}"
    );
    assert!(wd[0]["storms"].as_u64().unwrap() <= 1, "{wd:?}");
    assert_eq!(wd[0]["dropped_frames"].as_f64(), Some(dropped), "{wd:?}");
    let named = format!("PFC watchdog: switch rail1 port {to_h2} (to host2:gpu0) priority 3 was stormed");
    assert!(r["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().starts_with(&named)), "{r:#}");
    // Contained: no switch sent PFC, and no other NIC was paused.
    assert_eq!(pfc_tx(), tx0, "a switch passed the storm on");
    for n in r["nics"].as_array().unwrap() {
        if n["host"] != "host2" || n["nic"] != "gpu0" {
            assert_eq!(n["pfc_frames_received"].as_u64(), Some(0), "{n}");
        }
    }
    let ((b_sum, b_min, b_n), (s_sum, s_min, s_n)) = (rest(&base), rest(&r));
    assert_eq!((b_n, s_n), (42, 42), "8 ranks x 7 peers, 14 of them with rank 2");
    assert!(
        s_sum >= 0.9 * b_sum,
        "the rest moved {:.1} Mbit/s with the storm, {:.1} without",
        s_sum / 1e6,
        b_sum / 1e6
    );
    assert!(
        s_min >= 0.8 * b_min,
        "the slowest other QP: {:.2} Mbit/s with the storm, {:.2} without",
        s_min / 1e6,
        b_min / 1e6
    );
}

/// A cable cut under a standing lossless queue: rail1's queue toward host1's GPU 0 holds
/// hundreds of RoCEv2 frames (three senders at ~3.8 times the port's rate) when `rocefab fail
/// link host1:gpu0` takes the carrier. The switch drops them at once, as an ASIC flushes a down
/// port's queues, and drops what still arrives for the port until its routes move: the queue is
/// empty when the command returns and stays empty, the port sends nothing more, every frame that
/// entered the queue and never left it is counted as dropped for the carrier, and no ingress
/// group keeps any of the buffer. (Before, the queue stayed full until the restore, holding its
/// senders' buffer, and with it their pauses, for good.)
#[test]
fn a_cut_cable_under_a_standing_queue_drops_it_and_gives_the_buffer_back() {
    use rocefab_tests::proc::Proc;
    // D = 8: the 1 Gbit/s port drains 125 Mbit/s of wall clock; 3 x 20,000 frames/s of 1,000 B
    // is 480 Mbit/s.
    let f = Fabric::up_with("rail-spine.yaml", "rfcq", "time_dilation: 8\n");
    let port = f.port_to("rail1", "host1:gpu0");
    let q = |m: &str, name: &str| metric(m, name, &[("port", &port), ("queue", "3")]);
    let senders: Vec<Proc> = ["host2", "host3", "host4"]
        .iter()
        .map(|h| {
            let from = format!("{h}:gpu0");
            let args = ["send", &f.name, "--from", &from, "--to", "host1:gpu0", "--dscp", "24"];
            let pace = ["--count", "40000", "--rate-pps", "20000", "--size", "1000", "--max-seconds", "10"];
            let mut c = std::process::Command::new(rocefab_tests::fabric::rocefab_bin());
            c.args(args).args(pace).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
            Proc::spawn(&format!("rocefab send from {h}"), &mut c)
        })
        .collect();

    // The congestion happened: the queue stands (bounded wait).
    let port_metric = |m: &str, name: &str| metric(m, name, &[("port", &port)]);
    let end = Instant::now() + Duration::from_secs(5);
    let (mut depth, mut sent_at_depth) = (0.0, 0.0);
    while depth < 300.0 {
        assert!(Instant::now() < end, "rail1:{port} queue 3 never held 300 frames (last {depth})");
        let m = f.metrics("rail1");
        (depth, sent_at_depth) =
            (q(&m, "rocefab_queue_depth_packets"), port_metric(&m, "rocefab_port_tx_packets_total"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = rocefab(&["fail", "link", &f.name, "host1:gpu0"]);
    assert!(o.status.success(), "rocefab fail link: {}", failure(&o));
    let cut = f.metrics("rail1");
    assert_eq!(q(&cut, "rocefab_queue_depth_packets"), 0.0, "the queue of a port without carrier after the cut");
    let sent_at_cut = port_metric(&cut, "rocefab_port_tx_packets_total");
    for mut s in senders {
        assert_eq!(s.wait(Duration::from_secs(15)), 0, "{}", s.what);
    }

    let after = f.metrics("rail1");
    assert_eq!(q(&after, "rocefab_queue_depth_packets"), 0.0, "frames arriving for the cut port were queued");
    assert_eq!(port_metric(&after, "rocefab_port_tx_packets_total"), sent_at_cut, "the cut port sent frames");
    let flushed = q(&after, "rocefab_queue_enqueued_packets_total") - q(&after, "rocefab_queue_dequeued_packets_total");
    // Of the `depth` frames queued at the last look before the cut, the port sent some until
    // its carrier went (PFC held the senders, so the queue could shrink meanwhile: a fresh-clone
    // CI run flushed 2344 of 2346): every other one was flushed, not sent and not lost from the
    // count (a flush that counted the frames as dequeued leaves about none).
    let sent_meanwhile = sent_at_cut - sent_at_depth;
    assert!(
        flushed >= depth - sent_meanwhile,
        "{flushed} frames entered the queue and never left it; it held {depth} at the last look before the cut, \
         and the port sent {sent_meanwhile} after that"
    );
    let dropped = port_metric(&after, "rocefab_port_carrier_dropped_packets_total");
    // The flushed frames, plus those that arrived for the port before its routes moved (the
    // senders kept sending at 480 Mbit/s through the 100 ms debounce).
    assert!(dropped > flushed, "{dropped} frames dropped for the carrier, {flushed} flushed from the queue");
    let held = metric(&after, "rocefab_ingress_pg_bytes", &[]);
    assert_eq!(held, 0.0, "ingress groups still hold buffer: {held} bytes");
    let o = rocefab(&["restore", "link", &f.name, "host1:gpu0"]);
    assert!(o.status.success(), "rocefab restore link: {}", failure(&o));
}
