//! Wireshark as an independent oracle: frames emitted by our code are written to pcap /
//! pcapng and decoded with `tshark -T fields`; the tests assert decoded field values.
//! tshark must be installed (Debian package `tshark`); without it these tests fail.

#[path = "l2_fixtures.rs"]
mod fx;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fx::*;
use rocefab_wire::dcbx::*;
use rocefab_wire::ethernet::{MacAddr, PrioritySet};
use rocefab_wire::lldp::*;
use rocefab_wire::mac_control::*;
use rocefab_wire::pcap::{self, Format};

type Fields = HashMap<String, Vec<String>>;

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rf-l2-").tempdir().unwrap()
}

/// Decodes `path` with tshark and returns, per frame, each requested field's occurrences.
fn tshark(path: &Path, fields: &[&str]) -> Vec<Fields> {
    let frames = rocefab_test_support::tshark::read(path).all(fields);
    frames.into_iter().map(|f| fields.iter().map(|n| n.to_string()).zip(f).collect()).collect()
}

/// Single value of `field` in `frame`, failing with context if absent or repeated.
fn one<'a>(frame: &'a Fields, field: &str) -> &'a str {
    match frame.get(field).map(Vec::as_slice) {
        Some([v]) => v,
        other => panic!("field {field}: expected one value, got {other:?}\nframe: {frame:?}"),
    }
}

fn all<'a>(frame: &'a Fields, field: &str) -> Vec<&'a str> {
    frame.get(field).map(|v| v.iter().map(String::as_str).collect()).unwrap_or_default()
}

fn write(dir: &Path, name: &str, format: Format, frames: &[Vec<u8>]) -> std::path::PathBuf {
    let p = dir.join(name);
    pcap::write_all(
        &p,
        format,
        frames.iter().enumerate().map(|(i, f)| (Duration::new(1_700_000_000 + i as u64, 123_456_789), &f[..])),
    )
    .unwrap();
    p
}

fn no_malformed(frames: &[Fields]) {
    for (i, f) in frames.iter().enumerate() {
        assert!(all(f, "_ws.malformed").is_empty(), "frame {i} malformed: {f:?}");
        let expert = all(f, "_ws.expert.message");
        assert!(
            !expert.iter().any(|m| m.contains("Malformed") || m.contains("must be")),
            "frame {i} has expert warnings {expert:?}"
        );
    }
}

#[test]
fn pause_and_pfc_decoded_by_tshark() {
    let dir = tempdir();
    let vectors: Vec<PfcRepr> = vec![
        PfcRepr::pause(prios(&[3]), 0xffff),
        pfc_repr(),
        PfcRepr { enabled: PrioritySet(0xff), quanta: [1, 101, 201, 301, 401, 501, 601, 701] },
        PfcRepr::pause(prios(&[3]), 0), // resume
        PfcRepr { enabled: PrioritySet(0x81), quanta: [7, 0, 0, 0, 0, 0, 0, 65000] },
    ];
    let mut frames = vec![MacControlRepr::Pause { quanta: 0x1234 }.to_frame(SRC).to_vec()];
    frames.extend(vectors.iter().map(|v| MacControlRepr::Pfc(*v).to_frame(SRC).to_vec()));

    let mut fields = vec![
        "eth.dst",
        "eth.src",
        "eth.type",
        "macc.opcode",
        "macc.pause_time",
        "macc.cbfc.enbv",
        "_ws.malformed",
        "_ws.expert.message",
    ];
    let pt: Vec<String> = (0..8).map(|i| format!("macc.cbfc.pause_time.c{i}")).collect();
    let en: Vec<String> = (0..8).map(|i| format!("macc.cbfc.enbv.c{i}")).collect();
    fields.extend(pt.iter().map(String::as_str));
    fields.extend(en.iter().map(String::as_str));

    for format in [Format::Pcap, Format::PcapNg] {
        let p = write(dir.path(), &format!("macc-{format:?}"), format, &frames);
        let got = tshark(&p, &fields);
        assert_eq!(got.len(), frames.len());
        no_malformed(&got);

        let f = &got[0];
        assert_eq!(one(f, "eth.dst"), "01:80:c2:00:00:01");
        assert_eq!(one(f, "eth.src"), "02:00:00:00:00:01");
        assert_eq!(one(f, "eth.type"), "0x8808");
        assert_eq!(one(f, "macc.opcode"), "0x0001");
        assert_eq!(one(f, "macc.pause_time"), "4660");

        for (f, v) in got[1..].iter().zip(&vectors) {
            assert_eq!(one(f, "macc.opcode"), "0x0101");
            assert_eq!(one(f, "macc.cbfc.enbv"), format!("0x{:04x}", v.enabled.bits()));
            for i in 0..8 {
                let p = prio(i);
                // tshark shows a class's time only when its enable bit is set.
                match v.quanta_for(p) {
                    Some(q) => assert_eq!(one(f, &pt[i as usize]), q.to_string(), "{v:?} c{i}"),
                    None => assert!(
                        all(f, &pt[i as usize]).is_empty()
                            || one(f, &pt[i as usize]) == v.quanta[i as usize].to_string()
                    ),
                }
                let bit = one(f, &en[i as usize]);
                assert_eq!(bit == "1" || bit == "True", v.enabled.contains(p), "{v:?} enbv.c{i} = {bit}");
            }
        }
    }
}

