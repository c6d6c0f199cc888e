//! IEEE 802.1AB LLDP: fixed byte arrays, TLV iteration, truncation, round trips.

#[path = "l2_fixtures.rs"]
mod fx;

use std::net::{Ipv4Addr, Ipv6Addr};

use fx::*;
use proptest::prelude::*;
use rocefab_wire::dcbx::DcbxTlv;
use rocefab_wire::ethernet::MacAddr;
use rocefab_wire::lldp::*;

#[test]
fn basic_lldpdu_deconstruct() {
    let r = LldpduRepr::parse(&LLDPDU_BASIC).unwrap();
    assert_eq!(r, lldp_basic_repr());
    assert_eq!(r.chassis_id.subtype(), 4);
    assert_eq!(r.port_id.subtype(), 5);
}

#[test]
fn basic_lldpdu_construct_into_dirty_buffer() {
    let r = lldp_basic_repr();
    assert_eq!(r.buffer_len(), LLDPDU_BASIC.len());
    let mut buf = [0xa5u8; 80];
    let n = r.emit(&mut buf).unwrap();
    assert_eq!(&buf[..n], &LLDPDU_BASIC[..]);
    assert!(buf[n..].iter().all(|&b| b == 0xa5), "emit wrote past the LLDPDU");
}

#[test]
fn frame_helpers() {
    let r = lldp_basic_repr();
    let f = r.to_frame(SRC).unwrap();
    assert_eq!(f, lldp_frame(&LLDPDU_BASIC));
    assert_eq!(&f[..6], &MacAddr::LLDP_NEAREST_BRIDGE.0);
    assert_eq!(&f[12..14], &[0x88, 0xcc]);
    let (eth, back) = LldpduRepr::parse_frame(&f).unwrap();
    assert_eq!(eth.src, SRC);
    assert_eq!(back, r);
}

#[test]
fn short_lldpdu_is_padded_to_60() {
    let r = LldpduRepr {
        chassis_id: ChassisId::LocallyAssigned("a".into()),
        port_id: PortId::LocallyAssigned("b".into()),
        ttl: 0,
        tlvs: vec![],
    };
    let f = r.to_frame(SRC).unwrap();
    assert_eq!(f.len(), 60);
    assert_eq!(LldpduRepr::parse_frame(&f).unwrap().1, r);
}

#[test]
fn tlv_iterator_yields_every_tlv_then_stops_at_end() {
    let mut bytes = LLDPDU_BASIC.to_vec();
    bytes.extend_from_slice(&[0xff; 5]); // garbage after End must be ignored
    let types: Vec<TlvType> = Tlvs::new(&bytes).map(|t| t.unwrap().tlv_type()).collect();
    assert_eq!(
        types,
        [
            TlvType::ChassisId,
            TlvType::PortId,
            TlvType::Ttl,
            TlvType::PortDescription,
            TlvType::SystemName,
            TlvType::SystemDescription,
            TlvType::SystemCapabilities,
            TlvType::ManagementAddress,
            TlvType::End
        ]
    );
    let raw: Vec<(u8, usize)> =
        RawTlvs::new(&bytes).map(|t| t.map(|p| (p.raw_type(), p.value_len())).unwrap()).collect();
    assert_eq!(raw[0], (1, 7));
    assert_eq!(raw[7], (8, 12));
}

#[test]
fn unknown_and_org_specific_tlvs_are_kept() {
    let mut bytes = LLDPDU_BASIC[..20].to_vec();
    bytes.extend_from_slice(&[0x14, 0x02, 0xab, 0xcd]); // type 10 (reserved), 2 bytes
    bytes.extend_from_slice(&[0xfe, 0x06, 0x00, 0x12, 0x0f, 0x04, 0x23, 0x28]); // 802.3 max frame size 9000
    bytes.extend_from_slice(&[0xfe, 0x05, 0x00, 0x1b, 0x21, 0x01, 0x99]); // CEE OUI, CIN subtype: not decoded
    bytes.extend_from_slice(&[0, 0]);
    let r = LldpduRepr::parse(&bytes).unwrap();
    assert_eq!(r.tlvs[0], Tlv::Unknown { tlv_type: 10, value: vec![0xab, 0xcd] });
    assert_eq!(
        r.tlvs[1],
        Tlv::OrgSpecific(OrgSpecific { oui: [0x00, 0x12, 0x0f], subtype: 4, info: vec![0x23, 0x28] })
    );
    assert_eq!(r.tlvs[2], Tlv::OrgSpecific(OrgSpecific { oui: [0x00, 0x1b, 0x21], subtype: 1, info: vec![0x99] }));
    let mut out = vec![0xa5; r.buffer_len()];
    r.emit(&mut out).unwrap();
    assert_eq!(out, bytes);
}

