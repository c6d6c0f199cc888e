//! Fuzz the UET PDS header parser: any bytes. Nothing may panic; whatever parses must re-emit to
//! bytes that parse to the same Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_wire::uet::{Packet, Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else { return };
    let r = Repr::parse(&p).expect("a checked header parses");
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut Packet::new_unchecked(&mut buf[..]));
    let back = Repr::parse(&Packet::new_checked(&buf[..]).expect("emitted header is whole")).expect("parses");
    assert_eq!(back, r);
});
