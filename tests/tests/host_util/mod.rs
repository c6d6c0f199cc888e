//! Helpers for the GPU-host emulator tests: namespace / veth / process guards (removed or
//! stopped on drop, also when a test panics), `rocefab-hostd` job files, capture and oracles.
//! Everything created is named with the prefix `rf-h-`.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The built `rocefab-hostd`; panics with a build hint when missing.
pub fn hostd_bin() -> PathBuf {
    let p = rocefab_tests::fabric::bin_dir().join("rocefab-hostd");
    assert!(p.is_file(), "{} not found: run `cargo build -p host-daemons` first", p.display());
    p
}

/// A network namespace, deleted on drop (with everything in it).
pub struct Netns(pub String);

impl Netns {
    pub fn new(name: &str) -> Netns {
        assert!(name.starts_with("rf-h-"));
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        sh("ip", &["netns", "add", name]);
        sh("ip", &["-n", name, "link", "set", "lo", "up"]);
        Netns(name.to_string())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Two host namespaces `rf-h-<tag>a` / `rf-h-<tag>b` joined back to back by one veth pair
/// `ha` (10.<net>.0.1, MAC 02:00:00:<net>:0a:01) / `hb` (10.<net>.0.2, 02:00:00:<net>:0b:01).
pub struct BackToBack {
    pub a: Netns,
    pub b: Netns,
    pub net: u8,
    pub mtu: u32,
}

impl BackToBack {
    pub fn new(tag: &str, net: u8, mtu: u32) -> BackToBack {
        let a = Netns::new(&format!("rf-h-{tag}a"));
        let b = Netns::new(&format!("rf-h-{tag}b"));
        let (ma, mb) = (Self::mac_of(net, 0x0a), Self::mac_of(net, 0x0b));
        let mtu_s = mtu.to_string();
        sh(
            "ip",
            &[
                "link", "add", "ha", "netns", &a.0, "address", &ma, "mtu", &mtu_s, "type", "veth", "peer", "name",
                "hb", "netns", &b.0, "address", &mb, "mtu", &mtu_s,
            ],
        );
        for (ns, dev, host) in [(&a.0, "ha", 1), (&b.0, "hb", 2)] {
            sh("ip", &["-n", ns, "addr", "add", &format!("10.{net}.0.{host}/24"), "dev", dev]);
            sh("ip", &["-n", ns, "link", "set", dev, "up"]);
        }
        BackToBack { a, b, net, mtu }
    }

    pub fn mac_of(net: u8, side: u8) -> String {
        format!("02:00:00:{net:02x}:{side:02x}:01")
    }
    pub fn ip_a(&self) -> String {
        format!("10.{}.0.1", self.net)
    }
    pub fn ip_b(&self) -> String {
        format!("10.{}.0.2", self.net)
    }
    pub fn mac_a(&self) -> String {
        Self::mac_of(self.net, 0x0a)
    }
    pub fn mac_b(&self) -> String {
        Self::mac_of(self.net, 0x0b)
    }

    /// A requester job on `ha` writing `len` bytes of pattern `seed` to B's QP 512.
    pub fn sender_job(&self, name: &str, len: u64, seed: u64, rate: u64, extra_send: Value, timeout_ms: u64) -> Value {
        let mut send =
            serde_json::json!({"psn": 0xfff000, "remote_va": 0x10000, "rkey": 0x77, "len": len, "seed": seed});
        if let (Some(s), Some(e)) = (send.as_object_mut(), extra_send.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        serde_json::json!({
            "name": name, "timeout_ms": timeout_ms,
            "nics": [{"name": "ha", "mac": self.mac_a(), "ip": self.ip_a(), "line_rate_bps": rate}],
            "qps": [{"qpn": 256, "nic": 0, "peer_qpn": 512, "peer_ip": self.ip_b(), "next_hop_mac": self.mac_b(),
                     "label": "a->b", "send": send}]
        })
    }

    /// The matching responder job on `hb` (region of `len` bytes verified against `seed`).
    pub fn receiver_job(&self, name: &str, len: u64, seed: u64, rate: u64, drop_nth: u32, timeout_ms: u64) -> Value {
        serde_json::json!({
            "name": name, "timeout_ms": timeout_ms, "drop_nth": drop_nth,
            "nics": [{"name": "hb", "mac": self.mac_b(), "ip": self.ip_b(), "line_rate_bps": rate}],
            "qps": [{"qpn": 512, "nic": 0, "peer_qpn": 256, "peer_ip": self.ip_a(), "next_hop_mac": self.mac_a(),
                     "label": "b<-a", "recv": {"psn": 0xfff000, "va": 0x10000, "rkey": 0x77, "len": len, "expect_seed": seed}}]
        })
    }
}

/// A child process, killed (SIGTERM, then SIGKILL) and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub what: String,
    lines: Option<mpsc::Receiver<String>>,
}

impl Proc {
    pub fn spawn(what: &str, cmd: &mut Command) -> Proc {
        let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {what}: {e}"));
        Proc { child, what: what.to_string(), lines: None }
    }

    fn lines(&mut self) -> &mpsc::Receiver<String> {
        if self.lines.is_none() {
            let out: ChildStdout = self.child.stdout.take().expect("stdout piped");
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
            self.lines = Some(rx);
        }
        self.lines.as_ref().unwrap()
    }

    /// The next stdout line within `timeout`.
    pub fn line(&mut self, timeout: Duration) -> String {
        let what = self.what.clone();
        self.lines().recv_timeout(timeout).unwrap_or_else(|e| panic!("{what}: no output line within {timeout:?}: {e}"))
    }

    /// Waits for exit within `timeout`; returns the exit code.
    pub fn wait(&mut self, timeout: Duration) -> i32 {
        let end = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < end, "{} did not exit within {timeout:?}", self.what);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn terminate(&mut self) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
            let end = Instant::now() + Duration::from_secs(3);
            while Instant::now() < end && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A `rocefab-hostd` running `job` in `ns`; returns once it printed its ready line.
pub fn start_hostd(ns: &Netns, job: &Value) -> Proc {
    let name = job["name"].as_str().expect("job name");
    let path = std::env::temp_dir().join(format!("rf-h-job-{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(job).unwrap()).expect("write job");
    let mut p = Proc::spawn(
        &format!("rocefab-hostd {name}"),
        Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .arg(hostd_bin())
            .arg("--job")
            .arg(&path)
            .stdout(Stdio::piped()),
    );
    let ready = p.line(Duration::from_secs(20));
    let v: Value = serde_json::from_str(&ready).unwrap_or_else(|e| panic!("{name}: ready line {ready:?}: {e}"));
    assert_eq!(v["ready"], true, "{ready}");
    p
}

/// Waits for a hostd's report (its last stdout line) and exit.
pub fn report(p: &mut Proc, timeout: Duration) -> (Value, i32) {
    let line = p.line(timeout);
    let code = p.wait(Duration::from_secs(10));
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{}: report {line:?}: {e}", p.what));
    (v, code)
}

/// `report.qps[0][field]` as u64.
pub fn qp(r: &Value, field: &str) -> u64 {
    r["qps"][0][field].as_u64().unwrap_or_else(|| panic!("qps[0].{field} in {r}"))
}

/// `report.nics[0][field]` as u64.
pub fn nic(r: &Value, field: &str) -> u64 {
    r["nics"][0][field].as_u64().unwrap_or_else(|| panic!("nics[0].{field} in {r}"))
}

/// Fails clearly when an oracle tool is missing.
pub fn require_tool(path: &str, args: &[&str]) {
    let ok = Command::new(path).args(args).output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "{path} is required for this test (Debian packages: tshark, tcpdump, python3-scapy)");
}

/// `tshark -r pcap -T fields -e f...` rows (fields separated by '|').
pub fn tshark_fields(pcap: &std::path::Path, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut c = Command::new("tshark");
    c.arg("-r").arg(pcap).args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
    c.args(["--disable-protocol", "rpcordma"]);
    if !filter.is_empty() {
        c.args(["-Y", filter]);
    }
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c.output().expect("run tshark");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| l.split('|').map(str::to_owned).collect()).collect()
}

pub fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{s}: {e}")),
        None => s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}")),
    }
}

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
    let mut a = vec!["capture"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-w", out, "--duration", "60s"]);
    let mut p = Proc::spawn(
        "rocefab capture",
        Command::new(rocefab_tests::fabric::rocefab_bin()).args(&a).stderr(Stdio::piped()),
    );
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
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(p.child.id() as i32, libc::SIGINT) };
    let end = Instant::now() + Duration::from_secs(10);
    while p.child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < end, "rocefab capture did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    std::io::Read::read_to_string(p.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(p.child.try_wait().unwrap().unwrap().success(), "rocefab capture failed: {err}");
    err
}

