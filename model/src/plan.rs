//! Address plan and route compilation: a validated [`Topology`] → namespaces, interfaces,
//! addresses, deterministic MACs, host policy routing and one [`SwitchConfig`] per switch.
//!
//! Pure: no I/O. The plan is what `rocefab up` applies and what the unit tests inspect.
//!
//! - Rail r has a subnet (default 10.0.r.0/24); GPU r−1 of host h is `.h`, the rail switch's
//!   host-facing ports answer as gateway `.254` (book ch. 13: each local rank is a rail subnet).
//! - Every rail↔spine and spine↔super-spine link is a /31 from `addressing.p2p` (default
//!   10.255.0.0/16): the lower tier's end even, the upper tier's odd.
//! - MACs are locally administered (`02:`), `02:<fabric>:<kind>:<node hi>:<node lo>:<if>`, so
//!   next-hop MACs are known without ARP. Kind 01 is a host NIC, 02 a switch port, 03 a switch's
//!   system MAC (its LLDP Chassis ID, `<if>` 00), distinct from every port MAC.
//! - Daemon listen ports: switch i on `metrics_base + i`, then host h's NIC agent on
//!   `metrics_base + switches + h − 1`.
//! - Rail switch: a /32 per directly attached GPU; every subnet it does not serve entirely
//!   (other rails) via one ECMP group of the uplinks to the spines that reach the serving switch.
//!   Spine: each rail subnet of its pod via the rail switch(es) serving it, of another pod via
//!   an ECMP group of the uplinks to the super-spines that reach it. Super-spine: each rail
//!   subnet via the downlinks to the spines of the serving switch's pod that reach it. In
//!   general, the group towards a rail switch is every neighbour one hop closer to it on an
//!   up/down path ([`Topology::hops_to`]). Own addresses are `local`.
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use rocefab_contracts::config::{Mac, NextHopConfig, PortConfig, RouteConfig, SwitchConfig};

use rocefab_contracts::agent::{AgentConfig, AgentNic};

use crate::lldp::LldpSettings;
use crate::topology::{Endpoint, HashSeed, Ipv4Net, Role, Topology};

/// Namespace of a node: `rf-<fabric>-<node>`.
pub fn netns_name(fabric: &str, node: &str) -> String {
    format!("rf-{fabric}-{node}")
}

/// FNV-1a, 32 bit: deterministic seeds and MAC bytes from names.
pub fn fnv1a(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

const KIND_HOST: u8 = 0x01;
const KIND_SWITCH: u8 = 0x02;
const KIND_CHASSIS: u8 = 0x03;

fn mac(fabric: &str, kind: u8, node: u16, ifidx: u8) -> Mac {
    let n = node.to_be_bytes();
    Mac([0x02, fnv1a(fabric) as u8, kind, n[0], n[1], ifidx])
}

/// System MAC (LLDP Chassis ID) of switch `index` (0-based, topology order).
pub fn chassis_mac(fabric: &str, index: usize) -> Mac {
    mac(fabric, KIND_CHASSIS, index as u16 + 1, 0)
}

/// One interface of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    /// Node name (`host1`, `rail1`).
    pub node: String,
    pub netns: String,
    pub ifname: String,
    pub mac: Mac,
    /// Address and prefix length.
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
}

/// A veth pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkPlan {
    pub a: Iface,
    pub b: Iface,
    pub line_rate_bps: u64,
    /// `host-rail`, `rail-spine` or `spine-super-spine`.
    pub class: &'static str,
    /// The cable's propagation delay, emulated ns.
    pub delay_ns: u64,
}

/// A GPU NIC in a host namespace with its policy routing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicPlan {
    pub gpu: u32,
    pub rail: u32,
    pub ifname: String,
    pub mac: Mac,
    pub addr: Ipv4Addr,
    pub subnet: Ipv4Net,
    pub gateway: Ipv4Addr,
    pub gateway_mac: Mac,
    /// Routing table for traffic sourced from `addr` (100 + rail).
    pub table: u32,
}

/// A GPU host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPlan {
    pub name: String,
    pub netns: String,
    pub nics: Vec<NicPlan>,
    /// Where the host's NIC agent (`rocefab-nicd`) serves `/lldp` and `/metrics`.
    pub agent_listen: SocketAddr,
}

