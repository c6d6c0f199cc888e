//! IEEE 802.1Qaz and CEE DCBX TLVs: fixed byte arrays, truncation, round trips.

#[path = "l2_fixtures.rs"]
mod fx;

use fx::*;
use proptest::prelude::*;
use rocefab_wire::dcbx::*;
use rocefab_wire::ethernet::{Priority, PrioritySet};
use rocefab_wire::lldp::{Tlv, TlvPacket};

fn parse_tlv(bytes: &[u8]) -> Result<Tlv, rocefab_wire::lldp::Error> {
    Tlv::parse(&TlvPacket::new_checked(bytes)?)
}

fn dcbx_of(bytes: &[u8]) -> DcbxTlv {
    match parse_tlv(bytes).unwrap() {
        Tlv::Dcbx { dcbx } => dcbx,
        t => panic!("not DCBX: {t:?}"),
    }
}

fn emit_dirty(t: &DcbxTlv) -> Vec<u8> {
    let tlv = Tlv::from(t.clone());
    let mut buf = vec![0xa5u8; tlv.buffer_len() + 7];
    let n = tlv.emit(&mut buf).unwrap();
    assert!(buf[n..].iter().all(|&b| b == 0xa5), "emit wrote past the TLV");
    buf.truncate(n);
    buf
}

#[test]
fn ets_configuration() {
    let want = DcbxTlv::EtsConfiguration(ets_cfg_repr());
    assert_eq!(dcbx_of(&ETS_CFG_TLV), want);
    assert_eq!(emit_dirty(&want), ETS_CFG_TLV);
    let p = EtsPacket::new_checked(&ETS_CFG_TLV[6..]).unwrap();
    assert!(p.willing() && !p.cbs());
    assert_eq!(p.max_tcs_raw(), 0);
    assert_eq!(p.priority_tc(prio(0)), 1);
    assert_eq!(p.priority_tc(prio(3)), 3);
    assert_eq!(p.priority_tc(prio(7)), 7);
    assert_eq!(p.tsa(3), Tsa::Ets);
}

#[test]
fn ets_configuration_max_tcs_below_8_and_cbs() {
    let mut b = ETS_CFG_TLV;
    b[6] = 0x43; // not willing, CBS, 3 TCs
    let DcbxTlv::EtsConfiguration(e) = dcbx_of(&b) else { panic!() };
    assert!(!e.willing && e.cbs);
    assert_eq!(e.max_tcs, 3);
    assert_eq!(emit_dirty(&DcbxTlv::EtsConfiguration(e)), b);
}

#[test]
fn ets_recommendation() {
    let want = DcbxTlv::EtsRecommendation(EtsRecommendation { tables: ets_tables() });
    assert_eq!(dcbx_of(&ETS_REC_TLV), want);
    assert_eq!(emit_dirty(&want), ETS_REC_TLV);
}

#[test]
fn pfc_configuration() {
    let want = DcbxTlv::PfcConfiguration(pfc_cfg_repr());
    assert_eq!(dcbx_of(&PFC_CFG_TLV), want);
    assert_eq!(emit_dirty(&want), PFC_CFG_TLV);
    let p = PfcPacket::new_checked(&PFC_CFG_TLV[6..]).unwrap();
    assert!(!p.willing() && p.mbc());
    assert_eq!(p.pfc_cap(), 8);
    assert_eq!(p.enabled(), PrioritySet(0x08));
}

#[test]
fn application_priority() {
    let want = DcbxTlv::ApplicationPriority(app_repr());
    assert_eq!(dcbx_of(&APP_TLV), want);
    assert_eq!(emit_dirty(&want), APP_TLV);
    let p = AppPacket::new_checked(&APP_TLV[6..]).unwrap();
    assert_eq!(p.entry_count(), 4);
    assert_eq!(p.entry(0), AppEntry { priority: prio(3), selector: AppSelector::UdpDccpPort, protocol: 4791 });
}

#[test]
fn application_reserved_selector_is_kept() {
    let mut b = APP_TLV;
    b[7] = 0x66; // prio 3, selector 6 (reserved)
    let DcbxTlv::ApplicationPriority(a) = dcbx_of(&b) else { panic!() };
    assert_eq!(a.entries[0].selector, AppSelector::Unknown(6));
    assert_eq!(emit_dirty(&DcbxTlv::ApplicationPriority(a)), b);
}

#[test]
fn cee() {
    let want = DcbxTlv::Cee(cee_repr());
    assert_eq!(dcbx_of(&CEE_TLV), want);
    assert_eq!(emit_dirty(&want), CEE_TLV);
}

#[test]
fn cee_unknown_subtlv_is_kept() {
    // Logical Link Down sub-TLV (type 6): version 0/0, flags, subtype, one octet of data.
    let b = [0xfe, 0x0b, 0x00, 0x1b, 0x21, 0x02, 0x0c, 0x05, 0x00, 0x00, 0x80, 0x00, 0x80];
    let DcbxTlv::Cee(c) = dcbx_of(&b) else { panic!() };
    assert_eq!(c.tlvs, vec![CeeTlv::Unknown { tlv_type: 6, value: vec![0, 0, 0x80, 0, 0x80] }]);
    assert_eq!(emit_dirty(&DcbxTlv::Cee(c)), b);
}

