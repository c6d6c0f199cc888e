//! LLDP/DCBX on a live rail-spine fabric (`topologies/rail-spine.yaml` with LLDP every second):
//! every switch port's agent (`rocefab-switchd`) and every GPU NIC's agent (`rocefab-nicd`),
//! checked with independent tools and misbehaving peers. Needs root, tshark, tcpdump, lldpad
//! and /usr/bin/python3 with scapy; the tests run serially, each on its own fabric.
//!
//! - tshark decodes, field by field, what rail1's port to host1 and host1's gpu0 send (captured
//!   in host1's namespace: frames the switch sends from AF_XDP are not seen inside the switch's
//!   namespace), compared with the effective QoS of the switch computed from its configuration;
//!   with a changed `qos:` section the NIC advertises the values it adopted.
//! - lldpad (Open-LLDP, receive only) in host1's namespace decodes what the switch port sends.
//! - Malformed LLDPDUs from scapy, in both directions: each one is counted once as malformed
//!   with a reason naming the problem, the neighbour stays, both daemons live on and keep
//!   accepting valid LLDPDUs.
//! - A NIC agent stopped with SIGTERM sends a shutdown LLDPDU (TTL 0) and the switch port drops
//!   the neighbour at once, long before its TTL.
//! - lldpd (Debian package lldpd) on host1's gpu0 beside rocefab-nicd: the switch port keeps
//!   both neighbours (one per Chassis ID + Port ID), `rocefab_lldp_neighbors` is 2, and
//!   `rocefab lldp --check` says "extra neighbour" for lldpd's, stable over several transmit
//!   intervals of both agents; with `lldp.nic_agent: false` the switch sees the host's lldpd.
//! - A second DCBX agent on a link (scapy), even learned before the NIC agent: the switch port
//!   takes DCBX from the neighbour the topology cables it to.
//! - `rocefab status --json`: every daemon's /metrics URL; its scrape_configs pass
//!   `promtool check config` and every target's metrics pass `promtool check metrics`.
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_contracts::config::SwitchConfig;
use rocefab_tests::capture::start_capture_in;
use rocefab_tests::fabric::{metric, pids_with_cmdline, promtool_check, run_dir, scrape, Fabric};
use rocefab_tests::proc::{require_tool, Proc};
use rocefab_tests::scratch::{temp_dir, TempDir, TempFile};
use rocefab_tests::tshark::{self, num};
use serde_json::Value;

/// LLDPDUs every second and a short TTL, so frames flow during a short capture.
const LLDP_FAST: &str = "lldp:\n  tx_interval: 1s\n  ttl: 4s\n";
/// A QoS that differs from the NICs' own defaults (PFC {3}, DSCP 24 → 3, ETS 0 and 3 at 50/50).
const QOS_CHANGED: &str = "qos:\n  classes: {26: 4, 48: 7}\n  pfc: [4]\n  ets: {0: 70, 4: 30}\n";

const UDP_ROCEV2: u16 = 4791;
/// Application Priority selectors (IEEE 802.1Q-2018 table D-9).
const SEL_UDP: u8 = 3;
const SEL_DSCP: u8 = 5;

fn tools() {
    require_tool("tshark", &["-v"]);
    require_tool("tcpdump", &["--version"]);
    require_tool("/usr/bin/python3", &["-c", "import scapy.all"]);
}

// ---------------------------------------------------------------------------------------------
// The fabric's agents
// ---------------------------------------------------------------------------------------------

/// What one side advertises in DCBX, in TLV units.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Dcbx {
    willing: bool,
    prio_tc: [u8; 8],
    tc_bandwidth: [u8; 8],
    tsa: [u8; 8],
    pfc_enable: u8,
    pfc_cap: u8,
    /// (selector, protocol, priority).
    app: BTreeSet<(u8, u16, u8)>,
}

/// The effective QoS of a switch as its ports must advertise it, computed from its
/// configuration: priority p in queue p (ETS: prio p → TC p); the strict queues
/// (`qos.strict_priorities`) TSA strict (0) with no bandwidth, every other queue TSA ETS (2)
/// with its `qos.ets` share (0 % when it has none); PFC on the lossless priorities; APP: every
/// DSCP the switch maps to a non-zero priority, and RoCEv2 (UDP 4791) → the lowest lossless
/// priority.
fn effective_qos(c: &SwitchConfig) -> Dcbx {
    let pfc = c.qos.lossless_priorities;
    assert_ne!(pfc, 0, "{}: these tests need a lossless priority", c.name);
    let mut app: BTreeSet<(u8, u16, u8)> =
        c.dscp_to_tc.iter().enumerate().filter(|&(_, &p)| p != 0).map(|(d, &p)| (SEL_DSCP, d as u16, p)).collect();
    app.insert((SEL_UDP, UDP_ROCEV2, pfc.trailing_zeros() as u8));
    let strict = |tc: usize| c.qos.strict_priorities & (1 << tc) != 0;
    let tsa: [u8; 8] = std::array::from_fn(|tc| if strict(tc) { TSA_STRICT } else { TSA_ETS });
    let tc_bandwidth: [u8; 8] = std::array::from_fn(|tc| if strict(tc) { 0 } else { c.qos.ets_percent[tc] });
    assert_eq!(tc_bandwidth.iter().map(|&b| u32::from(b)).sum::<u32>(), 100, "{}: ETS shares {tc_bandwidth:?}", c.name);
    Dcbx { willing: false, prio_tc: [0, 1, 2, 3, 4, 5, 6, 7], tc_bandwidth, tsa, pfc_enable: pfc, pfc_cap: 8, app }
}

/// TSA values (IEEE 802.1Q-2018 table 8-6) and how lldptool names them.
const TSA_STRICT: u8 = 0;
const TSA_ETS: u8 = 2;
fn lldpad_tsa(t: u8) -> &'static str {
    match t {
        TSA_STRICT => "strict",
        1 => "cb_shaper",
        TSA_ETS => "ets",
        _ => "vendor",
    }
}

/// Who sends an LLDPDU, as a receiver must see it.
#[derive(Debug, Clone)]
struct Sender {
    /// Ethernet source.
    src_mac: String,
    chassis_mac: String,
    port_id: String,
    system_name: String,
    ttl: u16,
    /// System Capabilities (and enabled): bridge + router for a switch, station only for a NIC.
    caps: u16,
}

/// rail1's port cabled to `peer` (`host1:gpu0`).
fn switch_port(f: &Fabric, sw: &str, peer: &str) -> Sender {
    let c = f.config(sw);
    let p = c.ports.iter().find(|p| p.peer == peer).unwrap_or_else(|| panic!("{sw} has no port to {peer}"));
    let chassis = c.chassis_mac.unwrap_or(c.ports[0].mac);
    Sender {
        src_mac: p.mac.to_string(),
        chassis_mac: chassis.to_string(),
        port_id: p.name.clone(),
        system_name: c.name.clone(),
        ttl: c.lldp.ttl_s,
        caps: 0x0014,
    }
}

/// `host`'s NIC `nic` as an LLDP sender (chassis = the NIC's MAC, port = interface name).
fn nic_port(f: &Fabric, host: &str, nic: &str) -> Sender {
    let c = f.nicd_config(host);
    let n = c["nics"]
        .as_array()
        .expect("nics")
        .iter()
        .find(|n| n["name"] == nic)
        .unwrap_or_else(|| panic!("{host} has no {nic}"));
    let mac = n["mac"].as_str().expect("mac").to_string();
    // The MAC the agent uses is the interface's.
    let o = f.exec(host, &["cat", &format!("/sys/class/net/{nic}/address")]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), mac, "{host}:{nic} MAC");
    Sender {
        src_mac: mac.clone(),
        chassis_mac: mac,
        port_id: nic.to_string(),
        system_name: host.to_string(),
        ttl: c["lldp"]["ttl_s"].as_u64().expect("ttl_s") as u16,
        caps: 0x0080,
    }
}

/// `GET /lldp` of a daemon, parsed.
fn lldp_json(addr: SocketAddr) -> Value {
    let body = rocefab_tests::http::get(addr, "/lldp").unwrap_or_else(|e| panic!("GET /lldp: {e:#}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{addr}/lldp: {e}: {body}"))
}

