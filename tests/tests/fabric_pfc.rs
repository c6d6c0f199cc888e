//! The lossless switch on a rail-spine fabric brought up from `topologies/rail-spine.yaml`
//! (issue 8): PFC generation at xOFF and quanta 0 below xON, PFC reception for the encoded time,
//! the PFC watchdog, and malformed MAC-control frames. The misbehaving peers are scapy (PFC
//! frames from the receiving GPU) and kernel UDP senders that do not honour PFC; tshark decodes
//! what the switch sends. Needs root, tcpdump, tshark and /usr/bin/python3 with scapy.
//!
//! Every test uses the same rail: host1:gpu0 → rail1 → host2:gpu0 (10.0.1.1 → 10.0.1.2), so
//! the congested ingress group is rail1's port to host1 and the paused egress queue is rail1's
//! port to host2, priority 3.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_tests::capture::start_capture_in;
use rocefab_tests::fabric::{metric, series, Fabric};
use rocefab_tests::proc::{require_tool, Proc};
use rocefab_tests::scapy::Agent;
use rocefab_tests::scratch::TempFile;
use rocefab_tests::tshark::{fields as tshark_fields, num};

const SRC: &str = "10.0.1.1";
const DST: &str = "10.0.1.2";
/// 65535 quanta × 512 bit times at 1 Gbit/s.
const MAX_PAUSE: Duration = Duration::from_nanos(65_535 * 512);
/// Time dilation of the tests that time a pause or the watchdog against the wall clock (tcpdump
/// stamps, scrapes): at D 1 a data-plane thread a few ms late on a loaded machine is a tenth of
/// a 33.5 ms pause and the ±10 % failed in CI; at D 10 the same lateness is a hundredth. The
/// bounds are the same in emulated time.
const TIMING_D: u32 = 10;

/// A bounded kernel UDP sender in host1: `n` datagrams of `size` bytes to DST:4791 for each DSCP
/// in `dscps` (interleaved), `gap_us` apart (0: as fast as the socket takes them).
fn udp_burst(f: &Fabric, dscps: &[u8], n: u32, size: u32, gap_us: u32) -> Proc {
    let py = "import socket,sys,time\n\
              src,dst,n,size,gap=sys.argv[1],sys.argv[2],int(sys.argv[3]),int(sys.argv[4]),int(sys.argv[5])/1e6\n\
              socks=[]\n\
              for d in sys.argv[6:]:\n    s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n    s.setsockopt(socket.IPPROTO_IP,socket.IP_TOS,int(d)<<2)\n    s.bind((src,0))\n    socks.append(s)\n\
              for i in range(n):\n    [s.sendto(b'r'*size,(dst,4791)) for s in socks]\n    gap and time.sleep(gap)\n\
              print('sent',n,flush=True)\n";
    let mut args: Vec<String> = ["netns", "exec", &f.netns("host1"), "/usr/bin/python3", "-c", py, SRC, DST]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend([n.to_string(), size.to_string(), gap_us.to_string()]);
    args.extend(dscps.iter().map(|d| d.to_string()));
    Proc::spawn("udp sender", Command::new("ip").args(&args).stdout(Stdio::piped()))
}

fn tools() {
    require_tool("/usr/bin/python3", &["-c", "import scapy.contrib.mac_control"]);
    require_tool("tshark", &["-v"]);
    require_tool("tcpdump", &["--version"]);
}