/// Kernel-side neighbour of a switch port (for the switch's own stack: ping the gateway).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortNeighbor {
    pub port: String,
    pub addr: Ipv4Addr,
    pub mac: Mac,
    /// True for GPUs on a rail subnet shared by several ports (needs a /32 route to the port).
    pub host_route: bool,
}

/// A switch: its daemon config plus kernel-side extras.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchPlan {
    pub name: String,
    pub netns: String,
    pub config: SwitchConfig,
    pub neighbors: Vec<PortNeighbor>,
}

/// The whole fabric.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub fabric: String,
    pub mtu: u32,
    pub hosts: Vec<HostPlan>,
    pub switches: Vec<SwitchPlan>,
    pub links: Vec<LinkPlan>,
}

impl Plan {
    /// Every namespace, hosts first.
    pub fn namespaces(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.netns.clone()).chain(self.switches.iter().map(|s| s.netns.clone())).collect()
    }
    pub fn host(&self, name: &str) -> Option<&HostPlan> {
        self.hosts.iter().find(|h| h.name == name)
    }
    pub fn switch(&self, name: &str) -> Option<&SwitchPlan> {
        self.switches.iter().find(|s| s.name == name)
    }
    /// Address of `hostN:gpuG` (by NIC name).
    pub fn gpu_addr(&self, spec: &str) -> Option<Ipv4Addr> {
        let (h, nic) = spec.split_once(':')?;
        self.host(h)?.nics.iter().find(|n| n.ifname == nic).map(|n| n.addr)
    }
}

fn seed(topo: &Topology, name: &str) -> u32 {
    match topo.hash_seed {
        HashSeed::PerSwitch => fnv1a(&format!("{}/{name}", topo.fabric)),
        HashSeed::Shared => fnv1a(&topo.fabric),
        HashSeed::Fixed(s) => s,
    }
}

/// Compiles the plan. `metrics_base`: switch i's metrics listen on 127.0.0.1:(metrics_base + i),
/// host h's NIC agent on 127.0.0.1:(metrics_base + switches + h − 1).
pub fn compile(topo: &Topology, metrics_base: u16) -> Plan {
    compile_without(topo, metrics_base, &BTreeSet::new())
}

/// [`compile_without`] as static routing computes it, whatever `topo.routing` says: the routes
/// every switch holds with `routing: static`, and what a BGP fabric converges to (`rocefab up`
/// waits for it; `rocefab ping` follows it).
pub fn compile_static_without(topo: &Topology, metrics_base: u16, failed: &BTreeSet<usize>) -> Plan {
    let mut t = topo.clone();
    t.routing = crate::topology::Routing::Static;
    compile_without(&t, metrics_base, failed)
}

/// [`compile`] with the links whose indices (into `topo.links`, = `Plan::links`) are in `failed`
/// cut: the same ports, next hops and addresses, the routes and ECMP groups static routing has
/// without them (a switch does not route through a cut link, nor through a neighbour that lost
/// its way to the destination).
pub fn compile_without(topo: &Topology, metrics_base: u16, failed: &BTreeSet<usize>) -> Plan {
    let ports = switch_ports(topo);
    let links = link_plans(topo, &ports);
    let hosts = host_plans(topo, &links, metrics_base);
    let hops: Vec<Vec<Option<u32>>> = (0..topo.switches.len()).map(|d| topo.hops_to_without(d, failed)).collect();
    let switches = (0..topo.switches.len())
        .map(|si| switch_plan(topo, si, &ports[si], &links, &hops, metrics_base, failed))
        .collect();
    Plan { fabric: topo.fabric.clone(), mtu: topo.mtu, hosts, switches, links }
}

/// Ports per switch as link indices, in link order (rail: host ports host-major, then uplinks;
/// spine: downlinks, then uplinks).
fn switch_ports(topo: &Topology) -> Vec<Vec<usize>> {
    let mut ports: Vec<Vec<usize>> = vec![Vec::new(); topo.switches.len()];
    for (li, l) in topo.links.iter().enumerate() {
        for e in [&l.a, &l.b] {
            if let Endpoint::Switch(s) = e {
                ports[*s].push(li);
            }
        }
    }
    ports
}

