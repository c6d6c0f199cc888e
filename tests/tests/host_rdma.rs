//! The GPU-host emulator (`rocefab-hostd`) end to end, two host namespaces back to back on one
//! veth pair (`rf-h-<tag>a`/`rf-h-<tag>b`, removed on drop; hostd and tcpdump processes are
//! stopped on drop). Needs root, tshark, tcpdump and /usr/bin/python3 with scapy.
//!
//! Build first, then run serially as root:
//! `cargo build -p host-daemons && cargo test -p rocefab-tests --test host_rdma -- --test-threads=1`
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use rocefab_tests::capture::{start_capture, wait_for_roce_frame};
use rocefab_tests::host::{hostd_bin, nic, qp, report, start_hostd, BackToBack, Netns};
use rocefab_tests::proc::{require_tool, Proc};
use rocefab_tests::scratch::TempFile;
use rocefab_tests::tshark::{fields as tshark_fields, num};
use serde_json::json;

/// Fails clearly unless tshark, tcpdump and /usr/bin/python3 with scapy's `module` are there.
fn oracles(module: &str) {
    require_tool("/usr/bin/python3", &["-c", &format!("import {module}")]);
    require_tool("tshark", &["-v"]);
    require_tool("tcpdump", &["--version"]);
}

const MIB: u64 = 1 << 20;
const GBPS: u64 = 1_000_000_000;
/// Time dilation of the 64 MiB WRITE (see the test).
const DILATION: f64 = 20.0;
/// Time dilation of the PFC tests: the times they bound (a 33.5 ms pause, data resuming at
/// once, no gap while an ignored pause would have held it) are read from tcpdump's wall-clock
/// stamps divided by D, so a data thread descheduled for 7 ms of wall clock (seen at D 1 on a
/// fresh-clone CI run) is 0.7 ms of emulated time, not a 7 ms gap.
const PFC_DILATION: f64 = 10.0;

#[test]
fn host_write_64mib_completes_with_verified_data() {
    let t = BackToBack::new("w", 71, 3500);
    let len = 64 * MIB;
    // At D 20 (1 Gb/s emulated is 50 Mb/s of wall clock, 11 s for the transfer). At D 1 the
    // debug-build NICs of a loaded 2-core machine took 2.86 times the serialisation time (short
    // of CPU per frame), which says nothing about the pacer; at D 10 1.09-1.13, at D 20
    // 1.006-1.099, at D 50 1.11-1.15 (a descheduled data thread loses the time it was not run
    // whatever D, and sleeps longer between frames the higher D is).
    let mut jb = t.receiver_job("rf-h-w-b", len, 0x5eed, GBPS, 0, 90_000);
    let mut ja = t.sender_job("rf-h-w-a", len, 0x5eed, GBPS, json!({}), 90_000);
    (jb["time_dilation"], ja["time_dilation"]) = (json!(DILATION), json!(DILATION));
    let mut b = start_hostd(&t.b, &jb);
    let mut a = start_hostd(&t.a, &ja);
    // ARP and ICMP still reach the kernel while the NIC owns RoCEv2.
    let ping = Command::new("ip")
        .args(["netns", "exec", &t.a.0, "ping", "-c", "2", "-i", "0.2", "-W", "2", &t.ip_b()])
        .output()
        .unwrap();
    assert!(ping.status.success(), "ping during the transfer: {}", String::from_utf8_lossy(&ping.stdout));

    let (ra, ca) = report(&mut a, Duration::from_secs(100));
    let (rb, cb) = report(&mut b, Duration::from_secs(100));
    assert_eq!((ca, cb), (0, 0), "exit codes; a={ra} b={rb}");
    assert_eq!(ra["time_dilation"], json!(DILATION), "{ra}");
    assert_eq!(ra["ok"], true, "{ra}");
    assert_eq!(rb["ok"], true, "{rb}");
    assert_eq!(rb["qps"][0]["verified"], true, "receiver memory equals the sender's pattern");
    assert_eq!(qp(&rb, "bytes_placed"), len);
    assert_eq!(qp(&ra, "send_completed_bytes"), len);
    assert_eq!(nic(&rb, "path_mtu"), 2048, "MTU 3500 → IB path MTU 2048");
    let packets = qp(&ra, "packets_sent");
    assert!(packets >= len / 2048);
    // The NIC's transmitter runs at its line rate, no faster and not much slower: every frame
    // takes its wire size (Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + 2048 payload + ICRC 4,
    // RETH 16 more on the message's First packet; + FCS 4, preamble/SFD 8 and inter-frame gap
    // 12, IEEE 802.3 clause 4, as the NIC pacer charges them) at 1 Gb/s: 32768 frames of 2130
    // bytes are 558.4 ms (emulated, as the report's times). The WRITE is done when the last
    // frame's ACK is back (a round trip on the veth pair); 10 % leaves room for wake-ups late
    // on a loaded machine (correct runs at D 20: 1.006-1.099). A pacer more than 1 % fast fails
    // the lower bound unless late wake-ups slowed the run by as much (a NIC 4 % fast read 1.008
    // and 1.039 here): host_nic_never_sends_above_its_line_rate_and_reaches_it catches that on
    // the wire, where late wake-ups only ever slow a run.
    let wire_bytes = packets * (14 + 20 + 8 + 12 + 2048 + 4 + 24) + 16;
    let serialisation_ns = (wire_bytes * 8 * 1_000_000_000 / GBPS) as f64;
    let done = qp(&ra, "send_done_ns");
    eprintln!("{packets} frames in {done} ns: {:.4} of their serialisation time", done as f64 / serialisation_ns);
    assert!(
        (0.99 * serialisation_ns..=1.10 * serialisation_ns).contains(&(done as f64)),
        "finished in {done} ns: {packets} frames take {serialisation_ns} ns at the 1 Gb/s line rate ({:.4} of it)",
        done as f64 / serialisation_ns
    );
    assert_eq!(nic(&rb, "rx_bad_icrc"), 0);
    assert_eq!(rb["nics"][0]["xdp"]["roce"].as_u64(), Some(packets), "every data frame went through XDP to the socket");
    assert!(rb["nics"][0]["xdp"]["pass"].as_u64().unwrap() >= 1, "ping/ARP passed to the kernel");
}

