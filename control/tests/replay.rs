//! `rocefab replay` without a fabric: mapping (default, `--map`, `--sender`), rewriting
//! (addresses, IPv4 header checksum per etherparse, ICRC recomputed = what our wire crate and
//! scapy compute over the rewritten frame, bad ICRCs kept bad), skip reasons, snaplen refusal
//! and `--pad`, the schedules of original / speed / pps / loop timing, pacing on an absolute
//! clock, and argument errors (the CLI against a fake run directory, `--dry-run`).
//! Sending into a live fabric is tests/tests/fabric_replay.rs (root).
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use control::plan::compile;
use control::replay::{
    gpus_of, map_endpoints, pace, pace_with, prepare, rewrite, Gpu, MapHow, Options, Origin, Pace, PaceClock, Prepared,
    Report, Schedule, SendLog, TimingError,
};
use control::topology::Topology;
use rocefab_contracts::time::Dilation;
use rocefab_wire::pcap::{CapturedFrame, Format, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL};
use rocefab_wire::roce::{self, bth, icrc, reth, IcrcStatus, Opcode, ParsedFrame, RoceFrame};

const BIN: &str = env!("CARGO_BIN_EXE_rocefab");
const A: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 1);
const B: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 2);
const C: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 3);
const MAC_X: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 1];
const MAC_Y: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 2];

fn topology_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml")
}

/// The GPUs of rail-spine.yaml in torchrun order.
fn gpus() -> Vec<Gpu> {
    let topo = Topology::load(&topology_path()).unwrap();
    gpus_of(&compile(&topo, 0))
}

/// How rail1 (host1:gpu0's switch) classifies frames in rail-spine.yaml.
fn cls() -> control::replay::Classifier {
    let topo = Topology::load(&topology_path()).unwrap();
    control::replay::classifier(&compile(&topo, 0), "host1:gpu0")
}

fn gpu<'a>(g: &'a [Gpu], name: &str) -> &'a Gpu {
    g.iter().find(|x| x.name == name).unwrap()
}

/// A RoCEv2 frame `src` → `dst` built by our wire crate: `opcode` with a RETH when it needs
/// one, `len` payload bytes.
fn roce(src: IpAddr, dst: IpAddr, opcode: Opcode, psn: u32, len: usize) -> Vec<u8> {
    roce_dscp(src, dst, opcode, psn, len, 26)
}

/// [`roce`] with DSCP `dscp`.
fn roce_dscp(src: IpAddr, dst: IpAddr, opcode: Opcode, psn: u32, len: usize, dscp: u8) -> Vec<u8> {
    let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
    let mut h = roce::Repr::new(bth::Repr::new(opcode, 0x12, psn));
    if opcode.layout().reth {
        h.reth = Some(reth::Repr { va: 0x10000, r_key: 0x1234, dma_len: len as u32 });
    }
    if opcode.layout().aeth {
        h.aeth = Some(roce::aeth::Repr { syndrome: roce::aeth::Syndrome::Ack { credits: 0x1f }, msn: 3 });
    }
    let mut f = RoceFrame::new(MAC_X, MAC_Y, src, dst, h, &payload);
    f.dscp = dscp;
    f.ecn = roce::IpEcn::Ect1;
    f.ttl = 17;
    f.udp_src_port = 50001;
    f.to_vec().unwrap()
}

fn v4(src: Ipv4Addr, dst: Ipv4Addr, opcode: Opcode, psn: u32) -> Vec<u8> {
    roce(src.into(), dst.into(), opcode, psn, 200)
}

fn captured(ms: u64, data: Vec<u8>) -> CapturedFrame {
    CapturedFrame {
        timestamp: Duration::from_millis(1000 + ms),
        linktype: LINKTYPE_ETHERNET,
        orig_len: data.len() as u32,
        data,
    }
}

fn opts<'a>(g: &'a [Gpu], from: &'a str, maps: &'a [(IpAddr, String)]) -> Options<'a> {
    Options { file: Path::new("t.pcap"), gpus: g, from, maps, sender: None, pad: false, mtu: 1500 }
}

fn mapping(p: &Prepared) -> Vec<(IpAddr, Option<String>, MapHow)> {
    p.mapping.iter().map(|m| (m.endpoint, m.gpu.clone(), m.how)).collect()
}

fn s(x: &str) -> Option<String> {
    Some(x.to_string())
}

/// A, B and C talk: A → B, B → A, A → C.
fn three_endpoints() -> Vec<CapturedFrame> {
    vec![
        captured(0, v4(A, B, Opcode::WriteFirst, 1)),
        captured(5, v4(B, A, Opcode::Acknowledge, 1)),
        captured(10, v4(A, C, Opcode::WriteOnly, 7)),
    ]
}

// ---------------------------------------------------------------------------------------------
// Mapping

