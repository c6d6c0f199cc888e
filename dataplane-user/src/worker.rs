//! A data-plane worker: one thread driving the data planes of many switches from one loop.
//!
//! Each [`DataPlane`] keeps everything that is its switch's (its UMEM, sockets, queues, buffer,
//! clock, counters); the worker only interleaves their passes. A frame that crosses several
//! switches of one worker is taken by the next hop's pass while the worker still runs: no
//! thread sleeps and wakes in between, no inter-processor interrupt, no context switch (the
//! cost that bounds a fabric of one process per switch on a small machine: DESIGN.md "The
//! process model").
//!
//! Loop: a pass of every data plane in turn ([`DataPlane::pass`]); while any moved a frame, or
//! any is within its [`IDLE_SPIN_NS`] of its last work, or any is due within [`MIN_SLEEP_NS`],
//! at once the next round; otherwise one `ppoll(2)` on every data plane's sockets, doorbells and
//! stop eventfds (and the worker's own doorbell for data planes handed to it), with a timeout
//! equal to the earliest deadline of any. A data plane asked to stop ([`crate::dataplane::StopHandle`],
//! read every round, so a busy worker stops it too) or failing is shut down and taken out, its
//! end reported to its owner, and the others go on.
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::sync::Arc;

use rocefab_plumbing::log_route::{self, Route};

use crate::dataplane::{DataPlane, DataPlaneError, IDLE_SPIN_NS, MIN_SLEEP_NS};

/// Called once when a data plane ends: `Ok` when it was stopped, the error that ended it. Never
/// called if the worker thread panics: the closure is dropped unwinding, which its owner sees
/// (a channel closed without a word).
pub type OnEnd = Box<dyn FnOnce(Result<(), DataPlaneError>) + Send>;

/// A data plane handed over: its end's callback and the log route of the thread that handed it.
type Handed = (DataPlane, OnEnd, Option<Route>);

/// Data planes handed over, and the doorbell rung with each (and when a handle goes).
type Incoming = (mpsc::Receiver<Handed>, Arc<Bell>);

/// The worker's doorbell: a flag it reads every round (a busy worker never sleeps), and an
/// eventfd that wakes it from `ppoll`.
struct Bell {
    fd: OwnedFd,
    rung: std::sync::atomic::AtomicBool,
}

impl Bell {
    fn ring(&self) {
        self.rung.store(true, std::sync::atomic::Ordering::Release);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a live stack buffer to an eventfd we own.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Whether it rang since the last look (the flag, read every round); resets the flag.
    fn answer(&self) -> bool {
        self.rung.load(std::sync::atomic::Ordering::Relaxed)
            && self.rung.swap(false, std::sync::atomic::Ordering::Acquire)
    }

    /// After a `ppoll` that found the eventfd readable: empties it and raises the flag, so that
    /// the next round answers (a ring whose write came after the flag was answered would
    /// otherwise leave the eventfd readable, and every `ppoll` would return at once).
    fn heard(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reading 8 bytes into a live stack buffer from a non-blocking eventfd we own.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        self.rung.store(true, std::sync::atomic::Ordering::Release);
    }
}

struct Entry {
    dp: DataPlane,
    on_end: Option<OnEnd>,
    /// Where its lines go ([`log_route`]): entered before each of its passes.
    route: Option<Route>,
    /// Its clock when it last moved a frame.
    last_work: u64,
}

/// The loop's state: its data planes, and where more can come from.
#[derive(Default)]
pub struct Worker {
    planes: Vec<Entry>,
    incoming: Option<Incoming>,
    /// Every plane's pollfds, then the doorbell's; rebuilt before each sleep (capacity kept).
    pollfds: Vec<libc::pollfd>,
}

/// Hands data planes to a running worker ([`Worker::spawn`]). The worker ends once every
/// handle is dropped and its last data plane has ended.
pub struct WorkerHandle {
    /// `None` only while the handle is dropped.
    tx: Option<mpsc::Sender<Handed>>,
    bell: Arc<Bell>,
}

impl Clone for WorkerHandle {
    fn clone(&self) -> Self {
        WorkerHandle { tx: self.tx.clone(), bell: self.bell.clone() }
    }
}

impl WorkerHandle {
    /// Gives `dp` to the worker; `on_end` is called on the worker's thread when it ends. Its
    /// lines on the worker go where the calling thread's do ([`log_route::current`]). An error
    /// when the worker thread has ended (a panic).
    pub fn add(&self, dp: DataPlane, on_end: OnEnd) -> anyhow::Result<()> {
        let tx = self.tx.as_ref().ok_or_else(|| anyhow::anyhow!("the data-plane worker's handle is gone"))?;
        tx.send((dp, on_end, log_route::current())).map_err(|_| anyhow::anyhow!("the data-plane worker has ended"))?;
        self.bell.ring();
        Ok(())
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        // The sender first, then the bell: the worker that wakes finds the channel closed if
        // this was the last handle.
        drop(self.tx.take());
        self.bell.ring();
    }
}

impl Worker {
    /// A worker on its own thread, named `name`; data planes come through the handle.
    pub fn spawn(name: &str) -> anyhow::Result<(WorkerHandle, std::thread::JoinHandle<()>)> {
        // SAFETY: plain eventfd(2) call; the returned descriptor is checked and then owned.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error()).map_err(|e| anyhow::anyhow!("the worker's eventfd: {e}"));
        }
        // SAFETY: `efd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(efd) };
        let bell = Arc::new(Bell { fd, rung: std::sync::atomic::AtomicBool::new(false) });
        let (tx, rx) = mpsc::channel();
        let w = Worker { planes: Vec::new(), incoming: Some((rx, bell.clone())), pollfds: Vec::new() };
        let thread = std::thread::Builder::new().name(name.to_string()).spawn(move || w.run())?;
        Ok((WorkerHandle { tx: Some(tx), bell }, thread))
    }