/// The NIC's transmitter on the wire, where the machine's load cannot hide a pacer that runs
/// fast: A streams 8 MiB to B, which only captures (tcpdump on B's veth, kernel receive
/// stamps; B's kernel drops the RoCEv2 frames, so A gets no ACKs and a window and an ACK timeout
/// larger than the transfer keep it streaming). In every run of 512 consecutive data frames the
/// NIC takes at most its line rate (wire size = frame + 24 bytes of FCS, preamble/SFD and gap),
/// and its busiest such run at least 95 % of it. A wake-up late on a loaded machine only slows a
/// run (the `done` bound of the 64 MiB WRITE above lets 10 % of it through, so there a pacer a
/// few % fast can pass): a NIC 4 % fast shows here as 1.04 of the line rate.
/// D 20 as above: 4096 frames of 2130 wire bytes at 50 Mb/s of wall clock, 1.4 s.
#[test]
fn host_nic_never_sends_above_its_line_rate_and_reaches_it() {
    let t = BackToBack::new("r", 77, 3500);
    let pcap = TempFile::new("rf-h-rate.pcap");
    let len = 8 * MIB;
    let frames = (len / 2048) as usize;
    let cap = start_capture(&t.b, "hb", &pcap, "udp dst port 4791", 64, frames as u32, 30);
    let extra = json!({"window_packets": 1_000_000, "retransmit_timeout_ns": 60_000_000_000u64});
    let mut job = t.sender_job("rf-h-r-a", len, 1, GBPS, extra, 8000);
    job["time_dilation"] = json!(DILATION);
    let mut a = start_hostd(&t.a, &job);
    let mut cap = cap;
    assert_eq!(cap.wait(Duration::from_secs(30)), 0, "tcpdump did not see the {frames} data frames");
    let (ra, _) = report(&mut a, Duration::from_secs(15));
    assert_eq!(qp(&ra, "packets_sent"), frames as u64, "{ra}");

    let rows = tshark_fields(&pcap, "infiniband", &["frame.time_epoch", "frame.len"]);
    assert_eq!(rows.len(), frames, "data frames captured");
    let f: Vec<(f64, f64)> = rows.iter().map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap())).collect();
    // The line rate of the wall clock the capture stamps in.
    let wall_rate = GBPS as f64 / DILATION;
    let (mut peak, mut worst) = (0.0f64, f64::MAX);
    for w in f.windows(512) {
        let bits: f64 = w[1..].iter().map(|x| (x.1 + 24.0) * 8.0).sum();
        let rate = bits / (w[511].0 - w[0].0);
        (peak, worst) = (peak.max(rate), worst.min(rate));
    }
    eprintln!(
        "A's NIC on the wire: busiest 512 frames {:.4}, slowest {:.4} of the line rate",
        peak / wall_rate,
        worst / wall_rate
    );
    assert!(peak <= 1.01 * wall_rate, "A's NIC sent {:.4} of its line rate over 512 frames", peak / wall_rate);
    assert!(peak >= 0.95 * wall_rate, "A's NIC reached only {:.4} of its line rate over 512 frames", peak / wall_rate);
}

