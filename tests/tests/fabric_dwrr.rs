//! Privileged: egress scheduling on a live rail-spine fabric (issue 9, "DWRR"; book ch. 11, the
//! NX-OS "bandwidth remaining percent"; IEEE 802.1Q-2018 8.6.8.1 and 8.6.8.3).
//!
//! `topologies/rail-spine.yaml` with `qos: { ets: { 0: 70, 3: 30 }, pfc: [] }` (lossy, so no PFC
//! interferes), host2:gpu0's link at 100 Mbit/s and time dilation 16. Two kernel UDP senders on
//! rail1 saturate rail1's port to host2:gpu0 at once: host1:gpu0 with DSCP 0 (queue 0) in
//! 1442-byte frames and host3:gpu0 with DSCP 24 (queue 3) in 256-byte frames, each above its
//! share, so both queues stay at their limit and drop at admission. Over a window in that steady
//! state the bytes the two queues dequeue split 70/30 within what DWRR's quanta allow (a
//! scheduler that counts packets rather than bytes would give queue 0 over 90 % of the bytes)
//! and the port runs at its line rate. host4:gpu0 sends DSCP 48 (queue 7, strict) at the same
//! time: it gets what it offered, every one of its packets goes through while the other two
//! drop, and none waits longer than strict priority allows
//! (`rocefab_queue_sojourn_max_seconds`).
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_tests::fabric::{metric, rocefab_bin, series, Fabric};
use rocefab_tests::proc::Proc;

/// The bottleneck: rail1's port to host2:gpu0 (emulated).
const BOTTLENECK_BPS: f64 = 100e6;
/// Time dilation: the bottleneck moves 6.25 Mbit/s of wall clock. At D 1 and D 4 (and before
/// queue 3's small frames, at D 1), runs on a loaded 2-core machine (load average 6) saw the
/// port at 56-66 % of its line rate with both queues backlogged: rail1's data-plane thread,
/// short of CPU, stalled (305 stalls, 68 ms of wall clock the longest at D 4) for longer than
/// the shaper's burst lets its schedule catch up (3 MTU frames: 1.5 ms of wall clock at D 4,
/// 5.9 ms at D 16), and the senders and rail1 need a quarter of the CPU they needed at D 4.
const DILATION: f64 = 16.0;
/// Frame sizes (Ethernet, without FCS) of the two weighted flows: queue 0 1442 bytes, queue 3
/// 256 bytes (one buffer cell). DWRR gives them 70/30 of the bytes; a scheduler that counted
/// packets would give 70/30 of the packets, 1442 × 70 / (1442 × 70 + 256 × 30) = 93 % of the
/// bytes to queue 0.
const Q0_FRAME: u16 = 1442;
const Q3_FRAME: u16 = 256;
/// Ethernet, IPv4 and UDP headers: a frame of N bytes carries N − 42 of UDP payload.
const HEADERS: u16 = 42;
/// Preamble and SFD 8, inter-frame gap 12, FCS 4 (IEEE 802.3 clause 4): what a frame takes on
/// the wire beyond the bytes the queues count, and the shaper charges.
const WIRE_OVERHEAD: f64 = 24.0;
/// Wall-clock packets/s. Queue 0 offered 1200 × 1442 B = 13.8 Mbit/s, 3.2× its 4.4 Mbit/s
/// wall share; queue 3 2800 × 256 B = 5.7 Mbit/s, 3.1× its 1.9: both fill their 1 MiB within a
/// second or so and stay backlogged.
const Q0_PPS: u64 = 1_200;
const Q3_PPS: u64 = 2_800;
/// Queue 7 (strict): 64 packets/s of 242-byte frames (124 kbit/s: 2 % of the port).
const Q7_PPS: u64 = 64;
const Q7_FRAME: u16 = 242;
/// Largest frame the port sends: an MTU frame (rail-spine.yaml's mtu 1500).
const MAX_FRAME: f64 = 1514.0;
/// How long every sender runs at most; the measurement window sits inside it.
const SEND_SECS: u64 = 8;
const WINDOW: Duration = Duration::from_secs(3);

