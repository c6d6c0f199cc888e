//! The LLDP driver of one node, shared by the switch daemon (one agent per switch port) and the
//! NIC agent (one per GPU NIC): the [`PortAgent`]s of its ports, its clock, link watching (a
//! fast start when an interface appears again or its carrier comes back, IEEE 802.1AB 9.2.7.7.4
//! txFast), and the log lines of neighbours, negotiation and mismatches, each change logged once.
//!
//! Pure like the rest of the crate: the daemon owns the frame I/O (the switch's control ring,
//! the NIC agent's AF_PACKET socket) and calls [`NodeAgent::poll`] for frames due and
//! [`NodeAgent::on_frame`] for frames received; the time is passed in (ns since
//! [`NodeAgent::now`]'s epoch, or any clock in tests).
use std::time::Instant;

use rocefab_contracts::config::SwitchConfig;

use crate::{Dcb, Expected, Identity, NodeReport, PortAgent, Rx, Timing};

/// What kind of node runs the agent (the `kind` of its [`NodeReport`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Switch,
    Host,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Switch => "switch",
            Kind::Host => "host",
        }
    }
}

/// A port's interface as the daemon sees it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Its interface index, `None` when it is not in the namespace.
    pub ifindex: Option<i32>,
    /// Up with carrier (`IFF_UP` and `IFF_RUNNING`).
    pub running: bool,
}

#[derive(Debug)]
struct Port {
    agent: PortAgent,
    /// The interface at the last look; `None` before the first.
    seen: Option<Link>,
    /// Mismatches last logged (each change is logged once).
    logged: Vec<String>,
}

/// The LLDP/DCBX agents of every port of one node.
#[derive(Debug)]
pub struct NodeAgent {
    name: String,
    kind: Kind,
    ports: Vec<Port>,
    epoch: Instant,
}

impl NodeAgent {
    /// A node named `name` with one agent per port (each starts with a fast start).
    pub fn new(name: &str, kind: Kind, agents: Vec<PortAgent>) -> NodeAgent {
        let ports = agents.into_iter().map(|agent| Port { agent, seen: None, logged: Vec::new() }).collect();
        NodeAgent { name: name.to_string(), kind, ports, epoch: Instant::now() }
    }

    /// A switch's agents: every port advertises the switch's effective QoS
    /// ([`Dcb::from_switch`]), not willing, and expects the neighbour the topology cables it to.
    pub fn switch(cfg: &SwitchConfig) -> NodeAgent {
        let dcb = Dcb::from_switch(cfg);
        let t = Timing::from(&cfg.lldp);
        let chassis = cfg.chassis_mac.or(cfg.ports.first().map(|p| p.mac)).map_or([0; 6], |m| m.0);
        let agents = cfg
            .ports
            .iter()
            .map(|p| {
                let id = Identity {
                    chassis_mac: chassis,
                    mac: p.mac.0,
                    port: p.name.clone(),
                    system_name: cfg.name.clone(),
                    port_description: if p.peer.is_empty() { p.name.clone() } else { format!("to {}", p.peer) },
                    bridge: true,
                };
                let mut a = PortAgent::new(t, id, dcb.clone(), 0);
                a.expect(Expected::from_peer(&p.peer));
                a
            })
            .collect();
        NodeAgent::new(&cfg.name, Kind::Switch, agents)
    }

    /// Nanoseconds since the agent started (its clock).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Number of ports.
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    /// Whether the node has no port.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Port `port`'s interface name.
    pub fn port_name(&self, port: usize) -> Option<&str> {
        self.ports.get(port).map(|p| p.agent.identity().port.as_str())
    }

    /// The interface index port `port` had at the last look.
    pub fn ifindex(&self, port: usize) -> Option<i32> {
        self.ports.get(port).and_then(|p| p.seen.and_then(|l| l.ifindex))
    }

    /// The port a frame received on interface `ifindex` belongs to: the port seen at that index
    /// at the last look, else the port whose interface `lookup` (by name) finds there now (an
    /// interface that just appeared again).
    pub fn port_at(&self, ifindex: i32, lookup: impl Fn(&str) -> Option<i32>) -> Option<usize> {
        self.ports
            .iter()
            .position(|p| p.seen.and_then(|l| l.ifindex) == Some(ifindex))
            .or_else(|| self.ports.iter().position(|p| lookup(&p.agent.identity().port) == Some(ifindex)))
    }

