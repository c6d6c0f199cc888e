//! LLDP/DCBX on the controller side: the topology's `lldp:` section, what the plan gives the
//! switches and NIC agents, `rocefab lldp` rendering and the `--check` comparison, on neighbour
//! tables made by real agents exchanging real LLDPDUs (no daemons, no privileges).
use std::collections::BTreeSet;
use std::path::Path;

use control::cmd::lldp::{render_check, render_node};
use control::cmd::plan::render_plan;
use control::fabric::cabling::{check_links, LinkEnd, LinkStatus};
use control::plan::compile;
use control::topology::Topology;
use lldp_agent::{Dcb, Identity, NodeReport, PortAgent, Timing};
use rocefab_contracts::config::LldpConfig;
use rocefab_contracts::job::NicClasses;

const GOOD: &str = "\
fabric: t
hosts:
  count: 2
  gpus_per_host: 2
  nic: per-gpu
switches:
  rail:
    - name: rail1
      rails: [1]
    - name: rail2
      rails: [2]
  spine:
    - name: spine1
";

fn err(src: &str) -> String {
    let e = Topology::parse(src, Path::new("topologies/bad.yaml")).expect_err("must be rejected").to_string();
    assert!(!e.contains('\n'), "error is one line: {e}");
    e
}

// ---------------------------------------------------------------------------------------------
// Topology section

#[test]
fn lldp_defaults() {
    let t = Topology::parse(GOOD, Path::new("t.yaml")).unwrap();
    assert_eq!(t.lldp.config, LldpConfig::default());
    assert_eq!(
        t.lldp.config,
        LldpConfig { enabled: true, tx_interval_ms: 30_000, ttl_s: 120, fast_interval_ms: 1_000, fast_count: 4 }
    );
    assert!(t.lldp.nic.willing);
    assert_eq!(t.lldp.nic.pfc_enable, 1 << 3);
    assert_eq!(t.lldp.nic.classes(), NicClasses::default());
}

#[test]
fn lldp_every_key() {
    let src = format!(
        "{GOOD}lldp:\n  enabled: true\n  tx_interval: 5s\n  ttl: 20s\n  fast_interval: 250ms\n  fast_count: 3\n  nic:\n    willing: false\n    pfc: [4, 5]\n    roce_dscp: 26\n    roce_priority: 4\n    cnp_dscp: 46\n    cnp_priority: 6\n"
    );
    let t = Topology::parse(&src, Path::new("t.yaml")).unwrap();
    assert_eq!(
        t.lldp.config,
        LldpConfig { enabled: true, tx_interval_ms: 5_000, ttl_s: 20, fast_interval_ms: 250, fast_count: 3 }
    );
    let n = t.lldp.nic;
    assert_eq!(
        (n.willing, n.pfc_enable, n.roce_dscp, n.roce_priority, n.cnp_dscp, n.cnp_priority),
        (false, 0b11_0000, 26, 4, 46, 6)
    );
    assert_eq!(
        n.classes(),
        NicClasses { data_dscp: 26, data_priority: 4, cnp_dscp: 46, cnp_priority: 6, pfc_enable: 0b11_0000 }
    );
    assert_eq!(n.dcb(), Dcb::nic(false, 0b11_0000, 26, 4, 46, 6));
}