/// One port's row of a `/lldp` report.
fn port_row(report: &Value, port: &str) -> Value {
    report["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["port"] == port)
        .cloned()
        .unwrap_or_else(|| panic!("no port {port} in {report}"))
}

fn counter(row: &Value, name: &str) -> u64 {
    row["counters"][name].as_u64().unwrap_or_else(|| panic!("counters.{name} in {row}"))
}

/// One agent's port: where to ask, and which port.
#[derive(Debug, Clone)]
struct AgentPort {
    what: String,
    addr: SocketAddr,
    port: String,
    /// Prometheus labels of the port's LLDP series.
    labels: Vec<(String, String)>,
}

impl AgentPort {
    fn switch(f: &Fabric, sw: &str, peer: &str) -> AgentPort {
        let port = f.port_to(sw, peer);
        AgentPort {
            what: format!("{sw}:{port}"),
            addr: f.config(sw).metrics_listen,
            port: port.clone(),
            labels: vec![("switch".into(), sw.into()), ("port".into(), port)],
        }
    }
    fn nic(f: &Fabric, host: &str, nic: &str) -> AgentPort {
        AgentPort {
            what: format!("{host}:{nic}"),
            addr: f.nicd_addr(host),
            port: nic.into(),
            labels: vec![("host".into(), host.into()), ("port".into(), nic.into())],
        }
    }
    fn row(&self) -> Value {
        port_row(&lldp_json(self.addr), &self.port)
    }
    fn metric(&self, text: &str, name: &str, extra: &[(&str, &str)]) -> f64 {
        let mut l: Vec<(&str, &str)> = self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        l.extend_from_slice(extra);
        metric(text, name, &l)
    }
    /// [`Self::metric`], panicking when no sample matches: for values asserted to be 0.
    fn series(&self, text: &str, name: &str, extra: &[(&str, &str)]) -> f64 {
        let mut l: Vec<(&str, &str)> = self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        l.extend_from_slice(extra);
        rocefab_tests::fabric::series(text, name, &l)
    }
    /// Polls the port's row until `cond` holds (at most `within`); panics with the last row.
    fn until(&self, what: &str, within: Duration, cond: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + within;
        loop {
            let r = self.row();
            if cond(&r) {
                return r;
            }
            assert!(Instant::now() < end, "{}: {what} did not happen within {within:?}:\n{r:#}", self.what);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether `row`'s neighbour is `s`.
fn neighbour_is(row: &Value, s: &Sender) -> bool {
    let n = &row["neighbour"];
    n["chassis_mac"] == s.chassis_mac.as_str()
        && n["port"] == s.port_id.as_str()
        && n["system_name"] == s.system_name.as_str()
}

/// Waits until rail1's port to host1:gpu0 and host1's gpu0 know each other and the NIC runs
/// the switch's PFC/APP/ETS (adopted from the peer).
fn wait_for_adjacency(f: &Fabric) -> (AgentPort, AgentPort) {
    let (sw, nic) = (AgentPort::switch(f, "rail1", "host1:gpu0"), AgentPort::nic(f, "host1", "gpu0"));
    let (sw_id, nic_id) = (switch_port(f, "rail1", "host1:gpu0"), nic_port(f, "host1", "gpu0"));
    sw.until("learning host1:gpu0", Duration::from_secs(10), |r| neighbour_is(r, &nic_id));
    nic.until("learning rail1 and adopting its settings", Duration::from_secs(10), |r| {
        neighbour_is(r, &sw_id)
            && r["oper"]["pfc_from"] == "peer"
            && r["oper"]["app_from"] == "peer"
            && r["oper"]["ets_from"] == "peer"
    });
    (sw, nic)
}

fn bits(b: u8) -> Vec<u8> {
    (0..8).filter(|p| b & (1 << p) != 0).collect()
}

// ---------------------------------------------------------------------------------------------
// tshark
// ---------------------------------------------------------------------------------------------

type Fields = HashMap<String, Vec<String>>;

/// Every occurrence of every field, per frame.
fn tshark_decode(pcap: &std::path::Path, fields: &[String]) -> Vec<Fields> {
    let names: Vec<&str> = fields.iter().map(String::as_str).collect();
    tshark::occurrences(pcap, "", &names).into_iter().map(|frame| fields.iter().cloned().zip(frame).collect()).collect()
}

fn lldp_fields() -> Vec<String> {
    let mut v: Vec<String> = [
        "eth.src",
        "eth.dst",
        "lldp.chassis.subtype",
        "lldp.chassis.id.mac",
        "lldp.port.subtype",
        "lldp.port.id",
        "lldp.time_to_live",
        "lldp.tlv.system.name",
        "lldp.port.desc",
        "lldp.tlv.system_cap",
        "lldp.tlv.enable_system_cap",
        "lldp.orgtlv.oui",
        "lldp.ieee.802_1.subtype",
        "lldp.dcbx.ieee.willing",
        "lldp.dcbx.ieee.ets.cbs",
        "lldp.dcbx.ieee.ets.maxtcs",
        "lldp.dcbx.ieee.pfc.mbc",
        "lldp.dcbx.ieee.pfc.numtcs",
        "lldp.dcbx.ieee.app.prio",
        "lldp.dcbx.iee.app.sf",
        "lldp.dcbx.feature.app.proto",
        "_ws.malformed",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 0..8 {
        v.push(format!("lldp.dcbx.feature.pg.pgid_prio{i}"));
        v.push(format!("lldp.dcbx.feature.pg.per{i}"));
        v.push(format!("lldp.dcbx.ieee.ets.tsa{i}"));
        v.push(format!("lldp.dcbx.feature.pfc.prio{i}"));
    }
    v
}

fn all<'a>(fr: &'a Fields, field: &str) -> &'a [String] {
    fr.get(field).map(Vec::as_slice).unwrap_or(&[])
}

fn one<'a>(fr: &'a Fields, field: &str) -> &'a str {
    match all(fr, field) {
        [v] => v,
        other => panic!("{field}: expected one value, got {other:?}\nframe: {fr:?}"),
    }
}

/// Checks one captured LLDPDU field by field against its sender and the DCBX it must carry.
fn check_frame(fr: &Fields, who: &str, s: &Sender, d: &Dcbx) {
    let ctx = format!("{who} frame {fr:?}");
    assert_eq!(one(fr, "eth.dst"), "01:80:c2:00:00:0e", "{ctx}");
    assert!(all(fr, "_ws.malformed").is_empty(), "tshark calls the frame malformed: {ctx}");
    // Mandatory TLVs: Chassis ID (MAC subtype 4), Port ID (ifname subtype 5), TTL.
    assert_eq!(one(fr, "lldp.chassis.subtype"), "4", "{ctx}");
    assert_eq!(one(fr, "lldp.chassis.id.mac"), s.chassis_mac, "chassis: {ctx}");
    assert_eq!(one(fr, "lldp.port.subtype"), "5", "{ctx}");
    assert_eq!(one(fr, "lldp.port.id"), s.port_id, "port id: {ctx}");
    assert_eq!(num(one(fr, "lldp.time_to_live")), u64::from(s.ttl), "TTL: {ctx}");
    assert_eq!(one(fr, "lldp.tlv.system.name"), s.system_name, "system name: {ctx}");
    assert!(!one(fr, "lldp.port.desc").is_empty(), "port description: {ctx}");
    assert_eq!(num(one(fr, "lldp.tlv.system_cap")), u64::from(s.caps), "capabilities: {ctx}");
    assert_eq!(num(one(fr, "lldp.tlv.enable_system_cap")), u64::from(s.caps), "enabled capabilities: {ctx}");
    // The four IEEE 802.1Qaz TLVs, in order.
    let subtypes: Vec<u64> = all(fr, "lldp.ieee.802_1.subtype").iter().map(|v| num(v)).collect();
    assert_eq!(subtypes, vec![9, 10, 11, 12], "ETS Configuration, ETS Recommendation, PFC Configuration, APP: {ctx}");
    // Willing: in ETS Configuration and PFC Configuration (ETS Recommendation has no such bit).
    let w = if d.willing { "1" } else { "0" };
    assert_eq!(all(fr, "lldp.dcbx.ieee.willing"), [w, w], "willing: {ctx}");
    assert_eq!(one(fr, "lldp.dcbx.ieee.ets.cbs"), "0", "{ctx}");
    // Max TCs 8 is encoded as 0 (802.1Q-2018 D.2.9.3).
    assert_eq!(one(fr, "lldp.dcbx.ieee.ets.maxtcs"), "0", "max TCs: {ctx}");
    // ETS tables: the same in the configuration and the recommendation.
    for i in 0..8 {
        let tc = d.prio_tc[i].to_string();
        assert_eq!(
            all(fr, &format!("lldp.dcbx.feature.pg.pgid_prio{i}")),
            [tc.clone(), tc],
            "priority {i} → TC: {ctx}"
        );
        let bw = d.tc_bandwidth[i].to_string();
        assert_eq!(all(fr, &format!("lldp.dcbx.feature.pg.per{i}")), [bw.clone(), bw], "TC {i} bandwidth: {ctx}");
        let tsa = d.tsa[i].to_string();
        assert_eq!(all(fr, &format!("lldp.dcbx.ieee.ets.tsa{i}")), [tsa.clone(), tsa], "TC {i} TSA: {ctx}");
    }
    // PFC Configuration.
    for i in 0..8 {
        let on = if d.pfc_enable & (1 << i) != 0 { "1" } else { "0" };
        assert_eq!(one(fr, &format!("lldp.dcbx.feature.pfc.prio{i}")), on, "PFC on priority {i}: {ctx}");
    }
    assert_eq!(num(one(fr, "lldp.dcbx.ieee.pfc.numtcs")), u64::from(d.pfc_cap), "PFC cap: {ctx}");
    assert_eq!(one(fr, "lldp.dcbx.ieee.pfc.mbc"), "0", "MBC: {ctx}");
    // Application Priority entries.
    let (prio, sel, proto) =
        (all(fr, "lldp.dcbx.ieee.app.prio"), all(fr, "lldp.dcbx.iee.app.sf"), all(fr, "lldp.dcbx.feature.app.proto"));
    assert!(prio.len() == sel.len() && sel.len() == proto.len(), "APP columns: {ctx}");
    let app: BTreeSet<(u8, u16, u8)> =
        (0..prio.len()).map(|i| (num(&sel[i]) as u8, num(&proto[i]) as u16, num(&prio[i]) as u8)).collect();
    assert_eq!(app.len(), prio.len(), "duplicate APP entries: {ctx}");
    assert_eq!(app, d.app, "APP table (selector, protocol, priority): {ctx}");
}

/// Captures on host1:gpu0 and checks every LLDPDU of the switch port and of the NIC; then the
/// NIC agent's own view (`/lldp`, metrics).
fn tshark_both_directions(f: &Fabric) -> Dcbx {
    let (_sw, nic) = wait_for_adjacency(f);
    let want = effective_qos(&f.config("rail1"));
    let sw_id = switch_port(f, "rail1", "host1:gpu0");
    let nic_id = nic_port(f, "host1", "gpu0");

    let pcap = TempFile::new(&format!("rf-h-lldp-{}.pcapng", f.name));
    tshark::capture_in(&f.netns("host1"), "gpu0", "ether proto 0x88cc", 3, &pcap);
    let frames = tshark_decode(&pcap, &lldp_fields());
    let from = |mac: &str| frames.iter().filter(|fr| one(fr, "eth.src") == mac).collect::<Vec<_>>();
    let (sw_frames, nic_frames) = (from(&sw_id.src_mac), from(&nic_id.src_mac));
    assert!(
        !sw_frames.is_empty() && !nic_frames.is_empty(),
        "3 s capture: {} from rail1, {} from the NIC, {} in all",
        sw_frames.len(),
        nic_frames.len(),
        frames.len()
    );
    assert_eq!(sw_frames.len() + nic_frames.len(), frames.len(), "LLDP from someone else on host1:gpu0: {frames:?}");
    for fr in &sw_frames {
        check_frame(fr, "rail1", &sw_id, &want);
    }
    // The NIC advertises what it adopted, still willing.
    let adopted = Dcbx { willing: true, ..want.clone() };
    for fr in &nic_frames {
        check_frame(fr, "host1:gpu0", &nic_id, &adopted);
    }

    // The NIC agent's own report and metrics say the same.
    let row = nic.row();
    assert_eq!(row["oper"]["pfc_enable"].as_u64(), Some(u64::from(want.pfc_enable)), "{row:#}");
    let oper_app: BTreeSet<(u8, u16, u8)> = row["oper"]["app"]
        .as_array()
        .expect("oper.app")
        .iter()
        .map(|a| {
            (
                a["selector"].as_u64().unwrap() as u8,
                a["protocol"].as_u64().unwrap() as u16,
                a["priority"].as_u64().unwrap() as u8,
            )
        })
        .collect();
    assert_eq!(oper_app, want.app, "{row:#}");
    assert_eq!(row["mismatches"].as_array().map(Vec::len), Some(0), "{row:#}");
    let m = scrape(nic.addr);
    for p in 0..8u8 {
        let on = f64::from(want.pfc_enable >> p & 1);
        assert_eq!(
            nic.metric(&m, "rocefab_dcbx_oper_pfc_enabled", &[("priority", &p.to_string())]),
            on,
            "priority {p}"
        );
    }
    assert_eq!(nic.metric(&m, "rocefab_lldp_neighbors", &[]), 1.0);
    assert_eq!(nic.series(&m, "rocefab_dcbx_mismatch", &[]), 0.0);
    assert!(nic.metric(&m, "rocefab_lldp_rx_frames_total", &[]) >= sw_frames.len() as f64);
    assert!(nic.metric(&m, "rocefab_lldp_tx_frames_total", &[]) >= nic_frames.len() as f64);
    assert_eq!(nic.series(&m, "rocefab_lldp_rx_malformed_total", &[]), 0.0);
    want
}

#[test]
fn tshark_decodes_switch_and_nic_lldpdus_field_by_field() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfl1", LLDP_FAST);
    let want = tshark_both_directions(&f);
    // The shipped default, as the README documents it.
    assert_eq!(bits(want.pfc_enable), [3]);
    assert_eq!(want.app, BTreeSet::from([(SEL_UDP, UDP_ROCEV2, 3), (SEL_DSCP, 24, 3), (SEL_DSCP, 48, 7)]));
    assert_eq!((want.tsa, want.tc_bandwidth), ([2, 2, 2, 2, 2, 2, 2, 0], [50, 0, 0, 50, 0, 0, 0, 0]));
    // Both daemons' scrapes pass promtool.
    promtool_check("rocefab-nicd host1", &scrape(f.nicd_addr("host1")));
    promtool_check("rocefab-switchd rail1", &f.metrics("rail1"));
}