#[test]
fn default_mapping_sender_to_from_others_in_torchrun_order_skipping_from() {
    let g = gpus();
    assert_eq!(
        g.iter().map(|x| x.name.as_str()).collect::<Vec<_>>()[..4],
        ["host1:gpu0", "host1:gpu1", "host2:gpu0", "host2:gpu1"]
    );
    let p = prepare(&three_endpoints(), &opts(&g, "host1:gpu0", &[])).unwrap();
    assert_eq!(p.sender, IpAddr::V4(A));
    use MapHow::*;
    assert_eq!(
        mapping(&p),
        [(A.into(), s("host1:gpu0"), Sender), (B.into(), s("host1:gpu1"), Auto), (C.into(), s("host2:gpu0"), Auto)]
    );
    assert_eq!(p.mapping[1].ip, Some(Ipv4Addr::new(10, 0, 2, 1)));
    // --from elsewhere: the others take the first GPUs, skipping it.
    let p = prepare(&three_endpoints(), &opts(&g, "host1:gpu1", &[])).unwrap();
    assert_eq!(
        mapping(&p),
        [(A.into(), s("host1:gpu1"), Sender), (B.into(), s("host1:gpu0"), Auto), (C.into(), s("host2:gpu0"), Auto)]
    );
    // Two frames from A are injected (to B and C); B's ACK is skipped.
    assert_eq!(p.frames.iter().map(|f| f.number).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(p.skipped.len(), 1);
    assert_eq!((p.skipped[0].reason.as_str(), p.skipped[0].frames), ("sent by another endpoint (192.168.7.2)", 1));
}

#[test]
fn map_overrides_and_the_auto_mapping_skips_mapped_gpus() {
    let g = gpus();
    use MapHow::*;
    let maps = [(IpAddr::V4(B), "host2:gpu1".to_string())];
    let p = prepare(&three_endpoints(), &opts(&g, "host1:gpu0", &maps)).unwrap();
    assert_eq!(
        mapping(&p),
        [(A.into(), s("host1:gpu0"), Sender), (B.into(), s("host2:gpu1"), Map), (C.into(), s("host1:gpu1"), Auto)]
    );
    // Mapping the first GPUs away pushes C further.
    let maps = [(IpAddr::V4(B), "host1:gpu1".to_string())];
    let p = prepare(&three_endpoints(), &opts(&g, "host1:gpu0", &maps)).unwrap();
    assert_eq!(mapping(&p)[2], (C.into(), s("host2:gpu0"), Auto));
    // An address --map'ped to the --from GPU is the sender: B's frames are injected.
    let maps = [(IpAddr::V4(B), "host3:gpu0".to_string())];
    let p = prepare(&three_endpoints(), &opts(&g, "host3:gpu0", &maps)).unwrap();
    assert_eq!(p.sender, IpAddr::V4(B));
    assert_eq!(mapping(&p)[0], (A.into(), s("host1:gpu0"), Auto));
    assert_eq!(p.frames.iter().map(|f| f.number).collect::<Vec<_>>(), [2]);
    // --sender picks it as well.
    let mut o = opts(&g, "host1:gpu0", &[]);
    o.sender = Some(C.into());
    let p = prepare(&three_endpoints(), &o).unwrap();
    // C sent nothing, so no other endpoint takes a GPU.
    assert_eq!(mapping(&p), [(C.into(), s("host1:gpu0"), Sender)]);
    assert!(p.frames.is_empty(), "C sent nothing");
}

#[test]
fn endpoints_beyond_the_fabric_are_unmapped_and_their_frames_skipped() {
    let g = gpus();
    let two = &g[..2];
    let p = prepare(&three_endpoints(), &opts(two, "host1:gpu0", &[])).unwrap();
    assert_eq!(mapping(&p)[2], (C.into(), None, MapHow::Unmapped));
    assert_eq!(p.frames.len(), 1);
    let r: Vec<_> = p.skipped.iter().map(|s| (s.reason.as_str(), s.frames)).collect();
    assert_eq!(
        r,
        [("sent by another endpoint (192.168.7.2)", 1), ("to 192.168.7.3, which no GPU was left for (2 GPUs)", 1)]
    );
}

#[test]
fn mapping_errors_name_the_option() {
    let g = gpus();
    let e = |from: &str, maps: &[(IpAddr, &str)], sender: Option<Ipv4Addr>| {
        let maps: Vec<(IpAddr, String)> = maps.iter().map(|(i, n)| (*i, n.to_string())).collect();
        let mut o = opts(&g, from, &maps);
        o.sender = sender.map(IpAddr::V4);
        format!("{:#}", prepare(&three_endpoints(), &o).unwrap_err())
    };
    let x = e("host9:gpu0", &[], None);
    assert!(x.starts_with("--from host9:gpu0: no such GPU (have host1:gpu0, host1:gpu1,"), "{x}");
    let x = e("host1:gpu0", &[(B.into(), "host1:gpu7")], None);
    assert!(x.starts_with("--map 192.168.7.2=host1:gpu7: no such GPU (have host1:gpu0,"), "{x}");
    let x = e("host1:gpu0", &[(Ipv4Addr::new(1, 2, 3, 4).into(), "host2:gpu0")], None);
    assert_eq!(x, "--map 1.2.3.4=host2:gpu0: 1.2.3.4 is not an address of any RoCEv2 frame of the capture");
    let x = e("host1:gpu0", &[(A.into(), "host2:gpu0")], None);
    assert_eq!(x, "--map 192.168.7.1=host2:gpu0: 192.168.7.1 is the sending endpoint, which --from puts on host1:gpu0");
    let x = e("host1:gpu0", &[(B.into(), "host2:gpu0"), (C.into(), "host2:gpu0")], None);
    assert_eq!(x, "--map 192.168.7.3=host2:gpu0: 192.168.7.2 is mapped to host2:gpu0 too");
    let x = e("host1:gpu0", &[(B.into(), "host2:gpu0"), (B.into(), "host2:gpu1")], None);
    assert_eq!(x, "--map 192.168.7.2: given twice (host2:gpu0 and host2:gpu1)");
    let x = e("host1:gpu0", &[(C.into(), "host1:gpu0")], Some(A));
    assert_eq!(
        x,
        "--map 192.168.7.3=host1:gpu0: host1:gpu0 is the --from GPU, which the sending endpoint 192.168.7.1 takes"
    );
    let x = e("host1:gpu0", &[], Some(Ipv4Addr::new(9, 9, 9, 9)));
    assert_eq!(x, "--sender 9.9.9.9: not an address of any RoCEv2 frame of t.pcap");
    // map_endpoints directly: an endpoint list and GPUs, nothing else.
    let m = map_endpoints(&[A.into(), B.into()], B.into(), &g, "host4:gpu1", &[]).unwrap();
    assert_eq!((m[0].gpu.as_deref(), m[1].gpu.as_deref()), (Some("host1:gpu0"), Some("host4:gpu1")));
}

// ---------------------------------------------------------------------------------------------
// Rewriting

/// The checks every rewritten IPv4 frame passes, against the captured one.
fn check_rewritten_v4(out: &[u8], orig: &[u8], g: &Gpu, dst: Ipv4Addr) {
    check_headers_v4(out, orig, g, dst, true);
}

/// [`check_rewritten_v4`]; `same_payload`: the bytes from the BTH to the ICRC are the captured
/// ones (not so for a padded frame).
fn check_headers_v4(out: &[u8], orig: &[u8], g: &Gpu, dst: Ipv4Addr, same_payload: bool) {
    use etherparse::{LinkSlice, NetSlice, SlicedPacket, TransportSlice};
    let sp = SlicedPacket::from_ethernet(out).unwrap();
    let Some(LinkSlice::Ethernet2(eth)) = &sp.link else { panic!("no Ethernet") };
    assert_eq!(eth.source(), g.mac, "source MAC = the --from NIC");
    assert_eq!(eth.destination(), g.gateway_mac, "destination MAC = its rail switch port");
    let Some(NetSlice::Ipv4(ip)) = &sp.net else { panic!("no IPv4") };
    let h = ip.header().to_header();
    assert_eq!(h.source, g.ip.octets());
    assert_eq!(h.destination, dst.octets());
    assert_eq!(h.time_to_live, 64);
    assert_eq!(h.header_checksum, h.calc_header_checksum(), "IPv4 header checksum valid per etherparse");
    let o = SlicedPacket::from_ethernet(orig).unwrap();
    let Some(NetSlice::Ipv4(oip)) = &o.net else { panic!() };
    let oh = oip.header().to_header();
    assert_eq!(
        (h.dscp, h.ecn, h.identification, h.total_len),
        (oh.dscp, oh.ecn, oh.identification, oh.total_len),
        "DSCP/ECN, ID, length kept"
    );
    let (Some(TransportSlice::Udp(u)), Some(TransportSlice::Udp(ou))) = (&sp.transport, &o.transport) else {
        panic!("no UDP")
    };
    assert_eq!(u.checksum(), 0, "UDP checksum 0");
    assert_eq!(
        (u.source_port(), u.destination_port(), u.length()),
        (ou.source_port(), ou.destination_port(), ou.length())
    );
    let (pl, opl) = (u.payload(), ou.payload());
    if same_payload {
        assert_eq!(pl[..pl.len() - 4], opl[..opl.len() - 4], "BTH and everything after it kept");
    }
}

#[test]
fn rewrite_sets_macs_addresses_ttl_checksums_and_recomputes_the_icrc() {
    let g = gpus();
    let maps = [(IpAddr::V4(B), "host2:gpu1".to_string())];
    let frames = vec![
        captured(0, v4(A, B, Opcode::WriteFirst, 100)),
        captured(6, v4(A, B, Opcode::WriteMiddle, 101)),
        captured(13, v4(A, B, Opcode::WriteLast, 102)),
        captured(20, v4(A, B, Opcode::Acknowledge, 5)),
        captured(27, roce::cnp(MAC_X, MAC_Y, A.into(), B.into(), 0x99).to_vec().unwrap()),
    ];
    let p = prepare(&frames, &opts(&g, "host1:gpu0", &maps)).unwrap();
    assert_eq!(p.frames.len(), 5);
    let from = gpu(&g, "host1:gpu0");
    let to = gpu(&g, "host2:gpu1").ip;
    for (o, f) in p.frames.iter().zip(&frames) {
        check_rewritten_v4(&o.bytes, &f.data, from, to);
        let parsed = ParsedFrame::parse(&o.bytes).unwrap();
        let ip = &o.bytes[14..14 + 20 + usize::from(parsed_udp_len(&o.bytes))];
        assert_eq!(parsed.icrc, IcrcStatus::Good(icrc::icrc_ipv4(ip).unwrap()), "our ICRC over the rewritten frame");
        assert_ne!(o.bytes[o.bytes.len() - 4..], f.data[f.data.len() - 4..], "the ICRC changed with the addresses");
        assert!(!o.icrc_bad_in_capture && !o.padded);
    }
    // scapy's ICRC over the rewritten frames is the one they carry.
    let dir = temp_dir("scapy");
    let pcap = dir.path().join("rewritten.pcap");
    rocefab_wire::pcap::write_all(&pcap, Format::Pcap, p.frames.iter().map(|f| (f.timestamp, f.bytes.as_slice())))
        .unwrap();
    let rows = scapy_icrc(&pcap);
    assert_eq!(rows.len(), 5, "{rows:?}");
    for (stored, computed) in rows {
        assert_eq!(stored, computed, "ICRC in the rewritten frame vs scapy");
    }
}

fn parsed_udp_len(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[14 + 20 + 4], f[14 + 20 + 5]])
}