#[test]
fn lldp_errors_name_file_line_field() {
    let with = |l: &str| format!("{GOOD}lldp:\n{l}");
    let e = err(&with("  ttl: 10s\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: lldp.ttl: ttl 10 s is not longer than tx_interval 30 s"), "{e}");
    let e = err(&with("  enabled: true\n  ttl: 70000s\n"));
    assert!(e.starts_with("topologies/bad.yaml:16: lldp.ttl: "), "{e}");
    assert!(e.contains("65535s"), "{e}");
    let e = err(&with("  ttl: 120\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: lldp.ttl: "), "{e}");
    assert!(e.contains("needs a unit"), "{e}");
    let e = err(&with("  tx_interval: 250us\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: lldp.tx_interval: "), "{e}");
    let e = err(&with("  fast_count: 20\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: lldp.fast_count: 20: expected 0..=8"), "{e}");
    let e = err(&with("  nic:\n    willing: true\n    roce_dscp: 64\n"));
    assert!(e.starts_with("topologies/bad.yaml:17: lldp.nic.roce_dscp: DSCP 64 does not exist"), "{e}");
    let e = err(&with("  nic:\n    pfc: [3, 9]\n"));
    assert!(e.starts_with("topologies/bad.yaml:16: lldp.nic.pfc: priority 9 does not exist"), "{e}");
    let e = err(&with("  nic:\n    roce_priority: 5\n"));
    assert!(
        e.starts_with("topologies/bad.yaml:16: lldp.nic.roce_priority: RoCEv2 priority 5 is not PFC-enabled (pfc {3})"),
        "{e}"
    );
    let e = err(&with("  nic:\n    cnp_dscp: 24\n"));
    assert!(e.starts_with("topologies/bad.yaml:16: lldp.nic.cnp_dscp: RoCEv2 and CNPs both use DSCP 24"), "{e}");
    let e = err(&with("  nic:\n    cnp_priority: x\n"));
    assert!(e.starts_with("topologies/bad.yaml:16: lldp.nic.cnp_priority: "), "{e}");
    let e = err(&with("  interval: 1s\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: lldp: unknown field `interval`"), "{e}");
    let e = err(&with("  nic: { dscp: 1 }\n"));
    assert!(e.contains("lldp.nic: unknown field `dscp`"), "{e}");
}

#[test]
fn metrics_port_base_counts_the_nic_agents() {
    let e = err(&format!("{GOOD}metrics_port_base: 65531\n"));
    assert!(e.contains("metrics_port_base: 65531: need 5 ports"), "{e}");
    let off = format!("{GOOD}metrics_port_base: 65531\nlldp: {{ enabled: false }}\n");
    assert!(Topology::parse(&off, Path::new("t.yaml")).is_ok(), "3 switch ports fit without agents");
}

// ---------------------------------------------------------------------------------------------
// Plan

