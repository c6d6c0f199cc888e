//! `rocefab pcap show`: decode every frame of a pcap/pcapng file — IEEE 802.1Qbb PFC and
//! 802.3x PAUSE (with the pause duration at `--speed`), LLDP with DCBX TLVs, RoCEv2 (DSCP/ECN,
//! UDP ports, BTH and every RC / UC / UD extension header: DETH, RETH, AtomicETH, AETH,
//! AtomicAckETH, ImmDt, IETH; ICRC status), RoCE v1 (EtherType 0x8915: GRH, the same
//! InfiniBand headers, ICRC shown but not checked), Ultra Ethernet Transport (UDP port 4793 or
//! IP protocol 253 with the entropy header: PDS type, flags, PSN / CACK PSN, PDC ids, SACK,
//! NSCC state, NACK code; the SES header's opcode, job, PIDonFEP, resource index, buffer
//! offset, message id and lengths; see [`uet`]) — and list everything else as
//! `unknown ethertype 0x....`. Ethernet, Linux cooked (SLL/SLL2, `tcpdump -i any`) and raw-IP
//! captures are decoded. RoCEv2 frames cut by the capture's snap length (`tcpdump -s 128`)
//! still show their headers, with the captured part of the payload and the ICRC marked as
//! not captured. A malformed frame yields one error line naming the layer and
//! the lengths involved; decoding continues with the next frame. `--json` prints one JSON
//! object per frame and line (JSON Lines) with the same fields.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use rocefab_wire::ethernet::{EthernetRepr, ETHERTYPE_LLDP, ETHERTYPE_MAC_CONTROL};
use rocefab_wire::lldp::LldpduRepr;
use rocefab_wire::mac_control::{quanta_to_duration, MacControlRepr};
use rocefab_wire::pcap::{as_ethernet, CaptureReader, LINKTYPE_ETHERNET};
use rocefab_wire::roce::{self, AnyFrame, IcrcStatus, IpEcn, ParsedFrame, ParsedV1Frame};
use serde_json::{json, Value};

use crate::units::fmt_ns;

mod uet;

/// Arguments of `rocefab pcap show`.
#[derive(Debug, clap::Args)]
pub struct PcapShowArgs {
    /// The pcap or pcapng file.
    pub file: PathBuf,
    /// Port speed used to turn pause quanta into time: e.g. 400G, 100G, 25G, 1G, 100M, or bit/s.
    #[arg(long, default_value = "100G", value_parser = parse_speed)]
    pub speed: u64,
    /// Print one JSON object per frame (JSON Lines) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Parses `400G`, `100g`, `25G`, `1G`, `100M`, `10k` or a plain number of bit/s.
pub fn parse_speed(s: &str) -> Result<u64, String> {
    rocefab_units::parse_rate(s)
}

fn ecn_name(e: IpEcn) -> &'static str {
    match e {
        IpEcn::NotEct => "not-ect",
        IpEcn::Ect1 => "ect1",
        IpEcn::Ect0 => "ect0",
        IpEcn::CongestionExperienced => "ce",
    }
}

fn fmt_speed(bps: u64) -> String {
    if bps.is_multiple_of(1_000_000_000) {
        format!("{}G", bps / 1_000_000_000)
    } else if bps.is_multiple_of(1_000_000) {
        format!("{}M", bps / 1_000_000)
    } else {
        format!("{bps} bit/s")
    }
}

/// One decoded frame: the JSON object and the text line(s).
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub json: Value,
    pub text: String,
}

fn error(layer: &str, msg: String, len: usize) -> (Value, String) {
    (json!({ "kind": "error", "layer": layer, "error": msg }), format!("error: {layer}: {msg} (frame of {len} bytes)"))
}

