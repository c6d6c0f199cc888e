//! Oracle: scapy (`scapy.contrib.roce`, an independent implementation of BTH/AETH/CNP and the
//! RoCEv2 ICRC for IPv4) builds packets; our parser must read the same fields, compute the same
//! ICRC, and our builder must produce the same bytes. In the other direction scapy re-parses our
//! frames and recomputes their ICRC. Needs /usr/bin/python3 with scapy (Debian python3-scapy);
//! without it the test fails.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};

use rocefab_wire::roce::{self, aeth, bth, reth, IcrcStatus, Opcode, ParsedFrame, Repr, RoceFrame};
use serde_json::Value;

const PYTHON: &str = "/usr/bin/python3";

fn run_python(script: &str, stdin: &str) -> String {
    let mut child = Command::new(PYTHON)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {PYTHON} (needed for the scapy oracle): {e}"));
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "scapy oracle failed (is python3-scapy installed for {PYTHON}?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Each case: opcode, solicited, migreq, pkey, dqpn, ackreq, psn, tos, sport, ext, payload.
const BUILD: &str = r#"
import json, struct, sys
from scapy.all import Ether, IP, UDP, Raw, raw
from scapy.contrib.roce import BTH, AETH, CNPPadding
cases = [
  dict(name="write-only", opcode=0x0a, se=0, m=0, pkey=0xffff, qp=0x12, a=1, psn=100, tos=(24<<2)|2, sport=0xc001,
       reth=[0x1122334455667788, 0xaabbccdd, 256], payload=list(range(256)), pad=0),
  dict(name="write-first", opcode=0x06, se=0, m=1, pkey=0x8001, qp=0xabcdef, a=0, psn=0xffffff, tos=(24<<2)|2, sport=0xd00d,
       reth=[0xdeadbeef00, 7, 4096], payload=[0x5a]*64, pad=0),
  dict(name="write-middle", opcode=0x07, se=0, m=0, pkey=0xffff, qp=0x1, a=0, psn=0, tos=(24<<2)|3, sport=0xc002,
       payload=[1,2,3,4,5,6,7,8], pad=0),
  dict(name="write-last", opcode=0x08, se=1, m=0, pkey=0xffff, qp=0x1, a=1, psn=1, tos=(24<<2)|2, sport=0xc002,
       payload=[9,9,9,9,9], pad=3),
  dict(name="send-only", opcode=0x04, se=1, m=0, pkey=0xffff, qp=0x33, a=1, psn=5, tos=0, sport=0xc003,
       payload=[0xee]*3, pad=1),
  dict(name="ack", opcode=0x11, se=0, m=0, pkey=0xffff, qp=0x12, a=0, psn=100, tos=(24<<2)|2, sport=0xc001,
       syndrome=0x1f, msn=77, payload=[], pad=0),
  dict(name="nak-seq", opcode=0x11, se=0, m=0, pkey=0xffff, qp=0x12, a=0, psn=101, tos=(24<<2)|2, sport=0xc001,
       syndrome=0x60, msn=0xfffffe, payload=[], pad=0),
  dict(name="rnr-nak", opcode=0x11, se=0, m=0, pkey=0xffff, qp=0x12, a=0, psn=102, tos=(24<<2)|2, sport=0xc001,
       syndrome=0x2e, msn=3, payload=[], pad=0),
  dict(name="cnp", opcode=0x81, se=0, m=0, pkey=0xffff, qp=0x12, a=0, psn=0, tos=(48<<2), sport=0xc001,
       cnp=1, payload=[], pad=0),
]
for c in cases:
    ip = IP(src="192.168.1.1", dst="192.168.2.2", tos=c["tos"], ttl=64, flags="DF", id=0)
    bth = BTH(opcode=c["opcode"], solicited=c["se"], migreq=c["m"], padcount=c["pad"], pkey=c["pkey"],
              dqpn=c["qp"], ackreq=c["a"], psn=c["psn"], becn=1 if "cnp" in c else 0)
    p = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")/ip/UDP(sport=c["sport"], dport=4791, chksum=0)/bth
    ext = b""
    if "reth" in c:
        ext = struct.pack("!QII", *c["reth"])
    body = Raw(ext + bytes(c["payload"]) + b"\0" * c["pad"]) if (ext or c["payload"] or c["pad"]) else None
    if "syndrome" in c:
        p = p/AETH(syndrome=c["syndrome"], msn=c["msn"])
    elif "cnp" in c:
        p = p/CNPPadding()
    if body is not None:
        p = p/body
    b = raw(p)
    q = Ether(b)
    c["hex"] = b.hex()
    c["scapy_icrc"] = q[BTH].icrc
    c["scapy_layers"] = [l.__name__ for l in q.layers()]
    print(json.dumps(c))
"#;

/// Reads hex frames (one per line) and prints scapy's view: opcode, dqpn, psn, the stored ICRC
/// and the ICRC scapy recomputes.
const CHECK: &str = r#"
import sys, json
from scapy.all import Ether, raw
from scapy.contrib.roce import BTH, AETH, CNPPadding
for line in sys.stdin:
    b = bytes.fromhex(line.strip())
    p = Ether(b)
    stored = p[BTH].icrc
    q = Ether(b)
    q[BTH].icrc = None
    # recompute: rebuild the BTH layer and its payload with icrc=None
    recomputed = Ether(raw(q))[BTH].icrc
    out = dict(opcode=p[BTH].opcode, dqpn=p[BTH].dqpn, psn=p[BTH].psn, becn=p[BTH].becn,
               stored=stored, recomputed=recomputed, has_aeth=AETH in p, has_cnp=CNPPadding in p)
    if AETH in p:
        out["syndrome"] = p[AETH].syndrome
        out["msn"] = p[AETH].msn
    print(json.dumps(out))
"#;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("field {k} in {v}"))
}

