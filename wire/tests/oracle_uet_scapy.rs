//! Oracle: scapy layers of the UET PDS and SES headers (test-support's `scapy_uet.py`), written
//! from the public sources' layouts (xdp2 `src/include/uet/pds.h` / `ses.h` big-endian bitfields, Wireshark
//! `packet-uet.c` field masks, uet-ref-prov `uet_pkt_hdr.h`; docs/research/uet-wire-formats.md
//! §1-6, §9, §11a), not from rocefab's code. scapy builds RUD/ROD requests, ACKs, ACK_CCs with
//! their NSCC state, NACKs, SES standard requests (both SOM layouts) and responses, and rocefab
//! must read every field; rocefab emits them, and scapy must dissect the same fields from its
//! bytes. Whole frames (`UetFrame::to_vec`, IPv4/IPv6, UDP 4793 / IP protocol 253 with the
//! entropy header) are dissected by scapy with the layers bound to UDP and IP, and the IP/UDP
//! lengths and checksums checked against what scapy recomputes. Needs /usr/bin/python3 with
//! scapy (Debian python3-scapy); without it the test fails.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rocefab_wire::uet::frame::{Encap, ParsedUetFrame, Ses, UetFrame};
use rocefab_wire::uet::ses::{self, Opcode, Response, ResponseOpcode, ReturnCode, StandardRequest, StdTail};
use rocefab_wire::uet::{self, NackCode, NsccState, Packet, PdsType, Repr};
use serde_json::Value;

use rocefab_test_support::scapy::{run_python, UET_LAYERS as LAYERS};

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
            r => panic!("not built here: {r:?} {c}"),
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

/// A JSON number of any width (Python ints are arbitrary; the 64-bit fields need u64).
fn num(v: &Value) -> i128 {
    v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from)).unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `fields[k]` as a number; panics naming the key.
fn field(fields: &Value, k: &str) -> i128 {
    num(fields.get(k).unwrap_or_else(|| panic!("no {k} in {fields}")))
}

/// Checks a parsed standard request against scapy's fields, every field.
fn check_std_request(r: &StandardRequest, f: &Value) {
    let flag = |bit: u8| i128::from(r.flags & bit != 0);
    assert_eq!(i128::from(u8::from(r.opcode)), field(f, "opcode"), "{f}");
    assert_eq!(i128::from(r.version), field(f, "version"), "{f}");
    assert_eq!(flag(ses::flags::DC), field(f, "dc"), "{f}");
    assert_eq!(flag(ses::flags::IE), field(f, "ie"), "{f}");
    assert_eq!(flag(ses::flags::REL), field(f, "rel"), "{f}");
    assert_eq!(flag(ses::flags::HD), field(f, "hd"), "{f}");
    assert_eq!(flag(ses::flags::EOM), field(f, "eom"), "{f}");
    assert_eq!(flag(ses::flags::SOM), field(f, "som"), "{f}");
    assert_eq!(i128::from(r.message_id), field(f, "message_id"), "{f}");
    assert_eq!(i128::from(r.ri_generation), field(f, "ri_generation"), "{f}");
    assert_eq!(i128::from(r.job_id), field(f, "job_id"), "{f}");
    assert_eq!(i128::from(r.pid_on_fep), field(f, "pid_on_fep"), "{f}");
    assert_eq!(i128::from(r.resource_index), field(f, "resource_index"), "{f}");
    assert_eq!(i128::from(r.buffer_offset), field(f, "buffer_offset"), "{f}");
    assert_eq!(i128::from(r.initiator), field(f, "initiator"), "{f}");
    assert_eq!(i128::from(r.memory_key), field(f, "memory_key"), "{f}");
    match r.tail {
        StdTail::HeaderData(h) => {
            assert_eq!(field(f, "som"), 1, "header data only with SOM: {f}");
            assert_eq!(i128::from(h), field(f, "header_data"), "{f}");
        }
        StdTail::Continuation { payload_length, message_offset } => {
            assert_eq!(field(f, "som"), 0, "payload_length/message_offset only without SOM: {f}");
            assert_eq!(i128::from(payload_length), field(f, "payload_length"), "{f}");
            assert_eq!(i128::from(message_offset), field(f, "message_offset"), "{f}");
        }
    }
    assert_eq!(i128::from(r.request_length), field(f, "request_length"), "{f}");
}