/// The interfaces of every link: a GPU NIC on its rail subnet with the rail switch port as
/// gateway `.254`, or the two ends of a /31 from `addressing.p2p`.
fn link_plans(topo: &Topology, ports: &[Vec<usize>]) -> Vec<LinkPlan> {
    let f = &topo.fabric;
    let port_of = |s: usize, li: usize| ports[s].iter().position(|&x| x == li).expect("link on switch");
    let sw_mac = |s: usize, p: usize| mac(f, KIND_SWITCH, s as u16 + 1, p as u8);
    let mut links = Vec::new();
    let mut fabric_k = 0u32;
    for (li, l) in topo.links.iter().enumerate() {
        let (ia, ib) = match (&l.a, &l.b) {
            (Endpoint::Gpu { host, gpu }, Endpoint::Switch(s)) => {
                let rail = gpu + 1;
                let subnet = topo.rail_subnets[&rail];
                let p = port_of(*s, li);
                let a = Iface {
                    node: Topology::host_name(*host),
                    netns: netns_name(f, &Topology::host_name(*host)),
                    ifname: topo.nic_name(*gpu),
                    mac: mac(f, KIND_HOST, *host as u16, *gpu as u8),
                    addr: subnet.nth(*host),
                    prefix_len: subnet.len,
                };
                let b = Iface {
                    node: topo.switches[*s].name.clone(),
                    netns: netns_name(f, &topo.switches[*s].name),
                    ifname: topo.port_name(p + 1),
                    mac: sw_mac(*s, p),
                    addr: subnet.gateway(),
                    prefix_len: subnet.len,
                };
                (a, b)
            }
            (Endpoint::Switch(r), Endpoint::Switch(s)) => {
                let mk = |sw: usize, off: u32| Iface {
                    node: topo.switches[sw].name.clone(),
                    netns: netns_name(f, &topo.switches[sw].name),
                    ifname: topo.port_name(port_of(sw, li) + 1),
                    mac: sw_mac(sw, port_of(sw, li)),
                    addr: topo.p2p.nth(2 * fabric_k + off),
                    prefix_len: 31,
                };
                let pair = (mk(*r, 0), mk(*s, 1));
                fabric_k += 1;
                pair
            }
            _ => unreachable!("links are gpu-switch or switch-switch"),
        };
        links.push(LinkPlan {
            a: ia,
            b: ib,
            line_rate_bps: l.line_rate.0,
            class: l.class.as_str(),
            delay_ns: l.delay_ns,
        });
    }
    links
}

/// The hosts: each GPU NIC with its link's addresses, and the NIC agent's listen address.
fn host_plans(topo: &Topology, links: &[LinkPlan], metrics_base: u16) -> Vec<HostPlan> {
    let f = &topo.fabric;
    let nsw = topo.switches.len();
    let mut hosts = Vec::new();
    for h in 1..=topo.hosts {
        let name = Topology::host_name(h);
        let mut nics = Vec::new();
        for g in 0..topo.nics_per_host() {
            let rail = g + 1;
            let lp = links
                .iter()
                .find(|l| l.a.node == name && l.a.ifname == topo.nic_name(g))
                .expect("every GPU has a link");
            nics.push(NicPlan {
                gpu: g,
                rail,
                ifname: lp.a.ifname.clone(),
                mac: lp.a.mac,
                addr: lp.a.addr,
                subnet: topo.rail_subnets[&rail],
                gateway: lp.b.addr,
                gateway_mac: lp.b.mac,
                table: 100 + rail,
            });
        }
        let port = metrics_base.wrapping_add(nsw as u16).wrapping_add(h as u16 - 1);
        let agent_listen = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        hosts.push(HostPlan { netns: netns_name(f, &name), name, nics, agent_listen });
    }
    hosts
}

/// The delays a switch port applies (emulated ns; docs/src/emulated-time.md): to frames it sends,
/// the switch's forwarding latency, the cable and, toward a NIC, the NIC's receive pipeline; to
/// frames it receives from a NIC, the NIC's transmit pipeline and the cable (a NIC does not
/// delay its own frames; a switch peer delays them on its own egress).
pub fn port_delays(topo: &Topology, cable_ns: u64, peer_is_nic: bool) -> (u64, u64) {
    if peer_is_nic {
        (topo.switch_latency_ns + cable_ns + topo.nic_latency_ns, topo.nic_latency_ns + cable_ns)
    } else {
        (topo.switch_latency_ns + cable_ns, 0)
    }
}