/// Polls rail1's metrics until `f` holds (5 s at most); returns the last scrape.
fn rail1_until(f: &Fabric, what: &str, cond: impl Fn(&str) -> bool) -> String {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let t = f.metrics("rail1");
        if cond(&t) {
            return t;
        }
        assert!(Instant::now() < end, "rail1: {what} did not happen within 5 s:\n{}", interesting(&t));
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The PFC/buffer lines of a scrape, for failure messages.
fn interesting(t: &str) -> String {
    t.lines()
        .filter(|l| {
            !l.starts_with('#')
                && (l.contains("pfc")
                    || l.contains("own_frames")
                    || l.contains("xsk_tx")
                    || l.contains("port_tx_packets")
                    || l.contains("pg_bytes")
                    || l.contains("headroom")
                    || l.contains("dropped"))
                && !l.ends_with(" 0")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Test 1, Xoff/Xon in the style of the SONiC PFC tests. host2 keeps rail1's egress priority 3 paused
/// with scapy PFC; host1 sends N lossless frames, well past xOFF (100 kB) but within the
/// headroom; rail1 sends PFC to host1 (tshark decodes it at host1); nothing is dropped; once host2
/// stops pausing all N arrive and rail1 sends quanta 0 when the ingress group falls below xON:
/// tcpdump at host2 sees the frames still held at that moment arrive after it. The same flood
/// on a lossy class (DSCP 0), held by 802.3x PAUSE, is dropped at admission: exactly the frames
/// past the queue limit (in 256-byte cells).
#[test]
fn xoff_sends_pfc_to_the_sender_xon_sends_quanta_zero_and_nothing_lossless_is_dropped() {
    tools();
    let f = Fabric::up_with(
        "rail-spine.yaml",
        "rfx",
        "qos:\n  xoff: 100KB\n  xon: 20KB\n  queue_limit: 100KB\n  watchdog: off\n  wred: off\n",
    );
    let to_h1 = f.port_to("rail1", "host1:gpu0");
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let pcap = TempFile::new("rf-h-pfc-xoff.pcap");
    let cap = start_capture_in(&f.netns("host1"), "gpu0", &pcap, "ether proto 0x8808", 0, 1000, 30);
    // What arrives at host2 (the lossless burst), to place rail1's quanta 0 among it.
    let pcap2 = TempFile::new("rf-h-pfc-xoff-h2.pcap");
    let cap2 = start_capture_in(&f.netns("host2"), "gpu0", &pcap2, "udp dst port 4791", 64, 1000, 30);
    let mut agent = Agent::start(&f, "host2", "gpu0");

    // host2 pauses priority 3 for 65535 quanta (33.5 ms) every 10 ms, for 1.5 s.
    assert_eq!(agent.cmd("storm 65535 10 1500"), "started");
    let t = rail1_until(&f, "pause from host2", |t| {
        metric(t, "rocefab_pfc_rx_frames_total", &[("port", &to_h2), ("priority", "3")]) >= 1.0
    });
    let dropped_before = metric(&t, "rocefab_queue_dropped_packets_total", &[("port", &to_h2)]);

    // N = 200 frames of 1042 bytes, 1280 bytes each in 256-byte cells: 256 kB, 2.5 × xOFF,
    // inside xOFF + the 512 kB headroom.
    const N: u32 = 200;
    let mut tx = udp_burst(&f, &[24], N, 1000, 0);
    assert_eq!(tx.line(Duration::from_secs(10)), format!("sent {N}"));
    let pg = [("port", to_h1.as_str()), ("priority", "3")];
    let held = rail1_until(&f, "N frames held in queue 3", |t| {
        metric(t, "rocefab_queue_enqueued_packets_total", &[("port", &to_h2), ("queue", "3")]) >= f64::from(N)
    });
    // The congestion really happened: the ingress group holds more than xOFF, and PFC went out.
    let pg_bytes = metric(&held, "rocefab_ingress_pg_bytes", &pg);
    assert!(pg_bytes >= 100_000.0, "ingress group of {to_h1} holds {pg_bytes} bytes, below xOFF");
    assert!(metric(&held, "rocefab_pfc_tx_frames_total", &pg) >= 1.0, "no PFC sent at xOFF:\n{}", interesting(&held));
    assert_eq!(
        series(&held, "rocefab_queue_dequeued_packets_total", &[("port", &to_h2), ("queue", "3")]),
        0.0,
        "queue 3 is paused"
    );

    // host2 stops pausing: everything drains, quanta 0 goes to host1.
    assert!(agent.0.line(Duration::from_secs(5)).starts_with("done"));
    let after = rail1_until(&f, "queue 3 drained", |t| {
        metric(t, "rocefab_queue_dequeued_packets_total", &[("port", &to_h2), ("queue", "3")]) >= f64::from(N)
    });
    assert_eq!(
        series(&after, "rocefab_headroom_overflow_total", &[]),
        0.0,
        "lossless frames lost:\n{}",
        interesting(&after)
    );
    assert_eq!(metric(&after, "rocefab_queue_dropped_packets_total", &[("port", &to_h2)]), dropped_before);
    assert_eq!(series(&after, "rocefab_ingress_pg_bytes", &pg), 0.0);
    let links = format!(
        "{}{}",
        String::from_utf8_lossy(&f.exec("rail1", &["ip", "-s", "link", "show", &to_h1]).stdout),
        String::from_utf8_lossy(&f.exec("host1", &["ip", "-s", "-s", "link", "show", "gpu0"]).stdout)
    );
    drop(cap);
    drop(cap2);

    // tshark at the sender: PFC opcode 0x0101, class-enable bit 3, quanta 65535, then quanta 0.
    let rows = tshark_fields(
        &pcap,
        "macc",
        &["eth.src", "macc.opcode", "macc.cbfc.enbv", "macc.cbfc.pause_time.c3", "frame.time_epoch"],
    );
    let rail1_mac = f.config("rail1").ports.iter().find(|p| p.name == to_h1).unwrap().mac.to_string();
    let ours: Vec<_> = rows.iter().filter(|r| r[0] == rail1_mac).collect();
    assert!(ours.len() >= 2, "PFC from rail1 at host1: {rows:?}");
    assert_eq!(
        ours.len() as f64,
        metric(&after, "rocefab_pfc_tx_frames_total", &pg),
        "every PFC rail1 counted reached host1:\n{}\n{links}",
        interesting(&after)
    );
    for r in &ours {
        assert_eq!((num(&r[1]), num(&r[2])), (0x0101, 0x08), "{r:?}");
    }
    assert_eq!(num(&ours[0][3]), 65535, "first PFC pauses: {ours:?}");
    assert_eq!(num(&ours[ours.len() - 1][3]), 0, "last PFC resumes (quanta 0): {ours:?}");

    // Quanta 0 goes out when the ingress group falls below xON: the group holds the frames not
    // yet sent to host2, CHARGE bytes each, so it crosses when XON_LEFT frames are left, and
    // those arrive at host2 after the quanta 0 leaves for host1 (one kernel clock for both
    // captures). Frames handed over in the crossing frame's TX batch may be stamped before the
    // PFC frame (it leaves from host1's port's control queue, in the same data-plane pass or the
    // next): at most XON_BATCH_SLACK fewer.
    let c = f.config("rail1");
    let (xon, charge) = (c.qos.xon_bytes, 1042u64.div_ceil(u64::from(c.qos.cell_bytes)) * u64::from(c.qos.cell_bytes));
    let xon_left = (xon - 1) / charge; // 15: 15 × 1280 < 20 000 ≤ 16 × 1280
    assert!(xon_left >= 2 * XON_BATCH_SLACK, "xON {xon} B holds too few {charge} B frames to place quanta 0");
    let xon_at: f64 = ours[ours.len() - 1][4].parse().unwrap();
    let burst: Vec<f64> = tshark_fields(&pcap2, "ip.dsfield.dscp == 24", &["frame.time_epoch"])
        .iter()
        .map(|r| r[0].parse().unwrap())
        .collect();
    assert_eq!(burst.len() as u32, N, "host2 received the whole lossless burst");
    let after_xon = burst.iter().filter(|&&t| t > xon_at).count() as u64;
    const XON_BATCH_SLACK: u64 = 6;
    eprintln!(
        "quanta 0 left with {after_xon} of the burst still to arrive at host2 (group crossed xON with {xon_left} held)"
    );
    assert!(
        after_xon <= xon_left && after_xon + XON_BATCH_SLACK >= xon_left,
        "quanta 0 left for host1 with {after_xon} frames still to arrive at host2; the group crossed xON ({xon} B) with {xon_left} frames of {charge} B held"
    );

    // The same flood on lossy priority 0 (queue limit 100 kB) while host2 holds every priority
    // with 802.3x PAUSE (PFC for priority 0 would be ignored: no PFC on it): the queue keeps
    // floor(limit / charge) frames, the rest is dropped at admission, no PFC for priority 0.
    let q0 = [("port", to_h2.as_str()), ("queue", "0")];
    assert_eq!(agent.cmd("pausestorm 65535 10 500"), "started");
    rail1_until(&f, "802.3x PAUSE", |t| metric(t, "rocefab_pfc_paused", &[("port", &to_h2), ("priority", "0")]) == 1.0);
    let before = f.metrics("rail1");
    assert_eq!(series(&before, "rocefab_queue_depth_cell_bytes", &q0), 0.0, "queue 0 is empty before the flood");
    let mut tx = udp_burst(&f, &[0], N, 1000, 0);
    assert_eq!(tx.line(Duration::from_secs(10)), format!("sent {N}"));
    let t = rail1_until(&f, "lossy flood accounted", |t| {
        let got = |n| metric(t, n, &q0) - metric(&before, n, &q0);
        got("rocefab_queue_enqueued_packets_total") + got("rocefab_queue_admission_dropped_packets_total")
            >= f64::from(N)
    });
    let adm = metric(&t, "rocefab_queue_admission_dropped_packets_total", &q0)
        - metric(&before, "rocefab_queue_admission_dropped_packets_total", &q0);
    let kept = c.queue_limit_bytes / charge; // 78 frames of 1280 B in 100 000 B
    assert_eq!(
        adm,
        (u64::from(N) - kept) as f64,
        "{N} frames of {charge} B into a {} B queue held by PAUSE:\n{}",
        c.queue_limit_bytes,
        interesting(&t)
    );
    // The depths while held: cells (what the limit acts on) and frame bytes.
    assert_eq!(metric(&t, "rocefab_queue_depth_cell_bytes", &q0), (kept * charge) as f64);
    assert_eq!(metric(&t, "rocefab_queue_depth_bytes", &q0), (kept * 1042) as f64);
    assert_eq!(
        metric(&t, "rocefab_queue_dequeued_packets_total", &q0),
        metric(&before, "rocefab_queue_dequeued_packets_total", &q0),
        "PAUSE holds queue 0"
    );
    assert_eq!(series(&t, "rocefab_pfc_tx_frames_total", &[("port", &to_h1), ("priority", "0")]), 0.0);
    assert!(agent.0.line(Duration::from_secs(5)).starts_with("done"));
}

/// Test 2, Reception: a PFC frame with quanta 65535 stops rail1's priority 3 towards host2 for
/// 33.5 ms emulated (±10 %) while priority 0 keeps flowing; quanta 0 resumes it at once; an
/// 802.3x PAUSE stops both for 33.5 ms. Measured on host2's wire: tcpdump sees the pause frame
/// leave and the forwarded traffic arrive; at time dilation [`TIMING_D`] (335 ms of wall clock).
#[test]
fn received_pfc_stops_only_its_priority_for_the_encoded_time_and_quanta_zero_resumes() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfr", &format!("time_dilation: {TIMING_D}\n"));
    // The pause on the wall clock: the encoded time at the emulated 1 Gbit/s, times D.
    let pause_wall = MAX_PAUSE * TIMING_D;
    let pcap = TempFile::new("rf-h-pfc-rx.pcap");
    let cap =
        start_capture_in(&f.netns("host2"), "gpu0", &pcap, "ether proto 0x8808 or udp port 4791", 128, 60_000, 60);
    let mut agent = Agent::start(&f, "host2", "gpu0");
    // Two streams (DSCP 24 → priority 3, DSCP 0 → priority 0), one datagram each per 200 µs.
    let mut tx = udp_burst(&f, &[24, 0], 20_000, 200, 200);
    rail1_until(&f, "traffic to host2", |t| {
        metric(
            t,
            "rocefab_queue_dequeued_packets_total",
            &[("port", &f.port_to("rail1", "host2:gpu0")), ("queue", "3")],
        ) >= 100.0
    });
    assert_eq!(agent.cmd("pfc 65535"), "sent");
    std::thread::sleep(pause_wall * 3); // let the full pause expire on the wire, then the next case
    assert_eq!(agent.cmd("pfc 65535"), "sent");
    std::thread::sleep(Duration::from_millis(10) * TIMING_D);
    assert_eq!(agent.cmd("pfc 0"), "sent");
    std::thread::sleep(Duration::from_millis(50) * TIMING_D);
    assert_eq!(agent.cmd("pause 65535"), "sent");
    assert!(tx.line(Duration::from_secs(60)).starts_with("sent"));
    drop(cap);

    let rows = tshark_fields(
        &pcap,
        "macc || udp",
        &["frame.time_epoch", "macc.cbfc.pause_time.c3", "ip.dsfield.dscp", "macc.pause_time"],
    );
    let t = |r: &Vec<String>| r[0].parse::<f64>().unwrap();
    let pause = rows.iter().find(|r| r[3] == "65535").map(t).expect("the 802.3x PAUSE on host2's wire");
    let pfcs: Vec<(f64, u64)> = rows.iter().filter(|r| !r[1].is_empty()).map(|r| (t(r), num(&r[1]))).collect();
    assert_eq!(
        pfcs.iter().map(|p| p.1).collect::<Vec<_>>(),
        vec![65535, 65535, 0],
        "PFC frames seen on host2: {pfcs:?}"
    );
    let arrivals = |dscp: &str, from: f64, to: f64| {
        rows.iter().filter(|r| r[2] == dscp && t(r) > from && t(r) < to).map(t).collect::<Vec<f64>>()
    };

    // Full pause: frames already on their way arrive within 2 ms; then nothing on priority 3
    // until the pause expires; priority 0 keeps arriving.
    let p0 = pfcs[0].0;
    let first_after = arrivals("24", p0 + 0.002, p0 + 1.0).first().copied().expect("priority 3 never resumed");
    let paused = Duration::from_secs_f64(first_after - p0);
    let (lo, hi) = (pause_wall.mul_f64(0.9), pause_wall.mul_f64(1.1));
    assert!(
        paused >= lo && paused <= hi,
        "priority 3 paused for {paused:?} of wall clock, expected {pause_wall:?} ± 10 %"
    );
    let other = arrivals("0", p0 + 0.002, first_after - 0.002).len();
    assert!(other >= 50, "priority 0 should keep flowing while 3 is paused: {other} frames in {paused:?}");

    // Quanta 0 resumes at once: priority 3 arrives again well before the 33.5 ms pause would end.
    let (p1, z) = (pfcs[1].0, pfcs[2].0);
    assert!(arrivals("24", p1 + 0.002, z).is_empty(), "priority 3 flowed while paused");
    let resumed = arrivals("24", z, z + 1.0).first().copied().expect("priority 3 never resumed after quanta 0");
    let r = Duration::from_secs_f64(resumed - z);
    assert!(r < Duration::from_millis(5) * TIMING_D, "quanta 0 resumed priority 3 only after {r:?} of wall clock");

    // 802.3x PAUSE: every priority stops for the encoded time.
    for dscp in ["24", "0"] {
        let next = arrivals(dscp, pause + 0.002, pause + 1.0)
            .first()
            .copied()
            .unwrap_or_else(|| panic!("DSCP {dscp} never resumed after PAUSE"));
        let gap = Duration::from_secs_f64(next - pause);
        assert!(gap >= lo && gap <= hi, "PAUSE stopped DSCP {dscp} for {gap:?}, expected {pause_wall:?} ± 10 %");
    }
}

/// Test 2b, the PFC enable vector (802.1Qbb; SONiC `pfc_enable`): rail-spine runs PFC on
/// priority 3 only, so a PFC frame for priority 0 is counted and ignored. host2 sends PFC for
/// priority 0 (65535 quanta every 5 ms, 300 ms) while host1's lossy DSCP 0 stream flows to it:
/// queue 0 keeps sending (tcpdump at host2 sees no gap near a pause), rail1 counts every frame as
/// ignored and never shows priority 0 paused. tshark checks the frames on the wire are PFC with
/// only bit 0 set.
#[test]
fn pfc_for_a_priority_without_pfc_is_counted_and_ignored() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfi", "qos:\n  watchdog: off\n");
    assert_eq!(f.config("rail1").qos.lossless_priorities, 1 << 3);
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let p0 = [("port", to_h2.as_str()), ("priority", "0")];
    let q0 = [("port", to_h2.as_str()), ("queue", "0")];
    let pcap = TempFile::new("rf-h-pfc-ignored.pcap");
    let cap =
        start_capture_in(&f.netns("host2"), "gpu0", &pcap, "ether proto 0x8808 or udp dst port 4791", 128, 20_000, 30);
    let mut agent = Agent::start(&f, "host2", "gpu0");
    // DSCP 0 (priority 0, lossy), one 200-byte datagram per 200 µs for ~1.2 s.
    let mut tx = udp_burst(&f, &[0], 6000, 200, 200);
    let start =
        rail1_until(&f, "lossy traffic to host2", |t| metric(t, "rocefab_queue_dequeued_packets_total", &q0) >= 100.0);
    assert_eq!(agent.cmd("storm 65535 5 300 0"), "started");
    let done = agent.0.line(Duration::from_secs(5));
    let sent: f64 = done.strip_prefix("done ").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("agent: {done}"));
    let t = rail1_until(&f, "every PFC frame counted", |t| metric(t, "rocefab_pfc_rx_frames_total", &p0) >= sent);
    assert!(tx.line(Duration::from_secs(20)).starts_with("sent"));
    let end = rail1_until(&f, "the stream drained", |t| metric(t, "rocefab_queue_depth_packets", &q0) == 0.0);
    drop(cap);

    assert_eq!(metric(&t, "rocefab_pfc_rx_frames_total", &p0), sent);
    assert_eq!(
        metric(&t, "rocefab_pfc_rx_ignored_frames_total", &p0),
        sent,
        "every PFC frame for priority 0 is ignored:\n{}",
        interesting(&t)
    );
    assert_eq!(series(&end, "rocefab_pfc_rx_ignored_frames_total", &[("port", &to_h2), ("priority", "3")]), 0.0);
    assert_eq!(
        series(&end, "rocefab_pfc_paused_seconds_total", &p0),
        0.0,
        "priority 0 was paused:\n{}",
        interesting(&end)
    );
    assert_eq!(series(&end, "rocefab_pfc_paused", &p0), 0.0);
    assert_eq!(
        metric(&end, "rocefab_queue_dropped_packets_total", &q0),
        metric(&start, "rocefab_queue_dropped_packets_total", &q0)
    );

    // On host2's wire: the PFC frames are for priority 0 only, and DSCP 0 kept arriving while
    // they did: no gap in the stream of 20 ms (one 65535-quanta pause is 33.5 ms, refreshed every 5 ms).
    let rows = tshark_fields(
        &pcap,
        "macc || udp",
        &["frame.time_epoch", "macc.cbfc.enbv", "macc.cbfc.pause_time.c0", "ip.dsfield.dscp"],
    );
    let ts = |r: &Vec<String>| r[0].parse::<f64>().unwrap();
    let pfcs: Vec<&Vec<String>> = rows.iter().filter(|r| !r[1].is_empty()).collect();
    assert_eq!(pfcs.len() as f64, sent, "PFC frames on host2's wire");
    assert!(pfcs.iter().all(|r| num(&r[1]) == 0x01 && num(&r[2]) == 65535), "{pfcs:?}");
    let (first, last) = (ts(pfcs[0]), ts(pfcs[pfcs.len() - 1]));
    let data: Vec<f64> =
        rows.iter().filter(|r| r[3] == "0").map(ts).filter(|&t| t > first - 0.01 && t < last + 0.04).collect();
    // The sender's 200 µs sleeps come out at ~0.4 ms on this machine: ≥ 1 frame per ms.
    assert!(
        data.len() as f64 >= (last - first) * 1e3,
        "{} DSCP 0 frames arrived around {} pauses over {:.3} s",
        data.len(),
        pfcs.len(),
        last - first
    );
    let gap = data.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    assert!(gap < 0.02, "DSCP 0 stopped for {:.1} ms while host2 sent PFC for priority 0", gap * 1e3);
}

/// Test 4, Watchdog (defaults: drop, 200 ms detect, 10 ms poll, 200 ms restore): a continuous PFC
/// storm from host2 is detected within detect + one poll (±20 %); while stormed, priority-3
/// frames to host2 are dropped and counted and priority 0 is unaffected; the queue is restored
/// no sooner than the restore time after the last pause frame (tcpdump's timestamp on host2's
/// wire) and at most one poll and a scrape later. At time dilation [`TIMING_D`]: every one of
/// those times is D times longer on the wall clock, the daemons' lateness is not.
#[test]
fn watchdog_detects_a_pfc_storm_drops_and_restores() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfw", &format!("time_dilation: {TIMING_D}\n"));
    let d = f64::from(TIMING_D);
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let prio = [("port", to_h2.as_str()), ("priority", "3")];
    let pcap = TempFile::new("rf-h-pfcwd.pcap");
    let cap = start_capture_in(&f.netns("host2"), "gpu0", &pcap, "ether proto 0x8808", 0, 1000, 30);
    let mut agent = Agent::start(&f, "host2", "gpu0");
    let before = f.metrics("rail1");
    assert_eq!(series(&before, "rocefab_pfcwd_storms_total", &prio), 0.0);

    // Pause frames every 5 ms of wall clock (each pauses 335 ms at D 10): continuous, for 4 s.
    assert_eq!(agent.cmd("storm 65535 5 4000"), "started");
    let t0 = Instant::now();
    let stormed = rail1_until(&f, "storm detection", |t| metric(t, "rocefab_pfcwd_storms_total", &prio) >= 1.0);
    let detected = t0.elapsed();
    let nominal = Duration::from_millis(210) * TIMING_D;
    assert!(
        detected >= nominal.mul_f64(0.8) && detected <= nominal.mul_f64(1.2),
        "storm detected after {detected:?} of wall clock, expected (200 ms + one 10 ms poll) x D {TIMING_D} ± 20 %"
    );
    assert!(metric(&stormed, "rocefab_pfc_rx_frames_total", &prio) >= 30.0, "the storm is continuous");
    // Paused now: priority 3 towards host2, not priority 0.
    assert_eq!(metric(&stormed, "rocefab_pfc_paused", &prio), 1.0, "{}", interesting(&stormed));
    assert_eq!(series(&stormed, "rocefab_pfc_paused", &[("port", to_h2.as_str()), ("priority", "0")]), 0.0);

    // While stormed: priority 3 is dropped by the watchdog, priority 0 flows.
    let q = |t: &str, name: &str, queue: &str| metric(t, name, &[("port", &to_h2), ("queue", queue)]);
    let mut tx = udp_burst(&f, &[24, 0], 100, 200, 1000);
    assert!(tx.line(Duration::from_secs(10)).starts_with("sent"));
    let during = rail1_until(&f, "watchdog drops", |t| q(t, "rocefab_pfcwd_dropped_packets_total", "3") >= 100.0);
    assert!(
        q(&during, "rocefab_queue_dequeued_packets_total", "0")
            - q(&stormed, "rocefab_queue_dequeued_packets_total", "0")
            >= 100.0
    );
    assert_eq!(
        q(&during, "rocefab_queue_dropped_packets_total", "0"),
        q(&before, "rocefab_queue_dropped_packets_total", "0")
    );
    assert_eq!(series(&during, "rocefab_pfcwd_restores_total", &prio), 0.0, "restored while the storm goes on");

    // Storm over: restored 200 ms after the last pause frame, detected at the next 10 ms poll.
    // The restore happened after the start of the last scrape without it and before the end of
    // the first scrape with it (wall clock, as tcpdump stamps).
    assert!(agent.0.line(Duration::from_secs(10)).starts_with("done"));
    let wall = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let give_up = Instant::now() + Duration::from_secs(10);
    let mut not_yet = None;
    let seen = loop {
        let started = wall();
        let t = f.metrics("rail1");
        if metric(&t, "rocefab_pfcwd_restores_total", &prio) >= 1.0 {
            break wall();
        }
        assert!(Instant::now() < give_up, "no restore within 5 s of the storm's end:\n{}", interesting(&t));
        not_yet = Some(started);
        std::thread::sleep(Duration::from_millis(2));
    };
    drop(cap);
    let pauses: Vec<f64> = tshark_fields(&pcap, "macc.cbfc.pause_time.c3 > 0", &["frame.time_epoch"])
        .iter()
        .map(|r| r[0].parse().unwrap())
        .collect();
    let last_pause = *pauses.last().expect("the storm's PFC frames on host2's wire");
    let lo = seen - last_pause;
    let hi = not_yet.expect("the queue was restored before the storm's end was noticed") - last_pause;
    eprintln!("restore seen {:.1} ms after the last pause frame (not yet {:.1} ms after it)", lo * 1e3, hi * 1e3);
    assert!(
        lo >= 0.200 * d,
        "restored before the restore time (200 ms x D) had passed since the last pause: seen {:.1} ms after it",
        lo * 1e3
    );
    // The restore time and one poll, emulated, on the wall clock; 15 ms for the scrape.
    assert!(
        hi <= (0.200 + 0.010) * d + 0.015,
        "not restored {:.1} ms after the last pause ((200 ms + one 10 ms poll) x D + 15 ms)",
        hi * 1e3
    );
    // Restored means forwarding again, and the last pause (33.5 ms) has long expired.
    let base = f.metrics("rail1");
    assert_eq!(series(&base, "rocefab_pfc_paused", &prio), 0.0, "{}", interesting(&base));
    let mut tx = udp_burst(&f, &[24], 50, 200, 1000);
    assert!(tx.line(Duration::from_secs(10)).starts_with("sent"));
    rail1_until(&f, "priority 3 forwarded after restore", |t| {
        q(t, "rocefab_queue_dequeued_packets_total", "3") - q(&base, "rocefab_queue_dequeued_packets_total", "3")
            >= 50.0
    });
}