fn check_response(r: &Response, f: &Value) {
    assert_eq!(i128::from(r.list), field(f, "list"), "{f}");
    assert_eq!(i128::from(u8::from(r.opcode)), field(f, "opcode"), "{f}");
    assert_eq!(i128::from(r.version), field(f, "version"), "{f}");
    assert_eq!(i128::from(u8::from(r.return_code)), field(f, "return_code"), "{f}");
    assert_eq!(i128::from(r.message_id), field(f, "message_id"), "{f}");
    assert_eq!(i128::from(r.ri_generation), field(f, "ri_generation"), "{f}");
    assert_eq!(i128::from(r.job_id), field(f, "job_id"), "{f}");
    assert_eq!(i128::from(r.modified_length), field(f, "modified_length"), "{f}");
}

/// Checks any PDS header rocefab parsed against scapy's fields of the layer for its type.
fn check_pds(r: &Repr, f: &Value) {
    let bit = |flags: u8, b: u8| i128::from(flags & b != 0);
    assert_eq!(i128::from(r.next_header()), field(f, "next_hdr"), "{f}");
    match *r {
        Repr::Request { ordered, flags, clear_psn_offset, psn, spdcid, dpdcid, .. } => {
            assert_eq!(field(f, "type"), if ordered { 3 } else { 2 }, "{f}");
            assert_eq!(bit(flags, uet::request_flags::RETX), field(f, "retx"), "{f}");
            assert_eq!(bit(flags, uet::request_flags::AR), field(f, "ar"), "{f}");
            assert_eq!(bit(flags, uet::request_flags::SYN), field(f, "syn"), "{f}");
            assert_eq!(i128::from(clear_psn_offset), field(f, "clear_psn_offset"), "{f}");
            assert_eq!(i128::from(psn), field(f, "psn"), "{f}");
            assert_eq!((i128::from(spdcid), i128::from(dpdcid)), (field(f, "spdcid"), field(f, "dpdcid")), "{f}");
        }
        Repr::Ack { flags, ack_psn_offset, cack_psn, spdcid, dpdcid, .. } => {
            assert_eq!(field(f, "type"), 7, "{f}");
            assert_eq!(bit(flags, uet::ack_flags::M), field(f, "m"), "{f}");
            assert_eq!(bit(flags, uet::ack_flags::RETX), field(f, "retx"), "{f}");
            assert_eq!(bit(flags, uet::ack_flags::P), field(f, "p"), "{f}");
            let req = (flags & uet::ack_flags::REQ_MASK) >> uet::ack_flags::REQ_SHIFT;
            assert_eq!(i128::from(req), field(f, "req"), "{f}");
            assert_eq!(i128::from(ack_psn_offset), field(f, "ack_psn_offset"), "{f}");
            assert_eq!(i128::from(cack_psn), field(f, "cack_psn"), "{f}");
            assert_eq!((i128::from(spdcid), i128::from(dpdcid)), (field(f, "spdcid"), field(f, "dpdcid")), "{f}");
        }
        Repr::AckCc {
            flags,
            ack_psn_offset,
            cack_psn,
            spdcid,
            dpdcid,
            cc_type,
            cc_flags,
            mpr,
            sack_psn_offset,
            sack_bitmap,
            cc_state,
            ..
        } => {
            assert_eq!(field(f, "type"), 8, "{f}");
            assert_eq!(bit(flags, uet::ack_flags::M), field(f, "m"), "{f}");
            assert_eq!(bit(flags, uet::ack_flags::RETX), field(f, "retx"), "{f}");
            assert_eq!(bit(flags, uet::ack_flags::P), field(f, "p"), "{f}");
            let req = (flags & uet::ack_flags::REQ_MASK) >> uet::ack_flags::REQ_SHIFT;
            assert_eq!(i128::from(req), field(f, "req"), "{f}");
            assert_eq!(i128::from(ack_psn_offset), field(f, "ack_psn_offset"), "{f}");
            assert_eq!(i128::from(cack_psn), field(f, "cack_psn"), "{f}");
            assert_eq!((i128::from(spdcid), i128::from(dpdcid)), (field(f, "spdcid"), field(f, "dpdcid")), "{f}");
            assert_eq!(i128::from(cc_type), field(f, "cc_type"), "{f}");
            assert_eq!(i128::from(cc_flags), field(f, "cc_flags"), "{f}");
            assert_eq!(i128::from(mpr), field(f, "mpr"), "{f}");
            assert_eq!(i128::from(sack_psn_offset), field(f, "sack_psn_offset"), "{f}");
            assert_eq!(i128::from(sack_bitmap), field(f, "sack_bitmap"), "{f}");
            if cc_type == uet::cc_type::NSCC {
                let st = NsccState::from_u64(cc_state);
                assert_eq!(i128::from(st.service_time), field(f, "service_time"), "{f}");
                assert_eq!(i128::from(st.restore_cwnd), field(f, "restore_cwnd"), "{f}");
                assert_eq!(i128::from(st.rcv_cwnd_pend), field(f, "rcv_cwnd_pend"), "{f}");
                assert_eq!(i128::from(st.rcvd_bytes), field(f, "rcvd_bytes"), "{f}");
                assert_eq!(i128::from(st.ooo_count), field(f, "ooo_count"), "{f}");
            } else {
                assert_eq!(i128::from(cc_state), field(f, "cc_state"), "{f}");
            }
        }
        Repr::Nack { flags, code, vendor_code, psn, spdcid, dpdcid, payload, .. } => {
            assert_eq!(field(f, "type"), 10, "{f}");
            assert_eq!(bit(flags, uet::nack_flags::M), field(f, "m"), "{f}");
            assert_eq!(bit(flags, uet::nack_flags::RETX), field(f, "retx"), "{f}");
            assert_eq!(bit(flags, uet::nack_flags::NT), field(f, "nt"), "{f}");
            assert_eq!(i128::from(u8::from(code)), field(f, "nack_code"), "{f}");
            assert_eq!(i128::from(vendor_code), field(f, "vendor_code"), "{f}");
            assert_eq!(i128::from(psn), field(f, "nack_psn"), "{f}");
            assert_eq!((i128::from(spdcid), i128::from(dpdcid)), (field(f, "spdcid"), field(f, "dpdcid")), "{f}");
            assert_eq!(i128::from(payload), field(f, "nack_payload"), "{f}");
        }
        ref r => panic!("no scapy layer here for {r:?}: {f}"),
    }
}

