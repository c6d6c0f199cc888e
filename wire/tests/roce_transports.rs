//! Every RC / UC / UD opcode and its extension headers (IBTA vol. 1 Tables 37 and 38), and
//! RoCE v1: fixed byte arrays (construct / deconstruct, emit into 0xa5-filled buffers),
//! truncation at every length, header order on the wire, proptest round trips. Fixed frames
//! were built by scapy 2.5 (`scapy.contrib.roce.BTH` with the extension headers packed from
//! the IBTA layouts), which also computed their ICRCs.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rocefab_wire::roce::{
    self, aeth, atomic_ack_eth, atomic_eth, bth, deth, grh, ieth, reth, AnyFrame, Error, Ext, IcrcStatus, Layer,
    Opcode, ParsedFrame, ParsedV1Frame, Repr, RoceFrame, Transport,
};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC2: [u8; 6] = [2, 0, 0, 0, 0, 2];
fn v4(a: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, a))
}

/// UD SEND Only, QP 0x12, PSN 100, DETH Q_Key 0x11111111 SrcQP 5, payload 00..07, DSCP 24
/// ECT(0), UDP source port 0xc123; ICRC bytes fc a5 da da from scapy.
const UD_SEND_ONLY: &str = "02000000000202000000000108004562003c000040004011264d0a0000010a000002c12312b7002800006400ffff000000120000006411111111000000050001020304050607fca5dada";
/// RC CmpSwap, AckReq, AtomicETH va 0x1122334455667788 rkey 0xaabbccdd swap 0x0102030405060708
/// compare 0x1112131415161718; ICRC from scapy.
const COMPARE_SWAP: &str = "02000000000202000000000108004562004800004000401126410a0000010a000002c12312b7003400001300ffff00000012800000641122334455667788aabbccdd0102030405060708111213141516171854cc10de";
/// RC ATOMIC Acknowledge, AETH 0x1f MSN 9, AtomicAckETH 0xdeadbeefcafef00d; ICRC from scapy.
const ATOMIC_ACK: &str = "02000000000202000000000108004562003800004000401126510a0000010a000002c12312b7002400001200ffff00000012000000641f000009deadbeefcafef00d6866fa79";
/// RC SEND Only with Invalidate, IETH R_Key 0x77665544, payload 00..04 + 3 pad bytes; ICRC
/// from scapy.
const SEND_ONLY_INV: &str = "02000000000202000000000108004562003800004000401126510a0000010a000002c12312b7002400001730ffff00000012000000647766554400010203040000001e86e424";

/// IBTA vol. 1 Table 38, written out independently of `Opcode::layout`: opcode, name and the
/// extension headers in wire order.
fn table38() -> Vec<(u8, &'static str, Vec<Ext>)> {
    use Ext::*;
    let mut t = vec![];
    for (base, prefix) in [(0x00u8, ""), (0x20, "uc-")] {
        let ops: &[(u8, &str, Vec<Ext>)] = &[
            (0x00, "send-first", vec![]),
            (0x01, "send-middle", vec![]),
            (0x02, "send-last", vec![]),
            (0x03, "send-last-imm", vec![ImmDt]),
            (0x04, "send-only", vec![]),
            (0x05, "send-only-imm", vec![ImmDt]),
            (0x06, "write-first", vec![Reth]),
            (0x07, "write-middle", vec![]),
            (0x08, "write-last", vec![]),
            (0x09, "write-last-imm", vec![ImmDt]),
            (0x0a, "write-only", vec![Reth]),
            (0x0b, "write-only-imm", vec![Reth, ImmDt]),
        ];
        for (v, n, e) in ops {
            let name: &'static str = Box::leak(format!("{prefix}{n}").into_boxed_str());
            t.push((base + v, name, e.clone()));
        }
    }
    t.extend([
        (0x0c, "read-request", vec![Reth]),
        (0x0d, "read-response-first", vec![Aeth]),
        (0x0e, "read-response-middle", vec![]),
        (0x0f, "read-response-last", vec![Aeth]),
        (0x10, "read-response-only", vec![Aeth]),
        (0x11, "ack", vec![Aeth]),
        (0x12, "atomic-ack", vec![Aeth, AtomicAckEth]),
        (0x13, "compare-swap", vec![AtomicEth]),
        (0x14, "fetch-add", vec![AtomicEth]),
        (0x16, "send-last-inv", vec![Ieth]),
        (0x17, "send-only-inv", vec![Ieth]),
        (0x64, "ud-send-only", vec![Deth]),
        (0x65, "ud-send-only-imm", vec![Deth, ImmDt]),
        (0x81, "cnp", vec![CnpPad]),
    ]);
    t
}