/// Issue 38: ordinary pauses with idle time between them are no storm. A lossless stream runs
/// from host1 to host2 (6000 datagrams, 200 µs apart) while host2 sends one full PFC pause for
/// priority 3 (65535 quanta: 33.5 ms at 1 Gbit/s), then, 400 ms later with nothing of rail1
/// paused in between, one of 10000 quanta (5.1 ms). No pause comes near the 200 ms detection
/// time, so the shipped watchdog (drop, detect 200 ms, poll 10 ms) must not fire, and every
/// lossless datagram must reach host2. Before the fix the data-plane thread, which polls the
/// watchdog only while something is paused, left the first pause's start in the watchdog, and
/// the second pause was declared a 437 ms storm: about 1000 lossless datagrams dropped.
#[test]
fn ordinary_pauses_apart_in_time_are_no_storm_and_lose_nothing() {
    tools();
    let f = Fabric::up("rail-spine.yaml", "rfq");
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let prio = [("port", to_h2.as_str()), ("priority", "3")];
    let q3 = [("port", to_h2.as_str()), ("queue", "3")];
    let mut agent = Agent::start(&f, "host2", "gpu0");
    let before = f.metrics("rail1");
    let dequeued = |t: &str| series(t, "rocefab_queue_dequeued_packets_total", &q3);
    let mut tx = udp_burst(&f, &[24], 6000, 200, 200);
    rail1_until(&f, "traffic to host2", |t| dequeued(t) - dequeued(&before) >= 100.0);
    assert_eq!(agent.cmd("pfc 65535"), "sent");
    rail1_until(&f, "the first pause received", |t| series(t, "rocefab_pfc_rx_frames_total", &prio) >= 1.0);
    rail1_until(&f, "the first pause over", |t| series(t, "rocefab_pfc_paused", &prio) == 0.0);
    // The scenario's idle gap: 400 ms with nothing paused (time passing is what is tested).
    std::thread::sleep(Duration::from_millis(400));
    let idle = f.metrics("rail1");
    assert_eq!(series(&idle, "rocefab_pfc_rx_frames_total", &prio), 1.0, "{}", interesting(&idle));
    assert_eq!(agent.cmd("pfc 10000"), "sent");
    rail1_until(&f, "the second pause received", |t| series(t, "rocefab_pfc_rx_frames_total", &prio) >= 2.0);
    assert!(tx.line(Duration::from_secs(30)).starts_with("sent"));
    let sent = 6000.0;
    let after = rail1_until(&f, "every lossless datagram forwarded to host2", |t| {
        dequeued(t) - dequeued(&before) >= sent
            || series(t, "rocefab_pfcwd_dropped_packets_total", &q3) > 0.0
            || series(t, "rocefab_pfcwd_storms_total", &prio) > 0.0
    });
    assert_eq!(series(&after, "rocefab_pfcwd_storms_total", &prio), 0.0, "{}", interesting(&after));
    assert_eq!(series(&after, "rocefab_pfcwd_dropped_packets_total", &q3), 0.0, "{}", interesting(&after));
    assert_eq!(
        series(&after, "rocefab_queue_dropped_packets_total", &q3),
        series(&before, "rocefab_queue_dropped_packets_total", &q3)
    );
    // The two pauses, and only their own length: 65535 + 10000 quanta of 512 ns.
    let paused = series(&after, "rocefab_pfc_paused_seconds_total", &prio);
    assert!((paused - (0.033_553_920 + 0.005_120)).abs() < 1e-6, "priority 3 paused for {paused} s in all");
    assert_eq!(dequeued(&after) - dequeued(&before), sent);
}

