//! `rocefab frame` → pcap → tshark (independent decoder) and `rocefab pcap show --json` must
//! agree on every field; malformed frames and bad options give precise errors.
//! tshark missing -> the tests fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use rocefab_test_support::tshark::num;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rocefab");

/// A temporary directory (tempfile), removed on drop.
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("rf-roce-cli-{tag}-")).tempdir().unwrap()
}

fn rocefab(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run rocefab")
}

fn rocefab_ok(args: &[&str]) -> String {
    let o = rocefab(args);
    assert!(o.status.success(), "rocefab {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn frame(kind: &str, args: &[&str], out: &Path) {
    let mut a = vec!["frame", kind];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-w", out.to_str().unwrap()]);
    rocefab_ok(&a);
}

/// Values of `fields` for every frame (occurrences joined by ',').
fn tshark(file: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let frames = rocefab_test_support::tshark::read(file).disable("rpcordma").all(fields);
    frames.into_iter().map(|f| f.into_iter().map(|occurrences| occurrences.join(",")).collect()).collect()
}

fn show_json(file: &Path, extra: &[&str]) -> Vec<Value> {
    let mut a = vec!["pcap", "show", "--json", file.to_str().unwrap()];
    a.extend_from_slice(extra);
    rocefab_ok(&a).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

fn pause_ns(quanta: u64, bps: u64) -> u64 {
    (quanta * 512 * 1_000_000_000).div_ceil(bps)
}

#[test]
fn pfc_frames_match_tshark_and_show() {
    let d = temp_dir("pfc");
    let f = d.path().join("pfc.pcap");
    frame("pfc", &["--priorities", "3", "--quanta", "0xffff", "--src-mac", "02:00:00:00:00:01"], &f);
    let t = tshark(
        &f,
        &["eth.src", "eth.dst", "macc.opcode", "macc.cbfc.enbv", "macc.cbfc.pause_time.c3", "macc.cbfc.pause_time.c4"],
    );
    assert_eq!(t, vec![vec!["02:00:00:00:00:01", "01:80:c2:00:00:01", "0x0101", "0x0008", "65535", "0"]]);
    let j = &show_json(&f, &["--speed", "400G"])[0];
    assert_eq!(j["kind"], "pfc");
    assert_eq!(j["cev"], num(&t[0][3]));
    assert_eq!(j["quanta"][3], num(&t[0][4]));
    assert_eq!(j["priorities"][0]["pause_ns"], pause_ns(65535, 400_000_000_000));

    // Per-priority quanta, pcapng output, --count.
    let g = d.path().join("pfc2.pcapng");
    frame("pfc", &["--quanta", "3=0xffff", "--quanta", "4=100", "--count", "2"], &g);
    let t = tshark(&g, &["macc.cbfc.enbv", "macc.cbfc.pause_time.c3", "macc.cbfc.pause_time.c4"]);
    assert_eq!(t.len(), 2);
    assert_eq!(t[0], vec!["0x0018", "65535", "100"]);
    let j = show_json(&g, &["--speed", "100G"]);
    assert_eq!(j.len(), 2);
    assert_eq!(j[1]["enabled"], serde_json::json!([3, 4]));
    assert_eq!(j[1]["quanta"][4], 100);
    assert_eq!(j[1]["priorities"][1]["pause_ns"], pause_ns(100, 100_000_000_000));
}

#[test]
fn pause_frame_matches_tshark_and_show() {
    let d = temp_dir("pause");
    let f = d.path().join("pause.pcap");
    frame("pause", &["--quanta", "100"], &f);
    let t = tshark(&f, &["macc.opcode", "macc.pause_time"]);
    assert_eq!(t, vec![vec!["0x0001", "100"]]);
    let j = &show_json(&f, &["--speed", "1G"])[0];
    assert_eq!(
        (j["kind"].as_str(), j["quanta"].as_u64(), j["pause_ns"].as_u64()),
        (Some("pause"), Some(100), Some(51_200))
    );
}

#[test]
fn lldp_dcbx_frame_matches_tshark_and_show() {
    let d = temp_dir("lldp");
    let f = d.path().join("l.pcap");
    frame(
        "lldp",
        &[
            "--chassis-mac",
            "02:00:00:00:00:01",
            "--port-id",
            "eth1",
            "--pfc-enable",
            "3",
            "--app",
            "udp:4791=3",
            "--app",
            "dscp:24=3",
            "--ets-bw",
            "0:50,3:50",
        ],
        &f,
    );
    let fields = [
        "lldp.chassis.id.mac",
        "lldp.port.id",
        "lldp.time_to_live",
        "lldp.dcbx.feature.pfc.prio3",
        "lldp.dcbx.feature.pfc.prio4",
        "lldp.dcbx.ieee.pfc.numtcs",
        "lldp.dcbx.feature.pg.per0",
        "lldp.dcbx.feature.pg.per3",
        "lldp.dcbx.ieee.ets.tsa3",
        "lldp.dcbx.ieee.app.prio",
        "lldp.dcbx.iee.app.sf",
        "lldp.dcbx.feature.app.proto",
    ];
    let t = &tshark(&f, &fields)[0];
    assert_eq!(
        t,
        &vec!["02:00:00:00:00:01", "eth1", "120", "1", "0", "8", "50", "50", "2", "3,3", "3,5", "0x12b7,0x0018"]
    );
    let j = &show_json(&f, &[])[0];
    assert_eq!(j["kind"], "lldp");
    let l = &j["lldp"];
    assert_eq!(l["ttl"], 120);
    let s = l.to_string();
    assert!(s.contains("02:00:00:00:00:01") && s.contains("eth1"), "{s}");
    let tlvs = l["tlvs"].as_array().unwrap();
    assert_eq!(tlvs.len(), 3, "{s}");
    // ETS bandwidth, PFC enable and the APP entries as tshark saw them.
    assert!(s.contains("[50,0,0,50,0,0,0,0]"), "{s}");
    assert!(s.contains("4791") && s.contains("\"protocol\":24"), "{s}");
}

const ROCE_FIELDS: &[&str] = &[
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "ip.dsfield.dscp",
    "ip.dsfield.ecn",
    "ipv6.tclass.dscp",
    "udp.dstport",
    "infiniband.invariant.crc",
];

fn check_roce(t: &[String], j: &Value) {
    assert_eq!(j["kind"], "roce");
    let b = &j["bth"];
    assert_eq!(num(&t[0]), b["opcode"].as_u64().unwrap());
    assert_eq!(num(&t[1]), b["dest_qp"].as_u64().unwrap());
    assert_eq!(num(&t[2]), b["psn"].as_u64().unwrap());
    assert_eq!(t[3] == "1", b["ack_req"].as_bool().unwrap());
    if j["reth"].is_null() {
        assert_eq!(t[4], "");
    } else {
        assert_eq!(num(&t[4]), j["reth"]["va"].as_u64().unwrap());
        assert_eq!(num(&t[5]), j["reth"]["r_key"].as_u64().unwrap());
        assert_eq!(num(&t[6]), j["reth"]["dma_len"].as_u64().unwrap());
    }
    if j["aeth"].is_null() {
        assert_eq!(t[7], "");
    } else {
        assert_eq!(num(&t[7]), j["aeth"]["syndrome"].as_u64().unwrap());
        assert_eq!(num(&t[8]), j["aeth"]["msn"].as_u64().unwrap());
    }
    if j["ip"]["version"] == 4 {
        assert_eq!(num(&t[9]), j["ip"]["dscp"].as_u64().unwrap());
        assert_eq!(num(&t[10]), j["ip"]["ecn"].as_u64().unwrap());
    } else {
        assert_eq!(num(&t[11]), j["ip"]["dscp"].as_u64().unwrap());
    }
    assert_eq!(num(&t[12]), 4791);
    let icrc = &j["icrc"];
    if b["opcode"] == 0x81 {
        // Wireshark 4.0 does not know the CNP opcode and stops after the BTH (no ICRC field);
        // the scapy oracle in rocefab-wire checks CNP ICRCs.
        assert_eq!(t[13], "");
        return;
    }
    // As Wireshark's "Invariant CRC": the wire bytes read big-endian.
    let ours = icrc.get("value").or_else(|| icrc.get("found")).unwrap().as_u64().unwrap() as u32;
    assert_eq!(num(&t[13]) as u32, ours, "ICRC in Wireshark's byte order");
}

#[test]
fn roce_frames_match_tshark_and_show() {
    let d = temp_dir("roce");
    type Check = Box<dyn Fn(&Value)>;
    let cases: Vec<(&str, Vec<&str>, Check)> = vec![
        (
            "roce",
            vec![
                "--opcode",
                "write-only",
                "--qp",
                "0x12",
                "--psn",
                "100",
                "--dscp",
                "24",
                "--ecn",
                "ect0",
                "--len",
                "256",
                "--src-ip",
                "10.0.0.1",
                "--dst-ip",
                "10.0.0.2",
                "--count",
                "3",
                "--va",
                "0xdead0000",
                "--rkey",
                "0x77",
            ],
            Box::new(|j: &Value| {
                assert_eq!(j["bth"]["opcode_name"], "write-only");
                assert_eq!(j["reth"]["dma_len"], 256);
                assert_eq!(j["reth"]["va"], 0xdead0000u64);
                assert_eq!(j["payload_len"], 256);
                assert_eq!(j["ip"]["ecn_name"], "ect0");
            }),
        ),
        (
            "roce",
            vec![
                "--opcode",
                "write-first",
                "--qp",
                "0xabcdef",
                "--psn",
                "0xfffffe",
                "--len",
                "1000",
                "--dma-len",
                "4000",
                "--src-ip",
                "fd00::1",
                "--dst-ip",
                "fd00::2",
                "--dscp",
                "26",
                "--ack-req",
            ],
            Box::new(|j: &Value| {
                assert_eq!(j["ip"]["version"], 6);
                assert_eq!(j["reth"]["dma_len"], 4000);
                assert_eq!(j["bth"]["ack_req"], true);
            }),
        ),
        (
            "roce",
            vec!["--opcode", "write-middle", "--psn", "5", "--len", "1024"],
            Box::new(|j: &Value| assert!(j["reth"].is_null())),
        ),
        (
            "roce",
            vec!["--opcode", "write-last", "--psn", "6", "--len", "13", "--ecn", "ce"],
            Box::new(|j: &Value| {
                assert_eq!(j["bth"]["pad_count"], 3);
                assert_eq!(j["ip"]["ecn"], 3);
            }),
        ),
        (
            "roce",
            vec!["--opcode", "send-only", "--len", "10", "--se"],
            Box::new(|j: &Value| assert_eq!(j["bth"]["se"], true)),
        ),
        (
            "roce",
            vec!["--opcode", "ack", "--syndrome", "nak-psn", "--msn", "0x123"],
            Box::new(|j: &Value| {
                assert_eq!(j["aeth"]["syndrome"], 0x60);
                assert_eq!(j["payload_len"], 0);
            }),
        ),
        (
            "cnp",
            vec!["--qp", "0x4242"],
            Box::new(|j: &Value| {
                assert_eq!(j["bth"]["opcode"], 0x81);
                assert_eq!(j["bth"]["becn"], true);
                assert_eq!(j["ip"]["dscp"], 48);
            }),
        ),
    ];
    for (i, (kind, args, extra)) in cases.iter().enumerate() {
        let f = d.path().join(format!("r{i}.pcap"));
        frame(kind, args, &f);
        let t = tshark(&f, ROCE_FIELDS);
        let j = show_json(&f, &[]);
        assert_eq!(t.len(), j.len(), "case {i}");
        for (k, (t, j)) in t.iter().zip(&j).enumerate() {
            check_roce(t, j);
            assert_eq!(j["icrc"]["status"], "good", "case {i}");
            extra(j);
            if i == 0 {
                assert_eq!(j["bth"]["psn"], 100 + k as u64, "PSN increments with --count");
            }
        }
    }
}

#[test]
fn bad_icrc_reported_with_expected_and_found() {
    let d = temp_dir("badicrc");
    let f = d.path().join("b.pcap");
    frame("roce", &["--opcode", "send-only", "--len", "8", "--bad-icrc"], &f);
    let j = &show_json(&f, &[])[0];
    assert_eq!(j["icrc"]["status"], "bad");
    assert_ne!(j["icrc"]["expected"], j["icrc"]["found"]);
    let t = &tshark(&f, ROCE_FIELDS)[0];
    assert_eq!(num(&t[13]) as u32, j["icrc"]["found"].as_u64().unwrap() as u32, "ICRC in Wireshark's byte order");
    let text = rocefab_ok(&["pcap", "show", f.to_str().unwrap()]);
    assert!(
        text.contains("ICRC bad (expected 0x") && text.contains(&format!("found {:#010x})", num(&t[13]))),
        "{} in {text}",
        t[13]
    );
}

#[test]
fn malformed_frame_in_the_middle_is_reported_and_decoding_continues() {
    let d = temp_dir("trunc");
    let r = d.path().join("r.pcap");
    frame("roce", &["--opcode", "write-only", "--len", "64"], &r);
    let p = d.path().join("p.pcap");
    frame("pfc", &["--priorities", "3"], &p);
    let roce = rocefab_wire::pcap::read_all(&r).unwrap().remove(0).data;
    let pfc = rocefab_wire::pcap::read_all(&p).unwrap().remove(0).data;
    // IP/UDP lengths intact but the RETH cut short: 14+20+8+12+8 bytes.
    let mut cut_reth = roce[..62].to_vec();
    cut_reth[17] = (62 - 14) as u8; // IPv4 total length
    cut_reth[16] = 0;
    cut_reth[38] = 0; // UDP length
    cut_reth[39] = (62 - 34) as u8;
    let truncated_udp = roce[..40].to_vec();
    let unknown = {
        let mut u = pfc.clone();
        u[12] = 0x88;
        u[13] = 0xb5;
        u
    };
    let short_pfc = pfc[..18].to_vec();
    let frames: Vec<(Duration, &[u8])> = [&roce, &truncated_udp, &cut_reth, &short_pfc, &unknown, &pfc]
        .iter()
        .enumerate()
        .map(|(i, f)| (Duration::from_millis(i as u64), f.as_slice()))
        .collect();
    let all = d.path().join("all.pcap");
    rocefab_wire::pcap::write_all(&all, rocefab_wire::pcap::Format::Pcap, frames).unwrap();

    let text = rocefab_ok(&["pcap", "show", all.to_str().unwrap()]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[0].contains("RoCEv2") && lines[0].contains("ICRC good"), "{}", lines[0]);
    assert!(lines[1].starts_with("#2 ") && lines[1].contains("error") && lines[1].contains("40 bytes"), "{}", lines[1]);
    assert!(lines[2].contains("error: RETH: RETH truncated: need 16 bytes, have 8"), "{}", lines[2]);
    assert!(lines[3].contains("error: MAC control") && lines[3].contains("18 bytes"), "{}", lines[3]);
    assert!(lines[4].contains("unknown ethertype 0x88b5"), "{}", lines[4]);
    assert!(lines[5].contains("PFC") && lines[5].contains("p3=65535"), "{}", lines[5]);

    let j = show_json(&all, &[]);
    assert_eq!(j.len(), 6);
    assert_eq!(j[1]["kind"], "error");
    assert_eq!(j[2]["kind"], "error");
    assert_eq!(j[2]["layer"], "RETH");
    assert_eq!(j[3]["kind"], "error");
    assert_eq!(j[4]["kind"], "unknown");
    assert_eq!(j[4]["ethertype"], 0x88b5);
    assert_eq!(j[5]["kind"], "pfc");
}

#[test]
fn bad_options_name_the_option() {
    let d = temp_dir("badopt");
    let out = d.path().join("x.pcap");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["frame", "roce", "--qp", "0x1000000", "-w", o], "--qp"),
        (&["frame", "roce", "--dscp", "64", "-w", o], "--dscp"),
        (&["frame", "roce", "--ecn", "blue", "-w", o], "--ecn"),
        (&["frame", "roce", "--opcode", "write-twice", "-w", o], "--opcode"),
        (&["frame", "roce", "--src-ip", "10.0.0.1", "--dst-ip", "fd00::2", "-w", o], "--dst-ip"),
        (&["frame", "roce", "--psn", "12x", "-w", o], "--psn"),
        (&["frame", "pfc", "--priorities", "8", "-w", o], "--priorities"),
        (&["frame", "pfc", "--quanta", "3=0x10000", "-w", o], "--quanta"),
        (&["frame", "pfc", "--src-mac", "02:00:00:00:00", "--priorities", "3", "-w", o], "--src-mac"),
        (&["frame", "pfc", "-w", o, "--quanta", "0xffff"], "--priorities"),
        (
            &[
                "frame",
                "lldp",
                "--chassis-mac",
                "02:00:00:00:00:01",
                "--port-id",
                "e",
                "--ets-bw",
                "0:50,3:40",
                "-w",
                o,
            ],
            "--ets-bw",
        ),
        (
            &["frame", "lldp", "--chassis-mac", "02:00:00:00:00:01", "--port-id", "e", "--app", "sctp:1=3", "-w", o],
            "--app",
        ),
        (&["pcap", "show", "--speed", "fast", o], "--speed"),
    ];
    for (args, opt) in cases {
        let r = rocefab(args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success(), "{args:?} succeeded");
        assert!(err.contains(opt), "{args:?}: message does not name {opt}: {err}");
    }
    assert!(!out.exists(), "a failed command wrote {o}");
    let r = rocefab(&["pcap", "show", d.path().join("missing.pcap").to_str().unwrap()]);
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("missing.pcap"));
}

