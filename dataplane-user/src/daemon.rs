//! Process-level pieces of `rocefab-switchd`: entering the switch's network namespace
//! (setns(2) with `CLONE_NEWNET` on an `ip netns` bind mount under `/run/netns`), SIGTERM/SIGINT
//! delivery through a signalfd(2), and the control loop's wait on the metrics listener.
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::PathBuf;

use nix::sched::{setns, CloneFlags};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// Errors of the daemon's process plumbing.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("network namespace {name:?}: opening {path}: {source}")]
    NetnsOpen { name: String, path: PathBuf, source: std::io::Error },
    #[error("network namespace {name:?}: setns(CLONE_NEWNET): {source}")]
    Setns { name: String, source: nix::Error },
    #[error("blocking SIGTERM/SIGINT and creating a signalfd: {0}")]
    Signals(nix::Error),
    #[error("poll on the metrics listener and signalfd: {0}")]
    Poll(std::io::Error),
}

/// Where `ip netns add NAME` keeps the namespace.
pub fn netns_path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// Moves the calling thread into network namespace `name`. Call it before spawning threads so
/// every later thread (and socket, and XDP attach) lives there.
pub fn enter_netns(name: &str) -> Result<(), DaemonError> {
    let path = netns_path(name);
    let f = std::fs::File::open(&path).map_err(|source| DaemonError::NetnsOpen { name: name.into(), path, source })?;
    setns(f.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|source| DaemonError::Setns { name: name.into(), source })
}

/// SIGTERM and SIGINT, blocked in the calling thread (and so in every thread spawned after) and
/// read from a signalfd by the control loop.
#[derive(Debug)]
pub struct Signals {
    fd: SignalFd,
}

impl Signals {
    pub fn block() -> Result<Self, DaemonError> {
        let mut set = SigSet::empty();
        set.add(Signal::SIGTERM);
        set.add(Signal::SIGINT);
        set.thread_block().map_err(DaemonError::Signals)?;
        let fd = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(DaemonError::Signals)?;
        Ok(Signals { fd })
    }

    /// A pending signal, if any.
    pub fn read(&self) -> Option<Signal> {
        match self.fd.read_signal() {
            Ok(Some(info)) => Signal::try_from(info.ssi_signo as i32).ok(),
            _ => None,
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What woke the control loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready {
    pub listener: bool,
    pub signal: bool,
    /// The optional extra descriptor (an eventfd) is readable.
    pub extra: bool,
}

/// Waits up to `timeout_ms` for a connection on `listener`, a signal on `signals` or the
/// `extra` descriptor to become readable.
pub fn wait_control(
    listener: BorrowedFd<'_>,
    signals: &Signals,
    extra: Option<BorrowedFd<'_>>,
    timeout_ms: i32,
) -> Result<Ready, DaemonError> {
    let mut fds = [
        libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: signals.fd().as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: extra.map_or(-1, |f| f.as_raw_fd()), events: libc::POLLIN, revents: 0 },
    ];
    // SAFETY: `fds` is a live array of three initialised pollfd structs (poll ignores fd -1).
    let r = unsafe { libc::poll(fds.as_mut_ptr(), 3, timeout_ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(Ready::default());
        }
        return Err(DaemonError::Poll(e));
    }
    Ok(Ready {
        listener: fds[0].revents & libc::POLLIN != 0,
        signal: fds[1].revents & libc::POLLIN != 0,
        extra: fds[2].revents & libc::POLLIN != 0,
    })
}
