//! Oracle: scapy layers of the UET PDS headers, written in this test from the public sources'
//! layouts (xdp2 `src/include/uet/pds.h` big-endian bitfields, Wireshark `packet-uet.c` field
//! masks; docs/research/uet-wire-formats.md §2-6), not from rocefab's code. scapy builds RUD/ROD
//! requests, ACKs and NACKs, and rocefab must read every field; rocefab emits them, and scapy
//! must dissect the same fields from its bytes. Needs /usr/bin/python3 with scapy (Debian
//! python3-scapy); without it the test fails.

use rocefab_wire::uet::{self, NackCode, Packet, PdsType, Repr};
use serde_json::Value;

use rocefab_test_support::scapy::run_python;

/// The layers: the 16-bit prologue as type (5) | next header (4) | flags (7), the flags split
/// per type as the sources name them (xdp2 pds.h `struct uet_pds_rud_rod_request`,
/// `uet_pds_ack`, `uet_pds_nack`, BIG_ENDIAN_BITFIELD branches).
const LAYERS: &str = r#"
import json, sys
from scapy.all import Packet, BitField, ByteField, ShortField, SignedShortField, IntField, raw

def every_field(p):
    return {f.name: p.getfieldval(f.name) for f in p.fields_desc}

class RudRodReq(Packet):
    name = "UET PDS RUD/ROD request"
    fields_desc = [BitField("type", 2, 5), BitField("next_hdr", 0, 4), BitField("rsvd1", 0, 2),
                   BitField("retx", 0, 1), BitField("ar", 0, 1), BitField("syn", 0, 1), BitField("rsvd2", 0, 2),
                   SignedShortField("clear_psn_offset", 0), IntField("psn", 0), ShortField("spdcid", 0),
                   ShortField("dpdcid", 0)]

class Ack(Packet):
    name = "UET PDS ACK"
    fields_desc = [BitField("type", 7, 5), BitField("next_hdr", 0, 4), BitField("rsvd1", 0, 1),
                   BitField("m", 0, 1), BitField("retx", 0, 1), BitField("p", 0, 1), BitField("req", 0, 2),
                   BitField("rsvd2", 0, 1), SignedShortField("ack_psn_offset", 0), IntField("cack_psn", 0),
                   ShortField("spdcid", 0), ShortField("dpdcid", 0)]

class Nack(Packet):
    name = "UET PDS NACK"
    fields_desc = [BitField("type", 10, 5), BitField("next_hdr", 0, 4), BitField("rsvd1", 0, 1),
                   BitField("m", 0, 1), BitField("retx", 0, 1), BitField("nt", 0, 1), BitField("rsvd2", 0, 3),
                   ByteField("nack_code", 0), ByteField("vendor_code", 0), IntField("nack_psn", 0),
                   ShortField("spdcid", 0), ShortField("dpdcid", 0), IntField("nack_payload", 0)]
"#;

#[test]
fn scapy_built_pds_headers_parse_field_by_field() {
    let script = format!(
        "{LAYERS}\n{}",
        r#"
pkts = [
  RudRodReq(type=2, next_hdr=3, ar=1, syn=1, clear_psn_offset=-2, psn=0x00010203, spdcid=0x1234, dpdcid=0x8005),
  RudRodReq(type=3, next_hdr=1, retx=1, clear_psn_offset=300, psn=0xfffffffe, spdcid=7, dpdcid=8),
  Ack(next_hdr=0, m=1, p=0, req=2, ack_psn_offset=-128, cack_psn=0x80000000, spdcid=0xfffe, dpdcid=1),
  Nack(m=0, retx=1, nt=0, nack_code=0x01, vendor_code=0x5a, nack_psn=41, spdcid=1, dpdcid=2, nack_payload=42),
  Nack(nack_code=0x02, nack_psn=9, spdcid=3, dpdcid=4),
  Nack(nack_code=0x1a, nt=1, nack_psn=0x12345678, spdcid=0, dpdcid=5, nack_payload=0xffffffff),
]
print(json.dumps([{"hex": raw(p).hex(), "fields": every_field(p)} for p in pkts]))
"#
    );
    let cases: Vec<Value> = serde_json::from_str(&run_python(&script, "")).unwrap();
    assert_eq!(cases.len(), 6);
    for c in &cases {
        let bytes = hex(c["hex"].as_str().unwrap());
        let f = &c["fields"];
        let n = |k: &str| f[k].as_i64().unwrap_or_else(|| panic!("{k} in {f}"));
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(u8::from(p.pds_type()) as i64, n("type"), "{c}");
        assert_eq!(p.next_header() as i64, n("next_hdr"), "{c}");
        match r {
            Repr::Request { ordered, flags, clear_psn_offset, psn, spdcid, dpdcid, .. } => {
                assert_eq!(ordered, n("type") == 3, "{c}");
                assert_eq!(flags & uet::request_flags::RETX != 0, n("retx") == 1, "{c}");
                assert_eq!(flags & uet::request_flags::AR != 0, n("ar") == 1, "{c}");
                assert_eq!(flags & uet::request_flags::SYN != 0, n("syn") == 1, "{c}");
                assert_eq!(clear_psn_offset as i64, n("clear_psn_offset"), "{c}");
                assert_eq!((psn as i64, spdcid as i64, dpdcid as i64), (n("psn"), n("spdcid"), n("dpdcid")), "{c}");
            }
            Repr::Ack { flags, ack_psn_offset, cack_psn, spdcid, dpdcid, .. } => {
                assert_eq!(flags & uet::ack_flags::M != 0, n("m") == 1, "{c}");
                assert_eq!(flags & uet::ack_flags::P != 0, n("p") == 1, "{c}");
                let req = (flags & uet::ack_flags::REQ_MASK) >> uet::ack_flags::REQ_SHIFT;
                assert_eq!(req as i64, n("req"), "{c}");
                assert_eq!(ack_psn_offset as i64, n("ack_psn_offset"), "{c}");
                assert_eq!((cack_psn as i64, spdcid as i64, dpdcid as i64), (n("cack_psn"), n("spdcid"), n("dpdcid")));
            }
            Repr::Nack { flags, code, vendor_code, psn, spdcid, dpdcid, payload, .. } => {
                assert_eq!(flags & uet::nack_flags::RETX != 0, n("retx") == 1, "{c}");
                assert_eq!(flags & uet::nack_flags::NT != 0, n("nt") == 1, "{c}");
                assert_eq!(u8::from(code) as i64, n("nack_code"), "{c}");
                assert_eq!(vendor_code as i64, n("vendor_code"), "{c}");
                assert_eq!((psn as i64, spdcid as i64, dpdcid as i64), (n("nack_psn"), n("spdcid"), n("dpdcid")));
                assert_eq!(payload as i64, n("nack_payload"), "{c}");
            }
            Repr::AckCc { .. } | Repr::Other { .. } => panic!("not laid out: {c}"),
        }
    }
    // The trimmed NACK is named.
    let trimmed = hex(cases[3]["hex"].as_str().unwrap());
    assert_eq!(Packet::new_checked(&trimmed[..]).unwrap().nack_code(), NackCode::Trimmed);
    assert_eq!(Packet::new_checked(&trimmed[..]).unwrap().pds_type(), PdsType::Nack);
}

