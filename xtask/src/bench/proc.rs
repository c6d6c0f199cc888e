//! Child processes of the benchmark (generator, sink, forwarders): pinned to a CPU, in their own
//! process group, stdout read line by line, stderr kept in a file, and killed on drop. Also the
//! SIGINT/SIGTERM flag of `xtask bench` and CPU-time readers for /proc.
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Installs the SIGINT/SIGTERM handler: the flag makes every wait below fail with
/// "interrupted", so the guards on the way out remove processes and namespaces.
pub fn install_interrupt_handler() -> anyhow::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        let prev = unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        if prev == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error()).context("installing the SIGINT handler");
        }
    }
    Ok(())
}

/// Fails if SIGINT/SIGTERM arrived.
pub fn check_interrupt() -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
}

/// Sleeps in short steps, failing early on SIGINT.
pub fn sleep(d: Duration) -> anyhow::Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        check_interrupt()?;
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
    }
    check_interrupt()
}

/// A running child; dropping it kills it (SIGKILL) if it is still running.
pub struct Child {
    name: String,
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl Child {
    /// Spawns `cmd` pinned to `cpu`, at nice level `nice`, in its own process group (so a
    /// terminal Ctrl-C reaches only xtask, which then stops the children in order).
    pub fn spawn(name: &str, mut cmd: Command, cpu: Option<usize>, nice: i32, stderr: PathBuf) -> anyhow::Result<Self> {
        let errf = std::fs::File::create(&stderr).with_context(|| format!("creating {}", stderr.display()))?;
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::from(errf));
        // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
        // syscalls (setpgid, sched_setaffinity, setpriority) on stack data.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(cpu) = cpu {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                // Best effort: a lower nice value shields the measurement from background builds.
                libc::setpriority(libc::PRIO_PROCESS, 0, nice);
                Ok(())
            });
        }
        let shown = format!("{cmd:?}");
        let mut child = cmd.spawn().with_context(|| format!("starting {name}: {shown}"))?;
        let out = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Child { name: name.to_string(), child, lines: rx, stderr })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines the child wrote to stderr, for error messages.
    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    fn died(&mut self) -> anyhow::Result<()> {
        if let Some(st) = self.child.try_wait()? {
            bail!("{} exited ({st}):\n{}", self.name, self.stderr_tail());
        }
        Ok(())
    }

    /// Waits for the next stdout line that parses as JSON.
    pub fn next_json(&mut self, timeout: Duration) -> anyhow::Result<serde_json::Value> {
        self.next_line_where(timeout, "result", |l| serde_json::from_str(l).ok())
    }

    /// Waits for a stdout line containing `needle` (a tool's "listening" message).
    pub fn wait_line(&mut self, needle: &str, timeout: Duration) -> anyhow::Result<()> {
        self.next_line_where(timeout, &format!("{needle:?} line"), |l| l.contains(needle).then_some(()))
    }

    /// Reads stdout lines until `pick` takes one, the child dies or closes its output, Ctrl-C,
    /// or `timeout` (the error names `what` was awaited).
    fn next_line_where<R>(
        &mut self,
        timeout: Duration,
        what: &str,
        mut pick: impl FnMut(&str) -> Option<R>,
    ) -> anyhow::Result<R> {
        let end = Instant::now() + timeout;
        loop {
            check_interrupt()?;
            match self.lines.recv_timeout(Duration::from_millis(20)) {
                Ok(l) => {
                    if let Some(r) = pick(&l) {
                        return Ok(r);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    self.died()?;
                    bail!("{} closed its output:\n{}", self.name, self.stderr_tail());
                }
            }
            if Instant::now() > end {
                self.died()?;
                bail!("{}: no {what} within {timeout:?}:\n{}", self.name, self.stderr_tail());
            }
        }
    }

    /// Waits until the child's stderr log contains `needle` (the daemon's "ready" message).
    pub fn wait_stderr(&mut self, needle: &str, timeout: Duration) -> anyhow::Result<()> {
        let end = Instant::now() + timeout;
        loop {
            check_interrupt()?;
            self.died()?;
            if std::fs::read_to_string(&self.stderr).unwrap_or_default().contains(needle) {
                return Ok(());
            }
            if Instant::now() > end {
                bail!("{}: not ready within {timeout:?}:\n{}", self.name, self.stderr_tail());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fails if the child is no longer running.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        self.died()
    }

    /// SIGTERM, then waits up to `timeout` (SIGKILL after that).
    pub fn terminate(&mut self, timeout: Duration) -> anyhow::Result<std::process::ExitStatus> {
        if let Some(st) = self.child.try_wait()? {
            return Ok(st);
        }
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if let Some(st) = self.child.try_wait()? {
                return Ok(st);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child.kill().ok();
        let st = self.child.wait()?;
        bail!("{} did not exit within {timeout:?} of SIGTERM; killed ({st})", self.name)
    }

    /// Waits for the child to exit by itself.
    pub fn wait(&mut self, timeout: Duration) -> anyhow::Result<std::process::ExitStatus> {
        let end = Instant::now() + timeout;
        loop {
            check_interrupt()?;
            if let Some(st) = self.child.try_wait()? {
                return Ok(st);
            }
            if Instant::now() > end {
                bail!("{} still running after {timeout:?}", self.name);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// utime + stime of a process (all its threads), in nanoseconds, from /proc/<pid>/stat.
pub fn process_cpu_ns(pid: u32) -> anyhow::Result<u64> {
    let text =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).with_context(|| format!("reading /proc/{pid}/stat"))?;
    let ticks = parse_stat_cpu_ticks(&text).with_context(|| format!("parsing /proc/{pid}/stat"))?;
    Ok(ticks * 1_000_000_000 / clock_ticks())
}

pub(super) fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// utime + stime (fields 14 and 15) of a /proc/<pid>/stat line, in clock ticks.
pub fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14 → index 11.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Per-CPU (busy, total) jiffies from /proc/stat.
pub fn cpu_times() -> anyhow::Result<Vec<(u64, u64)>> {
    let text = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    Ok(parse_proc_stat(&text))
}

/// Parses the `cpuN` lines of /proc/stat into (busy, total) jiffies; busy excludes idle and iowait.
pub fn parse_proc_stat(text: &str) -> Vec<(u64, u64)> {
    text.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().skip(1).take(8).filter_map(|x| x.parse().ok()).collect();
            let total: u64 = v.iter().sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            (total - idle, total)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_ticks_handles_odd_command_names() {
        let line = "1234 (rocefab (dp) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat_cpu_ticks(line), Some(325));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn proc_stat_busy_excludes_idle_and_iowait() {
        let text = "cpu  10 0 10 100 5 0 0 0 0 0\ncpu0 4 1 3 50 2 1 1 0 0 0\ncpu1 6 0 7 50 3 0 0 0 0 0\nintr 1\n";
        assert_eq!(parse_proc_stat(text), vec![(10, 62), (13, 66)]);
    }
}
