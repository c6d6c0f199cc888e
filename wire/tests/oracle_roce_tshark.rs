//! Oracle: Wireshark's InfiniBand dissector (tshark 4.0 decodes UDP port 4791 as RoCEv2 by
//! default) reads the frames we emit. Field values must match what we built, and the ICRC
//! tshark shows (it does not verify it) must equal ours. tshark missing -> the test fails.
//! CNP (0x81) and ICRC verification are covered by the scapy oracle. Every named opcode (RC,
//! UC, UD) with its DETH / RETH / AtomicETH / AETH / AtomicAckETH / ImmDt / IETH, and RoCE v1
//! frames (GRH), are compared field by field with what our parser reads.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};
use rocefab_test_support::tshark::{self as oracle, num};
use rocefab_wire::roce::{self, aeth, bth, reth, Opcode, Repr, RoceFrame};

struct TempFile(PathBuf);
impl Drop for TempFile {
    fn drop(&mut self) {
        if std::env::var_os("RF_KEEP").is_none() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn write_pcap(name: &str, frames: &[Vec<u8>]) -> TempFile {
    let path = std::env::temp_dir().join(format!("rf-roce-{}-{name}.pcap", std::process::id()));
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(Duration::from_micros(i as u64), f.len() as u32, f)).unwrap();
    }
    TempFile(path)
}

const FIELDS: &[&str] = &[
    "infiniband.bth.opcode",
    "infiniband.bth.se",
    "infiniband.bth.padcnt",
    "infiniband.bth.p_key",
    "infiniband.bth.destqp",
    "infiniband.bth.a",
    "infiniband.bth.psn",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "ip.dsfield.dscp",
    "ip.dsfield.ecn",
    "ipv6.tclass.dscp",
    "udp.srcport",
    "udp.dstport",
    "infiniband.invariant.crc",
];

fn tshark(path: &PathBuf) -> Vec<Vec<String>> {
    // The RPC-over-RDMA heuristic claims some SEND payloads, fails on them and then stops the
    // dissection before the ICRC; our payloads are opaque bytes.
    oracle::read(path).disable("rpcordma").first(FIELDS)
}

fn col<'a>(row: &'a [String], name: &str) -> &'a str {
    &row[FIELDS.iter().position(|f| *f == name).unwrap()]
}

struct Case {
    headers: Repr,
    payload: Vec<u8>,
    dscp: u8,
    ecn: u8,
    sport: u16,
    v6: bool,
}

fn frames(cases: &[Case]) -> Vec<Vec<u8>> {
    cases
        .iter()
        .map(|c| {
            let (s, d) = if c.v6 {
                (
                    IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1)),
                    IpAddr::V6(Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1)),
                )
            } else {
                (IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 2, 1)))
            };
            let mut f = RoceFrame::new([2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 2, 1], s, d, c.headers, &c.payload);
            f.dscp = c.dscp;
            f.ecn = etherparse::IpEcn::try_new(c.ecn).unwrap();
            f.udp_src_port = c.sport;
            f.to_vec().unwrap()
        })
        .collect()
}

