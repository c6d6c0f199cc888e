//! Packet trimming on a rail-spine fabric (issue 42, "The switch"; OCP SAI PR #2077): rail1's
//! lossy queue 0 towards host2 is overrun, and what its admission rejects is cut to 128 bytes,
//! remarked and sent through strict queue 6 (`qos.trim`), or, with trimming off, dropped.
//!
//! host2 holds rail1's egress towards it with 802.3x PAUSE frames (scapy), so nothing leaves
//! while host1 sends N numbered 1514-byte UDP datagrams (DSCP 0, ECT(0)): queue 0 admits the
//! first `queue_limit / 1536` (whole 256-byte cells) and rejects the rest. host2 then releases
//! the pause and tcpdump records what arrives. scapy reads the capture: every frame's length,
//! DSCP, ECN, IP length and header checksum, UDP length and checksum, and the sequence number
//! the payload starts with. Needs root, tcpdump, python3-scapy.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_tests::capture::{start_capture_in, stop_tcpdump};
use rocefab_tests::fabric::{metric, series, Fabric};
use rocefab_tests::proc::{require_tool, Proc};
use rocefab_tests::scapy::Agent;
use rocefab_tests::scratch::TempFile;

const SRC: &str = "10.0.1.1";
const DST: &str = "10.0.1.2";
/// Datagrams sent into the held queue.
const N: u32 = 200;
/// UDP payload of 1472 bytes: 1514-byte frames, charged 6 cells of 256 bytes.
const PAYLOAD: u32 = 1472;
const FRAME: usize = 1514;
const CHARGE: u64 = 1536;
/// The trim settings under test: queue 0 trims to 128 bytes, DSCP 46, strict queue 6 (which
/// the DSCP map also names, so the next hop queues trimmed packets there too).
const SIZE: usize = 128;
const TRIM_DSCP: u8 = 46;
const QOS: &str = "qos:\n  watchdog: off\n  queue_limit: 64KiB\n  classes: { 24: 3, 46: 6, 48: 7 }\n";
/// Gap between datagrams, µs: the frames reach the switch spaced, not as one burst into its
/// receive ring.
const GAP_US: u32 = 100;

/// Numbered datagrams host1 → host2:4791, DSCP 0 with ECT(0), `gap` µs apart (busy wait).
const SENDER: &str = r#"
import socket, struct, sys, time
src, dst, n, size, gap = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) / 1e6
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0 << 2 | 2)
s.bind((src, 0))
pad = b"t" * (size - 4)
t = time.monotonic()
for i in range(n):
    s.sendto(struct.pack("!I", i) + pad, (dst, 4791))
    t += gap
    while time.monotonic() < t:
        pass
print("sent", n, flush=True)
"#;

/// One line per datagram of the capture, in arrival order: seq frame_len dscp ecn ip_len
/// ip_checksum_ok udp_len udp_checksum.
const READER: &str = r#"
import struct, sys
from scapy.all import rdpcap, IP, UDP, raw
for p in rdpcap(sys.argv[1]):
    if IP not in p or UDP not in p or p[UDP].dport != 4791:
        continue
    ip = p[IP]
    q = IP(raw(ip)[: ip.ihl * 4])
    del q.chksum
    ok = IP(raw(q)).chksum == ip.chksum
    seq = struct.unpack("!I", raw(p[UDP].payload)[:4])[0]
    print(seq, len(p), ip.tos >> 2, ip.tos & 3, ip.len, int(ok), p[UDP].len, p[UDP].chksum)
"#;

struct Arrival {
    seq: u32,
    len: usize,
    dscp: u8,
    ecn: u8,
    ip_len: usize,
    checksum_ok: bool,
    udp_len: usize,
    udp_checksum: u16,
}

/// Records in the (classic) pcap at `path` so far; a record still being written is not counted.
fn pcap_records(path: &std::path::Path) -> usize {
    let Ok(b) = std::fs::read(path) else { return 0 };
    let (mut at, mut n) = (24, 0);
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]) as usize;
        if at + 16 + incl > b.len() {
            break;
        }
        at += 16 + incl;
        n += 1;
    }
    n
}

