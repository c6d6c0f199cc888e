//! Address plan and route compilation for the shipped topologies.
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use control::plan::{compile, Plan, SwitchPlan};
use control::topology::Topology;
use dataplane_common::config::{Mac, RouteConfig};

fn plan(name: &str) -> Plan {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(name);
    compile(&Topology::load(&p).unwrap(), 9400)
}

/// Every topology file shipped in topologies/ (so a new one is checked without editing tests).
fn shipped() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "shipped topologies: {names:?}");
    names
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The route for exactly `prefix/len`.
fn route<'a>(s: &'a SwitchPlan, prefix: &str, len: u8) -> &'a RouteConfig {
    s.config
        .routes
        .iter()
        .find(|r| r.prefix == ip(prefix) && r.len == len)
        .unwrap_or_else(|| panic!("{}: no route {prefix}/{len}: {:?}", s.name, s.config.routes))
}

/// (port peer, next-hop MAC) of every member of the route's group.
fn members(s: &SwitchPlan, r: &RouteConfig) -> Vec<(String, Mac)> {
    let g = r.group.expect("not a local route");
    s.config.groups[g as usize]
        .iter()
        .map(|&nh| {
            let nh = s.config.nexthops[nh as usize];
            (s.config.ports[nh.port as usize].peer.clone(), nh.mac)
        })
        .collect()
}

#[test]
fn rail_spine_addresses() {
    let p = plan("rail-spine.yaml");
    assert_eq!(p.namespaces().len(), 8);
    assert!(p.namespaces().contains(&"rf-rs-host3".to_string()));
    assert!(p.namespaces().contains(&"rf-rs-spine2".to_string()));
    let h3 = p.host("host3").unwrap();
    assert_eq!(h3.nics.len(), 2);
    assert_eq!(h3.nics[1].ifname, "gpu1");
    assert_eq!(h3.nics[1].addr, Ipv4Addr::new(10, 0, 2, 3));
    assert_eq!(h3.nics[1].gateway, Ipv4Addr::new(10, 0, 2, 254));
    assert_eq!(h3.nics[1].table, 102);
    assert_eq!(p.gpu_addr("host1:gpu0"), Some(Ipv4Addr::new(10, 0, 1, 1)));
    // The gateway MAC is the rail2 port facing host3.
    let rail2 = p.switch("rail2").unwrap();
    let port = rail2.config.ports.iter().find(|pt| pt.peer == "host3:gpu1").unwrap();
    assert_eq!(port.mac, h3.nics[1].gateway_mac);
    assert_eq!(port.addresses, ["10.0.2.254/24"]);
    // rail switches: 4 host ports then 2 uplinks; spines: 2 downlinks.
    let names: Vec<_> = rail2.config.ports.iter().map(|p| (p.name.as_str(), p.peer.as_str())).collect();
    assert_eq!(
        names,
        [
            ("eth1", "host1:gpu1"),
            ("eth2", "host2:gpu1"),
            ("eth3", "host3:gpu1"),
            ("eth4", "host4:gpu1"),
            ("eth5", "spine1:eth2"),
            ("eth6", "spine2:eth2")
        ]
    );
    // /31s: rail end even, spine end odd, four links.
    let s1 = p.switch("spine1").unwrap();
    assert_eq!(s1.config.ports[0].addresses, ["10.255.0.1/31"]);
    assert_eq!(s1.config.ports[1].addresses, ["10.255.0.5/31"]);
    assert_eq!(p.switch("rail1").unwrap().config.ports[4].addresses, ["10.255.0.0/31"]);
    assert_eq!(p.links.len(), 12);
    assert!(p.links.iter().all(|l| l.a.ifname.len() <= 15 && l.b.ifname.len() <= 15));
}