#[test]
fn host_write_with_every_100th_packet_dropped_recovers_by_go_back_n() {
    let t = BackToBack::new("d", 72, 3500);
    let len = 64 * MIB;
    let mut b = start_hostd(&t.b, &t.receiver_job("rf-h-d-b", len, 0xd0d0, GBPS, 100, 60_000));
    let mut a = start_hostd(&t.a, &t.sender_job("rf-h-d-a", len, 0xd0d0, GBPS, json!({"window_packets": 64}), 60_000));
    let (ra, ca) = report(&mut a, Duration::from_secs(70));
    let (rb, cb) = report(&mut b, Duration::from_secs(70));
    assert_eq!((ca, cb), (0, 0), "a={ra} b={rb}");
    assert_eq!(rb["qps"][0]["verified"], true, "{rb}");
    let dropped = rb["nics"][0]["xdp"]["test_dropped"].as_u64().unwrap();
    let seen = rb["nics"][0]["xdp"]["test_seen"].as_u64().unwrap();
    assert!(dropped >= len / 2048 / 100, "XDP dropped {dropped} of {seen}");
    assert!(dropped <= seen / 100 + 2, "at most every 100th (per CPU): {dropped} of {seen}");
    let retx = qp(&ra, "retransmitted_packets");
    assert!(retx >= dropped, "retransmissions {retx} cover the {dropped} drops");
    assert!(qp(&ra, "naks_received") >= 1 && qp(&rb, "naks_sent") >= 1, "go-back-N driven by NAKs");
    assert_eq!(qp(&ra, "packets_sent"), len / 2048 + retx);
    assert!(qp(&rb, "out_of_sequence") >= 1);
}

/// scapy: builds PFC frames with `MACControlClassBasedFlowControl` for priority argv[3], waits
/// for "go" on stdin, then sends a 0xffff pause, waits 200 ms, sends another 0xffff pause, 5 ms
/// later quanta 0 (emulated times: × the time dilation argv[4] on the wall clock).
const SCAPY_PFC: &str = r#"
import sys, time
from scapy.all import Ether, conf
from scapy.contrib.mac_control import MACControlClassBasedFlowControl
iface, prio, d = sys.argv[1], int(sys.argv[3]), float(sys.argv[4])
def pfc(q):
    return Ether(dst="01:80:c2:00:00:01", src=sys.argv[2]) / MACControlClassBasedFlowControl(**{f"c{prio}_enabled": 1, f"c{prio}_pause_time": q})
pause, resume = bytes(pfc(0xffff)), bytes(pfc(0))
s = conf.L2socket(iface=iface)
print("ready", len(pause), flush=True)
sys.stdin.readline()
s.send(pause)
time.sleep(0.2 * d)
s.send(pause)
time.sleep(0.005 * d)
s.send(resume)
print("done", flush=True)
"#;

