//! Fuzz the RoCE parsers: arbitrary bytes as a whole Ethernet frame (RoCEv2: etherparse
//! layers, BTH, extension headers, ICRC; RoCE v1: VLAN tags, GRH, BTH ...), as a frame cut by
//! a capture's snap length, as the InfiniBand part of a UDP payload, and as raw BTH / DETH /
//! RETH / AtomicETH / AETH / AtomicAckETH / IETH / GRH. Nothing may panic; whatever parses must
//! re-emit to bytes that parse to the same Repr. The first byte of the input also steers it
//! into the RoCE v1 path (EtherType 0x8915) and onto every named opcode, so the extension
//! header paths of UD, atomics and SEND with Invalidate are reached without a dictionary.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_wire::roce::{
    self, aeth, atomic_ack_eth, atomic_eth, bth, deth, grh, ieth, reth, AnyFrame, Opcode, ParsedFrame, ParsedV1Frame,
    Repr,
};

/// Parse `data` as the InfiniBand part; when it checks, emit it again and compare.
fn ib_round_trip(data: &[u8]) {
    let _ = Repr::parse_headers(data);
    if let Ok(p) = roce::Packet::new_checked(data) {
        let r = Repr::parse(&p).expect("checked packet must parse");
        let _ = (p.deth(), p.reth(), p.atomic_eth(), p.aeth(), p.atomic_ack_eth(), p.immediate(), p.ieth());
        let payload = p.payload();
        let mut buf = vec![0u8; r.buffer_len(payload.len())];
        r.emit(&mut buf, payload).expect("parsed repr must emit");
        let q = roce::Packet::new_checked(&buf[..]).expect("emitted packet must check");
        let mut r2 = Repr::parse(&q).unwrap();
        // Reserved bits are emitted as zero; everything else survives.
        r2.bth.pad_count = r.bth.pad_count;
        assert_eq!(r, r2);
        assert_eq!(q.payload(), payload);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = ParsedFrame::parse(data) {
        let _ = p.icrc.is_good();
        let _ = (p.bth(), p.reth(), p.aeth(), p.deth(), p.atomic_eth(), p.atomic_ack_eth(), p.ieth(), p.payload.len());
    }
    if let Ok(p) = ParsedV1Frame::parse(data) {
        let _ = (p.grh, p.headers, p.payload.len(), p.icrc);
    }
    let _ = AnyFrame::parse(data).map(|f| (f.icrc(), f.payload().len()));
    if let Some((&cut, rest)) = data.split_first() {
        // As a capture cut short: `cut` more bytes were on the wire.
        let _ = AnyFrame::parse_captured(rest, rest.len() + usize::from(cut));
        // Steered into RoCE v1 (behind 0 or 1 VLAN tag).
        let mut v1 = rest.to_vec();
        let et = if cut & 1 == 0 { 12 } else { 16 };
        if v1.len() >= et + 2 {
            if cut & 1 == 1 {
                v1[12..14].copy_from_slice(&[0x81, 0x00]);
            }
            v1[et..et + 2].copy_from_slice(&roce::ETHERTYPE_ROCE_V1.to_be_bytes());
            if let Ok(p) = ParsedV1Frame::parse(&v1) {
                let _ = p.payload_complete();
            }
            let _ = AnyFrame::parse_captured(&v1, v1.len() + usize::from(cut >> 1));
        }
        // The InfiniBand part with a named opcode chosen by `cut`.
        if !rest.is_empty() {
            let mut ib = rest.to_vec();
            ib[0] = u8::from(Opcode::ALL[usize::from(cut) % Opcode::ALL.len()]);
            ib_round_trip(&ib);
        }
    }
    let _ = roce::icrc::verify(data);
    ib_round_trip(data);
    if let Ok(p) = bth::Packet::new_checked(data) {
        let _ = bth::Repr::parse(&p);
    }
    if let Ok(p) = deth::Packet::new_checked(data) {
        let _ = deth::Repr::parse(&p);
    }
    if let Ok(p) = reth::Packet::new_checked(data) {
        let _ = reth::Repr::parse(&p);
    }
    if let Ok(p) = atomic_eth::Packet::new_checked(data) {
        let _ = atomic_eth::Repr::parse(&p);
    }
    if let Ok(p) = aeth::Packet::new_checked(data) {
        let _ = aeth::Repr::parse(&p);
    }
    if let Ok(p) = atomic_ack_eth::Packet::new_checked(data) {
        let _ = atomic_ack_eth::Repr::parse(&p);
    }
    if let Ok(p) = ieth::Packet::new_checked(data) {
        let _ = ieth::Repr::parse(&p);
    }
    if let Ok(p) = grh::Packet::new_checked(data) {
        let r = grh::Repr::parse(&p).unwrap();
        let mut b = [0u8; grh::LEN];
        r.emit(&mut grh::Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[..], &data[..grh::LEN]);
    }
});
