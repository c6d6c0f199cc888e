//! Data Center Bridging settings as DCBX (IEEE 802.1Qaz, now IEEE 802.1Q-2018 clause 38 and
//! annex D) carries them, in the units of the TLVs: what one side of a link advertises or runs.
//! The NIC agent's configuration ([`crate::agent`]) embeds them; the LLDP/DCBX agent
//! (`lldp_agent::dcb`) encodes them as TLVs and negotiates them with a peer's.
//!
//! - [`Dcb`]: one side's ETS, PFC and Application Priority settings.
//! - [`Dcb::from_switch`]: the effective QoS of a switch (its DSCP map, lossless and strict
//!   priorities, ETS shares) as its ports advertise it; [`Dcb::nic`]: a NIC's own settings.
use serde::{Deserialize, Serialize};

use crate::config::{QosConfig, SwitchConfig};

/// UDP destination port of RoCEv2 (IANA), the protocol of the RoCEv2 APP entry.
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// Selector value of a DSCP APP entry (IEEE 802.1Q-2018 table D-9).
pub const SEL_DSCP: u8 = 5;
/// Selector value of a UDP/DCCP port APP entry.
pub const SEL_UDP: u8 = 3;
/// Selector value of a TCP/SCTP/UDP/DCCP port APP entry.
pub const SEL_PORT: u8 = 4;
/// TSA values (IEEE 802.1Q-2018 table 8-6).
pub const TSA_STRICT: u8 = 0;
pub const TSA_CBS: u8 = 1;
pub const TSA_ETS: u8 = 2;

/// One Application Priority entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct App {
    /// 1 EtherType, 2 TCP/SCTP port, 3 UDP/DCCP port, 4 TCP/SCTP/UDP/DCCP port, 5 DSCP.
    pub selector: u8,
    /// EtherType, port or DSCP value.
    pub protocol: u16,
    /// Priority 0..=7.
    pub priority: u8,
}

impl App {
    pub fn dscp(dscp: u8, priority: u8) -> App {
        App { selector: SEL_DSCP, protocol: u16::from(dscp), priority }
    }
    pub fn rocev2(priority: u8) -> App {
        App { selector: SEL_UDP, protocol: ROCEV2_UDP_PORT, priority }
    }
}

impl std::fmt::Display for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.selector {
            SEL_DSCP => write!(f, "dscp {}->{}", self.protocol, self.priority),
            SEL_UDP => write!(f, "udp {}->{}", self.protocol, self.priority),
            s => write!(f, "sel{s} {}->{}", self.protocol, self.priority),
        }
    }
}

/// The RoCEv2 priority of an APP table (its UDP 4791 entry).
pub fn roce_priority(app: &[App]) -> Option<u8> {
    app.iter()
        .find(|a| (a.selector == SEL_UDP || a.selector == SEL_PORT) && a.protocol == ROCEV2_UDP_PORT)
        .map(|a| a.priority)
}

/// ETS tables as one side advertises them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ets {
    /// Traffic class of each priority 0..=7.
    pub prio_tc: [u8; 8],
    /// Bandwidth percent of each traffic class (ETS classes; 0 for strict ones).
    pub tc_bandwidth: [u8; 8],
    /// Transmission selection algorithm of each traffic class (0 strict, 1 CBS, 2 ETS).
    pub tsa: [u8; 8],
}

impl Ets {
    /// Priority p in traffic class p, every class strict priority.
    pub fn strict_identity() -> Ets {
        Ets { prio_tc: [0, 1, 2, 3, 4, 5, 6, 7], tc_bandwidth: [0; 8], tsa: [TSA_STRICT; 8] }
    }
    /// A switch's scheduler: priority p in traffic class p; strict queues TSA strict, every other
    /// queue TSA ETS with its share of `ets_percent` (0 when it has none).
    pub fn from_qos(q: &QosConfig) -> Ets {
        let strict = |tc: usize| q.strict_priorities & (1 << tc) != 0;
        Ets {
            prio_tc: [0, 1, 2, 3, 4, 5, 6, 7],
            tc_bandwidth: std::array::from_fn(|tc| if strict(tc) { 0 } else { q.ets_percent[tc] }),
            tsa: std::array::from_fn(|tc| if strict(tc) { TSA_STRICT } else { TSA_ETS }),
        }
    }
}

/// The DCB settings one side of a link advertises (or runs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dcb {
    /// Willing to accept the peer's ETS, PFC and APP configuration.
    pub willing: bool,
    pub ets: Ets,
    /// Bit p: PFC enabled on priority p.
    pub pfc_enable: u8,
    /// Priorities that may be PFC-enabled at once.
    pub pfc_cap: u8,
    /// Application Priority table, sorted.
    pub app: Vec<App>,
}

