//! Fuzz the IEEE 802.1AB LLDP parser (with DCBX TLVs): arbitrary bytes as an LLDPDU, through
//! the raw and decoding TLV iterators and `LldpduRepr::parse`. Nothing may panic; whatever
//! parses and re-emits (text decoded lossily may outgrow its length limit) must parse back
//! to the same Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_wire::ethernet::MacAddr;
use rocefab_wire::lldp::{LldpduRepr, RawTlvs, Tlvs};

fuzz_target!(|data: &[u8]| {
    for t in RawTlvs::new(data) {
        match t {
            Ok(p) => {
                let _ = (p.tlv_type(), p.value());
            }
            Err(_) => break,
        }
    }
    let mut n = 0;
    for t in Tlvs::new(data) {
        n += 1;
        if let Ok(t) = t {
            let _ = t.to_string();
        }
    }
    assert!(n <= data.len() / 2 + 1, "iterator must make progress and stop");
    if let Ok(r) = LldpduRepr::parse(data) {
        let _ = r.to_string();
        if let Ok(f) = r.to_frame(MacAddr::default()) {
            let (_, back) = LldpduRepr::parse_frame(&f).expect("emitted LLDPDU must parse");
            assert_eq!(back, r);
        }
    }
});