#[test]
fn tshark_shows_the_nic_advertising_the_changed_qos_it_adopted() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfl2", &format!("{LLDP_FAST}{QOS_CHANGED}"));
    let want = tshark_both_directions(&f);
    // The `qos:` section reached the switch: PFC {4}, RoCEv2 and DSCP 26 → 4, DSCP 48 → 7; the
    // NIC's own configuration (PFC {3}, DSCP 24 → 3) is not what it advertises any more.
    assert_eq!(bits(want.pfc_enable), [4]);
    assert_eq!(want.app, BTreeSet::from([(SEL_UDP, UDP_ROCEV2, 4), (SEL_DSCP, 26, 4), (SEL_DSCP, 48, 7)]));
    assert_eq!(want.tc_bandwidth, [70, 0, 0, 0, 30, 0, 0, 0]);
    let own = &f.nicd_config("host1")["nics"][0]["dcb"];
    assert_eq!(own["pfc_enable"].as_u64(), Some(1 << 3), "the NIC's own PFC before negotiation");
}

// ---------------------------------------------------------------------------------------------
// lldpad
// ---------------------------------------------------------------------------------------------

/// lldpad in the foreground in a namespace, without a pid file (`-p`), its state in a private
/// directory; stopped (SIGTERM, then SIGKILL) and the directory removed on drop, also when the
/// test panics. Its client socket is abstract and per network namespace.
struct Lldpad {
    proc: Option<Proc>,
    ns: String,
    dir: TempDir,
}