/// (stored, computed) ICRC of every RoCEv2 frame of `pcap`, per scapy.contrib.roce.
fn scapy_icrc(pcap: &Path) -> Vec<(String, String)> {
    let script = r#"
import sys
from scapy.all import rdpcap, Ether, raw
from scapy.contrib.roce import BTH
for p in rdpcap(sys.argv[1]):
    if BTH in p:
        q = Ether(raw(p))
        q[BTH].icrc = None
        print(raw(p[BTH])[-4:].hex(), raw(q[BTH])[-4:].hex())
"#;
    let o = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(pcap)
        .output()
        .unwrap_or_else(|e| panic!("cannot run /usr/bin/python3 (scapy is needed for this test): {e}"));
    assert!(o.status.success(), "scapy: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.to_string(), b.to_string())
        })
        .collect()
}

#[test]
fn a_bad_captured_icrc_stays_bad_and_is_counted() {
    let g = gpus();
    let mut bad = v4(A, B, Opcode::WriteOnly, 9);
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    let frames = vec![captured(0, bad.clone()), captured(5, v4(A, B, Opcode::WriteOnly, 10))];
    let p = prepare(&frames, &opts(&g, "host1:gpu0", &[])).unwrap();
    assert!(p.frames[0].icrc_bad_in_capture && !p.frames[1].icrc_bad_in_capture);
    let out = &p.frames[0].bytes;
    assert_eq!(out[out.len() - 4..], bad[n - 4..], "the captured ICRC is sent as it was");
    assert!(matches!(ParsedFrame::parse(out).unwrap().icrc, IcrcStatus::Bad { .. }));
    assert!(ParsedFrame::parse(&p.frames[1].bytes).unwrap().icrc.is_good());
    let r = Report::new(
        Origin { fabric: "f", file: Path::new("t.pcap"), from: "host1:gpu0" },
        &p,
        Pace::Speed(1.0),
        &Schedule::new(&[], Pace::Topspeed, 1),
        Dilation::REAL_TIME,
        &cls(),
        None,
    );
    assert_eq!(r.icrc_bad_in_capture, 1);
    assert!(control::replay::render_report(&r).contains("ICRC was bad in the capture: 1 (kept bad"));
}

#[test]
fn vlan_tags_are_dropped_and_cooked_captures_get_an_ethernet_header() {
    let g = gpus();
    let plain = v4(A, B, Opcode::WriteOnly, 1);
    let mut tagged = plain[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x60, 0x65]);
    tagged.extend_from_slice(&plain[12..]);
    // Linux cooked (SLL): outgoing, ARPHRD_ETHER, 6-byte address, protocol IPv4.
    let mut sll = vec![0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&plain[14..]);
    let cooked = CapturedFrame {
        timestamp: Duration::from_millis(5),
        linktype: LINKTYPE_LINUX_SLL,
        orig_len: sll.len() as u32,
        data: sll,
    };
    let p = prepare(&[captured(0, tagged), cooked], &opts(&g, "host1:gpu0", &[])).unwrap();
    assert_eq!(p.frames.len(), 2, "{:?}", p.skipped);
    assert_eq!(p.frames[0].bytes, p.frames[1].bytes, "tagged and cooked captures rewrite to the same frame");
    assert_eq!(p.frames[0].bytes[12..14], [0x08, 0x00]);
    check_rewritten_v4(&p.frames[0].bytes, &plain, gpu(&g, "host1:gpu0"), gpu(&g, "host1:gpu1").ip);
}

#[test]
fn ipv6_rewrite_recomputes_the_udp_checksum_it_had_and_the_icrc() {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    let (s6, d6): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
    let orig = roce(s6.into(), d6.into(), Opcode::SendOnly, 4, 100);
    let (n6, m6): (Ipv6Addr, Ipv6Addr) = ("fd01::a".parse().unwrap(), "fd01::b".parse().unwrap());
    let out = rewrite(&orig, MAC_Y, MAC_X, n6.into(), m6.into(), true).unwrap();
    let sp = SlicedPacket::from_ethernet(&out).unwrap();
    let Some(NetSlice::Ipv6(ip)) = &sp.net else { panic!() };
    let h = ip.header().to_header();
    assert_eq!((h.source, h.destination, h.hop_limit), (n6.octets(), m6.octets(), 64));
    let Some(TransportSlice::Udp(u)) = &sp.transport else { panic!() };
    assert_ne!(u.checksum(), 0, "the capture had a UDP checksum");
    assert_eq!(u.checksum(), u.to_header().calc_checksum_ipv6(&h, u.payload()).unwrap(), "valid per etherparse");
    assert!(ParsedFrame::parse(&out).unwrap().icrc.is_good());
    // A family the frame does not have is refused.
    let e = rewrite(&orig, MAC_Y, MAC_X, A.into(), B.into(), true).unwrap_err().to_string();
    assert!(e.contains("not of the frame's IP family"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Skipping

fn arp() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&MAC_X);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&MAC_X);
    f.extend_from_slice(&A.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&B.octets());
    f.resize(60, 0);
    f
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2(MAC_X, MAC_Y).ipv4(A.octets(), B.octets(), 64).udp(sport, dport);
    let mut v = Vec::new();
    b.write(&mut v, payload).unwrap();
    v
}