    /// Looks at every port's interface (`look(name)`): one that appeared again (new index) or
    /// whose carrier came back gets a fast start; one that went away is logged. The first look
    /// only records the state: the agents already started with a fast start.
    pub fn watch_links(&mut self, now: u64, look: impl Fn(&str) -> Link) {
        for p in &mut self.ports {
            let name = p.agent.identity().port.clone();
            let is = look(&name);
            if let Some(was) = p.seen {
                if is.ifindex != was.ifindex {
                    if is.ifindex.is_some() {
                        tracing::info!(node = %self.name, port = %name, ifindex = ?is.ifindex, "interface appeared: LLDP fast start");
                        p.agent.link_up(now);
                    } else {
                        tracing::warn!(node = %self.name, port = %name, "interface gone from the namespace");
                    }
                } else if is.running && !was.running && is.ifindex.is_some() {
                    tracing::info!(node = %self.name, port = %name, "link up: LLDP fast start");
                    p.agent.link_up(now);
                }
            }
            p.seen = Some(is);
        }
    }

    /// Frames due at `now`, as (port index, frame); ages neighbours out. A port whose link was
    /// last seen without carrier sends nothing (IEEE 802.1AB 9.2.9: transmission needs
    /// `portEnabled`); its timers run on, and the link's return starts a fast start.
    pub fn poll(&mut self, now: u64) -> Vec<(usize, Vec<u8>)> {
        let out = self
            .ports
            .iter_mut()
            .enumerate()
            .filter_map(|(i, p)| {
                let f = p.agent.poll(now)?;
                p.seen.is_none_or(|s| s.running).then_some((i, f))
            })
            .collect();
        for i in 0..self.ports.len() {
            self.log_mismatches(i);
        }
        out
    }

    /// Earliest time [`NodeAgent::poll`] has work.
    pub fn next_deadline(&self) -> u64 {
        self.ports.iter().map(|p| p.agent.next_deadline()).min().unwrap_or(u64::MAX)
    }

    /// A frame port `port` received.
    pub fn on_frame(&mut self, port: usize, frame: &[u8], now: u64) {
        let node = &self.name;
        let Some(p) = self.ports.get_mut(port) else {
            tracing::warn!(node = %node, port, "LLDP frame from a port the node does not have");
            return;
        };
        let a = &mut p.agent;
        let name = a.identity().port.clone();
        match a.on_frame(frame, now) {
            Rx::Neighbour { new: true } => {
                let n = a
                    .neighbour()
                    .map(|n| format!("{} port {}", n.system_name.as_deref().unwrap_or(&n.chassis), n.port));
                tracing::info!(node = %node, port = %name, neighbours = a.neighbours().len(), dcbx_with = ?n, "new LLDP neighbour");
                let (oper, _) = a.negotiate();
                tracing::info!(node = %node, port = %name, pfc = %crate::dcb::prio_list(oper.pfc_enable), pfc_from = ?oper.pfc_from,
                    app = %crate::dcb::app_list(&oper.app), "DCBX operational settings");
            }
            Rx::TableFull => {
                tracing::warn!(node = %node, port = %name, max = a.max_neighbours(), "neighbour table full: LLDPDU of a new neighbour discarded")
            }
            Rx::Neighbour { new: false } => {}
            Rx::Shutdown => tracing::info!(node = %node, port = %name, "neighbour sent a shutdown LLDPDU"),
            Rx::Malformed(why) => {
                tracing::warn!(node = %node, port = %name, "malformed LLDPDU discarded: {why}")
            }
        }
        self.log_mismatches(port);
    }

    fn log_mismatches(&mut self, port: usize) {
        let p = &mut self.ports[port];
        let (_, m) = p.agent.negotiate();
        let now: Vec<String> = m.iter().map(|m| m.to_string()).collect();
        if now != p.logged {
            for m in now.iter().filter(|m| !p.logged.contains(m)) {
                tracing::warn!(node = %self.name, port = %p.agent.identity().port, "DCBX mismatch: {m}");
            }
            p.logged = now;
        }
    }

    /// The neighbour table.
    pub fn report(&self) -> NodeReport {
        let now = self.now();
        NodeReport {
            node: self.name.clone(),
            kind: self.kind.as_str().into(),
            ports: self.ports.iter().map(|p| p.agent.report(now)).collect(),
        }
    }

