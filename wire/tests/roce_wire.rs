//! RoCEv2 wire format: fixed byte arrays (construct / deconstruct, emit into 0xa5-filled
//! buffers), truncation at every length, 24-bit masking, proptest round trips.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rocefab_wire::roce::{
    self, aeth, atomic_ack_eth, atomic_eth, bth, cnp, deth, icrc, ieth, reth, Error, IcrcStatus, Layer, Opcode,
    ParsedFrame, Repr, RoceFrame,
};

/// RC RDMA WRITE Only, QP 0x12, PSN 100, AckReq, RETH va 0x1122334455667788 rkey 0xaabbccdd
/// len 256, 8 payload bytes 00..07, DSCP 24 ECT(0); ICRC 0x420c9944 (bytes 44 99 0c 42) as
/// computed by scapy 2.5 `scapy.contrib.roce.BTH` for this packet.
const WRITE_ONLY: &str = "02000000000202000000000108004562004400004000401126450a0000010a000002c12312b7003000000a00ffff00000012800000641122334455667788aabbccdd00000100000102030405060744990c42";
/// RC Acknowledge, QP 0x12, PSN 100, AETH syndrome 0x60 (NAK PSN sequence error) MSN 5;
/// ICRC bytes 8e c5 75 a4 from scapy.
const ACK_NAK: &str = "02000000000202000000000108004562003000004000401126590a0000010a000002c12312b7001c00001100ffff0000001200000064600000058ec575a4";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC2: [u8; 6] = [2, 0, 0, 0, 0, 2];
fn v4(a: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, a))
}

#[test]
fn bth_deconstruct() {
    let b = [0x0a, 0xb5, 0x12, 0x34, 0xc0, 0xab, 0xcd, 0xef, 0x80, 0x01, 0x02, 0x03, 0x99];
    let p = bth::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.opcode(), Opcode::WriteOnly);
    assert!(p.solicited());
    assert!(!p.migreq());
    assert_eq!(p.pad_count(), 3);
    assert_eq!(p.tver(), 5);
    assert_eq!(p.pkey(), 0x1234);
    assert!(p.fecn() && p.becn());
    assert_eq!(p.dest_qp(), 0xabcdef);
    assert!(p.ack_req());
    assert_eq!(p.psn(), 0x010203);
    assert_eq!(p.payload(), &[0x99]);
}

