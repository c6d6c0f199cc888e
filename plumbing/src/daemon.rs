//! Process-level pieces every daemon (switchd, hostd, nicd) shares: `main` with logging, SIGTERM/SIGINT
//! delivery through a signalfd(2), and the control side's async waits on that signalfd and on the
//! data plane's eventfd ([`AsyncSignals`], [`Doorbell`]), registered with the tokio runtime
//! through [`AsyncFd`]. `tokio::signal` would not do: it installs handlers, and a signal blocked
//! with sigprocmask(2) (as it must be for a signalfd) never reaches them.
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::eventfd::EventFd;

/// Errors of the daemon's process plumbing.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("blocking SIGTERM/SIGINT and creating a signalfd: {0}")]
    Signals(nix::Error),
}

/// A daemon's `main`: logging to stderr or `log_file`, then `run`; an error is logged and, when
/// logging goes to a file, printed on stderr as `name: error` too, with exit status 1.
pub fn main_with(
    name: &str,
    log_file: Option<&std::path::Path>,
    run: impl FnOnce() -> anyhow::Result<()>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    if let Err(e) = init_logging(log_file) {
        eprintln!("{name}: {e:#}");
        return ExitCode::FAILURE;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            if log_file.is_some() {
                eprintln!("{name}: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The daemons' logging: `RUST_LOG` or `info`, to `log_file` (appended, no colours) or stderr;
/// a thread on a unit's route ([`crate::log_route`]) writes to that unit's file instead.
pub fn init_logging(log_file: Option<&std::path::Path>) -> std::io::Result<()> {
    use crate::log_route::Routed;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter);
    match log_file {
        Some(p) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| std::io::Error::new(e.kind(), format!("opening log file {}: {e}", p.display())))?;
            b.with_ansi(false).with_writer(Routed::new(f)).init();
        }
        None => b.with_writer(Routed::new(std::io::stderr())).init(),
    }
    Ok(())
}

/// SIGTERM and SIGINT, blocked in the calling thread (and so in every thread spawned after) and
/// read from a signalfd by the control side ([`AsyncSignals`]).
#[derive(Debug)]
pub struct Signals {
    fd: SignalFd,
}

impl Signals {
    /// SIGTERM and SIGINT.
    pub fn block() -> Result<Self, DaemonError> {
        Signals::block_set(&[Signal::SIGTERM, Signal::SIGINT])
    }

    /// `signals`, blocked in the calling thread (and every thread it spawns after), delivered
    /// through one non-blocking signalfd: the one way every daemon takes signals.
    pub fn block_set(signals: &[Signal]) -> Result<Self, DaemonError> {
        let mut set = SigSet::empty();
        for &s in signals {
            set.add(s);
        }
        set.thread_block().map_err(DaemonError::Signals)?;
        let fd =
            SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).map_err(DaemonError::Signals)?;
        Ok(Signals { fd })
    }

    /// For daemons whose threads poll flags instead of running tokio (`rocefab-hostd`'s data
    /// thread): a thread that waits on the signalfd and calls `on` with each signal, in order.
    /// It lives as long as the process.
    pub fn spawn_handler(self, on: impl Fn(Signal) + Send + 'static) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new().name("signals".into()).spawn(move || loop {
            let mut fds = [nix::poll::PollFd::new(self.fd.as_fd(), nix::poll::PollFlags::POLLIN)];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    tracing::error!("waiting on the signalfd: {e}");
                    return;
                }
            }
            while let Ok(Some(info)) = self.fd.read_signal() {
                if let Ok(sig) = Signal::try_from(info.ssi_signo as i32) {
                    on(sig);
                }
            }
        })
    }
}

impl AsFd for Signals {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Signals {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// [`Signals`] registered with the current tokio runtime.
#[derive(Debug)]
pub struct AsyncSignals(AsyncFd<Signals>);

impl AsyncSignals {
    /// Registers `signals`; call it inside a runtime with I/O enabled.
    pub fn new(signals: Signals) -> std::io::Result<Self> {
        // SAFETY: the signalfd is owned by `signals`, which the AsyncFd owns until it is dropped,
        // so the descriptor stays open and the same for the registration's whole life.
        let fd = unsafe { AsyncFd::register_with_interest(signals, Interest::READABLE) }?;
        Ok(AsyncSignals(fd))
    }