#[test]
fn every_opcode_has_its_name_and_table_38_headers() {
    let t = table38();
    assert_eq!(t.len(), Opcode::ALL.len(), "named opcodes");
    for (v, name, exts) in &t {
        let op = Opcode::from(*v);
        assert!(!matches!(op, Opcode::Unknown(_)), "0x{v:02x} unnamed");
        assert_eq!(u8::from(op), *v);
        assert_eq!(op.name(), *name, "0x{v:02x}");
        assert_eq!(Opcode::from_name(name), Some(op));
        assert_eq!(op.layout().iter().collect::<Vec<_>>(), *exts, "{name}");
        let len: usize = exts.iter().map(|e| e.wire_len()).sum();
        assert_eq!(op.layout().ext_len(), len, "{name}");
        let transport = match v >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            _ => unreachable!(),
        };
        assert_eq!(op.transport(), transport, "{name}");
    }
    // Reserved for RC (RESYNC is RD only), RD, XRC, the UC opcodes IBTA does not allow, vendor.
    for v in [0x15u8, 0x18, 0x1f, 0x2c, 0x2d, 0x30, 0x40, 0x55, 0x60, 0x63, 0x66, 0xa0, 0xe0, 0xff] {
        assert_eq!(Opcode::from(v), Opcode::Unknown(v));
        assert_eq!(Opcode::from(v).layout().ext_len(), 0);
    }
    assert_eq!(Opcode::from(0x55).transport(), Transport::Rd);
    assert_eq!(Opcode::from(0xa0).transport(), Transport::Xrc);
    assert_eq!(Opcode::from(0xe0).transport(), Transport::Vendor);
    assert_eq!(Opcode::UdSendOnlyImm.to_string(), "ud-send-only-imm (0x65)");
}

#[test]
fn deth_construct_deconstruct() {
    let b = [0x11, 0x22, 0x33, 0x44, 0x99, 0x00, 0x00, 0x05, 0xee];
    let p = deth::Packet::new_checked(&b[..]).unwrap();
    assert_eq!((p.q_key(), p.reserved(), p.src_qp()), (0x1122_3344, 0x99, 5));
    let r = deth::Repr::parse(&p).unwrap();
    assert_eq!(r, deth::Repr { q_key: 0x1122_3344, src_qp: 5 });
    let mut buf = [0xa5u8; 9];
    deth::Repr { q_key: 0x8000_0001, src_qp: 0x1ab_cdef }.emit(&mut deth::Packet::new_unchecked(&mut buf[..8]));
    // Reserved byte zeroed, SrcQP masked to 24 bits, nothing written past the header.
    assert_eq!(buf, [0x80, 0, 0, 1, 0, 0xab, 0xcd, 0xef, 0xa5]);
}

#[test]
fn ieth_construct_deconstruct() {
    let p = ieth::Packet::new_checked(&[0xde, 0xad, 0xbe, 0xef][..]).unwrap();
    assert_eq!(ieth::Repr::parse(&p).unwrap(), ieth::Repr { r_key: 0xdead_beef });
    let mut buf = [0xa5u8; 5];
    ieth::Repr { r_key: 0x0102_0304 }.emit(&mut ieth::Packet::new_unchecked(&mut buf[..4]));
    assert_eq!(buf, [1, 2, 3, 4, 0xa5]);
}