fn lldp_fields() -> Vec<&'static str> {
    vec![
        "eth.dst",
        "eth.type",
        "lldp.chassis.subtype",
        "lldp.chassis.id",
        "lldp.chassis.id.mac",
        "lldp.chassis.id.ip4",
        "lldp.port.subtype",
        "lldp.port.id",
        "lldp.port.id.mac",
        "lldp.time_to_live",
        "lldp.port.desc",
        "lldp.tlv.system.name",
        "lldp.tlv.system.desc",
        "lldp.tlv.system_cap",
        "lldp.tlv.enable_system_cap",
        "lldp.tlv.system_cap.router",
        "lldp.mgn.address.subtype",
        "lldp.mgn.addr.ip4",
        "lldp.mgn.interface.subtype",
        "lldp.mgn.interface.number",
        "lldp.orgtlv.oui",
        "lldp.tlv.type",
        "_ws.malformed",
        "_ws.expert.message",
    ]
}

#[test]
fn lldp_basic_tlvs_decoded_by_tshark() {
    let dir = tempdir();
    let basic = lldp_basic_repr();
    let other = LldpduRepr {
        chassis_id: ChassisId::NetworkAddress(NetworkAddress::Ipv4(Ipv4Addr::new(192, 0, 2, 7))),
        port_id: PortId::MacAddress(MacAddr([0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee])),
        ttl: 0,
        tlvs: vec![],
    };
    let local = LldpduRepr {
        chassis_id: ChassisId::LocallyAssigned("rail-1".into()),
        port_id: PortId::LocallyAssigned("p7".into()),
        ttl: 65535,
        tlvs: vec![Tlv::OrgSpecific(OrgSpecific { oui: [0x00, 0x12, 0x0f], subtype: 4, info: vec![0x23, 0x28] })],
    };
    let frames: Vec<Vec<u8>> = [&basic, &other, &local].iter().map(|r| r.to_frame(SRC).unwrap()).collect();
    let p = write(dir.path(), "lldp.pcapng", Format::PcapNg, &frames);
    let got = tshark(&p, &lldp_fields());
    assert_eq!(got.len(), 3);
    no_malformed(&got);

    let f = &got[0];
    assert_eq!(one(f, "eth.dst"), "01:80:c2:00:00:0e");
    assert_eq!(one(f, "eth.type"), "0x88cc");
    assert_eq!(one(f, "lldp.chassis.subtype"), "4");
    assert_eq!(one(f, "lldp.chassis.id.mac"), "02:00:00:00:00:01");
    assert_eq!(one(f, "lldp.port.subtype"), "5");
    assert_eq!(one(f, "lldp.port.id"), "eth0");
    assert_eq!(one(f, "lldp.time_to_live"), "120");
    assert_eq!(one(f, "lldp.port.desc"), "uplink");
    assert_eq!(one(f, "lldp.tlv.system.name"), "sw1");
    assert_eq!(one(f, "lldp.tlv.system.desc"), "rocefab");
    assert_eq!(one(f, "lldp.tlv.system_cap"), "0x0014");
    assert_eq!(one(f, "lldp.tlv.enable_system_cap"), "0x0010");
    assert_eq!(one(f, "lldp.mgn.address.subtype"), "1");
    assert_eq!(one(f, "lldp.mgn.addr.ip4"), "10.0.0.1");
    assert_eq!(one(f, "lldp.mgn.interface.subtype"), "2");
    assert_eq!(one(f, "lldp.mgn.interface.number"), "3");
    assert_eq!(all(f, "lldp.tlv.type"), ["1", "2", "3", "4", "5", "6", "7", "8", "0"]);

    let f = &got[1];
    assert_eq!(one(f, "lldp.chassis.subtype"), "5");
    assert_eq!(one(f, "lldp.chassis.id.ip4"), "192.0.2.7");
    assert_eq!(one(f, "lldp.port.subtype"), "3");
    assert_eq!(one(f, "lldp.port.id.mac"), "02:aa:bb:cc:dd:ee");
    assert_eq!(one(f, "lldp.time_to_live"), "0");

    let f = &got[2];
    assert_eq!(one(f, "lldp.chassis.subtype"), "7");
    let cid = one(f, "lldp.chassis.id");
    assert!(cid == "rail-1" || cid == "72:61:69:6c:2d:31" || cid == "7261696c2d31", "chassis id {cid}");
    assert_eq!(one(f, "lldp.port.subtype"), "7");
    assert_eq!(one(f, "lldp.port.id"), "p7");
    assert_eq!(one(f, "lldp.time_to_live"), "65535");
    assert_eq!(one(f, "lldp.orgtlv.oui"), "4623"); // 00-12-0f, IEEE 802.3
}