#[test]
fn scapy_built_ack_cc_and_ses_headers_parse_field_by_field() {
    let script = format!(
        "{LAYERS}\n{}",
        r#"
pkts = [
  AckCc(next_hdr=4, m=1, retx=1, req=1, ack_psn_offset=-3, cack_psn=0xfedcba98, spdcid=0x1234, dpdcid=0xabcd,
        cc_type=0, cc_flags=0xf, mpr=0x87, sack_psn_offset=0x6789, sack_bitmap=0x123456789abcdef0,
        service_time=0x99aa, restore_cwnd=1, rcv_cwnd_pend=0x7f, rcvd_bytes=0x887766, ooo_count=0x8765),
  AckCc(p=1, req=2, ack_psn_offset=32767, cack_psn=1, cc_type=0, mpr=1, sack_psn_offset=-32768,
        sack_bitmap=0xffffffffffffffff, service_time=1, restore_cwnd=0, rcv_cwnd_pend=0x2a, rcvd_bytes=0xffffff,
        ooo_count=0),
  AckCc(cc_type=1, cc_state=0x123456000000beef, sack_psn_offset=-1),
  SesStdReq(opcode=0x02, version=3, dc=1, rel=1, hd=1, eom=1, som=1, message_id=0x1234, ri_generation=0x77,
            job_id=0xabcdef, pid_on_fep=0x678, resource_index=0x9ab, buffer_offset=0x0102030405060708,
            initiator=0x11223344, memory_key=0xf0e0d0c0b0a09080, header_data=0xdeadbeefcafef00d,
            request_length=0x89abcdef),
  SesStdReq(opcode=0x01, version=1, ie=1, som=0, message_id=0xfffe, ri_generation=0xff, job_id=0x000001,
            pid_on_fep=0xfff, resource_index=0x001, buffer_offset=0xffffffffffffffff, initiator=0x80000001,
            memory_key=0x1, payload_length=0x3fff, message_offset=0x77665544, request_length=0x10000),
  SesStdReq(opcode=0x3f, som=0, payload_length=0x2001, message_offset=0xffffffff),
  SesResponse(list=1, opcode=1, version=2, return_code=0x09, message_id=0xbeef, ri_generation=0x99,
              job_id=0x654321, modified_length=0x9abcdef0),
  SesResponse(list=3, opcode=0x3e, version=3, return_code=0x3f, message_id=1, ri_generation=0, job_id=0xffffff,
              modified_length=0xffffffff),
]
print(json.dumps([{"kind": type(p).__name__, "hex": raw(p).hex(), "fields": every_field(p)} for p in pkts]))
"#
    );
    let cases: Vec<Value> = serde_json::from_str(&run_python(&script, "")).unwrap();
    assert_eq!(cases.len(), 8);
    for c in &cases {
        let bytes = hex(c["hex"].as_str().unwrap());
        let f = &c["fields"];
        match c["kind"].as_str().unwrap() {
            "AckCc" => {
                assert_eq!(bytes.len(), 32, "ACK_CC is 32 bytes (research file §5): {c}");
                let p = Packet::new_checked(&bytes[..]).unwrap();
                assert_eq!(p.pds_type(), PdsType::AckCc);
                let r = Repr::parse(&p).unwrap();
                check_pds(&r, f);
                assert!(Packet::new_checked(&bytes[..31]).is_err(), "31 bytes are not an ACK_CC");
            }
            "SesStdReq" => {
                assert_eq!(bytes.len(), ses::STANDARD_REQUEST_LEN, "{c}");
                check_std_request(&StandardRequest::parse(&bytes).unwrap(), f);
            }
            "SesResponse" => {
                assert_eq!(bytes.len(), ses::RESPONSE_LEN, "{c}");
                check_response(&Response::parse(&bytes).unwrap(), f);
            }
            k => panic!("{k}"),
        }
    }
    // The names of the values scapy wrote.
    let r = Response::parse(&hex(cases[6]["hex"].as_str().unwrap())).unwrap();
    assert_eq!((r.opcode, r.return_code), (ResponseOpcode::Response, ReturnCode::AtPerm));
    let q = StandardRequest::parse(&hex(cases[3]["hex"].as_str().unwrap())).unwrap();
    assert_eq!(q.opcode, Opcode::Read);
}