#[test]
fn atomic_eth_construct_deconstruct() {
    let b: Vec<u8> = (1..=28).collect();
    let p = atomic_eth::Packet::new_checked(&b[..]).unwrap();
    let r = atomic_eth::Repr::parse(&p).unwrap();
    assert_eq!(
        r,
        atomic_eth::Repr {
            va: 0x0102_0304_0506_0708,
            r_key: 0x090a_0b0c,
            swap_add: 0x0d0e_0f10_1112_1314,
            compare: 0x1516_1718_191a_1b1c,
        }
    );
    let mut buf = [0xa5u8; 29];
    r.emit(&mut atomic_eth::Packet::new_unchecked(&mut buf[..28]));
    assert_eq!(&buf[..28], &b[..]);
    assert_eq!(buf[28], 0xa5);
}

#[test]
fn atomic_ack_eth_construct_deconstruct() {
    let b = [0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe, 0xf0, 0x0d];
    let r = atomic_ack_eth::Repr::parse(&atomic_ack_eth::Packet::new_checked(&b[..]).unwrap()).unwrap();
    assert_eq!(r.orig_remote_data, 0xdead_beef_cafe_f00d);
    let mut buf = [0xa5u8; 9];
    r.emit(&mut atomic_ack_eth::Packet::new_unchecked(&mut buf[..8]));
    assert_eq!(&buf[..8], &b);
    assert_eq!(buf[8], 0xa5);
}

#[test]
fn grh_construct_deconstruct() {
    let mut b = vec![0x6a, 0xb1, 0x23, 0x45, 0x00, 0x20, 0x1b, 0x40];
    b.extend_from_slice(&Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1).octets());
    b.extend_from_slice(&Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2).octets());
    let p = grh::Packet::new_checked(&b[..]).unwrap();
    let r = grh::Repr::parse(&p).unwrap();
    assert_eq!(
        r,
        grh::Repr {
            ip_version: 6,
            traffic_class: 0xab,
            flow_label: 0x12345,
            payload_len: 0x20,
            next_header: 0x1b,
            hop_limit: 64,
            sgid: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),
            dgid: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2),
        }
    );
    let mut buf = [0xa5u8; 41];
    r.emit(&mut grh::Packet::new_unchecked(&mut buf[..40]));
    assert_eq!(&buf[..40], &b[..]);
    assert_eq!(buf[40], 0xa5);
    let mut g = r;
    g.flow_label = 0xfff_ffff;
    g.emit(&mut grh::Packet::new_unchecked(&mut buf[..40]));
    assert_eq!(&buf[..4], &[0x6a, 0xbf, 0xff, 0xff], "flow label masked to 20 bits");
}

#[test]
fn header_views_reject_every_short_length() {
    let big = [0u8; 64];
    for n in 0..64 {
        let b = &big[..n];
        assert_eq!(deth::Packet::new_checked(b).is_ok(), n >= deth::LEN, "DETH {n}");
        assert_eq!(ieth::Packet::new_checked(b).is_ok(), n >= ieth::LEN, "IETH {n}");
        assert_eq!(atomic_eth::Packet::new_checked(b).is_ok(), n >= atomic_eth::LEN, "AtomicETH {n}");
        assert_eq!(atomic_ack_eth::Packet::new_checked(b).is_ok(), n >= atomic_ack_eth::LEN, "AtomicAckETH {n}");
        assert_eq!(grh::Packet::new_checked(b).is_ok(), n >= grh::LEN, "GRH {n}");
    }
    assert_eq!(
        atomic_eth::Packet::new_checked(&big[..27]).unwrap_err(),
        Error::Truncated { layer: Layer::AtomicEth, needed: 28, available: 27 }
    );
    assert_eq!(
        deth::Packet::new_checked(&big[..3]).unwrap_err(),
        Error::Truncated { layer: Layer::Deth, needed: 8, available: 3 }
    );
}

