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
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_contracts::config::{NextHopConfig, PortConfig, RouteConfig, SwitchConfig};
use rocefab_tests::fabric::{bin_dir, series};
use rocefab_tests::host::Netns;
use rocefab_tests::proc::sh;
use rocefab_tests::scratch::{temp_dir, TempDir};

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

/// The daemon, killed on drop unless it already exited.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(t0.elapsed() < limit, "daemon did not exit within {limit:?}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn switchd() -> PathBuf {
    let p = bin_dir().join("rocefab-switchd");
    assert!(p.is_file(), "{} not found: run `cargo build -p dataplane-user` first or set ROCEFAB_BIN_DIR", p.display());
    p
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Switch `name` in namespace `ns`: port 0 toward h1's side (next hop `left`), port 1 toward
/// h2's (next hop `right`).
fn config(name: &str, ns: &str, ports: [(&str, &str); 2], left: &str, right: &str, metrics: u16) -> SwitchConfig {
    let port = |(name, mac): (&str, &str), peer: &str| PortConfig {
        name: name.into(),
        mac: mac.parse().unwrap(),
        line_rate_bps: 1_000_000_000,
        addresses: vec![],
        peer: peer.into(),
        tx_delay_ns: 0,
        rx_delay_ns: 0,
    };
    SwitchConfig {
        name: name.into(),
        role: "rail".into(),
        netns: Some(ns.into()),
        hash_seed: 1,
        metrics_listen: format!("127.0.0.1:{metrics}").parse().unwrap(),
        dscp_to_tc: dataplane_common::dscp::default_table().to_vec(),
        queue_limit_bytes: 1 << 20,
        xdp_mode: "driver".into(),
        ports: vec![port(ports[0], "left"), port(ports[1], "right")],
        nexthops: vec![
            NextHopConfig { port: 0, mac: left.parse().unwrap() },
            NextHopConfig { port: 1, mac: right.parse().unwrap() },
        ],
        groups: vec![vec![0], vec![1]],
        routes: vec![
            RouteConfig { prefix: "10.9.1.0".parse().unwrap(), len: 24, group: Some(0) },
            RouteConfig { prefix: "10.9.2.0".parse().unwrap(), len: 24, group: Some(1) },
        ],
        qos: Default::default(),
        // Every frame a port sends is counted: no LLDP.
        lldp: rocefab_contracts::config::LldpConfig { enabled: false, ..Default::default() },
        chassis_mac: None,
        time_dilation: 1.0,
        load_balance: Default::default(),
        fib: false,
    }
}

fn start(cfgs: &[&SwitchConfig], workers: u16, dir: &Path) -> Daemon {
    let log = dir.join("switchd.log");
    let mut cmd = Command::new(switchd());
    for c in cfgs {
        let path = dir.join(format!("{}.json", c.name));
        c.save(&path).unwrap();
        cmd.arg("--config").arg(path);
    }
    let child = cmd
        .arg("--workers")
        .arg(workers.to_string())
        .arg("--log-file")
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning rocefab-switchd");
    Daemon { child, log }
}

fn scrape(port: u16) -> anyhow::Result<String> {
    rocefab_tests::http::get(([127, 0, 0, 1], port).into(), "/metrics")
}

/// Waits until both switches logged that they are up and answer a scrape.
fn wait_up(d: &mut Daemon, ports: &[u16]) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = d.child.try_wait().unwrap() {
            panic!("rocefab-switchd exited early with {st}; log:\n{}", d.log());
        }
        if d.log().matches("switch up").count() == ports.len() && ports.iter().all(|&p| scrape(p).is_ok()) {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "switches not up after 20 s; log:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `POST path` on the loopback `port`: the answer's status line.
fn post(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.lines().next().unwrap_or_default().to_string()
}

/// The process's threads by name (`/proc/<pid>/task/*/comm`).
fn threads(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap().trim().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn two_switches_share_one_data_plane_worker() {
    let _chain = Chain::up();
    let dir: TempDir = temp_dir("rf-wk-");
    let (ma, mb) = (free_port(), free_port());
    let a = config("wa", WA, [("wa-p0", WA_P0), ("wa-p1", WA_P1)], H1_MAC, WB_P0, ma);
    let b = config("wb", WB, [("wb-p0", WB_P0), ("wb-p1", WB_P1)], WA_P1, H2_MAC, mb);
    let mut d = start(&[&a, &b], 1, dir.path());
    wait_up(&mut d, &[ma, mb]);

    // One data-plane thread for both, one control thread per switch.
    let names = threads(d.child.id());
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
    assert!(post(ma, "/stop").starts_with("HTTP/1.1 200"), "POST /stop");
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
    while threads(d.child.id()).iter().any(|n| n == "sw-wa") {
        assert!(t0.elapsed() < Duration::from_secs(5), "wa's control thread still runs 5 s after POST /stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(threads(d.child.id()).iter().any(|n| n == "sw-wb"), "wb's control thread ended with wa's");
    assert!(scrape(mb).is_ok(), "wb stopped with wa");

    // SIGTERM: wb ends cleanly too, its ports' XDP detached.
    sh("kill", &["-TERM", &d.child.id().to_string()]);
    let st = d.wait_exit(Duration::from_secs(10));
    assert!(st.success(), "exit status {st}; log:\n{}", d.log());
    let links = sh("ip", &["-n", WB, "link", "show"]);
    assert!(!links.contains("xdp"), "XDP still attached in {WB} after exit:\n{links}");
    assert_eq!(d.log().matches("XDP detached").count(), 2, "{}", d.log());
}

#[test]
fn a_switch_named_twice_is_refused() {
    let dir: TempDir = temp_dir("rf-wk-");
    let a = config("wa", WA, [("wa-p0", WA_P0), ("wa-p1", WA_P1)], H1_MAC, WB_P0, free_port());
    let (p1, p2) = (dir.path().join("a.json"), dir.path().join("again.json"));
    a.save(&p1).unwrap();
    a.save(&p2).unwrap();
    let o = Command::new(switchd()).arg("--config").arg(&p1).arg("--config").arg(&p2).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("switch wa is configured twice") && err.contains("again.json"), "{err}");
}