#[test]
fn bth_construct_into_a5() {
    let mut buf = [0xa5u8; 12];
    let mut r = bth::Repr::new(Opcode::WriteFirst, 0x123456, 0xfedcba);
    r.solicited = true;
    r.pad_count = 2;
    r.pkey = 0x8001;
    r.becn = true;
    r.ack_req = true;
    r.emit(&mut bth::Packet::new_unchecked(&mut buf[..]));
    assert_eq!(buf, [0x06, 0xa0, 0x80, 0x01, 0x40, 0x12, 0x34, 0x56, 0x80, 0xfe, 0xdc, 0xba]);
    assert_eq!(bth::Repr::parse(&bth::Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
}

#[test]
fn bth_24_bit_masking() {
    let mut buf = [0xa5u8; 12];
    let mut p = bth::Packet::new_unchecked(&mut buf[..]);
    p.set_dest_qp(0xff12_3456);
    p.set_psn(0x0100_0000 | 7);
    // The byte before DestQP and the AckReq byte are untouched by the 24-bit setters.
    assert_eq!(buf[4], 0xa5);
    assert_eq!(&buf[5..8], &[0x12, 0x34, 0x56]);
    assert_eq!(buf[8], 0xa5);
    assert_eq!(&buf[9..12], &[0, 0, 7]);
    let r = bth::Repr::new(Opcode::SendOnly, 0x1ff_ffff, 0x0100_0001);
    assert_eq!((r.dest_qp, r.psn), (0xff_ffff, 1));
    let mut a = [0xa5u8; 4];
    aeth::Packet::new_unchecked(&mut a[..]).set_msn(0xaabb_ccdd);
    assert_eq!(a, [0xa5, 0xbb, 0xcc, 0xdd]);
}

#[test]
fn reth_construct_deconstruct() {
    let r = reth::Repr { va: 0x0102_0304_0506_0708, r_key: 0x0a0b_0c0d, dma_len: 0x1000 };
    let mut buf = [0xa5u8; 16];
    r.emit(&mut reth::Packet::new_unchecked(&mut buf[..]));
    assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8, 0xa, 0xb, 0xc, 0xd, 0, 0, 0x10, 0]);
    assert_eq!(reth::Repr::parse(&reth::Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
}

#[test]
fn aeth_syndromes() {
    use aeth::{NakCode, Syndrome};
    let cases = [
        (0x00, Syndrome::Ack { credits: 0 }),
        (0x1f, Syndrome::Ack { credits: 31 }),
        (0x2e, Syndrome::RnrNak { timer: 14 }),
        (0x60, Syndrome::Nak(NakCode::PsnSequenceError)),
        (0x61, Syndrome::Nak(NakCode::InvalidRequest)),
        (0x62, Syndrome::Nak(NakCode::RemoteAccessError)),
        (0x63, Syndrome::Nak(NakCode::RemoteOperationalError)),
        (0x64, Syndrome::Nak(NakCode::InvalidRdRequest)),
        (0x67, Syndrome::Nak(NakCode::Unknown(7))),
        (0x45, Syndrome::Reserved(0x45)),
        (0x80, Syndrome::Reserved(0x80)),
    ];
    for (byte, s) in cases {
        assert_eq!(Syndrome::from(byte), s, "byte 0x{byte:02x}");
        assert_eq!(u8::from(s), byte);
        let mut buf = [0xa5u8; 4];
        aeth::Repr { syndrome: s, msn: 0x10203 }.emit(&mut aeth::Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [byte, 1, 2, 3]);
    }
}

#[test]
fn opcode_values_and_names() {
    for &op in Opcode::ALL {
        let v = u8::from(op);
        assert_eq!(Opcode::from(v), op);
        assert_eq!(Opcode::from_name(op.name()), Some(op));
        assert_eq!(Opcode::from_name(&format!("0x{v:02x}")), Some(op));
    }
    assert_eq!(u8::from(Opcode::WriteOnly), 0x0a);
    assert_eq!(u8::from(Opcode::Acknowledge), 0x11);
    assert_eq!(u8::from(Opcode::Cnp), 0x81);
    assert_eq!(Opcode::from(0x64), Opcode::UdSendOnly);
    assert_eq!(Opcode::from(0x15), Opcode::Unknown(0x15));
    assert_eq!(Opcode::from(0x44), Opcode::Unknown(0x44));
    assert_eq!(Opcode::from_name("bogus"), None);
    assert!(Opcode::WriteFirst.layout().reth && !Opcode::WriteMiddle.layout().reth);
    assert!(Opcode::Acknowledge.layout().aeth);
    assert_eq!(Opcode::WriteOnlyImm.layout().ext_len(), 20);
    assert_eq!(Opcode::Cnp.layout().ext_len(), 16);
}

#[test]
fn parse_fixed_write_only() {
    let f = hex(WRITE_ONLY);
    let p = ParsedFrame::parse(&f).unwrap();
    assert_eq!(p.src_mac, MAC1);
    assert_eq!(p.dst_mac, MAC2);
    assert_eq!(p.ip.src, v4(1));
    assert_eq!(p.ip.dscp, 24);
    assert_eq!(p.ip.ecn, etherparse::IpEcn::Ect0);
    assert_eq!((p.udp_src_port, p.udp_dst_port), (0xc123, 4791));
    let b = p.bth();
    assert_eq!((b.opcode, b.dest_qp, b.psn, b.pkey, b.ack_req), (Opcode::WriteOnly, 0x12, 100, 0xffff, true));
    assert_eq!(p.reth(), Some(&reth::Repr { va: 0x1122_3344_5566_7788, r_key: 0xaabb_ccdd, dma_len: 256 }));
    assert_eq!(p.aeth(), None);
    assert_eq!(p.payload, &[0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(p.icrc, IcrcStatus::Good(0x420c_9944));
}

#[test]
fn construct_matches_fixed_write_only() {
    let mut h = Repr::new(bth::Repr::new(Opcode::WriteOnly, 0x12, 100));
    h.bth.ack_req = true;
    h.reth = Some(reth::Repr { va: 0x1122_3344_5566_7788, r_key: 0xaabb_ccdd, dma_len: 256 });
    let payload = [0u8, 1, 2, 3, 4, 5, 6, 7];
    let mut f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &payload);
    f.udp_src_port = 0xc123;
    let mut buf = [0xa5u8; 128];
    let n = f.emit(&mut buf).unwrap();
    assert_eq!(&buf[..n], &hex(WRITE_ONLY)[..]);
    assert!(buf[n..].iter().all(|&b| b == 0xa5), "emit wrote past the frame");
}

#[test]
fn parse_and_construct_fixed_ack() {
    let f = hex(ACK_NAK);
    let p = ParsedFrame::parse(&f).unwrap();
    assert_eq!(p.bth().opcode, Opcode::Acknowledge);
    assert_eq!(p.aeth(), Some(&aeth::Repr { syndrome: aeth::Syndrome::Nak(aeth::NakCode::PsnSequenceError), msn: 5 }));
    assert!(p.payload.is_empty());
    assert!(p.icrc.is_good());
    let mut h = Repr::new(bth::Repr::new(Opcode::Acknowledge, 0x12, 100));
    h.aeth = Some(aeth::Repr { syndrome: aeth::Syndrome::Nak(aeth::NakCode::PsnSequenceError), msn: 5 });
    let mut fr = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[]);
    fr.udp_src_port = 0xc123;
    assert_eq!(fr.to_vec().unwrap(), f);
}

#[test]
fn icrc_bad_reports_expected_and_found() {
    let mut f = hex(WRITE_ONLY);
    let n = f.len();
    f[n - 6] ^= 0x01; // a payload byte
    let p = ParsedFrame::parse(&f).unwrap();
    match p.icrc {
        IcrcStatus::Bad { expected, found } => {
            assert_eq!(found, 0x420c_9944);
            assert_ne!(expected, found);
        }
        s => panic!("flipped payload byte not detected: {s:?}"),
    }
}

#[test]
fn icrc_ignores_variant_fields() {
    // A switch rewriting DSCP/ECN/TTL (and the IPv4 checksum) and the UDP checksum keeps the ICRC.
    let mut f = hex(WRITE_ONLY);
    f[15] = 0x03; // ToS: DSCP 0, CE
    f[22] = 1; // TTL
    f[24] = 0x12; // checksum
    f[40] = 0xde; // UDP checksum
    f[46] = 0xc0; // BTH FECN/BECN byte
    assert!(ParsedFrame::parse(&f).unwrap().icrc.is_good());
    // ... but not one rewriting an invariant field such as the destination address.
    let mut g = hex(WRITE_ONLY);
    g[33] ^= 1;
    assert!(!ParsedFrame::parse(&g).unwrap().icrc.is_good());
}

#[test]
fn icrc_functions_on_ip_packet() {
    let f = hex(WRITE_ONLY);
    assert_eq!(roce::icrc_ipv4(&f[14..]).unwrap(), 0x420c_9944);
    assert_eq!(roce::verify(&f[14..]).unwrap(), IcrcStatus::Good(0x420c_9944));
    assert!(matches!(roce::icrc_ipv6(&f[14..]), Err(Error::IpVersion(4))));
    for n in 0..f.len() - 14 {
        assert!(roce::icrc_ipv4(&f[14..14 + n]).is_err() || n >= 20 + 8 + 12 + 4, "len {n}");
    }
}

#[test]
fn ipv6_round_trip_and_mask() {
    let h = {
        let mut h = Repr::new(bth::Repr::new(Opcode::WriteFirst, 0x77, 3));
        h.reth = Some(reth::Repr { va: 0x1000, r_key: 9, dma_len: 4096 });
        h
    };
    let payload = [7u8; 13];
    let s = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
    let d = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
    let mut fr = RoceFrame::new(MAC1, MAC2, s, d, h, &payload);
    fr.flow_label = 0xabcde;
    let mut v = fr.to_vec().unwrap();
    let p = ParsedFrame::parse(&v).unwrap();
    assert_eq!(p.ip.src, s);
    assert_eq!(p.ip.dscp, 24);
    assert_eq!(p.bth().pad_count, 3);
    assert_eq!(p.payload, &payload);
    assert!(p.icrc.is_good());
    assert_ne!(p.udp_checksum, 0, "IPv6 UDP checksum must be computed");
    let good = match p.icrc {
        IcrcStatus::Good(v) => v,
        _ => unreachable!(),
    };
    // Traffic class, flow label and hop limit are masked.
    v[14] = 0x6f;
    v[15] = 0x12;
    v[21] = 1;
    assert_eq!(ParsedFrame::parse(&v).unwrap().icrc, IcrcStatus::Good(good));
    // Payload length is not.
    v[14 + 40 + 8 + 12 + 16] ^= 0x80;
    assert!(!ParsedFrame::parse(&v).unwrap().icrc.is_good());
}

#[test]
fn cnp_frame() {
    let f = cnp(MAC1, MAC2, v4(2), v4(1), 0xabcdef).to_vec().unwrap();
    // 14 + 20 + 8 + 12 + 16 + 4
    assert_eq!(f.len(), 74);
    let p = ParsedFrame::parse(&f).unwrap();
    assert_eq!(p.ip.dscp, 48);
    assert_eq!(p.bth().opcode, Opcode::Cnp);
    assert!(p.bth().becn);
    assert_eq!(p.bth().dest_qp, 0xabcdef);
    assert!(f[54..70].iter().all(|&b| b == 0));
    assert!(p.icrc.is_good());
}

#[test]
fn short_frame_padded_to_60_and_padding_ignored() {
    let h = Repr::new(bth::Repr::new(Opcode::SendOnly, 1, 1));
    let f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[]).to_vec().unwrap();
    assert_eq!(f.len(), 60);
    let p = ParsedFrame::parse(&f).unwrap();
    assert!(p.icrc.is_good());
    assert!(p.payload.is_empty());
}

#[test]
fn every_truncation_is_an_error() {
    for fixed in [WRITE_ONLY, ACK_NAK] {
        let f = hex(fixed);
        for n in 0..f.len() {
            assert!(ParsedFrame::parse(&f[..n]).is_err(), "{n} bytes of {fixed} parsed");
        }
    }
    // Transport part alone.
    let f = hex(WRITE_ONLY);
    let ib = &f[42..];
    for n in 0..ib.len() {
        let e = roce::Packet::new_checked(&ib[..n]);
        if n < 12 + 16 + 4 {
            assert!(e.is_err(), "{n}");
        }
    }
    assert_eq!(
        roce::Packet::new_checked(&ib[..20]).unwrap_err(),
        Error::Truncated { layer: Layer::Reth, needed: 16, available: 8 }
    );
    assert_eq!(
        roce::Packet::new_checked(&ib[..5]).unwrap_err(),
        Error::Truncated { layer: Layer::Bth, needed: 12, available: 5 }
    );
}

#[test]
fn truncated_transport_inside_valid_ip_names_the_layer() {
    // UDP/IP lengths consistent, but the RoCE part stops inside the AETH.
    let h = Repr::new(bth::Repr::new(Opcode::SendOnly, 1, 1));
    let mut f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[1, 2]).to_vec().unwrap();
    f[42] = 0x11; // now an ACK: needs AETH (4) + ICRC (4) after the BTH; has 2 + pad 2 + 4
    f[43] &= !0x30; // pad 0
    let p = ParsedFrame::parse(&f).unwrap();
    assert_eq!(p.aeth().map(|a| a.msn), Some(0x020000));
    f[42] = 0x0a; // WRITE Only: RETH needs 16, only 8 left
    assert_eq!(ParsedFrame::parse(&f).unwrap_err(), Error::Truncated { layer: Layer::Reth, needed: 16, available: 8 });
}