#[test]
fn fixed_ud_send_only() {
    let f = hex(UD_SEND_ONLY);
    let p = ParsedFrame::parse(&f).unwrap();
    assert_eq!(p.bth().opcode, Opcode::UdSendOnly);
    assert_eq!(p.bth().dest_qp, 0x12);
    assert_eq!(p.deth(), Some(&deth::Repr { q_key: 0x1111_1111, src_qp: 5 }));
    assert_eq!((p.reth(), p.aeth(), p.headers.immediate), (None, None, None));
    assert_eq!(p.payload, &[0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(p.icrc, IcrcStatus::Good(u32::from_le_bytes([0xfc, 0xa5, 0xda, 0xda])));
    let mut h = Repr::new(bth::Repr::new(Opcode::UdSendOnly, 0x12, 100));
    h.deth = Some(deth::Repr { q_key: 0x1111_1111, src_qp: 5 });
    let payload = [0u8, 1, 2, 3, 4, 5, 6, 7];
    let mut fr = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &payload);
    fr.udp_src_port = 0xc123;
    let mut buf = [0xa5u8; 128];
    let n = fr.emit(&mut buf).unwrap();
    assert_eq!(&buf[..n], &f[..]);
    assert!(buf[n..].iter().all(|&b| b == 0xa5));
}

#[test]
fn fixed_compare_swap() {
    let f = hex(COMPARE_SWAP);
    let p = ParsedFrame::parse(&f).unwrap();
    assert_eq!(p.bth().opcode, Opcode::CompareSwap);
    assert!(p.bth().ack_req);
    let a = atomic_eth::Repr {
        va: 0x1122_3344_5566_7788,
        r_key: 0xaabb_ccdd,
        swap_add: 0x0102_0304_0506_0708,
        compare: 0x1112_1314_1516_1718,
    };
    assert_eq!(p.atomic_eth(), Some(&a));
    assert!(p.payload.is_empty());
    assert!(p.icrc.is_good());
    let mut h = Repr::new(bth::Repr::new(Opcode::CompareSwap, 0x12, 100));
    h.bth.ack_req = true;
    h.atomic_eth = Some(a);
    let mut fr = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[]);
    fr.udp_src_port = 0xc123;
    assert_eq!(fr.to_vec().unwrap(), f);
}

#[test]
fn fixed_atomic_ack_has_aeth_then_atomic_ack_eth() {
    let f = hex(ATOMIC_ACK);
    let p = ParsedFrame::parse(&f).unwrap();
    assert_eq!(p.bth().opcode, Opcode::AtomicAcknowledge);
    assert_eq!(p.aeth(), Some(&aeth::Repr { syndrome: aeth::Syndrome::Ack { credits: 31 }, msn: 9 }));
    assert_eq!(p.atomic_ack_eth(), Some(&atomic_ack_eth::Repr { orig_remote_data: 0xdead_beef_cafe_f00d }));
    assert!(p.icrc.is_good());
    let ib = roce::Packet::new_checked(&f[42..]).unwrap();
    assert_eq!(ib.header_len(), 12 + 4 + 8);
    let mut h = Repr::new(bth::Repr::new(Opcode::AtomicAcknowledge, 0x12, 100));
    h.aeth = p.headers.aeth;
    h.atomic_ack_eth = p.headers.atomic_ack_eth;
    let mut fr = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[]);
    fr.udp_src_port = 0xc123;
    assert_eq!(fr.to_vec().unwrap(), f);
}

#[test]
fn fixed_send_only_inv() {
    let f = hex(SEND_ONLY_INV);
    let p = ParsedFrame::parse(&f).unwrap();
    assert_eq!(p.bth().opcode, Opcode::SendOnlyInv);
    assert_eq!(p.ieth(), Some(&ieth::Repr { r_key: 0x7766_5544 }));
    assert_eq!(p.bth().pad_count, 3);
    assert_eq!(p.payload, &[0, 1, 2, 3, 4]);
    assert!(p.icrc.is_good());
    let mut h = Repr::new(bth::Repr::new(Opcode::SendOnlyInv, 0x12, 100));
    h.ieth = Some(ieth::Repr { r_key: 0x7766_5544 });
    let mut fr = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[0, 1, 2, 3, 4]);
    fr.udp_src_port = 0xc123;
    assert_eq!(fr.to_vec().unwrap(), f);
}

