//! scapy as an independent frame builder: `/usr/bin/python3` with scapy (Debian package
//! `python3-scapy`) builds PAUSE, PFC and LLDP/DCBX frames and writes them to a pcap; we read
//! the pcap with our reader, parse with our code and assert field values. Without scapy these
//! tests fail.

#[path = "l2_fixtures.rs"]
mod fx;

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use fx::*;
use rocefab_wire::dcbx::*;
use rocefab_wire::ethernet::{MacAddr, PrioritySet};
use rocefab_wire::lldp::*;
use rocefab_wire::mac_control::*;
use rocefab_wire::pcap;

const PYTHON: &str = "/usr/bin/python3";

/// Frames the script builds, in order; each is named in the script's output.
const SCRIPT: &str = r#"
import struct, sys
from scapy.all import Ether, wrpcap
from scapy.contrib.mac_control import MACControlPause, MACControlClassBasedFlowControl
from scapy.contrib.lldp import (LLDPDUChassisID, LLDPDUPortID, LLDPDUTimeToLive, LLDPDUPortDescription,
    LLDPDUSystemName, LLDPDUSystemDescription, LLDPDUSystemCapabilities, LLDPDUManagementAddress,
    LLDPDUGenericOrganisationSpecific, LLDPDUEndOfLLDPDU)

SRC = "02:00:00:00:00:01"
def macc(p): return Ether(dst="01:80:c2:00:00:01", src=SRC) / p
def lldp(*tlvs):
    p = Ether(dst="01:80:c2:00:00:0e", src=SRC) / LLDPDUChassisID(subtype=4, id="02:00:00:00:00:01") \
        / LLDPDUPortID(subtype=5, id=b"swp3") / LLDPDUTimeToLive(ttl=120)
    for t in tlvs: p = p / t
    return p / LLDPDUEndOfLLDPDU()
def org(oui, sub, data): return LLDPDUGenericOrganisationSpecific(org_code=oui, subtype=sub, data=data)

frames = []
frames.append(macc(MACControlPause(pause_time=4660)))
frames.append(macc(MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time=0xffff)))
frames.append(macc(MACControlClassBasedFlowControl(
    c0_enabled=1, c1_enabled=1, c2_enabled=1, c3_enabled=1, c4_enabled=1, c5_enabled=1, c6_enabled=1, c7_enabled=1,
    c0_pause_time=1, c1_pause_time=101, c2_pause_time=201, c3_pause_time=301,
    c4_pause_time=401, c5_pause_time=501, c6_pause_time=601, c7_pause_time=701)))
frames.append(macc(MACControlClassBasedFlowControl(c4_enabled=1, c4_pause_time=0)))
frames.append(lldp(
    LLDPDUPortDescription(description=b"to spine-2"),
    LLDPDUSystemName(system_name=b"rail-7"),
    LLDPDUSystemDescription(description=b"rocefab switch"),
    LLDPDUSystemCapabilities(mac_bridge_available=1, router_available=1, router_enabled=1),
    LLDPDUManagementAddress(management_address_subtype=1, management_address=bytes([10, 1, 2, 3]),
                            interface_numbering_subtype=2, interface_number=7),
))
# IEEE 802.1Qaz TLVs, information strings packed by hand from IEEE 802.1Q-2018 annex D.
ets = struct.pack("!B4B8B8B", 0x80 | 0x40 | 4, 0x12, 0x34, 0x56, 0x70,
                  10, 20, 30, 40, 0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 255)
frames.append(lldp(org(0x0080c2, 9, ets)))
frames.append(lldp(org(0x0080c2, 10, b"\x00" + ets[1:])))
frames.append(lldp(org(0x0080c2, 11, struct.pack("!BB", 0x80 | 8, 0x88))))
app = b"\x00" + struct.pack("!BH", (3 << 5) | 3, 4791) + struct.pack("!BH", (3 << 5) | 5, 24) \
    + struct.pack("!BH", (6 << 5) | 2, 860)
frames.append(lldp(org(0x0080c2, 12, app)))
# CEE: control + PFC sub-TLVs.
def sub(t, v): return struct.pack("!H", (t << 9) | len(v)) + v
cee = sub(1, struct.pack("!BBII", 0, 0, 5, 4)) + sub(3, struct.pack("!BBBBBB", 0, 0, 0xc0, 0, 0x08, 8))
frames.append(lldp(org(0x001b21, 2, cee)))
wrpcap(sys.argv[1], frames)
print(len(frames))
"#;

