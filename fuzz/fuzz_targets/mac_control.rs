//! Fuzz the IEEE 802.3x / 802.1Qbb MAC control parser: arbitrary bytes as a whole Ethernet
//! frame and as a MAC control payload. Nothing may panic; whatever parses must re-emit to
//! bytes that parse to the same Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_wire::ethernet::MacAddr;
use rocefab_wire::mac_control::{MacControlRepr, Packet};

fuzz_target!(|data: &[u8]| {
    if let Ok((eth, r)) = MacControlRepr::parse_frame(data) {
        let f = r.to_frame(eth.src);
        let (_, back) = MacControlRepr::parse_frame(&f).expect("emitted frame must parse");
        assert_eq!(back, r);
    }
    if let Ok(p) = Packet::new_checked(data) {
        let r = MacControlRepr::parse(&p).expect("checked packet must parse");
        let _ = (p.opcode(), r.to_string());
        let mut buf = [0u8; 64];
        let n = r.emit_frame(MacAddr::default(), &mut buf).expect("emit into 64 bytes");
        assert_eq!(n, 60);
    }
});