#[test]
fn rail_switch_reaches_other_rail_via_both_spines() {
    let p = plan("rail-spine.yaml");
    let rail1 = p.switch("rail1").unwrap();
    let r = route(rail1, "10.0.2.0", 24);
    let m = members(rail1, r);
    assert_eq!(m.len(), 2, "{m:?}");
    let peers: BTreeSet<_> = m.iter().map(|(peer, _)| peer.split(':').next().unwrap().to_string()).collect();
    assert_eq!(peers, BTreeSet::from(["spine1".to_string(), "spine2".to_string()]));
    // Next-hop MACs are the spines' ports facing rail1.
    for (peer, mac) in &m {
        let (sp, ifn) = peer.split_once(':').unwrap();
        let port = p.switch(sp).unwrap().config.ports.iter().find(|x| x.name == ifn).unwrap();
        assert_eq!(port.mac, *mac);
    }
    // Own GPUs: /32 to the host NIC MAC.
    let r = route(rail1, "10.0.1.3", 32);
    let m = members(rail1, r);
    assert_eq!(m, [("host3:gpu0".to_string(), p.host("host3").unwrap().nics[0].mac)]);
    // No route for its own rail subnet through the spines.
    assert!(!rail1.config.routes.iter().any(|r| r.prefix == ip("10.0.1.0") && r.len == 24));
    // Gateway and /31 addresses are local.
    assert_eq!(route(rail1, "10.0.1.254", 32).group, None);
    assert_eq!(route(rail1, "10.255.0.2", 32).group, None);
}

#[test]
fn spine_routes_each_rail_to_its_switch() {
    let p = plan("rail-spine.yaml");
    for sp in ["spine1", "spine2"] {
        let s = p.switch(sp).unwrap();
        for (rail, sw) in [("10.0.1.0", "rail1"), ("10.0.2.0", "rail2")] {
            let m = members(s, route(s, rail, 24));
            assert_eq!(m.len(), 1);
            assert!(m[0].0.starts_with(&format!("{sw}:")), "{sp} {rail}: {m:?}");
        }
        assert_eq!(s.config.routes.iter().filter(|r| r.group.is_none()).count(), 2);
    }
}

#[test]
fn single_rail_routes_all_local() {
    let p = plan("single-rail.yaml");
    let s = p.switch("rail1").unwrap();
    assert_eq!(s.config.ports.len(), 24);
    // Port groups host-major: eth9 faces host2:gpu0.
    assert_eq!(s.config.ports[8].peer, "host2:gpu0");
    assert_eq!(s.config.ports[8].addresses, ["10.0.1.254/24"]);
    // 24 GPU /32 routes, 8 local gateways, nothing else.
    assert_eq!(s.config.routes.iter().filter(|r| r.len == 32 && r.group.is_some()).count(), 24);
    assert_eq!(s.config.routes.iter().filter(|r| r.group.is_none()).count(), 8);
    assert_eq!(s.config.routes.len(), 32);
    let m = members(s, route(s, "10.0.8.3", 32));
    assert_eq!(m[0].0, "host3:gpu7");
}

#[test]
fn multi_rail_spine_groups() {
    let p = plan("multi-rail-spine.yaml");
    let r1 = p.switch("railsw1").unwrap();
    // railsw1 serves rails 1-2 locally, rails 3-4 via both spines (one shared group).
    let a = route(r1, "10.0.3.0", 24).group;
    let b = route(r1, "10.0.4.0", 24).group;
    assert_eq!(a, b);
    assert_eq!(members(r1, route(r1, "10.0.3.0", 24)).len(), 2);
    assert_eq!(r1.config.ports.iter().filter(|p| p.line_rate_bps == 2_000_000_000).count(), 2);
    let r2 = p.switch("railsw2").unwrap();
    let slow = r2.config.ports.iter().find(|p| p.peer == "host2:gpu3").unwrap();
    assert_eq!(slow.line_rate_bps, 500_000_000);
}

#[test]
fn macs_unique_and_locally_administered() {
    for t in &shipped() {
        let p = plan(t);
        let mut seen = BTreeSet::new();
        for l in &p.links {
            for i in [&l.a, &l.b] {
                assert_eq!(i.mac.0[0], 0x02, "{t}: {} {}", i.node, i.ifname);
                assert!(seen.insert(i.mac.0), "{t}: duplicate MAC {} on {}:{}", i.mac, i.node, i.ifname);
            }
        }
        assert_eq!(seen.len(), 2 * p.links.len());
    }
}

