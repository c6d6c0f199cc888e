//! Address plan and route compilation for the shipped topologies.
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use control::plan::{compile, Plan, SwitchPlan};
use control::topology::{HashSeed, Topology};
use dataplane_common::{ecmp_index, flow_hash};
use rocefab_contracts::config::{Mac, RouteConfig};

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
        // A topology may share one seed on purpose (multi-pod.yaml: hash polarization).
        let topo = Topology::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(t)).unwrap();
        let want = if topo.hash_seed == HashSeed::PerSwitch { p.switches.len() } else { 1 };
        assert_eq!(seeds.len(), want, "{t}: per-switch seeds differ, a shared seed is shared");
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

/// The longest-prefix route of `s` for `dst`.
fn lpm(s: &SwitchPlan, dst: Ipv4Addr) -> Option<&RouteConfig> {
    s.config
        .routes
        .iter()
        .filter(|r| match r.prefix {
            IpAddr::V4(p) => {
                let mask = if r.len == 0 { 0 } else { u32::MAX << (32 - r.len) };
                u32::from(dst) & mask == u32::from(p) & mask
            }
            IpAddr::V6(_) => false,
        })
        .max_by_key(|r| r.len)
}

/// The switch ports (`switch:port`) a UDP flow crosses from GPU `src` to `dst` when every
/// switch picks `ecmp_index(flow_hash(..., its seed), members)` as the data plane does; panics
/// if the flow does not reach `dst`'s NIC within 8 switches.
fn walk(p: &Plan, src: &str, dst: &str, sport: u16) -> Vec<String> {
    let (sa, da) = (p.gpu_addr(src).unwrap(), p.gpu_addr(dst).unwrap());
    let mut at = p.switches.iter().find(|s| s.config.ports.iter().any(|q| q.peer == src)).expect("src rail switch");
    let mut path = Vec::new();
    for _ in 0..8 {
        let r = lpm(at, da).unwrap_or_else(|| panic!("{}: no route to {da}", at.name));
        let g = &at.config.groups[r.group.unwrap_or_else(|| panic!("{}: {da} is local", at.name)) as usize];
        let h = flow_hash([u32::from(sa), 0, 0, 0], [u32::from(da), 0, 0, 0], 17, sport, 9000, at.config.hash_seed);
        let port =
            &at.config.ports[at.config.nexthops[g[ecmp_index(h, g.len() as u32) as usize] as usize].port as usize];
        path.push(format!("{}:{}", at.name, port.name));
        if port.peer == dst {
            return path;
        }
        let node = port.peer.split(':').next().unwrap();
        at = p.switch(node).unwrap_or_else(|| panic!("{src} -> {dst} left the fabric at {}", port.peer));
    }
    panic!("{src} -> {dst}: no arrival after {path:?}");
}

/// Every GPU reaches every other GPU of the multi-pod fabrics: same rail switch in one hop,
/// across the pod through a spine (3 switches), across pods through a spine, a super-spine and
/// a spine (5 switches: 3 tiers, 5 stages).
#[test]
fn multi_pod_every_gpu_reaches_every_gpu() {
    for name in ["multi-pod.yaml", "multi-pod-partial.yaml"] {
        let p = plan(name);
        let gpus: Vec<String> =
            p.hosts.iter().flat_map(|h| h.nics.iter().map(move |n| format!("{}:{}", h.name, n.ifname))).collect();
        let pod = |g: &str| {
            if ["host1", "host2"].contains(&g.split(':').next().unwrap()) {
                1
            } else {
                2
            }
        };
        for a in &gpus {
            for b in gpus.iter().filter(|b| *b != a) {
                for sport in [49152, 49153, 49154, 49155] {
                    let path = walk(&p, a, b, sport);
                    let same_switch = a.ends_with(&b[b.len() - 4..]) && pod(a) == pod(b);
                    let want = if same_switch {
                        1
                    } else if pod(a) == pod(b) {
                        3
                    } else {
                        5
                    };
                    assert_eq!(path.len(), want, "{name}: {a} -> {b}: {path:?}");
                }
            }
        }
    }
}