#[test]
fn host_pfc_from_scapy_pauses_sender_for_encoded_time_and_quanta_zero_resumes() {
    oracles("scapy.contrib.mac_control");
    let t = BackToBack::new("p", 73, 3500);
    let pcap = TempFile::new("rf-h-pfc.pcap");
    // B only captures (its kernel stack drops the RoCEv2 frames), so the sender gets no ACKs:
    // a window and an ACK timeout larger than the transfer keep it streaming at line rate.
    let cap = start_capture(&t.b, "hb", &pcap, "", 160, 200_000, 30);
    let d = PFC_DILATION.to_string();
    let mut scapy = Proc::spawn(
        "scapy pfc",
        Command::new("ip")
            .args(["netns", "exec", &t.b.0, "/usr/bin/python3", "-c", SCAPY_PFC, "hb", &t.mac_b(), "3", &d])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    );
    let l = scapy.line(Duration::from_secs(30));
    assert!(l.starts_with("ready 60"), "scapy: {l}");
    let extra = json!({"window_packets": 1_000_000, "retransmit_timeout_ns": 60_000_000_000u64});
    // Streams through the 2.05 s of wall clock the PFC frames take at D 10 (128 MiB would take 11 s).
    let mut job = t.sender_job("rf-h-p-a", 128 * MIB, 1, GBPS, extra, 6000);
    job["nics"][0]["dcqcn"] = json!(false);
    job["time_dilation"] = json!(PFC_DILATION);
    let mut a = start_hostd(&t.a, &job);
    // Pause only once the sender is streaming: its first data frame is on B's wire.
    wait_for_roce_frame(&pcap, Duration::from_secs(5));
    writeln!(scapy.child.stdin.as_mut().unwrap(), "go").unwrap();
    let l = scapy.line(Duration::from_secs(10));
    assert_eq!(l, "done");
    let (ra, _) = report(&mut a, Duration::from_secs(15));
    drop(cap); // stops tcpdump (-U wrote every packet)
    std::thread::sleep(Duration::from_millis(200));

    // The NIC's own accounting.
    assert_eq!(nic(&ra, "pfc_frames_received"), 3, "{ra}");
    assert_eq!(nic(&ra, "pfc_pause_frames_prio3"), 2);
    assert_eq!(nic(&ra, "pfc_resume_frames_prio3"), 1);

    // The wire, decoded by tshark: PFC frames (outgoing on hb) and the data frames' times.
    let rows = tshark_fields(
        &pcap,
        "macc || (udp.dstport == 4791)",
        &["frame.time_epoch", "eth.type", "macc.cbfc.enbv", "macc.cbfc.pause_time.c3", "infiniband.bth.opcode"],
    );
    // Emulated seconds since the first captured frame (tcpdump stamps the wall clock).
    let t0 = rows.first().map_or(0.0, |r| r[0].parse::<f64>().unwrap());
    let ts = |r: &Vec<String>| (r[0].parse::<f64>().unwrap() - t0) / PFC_DILATION;
    let pfc: Vec<(f64, u64)> = rows.iter().filter(|r| r[1] == "0x8808").map(|r| (ts(r), num(&r[3]))).collect();
    assert_eq!(pfc.iter().map(|p| p.1).collect::<Vec<_>>(), vec![0xffff, 0xffff, 0], "tshark decodes the PFC quanta");
    assert!(rows.iter().filter(|r| r[1] == "0x8808").all(|r| num(&r[2]) == 0x08), "class-enable vector = priority 3");
    let data: Vec<f64> = rows.iter().filter(|r| r[1] == "0x0800").map(ts).collect();
    assert!(data.len() > 10_000, "{} data frames captured", data.len());

    // Full pause: 65535 × 512 bit times at 1 Gb/s = 33.554 ms. Measured from the PFC frame to
    // the end of the longest data gap that follows it (frames already in flight may trail it),
    // in emulated time: 33.566-33.580 ms idle, 33.646 ms with two CPU hogs running. The 3 %
    // leaves room for a data thread woken up to 10 ms of wall clock late at the pause's end;
    // the quanta arithmetic itself is exact in `gpu_host::pfc`'s unit tests.
    let expect = 65535.0 * 512.0 / 1e9;
    let resume_after = |p: f64, within: f64| -> f64 {
        let w: Vec<f64> = data.iter().copied().filter(|&x| x > p - 0.002 && x < p + within).collect();
        let (i, _) =
            w.windows(2)
                .enumerate()
                .map(|(i, x)| (i, x[1] - x[0]))
                .fold((0, 0.0), |m, x| if x.1 > m.1 { x } else { m });
        w[i + 1] - p
    };
    let full = resume_after(pfc[0].0, 0.1);
    let (p2, r2) = (pfc[1].0, pfc[2].0);
    let next = data.iter().copied().find(|&x| x > r2).expect("data after the resume");
    let paused_ns = nic(&ra, "pfc_paused_ns_prio3") as f64 / 1e9;
    eprintln!(
        "emulated: paused {:.3} ms by 0xffff; first data {:.3} ms after quanta 0; NIC accounted {:.3} ms against the wire",
        full * 1e3,
        (next - r2) * 1e3,
        (paused_ns - (expect + (r2 - p2))) * 1e3
    );
    assert!(
        (full - expect).abs() <= 0.03 * expect,
        "paused {:.3} ms, expected {:.3} ms ± 3%",
        full * 1e3,
        expect * 1e3
    );
    // Quanta 0 resumes at once: data flows again right after the resume frame, long before
    // the second 0xffff pause would have expired.
    // "At once" = far sooner than the 33.5 ms left of the pause: within 2 ms of emulated time
    // (20 ms of wall clock at D 10; 0.01-0.03 ms idle, 0.53 ms with two CPU hogs running).
    assert!(next - r2 < 0.002, "first data {:.3} ms after quanta 0", (next - r2) * 1e3);
    assert!(!data.iter().any(|&x| x > p2 + 0.002 && x < r2), "no data while paused");
    assert!(next - p2 < 0.5 * expect, "second pause lasted {:.3} ms", (next - p2) * 1e3);
    assert!((paused_ns - (expect + (r2 - p2))).abs() < 0.002, "NIC accounted {paused_ns} s");
}