#[test]
fn scapy_built_frames_parse_and_icrc_matches() {
    let out = run_python(BUILD, "");
    let cases: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(cases.len(), 9, "scapy produced {out}");
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let frame = hex(c["hex"].as_str().unwrap());
        let p = ParsedFrame::parse(&frame).unwrap_or_else(|e| panic!("{name}: {e}"));
        let b = p.bth();
        assert_eq!(u8::from(b.opcode) as u64, u(c, "opcode"), "{name}");
        assert_eq!(b.solicited as u64, u(c, "se"), "{name}");
        assert_eq!(b.migreq as u64, u(c, "m"), "{name}");
        assert_eq!(b.pkey as u64, u(c, "pkey"), "{name}");
        assert_eq!(b.dest_qp as u64, u(c, "qp"), "{name}");
        assert_eq!(b.ack_req as u64, u(c, "a"), "{name}");
        assert_eq!(b.psn as u64, u(c, "psn"), "{name}");
        assert_eq!(b.pad_count as u64, u(c, "pad"), "{name}");
        let tos = u(c, "tos") as u8;
        assert_eq!(p.ip.dscp, tos >> 2, "{name}");
        assert_eq!(p.ip.ecn.value(), tos & 3, "{name}");
        assert_eq!(p.udp_src_port as u64, u(c, "sport"), "{name}");
        assert_eq!(p.udp_dst_port, 4791);
        let payload: Vec<u8> = c["payload"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u8).collect();
        assert_eq!(p.payload, &payload[..], "{name}");
        match c.get("reth") {
            Some(r) => {
                let r: Vec<u64> = r.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
                assert_eq!(p.reth(), Some(&reth::Repr { va: r[0], r_key: r[1] as u32, dma_len: r[2] as u32 }), "{name}");
            }
            None => assert_eq!(p.reth(), None, "{name}"),
        }
        match c.get("syndrome") {
            Some(s) => {
                let a = p.aeth().unwrap_or_else(|| panic!("{name}: no AETH"));
                assert_eq!(u8::from(a.syndrome) as u64, s.as_u64().unwrap(), "{name}");
                assert_eq!(a.msn as u64, u(c, "msn"), "{name}");
            }
            None => assert_eq!(p.aeth(), None, "{name}"),
        }
        if c.get("cnp").is_some() {
            assert_eq!(b.opcode, Opcode::Cnp);
            assert!(b.becn);
            assert!(c["scapy_layers"].as_array().unwrap().iter().any(|l| l == "CNPPadding"));
        }
        // scapy's `icrc` field is the big-endian reading of the 4 wire bytes; ours the LE value.
        let scapy_icrc = (u(c, "scapy_icrc") as u32).swap_bytes();
        assert_eq!(roce::icrc_ipv4(&frame[14..]).unwrap(), scapy_icrc, "{name}: ICRC differs from scapy");
        assert_eq!(p.icrc, IcrcStatus::Good(scapy_icrc), "{name}");

        // Our builder produces scapy's exact bytes from the same fields.
        let mut h = Repr::new(bth::Repr {
            opcode: b.opcode,
            solicited: u(c, "se") == 1,
            migreq: u(c, "m") == 1,
            pad_count: 0,
            tver: 0,
            pkey: u(c, "pkey") as u16,
            fecn: false,
            becn: c.get("cnp").is_some(),
            dest_qp: u(c, "qp") as u32,
            ack_req: u(c, "a") == 1,
            psn: u(c, "psn") as u32,
        });
        h.reth = p.headers.reth;
        h.aeth = p.headers.aeth.map(|a| aeth::Repr { syndrome: a.syndrome, msn: a.msn });
        let src = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1));
        let dst = IpAddr::V4(Ipv4Addr::new(192, 168, 2, 2));
        let mut f = RoceFrame::new([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], src, dst, h, &payload);
        f.dscp = tos >> 2;
        f.ecn = etherparse::IpEcn::try_new(tos & 3).unwrap();
        f.udp_src_port = u(c, "sport") as u16;
        let ours = f.to_vec().unwrap();
        // scapy does not pad to 60 bytes; compare the common length and require zero padding.
        assert_eq!(&ours[..frame.len().min(ours.len())], &frame[..frame.len().min(ours.len())], "{name}: bytes differ");
        assert!(ours[frame.len().min(ours.len())..].iter().all(|&x| x == 0), "{name}");

        // A flipped byte inside the ICRC-covered part -> Bad with scapy's value as `found`.
        let mut bad = frame.clone();
        let i = bad.len() - 5;
        bad[i] ^= 0x40;
        match ParsedFrame::parse(&bad).unwrap_or_else(|e| panic!("{name}: {e}")).icrc {
            IcrcStatus::Bad { expected, found } => {
                assert_eq!(found, scapy_icrc, "{name}");
                assert_ne!(expected, found, "{name}");
            }
            s => panic!("{name}: flipped byte not detected ({s:?})"),
        }
    }
}