/// Headers with every extension header the opcode needs, with distinct recognisable values.
fn full_headers(op: Opcode) -> Repr {
    let l = op.layout();
    let mut h = Repr::new(bth::Repr::new(op, 0x00ab_cdef, 0x12_3456));
    h.bth.becn = op == Opcode::Cnp;
    h.deth = l.deth.then_some(deth::Repr { q_key: 0x1111_1111, src_qp: 0x05 });
    h.reth = l.reth.then_some(reth::Repr { va: 0x2222_0000_0000_2222, r_key: 0x2222, dma_len: 64 });
    h.atomic_eth = l.atomic_eth.then_some(atomic_eth::Repr {
        va: 0x3333_0000_0000_3330,
        r_key: 0x3333,
        swap_add: 0x3333_4444,
        compare: 0x3333_5555,
    });
    h.aeth = l.aeth.then_some(aeth::Repr { syndrome: aeth::Syndrome::Ack { credits: 3 }, msn: 0x44 });
    h.atomic_ack_eth = l.atomic_ack_eth.then_some(atomic_ack_eth::Repr { orig_remote_data: 0x5555_6666_7777_8888 });
    h.immediate = l.immdt.then_some(0x6666_6666);
    h.ieth = l.ieth.then_some(ieth::Repr { r_key: 0x7777_7777 });
    h
}

#[test]
fn headers_sit_in_ibta_order() {
    for &op in Opcode::ALL {
        let h = full_headers(op);
        let mut ib = vec![0u8; h.buffer_len(0)];
        h.emit(&mut ib, &[]).unwrap();
        // Walk the bytes by hand in the Table 38 order and compare with the values set above.
        let mut off = 12;
        let mut take = |n: usize| {
            let s = ib[off..off + n].to_vec();
            off += n;
            s
        };
        if h.deth.is_some() {
            assert_eq!(take(8), [0x11, 0x11, 0x11, 0x11, 0, 0, 0, 5], "{op}");
        }
        if h.reth.is_some() {
            assert_eq!(&take(16)[..2], &[0x22, 0x22], "{op}");
        }
        if h.atomic_eth.is_some() {
            assert_eq!(&take(28)[..2], &[0x33, 0x33], "{op}");
        }
        if h.aeth.is_some() {
            assert_eq!(take(4), [3, 0, 0, 0x44], "{op}");
        }
        if h.atomic_ack_eth.is_some() {
            assert_eq!(&take(8)[..2], &[0x55, 0x55], "{op}");
        }
        if h.immediate.is_some() {
            assert_eq!(take(4), [0x66; 4], "{op}");
        }
        if h.ieth.is_some() {
            assert_eq!(take(4), [0x77; 4], "{op}");
        }
        if op == Opcode::Cnp {
            assert_eq!(take(16), [0; 16]);
        }
        assert_eq!(off, h.header_len(), "{op}");
        assert_eq!(roce::Repr::parse(&roce::Packet::new_checked(&ib[..]).unwrap()).unwrap(), h, "{op}");
    }
}

#[test]
fn every_opcode_frame_round_trips_and_every_truncation_errors() {
    for &op in Opcode::ALL {
        let h = full_headers(op);
        let payload: Vec<u8> = if op == Opcode::Cnp { vec![] } else { (0..13).collect() };
        for (s, d) in
            [(v4(1), v4(2)), (IpAddr::V6(Ipv6Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)))]
        {
            let f = RoceFrame::new(MAC1, MAC2, s, d, h, &payload).to_vec().unwrap();
            let p = ParsedFrame::parse(&f).unwrap_or_else(|e| panic!("{op}: {e}"));
            let mut expect = h;
            expect.bth.pad_count = roce::pad_for(payload.len());
            assert_eq!(p.headers, expect, "{op}");
            assert_eq!(p.payload, &payload[..], "{op}");
            assert!(p.icrc.is_good(), "{op}");
            assert_eq!(AnyFrame::parse(&f).unwrap(), AnyFrame::V2(p.clone()));
            // The IP packet ends with the ICRC; Ethernet padding may follow a short frame.
            let ip_end = if s.is_ipv4() { 14 + usize::from(u16::from_be_bytes([f[16], f[17]])) } else { f.len() };
            for n in 0..ip_end {
                assert!(ParsedFrame::parse(&f[..n]).is_err(), "{op}: {n} bytes parsed");
            }
            // Transport part alone: every cut inside the headers names the header.
            let ib_start = if s.is_ipv4() { 42 } else { 62 };
            let ib = &f[ib_start..ip_end];
            let hl = h.header_len();
            for n in 0..hl {
                match roce::Packet::new_checked(&ib[..n]) {
                    Err(Error::Truncated { layer, .. }) => {
                        let want = if n < 12 {
                            Layer::Bth
                        } else {
                            op.layout()
                                .iter()
                                .find(|e| op.layout().offset(*e).unwrap() + e.wire_len() > n)
                                .unwrap()
                                .layer()
                        };
                        assert_eq!(layer, want, "{op}: cut at {n}");
                    }
                    r => panic!("{op}: cut at {n}: {r:?}"),
                }
                assert!(Repr::parse_headers(&ib[..n]).is_err());
            }
            assert_eq!(Repr::parse_headers(&ib[..hl]).unwrap(), (expect, hl));
        }
    }
}