#[test]
fn plan_gives_switches_lldp_and_a_chassis_mac_and_hosts_an_agent_port() {
    let src = format!("{GOOD}lldp:\n  tx_interval: 10s\n  ttl: 40s\n");
    let t = Topology::parse(&src, Path::new("t.yaml")).unwrap();
    let p = compile(&t, 9400);
    let mut chassis = BTreeSet::new();
    let ports: BTreeSet<_> = p
        .switches
        .iter()
        .flat_map(|s| s.config.ports.iter().map(|q| q.mac))
        .chain(p.hosts.iter().flat_map(|h| h.nics.iter().map(|n| n.mac)))
        .map(|m| m.0)
        .collect();
    for s in &p.switches {
        assert_eq!(s.config.lldp, LldpConfig { tx_interval_ms: 10_000, ttl_s: 40, ..LldpConfig::default() });
        let c = s.config.chassis_mac.expect("every switch has a system MAC");
        assert!(!ports.contains(&c.0), "{}: chassis {c} is a port MAC", s.name);
        assert!(chassis.insert(c.0), "{}: chassis {c} not unique", s.name);
        s.config.validate().unwrap();
    }
    assert_eq!(compile(&t, 9400).switches[0].config.chassis_mac, p.switches[0].config.chassis_mac, "deterministic");
    let listen: Vec<u16> = p.hosts.iter().map(|h| h.agent_listen.port()).collect();
    assert_eq!(listen, [9403, 9404], "after the 3 switch ports");

    let out = render_plan(&t, &p);
    assert!(
        out.contains("lldp on: tx every 10 s, ttl 40 s, fast start 4 x 1 s; GPU NICs advertise willing, pfc {3}, RoCEv2 (udp 4791, dscp 24) -> priority 3, CNP dscp 48 -> priority 7\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "rail1 (rail, seed {:#010x}, metrics 127.0.0.1:9400, chassis {})",
            p.switches[0].config.hash_seed,
            p.switches[0].config.chassis_mac.unwrap()
        )),
        "{out}"
    );
    assert!(out.contains("  host2 NIC agent 127.0.0.1:9404\n"), "{out}");

    let off = Topology::parse(&format!("{GOOD}lldp: {{ enabled: false }}\n"), Path::new("t.yaml")).unwrap();
    let po = compile(&off, 9400);
    assert!(!po.switches[0].config.lldp.enabled);
    let out = render_plan(&off, &po);
    assert!(out.contains("\nlldp off"), "{out}");
    assert!(!out.contains("NIC agent 127."), "{out}");
}

#[test]
fn agent_config_has_every_gpu_nic_with_its_mac_and_the_nic_settings() {
    let src = format!("{GOOD}lldp:\n  nic: {{ willing: false, pfc: [4], roce_dscp: 26, roce_priority: 4 }}\n");
    let t = Topology::parse(&src, Path::new("t.yaml")).unwrap();
    let p = compile(&t, 9400);
    let h = &p.hosts[1];
    let c = control::plan::agent_config(h, &p.links, &t.lldp, h.agent_listen);
    assert_eq!((c.host.as_str(), c.netns.as_deref(), c.listen), ("host2", Some("rf-t-host2"), h.agent_listen));
    assert_eq!(c.lldp, t.lldp.config);
    let names: Vec<_> = c.nics.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["gpu0", "gpu1"]);
    for (a, n) in c.nics.iter().zip(&h.nics) {
        assert_eq!(a.mac, n.mac.to_string());
        assert_eq!(a.dcb, Dcb::nic(false, 1 << 4, 26, 4, 48, 7));
        assert_eq!((a.data_dscp, a.cnp_dscp), (26, 48));
        // The switch port the plan cables the NIC to: DCBX comes from it when the NIC hears several.
        let l = p
            .links
            .iter()
            .find(|l| l.a.node == "host2" && l.a.ifname == n.ifname || l.b.node == "host2" && l.b.ifname == n.ifname)
            .unwrap();
        let sw = if l.a.node == "host2" { &l.b } else { &l.a };
        assert!(sw.node.starts_with("rail"), "{sw:?}");
        assert_eq!(a.peer.as_deref(), Some(format!("{}:{}", sw.node, sw.ifname).as_str()));
    }
    assert_eq!(c.nics[0].peer.as_deref().map(|p| p.split(':').next().unwrap()), Some("rail1"), "gpu0 is on rail 1");
}

// ---------------------------------------------------------------------------------------------
// Neighbour tables made by agents exchanging LLDPDUs

fn agent(node: &str, port: &str, id: u8, dcb: Dcb, bridge: bool) -> PortAgent {
    let mac = [2, 0, 0, 0, id, if bridge { 0 } else { 1 }];
    let ident = Identity {
        chassis_mac: mac,
        mac,
        port: port.into(),
        system_name: node.into(),
        port_description: format!("{node} {port}"),
        bridge,
    };
    PortAgent::new(Timing::default(), ident, dcb, 0)
}

fn switch_dcb(pfc: u8, roce_prio: u8) -> Dcb {
    Dcb::nic(false, pfc, 24, roce_prio, 48, 7)
}

fn nic_dcb() -> Dcb {
    Dcb::nic(true, 1 << 3, 24, 3, 48, 7)
}

/// `to` hears `from`.
fn hear(to: &mut PortAgent, from: &PortAgent) {
    to.on_frame(&from.frame(120), 0);
}

fn node(name: &str, kind: &str, ports: &[&PortAgent]) -> NodeReport {
    NodeReport { node: name.into(), kind: kind.into(), ports: ports.iter().map(|p| p.report(0)).collect() }
}

