//! The GPU host's NIC control plane, `rocefab-nicd`, as data: an LLDP/DCBX agent on every GPU NIC
//! ([`lldp_agent::PortAgent`]), willing by default, so a NIC adopts the PFC enable bitmap and
//! Application Priority table of the switch port it is cabled to (IEEE 802.1Qaz). The
//! controller reads the negotiated values ([`classes_from`]) from the agent's `GET /lldp` and
//! gives them to the NIC emulator of a job ([`super::job::NicClasses`]): the DSCP it marks
//! RoCEv2 with, its priorities, and the PFC enable vector (the priorities whose PFC pauses it
//! honours). The agent's configuration is a contract type (`rocefab_contracts::agent`),
//! re-exported here; the daemon with its sockets is `host-daemons`' `rocefab-nicd`.
use lldp_agent::PortReport;
pub use rocefab_contracts::agent::{AgentConfig, AgentNic};

use super::job::NicClasses;

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
    use lldp_agent::{Dcb, Identity, PortAgent, Timing};

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
}