#[test]
fn skipped_frames_are_counted_by_reason_in_order_of_first_occurrence() {
    let g = gpus();
    let tcp = {
        let b =
            etherparse::PacketBuilder::ethernet2(MAC_X, MAC_Y).ipv4(A.octets(), B.octets(), 64).tcp(40000, 80, 1, 1000);
        let mut v = Vec::new();
        b.write(&mut v, b"GET").unwrap();
        v
    };
    let v6 = roce("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap(), Opcode::WriteOnly, 1, 64);
    let frames = vec![
        captured(0, v4(A, B, Opcode::WriteFirst, 1)),
        captured(1, arp()),
        captured(2, udp(33333, 53, b"\x12\x34\x01\x00\x00\x01")),
        captured(3, udp(53, 33333, b"\x12\x34\x81\x80\x00\x01")),
        captured(4, v4(B, A, Opcode::Acknowledge, 1)),
        captured(5, tcp),
        captured(6, v6),
        captured(7, udp(50000, 4791, b"\x0a\x00\xff")),
        captured(8, arp()),
        captured(9, v4(A, B, Opcode::WriteLast, 2)),
        CapturedFrame { timestamp: Duration::from_millis(10), linktype: 105, orig_len: 30, data: vec![0; 30] },
    ];
    let p = prepare(&frames, &opts(&g, "host1:gpu0", &[])).unwrap();
    assert_eq!(p.frames.iter().map(|f| f.number).collect::<Vec<_>>(), [1, 10]);
    let r: Vec<_> = p.skipped.iter().map(|s| (s.reason.as_str(), s.frames)).collect();
    assert_eq!(
        r,
        [
            ("not RoCEv2 (ethertype 0x0806)", 2),
            ("not RoCEv2 (UDP port 53)", 2),
            ("sent by another endpoint (192.168.7.2)", 1),
            ("not RoCEv2 (IP protocol 6)", 1),
            ("IPv6 capture into an IPv4 fabric", 1),
            (r[5].0, 1),
            ("not RoCEv2 (link type 105)", 1),
        ]
    );
    // The wire crate's parser names the layer: "BTH truncated: need 12 bytes, have 3".
    assert!(r[5].0.starts_with("malformed RoCEv2: ") && r[5].0.contains("BTH"), "{}", r[5].0);
    let report = Report::new(
        Origin { fabric: "f", file: Path::new("t.pcap"), from: "host1:gpu0" },
        &p,
        Pace::Speed(1.0),
        &Schedule::new(&[], Pace::Topspeed, 1),
        Dilation::REAL_TIME,
        &cls(),
        None,
    );
    let text = control::replay::render_report(&report);
    assert!(
        text.contains(
            "skipped 9 of 11 frames:\n       2  not RoCEv2 (ethertype 0x0806)\n       2  not RoCEv2 (UDP port 53)\n"
        ),
        "{text}"
    );
    // An IPv6-only capture has nothing to replay into an IPv4 fabric.
    let e = prepare(&frames[6..7], &opts(&g, "host1:gpu0", &[])).unwrap_err().to_string();
    assert_eq!(
        e,
        "t.pcap: no IPv4 RoCEv2 frame to replay among its 1 frame (1 of them IPv6 RoCEv2; the fabric is IPv4)"
    );
    // Frames over the fabric's MTU are skipped.
    let big = roce(A.into(), B.into(), Opcode::WriteOnly, 1, 1600);
    let p = prepare(&[captured(0, big)], &opts(&g, "host1:gpu0", &[])).unwrap();
    assert_eq!(p.skipped[0].reason, "IP packet larger than the fabric's MTU (1500 bytes)");
}

// ---------------------------------------------------------------------------------------------
// Snap length

#[test]
fn cut_frames_are_refused_unless_padded() {
    let g = gpus();
    let full = v4(A, B, Opcode::WriteMiddle, 5);
    let cut = |mut f: CapturedFrame| {
        f.data.truncate(80);
        f
    };
    let frames = vec![
        captured(0, v4(A, B, Opcode::WriteFirst, 4)),
        cut(captured(5, full.clone())),
        cut(captured(6, v4(A, B, Opcode::WriteLast, 6))),
        cut(captured(7, v4(B, A, Opcode::WriteOnly, 1))),
    ];
    let e = prepare(&frames, &opts(&g, "host1:gpu0", &[])).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "t.pcap: frame 2: captured 80 of {} bytes (cut by the capture's snap length) (and 1 more such frames); \
             a cut frame cannot be injected: pass --pad to pad it with zeros to its original length",
            full.len()
        )
    );
    // A cut frame that would be skipped anyway is no reason to refuse.
    assert!(prepare(&[frames[0].clone(), frames[3].clone()], &opts(&g, "host1:gpu0", &[])).is_ok());
    let mut o = opts(&g, "host1:gpu0", &[]);
    o.pad = true;
    let p = prepare(&frames, &o).unwrap();
    assert_eq!(p.frames.iter().map(|f| f.padded).collect::<Vec<_>>(), [false, true, true]);
    let f = &p.frames[1].bytes;
    assert_eq!(f.len(), full.len(), "padded to the original length");
    assert_eq!(f[80..f.len() - 4], vec![0; f.len() - 84][..], "with zeros");
    assert!(ParsedFrame::parse(f).unwrap().icrc.is_good(), "the ICRC of a padded frame is computed over it");
    check_headers_v4(f, &full, gpu(&g, "host1:gpu0"), gpu(&g, "host1:gpu1").ip, false);
    assert_eq!(f[14 + 20 + 8..80], full[14 + 20 + 8..80], "the captured bytes kept");
    let r = Report::new(
        Origin { fabric: "f", file: Path::new("t.pcap"), from: "host1:gpu0" },
        &p,
        Pace::Speed(1.0),
        &Schedule::new(&[], Pace::Topspeed, 1),
        Dilation::REAL_TIME,
        &cls(),
        None,
    );
    assert_eq!(r.padded, 2);
    assert!(control::replay::render_report(&r).contains("padded with zeros to the original length: 2"));
}

// ---------------------------------------------------------------------------------------------
// Schedule and pacing

fn ms(v: &[u64]) -> Vec<Duration> {
    v.iter().map(|&m| Duration::from_millis(5000 + m)).collect()
}

#[test]
fn schedules_for_original_speed_pps_topspeed_and_loops() {
    const MS: u64 = 1_000_000;
    let ts = ms(&[0, 5, 12, 20]);
    let s = Schedule::new(&ts, Pace::Speed(1.0), 1);
    assert_eq!(s.offsets_ns, [0, 5 * MS, 12 * MS, 20 * MS]);
    assert_eq!((s.len(), s.duration_ns()), (4, 20 * MS));
    let s = Schedule::new(&ts, Pace::Speed(2.0), 1);
    assert_eq!(s.offsets_ns, [0, 2_500_000, 6 * MS, 10 * MS]);
    let s = Schedule::new(&ts, Pace::Speed(0.5), 1);
    assert_eq!(s.duration_ns(), 40 * MS);
    let s = Schedule::new(&ts, Pace::Pps(1000), 1);
    assert_eq!(s.offsets_ns, [0, MS, 2 * MS, 3 * MS]);
    let s = Schedule::new(&ts, Pace::Topspeed, 3);
    assert_eq!((s.len(), s.duration_ns()), (12, 0));
    // Loops: the next loop starts one mean gap (20 ms / 3) after the last frame.
    let s = Schedule::new(&ts, Pace::Speed(1.0), 3);
    let period = 20 * MS + 20 * MS / 3;
    assert_eq!(s.period_ns, period);
    assert_eq!(s.len(), 12);
    assert_eq!((s.at(3), s.at(4), s.at(5), s.at(11)), (20 * MS, period, period + 5 * MS, 2 * period + 20 * MS));
    assert_eq!((s.frame(4), s.frame(11)), (0, 3));
    assert_eq!(s.duration_ns(), 2 * period + 20 * MS);
    // At a fixed rate the loops continue the rate.
    let s = Schedule::new(&ts, Pace::Pps(1000), 2);
    assert_eq!((s.at(3), s.at(4), s.at(7)), (3 * MS, 4 * MS, 7 * MS));
    // Out-of-order capture timestamps count as simultaneous, never as going back.
    let s = Schedule::new(&ms(&[0, 10, 4, 12]), Pace::Speed(1.0), 1);
    assert_eq!(s.offsets_ns, [0, 10 * MS, 10 * MS, 12 * MS]);
    // One frame: loops follow each other without a gap.
    let s = Schedule::new(&ms(&[7]), Pace::Speed(1.0), 5);
    assert_eq!((s.len(), s.duration_ns()), (5, 0));
}

#[test]
fn timing_error_is_the_mean_absolute_inter_frame_error() {
    let mut t = TimingError::default();
    // Scheduled 0, 10, 20, 30 µs; sent 1, 12, 20, 31 µs: gap errors 1, 2, 1 µs.
    for (s, a) in [(0, 1_000), (10_000, 12_000), (20_000, 20_000), (30_000, 31_000)] {
        t.record(s, a);
    }
    assert_eq!(t.gaps, 3);
    assert!((t.mean_abs_error_ns().unwrap() - 4000.0 / 3.0).abs() < 1e-6);
    assert_eq!(t.max_abs_error_ns, 2000);
    assert!((t.mean_abs_error_pct().unwrap() - 100.0 * 4000.0 / 30_000.0).abs() < 1e-9);
    let mut z = TimingError::default();
    z.record(0, 0);
    z.record(0, 500);
    assert_eq!(z.mean_abs_error_pct(), None, "no scheduled gap to compare with at top speed");
}