fn end(s: &str) -> LinkEnd {
    let (n, p) = s.split_once(':').unwrap();
    LinkEnd::new(n, p)
}

/// rail1 with five cabled ports: eth1 ok with host1, eth2 whose host never heard it, eth3
/// hearing spine2 instead of spine1, eth4 with a non-willing host on other priorities, eth5
/// to a host that does not answer.
fn fabric() -> (Vec<(LinkEnd, LinkEnd)>, Vec<NodeReport>) {
    let sw = || switch_dcb(1 << 3, 3);
    let mut r1 = agent("rail1", "eth1", 1, sw(), true);
    let mut r2 = agent("rail1", "eth2", 1, sw(), true);
    let mut r3 = agent("rail1", "eth3", 1, sw(), true);
    let mut r4 = agent("rail1", "eth4", 1, sw(), true);
    let r5 = agent("rail1", "eth5", 1, sw(), true);
    let mut h1 = agent("host1", "gpu0", 11, nic_dcb(), false);
    let h2 = agent("host2", "gpu0", 12, nic_dcb(), false);
    let mut h3 = agent("host3", "gpu0", 13, Dcb::nic(false, 1 << 4, 24, 4, 48, 7), false);
    let mut s1 = agent("spine1", "eth1", 21, sw(), true);
    let s2 = agent("spine2", "eth1", 22, sw(), true);
    hear(&mut r1, &h1);
    hear(&mut h1, &r1);
    hear(&mut r2, &h2); // host2 has not heard rail1 (or it aged out)
    hear(&mut r3, &s2); // miscabled
    hear(&mut s1, &r3);
    hear(&mut r4, &h3);
    hear(&mut h3, &r4);
    let links = vec![
        (end("host1:gpu0"), end("rail1:eth1")),
        (end("host2:gpu0"), end("rail1:eth2")),
        (end("rail1:eth3"), end("spine1:eth1")),
        (end("host3:gpu0"), end("rail1:eth4")),
        (end("host4:gpu0"), end("rail1:eth5")),
    ];
    let reports = vec![
        node("rail1", "switch", &[&r1, &r2, &r3, &r4, &r5]),
        node("spine1", "switch", &[&s1]),
        node("host1", "host", &[&h1]),
        node("host2", "host", &[&h2]),
        node("host3", "host", &[&h3]),
    ];
    (links, reports)
}

