//! The NIC data thread: polls every port's RX ring, runs the engine's timers, transmits what
//! the engine releases (explicit TX kicks), and sleeps in `ppoll(2)` until the next frame or
//! the engine's next deadline when there is nothing to do — never a busy spin when idle.
//! A NIC sends a frame no earlier than one serialisation time after the previous one (the
//! engine's pacer gathers no credit while paused or idle), so a sender at line rate wakes the
//! thread once per frame, at [`Engine::next_deadline`]. A receive hold-off (sleeping a few µs
//! without watching the sockets after taking frames) was measured too and did not help:
//! received frames are handled at once.
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rocefab_plumbing::capture::MonoClock;

use crate::links::LinkWatch;
use crate::mirror::MirrorProducer;
use crate::xsk::{XskError, XskPort};
use gpu_host::nic::engine::Engine;

/// Longest sleep: the stop flag and the deadline are checked at least this often.
pub const MAX_SLEEP_NS: u64 = 10_000_000;
/// Sleep while waiting for TX completions with no free TX frame.
pub const TX_STARVED_SLEEP_NS: u64 = 50_000;

/// Monotonic nanoseconds since `base` (CLOCK_MONOTONIC, the clock of `bpf_ktime_get_ns`, so
/// the host XDP program's receive times convert exactly: [`Clock::mono`]).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base: MonoClock,
}

impl Clock {
    pub fn new() -> Clock {
        Clock { base: MonoClock::new() }
    }
    pub fn now(&self) -> u64 {
        self.base.now()
    }
    /// The underlying clock (for capture stamps).
    pub fn mono(&self) -> MonoClock {
        self.base
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Why the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Every QP finished.
    Finished,
    /// The deadline passed first.
    Timeout,
    /// The stop flag was raised (signal).
    Stopped,
}

/// One host's NICs as a data loop drives them: the engine, an AF_XDP socket per NIC, the NIC
/// agent's mirror ring (when it captures) and the ports' carrier watch. [`run`] and [`serve`]
/// drive one; `rocefab-hostd --hosts` ([`crate::hosts`]) drives many from one loop.
pub struct Host {
    pub engine: Engine,
    pub ports: Vec<XskPort>,
    pub mirror: Option<MirrorProducer>,
    pub links: Option<LinkWatch>,
}

/// What one [`Host::pass`] did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pass {
    /// Frames received and sent.
    pub work: usize,
    /// A port with carrier has too few free TX frames for the longest frame.
    pub starved: bool,
    /// A port with carrier still has frames in its TX ring.
    pub pending: bool,
}

impl Host {
    /// Its `ppoll` entries: a socket per port, then the carrier watch's (when it has one).
    pub fn pollfds(&self, fds: &mut Vec<libc::pollfd>) {
        fds.extend(self.ports.iter().map(|p| libc::pollfd { fd: p.fd() as RawFd, events: libc::POLLIN, revents: 0 }));
        if let Some(l) = &self.links {
            fds.push(libc::pollfd { fd: l.fd(), events: libc::POLLIN, revents: 0 });
        }
    }

    /// Tells the engine which ports have no carrier at `now` (the start of the loop).
    pub fn start_links(&mut self, now: u64) {
        let Host { engine, ports, links, .. } = self;
        if let Some(l) = links.as_ref() {
            for (i, _) in l.up().iter().enumerate().filter(|(_, up)| !**up) {
                link_changed(engine, ports, i, false, now);
            }
        }
    }

    /// Hands the carrier changes to the engine when its watch is due or was readable (`fds`:
    /// this host's entries, as [`Host::pollfds`] laid them out; the watch's `revents` is
    /// cleared); whether a port's carrier changed.
    pub fn watch_links(&mut self, fds: &mut [libc::pollfd], now: u64) -> Result<bool, XskError> {
        let Host { engine, ports, links, .. } = self;
        let Some(l) = links.as_mut() else { return Ok(false) };
        let readable = fds.last_mut().is_some_and(|f| std::mem::take(&mut f.revents) & libc::POLLIN != 0);
        let mut changed = false;
        if l.due(now, readable) {
            l.read(|i, up| {
                changed = true;
                link_changed(engine, ports, i, up, now)
            })
            .map_err(|source| XskError::Io {
                name: "rtnetlink".into(),
                what: "reading link notifications",
                source,
            })?;
        }
        Ok(changed)
    }