#[test]
fn pad_count_larger_than_payload_is_an_error() {
    let h = Repr::new(bth::Repr::new(Opcode::SendOnly, 1, 1));
    let f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[9]).to_vec().unwrap();
    assert_eq!(ParsedFrame::parse(&f).unwrap().payload, &[9]);
    // 1 byte payload + 3 pad = 4 data bytes.
    let mut g = f.clone();
    // Make the UDP/IP lengths say 3 fewer bytes of data: pad 3 > 1 data byte.
    g[17] -= 3; // IPv4 total length (low byte)
    g[39] -= 3; // UDP length (low byte)
    g.drain(42 + 12 + 1..42 + 12 + 4);
    assert_eq!(ParsedFrame::parse(&g).unwrap_err(), Error::PadCount { pad: 3, available: 1 });
}

#[test]
fn layout_mismatch_is_an_error() {
    let h = Repr::new(bth::Repr::new(Opcode::WriteOnly, 1, 1));
    let f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), h, &[]);
    assert!(matches!(f.to_vec(), Err(Error::Layout { opcode: Opcode::WriteOnly, .. })));
    let f = RoceFrame::new(
        MAC1,
        MAC2,
        v4(1),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        Repr::new(bth::Repr::new(Opcode::SendOnly, 1, 1)),
        &[],
    );
    assert_eq!(f.to_vec(), Err(Error::MixedFamilies));
}