#[test]
fn missing_or_extra_headers_are_layout_errors() {
    let mut h = Repr::new(bth::Repr::new(Opcode::UdSendOnly, 1, 1));
    let f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[]);
    assert_eq!(f.to_vec(), Err(Error::Layout { opcode: Opcode::UdSendOnly, what: "a DETH" }));
    h.deth = Some(deth::Repr::default());
    h.ieth = Some(ieth::Repr::default());
    let f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[]);
    assert_eq!(f.to_vec(), Err(Error::Layout { opcode: Opcode::UdSendOnly, what: "no IETH" }));
    let mut a = Repr::new(bth::Repr::new(Opcode::AtomicAcknowledge, 1, 1));
    a.aeth = Some(aeth::Repr { syndrome: aeth::Syndrome::Ack { credits: 0 }, msn: 0 });
    assert_eq!(a.check_layout(), Err(Error::Layout { opcode: Opcode::AtomicAcknowledge, what: "an AtomicAckETH" }));
    let mut c = Repr::new(bth::Repr::new(Opcode::FetchAdd, 1, 1));
    assert_eq!(c.check_layout(), Err(Error::Layout { opcode: Opcode::FetchAdd, what: "an AtomicETH" }));
    c.atomic_eth = Some(atomic_eth::Repr::default());
    assert_eq!(c.check_layout(), Ok(()));
}

// ---- RoCE v1 ----

fn gid(n: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0200, 0, 0, n)
}

/// A RoCE v1 frame built by hand: Ethernet 0x8915 (optionally behind an 802.1Q tag), GRH,
/// the InfiniBand part with `icrc` as its last 4 bytes.
fn v1_frame(h: &Repr, payload: &[u8], icrc: u32, vlan: Option<u16>) -> Vec<u8> {
    let mut h = *h;
    h.bth.pad_count = roce::pad_for(payload.len());
    let ib_len = h.buffer_len(payload.len());
    let mut f = Vec::new();
    f.extend_from_slice(&MAC2);
    f.extend_from_slice(&MAC1);
    if let Some(tci) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&roce::ETHERTYPE_ROCE_V1.to_be_bytes());
    let mut g = grh::Repr::new(gid(1), gid(2), ib_len as u16);
    g.traffic_class = 0x60;
    g.flow_label = 0xabcde;
    g.hop_limit = 1;
    let at = f.len();
    f.resize(at + grh::LEN + ib_len, 0);
    g.emit(&mut grh::Packet::new_unchecked(&mut f[at..at + grh::LEN]));
    h.emit(&mut f[at + grh::LEN..], payload).unwrap();
    let n = f.len();
    f[n - 4..].copy_from_slice(&icrc.to_le_bytes());
    f
}