#[test]
fn check_finds_ok_missing_miscabled_mismatch_and_silent_nodes() {
    let (links, reports) = fabric();
    let r = check_links(&links, &reports);
    assert_eq!(r[0].status, LinkStatus::Ok);
    assert_eq!(r[1].status, LinkStatus::MissingNeighbour { at: vec!["host2:gpu0".into()], also: vec![] });
    assert_eq!(
        r[2].status,
        LinkStatus::Miscabled { at: "rail1:eth3".into(), expected: "spine1:eth1".into(), found: "spine2:eth1".into() }
    );
    let LinkStatus::DcbxMismatch { details } = &r[3].status else { panic!("{:?}", r[3]) };
    assert!(
        details
            .iter()
            .any(|d| d.starts_with("host3:gpu0: PFC enable differs, neither side willing: local {4} peer {3}")),
        "{details:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d.starts_with("rail1:eth4: PFC enable differs, neither side willing: local {3} peer {4}")),
        "{details:?}"
    );
    // host4's agent is down and rail1 heard nothing (or aged it out): the missing neighbour is
    // the finding, with the silent end noted.
    assert_eq!(
        r[4].status,
        LinkStatus::MissingNeighbour { at: vec!["rail1:eth5".into()], also: vec!["host4 did not answer".into()] }
    );

    let text = render_check(&r);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert_eq!(lines[0], "host1:gpu0         <-> rail1:eth1         ok");
    assert_eq!(lines[1], "host2:gpu0         <-> rail1:eth2         missing neighbour (at host2:gpu0)");
    assert_eq!(lines[2], "rail1:eth3         <-> spine1:eth1        miscabled: expected spine1:eth1, found spine2:eth1 (seen from rail1:eth3)");
    assert!(
        lines[3].starts_with("host3:gpu0         <-> rail1:eth4         DCBX mismatch: host3:gpu0: PFC enable differs"),
        "{}",
        lines[3]
    );
    assert_eq!(
        lines[4],
        "host4:gpu0         <-> rail1:eth5         missing neighbour (at rail1:eth5); host4 did not answer"
    );
    assert_eq!(lines[5], "5 links: 1 ok, 2 missing neighbour, 1 miscabled, 1 DCBX mismatch");

    // host4's agent just died: rail1 still has it (its TTL has not run out), so only the silence
    // is reported.
    let mut fresh = reports.clone();
    let heard = fresh
        .iter()
        .find(|n| n.node == "rail1")
        .unwrap()
        .ports
        .iter()
        .find(|p| p.port == "eth1")
        .unwrap()
        .neighbour
        .clone();
    for n in fresh.iter_mut().filter(|n| n.node == "rail1") {
        for p in n.ports.iter_mut().filter(|p| p.port == "eth5") {
            let mut h = heard.clone().expect("rail1:eth1 has a neighbour");
            h.info.system_name = Some("host4".into());
            p.neighbour = Some(h);
        }
    }
    let r5 = check_links(&links[4..5], &fresh);
    assert_eq!(r5[0].status, LinkStatus::NoData { details: vec!["host4 did not answer".into()] });
    assert!(render_check(&r5).contains("no LLDP data: host4 did not answer"));

    // A port the node does not report, and an all-good fabric's summary.
    let r = check_links(&[(end("host1:gpu7"), end("rail1:eth1"))], &reports);
    // (rail1:eth1 hears host1:gpu0, not the gpu7 this link names: that is the finding.)
    assert_eq!(
        r[0].status,
        LinkStatus::Miscabled { at: "rail1:eth1".into(), expected: "host1:gpu7".into(), found: "host1:gpu0".into() }
    );
    let ok = check_links(&links[..1], &reports);
    assert_eq!(render_check(&ok).lines().last(), Some("1 links: 1 ok"));
    let j = serde_json::to_value(&ok).unwrap();
    assert_eq!(j[0]["status"], "ok");
    assert_eq!(j[0]["a"], "host1:gpu0");
}

#[test]
fn neighbour_table_renders_like_show_lldp_neighbors_detail() {
    let (_, reports) = fabric();
    let rail1 = render_node(&reports[0]);
    let lines: Vec<&str> = rail1.lines().collect();
    assert_eq!(lines[0], "rail1 (switch, chassis 02:00:00:00:01:00): 5 ports, 4 with a neighbour");
    assert_eq!(lines[1], "rail1 eth1 -> host1 gpu0 (chassis 02:00:00:00:0b:01, ttl 120/120 s)");
    assert_eq!(lines[2], "  neighbour DCBX: willing=1 pfc {3} ets prio->tc [0,1,2,3,4,5,6,7] tsa [ets,ets,ets,ets,ets,ets,ets,strict] bw% [50,0,0,50,0,0,0,0] app [udp 4791->3, dscp 24->3, dscp 48->7]");
    assert_eq!(lines[3], "  operational: pfc {3} (local) app (local)");
    assert!(rail1.contains("rail1 eth3 -> spine2 eth1 (chassis 02:00:00:00:16:00, ttl 120/120 s)\n"), "{rail1}");
    assert!(rail1.contains("rail1 eth5 -> no neighbour\n"), "{rail1}");
    assert!(rail1.contains("  neighbour DCBX: willing=0 pfc {4} ets prio->tc [0,1,2,3,4,5,6,7] tsa [ets,ets,ets,ets,ets,ets,ets,strict] bw% [50,0,0,50,0,0,0,0] app [udp 4791->4, dscp 24->4, dscp 48->7]\n"), "{rail1}");
    assert!(rail1.contains("  MISMATCH: PFC enable differs, neither side willing: local {3} peer {4}\n"), "{rail1}");
    assert!(rail1.contains("  MISMATCH: APP table differs, neither side willing: "), "{rail1}");

    // A willing NIC shows what it adopted.
    let host1 = render_node(&reports[2]);
    assert!(
        host1.starts_with(
            "host1 (host, chassis 02:00:00:00:0b:01): 1 ports, 1 with a neighbour\nhost1 gpu0 -> rail1 eth1 "
        ),
        "{host1}"
    );
    assert!(
        host1.contains("  operational: pfc {3} (peer) app [udp 4791->3, dscp 24->3, dscp 48->7] (peer)\n"),
        "{host1}"
    );
    assert!(!host1.contains("MISMATCH"), "{host1}");

    // JSON is the agents' own NodeReport, so it reads back (what `rocefab lldp --json` prints).
    let j = serde_json::to_string(&reports).unwrap();
    let back: Vec<NodeReport> = serde_json::from_str(&j).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), j);
    assert_eq!(render_node(&back[0]), rail1);
}

