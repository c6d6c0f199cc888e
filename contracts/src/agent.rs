//! The configuration of `rocefab-nicd`, the NIC agent of one GPU host: written by `rocefab up`
//! (control's plan), read by the daemon (`host-daemons`). Each GPU NIC runs an LLDP/DCBX agent
//! that advertises [`AgentNic::dcb`] and, when willing, adopts its switch port's settings.
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::config::LldpConfig;
use crate::dcb::Dcb;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A NIC as `rocefab up` writes it (no `peer`: the field is optional).
    fn nic() -> AgentNic {
        let dcb = serde_json::to_value(Dcb::nic(true, 1 << 3, 24, 3, 48, 7)).unwrap();
        let v = serde_json::json!({"name": "gpu0", "mac": "02:00:00:00:01:01", "dcb": dcb, "data_dscp": 24, "cnp_dscp": 48});
        serde_json::from_value(v).unwrap()
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

    #[test]
    fn the_peer_is_optional_and_unknown_fields_are_refused() {
        let mut n = nic();
        let s = serde_json::to_string(&n).unwrap();
        assert!(!s.contains("peer"), "{s}");
        n.peer = Some("rail1:eth1".into());
        let s = serde_json::to_string(&n).unwrap();
        assert_eq!(serde_json::from_str::<AgentNic>(&s).unwrap(), n);
        let bad = s.replacen("\"cnp_dscp\"", "\"cnp_dcsp\"", 1);
        assert!(serde_json::from_str::<AgentNic>(&bad).unwrap_err().to_string().contains("unknown field `cnp_dcsp`"));
    }
}