/// The neighbour behind a switch port: its endpoint, the port index, its MAC and address.
/// A port's far end: endpoint, port index, its MAC and address, and whether its link is cut.
type Peer = (Endpoint, u32, Mac, Ipv4Addr, bool);

/// Switch `si` (whose ports are the links `ports`): its daemon config and kernel neighbours.
fn switch_plan(
    topo: &Topology,
    si: usize,
    ports: &[usize],
    links: &[LinkPlan],
    hops: &[Vec<Option<u32>>],
    metrics_base: u16,
    failed: &BTreeSet<usize>,
) -> SwitchPlan {
    let f = &topo.fabric;
    let sw = &topo.switches[si];
    let mut cfg_ports = Vec::new();
    let mut neighbors = Vec::new();
    let mut peers: Vec<Peer> = Vec::new();
    for (p, &li) in ports.iter().enumerate() {
        let l = &links[li];
        let tl = &topo.links[li];
        let (me, peer, peer_ep) = if l.b.node == sw.name && tl.b == Endpoint::Switch(si) {
            (&l.b, &l.a, tl.a.clone())
        } else {
            (&l.a, &l.b, tl.b.clone())
        };
        let (tx_delay_ns, rx_delay_ns) = port_delays(topo, l.delay_ns, matches!(peer_ep, Endpoint::Gpu { .. }));
        cfg_ports.push(PortConfig {
            name: me.ifname.clone(),
            mac: me.mac,
            line_rate_bps: l.line_rate_bps,
            addresses: vec![format!("{}/{}", me.addr, me.prefix_len)],
            peer: format!("{}:{}", peer.node, peer.ifname),
            tx_delay_ns,
            rx_delay_ns,
        });
        neighbors.push(PortNeighbor {
            port: me.ifname.clone(),
            addr: peer.addr,
            mac: peer.mac,
            host_route: matches!(peer_ep, Endpoint::Gpu { .. }),
        });
        peers.push((peer_ep, p as u32, peer.mac, peer.addr, failed.contains(&li)));
    }
    let nexthops: Vec<NextHopConfig> = peers.iter().map(|(_, p, m, ..)| NextHopConfig { port: *p, mac: *m }).collect();
    let own = own_addresses(ports, links, &cfg_ports);
    let (groups, routes) = routes(topo, si, &peers, hops, &own);
    let netns = netns_name(f, &sw.name);
    let config = SwitchConfig {
        name: sw.name.clone(),
        role: sw.role.as_str().to_string(),
        netns: Some(netns.clone()),
        hash_seed: seed(topo, &sw.name),
        metrics_listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), metrics_base.wrapping_add(si as u16)),
        dscp_to_tc: topo.qos[si].dscp_to_tc.clone(),
        queue_limit_bytes: topo.qos[si].queue_limit_bytes,
        xdp_mode: topo.xdp_mode.as_str().to_string(),
        ports: cfg_ports,
        nexthops,
        groups,
        routes,
        qos: topo.qos[si].qos.clone(),
        lldp: topo.lldp.config.clone(),
        chassis_mac: Some(chassis_mac(f, si)),
        time_dilation: topo.time_dilation.factor(),
        load_balance: topo.load_balance[si].clone(),
        fib: topo.routing == crate::topology::Routing::Bgp,
    };
    SwitchPlan { name: sw.name.clone(), netns, config, neighbors }
}

/// The switch's own addresses, one per distinct address, in port order.
fn own_addresses(ports: &[usize], links: &[LinkPlan], cfg_ports: &[PortConfig]) -> Vec<Ipv4Addr> {
    let mut own: Vec<Ipv4Addr> = Vec::new();
    for (p, &li) in ports.iter().enumerate() {
        let l = &links[li];
        let me = if cfg_ports[p].mac == l.a.mac { &l.a } else { &l.b };
        if !own.contains(&me.addr) {
            own.push(me.addr);
        }
    }
    own
}