/// An LLDPDU as lldpd sends it by default: Chassis ID and Port ID the NIC's MAC, System Name
/// the machine's host name, no DCBX.
fn lldpd_frame(mac: [u8; 6], ttl: u16) -> Vec<u8> {
    use rocefab_wire::ethernet::MacAddr;
    use rocefab_wire::lldp::{ChassisId, LldpduRepr, PortId, Tlv};
    let pdu = LldpduRepr {
        chassis_id: ChassisId::MacAddress(MacAddr(mac)),
        port_id: PortId::MacAddress(MacAddr(mac)),
        ttl,
        tlvs: vec![Tlv::SystemName { text: "buildhost".into() }, Tlv::PortDescription { text: "gpu0".into() }],
    };
    pdu.to_frame(MacAddr(mac)).unwrap()
}

#[test]
fn lldpd_beside_the_nic_agent_is_an_extra_neighbour_and_the_expected_one_stays() {
    let mut r1 = agent("rail1", "eth1", 1, switch_dcb(1 << 3, 3), true);
    r1.expect(lldp_agent::Expected::from_peer("host1:gpu0"));
    let mut h1 = agent("host1", "gpu0", 11, nic_dcb(), false);
    let link = vec![(end("host1:gpu0"), end("rail1:eth1"))];
    let mac = h1.identity().mac;
    hear(&mut h1, &r1);
    // Whichever agent spoke last, the check is the same.
    let mut seen = Vec::new();
    for t in 0..6u64 {
        if t % 2 == 0 {
            r1.on_frame(&h1.frame(120), t * 1_000_000_000);
        } else {
            r1.on_frame(&lldpd_frame(mac, 120), t * 1_000_000_000);
        }
        let reports = vec![node("rail1", "switch", &[&r1]), node("host1", "host", &[&h1])];
        seen.push(check_links(&link, &reports)[0].status.clone());
    }
    assert!(matches!(seen[0], LinkStatus::Ok), "only the NIC agent so far: {:?}", seen[0]);
    let extra = LinkStatus::ExtraNeighbour {
        details: vec!["rail1:eth1 also hears buildhost:02:00:00:00:0b:01 (chassis 02:00:00:00:0b:01)".into()],
    };
    assert!(seen[1..].iter().all(|s| *s == extra), "{seen:?}");
    let reports = vec![node("rail1", "switch", &[&r1]), node("host1", "host", &[&h1])];
    let r = check_links(&link, &reports);
    let text = render_check(&r);
    assert_eq!(text.lines().next(), Some("host1:gpu0         <-> rail1:eth1         extra neighbour: rail1:eth1 also hears buildhost:02:00:00:00:0b:01 (chassis 02:00:00:00:0b:01)"));
    assert_eq!(text.lines().last(), Some("1 links: 0 ok, 1 extra neighbour"));
    assert_eq!(serde_json::to_value(&r).unwrap()[0]["status"], "extra_neighbour");

    // `rocefab lldp` shows both; the one DCBX uses first.
    let out = render_node(&reports[0]);
    assert!(out.starts_with("rail1 (switch, chassis 02:00:00:00:01:00): 1 ports, 1 with a neighbour (2 neighbours)\nrail1 eth1 -> host1 gpu0 "), "{out}");
    assert!(out.contains("  2 neighbours on this port (DCBX with the one above); also:\n  also -> buildhost 02:00:00:00:0b:01 (chassis 02:00:00:00:0b:01, ttl "), "{out}");
    assert!(out.contains("/120 s) neighbour DCBX: none\n"), "{out}");
    let j = serde_json::to_value(&reports[0]).unwrap();
    assert_eq!(j["ports"][0]["neighbours"].as_array().unwrap().len(), 2);
    assert_eq!(j["ports"][0]["neighbour"]["port"], "gpu0");

    // A DCBX mismatch with the expected neighbour still shows over the extra one.
    let mut r4 = agent("rail1", "eth4", 1, switch_dcb(1 << 3, 3), true);
    let h3 = agent("host3", "gpu0", 13, Dcb::nic(false, 1 << 4, 24, 4, 48, 7), false);
    r4.on_frame(&h3.frame(120), 0);
    r4.on_frame(&lldpd_frame(h3.identity().mac, 120), 0);
    let r = check_links(&[(end("rail1:eth4"), end("host3:gpu0"))], &[node("rail1", "switch", &[&r4])]);
    assert!(matches!(r[0].status, LinkStatus::NoData { .. }), "host3 gave no table: {:?}", r[0].status);

    // The expected neighbour gone (NIC agent stopped), lldpd alone: miscabled, not ok.
    r1.on_frame(&h1.shutdown_frame(), 7_000_000_000);
    let reports = vec![node("rail1", "switch", &[&r1]), node("host1", "host", &[&h1])];
    assert_eq!(
        check_links(&link, &reports)[0].status,
        LinkStatus::Miscabled {
            at: "rail1:eth1".into(),
            expected: "host1:gpu0".into(),
            found: "buildhost:02:00:00:00:0b:01".into()
        }
    );
}