#[test]
fn scapy_parses_our_frames_and_agrees_on_icrc() {
    let src = IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1));
    let dst = IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1));
    let m1 = [2, 0, 0, 0, 0, 0x11];
    let m2 = [2, 0, 0, 0, 0, 0x22];
    let mut frames = Vec::new();
    let mut w = Repr::new(bth::Repr::new(Opcode::WriteOnly, 0x4567, 0x123456));
    w.reth = Some(reth::Repr { va: 0x7f00_0000_1000, r_key: 0x1234, dma_len: 1000 });
    let payload: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    frames.push(RoceFrame::new(m1, m2, src, dst, w, &payload).to_vec().unwrap());
    let mut a = Repr::new(bth::Repr::new(Opcode::Acknowledge, 0x4567, 0x123456));
    a.aeth = Some(aeth::Repr { syndrome: aeth::Syndrome::Nak(aeth::NakCode::PsnSequenceError), msn: 9 });
    frames.push(RoceFrame::new(m2, m1, dst, src, a, &[]).to_vec().unwrap());
    frames.push(roce::cnp(m2, m1, dst, src, 0x4567).to_vec().unwrap());
    let input: String = frames.iter().map(|f| f.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n").collect();
    let out = run_python(CHECK, &input);
    let views: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(views.len(), 3);
    let expect = [(0x0a, 0x4567, 0x123456), (0x11, 0x4567, 0x123456), (0x81, 0x4567, 0)];
    for ((v, e), f) in views.iter().zip(expect).zip(&frames) {
        assert_eq!((u(v, "opcode"), u(v, "dqpn"), u(v, "psn")), e);
        assert_eq!(u(v, "stored"), u(v, "recomputed"), "scapy disagrees with our ICRC: {v}");
        let ours = roce::icrc_ipv4(&f[14..]).unwrap();
        assert_eq!(u(v, "stored") as u32, ours.swap_bytes());
    }
    assert_eq!(views[1]["has_aeth"], true);
    assert_eq!(u(&views[1], "syndrome"), 0x60);
    assert_eq!(u(&views[1], "msn"), 9);
    assert_eq!(views[2]["has_cnp"], true);
    assert_eq!(u(&views[2], "becn"), 1);
}
