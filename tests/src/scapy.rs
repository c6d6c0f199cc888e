//! scapy (/usr/bin/python3 with python3-scapy) as a misbehaving peer and as an oracle: an agent
//! that sends MAC-control frames on command, and the ICRC of RoCEv2 frames as scapy computes it.
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::proc::Proc;

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
    pub fn start(f: &crate::fabric::Fabric, host: &str, nic: &str) -> Agent {
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

/// (stored, computed) ICRC, in hex, of every frame of `pcap` that scapy.contrib.roce dissects
/// as RoCEv2 (BTH), in order.
pub fn icrc(pcap: &Path) -> Vec<(String, String)> {
    let script = r#"
import sys
from scapy.all import rdpcap, Ether, raw
from scapy.contrib.roce import BTH
for p in rdpcap(sys.argv[1]):
    if BTH in p:
        q = Ether(raw(p))
        q[BTH].icrc = None
        print(raw(p[BTH])[-4:].hex(), raw(q[BTH])[-4:].hex())
"#;
    let o = Command::new("/usr/bin/python3").args(["-c", script]).arg(pcap).output().expect("python3");
    assert!(o.status.success(), "scapy: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap_or_else(|| panic!("scapy line {l:?}"));
            (a.to_string(), b.to_string())
        })
        .collect()
}
