//! scapy (Debian python3-scapy, for /usr/bin/python3) as the frame oracle: runs a Python script
//! with the given stdin and returns its stdout; a missing interpreter or scapy fails the test.
use std::io::Write;
use std::process::{Command, Stdio};

/// The interpreter python3-scapy installs for.
pub const PYTHON: &str = "/usr/bin/python3";

/// Runs `script` (`python3 -c`) with `stdin`; its stdout. Panics, with its stderr, if it fails.
pub fn run_python(script: &str, stdin: &str) -> String {
    let mut child = Command::new(PYTHON)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {PYTHON} (needed for the scapy oracle): {e}"));
    child.stdin.take().expect("piped").write_all(stdin.as_bytes()).expect("writing the script's stdin");
    let out = child.wait_with_output().expect("waiting for python3");
    assert!(
        out.status.success(),
        "scapy oracle failed (is python3-scapy installed for {PYTHON}?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// scapy layers of the UET PDS and SES headers (and the entropy header, bound to UDP 4793 and
/// IP protocol 253), written from the sources' tables in docs/research/uet-wire-formats.md,
/// not from rocefab's code; prepend to a script. `every_field(p)` gives a layer's fields.
pub const UET_LAYERS: &str = include_str!("scapy_uet.py");