#[test]
fn tshark_decodes_our_rocev2_frames() {
    let rth = |op, qp, psn, va, rk, len| {
        let mut h = Repr::new(bth::Repr::new(op, qp, psn));
        h.reth = Some(reth::Repr { va, r_key: rk, dma_len: len });
        h
    };
    let plain = |op, qp, psn| Repr::new(bth::Repr::new(op, qp, psn));
    let ack = |qp, psn, s: aeth::Syndrome, msn| {
        let mut h = Repr::new(bth::Repr::new(Opcode::Acknowledge, qp, psn));
        h.aeth = Some(aeth::Repr { syndrome: s, msn });
        h
    };
    let mut send = plain(Opcode::SendOnly, 0x99, 7);
    send.bth.solicited = true;
    send.bth.ack_req = true;
    let mut wonly = rth(Opcode::WriteOnly, 0xabcdef, 0xffffff, 0x7fff_0000_1234_5678, 0x1000_2000, 4096);
    wonly.bth.pkey = 0x8001;
    let cases = vec![
        Case {
            headers: rth(Opcode::WriteFirst, 0x12, 100, 0x1000, 0xaa, 3 * 256),
            payload: vec![1; 256],
            dscp: 24,
            ecn: 2,
            sport: 0xc001,
            v6: false,
        },
        Case {
            headers: plain(Opcode::WriteMiddle, 0x12, 101),
            payload: vec![2; 256],
            dscp: 24,
            ecn: 2,
            sport: 0xc001,
            v6: false,
        },
        Case {
            headers: plain(Opcode::WriteLast, 0x12, 102),
            payload: vec![3; 255],
            dscp: 24,
            ecn: 3,
            sport: 0xc001,
            v6: false,
        },
        Case { headers: wonly, payload: vec![4; 64], dscp: 24, ecn: 2, sport: 0xe123, v6: false },
        Case {
            headers: ack(0x34, 102, aeth::Syndrome::Ack { credits: 31 }, 3),
            payload: vec![],
            dscp: 24,
            ecn: 0,
            sport: 0xc002,
            v6: false,
        },
        Case {
            headers: ack(0x34, 5, aeth::Syndrome::Nak(aeth::NakCode::PsnSequenceError), 2),
            payload: vec![],
            dscp: 24,
            ecn: 0,
            sport: 0xc002,
            v6: false,
        },
        Case { headers: send, payload: vec![5; 10], dscp: 26, ecn: 1, sport: 0xc003, v6: false },
        Case {
            headers: rth(Opcode::WriteOnly, 0x56, 9, 0x2000, 0xbb, 128),
            payload: vec![6; 128],
            dscp: 24,
            ecn: 2,
            sport: 0xc004,
            v6: true,
        },
    ];
    let fr = frames(&cases);
    let tmp = write_pcap("tshark", &fr);
    let rows = tshark(&tmp.0);
    assert_eq!(rows.len(), cases.len());
    for (i, ((c, row), f)) in cases.iter().zip(&rows).zip(&fr).enumerate() {
        let b = &c.headers.bth;
        assert_eq!(num(col(row, "infiniband.bth.opcode")), u64::from(u8::from(b.opcode)), "frame {i}");
        assert_eq!(num(col(row, "infiniband.bth.destqp")), u64::from(b.dest_qp), "frame {i}");
        assert_eq!(num(col(row, "infiniband.bth.psn")), u64::from(b.psn), "frame {i}");
        assert_eq!(num(col(row, "infiniband.bth.p_key")), u64::from(b.pkey), "frame {i}");
        assert_eq!(
            col(row, "infiniband.bth.a") == "1" || col(row, "infiniband.bth.a") == "True",
            b.ack_req,
            "frame {i}"
        );
        assert_eq!(
            col(row, "infiniband.bth.se") == "1" || col(row, "infiniband.bth.se") == "True",
            b.solicited,
            "frame {i}"
        );
        assert_eq!(num(col(row, "infiniband.bth.padcnt")), u64::from(roce::pad_for(c.payload.len())), "frame {i}");
        match &c.headers.reth {
            Some(r) => {
                assert_eq!(num(col(row, "infiniband.reth.va")), r.va, "frame {i}");
                assert_eq!(num(col(row, "infiniband.reth.r_key")), u64::from(r.r_key), "frame {i}");
                assert_eq!(num(col(row, "infiniband.reth.dmalen")), u64::from(r.dma_len), "frame {i}");
            }
            None => assert_eq!(col(row, "infiniband.reth.va"), "", "frame {i}"),
        }
        match &c.headers.aeth {
            Some(a) => {
                assert_eq!(num(col(row, "infiniband.aeth.syndrome")), u64::from(u8::from(a.syndrome)), "frame {i}");
                assert_eq!(num(col(row, "infiniband.aeth.msn")), u64::from(a.msn), "frame {i}");
            }
            None => assert_eq!(col(row, "infiniband.aeth.syndrome"), "", "frame {i}"),
        }
        let dscp_field = if c.v6 { "ipv6.tclass.dscp" } else { "ip.dsfield.dscp" };
        assert_eq!(num(col(row, dscp_field)), u64::from(c.dscp), "frame {i}");
        if !c.v6 {
            assert_eq!(num(col(row, "ip.dsfield.ecn")), u64::from(c.ecn), "frame {i}");
        }
        assert_eq!(num(col(row, "udp.srcport")), u64::from(c.sport), "frame {i}");
        assert_eq!(num(col(row, "udp.dstport")), 4791, "frame {i}");
        // tshark prints the 4 ICRC bytes read big-endian; ours is the little-endian value.
        let ours = roce::icrc::icrc(&f[14..14 + ip_len(f)]).unwrap();
        assert_eq!(num(col(row, "infiniband.invariant.crc")) as u32, ours.swap_bytes(), "frame {i}: ICRC");
    }
}