/// Test 5, Malformed and oversized MAC-control frames on a live port are counted and dropped; the
/// switch keeps running and still honours a good PFC frame afterwards.
#[test]
fn malformed_mac_control_frames_are_counted_and_never_crash_the_switch() {
    tools();
    let f = Fabric::up("rail-spine.yaml", "rfm");
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let mut agent = Agent::start(&f, "host2", "gpu0");
    let mac = String::from_utf8(f.exec("host2", &["cat", "/sys/class/net/gpu0/address"]).stdout)
        .unwrap()
        .trim()
        .replace(':', "");
    let head = format!("0180c2000001{mac}8808");
    let frames = [
        format!("{head}0101"),                          // PFC cut after the opcode
        format!("{head}0101ff"),                        // PFC cut inside the class-enable vector
        format!("{head}0bad{}", "00".repeat(44)),       // unknown opcode, minimum size
        format!("{head}0101ffff{}", "ff".repeat(1482)), // PFC-looking, 1500 bytes (oversized)
        format!("{head}0001ffff{}", "00".repeat(100)),  // PAUSE, 118 bytes (oversized)
        head.clone(),                                   // no opcode at all
    ];
    let before = f.metrics("rail1");
    for fr in &frames {
        assert_eq!(agent.cmd(&format!("raw {fr}")), "sent");
    }
    let bad = |t: &str| metric(t, "rocefab_port_rx_mac_control_malformed_total", &[("port", &to_h2)]);
    let t = rail1_until(&f, "malformed frames counted", |t| bad(t) - bad(&before) >= frames.len() as f64);
    assert_eq!(bad(&t) - bad(&before), frames.len() as f64);
    assert_eq!(series(&t, "rocefab_pfc_rx_frames_total", &[("port", &to_h2)]), 0.0, "a malformed frame acted as PFC");
    assert_eq!(series(&t, "rocefab_pfc_paused_seconds_total", &[("port", &to_h2)]), 0.0);
    // Still alive and still honouring PFC.
    assert_eq!(agent.cmd("pfc 100"), "sent");
    rail1_until(&f, "a good PFC after the bad ones", |t| {
        metric(t, "rocefab_pfc_rx_frames_total", &[("port", &to_h2), ("priority", "3")]) == 1.0
    });
    let daemons = f.daemons();
    assert!(daemons.len() == 8 && daemons.iter().all(|d| d.1), "a switch or NIC agent died: {daemons:?}");
}