impl Lldpad {
    /// Starts lldpad in `ns` and sets `ifname` to receive only (it must not transmit on the
    /// NIC's interface: the NIC agent owns it).
    fn start(ns: &str, ifname: &str, tag: &str) -> Lldpad {
        // lldptool comes with lldpad (Debian package lldpad, `cargo xtask setup`).
        require_tool("lldpad", &["-v"]);
        let dir = temp_dir(&format!("rf-h-lldpad-{tag}-"));
        let log = std::fs::File::create(dir.path().join("lldpad.log")).expect("lldpad log");
        let proc = Proc::spawn(
            "lldpad",
            Command::new("ip")
                .args(["netns", "exec", ns, "lldpad", "-p", "-f"])
                .arg(dir.path().join("lldpad.conf"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log),
        );
        let mut l = Lldpad { proc: Some(proc), ns: ns.to_string(), dir };
        // lldptool answers once lldpad listens.
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let o = l.tool(&["set-lldp", "-i", ifname, "adminStatus=rx"]);
            if o.0 && o.1.contains("adminStatus = rx") {
                break;
            }
            if let Some(Ok(Some(st))) = l.proc.as_mut().map(|p| p.child.try_wait()) {
                panic!("lldpad exited ({st}): {}", l.log());
            }
            assert!(Instant::now() < end, "lldptool set-lldp: {} {}\nlldpad log: {}", o.1, o.2, l.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        l
    }

    /// Runs lldptool in the namespace: (success, stdout, stderr).
    fn tool(&self, args: &[&str]) -> (bool, String, String) {
        let o = Command::new("ip").args(["netns", "exec", &self.ns, "lldptool"]).args(args).output().expect("lldptool");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// `lldptool -n -t -i IF [-V TLV]`: what the neighbour advertised, polled until `needle`
    /// appears (the neighbour's first LLDPDU may still be on its way).
    fn neighbour_tlv(&self, ifname: &str, tlv: Option<&str>, needle: &str) -> String {
        let mut args = vec!["-n", "-t", "-i", ifname];
        if let Some(t) = tlv {
            args.extend(["-V", t]);
        }
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let (ok, out, err) = self.tool(&args);
            if ok && out.contains(needle) {
                return out;
            }
            assert!(
                Instant::now() < end,
                "lldptool {args:?}: no {needle:?} within 10 s: {out} {err}\nlldpad log: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("lldpad.log")).unwrap_or_default()
    }
}

impl Drop for Lldpad {
    fn drop(&mut self) {
        // Proc's drop: SIGTERM, up to 3 s, SIGKILL, reap.
        drop(self.proc.take());
        // `dir` is removed after this.
        // lldpad keeps its state in a machine-wide shared-memory file; nothing else uses it here.
        let _ = std::fs::remove_file("/dev/shm/lldpad.state");
    }
}

/// The numbers in `s` (e.g. "0:0 1:1" → [0, 0, 1, 1]).
fn numbers(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).map(|w| w.parse().unwrap()).collect()
}

/// The text after `key` on the line that has it.
fn after<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.split_once(key).map(|(_, v)| v.trim()))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"))
}

/// lldpad's APP table: `App# 0  Prio 3  Sel 3  P-ID  UDP or DCCP Port: 4791` lines and, for
/// DSCP entries, `Prio:3  dscp: 24,` lines.
fn lldpad_app(text: &str) -> BTreeSet<(u8, u16, u8)> {
    let mut v = BTreeSet::new();
    for l in text.lines() {
        if l.contains("App#") {
            let w: Vec<&str> = l.split_whitespace().collect();
            let field =
                |k: &str| w.iter().position(|x| *x == k).and_then(|i| w.get(i + 1)).and_then(|x| x.parse::<u64>().ok());
            let (prio, sel) = (field("Prio").expect(l), field("Sel").expect(l));
            let proto = *numbers(l).last().expect(l);
            v.insert((sel as u8, proto as u16, prio as u8));
        } else if let Some((p, d)) = l.split_once("dscp:") {
            let prio = numbers(p)[0] as u8;
            for dscp in numbers(d) {
                v.insert((SEL_DSCP, dscp as u16, prio));
            }
        }
    }
    v
}

/// lldpad (receive only) on host1:gpu0 decodes what rail1's port advertised.
fn lldpad_sees_the_switch(f: &Fabric, tag: &str) -> Dcbx {
    wait_for_adjacency(f);
    let want = effective_qos(&f.config("rail1"));
    let sw = switch_port(f, "rail1", "host1:gpu0");
    let l = Lldpad::start(&f.netns("host1"), "gpu0", tag);

    // The basic TLVs: who the neighbour is.
    let all = l.neighbour_tlv("gpu0", None, "IEEE 8021QAZ APP TLV");
    assert!(all.contains(&format!("MAC: {}", sw.chassis_mac)), "chassis:\n{all}");
    assert!(all.contains(&format!("Ifname: {}", sw.port_id)), "port id:\n{all}");
    let block = |name: &str| {
        all.split(name).nth(1).and_then(|r| r.lines().nth(1)).map(str::trim).unwrap_or_else(|| panic!("{name}:\n{all}"))
    };
    assert_eq!(block("Time to Live TLV"), sw.ttl.to_string(), "TTL:\n{all}");
    assert_eq!(block("System Name TLV"), sw.system_name, "system name:\n{all}");

    let pfc = l.neighbour_tlv("gpu0", Some("PFC"), "PFC enabled");
    assert_eq!(after(&pfc, "Willing:"), "no", "{pfc}");
    assert_eq!(after(&pfc, "MACsec Bypass Capable:"), "no", "{pfc}");
    assert_eq!(numbers(after(&pfc, "PFC capable traffic classes:")), [u64::from(want.pfc_cap)], "{pfc}");
    let enabled: Vec<u8> = numbers(after(&pfc, "PFC enabled:")).into_iter().map(|p| p as u8).collect();
    assert_eq!(enabled, bits(want.pfc_enable), "PFC enabled:\n{pfc}");

    let app = l.neighbour_tlv("gpu0", Some("APP"), "App#");
    assert_eq!(lldpad_app(&app), want.app, "APP table (selector, protocol, priority):\n{app}");

    let identity: Vec<u64> = (0..8).flat_map(|p| [p, u64::from(want.prio_tc[p as usize])]).collect();
    for tlv in ["ETS-CFG", "ETS-REC"] {
        let ets = l.neighbour_tlv("gpu0", Some(tlv), "TSA_MAP");
        if tlv == "ETS-CFG" {
            assert_eq!(after(&ets, "Willing:"), "no", "{ets}");
            assert_eq!(numbers(after(&ets, "MAX_TCS:")), [8], "{ets}");
        }
        assert_eq!(numbers(after(&ets, "PRIO_MAP:")), identity, "{tlv} priority → TC:\n{ets}");
        assert_eq!(numbers(after(&ets, "TC Bandwidth:")), want.tc_bandwidth.map(u64::from), "{tlv} bandwidth:\n{ets}");
        let tsa: Vec<&str> =
            after(&ets, "TSA_MAP:").split_whitespace().map(|e| e.split_once(':').expect("tc:tsa").1).collect();
        assert_eq!(tsa, want.tsa.map(lldpad_tsa), "{tlv} TSA:\n{ets}");
    }
    // lldpad only listened: it sent nothing on the NIC's interface.
    let stats = l.tool(&["-S", "-i", "gpu0"]).1;
    assert_eq!(numbers(after(&stats, "Total Frames Transmitted")), [0], "{stats}");
    assert_eq!(
        numbers(after(&stats, "Total Discarded Frames Received")),
        [0],
        "lldpad discarded a frame of ours:\n{stats}"
    );
    assert_eq!(numbers(after(&stats, "Total Error Frames Received")), [0], "{stats}");
    want
}

#[test]
fn lldpad_decodes_what_the_switch_port_advertises() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfl3", LLDP_FAST);
    let want = lldpad_sees_the_switch(&f, "rfl3");
    assert_eq!(bits(want.pfc_enable), [3]);
    assert_eq!(want.app, BTreeSet::from([(SEL_UDP, UDP_ROCEV2, 3), (SEL_DSCP, 24, 3), (SEL_DSCP, 48, 7)]));
    assert_eq!(want.tc_bandwidth, [50, 0, 0, 50, 0, 0, 0, 0]);
}

#[test]
fn lldpad_decodes_the_changed_qos_the_switch_port_advertises() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfl4", &format!("{LLDP_FAST}{QOS_CHANGED}"));
    let want = lldpad_sees_the_switch(&f, "rfl4");
    assert_eq!(bits(want.pfc_enable), [4]);
    assert_eq!(want.app, BTreeSet::from([(SEL_UDP, UDP_ROCEV2, 4), (SEL_DSCP, 26, 4), (SEL_DSCP, 48, 7)]));
    assert_eq!(want.tc_bandwidth, [70, 0, 0, 0, 30, 0, 0, 0]);
}

// ---------------------------------------------------------------------------------------------
// Malformed LLDPDUs
// ---------------------------------------------------------------------------------------------

/// A scapy sender on one interface of a namespace: each stdin line is a frame in hex, sent as
/// is (no padding, no checksum); answers `sent <len>`.
const SCAPY_SENDER: &str = r#"
import sys
from scapy.all import conf
s = conf.L2socket(iface=sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    b = bytes.fromhex(line.strip())
    if b:
        s.send(b)
        print("sent", len(b), flush=True)
"#;

struct Sendp(Proc);

impl Sendp {
    fn start(ns: &str, ifname: &str) -> Sendp {
        let mut p = Proc::spawn(
            "scapy sender",
            Command::new("ip")
                .args(["netns", "exec", ns, "/usr/bin/python3", "-c", SCAPY_SENDER, ifname])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped()),
        );
        assert_eq!(p.line(Duration::from_secs(20)), "ready");
        Sendp(p)
    }
    fn send(&mut self, frame: &[u8]) {
        let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
        let stdin = self.0.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{hex}").and_then(|_| stdin.flush()).expect("scapy sender");
        assert_eq!(self.0.line(Duration::from_secs(5)), format!("sent {}", frame.len()));
    }
}

fn mac(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s.split(':').map(|x| u8::from_str_radix(x, 16).expect("mac")).collect();
    v.try_into().expect("6 octets")
}

/// A TLV: 7-bit type, 9-bit length, value.
fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
    assert!(t < 128 && v.len() < 512);
    let mut b = vec![(t << 1) | (v.len() >> 8) as u8, v.len() as u8];
    b.extend_from_slice(v);
    b
}

/// A TLV header declaring `len` value octets (what follows is up to the caller).
fn tlv_header(t: u8, len: usize) -> Vec<u8> {
    vec![(t << 1) | (len >> 8) as u8, len as u8]
}

