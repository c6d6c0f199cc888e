//! Small process helpers shared by the xtask commands.
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context};

/// The workspace root (parent of xtask/).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent").to_path_buf()
}

/// Runs a command to completion, inheriting stdio; fails naming the command.
pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let shown = format!("{cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {shown}"))?;
    if !st.success() {
        bail!("{shown} failed: {st}");
    }
    Ok(())
}

/// True if `prog` is on PATH.
pub fn have(prog: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {prog} >/dev/null 2>&1"))
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// True when running as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { geteuid() == 0 }
}

extern "C" {
    fn geteuid() -> u32;
}

/// `cargo build [--release] -p <each package whose binaries a fabric runs>` in the workspace
/// root (the list the tests check for staleness: `rocefab_test_support::fabric_build`).
pub fn build_fabric(release: bool) -> anyhow::Result<()> {
    let mut c = Command::new("cargo");
    c.current_dir(root()).arg("build");
    if release {
        c.arg("--release");
    }
    for p in rocefab_test_support::fabric_build::packages() {
        c.args(["-p", p]);
    }
    run(&mut c)
}

/// Minimal HTTP/1.0 GET for `http://host:port/path` (the daemons serve plain HTTP on loopback):
/// the body of a 200 answer.
pub fn http_get(url: &str) -> anyhow::Result<String> {
    use anyhow::{bail, Context};
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").with_context(|| format!("{url}: not an http:// URL"))?;
    let (hostport, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(hostport).with_context(|| format!("connect {hostport}"))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {hostport}\r\n\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp.split_once("\r\n\r\n").with_context(|| format!("{url}: malformed HTTP response"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!("{url}: {}", head.lines().next().unwrap_or(""));
    }
    Ok(body.to_string())
}