#[test]
fn wrong_lengths_are_rejected_with_names() {
    for (bytes, name) in [
        (&ETS_CFG_TLV[..], "ETS"),
        (&ETS_REC_TLV[..], "ETS"),
        (&PFC_CFG_TLV[..], "PFC Configuration"),
        (&APP_TLV[..], "Application Priority"),
    ] {
        // Shorten the information string by one octet, keeping the TLV self-consistent.
        let mut b = bytes[..bytes.len() - 1].to_vec();
        b[1] -= 1;
        let e = parse_tlv(&b).unwrap_err();
        assert!(e.to_string().contains(name), "{e}");
        // One octet longer.
        let mut b = bytes.to_vec();
        b.push(0);
        b[1] += 1;
        assert!(parse_tlv(&b).is_err(), "{name} with an extra octet accepted");
    }
}

/// Every prefix of each DCBX TLV fails (the TLV length no longer fits), and every shorter
/// but self-consistent information string fails too. Never panics.
#[test]
fn every_truncation_errors() {
    for bytes in [&ETS_CFG_TLV[..], &ETS_REC_TLV, &PFC_CFG_TLV, &APP_TLV, &CEE_TLV] {
        for len in 0..bytes.len() {
            let r = no_panic(&format!("prefix {len}"), || parse_tlv(&bytes[..len]));
            assert!(r.is_err(), "prefix {len} of {bytes:02x?} parsed");
        }
        for info_len in 0..bytes.len() - 6 {
            let r = no_panic(&format!("info {info_len}"), || {
                DcbxTlv::parse([bytes[2], bytes[3], bytes[4]], bytes[5], &bytes[6..6 + info_len])
            });
            // Application Priority with whole entries removed is still valid; anything else fails.
            let app_ok = bytes[5] == SUBTYPE_APPLICATION_PRIORITY && bytes[2..5] == OUI_IEEE_8021 && info_len % 3 == 1;
            let cee_ok = bytes[2..5] == OUI_CEE && [0, 12, 31, 39].contains(&(info_len));
            assert_eq!(r.is_ok(), app_ok || cee_ok, "info length {info_len} of {bytes:02x?}: {r:?}");
        }
    }
}

#[test]
fn not_dcbx_is_none() {
    assert_eq!(DcbxTlv::parse([0x00, 0x12, 0x0f], 9, &[0; 21]), Ok(None));
    assert_eq!(DcbxTlv::parse(OUI_IEEE_8021, 1, &[0, 1]), Ok(None)); // Port VLAN ID
    assert_eq!(DcbxTlv::parse(OUI_CEE, 1, &[]), Ok(None)); // CIN
}

#[test]
fn emit_validates_ranges() {
    let mut e = ets_cfg_repr();
    e.max_tcs = 9;
    assert!(emit_tlv(DcbxTlv::EtsConfiguration(e)).is_err());
    let mut e = ets_cfg_repr();
    e.tables.prio_tc[2] = 16;
    assert!(emit_tlv(DcbxTlv::EtsConfiguration(e)).is_err());
    let mut p = pfc_cfg_repr();
    p.pfc_cap = 16;
    assert!(emit_tlv(DcbxTlv::PfcConfiguration(p)).is_err());
}

fn emit_tlv(t: DcbxTlv) -> Result<usize, rocefab_wire::lldp::Error> {
    let tlv = Tlv::from(t);
    tlv.emit(&mut vec![0; tlv.buffer_len()])
}

#[test]
fn display_and_json() {
    let s = DcbxTlv::PfcConfiguration(pfc_cfg_repr()).to_string();
    assert_eq!(s, "PFC Configuration: willing=0 mbc=1 cap=8 enable={3}");
    let s = DcbxTlv::ApplicationPriority(app_repr()).to_string();
    assert!(s.contains("[udp-dccp-port 4791 -> prio 3]") && s.contains("[dscp 48 -> prio 7]"), "{s}");
    let j = serde_json::to_value(DcbxTlv::EtsConfiguration(ets_cfg_repr())).unwrap();
    assert_eq!(j["kind"], "ets_configuration");
    assert_eq!(j["willing"], true);
    assert_eq!(j["tsa"][0], "ets");
    assert_eq!(j["prio_tc"][3], 3);
}

fn arb_tsa() -> impl Strategy<Value = Tsa> {
    any::<u8>().prop_map(Tsa::from)
}

prop_compose! {
    fn arb_tables()(prio_tc in proptest::array::uniform8(0u8..16), tc_bandwidth in any::<[u8; 8]>(),
                    tsa in proptest::array::uniform8(arb_tsa())) -> EtsTables {
        EtsTables { prio_tc, tc_bandwidth, tsa }
    }
}

fn arb_feature() -> impl Strategy<Value = CeeFeature> {
    (any::<u8>(), any::<u8>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<u8>()).prop_map(
        |(oper_version, max_version, enabled, willing, error, subtype)| CeeFeature {
            oper_version,
            max_version,
            enabled,
            willing,
            error,
            subtype,
        },
    )
}

