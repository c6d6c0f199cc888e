//! The benchmark's three namespaces and two veth pairs, and the guards that remove them.
//!
//! ```text
//!  rfb-gen                    rfb-dut                       rfb-sink
//!  rfb-g0 10.77.1.1/24 ── rfb-d0 10.77.1.254/24
//!                          [bridge | l2fwd | rocefab]
//!                             rfb-d1 10.77.2.254/24 ── rfb-s0 (no IPv4 address)
//! ```
//! IPv6 is disabled in every namespace and neighbours are static, so the only frames on the
//! links are the generator's. The sink holds no address, so the kernel drops what arrives there
//! after one route lookup (see `rocefab-bench sink`). IPv4 forwarding stays off in `rfb-dut`:
//! only the forwarder under test moves frames.
use std::process::Command;

use anyhow::{bail, Context};

pub const PREFIX: &str = "rfb-";
pub const NS_GEN: &str = "rfb-gen";
pub const NS_DUT: &str = "rfb-dut";
pub const NS_SINK: &str = "rfb-sink";
pub const GEN_IF: &str = "rfb-g0";
pub const DUT_IN: &str = "rfb-d0";
pub const DUT_OUT: &str = "rfb-d1";
pub const SINK_IF: &str = "rfb-s0";
pub const BRIDGE: &str = "rfb-br0";

pub const GEN_MAC: [u8; 6] = [0x02, 0xfb, 0x00, 0x01, 0x00, 0x01];
pub const DUT_IN_MAC: [u8; 6] = [0x02, 0xfb, 0x00, 0x01, 0x00, 0xfe];
pub const DUT_OUT_MAC: [u8; 6] = [0x02, 0xfb, 0x00, 0x02, 0x00, 0xfe];
pub const SINK_MAC: [u8; 6] = [0x02, 0xfb, 0x00, 0x02, 0x00, 0x01];
pub const GEN_IP: &str = "10.77.1.1";
pub const DUT_IN_IP: &str = "10.77.1.254";
pub const DUT_OUT_IP: &str = "10.77.2.254";
pub const SINK_IP: &str = "10.77.2.1";
pub const GEN_NET: &str = "10.77.1.0";
pub const SINK_NET: &str = "10.77.2.0";

pub fn mac_str(m: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

/// Runs `ip ARGS...`, failing with its stderr.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output().context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Runs `ip netns exec NS sysctl -qw K=V...`.
fn sysctl(ns: &str, kv: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-qw"])
        .args(kv)
        .output()
        .context("running sysctl in a namespace")?;
    if !out.status.success() {
        bail!("sysctl {} in {ns}: {}", kv.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Names of existing namespaces that start with `rfb-`.
pub fn our_namespaces() -> anyhow::Result<Vec<String>> {
    let out = Command::new("ip").args(["netns", "list"]).output().context("ip netns list")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(PREFIX))
        .map(str::to_string)
        .collect())
}

/// Removes every `rfb-` namespace (their veths go with them). Idempotent.
pub fn cleanup_stale() -> anyhow::Result<()> {
    for ns in our_namespaces()? {
        eprintln!("xtask bench: removing stale namespace {ns}");
        ip(&["netns", "del", &ns])?;
    }
    Ok(())
}

/// The namespaces and veths; dropping it deletes the namespaces (and so the veths).
pub struct Topology {
    created: Vec<&'static str>,
}

impl Topology {
    pub fn create() -> anyhow::Result<Self> {
        let mut t = Topology { created: Vec::new() };
        for ns in [NS_GEN, NS_DUT, NS_SINK] {
            ip(&["netns", "add", ns])?;
            t.created.push(ns);
            sysctl(
                ns,
                &["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv4.ip_forward=0"],
            )?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let (g, d0, d1, s) = (mac_str(GEN_MAC), mac_str(DUT_IN_MAC), mac_str(DUT_OUT_MAC), mac_str(SINK_MAC));
        ip(&[
            "link", "add", GEN_IF, "netns", NS_GEN, "address", &g, "type", "veth", "peer", "name", DUT_IN, "netns",
            NS_DUT, "address", &d0,
        ])?;
        ip(&[
            "link", "add", DUT_OUT, "netns", NS_DUT, "address", &d1, "type", "veth", "peer", "name", SINK_IF, "netns",
            NS_SINK, "address", &s,
        ])?;
        ip(&["-n", NS_GEN, "addr", "add", &format!("{GEN_IP}/24"), "dev", GEN_IF])?;
        ip(&["-n", NS_DUT, "addr", "add", &format!("{DUT_IN_IP}/24"), "dev", DUT_IN])?;
        ip(&["-n", NS_DUT, "addr", "add", &format!("{DUT_OUT_IP}/24"), "dev", DUT_OUT])?;
        for (ns, dev) in [(NS_GEN, GEN_IF), (NS_DUT, DUT_IN), (NS_DUT, DUT_OUT), (NS_SINK, SINK_IF)] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        ip(&["-n", NS_GEN, "neigh", "replace", DUT_IN_IP, "lladdr", &d0, "dev", GEN_IF, "nud", "permanent"])?;
        ip(&["-n", NS_GEN, "route", "add", &format!("{SINK_NET}/24"), "via", DUT_IN_IP])?;
        ip(&["-n", NS_DUT, "neigh", "replace", GEN_IP, "lladdr", &g, "dev", DUT_IN, "nud", "permanent"])?;
        ip(&["-n", NS_DUT, "neigh", "replace", SINK_IP, "lladdr", &s, "dev", DUT_OUT, "nud", "permanent"])?;
        Ok(t)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in self.created.drain(..).rev() {
            if let Err(e) = ip(&["netns", "del", ns]) {
                eprintln!("xtask bench: cleanup: {e:#}");
            }
        }
    }
}

/// A Linux bridge joining the two DUT ports; dropping it deletes the bridge (ports are freed).
pub struct Bridge;

impl Bridge {
    pub fn create() -> anyhow::Result<Self> {
        ip(&["-n", NS_DUT, "link", "add", BRIDGE, "type", "bridge", "stp_state", "0"])?;
        let b = Bridge;
        ip(&["-n", NS_DUT, "link", "set", DUT_IN, "master", BRIDGE])?;
        ip(&["-n", NS_DUT, "link", "set", DUT_OUT, "master", BRIDGE])?;
        ip(&["-n", NS_DUT, "link", "set", BRIDGE, "up"])?;
        // The sink never transmits, so stand in for a learned entry: unicast, not flooding.
        let out = Command::new("bridge")
            .args(["-n", NS_DUT, "fdb", "replace", &mac_str(SINK_MAC), "dev", DUT_OUT, "master", "static"])
            .output()
            .context("running bridge (iproute2)")?;
        if !out.status.success() {
            bail!("bridge fdb replace: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(b)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Err(e) = ip(&["-n", NS_DUT, "link", "del", BRIDGE]) {
            eprintln!("xtask bench: cleanup: {e:#}");
        }
    }
}
