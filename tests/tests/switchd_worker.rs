//! Privileged: two switches in one `rocefab-switchd` process, their data planes on one shared
//! worker thread (`--config a.json --config b.json --workers 1`).
//!
//! h1 (10.9.1.1/24) — [wa: ports wa-p0 / wa-p1] — [wb: ports wb-p0 / wb-p1] — h2 (10.9.2.1/24)
//!
//! Each switch keeps its own namespace, XDP program, sockets, `/metrics` listener and counters;
//! only the data-plane thread is shared. Frames cross both switches, each counts exactly what it
//! forwarded, the process has one data-plane thread and one control thread per switch, `POST
//! /stop` ends one switch alone, SIGTERM ends the other cleanly (XDP detached from all four
//! ports), and a switch named twice is refused.
//!
//! Needs root and the built binary (`cargo build -p dataplane-user`; `$ROCEFAB_BIN_DIR`, default
//! the workspace's `target/debug`). Everything created is prefixed `rf-wk-` and removed by
//! guards, also when an assertion fails.
use std::process::Command;
use std::time::{Duration, Instant};

use rocefab_contracts::config::SwitchConfig;
use rocefab_tests::fabric::series;
use rocefab_tests::host::Netns;
use rocefab_tests::http::{free_port, post};
use rocefab_tests::proc::{sh, threads};
use rocefab_tests::scratch::{temp_dir, TempDir};
use rocefab_tests::switchd::{self, scrape, Daemon, Port};

/// Switch `name` in `ns`, its port 0 (`<name>-p0`, MAC `macs.0`) toward h1's side (next hop
/// `left`), port 1 toward h2's (next hop `right`).
fn config(name: &str, ns: &str, macs: (&str, &str), left: &str, right: &str, metrics: u16) -> SwitchConfig {
    let (p0, p1) = (format!("{name}-p0"), format!("{name}-p1"));
    let ports = [Port { name: &p0, mac: macs.0, peer: "left" }, Port { name: &p1, mac: macs.1, peer: "right" }];
    switchd::router(name, ns, ports, left, right, metrics)
}

/// `POST path` on the switch listening on loopback port `port`: the status line.
fn post_to(port: u16, path: &str) -> String {
    post(([127, 0, 0, 1], port).into(), path).unwrap()
}

const H1: &str = "rf-wk-h1";
const WA: &str = "rf-wk-wa";
const WB: &str = "rf-wk-wb";
const H2: &str = "rf-wk-h2";
const WA_P0: &str = "02:5e:00:00:0a:00";
const WA_P1: &str = "02:5e:00:00:0a:01";
const WB_P0: &str = "02:5e:00:00:0b:00";
const WB_P1: &str = "02:5e:00:00:0b:01";
const H1_MAC: &str = "02:5e:00:00:01:01";
const H2_MAC: &str = "02:5e:00:00:02:01";

/// The namespaces (and with them the veths), deleted on drop.
struct Chain {
    _ns: Vec<Netns>,
}

impl Chain {
    fn up() -> Chain {
        let c = Chain { _ns: [H1, WA, WB, H2].into_iter().map(Netns::new).collect() };
        for (a, an, b, bn) in [(H1, "wk-h1", WA, "wa-p0"), (WA, "wa-p1", WB, "wb-p0"), (WB, "wb-p1", H2, "wk-h2")] {
            sh("ip", &["link", "add", an, "netns", a, "type", "veth", "peer", "name", bn, "netns", b]);
        }
        for (ns, dev, mac) in [
            (H1, "wk-h1", H1_MAC),
            (WA, "wa-p0", WA_P0),
            (WA, "wa-p1", WA_P1),
            (WB, "wb-p0", WB_P0),
            (WB, "wb-p1", WB_P1),
            (H2, "wk-h2", H2_MAC),
        ] {
            sh("ip", &["-n", ns, "link", "set", dev, "address", mac]);
            sh("ip", &["-n", ns, "link", "set", dev, "up"]);
        }
        for (ns, dev, addr, net, gw, gw_mac) in [
            (H1, "wk-h1", "10.9.1.1/24", "10.9.2.0/24", "10.9.1.254", WA_P0),
            (H2, "wk-h2", "10.9.2.1/24", "10.9.1.0/24", "10.9.2.254", WB_P1),
        ] {
            sh("ip", &["-n", ns, "addr", "add", addr, "dev", dev]);
            sh("ip", &["-n", ns, "route", "add", net, "via", gw, "dev", dev]);
            sh("ip", &["-n", ns, "neigh", "add", gw, "lladdr", gw_mac, "dev", dev, "nud", "permanent"]);
            // veth would otherwise hand the switch UDP frames with unfinished checksums.
            sh("ip", &["netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"]);
        }
        c
    }
}