fn ack_cc(cc_type: u8, cc_state: u64) -> Repr {
    Repr::AckCc {
        next_header: uet::next_header::RESPONSE,
        flags: uet::ack_flags::M | uet::ack_flags::P | (2 << uet::ack_flags::REQ_SHIFT),
        ack_psn_offset: -300,
        cack_psn: 0x8000_0001,
        spdcid: 0xfffe,
        dpdcid: 0x0102,
        cc_type,
        cc_flags: 0x5,
        mpr: 0xc8,
        sack_psn_offset: -2,
        sack_bitmap: 0x8000_0000_0000_0003,
        cc_state,
    }
}

fn nscc() -> NsccState {
    NsccState { service_time: 0xa55a, restore_cwnd: true, rcv_cwnd_pend: 0x41, rcvd_bytes: 0xc0ffee, ooo_count: 0xfff1 }
}

fn std_request(tail: StdTail, flags: u8) -> StandardRequest {
    StandardRequest {
        opcode: Opcode::Write,
        version: 2,
        flags,
        message_id: 0x8421,
        ri_generation: 0xe7,
        job_id: 0xfedcba,
        pid_on_fep: 0xabc,
        resource_index: 0xdef,
        buffer_offset: 0x8877_6655_4433_2211,
        initiator: 0xcafe_babe,
        memory_key: 0x0123_4567_89ab_cdef,
        tail,
        request_length: 0xfedc_ba98,
    }
}

fn response() -> Response {
    Response {
        list: 2,
        opcode: ResponseOpcode::NoResponse,
        version: 1,
        return_code: ReturnCode::BadJobId,
        message_id: 0x4321,
        ri_generation: 0x3c,
        job_id: 0x0a0b0c,
        modified_length: 0xdead_beef,
    }
}

