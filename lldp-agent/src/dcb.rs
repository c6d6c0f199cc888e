//! DCBX (IEEE 802.1Qaz, now IEEE 802.1Q-2018 clause 38 and annex D): how a port advertises its
//! Data Center Bridging settings and how a willing port adopts its peer's. The settings
//! themselves ([`Dcb`], [`Ets`], [`App`]) are contract types (`rocefab_contracts::dcb`, the NIC
//! agent's configuration embeds them), re-exported here; this module adds what the agent does
//! with them.
//!
//! - [`DcbxTlvs::tlvs`]: the DCBX TLVs advertising a [`Dcb`].
//! - [`negotiate`]: the operational settings of a port given its own and the peer's, with the
//!   willing rules of IEEE 802.1Q-2018 38.4 (ETS, 38.5 PFC, 38.6 Application Priority): a
//!   willing port takes a non-willing peer's configuration; when both are willing, the port
//!   with the numerically lower chassis MAC keeps its own; when neither is, both keep their own
//!   and a difference is a [`Mismatch`], as is a PFC configuration that disagrees with the
//!   Application Priority table (RoCEv2 mapped to a priority that is not lossless).
use rocefab_contracts::dcb::roce_priority as app_roce_priority;
pub use rocefab_contracts::dcb::{
    App, Dcb, Ets, ROCEV2_UDP_PORT, SEL_DSCP, SEL_PORT, SEL_UDP, TSA_CBS, TSA_ETS, TSA_STRICT,
};
use rocefab_wire::dcbx::{
    AppEntry, AppPriority, AppSelector, DcbxTlv, EtsConfig, EtsRecommendation, EtsTables, PfcConfig, Tsa,
};
use rocefab_wire::ethernet::{Priority, PrioritySet};
use serde::{Deserialize, Serialize};

fn app_to_wire(a: App) -> AppEntry {
    AppEntry {
        priority: Priority::from_bits(a.priority),
        selector: AppSelector::from(a.selector),
        protocol: a.protocol,
    }
}

fn app_from_wire(e: &AppEntry) -> App {
    App { selector: u8::from(e.selector), protocol: e.protocol, priority: e.priority.value() }
}

fn ets_to_wire(e: Ets) -> EtsTables {
    EtsTables { prio_tc: e.prio_tc, tc_bandwidth: e.tc_bandwidth, tsa: e.tsa.map(Tsa::from) }
}

fn ets_from_wire(t: &EtsTables) -> Ets {
    Ets { prio_tc: t.prio_tc, tc_bandwidth: t.tc_bandwidth, tsa: t.tsa.map(u8::from) }
}

/// The DCBX TLVs of a side's settings (an extension of the contract type [`Dcb`]).
pub trait DcbxTlvs {
    /// The DCBX TLVs advertising these settings: ETS Configuration, ETS Recommendation, PFC
    /// Configuration, Application Priority.
    fn tlvs(&self) -> Vec<DcbxTlv>;
}

impl DcbxTlvs for Dcb {
    fn tlvs(&self) -> Vec<DcbxTlv> {
        let tables = ets_to_wire(self.ets);
        vec![
            DcbxTlv::EtsConfiguration(EtsConfig { willing: self.willing, cbs: false, max_tcs: 8, tables }),
            DcbxTlv::EtsRecommendation(EtsRecommendation { tables }),
            DcbxTlv::PfcConfiguration(PfcConfig {
                willing: self.willing,
                mbc: false,
                pfc_cap: self.pfc_cap,
                enabled: PrioritySet(self.pfc_enable),
            }),
            DcbxTlv::ApplicationPriority(AppPriority { entries: self.app.iter().map(|&a| app_to_wire(a)).collect() }),
        ]
    }
}

/// What a peer advertised, TLV by TLV (a peer may leave any of them out).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerDcb {
    /// ETS Configuration: willing bit and tables.
    pub ets_willing: Option<bool>,
    pub ets: Option<Ets>,
    /// ETS Recommendation tables.
    pub ets_recommendation: Option<Ets>,
    /// PFC Configuration.
    pub pfc_willing: Option<bool>,
    pub pfc_enable: Option<u8>,
    pub pfc_cap: Option<u8>,
    pub pfc_mbc: Option<bool>,
    /// Application Priority table, sorted.
    pub app: Option<Vec<App>>,
}