/// The PFC enable vector on the NIC (802.1Qbb; the NIC adopts the switch's by DCBX, default
/// priority 3): a NIC running RoCEv2 lossy on priority 0 (DSCP 0, as rxe does) gets the same
/// two 65535-quanta PFC frames and quanta 0, for priority 0. PFC is not enabled on priority 0,
/// so they are counted as ignored and the data keeps flowing (tcpdump on B's wire: no gap near
/// the 33.5 ms a pause would hold it).
#[test]
fn host_pfc_for_a_priority_without_pfc_is_ignored() {
    oracles("scapy.contrib.mac_control");
    let t = BackToBack::new("q", 76, 3500);
    let pcap = TempFile::new("rf-h-pfc0.pcap");
    let cap = start_capture(&t.b, "hb", &pcap, "", 160, 200_000, 30);
    let d = PFC_DILATION.to_string();
    let mut scapy = Proc::spawn(
        "scapy pfc",
        Command::new("ip")
            .args(["netns", "exec", &t.b.0, "/usr/bin/python3", "-c", SCAPY_PFC, "hb", &t.mac_b(), "0", &d])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    );
    let l = scapy.line(Duration::from_secs(30));
    assert!(l.starts_with("ready 60"), "scapy: {l}");
    let extra = json!({"window_packets": 1_000_000, "retransmit_timeout_ns": 60_000_000_000u64});
    let mut job = t.sender_job("rf-h-q-a", 128 * MIB, 1, GBPS, extra, 6000);
    job["nics"][0]["dcqcn"] = json!(false);
    job["time_dilation"] = json!(PFC_DILATION);
    // RoCEv2 on priority 0; the PFC enable vector stays the default (priority 3).
    job["nics"][0]["classes"] = json!({"data_dscp": 0, "data_priority": 0, "cnp_dscp": 48, "cnp_priority": 7});
    let mut a = start_hostd(&t.a, &job);
    wait_for_roce_frame(&pcap, Duration::from_secs(5));
    writeln!(scapy.child.stdin.as_mut().unwrap(), "go").unwrap();
    assert_eq!(scapy.line(Duration::from_secs(10)), "done");
    let (ra, _) = report(&mut a, Duration::from_secs(15));
    drop(cap);
    std::thread::sleep(Duration::from_millis(200));

    assert_eq!(nic(&ra, "data_priority"), 0, "{ra}");
    assert_eq!(nic(&ra, "pfc_frames_received"), 3, "{ra}");
    assert_eq!(nic(&ra, "pfc_ignored_frames"), 3, "every PFC frame named only priority 0: {ra}");
    assert_eq!(
        (nic(&ra, "pfc_pause_frames_prio3"), nic(&ra, "pfc_paused_ns_prio3")),
        (0, 0),
        "the data priority (0) was paused: {ra}"
    );

    let rows = tshark_fields(
        &pcap,
        "macc || (udp.dstport == 4791)",
        &["frame.time_epoch", "eth.type", "macc.cbfc.enbv", "macc.cbfc.pause_time.c0", "ip.dsfield.dscp"],
    );
    // Emulated seconds since the first captured frame (tcpdump stamps the wall clock).
    let t0 = rows.first().map_or(0.0, |r| r[0].parse::<f64>().unwrap());
    let ts = |r: &Vec<String>| (r[0].parse::<f64>().unwrap() - t0) / PFC_DILATION;
    let pfc: Vec<(f64, u64)> = rows.iter().filter(|r| r[1] == "0x8808").map(|r| (ts(r), num(&r[3]))).collect();
    assert_eq!(pfc.iter().map(|p| p.1).collect::<Vec<_>>(), vec![0xffff, 0xffff, 0], "tshark decodes the PFC quanta");
    assert!(rows.iter().filter(|r| r[1] == "0x8808").all(|r| num(&r[2]) == 0x01), "class-enable vector = priority 0");
    // The RoCEv2 data at DSCP 0 (B's kernel answers with ICMP errors at DSCP 48 that quote
    // the UDP header, so they match the filter too); none at the default DSCP 24.
    let data: Vec<f64> = rows.iter().filter(|r| r[1] == "0x0800" && r[4] == "0").map(ts).collect();
    assert!(!rows.iter().any(|r| r[4] == "24"), "data left at DSCP 24, not the job's class");
    // After each pause frame, data across the next 40 ms (longer than the 33.5 ms pause) with
    // no gap of 2 ms (emulated; longest seen 0.04-0.42 ms idle, 0.87 ms with two CPU hogs
    // running): from within 5 ms of the frame to within 5 ms of the window's end. (How many
    // frames that is depends on the machine's speed, not on PFC: a fresh-clone CI run sent 882
    // where an idle machine sends over 1000, so the count is not a bound.)
    for &(p, _) in &pfc[..2] {
        let w: Vec<f64> = data.iter().copied().filter(|&x| x > p - 0.002 && x < p + 0.04).collect();
        assert!(
            w.first().is_some_and(|&x| x < p + 0.005) && w.last().is_some_and(|&x| x > p + 0.035),
            "{} data frames in the 40 ms after the pause frame at {p}, not across it: {:?}..{:?}",
            w.len(),
            w.first(),
            w.last()
        );
        let gap = w.windows(2).map(|x| x[1] - x[0]).fold(0.0, f64::max);
        eprintln!("emulated: longest data gap {:.3} ms in the 40 ms after the PFC frame at {p:.4} s", gap * 1e3);
        assert!(gap < 0.002, "data stopped for {:.3} ms after a PFC frame for priority 0", gap * 1e3);
    }
}