/// `topologies/rail-spine-incast.yaml` (rail-spine with host1:gpu0's link at 100 Mbit/s, the
/// incast bottleneck seven senders at ~0.1 Gbit/s each fill, and small PFC thresholds), with
/// `edit` applied to its text.
fn incast_fabric(name: &str, edit: impl Fn(String) -> String) -> Fabric {
    Fabric::up_edited("rail-spine-incast.yaml", name, edit)
}

/// The incast on `f` (see [`rocefab_tests::fabric::run_incast`]) with the report parsed.
fn run_incast(f: &Fabric) -> (serde_json::Value, f64) {
    let (out, max_pg) = rocefab_tests::fabric::run_incast(f, 3);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("rocefab run --json: {e}: {out}"));
    (r, max_pg)
}

fn sum_over_switches(f: &Fabric, name: &str, labels: &[(&str, &str)]) -> f64 {
    f.metric_sum(&["rail1", "rail2", "spine1", "spine2"], name, labels)
}

/// [`sum_over_switches`], panicking when a switch exports no such series (for sums asserted 0).
fn series_over_switches(f: &Fabric, name: &str, labels: &[(&str, &str)]) -> f64 {
    f.series_sum(&["rail1", "rail2", "spine1", "spine2"], name, labels)
}

/// Test 3, Cascade (book Fig. 11-4 to 11-6) on `rail-spine-incast.yaml`: a 7:1 lossless incast into
/// host1:gpu0. The bottleneck
/// queue reaches xOFF; PFC goes hop by hop from the bottleneck rail to the spines, from the
/// spines to the sending rail and from there to the sender NICs; the job completes with no
/// lossless drop and no retransmission. With PFC off the same job drops and retransmits.
#[test]
fn incast_pfc_cascades_hop_by_hop_and_loses_nothing_while_pfc_off_drops() {
    let f = incast_fabric("rfc", |t| t);
    let (r, max_pg) = run_incast(&f);
    assert_eq!(r["ok"], true, "{r}");
    assert!(
        max_pg >= 64_000.0,
        "the fabric never congested: rail1's largest priority-3 ingress group held {max_pg} bytes (xOFF 64 kB)"
    );
    let pfc = |sw: &str, dir: &str, peer: &str| {
        metric(
            &f.metrics(sw),
            &format!("rocefab_pfc_{dir}_frames_total"),
            &[("port", &f.port_to(sw, peer)), ("priority", "3")],
        )
    };
    // Hops 1 and 2: rail1 pauses the spines; each spine pauses rail2.
    for spine in ["spine1", "spine2"] {
        let rail1_to_spine =
            f.config("rail1").ports.iter().find(|p| p.peer.starts_with(&format!("{spine}:"))).unwrap().name.clone();
        let spine_to_rail1 = f.config(spine).ports.iter().find(|p| p.peer.starts_with("rail1:")).unwrap().name.clone();
        let spine_to_rail2 = f.config(spine).ports.iter().find(|p| p.peer.starts_with("rail2:")).unwrap().name.clone();
        let rail2_to_spine =
            f.config("rail2").ports.iter().find(|p| p.peer.starts_with(&format!("{spine}:"))).unwrap().name.clone();
        let m = |sw: &str, name: &str, port: &str| metric(&f.metrics(sw), name, &[("port", port), ("priority", "3")]);
        assert!(m("rail1", "rocefab_pfc_tx_frames_total", &rail1_to_spine) >= 1.0, "rail1 sent no PFC to {spine}");
        assert!(m(spine, "rocefab_pfc_rx_frames_total", &spine_to_rail1) >= 1.0, "{spine} received no PFC from rail1");
        assert!(m(spine, "rocefab_pfc_tx_frames_total", &spine_to_rail2) >= 1.0, "{spine} sent no PFC to rail2");
        assert!(
            m("rail2", "rocefab_pfc_rx_frames_total", &rail2_to_spine) >= 1.0,
            "rail2 received no PFC from {spine}"
        );
    }
    // Last hop: rail2 pauses the cross-rail senders (every host's gpu1), which honour it.
    for h in 1..=4 {
        assert!(pfc("rail2", "tx", &format!("host{h}:gpu1")) >= 1.0, "rail2 sent no PFC to host{h}:gpu1");
    }
    let paused = rocefab_tests::fabric::nic_sum(&r, "gpu1", "pfc_paused_ns");
    assert!(paused > 0, "the sender NICs were never paused: {}", r["nics"]);
    assert_eq!(series_over_switches(&f, "rocefab_headroom_overflow_total", &[]), 0.0);
    assert_eq!(series_over_switches(&f, "rocefab_queue_dropped_packets_total", &[("queue", "3")]), 0.0);
    let resent: Vec<_> = r["qps"].as_array().unwrap().iter().filter(|q| q["retransmitted_packets"] != 0).collect();
    assert!(resent.is_empty(), "retransmissions without a drop: {resent:?}");
    drop(f);

    // PFC off, lossy queues of 64 kB: the same job drops and retransmits (and still completes).
    let f = incast_fabric("rfc", |t| {
        assert!(t.contains("  pfc: [3]"), "rail-spine-incast.yaml changed");
        t.replacen("  pfc: [3]", "  pfc: []\n  queue_limit: 64KB", 1)
    });
    let (r, _) = run_incast(&f);
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["retransmitted_packets"].as_u64().unwrap() > 0, "{r}");
    assert!(sum_over_switches(&f, "rocefab_queue_admission_dropped_packets_total", &[("queue", "3")]) > 0.0);
    assert_eq!(series_over_switches(&f, "rocefab_pfc_tx_frames_total", &[]), 0.0);
}