#[test]
fn not_roce_errors() {
    let mut f = hex(WRITE_ONLY);
    f[37] = 0xb8; // UDP destination port 4791 -> 4792
    assert_eq!(ParsedFrame::parse(&f).unwrap_err(), Error::NotRocePort(4792));
    let mut g = hex(WRITE_ONLY);
    g[12] = 0x88;
    g[13] = 0x08;
    assert_eq!(ParsedFrame::parse(&g).unwrap_err(), Error::NotIp(0x8808));
}

#[test]
fn udp_src_port_entropy() {
    // Known values of rdma_flow_label_to_udp_sport(rdma_calc_flow_label(l, r)).
    assert_eq!(roce::udp_src_port_for_qp(0, 5), 0xc000);
    let p = roce::udp_src_port_for_qp(0x12, 0x34);
    assert!(p >= 0xc000);
    assert_eq!(p, 0xc000 | (0x12 * 0x34));
    assert_ne!(roce::udp_src_port_for_qp(0x12, 0x35), p);
}

#[test]
fn icrc_fill_then_verify() {
    let mut f = hex(ACK_NAK);
    let n = f.len();
    f[n - 4..].fill(0);
    let v = icrc::fill(&mut f[14..]).unwrap();
    assert_eq!(&f[n - 4..], &[0x8e, 0xc5, 0x75, 0xa4]);
    assert_eq!(v, 0xa475_c58e);
}

