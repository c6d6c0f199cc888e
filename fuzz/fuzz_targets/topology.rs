//! Fuzz the topology parser and validator (`rocefab_model::topology::Topology::parse`): arbitrary
//! bytes, decoded as UTF-8 with replacement, as a topology file. Nothing may panic, and every
//! error must name the file and a line inside it (`fuzz.yaml:<line>: ...`), as a user's editor
//! would need to jump to it.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rocefab_model::topology::{Topology, TopologyError};

/// Lines as YAML counts them (1.2, 5.4; libyaml also breaks on NEL, LS and PS): a lone CR ends
/// a line too, as most editors show it.
fn yaml_lines(src: &str) -> usize {
    let breaks = src
        .replace("\r\n", "\n")
        .chars()
        .filter(|c| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}'))
        .count();
    breaks + 1
}

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let lines = yaml_lines(&src);
    match Topology::parse(&src, Path::new("fuzz.yaml")) {
        Ok(t) => {
            let _ = t.switch_index("rail1");
        }
        Err(e) => {
            let line = match &e {
                TopologyError::Parse { line, .. } | TopologyError::Invalid { line, .. } => *line,
                TopologyError::Io { .. } => panic!("parsing text cannot be an I/O error: {e}"),
            };
            assert!(line >= 1 && line <= lines, "line {line} outside a {lines}-line file: {e}");
            assert!(e.to_string().starts_with(&format!("fuzz.yaml:{line}: ")), "{e}");
        }
    }
});
