//! Fuzz packet trimming (`switch_model::trim::trim_frame`): arbitrary bytes as a frame the switch
//! holds, cut to 64, 128 and 1024 bytes, whole and as the first part of a longer (multi-buffer)
//! frame. Nothing may panic; a frame that is not trimmed is left as it was; a trimmed one is
//! exactly the size and its IP and UDP lengths parse strictly (etherparse).
#![no_main]

use libfuzzer_sys::fuzz_target;
use switch_model::trim::trim_frame;

fuzz_target!(|data: &[u8]| {
    for size in [64usize, 128, 1024] {
        for extra in [0usize, 3000] {
            let mut f = data.to_vec();
            let len = f.len() + extra;
            match trim_frame(&mut f, len, size, 46) {
                Ok(t) => {
                    assert_eq!(t.removed, len - size);
                    let p = etherparse::SlicedPacket::from_ethernet(&f[..size]).expect("a trimmed frame parses");
                    assert!(matches!(p.transport, Some(etherparse::TransportSlice::Udp(_))), "{p:?}");
                }
                Err(_) => assert_eq!(f, data, "an untrimmed frame is unchanged"),
            }
        }
    }
});
