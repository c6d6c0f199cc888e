//! Privileged: capture timestamps are per frame (issue 21), checked against tcpdump on the peer
//! veth, and several captures of one switch daemon run at once.
//!
//! A two-host fabric on one rail switch at time dilation D = 10 (1 Gbit/s emulated, 100 Mbit/s
//! on the wall clock). host1 pings host2 with 1000-byte payloads: 32 requests back to back
//! (`ping -l 32`, faster than the line rate, so the kernel delivers them to the switch in
//! batches), then one every 2 ms (slower than the line rate). `rocefab capture` records the
//! switch's port to host1 (requests inbound, replies outbound, the replies of the burst leave
//! shaped at the line rate) while tcpdump records host1's end of the veth (`gpu0`, nanosecond
//! stamps). tshark reads both files.
//!
//! Checked, per direction:
//! - no two consecutive frames closer than the previous one's serialisation time at the port's
//!   line rate (preamble, FCS and inter-frame gap included), so no two equal stamps;
//! - frame by frame (matched by ICMP type and sequence), rocefab's gaps × D equal tcpdump's
//!   gaps after the same line-rate rule is applied to tcpdump's stamps (a veth delivers
//!   faster than the emulated line: tcpdump sees the kernel's pace, the modelled wire cannot);
//!   within [`GAP_BOUND_NS`] of wall clock for [`GAP_QUANTILE`] of the gaps, and within
//!   [`GAP_MAX_NS`] for every gap.
//!
//! On the old code (stamps per batch: the time the data path took the batch off the RX ring, or
//! the time it kicked the TX batch) the burst's frames share stamps and the first check fails.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`. Needs
//! tcpdump and tshark.
use std::collections::HashMap;
use std::time::Duration;

use rocefab_tests::capture::{
    lost_frames_in, start_nano_capture_in, start_rocefab_capture, stop_rocefab_capture, stop_tcpdump,
};
use rocefab_tests::fabric::{stderr, Fabric};
use rocefab_tests::proc::{require_tool, wait_for_quiet, Proc};
use rocefab_tests::scratch::{file, temp_dir, TempDir};
use rocefab_tests::tshark::{self, epoch_ns};

/// Time dilation of the test fabric.
const D: u64 = 10;
/// host1:gpu0's and host2:gpu0's addresses (rail 1 is 10.0.1.0/24, host h is .h).
const HOST2: &str = "10.0.1.2";
/// Wall-clock line rate of the host-rail links: 1 Gbit/s / D.
const WALL_RATE_BPS: u64 = 1_000_000_000 / D;
/// Bounds on |rocefab gap × D − tcpdump gap| (wall clock ns): (inbound, outbound) for
/// GAP_QUANTILE of the gaps, and for every gap. The two sides read the same clock
/// (CLOCK_MONOTONIC, each converted to Unix time with one offset); what differs is when each
/// looks at a frame.
/// - Inbound (host1 → switch): tcpdump stamps a request when host1's kernel hands it to the
///   veth, rocefab when the switch's XDP program runs on it, a few µs later in the softirq that
///   follows. Measured (19 runs, 2026-11-25, 2 cores shared with other helpers' builds): 90 %
///   within 1.7–11 µs, every gap within 10–54 µs.
/// - Outbound (switch → host1): tcpdump stamps a reply when the switch's `sendto` copies it to
///   host1, rocefab at its departure in the shaper's schedule. They agree while the data-plane
///   thread wakes on time (90 % within 4.8–27 µs); when it wakes late, it sends every frame
///   that is due in one kick, tcpdump sees the late kick and rocefab the schedule (that is the
///   point of stamping from the schedule), so single gaps differ by the lateness (a thread
///   preempted between its clock reading and its kick): up to 0.15–4.6 ms in the same runs,
///   90 % within 1–64 µs. (Stamps later than tcpdump's are the line-rate rule at work: the
///   shaper's burst credit lets a few frames leave back to back on the veth.)
///
/// Medians: 0.3–3.7 µs (both directions). The bounds are about twice the largest measured.
/// `ROCEFAB_TEST_DUMP=1` prints every frame's stamps.
const GAP_MEDIAN_NS: u64 = 10_000;
const GAP_BOUND_NS: [u64; 2] = [20_000, 100_000];
const GAP_QUANTILE: f64 = 0.9;
const GAP_MAX_NS: [u64; 2] = [200_000, 10_000_000];
/// Requests of the burst that must reach the switch faster than the line rate.
const MIN_BURST: usize = 16;