/// rail-spine.yaml with host2:gpu0 behind a 100 Mbit/s link, the 70/30 shares, PFC off, D 16.
fn dwrr_fabric(name: &str) -> Fabric {
    Fabric::up_edited("rail-spine.yaml", name, |text| {
        assert!(
            text.contains("  rail_spine: full-mesh\n")
                && !text.contains("overrides:")
                && !text.contains("\nqos:")
                && !text.contains("time_dilation"),
            "rail-spine.yaml changed shape"
        );
        text.replace(
            "  rail_spine: full-mesh\n",
            "  rail_spine: full-mesh\n  overrides:\n    - { between: [host2:gpu0, rail1], line_rate: 100Mbps }\n",
        ) + &format!("qos: {{ ets: {{ 0: 70, 3: 30 }}, pfc: [] }}\ntime_dilation: {DILATION}\n")
    })
}

/// A bounded `rocefab send` from `from` to host2:gpu0 (`count` packets at `pps`, at most
/// SEND_SECS).
fn sender(f: &Fabric, from: &str, dscp: u8, frame: u16, pps: u64) -> Proc {
    let count = (pps * SEND_SECS).to_string();
    let (dscp, size, pps) = (dscp.to_string(), (frame - HEADERS).to_string(), pps.to_string());
    Proc::spawn(
        &format!("rocefab send from {from}"),
        Command::new(rocefab_bin())
            .args(["send", &f.name, "--from", from, "--to", "host2:gpu0", "--dscp", &dscp, "--size", &size])
            .args([
                "--rate-pps",
                &pps,
                "--count",
                &count,
                "--max-seconds",
                &SEND_SECS.to_string(),
                "--sport-range",
                "49152:49167",
            ])
            .stdout(Stdio::piped()),
    )
}

/// What a finished sender reports (`sent N packets (E send errors) ...`): (N, E).
fn sent(p: &mut Proc) -> (u64, u64) {
    let line = p.line(Duration::from_secs(SEND_SECS + 10));
    assert_eq!(p.wait(Duration::from_secs(5)), 0, "{}: {line}", p.what);
    let w: Vec<&str> = line.split_whitespace().collect();
    match (
        w.first(),
        w.get(1).and_then(|n| n.parse().ok()),
        w.get(3).and_then(|e| e.trim_start_matches('(').parse().ok()),
    ) {
        (Some(&"sent"), Some(n), Some(e)) => (n, e),
        _ => panic!("{}: {line}", p.what),
    }
}

/// One scrape of the bottleneck port's queues 0, 3, 7.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    /// How long the scrape took (the counters of different queues are read within it).
    took: Duration,
    dequeued_bytes: [f64; 3],
    dequeued_packets: [f64; 3],
    depth_bytes: [f64; 3],
    admission_drops: [f64; 3],
}

const QUEUES: [&str; 3] = ["0", "3", "7"];

fn sample(f: &Fabric, port: &str) -> Sample {
    let asked = Instant::now();
    let t = f.metrics("rail1");
    let at = Instant::now();
    let m = |name: &str, q: &str| series(&t, name, &[("port", port), ("queue", q)]);
    Sample {
        at,
        took: at - asked,
        dequeued_bytes: QUEUES.map(|q| m("rocefab_queue_dequeued_bytes_total", q)),
        dequeued_packets: QUEUES.map(|q| m("rocefab_queue_dequeued_packets_total", q)),
        depth_bytes: QUEUES.map(|q| m("rocefab_queue_depth_bytes", q)),
        admission_drops: QUEUES.map(|q| m("rocefab_queue_admission_dropped_packets_total", q)),
    }
}