/// scapy: a duplicate RDMA WRITE Only to B's QP 512 (PSN 0xfff000, the transfer's first) from
/// A's address, ICRC computed by scapy: what A's NIC would retransmit had B's final ACK been lost.
const SCAPY_DUPLICATE: &str = r#"
import sys
from scapy.all import Ether, IP, UDP, Raw, sendp
from scapy.contrib.roce import BTH
iface, sm, dm, sip, dip = sys.argv[1:6]
reth = (0x10000).to_bytes(8, "big") + (0x77).to_bytes(4, "big") + (256).to_bytes(4, "big")
p = Ether(src=sm, dst=dm) / IP(src=sip, dst=dip, tos=0x62) / UDP(sport=49152, dport=4791, chksum=0) \
    / BTH(opcode=0x0a, dqpn=512, psn=0xfff000, ackreq=1) / Raw(reth + bytes(256))
sendp(p, iface=iface, verbose=0)
"#;

/// A responder with `linger_ms` keeps its QP up after its report, as a real RC QP lives until
/// destroyed: a duplicate of the transfer's first packet (scapy) is answered with an ACK
/// (tcpdump at A, decoded by tshark) instead of the kernel's port unreachable, and SIGTERM ends
/// the linger with exit status 0. `rocefab run` lingers every hostd until all have reported.
#[test]
fn a_lingering_responder_acks_a_duplicate_after_its_report_and_stops_on_sigterm() {
    oracles("scapy.contrib.roce");
    let t = BackToBack::new("l", 75, 3500);
    let len = 64 * 1024;
    let mut job_b = t.receiver_job("rf-h-l-b", len, 0x11, GBPS, 0, 30_000);
    job_b["linger_ms"] = json!(30_000);
    let mut b = start_hostd(&t.b, &job_b);
    let mut a = start_hostd(&t.a, &t.sender_job("rf-h-l-a", len, 0x11, GBPS, json!({}), 30_000));
    let (ra, ca) = report(&mut a, Duration::from_secs(40));
    assert_eq!((ca, ra["ok"].as_bool()), (0, Some(true)), "{ra}");
    let rb: serde_json::Value = serde_json::from_str(&b.line(Duration::from_secs(40))).unwrap();
    assert_eq!((rb["ok"].as_bool(), rb["qps"][0]["verified"].as_bool()), (Some(true), Some(true)), "{rb}");
    assert!(b.child.try_wait().unwrap().is_none(), "B exited right after its report although it lingers");

    // A's hostd has exited: what B answers reaches A's kernel, where tcpdump sees it.
    let pcap = TempFile::new("rf-h-linger.pcap");
    let mut cap =
        start_capture(&t.a, "ha", &pcap, &format!("src host {} and (udp port 4791 or icmp)", t.ip_b()), 0, 1, 10);
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.a.0,
            "/usr/bin/python3",
            "-c",
            SCAPY_DUPLICATE,
            "ha",
            &t.mac_a(),
            &t.mac_b(),
            &t.ip_a(),
            &t.ip_b(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "scapy: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(cap.wait(Duration::from_secs(15)), 0, "tcpdump saw no answer from B");
    let fields = ["icmp.type", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.aeth.syndrome"];
    let rows = tshark_fields(&pcap, "", &fields);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][0], "", "B's kernel answered (the QP was gone): {rows:?}");
    assert_eq!((num(&rows[0][1]), num(&rows[0][2])), (0x11, 256), "an ACK to A's QP 256: {rows:?}");
    assert_eq!(num(&rows[0][3]) >> 5, 0, "AETH syndrome is an ACK, not a NAK: {rows:?}");

    b.terminate();
    assert_eq!(b.wait(Duration::from_secs(5)), 0, "B ends its linger on SIGTERM with the report's status");
}