/// Bytes a frame of `len` takes on the wire (the 60-byte minimum, then preamble, FCS, IFG).
fn wire_bytes(len: u64) -> u64 {
    len.max(60) + 24
}

/// Serialisation time (ns, rounded up) of a frame of `len` bytes at `rate`.
fn ser_ns(len: u64, rate: u64) -> u64 {
    (wire_bytes(len) * 8 * 1_000_000_000).div_ceil(rate)
}

/// A two-host, one-GPU fabric on one rail switch at D.
fn fabric(name: &str) -> Fabric {
    let yaml = format!(
        "fabric: {name}\nmtu: 1500\nhosts:\n  count: 2\n  gpus_per_host: 1\n  nic: per-gpu\n\
         switches:\n  rail:\n    - name: rail1\n      rails: [1]\nlinks:\n  line_rate:\n    host_rail: 1Gbps\ntime_dilation: {D}\n"
    );
    Fabric::up_yaml(name, &yaml)
}

/// tcpdump on `node`'s `dev` (ICMP only, nanosecond stamps), bounded by `timeout 60`; returns
/// once it listens.
fn start_tcpdump(f: &Fabric, node: &str, dev: &str, pcap: &str) -> Proc {
    start_nano_capture_in(&f.netns(node), dev, pcap, "icmp")
}

/// One frame as tshark reads it.
#[derive(Debug, Clone)]
struct Frame {
    ts_ns: u64,
    len: u64,
    /// Inbound at the switch port (sent by host1).
    inbound: bool,
    /// ICMP type, identifier and sequence (None: not ICMP).
    icmp: Option<(u8, u16, u16)>,
    caplen: u64,
    iface: String,
}

/// Reads a capture with tshark. `switch_mac`: frames from it are outbound at the switch port
/// (tcpdump's pcap has no direction); a pcapng from rocefab says the direction itself.
fn read(path: &str, switch_mac: Option<&str>) -> Vec<Frame> {
    let fields = [
        "frame.time_epoch",
        "frame.len",
        "frame.p2p_dir",
        "eth.src",
        "icmp.type",
        "icmp.ident",
        "icmp.seq",
        "frame.interface_name",
        "frame.cap_len",
    ];
    tshark::fields(path, "", &fields)
        .into_iter()
        .map(|f| {
            let inbound = match switch_mac {
                Some(m) => !f[3].eq_ignore_ascii_case(m),
                None => f[2] == "1",
            };
            let first = |s: &str| s.split(',').next().unwrap().parse().unwrap_or(0);
            let icmp = (!f[4].is_empty()).then(|| (f[4].parse().unwrap(), first(&f[5]), first(&f[6])));
            Frame {
                ts_ns: epoch_ns(&f[0]),
                len: f[1].parse().unwrap(),
                inbound,
                icmp,
                iface: f[7].clone(),
                caplen: f[8].parse().unwrap(),
            }
        })
        .collect()
}

/// Applies the line-rate rule to stamps in arrival order: max(seen, previous + serialisation).
fn floored(frames: &[&Frame], rate: u64) -> Vec<u64> {
    let mut free = 0u64;
    frames
        .iter()
        .map(|f| {
            let t = f.ts_ns.max(free);
            free = t + ser_ns(f.len, rate);
            t
        })
        .collect()
}

