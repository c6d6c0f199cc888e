//! Privileged: `GET /capture` on a GPU host's NIC agent (`rocefab-nicd`) on a live rail-spine
//! fabric, read with a plain HTTP/1.1 client (chunked transfer decoded here).
//!
//! 1. Kernel path (no job running): a ping from host1:gpu0 shows its ICMP echo requests going
//!    out and the replies coming in, with those directions and wall-clock timestamps.
//! 2. AF_XDP path, during an incast into rank 0 (host1:gpu0): the RoCEv2 frames the NIC
//!    emulator takes from its AF_XDP socket (data, in) and sends (ACKs, out) are captured, as
//!    many as hostd's own counters say, with nothing lost.
//! 3. Both paths at once, no duplicates: scapy sends numbered PFC frames from rail1 to host1:gpu0
//!    before, during and after the job; during the job XDP hands them to the NIC emulator
//!    (which counts them), otherwise the kernel gets them. Every one captured is inbound and
//!    appears once, and none is missed at the job's end (at most one, see below).
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::collections::BTreeMap;
use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocefab_plumbing::capture::{Record, DIR_IN, DIR_OUT, HEARTBEAT_PORT};
use rocefab_tests::fabric::{fabric_namespaces, metric, rocefab_bin, run_dir, scrape, Fabric};
use rocefab_tests::http::{dechunk, timed_out, Stream};
use rocefab_tests::proc::{require_tool, Proc};
use serde_json::Value;

const FABRIC: &str = "rfh1";
const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_MAC_CONTROL: u16 = 0x8808;

/// An IPv4 address.
type Ip = [u8; 4];

/// The IPv4 part of a frame: protocol, source, destination, L4 bytes.
struct Ipv4<'a> {
    proto: u8,
    src: Ip,
    dst: Ip,
    l4: &'a [u8],
}

/// One captured frame.
#[derive(Debug, Clone)]
struct Frame {
    ts_ns: u64,
    port: u16,
    dir: u8,
    data: Vec<u8>,
}

impl Frame {
    fn ethertype(&self) -> u16 {
        u16::from_be_bytes([self.data[12], self.data[13]])
    }
    fn ipv4(&self) -> Option<Ipv4<'_>> {
        if self.data.len() < 34 || self.ethertype() != ETH_P_IPV4 {
            return None;
        }
        let ip = &self.data[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        Some(Ipv4 {
            proto: ip[9],
            src: ip[12..16].try_into().ok()?,
            dst: ip[16..20].try_into().ok()?,
            l4: ip.get(ihl..)?,
        })
    }
    /// (source, destination, BTH opcode) of a RoCEv2 frame (UDP destination port 4791).
    fn roce(&self) -> Option<(Ip, Ip, u8)> {
        let ip = self.ipv4()?;
        let l4 = ip.l4;
        (ip.proto == 17 && l4.len() > 8 && u16::from_be_bytes([l4[2], l4[3]]) == 4791).then(|| (ip.src, ip.dst, l4[8]))
    }
    /// (source, destination, ICMP type) of an ICMPv4 frame.
    fn icmp(&self) -> Option<(Ip, Ip, u8)> {
        let ip = self.ipv4()?;
        (ip.proto == 1 && !ip.l4.is_empty()).then(|| (ip.src, ip.dst, ip.l4[0]))
    }
}

/// A `GET /capture` stream read on a thread of its own until [`Capture::stop`].
struct Capture {
    header: Value,
    sock: TcpStream,
    stop: Arc<AtomicBool>,
    frames: Arc<Mutex<Vec<Frame>>>,
    reader: Option<JoinHandle<Result<(), String>>>,
}