fn arb_opcode() -> impl Strategy<Value = Opcode> {
    any::<u8>().prop_map(Opcode::from)
}

fn arb_repr() -> impl Strategy<Value = Repr> {
    (
        (arb_opcode(), any::<[bool; 6]>(), any::<u8>(), any::<u16>(), any::<u32>(), any::<u32>()),
        (any::<(u64, u32, u32)>(), any::<u8>(), any::<u32>(), any::<u32>()),
        (any::<(u32, u32)>(), any::<(u64, u32, u64, u64)>(), any::<u64>(), any::<u32>()),
    )
        .prop_map(
            |(
                (op, fl, tver, pkey, qp, psn),
                ((va, rk, dl), syn, msn, imm),
                ((qkey, sqp), (ava, ark, swap, cmp), orig, inv),
            )| {
                let mut b = bth::Repr::new(op, qp, psn);
                b.solicited = fl[0];
                b.migreq = fl[1];
                b.fecn = fl[2];
                b.becn = fl[3];
                b.ack_req = fl[4];
                b.tver = tver & 0xf;
                b.pkey = pkey;
                let l = op.layout();
                Repr {
                    bth: b,
                    deth: l.deth.then_some(deth::Repr { q_key: qkey, src_qp: sqp & 0xff_ffff }),
                    reth: l.reth.then_some(reth::Repr { va, r_key: rk, dma_len: dl }),
                    atomic_eth: l.atomic_eth.then_some(atomic_eth::Repr {
                        va: ava,
                        r_key: ark,
                        swap_add: swap,
                        compare: cmp,
                    }),
                    aeth: l.aeth.then_some(aeth::Repr { syndrome: aeth::Syndrome::from(syn), msn: msn & 0xff_ffff }),
                    atomic_ack_eth: l.atomic_ack_eth.then_some(atomic_ack_eth::Repr { orig_remote_data: orig }),
                    immediate: l.immdt.then_some(imm),
                    ieth: l.ieth.then_some(ieth::Repr { r_key: inv }),
                }
            },
        )
}