    /// A shutdown LLDPDU (TTL 0) per port.
    pub fn shutdown_frames(&self) -> Vec<(usize, Vec<u8>)> {
        self.ports.iter().enumerate().map(|(i, p)| (i, p.agent.shutdown_frame())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::config::PortConfig;

    fn cfg() -> SwitchConfig {
        let mut c: SwitchConfig = serde_json::from_str(
            r#"{"name":"rail1","role":"rail","netns":null,"hash_seed":1,"metrics_listen":"127.0.0.1:1",
                "ports":[],"nexthops":[],"groups":[],"routes":[]}"#,
        )
        .unwrap();
        for (i, n) in ["eth0", "eth1"].iter().enumerate() {
            c.ports.push(PortConfig {
                name: n.to_string(),
                mac: format!("02:00:00:00:00:0{i}").parse().unwrap(),
                line_rate_bps: 1_000_000_000,
                addresses: vec![],
                peer: "host1:gpu0".into(),
                tx_delay_ns: 0,
                rx_delay_ns: 0,
            });
        }
        c
    }

    fn up(i: i32) -> Link {
        Link { ifindex: Some(i), running: true }
    }

    #[test]
    fn every_port_advertises_and_learns() {
        let mut a = NodeAgent::switch(&cfg());
        let out = a.poll(0);
        assert_eq!(out.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![0, 1]);
        // Two switches cabled port 0 to port 1: each learns the other.
        let mut b = NodeAgent::switch(&cfg());
        b.on_frame(1, &out[0].1, 0);
        let r = b.report();
        assert_eq!(r.kind, "switch");
        let n = r.ports[1].neighbour.as_ref().unwrap();
        assert_eq!((n.info.system_name.as_deref(), n.info.port.as_str()), (Some("rail1"), "eth0"));
        assert_eq!(r.ports[1].local.chassis, "02:00:00:00:00:00", "chassis = first port's MAC without chassis_mac");
        assert!(r.ports[1].mismatches.is_empty());
        assert_eq!(
            r.ports[1].expected,
            Expected::from_peer("host1:gpu0"),
            "the topology's peer is the expected neighbour"
        );
        assert_eq!(a.shutdown_frames().len(), 2);
        // A frame on a port that does not exist is logged, not a panic.
        b.on_frame(9, &out[0].1, 0);
    }

    #[test]
    fn a_link_coming_up_again_gets_a_fast_start() {
        let mut a = NodeAgent::switch(&cfg());
        for s in 0..5 {
            a.poll(s * 1_000_000_000);
        }
        let idle = a.next_deadline();
        assert!(idle > 30_000_000_000, "fast start is over: next LLDPDU at the interval");
        a.watch_links(6_000_000_000, |_| up(7));
        assert_eq!(a.next_deadline(), idle, "the first look only records the state");
        a.watch_links(7_000_000_000, |p| Link { ifindex: Some(7), running: p != "eth1" });
        assert_eq!(a.next_deadline(), idle, "carrier lost: nothing to send");
        // Its interval comes while the carrier is away: only eth0 sends.
        let due = a.poll(idle);
        assert_eq!(due.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![0], "no LLDPDU without carrier");
        let back = idle + 1_000_000_000;
        a.watch_links(back, |_| up(7));
        assert_eq!(a.next_deadline(), back, "eth1 came back up: an LLDPDU at once");
        let due = a.poll(back);
        assert_eq!(due.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn an_interface_that_appears_again_gets_a_fast_start_and_is_found_by_its_new_index() {
        let mut a = NodeAgent::switch(&cfg());
        for s in 0..5 {
            a.poll(s * 1_000_000_000);
        }
        let idle = a.next_deadline();
        let idx = |n: &str| if n == "eth0" { 10 } else { 11 };
        a.watch_links(6_000_000_000, |n| up(idx(n)));
        assert_eq!((a.ifindex(0), a.ifindex(1)), (Some(10), Some(11)));
        assert_eq!(a.port_at(11, |_| None), Some(1));
        // eth1 is deleted: no fast start, no index.
        a.watch_links(7_000_000_000, |n| if n == "eth1" { Link { ifindex: None, running: false } } else { up(10) });
        assert_eq!((a.next_deadline(), a.ifindex(1)), (idle, None));
        // A frame on the new index before the next look is matched by name.
        assert_eq!(a.port_at(21, |n| (n == "eth1").then_some(21)), Some(1));
        assert_eq!(a.port_at(21, |_| None), None, "an index no port has");
        // Recreated at index 21 (already running): a fast start, though carrier never looked down.
        a.watch_links(8_000_000_000, |n| if n == "eth1" { up(21) } else { up(10) });
        assert_eq!(a.next_deadline(), 8_000_000_000);
        assert_eq!(a.ifindex(1), Some(21));
        let due = a.poll(8_000_000_000);
        assert_eq!(due.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_host_node_reports_its_kind_and_names() {
        let c = cfg();
        let t = Timing::from(&c.lldp);
        let id = Identity {
            chassis_mac: [2, 0, 0, 0, 1, 1],
            mac: [2, 0, 0, 0, 1, 1],
            port: "gpu0".into(),
            system_name: "host1".into(),
            port_description: "host1 gpu0".into(),
            bridge: false,
        };
        let a =
            NodeAgent::new("host1", Kind::Host, vec![PortAgent::new(t, id, Dcb::nic(true, 1 << 3, 24, 3, 48, 7), 0)]);
        let r = a.report();
        assert_eq!((r.node.as_str(), r.kind.as_str(), r.ports.len()), ("host1", "host", 1));
        assert_eq!((a.len(), a.port_name(0), a.port_name(1)), (1, Some("gpu0"), None));
    }
}