#[test]
fn iterator_stops_after_first_error() {
    let mut bytes = LLDPDU_BASIC[..20].to_vec();
    bytes.extend_from_slice(&[0x06, 0x03, 0x00, 0x78, 0x00]); // TTL with length 3
    bytes.extend_from_slice(&LLDPDU_BASIC[20..]);
    let items: Vec<_> = Tlvs::new(&bytes).collect();
    assert_eq!(items.len(), 4, "{items:?}");
    let e = items[3].as_ref().unwrap_err();
    assert!(e.to_string().contains("Time To Live") && e.to_string().contains("length 3"), "{e}");
    assert!(LldpduRepr::parse(&bytes).is_err());
}

#[test]
fn mandatory_order_is_enforced() {
    // Port ID first.
    let mut bytes = LLDPDU_BASIC[9..16].to_vec();
    bytes.extend_from_slice(&LLDPDU_BASIC[..9]);
    bytes.extend_from_slice(&LLDPDU_BASIC[16..]);
    let e = LldpduRepr::parse(&bytes).unwrap_err();
    assert!(matches!(e, Error::MissingMandatory { index: 0, .. }), "{e}");
    assert!(e.to_string().contains("Port ID"), "{e}");
    assert!(matches!(LldpduRepr::parse(&[0, 0]), Err(Error::MissingMandatory { index: 0, .. })));
}

#[test]
fn bad_id_lengths_are_rejected() {
    // Chassis ID subtype MAC with 5 octets.
    let bytes = [0x02, 0x06, 0x04, 1, 2, 3, 4, 5];
    let e = Tlv::parse(&TlvPacket::new_checked(&bytes[..]).unwrap()).unwrap_err();
    assert!(e.to_string().contains("MAC"), "{e}");
    // Chassis ID with only a subtype.
    let bytes = [0x02, 0x01, 0x07];
    assert!(Tlv::parse(&TlvPacket::new_checked(&bytes[..]).unwrap()).is_err());
}

/// Every prefix of a valid LLDPDU either fails, or (cut exactly at a TLV boundary after the
/// mandatory TLVs, which 802.1AB-2016 allows because End is optional) decodes to a prefix of
/// the TLV list. Never panics.
#[test]
fn every_truncation_errors_or_is_a_tlv_prefix() {
    for (bytes, full) in [(LLDPDU_BASIC.to_vec(), lldp_basic_repr()), (lldpdu_dcbx_bytes(), lldp_dcbx_repr())] {
        let mut boundaries = vec![];
        let mut off = 0;
        for t in RawTlvs::new(&bytes) {
            off += t.unwrap().total_len();
            boundaries.push(off);
        }
        let mut ok = 0;
        for len in 0..bytes.len() {
            let r = no_panic(&format!("LLDPDU prefix {len}"), || LldpduRepr::parse(&bytes[..len]));
            match r {
                Err(_) => assert!(len < boundaries[2] || !boundaries.contains(&len), "boundary {len} should parse"),
                Ok(r) => {
                    assert!(boundaries[2..].contains(&len), "prefix {len} parsed but is not a TLV boundary");
                    assert_eq!((&r.chassis_id, &r.port_id, r.ttl), (&full.chassis_id, &full.port_id, full.ttl));
                    assert_eq!(r.tlvs[..], full.tlvs[..r.tlvs.len()]);
                    ok += 1;
                }
            }
        }
        assert_eq!(ok, boundaries.len() - 3, "each boundary after TTL parses");
        // And as frames: a cut Ethernet header errors too.
        let f = lldp_frame(&bytes);
        for len in 0..14 {
            assert!(LldpduRepr::parse_frame(&f[..len]).is_err());
        }
    }
}

#[test]
fn value_too_long_is_rejected_on_emit() {
    let r = LldpduRepr {
        chassis_id: ChassisId::LocallyAssigned("x".into()),
        port_id: PortId::LocallyAssigned("y".into()),
        ttl: 1,
        tlvs: vec![Tlv::SystemDescription { text: "d".repeat(256) }],
    };
    let e = r.to_frame(SRC).unwrap_err();
    assert!(e.to_string().contains("System Description"), "{e}");
    let r = LldpduRepr { chassis_id: ChassisId::LocallyAssigned(String::new()), ..r };
    assert!(r.to_frame(SRC).is_err(), "empty chassis ID must be rejected");
}

#[test]
fn display_and_json_for_cli() {
    let r = lldp_basic_repr();
    let s = r.to_string();
    assert!(s.starts_with("LLDP chassis mac 02:00:00:00:00:01 port ifname \"eth0\" ttl 120"), "{s}");
    assert!(s.contains("System Name: \"sw1\""), "{s}");
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["chassis_id"]["subtype"], "mac_address");
    assert_eq!(j["chassis_id"]["id"], "02:00:00:00:00:01");
    assert_eq!(j["port_id"]["id"], "eth0");
    assert_eq!(j["tlvs"][4]["address"]["address"], "10.0.0.1");
}

