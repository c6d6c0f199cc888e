//! The fabric's daemons: locating the sibling binaries, spawning them with their configuration
//! and log, waiting until each serves (or saying how it ended), stopping and restarting a switch's.
use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use crate::fabric::daemon_http::scrape;
use crate::fabric::rundir::{DaemonState, State};

/// The `rocefab-switchd` binary: `$ROCEFAB_SWITCHD`, else next to the running executable.
pub fn locate_switchd() -> anyhow::Result<PathBuf> {
    crate::fabric::process::sibling(
        "rocefab-switchd",
        Some("ROCEFAB_SWITCHD"),
        "switch daemon",
        "build it with `cargo build -p dataplane-user`, or set ROCEFAB_SWITCHD",
    )
}

/// The `rocefab-nicd` binary (a host's NIC agent): `$ROCEFAB_NICD`, else next to the running
/// executable.
pub fn locate_nicd() -> anyhow::Result<PathBuf> {
    crate::fabric::process::sibling(
        "rocefab-nicd",
        Some("ROCEFAB_NICD"),
        "NIC agent",
        "build it with `cargo build -p host-daemons`, set ROCEFAB_NICD, or set `lldp: { enabled: false }`",
    )
}

/// Records `d` in the state, spawns it, records its pid.
pub fn start_daemon(st: &mut State, d: DaemonState, binary: &Path) -> anyhow::Result<()> {
    let (config, log) = (d.config.clone(), d.log.clone());
    st.daemons.push(d);
    st.save()?;
    let pid = spawn_daemon(binary, &config, &log)?;
    st.daemons.last_mut().expect("pushed").pid = Some(pid);
    st.save()?;
    Ok(())
}

/// Spawns one `rocefab-switchd` for every switch recorded in `st` (`--config` each, in their
/// order: a pod's switches are neighbours, and `--workers` gives contiguous blocks to one
/// worker) and records its pid as each one's.
pub fn start_shared_switchd(st: &mut State, binary: &Path, workers: u16) -> anyhow::Result<()> {
    let switches: Vec<usize> = (0..st.daemons.len()).filter(|&i| !st.daemons[i].is_host()).collect();
    let Some(&first) = switches.first() else { return Ok(()) };
    let configs: Vec<&Path> = switches.iter().map(|&i| st.daemons[i].config.as_path()).collect();
    let log = shared_switch_log(&st.daemons[first].log);
    let dir = crate::fabric::rundir::dir(&st.fabric);
    let args = ["--workers".to_string(), workers.to_string(), "--switch-logs".to_string(), dir.display().to_string()];
    let pid = spawn_daemon_of(binary, &configs, &args, &log).context("starting the switches' shared daemon")?;
    for i in switches {
        st.daemons[i].pid = Some(pid);
    }
    st.save()?;
    Ok(())
}

/// The log of the process that runs many switches (`up --switch-workers`): its own lines
/// (signals, a panic) beside the switches' logs (`switch_log` is one of them), each of which has
/// that switch's lines.
pub fn shared_switch_log(switch_log: &Path) -> PathBuf {
    switch_log.with_file_name("switches.log")
}