#[test]
fn every_config_validates_with_distinct_seeds_and_ports() {
    for t in &shipped() {
        let p = plan(t);
        let mut seeds = BTreeSet::new();
        let mut listen = BTreeSet::new();
        for s in &p.switches {
            s.config.validate().unwrap_or_else(|e| panic!("{t}: {e}"));
            seeds.insert(s.config.hash_seed);
            listen.insert(s.config.metrics_listen);
            assert_eq!(s.config.netns.as_deref(), Some(s.netns.as_str()));
        }
        assert_eq!(seeds.len(), p.switches.len(), "{t}: per-switch seeds differ");
        assert_eq!(listen.len(), p.switches.len());
        assert_eq!(p.switches[0].config.metrics_listen.port(), 9400);
    }
}

#[test]
fn shared_seed_is_shared() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml");
    let src = std::fs::read_to_string(&path).unwrap().replace("hash_seed: per-switch", "hash_seed: shared");
    let p = compile(&Topology::parse(&src, &path).unwrap(), 9500);
    let seeds: BTreeSet<_> = p.switches.iter().map(|s| s.config.hash_seed).collect();
    assert_eq!(seeds.len(), 1);
    assert_eq!(p.switches[3].config.metrics_listen.port(), 9503);
}

#[test]
fn host_segments_split_a_rail_across_leaves() {
    let p = plan("pod-segments.yaml");
    let leaf1 = p.switch("leaf1").unwrap();
    // Own GPUs are /32s; the rest of each rail subnet (hosts 3-4) goes to both spines.
    assert_eq!(members(leaf1, route(leaf1, "10.0.1.2", 32))[0].0, "host2:gpu0");
    for rail in ["10.0.1.0", "10.0.2.0"] {
        let m = members(leaf1, route(leaf1, rail, 24));
        assert_eq!(m.len(), 2, "{m:?}");
    }
    // Spines cannot aggregate a split rail: a /32 per GPU via the leaf serving it.
    let s = p.switch("spine2").unwrap();
    assert!(!s.config.routes.iter().any(|r| r.len == 24));
    assert!(members(s, route(s, "10.0.2.1", 32))[0].0.starts_with("leaf1:"));
    assert!(members(s, route(s, "10.0.2.4", 32))[0].0.starts_with("leaf2:"));
    assert_eq!(s.config.routes.iter().filter(|r| r.group.is_some()).count(), 8);
    for sw in &p.switches {
        sw.config.validate().unwrap();
    }
}

#[test]
fn partial_cabling_only_uses_spines_that_reach_the_destination() {
    let src = "\
fabric: part
hosts: { count: 2, gpus_per_host: 3 }
switches:
  rail:
    - { name: rail1, rails: [1] }
    - { name: rail2, rails: [2] }
    - { name: rail3, rails: [3] }
  spine:
    - { name: spine1 }
    - { name: spine2 }
links:
  rail_spine:
    - { rail: rail1, spine: spine1 }
    - { rail: rail1, spine: spine2 }
    - { rail: rail2, spine: spine1 }
    - { rail: rail3, spine: spine2 }
";
    let t = Topology::parse(src, Path::new("part.yaml")).unwrap();
    let p = compile(&t, 9400);
    let r1 = p.switch("rail1").unwrap();
    let to2 = members(r1, route(r1, "10.0.2.0", 24));
    assert_eq!(to2.iter().map(|m| m.0.split(':').next().unwrap()).collect::<Vec<_>>(), ["spine1"]);
    let to3 = members(r1, route(r1, "10.0.3.0", 24));
    assert_eq!(to3.iter().map(|m| m.0.split(':').next().unwrap()).collect::<Vec<_>>(), ["spine2"]);
    // rail2 and rail3 share no spine: no route between them (rail-only reachability).
    let r2 = p.switch("rail2").unwrap();
    assert!(!r2.config.routes.iter().any(|r| r.prefix == ip("10.0.3.0")));
    assert_eq!(members(r2, route(r2, "10.0.1.0", 24)).len(), 1);
}
