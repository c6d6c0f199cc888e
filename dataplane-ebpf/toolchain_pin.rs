//! Reads the eBPF toolchain pin, `dataplane-ebpf/rust-toolchain.toml`. One copy, included with
//! `#[path]` by `plumbing/build.rs` and by `xtask` (a build script cannot depend on xtask).
use std::path::Path;

/// The `channel` of a `rust-toolchain.toml`, which must be a dated nightly (`nightly-YYYY-MM-DD`).
pub fn pinned_toolchain(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let channel = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .next()
        .ok_or_else(|| format!("{}: no `channel = \"...\"` line", file.display()))?;
    if !is_dated_nightly(&channel) {
        return Err(format!(
            "{}: channel {channel:?} is not a dated nightly; pin one whose LLVM matches bpf-linker, e.g. \"nightly-2026-05-19\"",
            file.display()
        ));
    }
    Ok(channel)
}

/// `nightly-YYYY-MM-DD`, never the floating `nightly`.
pub fn is_dated_nightly(c: &str) -> bool {
    let Some(date) = c.strip_prefix("nightly-") else { return false };
    let parts: Vec<&str> = date.split('-').collect();
    parts.len() == 3
        && [4, 2, 2].iter().zip(&parts).all(|(n, p)| p.len() == *n && p.bytes().all(|b| b.is_ascii_digit()))
}