#[test]
fn pacing_keeps_an_absolute_schedule_and_stops_at_the_limit() {
    use std::cell::Cell;
    use std::rc::Rc;
    /// A fake clock: waiting jumps to the due time; a send may take time (`advance`).
    struct Fake(Rc<Cell<u64>>);
    impl PaceClock for Fake {
        fn now_ns(&mut self) -> u64 {
            self.0.get()
        }
        fn wait_until_ns(&mut self, t: u64) {
            self.0.set(self.0.get().max(t));
        }
    }
    const GAP: u64 = 2_000_000;
    let ts: Vec<Duration> = (0..40).map(|i| Duration::from_nanos(i * GAP)).collect();
    let s = Schedule::new(&ts, Pace::Speed(1.0), 1);
    let now = Rc::new(Cell::new(0u64));
    let mut sent: Vec<(usize, u64)> = Vec::new();
    let log = pace_with(&s, Duration::from_secs(5), &mut Fake(now.clone()), |i| {
        sent.push((i, now.get()));
        // Every send takes 10 µs; one slow send takes 7 ms.
        now.set(now.get() + if i == 5 { 7_000_000 } else { 10_000 });
        Ok(100)
    });
    assert_eq!((log.sent, log.errors, log.bytes, log.first_len, log.stopped_at_deadline), (40, 0, 4000, 100, false));
    assert_eq!(sent.iter().map(|x| x.0).collect::<Vec<_>>(), (0..40).collect::<Vec<_>>());
    // Frames 6..=8 were due during the slow send and leave at once after it; from frame 9 on
    // every frame leaves exactly on its absolute due time (a schedule relative to the previous
    // send would have shifted them all by 7 ms).
    assert_eq!(sent[6].1, 5 * GAP + 7_000_000);
    for &(i, t) in &sent[9..] {
        assert_eq!(t, i as u64 * GAP, "frame {i}");
    }
    // The slow send shows in the report's error, the rest is on time.
    assert!(log.timing.max_abs_error_ns >= 5_000_000, "{:?}", log.timing);
    assert_eq!(log.duration, Duration::from_nanos(39 * GAP + 10_000));
    // The limit stops a longer schedule: frames due at 0..=20 ms are sent.
    now.set(0);
    let log = pace_with(&s, Duration::from_millis(21), &mut Fake(now.clone()), |_| Ok(1));
    assert!(log.stopped_at_deadline);
    assert_eq!(log.sent, 11);
    // Send errors are counted, the first one kept.
    let log: SendLog = pace(&Schedule::new(&ts[..3], Pace::Topspeed, 1), Duration::from_secs(1), |i| {
        if i == 1 {
            Err(std::io::Error::from_raw_os_error(libc::ENOBUFS))
        } else {
            Ok(10)
        }
    });
    assert_eq!((log.sent, log.errors), (2, 1));
    assert!(log.first_error.unwrap().contains("No buffer space"));
}

// ---------------------------------------------------------------------------------------------
// The command line (a fake run directory; --dry-run needs no fabric and no root)

/// A temporary directory (tempfile), removed on drop.
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("rf-replay-{tag}-")).tempdir().unwrap()
}

/// A run directory holding the state of fabric `fr` (rail-spine.yaml), as `rocefab up` writes it.
fn fake_fabric(dir: &tempfile::TempDir) -> PathBuf {
    fake_fabric_at(dir, 1.0)
}

/// [`fake_fabric`] at time dilation `d`.
fn fake_fabric_at(dir: &tempfile::TempDir, d: f64) -> PathBuf {
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("fr")).unwrap();
    let topo = std::fs::read_to_string(topology_path()).unwrap().replace("fabric: rs", "fabric: fr")
        + &format!("time_dilation: {d}\n");
    std::fs::write(dir.path().join("t.yaml"), topo).unwrap();
    let state = serde_json::json!({"fabric": "fr", "topology": dir.path().join("t.yaml"), "phase": "up",
                                   "namespaces": [], "links": [], "daemons": [],
                                   "clock": {"time_dilation": d, "zero_unix_ns": 1_700_000_000_000_000_000u64}});
    std::fs::write(run.join("fr/state.json"), state.to_string()).unwrap();
    run
}

fn cli(run: &Path, args: &[&str]) -> Output {
    Command::new(BIN).env("ROCEFAB_RUN_DIR", run).args(args).output().unwrap()
}

