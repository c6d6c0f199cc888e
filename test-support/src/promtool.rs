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

/// Runs `promtool check config` on a Prometheus configuration file; panics with what promtool
/// said unless it accepts it.
pub fn promtool_check_config(path: &std::path::Path) {
    let out = Command::new("promtool")
        .args(["check", "config"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("promtool is required (Debian package prometheus, cargo xtask setup): {e}"));
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check config {}: {said}", path.display());
}

/// Parses every PromQL expression with promtool, offline: each becomes a recording rule of a
/// rules file that `promtool check rules` reads. Panics with promtool's complaint and the
/// numbered expressions (rule 1 is the first) unless every one parses.
pub fn promtool_check_exprs(exprs: &[String]) {
    let rules: Vec<serde_json::Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| serde_json::json!({ "record": format!("rocefab:check_{}", i + 1), "expr": e }))
        .collect();
    // JSON is YAML: the rules file needs no YAML writer.
    let file = serde_json::json!({ "groups": [{ "name": "expressions", "rules": rules }] });
    let path = std::env::temp_dir().join(format!("rocefab-promtool-rules-{}.json", std::process::id()));
    std::fs::write(&path, file.to_string()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let out = Command::new("promtool").args(["check", "rules"]).arg(&path).output();
    let _ = std::fs::remove_file(&path);
    let out =
        out.unwrap_or_else(|e| panic!("promtool is required (Debian package prometheus, cargo xtask setup): {e}"));
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let numbered: Vec<String> = exprs.iter().enumerate().map(|(i, e)| format!("  rule {}: {e}", i + 1)).collect();
    assert!(out.status.success(), "promtool check rules: {said}\n{}", numbered.join("\n"));
}
