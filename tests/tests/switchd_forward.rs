//! Privileged: the `rocefab-switchd` binary forwarding between two host namespaces.
//!
//! h1 (10.9.1.1/24) — veth — [sw: rocefab-switchd, ports sw-p0 / sw-p1] — veth — h2 (10.9.2.1/24)
//!
//! Needs root and the built binary: `cargo build -p dataplane-user` first; the binary is looked
//! up in `$ROCEFAB_BIN_DIR` (default: the workspace's `target/debug`). Everything created is
//! prefixed `rf-sd-` and removed by guards, also when an assertion fails.
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rocefab_contracts::config::SwitchConfig;
use rocefab_tests::capture::start_capture_in;
use rocefab_tests::host::Netns;
use rocefab_tests::http::free_port;
use rocefab_tests::scratch::{temp_dir, TempDir, TempFile};
use rocefab_tests::switchd::{self, scrape, Daemon, Port};

const H1: &str = "rf-sd-h1";
const SW: &str = "rf-sd-sw";
const H2: &str = "rf-sd-h2";
const SW_P0_MAC: &str = "02:5d:00:00:00:10";
const SW_P1_MAC: &str = "02:5d:00:00:00:11";
const H1_MAC: &str = "02:5d:00:00:01:01";
const H2_MAC: &str = "02:5d:00:00:02:01";

fn sh(args: &[&str]) -> std::process::Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("running {args:?}: {e} (is {} installed?)", args[0]))
}

fn run(args: &[&str]) {
    rocefab_tests::proc::sh(args[0], &args[1..]);
}

/// The test's namespaces (and with them the veths), deleted on drop.
struct Fabric {
    _ns: Vec<Netns>,
}