/// The route compilation behind the privileged polarization test: 512 flows from pod 1 to pod 2
/// hashed as the switches hash them. Full mesh with a shared seed: each spine uses one of its
/// two super-spine uplinks. Per-switch seeds: both. Partial cabling with a shared seed: all
/// three uplinks of each spine.
#[test]
fn shared_seed_polarizes_the_second_stage_unless_partially_cabled() {
    let stage2 = |p: &Plan| -> std::collections::BTreeMap<String, u32> {
        let mut n = std::collections::BTreeMap::new();
        for s in p.switches.iter().filter(|s| s.config.role == "spine") {
            for q in s.config.ports.iter().filter(|q| q.peer.starts_with("ss")) {
                n.insert(format!("{}:{}", s.name, q.name), 0);
            }
        }
        for sport in 49152..49152 + 512 {
            for hop in walk(p, "host1:gpu0", "host3:gpu0", sport) {
                if let Some(c) = n.get_mut(&hop) {
                    *c += 1;
                }
            }
        }
        n
    };
    let spread = |n: &std::collections::BTreeMap<String, u32>, spine: &str| -> (u32, u32) {
        let v: Vec<u32> = n.iter().filter(|(k, _)| k.starts_with(&format!("p1{spine}:"))).map(|(_, &c)| c).collect();
        (*v.iter().min().unwrap(), *v.iter().max().unwrap())
    };
    let shared = stage2(&plan("multi-pod.yaml"));
    for spine in ["spine1", "spine2"] {
        let (min, max) = spread(&shared, spine);
        assert!(min == 0 && max > 200, "shared seed, full mesh: {shared:?}");
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/multi-pod.yaml");
    let src = std::fs::read_to_string(&path).unwrap().replace("hash_seed: shared ", "hash_seed: per-switch ");
    let per_switch = stage2(&compile(&Topology::parse(&src, &path).unwrap(), 9400));
    let partial = stage2(&plan("multi-pod-partial.yaml"));
    for (what, n) in [("per-switch seeds, full mesh", &per_switch), ("shared seed, partial", &partial)] {
        for spine in ["spine1", "spine2"] {
            let (min, max) = spread(n, spine);
            assert!(min > 0 && min as f64 >= 0.6 * max as f64, "{what}: {n:?}");
        }
    }
    assert_eq!(partial.len(), 12);
}

/// `rocefab uplinks` lists the ECMP ports (rail and spine uplinks, super-spine downlinks), reads
/// their tx counters out of a Prometheus scrape and gives each its share of its switch.
#[test]
fn uplink_table_lists_each_ecmp_stage() {
    use control::cmd::uplinks::{render_uplinks, uplink_ports};
    use control::fabric::daemon_http::port_counter;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/multi-pod.yaml");
    let t = Topology::load(&path).unwrap();
    let ports = uplink_ports(&t, &compile(&t, 9400));
    let of = |sw: &str| {
        ports.iter().filter(|p| p.switch == sw).map(|p| p.peer.split(':').next().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(of("p1rail1"), ["p1spine1", "p1spine2"]);
    assert_eq!(of("p2spine2"), ["ss1", "ss2"]);
    assert_eq!(of("ss1"), ["p1spine1", "p1spine2", "p2spine1", "p2spine2"]);
    assert_eq!(ports.len(), 4 * 2 + 4 * 2 + 2 * 4);
    let flat = Topology::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml")).unwrap();
    assert!(uplink_ports(&flat, &compile(&flat, 9400)).iter().all(|p| p.switch.starts_with("rail")));

    let scrape = "# TYPE rocefab_port_tx_packets_total counter\n\
        rocefab_port_tx_packets_total{port=\"eth3\",switch=\"p1spine1\"} 300\n\
        rocefab_port_tx_packets_total{port=\"eth4\",switch=\"p1spine1\"} 100\n\
        rocefab_port_tx_packets_total{port=\"eth33\",switch=\"p1spine1\"} 7\n\
        rocefab_port_tx_bytes_total{port=\"eth3\",switch=\"p1spine1\"} 30000\n";
    assert_eq!(port_counter(scrape, "rocefab_port_tx_packets_total", "eth3"), 300);
    assert_eq!(port_counter(scrape, "rocefab_port_tx_bytes_total", "eth4"), 0);
    let spine: Vec<_> = ports.iter().filter(|p| p.switch == "p1spine1").cloned().collect();
    let table = render_uplinks(&spine, &|_, port| {
        (
            port_counter(scrape, "rocefab_port_tx_packets_total", port),
            port_counter(scrape, "rocefab_port_tx_bytes_total", port),
        )
    });
    let rows: Vec<Vec<&str>> = table.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows,
        [
            ["p1spine1", "eth3", "ss1:eth1", "300", "30000", "75.0%"],
            ["p1spine1", "eth4", "ss2:eth1", "100", "0", "25.0%"]
        ]
    );
}

#[test]
fn dual_rail_per_switch_subnets_are_halves_of_a_summarised_24() {
    let p = plan("dual-rail-switch.yaml");
    // Rail 1 and rail 2 of railsw1 split 10.0.1.0/24; each /25's gateway is its last address.
    let h3 = p.host("host3").unwrap();
    let addrs: Vec<String> = h3.nics.iter().map(|n| format!("{}/{} gw {}", n.addr, n.subnet.len, n.gateway)).collect();
    assert_eq!(
        addrs,
        [
            "10.0.1.3/25 gw 10.0.1.126",
            "10.0.1.131/25 gw 10.0.1.254",
            "10.0.2.3/25 gw 10.0.2.126",
            "10.0.2.131/25 gw 10.0.2.254"
        ]
    );
    let r1 = p.switch("railsw1").unwrap();
    let port = r1.config.ports.iter().find(|p| p.peer == "host3:gpu1").unwrap();
    assert_eq!(port.addresses, ["10.0.1.254/25"]);
    // The spines route each leaf's /24, not its two /25s.
    for s in ["spine1", "spine2"] {
        let s = p.switch(s).unwrap();
        let remote: Vec<(IpAddr, u8)> =
            s.config.routes.iter().filter(|r| r.group.is_some()).map(|r| (r.prefix, r.len)).collect();
        assert_eq!(remote, [(ip("10.0.1.0"), 24), (ip("10.0.2.0"), 24)], "{}", s.name);
        let m = members(s, route(s, "10.0.1.0", 24));
        assert!(m.len() == 1 && m[0].0.starts_with("railsw1:"), "{}: {m:?}", s.name);
    }
    // railsw1 reaches railsw2's rails by the summary through both spines.
    assert_eq!(members(r1, route(r1, "10.0.2.0", 24)).len(), 2);
    assert!(!r1.config.routes.iter().any(|r| r.len == 25));
}

/// Static routing without a cut link (`rocefab fail link`): rail-spine with rail1 -- spine1 cut.
/// rail1 reaches rail2's subnet through spine2 only, spine1 has no route to rail1's subnet any
/// more, and rail2, which cannot see the cut, still stops sending rail1's traffic to spine1 (the
/// neighbour that lost its way). Cutting a GPU's cable takes its /32 away. Ports, next hops
/// and addresses stay as they were.
#[test]
fn a_cut_link_leaves_every_route_that_needed_it() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml");
    let topo = Topology::load(&p).unwrap();
    let whole = compile(&topo, 9400);
    let li = whole
        .links
        .iter()
        .position(|l| {
            let ends = [l.a.node.as_str(), l.b.node.as_str()];
            ends.contains(&"rail1") && ends.contains(&"spine1")
        })
        .unwrap();
    let cut = control::plan::compile_without(&topo, 9400, &[li].into_iter().collect());
    let peers = |s: &SwitchPlan, prefix: &str, len: u8| -> Vec<String> {
        let mut v: Vec<String> = members(s, route(s, prefix, len)).into_iter().map(|(p, _)| p).collect();
        v.sort();
        v
    };
    let (r1, r2, s1) = (cut.switch("rail1").unwrap(), cut.switch("rail2").unwrap(), cut.switch("spine1").unwrap());
    assert_eq!(peers(whole.switch("rail1").unwrap(), "10.0.2.0", 24).len(), 2);
    assert_eq!(peers(r1, "10.0.2.0", 24), ["spine2:eth1"]);
    assert_eq!(peers(r2, "10.0.1.0", 24), ["spine2:eth2"]);
    assert!(!s1.config.routes.iter().any(|r| r.prefix == ip("10.0.1.0") && r.len == 24), "{:?}", s1.config.routes);
    assert_eq!(peers(s1, "10.0.2.0", 24), ["rail2:eth5"]);
    for (a, b) in whole.switches.iter().zip(&cut.switches) {
        assert_eq!((&a.config.ports, &a.config.nexthops), (&b.config.ports, &b.config.nexthops), "{}", a.name);
    }
    // A GPU's cable: its /32 at the rail switch goes.
    let gi = whole.links.iter().position(|l| l.a.node == "host2" || l.b.node == "host2").unwrap();
    let cut = control::plan::compile_without(&topo, 9400, &[gi].into_iter().collect());
    let l = &whole.links[gi];
    let (host_end, sw) = if l.a.node == "host2" { (&l.a, &l.b.node) } else { (&l.b, &l.a.node) };
    let host2 = whole.host("host2").unwrap().nics.iter().find(|n| n.ifname == host_end.ifname).unwrap().addr;
    assert!(whole.switch(sw).unwrap().config.routes.iter().any(|r| r.prefix == IpAddr::V4(host2) && r.len == 32));
    assert!(!cut.switch(sw).unwrap().config.routes.iter().any(|r| r.prefix == IpAddr::V4(host2) && r.len == 32));
}

/// `rocefab train` builds on every shipped topology (host models, rail designs, NVLink, PXN,
/// dual-port NICs), with both broadcasts and both ring orders where the world is small enough to
/// build quickly, and every topology has room for the frontend network.
#[test]
fn a_training_job_builds_on_every_shipped_topology() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    for name in &shipped() {
        let topo = Topology::load(&dir.join(name)).unwrap();
        let plan = compile(&topo, 9400);
        let configured = topo.lldp.nic.classes();
        let hosts = control::job::hosts::host_descs(&topo, &plan, |h| vec![configured; h.nics.len()]).unwrap();
        let nodes: Vec<String> =
            plan.hosts.iter().map(|h| h.name.clone()).chain(plan.switches.iter().map(|s| s.name.clone())).collect();
        let backend: Vec<std::net::IpAddr> = hosts.iter().flat_map(|h| h.nics.iter().map(|n| n.ip)).collect();
        control::fabric::frontend::check(&topo.fabric, &nodes, &backend).unwrap_or_else(|e| panic!("{name}: {e}"));
        let layout = gpu_host::collective::RankLayout::new(hosts.len() as u32, topo.gpus_per_host).unwrap();
        let small = layout.world_size() <= 64;
        use gpu_host::training::{BroadcastAlgo, RingOrder, TrainingSpec};
        let variants: &[(BroadcastAlgo, RingOrder)] = if small {
            &[(BroadcastAlgo::Tree, RingOrder::Ranks), (BroadcastAlgo::Chain, RingOrder::RailAligned)]
        } else {
            &[(BroadcastAlgo::Tree, RingOrder::Ranks)]
        };
        for &(broadcast, rings) in variants {
            let spec = TrainingSpec {
                layout,
                params: 8192,
                iterations: if small { 2 } else { 1 },
                bucket: if small { 2048 } else { 8192 },
                compute_ns: 1_000_000,
                broadcast,
                rings,
            };
            let (built, tr) = gpu_host::nic::collective_job::build_training(
                &spec,
                &hosts,
                &gpu_host::nic::collective_job::BuildOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{name} {broadcast:?} {rings:?}: {e}"));
            assert_eq!(built.jobs.len(), hosts.len());
            let marked: usize = built
                .jobs
                .iter()
                .map(|j| j.collective.as_ref().unwrap().locals.iter().filter(|l| l.milestone).count())
                .sum();
            assert_eq!(marked, tr.milestones.len(), "{name}: every milestone marked once");
        }
    }
}