/// Captures taken with `tcpdump -i any` (Linux cooked, SLL / SLL2) and raw-IP captures have no
/// Ethernet header: scapy writes them (with its own ICRC), `pcap show` decodes the RoCEv2 inside.
#[test]
fn cooked_and_raw_ip_captures_are_decoded() {
    let dir = temp_dir("cooked");
    let script = r#"
import sys
from scapy.all import IP, UDP, Raw, wrpcap
from scapy.layers.l2 import CookedLinux
from scapy.contrib.roce import BTH
roce = IP(src="10.0.1.1", dst="10.0.2.2", tos=0x62) / UDP(sport=49152, dport=4791) / BTH(opcode=0x08, dqpn=0x123, psn=0xfffffe) / Raw(b"\xab" * 64)
sll = CookedLinux(pkttype=4, lladdrtype=1, lladdrlen=6, src=b"\x02\x00\x00\x00\x01\x07\x00\x00", proto=0x0800) / roce
wrpcap(sys.argv[1], [sll])
wrpcap(sys.argv[2], [IP(bytes(roce))], linktype=101)
from scapy.all import Ether, Dot1Q
wrpcap(sys.argv[3], [Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / Dot1Q(vlan=101, prio=3) / roce])
"#;
    let (sll, raw, vlan) = (dir.path().join("sll.pcap"), dir.path().join("raw.pcap"), dir.path().join("vlan.pcap"));
    let o = Command::new("/usr/bin/python3")
        .args(["-c", script, sll.to_str().unwrap(), raw.to_str().unwrap(), vlan.to_str().unwrap()])
        .output()
        .unwrap_or_else(|e| panic!("cannot run /usr/bin/python3 (scapy is needed for this test): {e}"));
    assert!(o.status.success(), "scapy: {}", String::from_utf8_lossy(&o.stderr));
    for (file, linktype, src_mac) in [(&sll, 113, "02:00:00:00:01:07"), (&raw, 101, "00:00:00:00:00:00")] {
        let j = show_json(file, &[]);
        assert_eq!(j.len(), 1, "{j:?}");
        let f = &j[0];
        assert_eq!(f["linktype"], linktype, "{f}");
        assert_eq!(f["src_mac"], src_mac, "{f}");
        assert_eq!(f["bth"]["opcode"], 0x08, "{f}");
        assert_eq!(f["bth"]["dest_qp"], 0x123, "{f}");
        assert_eq!(f["bth"]["psn"], 0xfffffe, "{f}");
        assert_eq!(f["icrc"]["status"], "good", "scapy's ICRC must verify: {f}");
        let text = rocefab_ok(&["pcap", "show", file.to_str().unwrap()]);
        assert!(text.contains("Ethernet header synthesised") && text.contains("write-last (0x08)"), "{text}");
    }
    // An 802.1Q-tagged RoCEv2 frame: the tag is reported and the ICRC (which does not cover
    // the Ethernet header) still verifies.
    let j = show_json(&vlan, &[]);
    assert_eq!(j[0]["vlan"]["vid"], 101, "{}", j[0]);
    assert_eq!(j[0]["vlan"]["pcp"], 3, "{}", j[0]);
    assert_eq!(j[0]["icrc"]["status"], "good", "{}", j[0]);
    let text = rocefab_ok(&["pcap", "show", vlan.to_str().unwrap()]);
    assert!(text.contains("02:00:00:00:00:02 vlan 101 pcp 3 10.0.1.1:49152 > 10.0.2.2:4791"), "{text}");
}