impl Capture {
    /// Opens a capture of `ports` on the agent at `addr` (retrying while an earlier capture is
    /// still being released, 409) and waits for its header line.
    fn open(addr: SocketAddr, ports: &str) -> Capture {
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            let path = format!("/capture?ports={ports}");
            let Stream { head, sock, raw } =
                Stream::open(addr, &path, Duration::from_millis(200), end).unwrap_or_else(|e| panic!("{e:#}"));
            if head.starts_with("http/1.1 409") && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            assert!(head.starts_with("http/1.1 200"), "{addr}/capture: {head}");
            assert!(head.contains("transfer-encoding: chunked"), "{addr}/capture is not chunked: {head}");
            return Self::read_stream(sock, raw, end);
        }
    }

    fn read_stream(mut s: TcpStream, mut raw: Vec<u8>, end: Instant) -> Capture {
        let mut body = Vec::new();
        // The header line.
        let header = loop {
            dechunk(&mut raw, &mut body).unwrap();
            if let Some(i) = body.iter().position(|&b| b == b'\n') {
                let h: Value = serde_json::from_slice(&body[..i])
                    .unwrap_or_else(|e| panic!("capture header: {e}: {:?}", String::from_utf8_lossy(&body[..i])));
                body.drain(..=i);
                break h;
            }
            assert!(Instant::now() < end, "no capture header");
            let mut buf = [0u8; 4096];
            match s.read(&mut buf) {
                Ok(0) => panic!("capture stream closed before its header"),
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e) if timed_out(&e) => {}
                Err(e) => panic!("capture stream: {e}"),
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let frames = Arc::new(Mutex::new(Vec::new()));
        let (stop2, frames2) = (stop.clone(), frames.clone());
        let sock = s.try_clone().unwrap();
        let reader = std::thread::spawn(move || -> Result<(), String> {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let ended = dechunk(&mut raw, &mut body)?;
                let mut at = 0;
                while let Some((r, n)) = Record::decode(&body[at..]) {
                    if r.port != HEARTBEAT_PORT {
                        frames2.lock().unwrap().push(Frame {
                            ts_ns: r.ts_ns,
                            port: r.port,
                            dir: r.dir,
                            data: r.data.to_vec(),
                        });
                    }
                    at += n;
                }
                body.drain(..at);
                if ended || stop2.load(Ordering::Relaxed) {
                    return Ok(());
                }
                match s.read(&mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => raw.extend_from_slice(&buf[..n]),
                    Err(e) if timed_out(&e) => {}
                    Err(_) if stop2.load(Ordering::Relaxed) => return Ok(()),
                    Err(e) => return Err(format!("capture stream: {e}")),
                }
            }
        });
        Capture { header, sock, stop, frames, reader: Some(reader) }
    }

    /// Frames captured so far.
    fn count(&self) -> usize {
        self.frames.lock().unwrap().len()
    }

    /// Closes the stream (the agent stops mirroring) and returns every frame.
    fn stop(mut self) -> Vec<Frame> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.sock.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            r.join().expect("capture reader panicked").expect("capture stream");
        }
        std::mem::take(&mut *self.frames.lock().unwrap())
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.sock.shutdown(Shutdown::Both);
    }
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

const IP_H1: Ip = [10, 0, 1, 1];
const IP_H2: Ip = [10, 0, 1, 2];

/// Sends numbered PFC frames (priority 5 only, quanta 0: nothing is paused) out of `iface`
/// every 5 ms until stdin becomes readable, then prints how many it sent.
const PFC_SENDER: &str = r#"
import select, struct, sys
from scapy.all import conf, Raw
iface = sys.argv[1]
src = bytes.fromhex(open('/sys/class/net/%s/address' % iface).read().strip().replace(':', ''))
s = conf.L2socket(iface=iface)
print('ready', flush=True)
n = 0
while not select.select([sys.stdin], [], [], 0.005)[0]:
    f = bytes.fromhex('0180c2000001') + src + struct.pack('!HHH8H', 0x8808, 0x0101, 1 << 5, *([0] * 8))
    f += struct.pack('!4sI', b'RFSQ', n)
    s.send(Raw(f + bytes(60 - len(f))))
    n += 1
print(n, flush=True)
"#;

/// The PFC sender's sequence number in a captured frame.
fn pfc_seq(f: &Frame) -> Option<u32> {
    (f.data.len() >= 42 && f.ethertype() == ETH_P_MAC_CONTROL && &f.data[34..38] == b"RFSQ")
        .then(|| u32::from_be_bytes(f.data[38..42].try_into().unwrap()))
}

