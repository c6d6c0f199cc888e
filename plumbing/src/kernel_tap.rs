//! A switch port's kernel path for `rocefab capture`: what XDP passes to the namespace's kernel
//! stack (ARP, BGP and BFD to the switch's own addresses, ICMP) and what that stack sends (FRR's
//! BGP and BFD, ARP replies) never reach the data path's AF_XDP sockets, so the data path's tap
//! ([`crate::capture`]) does not see them. This thread does: while a capture runs, one
//! `AF_PACKET` socket per captured port ([`PacketSocket::tap`]) feeds a second tap ring, which
//! the capture [`Hub`](crate::capture::Hub) drains beside the data path's. Frames XDP redirects
//! to AF_XDP, and frames sent from AF_XDP, pass no packet tap, so no frame is in both.
//!
//! Idle (parked, no socket open) while no capture runs; the hub wakes it when one starts.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::capture::{self, TapConsumer, TapProducer, DIR_IN, DIR_OUT};
use crate::packet::{ifindex, PacketSocket};

/// How often the parked thread looks at the mask (a started capture wakes it at once).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Longest wait for a frame while capturing (then the mask is looked at again).
const POLL_MS: i32 = 5;
/// How often a missing interface is looked up again, and socket drops read, while capturing.
const HOUSEKEEPING: Duration = Duration::from_millis(100);
/// Largest frame read (a GSO super-frame is at most 64 KiB).
const FRAME_BYTES: usize = 65_536 + 256;
/// The kernel path's ring: control traffic only.
pub const RING_BYTES: usize = 1 << 20;

/// The kernel path's capture sockets of the ports named `ports` (capture port index = position).
pub struct KernelTaps {
    ports: Vec<String>,
    socks: Vec<Option<PacketSocket>>,
    /// Frames the kernel dropped for the capture sockets.
    lost: Arc<AtomicU64>,
    active: u64,
    frame: Vec<u8>,
    pollfds: Vec<libc::pollfd>,
    housekeeping_at: Instant,
}

impl KernelTaps {
    pub fn new(ports: Vec<String>) -> KernelTaps {
        KernelTaps {
            socks: ports.iter().map(|_| None).collect(),
            ports,
            lost: Arc::new(AtomicU64::new(0)),
            active: 0,
            frame: vec![0; FRAME_BYTES],
            pollfds: Vec::new(),
            housekeeping_at: Instant::now(),
        }
    }

    /// Frames the kernel dropped for these sockets so far.
    pub fn lost(&self) -> Arc<AtomicU64> {
        self.lost.clone()
    }

    fn wanted(&self, i: usize) -> bool {
        i < 64 && self.active & (1u64 << i) != 0
    }

    /// Captures the ports in `mask` from now on (0: closes every socket); `fresh` discards
    /// what the sockets kept from before (a new capture).
    pub fn set(&mut self, mask: u64, fresh: bool) {
        self.active = mask;
        for i in 0..self.socks.len() {
            if !self.wanted(i) {
                if let Some(s) = self.socks[i].take() {
                    self.lost.fetch_add(s.drops().unwrap_or(0), Ordering::Relaxed);
                }
            }
        }
        if fresh {
            for s in self.socks.iter().flatten() {
                while s.recv_captured(&mut self.frame).is_ok() {}
            }
        }
        self.housekeeping();
    }

    /// Opens the sockets of captured ports that have none (an interface may appear later) and
    /// counts the kernel's drops.
    fn housekeeping(&mut self) {
        self.housekeeping_at = Instant::now();
        for i in 0..self.ports.len() {
            if !self.wanted(i) {
                continue;
            }
            match &self.socks[i] {
                Some(s) => {
                    self.lost.fetch_add(s.drops().unwrap_or(0), Ordering::Relaxed);
                }
                None => match ifindex(&self.ports[i]).map(PacketSocket::tap) {
                    Some(Ok(s)) => self.socks[i] = Some(s),
                    Some(Err(e)) => tracing::warn!(port = %self.ports[i], "capture socket: {e}"),
                    None => tracing::debug!(port = %self.ports[i], "capture: no such interface (yet)"),
                },
            }
        }
    }