/// An LLDP frame: nearest-bridge group address, `src`, EtherType 0x88cc, `pdu`, zero padding to
/// the 60-octet minimum a real NIC would add (padding never changes a verdict below).
fn frame(src: &str, pdu: &[u8]) -> Vec<u8> {
    let mut f = vec![0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
    f.extend_from_slice(&mac(src));
    f.extend_from_slice(&[0x88, 0xcc]);
    f.extend_from_slice(pdu);
    f.resize(f.len().max(60), 0);
    f
}

fn chassis_tlv(chassis: &str) -> Vec<u8> {
    let mut v = vec![4];
    v.extend_from_slice(&mac(chassis));
    tlv(1, &v)
}

fn port_tlv(port: &str) -> Vec<u8> {
    let mut v = vec![5];
    v.extend_from_slice(port.as_bytes());
    tlv(2, &v)
}

fn ttl_tlv(s: u16) -> Vec<u8> {
    tlv(3, &s.to_be_bytes())
}

const END: [u8; 2] = [0, 0];

/// A stranger's identity (documentation MAC range, RFC 7042): if a malformed LLDPDU carrying it
/// were accepted, the neighbour would change.
const STRANGER_CHASSIS: &str = "00:00:5e:00:53:01";
const STRANGER_PORT: &str = "evil0";

/// A frame every receiver must discard, why (IEEE 802.1AB-2016 clause 8 format, 9.2.7.7.1
/// receive validation), and words `last_error` must contain.
struct Bad {
    name: &'static str,
    frame: Vec<u8>,
    says: &'static [&'static str],
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// The malformed LLDPDUs, from `src`, all claiming the stranger's identity.
fn malformed(src: &str) -> Vec<Bad> {
    let (ch, po, ttl) = (chassis_tlv(STRANGER_CHASSIS), port_tlv(STRANGER_PORT), ttl_tlv(120));
    let desc = tlv(4, b"a port description long enough to fill a minimum-size frame");
    // 1500 octets of LLDPDU: the mandatory TLVs, then 0xa5 to the end. 0xa5a5 reads as a TLV of
    // the reserved type 82 with 421 octets (a reserved type alone would be kept as
    // unrecognized, 9.2.7.7.1): three of them fit, the fourth runs past the end.
    let mut garbage = cat(&[&ch, &po, &ttl]);
    garbage.resize(1500, 0xa5);
    vec![
        // A TLV whose length runs past the end of the LLDPDU: the TLVs cannot be delimited,
        // the whole LLDPDU is discarded (statsFramesDiscardedTotal, badFrame).
        Bad {
            name: "truncated Port Description (300 octets declared, 20 present)",
            frame: frame(src, &cat(&[&ch, &po, &ttl, &tlv_header(4, 300), &[b'x'; 20]])),
            says: &["declares 300"],
        },
        // The first three TLVs must be Chassis ID, Port ID, TTL, in this order (8.2).
        Bad {
            name: "Port ID before Chassis ID",
            frame: frame(src, &cat(&[&po, &ch, &ttl, &END])),
            says: &["tlv #0", "chassis id"],
        },
        // The TTL TLV carries a 2-octet TTL (8.5.4): with one octet there is no TTL.
        Bad {
            name: "TTL TLV of length 1",
            frame: frame(src, &cat(&[&ch, &po, &[0x06, 0x01, 0x78], &END])),
            says: &["time to live", "length 1"],
        },
        // Chassis ID TLV length is 2..=256: a subtype and 1..=255 octets of ID (8.5.2).
        Bad {
            name: "Chassis ID of length 0",
            frame: frame(src, &cat(&[&[0x02, 0x00], &po, &ttl, &END])),
            says: &["chassis id", "length 0"],
        },
        // End Of LLDPDU is the 2-octet all-zero TLV (8.5.1): a type-0 TLV with a length is not
        // an End and not any other TLV. (lldpad accepts it; systemd-networkd discards it.)
        Bad {
            name: "End TLV of length 2",
            frame: frame(src, &cat(&[&ch, &po, &ttl, &tlv(0, &[0, 0])])),
            says: &["end of lldpdu", "length 2"],
        },
        // Cut in the middle of an ETS Configuration TLV (25 octets declared: OUI 00-80-c2,
        // subtype 9, then 21 octets; 10 present): runs past the end as the first frame.
        Bad {
            name: "cut inside the ETS Configuration TLV",
            frame: frame(
                src,
                &cat(&[
                    &ch,
                    &po,
                    &ttl,
                    &desc,
                    &tlv_header(127, 25),
                    &[0x00, 0x80, 0xc2, 0x09, 0x08, 0x00, 0x01, 0x23, 0x45, 0x67],
                ]),
            ),
            says: &["type 127", "declares 25", "only 10"],
        },
        // 1514-octet frame, garbage after valid mandatory TLVs: a TLV runs past the end.
        Bad {
            name: "1514 octets of garbage after the mandatory TLVs",
            frame: frame(src, &garbage),
            says: &["declares 421"],
        },
    ]
}

/// A valid LLDPDU that is unusual: no End TLV (optional since 802.1AB-2009, 8.4), a TLV of the
/// reserved type 9 and an organizationally specific TLV of an unknown OUI (both kept as
/// unrecognized, not errors), with `who`'s identity and a marker system name.
fn unusual_but_valid(src: &str, who: &Sender, marker: &str) -> Vec<u8> {
    let pdu = cat(&[
        &chassis_tlv(&who.chassis_mac),
        &port_tlv(&who.port_id),
        &ttl_tlv(who.ttl),
        &tlv(5, marker.as_bytes()),
        &tlv(9, b"reserved type"),
        &tlv(127, &[0xac, 0xde, 0x48, 0x01, 0xff, 0xff]),
        &tlv(4, b"padding the frame past 60 octets so nothing follows the last TLV"),
    ]);
    let f = frame(src, &pdu);
    assert_eq!(f.len(), 14 + pdu.len(), "no padding: the LLDPDU really ends without an End TLV");
    f
}

/// The pid of the one process whose command line contains `needle`.
fn pid_of(needle: &str) -> u32 {
    match pids_with_cmdline(needle)[..] {
        [p] => p,
        ref v => panic!("processes with {needle:?} in their command line: {v:?}"),
    }
}

fn alive(pid: u32) -> bool {
    // A zombie has an empty command line.
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
}

/// Sends the malformed set from `sender` (whose frames carry `src`) to `rx`, whose neighbour
/// is `peer`; checks each frame is counted once with a reason, the neighbour stays and an
/// unusual valid LLDPDU is accepted. Returns how many frames were malformed.
fn inject(rx: &AgentPort, sender: &mut Sendp, src: &str, peer: &Sender) -> u64 {
    let before = rx.row();
    assert!(neighbour_is(&before, peer), "{}: neighbour before: {before:#}", rx.what);
    let bad = malformed(src);
    let mut malformed_seen = counter(&before, "rx_malformed");
    for b in &bad {
        sender.send(&b.frame);
        let r = rx.until(
            &format!("counting {:?} ({} octets) as malformed", b.name, b.frame.len()),
            Duration::from_secs(3),
            |r| counter(r, "rx_malformed") > malformed_seen,
        );
        malformed_seen += 1;
        assert_eq!(
            counter(&r, "rx_malformed"),
            malformed_seen,
            "{}: {:?} counted more than once: {r:#}",
            rx.what,
            b.name
        );
        let why = r["last_error"].as_str().unwrap_or_default().to_lowercase();
        for w in b.says {
            assert!(why.contains(w), "{}: {:?}: last_error {why:?} does not say {w:?}", rx.what, b.name);
        }
        assert!(neighbour_is(&r, peer), "{}: neighbour after {:?}: {r:#}", rx.what, b.name);
    }

    // An unusual but valid LLDPDU from the neighbour's identity is accepted (the marker system
    // name shows until the neighbour's next real LLDPDU replaces it; retried if that came
    // first) and not counted as malformed.
    let marker = format!("probe-{}", rx.port);
    let mut seen = false;
    for _ in 0..3 {
        sender.send(&unusual_but_valid(src, peer, &marker));
        let end = Instant::now() + Duration::from_millis(800);
        while !seen && Instant::now() < end {
            let r = rx.row();
            seen = r["neighbour"]["system_name"] == marker.as_str()
                && r["neighbour"]["chassis_mac"] == peer.chassis_mac.as_str();
            std::thread::sleep(Duration::from_millis(5));
        }
        if seen {
            break;
        }
    }
    assert!(
        seen,
        "{}: the LLDPDU without End TLV, with reserved and unknown TLVs, was not accepted: {:#}",
        rx.what,
        rx.row()
    );

    // Nothing more is counted, and the neighbour is the real one again. The agent handles
    // LLDPDUs in arrival order and the marker, the last frame sent, was seen: every frame the
    // test sent has been counted by now, and the real neighbour shows again once its next
    // LLDPDU came after the marker.
    let after = rx.until("the neighbour's next LLDPDU", Duration::from_secs(3), |r| neighbour_is(r, peer));
    assert_eq!(
        counter(&after, "rx_malformed"),
        counter(&before, "rx_malformed") + bad.len() as u64,
        "{}: {after:#}",
        rx.what
    );
    assert_eq!(counter(&after, "neighbour_changes"), counter(&before, "neighbour_changes"), "{}: {after:#}", rx.what);
    assert_eq!(counter(&after, "ageouts"), counter(&before, "ageouts"), "{}: {after:#}", rx.what);
    bad.len() as u64
}

#[test]
fn malformed_lldpdus_are_counted_and_the_neighbour_kept() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfl5", LLDP_FAST);
    let (sw, nic) = wait_for_adjacency(&f);
    let (sw_id, nic_id) = (switch_port(&f, "rail1", "host1:gpu0"), nic_port(&f, "host1", "gpu0"));
    let switchd = pid_of(&format!("{}/rail1.json", run_dir(&f.name).display()));
    let nicd = pid_of(&format!("{}/host1.nicd.json", run_dir(&f.name).display()));
    let sw_m0 = scrape(sw.addr);

    // host1 → rail1: sent on gpu0 in host1's namespace, received by rail1's XDP program and
    // handed to the switch's agent.
    let mut from_host = Sendp::start(&f.netns("host1"), "gpu0");
    let n_sw = inject(&sw, &mut from_host, &nic_id.src_mac, &nic_id);
    // rail1 → host1: sent on rail1's port in rail1's namespace (AF_PACKET transmit leaves
    // through the veth, past XDP), received by the NIC agent's AF_PACKET socket.
    let mut from_switch = Sendp::start(&f.netns("rail1"), &sw_id.port_id);
    let n_nic = inject(&nic, &mut from_switch, &sw_id.src_mac, &sw_id);

    // Both daemons are the same processes and still answer.
    assert!(
        alive(switchd) && alive(nicd),
        "switchd {switchd} alive {}, nicd {nicd} alive {}",
        alive(switchd),
        alive(nicd)
    );
    assert_eq!(pid_of(&format!("{}/rail1.json", run_dir(&f.name).display())), switchd);
    assert_eq!(pid_of(&format!("{}/host1.nicd.json", run_dir(&f.name).display())), nicd);

    // Valid LLDPDUs keep being accepted on both sides.
    for a in [&sw, &nic] {
        let r0 = counter(&a.row(), "rx_frames");
        a.until("accepting valid LLDPDUs again", Duration::from_secs(5), |r| counter(r, "rx_frames") >= r0 + 2);
    }

    // The metrics agree with the JSON; every frame reached the switch's agent.
    let (sw_m, nic_m) = (scrape(sw.addr), scrape(nic.addr));
    let sw_row = sw.row();
    assert_eq!(sw.metric(&sw_m, "rocefab_lldp_rx_malformed_total", &[]), n_sw as f64);
    assert_eq!(counter(&sw_row, "rx_malformed"), n_sw);
    assert_eq!(nic.metric(&nic_m, "rocefab_lldp_rx_malformed_total", &[]), n_nic as f64);
    assert_eq!(counter(&nic.row(), "rx_malformed"), n_nic);
    assert_eq!(sw.metric(&sw_m, "rocefab_lldp_neighbors", &[]), 1.0);
    assert_eq!(nic.metric(&nic_m, "rocefab_lldp_neighbors", &[]), 1.0);
    let port_rx = |m: &str| sw.metric(m, "rocefab_port_rx_lldp_total", &[]);
    assert!(port_rx(&sw_m) - port_rx(&sw_m0) >= (n_sw + 1) as f64, "the daemon saw every injected frame");
    assert_eq!(sw.series(&sw_m, "rocefab_port_rx_lldp_dropped_total", &[]), 0.0);
    // The other ports of rail1 saw none of it.
    let other = AgentPort::switch(&f, "rail1", "host2:gpu0");
    assert_eq!(counter(&other.row(), "rx_malformed"), 0);
}

