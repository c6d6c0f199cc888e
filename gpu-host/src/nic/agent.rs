//! The GPU host's NIC control plane, `rocefab-nicd`, as data: an LLDP/DCBX agent on every GPU NIC
//! ([`lldp_agent::PortAgent`]), willing by default, so a NIC adopts the PFC enable bitmap and
//! Application Priority table of the switch port it is cabled to (IEEE 802.1Qaz). The
//! controller reads the negotiated values ([`classes_from`]) from the agent's `GET /lldp` and
//! gives them to the NIC emulator of a job ([`super::job::NicClasses`]): the DSCP it marks
//! RoCEv2 with, its priorities, and the PFC enable vector (the priorities whose PFC pauses it
//! honours). The daemon with its sockets is `host-daemons`' `rocefab-nicd`.
use std::net::SocketAddr;

use lldp_agent::{Dcb, PortReport};
use rocefab_contracts::config::LldpConfig;
use serde::{Deserialize, Serialize};

use super::job::NicClasses;

/// `rocefab-nicd`'s configuration, written by `rocefab up`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Host name (the LLDP System Name).
    pub host: String,
    /// Network namespace of the host (entered after binding the HTTP listener).
    pub netns: Option<String>,
    /// `GET /lldp` and `/metrics` listen address, bound in the namespace the agent starts in.
    pub listen: SocketAddr,
    /// LLDP timing.
    #[serde(default)]
    pub lldp: LldpConfig,
    pub nics: Vec<AgentNic>,
}

/// One GPU NIC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentNic {
    /// Interface name in the host namespace.
    pub name: String,
    /// The NIC's MAC (Chassis ID and source MAC).
    pub mac: String,
    /// What the NIC advertises before (or without) adopting a peer's settings.
    pub dcb: Dcb,
    /// DSCP the NIC marks RoCEv2 with when the APP table allows it (24).
    pub data_dscp: u8,
    /// DSCP of its CNPs (48).
    pub cnp_dscp: u8,
    /// The switch port the topology cables the NIC to (`rail1:eth1`): when the NIC hears
    /// several LLDP agents, it takes DCBX from this one (System Name and Port ID) if it is
    /// among them, else from the one heard first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

/// The classes a NIC runs with after negotiation: RoCEv2 at the APP table's UDP 4791 priority
/// with a DSCP the table maps to it (`nic.data_dscp` when it does), CNPs at `nic.cnp_dscp` with
/// the priority the table gives that DSCP; PFC on the operational PFC enable vector (the
/// switch's, adopted by a willing NIC). Values the table does not give stay the NIC's own.
pub fn classes_from(nic: &AgentNic, report: &PortReport) -> NicClasses {
    let own = &nic.dcb;
    let oper = &report.oper;
    let data_priority = oper.roce_priority().or(own.roce_priority()).unwrap_or(3);
    let data_dscp = oper.roce_dscp(nic.data_dscp).unwrap_or(nic.data_dscp);
    let cnp_priority = oper
        .dscp_priority(nic.cnp_dscp)
        .or_else(|| {
            own.app
                .iter()
                .find(|a| a.selector == lldp_agent::dcb::SEL_DSCP && a.protocol == u16::from(nic.cnp_dscp))
                .map(|a| a.priority)
        })
        .unwrap_or(7);
    NicClasses { data_dscp, data_priority, cnp_dscp: nic.cnp_dscp, cnp_priority, pfc_enable: oper.pfc_enable }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lldp_agent::{Identity, PortAgent, Timing};

    fn nic() -> AgentNic {
        AgentNic {
            name: "gpu0".into(),
            mac: "02:00:00:00:01:01".into(),
            dcb: Dcb::nic(true, 1 << 3, 24, 3, 48, 7),
            data_dscp: 24,
            cnp_dscp: 48,
            peer: None,
        }
    }

    fn report_with_peer(peer: Option<Dcb>) -> PortReport {
        let n = nic();
        let id = Identity {
            chassis_mac: [2, 0, 0, 0, 1, 1],
            mac: [2, 0, 0, 0, 1, 1],
            port: "gpu0".into(),
            system_name: "host1".into(),
            port_description: "gpu0".into(),
            bridge: false,
        };
        let mut a = PortAgent::new(Timing::default(), id, n.dcb.clone(), 0);
        if let Some(p) = peer {
            let sid = Identity {
                chassis_mac: [2, 0, 0, 0, 9, 9],
                mac: [2, 0, 0, 0, 9, 9],
                port: "eth0".into(),
                system_name: "rail1".into(),
                port_description: String::new(),
                bridge: true,
            };
            let sw = PortAgent::new(Timing::default(), sid, p, 0);
            a.on_frame(&sw.frame(120), 0);
        }
        a.report(0)
    }

    #[test]
    fn without_a_peer_the_nic_keeps_its_classes() {
        assert_eq!(classes_from(&nic(), &report_with_peer(None)), NicClasses::default());
    }

    #[test]
    fn a_willing_nic_takes_the_switch_priorities() {
        // The switch runs RoCEv2 lossless on priority 4 with DSCP 26, CNPs at DSCP 48 → 6.
        let mut sw = Dcb::nic(false, 1 << 4, 26, 4, 48, 6);
        sw.willing = false;
        let c = classes_from(&nic(), &report_with_peer(Some(sw)));
        assert_eq!(
            c,
            NicClasses { data_dscp: 26, data_priority: 4, cnp_dscp: 48, cnp_priority: 6, pfc_enable: 1 << 4 }
        );
    }

    #[test]
    fn config_round_trips() {
        let c = AgentConfig {
            host: "host1".into(),
            netns: Some("rf-x-host1".into()),
            listen: "127.0.0.1:9500".parse().unwrap(),
            lldp: LldpConfig::default(),
            nics: vec![nic()],
        };
        let s = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<AgentConfig>(&s).unwrap(), c);
    }
}