fn roce_layer(e: &roce::Error) -> String {
    match e {
        roce::Error::Truncated { layer, .. } => layer.to_string(),
        roce::Error::PadCount { .. } => "BTH".into(),
        roce::Error::Lower(_) => "Ethernet/IP/UDP".into(),
        roce::Error::NotIp(_) | roce::Error::NotRoceV1(_) => "Ethernet".into(),
        roce::Error::GrhNextHeader(_) => "GRH".into(),
        roce::Error::IpVersion(_) | roce::Error::Ipv4HeaderLen(_) | roce::Error::Fragmented => "IP".into(),
        roce::Error::NotUdp(_) | roce::Error::NotRocePort(_) => "UDP".into(),
        _ => "RoCEv2".into(),
    }
}

/// Text and JSON of the InfiniBand part (BTH, the extension headers in wire order, payload,
/// ICRC), shared by RoCEv2 and RoCE v1.
fn decode_ib(h: &roce::Repr, payload_captured: usize, payload_len: usize, icrc: IcrcStatus) -> (Value, String) {
    let b = &h.bth;
    let mut text = format!(
        "{} qp {:#08x} psn {} pkey {:#06x} se={} m={} pad={} a={} becn={}",
        b.opcode,
        b.dest_qp,
        b.psn,
        b.pkey,
        u8::from(b.solicited),
        u8::from(b.migreq),
        b.pad_count,
        u8::from(b.ack_req),
        u8::from(b.becn),
    );
    if let Some(d) = &h.deth {
        let _ = write!(text, " | DETH qkey {:#010x} srcqp {:#08x}", d.q_key, d.src_qp);
    }
    if let Some(r) = &h.reth {
        let _ = write!(text, " | RETH va {:#x} rkey {:#x} len {}", r.va, r.r_key, r.dma_len);
    }
    if let Some(a) = &h.atomic_eth {
        let _ = write!(
            text,
            " | AtomicETH va {:#x} rkey {:#x} swap/add {:#x} cmp {:#x}",
            a.va, a.r_key, a.swap_add, a.compare
        );
    }
    if let Some(a) = &h.aeth {
        let _ = write!(text, " | AETH {} (0x{:02x}) msn {}", a.syndrome, u8::from(a.syndrome), a.msn);
    }
    if let Some(a) = &h.atomic_ack_eth {
        let _ = write!(text, " | AtomicAckETH orig {:#018x}", a.orig_remote_data);
    }
    if let Some(i) = h.immediate {
        let _ = write!(text, " | imm {i:#x}");
    }
    if let Some(i) = &h.ieth {
        let _ = write!(text, " | IETH rkey {:#x}", i.r_key);
    }
    if payload_captured == payload_len {
        let _ = write!(text, " | payload {payload_len}");
    } else {
        let _ = write!(text, " | payload {payload_captured} of {payload_len} bytes captured");
    }
    let _ = write!(text, " | ICRC {icrc}");
    // Values in wire order, as Wireshark's infiniband.invariant.crc (and the text above).
    let w = rocefab_wire::roce::icrc::wire_order;
    let icrc = match icrc {
        IcrcStatus::Good(v) => json!({ "status": "good", "value": w(v) }),
        IcrcStatus::Bad { expected, found } => json!({ "status": "bad", "expected": w(expected), "found": w(found) }),
        IcrcStatus::NotCaptured { captured, orig_len } => {
            json!({ "status": "not_captured", "captured": captured, "orig_len": orig_len })
        }
        IcrcStatus::NotChecked { stored } => json!({ "status": "not_checked", "stored": w(stored) }),
    };
    let json = json!({
        "bth": {
            "opcode": u8::from(b.opcode),
            "opcode_name": b.opcode.name(),
            "transport": b.opcode.transport().name(),
            "se": b.solicited,
            "m": b.migreq,
            "pad_count": b.pad_count,
            "tver": b.tver,
            "pkey": b.pkey,
            "fecn": b.fecn,
            "becn": b.becn,
            "dest_qp": b.dest_qp,
            "ack_req": b.ack_req,
            "psn": b.psn,
        },
        "deth": h.deth.map(|d| json!({ "q_key": d.q_key, "src_qp": d.src_qp })),
        "reth": h.reth.map(|r| json!({ "va": r.va, "r_key": r.r_key, "dma_len": r.dma_len })),
        "atomic_eth": h.atomic_eth.map(|a| json!({
            "va": a.va,
            "r_key": a.r_key,
            "swap_add": a.swap_add,
            "compare": a.compare,
        })),
        "aeth": h.aeth.map(|a| json!({
            "syndrome": u8::from(a.syndrome),
            "syndrome_text": a.syndrome.to_string(),
            "msn": a.msn,
        })),
        "atomic_ack_eth": h.atomic_ack_eth.map(|a| json!({ "orig_remote_data": a.orig_remote_data })),
        "immediate": h.immediate,
        "ieth": h.ieth.map(|i| json!({ "r_key": i.r_key })),
        "payload_len": payload_len,
        "payload_captured": payload_captured,
        "icrc": icrc,
    });
    (json, text)
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Value::Object(a), Value::Object(b)) = (&mut a, b) {
        a.extend(b);
    }
    a
}