    /// Every QP finished, and the last frames (an ACK the peer waits for) have left the TX rings
    /// of the ports that have carrier (a port without it sends nothing: what its ring holds stays
    /// there).
    pub fn done(&mut self) -> bool {
        let Host { engine, ports, .. } = self;
        engine.finished() && !ports.iter_mut().enumerate().any(|(i, p)| engine.link_up(i) && p.tx_pending())
    }

    /// Receives on every port, runs the engine's timers, transmits what it releases.
    pub fn pass(&mut self, now: u64) -> Result<Pass, XskError> {
        let received = self.receive(now)?;
        let mut pass = self.run(now)?;
        pass.work += received;
        Ok(pass)
    }

    /// Hands what every port received to the engine; how many frames (an empty ring costs a
    /// look at its producer index).
    pub fn receive(&mut self, now: u64) -> Result<usize, XskError> {
        let Host { engine, ports, mirror, .. } = self;
        let mut n = 0;
        for (i, p) in ports.iter_mut().enumerate() {
            n += p.receive(engine, i, now, mirror.as_mut())?;
        }
        Ok(n)
    }

    /// Runs the engine's timers and transmits what it releases (a pass after [`Host::receive`]).
    pub fn run(&mut self, now: u64) -> Result<Pass, XskError> {
        let Host { engine, ports, mirror, .. } = self;
        let mut pass = Pass::default();
        engine.poll(now);
        for (i, p) in ports.iter_mut().enumerate() {
            pass.work += p.transmit(engine, i, now, mirror.as_mut())?;
            if engine.link_up(i) {
                pass.starved |= p.tx_starved();
                pass.pending |= p.tx_pending();
            }
        }
        Ok(pass)
    }

    /// When it next needs a pass after `pass` found nothing to do at `now`: the engine's next
    /// deadline, or soon when TX frames are short or still queued.
    pub fn wake(&mut self, now: u64, pass: Pass) -> u64 {
        let wake = self.engine.next_deadline(now).unwrap_or(u64::MAX);
        if pass.starved || pass.pending {
            wake.min(now + TX_STARVED_SLEEP_NS)
        } else {
            wake
        }
    }

    /// Takes what the RX rings still hold (at a stop, once the XDP program is detached, so
    /// nothing more arrives and no frame is left unread).
    pub fn drain(&mut self, now: u64) -> Result<(), XskError> {
        let Host { engine, ports, mirror, .. } = self;
        for (i, p) in ports.iter_mut().enumerate() {
            while p.receive(engine, i, now, mirror.as_mut())? > 0 {}
        }
        Ok(())
    }
}

/// Runs the data loop until the engine finishes, `deadline` (clock ns) passes or `stop` is set.
/// `on_tick(engine, now)` runs at most every `tick` (metrics snapshots, progress), outside the
/// per-packet path. With a `mirror`, every port being captured copies the frames it receives and
/// sends into it ([`crate::mirror`]; one atomic load per port and batch otherwise). With `links`,
/// the ports' carrier changes reach the engine ([`Engine::set_link`]).
pub fn run(
    host: &mut Host,
    clock: &Clock,
    deadline: u64,
    stop: &AtomicBool,
    tick: Duration,
    on_tick: impl FnMut(&Engine, u64),
) -> Result<(Exit, u64), XskError> {
    drive(host, clock, deadline, stop, tick, on_tick, true).map(|(exit, now, _)| (exit, now))
}