#[test]
fn rocefab_emitted_ack_cc_and_ses_headers_dissect_in_scapy() {
    let acks = [ack_cc(uet::cc_type::NSCC, nscc().to_u64()), ack_cc(uet::cc_type::CREDIT, 0x0012_3400_0000_0777)];
    let reqs = [
        std_request(StdTail::HeaderData(0xf00d_0000_0000_beef), ses::flags::SOM | ses::flags::HD | ses::flags::DC),
        std_request(StdTail::Continuation { payload_length: 0x3ffe, message_offset: 0x8000_0004 }, ses::flags::EOM),
    ];
    let mut lines = String::new();
    for a in &acks {
        let mut b = vec![0xa5u8; a.buffer_len()];
        a.emit(&mut Packet::new_unchecked(&mut b[..]));
        lines += &format!("AckCc {}\n", to_hex(&b));
    }
    for r in &reqs {
        let mut b = [0xa5u8; ses::STANDARD_REQUEST_LEN];
        r.emit(&mut b);
        lines += &format!("SesStdReq {}\n", to_hex(&b));
    }
    let mut b = [0xa5u8; ses::RESPONSE_LEN];
    response().emit(&mut b);
    lines += &format!("SesResponse {}\n", to_hex(&b));
    let script = format!(
        "{LAYERS}\n{}",
        r#"
out = []
for line in sys.stdin.read().splitlines():
    kind, h = line.split()
    p = {"AckCc": AckCc, "SesStdReq": SesStdReq, "SesResponse": SesResponse}[kind](bytes.fromhex(h))
    out.append({"kind": kind, "len": len(p) - len(p.payload), "rest": len(p.payload), "fields": every_field(p)})
print(json.dumps(out))
"#
    );
    let got: Vec<Value> = serde_json::from_str(&run_python(&script, &lines)).unwrap();
    assert_eq!(got.len(), 5);
    for (g, a) in got[..2].iter().zip(&acks) {
        assert_eq!((g["len"].as_u64(), g["rest"].as_u64()), (Some(32), Some(0)), "{g}");
        check_pds(a, &g["fields"]);
        assert_eq!((field(&g["fields"], "rsvd1"), field(&g["fields"], "rsvd2")), (0, 0), "reserved bits zero: {g}");
    }
    // The NSCC fields as set, read by scapy at their positions (not through NsccState).
    let f = &got[0]["fields"];
    let st = nscc();
    assert_eq!(
        [field(f, "service_time"), field(f, "restore_cwnd"), field(f, "rcv_cwnd_pend")],
        [i128::from(st.service_time), 1, i128::from(st.rcv_cwnd_pend)]
    );
    assert_eq!([field(f, "rcvd_bytes"), field(f, "ooo_count")], [i128::from(st.rcvd_bytes), i128::from(st.ooo_count)]);
    for (g, r) in got[2..4].iter().zip(&reqs) {
        assert_eq!((g["len"].as_u64(), g["rest"].as_u64()), (Some(44), Some(0)), "{g}");
        check_std_request(r, &g["fields"]);
        let f = &g["fields"];
        assert_eq!((field(f, "rsvd1"), field(f, "rsvd2"), field(f, "rsvd3")), (0, 0, 0), "reserved bits zero: {g}");
        if let Some(v) = f.get("rsvd4") {
            assert_eq!(num(v), 0, "reserved bits before payload_length zero: {g}");
        }
    }
    assert_eq!((got[4]["len"].as_u64(), got[4]["rest"].as_u64()), (Some(12), Some(0)), "{}", got[4]);
    check_response(&response(), &got[4]["fields"]);
}

/// The frames of the whole-frame oracle: each combination of IPv4/IPv6 and UDP/IP protocol 253,
/// with every PDS and SES header rocefab emits, and a NACK short enough to need padding.
fn frames<'a>(payload: &'a [u8]) -> Vec<UetFrame<'a>> {
    let v4 = (IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)), IpAddr::V4(Ipv4Addr::new(10, 200, 0, 254)));
    let v6 = (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 0x11)),
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xabcd, 0, 2, 0, 0, 0, 0x22)),
    );
    let base = |(src_ip, dst_ip): (IpAddr, IpAddr), encap, pds, ses, payload| UetFrame {
        src_mac: [0x02, 0x11, 0x22, 0x33, 0x44, 0x55],
        dst_mac: [0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee],
        src_ip,
        dst_ip,
        dscp: 26,
        ecn: uet_ecn(),
        ttl: 63,
        encap,
        pds,
        ses,
        payload,
    };
    let req = |ordered| Repr::Request {
        ordered,
        next_header: 0,
        flags: uet::request_flags::AR | uet::request_flags::RETX,
        clear_psn_offset: -2,
        psn: 0x0102_0304,
        spdcid: 0x0a0b,
        dpdcid: 0x0c0d,
    };
    let nack = Repr::Nack {
        next_header: 0,
        flags: uet::nack_flags::RETX,
        code: NackCode::Trimmed,
        vendor_code: 0x77,
        psn: 0xffff_fff0,
        spdcid: 3,
        dpdcid: 4,
        payload: 0x1000_0001,
    };
    let ack = Repr::Ack {
        next_header: 0,
        flags: uet::ack_flags::M | (1 << uet::ack_flags::REQ_SHIFT),
        ack_psn_offset: 5,
        cack_psn: 99,
        spdcid: 4,
        dpdcid: 3,
    };
    let som = std_request(StdTail::HeaderData(0x1122_3344_5566_7788), ses::flags::SOM | ses::flags::HD);
    let cont = std_request(StdTail::Continuation { payload_length: 100, message_offset: 4096 }, ses::flags::EOM);
    let native = |entropy| Encap::Ip { protocol: uet::IP_PROTOCOL, entropy };
    vec![
        base(v4, Encap::udp(0xc001), req(false), Ses::Request(som), &payload[..64]),
        base(v6, Encap::udp(0xfffe), ack_cc(uet::cc_type::NSCC, nscc().to_u64()), Ses::Response(response()), &[]),
        base(v4, native(0x1234), nack, Ses::None, &[]),
        base(v6, native(0xbeef), req(true), Ses::Request(cont), &payload[..100]),
        base(v4, Encap::udp(49152), ack, Ses::Response(response()), &[]),
        base(v4, native(1), ack_cc(uet::cc_type::NSCC, nscc().to_u64()), Ses::None, &payload[..3]),
    ]
}