impl PeerDcb {
    /// Collects the IEEE DCBX TLVs of a received LLDPDU (CEE TLVs are not negotiated).
    pub fn from_tlvs<'a>(tlvs: impl Iterator<Item = &'a DcbxTlv>) -> PeerDcb {
        let mut p = PeerDcb::default();
        for t in tlvs {
            match t {
                DcbxTlv::EtsConfiguration(c) => {
                    p.ets_willing = Some(c.willing);
                    p.ets = Some(ets_from_wire(&c.tables));
                }
                DcbxTlv::EtsRecommendation(r) => p.ets_recommendation = Some(ets_from_wire(&r.tables)),
                DcbxTlv::PfcConfiguration(c) => {
                    p.pfc_willing = Some(c.willing);
                    p.pfc_enable = Some(c.enabled.0);
                    p.pfc_cap = Some(c.pfc_cap);
                    p.pfc_mbc = Some(c.mbc);
                }
                DcbxTlv::ApplicationPriority(a) => {
                    let mut v: Vec<App> = a.entries.iter().map(app_from_wire).collect();
                    v.sort();
                    p.app = Some(v);
                }
                DcbxTlv::Cee(_) => {}
            }
        }
        p
    }

    /// Whether the peer sent any IEEE DCBX TLV.
    pub fn any(&self) -> bool {
        self.ets.is_some() || self.ets_recommendation.is_some() || self.pfc_enable.is_some() || self.app.is_some()
    }
}

/// Where an operational value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// This side's own configuration.
    Local,
    /// Adopted from the peer (this side is willing).
    Peer,
}

/// Settings a port runs with after negotiation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Oper {
    pub ets: Ets,
    pub ets_from: Source,
    pub pfc_enable: u8,
    pub pfc_from: Source,
    pub app: Vec<App>,
    pub app_from: Source,
}

impl Oper {
    /// RoCEv2 priority (the UDP 4791 APP entry).
    pub fn roce_priority(&self) -> Option<u8> {
        app_roce_priority(&self.app)
    }
    /// The DSCP to send RoCEv2 with: `preferred` if the APP table maps it to the RoCEv2
    /// priority, else the lowest DSCP that does.
    pub fn roce_dscp(&self, preferred: u8) -> Option<u8> {
        let p = self.roce_priority()?;
        let dscps = || self.app.iter().filter(move |a| a.selector == SEL_DSCP && a.priority == p && a.protocol < 64);
        if dscps().any(|a| a.protocol == u16::from(preferred)) {
            return Some(preferred);
        }
        dscps().map(|a| a.protocol as u8).min()
    }
    /// Priority of a DSCP in the APP table.
    pub fn dscp_priority(&self, dscp: u8) -> Option<u8> {
        self.app.iter().find(|a| a.selector == SEL_DSCP && a.protocol == u16::from(dscp)).map(|a| a.priority)
    }
}

/// A difference between two non-willing peers, or an inconsistent configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mismatch {
    /// Neither side is willing and the PFC enable bitmaps differ.
    Pfc { local: u8, peer: u8 },
    /// Neither side is willing and the APP tables differ.
    App { local: Vec<App>, peer: Vec<App> },
    /// Neither side is willing and the ETS priority → TC or TSA tables differ.
    Ets { local: Ets, peer: Ets },
    /// `side` (local, peer or operational) maps RoCEv2 to a priority without PFC.
    AppNotLossless { side: String, roce_priority: u8, pfc_enable: u8 },
}

impl Mismatch {
    /// Short name for metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            Mismatch::Pfc { .. } => "pfc",
            Mismatch::App { .. } => "app",
            Mismatch::Ets { .. } => "ets",
            Mismatch::AppNotLossless { .. } => "app_not_lossless",
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Pfc { local, peer } => {
                write!(
                    f,
                    "PFC enable differs, neither side willing: local {} peer {}",
                    prio_list(*local),
                    prio_list(*peer)
                )
            }
            Mismatch::App { local, peer } => {
                write!(
                    f,
                    "APP table differs, neither side willing: local [{}] peer [{}]",
                    app_list(local),
                    app_list(peer)
                )
            }
            Mismatch::Ets { local, peer } => write!(
                f,
                "ETS differs, neither side willing: local prio->tc {:?} tsa {:?}, peer prio->tc {:?} tsa {:?}",
                local.prio_tc, local.tsa, peer.prio_tc, peer.tsa
            ),
            Mismatch::AppNotLossless { side, roce_priority, pfc_enable } => write!(
                f,
                "{side}: APP maps RoCEv2 (UDP 4791) to priority {roce_priority}, which is not PFC-enabled ({})",
                prio_list(*pfc_enable)
            ),
        }
    }
}