#[test]
fn rocefab_emitted_pds_headers_dissect_in_scapy() {
    let reprs = [
        Repr::Request {
            ordered: false,
            next_header: 3,
            flags: uet::request_flags::AR | uet::request_flags::SYN,
            clear_psn_offset: -7,
            psn: 0xa0b0_c0d0,
            spdcid: 11,
            dpdcid: 12,
        },
        Repr::Ack {
            next_header: 0,
            flags: uet::ack_flags::M | uet::ack_flags::RETX | (1 << uet::ack_flags::REQ_SHIFT),
            ack_psn_offset: 1000,
            cack_psn: 5,
            spdcid: 12,
            dpdcid: 11,
        },
        Repr::Nack {
            next_header: 0,
            flags: uet::nack_flags::M,
            code: NackCode::TrimmedLastHop,
            vendor_code: 0,
            psn: 0xa0b0_c0d1,
            spdcid: 12,
            dpdcid: 11,
            payload: 0xa0b0_c0d2,
        },
    ];
    let mut lines = String::new();
    for r in &reprs {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        lines += &b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        lines.push('\n');
    }
    let script = format!(
        "{LAYERS}\n{}",
        r#"
out = []
for line in sys.stdin.read().split():
    b = bytes.fromhex(line)
    t = b[0] >> 3
    cls = {2: RudRodReq, 3: RudRodReq, 7: Ack, 10: Nack}[t]
    p = cls(b)
    out.append({"len": len(raw(p)), "fields": every_field(p)})
print(json.dumps(out))
"#
    );
    let got: Vec<Value> = serde_json::from_str(&run_python(&script, &lines)).unwrap();
    let f = |i: usize, k: &str| got[i]["fields"][k].as_i64().unwrap_or_else(|| panic!("{k}: {}", got[i]));
    assert_eq!(got[0]["len"], 12);
    assert_eq!((f(0, "type"), f(0, "next_hdr"), f(0, "ar"), f(0, "syn"), f(0, "retx")), (2, 3, 1, 1, 0));
    assert_eq!((f(0, "clear_psn_offset"), f(0, "psn"), f(0, "spdcid"), f(0, "dpdcid")), (-7, 0xa0b0_c0d0, 11, 12));
    assert_eq!((f(1, "type"), f(1, "m"), f(1, "retx"), f(1, "p"), f(1, "req")), (7, 1, 1, 0, 1));
    assert_eq!((f(1, "ack_psn_offset"), f(1, "cack_psn"), f(1, "spdcid"), f(1, "dpdcid")), (1000, 5, 12, 11));
    assert_eq!(got[2]["len"], 16);
    assert_eq!((f(2, "type"), f(2, "m"), f(2, "nt"), f(2, "nack_code")), (10, 1, 0, 2));
    assert_eq!((f(2, "nack_psn"), f(2, "nack_payload"), f(2, "spdcid")), (0xa0b0_c0d1, 0xa0b0_c0d2, 12));
    assert_eq!(got.len(), 3);
    for g in &got {
        assert_eq!(
            (&g["fields"]["rsvd1"], &g["fields"]["rsvd2"]),
            (&Value::from(0), &Value::from(0)),
            "reserved bits zero: {g}"
        );
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}