proptest! {
    #[test]
    fn frame_round_trip(h in arb_repr(), payload in proptest::collection::vec(any::<u8>(), 0..300),
                        dscp in 0u8..64, ecn in 0u8..4, sport: u16, v6: bool, a: [u8; 16], b: [u8; 16]) {
        let (s, d) = if v6 {
            (IpAddr::V6(Ipv6Addr::from(a)), IpAddr::V6(Ipv6Addr::from(b)))
        } else {
            (IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])), IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])))
        };
        // The CNP carries no payload by definition.
        let payload = if h.bth.opcode == Opcode::Cnp { vec![] } else { payload };
        let mut f = RoceFrame::new(MAC1, MAC2, s, d, h, &payload);
        f.dscp = dscp;
        f.ecn = etherparse::IpEcn::try_new(ecn).unwrap();
        f.udp_src_port = sport;
        let bytes = f.to_vec().unwrap();
        let p = ParsedFrame::parse(&bytes).unwrap();
        let mut expect = h;
        expect.bth.pad_count = roce::pad_for(payload.len());
        prop_assert_eq!(p.headers, expect);
        prop_assert_eq!(p.payload, &payload[..]);
        prop_assert_eq!((p.ip.src, p.ip.dst, p.ip.dscp, p.ip.ecn), (s, d, dscp, f.ecn));
        prop_assert_eq!(p.udp_src_port, sport);
        prop_assert!(p.icrc.is_good());
    }

    #[test]
    fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = ParsedFrame::parse(&data);
        let _ = roce::Packet::new_checked(&data[..]).map(|p| Repr::parse(&p));
        let _ = roce::icrc::verify(&data);
    }

    #[test]
    fn parse_never_panics_on_mutated_frame(idx in 0usize..82, val: u8, cut in 0usize..83) {
        let mut f = hex(WRITE_ONLY);
        f[idx] = val;
        f.truncate(cut);
        let _ = ParsedFrame::parse(&f);
    }

    #[test]
    fn bth_round_trip(bytes: [u8; 12]) {
        let p = bth::Packet::new_checked(&bytes[..]).unwrap();
        let r = bth::Repr::parse(&p).unwrap();
        let mut out = [0xa5u8; 12];
        r.emit(&mut bth::Packet::new_unchecked(&mut out[..]));
        // The 6 reserved bits after F/B and the 7 after AckReq are written as zero.
        let mut expect = bytes;
        expect[4] &= 0xc0;
        expect[8] &= 0x80;
        prop_assert_eq!(out, expect);
    }
}