/// `{3,4}` for a priority bitmap.
pub fn prio_list(bits: u8) -> String {
    let v: Vec<String> = (0..8).filter(|p| bits & (1 << p) != 0).map(|p| p.to_string()).collect();
    format!("{{{}}}", v.join(","))
}

/// `udp 4791->3, dscp 24->3`.
pub fn app_list(app: &[App]) -> String {
    app.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
}

/// Whether this side takes the peer's settings for one feature: the peer must have sent it; a
/// willing side takes a non-willing peer's; if both are willing the lower chassis MAC keeps its
/// own (IEEE 802.1Q-2018 38.4.2 / 38.5.2 tie-break); a non-willing side never adopts.
fn adopt(local_willing: bool, peer_willing: Option<bool>, local_mac: [u8; 6], peer_mac: Option<[u8; 6]>) -> bool {
    match (local_willing, peer_willing) {
        (true, Some(false)) => true,
        (true, Some(true)) => match peer_mac {
            Some(pm) => pm < local_mac,
            None => false,
        },
        _ => false,
    }
}

/// The operational settings and mismatches of a port with settings `local` and chassis MAC
/// `local_mac`, given what the peer advertised (`None`: no neighbour).
pub fn negotiate(local: &Dcb, local_mac: [u8; 6], peer: Option<(&PeerDcb, Option<[u8; 6]>)>) -> (Oper, Vec<Mismatch>) {
    let mut oper = Oper {
        ets: local.ets,
        ets_from: Source::Local,
        pfc_enable: local.pfc_enable,
        pfc_from: Source::Local,
        app: local.app.clone(),
        app_from: Source::Local,
    };
    let mut mismatches = Vec::new();
    if let Some((p, pmac)) = peer {
        // ETS: a willing side takes the peer's recommendation (or its configuration).
        if let Some(ets) = p.ets_recommendation.or(p.ets) {
            if adopt(local.willing, p.ets_willing, local_mac, pmac) {
                oper.ets = ets;
                oper.ets_from = Source::Peer;
            }
        }
        if let Some(pe) = p.pfc_enable {
            if adopt(local.willing, p.pfc_willing, local_mac, pmac) {
                oper.pfc_enable = pe;
                oper.pfc_from = Source::Peer;
            }
        }
        // APP has no willing bit of its own; it follows the PFC (else ETS) willing bit.
        if let Some(app) = &p.app {
            if adopt(local.willing, p.pfc_willing.or(p.ets_willing), local_mac, pmac) {
                oper.app = app.clone();
                oper.app_from = Source::Peer;
            }
        }
        let neither = !local.willing;
        if neither && p.pfc_willing == Some(false) {
            if let Some(pe) = p.pfc_enable.filter(|&pe| pe != local.pfc_enable) {
                mismatches.push(Mismatch::Pfc { local: local.pfc_enable, peer: pe });
            }
        }
        if neither && p.pfc_willing.or(p.ets_willing) == Some(false) {
            if let Some(app) = p.app.as_ref().filter(|a| **a != local.app) {
                mismatches.push(Mismatch::App { local: local.app.clone(), peer: app.clone() });
            }
        }
        if neither && p.ets_willing == Some(false) {
            if let Some(e) = p.ets.filter(|e| e.prio_tc != local.ets.prio_tc || e.tsa != local.ets.tsa) {
                mismatches.push(Mismatch::Ets { local: local.ets, peer: e });
            }
        }
        if let (Some(app), Some(pe)) = (&p.app, p.pfc_enable) {
            if let Some(rp) = app_roce_priority(app).filter(|&rp| pe & (1 << rp) == 0 && pe != 0) {
                mismatches.push(Mismatch::AppNotLossless { side: "peer".into(), roce_priority: rp, pfc_enable: pe });
            }
        }
    }
    if let Some(rp) = oper.roce_priority().filter(|&rp| oper.pfc_enable & (1 << rp) == 0 && oper.pfc_enable != 0) {
        mismatches.push(Mismatch::AppNotLossless {
            side: "local".into(),
            roce_priority: rp,
            pfc_enable: oper.pfc_enable,
        });
    }
    (oper, mismatches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::config::SwitchConfig;

    const SW: [u8; 6] = [2, 0, 0, 0, 1, 1];
    const NIC: [u8; 6] = [2, 0, 0, 0, 2, 2];

    fn switch_dcb(pfc: u8) -> Dcb {
        let mut d = Dcb::nic(false, pfc, 24, pfc.trailing_zeros() as u8, 48, 7);
        d.willing = false;
        d
    }

    fn advertised(d: &Dcb) -> PeerDcb {
        PeerDcb::from_tlvs(d.tlvs().iter())
    }

    #[test]
    fn switch_advertises_its_effective_qos() {
        let mut cfg: SwitchConfig = serde_json::from_str(
            r#"{"name":"r1","role":"rail","netns":null,"hash_seed":1,"metrics_listen":"127.0.0.1:1",
                "dscp_to_tc":[],"queue_limit_bytes":1,"xdp_mode":"skb","ports":[],"nexthops":[],"groups":[],"routes":[]}"#,
        )
        .unwrap();
        cfg.dscp_to_tc = dataplane_common::dscp::default_table().to_vec();
        let d = Dcb::from_switch(&cfg);
        assert!(!d.willing);
        assert_eq!(d.pfc_enable, 1 << 3);
        assert_eq!(
            d.app,
            vec![App::rocev2(3), App::dscp(24, 3), App::dscp(48, 7)]
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        // The default scheduler: queue 7 strict, queues 0 and 3 at 50/50, the rest ETS 0 %.
        let e = TSA_ETS;
        assert_eq!(d.ets.prio_tc, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(d.ets.tsa, [e, e, e, e, e, e, e, TSA_STRICT]);
        assert_eq!(d.ets.tc_bandwidth, [50, 0, 0, 50, 0, 0, 0, 0]);
        // On the wire: ETS Configuration and Recommendation carry the same tables.
        let p = advertised(&d);
        assert_eq!(p.ets, Some(d.ets));
        assert_eq!(p.ets_recommendation, Some(d.ets));
        // 70/30 with queues 3 and 7 strict.
        cfg.qos.strict_priorities = 0b1000_1000;
        cfg.qos.ets_percent = [70, 30, 0, 0, 0, 0, 0, 0];
        let d = Dcb::from_switch(&cfg);
        assert_eq!(d.ets.tsa, [e, e, e, TSA_STRICT, e, e, e, TSA_STRICT]);
        assert_eq!(d.ets.tc_bandwidth, [70, 30, 0, 0, 0, 0, 0, 0]);
        // PFC moved to priority 4 with DSCP 26: RoCEv2 follows the lossless priority.
        cfg.qos.lossless_priorities = 1 << 4;
        cfg.dscp_to_tc = vec![0; 64];
        cfg.dscp_to_tc[26] = 4;
        cfg.dscp_to_tc[48] = 7;
        let d = Dcb::from_switch(&cfg);
        assert_eq!(d.roce_priority(), Some(4));
        assert!(d.app.contains(&App::dscp(26, 4)));
        // PFC off: RoCEv2 at DSCP 24's priority, if it has one.
        cfg.qos.lossless_priorities = 0;
        assert_eq!(Dcb::from_switch(&cfg).roce_priority(), None);
    }

    #[test]
    fn a_non_willing_nic_at_its_defaults_agrees_with_a_default_switch() {
        let mut cfg: SwitchConfig = serde_json::from_str(
            r#"{"name":"r1","role":"rail","netns":null,"hash_seed":1,"metrics_listen":"127.0.0.1:1",
                "queue_limit_bytes":1,"xdp_mode":"skb","ports":[],"nexthops":[],"groups":[],"routes":[]}"#,
        )
        .unwrap();
        let sw = Dcb::from_switch(&cfg);
        let nic = Dcb::nic(false, 1 << 3, 24, 3, 48, 7);
        assert_eq!(nic.ets, sw.ets);
        let (_, m) = negotiate(&nic, NIC, Some((&advertised(&sw), Some(SW))));
        assert!(m.is_empty(), "{m:?}");
        // Other shares are no ETS mismatch (the TSAs agree); another strict queue is.
        cfg.qos.ets_percent = [70, 0, 0, 30, 0, 0, 0, 0];
        let (_, m) = negotiate(&nic, NIC, Some((&advertised(&Dcb::from_switch(&cfg)), Some(SW))));
        assert!(m.is_empty(), "{m:?}");
        cfg.qos.strict_priorities = 0b1000_1000;
        cfg.qos.ets_percent = [100, 0, 0, 0, 0, 0, 0, 0];
        let (_, m) = negotiate(&nic, NIC, Some((&advertised(&Dcb::from_switch(&cfg)), Some(SW))));
        assert!(matches!(m.as_slice(), [Mismatch::Ets { .. }]), "{m:?}");
    }

    #[test]
    fn willing_nic_adopts_a_non_willing_switch() {
        let sw = switch_dcb(1 << 4);
        let nic = Dcb::nic(true, 1 << 3, 24, 3, 48, 7);
        let (o, m) = negotiate(&nic, NIC, Some((&advertised(&sw), Some(SW))));
        assert_eq!(o.pfc_enable, 1 << 4);
        assert_eq!((o.pfc_from, o.app_from, o.ets_from), (Source::Peer, Source::Peer, Source::Peer));
        assert_eq!(o.roce_priority(), Some(4));
        assert_eq!(o.roce_dscp(24), Some(24));
        assert!(m.is_empty(), "{m:?}");
        // The switch side keeps its own and sees no mismatch with a willing NIC.
        let (so, sm) = negotiate(&sw, SW, Some((&advertised(&nic), Some(NIC))));
        assert_eq!((so.pfc_enable, so.pfc_from), (1 << 4, Source::Local));
        assert!(sm.is_empty(), "{sm:?}");
    }

    #[test]
    fn no_neighbour_means_own_settings() {
        let nic = Dcb::nic(true, 1 << 3, 24, 3, 48, 7);
        let (o, m) = negotiate(&nic, NIC, None);
        assert_eq!((o.pfc_enable, o.pfc_from), (1 << 3, Source::Local));
        assert!(m.is_empty());
    }

    #[test]
    fn two_non_willing_peers_that_differ_are_reported() {
        let a = switch_dcb(1 << 3);
        let b = switch_dcb(1 << 4);
        let (o, m) = negotiate(&a, SW, Some((&advertised(&b), Some(NIC))));
        assert_eq!(o.pfc_enable, 1 << 3, "a non-willing port keeps its own");
        let kinds: Vec<&str> = m.iter().map(|m| m.kind()).collect();
        assert!(kinds.contains(&"pfc") && kinds.contains(&"app"), "{kinds:?}");
        assert!(m[0].to_string().contains("local {3} peer {4}"), "{}", m[0]);
        let (_, same) = negotiate(&a, SW, Some((&advertised(&a), Some(NIC))));
        assert!(same.is_empty(), "{same:?}");
    }

    #[test]
    fn both_willing_lower_mac_keeps_its_own() {
        let a = Dcb::nic(true, 1 << 3, 24, 3, 48, 7);
        let b = Dcb::nic(true, 1 << 5, 24, 5, 48, 7);
        let (lo, _) = negotiate(&a, SW, Some((&advertised(&b), Some(NIC))));
        assert_eq!(lo.pfc_from, Source::Local);
        let (hi, _) = negotiate(&b, NIC, Some((&advertised(&a), Some(SW))));
        assert_eq!((hi.pfc_enable, hi.pfc_from), (1 << 3, Source::Peer));
    }

    #[test]
    fn roce_on_a_lossy_priority_is_inconsistent() {
        let mut bad = switch_dcb(1 << 3);
        bad.app = vec![App::rocev2(4), App::dscp(24, 4)];
        let good = switch_dcb(1 << 3);
        let (_, m) = negotiate(&good, SW, Some((&advertised(&bad), Some(NIC))));
        assert!(
            m.iter().any(|m| matches!(m, Mismatch::AppNotLossless { side, roce_priority: 4, .. } if side == "peer")),
            "{m:?}"
        );
        let (_, m) = negotiate(&bad, SW, None);
        assert!(m.iter().any(|m| matches!(m, Mismatch::AppNotLossless { side, .. } if side == "local")), "{m:?}");
    }

    #[test]
    fn roce_dscp_prefers_the_configured_one() {
        let o = Oper {
            ets: Ets::strict_identity(),
            ets_from: Source::Local,
            pfc_enable: 1 << 4,
            pfc_from: Source::Peer,
            app: vec![App::rocev2(4), App::dscp(26, 4), App::dscp(30, 4), App::dscp(48, 6)],
            app_from: Source::Peer,
        };
        assert_eq!(o.roce_dscp(24), Some(26));
        assert_eq!(o.roce_dscp(30), Some(30));
        assert_eq!(o.dscp_priority(48), Some(6));
        assert_eq!(o.dscp_priority(24), None);
    }
}
