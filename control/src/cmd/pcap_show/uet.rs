//! The UET part of `rocefab pcap show`: a frame to UDP port 4793 or IP protocol 253 (research
//! file docs/research/uet-wire-formats.md §1) decoded by `rocefab_wire::uet`, one text line and
//! one JSON object with its PDS header (type, flags, PSN / CACK PSN, PDC ids, SACK, NSCC state,
//! NACK code), its SES header (opcode, job, PIDonFEP, resource index, buffer offset, message
//! id, lengths) and its entropy. A frame that is UET by its port or protocol but does not parse
//! is reported as malformed, with the layer and the reason.

use std::fmt::Write as _;

use rocefab_wire::ethernet::MacAddr;
use rocefab_wire::uet::frame::{self, Encap, ParsedUetFrame, Ses};
use rocefab_wire::uet::ses::{self, StdTail};
use rocefab_wire::uet::{ack_flags, cc_type, control_flags, nack_flags, request_flags, rudi_flags};
use rocefab_wire::uet::{NsccState, PdsType, Repr};
use serde_json::{json, Value};

use super::ecn_name;

/// The layer a UET parse error belongs to.
pub(super) fn layer(e: &frame::Error) -> String {
    match e {
        frame::Error::Truncated { layer, .. } => layer.to_string(),
        frame::Error::Pds(_) => "UET PDS".into(),
        frame::Error::Ses(_) => "UET SES".into(),
        frame::Error::Fragmented => "IP".into(),
        frame::Error::NotIp(_) => "Ethernet".into(),
        _ => "Ethernet/IP/UDP".into(),
    }
}

/// The names of the set bits of `flags`, as `[A,B]` (empty when none is set).
fn flag_names(flags: u8, names: &[(u8, &str)]) -> String {
    let set: Vec<&str> = names.iter().filter(|(b, _)| flags & b != 0).map(|(_, n)| *n).collect();
    if set.is_empty() {
        String::new()
    } else {
        format!(" [{}]", set.join(","))
    }
}

const REQUEST_FLAGS: &[(u8, &str)] =
    &[(request_flags::RETX, "RETX"), (request_flags::AR, "AR"), (request_flags::SYN, "SYN")];
const ACK_FLAGS: &[(u8, &str)] =
    &[(ack_flags::BIT6, "EPSN?"), (ack_flags::M, "M"), (ack_flags::RETX, "RETX"), (ack_flags::P, "P")];
const NACK_FLAGS: &[(u8, &str)] = &[(nack_flags::M, "M"), (nack_flags::RETX, "RETX"), (nack_flags::NT, "NT")];
const CONTROL_FLAGS: &[(u8, &str)] = &[
    (control_flags::ISROD, "ISROD"),
    (control_flags::RETX, "RETX"),
    (control_flags::AR, "AR"),
    (control_flags::SYN, "SYN"),
];
const RUDI_FLAGS: &[(u8, &str)] = &[(rudi_flags::M, "M"), (rudi_flags::RETX, "RETX")];
const SES_FLAGS: &[(u8, &str)] = &[
    (ses::flags::DC, "DC"),
    (ses::flags::IE, "IE"),
    (ses::flags::REL, "REL"),
    (ses::flags::HD, "HD"),
    (ses::flags::EOM, "EOM"),
    (ses::flags::SOM, "SOM"),
];

/// An ACK's request field (research file §4: 0 none, 1 clear, 2 close).
fn ack_request(flags: u8) -> &'static str {
    match (flags & ack_flags::REQ_MASK) >> ack_flags::REQ_SHIFT {
        0 => "none",
        1 => "clear",
        2 => "close",
        _ => "reserved",
    }
}

/// The destination PDC id, or a SYN's pdc_info and psn_offset in its place.
fn dpdcid_text(flags: u8, syn_bit: u8, dpdcid: u16) -> (String, Value) {
    if flags & syn_bit != 0 {
        let (info, off) = (dpdcid >> 12, dpdcid & 0x0fff);
        (format!("pdc_info {info:#x} psn_offset {off}"), json!({ "pdc_info": info, "psn_offset": off }))
    } else {
        (format!("dpdcid {dpdcid:#06x}"), json!({ "dpdcid": dpdcid }))
    }
}

