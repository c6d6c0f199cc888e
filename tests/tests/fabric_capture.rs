//! Privileged: `rocefab capture` on a switch port during a ring AllReduce (issue "Live capture").
//! The switch daemon mirrors what its AF_XDP data path receives and sends (tcpdump in the
//! switch namespace sees none of it), the CLI writes pcapng with one interface per port and
//! direction flags; tshark is the oracle.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::process::{Command, Stdio};
use std::time::Duration;

use rocefab_tests::capture::{lost_frames_in, start_rocefab_capture, stop_rocefab_capture};
use rocefab_tests::fabric::{metric, rocefab_bin, stderr, Fabric};
use rocefab_tests::proc::Proc;
use rocefab_tests::scratch::{file, temp_dir};
use rocefab_tests::tshark::fields as tshark;

#[test]
fn capture_of_a_switch_port_during_allreduce_matches_its_counters_and_decodes() {
    let f = Fabric::up("rail-spine.yaml", "rfcp");
    let dir = temp_dir("rocefab-test-rfcp-capture-");
    let out = file(&dir, "rail1.pcapng");
    // rail1's port to host1:gpu0 (rank 0) carries its ring traffic both ways.
    let port = f.port_to("rail1", "host1:gpu0");
    let up = f.port_to("rail1", "spine1:eth1");
    let cap = start_rocefab_capture(&out, &[&f.name, &format!("rail1:{port},rail1:{up}")]);
    let before = f.metrics("rail1");

    // A 2 s retransmit timeout, as in fabric_spray_reorder: on this real-time (D = 1) fabric a
    // loaded machine can stall a switch hop for longer than the 100 ms default seven times in a
    // row (seen under load: every QP exhausted its retries with a window outstanding); what is
    // tested here is the capture, not recovery.
    let run = Command::new(rocefab_bin())
        .args([
            "run",
            &f.name,
            "allreduce",
            "--size",
            "1MiB",
            "--json",
            "--timeout",
            "60",
            "--retransmit-timeout-ms",
            "2000",
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "rocefab run: {}", stderr(&run));
    // A PFC frame from scapy into rail1's port, as host1's NIC would send it: inbound.
    let py = "from scapy.all import Ether, sendp\nfrom scapy.contrib.mac_control import MACControlClassBasedFlowControl\n\
              sendp(Ether(dst='01:80:c2:00:00:01')/MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time=0), iface='gpu0', verbose=0)\n";
    let o = f.exec("host1", &["/usr/bin/python3", "-c", py]);
    assert!(o.status.success(), "scapy: {}", stderr(&o));
    // The PFC frame was counted, and the port's counters stopped moving (the shapers drained).
    let pfc_rx = |t: &str| metric(t, "rocefab_pfc_rx_frames_total", &[("port", port.as_str()), ("priority", "3")]);
    f.wait_metrics("rail1", |t| pfc_rx(t) > pfc_rx(&before));
    let after = f.settled("rail1", &["rocefab_port_rx_packets_total", "rocefab_port_tx_packets_total"]);
    assert!(pfc_rx(&after) > pfc_rx(&before), "rail1 never counted the PFC frame");
    let summary = stop_rocefab_capture(cap);

    let d = |name: &str, p: &str| metric(&after, name, &[("port", p)]) - metric(&before, name, &[("port", p)]);
    let (rx, tx) = (d("rocefab_port_rx_packets_total", &port), d("rocefab_port_tx_packets_total", &port));
    assert!(rx > 100.0 && tx > 100.0, "the AllReduce did not cross rail1:{port}: rx {rx} tx {tx}");
    let frames = tshark(
        &out,
        "frame",
        &["frame.interface_name", "frame.p2p_dir", "eth.type", "udp.dstport", "infiniband.bth.opcode"],
    );
    let count = |ifname: &str, dir: &str| frames.iter().filter(|f| f[0] == ifname && f[1] == dir).count() as f64;
    let (cin, cout) = (count(&format!("rail1:{port}"), "1"), count(&format!("rail1:{port}"), "0"));
    // The capture ran from before the first scrape to after the last one: it holds every frame
    // the counters saw, plus the few (LLDP, ARP) that crossed between capture start/stop and the
    // scrapes.
    assert!(cin >= rx && cin <= rx + 10.0, "inbound captured {cin}, rx counter moved {rx} ({summary})");
    assert!(cout >= tx && cout <= tx + 10.0, "outbound captured {cout}, tx counter moved {tx} ({summary})");
    assert!(summary.contains("captured"), "{summary}");
    assert_eq!(lost_frames_in(&summary), 0, "the mirror lost frames: {summary}");

    // tshark decodes RoCEv2 (UDP 4791, BTH opcodes of RDMA WRITE First/Middle/Last or Only, ACK).
    let roce: Vec<&Vec<String>> = frames.iter().filter(|f| f[3] == "4791").collect();
    assert!(roce.len() as f64 > rx.min(tx) / 2.0, "only {} RoCEv2 frames decoded", roce.len());
    let ops: std::collections::BTreeSet<u64> = roce.iter().filter_map(|f| f[4].parse::<u64>().ok()).collect();
    assert!(ops.contains(&17), "no Acknowledge (0x11) decoded: {ops:?}");
    assert!(ops.iter().any(|o| [6, 7, 8, 10].contains(o)), "no RDMA WRITE decoded: {ops:?}");
    // Both ports are in the file as their own interfaces.
    assert!(count(&format!("rail1:{up}"), "0") + count(&format!("rail1:{up}"), "1") > 0.0);
    // The scapy PFC frame: inbound on the port to host1, opcode 0x0101, priority 3 quanta 0.
    let pfc = tshark(&out, "macc.opcode == 0x0101", &["frame.interface_name", "frame.p2p_dir", "macc.cbfc.enbv"]);
    assert!(
        pfc.iter().any(|p| p[0] == format!("rail1:{port}") && p[1] == "1" && p[2] == "0x0008"),
        "the injected PFC frame is not in the capture as inbound on rail1:{port}: {pfc:?}"
    );
    // LLDP the switch sends itself is captured as outbound (frames from the control queue).
    let lldp = tshark(&out, "lldp", &["frame.interface_name", "frame.p2p_dir", "lldp.tlv.system.name"]);
    assert!(lldp.iter().all(|l| (l[1] == "0") == (l[2] == "rail1")), "LLDP directions: {lldp:?}");
}

#[test]
fn capture_streams_live_to_tshark_with_a_filter() {
    let f = Fabric::up("rail-spine.yaml", "rfcs");
    let port = f.port_to("rail1", "host1:gpu0");
    // tshark's own messages (stderr) join its fields: "Capturing on ..." comes once it read the
    // pcapng header, which `rocefab capture` writes once every daemon mirrors the port.
    let script = format!(
        "{} capture {} rail1:{port} -w - --count 6 --filter icmp --duration 30s | tshark -i - -l -T fields -e frame.interface_name -e frame.p2p_dir -e icmp.type 2>&1",
        rocefab_bin().display(),
        f.name
    );
    let mut p = Proc::spawn(
        "capture | tshark",
        Command::new("sh").args(["-c", &script]).stdout(Stdio::piped()).stderr(Stdio::null()),
    );
    let end = Duration::from_secs(20);
    // (Before it, as root: "Running as user "root" ...".)
    let mut said = Vec::new();
    while !said.last().is_some_and(|l: &String| l.starts_with("Capturing on")) {
        assert!(said.len() < 5, "tshark did not say it is capturing: {said:?}");
        said.push(p.line(end));
    }
    let o = f.exec("host1", &["ping", "-c", "3", "-i", "0.2", "-I", "10.0.1.1", "10.0.2.3"]);
    assert!(o.status.success());
    let mut lines = Vec::new();
    while lines.len() < 6 {
        let l = p.line(end);
        if l.contains('\t') {
            lines.push(l);
        }
    }
    // Echo requests (type 8) come in from host1, replies (type 0) go out to it.
    for l in &lines {
        let c: Vec<&str> = l.split('\t').collect();
        assert_eq!(c[0], format!("rail1:{port}"), "{l}");
        assert!((c[1] == "1" && c[2] == "8") || (c[1] == "0" && c[2] == "0"), "{l}");
    }
}
