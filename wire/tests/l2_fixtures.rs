//! Shared fixtures for the L2 wire-format tests: hand-assembled byte arrays (from the
//! standards' layouts, not from our emitter) and the representations they decode to.
//! Included by the other `l2_*` / `oracle_l2_*` tests with `#[path]`; compiled alone it
//! has no tests.
#![allow(dead_code, reason = "each including test uses a different subset")]

use std::net::Ipv4Addr;

use rocefab_wire::dcbx::*;
use rocefab_wire::ethernet::{MacAddr, Priority, PrioritySet};
use rocefab_wire::lldp::*;
use rocefab_wire::mac_control::PfcRepr;

pub const SRC: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);

pub fn prio(p: u8) -> Priority {
    Priority::try_new(p).unwrap()
}

pub fn prios(ps: &[u8]) -> PrioritySet {
    ps.iter().map(|&p| prio(p)).collect()
}

/// 802.3x PAUSE, quanta 0x1234, padded to 60 bytes.
pub fn pause_frame_bytes() -> Vec<u8> {
    let mut f = vec![
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x88, 0x08, // EtherType
        0x00, 0x01, // opcode PAUSE
        0x12, 0x34, // quanta
    ];
    f.resize(60, 0);
    f
}

/// PFC pausing priority 3 (0xffff) and 4 (0x0100), padded to 60 bytes.
pub fn pfc_frame_bytes() -> Vec<u8> {
    let mut f = vec![
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x88, 0x08, // EtherType
        0x01, 0x01, // opcode PFC
        0x00, 0x18, // class-enable vector: priorities 3 and 4
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // time[0..3]
        0xff, 0xff, // time[3]
        0x01, 0x00, // time[4]
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // time[5..8]
    ];
    f.resize(60, 0);
    f
}

pub fn pfc_repr() -> PfcRepr {
    PfcRepr { enabled: prios(&[3, 4]), quanta: [0, 0, 0, 0xffff, 0x0100, 0, 0, 0] }
}

/// ETS Configuration: willing, no CBS, 8 TCs, prio→TC [1,0,0,3,0,0,0,7], bw 50/50 on TC0/TC3,
/// TSA ETS on TC0 and TC3, strict elsewhere.
pub const ETS_CFG_TLV: [u8; 27] = [
    0xfe, 0x19, // type 127, length 25
    0x00, 0x80, 0xc2, 0x09, // OUI, subtype 9
    0x80, // willing=1 cbs=0 max_tcs=0 (8)
    0x10, 0x03, 0x00, 0x07, // prio→TC nibbles
    50, 0, 0, 50, 0, 0, 0, 0, // TC bandwidth
    2, 0, 0, 2, 0, 0, 0, 0, // TSA
];

pub fn ets_cfg_repr() -> EtsConfig {
    EtsConfig { willing: true, cbs: false, max_tcs: 8, tables: ets_tables() }
}

pub fn ets_tables() -> EtsTables {
    EtsTables {
        prio_tc: [1, 0, 0, 3, 0, 0, 0, 7],
        tc_bandwidth: [50, 0, 0, 50, 0, 0, 0, 0],
        tsa: [Tsa::Ets, Tsa::Strict, Tsa::Strict, Tsa::Ets, Tsa::Strict, Tsa::Strict, Tsa::Strict, Tsa::Strict],
    }
}

/// ETS Recommendation with the same tables.
pub const ETS_REC_TLV: [u8; 27] = [
    0xfe, 0x19, 0x00, 0x80, 0xc2, 0x0a, 0x00, // reserved
    0x10, 0x03, 0x00, 0x07, 50, 0, 0, 50, 0, 0, 0, 0, 2, 0, 0, 2, 0, 0, 0, 0,
];

/// PFC Configuration: not willing, MBC set, cap 8, PFC on priority 3.
pub const PFC_CFG_TLV: [u8; 8] = [0xfe, 0x06, 0x00, 0x80, 0xc2, 0x0b, 0x48, 0x08];

pub fn pfc_cfg_repr() -> PfcConfig {
    PfcConfig { willing: false, mbc: true, pfc_cap: 8, enabled: prios(&[3]) }
}

/// Application Priority: UDP 4791 → 3, DSCP 24 → 3, DSCP 48 → 7, EtherType 0x8915 → 5.
pub const APP_TLV: [u8; 19] = [
    0xfe, 0x11, // type 127, length 17
    0x00, 0x80, 0xc2, 0x0c, 0x00, // reserved
    0x63, 0x12, 0xb7, // prio 3, sel 3 (UDP), 4791
    0x65, 0x00, 0x18, // prio 3, sel 5 (DSCP), 24
    0xe5, 0x00, 0x30, // prio 7, sel 5, 48
    0xa1, 0x89, 0x15, // prio 5, sel 1 (EtherType), 0x8915
];

pub fn app_repr() -> AppPriority {
    AppPriority {
        entries: vec![
            AppEntry::rocev2(prio(3)),
            AppEntry::dscp(24, prio(3)),
            AppEntry::dscp(48, prio(7)),
            AppEntry { priority: prio(5), selector: AppSelector::Ethertype, protocol: 0x8915 },
        ],
    }
}

