//! Network namespaces, veths, addresses and routes through iproute2 (`ip`, `ip -batch`),
//! `ethtool` and `sysctl`. Every failure names the command and carries its stderr.
use std::io::Write;
use std::process::{Command, Stdio};

/// Moves the calling thread into network namespace `name` (the daemons' one netns entry,
/// `rocefab-plumbing`); setns(2) affects only this thread, so callers run it on a thread of its own.
pub use rocefab_plumbing::netns::enter;

/// A command that failed.
#[derive(Debug, thiserror::Error)]
pub enum CmdError {
    #[error("`{cmd}` could not be started: {err}")]
    Spawn { cmd: String, err: std::io::Error },
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Failed { cmd: String, status: String, stderr: String },
}

fn show(prog: &str, args: &[&str]) -> String {
    std::iter::once(prog).chain(args.iter().copied()).collect::<Vec<_>>().join(" ")
}

/// Runs `prog args...`, returns stdout; error names the command and its stderr.
pub fn run(prog: &str, args: &[&str]) -> Result<String, CmdError> {
    run_stdin(prog, args, None)
}

fn run_stdin(prog: &str, args: &[&str], input: Option<&str>) -> Result<String, CmdError> {
    let cmd = show(prog, args);
    tracing::debug!("{cmd}");
    let mut child = Command::new(prog)
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| CmdError::Spawn { cmd: cmd.clone(), err })?;
    if let Some(text) = input {
        let mut stdin = child.stdin.take().expect("piped stdin");
        // A write error surfaces as the command's own failure below.
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(|err| CmdError::Spawn { cmd: cmd.clone(), err })?;
    if !out.status.success() {
        return Err(CmdError::Failed {
            cmd,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().replace('\n', "; "),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs iproute2 commands (one per line, without the leading `ip`) in one `ip -batch`, in
/// namespace `ns` (or the root namespace). A failing line is reported as `ip [-n ns] <line>`.
pub fn ip_batch(ns: Option<&str>, lines: &[String]) -> Result<(), CmdError> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut args: Vec<&str> = Vec::new();
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    args.extend(["-batch", "-"]);
    let text = lines.join("\n") + "\n";
    run_stdin("ip", &args, Some(&text)).map_err(|e| match e {
        CmdError::Failed { cmd, status, stderr } => {
            // iproute2 says "Command failed -:N" for the failing line N.
            let line = stderr
                .rsplit("Command failed -:")
                .next()
                .and_then(|s| s.trim().split(|c: char| !c.is_ascii_digit()).next()?.parse::<usize>().ok())
                .and_then(|n| lines.get(n.wrapping_sub(1)));
            match line {
                Some(l) => CmdError::Failed {
                    cmd: format!("ip{} {l}", ns.map(|n| format!(" -n {n}")).unwrap_or_default()),
                    status,
                    stderr,
                },
                None => CmdError::Failed { cmd, status, stderr },
            }
        }
        other => other,
    })?;
    Ok(())
}

/// Runs a command inside namespace `ns` (`ip netns exec`).
pub fn exec_in(ns: &str, prog: &str, args: &[&str]) -> Result<String, CmdError> {
    let mut all = vec!["netns", "exec", ns, prog];
    all.extend_from_slice(args);
    run("ip", &all)
}

/// Names of all network namespaces (from /run/netns, where `ip netns add` mounts them).
pub fn list() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

pub fn exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

/// Deletes a namespace (its veths go with it); absent namespaces are fine.
pub fn delete(ns: &str) -> Result<(), CmdError> {
    if !exists(ns) {
        return Ok(());
    }
    run("ip", &["netns", "del", ns]).map(|_| ())
}

/// Turns off TX checksum offload, GRO, TSO and GSO on interfaces of one namespace, so frames
/// forwarded by the userspace switch keep valid checksums and MTU-sized segments.
pub fn offloads_off(ns: &str, ifnames: &[String]) -> Result<(), CmdError> {
    for i in ifnames {
        exec_in(ns, "ethtool", &["-K", i, "tx", "off", "gro", "off", "tso", "off", "gso", "off"])?;
    }
    Ok(())
}

/// Sets sysctls (`key=value`) inside a namespace, one `sysctl` process.
pub fn sysctls(ns: &str, kv: &[String]) -> Result<(), CmdError> {
    let mut args: Vec<&str> = vec!["-q", "-w"];
    args.extend(kv.iter().map(|s| s.as_str()));
    exec_in(ns, "sysctl", &args).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_error_names_the_failing_line() {
        let e = ip_batch(None, &["link show lo".into(), "bogus thing".into()]).unwrap_err().to_string();
        assert!(e.starts_with("`ip bogus thing` failed"), "{e}");
        assert!(e.contains("bogus"), "stderr included: {e}");
        let e = ip_batch(Some("rf-no-such-ns"), &["link show lo".into()]).unwrap_err().to_string();
        assert!(e.contains("rf-no-such-ns"), "{e}");
    }

    #[test]
    fn command_errors_carry_command_and_stderr() {
        let e = run("ip", &["link", "show", "rfnosuchif0"]).unwrap_err().to_string();
        assert!(e.starts_with("`ip link show rfnosuchif0` failed"), "{e}");
        assert!(e.contains("does not exist"), "{e}");
        let e = run("rocefab-no-such-program", &["x"]).unwrap_err().to_string();
        assert!(e.starts_with("`rocefab-no-such-program x` could not be started"), "{e}");
    }
}
