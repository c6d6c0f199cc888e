//! Oracle: Wireshark's InfiniBand dissector (tshark 4.0 decodes UDP port 4791 as RoCEv2 by
//! default) reads the frames we emit. Field values must match what we built, and the ICRC
//! tshark shows (it does not verify it) must equal ours. tshark missing -> the test fails.
//! CNP (0x81) and ICRC verification are covered by the scapy oracle.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};
use rocefab_wire::roce::{self, aeth, bth, reth, Opcode, Repr, RoceFrame};

struct TempFile(PathBuf);
impl Drop for TempFile {
    fn drop(&mut self) {
        if std::env::var_os("RF_KEEP").is_none() { let _ = std::fs::remove_file(&self.0); }
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
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(path).args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
    // The RPC-over-RDMA heuristic claims some SEND payloads, fails on them and then stops the
    // dissection before the ICRC; our payloads are opaque bytes.
    cmd.args(["--disable-protocol", "rpcordma"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run tshark (needed for this oracle): {e}"));
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect()
}

fn num(s: &str) -> u64 {
    if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{s}: {e}"))
    } else {
        s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }
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
                (IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1)), IpAddr::V6(Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1)))
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
        Case { headers: rth(Opcode::WriteFirst, 0x12, 100, 0x1000, 0xaa, 3 * 256), payload: vec![1; 256], dscp: 24, ecn: 2, sport: 0xc001, v6: false },
        Case { headers: plain(Opcode::WriteMiddle, 0x12, 101), payload: vec![2; 256], dscp: 24, ecn: 2, sport: 0xc001, v6: false },
        Case { headers: plain(Opcode::WriteLast, 0x12, 102), payload: vec![3; 255], dscp: 24, ecn: 3, sport: 0xc001, v6: false },
        Case { headers: wonly, payload: vec![4; 64], dscp: 24, ecn: 2, sport: 0xe123, v6: false },
        Case { headers: ack(0x34, 102, aeth::Syndrome::Ack { credits: 31 }, 3), payload: vec![], dscp: 24, ecn: 0, sport: 0xc002, v6: false },
        Case { headers: ack(0x34, 5, aeth::Syndrome::Nak(aeth::NakCode::PsnSequenceError), 2), payload: vec![], dscp: 24, ecn: 0, sport: 0xc002, v6: false },
        Case { headers: send, payload: vec![5; 10], dscp: 26, ecn: 1, sport: 0xc003, v6: false },
        Case { headers: rth(Opcode::WriteOnly, 0x56, 9, 0x2000, 0xbb, 128), payload: vec![6; 128], dscp: 24, ecn: 2, sport: 0xc004, v6: true },
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
        assert_eq!(col(row, "infiniband.bth.a") == "1" || col(row, "infiniband.bth.a") == "True", b.ack_req, "frame {i}");
        assert_eq!(col(row, "infiniband.bth.se") == "1" || col(row, "infiniband.bth.se") == "True", b.solicited, "frame {i}");
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