#[test]
fn hosts_without_a_nic_agent_are_checked_from_the_switch_by_their_mac() {
    let mut r1 = agent("rail1", "eth1", 1, switch_dcb(1 << 3, 3), true);
    let mac = [2, 0, 0, 0, 11, 1];
    let host = LinkEnd::without_agent("host1", "gpu0", "02:00:00:00:0B:01");
    let link = vec![(host.clone(), end("rail1:eth1"))];
    let r = check_links(&link, &[node("rail1", "switch", &[&r1])]);
    let LinkStatus::MissingNeighbour { at, also } = &r[0].status else { panic!("{:?}", r[0].status) };
    assert_eq!(at, &vec!["rail1:eth1".to_string()]);
    assert_eq!(
        also,
        &vec!["host1 runs no rocefab NIC agent (lldp.nic_agent: false): is its own LLDP agent running?".to_string()]
    );
    r1.on_frame(&lldpd_frame(mac, 120), 0);
    assert_eq!(
        check_links(&link, &[node("rail1", "switch", &[&r1])])[0].status,
        LinkStatus::Ok,
        "host1 was not asked; rail1 hears its NIC's MAC"
    );
    // Another NIC's lldpd is still miscabling.
    let mut r2 = agent("rail1", "eth2", 1, switch_dcb(1 << 3, 3), true);
    r2.on_frame(&lldpd_frame([2, 0, 0, 0, 12, 1], 120), 0);
    let r = check_links(&[(host, end("rail1:eth2"))], &[node("rail1", "switch", &[&r2])]);
    assert!(matches!(r[0].status, LinkStatus::Miscabled { .. }), "{:?}", r[0].status);
}