#[test]
fn roce_v1_frames_parse() {
    for &op in Opcode::ALL {
        if op == Opcode::Cnp {
            continue;
        }
        let h = full_headers(op);
        let payload: Vec<u8> = (0..7).collect();
        for vlan in [None, Some(0x6065u16)] {
            let f = v1_frame(&h, &payload, 0x1234_5678, vlan);
            let p = ParsedV1Frame::parse(&f).unwrap_or_else(|e| panic!("{op}: {e}"));
            assert_eq!(p.headers.bth.opcode, op);
            let mut expect = h;
            expect.bth.pad_count = 1;
            assert_eq!(p.headers, expect, "{op}");
            assert_eq!(p.payload, &payload[..]);
            assert_eq!((p.src_mac, p.dst_mac), (MAC1, MAC2));
            assert_eq!(p.vlan, vlan.map(|_| (3, 0x065)));
            assert_eq!(
                (p.grh.sgid, p.grh.dgid, p.grh.traffic_class, p.grh.flow_label),
                (gid(1), gid(2), 0x60, 0xabcde)
            );
            assert_eq!(p.icrc, IcrcStatus::NotChecked { stored: 0x1234_5678 });
            assert_eq!(p.icrc.to_string(), "not checked (RoCE v1)");
            assert_eq!(AnyFrame::parse(&f).unwrap(), AnyFrame::V1(p.clone()));
            // Trailing bytes after PayLen (padding, FCS) are ignored.
            let mut padded = f.clone();
            padded.extend_from_slice(&[0; 6]);
            assert_eq!(ParsedV1Frame::parse(&padded).unwrap(), p);
            // A v1 frame is not RoCEv2, and the v1 parser refuses RoCEv2.
            assert!(ParsedFrame::parse(&f).is_err());
            for n in 0..f.len() {
                assert!(ParsedV1Frame::parse(&f[..n]).is_err(), "{op}: {n} bytes parsed");
                assert!(AnyFrame::parse(&f[..n]).is_err(), "{op}: {n} bytes parsed");
            }
        }
    }
    let v2 = hex(UD_SEND_ONLY);
    assert_eq!(ParsedV1Frame::parse(&v2).unwrap_err(), Error::NotRoceV1(0x0800));
}

#[test]
fn roce_v1_errors_name_the_layer() {
    let h = full_headers(Opcode::WriteOnly);
    let f = v1_frame(&h, &[1, 2, 3, 4], 0, None);
    assert_eq!(
        ParsedV1Frame::parse(&f[..14 + 20]).unwrap_err(),
        Error::Truncated { layer: Layer::Grh, needed: 40, available: 20 }
    );
    // GRH whole, PayLen says more than the frame holds.
    assert!(matches!(ParsedV1Frame::parse(&f[..f.len() - 1]), Err(Error::Truncated { layer: Layer::Grh, .. })));
    // PayLen consistent but cut inside the RETH.
    let mut g = f[..14 + 40 + 12 + 8].to_vec();
    g[14 + 4..14 + 6].copy_from_slice(&20u16.to_be_bytes());
    assert_eq!(
        ParsedV1Frame::parse(&g).unwrap_err(),
        Error::Truncated { layer: Layer::Reth, needed: 16, available: 8 }
    );
    let mut n = f.clone();
    n[14 + 6] = 0x11;
    assert_eq!(ParsedV1Frame::parse(&n).unwrap_err(), Error::GrhNextHeader(0x11));
}

#[test]
fn roce_v1_captured_cut_by_snaplen() {
    let h = full_headers(Opcode::UdSendOnly);
    let payload: Vec<u8> = (0..100).collect();
    let f = v1_frame(&h, &payload, 0xabcd, None);
    let hdrs = 14 + 40 + 12 + 8;
    for n in hdrs..f.len() {
        let p = ParsedV1Frame::parse_captured(&f[..n], f.len()).unwrap_or_else(|e| panic!("cut at {n}: {e}"));
        assert_eq!(p.headers.deth, h.deth);
        assert_eq!(p.payload_len, 100);
        assert_eq!(p.payload, &payload[..(n - hdrs).min(100)]);
        assert_eq!(p.icrc, IcrcStatus::NotCaptured { captured: n, orig_len: f.len() });
        assert!(matches!(AnyFrame::parse_captured(&f[..n], f.len()), Ok(AnyFrame::V1(_))));
    }
    for n in 14 + 40..hdrs {
        assert!(ParsedV1Frame::parse_captured(&f[..n], f.len()).is_err(), "cut at {n}");
    }
    assert_eq!(ParsedV1Frame::parse_captured(&f, f.len()).unwrap().icrc, IcrcStatus::NotChecked { stored: 0xabcd });
}

fn arb_grh() -> impl Strategy<Value = grh::Repr> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u32>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
    )
        .prop_map(|(v, tc, fl, len, nh, hl, s, d)| grh::Repr {
            ip_version: v & 0xf,
            traffic_class: tc,
            flow_label: fl & 0xfffff,
            payload_len: len,
            next_header: nh,
            hop_limit: hl,
            sgid: Ipv6Addr::from(s),
            dgid: Ipv6Addr::from(d),
        })
}