/// 802.1AB-2016 (8.2, 9.2.7.7.1): an LLDPDU carries exactly one Chassis ID, one Port ID and one
/// TTL TLV; one with a second is discarded (lldpad: "Extra Type 1 Type2, or Type 3 TLV",
/// systemd-networkd: "Duplicate chassis ID field, ignoring datagram"): counted as malformed,
/// and the neighbour stays who it was.
#[test]
fn duplicate_mandatory_tlvs_are_discarded() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfl6", LLDP_FAST);
    let (sw, _) = wait_for_adjacency(&f);
    let nic_id = nic_port(&f, "host1", "gpu0");
    let mut from_host = Sendp::start(&f.netns("host1"), "gpu0");
    let before = sw.row();
    let (ch, po, ttl) = (chassis_tlv(STRANGER_CHASSIS), port_tlv(STRANGER_PORT), ttl_tlv(120));
    from_host.send(&frame(&nic_id.src_mac, &cat(&[&ch, &po, &ttl, &chassis_tlv("00:00:5e:00:53:02"), &END])));
    from_host.send(&frame(&nic_id.src_mac, &cat(&[&ch, &po, &ttl, &ttl_tlv(0), &END])));
    let r = sw.until("discarding both", Duration::from_secs(3), |r| {
        counter(r, "rx_malformed") >= counter(&before, "rx_malformed") + 2
    });
    assert!(neighbour_is(&r, &nic_id), "{r:#}");
}

// ---------------------------------------------------------------------------------------------
// Shutdown LLDPDU
// ---------------------------------------------------------------------------------------------

#[test]
fn a_stopped_nic_agent_sends_a_shutdown_lldpdu_and_the_switch_forgets_it_at_once() {
    tools();
    // A TTL of 30 s: the neighbour must go long before it would age out.
    let f = Fabric::up_with("rail-spine.yaml", "rfl7", "lldp:\n  tx_interval: 1s\n  ttl: 30s\n");
    let ports = [AgentPort::switch(&f, "rail1", "host2:gpu0"), AgentPort::switch(&f, "rail2", "host2:gpu1")];
    let nics = [nic_port(&f, "host2", "gpu0"), nic_port(&f, "host2", "gpu1")];
    let before: Vec<Value> = ports
        .iter()
        .zip(&nics)
        .map(|(p, n)| p.until("learning host2", Duration::from_secs(10), |r| neighbour_is(r, n)))
        .collect();
    let host1 = AgentPort::switch(&f, "rail1", "host1:gpu0");
    host1.until("learning host1", Duration::from_secs(10), |r| r["neighbour"].is_object());

    let pcap = TempFile::new("rf-h-lldp-rfl7-shutdown.pcap");
    let mut cap = start_capture_in(&f.netns("host2"), "gpu0", &pcap, "ether proto 0x88cc", 0, 1000, 4);
    let nicd = pid_of(&format!("{}/host2.nicd.json", run_dir(&f.name).display()));
    // SAFETY: kill(2) on the NIC agent's pid, found by its config path in its command line.
    assert_eq!(unsafe { libc::kill(nicd as i32, libc::SIGTERM) }, 0, "kill -TERM {nicd}");
    let t0 = Instant::now();
    for (p, b) in ports.iter().zip(&before) {
        let r =
            p.until("dropping host2 after its shutdown LLDPDU", Duration::from_secs(2), |r| r["neighbour"].is_null());
        assert!(t0.elapsed() < Duration::from_secs(2), "{}: {:?}", p.what, t0.elapsed());
        assert_eq!(counter(&r, "rx_shutdown"), counter(b, "rx_shutdown") + 1, "{}: {r:#}", p.what);
        assert_eq!(
            counter(&r, "ageouts"),
            counter(b, "ageouts"),
            "{}: removed by the shutdown, not aged out: {r:#}",
            p.what
        );
        let m = scrape(p.addr);
        assert_eq!(p.series(&m, "rocefab_lldp_neighbors", &[]), 0.0, "{}", p.what);
        assert_eq!(p.series(&m, "rocefab_lldp_ageouts_total", &[]), 0.0, "{}", p.what);
    }
    let end = Instant::now() + Duration::from_secs(3);
    while alive(nicd) {
        assert!(Instant::now() < end, "rocefab-nicd {nicd} still running 3 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Others keep their neighbour.
    assert!(host1.row()["neighbour"].is_object(), "rail1's port to host1 lost its neighbour");

    // The shutdown LLDPDU on the wire: the NIC's identity with TTL 0.
    cap.wait(Duration::from_secs(10));
    let fields: Vec<String> =
        ["eth.src", "lldp.chassis.id.mac", "lldp.port.id", "lldp.time_to_live"].iter().map(|s| s.to_string()).collect();
    let frames = tshark_decode(&pcap, &fields);
    let shutdown: Vec<&Fields> = frames
        .iter()
        .filter(|fr| one(fr, "eth.src") == nics[0].src_mac && num(one(fr, "lldp.time_to_live")) == 0)
        .collect();
    assert_eq!(shutdown.len(), 1, "shutdown LLDPDUs from host2:gpu0: {frames:?}");
    assert_eq!(one(shutdown[0], "lldp.chassis.id.mac"), nics[0].chassis_mac);
    assert_eq!(one(shutdown[0], "lldp.port.id"), "gpu0");
}

// ---------------------------------------------------------------------------------------------
// lldpd beside (or instead of) the NIC agent
// ---------------------------------------------------------------------------------------------

/// lldpd in the foreground (`-d`) in a host's namespace, on one interface (`-I`, and `-C` so
/// its Chassis ID is that interface's MAC), its control socket and configuration (LLDPDUs every
/// second, TTL 4 s) in a private directory; stopped by its pid (SIGTERM, then SIGKILL: Proc's
/// drop) and the directory removed on drop, also when the test panics.
struct Lldpd {
    proc: Option<Proc>,
    ns: String,
    dir: TempDir,
}

impl Lldpd {
    fn start(ns: &str, ifname: &str, tag: &str) -> Lldpd {
        require_tool("lldpd", &["-v"]);
        let dir = temp_dir(&format!("rf-h-lldpd-{tag}-"));
        std::fs::write(dir.path().join("lldpd.conf"), "configure lldp tx-interval 1\nconfigure lldp tx-hold 4\n")
            .expect("lldpd.conf");
        let log = std::fs::File::create(dir.path().join("lldpd.log")).expect("lldpd log");
        let proc = Proc::spawn(
            "lldpd",
            Command::new("ip")
                .args(["netns", "exec", ns, "lldpd", "-d", "-I", ifname, "-C", ifname, "-u"])
                .arg(dir.path().join("lldpd.sock"))
                .arg("-O")
                .arg(dir.path().join("lldpd.conf"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log),
        );
        let mut l = Lldpd { proc: Some(proc), ns: ns.to_string(), dir };
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let (ok, out, _) = l.cli(&["show", "configuration"]);
            if ok && out.contains("Transmit delay: 1") {
                break;
            }
            if let Some(Ok(Some(st))) = l.proc.as_mut().map(|p| p.child.try_wait()) {
                panic!("lldpd exited ({st}): {}", l.log());
            }
            assert!(Instant::now() < end, "lldpd did not take its configuration within 10 s: {out}\nlog: {}", l.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        l
    }

    /// `lldpcli -u SOCK args` in the namespace: (success, stdout, stderr).
    fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.ns, "lldpcli", "-u"])
            .arg(self.dir.path().join("lldpd.sock"))
            .args(args)
            .output()
            .expect("lldpcli");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// The neighbours lldpd knows, as `lldpcli show neighbors -f keyvalue` lines, polled until
    /// one contains `needle`.
    fn neighbours_until(&self, needle: &str) -> String {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let (ok, out, err) = self.cli(&["-f", "keyvalue", "show", "neighbors"]);
            if ok && out.contains(needle) {
                return out;
            }
            assert!(
                Instant::now() < end,
                "lldpcli show neighbors: no {needle:?} within 10 s: {out} {err}\nlog: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("lldpd.log")).unwrap_or_default()
    }

    /// Its pid (the one `ip netns exec` became).
    fn pid(&self) -> u32 {
        self.proc.as_ref().expect("running").child.id()
    }

    /// Stops it now (SIGTERM, up to 3 s, SIGKILL, reaped).
    fn stop(&mut self) {
        drop(self.proc.take());
    }
}

impl Drop for Lldpd {
    fn drop(&mut self) {
        self.stop();
        // `dir` is removed after this.
    }
}

/// What `rocefab lldp --check --json` says: (exit code, the results).
fn lldp_check(args: &[&str]) -> (i32, Vec<Value>) {
    let mut a = vec!["lldp"];
    a.extend_from_slice(args);
    a.extend(["--check", "--json"]);
    let o = rocefab_tests::fabric::rocefab(&a);
    let v: Vec<Value> = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("rocefab {a:?}: {e}: {}", String::from_utf8_lossy(&o.stdout)));
    (o.status.code().unwrap_or(-1), v)
}

/// The `--check` result of the link with end `end`.
fn link_result<'a>(results: &'a [Value], end: &str) -> &'a Value {
    results.iter().find(|r| r["a"] == end || r["b"] == end).unwrap_or_else(|| panic!("no link at {end}: {results:?}"))
}