    /// Adds a data plane before [`Worker::run`].
    pub fn add(&mut self, dp: DataPlane, on_end: OnEnd) {
        dp.announce();
        self.planes.push(Entry { dp, on_end: Some(on_end), route: log_route::current(), last_work: 0 });
    }

    /// Takes what was handed over; false when no more can come (every handle dropped).
    fn take_incoming(&mut self) -> bool {
        let Some((rx, _)) = &self.incoming else { return false };
        let mut open = true;
        loop {
            match rx.try_recv() {
                Ok((dp, on_end, route)) => {
                    log_route::enter(route);
                    dp.announce();
                    self.planes.push(Entry { dp, on_end: Some(on_end), route, last_work: 0 });
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        log_route::enter(None);
        if !open {
            self.incoming = None;
        }
        open
    }

    /// Ends the data plane at `i`: shut down, taken out, its owner told.
    fn end(&mut self, i: usize, r: Result<(), DataPlaneError>) {
        let mut e = self.planes.swap_remove(i);
        let _on = log_route::scoped(e.route);
        e.dp.shutdown();
        if let Some(f) = e.on_end.take() {
            f(r);
        }
    }

    /// Runs until every data plane has ended and none can come any more.
    pub fn run(mut self) {
        // Shaper deadlines are tens of µs: ask for tight timers (default slack is 50 µs).
        // SAFETY: prctl with integer arguments only affects this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
        let mut open = self.take_incoming();
        loop {
            if self.incoming.as_ref().is_some_and(|(_, bell)| bell.answer()) {
                open = self.take_incoming();
            }
            if self.planes.is_empty() && !open {
                return;
            }
            let mut again = false;
            let mut timeout: Option<u64> = None;
            let mut i = 0;
            while i < self.planes.len() {
                if self.planes[i].dp.stopping() {
                    self.end(i, Ok(()));
                    continue;
                }
                let e = &mut self.planes[i];
                log_route::enter(e.route);
                match e.dp.pass() {
                    Err(err) => {
                        self.end(i, Err(err));
                        continue;
                    }
                    Ok(p) if p.worked => {
                        e.last_work = p.now;
                        again = true;
                    }
                    Ok(p) if p.now.saturating_sub(e.last_work) < IDLE_SPIN_NS => again = true,
                    Ok(p) => match p.wake_in {
                        Some(dt) if dt < MIN_SLEEP_NS => again = true,
                        Some(dt) => timeout = Some(timeout.map_or(dt, |t| t.min(dt))),
                        None => {}
                    },
                }
                i += 1;
            }
            log_route::enter(None);
            if again {
                continue;
            }
            match self.sleep(timeout) {
                // The doorbell is answered at the top of the next round.
                Ok(()) => {}
                Err(e) => {
                    // The poll itself failed: every data plane ends with it.
                    let msg = e.to_string();
                    while !self.planes.is_empty() {
                        let err = DataPlaneError::Poll(std::io::Error::other(msg.clone()));
                        self.end(0, Err(err));
                    }
                    return;
                }
            }
        }
    }

    /// One `ppoll` on every data plane's descriptors and the worker's doorbell; rings the data
    /// planes whose control side rang.
    fn sleep(&mut self, timeout_ns: Option<u64>) -> std::io::Result<()> {
        self.pollfds.clear();
        for e in &self.planes {
            self.pollfds.extend_from_slice(&e.dp.pollfds);
        }
        if let Some((_, bell)) = &self.incoming {
            self.pollfds.push(libc::pollfd { fd: bell.fd.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        for f in &mut self.pollfds {
            f.revents = 0;
        }
        let ts = timeout_ns.map(|ns| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `pollfds` is a live array of initialised pollfd of the given length, `tsp` is
        // null or points to a live timespec, and a null sigmask leaves the mask unchanged.
        let r = unsafe {
            libc::ppoll(self.pollfds.as_mut_ptr(), self.pollfds.len() as libc::nfds_t, tsp, std::ptr::null())
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        let mut at = 0;
        for e in &mut self.planes {
            let n = e.dp.pollfds.len();
            // Its doorbell is second to last (the stop eventfd, last, is read as a flag).
            if self.pollfds[at + n - 2].revents & libc::POLLIN != 0 {
                e.dp.rang();
            }
            at += n;
        }
        if let Some((_, bell)) = &self.incoming {
            if self.pollfds.last().is_some_and(|f| f.revents & libc::POLLIN != 0) {
                bell.heard();
            }
        }
        Ok(())
    }
}