fn err(o: &Output) -> String {
    assert!(!o.status.success(), "must fail: {}", String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write_capture(path: &Path, frames: &[(u64, Vec<u8>)]) {
    rocefab_wire::pcap::write_all(
        path,
        Format::from_path(path),
        frames.iter().map(|(m, f)| (Duration::from_millis(*m), f.as_slice())),
    )
    .unwrap();
}

#[test]
fn dry_run_prints_the_mapping_and_the_skip_table() {
    let dir = temp_dir("dry");
    let run = fake_fabric(&dir);
    let cap = dir.path().join("c.pcapng");
    write_capture(
        &cap,
        &[
            (0, v4(A, B, Opcode::WriteFirst, 1)),
            (7, arp()),
            (12, v4(B, A, Opcode::Acknowledge, 1)),
            (20, v4(A, B, Opcode::WriteLast, 2)),
        ],
    );
    let c = cap.to_str().unwrap();
    let o = cli(
        &run,
        &["replay", "fr", "--from", "host1:gpu0", c, "--map", "192.168.7.2=host2:gpu1", "--dry-run", "--loop", "2"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let want = format!(
        "replaying {c} (4 frames) from host1:gpu0 on fabric fr: capture endpoint -> fabric GPU\n\
         \x20 192.168.7.1 -> host1:gpu0 10.0.1.1 (sender, --from)\n\
         \x20 192.168.7.2 -> host2:gpu1 10.0.2.2 (--map)\n\
         dry run: would send 4 frames (2 per loop, 2 loops) over 60.000 ms (original timing)\n\
         frames by traffic class at rail1 (DSCP -> queue and PFC priority):\n\
         \x20      4  queue 0 lossy     capture DSCP 26, fabric DSCP 0-23,25-47,49-63\n\
         \x20      0  queue 3 lossless  capture DSCP -, fabric DSCP 24\n\
         ICRC was bad in the capture: 0 (kept bad; every other ICRC recomputed after rewriting)\n\
         skipped 2 of 4 frames:\n\
         \x20      1  not RoCEv2 (ethertype 0x0806)\n\
         \x20      1  sent by another endpoint (192.168.7.2)\n\
         warning: no frame is in a lossless (PFC) class at rail1: the capture's DSCPs (26) map to lossy queues; \
         the fabric's lossless classes are priority 3 = DSCP 24\n"
    );
    assert_eq!(out, want);
    // The only running fabric is the default; --json puts the mapping on stderr.
    let o = cli(&run, &["replay", "--from", "host1:gpu0", c, "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["dry_run"], true);
    assert_eq!(j["frames_to_inject"], 2);
    assert_eq!(j["mapping"][1]["gpu"], "host1:gpu1");
    assert_eq!(j["mapping"][1]["how"], "auto");
    assert_eq!(j["skipped"][1]["reason"], "sent by another endpoint (192.168.7.2)");
    assert!(String::from_utf8_lossy(&o.stderr).contains("192.168.7.2 -> host1:gpu1 10.0.2.1 (next GPU in rank order)"));
}

#[test]
fn argument_errors() {
    let dir = temp_dir("args");
    let run = fake_fabric(&dir);
    let cap = dir.path().join("c.pcap");
    write_capture(&cap, &[(0, v4(A, B, Opcode::WriteOnly, 1)), (2000, v4(A, B, Opcode::WriteOnly, 2))]);
    let c = cap.to_str().unwrap();
    let base = |extra: &[&str]| {
        let mut a = vec!["replay", "fr", "--from", "host1:gpu0", c, "--dry-run"];
        a.extend_from_slice(extra);
        cli(&run, &a)
    };
    for (extra, needle) in [
        (&["--speed", "0"][..], "must be above 0"),
        (&["--speed", "fast"][..], "\"fast\" is not a number"),
        (&["--speed", "2", "--pps", "10"][..], "cannot be used with"),
        (&["--pps", "10", "--topspeed"][..], "cannot be used with"),
        (&["--pps", "0"][..], "--pps <N>"),
        (&["--loop", "0"][..], "--loop <N>"),
        (&["--max-duration", "10x"][..], "unknown time unit \"x\""),
        (&["--map", "192.168.7.2"][..], "is not CAPTURE_IP=HOST:GPU"),
        (&["--map", "nope=host1:gpu1"][..], "is not an IP address"),
        (&["--map", "192.168.7.2=host1"][..], "is not HOST:GPU"),
        (&["--map", "192.168.7.2=host7:gpu0"][..], "host7:gpu0: no such GPU"),
    ] {
        let e = err(&base(extra));
        assert!(e.contains(needle), "{extra:?}: {e}");
    }
    // The schedule (2 s here) is bounded by --max-duration, loops included.
    let e = err(&base(&["--max-duration", "1s"]));
    assert!(
        e.contains(
            "the schedule takes 2.000 s (2 frames, original timing, 1 loop), longer than --max-duration 1.000 s"
        ),
        "{e}"
    );
    let e = err(&base(&["--loop", "400"]));
    assert!(e.contains("longer than --max-duration 600.000 s"), "{e}");
    assert!(base(&["--loop", "400", "--speed", "10"]).status.success());
    assert!(base(&["--loop", "400", "--topspeed"]).status.success());
    // Wrong --from, a missing file, no --from, too many positionals, an unknown fabric.
    let e = err(&cli(&run, &["replay", "fr", "--from", "host1:gpu9", c, "--dry-run"]));
    assert!(e.contains("--from host1:gpu9: no such GPU (have host1:gpu0, host1:gpu1, host2:gpu0"), "{e}");
    let e = err(&cli(&run, &["replay", "fr", "--from", "host1:gpu0", "/nonexistent.pcap", "--dry-run"]));
    assert!(e.contains("/nonexistent.pcap"), "{e}");
    let e = err(&cli(&run, &["replay", "fr", c]));
    assert!(e.contains("--from <HOST:GPU>"), "{e}");
    let e = err(&cli(&run, &["replay", "fr", "--from", "host1:gpu0", c, c]));
    assert!(e.contains("expected [FABRIC] CAPTURE, got 3 arguments: fr "), "{e}");
    let e = err(&cli(&run, &["replay", "nofab", "--from", "host1:gpu0", c, "--dry-run"]));
    assert!(e.contains("fabric \"nofab\" is not up"), "{e}");
    let empty = dir.path().join("empty-run");
    std::fs::create_dir_all(&empty).unwrap();
    let e = err(&cli(&empty, &["replay", "--from", "host1:gpu0", c, "--dry-run"]));
    assert!(e.contains("no fabric is running"), "{e}");
}

#[test]
fn the_report_gives_rate_timing_and_skips() {
    let g = gpus();
    let frames = vec![
        captured(0, v4(A, B, Opcode::WriteFirst, 1)),
        captured(3, arp()),
        captured(10, v4(A, B, Opcode::WriteLast, 2)),
    ];
    let p = prepare(&frames, &opts(&g, "host1:gpu0", &[])).unwrap();
    let s = Schedule::new(&[Duration::from_millis(0), Duration::from_millis(10)], Pace::Speed(1.0), 6);
    let mut timing = TimingError::default();
    for (k, err) in [0u64, 2_000, 0, 1_000, 0, 0, 500, 0, 0, 0, 0, 0].iter().enumerate() {
        timing.record(s.at(k as u64), s.at(k as u64) + err);
    }
    let log = SendLog {
        sent: 12,
        bytes: 12 * 300,
        first_len: 300,
        duration: Duration::from_millis(110),
        timing,
        ..Default::default()
    };
    let r = Report::new(
        Origin { fabric: "rs", file: Path::new("c.pcap"), from: "host1:gpu0" },
        &p,
        Pace::Speed(1.0),
        &s,
        Dilation::REAL_TIME,
        &cls(),
        Some(&log),
    );
    assert!((r.rate_pps - 100.0).abs() < 1e-9, "11 frames after the first in 110 ms: {}", r.rate_pps);
    assert!((r.rate_mbps - 0.24).abs() < 1e-9, "11 × 300 bytes in 110 ms: {}", r.rate_mbps);
    let t = r.timing.as_ref().unwrap();
    assert_eq!((t.gaps, t.max_abs_error_ns), (11, 2_000));
    let text = control::replay::render_report(&r);
    assert_eq!(
        text,
        "sent 12 frames (3600 bytes) in 110.000 ms: 100.0 frames/s, 0.240 Mbit/s (original timing, 6 loops)\n\
         timing error at the sender vs the schedule: mean 636 ns per gap (0.006 % of the mean scheduled gap 10.000 ms), max 2.000 us\n\
         frames by traffic class at rail1 (DSCP -> queue and PFC priority):\n\
         \x20     12  queue 0 lossy     capture DSCP 26, fabric DSCP 0-23,25-47,49-63\n\
         \x20      0  queue 3 lossless  capture DSCP -, fabric DSCP 24\n\
         ICRC was bad in the capture: 0 (kept bad; every other ICRC recomputed after rewriting)\n\
         skipped 1 of 3 frames:\n\
         \x20      1  not RoCEv2 (ethertype 0x0806)\n\
         warning: no frame is in a lossless (PFC) class at rail1: the capture's DSCPs (26) map to lossy queues; \
         the fabric's lossless classes are priority 3 = DSCP 24\n"
    );
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["timing"]["max_abs_error_ns"], 2000);
    assert_eq!(j["sent"], 12);
    assert_eq!(j["skipped"][0]["reason"], "not RoCEv2 (ethertype 0x0806)");
}

#[test]
fn at_a_time_dilation_the_schedule_is_stretched_and_the_report_is_emulated() {
    // Emulated gaps of 10 us at D 1000 are 10 ms on the wall clock.
    let us = |v: &[u64]| v.iter().map(|&t| Duration::from_micros(t)).collect::<Vec<_>>();
    let d = Dilation::new(1000.0).unwrap();
    let s = Schedule::new(&us(&[0, 10, 20, 30]), Pace::Speed(1.0), 2);
    let w = s.dilated(d);
    assert_eq!(w.offsets_ns, [0, 10_000_000, 20_000_000, 30_000_000]);
    assert_eq!((w.period_ns, w.loops, w.duration_ns()), (40_000_000, 2, 70_000_000));
    assert_eq!(s.dilated(Dilation::REAL_TIME), s);
    // --pps is per emulated second: 100 000 frames/s at D 1000 are 100 frames per wall second.
    assert_eq!(
        Schedule::new(&us(&[0, 1, 2]), Pace::Pps(100_000), 1).dilated(d).offsets_ns,
        [0, 10_000_000, 20_000_000]
    );

    // What the sender did on the wall clock: 8 frames of 300 bytes over 70 ms, each gap 1 ms
    // late except the last, which was on time.
    let g = gpus();
    let frames = vec![captured(0, v4(A, B, Opcode::WriteFirst, 1)), captured(10, v4(A, B, Opcode::WriteLast, 2))];
    let p = prepare(&frames, &opts(&g, "host1:gpu0", &[])).unwrap();
    let mut timing = TimingError::default();
    for k in 0..8u64 {
        timing.record(w.at(k), w.at(k) + if k == 7 { 6_000_000 } else { k * 1_000_000 });
    }
    let log = SendLog {
        sent: 8,
        bytes: 8 * 300,
        first_len: 300,
        duration: Duration::from_millis(70),
        timing,
        ..Default::default()
    };
    let r = Report::new(
        Origin { fabric: "rs", file: Path::new("c.pcap"), from: "host1:gpu0" },
        &p,
        Pace::Speed(1.0),
        &s,
        d,
        &cls(),
        Some(&log),
    );
    assert_eq!(r.time_dilation, 1000.0);
    assert!((r.duration_s - 70e-6).abs() < 1e-15 && (r.wall_duration_s - 0.07).abs() < 1e-12, "{r:?}");
    assert!((r.scheduled_duration_s - 70e-6).abs() < 1e-15, "{r:?}");
    assert!((r.rate_pps - 100_000.0).abs() < 1e-6, "7 frames after the first in 70 us emulated: {}", r.rate_pps);
    assert!((r.rate_mbps - 240.0).abs() < 1e-6, "7 × 300 bytes in 70 us emulated: {}", r.rate_mbps);
    let t = r.timing.as_ref().unwrap();
    assert_eq!((t.gaps, t.max_abs_error_ns), (7, 1_000), "1 ms late on the wall clock is 1 us emulated");
    assert!(
        (t.mean_scheduled_gap_ns - 10_000.0).abs() < 1e-9 && (t.mean_abs_error_ns - 6_000.0 / 7.0).abs() < 1e-9,
        "{t:?}"
    );
    let text = control::replay::render_report(&r);
    assert!(
        text.starts_with(
            "sent 8 frames (2400 bytes) in 70.000 us emulated (70.000 ms wall clock at time_dilation 1000): 100000.0 frames/s, 240.000 Mbit/s (emulated) (original timing, 2 loops)\n\
             timing error at the sender vs the schedule (emulated): mean 857 ns per gap (8.571 % of the mean scheduled gap 10.000 us), max 1.000 us\n"
        ),
        "{text}"
    );
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!((j["time_dilation"].as_f64(), j["wall_duration_s"].as_f64()), (Some(1000.0), Some(0.07)));
}

#[test]
fn at_a_time_dilation_max_duration_bounds_the_wall_clock() {
    let dir = temp_dir("dilated");
    let run = fake_fabric_at(&dir, 1000.0);
    let cap = dir.path().join("c.pcap");
    write_capture(&cap, &[(0, v4(A, B, Opcode::WriteOnly, 1)), (2, v4(A, B, Opcode::WriteOnly, 2))]);
    let c = cap.to_str().unwrap();
    let replay = |extra: &[&str]| {
        let mut a = vec!["replay", "fr", "--from", "host1:gpu0", c, "--dry-run"];
        a.extend_from_slice(extra);
        cli(&run, &a)
    };
    // 2 ms apart in the capture: 2 s on the wall clock at D 1000.
    let o = replay(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("dry run: would send 2 frames (2 per loop, 1 loop) over 2.000 ms emulated (2.000 s wall clock at time_dilation 1000) (original timing)"), "{out}");
    let e = err(&replay(&["--max-duration", "1s"]));
    assert!(
        e.contains("the schedule takes 2.000 s on the wall clock (2.000 ms emulated at time_dilation 1000) (2 frames, original timing, 1 loop), longer than --max-duration 1.000 s"),
        "{e}"
    );
    assert!(replay(&["--max-duration", "1s", "--speed", "4"]).status.success());
    let o = replay(&["--pps", "1000000", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((j["time_dilation"].as_f64(), j["scheduled_duration_s"].as_f64()), (Some(1000.0), Some(1e-6)), "{j}");
}

#[test]
fn a_frame_whose_ip_length_does_not_cover_its_headers_is_refused_not_a_panic() {
    // IPv4 total length 0 (a TSO capture) or 10, above a UDP/BTH/ICRC body.
    for total in [0u16, 10, 27] {
        let mut f = vec![0u8; 14 + 20 + 8 + 12 + 4];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[23] = 17;
        f[36..38].copy_from_slice(&4791u16.to_be_bytes());
        let e =
            rewrite(&f, [2; 6], [4; 6], "10.0.1.1".parse().unwrap(), "10.0.2.2".parse().unwrap(), true).unwrap_err();
        assert!(e.to_string().contains("need 42 bytes"), "total length {total}: {e}");
    }
}

// ---- where the frames go: traffic classes, VLAN tags, gaps the fabric cannot keep ----

/// `frame` with an 802.1Q tag (PCP `pcp`, VID `vid`) after its MAC addresses.
fn tag(frame: &[u8], pcp: u8, vid: u16) -> Vec<u8> {
    let tci = (u16::from(pcp) << 13) | vid;
    let mut t = frame[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00]);
    t.extend_from_slice(&tci.to_be_bytes());
    t.extend_from_slice(&frame[12..]);
    t
}

fn json_of(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn dry_run_works_from_the_topology_file_alone() {
    let dir = temp_dir("dry-topo");
    // No fabric runs: an empty run directory.
    let run = dir.path().join("empty-run");
    std::fs::create_dir_all(&run).unwrap();
    let topo = std::fs::read_to_string(topology_path()).unwrap() + "time_dilation: 1000\n";
    let t = dir.path().join("rsd.yaml");
    std::fs::write(&t, topo).unwrap();
    let cap = dir.path().join("c.pcap");
    write_capture(&cap, &[(0, v4(A, B, Opcode::WriteFirst, 1)), (20, v4(A, B, Opcode::WriteLast, 2))]);
    let (c, ts) = (cap.to_str().unwrap(), t.to_str().unwrap());
    let want = format!(
        "replaying {c} (2 frames) from host1:gpu0 on fabric rs: capture endpoint -> fabric GPU\n\
         \x20 192.168.7.1 -> host1:gpu0 10.0.1.1 (sender, --from)\n\
         \x20 192.168.7.2 -> host1:gpu1 10.0.2.1 (next GPU in rank order)\n\
         dry run: would send 2 frames (2 per loop, 1 loop) over 20.000 ms emulated (20.000 s wall clock at time_dilation 1000) (original timing)\n"
    );
    for args in [
        vec!["replay", "--topology", ts, "--from", "host1:gpu0", c, "--dry-run"],
        vec!["replay", ts, "--from", "host1:gpu0", c, "--dry-run"],
    ] {
        let o = cli(&run, &args);
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.starts_with(&want), "{args:?}:\n{out}");
    }
    // Sending needs the fabric; without --topology the error says how a dry run does without one.
    let e = err(&cli(&run, &["replay", "--topology", ts, "--from", "host1:gpu0", c]));
    assert!(e.contains("--dry-run"), "{e}");
    let e = err(&cli(&run, &["replay", ts, "--from", "host1:gpu0", c]));
    assert!(e.contains("only a dry run works from a topology file"), "{e}");
    let e = err(&cli(&run, &["replay", "--from", "host1:gpu0", c, "--dry-run"]));
    assert!(e.contains("no fabric is running") && e.contains("--topology FILE"), "{e}");
}

/// Issue 38: a capture with a corrupted timestamp is refused naming the frame (Wireshark's
/// number), its timestamp and what is wrong, not only the file.
#[test]
fn a_dry_run_names_the_frame_whose_timestamp_is_corrupted() {
    let dir = temp_dir("dry-badts");
    let run = dir.path().join("empty-run");
    std::fs::create_dir_all(&run).unwrap();
    let cap = dir.path().join("c.pcap");
    write_capture(
        &cap,
        &[
            (0, v4(A, B, Opcode::WriteFirst, 1)),
            (20, v4(A, B, Opcode::WriteMiddle, 2)),
            (40, v4(A, B, Opcode::WriteLast, 3)),
        ],
    );
    // Frame 3's fraction (the second word of its record header) set past 1 s, in the file's
    // byte order (its magic says which) and resolution.
    let mut bytes = std::fs::read(&cap).unwrap();
    let big = matches!(bytes[..4], [0xa1, 0xb2, ..]);
    let nano = matches!(bytes[..4], [0xa1, 0xb2, 0x3c, 0x4d] | [0x4d, 0x3c, 0xb2, 0xa1]);
    let word = |b: &[u8], at: usize| {
        let w: [u8; 4] = b[at..at + 4].try_into().unwrap();
        if big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let at = (0..2).fold(24, |at, _| at + 16 + word(&bytes, at + 8) as usize);
    let sec = word(&bytes, at);
    let (frac, unit) = if nano { (4_000_000_000u32, "ns") } else { (4_000_000, "µs") };
    let w = if big { frac.to_be_bytes() } else { frac.to_le_bytes() };
    bytes[at + 4..at + 8].copy_from_slice(&w);
    std::fs::write(&cap, &bytes).unwrap();
    let (c, ts) = (cap.to_str().unwrap(), topology_path());
    let e = err(&cli(&run, &["replay", "--topology", ts.to_str().unwrap(), "--from", "host1:gpu0", c, "--dry-run"]));
    assert!(
        e.contains(&format!("{c}: frame 3: timestamp {sec} s + {frac} {unit}: the fraction is 1 s or more")),
        "{e}"
    );
}

#[test]
fn the_report_counts_frames_per_traffic_class_and_warns_when_no_lossless_class_is_used() {
    let dir = temp_dir("classes");
    let run = fake_fabric(&dir);
    let t = |d: u8, psn: u32| roce_dscp(A.into(), B.into(), Opcode::WriteOnly, psn, 100, d);
    // rxe sends DSCP 0: every frame in lossy queue 0.
    let rxe = dir.path().join("rxe.pcap");
    write_capture(&rxe, &[(0, t(0, 1)), (1, t(0, 2)), (2, t(0, 3))]);
    let j = json_of(&cli(
        &run,
        &["replay", "fr", "--from", "host1:gpu0", rxe.to_str().unwrap(), "--dry-run", "--json", "--loop", "2"],
    ));
    assert_eq!(j["classifier"]["switch"], "rail1");
    let tcs = j["traffic_classes"].as_array().unwrap();
    let row = |tc: u64| tcs.iter().find(|c| c["tc"] == tc).unwrap_or_else(|| panic!("no class {tc}: {tcs:?}"));
    assert_eq!((row(0)["frames"].as_u64(), row(0)["lossless"].as_bool()), (Some(6), Some(false)));
    assert_eq!(row(0)["dscps"], serde_json::json!([0]));
    assert_eq!((row(3)["frames"].as_u64(), row(3)["lossless"].as_bool()), (Some(0), Some(true)));
    assert_eq!(row(3)["fabric_dscps"], serde_json::json!([24]));
    let w = j["warnings"].to_string();
    assert!(
        w.contains("no frame is in a lossless (PFC) class at rail1: the capture's DSCPs (0) map to lossy queues"),
        "{w}"
    );
    // RoCEv2 at DSCP 24 and CNPs at DSCP 48: queue 3 (lossless) and queue 7; no warning.
    let nic = dir.path().join("nic.pcap");
    write_capture(&nic, &[(0, t(24, 1)), (1, t(24, 2)), (2, t(48, 3)), (3, t(0, 4))]);
    let o = cli(&run, &["replay", "fr", "--from", "host1:gpu0", nic.to_str().unwrap(), "--dry-run"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "frames by traffic class at rail1 (DSCP -> queue and PFC priority):\n\
             \x20      1  queue 0 lossy     capture DSCP 0, fabric DSCP 0-23,25-47,49-63\n\
             \x20      2  queue 3 lossless  capture DSCP 24, fabric DSCP 24\n\
             \x20      1  queue 7 lossy     capture DSCP 48, fabric DSCP 48\n"
        ),
        "{out}"
    );
    assert!(!out.contains("warning"), "{out}");
}

#[test]
fn vlan_tags_stripped_are_reported_with_the_priority_the_frames_took() {
    let dir = temp_dir("vlan");
    let run = fake_fabric(&dir);
    let f = |d: u8, psn: u32| roce_dscp(A.into(), B.into(), Opcode::WriteOnly, psn, 100, d);
    // PCP 3 with DSCP 0 (a fabric classifying by PCP would have made these lossless), PCP 5 with
    // DSCP 24, and an untagged frame.
    let cap = dir.path().join("v.pcap");
    write_capture(
        &cap,
        &[(0, tag(&f(0, 1), 3, 100)), (1, tag(&f(0, 2), 3, 100)), (2, tag(&f(24, 3), 5, 7)), (3, f(0, 4))],
    );
    let c = cap.to_str().unwrap();
    let j = json_of(&cli(&run, &["replay", "fr", "--from", "host1:gpu0", c, "--dry-run", "--json"]));
    assert_eq!(j["frames_to_inject"], 4);
    assert_eq!(
        j["vlan_stripped"],
        serde_json::json!([
            {"vid": 7, "pcp": 5, "tags": 1, "dscp": 24, "tc": 3, "frames": 1},
            {"vid": 100, "pcp": 3, "tags": 1, "dscp": 0, "tc": 0, "frames": 2},
        ])
    );
    let o = cli(&run, &["replay", "fr", "--from", "host1:gpu0", c, "--dry-run"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("  VLAN stripped:      2  vid 100 pcp 3 -> queue 0 by DSCP 0\n"), "{out}");
    assert!(
        out.contains(
            "warning: 3 frames had a VLAN tag, stripped: the fabric's ports are untagged and classify by DSCP, not PCP \
             (vid 7 pcp 5 -> priority 3 (DSCP 24), vid 100 pcp 3 -> priority 0 (DSCP 0))"
        ),
        "{out}"
    );
    // Untagged captures say nothing about VLANs.
    let plain = dir.path().join("p.pcap");
    write_capture(&plain, &[(0, f(24, 1))]);
    let o = cli(&run, &["replay", "fr", "--from", "host1:gpu0", plain.to_str().unwrap(), "--dry-run"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("VLAN"));
}

#[test]
fn gaps_the_fabric_cannot_reproduce_warn_with_the_time_dilation_that_would() {
    // Gaps of 30, 33, ..., 327 us from host1:gpu0 to host2:gpu1 (rail1 -> spine -> rail2: 3
    // hops): at D 1 every gap is below the 600 us the fabric reproduces; D 15 keeps the 5th
    // percentile gap (42 us).
    let dir = temp_dir("gaps");
    let mut frames = Vec::new();
    let mut t_us = 0u64;
    for i in 0..101u32 {
        frames.push((t_us, roce_dscp(A.into(), B.into(), Opcode::WriteOnly, i, 100, 24)));
        t_us += 30 + 3 * u64::from(i);
    }
    let cap = dir.path().join("g.pcap");
    rocefab_wire::pcap::write_all(
        &cap,
        Format::Pcap,
        frames.iter().map(|(us, f)| (Duration::from_micros(*us), f.as_slice())),
    )
    .unwrap();
    let c = cap.to_str().unwrap();
    let run = fake_fabric(&dir);
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut a: Vec<String> =
            ["replay", "fr", "--from", "host1:gpu0", c, "--map", "192.168.7.2=host2:gpu1", "--dry-run"]
                .iter()
                .map(|x| x.to_string())
                .collect();
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    let o = Command::new(BIN).env("ROCEFAB_RUN_DIR", &run).args(args(&[])).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "warning: 100 of 100 gaps of the capture are below the 600.000 us the fabric reproduces at time_dilation 1 \
             (3 hops x 20.000 us per frame on the wall clock, within 10 %): the timing at the receiver will not follow the capture; \
             time_dilation 15 reproduces the 5th-percentile gap (42.000 us)"
        ),
        "{out}"
    );
    let j = json_of(&Command::new(BIN).env("ROCEFAB_RUN_DIR", &run).args(args(&["--json"])).output().unwrap());
    assert_eq!(j["gap_warning"]["needed_time_dilation"], 15.0);
    // On one rail switch (host2:gpu0 on rail1, 1 hop) 200 us are reproduced at D 1: D 4.8 for 42 us.
    let o = cli(&run, &["replay", "fr", "--from", "host1:gpu0", c, "--map", "192.168.7.2=host2:gpu0", "--dry-run"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("(1 hop x 20.000 us per frame on the wall clock, within 10 %)")
            && String::from_utf8_lossy(&o.stdout).contains("time_dilation 4.8 reproduces"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // At the D it names, no warning.
    let dir15 = temp_dir("gaps15");
    let run15 = fake_fabric_at(&dir15, 15.0);
    let o = Command::new(BIN).env("ROCEFAB_RUN_DIR", &run15).args(args(&[])).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("warning"), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn enqueued_frames_per_queue_leave_out_the_port_to_the_sender() {
    let text = "# HELP rocefab_queue_enqueued_packets_total Frames enqueued on the egress queue\n\
                rocefab_queue_enqueued_packets_total{port=\"eth1\",queue=\"0\"} 7\n\
                rocefab_queue_enqueued_packets_total{port=\"eth1\",queue=\"3\"} 5\n\
                rocefab_queue_enqueued_packets_total{port=\"eth5\",queue=\"3\"} 40\n\
                rocefab_queue_enqueued_packets_total{port=\"eth6\",queue=\"3\"} 2\n\
                rocefab_queue_enqueued_packets_total{port=\"eth6\",queue=\"7\"} 1\n\
                rocefab_queue_enqueued_bytes_total{port=\"eth6\",queue=\"7\"} 100\n";
    assert_eq!(control::replay::enqueued_per_queue(text, "eth1"), [0, 0, 0, 42, 0, 0, 0, 1]);
    assert_eq!(control::replay::enqueued_per_queue(text, "eth9"), [7, 0, 0, 47, 0, 0, 0, 1]);
}
