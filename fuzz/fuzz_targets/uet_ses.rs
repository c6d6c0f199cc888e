//! Fuzz the UET SES header parsers: the first byte, mod 7, is the PDS next header value that
//! names the header (0 none, 1 small, 2 medium, 3 standard request, 4 response, 5 response with
//! data, 6 small response with data), the rest its bytes; every header's own parser also reads
//! them. Nothing may panic; whatever parses must re-emit to bytes that parse to the same header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_wire::uet::frame::Ses;
use rocefab_wire::uet::ses::{
    MediumRequest, Response, ResponseWithData, SmallRequest, SmallResponseWithData, StandardRequest,
};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, b)) = data.split_first() else { return };
    let _ = (StandardRequest::parse(b), Response::parse(b), SmallRequest::parse(b), MediumRequest::parse(b));
    let _ = (ResponseWithData::parse(b), SmallResponseWithData::parse(b));
    let Ok((s, used)) = Ses::parse(sel % 7, b) else { return };
    assert_eq!(used, s.len());
    assert!(used <= b.len());
    let mut buf = vec![0xa5u8; s.len()];
    s.emit(&mut buf);
    let (back, n) = Ses::parse(sel % 7, &buf).expect("an emitted header parses");
    assert_eq!((back, n), (s, used));
});