/// What one overrun did: the frames host2 received, and rail1's metrics after.
struct Overrun {
    arrivals: Vec<Arrival>,
    metrics: String,
    /// Frames queue 0 admits (its limit in 1536-byte charges).
    admitted: u32,
    to_h2: String,
}

/// Brings up rail-spine with `qos`, holds rail1's egress to host2, sends N datagrams into it,
/// releases it and reads what host2 received; `expect` is how many frames will arrive.
fn overrun(name: &str, qos: &str, expect: impl Fn(u32) -> u32) -> Overrun {
    require_tool("/usr/bin/python3", &["-c", "import scapy.contrib.mac_control"]);
    require_tool("tcpdump", &["--version"]);
    let f = Fabric::up_with("rail-spine.yaml", name, qos);
    let cfg = f.config("rail1");
    let admitted = (cfg.queue_limit_bytes / CHARGE) as u32;
    assert!(admitted > 0 && admitted < N / 2, "queue 0 admits {admitted} of {N}: not an overrun");
    let to_h2 = f.port_to("rail1", "host2:gpu0");
    let q = |tc: &'static str| [("port", to_h2.as_str()), ("queue", tc)];
    let before = f.metrics("rail1");
    let (enq0, adm0) = (
        metric(&before, "rocefab_queue_enqueued_packets_total", &q("0")),
        metric(&before, "rocefab_queue_admission_dropped_packets_total", &q("0")),
    );
    let deq0 = metric(&before, "rocefab_queue_dequeued_packets_total", &q("0"));

    let want = expect(admitted);
    let pcap = TempFile::new(&format!("rf-h-{name}.pcap"));
    let filter = format!("udp dst port 4791 and src host {SRC}");
    let cap = start_capture_in(&f.netns("host2"), "gpu0", &pcap, &filter, 0, want, 60);
    let mut agent = Agent::start(&f, "host2", "gpu0");
    // 802.3x PAUSE of 65535 quanta (33.5 ms at 1 Gbit/s) every 5 ms for 2 s: every queue of
    // rail1's port to host2 holds what it admits.
    assert_eq!(agent.cmd("pausestorm 65535 5 2000"), "started");
    let mut tx = Proc::spawn(
        "trim sender",
        Command::new("ip")
            .args(["netns", "exec", &f.netns("host1"), "/usr/bin/python3", "-c", SENDER, SRC, DST])
            .args([N.to_string(), PAYLOAD.to_string(), GAP_US.to_string()])
            .stdout(Stdio::piped()),
    );
    assert_eq!(tx.line(Duration::from_secs(30)), format!("sent {N}"));
    // Every datagram met queue 0's admission: admitted, or rejected (and maybe trimmed).
    let held = f.wait_metrics("rail1", |t| {
        metric(t, "rocefab_queue_enqueued_packets_total", &q("0")) - enq0
            + metric(t, "rocefab_queue_admission_dropped_packets_total", &q("0"))
            - adm0
            >= f64::from(N)
    });
    assert_eq!(
        metric(&held, "rocefab_queue_enqueued_packets_total", &q("0")) - enq0,
        f64::from(admitted),
        "queue 0 admits its limit in whole cells"
    );
    assert_eq!(
        metric(&held, "rocefab_queue_admission_dropped_packets_total", &q("0")) - adm0,
        f64::from(N - admitted),
        "the rest fail admission"
    );
    assert_eq!(metric(&held, "rocefab_queue_dequeued_packets_total", &q("0")), deq0, "the port was paused throughout");
    assert!(agent.0.line(Duration::from_secs(10)).starts_with("done"));
    assert_eq!(agent.cmd("pause 0"), "sent");
    // The capture holds what the switch sends once the port drains.
    let end = Instant::now() + Duration::from_secs(10);
    while pcap_records(pcap.path()) < want as usize && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let metrics = f.settled("rail1", &["rocefab_queue_dequeued_packets_total"]);
    stop_tcpdump(cap, Duration::from_secs(10));
    for tc in ["0", "6"] {
        assert_eq!(metric(&metrics, "rocefab_queue_depth_packets", &q(tc)), 0.0, "queue {tc} drained");
    }

    let out = Command::new("/usr/bin/python3").args(["-c", READER]).arg(pcap.path()).output().expect("scapy reader");
    assert!(out.status.success(), "scapy: {}", String::from_utf8_lossy(&out.stderr));
    let arrivals = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            Arrival {
                seq: v[0] as u32,
                len: v[1] as usize,
                dscp: v[2] as u8,
                ecn: v[3] as u8,
                ip_len: v[4] as usize,
                checksum_ok: v[5] == 1,
                udp_len: v[6] as usize,
                udp_checksum: v[7] as u16,
            }
        })
        .collect();
    Overrun { arrivals, metrics, admitted, to_h2 }
}