/// Stops switch `name`'s daemon (SIGTERM, then SIGKILL after 5 s); its pid is forgotten. A
/// switch that shares its process with others (`--switch-workers`) is asked to stop alone
/// (`POST /stop`: its data plane, XDP and listener go, as a killed daemon's would), and waited
/// for until its listener closes (5 s).
pub fn stop_switch_daemon(st: &mut State, name: &str) -> anyhow::Result<()> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let i = st
        .daemons
        .iter()
        .position(|d| !d.is_host() && d.node() == name)
        .ok_or_else(|| anyhow!("fabric {}: no switch {name}", st.fabric))?;
    let shared = st.daemons[i]
        .pid
        .is_some_and(|pid| st.daemons.iter().enumerate().any(|(j, o)| j != i && o.pid == Some(pid)) && pid_alive(pid));
    let d = &mut st.daemons[i];
    if shared {
        crate::fabric::daemon_http::http_request("POST", &d.url("/stop"), None, Duration::from_secs(2))
            .with_context(|| format!("asking switch {name} to stop"))?;
        let end = Instant::now() + Duration::from_secs(5);
        while scrape(&d.metrics_url, Duration::from_millis(200)).is_ok() {
            if Instant::now() >= end {
                bail!("switch {name} still serves {} 5 s after it was asked to stop", d.metrics_url);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        d.pid = None;
    } else if let Some(pid) = d.pid.take() {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        let end = Instant::now() + Duration::from_secs(5);
        while pid_alive(pid) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        if pid_alive(pid) {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
    st.save()?;
    Ok(())
}

/// Starts switch `name`'s daemon again with its configuration and waits until it serves its
/// metrics (30 s).
pub fn start_switch_daemon(st: &mut State, name: &str) -> anyhow::Result<()> {
    let switchd = locate_switchd()?;
    let i = st
        .daemons
        .iter()
        .position(|d| !d.is_host() && d.node() == name)
        .ok_or_else(|| anyhow!("fabric {}: no switch {name}", st.fabric))?;
    let (config, log) = (st.daemons[i].config.clone(), st.daemons[i].log.clone());
    let pid = spawn_daemon(&switchd, &config, &log)?;
    st.daemons[i].pid = Some(pid);
    st.save()?;
    let d = &st.daemons[i];
    let timeout = Duration::from_secs(30);
    wait_ready(d, &d.metrics_url, "rocefab-switchd", Instant::now() + timeout, timeout, None, &|| Ok(()))
}

/// Waits until `d` answers on `url`; an error naming it, how it ended and the last lines of its
/// log if it dies or the deadline passes. `process_log`: where its process's own last words are
/// when it shares that process with other switches ([`shared_switch_log`]), shown if it died.
pub fn wait_ready(
    d: &DaemonState,
    url: &str,
    what: &str,
    deadline: Instant,
    timeout: Duration,
    process_log: Option<&Path>,
    go_on: &dyn Fn() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let pid = d.pid.expect("spawned");
    loop {
        go_on()?;
        if scrape(url, Duration::from_millis(500)).is_ok() {
            return Ok(());
        }
        let alive = pid_alive(pid);
        if !alive || Instant::now() >= deadline {
            let why = if alive {
                format!("did not answer on {url} within {} s", timeout.as_secs())
            } else {
                how_it_ended(pid)
            };
            let log = match process_log {
                Some(p) if !alive => p,
                _ => &d.log,
            };
            bail!(
                "{} {}: {what} (pid {pid}) {why}; last lines of {}:\n{}",
                d.kind,
                d.node(),
                log.display(),
                tail(log, 15)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn spawn_daemon(binary: &Path, config: &Path, log: &Path) -> anyhow::Result<u32> {
    spawn_daemon_of(binary, &[config], &[], log)
}

/// [`spawn_daemon`] with several `--config` and more arguments.
fn spawn_daemon_of(binary: &Path, configs: &[&Path], args: &[String], log: &Path) -> anyhow::Result<u32> {
    let out =
        OpenOptions::new().create(true).append(true).open(log).with_context(|| format!("open {}", log.display()))?;
    let err = out.try_clone().context("dup log fd")?;
    let mut cmd = Command::new(binary);
    for c in configs {
        cmd.arg("--config").arg(c);
    }
    cmd.args(args).arg("--log-file").arg(log).stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: setsid() is async-signal-safe and touches no memory of the parent; it detaches
    // the daemon from our session and terminal so it outlives `rocefab up`.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().with_context(|| format!("spawn {}", binary.display()))?;
    Ok(child.id())
}

/// How a daemon this process started has ended, reaped with `waitpid`: its exit code or the
/// signal that killed it. SIGKILL nobody sent is most often the kernel's OOM killer, so the kernel
/// log is searched for it and the hint names memory.
pub fn how_it_ended(pid: u32) -> String {
    let mut status = 0;
    // SAFETY: waitpid only writes the status integer we pass; WNOHANG never blocks. The pid is a
    // child of this process (spawn_daemon), so no other process's status is consumed.
    let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    if r != pid as libc::pid_t {
        return "exited (its exit status is unknown: it is not a child of this rocefab)".into();
    }
    crate::fabric::process::describe_exit(std::process::ExitStatus::from_raw(status), || {
        crate::fabric::process::oom_killed(pid)
    })
}

fn tail(p: &Path, n: usize) -> String {
    match std::fs::read_to_string(p) {
        Ok(t) => {
            let lines: Vec<&str> = t.lines().collect();
            let s = lines[lines.len().saturating_sub(n)..].join("\n");
            if s.is_empty() {
                "(log is empty)".into()
            } else {
                s
            }
        }
        Err(e) => format!("(cannot read log: {e})"),
    }
}

/// `/proc/<pid>` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            s.rsplit(')').next().and_then(|r| r.split_whitespace().next()).is_some_and(|st| st != "Z" && st != "X")
        }
        Err(_) => false,
    }
}

/// True if `pid` is the daemon started with `--config <config>`.
pub fn is_our_daemon(pid: u32, config: &Path) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let args: Vec<String> = raw.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    // The config path lives in this fabric's run directory: no other process carries it.
    let cfg = config.display().to_string();
    args.windows(2).any(|w| w[0] == "--config" && w[1] == cfg)
}

/// Every process started with `--config <config>` (covers a pid lost in a crash).
pub fn daemon_pids(d: &DaemonState) -> BTreeSet<u32> {
    let mut pids: BTreeSet<u32> = d.pid.into_iter().filter(|&p| is_our_daemon(p, &d.config)).collect();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                if is_our_daemon(pid, &d.config) {
                    pids.insert(pid);
                }
            }
        }
    }
    pids
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::ExitStatus;

    #[test]
    fn an_ended_daemon_is_described_by_code_or_signal() {
        assert_eq!(
            crate::fabric::process::describe_exit(ExitStatus::from_raw(1 << 8), || unreachable!()),
            "exited with code 1"
        );
        let oom = crate::fabric::process::describe_exit(ExitStatus::from_raw(libc::SIGKILL), || Some(true));
        assert!(oom.starts_with("was killed by signal 9 (SIGKILL): the kernel's OOM killer ended it"), "{oom}");
        let maybe = crate::fabric::process::describe_exit(ExitStatus::from_raw(libc::SIGKILL), || None);
        assert!(maybe.contains("if nobody sent it") && maybe.contains("dmesg"), "{maybe}");
        let segv = crate::fabric::process::describe_exit(ExitStatus::from_raw(libc::SIGSEGV), || {
            panic!("only SIGKILL asks the kernel log")
        });
        assert_eq!(segv, "was killed by signal 11 (SIGSEGV)");
    }

    #[test]
    fn a_child_killed_by_sigkill_is_reaped_and_named() {
        /// Blocks until `pid` has ended, leaving it unreaped (WNOWAIT) for `how_it_ended`.
        fn wait_unreaped(pid: u32) {
            // SAFETY: a zeroed siginfo_t is a valid out-parameter; waitid only writes into it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `info` outlives the call; P_PID with our child's pid touches no other process.
            let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
            assert_eq!(r, 0, "waitid: {}", std::io::Error::last_os_error());
        }
        // Real children of this process that end as a killed or failing daemon would.
        #[expect(
            clippy::zombie_processes,
            reason = "how_it_ended reaps it with waitpid, as rocefab up does its daemons"
        )]
        let child = Command::new("sh").args(["-c", "kill -9 $$"]).spawn().expect("spawn sh");
        wait_unreaped(child.id());
        let why = how_it_ended(child.id());
        assert!(why.starts_with("was killed by signal 9 (SIGKILL)"), "{why}");
        #[expect(clippy::zombie_processes, reason = "how_it_ended reaps it with waitpid")]
        let child = Command::new("sh").args(["-c", "exit 3"]).spawn().expect("spawn sh");
        wait_unreaped(child.id());
        assert_eq!(how_it_ended(child.id()), "exited with code 3");
        assert!(how_it_ended(1).contains("not a child"));
    }
}