fn pds(r: &Repr) -> (Value, String) {
    let t = r.pds_type();
    let mut j = json!({
        "type": u8::from(t),
        "type_name": t.name(),
        "next_header": r.next_header(),
        "flags": r.flags(),
    });
    let text = match *r {
        Repr::Request { flags, clear_psn_offset, psn, spdcid, dpdcid, .. }
        | Repr::RequestCc { flags, clear_psn_offset, psn, spdcid, dpdcid, .. } => {
            let (d_text, d_json) = dpdcid_text(flags, request_flags::SYN, dpdcid);
            merge(&mut j, json!({ "psn": psn, "clear_psn_offset": clear_psn_offset, "spdcid": spdcid }));
            merge(&mut j, d_json);
            let mut s = format!(
                "{t} psn {psn} clear_psn_offset {clear_psn_offset} spdcid {spdcid:#06x} {d_text}{}",
                flag_names(flags, REQUEST_FLAGS)
            );
            if let Repr::RequestCc { ccc_id, credit_target, .. } = *r {
                merge(&mut j, json!({ "ccc_id": ccc_id, "credit_target": credit_target }));
                let _ = write!(s, " ccc_id {ccc_id:#04x} credit_target {credit_target}");
            }
            s
        }
        Repr::Rudi { flags, pkt_id, .. } => {
            merge(&mut j, json!({ "pkt_id": pkt_id }));
            format!("{t} pkt_id {pkt_id:#010x}{}", flag_names(flags, RUDI_FLAGS))
        }
        Repr::Uud { flags, .. } => format!("{t} flags {flags:#04x}"),
        Repr::Control { ctl_type, flags, probe_opaque, psn, spdcid, dpdcid, payload } => {
            let (d_text, d_json) = dpdcid_text(flags, control_flags::SYN, dpdcid);
            merge(
                &mut j,
                json!({
                    "ctl_type": u8::from(ctl_type),
                    "ctl_type_name": ctl_type.name(),
                    "probe_opaque": probe_opaque,
                    "psn": psn,
                    "spdcid": spdcid,
                    "payload": payload,
                }),
            );
            merge(&mut j, d_json);
            format!(
                "{t} {ctl_type} psn {psn} spdcid {spdcid:#06x} {d_text} probe_opaque {probe_opaque:#06x} payload \
                 {payload:#010x}{}",
                flag_names(flags, CONTROL_FLAGS)
            )
        }
        Repr::Ack { flags, ack_psn_offset, cack_psn, spdcid, dpdcid, .. }
        | Repr::AckCc { flags, ack_psn_offset, cack_psn, spdcid, dpdcid, .. } => {
            merge(
                &mut j,
                json!({
                    "cack_psn": cack_psn,
                    "ack_psn_offset": ack_psn_offset,
                    "spdcid": spdcid,
                    "dpdcid": dpdcid,
                    "request": ack_request(flags),
                }),
            );
            let mut s = format!(
                "{t} cack_psn {cack_psn} ack_psn_offset {ack_psn_offset} spdcid {spdcid:#06x} dpdcid {dpdcid:#06x} \
                 req {}{}",
                ack_request(flags),
                flag_names(flags, ACK_FLAGS)
            );
            if let Repr::AckCc { cc_type: ct, cc_flags, mpr, sack_psn_offset, sack_bitmap, cc_state, .. } = *r {
                // The SACK bitmap's first PSN is CACK_PSN plus the (signed) offset.
                let sack_base = cack_psn.wrapping_add_signed(i32::from(sack_psn_offset));
                merge(
                    &mut j,
                    json!({
                        "cc_type": ct,
                        "cc_flags": cc_flags,
                        "mpr": mpr,
                        "sack_psn_offset": sack_psn_offset,
                        "sack_base_psn": sack_base,
                        "sack_bitmap": sack_bitmap,
                        "cc_state": cc_state,
                    }),
                );
                let _ = write!(
                    s,
                    " | SACK base {sack_base} (offset {sack_psn_offset}) bitmap {sack_bitmap:#018x} mpr {mpr}"
                );
                match ct {
                    cc_type::NSCC => {
                        let n = NsccState::from_u64(cc_state);
                        merge(
                            &mut j,
                            json!({ "nscc": {
                                "service_time": n.service_time,
                                "restore_cwnd": n.restore_cwnd,
                                "rcv_cwnd_pend": n.rcv_cwnd_pend,
                                "rcvd_bytes": n.rcvd_bytes,
                                "ooo_count": n.ooo_count,
                            }}),
                        );
                        let _ = write!(
                            s,
                            " | NSCC service_time {} restore_cwnd {} rcv_cwnd_pend {} rcvd_bytes {} ooo_count {}",
                            n.service_time,
                            u8::from(n.restore_cwnd),
                            n.rcv_cwnd_pend,
                            n.rcvd_bytes,
                            n.ooo_count
                        );
                    }
                    cc_type::CREDIT => {
                        // Credit layout (research file §5): credit in bytes 24-26, ooo_count in 30-31.
                        let (credit, ooo) = ((cc_state >> 40) as u32, cc_state as u16);
                        merge(&mut j, json!({ "credit": { "credit": credit, "ooo_count": ooo } }));
                        let _ = write!(s, " | credit {credit} ooo_count {ooo}");
                    }
                    other => {
                        let _ = write!(s, " | cc_type {other} state {cc_state:#018x}");
                    }
                }
            }
            s
        }
        Repr::Nack { flags, code, vendor_code, psn, spdcid, dpdcid, payload, .. } => {
            merge(
                &mut j,
                json!({
                    "nack_code": u8::from(code),
                    "nack_code_name": code.name(),
                    "vendor_code": vendor_code,
                    "psn": psn,
                    "spdcid": spdcid,
                    "dpdcid": dpdcid,
                    "payload": payload,
                    "nack_type": if flags & nack_flags::NT != 0 { "RUDI" } else { "RUD/ROD" },
                }),
            );
            let what = if flags & nack_flags::NT != 0 { "pkt_id" } else { "psn" };
            format!(
                "{t} {code} ({:#04x}) vendor {vendor_code:#04x} {what} {psn} spdcid {spdcid:#06x} dpdcid {dpdcid:#06x} \
                 payload {payload:#010x}{}",
                u8::from(code),
                flag_names(flags, NACK_FLAGS)
            )
        }
        Repr::Other { next_header, flags, .. } => {
            let known = match t {
                PdsType::Unknown(_) => "unknown type",
                _ => "not decoded further",
            };
            format!("{t} ({}) next_header {next_header} flags {flags:#04x} ({known})", u8::from(t))
        }
    };
    (j, text)
}