#[test]
fn two_lossy_classes_share_a_saturated_port_70_30_and_strict_cnps_go_first() {
    let f = dwrr_fabric("rfd");
    let c = f.config("rail1");
    assert_eq!(c.qos.ets_percent, [70, 0, 0, 30, 0, 0, 0, 0]);
    assert_eq!((c.qos.strict_priorities, c.qos.lossless_priorities), (1 << 7, 0));
    assert_eq!(c.time_dilation, DILATION);
    let port = f.port_to("rail1", "host2:gpu0");
    let cfg_port = c.ports.iter().find(|p| p.name == port).unwrap();
    assert_eq!(cfg_port.line_rate_bps as f64, BOTTLENECK_BPS);
    let limit = c.queue_limit_bytes as f64;

    let mut q0 = sender(&f, "host1:gpu0", 0, Q0_FRAME, Q0_PPS);
    let mut q3 = sender(&f, "host3:gpu0", 24, Q3_FRAME, Q3_PPS);
    let mut q7 = sender(&f, "host4:gpu0", 48, Q7_FRAME, Q7_PPS);
    let started = Instant::now();

    // Both weighted queues backlogged: near their limit and dropping at admission.
    let backlogged = |s: &Sample| (0..2).all(|i| s.depth_bytes[i] > limit / 2.0 && s.admission_drops[i] > 0.0);
    let a = loop {
        let s = sample(&f, &port);
        if backlogged(&s) {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "queues 0 and 3 never both backlogged on rail1:{port}: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The window; both weighted queues stay backlogged all through it (every scrape), so DWRR
    // gives each its turns.
    let b = loop {
        let s = sample(&f, &port);
        assert!(
            (0..2).all(|i| s.depth_bytes[i] > 0.0),
            "a weighted queue ran empty in the window (a sender fell behind): {s:?}"
        );
        if s.at - a.at >= WINDOW {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let window_end = started.elapsed();
    assert!(
        window_end < Duration::from_secs(SEND_SECS - 1),
        "the window ended {window_end:?} after the senders started: too late to be steady state"
    );
    for p in [&mut q0, &mut q3, &mut q7] {
        assert!(p.child.try_wait().expect("try_wait").is_none(), "{} stopped before the window ended", p.what);
    }
    // Still backlogged at the end, and both dropped inside the window.
    assert!(backlogged(&b), "a queue drained during the window: {b:?}");
    for (i, q) in QUEUES[..2].iter().enumerate() {
        assert!(b.admission_drops[i] > a.admission_drops[i], "queue {q} dropped nothing in the window: {a:?} {b:?}");
    }

    // The shaper was the bottleneck: the port ran near its line rate, in wire bytes as the
    // shaper counts them (100.0 Mbit/s in three runs; the thread's late wake-ups cost nothing
    // while the shaper's burst covers them). Emulated time: the window's wall seconds / D. (In
    // frame bytes, before queue 3's small frames, the bound was 0.85: 0.86 in wire bytes.)
    let wall = (b.at - a.at).as_secs_f64();
    let secs = wall / DILATION;
    let d: Vec<f64> = (0..3).map(|i| b.dequeued_bytes[i] - a.dequeued_bytes[i]).collect();
    let n: Vec<f64> = (0..3).map(|i| b.dequeued_packets[i] - a.dequeued_packets[i]).collect();
    let bps = (0..3).map(|i| d[i] + WIRE_OVERHEAD * n[i]).sum::<f64>() * 8.0 / secs;
    eprintln!(
        "rail1:{port}: {:.1} Mbit/s over {secs:.3} s emulated; queue 0 {:.0} B in {:.0} frames, queue 3 {:.0} B in {:.0}, queue 7 {:.0} B in {:.0} (share of the weighted bytes {:.4} / {:.4})",
        bps / 1e6,
        d[0],
        n[0],
        d[1],
        n[1],
        d[2],
        n[2],
        d[0] / (d[0] + d[1]),
        d[1] / (d[0] + d[1])
    );
    assert!(
        (0.90 * BOTTLENECK_BPS..=1.02 * BOTTLENECK_BPS).contains(&bps),
        "rail1:{port} sent {:.1} Mbit/s on the wire in the window ({d:?} bytes, {n:?} frames in {secs:.3} s)",
        bps / 1e6
    );

    // The byte shares of the two weighted queues. DWRR (sched.rs) gives queue 3, the smaller
    // share, a quantum of one 9216-byte jumbo frame per turn and queue 0 70/30 of that
    // (21504); a turn sends its quantum give or take the deficit carried (less than a frame),
    // so over the window each queue's bytes are its quantum times the turns it had (which
    // differ by at most one between the two), off by at most its quantum and a frame at each
    // end of the window. The scrapes read the two queues' counters one after the other: the
    // port may move what it sends in one scrape's time between them.
    let quantum = [21504.0, 9216.0];
    let max_weighted_frame = f64::from(Q0_FRAME);
    let scrape_bytes = BOTTLENECK_BPS / 8.0 / DILATION * (a.took + b.took).as_secs_f64();
    let slack = quantum[0] + quantum[1] + 2.0 * max_weighted_frame + scrape_bytes;
    let weighted = d[0] + d[1];
    let share0 = d[0] / weighted;
    // Queue 0's bytes against 70 % of both queues' (0.3 × d0 − 0.7 × d3).
    let off = d[0] - 0.70 * weighted;
    assert!(
        off.abs() <= slack,
        "queue 0 got {share0:.4} of the weighted bytes, queue 3 {:.4}: want 0.70/0.30 within {slack:.0} bytes ({:.4}) of {weighted:.0}, off by {off:.0}",
        1.0 - share0,
        slack / weighted
    );

    // Queue 7 (strict) got what host4 offered in the window: Q7_PPS frames/s of wall clock.
    let offered7 = Q7_PPS as f64 * f64::from(Q7_FRAME) * wall;
    assert!(
        (d[2] - offered7).abs() <= 0.1 * offered7,
        "queue 7 sent {:.0} bytes in the window, host4 offered {offered7:.0} (± 10 %)",
        d[2]
    );

    let ((n0, _), (n3, _), (n7, e7)) = (sent(&mut q0), sent(&mut q3), sent(&mut q7));
    assert_eq!(e7, 0, "host4's DSCP 48 sender had send errors");
    let settled = f.wait_metrics("rail1", |t| {
        let q = |name: &str| metric(t, name, &[("port", &port), ("queue", "7")]);
        q("rocefab_queue_enqueued_packets_total") >= n7 as f64 && q("rocefab_queue_depth_packets") == 0.0
    });
    let q7m = |name: &str| series(&settled, name, &[("port", &port), ("queue", "7")]);
    assert_eq!(q7m("rocefab_queue_enqueued_packets_total"), n7 as f64, "queue 7 did not get every packet host4 sent");
    assert_eq!(q7m("rocefab_queue_dequeued_packets_total"), n7 as f64, "queue 7 did not send every packet it got");
    assert_eq!(q7m("rocefab_queue_dropped_packets_total"), 0.0);
    // The strict queue's longest wait over the whole run (the daemon's watermark, from a
    // frame's enqueue to its departure in the port's shaper schedule, emulated). Strict
    // priority: a frame of queue 7 waits at most for the frame on the wire when it arrived (at
    // most an MTU frame), one frame the switch originates (LLDP; those go ahead of the
    // scheduler) and the queue-7 frames ahead of it (fewer than the queue's peak depth: host4's
    // paced sender bursts after it was descheduled), each at the port's line rate. rail1's
    // forwarding latency and the cable's come after the departure (the port's delay line, 0
    // here) and are not in it; neither is the data-plane thread's wake-up lateness (a late pass
    // sends in the schedule's past). A scheduler that let a weighted queue's turn go first
    // would add that turn (at least 9216 bytes), one that left queue 7 to the weighted queues'
    // idle time would hold it for the whole run.
    assert_eq!(cfg_port.tx_delay_ns, 0, "rail1's port to host2:gpu0 has a delay line");
    let peak_frames = (q7m("rocefab_queue_depth_peak_bytes") / f64::from(Q7_FRAME)).round();
    let frame_s = |bytes: f64| (bytes + WIRE_OVERHEAD) * 8.0 / BOTTLENECK_BPS;
    let bound = 2.0 * frame_s(MAX_FRAME) + (peak_frames - 1.0).max(0.0) * frame_s(f64::from(Q7_FRAME));
    let sojourn = q7m("rocefab_queue_sojourn_max_seconds");
    let sojourn0 = series(&settled, "rocefab_queue_sojourn_max_seconds", &[("port", &port), ("queue", "0")]);
    eprintln!(
        "queue 7: peak depth {peak_frames} frames, longest wait {:.1} µs (bound {:.1} µs); queue 0's {:.1} ms",
        sojourn * 1e6,
        bound * 1e6,
        sojourn0 * 1e3
    );
    assert!(
        sojourn > 0.0 && sojourn <= bound,
        "a queue-7 frame waited {:.1} µs (emulated) on rail1:{port}: strict priority allows {:.1} µs with a peak of {peak_frames} frames",
        sojourn * 1e6,
        bound * 1e6
    );
    // ... while the bulk classes lost a good part of theirs.
    let drops =
        |q: &str| metric(&settled, "rocefab_queue_admission_dropped_packets_total", &[("port", &port), ("queue", q)]);
    assert!(
        drops("0") > 0.1 * n0 as f64 && drops("3") > 0.1 * n3 as f64,
        "drops: queue 0 {} of {n0}, queue 3 {} of {n3}",
        drops("0"),
        drops("3")
    );
}