#[test]
fn host_bad_job_fails_with_an_error_naming_the_problem() {
    let ns = Netns::new("rf-h-bad");
    let job = json!({
        "name": "rf-h-bad", "timeout_ms": 1000,
        "nics": [{"name": "rf-h-nope", "mac": "02:00:00:00:00:01", "ip": "10.75.0.1", "line_rate_bps": GBPS}],
        "qps": []
    });
    let path = TempFile::new("rf-h-job-bad.json");
    std::fs::write(&path, job.to_string()).unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(hostd_bin())
        .arg("--job")
        .arg(path.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("rf-h-nope") && e.contains("SIOCGIFMTU"), "{e}");

    std::fs::write(&path, r#"{"name":"x","nics":[],"qps":[],"extra":1}"#).unwrap();
    let out = Command::new(hostd_bin()).arg("--job").arg(path.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("rf-h-job-bad.json") && e.contains("extra"), "{e}");
}

/// scapy: a WRITE Only (AckReq, CE-marked) built entirely by scapy, sent on argv[1].
const SCAPY_WRITE: &str = r#"
import sys, struct
from scapy.all import Ether, IP, UDP, Raw, conf
from scapy.contrib.roce import BTH
iface, src, dst, sip, dip = sys.argv[1:6]
def mix(z):
    M = (1 << 64) - 1
    z = (z + 0x9e3779b97f4a7c15) & M
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
    return z ^ (z >> 31)
seed = 5
payload = b"".join(struct.pack("<Q", mix(seed ^ w)) for w in range(32))
reth = struct.pack("!QII", 0x10000, 0x77, len(payload))
f = (Ether(src=src, dst=dst) / IP(src=sip, dst=dip, tos=(24 << 2) | 3, flags="DF") / UDP(sport=0xc123, dport=4791, chksum=0)
     / BTH(opcode=0x0a, dqpn=512, psn=0xfff000, ackreq=1) / Raw(reth + payload))
conf.L2socket(iface=iface).send(f)
print("sent", flush=True)
"#;

#[test]
fn host_capture_decodes_as_infiniband_and_icrc_matches_scapy() {
    oracles("scapy.contrib.roce");
    let t = BackToBack::new("c", 74, 3500);

    // Part 1: what the requester NIC sends (captured on the passive peer): two messages,
    // First/Middle/Last (3 × 2048) and Only (1000 bytes).
    let pcap = TempFile::new("rf-h-cap-data.pcap");
    let cap = start_capture(&t.b, "hb", &pcap, "udp port 4791", 0, 4, 10);
    let extra = json!({"window_packets": 1000, "retransmit_timeout_ns": 60_000_000_000u64, "message_bytes": 3 * 2048});
    let mut a = start_hostd(&t.a, &t.sender_job("rf-h-c-a", 3 * 2048 + 1000, 3, GBPS, extra, 1500));
    let _ = report(&mut a, Duration::from_secs(10));
    let mut cap = cap;
    let _ = cap.wait(Duration::from_secs(10));
    let fields = [
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.bth.a",
        "infiniband.reth.va",
        "infiniband.reth.r_key",
        "infiniband.reth.dmalen",
        "ip.dsfield.dscp",
        "ip.dsfield.ecn",
        "udp.srcport",
        "infiniband.invariant.crc",
    ];
    let rows = tshark_fields(&pcap, "infiniband", &fields);
    assert_eq!(rows.len(), 4, "{rows:?}");
    let col = |r: &Vec<String>, f: &str| num(&r[fields.iter().position(|x| *x == f).unwrap()]);
    assert_eq!(rows.iter().map(|r| col(r, "infiniband.bth.opcode")).collect::<Vec<_>>(), vec![0x06, 0x07, 0x08, 0x0a]);
    assert_eq!(
        rows.iter().map(|r| col(r, "infiniband.bth.psn")).collect::<Vec<_>>(),
        vec![0xfff000, 0xfff001, 0xfff002, 0xfff003]
    );
    for r in &rows {
        assert_eq!(col(r, "infiniband.bth.destqp"), 512);
        assert_eq!(col(r, "ip.dsfield.dscp"), 24);
        assert_eq!(col(r, "ip.dsfield.ecn"), 2, "ECT(0)");
        let sport = col(r, "udp.srcport");
        assert!(
            (0xc000..=0xffff).contains(&sport) && sport == col(&rows[0], "udp.srcport"),
            "per-QP entropy port {sport}"
        );
    }
    assert_eq!(
        (
            col(&rows[0], "infiniband.reth.va"),
            col(&rows[0], "infiniband.reth.r_key"),
            col(&rows[0], "infiniband.reth.dmalen")
        ),
        (0x10000, 0x77, 3 * 2048)
    );
    assert_eq!(
        (col(&rows[3], "infiniband.reth.va"), col(&rows[3], "infiniband.reth.dmalen")),
        (0x10000 + 3 * 2048, 1000)
    );
    assert_eq!(col(&rows[2], "infiniband.bth.a"), 1, "message end asks for an ACK");
    check_icrc_with_scapy(&pcap, 4, &rows.iter().map(|r| col(r, "infiniband.invariant.crc")).collect::<Vec<_>>());

    // Part 2: what the responder NIC sends. scapy writes a CE-marked WRITE Only with AckReq
    // to B's hostd; the capture on the (passive) A side must hold an ACK and a CNP.
    let pcap2 = TempFile::new("rf-h-cap-ack.pcap");
    let mut b = start_hostd(
        &t.b,
        &json!({
            "name": "rf-h-c-b", "timeout_ms": 10_000,
            "nics": [{"name": "hb", "mac": t.mac_b(), "ip": t.ip_b(), "line_rate_bps": GBPS}],
            "qps": [{"qpn": 512, "nic": 0, "peer_qpn": 256, "peer_ip": t.ip_a(), "next_hop_mac": t.mac_a(),
                     "recv": {"psn": 0xfff000, "va": 0x10000, "rkey": 0x77, "len": 256, "expect_seed": 5}}]
        }),
    );
    let mut cap2 = start_capture(&t.a, "ha", &pcap2, "udp port 4791", 0, 3, 10);
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.a.0,
            "/usr/bin/python3",
            "-c",
            SCAPY_WRITE,
            "ha",
            &t.mac_a(),
            &t.mac_b(),
            &t.ip_a(),
            &t.ip_b(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "scapy write: {}", String::from_utf8_lossy(&out.stderr));
    let (rb, cb) = report(&mut b, Duration::from_secs(15));
    assert_eq!(cb, 0, "{rb}");
    assert_eq!(rb["qps"][0]["verified"], true, "B placed scapy's payload: {rb}");
    assert_eq!(qp(&rb, "ce_marked"), 1);
    assert_eq!(qp(&rb, "cnps_sent"), 1);
    let _ = cap2.wait(Duration::from_secs(10));
    let f2 = [
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.aeth.syndrome",
        "infiniband.aeth.msn",
        "ip.dsfield.dscp",
        "udp.dstport",
        "infiniband.invariant.crc",
    ];
    let rows2 = tshark_fields(&pcap2, &format!("infiniband && ip.src == {}", t.ip_b()), &f2);
    let op = |r: &Vec<String>| num(&r[0]);
    let ack = rows2.iter().find(|r| op(r) == 0x11).unwrap_or_else(|| panic!("no ACK captured: {rows2:?}"));
    assert_eq!(
        (num(&ack[1]), num(&ack[2]), num(&ack[3]), num(&ack[4]), num(&ack[5])),
        (256, 0xfff000, 0x1f, 1, 24),
        "ACK fields"
    );
    let cnp = rows2.iter().find(|r| op(r) == 0x81).unwrap_or_else(|| panic!("no CNP captured: {rows2:?}"));
    assert_eq!((num(&cnp[1]), num(&cnp[5])), (256, 48), "CNP to the requester QP with DSCP 48");
    // tshark stops dissecting the CNP (opcode 0x81 is "Unknown" to it) before the ICRC;
    // scapy checks that one on its own. The capture holds exactly 3 frames (-c 3): scapy's
    // WRITE, the ACK and the CNP; scapy must parse all of them.
    let crcs: Vec<u64> = rows2.iter().filter(|r| !r[7].is_empty()).map(|r| num(&r[7])).collect();
    check_icrc_with_scapy(&pcap2, 3, &crcs);
}

/// scapy parses exactly `frames` RoCEv2 frames in `pcap` (none it failed to dissect slips
/// through), each carries the ICRC scapy computes for it, and every ICRC tshark showed is one
/// of them.
fn check_icrc_with_scapy(pcap: &std::path::Path, frames: usize, tshark_crcs: &[u64]) {
    let lines = rocefab_tests::scapy::icrc(pcap);
    assert_eq!(lines.len(), frames, "frames scapy parsed as RoCEv2 (stored/computed ICRC): {lines:?}");
    for (stored, computed) in &lines {
        assert_eq!(stored, computed, "ICRC in the frame vs scapy's computation");
    }
    let stored: Vec<u64> = lines.iter().map(|(s, _)| u64::from_str_radix(s, 16).unwrap()).collect();
    for c in tshark_crcs {
        assert!(stored.contains(c), "tshark ICRC {c:#x} not among scapy's {stored:x?}");
    }
}
