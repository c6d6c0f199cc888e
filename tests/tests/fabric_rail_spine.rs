//! Privileged: the rail-spine fabric (4 hosts × 2 GPUs, rails 1–2 on rail1/rail2, two spines)
//! brought up with `rocefab up`, exercised with ping and `rocefab send`, torn down with
//! `rocefab down`. Run as root, serially:
//!
//! ```text
//! cargo build -p control -p dataplane-user
//! cargo test -p rocefab-tests --test fabric_rail_spine -- --test-threads=1
//! ```
use std::net::Ipv4Addr;
use std::time::Duration;

use dataplane_common::{ecmp_index, flow_hash};
use rocefab_contracts::config::Mac;
use rocefab_tests::capture::start_capture_in;
use rocefab_tests::fabric::*;
use rocefab_tests::proc::require_tool;
use rocefab_tests::scapy::Agent;
use rocefab_tests::scratch::TempFile;
use rocefab_tests::tshark;

/// Ping from host1's rail-1 GPU to host3's rail-2 GPU goes rail1 → spine → rail2 and back:
/// TTL 64 − 3 switch hops = 61 in the reply, and the spines' ports count the frames.
#[test]
fn ping_crosses_rail_spine_rail() {
    let f = Fabric::up("rail-spine.yaml", "rft1");
    let spine_rx = || -> f64 {
        ["spine1", "spine2"].iter().map(|s| metric(&f.metrics(s), "rocefab_port_rx_packets_total", &[])).sum()
    };
    let before = spine_rx();
    let o = f.exec("host1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "-I", "10.0.1.1", "10.0.2.3"]);
    let out = stdout(&o);
    assert!(o.status.success(), "ping failed:\n{out}{}", stderr(&o));
    assert!(out.contains("3 received"), "{out}");
    assert!(out.contains("ttl=61"), "reply did not cross three routed hops: {out}");
    f.wait_metrics("spine1", |_| spine_rx() - before >= 6.0);
    let delta = spine_rx() - before;
    assert!(delta >= 6.0, "spines saw {delta} frames, expected ≥ 6 (3 requests + 3 replies)");
    // Same rail, other host: routed by rail1 alone (one hop, no ARP between GPUs needed).
    let o = f.exec("host1", &["ping", "-c", "2", "-i", "0.2", "-W", "2", "10.0.1.3"]);
    let out = stdout(&o);
    assert!(o.status.success() && out.contains("ttl=63"), "same-rail ping: {out}{}", stderr(&o));
    // A statically routed fabric runs no FRR: `rocefab vtysh` says so instead of vtysh's
    // "failed to connect to any daemons".
    let o = rocefab(&["vtysh", "--fabric", &f.name, "rail1", "-c", "show bgp summary"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("switch rail1 of fabric rft1 runs no FRR"), "{}", stderr(&o));
}

/// DSCP 24 → queue 3, 48 → queue 7, 0 → queue 0 on the egress port towards the destination GPU
/// (rail2:eth3 faces host3:gpu1). Only that forward egress port is checked: background traffic
/// there (ARP/ND, ICMP echo) is DSCP 0 → queue 0, so queues 3 and 7 must see exactly nothing
/// when not targeted. (ICMP errors host3 returns use TOS 0xc0 = DSCP 48, but travel the other
/// way, leaving rail2 through the ports towards the spines.)
#[test]
fn dscp_selects_egress_queue() {
    let f = Fabric::up("rail-spine.yaml", "rft2");
    let port =
        f.config("rail2").ports.iter().find(|p| p.peer == "host3:gpu1").expect("port to host3:gpu1").name.clone();
    let q =
        |t: &str, queue: &str| metric(t, "rocefab_queue_enqueued_packets_total", &[("port", &port), ("queue", queue)]);
    const N: f64 = 200.0;
    for (dscp, queue) in [("24", "3"), ("48", "7"), ("0", "0")] {
        let before = f.metrics("rail2");
        f.send(&["--from", "host1:gpu0", "--to", "host3:gpu1", "--dscp", dscp, "--count", "200", "--size", "256"]);
        let after = f.wait_metrics("rail2", |t| q(t, queue) - q(&before, queue) >= N);
        for other in ["0", "3", "7"] {
            let d = q(&after, other) - q(&before, other);
            if other == queue {
                assert!(d >= N, "dscp {dscp}: queue {queue} of rail2:{port} got {d} frames, expected {N}");
            } else if other == "0" {
                // Kernel background frames (ARP/ND) may land here while the test runs.
                assert!(d < N / 10.0, "dscp {dscp}: queue {other} of rail2:{port} got {d} frames, expected ~0");
            } else {
                assert_eq!(d, 0.0, "dscp {dscp}: queue {other} of rail2:{port} got {d} frames, expected none");
            }
        }
    }
}

/// 64 flows (source ports 49152..=49215, 10 packets each) from rail 1 to rail 2 spread over
/// both spines (20..=44 flows each), and each spine receives exactly the flows `flow_hash` +
/// `ecmp_index` assign to it with rail1's seed (the function is pinned by lookup3 reference
/// vectors in `dataplane-common/tests/flow_hash.rs`).
#[test]
fn ecmp_spreads_flows_over_both_spines() {
    let f = Fabric::up("rail-spine.yaml", "rft3");
    let rail1 = f.config("rail1");
    // The route to rail 2 and its group's members, in order, as spine names.
    let route = rail1
        .routes
        .iter()
        .find(|r| r.prefix == std::net::IpAddr::V4(Ipv4Addr::new(10, 0, 2, 0)) && r.len == 24)
        .expect("rail1 route to rail 2");
    let members: Vec<String> = rail1.groups[route.group.expect("not local") as usize]
        .iter()
        .map(|&nh| rail1.ports[rail1.nexthops[nh as usize].port as usize].peer.clone())
        .collect();
    assert_eq!(members.len(), 2, "{members:?}");
    let src = u32::from(Ipv4Addr::new(10, 0, 1, 1));
    let dst = u32::from(Ipv4Addr::new(10, 0, 2, 3));
    let mut expected = [0.0f64; 2];
    for sport in 49152u16..=49215 {
        let h = flow_hash([src, 0, 0, 0], [dst, 0, 0, 0], 17, sport, 9000, rail1.hash_seed);
        expected[ecmp_index(h, 2) as usize] += 10.0;
    }
    // Each spine's port facing rail1 only carries rail1 → spine traffic.
    let rx = |m: &str| -> f64 {
        let (spine, ifname) = m.split_once(':').unwrap();
        metric(&f.metrics(spine), "rocefab_port_rx_packets_total", &[("port", ifname)])
    };
    let before: Vec<f64> = members.iter().map(|m| rx(m)).collect();
    f.send(&[
        "--from",
        "host1:gpu0",
        "--to",
        "host3:gpu1",
        "--count",
        "640",
        "--sport-range",
        "49152:49215",
        "--dport",
        "9000",
    ]);
    let (s0, _) = members[0].split_once(':').unwrap();
    f.wait_metrics(s0, |_| members.iter().zip(&before).map(|(m, b)| rx(m) - b).sum::<f64>() >= 640.0);
    let got: Vec<f64> = members.iter().zip(&before).map(|(m, b)| rx(m) - b).collect();
    // 64 flows on 2 spines: each spine's flow count is binomial(64, 1/2), mean 32, sigma 4, so
    // 32 +- 3 sigma = 20..=44 flows, 200..=440 of the 640 frames; the counts must equal that.
    for i in 0..2 {
        assert!(
            (200.0..=440.0).contains(&expected[i]),
            "{}: flow_hash puts {} of 640 frames here",
            members[i],
            expected[i]
        );
    }
    for i in 0..2 {
        assert!(
            got[i] >= expected[i] && got[i] <= expected[i] + 5.0,
            "{}: {} frames, flow_hash predicts {} (all: {got:?} vs {expected:?})",
            members[i],
            got[i],
            expected[i]
        );
    }
}

/// The source MAC of the frames [`unknown_ethertype_is_dropped_and_counted_not_passed_to_the_kernel`]
/// sends, so that a capture can tell them from everything else on the link.
const PROBE_MAC: [u8; 6] = [0x02, 0x88, 0xb5, 0, 0, 1];

/// An Ethernet frame from [`PROBE_MAC`] to `dst` with EtherType `ethertype` and `payload`, padded to
/// the 60-byte minimum, as hex for the scapy agent's `raw` command.
fn probe_frame_hex(dst: [u8; 6], ethertype: u16, payload: &[u8]) -> String {
    let mut f = dst.to_vec();
    f.extend_from_slice(&PROBE_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize(f.len().max(60), 0);
    f.iter().map(|b| format!("{b:02x}")).collect()
}

/// Frames of an EtherType the switch does not handle (0x88b5, IEEE 802 local experimental), sent
/// by scapy from host1's gpu0 into rail1's port, are dropped in XDP as an ASIC drops what it
/// cannot forward: `rocefab_xdp_unknown_ethertype_dropped_total` of the port rises by exactly as
/// many as were sent, and the kernel of rail1's namespace gets none of them (a tcpdump there,
/// which sees what XDP passes, sees first the ARP probe sent after they were all counted). LLDP
/// (every second, TTL 4 s) keeps every neighbour and pings still cross the fabric.
#[test]
fn unknown_ethertype_is_dropped_and_counted_not_passed_to_the_kernel() {
    require_tool("tcpdump", &["--version"]);
    require_tool("tshark", &["-v"]);
    require_tool("/usr/bin/python3", &["-c", "import scapy.all"]);
    const N: usize = 50;
    let f = Fabric::up_with("rail-spine.yaml", "rft8", "lldp:\n  tx_interval: 1s\n  ttl: 4s\n");
    // `rocefab lldp --check` until every link agrees (the first LLDPDUs are on their way), 20 s.
    let lldp_check = || {
        let end = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let o = rocefab(&["lldp", &f.name, "--check"]);
            if o.status.success() || std::time::Instant::now() >= end {
                return o;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let o = lldp_check();
    assert!(o.status.success(), "rocefab lldp --check on a fresh fabric:\n{}", text(&o));
    let cfg = f.config("rail1");
    let port = f.port_to("rail1", "host1:gpu0");
    let pc = cfg.ports.iter().find(|p| p.name == port).unwrap();
    let port_ip: Ipv4Addr = pc.addresses[0].split('/').next().unwrap().parse().expect("rail1 port address");
    let on_port = [("port", port.as_str())];
    let dropped = |t: &str| series(t, "rocefab_xdp_unknown_ethertype_dropped_total", &on_port);
    let lldp_rx = |t: &str| series(t, "rocefab_xdp_lldp_total", &on_port);
    let before = f.metrics("rail1");
    assert_eq!(dropped(&before), 0.0, "unknown EtherTypes dropped before any was sent");

    // What the kernel of rail1's namespace gets from the probe MAC: the first such frame.
    let pcap = TempFile::new("rail1-probe.pcap");
    let mut tcpdump =
        start_capture_in(&f.netns("rail1"), &port, &pcap, &format!("ether src {}", Mac(PROBE_MAC)), 0, 1, 60);
    let mut agent = Agent::start(&f, "host1", "gpu0");
    let unknown = probe_frame_hex(pc.mac.0, 0x88b5, b"rocefab: an EtherType no switch port forwards");
    for i in 0..N {
        assert_eq!(agent.cmd(&format!("raw {unknown}")), "sent", "frame {i}");
    }
    let t = f.wait_metrics("rail1", |t| dropped(t) - dropped(&before) >= N as f64);
    assert_eq!(dropped(&t) - dropped(&before), N as f64, "rail1:{port} counted another number than sent");
    // Every one went through XDP; now an ARP probe (RFC 5227: sender 0.0.0.0) for the port's
    // address, which the kernel still gets.
    let mut arp = vec![0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01];
    arp.extend_from_slice(&PROBE_MAC);
    arp.extend_from_slice(&[0; 4 + 6]);
    arp.extend_from_slice(&port_ip.octets());
    assert_eq!(agent.cmd(&format!("raw {}", probe_frame_hex([0xff; 6], 0x0806, &arp))), "sent");
    assert_eq!(tcpdump.wait(Duration::from_secs(10)), 0, "tcpdump in rail1's namespace saw nothing from the probe MAC");
    let seen = tshark::fields(&pcap, "", &["eth.type", "arp.dst.proto_ipv4"]);
    assert_eq!(
        seen,
        vec![vec!["0x0806".to_string(), port_ip.to_string()]],
        "the kernel of rail1's namespace got a frame of the unknown EtherType (or no ARP probe)"
    );

    // LLDP still arrives and every neighbour is there; pings cross rail1 → spine → rail2.
    let t = f.wait_metrics("rail1", |t| lldp_rx(t) > lldp_rx(&before));
    assert!(lldp_rx(&t) > lldp_rx(&before), "no LLDPDU reached rail1's daemon on {port} since the start");
    let o = lldp_check();
    assert!(o.status.success(), "rocefab lldp --check after the unknown frames:\n{}", text(&o));
    let o = f.exec("host1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "-I", "10.0.1.1", "10.0.2.3"]);
    assert!(stdout(&o).contains("3 received"), "ping host1 → host3 after the unknown frames:\n{}", text(&o));
    // Nothing else was counted as unknown meanwhile.
    assert_eq!(dropped(&f.metrics("rail1")), N as f64);
}

/// `down` removes every namespace, veth and daemon, also after a daemon crashed.
#[test]
fn down_removes_everything_even_after_a_crash() {
    let name = "rft4";
    let f = Fabric::up_per_switch("rail-spine.yaml", name);
    assert_eq!(fabric_namespaces(name).len(), 9, "4 hosts, 4 switches and the frontend bridge");
    let pids = daemon_pids(name);
    assert_eq!(pids.len(), 8, "one daemon per switch and one NIC agent per host: {pids:?}");
    // Crash one switch daemon.
    let victim = *pids
        .iter()
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("rocefab-switchd"))
        })
        .expect("a rocefab-switchd among the fabric's daemons");
    // SAFETY: kill(2) on a pid we just found running our fabric's config; no memory involved.
    let rc = unsafe { libc::kill(victim as i32, libc::SIGKILL) };
    assert_eq!(rc, 0);
    let st = stdout(&rocefab(&["status", name]));
    assert!(st.contains("DEAD"), "status shows the crashed daemon: {st}");
    let o = rocefab(&["down", name]);
    assert!(o.status.success(), "down: {}", stderr(&o));
    assert!(fabric_namespaces(name).is_empty(), "{:?}", fabric_namespaces(name));
    assert!(root_veths_of(name).is_empty(), "{:?}", root_veths_of(name));
    let left: Vec<u32> = daemon_pids(name).into_iter().filter(|p| *p != victim).collect();
    assert!(left.is_empty(), "daemons left: {left:?}");
    assert!(!run_dir(name).exists());
    let o = rocefab(&["down", name]);
    assert!(!o.status.success() && stderr(&o).contains("is not running"), "{}", stderr(&o));
    drop(f);
}

/// A second `up` of a running fabric fails clearly and leaves the first one working.
#[test]
fn second_up_errors() {
    let f = Fabric::up("rail-spine.yaml", "rft5");
    let o = rocefab(&["up", f.topology.to_str().unwrap()]);
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim(), "rocefab: fabric rft5 is already up; run `rocefab down rft5`");
    assert_eq!(daemon_pids("rft5").len(), 5, "the switches' process and 4 NIC agents");
    let o = f.exec("host2", &["ping", "-c", "1", "-W", "2", "-I", "10.0.2.2", "10.0.1.4"]);
    assert!(o.status.success(), "{}", stdout(&o));
    // `exec` exits with the command's status; `status` lists links with rates and live daemons.
    assert_eq!(f.exec("spine1", &["sh", "-c", "exit 7"]).status.code(), Some(7));
    let st = stdout(&rocefab(&["status", "rft5"]));
    assert!(st.contains("rail2:eth6") && st.contains("spine2:eth2") && st.contains("1Gbps"), "{st}");
    assert_eq!(st.matches(" running ").count(), 8, "4 switch daemons and 4 NIC agents: {st}");
}

/// A bad topology gives one error line (file:line: field: message) and creates nothing.
#[test]
fn bad_topology_creates_nothing() {
    let name = "rft6";
    // Runs `rocefab down` (and removes the topology copy) on drop, should `up` create anything.
    let guard = Fabric::guard("rail-spine.yaml", name);
    let p = guard.topology.clone();
    let src = std::fs::read_to_string(&p).unwrap().replace("gpus_per_host: 2 ", "gpus_per_host: x ");
    std::fs::write(&p, &src).unwrap();
    let line = src.lines().position(|l| l.contains("gpus_per_host")).unwrap() + 1;
    let o = rocefab(&["up", p.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with(&format!("rocefab: {}:{line}: hosts.gpus_per_host: ", p.display())), "{e}");
    assert!(fabric_namespaces(name).is_empty(), "{:?}", fabric_namespaces(name));
    assert!(root_veths_of(name).is_empty(), "{:?}", root_veths_of(name));
    assert!(daemon_pids(name).is_empty(), "daemons started: {:?}", daemon_pids(name));
    assert!(!run_dir(name).exists());
}

/// A daemon that dies during `up` makes `up` fail with the daemon's log and remove everything.
#[test]
fn failed_up_cleans_up() {
    let name = "rft7";
    // Runs `rocefab down` on drop (should `up` leave anything behind) and removes the topology
    // copy's directory, which also holds the fake daemon.
    let guard = Fabric::guard("rail-spine.yaml", name);
    let p = guard.topology.clone();
    let fake = p.parent().unwrap().join("rocefab-switchd");
    std::fs::write(&fake, "#!/bin/sh\necho 'cannot attach xdp: injected failure' >&2\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = rocefab_env(&["up", p.to_str().unwrap()], &[("ROCEFAB_SWITCHD", fake.to_str().unwrap())]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("exited with code 3") && e.contains("cannot attach xdp: injected failure"), "{e}");
    assert!(fabric_namespaces(name).is_empty(), "{:?}", fabric_namespaces(name));
    assert!(root_veths_of(name).is_empty());
    assert!(!run_dir(name).exists());
}

/// A daemon killed during `up` (as the kernel's OOM killer does, with SIGKILL) is reported with
/// the signal and a hint to check memory, with its log (its start-up steps) shown.
#[test]
fn daemon_killed_during_up_is_named() {
    let name = "rft7k";
    let guard = Fabric::guard("rail-spine.yaml", name);
    let p = guard.topology.clone();
    let fake = p.parent().unwrap().join("rocefab-switchd");
    std::fs::write(
        &fake,
        "#!/bin/sh
echo 'start-up 3/5: creating the UMEM' >&2
kill -9 $$
",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = rocefab_env(&["up", p.to_str().unwrap()], &[("ROCEFAB_SWITCHD", fake.to_str().unwrap())]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("was killed by signal 9 (SIGKILL)") && e.contains("OOM killer"), "{e}");
    assert!(e.contains("start-up 3/5: creating the UMEM"), "the daemon's log is shown: {e}");
    assert!(!e.contains("log is empty"), "{e}");
    assert!(fabric_namespaces(name).is_empty(), "{:?}", fabric_namespaces(name));
    assert!(!run_dir(name).exists());
}

/// Issue 38: two `rocefab up` of one fabric at once: the second says who is bringing it up
/// (before: "state.json: No such file or directory"), the first brings it up.
#[test]
fn a_concurrent_up_names_the_one_bringing_the_fabric_up() {
    let name = "rft7";
    let guard = Fabric::guard("rail-spine.yaml", name);
    let topo = guard.topology.to_str().unwrap().to_string();
    let lock = run_dir(name).with_extension("up.lock");
    let mut first = rocefab_tests::proc::Proc::drained(
        "the first rocefab up",
        std::process::Command::new(rocefab_bin())
            .args(["up", &topo])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    // The first holds the lock once its file holds its pid.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_to_string(&lock).ok().map(|p| p.trim().to_string()) != Some(first.child.id().to_string()) {
        assert!(std::time::Instant::now() < end, "the first up never took {}", lock.display());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let o = rocefab(&["up", &topo]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("fabric {name} is being brought up by pid {}", first.child.id())),
        "{}",
        stderr(&o)
    );
    let done = first.output();
    assert!(done.status.success(), "the first up: {}", String::from_utf8_lossy(&done.stderr));
    assert_eq!(daemon_pids(name).len(), 5, "the switches' process and 4 NIC agents");
    assert!(!lock.exists(), "up left {}", lock.display());
    drop(guard);
}

/// Issue 38: a `rocefab down` while `up` runs: `up` says the fabric was taken down, and by whom
/// (before: it blamed a switch daemon that exited with code 0), and nothing is left. Down waits
/// for up to stop (before: it tore down beside a running up, which went on starting daemons).
#[test]
fn a_down_during_up_is_named_by_up() {
    let name = "rfu8";
    let guard = Fabric::guard("rail-spine.yaml", name);
    let topo = guard.topology.to_str().unwrap().to_string();
    let mut up = rocefab_tests::proc::Proc::drained(
        "rocefab up",
        std::process::Command::new(rocefab_bin())
            .args(["up", &topo])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    // Down once up has started a daemon (it recorded one in its state), before it is up.
    let state = run_dir(name).join("state.json");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let st: Option<serde_json::Value> =
            std::fs::read_to_string(&state).ok().and_then(|t| serde_json::from_str(&t).ok());
        if st.as_ref().is_some_and(|s| s["daemons"].as_array().is_some_and(|d| !d.is_empty())) {
            assert_eq!(st.unwrap()["phase"], "creating", "up finished before the test could take it down");
            break;
        }
        assert!(std::time::Instant::now() < end, "up started no daemon within 30 s");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // Up is held still (SIGSTOP) while down runs: down must wait for up to stop and remove what
    // it created (only up knows the daemon it is spawning right now), not tear down beside it
    // and leave up to start daemons in namespaces that are gone from their names (the orphans
    // a fresh-clone CI run found). Down says it waits; it must not have ended when it does.
    let up_pid = nix::unistd::Pid::from_raw(up.child.id() as i32);
    nix::sys::signal::kill(up_pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP up");
    let mut down = rocefab_tests::proc::Proc::spawn(
        "rocefab down",
        std::process::Command::new("sh")
            .args(["-c", "exec \"$0\" down \"$1\" 2>&1"])
            .arg(rocefab_bin())
            .arg(name)
            .stdout(std::process::Stdio::piped()),
    );
    let down_pid = down.child.id();
    let mut said = Vec::new();
    loop {
        let l = down.try_line(std::time::Duration::from_secs(30));
        let Some(l) = l else { panic!("down did not say it waits for up: {said:?}") };
        let waits = l.contains("waiting for it to stop");
        said.push(l);
        if waits {
            break;
        }
    }
    assert!(down.child.try_wait().unwrap().is_none(), "down ended while up was stopped: {said:?}");
    assert!(!fabric_namespaces(name).is_empty(), "down removed the namespaces while up was stopped");
    nix::sys::signal::kill(up_pid, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT up");
    assert_eq!(down.wait(std::time::Duration::from_secs(90)), 0, "down failed");
    while let Some(l) = down.try_line(std::time::Duration::from_secs(1)) {
        said.push(l);
    }
    let u = up.output();
    let e = String::from_utf8_lossy(&u.stderr);
    assert!(!u.status.success(), "up succeeded after down: {e}");
    assert!(
        e.contains(&format!(
            "fabric {name} was taken down (by rocefab down, pid {down_pid}) while it was being brought up"
        )),
        "up: {e}\ndown: {said:?}"
    );
    assert!(!e.contains("exited"), "up blamed a daemon: {e}");
    assert!(fabric_namespaces(name).is_empty(), "{:?}", fabric_namespaces(name));
    assert!(daemon_pids(name).is_empty(), "daemons left: {:?}", daemon_pids(name));
    drop(guard);
}

/// Issue 38: a switch daemon killed during a job: the run's errors start with that switch
/// (before: "retry count exceeded" and "stopped by signal" while `rocefab status` already showed
/// the daemon DEAD).
#[test]
fn a_switch_that_dies_during_a_job_leads_the_errors() {
    let f = Fabric::up_per_switch("rail-spine.yaml", "rft9");
    let st: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir(&f.name).join("state.json")).unwrap()).unwrap();
    let victim = st["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["switch"] == "spine1" && d["kind"] != "host")
        .and_then(|d| d["pid"].as_u64())
        .expect("spine1's daemon in the state");
    // Killed once the job's traffic crosses spine1.
    let (r, stderr) = f.alltoall_killing("spine1", victim);
    let first = r["errors"][0].as_str().unwrap_or_default();
    assert!(
        first.starts_with(&format!("switch spine1 (rocefab-switchd pid {victim}) died during the job")),
        "the first error: {first}\nall: {:#}",
        r["errors"]
    );
    assert!(stderr.contains("switch spine1 (rocefab-switchd pid"), "{stderr}");
}