fn uet_ecn() -> etherparse::IpEcn {
    etherparse::IpEcn::Ect1
}

/// rocefab's whole frames, dissected by scapy with the UET layers bound to UDP 4793 and IP
/// protocol 253: every header field, the lengths and checksums as scapy recomputes them.
#[test]
fn rocefab_frames_dissect_in_scapy_with_lengths_and_checksums() {
    let payload: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37)).collect();
    let frames = frames(&payload);
    let lines: String = frames.iter().map(|f| to_hex(&f.to_vec().unwrap()) + "\n").collect();
    let script = format!(
        "{LAYERS}\n{}",
        r#"
out = []
for line in sys.stdin.read().split():
    b = bytes.fromhex(line)
    p = Ether(b)
    d = {"frame_len": len(b), "eth": {"src": p.src, "dst": p.dst, "type": p.type}}
    ip = p[IP] if IP in p else p[IPv6]
    d["ip"] = {k: v for k, v in every_field(ip).items() if k != "options"}
    d["ip"]["flags"] = int(ip.flags) if IP in p else None
    l4 = p[UDP] if UDP in p else p[UetEntropy]
    d["l4"] = {"layer": type(l4).__name__, "fields": every_field(l4)}
    pds = l4.payload
    d["pds"] = {"layer": type(pds).__name__, "len": len(pds) - len(pds.payload), "fields": every_field(pds)}
    nxt = pds.payload
    if isinstance(nxt, (SesStdReq, SesResponse)):
        d["ses"] = {"layer": type(nxt).__name__, "len": len(nxt) - len(nxt.payload), "fields": every_field(nxt)}
        nxt = nxt.payload
    d["payload"] = nxt.load.hex() if isinstance(nxt, Raw) and not isinstance(nxt, Padding) else ""
    d["padding"] = len(p[Padding].load) if Padding in p else 0
    # What scapy computes when the lengths and checksums are left to it.
    q = Ether(b)
    if IP in q:
        del q[IP].len
        del q[IP].chksum
    else:
        del q[IPv6].plen
    if UDP in q:
        del q[UDP].len
        del q[UDP].chksum
    r = Ether(raw(q))
    d["recomputed"] = {"ip_len": r[IP].len if IP in r else r[IPv6].plen, "ip_chksum": r[IP].chksum if IP in r else None,
                       "udp_len": r[UDP].len if UDP in r else None, "udp_chksum": r[UDP].chksum if UDP in r else None}
    out.append(d)
print(json.dumps(out))
"#
    );
    let got: Vec<Value> = serde_json::from_str(&run_python(&script, &lines)).unwrap();
    assert_eq!(got.len(), frames.len());
    for (f, g) in frames.iter().zip(&got) {
        let ip = &g["ip"];
        let recomputed = &g["recomputed"];
        // Header lengths from the research file: PDS request/ACK 12, ACK_CC 32, NACK 16 (§3-6);
        // SES standard request 44, response 12 (§9, §11a); UDP 8 or the entropy header 4 (§1).
        let pds_len = match f.pds {
            Repr::Request { .. } | Repr::Ack { .. } => 12,
            Repr::AckCc { .. } => 32,
            Repr::Nack { .. } => 16,
            ref r => unreachable!("{r:?}"),
        };
        let ses_len = match f.ses {
            Ses::Request(_) => 44,
            Ses::Response(_) => 12,
            Ses::None => 0,
            ref s => unreachable!("{s:?}"),
        };
        let (udp, l4_hdr) = match f.encap {
            Encap::Udp { .. } => (true, 8),
            Encap::Ip { .. } => (false, 4),
        };
        let l4_len = l4_hdr + pds_len + ses_len + f.payload.len() as i128;
        let ip_hdr = if f.src_ip.is_ipv4() { 20 } else { 40 };
        let natural = 14 + ip_hdr + l4_len;
        assert_eq!(num(&g["frame_len"]), natural.max(60), "{g}");
        assert_eq!(num(&g["padding"]), (60 - natural).max(0), "Ethernet padding to 60 bytes: {g}");
        assert_eq!(g["eth"]["src"], "02:11:22:33:44:55");
        assert_eq!(g["eth"]["dst"], "02:aa:bb:cc:dd:ee");
        let addr = |k: &str| ip[k].as_str().unwrap().parse::<IpAddr>().unwrap();
        assert_eq!((addr("src"), addr("dst")), (f.src_ip, f.dst_ip), "{g}");
        let proto = if udp { 17 } else { 253 };
        if f.src_ip.is_ipv4() {
            assert_eq!(num(&g["eth"]["type"]), 0x0800);
            assert_eq!((field(ip, "version"), field(ip, "ihl")), (4, 5), "{g}");
            assert_eq!(field(ip, "len"), 20 + l4_len, "IPv4 total length: {g}");
            assert_eq!(field(ip, "len"), num(&recomputed["ip_len"]), "{g}");
            assert_eq!(field(ip, "chksum"), num(&recomputed["ip_chksum"]), "IPv4 header checksum: {g}");
            assert_eq!(field(ip, "proto"), proto, "{g}");
            assert_eq!(field(ip, "tos"), (26 << 2) | 1, "DSCP 26, ECT(1): {g}");
            assert_eq!(field(ip, "ttl"), 63, "{g}");
            assert_eq!((num(&ip["flags"]), field(ip, "frag")), (2, 0), "DF, not fragmented: {g}");
        } else {
            assert_eq!(num(&g["eth"]["type"]), 0x86dd);
            assert_eq!(field(ip, "version"), 6, "{g}");
            assert_eq!(field(ip, "plen"), l4_len, "IPv6 payload length: {g}");
            assert_eq!(field(ip, "plen"), num(&recomputed["ip_len"]), "{g}");
            assert_eq!(field(ip, "nh"), proto, "{g}");
            assert_eq!(field(ip, "tc"), (26 << 2) | 1, "{g}");
            assert_eq!(field(ip, "hlim"), 63, "{g}");
        }
        let l4 = &g["l4"]["fields"];
        match f.encap {
            Encap::Udp { src_port, dst_port } => {
                assert_eq!(g["l4"]["layer"], "UDP", "{g}");
                assert_eq!((field(l4, "sport"), field(l4, "dport")), (i128::from(src_port), 4793), "{g}");
                assert_eq!(dst_port, 4793);
                assert_eq!(field(l4, "len"), l4_len, "UDP length: {g}");
                assert_eq!(field(l4, "len"), num(&recomputed["udp_len"]), "{g}");
                if f.src_ip.is_ipv4() {
                    assert_eq!(field(l4, "chksum"), 0, "IPv4 UDP checksum not computed (RFC 768 zero): {g}");
                } else {
                    assert_ne!(field(l4, "chksum"), 0, "IPv6 UDP checksum is mandatory: {g}");
                    assert_eq!(field(l4, "chksum"), num(&recomputed["udp_chksum"]), "IPv6 UDP checksum: {g}");
                }
            }
            Encap::Ip { entropy, .. } => {
                assert_eq!(g["l4"]["layer"], "UetEntropy", "{g}");
                assert_eq!((field(l4, "entropy"), field(l4, "rsvd")), (i128::from(entropy), 0), "{g}");
            }
        }
        assert_eq!(num(&g["pds"]["len"]), pds_len, "{g}");
        // The builder sets next_header from the SES header it carries.
        let mut pds = f.pds;
        match f.ses {
            Ses::Request(_) => pds.set_next_header(3),
            Ses::Response(_) => pds.set_next_header(4),
            _ => {}
        }
        check_pds(&pds, &g["pds"]["fields"]);
        match &f.ses {
            Ses::Request(r) => {
                assert_eq!((g["ses"]["layer"].as_str(), num(&g["ses"]["len"])), (Some("SesStdReq"), 44), "{g}");
                check_std_request(r, &g["ses"]["fields"]);
            }
            Ses::Response(r) => {
                assert_eq!((g["ses"]["layer"].as_str(), num(&g["ses"]["len"])), (Some("SesResponse"), 12), "{g}");
                check_response(r, &g["ses"]["fields"]);
            }
            Ses::None => assert!(g.get("ses").is_none(), "{g}"),
            s => unreachable!("{s:?}"),
        }
        assert_eq!(g["payload"].as_str().unwrap(), to_hex(f.payload), "{g}");
    }
}