#[test]
fn two_switches_share_one_data_plane_worker() {
    let _chain = Chain::up();
    let dir: TempDir = temp_dir("rf-wk-");
    let (ma, mb) = (free_port(), free_port());
    let a = config("wa", WA, (WA_P0, WA_P1), H1_MAC, WB_P0, ma);
    let b = config("wb", WB, (WB_P0, WB_P1), WA_P1, H2_MAC, mb);
    let mut d = Daemon::start(&[&a, &b], Some(1), dir.path());
    d.wait_up(&[ma, mb]);

    // One data-plane thread for both, one control thread per switch.
    let names = threads(d.pid());
    assert_eq!(names.iter().filter(|n| n.starts_with("dp-")).collect::<Vec<_>>(), ["dp-worker-0"], "{names:?}");
    for sw in ["sw-wa", "sw-wb"] {
        assert!(names.iter().any(|n| n == sw), "no control thread {sw}: {names:?}");
    }
    // Each switch's own program on its own ports.
    for (ns, ports) in [(WA, ["wa-p0", "wa-p1"]), (WB, ["wb-p0", "wb-p1"])] {
        let links = sh("ip", &["-n", ns, "link", "show"]);
        for p in ports {
            let line = links.lines().find(|l| l.contains(&format!(" {p}@"))).unwrap_or_else(|| panic!("{links}"));
            assert!(line.contains("xdp"), "no XDP on {p}: {links}");
        }
    }

    // Two hops each way.
    let ping = Command::new("ip")
        .args(["netns", "exec", H1, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.9.2.1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ping.stdout).to_string();
    assert!(ping.status.success(), "ping failed:\n{text}\nlog:\n{}", d.log());
    assert!(text.contains("ttl=62"), "not two routed hops:\n{text}");

    // N datagrams h1 -> h2 (DSCP 24: queue 3): each switch forwards exactly N on queue 3, on
    // its own counters, the one behind its own listener.
    const N: u64 = 200;
    let q3 = |port: u16, p: &str| {
        series(&scrape(port).unwrap(), "rocefab_queue_dequeued_packets_total", &[("port", p), ("queue", "3")])
    };
    let (a0, b0) = (q3(ma, "wa-p1"), q3(mb, "wb-p1"));
    let py = "import socket,sys\n\
              s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
              s.setsockopt(socket.IPPROTO_IP,socket.IP_TOS,24<<2)\n\
              [s.sendto(b'w'*500,('10.9.2.1',4791)) for _ in range(int(sys.argv[1]))]\n";
    sh("ip", &["netns", "exec", H1, "/usr/bin/python3", "-c", py, &N.to_string()]);
    let t0 = Instant::now();
    let (da, db) = loop {
        let (da, db) = (q3(ma, "wa-p1") - a0, q3(mb, "wb-p1") - b0);
        if (da >= N as f64 && db >= N as f64) || t0.elapsed() > Duration::from_secs(5) {
            break (da, db);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!((da, db), (N as f64, N as f64), "frames of queue 3 forwarded by wa and wb");
    let text = scrape(mb).unwrap();
    assert!(text.contains("switch=\"wb\""), "wb's listener serves another switch's metrics");
    assert!(!text.contains("switch=\"wa\""), "wb's listener serves wa's metrics too");

    // `POST /stop` ends wa alone: its listener closes, its ports lose their XDP program, its
    // control thread ends; wb and the process go on.
    assert!(post_to(ma, "/stop").starts_with("HTTP/1.1 200"), "POST /stop");
    let t0 = Instant::now();
    while scrape(ma).is_ok() {
        assert!(t0.elapsed() < Duration::from_secs(5), "wa still serves 5 s after POST /stop; log:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(d.child.try_wait().unwrap().is_none(), "the daemon ended with wa; log:\n{}", d.log());
    let links = sh("ip", &["-n", WA, "link", "show"]);
    assert!(!links.contains("xdp"), "XDP still attached to wa's ports:\n{links}");
    // Its control thread ends right after its listener closed (the last thing it does).
    let t0 = Instant::now();
    while threads(d.pid()).iter().any(|n| n == "sw-wa") {
        assert!(t0.elapsed() < Duration::from_secs(5), "wa's control thread still runs 5 s after POST /stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(threads(d.pid()).iter().any(|n| n == "sw-wb"), "wb's control thread ended with wa's");
    assert!(scrape(mb).is_ok(), "wb stopped with wa");

    // SIGTERM: wb ends cleanly too, its ports' XDP detached.
    d.sigterm();
    let st = d.wait_exit(Duration::from_secs(10));
    assert!(st.success(), "exit status {st}; log:\n{}", d.log());
    let links = sh("ip", &["-n", WB, "link", "show"]);
    assert!(!links.contains("xdp"), "XDP still attached in {WB} after exit:\n{links}");
    assert_eq!(d.log().matches("XDP detached").count(), 2, "{}", d.log());
}

#[test]
fn a_switch_named_twice_is_refused() {
    let dir: TempDir = temp_dir("rf-wk-");
    let a = config("wa", WA, (WA_P0, WA_P1), H1_MAC, WB_P0, free_port());
    let (p1, p2) = (dir.path().join("a.json"), dir.path().join("again.json"));
    a.save(&p1).unwrap();
    a.save(&p2).unwrap();
    let o = Command::new(switchd::binary()).arg("--config").arg(&p1).arg("--config").arg(&p2).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("switch wa is configured twice") && err.contains("again.json"), "{err}");
}