/// Whether a neighbour entry is lldpd on a NIC with MAC `mac`: Chassis ID and Port ID the MAC.
fn is_lldpd(n: &Value, mac: &str) -> bool {
    n["chassis_mac"] == mac && n["port"] == mac
}

#[test]
fn lldpd_beside_the_nic_agent_is_a_second_neighbour_and_the_check_stays_stable() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfl8", LLDP_FAST);
    let (sw, nic) = wait_for_adjacency(&f);
    let nic_id = nic_port(&f, "host1", "gpu0");
    let mac = nic_id.chassis_mac.clone();
    let before = sw.row();
    assert_eq!(before["neighbours"].as_array().map(Vec::len), Some(1), "{before:#}");

    let mut lldpd = Lldpd::start(&f.netns("host1"), "gpu0", "rfl8");
    // The oracle's side: lldpd hears rail1's port (the switch keeps its agent).
    let seen = lldpd.neighbours_until("chassis.name=rail1");
    assert!(seen.contains(&format!("lldp.gpu0.port.ifname={}", sw.port)), "{seen}");

    // The switch port keeps both: rocefab-nicd's entry and lldpd's.
    let r = sw.until("learning lldpd beside host1:gpu0", Duration::from_secs(10), |r| {
        r["neighbours"].as_array().is_some_and(|v| v.len() == 2 && v.iter().any(|n| is_lldpd(n, &mac)))
    });
    assert!(neighbour_is(&r, &nic_id), "DCBX stays with the expected neighbour: {r:#}");
    let m = scrape(sw.addr);
    assert_eq!(sw.metric(&m, "rocefab_lldp_neighbors", &[]), 2.0, "{}", sw.what);
    promtool_check("rail1 metrics with two neighbours", &m);

    // Over 5 s (five transmit intervals of each agent, both at 1 s): every look at the table
    // and every --check is the same; the expected neighbour never flips.
    let changes = counter(&r, "neighbour_changes");
    let end = Instant::now() + Duration::from_secs(5);
    let mut looks = 0;
    while Instant::now() < end {
        let r = sw.row();
        let v = r["neighbours"].as_array().expect("neighbours");
        assert_eq!(v.len(), 2, "{}: {r:#}", sw.what);
        assert!(v.iter().any(|n| is_lldpd(n, &mac)) && neighbour_is(&r, &nic_id), "{}: {r:#}", sw.what);
        let (code, results) = lldp_check(&[&f.name, "host1"]);
        let l = link_result(&results, "host1:gpu0");
        assert_eq!(l["status"], "extra_neighbour", "{results:#?}");
        let d = l["details"].as_array().expect("details");
        assert_eq!(d.len(), 1, "{l:#}");
        assert!(d[0].as_str().unwrap().contains(&format!(":{mac} (chassis {mac})")), "{l:#}");
        assert_eq!(link_result(&results, "host1:gpu1")["status"], "ok", "{results:#?}");
        assert_eq!(code, 1, "an extra neighbour makes --check fail");
        looks += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(looks >= 5, "{looks} looks in 5 s");
    assert_eq!(counter(&sw.row(), "neighbour_changes"), changes, "the primary neighbour never changed");
    // The NIC agent is not disturbed: it hears rail1 only (its own lldpd's frames leave the NIC).
    let n = nic.row();
    assert_eq!(n["neighbours"].as_array().map(Vec::len), Some(1), "{n:#}");

    // `rocefab lldp` text shows both.
    let o = rocefab_tests::fabric::rocefab(&["lldp", &f.name, "rail1"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    let block: Vec<&str> =
        text.lines().skip_while(|l| !l.starts_with(&format!("rail1 {} -> host1 gpu0 ", sw.port))).collect();
    assert!(block.len() > 3, "{text}");
    let h = hostname();
    assert!(block.iter().any(|l| l.starts_with(&format!("  also -> {h} {mac} (chassis {mac}, ttl "))), "{text}");

    // lldpd stops (by its pid): its entry goes (shutdown LLDPDU, or its 4 s TTL) and the
    // check is clean again.
    let pid = lldpd.pid();
    lldpd.stop();
    assert!(!alive(pid), "lldpd {pid} still running");
    let r = sw
        .until("dropping lldpd", Duration::from_secs(6), |r| r["neighbours"].as_array().is_some_and(|v| v.len() == 1));
    assert!(neighbour_is(&r, &nic_id), "{r:#}");
    assert_eq!(sw.metric(&scrape(sw.addr), "rocefab_lldp_neighbors", &[]), 1.0);
    let (code, results) = lldp_check(&[&f.name, "host1"]);
    assert_eq!((code, &link_result(&results, "host1:gpu0")["status"]), (0, &Value::from("ok")), "{results:#?}");
}

/// Another DCBX agent on host1's link (scapy: a stranger's MSAP, not willing, PFC on priority 5
/// only) while rocefab-nicd runs. The stranger is made the oldest entry (a spoofed shutdown
/// LLDPDU removes the NIC agent's entry; its next LLDPDU brings it back): the switch port still
/// takes DCBX from the neighbour the topology cables it to, not from the older stranger, so no
/// PFC mismatch is reported, and `--check` says "extra neighbour", not "DCBX mismatch".
#[test]
fn the_switch_port_takes_dcbx_from_the_cabled_neighbour_among_several() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rflb", LLDP_FAST);
    let (sw, _) = wait_for_adjacency(&f);
    let nic_id = nic_port(&f, "host1", "gpu0");
    let mut tx = Sendp::start(&f.netns("host1"), "gpu0");
    // PFC Configuration (802.1Qaz, OUI 00-80-c2 subtype 11): not willing, capability 8, {5}.
    let pfc5 = tlv(127, &[0x00, 0x80, 0xc2, 0x0b, 0x08, 1 << 5]);
    let stranger = frame(
        STRANGER_CHASSIS,
        &cat(&[&chassis_tlv(STRANGER_CHASSIS), &port_tlv("dcbx0"), &ttl_tlv(30), &tlv(5, b"intruder"), &pfc5, &END]),
    );
    let shutdown =
        frame(&nic_id.src_mac, &cat(&[&chassis_tlv(&nic_id.chassis_mac), &port_tlv("gpu0"), &ttl_tlv(0), &END]));
    tx.send(&stranger);
    sw.until("learning the stranger", Duration::from_secs(3), |r| {
        r["neighbours"].as_array().is_some_and(|v| v.len() == 2)
    });
    tx.send(&shutdown);
    // Alone in the table, the stranger is the primary neighbour: its PFC {5} is a mismatch.
    let r = sw.until("the stranger alone", Duration::from_secs(3), |r| {
        r["neighbours"].as_array().is_some_and(|v| v.len() == 1)
    });
    assert_eq!(r["neighbour"]["system_name"], "intruder", "{r:#}");
    assert!(r["mismatches"].as_array().unwrap().iter().any(|m| m["kind"] == "pfc"), "{r:#}");
    // The NIC agent's next LLDPDU (1 s) brings it back, younger than the stranger.
    let r = sw.until("the NIC agent back", Duration::from_secs(3), |r| {
        r["neighbours"].as_array().is_some_and(|v| v.len() == 2)
    });
    assert!(neighbour_is(&r, &nic_id), "the cabled neighbour, though younger, is the one DCBX acts on: {r:#}");
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        tx.send(&stranger);
        let r = sw.row();
        assert!(neighbour_is(&r, &nic_id), "{r:#}");
        assert_eq!(r["mismatches"].as_array().map(Vec::len), Some(0), "{r:#}");
        assert_eq!(r["oper"]["pfc_enable"], 1 << 3, "{r:#}");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(sw.series(&scrape(sw.addr), "rocefab_dcbx_mismatch", &[("kind", "pfc")]), 0.0);
    let (code, results) = lldp_check(&[&f.name, "host1"]);
    let l = link_result(&results, "host1:gpu0");
    assert_eq!(l["status"], "extra_neighbour", "{results:#?}");
    assert!(
        l["details"][0].as_str().unwrap().contains(&format!("intruder:dcbx0 (chassis {STRANGER_CHASSIS})")),
        "{l:#}"
    );
    assert_eq!(code, 1);
}

/// `rocefab status --json`'s Prometheus configuration: `promtool check config` accepts it as
/// prometheus.yml's scrape_configs, its targets are every daemon (4 switch daemons, 4 NIC
/// agents), and each one answers with metrics promtool accepts.
#[test]
fn status_lists_every_metrics_url_and_prometheus_accepts_the_config() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfla", LLDP_FAST);
    let o = rocefab_tests::fabric::rocefab(&["status", &f.name, "--json"]);
    assert!(o.status.success());
    let st: Value = serde_json::from_slice(&o.stdout).expect("status --json");
    let urls: Vec<String> =
        st["metrics_urls"].as_array().expect("metrics_urls").iter().map(|u| u.as_str().unwrap().to_string()).collect();
    assert_eq!(urls.len(), 8, "{urls:?}");
    let mut want: Vec<String> = ["rail1", "rail2", "spine1", "spine2"]
        .iter()
        .map(|s| format!("http://{}/metrics", f.config(s).metrics_listen))
        .collect();
    want.extend(["host1", "host2", "host3", "host4"].iter().map(|h| format!("http://{}/metrics", f.nicd_addr(h))));
    assert_eq!(urls, want);
    // Text form: every URL on a target line.
    let text = String::from_utf8_lossy(&rocefab_tests::fabric::rocefab(&["status", &f.name]).stdout).into_owned();
    for u in &urls {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with("rocefab-") && l.trim_end().ends_with(u.as_str())),
            "{u}: {text}"
        );
    }
    // prometheus.yml from the JSON (JSON is YAML), checked by promtool.
    let cfg = TempFile::new("rf-h-lldp-rfla-prometheus.yml");
    let yml = serde_json::json!({ "global": { "scrape_interval": "15s" }, "scrape_configs": st["prometheus_static_configs"] });
    std::fs::write(cfg.path(), serde_json::to_string_pretty(&yml).unwrap()).unwrap();
    let o = Command::new("promtool").arg("check").arg("config").arg(cfg.path()).output().expect("promtool");
    assert!(
        o.status.success(),
        "promtool check config: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut targets = Vec::new();
    for job in st["prometheus_static_configs"].as_array().unwrap() {
        for sc in job["static_configs"].as_array().unwrap() {
            targets.push(sc["targets"][0].as_str().unwrap().to_string());
        }
    }
    assert_eq!(targets.iter().map(|t| format!("http://{t}/metrics")).collect::<Vec<_>>(), urls);
    for t in &targets {
        let m = scrape(t.parse().expect("host:port"));
        promtool_check(t, &m);
        assert!(m.contains("rocefab_lldp_neighbors{"), "{t}: no LLDP metrics");
    }
}

