//! Fuzz the whole-frame UET parser: the first 3 bytes are the UDP port and IP protocol
//! `parse_with` is given (any values, 17 and the RoCE port included), the rest an Ethernet
//! frame parsed with `ParsedUetFrame::parse` and `parse_with`. Nothing may panic; a frame that
//! parses is rebuilt with `UetFrame` (same addresses, encapsulation, PDS and SES headers,
//! payload) and must parse back to the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_wire::uet::frame::{ParsedUetFrame, Ports, UetFrame};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let ports = Ports { udp_port: u16::from_be_bytes([data[0], data[1]]), ip_protocol: data[2] };
    let frame = &data[3..];
    let _ = ParsedUetFrame::parse(frame);
    let Ok(p) = ParsedUetFrame::parse_with(frame, ports) else { return };
    let f = UetFrame {
        src_mac: p.src_mac,
        dst_mac: p.dst_mac,
        src_ip: p.src_ip,
        dst_ip: p.dst_ip,
        dscp: p.dscp,
        ecn: p.ecn,
        ttl: p.ttl,
        encap: p.encap,
        pds: p.pds,
        ses: p.ses,
        payload: p.payload,
    };
    let again = f.to_vec().expect("a parsed frame rebuilds");
    let q = ParsedUetFrame::parse_with(&again, ports).expect("a rebuilt frame parses");
    assert_eq!((q.src_mac, q.dst_mac, q.src_ip, q.dst_ip), (p.src_mac, p.dst_mac, p.src_ip, p.dst_ip));
    assert_eq!((q.dscp, q.ecn, q.ttl, q.encap), (p.dscp, p.ecn, p.ttl, p.encap));
    assert_eq!((q.pds, q.ses), (p.pds, p.ses));
    assert_eq!(q.payload, p.payload);
});
