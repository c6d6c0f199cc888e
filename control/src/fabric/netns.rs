//! Network namespaces, veths, addresses and routes through iproute2 (`ip`, `ip -batch`); per
//! namespace sysctls (/proc/sys) and interface offloads (SIOCETHTOOL) in-process, on a thread
//! inside the namespace ([`each_in_netns`]), not a `sysctl` or `ethtool` process per step.
//! Every failure names the command or namespace and carries its error.
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

/// What went wrong inside one namespace (in-process set-up: sysctls, offloads).
#[derive(Debug, thiserror::Error)]
pub enum NsError {
    #[error("namespace {ns}: {source}")]
    Enter { ns: String, source: rocefab_plumbing::netns::NetnsError },
    #[error("namespace {ns}: sysctl {key}: {source}")]
    Sysctl { ns: String, key: String, source: std::io::Error },
    #[error("namespace {ns}: sysctl {kv:?} is not key=value")]
    SysctlSyntax { ns: String, kv: String },
    #[error("namespace {ns}: {source}")]
    Offloads { ns: String, source: std::io::Error },
    #[error(transparent)]
    Cmd(#[from] CmdError),
    #[error("namespace {ns}: its set-up thread panicked")]
    Panicked { ns: String },
}

/// Runs `f(item)` for every item, each on a thread of its own inside namespace `ns_of(item)`
/// (setns(2) moves only that thread), at most `width` at a time; the first error in item
/// order, after every started thread has ended. `done` is called after each item.
pub fn each_in_netns<I: Sync>(
    items: &[I],
    width: usize,
    ns_of: impl Fn(&I) -> &str + Sync,
    f: impl Fn(&I) -> Result<(), NsError> + Sync,
    done: impl Fn() + Sync,
) -> Result<(), NsError> {
    let mut first = None;
    for chunk in items.chunks(width.max(1)) {
        let results: Vec<Result<(), NsError>> = std::thread::scope(|sc| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|it| {
                    let (ns_of, f, done) = (&ns_of, &f, &done);
                    sc.spawn(move || {
                        let ns = ns_of(it);
                        enter(ns).map_err(|source| NsError::Enter { ns: ns.to_string(), source })?;
                        let r = f(it);
                        done();
                        r
                    })
                })
                .collect();
            handles
                .into_iter()
                .zip(chunk)
                .map(|(h, it)| h.join().unwrap_or_else(|_| Err(NsError::Panicked { ns: ns_of(it).to_string() })))
                .collect()
        });
        if let Some(e) = results.into_iter().find_map(Result::err) {
            first.get_or_insert(e);
            break;
        }
    }
    first.map_or(Ok(()), Err)
}

/// Writes sysctls (`key=value`, dotted keys) through /proc/sys, on the calling thread, which
/// must be inside namespace `ns` ([`each_in_netns`]): /proc/sys/net shows the network namespace
/// of the task that opens it. What `sysctl -w` does, without a process per namespace.
pub fn sysctls_here(ns: &str, kv: &[String]) -> Result<(), NsError> {
    for s in kv {
        let (key, value) =
            s.split_once('=').ok_or_else(|| NsError::SysctlSyntax { ns: ns.to_string(), kv: s.clone() })?;
        let path = format!("/proc/sys/{}", key.trim().replace('.', "/"));
        std::fs::write(&path, value.trim()).map_err(|source| NsError::Sysctl {
            ns: ns.to_string(),
            key: key.to_string(),
            source,
        })?;
    }
    Ok(())
}

/// Turns TX checksumming, TSO, GSO and GRO off on `ifnames`, on the calling thread, which must
/// be inside namespace `ns` ([`each_in_netns`]).
pub fn offloads_off_here(ns: &str, ifnames: &[String]) -> Result<(), NsError> {
    for i in ifnames {
        rocefab_plumbing::link::offloads_off(i).map_err(|source| NsError::Offloads { ns: ns.to_string(), source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_netns_set_up_reaches_each_namespace_and_reports_the_first_failure() {
        assert!(nix::unistd::Uid::effective().is_root(), "needs root (ip netns add): run as root");
        let names: Vec<String> = (0..5).map(|i| format!("rf-nstest-{}-{i}", std::process::id())).collect();
        struct Cleanup<'a>(&'a [String]);
        impl Drop for Cleanup<'_> {
            fn drop(&mut self) {
                for n in self.0 {
                    let _ = run("ip", &["netns", "del", n]);
                }
            }
        }
        let _cleanup = Cleanup(&names);
        for n in &names {
            run("ip", &["netns", "add", n]).unwrap();
            run("ip", &["-n", n, "link", "add", "rfo0", "type", "veth", "peer", "name", "rfo1"]).unwrap();
        }
        let count = std::sync::atomic::AtomicUsize::new(0);
        let kv = |i: usize| vec![format!("net.ipv4.conf.all.arp_ignore={}", 1 + i % 2)];
        each_in_netns(
            &names,
            2,
            |n| n,
            |n| {
                let i: usize = n.rsplit('-').next().unwrap().parse().unwrap();
                sysctls_here(n, &kv(i))?;
                offloads_off_here(n, &["rfo0".to_string()])
            },
            || {
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            },
        )
        .unwrap();
        assert_eq!(count.into_inner(), 5);
        for (i, n) in names.iter().enumerate() {
            // Each namespace has its own value (read back by `sysctl` and `ethtool` inside it).
            let v = run("ip", &["netns", "exec", n, "sysctl", "-n", "net.ipv4.conf.all.arp_ignore"]).unwrap();
            assert_eq!(v.trim(), (1 + i % 2).to_string(), "{n}");
            let k = run("ip", &["netns", "exec", n, "ethtool", "-k", "rfo0"]).unwrap();
            assert!(k.contains("tx-checksumming: off") && k.contains("generic-receive-offload: off"), "{k}");
            let k = run("ip", &["netns", "exec", n, "ethtool", "-k", "rfo1"]).unwrap();
            assert!(k.contains("tx-checksumming: on"), "the peer is left alone: {k}");
        }
        // A missing interface and a bad sysctl name the namespace and what failed.
        let e = each_in_netns(&names, 3, |n| n, |n| offloads_off_here(n, &["nope0".to_string()]), || {}).unwrap_err();
        assert!(e.to_string().starts_with(&format!("namespace {}: nope0: ethtool", names[0])), "{e}");
        let e = sysctls_here("x", &["net.ipv4.no_such_key=1".to_string()]).unwrap_err().to_string();
        assert!(e.starts_with("namespace x: sysctl net.ipv4.no_such_key: "), "{e}");
        let e = sysctls_here("x", &["novalue".to_string()]).unwrap_err().to_string();
        assert_eq!(e, "namespace x: sysctl \"novalue\" is not key=value");
        let e = each_in_netns(&["rf-no-such-ns".to_string()], 1, |n| n, |_| Ok(()), || {}).unwrap_err();
        assert!(e.to_string().starts_with("namespace rf-no-such-ns: "), "{e}");
    }

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