/// CEE DCBX TLV: control, PG, PFC, App (FCoE 0x8906 → priority 3).
pub const CEE_TLV: [u8; 57] = [
    0xfe, 0x37, // type 127, length 55
    0x00, 0x1b, 0x21, 0x02, // OUI 00-1b-21, subtype 2 (CEE)
    0x02, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, // control seq 1 ack 2
    0x04, 0x11, 0x00, 0x00, 0xc0, 0x00, // PG: ver 0/0, enabled+willing, subtype 0
    0x00, 0x01, 0x00, 0x0f, // PGID nibbles [0,0,0,1,0,0,0,15]
    50, 50, 0, 0, 0, 0, 0, 0, 0x08, // PG bandwidth, num TCs
    0x06, 0x06, 0x00, 0x00, 0xa0, 0x00, 0x08, 0x08, // PFC: enabled+error, prio 3, 8 TCs
    0x08, 0x0a, 0x00, 0x00, 0x80, 0x00, // App header: enabled
    0x89, 0x06, 0x00, 0x1b, 0x21, 0x08, // FCoE, OUI 00-1b-21 sel 0, priority bitmap {3}
];

pub fn cee_repr() -> CeeDcbx {
    CeeDcbx {
        tlvs: vec![
            CeeTlv::Control(CeeControl { oper_version: 0, max_version: 0, seq_no: 1, ack_no: 2 }),
            CeeTlv::PriorityGroups {
                feature: CeeFeature { enabled: true, willing: true, ..Default::default() },
                pg: CeePriorityGroups {
                    pgid: [0, 0, 0, 1, 0, 0, 0, 15],
                    pg_bandwidth: [50, 50, 0, 0, 0, 0, 0, 0],
                    num_tcs: 8,
                },
            },
            CeeTlv::Pfc {
                feature: CeeFeature { enabled: true, error: true, ..Default::default() },
                pfc: CeePfc { enabled: prios(&[3]), num_tcs: 8 },
            },
            CeeTlv::Application {
                feature: CeeFeature { enabled: true, ..Default::default() },
                apps: vec![CeeAppEntry {
                    protocol: 0x8906,
                    selector: 0,
                    oui: [0x00, 0x1b, 0x21],
                    priorities: prios(&[3]),
                }],
            },
        ],
    }
}

/// LLDPDU with every basic TLV (no DCBX), End included.
pub const LLDPDU_BASIC: [u8; 64] = [
    0x02, 0x07, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // Chassis ID: MAC
    0x04, 0x05, 0x05, b'e', b't', b'h', b'0', // Port ID: ifName "eth0"
    0x06, 0x02, 0x00, 0x78, // TTL 120
    0x08, 0x06, b'u', b'p', b'l', b'i', b'n', b'k', // Port Description
    0x0a, 0x03, b's', b'w', b'1', // System Name
    0x0c, 0x07, b'r', b'o', b'c', b'e', b'f', b'a', b'b', // System Description
    0x0e, 0x04, 0x00, 0x14, 0x00, 0x10, // capabilities bridge|router, enabled router
    0x10, 0x0c, 0x05, 0x01, 10, 0, 0, 1, 0x02, 0x00, 0x00, 0x00, 0x03, 0x00, // mgmt 10.0.0.1 ifIndex 3
    0x00, 0x00, // End
];

pub fn lldp_basic_repr() -> LldpduRepr {
    LldpduRepr {
        chassis_id: ChassisId::MacAddress(SRC),
        port_id: PortId::InterfaceName("eth0".into()),
        ttl: 120,
        tlvs: vec![
            Tlv::PortDescription { text: "uplink".into() },
            Tlv::SystemName { text: "sw1".into() },
            Tlv::SystemDescription { text: "rocefab".into() },
            Tlv::SystemCapabilities(SystemCapabilities {
                capabilities: SystemCapabilities::BRIDGE | SystemCapabilities::ROUTER,
                enabled: SystemCapabilities::ROUTER,
            }),
            Tlv::ManagementAddress(ManagementAddress {
                address: NetworkAddress::Ipv4(Ipv4Addr::new(10, 0, 0, 1)),
                interface_subtype: 2,
                interface_number: 3,
                oid: vec![],
            }),
        ],
    }
}

/// The basic LLDPDU plus every DCBX TLV (IEEE and CEE), as bytes.
pub fn lldpdu_dcbx_bytes() -> Vec<u8> {
    let mut v = LLDPDU_BASIC[..LLDPDU_BASIC.len() - 2].to_vec();
    for t in [&ETS_CFG_TLV[..], &ETS_REC_TLV, &PFC_CFG_TLV, &APP_TLV, &CEE_TLV] {
        v.extend_from_slice(t);
    }
    v.extend_from_slice(&[0, 0]);
    v
}

pub fn lldp_dcbx_repr() -> LldpduRepr {
    let mut r = lldp_basic_repr();
    r.tlvs.extend([
        DcbxTlv::EtsConfiguration(ets_cfg_repr()).into(),
        DcbxTlv::EtsRecommendation(EtsRecommendation { tables: ets_tables() }).into(),
        DcbxTlv::PfcConfiguration(pfc_cfg_repr()).into(),
        DcbxTlv::ApplicationPriority(app_repr()).into(),
        DcbxTlv::Cee(cee_repr()).into(),
    ]);
    r
}

/// Wraps an LLDPDU in an Ethernet frame (dst 01:80:c2:00:00:0e, SRC), padded to 60.
pub fn lldp_frame(lldpdu: &[u8]) -> Vec<u8> {
    let mut f = vec![0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
    f.extend_from_slice(&SRC.0);
    f.extend_from_slice(&[0x88, 0xcc]);
    f.extend_from_slice(lldpdu);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// Runs `f` and fails the test if it panics, naming `what`.
pub fn no_panic<R>(what: &str, f: impl FnOnce() -> R + std::panic::UnwindSafe) -> R {
    match std::panic::catch_unwind(f) {
        Ok(r) => r,
        Err(_) => panic!("parser panicked on {what}"),
    }
}