/// IP packet length (without Ethernet padding).
fn ip_len(f: &[u8]) -> usize {
    if f[14] >> 4 == 4 {
        usize::from(u16::from_be_bytes([f[16], f[17]]))
    } else {
        40 + usize::from(u16::from_be_bytes([f[18], f[19]]))
    }
}

// ---- every opcode of RC / UC / UD, CNP, and RoCE v1 ----

use rocefab_wire::roce::{atomic_ack_eth, atomic_eth, deth, grh, ieth, AnyFrame};

/// Fields of every extension header as Wireshark 4.0 names them (`tshark -G fields`). Its
/// AtomicETH dissector reports the atomic VA and R_Key under the RETH field names.
const EXT_FIELDS: &[&str] = &[
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.padcnt",
    "infiniband.bth.p_key",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.atomicacketh.origremdt",
    "infiniband.immdt",
    "infiniband.ieth",
    "infiniband.payload",
    "data.data",
    "infiniband.invariant.crc",
    "infiniband.grh.ipver",
    "infiniband.grh.tclass",
    "infiniband.grh.flowlabel",
    "infiniband.grh.paylen",
    "infiniband.grh.nxthdr",
    "infiniband.grh.hoplmt",
    "infiniband.grh.sgid",
    "infiniband.grh.dgid",
    "eth.type",
];

fn tshark_fields(path: &PathBuf, fields: &[&str]) -> Vec<Vec<String>> {
    // As above for RPC-over-RDMA; the Mellanox EoIB heuristic likewise claims UD payloads and
    // throws on an empty one.
    oracle::read(path).disable("rpcordma").disable("infiniband.eoib").first(fields)
}

fn ext_col<'a>(row: &'a [String], name: &str) -> &'a str {
    &row[EXT_FIELDS.iter().position(|f| *f == name).unwrap()]
}

/// A hex byte string as tshark prints FT_BYTES (`00000077`, or `00:00:00:77`).
fn bytes_hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| *c != ':').collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Headers with every extension header the opcode needs, values derived from `k` so frames
/// differ.
fn full_headers(op: Opcode, k: u64) -> Repr {
    let l = op.layout();
    let k32 = k as u32;
    let mut h = Repr::new(bth::Repr::new(op, 0x100 + k32, 0x10_0000 + k32));
    h.bth.becn = op == Opcode::Cnp;
    h.bth.pkey = 0x8000 | k as u16;
    h.deth = l.deth.then_some(deth::Repr { q_key: 0x1111_1111 ^ k32, src_qp: 0x05_0000 | k32 });
    h.reth = l.reth.then_some(reth::Repr { va: 0x7f00_0000_0000 + (k << 12), r_key: 0x2200 + k32, dma_len: 13 + k32 });
    h.atomic_eth = l.atomic_eth.then_some(atomic_eth::Repr {
        va: 0x7f00_0000_1000 + (k << 3),
        r_key: 0x3300 + k32,
        swap_add: 0x8000_0000_0000_0000 | k,
        compare: 0x0123_4567_89ab_cdef ^ k,
    });
    h.aeth = l
        .aeth
        .then_some(aeth::Repr { syndrome: aeth::Syndrome::Ack { credits: (k % 32) as u8 }, msn: 0x44_0000 + k32 });
    h.atomic_ack_eth = l.atomic_ack_eth.then_some(atomic_ack_eth::Repr { orig_remote_data: 0xfedc_ba98_7654_3210 ^ k });
    h.immediate = l.immdt.then_some(0x6600_0000 + k32);
    h.ieth = l.ieth.then_some(ieth::Repr { r_key: 0x7700_0000 + k32 });
    h
}

/// SEND, RDMA WRITE and READ responses carry data; requests without data, acknowledges,
/// atomics and the CNP do not (Wireshark shows no payload for them).
fn carries_data(op: Opcode) -> bool {
    !matches!(
        op,
        Opcode::Cnp
            | Opcode::CompareSwap
            | Opcode::FetchAdd
            | Opcode::AtomicAcknowledge
            | Opcode::Acknowledge
            | Opcode::ReadRequest
    )
}