/// A snaplen-truncated capture (`editcap -s 100`, as `tcpdump -s 100` would record it): pcap
/// show decodes the headers, reports the captured payload and the ICRC as not captured, and
/// agrees with tshark on the BTH. editcap / tshark missing -> the test fails.
#[test]
fn snaplen_truncated_roce_matches_tshark_and_show() {
    let d = temp_dir("snap");
    let full = d.path().join("full.pcap");
    let cut = d.path().join("cut.pcap");
    frame(
        "roce",
        &["--opcode", "write-first", "--qp", "0xabcde", "--psn", "0x1234", "--len", "300", "--va", "0xdead0000"],
        &full,
    );
    let o = Command::new("editcap")
        .arg("-s")
        .arg("100")
        .arg(&full)
        .arg(&cut)
        .output()
        .unwrap_or_else(|e| panic!("cannot run editcap (ships with tshark, needed for this test): {e}"));
    assert!(o.status.success(), "editcap: {}", String::from_utf8_lossy(&o.stderr));

    let whole = &show_json(&full, &[])[0];
    assert_eq!(whole["icrc"]["status"], "good");
    let orig_len = whole["len"].as_u64().unwrap();

    let t = tshark(
        &cut,
        &["frame.cap_len", "frame.len", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn"],
    );
    assert_eq!(t.len(), 1);
    assert_eq!((num(&t[0][0]), num(&t[0][1])), (100, orig_len), "editcap did not cut the frame");
    let j = &show_json(&cut, &[])[0];
    assert_eq!(j["kind"], "roce", "{j}");
    assert_eq!(j["bth"]["opcode"].as_u64(), Some(num(&t[0][2])));
    assert_eq!(j["bth"]["opcode_name"], "write-first");
    assert_eq!(j["bth"]["dest_qp"].as_u64(), Some(num(&t[0][3])));
    assert_eq!(j["bth"]["dest_qp"], 0xabcde);
    assert_eq!(j["bth"]["psn"].as_u64(), Some(num(&t[0][4])));
    assert_eq!(j["bth"]["psn"], 0x1234);
    assert_eq!(j["bth"], whole["bth"]);
    assert_eq!(j["reth"], whole["reth"]);
    assert_eq!(j["icrc"]["status"], "not_captured");
    assert_eq!((j["icrc"]["captured"].as_u64(), j["icrc"]["orig_len"].as_u64()), (Some(100), Some(orig_len)));
    assert_eq!((j["len"].as_u64(), j["orig_len"].as_u64()), (Some(100), Some(orig_len)));
    assert_eq!(j["payload_len"], 300);
    // 100 bytes = Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 + 30 payload bytes.
    assert_eq!(j["payload_captured"], 30);

    let text = rocefab_ok(&["pcap", "show", cut.to_str().unwrap()]);
    assert!(text.contains("write-first (0x06) qp 0x0abcde psn 4660"), "{text}");
    assert!(text.contains("payload 30 of 300 bytes captured"), "{text}");
    assert!(text.contains(&format!("ICRC not captured (frame cut at 100 of {orig_len} bytes)")), "{text}");
}

/// tshark fields of every extension header (Wireshark 4.0 names; its AtomicETH reports the VA
/// and R_Key under the RETH names).
const EXT_FIELDS: &[&str] = &[
    "infiniband.bth.opcode",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.atomicacketh.origremdt",
    "infiniband.immdt",
    "infiniband.ieth",
    "infiniband.invariant.crc",
];

fn opt_num(s: &str) -> Option<u64> {
    (!s.is_empty()).then(|| num(s))
}

/// FT_BYTES as tshark prints them (`00000077`; Wireshark 4.0 adds ImmDt and IETH twice, as
/// the header and as its field, so `00000077,00000077`), as a number.
fn opt_bytes(s: &str) -> Option<u64> {
    let first = s.split(',').next().unwrap_or_default();
    (!first.is_empty()).then(|| u64::from_str_radix(&first.replace(':', ""), 16).unwrap())
}

/// `rocefab frame roce` builds each new opcode with the headers it needs; tshark and
/// `rocefab pcap show --json` read the same values, and the text names every header.
#[test]
fn new_opcodes_and_headers_match_tshark_and_show() {
    let d = temp_dir("ext");
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--opcode", "ud-send-only", "--qkey", "0x11111111", "--src-qp", "5", "--qp", "0x77", "--len", "20"],
            &["ud-send-only (0x64)", "| DETH qkey 0x11111111 srcqp 0x000005 |", "| payload 20 |"],
        ),
        (
            &["--opcode", "ud-send-only-imm", "--qkey", "0x80000001", "--src-qp", "0xabcdef", "--imm", "0x99"],
            &["| DETH qkey 0x80000001 srcqp 0xabcdef | imm 0x99 |"],
        ),
        (
            &[
                "--opcode",
                "compare-swap",
                "--va",
                "0x7f0000001000",
                "--rkey",
                "0x42",
                "--swap",
                "0xfeedface",
                "--compare",
                "7",
            ],
            &[
                "compare-swap (0x13)",
                "| AtomicETH va 0x7f0000001000 rkey 0x42 swap/add 0xfeedface cmp 0x7 |",
                "| payload 0 |",
            ],
        ),
        (&["--opcode", "fetch-add", "--add", "3"], &["| AtomicETH va 0x10000 rkey 0x1234 swap/add 0x3 cmp 0x0 |"]),
        (
            &["--opcode", "atomic-ack", "--syndrome", "ack", "--msn", "12", "--orig", "0xdeadbeefcafef00d"],
            &["atomic-ack (0x12)", "| AETH ack credits=31 (0x1f) msn 12 | AtomicAckETH orig 0xdeadbeefcafef00d |"],
        ),
        (&["--opcode", "read-response-first", "--msn", "3"], &["| AETH ack credits=31 (0x1f) msn 3 | payload 256 |"]),
        (&["--opcode", "read-response-middle"], &["read-response-middle (0x0e)"]),
        (
            &["--opcode", "read-response-last", "--syndrome", "0x05", "--len", "7"],
            &["| AETH ack credits=5 (0x05) msn 0 | payload 7 |"],
        ),
        (&["--opcode", "read-response-only", "--len", "1"], &["| AETH ack credits=31 (0x1f) msn 0 | payload 1 |"]),
        (
            &["--opcode", "send-only-inv", "--invalidate-rkey", "0x55667788", "--len", "9"],
            &["| IETH rkey 0x55667788 | payload 9 |"],
        ),
        (&["--opcode", "send-last-inv", "--rkey", "0x77"], &["send-last-inv (0x16)", "| IETH rkey 0x77 |"]),
        (&["--opcode", "uc-send-only", "--len", "3"], &["uc-send-only (0x24)"]),
        (
            &["--opcode", "uc-write-only-imm", "--imm", "0x1234", "--len", "8"],
            &["uc-write-only-imm (0x2b)", "| RETH va 0x10000 rkey 0x1234 len 8 | imm 0x1234 |"],
        ),
        (&["--opcode", "0x2a", "--src-ip", "fd00::1", "--dst-ip", "fd00::2"], &["uc-write-only (0x2a)"]),
    ];
    for (i, (args, texts)) in cases.iter().enumerate() {
        let f = d.path().join(format!("e{i}.pcap"));
        frame("roce", args, &f);
        let t = &tshark(&f, EXT_FIELDS)[0];
        let j = &show_json(&f, &[])[0];
        let c = |k: usize| t[k].as_str();
        assert_eq!(num(c(0)), j["bth"]["opcode"].as_u64().unwrap(), "{args:?}");
        assert_eq!(j["icrc"]["status"], "good", "{args:?}");
        assert_eq!(opt_num(c(1)), j["deth"]["q_key"].as_u64(), "{args:?}: DETH Q_Key");
        assert_eq!(opt_num(c(2)), j["deth"]["src_qp"].as_u64(), "{args:?}: DETH SrcQP");
        let va = j["reth"]["va"].as_u64().or(j["atomic_eth"]["va"].as_u64());
        let rk = j["reth"]["r_key"].as_u64().or(j["atomic_eth"]["r_key"].as_u64());
        assert_eq!(opt_num(c(3)), va, "{args:?}: VA");
        assert_eq!(opt_num(c(4)), rk, "{args:?}: R_Key");
        assert_eq!(opt_num(c(5)), j["atomic_eth"]["swap_add"].as_u64(), "{args:?}: swap/add");
        assert_eq!(opt_num(c(6)), j["atomic_eth"]["compare"].as_u64(), "{args:?}: compare");
        assert_eq!(opt_num(c(7)), j["aeth"]["syndrome"].as_u64(), "{args:?}: AETH");
        assert_eq!(opt_num(c(8)), j["aeth"]["msn"].as_u64(), "{args:?}: MSN");
        assert_eq!(opt_num(c(9)), j["atomic_ack_eth"]["orig_remote_data"].as_u64(), "{args:?}: AtomicAckETH");
        assert_eq!(opt_bytes(c(10)), j["immediate"].as_u64(), "{args:?}: ImmDt");
        assert_eq!(opt_bytes(c(11)), j["ieth"]["r_key"].as_u64(), "{args:?}: IETH");
        let ours = j["icrc"]["value"].as_u64().unwrap() as u32;
        assert_eq!(num(c(12)) as u32, ours, "{args:?}: ICRC in Wireshark's byte order");
        let text = rocefab_ok(&["pcap", "show", f.to_str().unwrap()]);
        let shown = format!("ICRC good ({:#010x})", num(c(12)));
        assert!(text.contains(&shown), "{args:?}: {shown:?} (tshark's infiniband.invariant.crc) not in {text}");
        for want in *texts {
            assert!(text.contains(want), "{args:?}: {want:?} not in {text}");
        }
        assert!(!text.contains("unknown"), "{text}");
    }
    // Names are listed in the error for a bad opcode.
    let r = rocefab(&["frame", "roce", "--opcode", "ud-send-twice", "-w", d.path().join("x.pcap").to_str().unwrap()]);
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("ud-send-only-imm"));
}