proptest! {
    #[test]
    fn deth_round_trip(q: u32, s in 0u32..0x100_0000) {
        let r = deth::Repr { q_key: q, src_qp: s };
        let mut b = [0xa5u8; 8];
        r.emit(&mut deth::Packet::new_unchecked(&mut b[..]));
        prop_assert_eq!(deth::Repr::parse(&deth::Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn atomic_eth_round_trip(va: u64, rk: u32, sw: u64, cmp: u64) {
        let r = atomic_eth::Repr { va, r_key: rk, swap_add: sw, compare: cmp };
        let mut b = [0xa5u8; 28];
        r.emit(&mut atomic_eth::Packet::new_unchecked(&mut b[..]));
        prop_assert_eq!(atomic_eth::Repr::parse(&atomic_eth::Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn atomic_ack_eth_and_ieth_round_trip(o: u64, rk: u32) {
        let a = atomic_ack_eth::Repr { orig_remote_data: o };
        let mut b = [0xa5u8; 8];
        a.emit(&mut atomic_ack_eth::Packet::new_unchecked(&mut b[..]));
        prop_assert_eq!(atomic_ack_eth::Repr::parse(&atomic_ack_eth::Packet::new_checked(&b[..]).unwrap()).unwrap(), a);
        let i = ieth::Repr { r_key: rk };
        let mut c = [0xa5u8; 4];
        i.emit(&mut ieth::Packet::new_unchecked(&mut c[..]));
        prop_assert_eq!(ieth::Repr::parse(&ieth::Packet::new_checked(&c[..]).unwrap()).unwrap(), i);
    }

    #[test]
    fn grh_round_trip(g in arb_grh()) {
        let mut b = [0xa5u8; 40];
        g.emit(&mut grh::Packet::new_unchecked(&mut b[..]));
        prop_assert_eq!(grh::Repr::parse(&grh::Packet::new_checked(&b[..]).unwrap()).unwrap(), g);
    }

    #[test]
    fn deth_bytes_round_trip_except_reserved(bytes: [u8; 8]) {
        let r = deth::Repr::parse(&deth::Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 8];
        r.emit(&mut deth::Packet::new_unchecked(&mut out[..]));
        let mut expect = bytes;
        expect[4] = 0;
        prop_assert_eq!(out, expect);
    }

    #[test]
    fn named_opcode_frames_round_trip(i in 0usize..1000, payload in proptest::collection::vec(any::<u8>(), 0..64), qkey: u32, sw: u64) {
        let op = Opcode::ALL[i % Opcode::ALL.len()];
        let mut h = full_headers(op);
        if let Some(d) = &mut h.deth { d.q_key = qkey; }
        if let Some(a) = &mut h.atomic_eth { a.swap_add = sw; }
        let payload = if op == Opcode::Cnp { vec![] } else { payload };
        let f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &payload).to_vec().unwrap();
        let p = ParsedFrame::parse(&f).unwrap();
        let mut expect = h;
        expect.bth.pad_count = roce::pad_for(payload.len());
        prop_assert_eq!(p.headers, expect);
        prop_assert_eq!(p.payload, &payload[..]);
        prop_assert!(p.icrc.is_good());
        if op != Opcode::Cnp {
            let v1 = v1_frame(&h, &payload, 7, None);
            let q = ParsedV1Frame::parse(&v1).unwrap();
            prop_assert_eq!(q.headers, expect);
            prop_assert_eq!(q.payload, &payload[..]);
        }
    }

    #[test]
    fn v1_parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..160), cut in 0usize..160) {
        let mut d = data;
        if d.len() > 14 {
            d[12] = 0x89;
            d[13] = 0x15;
        }
        let _ = ParsedV1Frame::parse(&d);
        let _ = AnyFrame::parse(&d);
        let orig = d.len() + cut;
        let _ = ParsedV1Frame::parse_captured(&d, orig);
        let _ = AnyFrame::parse_captured(&d, orig);
    }
}
