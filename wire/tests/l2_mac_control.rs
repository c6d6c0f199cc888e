//! IEEE 802.3x PAUSE / IEEE 802.1Qbb PFC: fixed byte arrays, truncation, round trips.

#[path = "l2_fixtures.rs"]
mod fx;

use fx::*;
use proptest::prelude::*;
use rocefab_wire::ethernet::{MacAddr, Priority, PrioritySet};
use rocefab_wire::mac_control::*;

#[test]
fn pfc_deconstruct() {
    let f = pfc_frame_bytes();
    let (eth, repr) = MacControlRepr::parse_frame(&f).unwrap();
    assert_eq!(eth.dst, MacAddr::MAC_CONTROL);
    assert_eq!(eth.src, SRC);
    assert_eq!(eth.ethertype, 0x8808);
    assert_eq!(repr, MacControlRepr::Pfc(pfc_repr()));

    let p = Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(p.opcode(), Opcode::Pfc);
    assert_eq!(p.class_enable_vector(), 0x0018);
    assert_eq!(p.pfc_quanta(prio(3)), 0xffff);
    assert_eq!(p.pfc_quanta(prio(4)), 0x0100);
    assert_eq!(p.pfc_quanta(prio(0)), 0);
    let MacControlRepr::Pfc(pfc) = repr else { unreachable!() };
    assert_eq!(pfc.quanta_for(prio(3)), Some(0xffff));
    assert_eq!(pfc.quanta_for(prio(0)), None);
}

#[test]
fn pfc_construct_into_dirty_buffer() {
    let mut buf = [0xa5u8; 60];
    let n = MacControlRepr::Pfc(pfc_repr()).emit_frame(SRC, &mut buf).unwrap();
    assert_eq!(n, 60);
    assert_eq!(&buf[..], &pfc_frame_bytes()[..]);
    assert_eq!(MacControlRepr::Pfc(pfc_repr()).to_frame(SRC).to_vec(), pfc_frame_bytes());
}

#[test]
fn pause_deconstruct_construct() {
    let f = pause_frame_bytes();
    let (_, repr) = MacControlRepr::parse_frame(&f).unwrap();
    assert_eq!(repr, MacControlRepr::Pause { quanta: 0x1234 });
    let mut buf = [0xa5u8; 64];
    assert_eq!(repr.emit_frame(SRC, &mut buf).unwrap(), 60);
    assert_eq!(&buf[..60], &f[..]);
    assert_eq!(&buf[60..], &[0xa5; 4], "emit_frame wrote past the frame");
}

#[test]
fn pfc_with_reserved_high_octet_is_accepted() {
    let mut f = pfc_frame_bytes();
    f[16] = 0xff; // reserved high octet of the class-enable vector
    let (_, repr) = MacControlRepr::parse_frame(&f).unwrap();
    assert_eq!(repr, MacControlRepr::Pfc(pfc_repr()));
    assert_eq!(Packet::new_checked(&f[14..]).unwrap().class_enable_vector(), 0xff18);
}

#[test]
fn unknown_opcode_is_kept() {
    let mut f = pause_frame_bytes();
    f[14] = 0x00;
    f[15] = 0x02; // GATE (EPON)
    let (_, repr) = MacControlRepr::parse_frame(&f).unwrap();
    assert_eq!(repr, MacControlRepr::Unknown { opcode: 2 });
    assert_eq!(repr.opcode(), Opcode::Unknown(2));
    assert!(repr.to_string().contains("0x0002"));
}

#[test]
fn wrong_ethertype_is_rejected() {
    let mut f = pfc_frame_bytes();
    f[13] = 0x09;
    let e = MacControlRepr::parse_frame(&f).unwrap_err();
    assert!(e.to_string().contains("0x8809"), "{e}");
}

#[test]
fn every_truncated_payload_errors() {
    for f in [pfc_frame_bytes(), pause_frame_bytes()] {
        let need = Packet::new_checked(&f[14..]).unwrap().opcode().payload_len();
        for len in 0..14 + need {
            let r = no_panic(&format!("prefix {len}"), || MacControlRepr::parse_frame(&f[..len]));
            assert!(r.is_err(), "prefix of {len} bytes parsed: {r:?}");
        }
        for len in 14 + need..=f.len() {
            assert!(MacControlRepr::parse_frame(&f[..len]).is_ok(), "prefix of {len} bytes rejected");
        }
    }
}