/// A RoCE v1 frame (EtherType 0x8915: GRH + BTH, no IP/UDP) is shown as RoCE v1 with its GRH
/// and BTH decoded as tshark decodes them; its ICRC is reported as not checked.
#[test]
fn roce_v1_frame_is_shown() {
    use rocefab_wire::roce::{bth, deth, grh, Opcode, Repr};
    let d = temp_dir("v1");
    let mut h = Repr::new(bth::Repr::new(Opcode::UdSendOnly, 0x123, 0x456));
    h.deth = Some(deth::Repr { q_key: 0x1111_1111, src_qp: 5 });
    let payload = [0xabu8; 10];
    h.bth.pad_count = 2;
    let ib_len = h.buffer_len(payload.len());
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x89, 0x15];
    let mut g = grh::Repr::new("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap(), ib_len as u16);
    g.traffic_class = 0x60;
    g.hop_limit = 1;
    f.resize(14 + 40 + ib_len, 0);
    g.emit(&mut grh::Packet::new_unchecked(&mut f[14..54]));
    h.emit(&mut f[54..], &payload).unwrap();
    let n = f.len();
    f[n - 4..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let file = d.path().join("v1.pcap");
    rocefab_wire::pcap::write_all(&file, rocefab_wire::pcap::Format::Pcap, vec![(Duration::ZERO, f.as_slice())])
        .unwrap();

    let text = rocefab_ok(&["pcap", "show", file.to_str().unwrap()]);
    assert!(text.contains("RoCEv1 02:00:00:00:00:01 > 02:00:00:00:00:02 fe80::1 > fe80::2 tclass 0x60"), "{text}");
    assert!(text.contains("ud-send-only (0x64) qp 0x000123 psn 1110"), "{text}");
    assert!(text.contains("| DETH qkey 0x11111111 srcqp 0x000005 | payload 10 | ICRC not checked (RoCE v1)"), "{text}");
    let j = &show_json(&file, &[])[0];
    assert_eq!((j["kind"].as_str(), j["roce_version"].as_u64()), (Some("roce"), Some(1)), "{j}");
    assert_eq!(j["icrc"]["status"], "not_checked");
    let t = &tshark(
        &file,
        &[
            "eth.type",
            "infiniband.grh.tclass",
            "infiniband.grh.paylen",
            "infiniband.grh.hoplmt",
            "infiniband.grh.sgid",
            "infiniband.grh.dgid",
            "infiniband.bth.opcode",
            "infiniband.bth.destqp",
            "infiniband.bth.psn",
            "infiniband.deth.q_key",
            "infiniband.deth.srcqp",
            "infiniband.invariant.crc",
        ],
    )[0];
    assert_eq!(num(&t[0]), 0x8915);
    assert_eq!(num(&t[1]), j["grh"]["traffic_class"].as_u64().unwrap());
    assert_eq!(num(&t[2]), j["grh"]["payload_len"].as_u64().unwrap());
    assert_eq!(num(&t[3]), j["grh"]["hop_limit"].as_u64().unwrap());
    assert_eq!(t[4], j["grh"]["sgid"].as_str().unwrap());
    assert_eq!(t[5], j["grh"]["dgid"].as_str().unwrap());
    assert_eq!(num(&t[6]), j["bth"]["opcode"].as_u64().unwrap());
    assert_eq!(num(&t[7]), j["bth"]["dest_qp"].as_u64().unwrap());
    assert_eq!(num(&t[8]), j["bth"]["psn"].as_u64().unwrap());
    assert_eq!(num(&t[9]), j["deth"]["q_key"].as_u64().unwrap());
    assert_eq!(num(&t[10]), j["deth"]["src_qp"].as_u64().unwrap());
    assert_eq!(num(&t[11]) as u32, j["icrc"]["stored"].as_u64().unwrap() as u32, "ICRC in Wireshark's byte order");
}

/// Runs `tool args`, which must succeed (editcap, gzip: the formats users bring).
fn tool(tool: &str, args: &[&str]) {
    let o = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool} (needed for this test): {e}"));
    assert!(o.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// A Sniffer capture (editcap -F ngsniffer) is refused by every command that reads captures,
/// naming the format and the conversion, with the path once; the conversion it names works;
/// gzip'd pcap and pcapng (gzip, as Wireshark's .pcapng.gz) are read as the plain files.
#[test]
fn sniffer_captures_are_named_and_gzipped_captures_are_read() {
    let d = temp_dir("formats");
    let ng = d.path().join("r.pcapng");
    frame(
        "roce",
        &[
            "--opcode",
            "write-only",
            "--len",
            "64",
            "--dscp",
            "24",
            "--count",
            "3",
            "--src-ip",
            "192.168.7.1",
            "--dst-ip",
            "192.168.7.2",
        ],
        &ng,
    );
    let cap = d.path().join("r.cap");
    tool("editcap", &["-F", "ngsniffer", ng.to_str().unwrap(), cap.to_str().unwrap()]);
    let c = cap.to_str().unwrap();
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml");
    let t = topo.to_str().unwrap();
    for args in [vec!["pcap", "show", c], vec!["replay", "--topology", t, "--from", "host1:gpu0", c, "--dry-run"]] {
        let o = rocefab(&args);
        assert!(!o.status.success(), "{args:?} must fail");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains("a Sniffer capture") && e.contains("\"TRSNIFF data\"") && e.contains("magic 54 52 53 4e"),
            "{args:?}: {e}"
        );
        assert!(e.contains("editcap -F pcapng IN OUT.pcapng"), "{args:?}: {e}");
        assert_eq!(e.matches(c).count(), 1, "{args:?}: the path once: {e}");
    }
    // The conversion named works.
    let back = d.path().join("back.pcapng");
    tool("editcap", &["-F", "pcapng", c, back.to_str().unwrap()]);
    let plain = show_json(&ng, &[]);
    assert_eq!(plain.len(), 3);
    let psns = |v: &[Value]| v.iter().map(|j| j["bth"]["psn"].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(psns(&show_json(&back, &[])), psns(&plain));
    // gzip'd pcapng and pcap: the same frames, and replay reads them too.
    let pcap = d.path().join("r.pcap");
    tool("editcap", &["-F", "pcap", ng.to_str().unwrap(), pcap.to_str().unwrap()]);
    for f in [&ng, &pcap] {
        tool("gzip", &["-k", f.to_str().unwrap()]);
        let gz = PathBuf::from(format!("{}.gz", f.display()));
        assert_eq!(std::fs::read(&gz).unwrap()[..2], [0x1f, 0x8b]);
        assert_eq!(show_json(&gz, &[]), show_json(f, &[]), "{}", gz.display());
        let out = rocefab_ok(&["replay", "--topology", t, "--from", "host1:gpu0", gz.to_str().unwrap(), "--dry-run"]);
        assert!(out.contains("dry run: would send 3 frames"), "{out}");
    }
    // A gzip'd file that is no capture says so.
    let txt = d.path().join("notes.txt");
    std::fs::write(&txt, "hello\n").unwrap();
    tool("gzip", &[txt.to_str().unwrap()]);
    let o = rocefab(&["pcap", "show", d.path().join("notes.txt.gz").to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("a gzip'd file holding a text file"), "{e}");
}

/// UET frames built by scapy with the UET layers written from the sources (test-support's
/// `scapy_uet.py`, not rocefab's code): `pcap show` shows each header's fields as scapy wrote
/// them; malformed UET frames (cut PDS, ACK_CC, entropy and SES headers) are shown as malformed
/// with the layer and the reason, between good frames, and decoding goes on.
#[test]
fn uet_frames_from_scapy_are_shown_field_by_field_and_malformed_ones_named() {
    let d = temp_dir("uet");
    let file = d.path().join("uet.pcap");
    let script = format!(
        "{}\n{}",
        rocefab_test_support::scapy::UET_LAYERS,
        r#"
from scapy.all import wrpcap
E = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
ackcc = AckCc(next_hdr=4, cack_psn=999, ack_psn_offset=1, spdcid=0x22, dpdcid=0x11, cc_type=0, mpr=32,
              sack_psn_offset=-2, sack_bitmap=0xb, service_time=100, restore_cwnd=1, rcv_cwnd_pend=5,
              rcvd_bytes=65536, ooo_count=3)
pkts = [
  E / IP(src="10.0.0.1", dst="10.0.1.1", tos=(26 << 2) | 2) / UDP(sport=0xbeef, dport=4793)
    / RudRodReq(type=2, next_hdr=3, ar=1, clear_psn_offset=-1, psn=1000, spdcid=0x11, dpdcid=0x22)
    / SesStdReq(opcode=1, som=1, eom=1, hd=1, message_id=7, ri_generation=2, job_id=0x123456, pid_on_fep=0x9,
                resource_index=0x3, buffer_offset=0x10000, initiator=5, memory_key=0xabc, header_data=0x77,
                request_length=4096)
    / Raw(b"\x00" * 32),
  E / IPv6(src="fd00::1", dst="fd00::2") / UetEntropy(entropy=0x4242) / ackcc
    / SesResponse(opcode=1, return_code=1, message_id=7, job_id=0x123456, modified_length=4096),
  E / IP(src="10.0.1.1", dst="10.0.0.1") / UDP(sport=7, dport=4793)
    / Nack(nack_code=0x01, retx=1, nack_psn=1001, spdcid=0x22, dpdcid=0x11, nack_payload=1002),
  E / IP(src="10.0.1.1", dst="10.0.0.1") / UetEntropy(entropy=9)
    / Nack(nack_code=0x02, nack_psn=1003, spdcid=0x22, dpdcid=0x11),
  # Malformed: a RUD request cut to 3 bytes; an ACK_CC cut to 20; an entropy header cut to 2;
  # a standard request cut to 10 bytes behind a whole RUD request.
  E / IP(src="10.0.0.1", dst="10.0.1.1") / UDP(sport=1, dport=4793) / Raw(raw(RudRodReq(type=2))[:3]),
  E / IP(src="10.0.0.1", dst="10.0.1.1") / UetEntropy(entropy=1) / Raw(raw(ackcc)[:20]),
  E / IP(src="10.0.0.1", dst="10.0.1.1", proto=253) / Raw(b"\x01\x02"),
  E / IP(src="10.0.0.1", dst="10.0.1.1") / UDP(sport=1, dport=4793) / RudRodReq(type=2, next_hdr=3, psn=5)
    / Raw(raw(SesStdReq(opcode=1, som=1))[:10]),
  # Not UET: another UDP port.
  E / IP(src="10.0.0.1", dst="10.0.1.1") / UDP(sport=1, dport=4794) / Raw(b"\x10\x00" * 8),
]
wrpcap(sys.stdin.read().strip(), pkts)
"#
    );
    rocefab_test_support::scapy::run_python(&script, file.to_str().unwrap());
    let j = show_json(&file, &[]);
    assert_eq!(j.len(), 9, "{j:?}");
    let text = rocefab_ok(&["pcap", "show", file.to_str().unwrap()]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 9, "{text}");

    // 1: IPv4 / UDP 4793, RUD request with AR, SES standard request (SOM, EOM, HD).
    let f = &j[0];
    assert_eq!(f["kind"], "uet", "{f}");
    assert_eq!(
        (f["ip"]["version"].as_u64(), f["ip"]["dscp"].as_u64(), f["ip"]["ecn"].as_u64()),
        (Some(4), Some(26), Some(2))
    );
    assert_eq!(
        (f["udp"]["src_port"].as_u64(), f["udp"]["dst_port"].as_u64(), f["entropy"].as_u64()),
        (Some(0xbeef), Some(4793), Some(0xbeef))
    );
    let p = &f["pds"];
    assert_eq!(
        (p["type"].as_u64(), p["type_name"].as_str(), p["next_header"].as_u64()),
        (Some(2), Some("RUD_REQ"), Some(3)),
        "{p}"
    );
    assert_eq!((p["psn"].as_u64(), p["clear_psn_offset"].as_i64()), (Some(1000), Some(-1)), "{p}");
    assert_eq!(
        (p["spdcid"].as_u64(), p["dpdcid"].as_u64(), p["flags"].as_u64()),
        (Some(0x11), Some(0x22), Some(0x08)),
        "AR is 0x08: {p}"
    );
    let s = &f["ses"];
    assert_eq!(
        (s["header"].as_str(), s["opcode"].as_u64(), s["opcode_name"].as_str()),
        (Some("standard_request"), Some(1), Some("WRITE")),
        "{s}"
    );
    assert_eq!(
        (s["job_id"].as_u64(), s["pid_on_fep"].as_u64(), s["resource_index"].as_u64()),
        (Some(0x123456), Some(9), Some(3)),
        "{s}"
    );
    assert_eq!(
        (s["message_id"].as_u64(), s["ri_generation"].as_u64(), s["buffer_offset"].as_u64()),
        (Some(7), Some(2), Some(0x10000)),
        "{s}"
    );
    assert_eq!(
        (s["initiator"].as_u64(), s["memory_key"].as_u64(), s["header_data"].as_u64()),
        (Some(5), Some(0xabc), Some(0x77)),
        "{s}"
    );
    // SOM | EOM | HD (research file §9: 0x01, 0x02, 0x04).
    assert_eq!((s["request_length"].as_u64(), s["flags"].as_u64()), (Some(4096), Some(0x07)), "{s}");
    assert_eq!(f["payload_len"], 32, "{f}");
    assert!(
        lines[0].contains("UET 02:00:00:00:00:01 > 02:00:00:00:00:02 10.0.0.1:48879 > 10.0.1.1:4793"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("RUD_REQ psn 1000") && lines[0].contains("SES WRITE job 0x123456"), "{}", lines[0]);

    // 2: IPv6 / IP protocol 253 / entropy, ACK_CC with NSCC state and SACK, SES response.
    let f = &j[1];
    assert_eq!(
        (f["kind"].as_str(), f["ip"]["version"].as_u64(), f["ip_protocol"].as_u64()),
        (Some("uet"), Some(6), Some(253)),
        "{f}"
    );
    assert_eq!(f["entropy"], 0x4242, "{f}");
    let p = &f["pds"];
    assert_eq!(
        (p["type_name"].as_str(), p["cack_psn"].as_u64(), p["ack_psn_offset"].as_i64()),
        (Some("ACK_CC"), Some(999), Some(1)),
        "{p}"
    );
    assert_eq!(
        (p["mpr"].as_u64(), p["sack_psn_offset"].as_i64(), p["sack_bitmap"].as_u64()),
        (Some(32), Some(-2), Some(0xb)),
        "{p}"
    );
    assert_eq!(p["sack_base_psn"], 997, "the SACK bitmap starts at CACK_PSN + sack_psn_offset: {p}");
    let n = &p["nscc"];
    assert_eq!(
        (n["service_time"].as_u64(), n["restore_cwnd"].as_bool(), n["rcv_cwnd_pend"].as_u64()),
        (Some(100), Some(true), Some(5)),
        "{n}"
    );
    assert_eq!((n["rcvd_bytes"].as_u64(), n["ooo_count"].as_u64()), (Some(65536), Some(3)), "{n}");
    let s = &f["ses"];
    assert_eq!(
        (s["header"].as_str(), s["return_code_name"].as_str(), s["opcode_name"].as_str()),
        (Some("response"), Some("OK"), Some("RESPONSE")),
        "{s}"
    );
    assert_eq!(
        (s["job_id"].as_u64(), s["modified_length"].as_u64(), s["message_id"].as_u64()),
        (Some(0x123456), Some(4096), Some(7)),
        "{s}"
    );
    assert!(
        lines[1].contains("proto 253") && lines[1].contains("entropy 0x4242") && lines[1].contains("rcvd_bytes 65536"),
        "{}",
        lines[1]
    );

    // 3-4: trimmed NACKs over UDP and over IP, their codes named.
    for (f, code, name, psn) in [(&j[2], 1, "TRIMMED", 1001), (&j[3], 2, "TRIMMED_LASTHOP", 1003)] {
        let p = &f["pds"];
        assert_eq!(
            (p["type_name"].as_str(), p["nack_code"].as_u64(), p["nack_code_name"].as_str()),
            (Some("NACK"), Some(code), Some(name)),
            "{f}"
        );
        assert_eq!(
            (p["psn"].as_u64(), p["spdcid"].as_u64(), p["dpdcid"].as_u64()),
            (Some(psn), Some(0x22), Some(0x11)),
            "{f}"
        );
        assert_eq!(f["ses"], Value::Null, "{f}");
    }
    assert_eq!(j[2]["pds"]["payload"], 1002);
    assert!(lines[2].contains("NACK TRIMMED (0x01) vendor 0x00 psn 1001"), "{}", lines[2]);
    assert!(lines[3].contains("NACK TRIMMED_LASTHOP (0x02)"), "{}", lines[3]);

    // 5-8: malformed, each with its layer and reason; never a panic, decoding goes on.
    for (i, layer, reason) in [
        (4, "UET PDS", "UET PDS request truncated: need 12 bytes, have 3"),
        (5, "UET PDS", "UET PDS ACK_CC truncated: need 32 bytes, have 20"),
        (6, "entropy header", "entropy header truncated: need 4 bytes, have 2"),
        (7, "UET SES", "UET SES standard request truncated: need 44 bytes, have 10"),
    ] {
        let f = &j[i];
        assert_eq!(
            (f["kind"].as_str(), f["protocol"].as_str(), f["layer"].as_str()),
            (Some("error"), Some("uet"), Some(layer)),
            "{f}"
        );
        assert_eq!(f["error"], format!("malformed UET frame: {reason}"), "{f}");
        assert!(lines[i].contains(&format!("error: {layer}: malformed UET frame: {reason}")), "{}", lines[i]);
    }
    // 9: UDP to another port is plain IP, not a malformed UET frame.
    assert_eq!(j[8]["kind"], "ip", "{}", j[8]);
}

/// xdp2's sample captures (wire/tests/data/xdp2, generated by its make_uet_pds.py and
/// make_uet_ses.py): every packet is shown as UET, none as malformed; wire/tests/xdp2_pcaps.rs
/// checks their fields.
#[test]
fn xdp2_uet_captures_are_shown_without_errors() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../wire/tests/data/xdp2");
    for (name, n) in [("uet_pds.pcap", 19), ("uet_ses.pcap", 17)] {
        let j = show_json(&dir.join(name), &[]);
        assert_eq!(j.len(), n, "{name}");
        for f in &j {
            assert_eq!(f["kind"], "uet", "{name}: {f}");
            assert_eq!(f["udp"]["dst_port"], 4793, "{name}: {f}");
        }
    }
    let text = rocefab_ok(&["pcap", "show", dir.join("uet_pds.pcap").to_str().unwrap()]);
    let nack = text.lines().nth(12).unwrap();
    assert!(nack.contains("NACK PDC_MODE_MISMATCH (0x16) vendor 0x87 pkt_id 2575857510"), "{nack}");
    // Cut by a 60-byte snap length (`editcap -s 60`): said so, not called malformed.
    let d = temp_dir("uet-cut");
    let cut = d.path().join("cut.pcap");
    tool("editcap", &["-s", "60", dir.join("uet_pds.pcap").to_str().unwrap(), cut.to_str().unwrap()]);
    let text = rocefab_ok(&["pcap", "show", cut.to_str().unwrap()]);
    assert_eq!(text.lines().count(), 19, "{text}");
    let first = text.lines().next().unwrap();
    assert!(first.contains("UET frame cut by the snap length (60 of 98 bytes captured)"), "{first}");
    assert!(!text.contains("malformed"), "{text}");
}