fn merge(a: &mut Value, b: Value) {
    if let (Value::Object(a), Value::Object(b)) = (a, b) {
        a.extend(b);
    }
}

/// Text and JSON of bytes 0-11 the small and medium requests share.
fn short_common(c: &ses::ShortCommon) -> (Value, String) {
    let j = json!({
        "opcode": u8::from(c.opcode),
        "opcode_name": c.opcode.name(),
        "version": c.version,
        "flags": c.flags,
        "request_length": c.request_length,
        "ri_generation": c.ri_generation,
        "job_id": c.job_id,
        "pid_on_fep": c.pid_on_fep,
        "resource_index": c.resource_index,
    });
    let text = format!(
        "{} job {:#08x} pid {:#05x} ri {:#05x} gen {} req_len {}{}",
        c.opcode,
        c.job_id,
        c.pid_on_fep,
        c.resource_index,
        c.ri_generation,
        c.request_length,
        flag_names(c.flags, SES_FLAGS)
    );
    (j, text)
}

fn ses_header(s: &Ses) -> Option<(Value, String)> {
    Some(match s {
        Ses::None => return None,
        Ses::Request(r) => {
            let mut j = json!({
                "header": "standard_request",
                "opcode": u8::from(r.opcode),
                "opcode_name": r.opcode.name(),
                "version": r.version,
                "flags": r.flags,
                "message_id": r.message_id,
                "ri_generation": r.ri_generation,
                "job_id": r.job_id,
                "pid_on_fep": r.pid_on_fep,
                "resource_index": r.resource_index,
                "buffer_offset": r.buffer_offset,
                "initiator": r.initiator,
                "memory_key": r.memory_key,
                "request_length": r.request_length,
            });
            let tail = match r.tail {
                StdTail::HeaderData(h) => {
                    merge(&mut j, json!({ "header_data": h }));
                    format!("header_data {h:#x}")
                }
                StdTail::Continuation { payload_length, message_offset } => {
                    merge(&mut j, json!({ "payload_length": payload_length, "message_offset": message_offset }));
                    format!("payload_len {payload_length} msg_offset {message_offset}")
                }
            };
            let text = format!(
                "SES {} job {:#08x} pid {:#05x} ri {:#05x} gen {} msg {:#06x} buf_offset {:#x} initiator {:#x} mkey \
                 {:#x} req_len {} {tail}{}",
                r.opcode,
                r.job_id,
                r.pid_on_fep,
                r.resource_index,
                r.ri_generation,
                r.message_id,
                r.buffer_offset,
                r.initiator,
                r.memory_key,
                r.request_length,
                flag_names(r.flags, SES_FLAGS)
            );
            (j, text)
        }
        Ses::SmallRequest(r) => {
            let (mut j, t) = short_common(&r.common);
            merge(&mut j, json!({ "header": "small_request", "buffer_offset": r.buffer_offset }));
            (j, format!("SES small {t} buf_offset {:#x}", r.buffer_offset))
        }
        Ses::MediumRequest(r) => {
            let (mut j, t) = short_common(&r.common);
            merge(
                &mut j,
                json!({
                    "header": "medium_request",
                    "header_data_or_offset": r.header_data_or_offset,
                    "initiator": r.initiator,
                    "memory_key": r.memory_key,
                }),
            );
            let what = if r.common.flags & ses::flags::HD != 0 { "header_data" } else { "buf_offset" };
            (
                j,
                format!(
                    "SES medium {t} {what} {:#x} initiator {:#x} mkey {:#x}",
                    r.header_data_or_offset, r.initiator, r.memory_key
                ),
            )
        }
        Ses::Response(r) => (
            json!({
                "header": "response",
                "list": r.list,
                "opcode": u8::from(r.opcode),
                "opcode_name": r.opcode.name(),
                "version": r.version,
                "return_code": u8::from(r.return_code),
                "return_code_name": r.return_code.name(),
                "message_id": r.message_id,
                "ri_generation": r.ri_generation,
                "job_id": r.job_id,
                "modified_length": r.modified_length,
            }),
            format!(
                "SES {} rc {} ({:#04x}) list {} msg {:#06x} job {:#08x} gen {} mod_len {}",
                r.opcode,
                r.return_code,
                u8::from(r.return_code),
                r.list,
                r.message_id,
                r.job_id,
                r.ri_generation,
                r.modified_length
            ),
        ),
        Ses::ResponseWithData(r) => (
            json!({
                "header": "response_with_data",
                "list": r.list,
                "opcode": u8::from(r.opcode),
                "opcode_name": r.opcode.name(),
                "version": r.version,
                "return_code": u8::from(r.return_code),
                "return_code_name": r.return_code.name(),
                "message_id": r.message_id,
                "job_id": r.job_id,
                "read_request_message_id": r.read_request_message_id,
                "payload_length": r.payload_length,
                "modified_length": r.modified_length,
                "message_offset": r.message_offset,
            }),
            format!(
                "SES {} rc {} ({:#04x}) list {} msg {:#06x} job {:#08x} read_msg {:#06x} payload_len {} mod_len {} \
                 msg_offset {}",
                r.opcode,
                r.return_code,
                u8::from(r.return_code),
                r.list,
                r.message_id,
                r.job_id,
                r.read_request_message_id,
                r.payload_length,
                r.modified_length,
                r.message_offset
            ),
        ),
        Ses::SmallResponseWithData(r) => (
            json!({
                "header": "small_response_with_data",
                "list": r.list,
                "opcode": u8::from(r.opcode),
                "opcode_name": r.opcode.name(),
                "version": r.version,
                "return_code": u8::from(r.return_code),
                "return_code_name": r.return_code.name(),
                "payload_length": r.payload_length,
                "job_id": r.job_id,
                "original_request_psn": r.original_request_psn,
            }),
            format!(
                "SES small {} rc {} ({:#04x}) list {} job {:#08x} payload_len {} orig_psn {}",
                r.opcode,
                r.return_code,
                u8::from(r.return_code),
                r.list,
                r.job_id,
                r.payload_length,
                r.original_request_psn
            ),
        ),
    })
}