/// scapy builds whole frames (its own lengths and checksums) and rocefab's frame parser reads
/// every layer.
#[test]
fn scapy_built_frames_parse_field_by_field() {
    let script = format!(
        "{LAYERS}\n{}",
        r#"
E = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
frames = [
  E / IP(src="10.0.0.1", dst="10.0.0.2", tos=0x69, ttl=9) / UDP(sport=0xabcd, dport=4793)
    / RudRodReq(type=2, next_hdr=3, ar=1, syn=1, clear_psn_offset=-9, psn=77, spdcid=5, dpdcid=0x8006)
    / SesStdReq(opcode=5, som=1, eom=1, message_id=3, job_id=0x123456, pid_on_fep=0x321, resource_index=0x654,
                buffer_offset=0x1000, initiator=7, memory_key=8, header_data=9, request_length=10)
    / Raw(b"\x01\x02\x03\x04\x05"),
  E / IPv6(src="fd00::1", dst="fd00::2", tc=0x12, hlim=3) / UetEntropy(entropy=0x5555)
    / AckCc(next_hdr=4, m=1, ack_psn_offset=-1, cack_psn=0xffffffff, spdcid=1, dpdcid=2, cc_type=0, mpr=16,
            sack_psn_offset=4, sack_bitmap=0x0f, service_time=500, restore_cwnd=1, rcv_cwnd_pend=3,
            rcvd_bytes=4096, ooo_count=2)
    / SesResponse(opcode=1, return_code=1, message_id=3, job_id=0x123456, modified_length=4096),
  E / IP(src="10.0.0.2", dst="10.0.0.1") / UetEntropy(entropy=0x0102)
    / Nack(nack_code=0x02, retx=1, nack_psn=1000, spdcid=2, dpdcid=1, nack_payload=1001),
  E / IPv6(src="fd00::2", dst="fd00::1") / UDP(sport=1, dport=4793)
    / RudRodReq(type=3, next_hdr=3, psn=2, spdcid=9, dpdcid=10)
    / SesStdReq(opcode=1, som=0, payload_length=8, message_offset=4096, request_length=8192) / Raw(b"\xff" * 8),
]
out = []
for f in frames:
    b = raw(f)
    p = Ether(b)
    l4 = p[UDP] if UDP in p else p[UetEntropy]
    pds = l4.payload
    d = {"hex": b.hex(), "l4": every_field(l4), "pds": every_field(pds), "tos": p[IP].tos if IP in p else p[IPv6].tc,
         "ttl": p[IP].ttl if IP in p else p[IPv6].hlim}
    if isinstance(pds.payload, (SesStdReq, SesResponse)):
        d["ses"] = {"layer": type(pds.payload).__name__, "fields": every_field(pds.payload)}
        d["payload"] = raw(pds.payload.payload).hex()
    else:
        d["payload"] = ""
    out.append(d)
print(json.dumps(out))
"#
    );
    let got: Vec<Value> = serde_json::from_str(&run_python(&script, "")).unwrap();
    assert_eq!(got.len(), 4);
    for g in &got {
        let bytes = hex(g["hex"].as_str().unwrap());
        let p = ParsedUetFrame::parse(&bytes).unwrap_or_else(|e| panic!("{e}: {g}"));
        assert_eq!(i128::from((p.dscp << 2) | p.ecn.value()), num(&g["tos"]), "{g}");
        assert_eq!(i128::from(p.ttl), num(&g["ttl"]), "{g}");
        match p.encap {
            Encap::Udp { src_port, dst_port } => {
                assert_eq!((i128::from(src_port), i128::from(dst_port)), (field(&g["l4"], "sport"), 4793), "{g}")
            }
            Encap::Ip { protocol, entropy } => {
                assert_eq!(protocol, 253);
                assert_eq!(i128::from(entropy), field(&g["l4"], "entropy"), "{g}");
            }
        }
        check_pds(&p.pds, &g["pds"]);
        match (&p.ses, g.get("ses")) {
            (Ses::Request(r), Some(s)) if s["layer"] == "SesStdReq" => check_std_request(r, &s["fields"]),
            (Ses::Response(r), Some(s)) if s["layer"] == "SesResponse" => check_response(r, &s["fields"]),
            (Ses::None, None) => {}
            (s, o) => panic!("rocefab {s:?}, scapy {o:?}"),
        }
        assert_eq!(to_hex(p.payload), g["payload"].as_str().unwrap(), "{g}");
    }
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}