impl Fabric {
    fn up() -> Fabric {
        let f = Fabric { _ns: [H1, SW, H2].into_iter().map(Netns::new).collect() };
        run(&["ip", "link", "add", "sd-h1", "netns", H1, "type", "veth", "peer", "name", "sw-p0", "netns", SW]);
        run(&["ip", "link", "add", "sd-h2", "netns", H2, "type", "veth", "peer", "name", "sw-p1", "netns", SW]);
        for (ns, dev, mac) in
            [(SW, "sw-p0", SW_P0_MAC), (SW, "sw-p1", SW_P1_MAC), (H1, "sd-h1", H1_MAC), (H2, "sd-h2", H2_MAC)]
        {
            run(&["ip", "-n", ns, "link", "set", dev, "address", mac]);
            run(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        for (ns, dev, addr, net, gw, gw_mac) in [
            (H1, "sd-h1", "10.9.1.1/24", "10.9.2.0/24", "10.9.1.254", SW_P0_MAC),
            (H2, "sd-h2", "10.9.2.1/24", "10.9.1.0/24", "10.9.2.254", SW_P1_MAC),
        ] {
            run(&["ip", "-n", ns, "addr", "add", addr, "dev", dev]);
            run(&["ip", "-n", ns, "route", "add", net, "via", gw, "dev", dev]);
            run(&["ip", "-n", ns, "neigh", "add", gw, "lladdr", gw_mac, "dev", dev, "nud", "permanent"]);
            // veth would otherwise hand the switch UDP frames with unfinished checksums.
            run(&["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"]);
        }
        f
    }
}

fn config(metrics_port: u16, port_names: [&str; 2]) -> SwitchConfig {
    let ports = [
        Port { name: port_names[0], mac: SW_P0_MAC, peer: "h1" },
        Port { name: port_names[1], mac: SW_P1_MAC, peer: "h2" },
    ];
    switchd::router("sdsw", SW, ports, H1_MAC, H2_MAC, metrics_port)
}

/// A per-test scratch directory (`rf-sd-<tag>-*` under the temp dir: config and daemon log),
/// removed with its contents on drop, also when an assertion fails.
fn workdir(tag: &str) -> TempDir {
    temp_dir(&format!("rf-sd-{tag}-"))
}

fn start(cfg: &SwitchConfig, dir: &Path) -> Daemon {
    Daemon::start(&[cfg], None, dir)
}

/// [`rocefab_tests::fabric::metric`] (0 if absent) as a count: every name and label set asked
/// for here is one series.
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    rocefab_tests::fabric::metric(text, name, labels) as u64
}

fn enqueued(text: &str, port: &str, q: &str) -> u64 {
    metric(text, "rocefab_queue_enqueued_packets_total", &[("port", port), ("queue", q)])
}

/// Waits until the switch is up; its first scrape.
fn wait_for_metrics(d: &mut Daemon, port: u16) -> String {
    d.wait_up(&[port]);
    scrape(port).unwrap()
}

/// The AF_XDP socket statistics the daemon exports per port.
const XSK_METRICS: [&str; 6] = [
    "rocefab_xsk_rx_dropped_total",
    "rocefab_xsk_rx_ring_full_total",
    "rocefab_xsk_fill_ring_empty_total",
    "rocefab_xsk_rx_invalid_descs_total",
    "rocefab_xsk_tx_invalid_descs_total",
    "rocefab_xsk_tx_ring_empty_total",
];

#[test]
fn switchd_forwards_pings_and_classifies_dscp() {
    let bin = switchd::binary();
    let _fabric = Fabric::up();
    let dir = workdir("fwd");
    let mport = free_port();
    let mut d = start(&config(mport, ["sw-p0", "sw-p1"]), dir.path());
    let before = wait_for_metrics(&mut d, mport);
    assert!(before.contains("rocefab_xdp_route_miss_total"), "{before}");
    // The kernel's AF_XDP socket counters (XDP_STATISTICS) are exported for every port.
    for name in XSK_METRICS {
        assert!(before.contains(&format!("# HELP {name} ")), "{name} has no help string:\n{before}");
        for port in ["sw-p0", "sw-p1"] {
            let prefix = format!("{name}{{");
            assert!(
                before.lines().any(|l| l.starts_with(&prefix) && l.contains(&format!("port=\"{port}\""))),
                "{name} missing for {port}:\n{before}"
            );
        }
    }
    assert_eq!(metric(&before, "rocefab_xsk_stats_read_errors_total", &[]), 0, "{before}");
    let xdp = String::from_utf8_lossy(&sh(&["ip", "-n", SW, "link", "show"]).stdout).to_string();
    assert!(xdp.matches("xdp").count() >= 2, "XDP not attached to both ports:\n{xdp}");

    // Routed both ways: echo request h1 → h2 and reply h2 → h1 through the daemon.
    let ping = sh(&["ip", "netns", "exec", H1, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.9.2.1"]);
    assert!(ping.status.success(), "ping failed:\n{}\nlog:\n{}", String::from_utf8_lossy(&ping.stdout), d.log());
    let text = String::from_utf8_lossy(&ping.stdout);
    assert!(text.contains("ttl=63"), "TTL not decremented by one hop:\n{text}");
    let after_ping = scrape(mport).unwrap();
    assert!(enqueued(&after_ping, "sw-p1", "0") >= 3, "echo requests not queued on sw-p1 q0");
    assert!(enqueued(&after_ping, "sw-p0", "0") >= 3, "echo replies not queued on sw-p0 q0");

    // DSCP → queue: 24 → 3, 48 → 7, 0 → 0 (default NX-OS style map), N datagrams each.
    const N: u64 = 25;
    let py = "import socket,sys\n\
              n=int(sys.argv[1])\n\
              for dscp in (24,48,0):\n\
              \x20   s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
              \x20   s.setsockopt(socket.IPPROTO_IP,socket.IP_TOS,dscp<<2)\n\
              \x20   [s.sendto(b'r'*200,('10.9.2.1',4791)) for _ in range(n)]\n";
    let base = scrape(mport).unwrap();
    let o = sh(&["ip", "netns", "exec", H1, "/usr/bin/python3", "-c", py, &N.to_string()]);
    assert!(o.status.success(), "/usr/bin/python3 sender failed: {}", String::from_utf8_lossy(&o.stderr));
    let t0 = Instant::now();
    let now = loop {
        let now = scrape(mport).unwrap();
        let done = ["3", "7"].iter().all(|q| enqueued(&now, "sw-p1", q) - enqueued(&base, "sw-p1", q) >= N)
            && enqueued(&now, "sw-p1", "0") - enqueued(&base, "sw-p1", "0") >= N;
        if done || t0.elapsed() > Duration::from_secs(5) {
            break now;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let delta = |q: &str| enqueued(&now, "sw-p1", q) - enqueued(&base, "sw-p1", q);
    assert_eq!(delta("3"), N, "DSCP 24 → queue 3");
    assert_eq!(delta("7"), N, "DSCP 48 → queue 7");
    assert!(delta("0") >= N && delta("0") <= N + 2, "DSCP 0 → queue 0: {}", delta("0"));
    for q in ["1", "2", "4", "5", "6"] {
        assert_eq!(delta(q), 0, "queue {q} should stay empty");
    }
    // Everything queued left again (nothing stuck, nothing dropped).
    let dq = |q: &str| {
        metric(&now, "rocefab_queue_dequeued_packets_total", &[("port", "sw-p1"), ("queue", q)])
            - metric(&base, "rocefab_queue_dequeued_packets_total", &[("port", "sw-p1"), ("queue", q)])
    };
    assert_eq!(dq("3"), N);
    assert_eq!(dq("7"), N);
    assert_eq!(metric(&now, "rocefab_queue_dropped_packets_total", &[("port", "sw-p1"), ("queue", "3")]), 0);
    assert_eq!(metric(&now, "rocefab_queue_depth_bytes", &[("port", "sw-p1"), ("queue", "3")]), 0);
    assert!(metric(&now, "rocefab_xdp_forwarded_total", &[("port", "sw-p0")]) >= 3 * N + 3);
    assert_eq!(metric(&now, "rocefab_port_rx_invalid_total", &[("port", "sw-p0")]), 0);
    // A few hundred frames fit the rings: the sockets lost nothing and saw no bad descriptor.
    for port in ["sw-p0", "sw-p1"] {
        for name in [
            "rocefab_xsk_rx_ring_full_total",
            "rocefab_xsk_rx_invalid_descs_total",
            "rocefab_xsk_tx_invalid_descs_total",
        ] {
            assert_eq!(metric(&now, name, &[("port", port)]), 0, "{name} on {port}");
        }
    }

    // SIGTERM: clean exit, XDP gone from both ports.
    d.sigterm();
    let st = d.wait_exit(Duration::from_secs(10));
    assert!(st.success(), "exit status {st}; log:\n{}", d.log());
    let links = String::from_utf8_lossy(&sh(&["ip", "-n", SW, "link", "show"]).stdout).to_string();
    assert!(!links.contains("xdp"), "XDP still attached after exit:\n{links}");
    assert!(d.log().contains("XDP detached"), "{}", d.log());
    drop(bin);
}

#[test]
fn switchd_startup_error_names_the_interface() {
    let _fabric = Fabric::up();
    let dir = workdir("bad");
    let mport = free_port();
    let mut d = start(&config(mport, ["sw-p0", "rf-sd-nope9"]), dir.path());
    let st = d.wait_exit(Duration::from_secs(20));
    assert!(!st.success(), "daemon should fail on a missing interface");
    let log = d.log();
    assert!(log.contains("rf-sd-nope9"), "error should name the interface:\n{log}");
    // The port that did exist has no program left behind.
    let links = String::from_utf8_lossy(&sh(&["ip", "-n", SW, "link", "show"]).stdout).to_string();
    assert!(!links.contains("xdp"), "XDP left attached after a failed start:\n{links}");
}

#[test]
fn switchd_missing_namespace_and_config_fail_clearly() {
    let dir = workdir("ns");
    let mut cfg = config(free_port(), ["sw-p0", "sw-p1"]);
    cfg.netns = Some("rf-sd-does-not-exist".into());
    let mut d = start(&cfg, dir.path());
    assert!(!d.wait_exit(Duration::from_secs(10)).success());
    assert!(d.log().contains("/run/netns/rf-sd-does-not-exist"), "{}", d.log());

    let o = Command::new(switchd::binary()).args(["--config", "/nonexistent/rf-sd.json"]).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent/rf-sd.json"), "{err}");
}

/// CPU ticks (utime + stime, in USER_HZ) of the daemon's data-plane thread (`dp-*`).
fn dp_thread_ticks(pid: u32) -> u64 {
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let stat = std::fs::read_to_string(e.unwrap().path().join("stat")).unwrap();
        let (comm, rest) = stat.split_once(") ").unwrap();
        if comm.contains("(dp-") {
            let f: Vec<&str> = rest.split_whitespace().collect();
            // fields after "pid (comm) ": state=0 ... utime=11 stime=12
            return f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        }
    }
    panic!("no dp-* thread in process {pid}");
}

/// A 1042-byte frame (a 1000-byte datagram of [`send_dscp24`]) on the wire at 10 Mbit/s, ns.
const FRAME_10M_NS: u64 = 853_600;

/// [`config`] with its egress towards h2 at 10 Mbit/s ([`FRAME_10M_NS`] a frame).
fn shaped_config(metrics_port: u16) -> SwitchConfig {
    let mut cfg = config(metrics_port, ["sw-p0", "sw-p1"]);
    cfg.ports[1].line_rate_bps = 10_000_000;
    cfg
}

#[test]
fn switchd_shapes_egress_and_tail_drops_and_idles() {
    let _fabric = Fabric::up();
    let dir = workdir("shape");
    let mport = free_port();
    let mut cfg = shaped_config(mport);
    cfg.queue_limit_bytes = 60_000;
    // PFC off: priority 3 is a lossy class here, so the queue limit drops at admission.
    cfg.qos.lossless_priorities = 0;
    let mut d = start(&cfg, dir.path());
    wait_for_metrics(&mut d, mport);

    // Idle: the data-plane thread sleeps (< 2 % of a CPU over 2 s, i.e. < 4 ticks at 100 Hz).
    let pid = d.child.id();
    let t0 = dp_thread_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let idle = dp_thread_ticks(pid) - t0;
    assert!(idle < 4, "idle data-plane thread used {idle} ticks in 2 s");

    // What arrives at h2: the drain's pace as the receiver sees it (tcpdump, kernel clock).
    let pcap = TempFile::new("rf-h-sd-shape.pcap");
    let cap = start_capture_in(H2, "sd-h2", &pcap, "udp dst port 4791", 64, 1000, 30);

    // 200 datagrams of 1000 bytes (1042-byte frames) in a few ms: far above 10 Mbit/s.
    const N: u64 = 200;
    send_dscp24(N, 1000);
    let q3 = [("port", "sw-p1"), ("queue", "3")];
    // Frames may still sit in the veth / AF_XDP rings when the sender exits: poll (5 s at most)
    // until the switch has accounted for all of them; t_a is the time of that scrape.
    let poll_start = Instant::now();
    let (t_a, enq, dropped, deq_a) = loop {
        let t_a = Instant::now();
        let t = scrape(mport).unwrap();
        let enq = metric(&t, "rocefab_queue_enqueued_packets_total", &q3);
        let dropped = metric(&t, "rocefab_queue_dropped_packets_total", &q3);
        let deq_a = metric(&t, "rocefab_queue_dequeued_packets_total", &q3);
        if enq + dropped >= N || poll_start.elapsed() > Duration::from_secs(5) {
            break (t_a, enq, dropped, deq_a);
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(enq + dropped, N, "every datagram is either queued or tail-dropped");
    // A 1042-byte frame is charged five 256-byte cells (1280 bytes): the queue holds at most
    // 60000/1280 = 46 frames; a handful leave while the burst arrives.
    assert!(dropped >= 50, "expected tail drops at the 60 kB limit, got {dropped} (enqueued {enq})");
    let t = scrape(mport).unwrap();
    assert_eq!(metric(&t, "rocefab_queue_admission_dropped_packets_total", &q3), dropped, "drops are admission drops");
    assert!(enq >= 46, "queue should fill to its limit, enqueued {enq}");
    assert!(enq - deq_a >= 10, "queue should still be backlogged right after the burst ({deq_a}/{enq} left)");

    // Drain at line rate: the backlog present at t_a leaves one serialisation time apart.
    let t_b = loop {
        let t = scrape(mport).unwrap();
        if metric(&t, "rocefab_queue_dequeued_packets_total", &q3) == enq {
            assert_eq!(metric(&t, "rocefab_queue_depth_bytes", &q3), 0);
            break t_a.elapsed();
        }
        assert!(t_a.elapsed() < Duration::from_secs(5), "queue did not drain:\n{t}");
        std::thread::sleep(Duration::from_millis(1));
    };
    let backlog = enq - deq_a;
    let ideal = Duration::from_nanos(backlog * FRAME_10M_NS);
    let min = Duration::from_nanos((backlog - 1) * FRAME_10M_NS);
    assert!(t_b >= min, "{backlog} frames drained in {t_b:?}: faster than 10 Mbit/s ({ideal:?})");
    drop(cap);

    // Not slower than the line rate either, timed at the receiver: the last `backlog` frames left
    // a queue that was never empty, so they arrive one serialisation time (853.6 µs) apart: a
    // span of (backlog − 1) of them, at most 3 shorter (frames are timed from their arrival, so
    // a pass up to three frame times late sends the ones due meanwhile at once) and at most
    // 3 % + 2 ms longer (the last wake-ups may be late on a loaded 2-core box). A shaper 15 % slow is past that on the ~40-frame backlog;
    // the exact timing is tested with an injected clock in switch-model/src/shaper.rs.
    let arrivals: Vec<f64> =
        rocefab_tests::tshark::fields(&pcap, "", &["frame.time_epoch"]).iter().map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(arrivals.len() as u64, enq, "h2 received every frame the switch queued");
    let tail = &arrivals[arrivals.len() - backlog as usize..];
    let span = Duration::from_secs_f64(tail[tail.len() - 1] - tail[0]);
    let (lo, hi) = (Duration::from_nanos((backlog - 4) * FRAME_10M_NS), min.mul_f64(1.03) + Duration::from_millis(2));
    eprintln!("the last {backlog} frames arrived at h2 over {span:?} (line rate: {min:?}; bounds {lo:?}..{hi:?}); the switch drained them in at most {t_b:?}");
    assert!(
        span >= lo && span <= hi,
        "the last {backlog} frames arrived at h2 over {span:?}, at 10 Mbit/s {min:?} (bounds {lo:?}..{hi:?})"
    );
    d.sigterm();
    assert!(d.wait_exit(Duration::from_secs(10)).success(), "{}", d.log());
}

/// A data-plane pass that comes late (its thread off the CPU, or serving other switches in a
/// shared worker) sends what the link would have carried meanwhile: the port's schedule keeps
/// one serialisation time between frames from their arrival, and the lost wall time is not added
/// to it. The switch is stopped (SIGSTOP) for 20 ms, 23 frame times at 10 Mbit/s, while its
/// egress queue drains 40 frames; the longest time a frame waited in that schedule is still
/// what 39 frames ahead of it take on the wire. (Broken: a late pass that restarts the schedule
/// at its own time, with a burst allowance of three frames, makes it 17 ms longer.)
#[test]
fn a_late_pass_keeps_the_port_s_schedule() {
    let _fabric = Fabric::up();
    let dir = workdir("late");
    let mport = free_port();
    let mut d = start(&shaped_config(mport), dir.path());
    wait_for_metrics(&mut d, mport);
    let q3 = [("port", "sw-p1"), ("queue", "3")];
    const N: u64 = 40;
    send_dscp24(N, 1000);
    // Once the drain has begun (and long before it ends, 34 ms after it began), stop the switch.
    let t0 = Instant::now();
    while metric(&scrape(mport).unwrap(), "rocefab_queue_dequeued_packets_total", &q3) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(5), "the queue never started to drain");
        std::thread::sleep(Duration::from_micros(200));
    }
    let pid = d.pid().to_string();
    run(&["kill", "-STOP", &pid]);
    std::thread::sleep(Duration::from_millis(20));
    run(&["kill", "-CONT", &pid]);
    let t = loop {
        let t = scrape(mport).unwrap();
        if metric(&t, "rocefab_queue_dequeued_packets_total", &q3) == N {
            break t;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "the queue did not drain:\n{t}");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(metric(&t, "rocefab_queue_enqueued_packets_total", &q3), N, "every datagram was queued");
    let waited = rocefab_tests::fabric::metric(&t, "rocefab_queue_sojourn_max_seconds", &q3);
    // The last frame left 39 serialisation times after the first, which left as it arrived (the
    // link was idle) and arrived no later than the last one: 33.29 ms at most (and 1 µs of the
    // metric's rounding).
    let line = 39.0 * FRAME_10M_NS as f64 / 1e9;
    assert!(
        waited > 0.0 && waited <= line + 1e-6,
        "the longest wait was {:.3} ms; on the wire 39 frames take {:.3} ms",
        waited * 1e3,
        line * 1e3
    );
    d.sigterm();
    assert!(d.wait_exit(Duration::from_secs(10)).success(), "{}", d.log());
}

/// `n` UDP datagrams of `len` bytes from h1 to h2's port 4791, DSCP 24 (queue 3), as fast as
/// python sends them.
fn send_dscp24(n: u64, len: usize) {
    let py = "import socket,sys\n\
              s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
              s.setsockopt(socket.IPPROTO_IP,socket.IP_TOS,24<<2)\n\
              [s.sendto(b'q'*int(sys.argv[2]),('10.9.2.1',4791)) for _ in range(int(sys.argv[1]))]\n";
    let o = sh(&["ip", "netns", "exec", H1, "/usr/bin/python3", "-c", py, &n.to_string(), &len.to_string()]);
    assert!(o.status.success(), "/usr/bin/python3 sender failed: {}", String::from_utf8_lossy(&o.stderr));
}

/// `GET /sample` of the switch on loopback port `port`.
fn sample(port: u16) -> rocefab_contracts::sample::SwitchSample {
    let body = rocefab_tests::http::get(([127, 0, 0, 1], port).into(), "/sample").unwrap();
    serde_json::from_str(&body).unwrap()
}

/// The frames `dev` in namespace `ns` sent so far (its kernel counter).
fn tx_packets(ns: &str, dev: &str) -> u64 {
    let out = sh(&["ip", "netns", "exec", ns, "cat", &format!("/sys/class/net/{dev}/statistics/tx_packets")]);
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Issue 41: frames the kernel drops at a switch's AF_XDP socket because its data plane did
/// not run in time (the fill ring ran out of buffers) are the machine's loss, and `GET
/// /sample` (which `rocefab run` reads) carries them per port. The daemon is stopped
/// (SIGSTOP) while h1 sends: the port's fill ring holds `rx_ring` buffers, so of what h1 sent
/// exactly that many reach the data plane and the kernel drops the rest.
#[test]
fn frames_the_kernel_drops_at_a_stalled_switch_socket_are_in_its_sample() {
    let _fabric = Fabric::up();
    let dir = workdir("lost");
    let mport = free_port();
    let cfg = config(mport, ["sw-p0", "sw-p1"]);
    let ring = rocefab_contracts::memory::switch_memory(&cfg, 1500).rx_ring as u64;
    let mut d = start(&cfg, dir.path());
    wait_for_metrics(&mut d, mport);
    let s0 = sample(mport);
    let (rx0, lost0) =
        (s0.ports[0].rx_packets, s0.ports[0].kernel_rx_lost.expect("the AF_XDP statistics are readable"));
    let pid = d.pid().to_string();
    let sent0 = tx_packets(H1, "sd-h1");
    // (Should an assertion fail while it is stopped, the guard's SIGKILL ends it all the same.)
    run(&["kill", "-STOP", &pid]);
    let n = ring * 2 + 500;
    send_dscp24(n, 200);
    // h1's port may also send frames of its own (IPv6 neighbour discovery, MLD) that the switch's
    // XDP program hands to the kernel: the datagrams are what the sockets count.
    let sent = tx_packets(H1, "sd-h1") - sent0;
    assert!(sent >= n, "h1 sent {sent} frames, fewer than the {n} datagrams");
    run(&["kill", "-CONT", &pid]);
    // The data plane takes what the rings held; the sample then counts the rest as lost.
    let t0 = Instant::now();
    let (mut rx, mut lost) = (0, 0);
    while t0.elapsed() < Duration::from_secs(5) {
        let s = sample(mport);
        (rx, lost) = (s.ports[0].rx_packets - rx0, s.ports[0].kernel_rx_lost.unwrap() - lost0);
        if rx + lost >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!((rx, lost), (ring, n - ring), "{n} datagrams sent to a stopped switch with {ring} fill-ring buffers");
    // The daemon runs on.
    d.sigterm();
    assert!(d.wait_exit(Duration::from_secs(10)).success(), "{}", d.log());
}