/// The ECMP groups (port lists, numbered in order of first use) and routes of switch `si`:
/// a /32 per directly attached GPU, the rail subnets reached through the fabric, and a local
/// route per own address.
fn routes(
    topo: &Topology,
    si: usize,
    peers: &[Peer],
    hops: &[Vec<Option<u32>>],
    own: &[Ipv4Addr],
) -> (Vec<Vec<u32>>, Vec<RouteConfig>) {
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let mut group_ids: BTreeMap<Vec<u32>, u32> = BTreeMap::new();
    let mut group = |members: Vec<u32>| -> u32 {
        *group_ids.entry(members.clone()).or_insert_with(|| {
            groups.push(members);
            groups.len() as u32 - 1
        })
    };
    let mut routes: Vec<RouteConfig> = Vec::new();
    let route = |routes: &mut Vec<RouteConfig>, a: Ipv4Addr, len: u8, g: Option<u32>| {
        routes.push(RouteConfig { prefix: IpAddr::V4(a), len, group: g });
    };
    // Directly attached GPUs (not over a cut cable).
    for (i, (e, _, _, _, cut)) in peers.iter().enumerate() {
        if let (Endpoint::Gpu { .. }, false) = (e, cut) {
            let g = group(vec![i as u32]);
            route(&mut routes, peers[i].3, 32, Some(g));
        }
    }
    // Rail subnets reached through the fabric: one route for the subnet when every remote
    // GPU of the rail is reached through the same members (directly attached GPUs keep
    // their /32s, which win by longest prefix), else a /32 per remote GPU. With per-switch
    // rail subnets a group of rails served together is one subnet here: its summary /24.
    // With `routing: bgp` the fabric's routes come from FRR through the kernel FIB.
    for (rails, subnet) in topo.rail_groups.iter().filter(|_| topo.routing == crate::topology::Routing::Static) {
        let remote: Vec<(u32, Vec<u32>)> = (1..=topo.hosts)
            .filter_map(|h| {
                let d = topo.rail_switch_for(rails[0], h).expect("validated");
                (d != si).then(|| (h, toward(topo, si, peers, hops, d)))
            })
            .collect();
        let Some((_, first)) = remote.first() else { continue };
        if remote.iter().all(|(_, m)| m == first) {
            if !first.is_empty() {
                let g = group(first.clone());
                route(&mut routes, subnet.addr, subnet.len, Some(g));
            }
        } else {
            for (h, m) in remote.into_iter().filter(|(_, m)| !m.is_empty()) {
                let g = group(m);
                for r in rails {
                    route(&mut routes, topo.rail_subnets[r].nth(h), 32, Some(g));
                }
            }
        }
    }
    for &a in own {
        route(&mut routes, a, 32, None);
    }
    (groups, routes)
}

/// How switch `si` reaches rail switch `d`: the ports to the neighbours one hop closer to it,
/// up and down the tiers (never through another rail switch).
fn toward(topo: &Topology, si: usize, peers: &[Peer], hops: &[Vec<Option<u32>>], d: usize) -> Vec<u32> {
    let Some(mine) = hops[d][si] else { return Vec::new() };
    peers
        .iter()
        .enumerate()
        .filter(|(_, (e, _, _, _, cut))| match e {
            Endpoint::Switch(n) => {
                !cut && (*n == d || topo.switches[*n].role != Role::Rail) && hops[d][*n].is_some_and(|h| h + 1 == mine)
            }
            Endpoint::Gpu { .. } => false,
        })
        .map(|(i, _)| i as u32)
        .collect()
}

/// The NIC agent configuration (`<host>.nicd.json`) of one host: one agent per GPU NIC with its
/// MAC, the switch port it is cabled to (`peer`, from `links`) and the fabric's `lldp.nic`
/// settings.
pub fn agent_config(host: &HostPlan, links: &[LinkPlan], s: &LldpSettings, listen: SocketAddr) -> AgentConfig {
    let peer = |ifname: &str| {
        links.iter().find_map(|l| {
            let (me, other) = if l.a.node == host.name && l.a.ifname == ifname { (&l.a, &l.b) } else { (&l.b, &l.a) };
            (me.node == host.name && me.ifname == ifname).then(|| format!("{}:{}", other.node, other.ifname))
        })
    };
    AgentConfig {
        host: host.name.clone(),
        netns: Some(host.netns.clone()),
        listen,
        lldp: s.config.clone(),
        nics: host
            .nics
            .iter()
            .map(|n| AgentNic {
                name: n.ifname.clone(),
                mac: n.mac.to_string(),
                dcb: s.nic.dcb(),
                data_dscp: s.nic.roce_dscp,
                cnp_dscp: s.nic.cnp_dscp,
                peer: peer(&n.ifname),
            })
            .collect(),
    }
}
