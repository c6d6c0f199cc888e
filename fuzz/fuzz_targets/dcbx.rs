//! Fuzz the IEEE 802.1Qaz and CEE DCBX parsers: the first byte picks the OUI / subtype
//! (IEEE 9..=12 or CEE 2), the rest is the information string. Nothing may panic; whatever
//! parses must re-emit to bytes that parse to the same Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_wire::dcbx::{DcbxTlv, OUI_CEE, OUI_IEEE_8021};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, info)) = data.split_first() else {
        return;
    };
    let (oui, subtype) = match sel % 5 {
        4 => (OUI_CEE, 2),
        s => (OUI_IEEE_8021, 9 + s),
    };
    if let Ok(Some(t)) = DcbxTlv::parse(oui, subtype, info) {
        let _ = t.to_string();
        let mut buf = vec![0u8; t.info_len()];
        t.emit_info(&mut buf).expect("parsed TLV must emit");
        let back = DcbxTlv::parse(t.oui(), t.subtype(), &buf).expect("emitted TLV must parse");
        assert_eq!(back, Some(t));
    }
});
