//! The CLI's child processes: where the binaries it starts are (beside `rocefab`, or where an
//! environment variable says), and how one ended, in words (with the OOM killer's part).
use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// The binary `name` beside the running executable, or `$env` when set; an error naming `what`
/// it is, where it was looked for and `hint` (how to build it) when it is not there.
pub fn sibling(name: &str, env: Option<&str>, what: &str, hint: &str) -> anyhow::Result<PathBuf> {
    let p = match env.and_then(std::env::var_os) {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().context("current_exe")?.parent().unwrap_or(Path::new(".")).join(name),
    };
    if !p.is_file() {
        bail!("{what} {} not found ({hint})", p.display());
    }
    Ok(p)
}

/// `exited with code 1`, `was killed by signal 9 (SIGKILL) ...`; `oom` says whether the kernel
/// log shows the OOM killer ending this pid (asked only for SIGKILL).
pub fn describe_exit(st: std::process::ExitStatus, oom: impl FnOnce() -> Option<bool>) -> String {
    if let Some(code) = st.code() {
        return format!("exited with code {code}");
    }
    let Some(sig) = st.signal() else { return format!("ended ({st})") };
    let name = match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        libc::SIGINT => "SIGINT",
        _ => "",
    };
    let mut s = if name.is_empty() {
        format!("was killed by signal {sig}")
    } else {
        format!("was killed by signal {sig} ({name})")
    };
    if sig == libc::SIGKILL {
        s += match oom() {
            Some(true) => ": the kernel's OOM killer ended it (kernel log); the fabric needs more memory than is free (`rocefab plan` and `free -m`)",
            _ => ": if nobody sent it, the kernel's OOM killer did (check `dmesg | grep -i oom` and free memory)",
        };
    }
    s
}

/// Whether the kernel log (`/dev/kmsg`, read without blocking) records the OOM killer killing
/// `pid`; `None` when the log cannot be read.
pub fn oom_killed(pid: u32) -> Option<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open("/dev/kmsg").ok()?;
    let needle = format!("Killed process {pid} ");
    // One record per read; EAGAIN at the end of the buffer.
    let mut buf = vec![0u8; 8192];
    let mut found = false;
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => found |= String::from_utf8_lossy(&buf[..n]).contains(&needle),
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue, // records overwritten while reading
            Err(_) => break,
        }
    }
    Some(found)
}
