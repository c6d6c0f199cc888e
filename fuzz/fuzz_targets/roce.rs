//! Fuzz the RoCEv2 parsers: arbitrary bytes as a whole Ethernet frame (etherparse layers, BTH,
//! extension headers, ICRC), as the InfiniBand part of a UDP payload, and as raw BTH / RETH /
//! AETH. Nothing may panic; whatever parses must re-emit to bytes that parse to the same Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_wire::roce::{self, aeth, bth, reth, ParsedFrame, Repr};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = ParsedFrame::parse(data) {
        let _ = p.icrc.is_good();
        let _ = (p.bth(), p.reth(), p.aeth(), p.payload.len());
    }
    let _ = roce::icrc::verify(data);
    if let Ok(p) = roce::Packet::new_checked(data) {
        let r = Repr::parse(&p).expect("checked packet must parse");
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
    if let Ok(p) = bth::Packet::new_checked(data) {
        let _ = bth::Repr::parse(&p);
    }
    if let Ok(p) = reth::Packet::new_checked(data) {
        let _ = reth::Repr::parse(&p);
    }
    if let Ok(p) = aeth::Packet::new_checked(data) {
        let _ = aeth::Repr::parse(&p);
    }
});