fn arb_cee_tlv() -> impl Strategy<Value = CeeTlv> {
    prop_oneof![
        (any::<u8>(), any::<u8>(), any::<u32>(), any::<u32>()).prop_map(
            |(oper_version, max_version, seq_no, ack_no)| {
                CeeTlv::Control(CeeControl { oper_version, max_version, seq_no, ack_no })
            }
        ),
        (arb_feature(), proptest::array::uniform8(0u8..16), any::<[u8; 8]>(), any::<u8>()).prop_map(
            |(feature, pgid, pg_bandwidth, num_tcs)| CeeTlv::PriorityGroups {
                feature,
                pg: CeePriorityGroups { pgid, pg_bandwidth, num_tcs }
            }
        ),
        (arb_feature(), any::<u8>(), any::<u8>()).prop_map(|(feature, e, num_tcs)| CeeTlv::Pfc {
            feature,
            pfc: CeePfc { enabled: PrioritySet(e), num_tcs }
        }),
        (arb_feature(), proptest::collection::vec((any::<u16>(), 0u8..4, any::<[u8; 3]>(), any::<u8>()), 0..5))
            .prop_map(|(feature, apps)| CeeTlv::Application {
                feature,
                apps: apps
                    .into_iter()
                    .map(|(protocol, selector, o, p)| CeeAppEntry {
                        protocol,
                        selector,
                        oui: [o[0] & 0xfc, o[1], o[2]],
                        priorities: PrioritySet(p)
                    })
                    .collect()
            }),
        (5u8..=127, proptest::collection::vec(any::<u8>(), 0..20))
            .prop_map(|(tlv_type, value)| CeeTlv::Unknown { tlv_type, value }),
    ]
}

fn arb_dcbx() -> impl Strategy<Value = DcbxTlv> {
    prop_oneof![
        (any::<bool>(), any::<bool>(), 1u8..=8, arb_tables()).prop_map(|(willing, cbs, max_tcs, tables)| {
            DcbxTlv::EtsConfiguration(EtsConfig { willing, cbs, max_tcs, tables })
        }),
        arb_tables().prop_map(|tables| DcbxTlv::EtsRecommendation(EtsRecommendation { tables })),
        (any::<bool>(), any::<bool>(), 0u8..16, any::<u8>()).prop_map(|(willing, mbc, pfc_cap, e)| {
            DcbxTlv::PfcConfiguration(PfcConfig { willing, mbc, pfc_cap, enabled: PrioritySet(e) })
        }),
        proptest::collection::vec((0u8..8, 0u8..8, any::<u16>()), 0..20).prop_map(|v| {
            DcbxTlv::ApplicationPriority(AppPriority {
                entries: v
                    .into_iter()
                    .map(|(p, s, protocol)| AppEntry {
                        priority: Priority::try_new(p).unwrap(),
                        selector: AppSelector::from(s),
                        protocol,
                    })
                    .collect(),
            })
        }),
        proptest::collection::vec(arb_cee_tlv(), 0..5).prop_map(|tlvs| DcbxTlv::Cee(CeeDcbx { tlvs })),
    ]
}

proptest! {
    #[test]
    fn round_trip(t in arb_dcbx()) {
        let tlv = Tlv::from(t.clone());
        let mut buf = vec![0xa5; tlv.buffer_len()];
        tlv.emit(&mut buf).unwrap();
        prop_assert_eq!(parse_tlv(&buf).unwrap(), tlv);
    }

    #[test]
    fn arbitrary_info_never_panics(sub in 0u8..16, cee in any::<bool>(),
                                   info in proptest::collection::vec(any::<u8>(), 0..80)) {
        let oui = if cee { OUI_CEE } else { OUI_IEEE_8021 };
        let _ = DcbxTlv::parse(oui, if cee { 2 } else { sub }, &info);
    }
}

/// Found by the dcbx fuzz target: an information string longer than an LLDP TLV can carry
/// must be rejected at parse time, so that everything that parses also emits.
#[test]
fn oversized_information_string_is_rejected() {
    let mut info = vec![0u8];
    info.extend(std::iter::repeat_n([0x63, 0x12, 0xb7], 171).flatten());
    let e = DcbxTlv::parse(OUI_IEEE_8021, SUBTYPE_APPLICATION_PRIORITY, &info).unwrap_err();
    assert!(e.to_string().contains("507"), "{e}");
    // 168 entries (505 octets) is the maximum that fits and round-trips.
    let t = DcbxTlv::parse(OUI_IEEE_8021, SUBTYPE_APPLICATION_PRIORITY, &info[..1 + 168 * 3]).unwrap().unwrap();
    assert_eq!(emit_tlv(t.clone()).unwrap(), 2 + 4 + 505);
    let DcbxTlv::ApplicationPriority(mut a) = t else { panic!() };
    a.entries.push(AppEntry::rocev2(prio(3)));
    assert!(emit_tlv(DcbxTlv::ApplicationPriority(a)).is_err());
}