#[test]
fn an_overrun_lossy_queue_sends_its_rejects_trimmed_through_the_strict_trim_queue() {
    let qos = format!("{QOS}  trim: {{ queues: [0], size: {SIZE}, dscp: {TRIM_DSCP}, queue: 6 }}\n");
    let o = overrun("rfxt", &qos, |_| N);
    let trimmed = N - o.admitted;
    let (cut, whole): (Vec<&Arrival>, Vec<&Arrival>) = o.arrivals.iter().partition(|a| a.len < FRAME);
    assert_eq!(
        (cut.len(), whole.len()),
        (trimmed as usize, o.admitted as usize),
        "every datagram arrived, cut or whole"
    );
    for a in &cut {
        assert_eq!(a.len, SIZE, "seq {}: a trimmed frame is the trim size, Ethernet header included", a.seq);
        assert_eq!((a.dscp, a.ecn), (TRIM_DSCP, 2), "seq {}: remarked, ECN kept", a.seq);
        assert!(a.checksum_ok, "seq {}: IPv4 header checksum", a.seq);
        assert_eq!((a.ip_len, a.udp_len, a.udp_checksum), (SIZE - 14, SIZE - 34, 0), "seq {}: lengths", a.seq);
    }
    for a in &whole {
        assert_eq!((a.len, a.dscp, a.ecn, a.udp_len), (FRAME, 0, 2, PAYLOAD as usize + 8), "seq {}", a.seq);
        assert!(a.checksum_ok);
    }
    // Queue 0 admitted the first datagrams and trimmed the rest, in order.
    let seqs = |v: &[&Arrival]| v.iter().map(|a| a.seq).collect::<Vec<_>>();
    assert_eq!(seqs(&whole), (0..o.admitted).collect::<Vec<_>>());
    assert_eq!(seqs(&cut), (o.admitted..N).collect::<Vec<_>>());
    // The trim queue is strict: on release it left first.
    assert!(o.arrivals[..trimmed as usize].iter().all(|a| a.len == SIZE), "trimmed frames leave before queue 0's");
    // Counted per port and queue, equal to what arrived cut.
    let q = |tc: &'static str| [("port", o.to_h2.as_str()), ("queue", tc)];
    assert_eq!(metric(&o.metrics, "rocefab_queue_trimmed_packets_total", &q("0")), f64::from(trimmed));
    assert_eq!(metric(&o.metrics, "rocefab_queue_trim_dropped_packets_total", &q("0")), 0.0);
    assert_eq!(
        metric(&o.metrics, "rocefab_queue_trimmed_bytes_total", &q("0")),
        f64::from(trimmed) * (FRAME - SIZE) as f64,
        "bytes cut off"
    );
    assert_eq!(metric(&o.metrics, "rocefab_queue_dequeued_packets_total", &q("6")), f64::from(trimmed));
    assert_eq!(metric(&o.metrics, "rocefab_queue_dequeued_bytes_total", &q("6")), f64::from(trimmed) * SIZE as f64);
}

#[test]
fn with_trimming_off_the_same_overrun_drops() {
    let o = overrun("rfxd", QOS, |admitted| admitted);
    assert_eq!(o.arrivals.len(), o.admitted as usize);
    assert!(o.arrivals.iter().all(|a| a.len == FRAME && a.dscp == 0 && a.checksum_ok));
    assert_eq!(o.arrivals.iter().map(|a| a.seq).collect::<Vec<_>>(), (0..o.admitted).collect::<Vec<_>>());
    let q0 = [("port", o.to_h2.as_str()), ("queue", "0")];
    assert_eq!(series(&o.metrics, "rocefab_queue_trimmed_packets_total", &q0), 0.0);
    assert_eq!(series(&o.metrics, "rocefab_queue_dropped_packets_total", &q0), f64::from(N - o.admitted));
}
