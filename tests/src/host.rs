//! The GPU-host emulator's tests: namespace and veth guards (removed on drop, also when a test
//! panics), `rocefab-hostd` job files, its reports. Everything created is named with the prefix
//! `rf-h-`.
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::proc::{sh, Proc};
use crate::scratch::TempFile;

/// The built `rocefab-hostd`; panics with a build hint when missing.
pub fn hostd_bin() -> PathBuf {
    let p = crate::fabric::bin_dir().join("rocefab-hostd");
    assert!(p.is_file(), "{} not found: run `cargo build -p host-daemons` first", p.display());
    p
}

/// A network namespace (named `rf-*`), first removed if a crashed run left it, deleted on drop
/// (with everything in it).
pub struct Netns(pub String);

impl Netns {
    pub fn new(name: &str) -> Netns {
        assert!(name.starts_with("rf-"), "{name}: the tests' namespaces are named rf-*");
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

/// A `rocefab-hostd` running `job` in `ns`; returns once it printed its ready line.
pub fn start_hostd(ns: &Netns, job: &Value) -> Proc {
    let name = job["name"].as_str().expect("job name");
    // hostd reads its job before it says it is ready: the file goes once it has.
    let path = TempFile::new(&format!("rf-h-job-{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(job).unwrap()).expect("write job");
    let mut p = Proc::spawn(
        &format!("rocefab-hostd {name}"),
        Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .arg(hostd_bin())
            .arg("--job")
            .arg(path.path())
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