/// Frames a capture's snap length cut: `parse_captured` keeps the headers, reports the
/// captured part of the payload and the ICRC as not captured, names the layer when a header
/// itself is cut, and is `parse` itself for a whole frame.
#[test]
fn parse_captured_snaplen_truncated_frames() {
    let payload: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
    let mut b = bth::Repr::new(Opcode::WriteFirst, 0x00ab_cdef, 0x12_3456);
    b.ack_req = true;
    let mut h = Repr::new(b);
    h.reth = Some(reth::Repr { va: 0x1122_3344_5566_7788, r_key: 0xaabb_ccdd, dma_len: 4096 });
    let cases =
        [(v4(1), v4(2)), (IpAddr::V6(Ipv6Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)))];
    for (src, dst) in cases {
        let full = RoceFrame::new(MAC1, MAC2, src, dst, h, &payload).to_vec().unwrap();
        let orig = ParsedFrame::parse(&full).unwrap();
        assert!(orig.icrc.is_good());
        assert_eq!(orig.payload_len, payload.len());
        // Whole frame: identical to the strict parse.
        assert_eq!(ParsedFrame::parse_captured(&full, full.len()).unwrap(), orig);
        let ip_len = if src.is_ipv4() { 20 } else { 40 };
        let hdrs_end = 14 + ip_len + 8 + 12 + 16;
        for n in hdrs_end..full.len() {
            let p = ParsedFrame::parse_captured(&full[..n], full.len()).unwrap_or_else(|e| panic!("cut at {n}: {e}"));
            assert_eq!(p.headers, orig.headers, "cut at {n}");
            assert_eq!((p.src_mac, p.dst_mac, p.ip, p.vlan), (orig.src_mac, orig.dst_mac, orig.ip, orig.vlan));
            assert_eq!((p.udp_src_port, p.udp_dst_port), (orig.udp_src_port, orig.udp_dst_port));
            assert_eq!(p.icrc, IcrcStatus::NotCaptured { captured: n, orig_len: full.len() }, "cut at {n}");
            assert_eq!(p.payload_len, payload.len());
            let got = (n - hdrs_end).min(payload.len());
            assert_eq!(p.payload, &payload[..got], "cut at {n}");
            assert_eq!(p.payload_complete(), got == payload.len());
            assert_eq!(p.icrc.to_string(), format!("not captured (frame cut at {n} of {} bytes)", full.len()));
        }
        // Cut inside a header: an error naming the layer.
        let layer_at = |n: usize| match ParsedFrame::parse_captured(&full[..n], full.len()) {
            Err(Error::Truncated { layer, .. }) => layer,
            r => panic!("cut at {n}: expected a truncation error, got {r:?}"),
        };
        let ip_layer = if src.is_ipv4() { Layer::Ipv4 } else { Layer::Ipv6 };
        assert_eq!(layer_at(10), Layer::Ethernet);
        assert_eq!(layer_at(14 + ip_len - 1), ip_layer);
        assert_eq!(layer_at(14 + ip_len + 7), Layer::Udp);
        for n in 14 + ip_len + 8..14 + ip_len + 8 + 12 {
            assert_eq!(layer_at(n), Layer::Bth, "cut at {n}");
        }
        for n in 14 + ip_len + 8 + 12..hdrs_end {
            assert_eq!(layer_at(n), Layer::Reth, "cut at {n}");
        }
        // The strict parse still rejects the cut frame.
        assert!(ParsedFrame::parse(&full[..hdrs_end + 10]).is_err());
    }

    // An ACK (AETH) cut inside the AETH, and an orig_len the UDP length does not fit.
    let mut ack = Repr::new(bth::Repr::new(Opcode::Acknowledge, 0x12, 100));
    ack.aeth = Some(aeth::Repr { syndrome: aeth::Syndrome::Ack { credits: 31 }, msn: 5 });
    let f = RoceFrame::new(MAC1, MAC2, v4(1), v4(2), ack, &[]).to_vec().unwrap();
    let aeth_start = 14 + 20 + 8 + 12;
    match ParsedFrame::parse_captured(&f[..aeth_start + 2], f.len()) {
        Err(Error::Truncated { layer: Layer::Aeth, needed: 4, available: 2 }) => {}
        r => panic!("{r:?}"),
    }
    let p = ParsedFrame::parse_captured(&f[..aeth_start + 4], f.len()).unwrap();
    assert_eq!(p.headers, ack);
    assert_eq!(p.icrc, IcrcStatus::NotCaptured { captured: aeth_start + 4, orig_len: f.len() });
    assert!(matches!(
        ParsedFrame::parse_captured(&f[..aeth_start + 4], aeth_start + 6),
        Err(Error::Truncated { layer: Layer::Udp, .. })
    ));
}

/// A frame whose capture lost only Ethernet padding still has its ICRC verified.
#[test]
fn parse_captured_cut_in_ethernet_padding_verifies_icrc() {
    let f = hex(ACK_NAK);
    let mut padded = f.clone();
    padded.resize(64, 0);
    let p = ParsedFrame::parse_captured(&padded[..f.len()], padded.len()).unwrap();
    assert_eq!(p, ParsedFrame::parse(&f).unwrap());
    assert!(p.icrc.is_good());
}