fn decode_roce(p: &ParsedFrame<'_>) -> (Value, String) {
    // The 802.1Q tag, after the MACs where it sits on the wire.
    let vlan = p.vlan.map(|(pcp, vid)| format!(" vlan {vid} pcp {pcp}")).unwrap_or_default();
    let (ib_json, ib_text) = decode_ib(&p.headers, p.payload.len(), p.payload_len, p.icrc);
    let text = format!(
        "RoCEv2 {} > {}{vlan} {} > {} dscp {} ecn {} | {ib_text}",
        rocefab_wire::ethernet::MacAddr(p.src_mac),
        rocefab_wire::ethernet::MacAddr(p.dst_mac),
        std::net::SocketAddr::new(p.ip.src, p.udp_src_port),
        std::net::SocketAddr::new(p.ip.dst, p.udp_dst_port),
        p.ip.dscp,
        ecn_name(p.ip.ecn),
    );
    let head = json!({
        "kind": "roce",
        "roce_version": 2,
        "src_mac": rocefab_wire::ethernet::MacAddr(p.src_mac).to_string(),
        "dst_mac": rocefab_wire::ethernet::MacAddr(p.dst_mac).to_string(),
        "vlan": p.vlan.map(|(pcp, vid)| json!({ "pcp": pcp, "vid": vid })),
        "ip": {
            "version": if p.ip.src.is_ipv4() { 4 } else { 6 },
            "src": p.ip.src.to_string(),
            "dst": p.ip.dst.to_string(),
            "dscp": p.ip.dscp,
            "ecn": p.ip.ecn.value(),
            "ecn_name": ecn_name(p.ip.ecn),
            "ttl": p.ip.ttl,
        },
        "udp": { "src_port": p.udp_src_port, "dst_port": p.udp_dst_port, "checksum": p.udp_checksum },
    });
    (merge(head, ib_json), text)
}

fn decode_roce_v1(p: &ParsedV1Frame<'_>) -> (Value, String) {
    let vlan = p.vlan.map(|(pcp, vid)| format!(" vlan {vid} pcp {pcp}")).unwrap_or_default();
    let g = &p.grh;
    let (ib_json, ib_text) = decode_ib(&p.headers, p.payload.len(), p.payload_len, p.icrc);
    let text = format!(
        "RoCEv1 {} > {}{vlan} {} > {} tclass {:#04x} flow {:#07x} hop {} | {ib_text}",
        rocefab_wire::ethernet::MacAddr(p.src_mac),
        rocefab_wire::ethernet::MacAddr(p.dst_mac),
        g.sgid,
        g.dgid,
        g.traffic_class,
        g.flow_label,
        g.hop_limit,
    );
    let head = json!({
        "kind": "roce",
        "roce_version": 1,
        "src_mac": rocefab_wire::ethernet::MacAddr(p.src_mac).to_string(),
        "dst_mac": rocefab_wire::ethernet::MacAddr(p.dst_mac).to_string(),
        "vlan": p.vlan.map(|(pcp, vid)| json!({ "pcp": pcp, "vid": vid })),
        "grh": {
            "ip_version": g.ip_version,
            "traffic_class": g.traffic_class,
            "flow_label": g.flow_label,
            "payload_len": g.payload_len,
            "next_header": g.next_header,
            "hop_limit": g.hop_limit,
            "sgid": g.sgid.to_string(),
            "dgid": g.dgid.to_string(),
        },
    });
    (merge(head, ib_json), text)
}