#[test]
fn truncation_error_is_descriptive() {
    let f = pfc_frame_bytes();
    let e = MacControlRepr::parse_frame(&f[..20]).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("PFC") && m.contains("20") && m.contains("6 bytes"), "{m}");
}

#[test]
fn emit_into_short_buffer_errors() {
    let mut buf = [0u8; 59];
    assert!(MacControlRepr::Pause { quanta: 1 }.emit_frame(SRC, &mut buf).is_err());
    let mut small = [0u8; 19];
    assert!(MacControlRepr::Pfc(pfc_repr()).emit(&mut Packet::new_unchecked(&mut small[..])).is_err());
}

#[test]
fn pfc_pause_helper_and_display() {
    let r = PfcRepr::pause(PrioritySet::from_iter([prio(3)]), 0xffff);
    assert_eq!(r.quanta, [0, 0, 0, 0xffff, 0, 0, 0, 0]);
    assert_eq!(r.to_string(), "PFC enable={3} (cev 0x0008) p3=65535");
    let json = serde_json::to_value(MacControlRepr::Pfc(r)).unwrap();
    assert_eq!(json["kind"], "pfc");
    assert_eq!(json["enabled"], serde_json::json!([3]));
    assert_eq!(json["quanta"][3], 65535);
}

#[test]
fn setters_round_trip() {
    let mut buf = [0u8; PFC_LEN];
    let mut p = Packet::new_unchecked(&mut buf[..]);
    p.set_opcode(Opcode::Pfc);
    p.set_class_enable_vector(0x0081);
    p.set_pfc_quanta(prio(7), 7);
    p.set_pfc_quanta(prio(0), 9);
    let p = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(p.enabled(), PrioritySet(0x81));
    assert_eq!((p.pfc_quanta(prio(0)), p.pfc_quanta(prio(7))), (9, 7));
}

fn arb_repr() -> impl Strategy<Value = MacControlRepr> {
    prop_oneof![
        any::<u16>().prop_map(|quanta| MacControlRepr::Pause { quanta }),
        (any::<u8>(), any::<[u16; 8]>())
            .prop_map(|(e, quanta)| MacControlRepr::Pfc(PfcRepr { enabled: PrioritySet(e), quanta })),
        any::<u16>()
            .prop_filter("known opcode", |o| *o != 1 && *o != 0x0101)
            .prop_map(|opcode| MacControlRepr::Unknown { opcode }),
    ]
}

proptest! {
    #[test]
    fn round_trip(repr in arb_repr(), src in any::<[u8; 6]>()) {
        let src = MacAddr(src);
        let frame = repr.to_frame(src);
        let (eth, back) = MacControlRepr::parse_frame(&frame).unwrap();
        prop_assert_eq!(eth.src, src);
        prop_assert_eq!(back, repr);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = MacControlRepr::parse_frame(&bytes);
        if let Ok(p) = Packet::new_checked(&bytes[..]) {
            let _ = MacControlRepr::parse(&p);
        }
    }

    /// duration_to_quanta returns the smallest quanta whose pause covers the duration.
    #[test]
    fn duration_to_quanta_is_smallest_cover(ns in 0u64..200_000, gbps in 1u64..=800) {
        let rate = gbps * 1_000_000_000;
        let q = duration_to_quanta(std::time::Duration::from_nanos(ns), rate);
        let need = u128::from(ns) * u128::from(rate); // bit-times x 1e9
        let per_q = 512u128 * 1_000_000_000;
        if q < u16::MAX {
            prop_assert!(u128::from(q) * per_q >= need, "q={} does not cover {} ns", q, ns);
        }
        if q > 0 {
            prop_assert!(u128::from(q - 1) * per_q < need, "q-1={} already covers {} ns", q - 1, ns);
        }
    }

    /// Where a quanta is a whole number of nanoseconds, quanta -> duration -> quanta is exact.
    #[test]
    fn quanta_duration_round_trip_exact_rates(q in any::<u16>(), shift in 0u32..=9) {
        let rate = 1_000_000_000u64 << shift; // 1, 2, 4, ..., 512 Gbit/s
        let d = quanta_to_duration(q, rate);
        prop_assert_eq!(d.as_nanos(), u128::from(q) * 512 / (1u128 << shift));
        prop_assert_eq!(duration_to_quanta(d, rate), q);
    }
}

#[test]
fn priority_is_bounded() {
    assert!(Priority::try_new(8).is_err());
    assert_eq!(Priority::all().count(), 8);
}