impl Dcb {
    /// What a switch's ports advertise: its effective QoS, not willing.
    ///
    /// - ETS: priority p → traffic class p (the switch queues a frame in the queue numbered like
    ///   its priority), and the scheduler's real configuration: the strict queues with TSA strict
    ///   priority (0) and bandwidth 0, the queues with a share (`qos.ets`) with TSA ETS (2) and
    ///   their percent. A queue that is neither is advertised as ETS with 0 %: that is what it
    ///   is guaranteed (it is served only when no weighted queue can send), and the bandwidth
    ///   table still sums to 100 as the ETS TLVs (802.1Q-2018 D.2.9, D.2.10) require.
    /// - PFC: the lossless priorities.
    /// - APP: every DSCP the switch maps to a non-zero priority (DSCP 24 → 3, DSCP 48 → 7 by
    ///   default), and RoCEv2 (UDP 4791) → the lowest lossless priority, or the priority of DSCP
    ///   24 when PFC is off.
    pub fn from_switch(cfg: &SwitchConfig) -> Dcb {
        let mut app: Vec<App> = cfg
            .dscp_to_tc
            .iter()
            .enumerate()
            .filter(|&(_, &tc)| tc != 0 && tc <= 7)
            .map(|(d, &tc)| App::dscp(d as u8, tc))
            .collect();
        let lossless = cfg.qos.lossless_priorities;
        let roce = if lossless != 0 {
            Some(lossless.trailing_zeros() as u8)
        } else {
            cfg.dscp_to_tc.get(24).copied().filter(|&p| p != 0 && p <= 7)
        };
        if let Some(p) = roce {
            app.push(App::rocev2(p));
        }
        app.sort();
        Dcb { willing: false, ets: Ets::from_qos(&cfg.qos), pfc_enable: lossless, pfc_cap: 8, app }
    }

    /// A NIC's own settings before negotiation: PFC on `pfc_enable`, RoCEv2 at DSCP
    /// `roce_dscp` → `roce_priority`, CNPs at DSCP `cnp_dscp` → `cnp_priority`; ETS the
    /// fabric's default scheduler (queue 7 strict, 0 and 3 at 50/50), so a NIC that is not
    /// willing agrees with a switch left at its defaults.
    pub fn nic(willing: bool, pfc_enable: u8, roce_dscp: u8, roce_priority: u8, cnp_dscp: u8, cnp_priority: u8) -> Dcb {
        let mut app =
            vec![App::rocev2(roce_priority), App::dscp(roce_dscp, roce_priority), App::dscp(cnp_dscp, cnp_priority)];
        app.sort();
        app.dedup();
        Dcb { willing, ets: Ets::from_qos(&QosConfig::default()), pfc_enable, pfc_cap: 8, app }
    }

    /// The RoCEv2 priority of the APP table (the UDP 4791 entry).
    pub fn roce_priority(&self) -> Option<u8> {
        roce_priority(&self.app)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nic_dcb_has_the_json_shape_rocefab_up_writes() {
        // The shape of `dcb` in a NIC agent's configuration (host.nicd.json), field by field.
        let d = Dcb::nic(true, 1 << 3, 24, 3, 48, 7);
        let want = r#"{"willing":true,"ets":{"prio_tc":[0,1,2,3,4,5,6,7],"tc_bandwidth":[50,0,0,50,0,0,0,0],"tsa":[2,2,2,2,2,2,2,0]},"pfc_enable":8,"pfc_cap":8,"app":[{"selector":3,"protocol":4791,"priority":3},{"selector":5,"protocol":24,"priority":3},{"selector":5,"protocol":48,"priority":7}]}"#;
        assert_eq!(serde_json::to_string(&d).unwrap(), want);
        assert_eq!(serde_json::from_str::<Dcb>(want).unwrap(), d);
        assert_eq!(d.roce_priority(), Some(3));
        let extra = want.replacen("\"pfc_cap\":8", "\"pfc_cap\":8,\"cee\":1", 1);
        assert!(serde_json::from_str::<Dcb>(&extra).unwrap_err().to_string().contains("unknown field `cee`"));
    }

    #[test]
    fn the_roce_priority_comes_from_a_udp_or_any_port_entry() {
        assert_eq!(roce_priority(&[App::dscp(24, 3)]), None);
        assert_eq!(roce_priority(&[App::dscp(24, 3), App::rocev2(5)]), Some(5));
        assert_eq!(roce_priority(&[App { selector: SEL_PORT, protocol: ROCEV2_UDP_PORT, priority: 2 }]), Some(2));
        assert_eq!(roce_priority(&[App { selector: 2, protocol: ROCEV2_UDP_PORT, priority: 2 }]), None);
        assert_eq!(App::rocev2(3).to_string(), "udp 4791->3");
        assert_eq!(App::dscp(48, 7).to_string(), "dscp 48->7");
    }
}