fn arb_text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[ -~]{{0,{max}}}")).unwrap()
}

fn arb_id_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[!-~]{1,40}").unwrap()
}

fn arb_net() -> impl Strategy<Value = NetworkAddress> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|a| NetworkAddress::Ipv4(Ipv4Addr::from(a))),
        any::<[u8; 16]>().prop_map(|a| NetworkAddress::Ipv6(Ipv6Addr::from(a))),
        (3u8..=255, proptest::collection::vec(any::<u8>(), 1..20))
            .prop_map(|(family, address)| NetworkAddress::Other { family, address }),
    ]
}

fn arb_chassis() -> impl Strategy<Value = ChassisId> {
    prop_oneof![
        arb_id_text().prop_map(ChassisId::ChassisComponent),
        arb_id_text().prop_map(ChassisId::InterfaceAlias),
        arb_id_text().prop_map(ChassisId::PortComponent),
        any::<[u8; 6]>().prop_map(|m| ChassisId::MacAddress(MacAddr(m))),
        arb_net().prop_map(ChassisId::NetworkAddress),
        arb_id_text().prop_map(ChassisId::InterfaceName),
        arb_id_text().prop_map(ChassisId::LocallyAssigned),
        (8u8..=255, proptest::collection::vec(any::<u8>(), 1..30))
            .prop_map(|(subtype, id)| ChassisId::Unknown { subtype, id }),
    ]
}

fn arb_port() -> impl Strategy<Value = PortId> {
    prop_oneof![
        arb_id_text().prop_map(PortId::InterfaceAlias),
        arb_id_text().prop_map(PortId::PortComponent),
        any::<[u8; 6]>().prop_map(|m| PortId::MacAddress(MacAddr(m))),
        arb_net().prop_map(PortId::NetworkAddress),
        arb_id_text().prop_map(PortId::InterfaceName),
        arb_id_text().prop_map(PortId::AgentCircuitId),
        arb_id_text().prop_map(PortId::LocallyAssigned),
        (8u8..=255, proptest::collection::vec(any::<u8>(), 1..30))
            .prop_map(|(subtype, id)| PortId::Unknown { subtype, id }),
    ]
}

fn arb_optional_tlv() -> impl Strategy<Value = Tlv> {
    prop_oneof![
        arb_text(255).prop_map(|text| Tlv::PortDescription { text }),
        arb_text(255).prop_map(|text| Tlv::SystemName { text }),
        arb_text(255).prop_map(|text| Tlv::SystemDescription { text }),
        (any::<u16>(), any::<u16>())
            .prop_map(|(capabilities, enabled)| Tlv::SystemCapabilities(SystemCapabilities { capabilities, enabled })),
        (arb_net(), any::<u8>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..=128)).prop_map(
            |(address, interface_subtype, interface_number, oid)| {
                Tlv::ManagementAddress(ManagementAddress { address, interface_subtype, interface_number, oid })
            }
        ),
        // OUIs that are not DCBX, so they stay OrgSpecific.
        (any::<[u8; 2]>(), any::<u8>(), proptest::collection::vec(any::<u8>(), 0..100))
            .prop_map(|(o, subtype, info)| Tlv::OrgSpecific(OrgSpecific { oui: [0x10, o[0], o[1]], subtype, info })),
        (9u8..=126, proptest::collection::vec(any::<u8>(), 0..=511))
            .prop_map(|(tlv_type, value)| Tlv::Unknown { tlv_type, value }),
    ]
}

prop_compose! {
    fn arb_lldpdu()(chassis_id in arb_chassis(), port_id in arb_port(), ttl in any::<u16>(),
                    tlvs in proptest::collection::vec(arb_optional_tlv(), 0..6)) -> LldpduRepr {
        LldpduRepr { chassis_id, port_id, ttl, tlvs }
    }
}

proptest! {
    #[test]
    fn round_trip(r in arb_lldpdu()) {
        let f = r.to_frame(SRC).unwrap();
        prop_assert_eq!(f.len(), r.frame_len());
        let (_, back) = LldpduRepr::parse_frame(&f).unwrap();
        prop_assert_eq!(back, r);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = LldpduRepr::parse(&bytes);
        for t in Tlvs::new(&bytes) {
            if t.is_err() { break; }
        }
    }
}

#[test]
fn dcbx_tlvs_are_decoded_inside_lldpdu() {
    let r = LldpduRepr::parse(&lldpdu_dcbx_bytes()).unwrap();
    assert_eq!(r, lldp_dcbx_repr());
    let d: Vec<&DcbxTlv> = r.dcbx().collect();
    assert_eq!(d.len(), 5);
}

