//! promtool (Debian package `prometheus`, installed by `cargo xtask setup`) as the oracle of the
//! Prometheus text exposition format.
use std::io::Write as _;
use std::process::{Command, Stdio};

/// Runs `promtool check metrics` on a scrape; panics with what promtool said when it finds
/// anything (lint problems are printed, and exit non-zero).
pub fn promtool_check(what: &str, text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool is required (Debian package prometheus, cargo xtask setup): {e}"));
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("writing to promtool");
    let out = child.wait_with_output().expect("promtool");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics on {what}: {said}");
}
