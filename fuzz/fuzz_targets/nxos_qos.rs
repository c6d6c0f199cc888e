//! Fuzz the NX-OS QoS importer (`rocefab_model::qos_import::import`, behind `rocefab qos import`):
//! arbitrary bytes, decoded as UTF-8 with replacement, as a running-config. Nothing may panic;
//! every error names the file; what imports renders as a topology `qos:` section that the
//! importer's own merge accepts into a minimal topology.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocefab_model::qos_import::{import, merge_into_topology, render};

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    match import(&src, "fuzz.cfg") {
        Ok(i) => {
            let _ = render(&i.qos, "fuzz.cfg");
            let lines = src.lines().count().max(1);
            for n in &i.notes {
                assert!(n.line >= 1 && n.line <= lines, "note on line {} of {lines}: {}", n.line, n.show("fuzz.cfg"));
            }
            let _ = merge_into_topology("fabric: f\nhosts: { count: 1 }\n", &i.qos, "fuzz.cfg");
        }
        Err(e) => {
            assert_eq!(e.file, "fuzz.cfg");
            assert!(e.line <= src.lines().count() + 1, "error on line {} past the end: {e}", e.line);
            assert!(e.to_string().starts_with("fuzz.cfg"), "{e}");
        }
    }
});