/// `orig_len`: the frame's length on the wire (more than `data.len()` when the capture's snap
/// length cut it).
fn decode_ethernet(data: &[u8], orig_len: usize, speed: u64) -> (Value, String) {
    let (eth, _) = match EthernetRepr::parse(data) {
        Ok(x) => x,
        Err(e) => return error("Ethernet", e.to_string(), data.len()),
    };
    let head = json!({ "src_mac": eth.src.to_string(), "dst_mac": eth.dst.to_string(), "ethertype": eth.ethertype });
    let (body, text) = match eth.ethertype {
        ETHERTYPE_MAC_CONTROL => match MacControlRepr::parse_frame(data) {
            Ok((_, MacControlRepr::Pfc(pfc))) => {
                let mut prios = Vec::new();
                let mut text =
                    format!("PFC {} > {} enable={} (cev {:#06x})", eth.src, eth.dst, pfc.enabled, pfc.enabled.bits());
                for p in pfc.enabled.iter() {
                    let q = pfc.quanta[usize::from(p.value())];
                    let d = quanta_to_duration(q, speed).as_nanos();
                    prios.push(json!({ "priority": p.value(), "quanta": q, "pause_ns": d as u64 }));
                    let _ = write!(text, " p{p}={q} ({} at {})", fmt_ns(d as f64), fmt_speed(speed));
                }
                let j = json!({
                    "kind": "pfc",
                    "cev": pfc.enabled.bits(),
                    "enabled": pfc.enabled.iter().map(|p| p.value()).collect::<Vec<_>>(),
                    "quanta": pfc.quanta,
                    "priorities": prios,
                    "speed_bps": speed,
                });
                (j, text)
            }
            Ok((_, MacControlRepr::Pause { quanta })) => {
                let d = quanta_to_duration(quanta, speed).as_nanos();
                let text = format!(
                    "PAUSE {} > {} quanta={quanta} ({} at {})",
                    eth.src,
                    eth.dst,
                    fmt_ns(d as f64),
                    fmt_speed(speed)
                );
                (json!({ "kind": "pause", "quanta": quanta, "pause_ns": d as u64, "speed_bps": speed }), text)
            }
            Ok((_, MacControlRepr::Unknown { opcode })) => (
                json!({ "kind": "mac_control", "opcode": opcode }),
                format!("MAC control {} > {} unknown opcode {opcode:#06x}", eth.src, eth.dst),
            ),
            Err(e) => error("MAC control", e.to_string(), data.len()),
        },
        ETHERTYPE_LLDP => match LldpduRepr::parse_frame(data) {
            Ok((_, lldp)) => {
                let text = format!("{} > {} {}", eth.src, eth.dst, lldp);
                let tlvs = serde_json::to_value(&lldp).unwrap_or(Value::Null);
                (json!({ "kind": "lldp", "lldp": tlvs }), text)
            }
            Err(e) => error("LLDP", e.to_string(), data.len()),
        },
        0x0800 | 0x86dd | 0x8100 | 0x88a8 | roce::ETHERTYPE_ROCE_V1 => match AnyFrame::parse_captured(data, orig_len) {
            Ok(AnyFrame::V2(p)) => decode_roce(&p),
            Ok(AnyFrame::V1(p)) => decode_roce_v1(&p),
            Err(e @ (roce::Error::NotUdp(_) | roce::Error::NotRocePort(_))) => {
                match rocefab_wire::uet::frame::ParsedUetFrame::parse(data) {
                    Ok(p) => uet::decode(&p),
                    Err(u) if uet::not_uet(&u) => (
                        json!({ "kind": "ip", "note": e.to_string() }),
                        format!("IP {} > {} (not RoCEv2: {e})", eth.src, eth.dst),
                    ),
                    // UET by its port or protocol, but its headers do not parse.
                    Err(u) => {
                        // A frame the capture's snap length cut is not malformed: say so (its
                        // headers are not decoded, unlike a cut RoCEv2 frame's).
                        let what = if orig_len > data.len() {
                            format!("UET frame cut by the snap length ({} of {orig_len} bytes captured)", data.len())
                        } else {
                            "malformed UET frame".to_string()
                        };
                        let (mut j, t) = error(&uet::layer(&u), format!("{what}: {u}"), data.len());
                        if let Value::Object(m) = &mut j {
                            m.insert("protocol".into(), json!("uet"));
                        }
                        (j, t)
                    }
                }
            }
            Err(e) => error(&roce_layer(&e), e.to_string(), data.len()),
        },
        t => (json!({ "kind": "unknown" }), format!("unknown ethertype {t:#06x} {} > {}", eth.src, eth.dst)),
    };
    let mut json = head;
    if let (Value::Object(h), Value::Object(b)) = (&mut json, body) {
        h.extend(b);
    }
    (json, text)
}