fn dcbx_fields() -> Vec<String> {
    let mut v: Vec<String> = [
        "lldp.orgtlv.oui",
        "lldp.ieee.802_1.subtype",
        "lldp.dcbx.ieee.willing",
        "lldp.dcbx.ieee.ets.cbs",
        "lldp.dcbx.ieee.ets.maxtcs",
        "lldp.dcbx.ieee.pfc.mbc",
        "lldp.dcbx.ieee.pfc.numtcs",
        "lldp.dcbx.ieee.app.prio",
        "lldp.dcbx.iee.app.sf",
        "lldp.dcbx.feature.app.proto",
        "lldp.dcbx.proto",
        "lldp.dcbx.type",
        "lldp.dcbx.len",
        "lldp.dcbx.version",
        "lldp.dcbx.max_version",
        "lldp.dcbx.control.seq",
        "lldp.dcbx.control.ack",
        "lldp.dcbx.feature.enabled",
        "lldp.dcbx.feature.willing",
        "lldp.dcbx.feature.error",
        "lldp.dcbx.feature.pg.numtcs",
        "lldp.dcbx.feature.pfc.numtcs",
        "lldp.dcbx.feature.app.sf",
        "lldp.dcbx.feature.app.oui",
        "lldp.dcbx.feature.app.prio",
        "_ws.malformed",
        "_ws.expert.message",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 0..8 {
        v.push(format!("lldp.dcbx.feature.pg.pgid_prio{i}"));
        v.push(format!("lldp.dcbx.feature.pg.per{i}"));
        v.push(format!("lldp.dcbx.ieee.ets.tsa{i}"));
        v.push(format!("lldp.dcbx.feature.pfc.prio{i}"));
    }
    v
}

fn flag(f: &Fields, field: &str) -> bool {
    match one(f, field) {
        "1" | "True" => true,
        "0" | "False" => false,
        v => panic!("{field}: not a boolean: {v}"),
    }
}

fn lldp_with(t: DcbxTlv) -> Vec<u8> {
    let mut r = lldp_basic_repr();
    r.tlvs = vec![t.into()];
    r.to_frame(SRC).unwrap()
}

fn assert_ets_tables(f: &Fields, t: &EtsTables) {
    for i in 0..8 {
        assert_eq!(one(f, &format!("lldp.dcbx.feature.pg.pgid_prio{i}")), t.prio_tc[i].to_string(), "prio {i} TC");
        assert_eq!(one(f, &format!("lldp.dcbx.feature.pg.per{i}")), t.tc_bandwidth[i].to_string(), "TC {i} bandwidth");
        assert_eq!(one(f, &format!("lldp.dcbx.ieee.ets.tsa{i}")), u8::from(t.tsa[i]).to_string(), "TC {i} TSA");
    }
}

#[test]
fn ieee_dcbx_tlvs_decoded_by_tshark() {
    let dir = tempdir();
    let ets_cfg = EtsConfig {
        willing: false,
        cbs: true,
        max_tcs: 3,
        tables: EtsTables {
            prio_tc: [0, 0, 0, 1, 0, 0, 0, 2],
            tc_bandwidth: [40, 60, 0, 0, 0, 0, 0, 0],
            tsa: [Tsa::Ets, Tsa::Ets, Tsa::Strict, Tsa::Strict, Tsa::Strict, Tsa::Strict, Tsa::Strict, Tsa::Vendor],
        },
    };
    let rec = EtsRecommendation { tables: ets_tables() };
    let pfc_cfgs = [pfc_cfg_repr(), PfcConfig { willing: true, mbc: false, pfc_cap: 2, enabled: prios(&[0, 7]) }];
    let app = app_repr();
    let mut frames = vec![
        lldp_with(DcbxTlv::EtsConfiguration(ets_cfg_repr())),
        lldp_with(DcbxTlv::EtsConfiguration(ets_cfg)),
        lldp_with(DcbxTlv::EtsRecommendation(rec)),
    ];
    frames.extend(pfc_cfgs.iter().map(|p| lldp_with(DcbxTlv::PfcConfiguration(*p))));
    frames.push(lldp_with(DcbxTlv::ApplicationPriority(app.clone())));

    let p = write(dir.path(), "dcbx.pcap", Format::Pcap, &frames);
    let names = dcbx_fields();
    let got = tshark(&p, &names.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(got.len(), frames.len());
    no_malformed(&got);

    // ETS Configuration, willing, 8 TCs (sent as 0).
    let f = &got[0];
    assert_eq!(one(f, "lldp.orgtlv.oui"), "32962"); // 00-80-c2
    assert_eq!(one(f, "lldp.ieee.802_1.subtype"), "0x09");
    assert!(flag(f, "lldp.dcbx.ieee.willing"));
    assert!(!flag(f, "lldp.dcbx.ieee.ets.cbs"));
    assert_eq!(one(f, "lldp.dcbx.ieee.ets.maxtcs"), "0");
    assert_ets_tables(f, &ets_tables());

    let f = &got[1];
    assert!(!flag(f, "lldp.dcbx.ieee.willing"));
    assert!(flag(f, "lldp.dcbx.ieee.ets.cbs"));
    assert_eq!(one(f, "lldp.dcbx.ieee.ets.maxtcs"), "3");
    assert_ets_tables(f, &ets_cfg.tables);

    let f = &got[2];
    assert_eq!(one(f, "lldp.ieee.802_1.subtype"), "0x0a");
    assert_ets_tables(f, &rec.tables);

    for (f, want) in got[3..5].iter().zip(&pfc_cfgs) {
        assert_eq!(one(f, "lldp.ieee.802_1.subtype"), "0x0b");
        assert_eq!(flag(f, "lldp.dcbx.ieee.willing"), want.willing);
        assert_eq!(flag(f, "lldp.dcbx.ieee.pfc.mbc"), want.mbc);
        assert_eq!(one(f, "lldp.dcbx.ieee.pfc.numtcs"), want.pfc_cap.to_string());
        for i in 0..8 {
            assert_eq!(flag(f, &format!("lldp.dcbx.feature.pfc.prio{i}")), want.enabled.contains(prio(i)), "prio {i}");
        }
    }

    let f = &got[5];
    assert_eq!(one(f, "lldp.ieee.802_1.subtype"), "0x0c");
    let want_prio: Vec<String> = app.entries.iter().map(|e| e.priority.to_string()).collect();
    let want_sel: Vec<String> = app.entries.iter().map(|e| u8::from(e.selector).to_string()).collect();
    let want_proto: Vec<String> = app.entries.iter().map(|e| format!("0x{:04x}", e.protocol)).collect();
    assert_eq!(all(f, "lldp.dcbx.ieee.app.prio"), want_prio);
    assert_eq!(all(f, "lldp.dcbx.iee.app.sf"), want_sel);
    assert_eq!(all(f, "lldp.dcbx.feature.app.proto"), want_proto);
    assert_eq!(all(f, "lldp.dcbx.feature.app.proto")[0], "0x12b7"); // 4791, RoCEv2
}

#[test]
fn cee_dcbx_decoded_by_tshark() {
    let dir = tempdir();
    let cee = cee_repr();
    let frames = vec![lldp_with(DcbxTlv::Cee(cee))];
    let p = write(dir.path(), "cee.pcap", Format::Pcap, &frames);
    let names = dcbx_fields();
    let got = tshark(&p, &names.iter().map(String::as_str).collect::<Vec<_>>());
    no_malformed(&got);
    let f = &got[0];
    assert_eq!(one(f, "lldp.orgtlv.oui"), "6945"); // 00-1b-21
    assert_eq!(one(f, "lldp.dcbx.proto"), "0x02");
    assert_eq!(all(f, "lldp.dcbx.type"), ["1", "2", "3", "4"]);
    assert_eq!(all(f, "lldp.dcbx.len"), ["10", "17", "6", "10"]);
    assert_eq!(one(f, "lldp.dcbx.control.seq"), "1");
    assert_eq!(one(f, "lldp.dcbx.control.ack"), "2");
    // Feature flags of PG, PFC, App in order.
    assert_eq!(all(f, "lldp.dcbx.feature.enabled"), ["1", "1", "1"]);
    assert_eq!(all(f, "lldp.dcbx.feature.willing"), ["1", "0", "0"]);
    assert_eq!(all(f, "lldp.dcbx.feature.error"), ["0", "1", "0"]);
    let pgid: Vec<String> = (0..8).map(|i| one(f, &format!("lldp.dcbx.feature.pg.pgid_prio{i}")).to_string()).collect();
    assert_eq!(pgid, ["0", "0", "0", "1", "0", "0", "0", "15"]);
    assert_eq!(one(f, "lldp.dcbx.feature.pg.per0"), "50");
    assert_eq!(one(f, "lldp.dcbx.feature.pg.per1"), "50");
    assert_eq!(one(f, "lldp.dcbx.feature.pg.numtcs"), "0x08");
    assert!(flag(f, "lldp.dcbx.feature.pfc.prio3"));
    assert!(!flag(f, "lldp.dcbx.feature.pfc.prio4"));
    assert_eq!(one(f, "lldp.dcbx.feature.pfc.numtcs"), "0x08");
    assert_eq!(one(f, "lldp.dcbx.feature.app.proto"), "0x8906");
    assert_eq!(one(f, "lldp.dcbx.feature.app.sf"), "0");
    assert_eq!(one(f, "lldp.dcbx.feature.app.oui"), "0x001b21");
    assert_eq!(one(f, "lldp.dcbx.feature.app.prio"), "3");
}

/// Our pcap/pcapng timestamps as tshark reads them, and captures rewritten by editcap as
/// read by our reader.
#[test]
fn capture_files_interoperate_with_wireshark_tools() {
    let dir = tempdir();
    let frames = vec![pfc_frame_bytes(), lldp_frame(&LLDPDU_BASIC)];
    for format in [Format::Pcap, Format::PcapNg] {
        let p = write(dir.path(), &format!("ts-{format:?}"), format, &frames);
        let got = tshark(&p, &["frame.time_epoch", "frame.len", "frame.encap_type"]);
        let epochs: Vec<&str> = got.iter().map(|f| one(f, "frame.time_epoch")).collect();
        assert_eq!(epochs, ["1700000000.123456789", "1700000001.123456789"], "{format:?}");
        assert_eq!(one(&got[0], "frame.len"), "60");
        assert_eq!(one(&got[0], "frame.encap_type"), "1"); // Ethernet
    }

    let src = write(dir.path(), "src.pcap", Format::Pcap, &frames);
    for (fmt, want_ns) in [("pcapng", 123_456_789), ("pcap", 123_456_000), ("nsecpcap", 123_456_789)] {
        let out = dir.path().join(format!("editcap.{fmt}"));
        let st = Command::new("editcap").args(["-F", fmt]).arg(&src).arg(&out).status().unwrap_or_else(|e| {
            panic!("cannot run editcap ({e}): install the Debian package `tshark`/`wireshark-common`")
        });
        assert!(st.success(), "editcap -F {fmt} failed");
        let back = pcap::read_all(&out).unwrap();
        assert_eq!(back.len(), 2, "{fmt}");
        for (i, (b, f)) in back.iter().zip(&frames).enumerate() {
            assert_eq!(&b.data, f, "{fmt} frame {i}");
            assert_eq!(b.timestamp, Duration::new(1_700_000_000 + i as u64, want_ns), "{fmt} frame {i}");
            assert_eq!(b.linktype, pcap::LINKTYPE_ETHERNET);
        }
    }
}