/// Pings host2 from host1: `burst` back to back, then `total - burst` every 2 ms.
fn ping(f: &Fabric, burst: u32, total: u32) {
    let o = f.exec(
        "host1",
        &[
            "ping",
            "-q",
            "-n",
            "-c",
            &total.to_string(),
            "-l",
            &burst.to_string(),
            "-i",
            "0.002",
            "-s",
            "1000",
            "-W",
            "2",
            HOST2,
        ],
    );
    assert!(o.status.success(), "ping: {}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
}

/// ICMP echo requests from host1 to host2 through a raw socket (1000-byte payloads, the
/// frames ping sends): `burst` in a tight loop (about 10 µs apart, eight times the line rate),
/// then `total - burst` every 2 ms. ping's `-l` preload is not dependably back to back on a
/// loaded machine; this is.
fn echo_burst(f: &Fabric, burst: u32, total: u32) {
    let py = format!(
        "import os, socket, struct, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\n\
         ident = os.getpid() & 0xffff\n\
         def pkt(seq):\n\
         \x20   b = struct.pack('!BBHHH', 8, 0, 0, ident, seq) + bytes(1000)\n\
         \x20   c = sum(struct.unpack('!%dH' % (len(b) // 2), b))\n\
         \x20   c = (c & 0xffff) + (c >> 16); c = (c & 0xffff) + (c >> 16)\n\
         \x20   return b[:2] + struct.pack('!H', ~c & 0xffff) + b[4:]\n\
         pkts = [pkt(q) for q in range(1, {total} + 1)]\n\
         for p in pkts[:{burst}]: s.sendto(p, ('{HOST2}', 0))\n\
         for p in pkts[{burst}:]:\n\
         \x20   time.sleep(0.002)\n\
         \x20   s.sendto(p, ('{HOST2}', 0))\n\
         time.sleep(0.3)\n"
    );
    let o = f.exec("host1", &["/usr/bin/python3", "-c", &py]);
    assert!(o.status.success(), "python3 echo sender: {}", stderr(&o));
}

/// One direction's |rocefab gap × D − tcpdump gap| (wall ns): median, GAP_QUANTILE, max.
#[derive(Debug, Clone, Copy)]
struct Agreement {
    median: u64,
    quantile: u64,
    max: u64,
}

/// One measurement: captures, checks the line-rate rule on every frame (always required),
/// and returns how many of tcpdump's inbound stamps the line rate moved (did the sender
/// burst?) and the agreement per direction (inbound, outbound).
fn measure(f: &Fabric, dir: &TempDir, attempt: u32) -> (usize, [Agreement; 2]) {
    let (ours, theirs) = (file(dir, &format!("rail1-{attempt}.pcapng")), file(dir, &format!("host1-{attempt}.pcap")));
    let port = f.port_to("rail1", "host1:gpu0");
    let switch_mac = f.config("rail1").ports.iter().find(|p| p.name == port).unwrap().mac.to_string();
    let td = start_tcpdump(f, "host1", "gpu0", &theirs);
    let cap = start_rocefab_capture(&ours, &[&f.name, &format!("rail1:{port}")]);
    echo_burst(f, 32, 96);
    std::thread::sleep(Duration::from_millis(300));
    let summary = stop_rocefab_capture(cap);
    stop_tcpdump(td, Duration::from_secs(5));
    assert_eq!(lost_frames_in(&summary), 0, "{summary}");

    let ours = read(&ours, None);
    let theirs: Vec<Frame> = read(&theirs, Some(&switch_mac));
    let emulated_rate = WALL_RATE_BPS * D;
    let mut out = [Agreement { median: 0, quantile: 0, max: 0 }; 2];
    let mut burst = 0;
    for inbound in [true, false] {
        let what = if inbound { "inbound (requests)" } else { "outbound (replies)" };
        // Every frame rocefab captured in this direction, in the order the data path saw them.
        let all: Vec<&Frame> = ours.iter().filter(|x| x.inbound == inbound).collect();
        assert!(all.len() >= 96, "{what}: {} frames captured", all.len());
        for w in all.windows(2) {
            let gap = w[1].ts_ns as i64 - w[0].ts_ns as i64;
            let need = ser_ns(w[0].len, emulated_rate) as i64;
            // 1 ns: the emulated clock rounds each stamp (wall / D) to the ns.
            assert!(gap >= need - 1, "{what}: consecutive frames {gap} ns apart, less than the {need} ns the first takes on the wire at {emulated_rate} bit/s: {:?} then {:?}", w[0], w[1]);
        }
        // Frame by frame against tcpdump.
        let key = |x: &Frame| x.icmp.unwrap();
        let mine: Vec<&Frame> = all.iter().copied().filter(|x| x.icmp.is_some()).collect();
        let by_key: HashMap<(u8, u16, u16), &Frame> =
            theirs.iter().filter(|x| x.inbound == inbound && x.icmp.is_some()).map(|x| (key(x), x)).collect();
        let matched: Vec<&Frame> = mine
            .iter()
            .map(|x| *by_key.get(&key(x)).unwrap_or_else(|| panic!("{what}: tcpdump did not see {:?}", x)))
            .collect();
        let oracle = floored(&matched, WALL_RATE_BPS);
        let mut diffs: Vec<u64> = (1..mine.len())
            .map(|i| ((mine[i].ts_ns - mine[i - 1].ts_ns) * D).abs_diff(oracle[i] - oracle[i - 1]))
            .collect();
        diffs.sort_unstable();
        let a = Agreement {
            median: diffs[diffs.len() / 2],
            quantile: diffs[((diffs.len() - 1) as f64 * GAP_QUANTILE) as usize],
            max: *diffs.last().unwrap(),
        };
        let moved = (1..matched.len()).filter(|&i| oracle[i] != matched[i].ts_ns).count();
        if inbound {
            burst = moved;
        }
        println!("attempt {attempt}, {what}: {} frames, {moved} of tcpdump's stamps moved by the line rate; |gap × D − tcpdump gap| (wall ns): median {}, {:.0} % {}, max {}", mine.len(), a.median, GAP_QUANTILE * 100.0, a.quantile, a.max);
        if std::env::var_os("ROCEFAB_TEST_DUMP").is_some() {
            for i in 0..mine.len() {
                // Last: rocefab's stamp × D − tcpdump's (a constant, the emulated clock's zero ×
                // (D − 1), plus when each side looked).
                println!(
                    "{what} {i} {:?} ours {} oracle {} tcpdump {} ours×D−tcpdump {}",
                    mine[i].icmp,
                    (mine[i].ts_ns - mine[0].ts_ns) * D,
                    oracle[i] - oracle[0],
                    matched[i].ts_ns - matched[0].ts_ns,
                    (mine[i].ts_ns * D) as i128 - matched[i].ts_ns as i128
                );
            }
        }
        out[usize::from(!inbound)] = a;
    }
    (burst, out)
}

#[test]
fn capture_stamps_are_per_frame_at_the_line_rate_and_match_tcpdump() {
    require_tool("tcpdump", &["--version"]);
    require_tool("tshark", &["--version"]);
    let f = fabric("rfct");
    let dir = temp_dir("rf-captime-t-");
    // Neighbours resolved first, so the measured runs are ICMP only on both sides.
    ping(&f, 1, 2);
    // The burst must reach the switch faster than the line rate (else the line-rate rule is not
    // exercised). When the machine is busy it does not: the switch's data thread, waiting for
    // each reply's departure, holds the core the sender needs, and the requests arrive one per
    // departure (about 97 us apart, measured with two busy loops running). Right after another
    // fabric test it also happened with no load visible in /proc/stat: in the first attempt of
    // 4 of 6 runs of fabric_capture, fabric_capture_host and this test in a row (2026-11-28),
    // 1 of 7 once each attempt first waits for quiet CPUs. Up to four attempts.
    let mut measured = None;
    let mut seen = Vec::new();
    for attempt in 1..=4 {
        let idle = wait_for_quiet();
        let (burst, a) = measure(&f, &dir, attempt);
        seen.push(format!(
            "attempt {attempt}: CPUs {:.0} % idle before, {burst} requests faster than the line rate",
            idle * 100.0
        ));
        if burst >= MIN_BURST {
            measured = Some(a);
            break;
        }
    }
    let a = measured.unwrap_or_else(|| {
        panic!(
            "in four attempts the sender never delivered {MIN_BURST} requests faster than the line rate: {}",
            seen.join("; ")
        )
    });
    for (d, what) in ["inbound", "outbound"].iter().enumerate() {
        assert!(
            a[d].median <= GAP_MEDIAN_NS,
            "{what}: median gap difference {} ns, bound {GAP_MEDIAN_NS}",
            a[d].median
        );
        assert!(
            a[d].quantile <= GAP_BOUND_NS[d],
            "{what}: {:.0} % of the gaps within {} ns of tcpdump's, bound {}",
            GAP_QUANTILE * 100.0,
            a[d].quantile,
            GAP_BOUND_NS[d]
        );
        assert!(a[d].max <= GAP_MAX_NS[d], "{what}: a gap {} ns off tcpdump's, bound {}", a[d].max, GAP_MAX_NS[d]);
    }
}

#[test]
fn two_captures_of_one_switch_at_once_both_get_every_frame() {
    require_tool("tcpdump", &["--version"]);
    require_tool("tshark", &["--version"]);
    let f = fabric("rfcu");
    let dir = temp_dir("rf-captime-u-");
    let (a, b, t) = (file(&dir, "a.pcapng"), file(&dir, "b.pcapng"), file(&dir, "host1.pcap"));
    let p1 = f.port_to("rail1", "host1:gpu0");
    let p2 = f.port_to("rail1", "host2:gpu0");
    ping(&f, 1, 2);
    let td = start_tcpdump(&f, "host1", "gpu0", &t);
    // A: both ports; B: host1's port only, started while A runs, with a snap length.
    let ca = start_rocefab_capture(&a, &[&f.name, &format!("rail1:{p1},rail1:{p2}")]);
    let cb = start_rocefab_capture(&b, &[&f.name, &format!("rail1:{p1}"), "--snaplen", "64"]);
    ping(&f, 16, 64);
    std::thread::sleep(Duration::from_millis(300));
    let sb = stop_rocefab_capture(cb);
    // A keeps capturing after B left.
    ping(&f, 1, 8);
    std::thread::sleep(Duration::from_millis(300));
    let sa = stop_rocefab_capture(ca);
    stop_tcpdump(td, Duration::from_secs(5));
    assert_eq!((lost_frames_in(&sa), lost_frames_in(&sb)), (0, 0), "{sa} / {sb}");
    type Key = (bool, (u8, u16, u16));
    let icmp = |v: Vec<Frame>, iface: &str| -> Vec<(Key, u64, u64)> {
        v.into_iter()
            .filter(|x| x.icmp.is_some() && (iface.is_empty() || x.iface == iface))
            .map(|x| ((x.inbound, x.icmp.unwrap()), x.len, x.caplen))
            .collect()
    };
    let a1 = icmp(read(&a, None), &format!("rail1:{p1}"));
    let a2 = icmp(read(&a, None), &format!("rail1:{p2}"));
    let bb = icmp(read(&b, None), "");
    let switch_mac = f.config("rail1").ports.iter().find(|p| p.name == p1).unwrap().mac.to_string();
    let tt = icmp(read(&t, Some(&switch_mac)), "");
    let set = |v: &[(Key, u64, u64)]| {
        let mut s: Vec<Key> = v.iter().map(|x| x.0).collect();
        s.sort();
        s
    };
    println!(
        "tcpdump {} ICMP frames; capture A {} on rail1:{p1}, {} on rail1:{p2}; capture B {} ({sb})",
        tt.len(),
        a1.len(),
        a2.len(),
        bb.len()
    );
    // tcpdump saw 2 × (64 + 8) ICMP frames on host1's end; A saw all of them on rail1's port,
    // and as many on the port to host2 (each request and reply crosses both).
    assert_eq!(tt.len(), 2 * (64 + 8), "tcpdump");
    // What one side has and the other has not, for the failure messages.
    let only = |x: &[Key], y: &[Key]| -> Vec<Key> { x.iter().filter(|k| !y.contains(k)).copied().collect() };
    let (sa1, stt) = (set(&a1), set(&tt));
    assert!(
        sa1 == stt,
        "capture A on rail1:{p1} vs tcpdump: only in A {:?}, only in tcpdump {:?}",
        only(&sa1, &stt),
        only(&stt, &sa1)
    );
    assert_eq!(a2.len(), tt.len(), "capture A on rail1:{p2}");
    // B ran during the 64-ping run only: every one of its frames, none missing, none doubled.
    let id = bb.first().map(|x| x.0 .1 .1).expect("capture B is empty");
    let during: Vec<Key> = set(&a1).into_iter().filter(|k| k.1 .1 == id).collect();
    assert_eq!(bb.len(), 2 * 64, "capture B: {sb}");
    let sbb = set(&bb);
    assert!(
        sbb == during,
        "capture B holds exactly the frames A saw of the run it ran for (ICMP id {id}): only in B {:?}, only in A {:?}",
        only(&sbb, &during),
        only(&during, &sbb)
    );
    assert!(
        bb.iter().all(|x| x.1 == 1042 && x.2 == 64),
        "B cut frames to its 64-byte snap length and kept the original length"
    );
    assert!(a1.iter().all(|x| x.2 == 1042), "A (no snap length) has whole frames");
}
