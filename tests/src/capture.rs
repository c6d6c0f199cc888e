//! Captures of what crosses a link: tcpdump in a namespace (bounded in packets and time),
//! `rocefab capture` of switch ports, and a check for RoCEv2 frames in a capture being written.
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::host::Netns;
use crate::proc::Proc;

/// A bounded tcpdump capture on `dev` in `ns` (stops after `count` packets or `secs`), keeping
/// `snaplen` bytes per frame (0 = whole frames).
pub fn start_capture(
    ns: &Netns,
    dev: &str,
    pcap: &std::path::Path,
    filter: &str,
    snaplen: u32,
    count: u32,
    secs: u32,
) -> Proc {
    start_capture_in(&ns.0, dev, pcap, filter, snaplen, count, secs)
}

/// [`start_capture`] in a namespace this test does not own (a fabric's).
pub fn start_capture_in(
    ns: &str,
    dev: &str,
    pcap: &std::path::Path,
    filter: &str,
    snaplen: u32,
    count: u32,
    secs: u32,
) -> Proc {
    let _ = std::fs::remove_file(pcap);
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        ns,
        "timeout",
        &secs.to_string(),
        "tcpdump",
        "--immediate-mode",
        "-i",
        dev,
        "-s",
        &snaplen.to_string(),
        "-U",
        "-c",
        &count.to_string(),
        "-w",
    ])
    .arg(pcap);
    if !filter.is_empty() {
        cmd.arg(filter);
    }
    listening_tcpdump(&mut cmd)
}

/// A tcpdump of whole frames with nanosecond stamps on `dev` in namespace `ns`, bounded by
/// `timeout 60`, for timing comparisons; returns once it listens.
pub fn start_nano_capture_in(ns: &str, dev: &str, pcap: &str, filter: &str) -> Proc {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, "timeout", "60", "tcpdump", "--immediate-mode", "-i", dev, "-U"]).args([
        "--time-stamp-precision=nano",
        "-w",
        pcap,
        filter,
    ]);
    listening_tcpdump(&mut cmd)
}

/// Spawns the tcpdump `cmd` and returns once it says it listens (within 10 s).
fn listening_tcpdump(cmd: &mut Command) -> Proc {
    let mut p = Proc::spawn("tcpdump", cmd.stdout(Stdio::null()).stderr(Stdio::piped()));
    // tcpdump prints "listening on ..." to stderr once the socket is open.
    let err = p.child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let l = rx.recv_timeout(Duration::from_secs(10)).expect("tcpdump did not start listening");
    assert!(l.contains("listening"), "tcpdump: {l}");
    p
}

/// Starts `rocefab capture <fabric> <ports> -w <out> [extra]`; returns once every daemon
/// mirrors (the CLI writes the pcapng headers only after every stream has started).
pub fn start_rocefab_capture(out: &str, args: &[&str]) -> Proc {
    start_rocefab_capture_for(out, args, "60s")
}

/// [`start_rocefab_capture`] bounded by `--duration <duration>` (it ends by itself).
pub fn start_rocefab_capture_for(out: &str, args: &[&str], duration: &str) -> Proc {
    let mut a = vec!["capture"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-w", out, "--duration", duration]);
    let mut p =
        Proc::spawn("rocefab capture", Command::new(crate::fabric::rocefab_bin()).args(&a).stderr(Stdio::piped()));
    let end = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(out).map_or(0, |m| m.len()) == 0 {
        assert!(p.child.try_wait().unwrap().is_none(), "rocefab capture exited early");
        assert!(Instant::now() < end, "rocefab capture wrote no header in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    p
}

/// Stops a capture with SIGINT (it finishes the file) and returns its stderr summary.
pub fn stop_rocefab_capture(mut p: Proc) -> String {
    p.interrupt();
    let code = p.wait(Duration::from_secs(10));
    let mut err = String::new();
    p.child.stderr.as_mut().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(code, 0, "rocefab capture failed: {err}");
    err
}

/// The frames a `rocefab capture` summary says the daemons' mirror rings lost (the rise of
/// `rocefab_capture_lost_frames_total` over the capture); panics when the summary has no such
/// count or says a daemon's count could not be read (unknown is not 0).
pub fn lost_frames_in(summary: &str) -> u64 {
    const TAIL: &str = " lost by the daemons' mirror rings (rocefab_capture_lost_frames_total)";
    assert!(!summary.contains("lost frames unknown"), "the capture could not read a lost-frame counter: {summary}");
    let at = summary.find(TAIL).unwrap_or_else(|| panic!("no lost-frame count in the summary: {summary}"));
    let n = summary[..at].rsplit(", ").next().unwrap_or("");
    n.parse().unwrap_or_else(|_| panic!("lost-frame count {n:?} is not a number: {summary}"))
}

/// Stops a tcpdump with SIGINT (it writes what it buffered) within `timeout`; its exit code.
pub fn stop_tcpdump(mut p: Proc, timeout: Duration) -> i32 {
    p.interrupt();
    p.wait(timeout)
}

/// Whether the (Ethernet) pcap a running capture is writing already holds a UDP datagram to
/// port 4791, i.e. a RoCEv2 frame. A record still being written is ignored.
pub fn pcap_has_roce_frame(pcap: &std::path::Path) -> bool {
    let Ok(b) = std::fs::read(pcap) else { return false };
    if b.len() < 24 {
        return false;
    }
    let le = match b[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => panic!("{}: not a pcap file (magic {:02x?})", pcap.display(), &b[..4]),
    };
    let u32_at = |o: usize| {
        let w = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }
    };
    let mut off = 24;
    while off + 16 <= b.len() {
        let incl = u32_at(off + 8) as usize;
        let Some(frame) = b.get(off + 16..off + 16 + incl) else { break };
        // Lax: the capture may cut frames at its snap length.
        if let Ok(p) = etherparse::LaxSlicedPacket::from_ethernet(frame) {
            if matches!(p.transport, Some(etherparse::TransportSlice::Udp(u)) if u.destination_port() == 4791) {
                return true;
            }
        }
        off += 16 + incl;
    }
    false
}

/// Waits until `pcap` (being written by a capture) holds a RoCEv2 frame; panics after `timeout`.
pub fn wait_for_roce_frame(pcap: &std::path::Path, timeout: Duration) {
    let end = Instant::now() + timeout;
    while !pcap_has_roce_frame(pcap) {
        assert!(Instant::now() < end, "no RoCEv2 frame captured in {} within {timeout:?}", pcap.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}