fn scapy_frames(dir: &Path) -> Vec<Vec<u8>> {
    let path = dir.join("scapy.pcap");
    let out = match Command::new(PYTHON).arg("-c").arg(SCRIPT).arg(&path).output() {
        Ok(o) => o,
        Err(e) => {
            panic!("cannot run {PYTHON} ({e}): install Debian packages python3 and python3-scapy")
        }
    };
    assert!(
        out.status.success(),
        "scapy script failed (is python3-scapy installed for {PYTHON}?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let frames: Vec<Vec<u8>> = pcap::read_all(&path).unwrap().into_iter().map(|f| f.data).collect();
    assert_eq!(frames.len(), n);
    frames
}

fn dcbx_in(frame: &[u8]) -> DcbxTlv {
    let (_, r) = LldpduRepr::parse_frame(frame).unwrap();
    assert_eq!(r.chassis_id, ChassisId::MacAddress(SRC));
    assert_eq!(r.port_id, PortId::InterfaceName("swp3".into()));
    assert_eq!(r.ttl, 120);
    let d: Vec<&DcbxTlv> = r.dcbx().collect();
    assert_eq!(d.len(), 1, "{r}");
    d[0].clone()
}

#[test]
fn scapy_frames_parse_with_expected_values() {
    let dir = tempfile::Builder::new().prefix("rf-l2-").tempdir().unwrap();
    let f = scapy_frames(dir.path());
    assert_eq!(f.len(), 10);

    // PAUSE.
    let (eth, r) = MacControlRepr::parse_frame(&f[0]).unwrap();
    assert_eq!(eth.dst, MacAddr::MAC_CONTROL);
    assert_eq!(eth.src, SRC);
    assert_eq!(r, MacControlRepr::Pause { quanta: 4660 });

    // PFC, priority 3 only.
    let (_, r) = MacControlRepr::parse_frame(&f[1]).unwrap();
    assert_eq!(r, MacControlRepr::Pfc(PfcRepr::pause(prios(&[3]), 0xffff)));

    // PFC, all priorities.
    let (_, r) = MacControlRepr::parse_frame(&f[2]).unwrap();
    assert_eq!(
        r,
        MacControlRepr::Pfc(PfcRepr { enabled: PrioritySet(0xff), quanta: [1, 101, 201, 301, 401, 501, 601, 701] })
    );

    // PFC resume on priority 4.
    let (_, r) = MacControlRepr::parse_frame(&f[3]).unwrap();
    let MacControlRepr::Pfc(p) = r else { panic!("{r:?}") };
    assert_eq!(p.enabled, prios(&[4]));
    assert_eq!(p.quanta_for(prio(4)), Some(0));

    // LLDP with the basic optional TLVs.
    let (eth, r) = LldpduRepr::parse_frame(&f[4]).unwrap();
    assert_eq!(eth.dst, MacAddr::LLDP_NEAREST_BRIDGE);
    assert_eq!(r.chassis_id, ChassisId::MacAddress(SRC));
    assert_eq!(r.port_id, PortId::InterfaceName("swp3".into()));
    assert_eq!(r.ttl, 120);
    assert_eq!(
        r.tlvs,
        vec![
            Tlv::PortDescription { text: "to spine-2".into() },
            Tlv::SystemName { text: "rail-7".into() },
            Tlv::SystemDescription { text: "rocefab switch".into() },
            Tlv::SystemCapabilities(SystemCapabilities {
                capabilities: SystemCapabilities::BRIDGE | SystemCapabilities::ROUTER,
                enabled: SystemCapabilities::ROUTER,
            }),
            Tlv::ManagementAddress(ManagementAddress {
                address: NetworkAddress::Ipv4(Ipv4Addr::new(10, 1, 2, 3)),
                interface_subtype: 2,
                interface_number: 7,
                oid: vec![],
            }),
        ]
    );

    // ETS Configuration.
    let tables = EtsTables {
        prio_tc: [1, 2, 3, 4, 5, 6, 7, 0],
        tc_bandwidth: [10, 20, 30, 40, 0, 0, 0, 0],
        tsa: [Tsa::Ets, Tsa::Ets, Tsa::Ets, Tsa::Ets, Tsa::Strict, Tsa::Strict, Tsa::Strict, Tsa::Vendor],
    };
    assert_eq!(dcbx_in(&f[5]), DcbxTlv::EtsConfiguration(EtsConfig { willing: true, cbs: true, max_tcs: 4, tables }));
    assert_eq!(dcbx_in(&f[6]), DcbxTlv::EtsRecommendation(EtsRecommendation { tables }));
    assert_eq!(
        dcbx_in(&f[7]),
        DcbxTlv::PfcConfiguration(PfcConfig { willing: true, mbc: false, pfc_cap: 8, enabled: prios(&[3, 7]) })
    );
    assert_eq!(
        dcbx_in(&f[8]),
        DcbxTlv::ApplicationPriority(AppPriority {
            entries: vec![
                AppEntry::rocev2(prio(3)),
                AppEntry::dscp(24, prio(3)),
                AppEntry { priority: prio(6), selector: AppSelector::TcpSctpPort, protocol: 860 },
            ]
        })
    );
    assert_eq!(
        dcbx_in(&f[9]),
        DcbxTlv::Cee(CeeDcbx {
            tlvs: vec![
                CeeTlv::Control(CeeControl { oper_version: 0, max_version: 0, seq_no: 5, ack_no: 4 }),
                CeeTlv::Pfc {
                    feature: CeeFeature { enabled: true, willing: true, ..Default::default() },
                    pfc: CeePfc { enabled: prios(&[3]), num_tcs: 8 },
                },
            ]
        })
    );
}

/// Our emitter reproduces scapy's bytes exactly for the same content (scapy pads frames
/// only when sent, so compare up to the shorter length and check our padding is zero).
#[test]
fn our_frames_match_scapy_bytes() {
    let dir = tempfile::Builder::new().prefix("rf-l2-").tempdir().unwrap();
    let f = scapy_frames(dir.path());
    for (i, frame) in f.iter().enumerate() {
        let ours = if i < 4 {
            let (_, r) = MacControlRepr::parse_frame(frame).unwrap();
            r.to_frame(SRC).to_vec()
        } else {
            let (_, r) = LldpduRepr::parse_frame(frame).unwrap();
            r.to_frame(SRC).unwrap()
        };
        let n = frame.len().min(ours.len());
        assert_eq!(&ours[..n], &frame[..n], "frame {i}");
        assert!(ours[n..].iter().all(|&b| b == 0), "frame {i}: non-zero padding");
        assert!(frame[n..].iter().all(|&b| b == 0), "frame {i}: scapy has extra non-padding bytes");
    }
}