#[test]
fn nic_capture_sees_the_kernel_path_and_the_af_xdp_path_once_each() {
    require_tool("/usr/bin/python3", &["-c", "import scapy.all"]);
    let shm = format!("/dev/shm/rocefab-rf-{FABRIC}-host1-nicmirror");
    let f = Fabric::up("rail-spine.yaml", FABRIC);
    assert!(std::path::Path::new(&shm).exists(), "nicd did not create its mirror ring {shm}");
    let agent = f.nicd_addr("host1");

    // 1. Kernel path: ping host2:gpu0 from host1:gpu0.
    let cap = Capture::open(agent, "gpu0");
    assert_eq!(cap.header["node"], "host1", "{}", cap.header);
    assert_eq!(cap.header["ports"][0], "gpu0", "{}", cap.header);
    assert_eq!(cap.header["clock"], "wall clock", "{}", cap.header);
    // The header comes once the agent's capture sockets are open: nothing after it is missed.
    // A second capture of the same NIC at once (issue 21: a second one used to get 409).
    let cap2 = Capture::open(agent, "gpu0");
    let t0 = unix_ns();
    let o = f.exec("host1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "-I", "10.0.1.1", "10.0.1.2"]);
    assert!(o.status.success(), "ping: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let t1 = unix_ns();
    let end = Instant::now() + Duration::from_secs(5);
    while (cap.count() < 6 || cap2.count() < 6) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let frames = cap.stop();
    let frames2 = cap2.stop();
    let key = |v: &[Frame]| -> Vec<(u8, u64, Vec<u8>)> {
        v.iter().filter(|f| f.icmp().is_some()).map(|f| (f.dir, f.ts_ns, f.data.clone())).collect()
    };
    assert_eq!(key(&frames2), key(&frames), "both captures got the same ICMP frames");
    let icmp: Vec<(u8, Ip, Ip, u8, u64)> =
        frames.iter().filter_map(|f| f.icmp().map(|(s, d, t)| (f.dir, s, d, t, f.ts_ns))).collect();
    let requests: Vec<_> = icmp.iter().filter(|x| x.3 == 8).collect();
    let replies: Vec<_> = icmp.iter().filter(|x| x.3 == 0).collect();
    assert_eq!(requests.len(), 3, "echo requests: {icmp:?}");
    assert_eq!(replies.len(), 3, "echo replies: {icmp:?}");
    assert!(
        requests.iter().all(|x| x.0 == DIR_OUT && x.1 == IP_H1 && x.2 == IP_H2),
        "requests go out from 10.0.1.1: {requests:?}"
    );
    assert!(
        replies.iter().all(|x| x.0 == DIR_IN && x.1 == IP_H2 && x.2 == IP_H1),
        "replies come in to 10.0.1.1: {replies:?}"
    );
    assert!(
        icmp.iter().all(|x| x.4 >= t0 - 1_000_000_000 && x.4 <= t1 + 1_000_000_000),
        "timestamps outside [{t0}, {t1}]: {icmp:?}"
    );
    assert!(frames.iter().all(|f| f.port == 0), "only gpu0 was asked for");

    // 2 and 3. An incast into host1:gpu0 while scapy sends PFC frames from rail1 to it.
    let mirrored_before = metric(&scrape(agent), "rocefab_capture_mirrored_frames_total", &[("host", "host1")]);
    let cap = Capture::open(agent, "gpu0");
    // And a second one alongside, which must get the same AF_XDP frames.
    let cap2 = Capture::open(agent, "gpu0");
    let rail_port = f.port_to("rail1", "host1:gpu0");
    let mut pfc = Proc::spawn(
        "scapy PFC sender",
        Command::new("ip")
            .args(["netns", "exec", &f.netns("rail1"), "/usr/bin/python3", "-c", PFC_SENDER, &rail_port])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    );
    assert_eq!(pfc.line(Duration::from_secs(30)), "ready");
    std::thread::sleep(Duration::from_millis(200));
    let mut run = Proc::spawn(
        "rocefab run incast",
        Command::new(rocefab_bin())
            // A 2 s retransmit timeout, as fabric_capture.rs: at D 1 with two captures and a
            // scapy loop beside it, a loaded 2-core machine can hold an ACK past the 100 ms
            // default seven times in a row (a fresh-clone CI run lost a QP to it); this test
            // is about what the captures see, not the machine's speed.
            .args([
                "run",
                &f.name,
                "incast",
                "--size",
                "1MiB",
                "--json",
                "--timeout",
                "60",
                "--retransmit-timeout-ms",
                "2000",
            ])
            .stdout(Stdio::piped()),
    );
    let code = run.wait(Duration::from_secs(120));
    let mut out = String::new();
    run.child.stdout.as_mut().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(code, 0, "rocefab run incast failed: {out}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("rocefab run --json: {e}: {out}"));
    assert_eq!(r["ok"], true, "{r}");
    std::thread::sleep(Duration::from_millis(200));
    drop(pfc.child.stdin.take());
    let sent: u32 = pfc.line(Duration::from_secs(10)).trim().parse().expect("frames sent");
    assert_eq!(pfc.wait(Duration::from_secs(10)), 0);
    std::thread::sleep(Duration::from_millis(300));
    let frames = cap.stop();
    let frames2 = cap2.stop();

    // What hostd counted on host1:gpu0 (the full report next to its job file).
    let path = run_dir(&f.name).join("jobs/incast/host1.report.json");
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .unwrap();
    let nic = rep["nics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "gpu0")
        .unwrap_or_else(|| panic!("no gpu0 in {rep}"));
    let n = |k: &str| nic[k].as_u64().unwrap_or_else(|| panic!("{k} in {nic}"));
    let (tx, rx, pfc_rx) = (n("tx_frames"), n("rx_frames"), n("pfc_frames_received"));

    eprintln!(
        "captured {} frames; RoCEv2 in/out {}/{} (hostd took {} sent {tx}); PFC captured {} of {sent}, {pfc_rx} by the NIC emulator",
        frames.len(),
        frames.iter().filter(|f| f.roce().is_some() && f.dir == DIR_IN).count(),
        frames.iter().filter(|f| f.roce().is_some() && f.dir == DIR_OUT).count(),
        rx - pfc_rx,
        frames.iter().filter(|f| pfc_seq(f).is_some()).count(),
    );
    let roce_key = |v: &[Frame]| -> Vec<(u8, u64, usize)> {
        v.iter().filter(|f| f.roce().is_some()).map(|f| (f.dir, f.ts_ns, f.data.len())).collect()
    };
    assert!(
        roce_key(&frames2) == roce_key(&frames),
        "the second capture got {} RoCEv2 frames, the first {}",
        roce_key(&frames2).len(),
        roce_key(&frames).len()
    );
    // RoCEv2: data in to 10.0.1.1, ACKs out from it, as many as the NIC emulator handled.
    let roce: Vec<(u8, Ip, Ip, u8)> =
        frames.iter().filter_map(|f| f.roce().map(|(s, d, op)| (f.dir, s, d, op))).collect();
    let roce_in: Vec<_> = roce.iter().filter(|x| x.0 == DIR_IN).collect();
    let roce_out: Vec<_> = roce.iter().filter(|x| x.0 == DIR_OUT).collect();
    assert_eq!(roce_in.len() + roce_out.len(), roce.len(), "directions are in or out");
    assert!(roce_in.iter().all(|x| x.2 == IP_H1), "inbound RoCEv2 goes to 10.0.1.1");
    assert!(roce_out.iter().all(|x| x.1 == IP_H1), "outbound RoCEv2 comes from 10.0.1.1");
    // RDMA WRITE First/Middle/Last/Only (0x06..=0x0b) in, Acknowledge (0x11) out.
    assert!(
        roce_in.iter().filter(|x| (0x06..=0x0b).contains(&x.3)).count() >= 7 * 1024,
        "7 senders × 1 MiB of writes: {} inbound",
        roce_in.len()
    );
    assert!(roce_out.iter().any(|x| x.3 == 0x11), "no ACK out");
    // Each AF_XDP frame has its own stamp (issue 21): received ones the time the host XDP
    // program saw them, sent ones the pass that sent them, and consecutive frames in one
    // direction at least their serialisation time apart at the NIC's line rate (1 Gbit/s at
    // D = 1: a bit is a ns; 24 bytes of preamble, FCS and gap, 60 bytes at least). With
    // per-batch stamps a batch shared one stamp.
    for dir in [DIR_IN, DIR_OUT] {
        let ts: Vec<(u64, u64)> = frames
            .iter()
            .filter(|f| f.dir == dir && f.roce().is_some())
            .map(|f| (f.ts_ns, f.data.len() as u64))
            .collect();
        for w in ts.windows(2) {
            let need = (w[0].1.max(60) + 24) * 8;
            assert!(
                w[1].0 >= w[0].0 + need,
                "direction {dir}: RoCEv2 frames {} ns apart, the first ({} bytes) takes {need} ns at 1 Gbit/s",
                w[1].0 as i64 - w[0].0 as i64,
                w[0].1
            );
        }
    }
    // Every frame hostd counts is copied to the ring once, and nothing was lost.
    let m = scrape(agent);
    let lost = metric(&m, "rocefab_capture_lost_frames_total", &[("host", "host1")]);
    let ring = format!(
        "(agent: {lost} lost, {} mirrored for this capture)",
        metric(&m, "rocefab_capture_mirrored_frames_total", &[("host", "host1")]) - mirrored_before
    );
    assert_eq!(roce_out.len() as u64, tx, "captured {} RoCEv2 frames out, hostd sent {tx} {ring}", roce_out.len());
    assert_eq!(
        roce_in.len() as u64,
        rx - pfc_rx,
        "captured {} RoCEv2 frames in, hostd took {} ({rx} frames, {pfc_rx} PFC) {ring}",
        roce_in.len(),
        rx - pfc_rx
    );

    // PFC from rail1: inbound only, each once, some of them taken by the NIC emulator.
    let pfc_frames: Vec<&Frame> = frames.iter().filter(|f| f.ethertype() == ETH_P_MAC_CONTROL).collect();
    assert!(pfc_frames.iter().all(|f| f.dir == DIR_IN), "PFC frames from rail1 are inbound");
    let mut seen = BTreeMap::new();
    for f in &pfc_frames {
        let seq = pfc_seq(f).unwrap_or_else(|| panic!("not the sender's frame: {:02x?}", f.data));
        *seen.entry(seq).or_insert(0) += 1;
    }
    let dups: Vec<_> = seen.iter().filter(|(_, &c)| c > 1).collect();
    assert!(dups.is_empty(), "PFC frames captured twice (seq, times): {dups:?}");
    assert!(pfc_rx > 0, "no PFC frame reached the NIC emulator during the job (sent {sent})");
    assert!(seen.len() as u64 >= pfc_rx, "captured {} PFC frames, the NIC emulator alone took {pfc_rx}", seen.len());
    // hostd registers its socket before it attaches XDP, so no frame is dropped at job start
    // (`redirect_failed` 0). At the end it keeps reading the socket while it lingers with its
    // QPs up, detaches XDP when `rocefab run` stops it (later frames reach the kernel path) and
    // then takes what its RX ring still holds: every frame is captured by one path or the other.
    // One frame is allowed for an XDP run already in flight on the other CPU while the program
    // is detached (it may redirect after the drain); three runs here missed none.
    let xdp = |k: &str| nic["xdp"][k].as_u64().unwrap_or_else(|| panic!("xdp.{k} in {nic}"));
    assert_eq!(xdp("redirect_failed"), 0, "{nic}");
    let missing: Vec<u32> = (0..sent).filter(|s| !seen.contains_key(s)).collect();
    eprintln!("PFC frames missing (sent while no one could see them): {missing:?}; host XDP counters {}", nic["xdp"]);
    assert!(missing.len() <= 1, "PFC frames captured by neither path: {missing:?} of {sent}");

    // Metrics: what the capture got, nothing lost.
    let mirrored = metric(&m, "rocefab_capture_mirrored_frames_total", &[("host", "host1")]) - mirrored_before;
    // The client got what the agent mirrored for this capture, but for a frame or two that was
    // on its way when the client closed (the traffic had stopped 300 ms before).
    let got = frames.len() as f64;
    assert!(
        mirrored >= got && mirrored <= got + 4.0,
        "the second capture mirrored {mirrored} frames, the client got {got}"
    );
    assert_eq!(metric(&m, "rocefab_capture_lost_frames_total", &[("host", "host1")]), 0.0, "{m}");

    drop(f);
    // `ip netns list` holds none of this fabric's namespaces (other tests may own others).
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("rf-{FABRIC}-")))
        .map(String::from)
        .collect();
    assert!(left.is_empty() && fabric_namespaces(FABRIC).is_empty(), "namespaces left: {left:?}");
    assert!(!std::path::Path::new(&shm).exists(), "{shm} left after rocefab down");
}