/// Field-by-field agreement of one tshark row with what our parser read from the frame.
fn assert_agrees(row: &[String], f: &[u8], what: &str) {
    let p = AnyFrame::parse(f).unwrap_or_else(|e| panic!("{what}: ours: {e}"));
    let h = p.headers();
    let b = &h.bth;
    let c = |n: &str| -> &str { ext_col(row, n) };
    assert_eq!(num(c("infiniband.bth.opcode")), u64::from(u8::from(b.opcode)), "{what}");
    assert_eq!(num(c("infiniband.bth.destqp")), u64::from(b.dest_qp), "{what}");
    assert_eq!(num(c("infiniband.bth.psn")), u64::from(b.psn), "{what}");
    assert_eq!(num(c("infiniband.bth.p_key")), u64::from(b.pkey), "{what}");
    if b.opcode == Opcode::Cnp {
        // Wireshark 4.0 calls 0x81 "Unknown" and stops after the BTH.
        return;
    }
    assert_eq!(num(c("infiniband.bth.padcnt")), u64::from(b.pad_count), "{what}");
    let opt = |name: &str| Some(c(name)).filter(|s| !s.is_empty());
    assert_eq!(opt("infiniband.deth.q_key").map(num), h.deth.map(|d| u64::from(d.q_key)), "{what}: DETH Q_Key");
    assert_eq!(opt("infiniband.deth.srcqp").map(num), h.deth.map(|d| u64::from(d.src_qp)), "{what}: DETH SrcQP");
    let va = h.reth.map(|r| r.va).or(h.atomic_eth.map(|a| a.va));
    let rk = h.reth.map(|r| r.r_key).or(h.atomic_eth.map(|a| a.r_key));
    assert_eq!(opt("infiniband.reth.va").map(num), va, "{what}: VA");
    assert_eq!(opt("infiniband.reth.r_key").map(num), rk.map(u64::from), "{what}: R_Key");
    assert_eq!(opt("infiniband.reth.dmalen").map(num), h.reth.map(|r| u64::from(r.dma_len)), "{what}: DMA length");
    assert_eq!(opt("infiniband.atomiceth.swapdt").map(num), h.atomic_eth.map(|a| a.swap_add), "{what}: swap/add");
    assert_eq!(opt("infiniband.atomiceth.cmpdt").map(num), h.atomic_eth.map(|a| a.compare), "{what}: compare");
    assert_eq!(
        opt("infiniband.aeth.syndrome").map(num),
        h.aeth.map(|a| u64::from(u8::from(a.syndrome))),
        "{what}: AETH"
    );
    assert_eq!(opt("infiniband.aeth.msn").map(num), h.aeth.map(|a| u64::from(a.msn)), "{what}: MSN");
    assert_eq!(
        opt("infiniband.atomicacketh.origremdt").map(num),
        h.atomic_ack_eth.map(|a| a.orig_remote_data),
        "{what}: AtomicAckETH"
    );
    assert_eq!(opt("infiniband.immdt").map(bytes_hex), h.immediate.map(|i| i.to_be_bytes().to_vec()), "{what}: ImmDt");
    assert_eq!(opt("infiniband.ieth").map(bytes_hex), h.ieth.map(|i| i.r_key.to_be_bytes().to_vec()), "{what}: IETH");
    // Wireshark hands the payload with its pad bytes to its "data" dissector.
    let mut payload = p.payload().to_vec();
    payload.resize(payload.len() + usize::from(b.pad_count), 0);
    let theirs = opt("infiniband.payload").or(opt("data.data")).map(bytes_hex).unwrap_or_default();
    assert_eq!(theirs, payload, "{what}: payload and pad");
    // tshark prints the 4 ICRC bytes read big-endian; ours is the little-endian value.
    let stored = match p.icrc() {
        roce::IcrcStatus::Good(v) => v,
        roce::IcrcStatus::NotChecked { stored } => stored,
        s => panic!("{what}: ICRC {s}"),
    };
    assert_eq!(num(c("infiniband.invariant.crc")) as u32, stored.swap_bytes(), "{what}: ICRC");
    match &p {
        AnyFrame::V1(v1) => {
            let g = &v1.grh;
            assert_eq!(num(c("eth.type")), 0x8915, "{what}");
            assert_eq!(num(c("infiniband.grh.ipver")), u64::from(g.ip_version), "{what}");
            assert_eq!(num(c("infiniband.grh.tclass")), u64::from(g.traffic_class), "{what}");
            assert_eq!(num(c("infiniband.grh.flowlabel")), u64::from(g.flow_label), "{what}");
            assert_eq!(num(c("infiniband.grh.paylen")), u64::from(g.payload_len), "{what}");
            assert_eq!(num(c("infiniband.grh.nxthdr")), u64::from(g.next_header), "{what}");
            assert_eq!(num(c("infiniband.grh.hoplmt")), u64::from(g.hop_limit), "{what}");
            assert_eq!(c("infiniband.grh.sgid").parse::<Ipv6Addr>().unwrap(), g.sgid, "{what}");
            assert_eq!(c("infiniband.grh.dgid").parse::<Ipv6Addr>().unwrap(), g.dgid, "{what}");
        }
        AnyFrame::V2(_) => assert_eq!(c("infiniband.grh.ipver"), "", "{what}: no GRH in RoCEv2"),
    }
}

