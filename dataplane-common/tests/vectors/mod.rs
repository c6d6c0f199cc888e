//! The reference vectors of `flow_hash` (`flow_hash.txt`, written by `flow_hash.py` from
//! lookup3.c's definition), parsed for the tests: `dataplane-common/tests/flow_hash.rs`, and
//! through `#[path]` the BPF_PROG_TEST_RUN tests of the XDP program in `tests/tests/`.
#![allow(dead_code)]
use std::net::IpAddr;

/// One line of `flow_hash.txt`: `set src dst proto sport dport seed hash`.
pub struct Vector {
    pub set: String,
    pub src: [u32; 4],
    pub dst: [u32; 4],
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    pub seed: u32,
    pub hash: u32,
}

/// The address as `flow_hash` takes it: big-endian 32-bit words, IPv4 in word 0.
pub fn words(a: IpAddr) -> [u32; 4] {
    match a {
        IpAddr::V4(a) => [u32::from(a), 0, 0, 0],
        IpAddr::V6(a) => {
            let o = a.octets();
            [0, 4, 8, 12].map(|i| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]))
        }
    }
}

/// Every vector of `flow_hash.txt`; panics naming the line of one that does not parse.
pub fn vectors() -> Vec<Vector> {
    let text = include_str!("flow_hash.txt");
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let at =
            |what: &str| format!("dataplane-common/tests/vectors/flow_hash.txt line {}: {what} in {line:?}", n + 1);
        assert_eq!(f.len(), 8, "{}", at("expected 8 fields"));
        let hex = |s: &str, what: &str| {
            u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{}: {e}", at(what)))
        };
        out.push(Vector {
            set: f[0].to_string(),
            src: words(f[1].parse().unwrap_or_else(|e| panic!("{}: {e}", at("src address")))),
            dst: words(f[2].parse().unwrap_or_else(|e| panic!("{}: {e}", at("dst address")))),
            proto: f[3].parse().unwrap_or_else(|e| panic!("{}: {e}", at("proto"))),
            sport: f[4].parse().unwrap_or_else(|e| panic!("{}: {e}", at("sport"))),
            dport: f[5].parse().unwrap_or_else(|e| panic!("{}: {e}", at("dport"))),
            seed: hex(f[6], "seed"),
            hash: hex(f[7], "hash"),
        });
    }
    out
}