/// Decodes one captured frame (index from 1, timestamp in seconds). `data` is the captured
/// record, `orig_len` the record's length on the wire (pcap `orig_len`; larger than
/// `data.len()` when the snap length cut it).
pub fn decode(index: usize, time: f64, linktype: u32, data: &[u8], orig_len: usize, speed: u64) -> Decoded {
    // Bytes the snap length cut off; the same number is missing from the Ethernet view.
    let cut = orig_len.saturating_sub(data.len());
    let (mut json, text) = match as_ethernet(linktype, data) {
        Some(frame) if linktype == LINKTYPE_ETHERNET => decode_ethernet(&frame, frame.len() + cut, speed),
        // Cooked (tcpdump -i any) and raw-IP captures: decoded through a synthesised Ethernet
        // header, whose destination MAC (and source MAC, unless recorded) are zeros.
        Some(frame) => {
            let (mut j, t) = decode_ethernet(&frame, frame.len() + cut, speed);
            if let Value::Object(m) = &mut j {
                m.insert("linktype".into(), json!(linktype));
            }
            (j, format!("(linktype {linktype}, Ethernet header synthesised) {t}"))
        }
        None => (json!({ "kind": "unknown", "linktype": linktype }), format!("linktype {linktype} not decoded")),
    };
    if let Value::Object(m) = &mut json {
        m.insert("index".into(), json!(index));
        m.insert("time".into(), json!(time));
        m.insert("len".into(), json!(data.len()));
        m.insert("orig_len".into(), json!(orig_len.max(data.len())));
    }
    Decoded { json, text: format!("#{index} {time:.6} {text}") }
}

/// Runs `rocefab pcap show`.
pub fn run(args: &PcapShowArgs) -> Result<()> {
    use std::io::Write;
    // The error names the file (once) and what it is.
    let reader = CaptureReader::open(&args.file)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut first_ts = None;
    for (i, item) in reader.enumerate() {
        let frame = item.with_context(|| format!("reading frame {} of {}", i + 1, args.file.display()))?;
        let t0 = *first_ts.get_or_insert(frame.timestamp);
        let time = frame.timestamp.saturating_sub(t0).as_secs_f64();
        let orig_len = usize::try_from(frame.orig_len).unwrap_or(usize::MAX);
        let d = decode(i + 1, time, frame.linktype, &frame.data, orig_len, args.speed);
        let written = if args.json { writeln!(out, "{}", d.json) } else { writeln!(out, "{}", d.text) };
        match written {
            // `rocefab pcap show big.pcap | head`: the reader went away, which is not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
    }
    Ok(())
}
