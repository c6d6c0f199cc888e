//! The switch's LLDP/DCBX agent (IEEE 802.1AB, IEEE 802.1Qaz): one [`lldp_agent::PortAgent`]
//! per port, advertising the switch's effective QoS ([`lldp_agent::Dcb::from_switch`]), not
//! willing. Each port keeps every neighbour it hears (one entry per Chassis ID + Port ID) and
//! acts in DCBX on the one the topology cables it to (the port's `peer`, System Name and Port
//! ID), else on the oldest entry ([`lldp_agent::port`]). It runs on the control side: frames it sends go to the data-plane thread through
//! the control ring ([`crate::ctrl::ControlEnd::send`]) and leave through the port's control
//! queue; LLDP frames the ports receive come back through the same channel
//! ([`crate::ctrl::ControlEnd::next_received`]).
use std::time::Instant;

use lldp_agent::{Dcb, Expected, Identity, NodeReport, PortAgent, Rx, Timing};
use rocefab_contracts::config::SwitchConfig;

/// The agents of every port of one switch.
#[derive(Debug)]
pub struct SwitchAgent {
    name: String,
    ports: Vec<PortAgent>,
    epoch: Instant,
    /// Per port, the mismatches last logged (each change is logged once).
    logged: Vec<Vec<String>>,
    /// Per port, whether the link was up (carrier) at the last look; `None` before the first.
    running: Vec<Option<bool>>,
}

impl SwitchAgent {
    /// Agents for every port of `cfg`, all starting with a fast start.
    pub fn new(cfg: &SwitchConfig) -> SwitchAgent {
        let dcb = Dcb::from_switch(cfg);
        let t = Timing::from(&cfg.lldp);
        let chassis = cfg.chassis_mac.or(cfg.ports.first().map(|p| p.mac)).map_or([0; 6], |m| m.0);
        let ports = cfg
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
        SwitchAgent {
            name: cfg.name.clone(),
            logged: vec![Vec::new(); cfg.ports.len()],
            running: vec![None; cfg.ports.len()],
            ports,
            epoch: Instant::now(),
        }
    }

    /// Looks at every port's link state (`running(port name)`): a port whose link came up
    /// (again) gets a fast start (IEEE 802.1AB 9.2.7.7.? txFast on link up). The first look only
    /// records the state: the agents already started with a fast start.
    pub fn watch_links(&mut self, now: u64, running: impl Fn(&str) -> Option<bool>) {
        for (a, was) in self.ports.iter_mut().zip(self.running.iter_mut()) {
            let is = running(&a.identity().port).unwrap_or(false);
            if *was == Some(false) && is {
                tracing::info!(switch = %self.name, port = %a.identity().port, "link up: LLDP fast start");
                a.link_up(now);
            }
            *was = Some(is);
        }
    }

    /// Nanoseconds since the agent started (its clock).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Frames due at `now`, as (port index, frame); ages neighbours out.
    pub fn poll(&mut self, now: u64) -> Vec<(usize, Vec<u8>)> {
        self.ports.iter_mut().enumerate().filter_map(|(i, a)| a.poll(now).map(|f| (i, f))).collect()
    }

    /// Earliest time [`SwitchAgent::poll`] has work.
    pub fn next_deadline(&self) -> u64 {
        self.ports.iter().map(PortAgent::next_deadline).min().unwrap_or(u64::MAX)
    }

    /// A frame port `port` received.
    pub fn on_frame(&mut self, port: usize, frame: &[u8], now: u64) {
        let Some(a) = self.ports.get_mut(port) else {
            tracing::warn!(switch = %self.name, port, "LLDP frame from a port the switch does not have");
            return;
        };
        let name = a.identity().port.clone();
        match a.on_frame(frame, now) {
            Rx::Neighbour { new: true } => {
                let n = a
                    .neighbour()
                    .map(|n| format!("{} port {}", n.system_name.as_deref().unwrap_or(&n.chassis), n.port));
                tracing::info!(switch = %self.name, port = %name, neighbours = a.neighbours().len(), dcbx_with = ?n, "new LLDP neighbour");
            }
            Rx::TableFull => {
                tracing::warn!(switch = %self.name, port = %name, max = a.max_neighbours(), "neighbour table full: LLDPDU of a new neighbour discarded")
            }
            Rx::Neighbour { new: false } => {}
            Rx::Shutdown => tracing::info!(switch = %self.name, port = %name, "neighbour sent a shutdown LLDPDU"),
            Rx::Malformed(why) => {
                tracing::warn!(switch = %self.name, port = %name, "malformed LLDPDU discarded: {why}")
            }
        }
        self.log_mismatches(port);
    }

    fn log_mismatches(&mut self, port: usize) {
        let (_, m) = self.ports[port].negotiate();
        let now: Vec<String> = m.iter().map(|m| m.to_string()).collect();
        if now != self.logged[port] {
            for m in now.iter().filter(|m| !self.logged[port].contains(m)) {
                tracing::warn!(switch = %self.name, port = %self.ports[port].identity().port, "DCBX mismatch: {m}");
            }
            self.logged[port] = now;
        }
    }

    /// The neighbour table.
    pub fn report(&self) -> NodeReport {
        let now = self.now();
        NodeReport {
            node: self.name.clone(),
            kind: "switch".into(),
            ports: self.ports.iter().map(|a| a.report(now)).collect(),
        }
    }

    /// A shutdown LLDPDU (TTL 0) per port.
    pub fn shutdown_frames(&self) -> Vec<(usize, Vec<u8>)> {
        self.ports.iter().enumerate().map(|(i, a)| (i, a.shutdown_frame())).collect()
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
            });
        }
        c
    }

    #[test]
    fn every_port_advertises_and_learns() {
        let mut a = SwitchAgent::new(&cfg());
        let out = a.poll(0);
        assert_eq!(out.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![0, 1]);
        // Two switches cabled port 0 to port 1: each learns the other.
        let mut b = SwitchAgent::new(&cfg());
        b.on_frame(1, &out[0].1, 0);
        let r = b.report();
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
        let mut a = SwitchAgent::new(&cfg());
        for s in 0..5 {
            a.poll(s * 1_000_000_000);
        }
        let idle = a.next_deadline();
        assert!(idle > 30_000_000_000, "fast start is over: next LLDPDU at the interval");
        a.watch_links(6_000_000_000, |_| Some(true));
        assert_eq!(a.next_deadline(), idle, "the first look only records the state");
        a.watch_links(7_000_000_000, |p| Some(p != "eth1"));
        a.watch_links(8_000_000_000, |_| Some(true));
        assert_eq!(a.next_deadline(), 8_000_000_000, "eth1 came back up: an LLDPDU at once");
        let due = a.poll(8_000_000_000);
        assert_eq!(due.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![1]);
    }
}