/// Keeps a finished engine's QPs up until `until` (clock ns) or `stop`, as a real RC QP lives
/// until it is destroyed: a peer whose final ACK was lost retransmits, and the responder
/// answers the duplicate with an ACK again ([`crate::receiver`]) instead of leaving the peer
/// to exhaust its retries against a host that has gone. On `stop` it first takes what the RX
/// rings still hold (the caller detaches the XDP program before raising `stop`, so nothing
/// more arrives and no frame is left unread). Returns when it stopped.
pub fn serve(host: &mut Host, clock: &Clock, until: u64, stop: &AtomicBool) -> Result<u64, XskError> {
    let started = clock.now();
    let (exit, now, passes) = drive(host, clock, until, stop, Duration::MAX, |_, _| {}, false)?;
    if exit == Exit::Stopped {
        host.drain(now)?;
    }
    // An idle linger wakes only for frames and the stop check (every MAX_SLEEP_NS).
    tracing::info!(ms = (now - started) / 1_000_000, passes, "served the finished QPs");
    Ok(now)
}

/// Port `i`'s carrier changed to `up` at `now`: the engine stops or resumes sending on it and
/// moves the QPs that have an alternate path (a rare event: it logs).
fn link_changed(engine: &mut Engine, ports: &[XskPort], i: usize, up: bool, now: u64) {
    let migrated = engine.set_link(i, up, now);
    let port = ports.get(i).map_or("?", |p| p.name.as_str());
    if up {
        tracing::info!(port, "carrier back");
    } else {
        tracing::warn!(port, migrated, "carrier lost: the port sends nothing; QPs with an alternate path moved to it");
    }
}

/// Makes this thread's timed sleeps end when asked (1 ns of timer slack) rather than up to the
/// default 50 µs later: a paced NIC sleeps until its next frame's departure, and every µs it
/// wakes late is a µs its transmitter does not send (it gathers no credit), so the default
/// slack alone would cost a line-rate sender at 50 Mbit/s of wall clock several per cent.
pub fn set_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a value and no pointers; it changes only this thread.
    let r = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if r != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "prctl(PR_SET_TIMERSLACK, 1) failed: sleeps may end up to 50 µs late");
    }
}

/// Sleeps in `ppoll(2)` on `fds` (their `revents` cleared first) for at most `sleep_ns`
/// (capped at [`MAX_SLEEP_NS`]); a signal ending it early is no error.
pub fn sleep(fds: &mut [libc::pollfd], sleep_ns: u64) -> Result<(), XskError> {
    let sleep = sleep_ns.min(MAX_SLEEP_NS);
    let ts = libc::timespec {
        tv_sec: (sleep / 1_000_000_000) as libc::time_t,
        tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
    };
    for f in fds.iter_mut() {
        f.revents = 0;
    }
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs and `ts` a valid timespec,
    // both alive for the call; a null sigmask keeps the current one.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(XskError::Io { name: "ppoll".into(), what: "waiting for frames", source: e });
        }
    }
    Ok(())
}

/// The data loop of [`run`] (`until_finished`) and [`serve`]; also returns how many passes it
/// made.
fn drive(
    host: &mut Host,
    clock: &Clock,
    deadline: u64,
    stop: &AtomicBool,
    tick: Duration,
    mut on_tick: impl FnMut(&Engine, u64),
    until_finished: bool,
) -> Result<(Exit, u64, u64), XskError> {
    let tick_ns = u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX).max(1);
    set_timer_slack();
    let mut next_tick = 0u64;
    let mut fds = Vec::new();
    host.pollfds(&mut fds);
    host.start_links(clock.now());
    let mut passes = 0u64;
    loop {
        passes += 1;
        let now = clock.now();
        host.watch_links(&mut fds, now)?;
        if now >= next_tick {
            on_tick(&host.engine, now);
            next_tick = now.saturating_add(tick_ns);
        }
        if until_finished && host.done() {
            return Ok((Exit::Finished, now, passes));
        }
        if now >= deadline {
            return Ok((Exit::Timeout, now, passes));
        }
        if stop.load(Ordering::Relaxed) {
            return Ok((Exit::Stopped, now, passes));
        }
        let pass = host.pass(now)?;
        if pass.work > 0 {
            continue;
        }
        let now = clock.now();
        let wake = host.wake(now, pass).min(deadline).min(next_tick);
        if wake > now {
            sleep(&mut fds, wake - now)?;
        }
    }
}