/// A file in the temp dir (e.g. a capture), removed when created and again on drop, also when
/// the test panics.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str) -> TempFile {
        assert!(name.starts_with("rf-h-"));
        let p = std::env::temp_dir().join(name);
        let _ = std::fs::remove_file(&p);
        TempFile(p)
    }
}

impl std::ops::Deref for TempFile {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
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

/// A scapy agent in a host namespace that sends MAC-control frames on command (stdin lines):
/// `pfc <quanta> [prio]` one PFC frame for priority 3 (or prio); `storm <quanta> <every_ms>
/// <for_ms> [prio]` a bounded train of them (prints `started` after the first); `pause <quanta>` one 802.3x PAUSE;
/// `pausestorm <quanta> <every_ms> <for_ms>` a bounded train of 802.3x PAUSEs; `raw <hex>` any frame. Prints `sent` /
/// `done <frames>` when finished.
pub const SCAPY_AGENT: &str = r#"
import sys, time
from scapy.all import Ether, conf
from scapy.contrib.mac_control import MACControlClassBasedFlowControl, MACControlPause
iface, src = sys.argv[1], sys.argv[2]
s = conf.L2socket(iface=iface)
def pfc(q, prio=3):
    return bytes(Ether(dst="01:80:c2:00:00:01", src=src) / MACControlClassBasedFlowControl(**{f"c{prio}_enabled": 1, f"c{prio}_pause_time": q}))
def train(f, every_ms, for_ms):
    every, until = every_ms / 1e3, time.time() + for_ms / 1e3
    s.send(f)
    print("started", flush=True)
    n = 1
    while time.time() < until:
        time.sleep(every)
        s.send(f)
        n += 1
    print("done", n, flush=True)
print("ready", flush=True)
for line in sys.stdin:
    w = line.split()
    if not w:
        continue
    if w[0] == "pfc":
        s.send(pfc(int(w[1]), *map(int, w[2:3])))
        print("sent", flush=True)
    elif w[0] == "storm":
        train(pfc(int(w[1]), *map(int, w[4:5])), int(w[2]), int(w[3]))
    elif w[0] == "pausestorm":
        train(bytes(Ether(dst="01:80:c2:00:00:01", src=src) / MACControlPause(pause_time=int(w[1]))), int(w[2]), int(w[3]))
    elif w[0] == "pause":
        s.send(bytes(Ether(dst="01:80:c2:00:00:01", src=src) / MACControlPause(pause_time=int(w[1]))))
        print("sent", flush=True)
    elif w[0] == "raw":
        s.send(bytes.fromhex(w[1]))
        print("sent", flush=True)
"#;

pub struct Agent(pub Proc);

impl Agent {
    pub fn start(f: &rocefab_tests::fabric::Fabric, host: &str, nic: &str) -> Agent {
        let mac = String::from_utf8(f.exec(host, &["cat", &format!("/sys/class/net/{nic}/address")]).stdout).unwrap();
        let mut p = Proc::spawn(
            "scapy agent",
            Command::new("ip")
                .args(["netns", "exec", &f.netns(host), "/usr/bin/python3", "-c", SCAPY_AGENT, nic, mac.trim()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped()),
        );
        assert_eq!(p.line(Duration::from_secs(20)), "ready");
        Agent(p)
    }
    pub fn cmd(&mut self, c: &str) -> String {
        let stdin = self.0.child.stdin.as_mut().expect("agent stdin");
        writeln!(stdin, "{c}").and_then(|_| stdin.flush()).expect("agent command");
        self.0.line(Duration::from_secs(10))
    }
}
