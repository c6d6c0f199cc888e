//! Child processes of the tests: a guard that stops (SIGTERM, then SIGKILL) and reaps its child
//! on drop, also when a test panics; `sh` for commands that must succeed; `require_tool` for the
//! oracles a test needs; `threads` of a process by name; `wait_for_quiet` for measurements the machine's load would spoil.
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs `cmd args`; panics with its stderr unless it succeeds; its stdout.
pub fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The process's threads by name (`/proc/<pid>/task/*/comm`), sorted; a thread that ends while
/// they are read is left out.
pub fn threads(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/task: {e}"))
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect();
    names.sort();
    names
}

/// Fails clearly when an oracle tool is missing.
pub fn require_tool(path: &str, args: &[&str]) {
    let ok = Command::new(path).args(args).output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "{path} is required for this test (Debian packages: tshark, tcpdump, python3-scapy)");
}

/// CPU time counters of /proc/stat's `cpu` line: (idle + iowait, total).
fn cpu_times() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let v: Vec<u64> = stat.lines().next().unwrap().split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    (v[3] + v.get(4).copied().unwrap_or(0), v.iter().sum())
}

/// Waits (20 s at most) until the CPUs were at least half idle over 300 ms and returns the idle
/// share last seen. The switches forward in user space: a compiler on every core delays them by
/// milliseconds and slows a sender down to the pace of a busy switch. That is the machine, not
/// the mechanism under test.
pub fn wait_for_quiet() -> f64 {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let (i0, t0) = cpu_times();
        std::thread::sleep(Duration::from_millis(300));
        let (i1, t1) = cpu_times();
        let idle = (i1 - i0) as f64 / (t1 - t0).max(1) as f64;
        if idle >= 0.5 || Instant::now() >= end {
            return idle;
        }
    }
}

/// A child process, killed (SIGTERM, then SIGKILL) and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub what: String,
    lines: Option<mpsc::Receiver<String>>,
    /// Threads reading stdout and stderr to their end ([`Proc::drained`]).
    drain: Option<(Reader, Option<Reader>)>,
}

type Reader = std::thread::JoinHandle<Vec<u8>>;

fn read_on_a_thread(mut r: impl Read + Send + 'static) -> Reader {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

impl Proc {
    pub fn spawn(what: &str, cmd: &mut Command) -> Proc {
        let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {what}: {e}"));
        Proc { child, what: what.to_string(), lines: None, drain: None }
    }

    /// [`Proc::spawn`], with its piped stdout (and stderr) read on threads from the start, so
    /// that a child printing more than a pipe holds (64 KiB: a long `--json` report) never
    /// blocks while the test polls it; [`Proc::output`] returns what it printed.
    pub fn drained(what: &str, cmd: &mut Command) -> Proc {
        let mut p = Proc::spawn(what, cmd);
        let out = p.child.stdout.take().map(read_on_a_thread);
        let err = p.child.stderr.take().map(read_on_a_thread);
        p.drain = Some((out.unwrap_or_else(|| read_on_a_thread(std::io::empty())), err));
        p
    }

    fn lines(&mut self) -> &mpsc::Receiver<String> {
        if self.lines.is_none() {
            let out: ChildStdout = self.child.stdout.take().expect("stdout piped");
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
            self.lines = Some(rx);
        }
        self.lines.as_ref().unwrap()
    }

    /// The next stdout line within `timeout`.
    pub fn line(&mut self, timeout: Duration) -> String {
        let what = self.what.clone();
        self.lines().recv_timeout(timeout).unwrap_or_else(|e| panic!("{what}: no output line within {timeout:?}: {e}"))
    }

    /// The next stdout line within `timeout`, or None when none came.
    pub fn try_line(&mut self, timeout: Duration) -> Option<String> {
        self.lines().recv_timeout(timeout).ok()
    }

    /// Waits for exit within `timeout`; returns the exit code.
    pub fn wait(&mut self, timeout: Duration) -> i32 {
        let end = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < end, "{} did not exit within {timeout:?}", self.what);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for exit and collects what it printed (stdout and stderr, if piped), as
    /// `Child::wait_with_output` does; the guard stays, so a panic before this still stops it.
    pub fn output(&mut self) -> Output {
        let (out, err) = match self.drain.take() {
            Some((out, err)) => (Some(out), err),
            None => (self.child.stdout.take().map(read_on_a_thread), self.child.stderr.take().map(read_on_a_thread)),
        };
        let stdout = out.map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        let stderr = err.map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        let status = self.child.wait().unwrap_or_else(|e| panic!("waiting for {}: {e}", self.what));
        Output { status, stdout, stderr }
    }

    pub fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends SIGINT (tcpdump and `rocefab capture` finish their file on it; `ip netns exec`
    /// exec'd `timeout`, which passes it on).
    pub fn interrupt(&mut self) {
        self.signal(libc::SIGINT);
    }

    fn signal(&mut self, sig: libc::c_int) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
            let end = Instant::now() + Duration::from_secs(3);
            while Instant::now() < end && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    /// A child that prints more than a pipe holds finishes while the test polls it, as a long
    /// `rocefab run --json` report must (with stdout read only after the exit, it blocks on
    /// its write and never exits).
    #[test]
    fn a_drained_child_printing_more_than_a_pipe_holds_exits_while_polled() {
        let mut p = Proc::drained(
            "a 200 kB writer",
            Command::new("sh")
                .args(["-c", "head -c 200000 /dev/zero; echo done >&2"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        );
        let end = Instant::now() + Duration::from_secs(10);
        while p.child.try_wait().expect("try_wait").is_none() {
            assert!(Instant::now() < end, "the writer blocked on its full pipe");
            std::thread::sleep(Duration::from_millis(10));
        }
        let o = p.output();
        assert_eq!((o.stdout.len(), o.stderr.as_slice()), (200_000, b"done\n".as_slice()));
    }
}