#[test]
fn a_host_without_an_agent_is_shown_through_the_switch_ports_cabled_to_it() {
    let mut r1 = agent("rail1", "eth1", 1, switch_dcb(1 << 3, 3), true);
    r1.expect(lldp_agent::Expected::from_peer("host1:gpu0"));
    let mut r2 = agent("rail1", "eth2", 1, switch_dcb(1 << 3, 3), true);
    r2.expect(lldp_agent::Expected::from_peer("host2:gpu0"));
    r1.on_frame(&lldpd_frame([2, 0, 0, 0, 11, 1], 120), 0);
    let spine = agent("spine1", "eth1", 21, switch_dcb(1 << 3, 3), true);
    let out = control::cmd::lldp::facing_host(
        vec![node("rail1", "switch", &[&r1, &r2]), node("spine1", "switch", &[&spine])],
        "host1",
    );
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].ports.iter().map(|p| p.port.as_str()).collect::<Vec<_>>(), ["eth1"]);
    assert!(render_node(&out[0]).contains("rail1 eth1 -> buildhost 02:00:00:00:0b:01 "), "{}", render_node(&out[0]));
}

#[test]
fn nic_agent_false_runs_no_agents_and_frees_their_ports() {
    let off = format!("{GOOD}metrics_port_base: 65531\nlldp: {{ nic_agent: false }}\n");
    let t = Topology::parse(&off, Path::new("t.yaml")).unwrap();
    assert!(t.lldp.config.enabled && !t.lldp.nic_agents());
    let p = compile(&t, 9400);
    let out = render_plan(&t, &p);
    assert!(!out.contains("NIC agent 127."), "{out}");
    assert!(out.contains("lldp on at the switches only: "), "{out}");
    let e = err(&format!("{GOOD}lldp:\n  nic_agents: false\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: lldp: unknown field `nic_agents`"), "{e}");
    let e = err(&format!("{GOOD}lldp:\n  enabled: false\n  nic_agent: true\n"));
    assert!(e.starts_with("topologies/bad.yaml:16: lldp.nic_agent: true needs LLDP on"), "{e}");
}

#[test]
fn run_takes_the_negotiated_classes_and_falls_back_to_the_configured_ones() {
    let src = format!("{GOOD}lldp:\n  nic: {{ roce_dscp: 26 }}\n");
    let t = Topology::parse(&src, Path::new("t.yaml")).unwrap();
    let p = compile(&t, 9400);
    let cfg = control::plan::agent_config(&p.hosts[0], &p.links, &t.lldp, p.hosts[0].agent_listen);
    // The switch runs RoCEv2 lossless on priority 4 with DSCP 24; gpu0 heard it, gpu1 did not.
    let sw = agent("rail1", "eth1", 1, switch_dcb(1 << 4, 4), true);
    let mut g0 = agent("host1", "gpu0", 11, cfg.nics[0].dcb.clone(), false);
    let g1 = agent("host1", "gpu1", 11, cfg.nics[1].dcb.clone(), false);
    hear(&mut g0, &sw);
    let report = node("host1", "host", &[&g0, &g1]);
    let configured = t.lldp.nic.classes();
    let names = vec!["gpu0".to_string(), "gpu1".to_string(), "gpu9".to_string()];
    let c = control::job::hosts::classes_for(&names, &cfg, &report, configured);
    assert_eq!(
        c[0],
        NicClasses { data_dscp: 24, data_priority: 4, cnp_dscp: 48, cnp_priority: 7, pfc_enable: 1 << 4 },
        "adopted from the switch, PFC enable vector included"
    );
    assert_eq!(
        c[1],
        NicClasses { data_dscp: 26, data_priority: 3, cnp_dscp: 48, cnp_priority: 7, pfc_enable: 1 << 3 },
        "its own, no neighbour"
    );
    assert_eq!(c[2], configured, "not in the agent");
}