/// Text and JSON of a parsed UET frame.
pub(super) fn decode(p: &ParsedUetFrame<'_>) -> (Value, String) {
    let (encap_text, encap_json) = match p.encap {
        Encap::Udp { src_port, dst_port } => (
            format!(
                "{} > {}",
                std::net::SocketAddr::new(p.src_ip, src_port),
                std::net::SocketAddr::new(p.dst_ip, dst_port)
            ),
            json!({ "udp": { "src_port": src_port, "dst_port": dst_port } }),
        ),
        Encap::Ip { protocol, .. } => {
            (format!("{} > {} proto {protocol}", p.src_ip, p.dst_ip), json!({ "ip_protocol": protocol }))
        }
    };
    let (pds_json, pds_text) = pds(&p.pds);
    let mut text = format!(
        "UET {} > {} {encap_text} dscp {} ecn {} entropy {:#06x} | {pds_text}",
        MacAddr(p.src_mac),
        MacAddr(p.dst_mac),
        p.dscp,
        ecn_name(p.ecn),
        p.encap.entropy(),
    );
    let ses = ses_header(&p.ses);
    if let Some((_, t)) = &ses {
        let _ = write!(text, " | {t}");
    }
    let _ = write!(text, " | payload {}", p.payload.len());
    let mut j = json!({
        "kind": "uet",
        "ip": {
            "version": if p.src_ip.is_ipv4() { 4 } else { 6 },
            "src": p.src_ip.to_string(),
            "dst": p.dst_ip.to_string(),
            "dscp": p.dscp,
            "ecn": p.ecn.value(),
            "ecn_name": ecn_name(p.ecn),
            "ttl": p.ttl,
        },
        "entropy": p.encap.entropy(),
        "pds": pds_json,
        "ses": ses.map(|(j, _)| j),
        "payload_len": p.payload.len(),
    });
    merge(&mut j, encap_json);
    (j, text)
}

/// Whether `e` says the frame is simply not UET (another port or protocol).
pub(super) fn not_uet(e: &frame::Error) -> bool {
    matches!(e, frame::Error::NotUet(_))
}