/// TLV bytes: type (7 bits) and length (9 bits), then the value.
fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
    let h = (u16::from(t) << 9) | v.len() as u16;
    let mut out = h.to_be_bytes().to_vec();
    out.extend_from_slice(v);
    out
}

fn mandatory() -> Vec<u8> {
    let mut b = tlv(1, &[4, 2, 0, 0, 0, 0, 1]);
    b.extend(tlv(2, b"\x05eth0"));
    b.extend(tlv(3, &[0, 120]));
    b
}

#[test]
fn a_second_chassis_port_or_ttl_tlv_is_rejected() {
    for (t, v, name) in
        [(1u8, &[4u8, 2, 0, 0, 0, 0, 2][..], "Chassis ID"), (2, b"\x05eth9", "Port ID"), (3, &[0, 0], "Time To Live")]
    {
        let mut b = mandatory();
        b.extend(tlv(5, b"sw"));
        b.extend(tlv(t, v));
        b.extend(tlv(0, &[]));
        let e = LldpduRepr::parse(&b).unwrap_err();
        assert!(matches!(e, Error::DuplicateMandatory { index: 4, tlv } if tlv == name), "{e}");
        assert!(LldpduRepr::parse_discarding(&b).is_err(), "{name}: a repeated mandatory TLV discards the LLDPDU");
    }
}

#[test]
fn discarding_parse_drops_only_a_bad_optional_tlv() {
    // A PFC Configuration TLV with one octet of information (needs two), between good TLVs.
    let mut b = mandatory();
    b.extend(tlv(5, b"rail1"));
    b.extend(tlv(127, &[0x00, 0x80, 0xc2, 11, 0x08]));
    b.extend(tlv(4, b"to host1"));
    b.extend(tlv(0, &[]));
    assert!(LldpduRepr::parse(&b).is_err(), "the strict parser rejects the whole LLDPDU");
    let (pdu, discarded) = LldpduRepr::parse_discarding(&b).unwrap();
    assert_eq!(pdu.ttl, 120);
    assert_eq!(
        pdu.tlvs,
        vec![Tlv::SystemName { text: "rail1".into() }, Tlv::PortDescription { text: "to host1".into() }]
    );
    assert_eq!(discarded.len(), 1);
    assert!(discarded[0].to_string().contains("PFC"), "{}", discarded[0]);
    // Framing errors still discard the LLDPDU: a TLV past the end, End with a length, TTL first.
    let mut past = mandatory();
    past.extend([0x0a, 0xff, 1, 2]);
    assert!(LldpduRepr::parse_discarding(&past).is_err());
    let mut end_len = mandatory();
    end_len.extend(tlv(0, &[0, 0]));
    assert!(LldpduRepr::parse_discarding(&end_len).is_err());
    let mut order = tlv(3, &[0, 120]);
    order.extend(mandatory());
    let e = LldpduRepr::parse_discarding(&order).unwrap_err();
    assert!(matches!(e, Error::MissingMandatory { index: 0, .. }), "{e}");
    // A good LLDPDU decodes the same both ways.
    let mut good = mandatory();
    good.extend(tlv(5, b"rail1"));
    assert_eq!(LldpduRepr::parse_discarding(&good).unwrap(), (LldpduRepr::parse(&good).unwrap(), vec![]));
}

#[test]
fn length_errors_say_what_was_expected() {
    // End of LLDPDU with 194 value octets (the message a user saw without "expected").
    let mut buf = [0u8; 196];
    buf[1] = 194;
    let e = Tlv::parse(&TlvPacket::new_checked(&buf[..]).unwrap()).unwrap_err();
    assert_eq!(e.to_string(), "LLDP End of LLDPDU TLV has invalid length 194: expected 0");
    let ttl = [0x06, 0x03, 0, 120, 0];
    let e = Tlv::parse(&TlvPacket::new_checked(&ttl[..]).unwrap()).unwrap_err();
    assert_eq!(e.to_string(), "LLDP Time To Live TLV has invalid length 3: expected 2");
    // A management address whose OID length runs past the TLV.
    let mut m = vec![0x10, 12, 5, 1, 10, 0, 0, 1, 2, 0, 0, 0, 1, 9];
    m[1] = (m.len() - 2) as u8;
    let e = Tlv::parse(&TlvPacket::new_checked(&m[..]).unwrap()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "LLDP Management Address TLV has invalid length 12: expected an OID string length that stays within the TLV"
    );
    let e = Tlv::Unknown { tlv_type: 200, value: vec![] }.validate().unwrap_err();
    assert_eq!(e.to_string(), "LLDP TLV type 200 does not fit the 7-bit type field: expected 0..=127");
}