#[test]
fn with_the_nic_agents_off_the_switch_sees_the_hosts_own_lldpd() {
    tools();
    let f = Fabric::up_with("rail-spine.yaml", "rfl9", "lldp:\n  tx_interval: 1s\n  ttl: 4s\n  nic_agent: false\n");
    assert!(!run_dir(&f.name).join("host1.nicd.json").exists(), "no NIC agent configuration");
    assert!(
        pids_with_cmdline(&format!("{}/host1.nicd.json", run_dir(&f.name).display())).is_empty(),
        "no rocefab-nicd runs"
    );
    let st = rocefab_tests::fabric::rocefab(&["status", &f.name]);
    assert!(!String::from_utf8_lossy(&st.stdout).contains("NIC agents"), "{}", String::from_utf8_lossy(&st.stdout));
    let sw = AgentPort::switch(&f, "rail1", "host1:gpu0");
    let sw_id = switch_port(&f, "rail1", "host1:gpu0");
    let mac =
        String::from_utf8_lossy(&f.exec("host1", &["cat", "/sys/class/net/gpu0/address"]).stdout).trim().to_string();

    // Nothing on the host speaks LLDP yet: the switch port has no neighbour, and --check says
    // why.
    let (code, results) = lldp_check(&[&f.name, "host1"]);
    let l = link_result(&results, "host1:gpu0");
    assert_eq!(code, 1);
    assert_eq!(l["status"], "missing_neighbour", "{l:#}");
    assert!(l["also"].to_string().contains("runs no rocefab NIC agent (lldp.nic_agent: false)"), "{l:#}");

    let lldpd = Lldpd::start(&f.netns("host1"), "gpu0", "rfl9");
    let seen = lldpd.neighbours_until("chassis.name=rail1");
    assert!(seen.contains(&format!("lldp.gpu0.chassis.mac={}", sw_id.chassis_mac)), "{seen}");
    let r = sw.until("learning the host's lldpd", Duration::from_secs(10), |r| {
        r["neighbours"].as_array().is_some_and(|v| v.iter().any(|n| is_lldpd(n, &mac)))
    });
    assert_eq!(r["neighbours"].as_array().map(Vec::len), Some(1), "{r:#}");
    assert_eq!(sw.metric(&scrape(sw.addr), "rocefab_lldp_neighbors", &[]), 1.0);
    assert_eq!(r["oper"]["pfc_from"], "local", "lldpd sends no DCBX: the switch keeps its own settings");

    let (code, results) = lldp_check(&[&f.name, "host1"]);
    assert_eq!(link_result(&results, "host1:gpu0")["status"], "ok", "{results:#?}");
    assert_eq!(code, 1, "host1:gpu1 has no agent speaking: {results:#?}");
    assert_eq!(link_result(&results, "host1:gpu1")["status"], "missing_neighbour", "{results:#?}");
    let o = rocefab_tests::fabric::rocefab(&["lldp", &f.name, "rail1"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("rail1 {} -> {} {mac} (chassis {mac}, ttl ", sw.port, hostname())), "{text}");
    // Asked for host1 itself, `rocefab lldp` shows the switch ports cabled to it.
    let o = rocefab_tests::fabric::rocefab(&["lldp", &f.name, "host1"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("host1 runs no NIC agent (lldp.nic_agent: false)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ports: Vec<&str> = text.lines().filter(|l| l.contains(" -> ")).collect();
    assert_eq!(ports.len(), 2, "rail1's and rail2's ports to host1: {text}");
    assert!(text.contains(&format!("rail1 {} -> {} {mac} ", sw.port, hostname())), "{text}");
    assert!(text.contains(&format!("rail2 {} -> no neighbour", f.port_to("rail2", "host1:gpu1"))), "{text}");
}

/// This machine's host name (what lldpd puts in System Name: the namespaces share the UTS
/// namespace).
fn hostname() -> String {
    String::from_utf8_lossy(&Command::new("hostname").output().expect("hostname").stdout).trim().to_string()
}