/// Every named opcode (RC, UC, UD, CNP) with each extension header it carries, over IPv4 and
/// IPv6: tshark reads what our parser reads, field by field, and the ICRC we computed.
#[test]
fn tshark_agrees_on_every_opcode_and_extension_header() {
    let mut frames = Vec::new();
    let mut what = Vec::new();
    for (k, &op) in Opcode::ALL.iter().enumerate() {
        let h = full_headers(op, k as u64);
        let payload: Vec<u8> =
            if carries_data(op) { (0..13 + k as u8).map(|i| i.wrapping_mul(29)).collect() } else { vec![] };
        for v6 in [false, true] {
            let (s, d) = if v6 {
                (
                    IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1)),
                    IpAddr::V6(Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1)),
                )
            } else {
                (IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 2, 1)))
            };
            let f = RoceFrame::new([2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 2, 1], s, d, h, &payload).to_vec().unwrap();
            what.push(format!("{op} over IPv{}", if v6 { 6 } else { 4 }));
            frames.push(f);
        }
    }
    let tmp = write_pcap("every-opcode", &frames);
    let rows = tshark_fields(&tmp.0, EXT_FIELDS);
    assert_eq!(rows.len(), frames.len());
    for ((row, f), w) in rows.iter().zip(&frames).zip(&what) {
        assert_agrees(row, f, w);
    }
    // Every header was exercised.
    let all: Vec<Repr> = frames.iter().map(|f| *AnyFrame::parse(f).unwrap().headers()).collect();
    assert!(all.iter().any(|h| h.deth.is_some() && h.immediate.is_some()));
    assert!(all.iter().any(|h| h.atomic_eth.is_some()));
    assert!(all.iter().any(|h| h.aeth.is_some() && h.atomic_ack_eth.is_some()));
    assert!(all.iter().any(|h| h.ieth.is_some()));
    assert!(all.iter().any(|h| h.reth.is_some() && h.immediate.is_some()));
}

/// RoCE v1 frame (EtherType 0x8915, GRH, BTH, no IP/UDP) built from the IBTA layouts: tshark
/// decodes the GRH and the InfiniBand headers as our parser does. The ICRC is compared as the
/// stored bytes only (we do not compute the v1 ICRC).
fn v1_frame(h: &Repr, payload: &[u8], icrc_value: u32) -> Vec<u8> {
    let mut h = *h;
    h.bth.pad_count = roce::pad_for(payload.len());
    let ib_len = h.buffer_len(payload.len());
    let mut f = vec![2, 0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 1, 0x89, 0x15];
    let mut g = grh::Repr::new(
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0200, 0, 0, 0x0101),
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0200, 0, 0, 0x0201),
        ib_len as u16,
    );
    g.traffic_class = 0x62;
    g.flow_label = 0x1_2345;
    g.hop_limit = 1;
    f.resize(14 + grh::LEN + ib_len, 0);
    g.emit(&mut grh::Packet::new_unchecked(&mut f[14..14 + grh::LEN]));
    h.emit(&mut f[14 + grh::LEN..], payload).unwrap();
    let n = f.len();
    f[n - 4..].copy_from_slice(&icrc_value.to_le_bytes());
    f
}

#[test]
fn tshark_agrees_on_roce_v1() {
    let mut frames = Vec::new();
    let mut what = Vec::new();
    for (k, &op) in Opcode::ALL.iter().enumerate() {
        if op == Opcode::Cnp {
            continue; // a RoCEv2 packet (Annex A17.9.3)
        }
        let h = full_headers(op, k as u64);
        let payload: Vec<u8> = if carries_data(op) { (0..(k % 9) as u8).collect() } else { vec![] };
        frames.push(v1_frame(&h, &payload, 0xa1b2_c3d4 ^ k as u32));
        what.push(format!("RoCE v1 {op}"));
    }
    let tmp = write_pcap("v1", &frames);
    let rows = tshark_fields(&tmp.0, EXT_FIELDS);
    assert_eq!(rows.len(), frames.len());
    for ((row, f), w) in rows.iter().zip(&frames).zip(&what) {
        assert!(matches!(AnyFrame::parse(f), Ok(AnyFrame::V1(_))), "{w}");
        assert_agrees(row, f, w);
    }
}