/// Issue 23, "count what simulators count", on the 7:1 incast of `rail-spine-incast.yaml` (D 1):
/// first that the bottleneck congested (rail1's ingress groups past xOFF, its queue towards
/// host1:gpu0 built up); then, from `rocefab run --json`, that every ingress priority that sent
/// PFC counted pause onsets (xOFF crossings) apart from PFC frames (refreshes and XONs too):
/// onsets ≤ frames, some onsets; and that the bottleneck queue's time-weighted average lies
/// between 0 and its peak, the peak at least every depth the test sampled, and the exact average
/// of the switch's depth-time integral (`rocefab_queue_depth_cell_byte_seconds_total`) over the
/// polling window agrees with the depths sampled every few ms over that window.
#[test]
fn incast_counts_pause_onsets_apart_from_pfc_frames_and_the_average_queue_beside_its_peak() {
    let f = incast_fabric("rfo", |t| t);
    let port = f.port_to("rail1", "host1:gpu0");
    let q = [("port", port.as_str()), ("queue", "3")];
    let mut job = Proc::drained(
        "rocefab run incast",
        Command::new(rocefab_tests::fabric::rocefab_bin())
            .args(["run", &f.name, "incast", "--size", "4MiB", "--json", "--retransmit-timeout-ms", "2000"])
            .args(["--timeout", "60"])
            .stdout(Stdio::piped()),
    );
    // (wall time, depth, depth-time integral) of rail1's queue 3 towards host1:gpu0.
    let mut polls: Vec<(Instant, f64, f64)> = Vec::new();
    let mut max_pg: f64 = 0.0;
    let end = Instant::now() + Duration::from_secs(70);
    while job.child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() <= end, "rocefab run did not finish");
        let t = f.metrics("rail1");
        let at = Instant::now();
        for l in t.lines().filter(|l| l.starts_with("rocefab_ingress_pg_bytes{") && l.contains("priority=\"3\"")) {
            max_pg = max_pg.max(l.rsplit_once(' ').and_then(|(_, v)| v.parse().ok()).unwrap_or(0.0));
        }
        polls.push((
            at,
            metric(&t, "rocefab_queue_depth_cell_bytes", &q),
            metric(&t, "rocefab_queue_depth_cell_byte_seconds_total", &q),
        ));
        std::thread::sleep(Duration::from_millis(3));
    }
    let out = String::from_utf8_lossy(&job.output().stdout).into_owned();
    let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r["ok"], true, "{r}");
    // Congestion happened.
    assert!(
        max_pg >= 64_000.0,
        "never congested: rail1's largest priority-3 ingress group held {max_pg} B (xOFF 64 kB)"
    );
    let sampled_peak = polls.iter().map(|p| p.1).fold(0.0, f64::max);
    assert!(sampled_peak > 0.0, "rail1's queue towards host1:gpu0 never held a byte in {} polls", polls.len());

    // Pause onsets apart from PFC frames, per ingress port priority.
    let pfc = r["pfc"].as_array().expect("pfc in the report");
    assert!(!pfc.is_empty(), "no switch sent PFC: {r}");
    for e in pfc {
        let (onsets, frames) = (e["pause_onsets"].as_u64().unwrap(), e["pfc_frames"].as_u64().unwrap());
        assert!(onsets <= frames, "more onsets than PFC frames: {e}");
    }
    let rail1_onsets: u64 =
        pfc.iter().filter(|e| e["switch"] == "rail1").map(|e| e["pause_onsets"].as_u64().unwrap()).sum();
    let rail1_frames: u64 =
        pfc.iter().filter(|e| e["switch"] == "rail1").map(|e| e["pfc_frames"].as_u64().unwrap()).sum();
    assert!(rail1_onsets > 0, "rail1 crossed xOFF but counted no pause onset: {pfc:?}");
    // Every onset is an XOFF, and every pause the job started ended with an XON once the groups
    // drained: more PFC frames than onsets.
    assert!(rail1_frames > rail1_onsets, "rail1: {rail1_frames} PFC frames for {rail1_onsets} onsets: no XON?");
    let m = f.metrics("rail1");
    let onset_metric = metric(&m, "rocefab_pfc_pause_onsets_total", &[("priority", "3")]);
    assert!(onset_metric >= rail1_onsets as f64, "/metrics {onset_metric} < the job's {rail1_onsets}");

    // The average queue beside its peak.
    let queues = r["queues"].as_array().expect("queues in the report");
    let b = queues
        .iter()
        .find(|e| e["switch"] == "rail1" && e["port"] == port.as_str() && e["tc"] == 3)
        .unwrap_or_else(|| panic!("no rail1:{port} queue 3 in {queues:?}"));
    let (avg, peak) = (b["average_depth_bytes"].as_f64().unwrap(), b["peak_depth_bytes"].as_f64().unwrap());
    assert_eq!(b["peak_known"], true, "{b}");
    assert!(avg > 0.0 && avg < peak, "average {avg} B not within (0, peak {peak} B)");
    assert!(peak >= sampled_peak, "peak {peak} B below a sampled depth {sampled_peak} B");
    // Over the polling window: the integral's average against the sampled depths' (each depth
    // held until the next poll). Polls are a few ms apart, the queue changes every frame time
    // (~0.1 ms at 100 Mbit/s): a sampled mean over hundreds of polls is close, not exact.
    let (first, last) = (polls.first().unwrap(), polls.last().unwrap());
    let window = last.0.duration_since(first.0).as_secs_f64();
    let exact = (last.2 - first.2) / window;
    let sampled: f64 =
        polls.windows(2).map(|w| w[0].1 * w[1].0.duration_since(w[0].0).as_secs_f64()).sum::<f64>() / window;
    eprintln!(
        "rail1:{port} queue 3: job average {avg:.0} B, peak {peak:.0} B; polling window {window:.2} s ({} polls): integral {exact:.0} B, sampled {sampled:.0} B; rail1 {rail1_onsets} onsets, {rail1_frames} PFC frames",
        polls.len()
    );
    assert!(polls.len() >= 50, "only {} polls", polls.len());
    assert!(exact > 0.0 && exact <= peak, "window average {exact} B");
    assert!((exact - sampled).abs() <= 0.25 * exact, "integral {exact:.0} B vs sampled {sampled:.0} B");

    // Issue 38: a second, smaller incast on the same fabric reports its own peak. The daemon's
    // watermark counts from `up`, so before each job got its own peak window this job's queue
    // read 0 with `peak_known: false` unless it beat the first job's peak. Seven senders of
    // 64 KiB cannot queue more than their 448 frames (573 kB in cells), below the first job's
    // peak.
    let mut job = Proc::drained(
        "rocefab run incast (second job)",
        Command::new(rocefab_tests::fabric::rocefab_bin())
            .args(["run", &f.name, "incast", "--size", "64KiB", "--json", "--retransmit-timeout-ms", "2000"])
            .args(["--timeout", "60"])
            .stdout(Stdio::piped()),
    );
    let mut sampled2: f64 = 0.0;
    let end = Instant::now() + Duration::from_secs(70);
    while job.child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() <= end, "the second rocefab run did not finish");
        sampled2 = sampled2.max(metric(&f.metrics("rail1"), "rocefab_queue_depth_cell_bytes", &q));
        std::thread::sleep(Duration::from_millis(3));
    }
    let out = String::from_utf8_lossy(&job.output().stdout).into_owned();
    let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r["ok"], true, "{r}");
    assert!(sampled2 > 0.0, "the second job never queued at rail1:{port}");
    let queues = r["queues"].as_array().expect("queues in the report");
    let b = queues
        .iter()
        .find(|e| e["switch"] == "rail1" && e["port"] == port.as_str() && e["tc"] == 3)
        .unwrap_or_else(|| panic!("no rail1:{port} queue 3 in the second report: {queues:?}"));
    let peak2 = b["peak_depth_bytes"].as_f64().unwrap();
    let watermark = series(&f.metrics("rail1"), "rocefab_queue_depth_peak_cell_bytes", &q);
    eprintln!(
        "second job: peak {peak2:.0} B (sampled {sampled2:.0} B; first job {peak:.0} B; since up {watermark:.0} B)"
    );
    assert_eq!(b["peak_known"], true, "{b}");
    assert!(peak2 >= sampled2, "second job's peak {peak2} B below a depth sampled during it ({sampled2} B)");
    // In the buffer's unit: 7 x 64 packets of 1024 payload bytes, each a 1086-byte frame that
    // takes 5 cells of 256 bytes.
    let sent_cells = 7.0 * 64.0 * 1280.0;
    assert!(peak2 <= sent_cells, "second job's peak {peak2} B above the {sent_cells} B its seven senders' frames take");
    assert!(peak2 < watermark, "second job's peak {peak2} B is the daemon's watermark {watermark} B");
}