    /// The next SIGTERM or SIGINT.
    pub async fn recv(&self) -> std::io::Result<Signal> {
        loop {
            let mut ready = self.0.readable().await?;
            match ready.get_inner().fd.read_signal() {
                Ok(Some(info)) => {
                    if let Ok(sig) = Signal::try_from(info.ssi_signo as i32) {
                        return Ok(sig);
                    }
                }
                Ok(None) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The eventfd behind an `Arc` (shared with the [`crate::ctrl`] end that rings it).
#[derive(Debug)]
struct BellFd(Arc<EventFd>);

impl AsRawFd for BellFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A non-blocking [`EventFd`] (e.g. [`crate::ctrl::ControlEnd::from_dp`]) registered with the
/// current tokio runtime.
#[derive(Debug)]
pub struct Doorbell(AsyncFd<BellFd>);

impl Doorbell {
    /// Registers `bell`; call it inside a runtime with I/O enabled.
    pub fn new(bell: Arc<EventFd>) -> std::io::Result<Self> {
        // SAFETY: the eventfd is owned by the `EventFd` behind the `Arc` that the AsyncFd holds
        // until it is dropped, so the descriptor stays open and the same meanwhile.
        let fd = unsafe { AsyncFd::register_with_interest(BellFd(bell), Interest::READABLE) }?;
        Ok(Doorbell(fd))
    }

    /// Waits until the bell rings, and resets it.
    pub async fn rung(&self) -> std::io::Result<()> {
        loop {
            let mut ready = self.0.readable().await?;
            let rang = ready.get_inner().0.drain();
            // Drained: not readable until the next ring, which the kernel reports afresh.
            ready.clear_ready();
            if rang {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs on a thread of its own: the block applies to that thread and `raise` targets it, so
    /// the test harness's other threads never see the signal.
    #[test]
    fn a_blocked_signal_arrives_through_the_signalfd() {
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let signals = Signals::block().unwrap();
            rt.block_on(async {
                let s = AsyncSignals::new(signals).unwrap();
                let quiet = tokio::time::timeout(std::time::Duration::from_millis(20), s.recv()).await;
                assert!(quiet.is_err(), "no signal yet");
                nix::sys::signal::raise(Signal::SIGTERM).unwrap();
                let sig = tokio::time::timeout(std::time::Duration::from_secs(5), s.recv()).await;
                assert_eq!(sig.unwrap().unwrap(), Signal::SIGTERM);
            });
        })
        .join()
        .unwrap();
    }

    /// The handler thread inherits the block from the thread that spawned it; `pthread_kill`
    /// aims each signal at it, so no other thread of the harness can take (and die of) them.
    #[test]
    fn a_handler_thread_sees_each_blocked_signal_in_order() {
        use std::os::unix::thread::JoinHandleExt;
        let (tx, rx) = std::sync::mpsc::channel();
        let handler = std::thread::spawn(move || {
            let signals = Signals::block_set(&[Signal::SIGUSR1, Signal::SIGUSR2]).unwrap();
            signals.spawn_handler(move |s| tx.send(s).unwrap()).unwrap()
        })
        .join()
        .unwrap();
        let wait = std::time::Duration::from_millis(50);
        assert!(rx.recv_timeout(wait).is_err(), "no signal yet");
        let thread = handler.as_pthread_t();
        for sig in [Signal::SIGUSR1, Signal::SIGUSR2] {
            // SAFETY: `thread` is the live handler thread (it never ends); the signal is a plain int.
            assert_eq!(unsafe { libc::pthread_kill(thread, sig as libc::c_int) }, 0);
            assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap(), sig);
        }
    }

    #[test]
    fn a_doorbell_wakes_its_waiter_once_per_ring_burst() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let bell = Arc::new(EventFd::new().unwrap());
        rt.block_on(async {
            let d = Doorbell::new(bell.clone()).unwrap();
            bell.ring();
            bell.ring();
            d.rung().await.unwrap();
            let quiet = tokio::time::timeout(std::time::Duration::from_millis(50), d.rung()).await;
            assert!(quiet.is_err(), "both rings were reset by the first wake-up");
            let b = bell.clone();
            let ringer = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                b.ring();
            });
            tokio::time::timeout(std::time::Duration::from_secs(5), d.rung()).await.unwrap().unwrap();
            ringer.join().unwrap();
        });
    }
}