    /// Sleeps until a socket has a frame or `timeout_ms` pass; housekeeping when due.
    pub fn wait(&mut self, timeout_ms: i32) {
        if self.housekeeping_at.elapsed() >= HOUSEKEEPING {
            self.housekeeping();
        }
        self.pollfds.clear();
        self.pollfds.extend(self.socks.iter().flatten().map(|s| libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(s),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: `pollfds` is a live array of `pollfds.len()` pollfd structs (possibly empty:
        // poll then only sleeps).
        unsafe { libc::poll(self.pollfds.as_mut_ptr(), self.pollfds.len() as libc::nfds_t, timeout_ms) };
    }

    /// Hands every waiting frame to `each(port, dir, unix_ns, orig_len, bytes)`.
    pub fn read_each(&mut self, mut each: impl FnMut(u16, u8, u64, u32, &[u8])) {
        for i in 0..self.socks.len() {
            let Some(s) = &self.socks[i] else { continue };
            loop {
                match s.recv_captured(&mut self.frame) {
                    Ok(c) => {
                        let ts = c.ts_ns.unwrap_or_else(unix_now_ns);
                        let dir = if c.outgoing { DIR_OUT } else { DIR_IN };
                        each(i as u16, dir, ts, c.orig_len as u32, &self.frame[..c.len]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // The interface went down: the socket says so once and resumes when it
                    // comes back up (reopening it would miss the first frames then: ARP).
                    Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => break,
                    Err(e) => {
                        tracing::warn!(port = %self.ports[i], "capture socket: {e}; reopening");
                        self.socks[i] = None;
                        break;
                    }
                }
            }
        }
    }
}

/// Wall clock, ns since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A parked worker thread that runs until told to stop: on drop, `stop` is set, the thread
/// unparked and joined (the kernel-path tap here, nicd's capture thread).
pub struct StopOnDrop {
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
    name: &'static str,
}

impl StopOnDrop {
    /// `join` runs until `stop` is set; `name` says which thread in a panic's log line.
    pub fn new(stop: Arc<AtomicBool>, join: std::thread::JoinHandle<()>, name: &'static str) -> StopOnDrop {
        StopOnDrop { stop, join: Some(join), name }
    }

    /// The thread, to wake it.
    pub fn thread(&self) -> Option<std::thread::Thread> {
        self.join.as_ref().map(|j| j.thread().clone())
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            j.thread().unpark();
            if j.join().is_err() {
                tracing::error!("the {} thread panicked", self.name);
            }
        }
    }
}

/// The running kernel-path thread: stopped and joined on drop.
pub struct KernelTapThread {
    pub thread: StopOnDrop,
    /// Frames the kernel dropped for the capture sockets.
    pub lost: Arc<AtomicU64>,
}

/// Starts the kernel-path thread of the ports named `ports` in the calling thread's network
/// namespace (a spawned thread inherits it). Returns the ring's consumer, for
/// [`Hub::add_source`](crate::capture::Hub::add_source), and the thread.
pub fn start(ports: Vec<String>) -> std::io::Result<(TapConsumer, KernelTapThread)> {
    let (producer, consumer, _) = capture::tap(RING_BYTES);
    let taps = KernelTaps::new(ports);
    let lost = taps.lost();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let join = std::thread::Builder::new().name("rocefab-ktap".into()).spawn(move || run(taps, producer, &s2))?;
    Ok((consumer, KernelTapThread { thread: StopOnDrop::new(stop, join, "kernel-path capture"), lost }))
}

fn run(mut taps: KernelTaps, mut tap: TapProducer, stop: &AtomicBool) {
    let mut generation = tap.shared().generation();
    while !stop.load(Ordering::Relaxed) {
        let (mask, g) = (tap.mask(), tap.shared().generation());
        if mask != taps.active || g != generation {
            taps.set(mask, g != generation);
            generation = g;
        }
        if taps.active == 0 {
            std::thread::park_timeout(IDLE_POLL);
            continue;
        }
        taps.wait(POLL_MS);
        // Stamps are wall clock already (the tap's epoch stays 0).
        taps.read_each(|port, dir, ts, orig_len, data| tap.mirror_cut(port, dir, ts, orig_len, data));
    }
    taps.set(0, false);
}
