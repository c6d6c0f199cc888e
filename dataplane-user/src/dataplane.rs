//! The data-plane thread of one switch: owns every UMEM frame, receives from all port sockets,
//! rewrites, queues per (egress port, traffic class), schedules and shapes, transmits.
//!
//! Loop (one pass; the clock is read once per pass):
//! 1. reap TX completions of every port into the free pool (copy mode hands back length 0);
//! 2. refill every port's fill ring from the free pool;
//! 3. receive up to [`BATCH`] descriptors per port: validate the [`Decision`]
//!    header ([`crate::decision`]), strip it, apply the L3 rewrite ([`crate::rewrite`]) and
//!    enqueue on the egress port's queue for the frame's traffic class ([`crate::queue`]);
//!    LLDP and MAC-control frames are counted and dropped — the LLDP/DCBX agent and the PFC
//!    engine will take them from here through a bounded SPSC channel once they exist. The
//!    frames were just written by the CPU that ran the XDP program, so the first two cache
//!    lines of each are prefetched [`PREFETCH_AHEAD`] frames ahead: the cross-core misses
//!    overlap instead of stalling one frame at a time;
//! 4. per port, while the shaper ([`crate::shaper`]) allows, take frames in scheduler order
//!    ([`crate::sched`]) into one TX batch, produce it, and kick the socket once (`sendto`, only
//!    when the ring asks for a wake-up — always, in copy mode). Copy mode transmits at most the
//!    socket's TX budget per kick ([`crate::xsk`] raises it from 32 to the ring size), so a port
//!    with descriptors left in its TX ring is kicked again next pass;
//! 5. a pass that moved anything is followed at once by the next; after [`IDLE_SPIN_NS`]
//!    without any work the thread sleeps in `ppoll(2)` on every socket and the stop eventfd,
//!    with a timeout equal to the earliest shaped departure (ns resolution) — an idle switch
//!    sleeps indefinitely and costs no CPU.
//!
//! Nothing on this path allocates, locks, or panics on frame contents; per-port counters are
//! added once per batch.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use dataplane_common::config::SwitchConfig;
use dataplane_common::Decision;
use xsk_rs::{FrameDesc, Umem};

use crate::decision::{classify, Rx};
use crate::queue::{PortQueues, PortStatsRef};
use crate::rewrite::rewrite_l3;
use crate::sched::Scheduler;
use crate::shaper::{Shaper, DEFAULT_BURST_BYTES};
use crate::stats::SwitchStats;
use crate::xsk::{XskPort, XskSet, RX_RING_SIZE, TX_RING_SIZE};

/// Descriptors received per port per pass, transmitted per port per pass (one `sendto`), and
/// reaped from a completion ring per call. Measured on the 2-core bench box: 256 was no faster
/// than 64 (the frames of a bigger batch fall out of L1 before the kernel copies them on TX).
pub const BATCH: usize = 64;
/// Poll interval while transmitted frames wait for completion.
const COMPLETION_POLL_NS: u64 = 50_000;
/// After this long without completions, wait longer between checks (a stuck peer must not
/// turn into a busy loop).
const COMPLETION_STALL_NS: u64 = 10_000_000;
const COMPLETION_STALL_POLL_NS: u64 = 10_000_000;
/// Shaper waits shorter than this are spun rather than slept (ppoll would overshoot them).
const MIN_SLEEP_NS: u64 = 2_000;
/// After the last pass that moved a frame, keep polling the rings this long before sleeping in
/// `ppoll`: frames of a flow arrive microseconds apart, and a sleep/wake-up pair (an IPI from
/// the CPU running XDP, two context switches) costs more than that. Bounded, so an idle
/// switch still sleeps right away and uses no CPU.
pub const IDLE_SPIN_NS: u64 = 20_000;
/// How many received frames ahead their first cache lines are prefetched. Small, because UMEM
/// chunks are 4 KiB apart and so all land in the same few L1 sets.
pub const PREFETCH_AHEAD: usize = 8;

/// Errors of the data-plane thread.
#[derive(Debug, thiserror::Error)]
pub enum DataPlaneError {
    #[error("creating the stop eventfd: {0}")]
    EventFd(std::io::Error),
    #[error("ppoll on the port sockets: {0}")]
    Poll(std::io::Error),
    #[error("port {port} ({name}): TX kick failed: {source}")]
    Kick { port: usize, name: String, source: std::io::Error },
    #[error("{ports} ports but {given} sockets")]
    PortCount { ports: usize, given: usize },
}

/// Wakes the data-plane thread and makes it exit.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<OwnedFd>);

impl StopHandle {
    /// Asks the thread to stop (idempotent, async-signal-safe write of an eventfd counter).
    pub fn stop(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a live stack buffer to an eventfd we own.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}

/// Static per-switch parameters of the data path, from the [`SwitchConfig`].
#[derive(Debug, Clone)]
pub struct DataPlaneConfig {
    pub port_macs: Vec<[u8; 6]>,
    pub line_rates_bps: Vec<u64>,
    pub nexthop_macs: Vec<[u8; 6]>,
    pub nexthop_ports: Vec<u32>,
    pub queue_limit_bytes: u64,
    pub burst_bytes: u64,
}

impl DataPlaneConfig {
    pub fn from_switch(cfg: &SwitchConfig) -> Self {
        DataPlaneConfig {
            port_macs: cfg.ports.iter().map(|p| p.mac.0).collect(),
            line_rates_bps: cfg.ports.iter().map(|p| p.line_rate_bps).collect(),
            nexthop_macs: cfg.nexthops.iter().map(|n| n.mac.0).collect(),
            nexthop_ports: cfg.nexthops.iter().map(|n| n.port).collect(),
            queue_limit_bytes: cfg.queue_limit_bytes,
            burst_bytes: DEFAULT_BURST_BYTES,
        }
    }
}

struct Port {
    xsk: XskPort,
    mac: [u8; 6],
    queues: PortQueues<FrameDesc>,
    shaper: Shaper,
    sched: Scheduler,
    /// Descriptors produced on TX and not yet completed.
    tx_inflight: u32,
    /// Last time a completion arrived or nothing was in flight (ns).
    last_progress: u64,
}

/// The data path of one switch. Build with [`DataPlane::new`], run with [`DataPlane::run`] on a
/// dedicated thread, stop with the [`StopHandle`].
pub struct DataPlane {
    umem: Umem,
    ports: Vec<Port>,
    free: Vec<FrameDesc>,
    total_frames: usize,
    stats: Arc<SwitchStats>,
    nexthop_macs: Vec<[u8; 6]>,
    nexthop_ports: Vec<u32>,
    stop: Arc<OwnedFd>,
    scratch: Vec<FrameDesc>,
    pollfds: Vec<libc::pollfd>,
}

impl std::fmt::Debug for DataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPlane").field("ports", &self.ports.len()).field("frames", &self.total_frames).finish()
    }
}

/// Hints the CPU to fetch the first two cache lines of a received frame: the Decision header,
/// the Ethernet/IP headers behind it, and the tail of a minimum-size frame (8 + 60 bytes spill
/// into the second line; stripping the Decision reads it).
#[inline(always)]
fn prefetch_frame(umem: &Umem, d: &FrameDesc) {
    // SAFETY: `d` was just received on a socket of this UMEM, so it addresses one of its frames.
    let ptr = unsafe { umem.data(d) }.contents().as_ptr();
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults (not even past the frame, hence the
    // wrapping pointer arithmetic) and has no architectural effect; SSE is part of the x86_64
    // baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(ptr.cast());
        _mm_prefetch::<_MM_HINT_T0>(ptr.wrapping_add(64).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// Where the loop stands for one port after its transmit step.
enum TxState {
    /// Nothing queued, nothing in flight.
    Idle,
    /// More to do right away (batch limit hit, or the TX ring still holds unsent descriptors).
    Busy,
    /// Wake at this time (shaper departure or completion check).
    WaitUntil(u64),
}

impl DataPlane {
    pub fn new(xsk: XskSet, cfg: &DataPlaneConfig, stats: Arc<SwitchStats>) -> Result<Self, DataPlaneError> {
        let n = cfg.port_macs.len();
        if xsk.ports.len() != n || cfg.line_rates_bps.len() != n || stats.ports.len() != n {
            return Err(DataPlaneError::PortCount { ports: n, given: xsk.ports.len() });
        }
        // SAFETY: plain eventfd(2) call; the returned descriptor is checked and then owned.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(DataPlaneError::EventFd(std::io::Error::last_os_error()));
        }
        // SAFETY: `efd` is a fresh descriptor nothing else owns.
        let stop = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
        let total_frames = xsk.frames.len();
        // A queue never holds more descriptors than there are frames, nor more than its byte
        // limit allows at the minimum frame size.
        let qcap = ((cfg.queue_limit_bytes / 60) as usize + 1).min(total_frames);
        let ports: Vec<Port> = xsk
            .ports
            .into_iter()
            .enumerate()
            .map(|(i, x)| Port {
                xsk: x,
                mac: cfg.port_macs[i],
                queues: PortQueues::new(qcap, cfg.queue_limit_bytes, PortStatsRef::new(stats.clone(), i)),
                shaper: Shaper::new(cfg.line_rates_bps[i].max(1), cfg.burst_bytes),
                sched: Scheduler::StrictPriority,
                tx_inflight: 0,
                last_progress: 0,
            })
            .collect();
        let mut pollfds: Vec<libc::pollfd> =
            ports.iter().map(|p| libc::pollfd { fd: p.xsk.fd(), events: libc::POLLIN, revents: 0 }).collect();
        pollfds.push(libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 });
        stats.free_frames.set(total_frames as u64);
        Ok(DataPlane {
            umem: xsk.umem,
            ports,
            free: xsk.frames,
            total_frames,
            stats,
            nexthop_macs: cfg.nexthop_macs.clone(),
            nexthop_ports: cfg.nexthop_ports.clone(),
            stop,
            scratch: vec![FrameDesc::default(); BATCH],
            pollfds,
        })
    }

    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop.clone())
    }

    /// Socket fds in port order (to register in the XSKS map).
    pub fn socket_fds(&self) -> Vec<RawFd> {
        self.ports.iter().map(|p| p.xsk.fd()).collect()
    }

    /// Runs until stopped. Returns an error only for failures of the kernel interface itself.
    pub fn run(mut self) -> Result<(), DataPlaneError> {
        // Shaper deadlines are tens of µs: ask for tight timers (default slack is 50 µs).
        // SAFETY: prctl with integer arguments only affects this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
        let clock = Instant::now();
        let tx_budget = self.ports.iter().map(|p| p.xsk.tx_budget).min().unwrap_or(0);
        tracing::info!(ports = self.ports.len(), frames = self.total_frames, tx_budget, "data plane running");
        let mut last_work = 0u64;
        loop {
            let now = clock.elapsed().as_nanos() as u64;
            let mut work = 0usize;
            let mut busy = false;
            for p in 0..self.ports.len() {
                work += self.reap(p, now);
            }
            for p in 0..self.ports.len() {
                self.refill(p);
            }
            for p in 0..self.ports.len() {
                work += self.receive(p);
            }
            let mut wake = u64::MAX;
            for p in 0..self.ports.len() {
                match self.transmit(p, now)? {
                    TxState::Idle => {}
                    TxState::Busy => busy = true,
                    TxState::WaitUntil(t) => wake = wake.min(t),
                }
            }
            self.stats.free_frames.set(self.free.len() as u64);
            if busy || work > 0 {
                last_work = now;
                continue;
            }
            if now.saturating_sub(last_work) < IDLE_SPIN_NS {
                continue;
            }
            let timeout = if wake == u64::MAX {
                None
            } else {
                let dt = wake.saturating_sub(now);
                if dt < MIN_SLEEP_NS {
                    continue;
                }
                Some(dt)
            };
            if self.wait(timeout)? {
                break;
            }
        }
        self.shutdown();
        Ok(())
    }

    /// Moves completed TX descriptors back to the free pool; returns how many.
    fn reap(&mut self, p: usize, now: u64) -> usize {
        let port = &mut self.ports[p];
        if port.tx_inflight == 0 {
            port.last_progress = now;
            return 0;
        }
        let mut total = 0;
        loop {
            // SAFETY: the completion ring only returns descriptors of our UMEM that we produced.
            let n = unsafe { port.xsk.comp.consume(&mut self.scratch) };
            if n == 0 {
                break;
            }
            self.free.extend_from_slice(&self.scratch[..n]);
            port.tx_inflight = port.tx_inflight.saturating_sub(n as u32);
            port.last_progress = now;
            total += n;
            if n < BATCH {
                break;
            }
        }
        total
    }

    /// Tops up the port's fill ring from the free pool.
    fn refill(&mut self, p: usize) {
        let fill = &mut self.ports[p].xsk.fill;
        let want = fill.nb_free(RX_RING_SIZE) as usize;
        let n = want.min(self.free.len());
        if n == 0 {
            return;
        }
        let from = self.free.len() - n;
        // SAFETY: these descriptors are free (owned by nobody else) and belong to our UMEM.
        let done = unsafe { fill.produce(&self.free[from..]) };
        if done == n {
            self.free.truncate(from);
        }
    }

    /// Receives one batch on port `p`; returns how many descriptors it took.
    fn receive(&mut self, p: usize) -> usize {
        // SAFETY: the RX ring returns descriptors of frames of our UMEM that we gave to the fill
        // ring; from now on we own them.
        let n = unsafe { self.ports[p].xsk.rx.consume(&mut self.scratch) };
        if n == 0 {
            return 0;
        }
        let nports = self.ports.len();
        let rx_stats = &self.stats.ports[p];
        for d in &self.scratch[..n.min(PREFETCH_AHEAD)] {
            prefetch_frame(&self.umem, d);
        }
        let mut rx_bytes = 0u64;
        for i in 0..n {
            if i + PREFETCH_AHEAD < n {
                prefetch_frame(&self.umem, &self.scratch[i + PREFETCH_AHEAD]);
            }
            let mut d = self.scratch[i];
            let verdict = {
                // SAFETY: `d` is ours (just received) and no other reference to its frame exists.
                let mut data = unsafe { self.umem.data_mut(&mut d) };
                let buf = data.contents_mut();
                let total = buf.len();
                rx_bytes += total.saturating_sub(Decision::LEN) as u64;
                match classify(buf, nports, &self.nexthop_ports) {
                    Rx::Forward { egress_port, tc, nexthop } => {
                        buf.copy_within(Decision::LEN.., 0);
                        let flen = total - Decision::LEN;
                        match rewrite_l3(&mut buf[..flen], self.ports[egress_port].mac, self.nexthop_macs[nexthop]) {
                            Ok(()) => {
                                data.cursor().set_pos(flen);
                                Some((egress_port, tc, flen as u32))
                            }
                            Err(_) => {
                                rx_stats.rewrite_errors.inc();
                                None
                            }
                        }
                    }
                    Rx::Lldp => {
                        rx_stats.rx_lldp.inc();
                        None
                    }
                    Rx::MacControl => {
                        rx_stats.rx_mac_control.inc();
                        None
                    }
                    Rx::Invalid(_) => {
                        rx_stats.rx_invalid.inc();
                        None
                    }
                }
            };
            match verdict {
                Some((egress, tc, len)) => {
                    if let Err(d) = self.ports[egress].queues.enqueue(tc, d, len) {
                        self.free.push(d);
                    }
                }
                None => self.free.push(d),
            }
        }
        rx_stats.rx_packets.add(n as u64);
        rx_stats.rx_bytes.add(rx_bytes);
        n
    }

    /// Sends what the scheduler and shaper allow on port `p`, kicks the socket.
    fn transmit(&mut self, p: usize, now: u64) -> Result<TxState, DataPlaneError> {
        let port = &mut self.ports[p];
        let tx = &mut port.xsk.tx;
        let ring_free = tx.nb_free_exact();
        let room =
            (ring_free as usize).min((TX_RING_SIZE - port.tx_inflight.min(TX_RING_SIZE)) as usize).min(BATCH);
        let mut n = 0;
        let mut tx_bytes = 0u64;
        let mut shaped_until = None;
        while n < room {
            let Some(tc) = port.sched.pick(&port.queues) else { break };
            if let Err(t) = port.shaper.poll(now) {
                shaped_until = Some(t);
                break;
            }
            let Some((d, len)) = port.queues.dequeue(tc) else { break };
            port.shaper.sent(now, len);
            self.scratch[n] = d;
            n += 1;
            tx_bytes += len as u64;
        }
        if n > 0 {
            // SAFETY: the descriptors were dequeued (owned by us, frames of our UMEM) and their
            // lengths were set when they were enqueued; `room` ≤ free ring slots so the
            // all-or-nothing reserve succeeds.
            let done = unsafe { tx.produce(&self.scratch[..n]) };
            if done != n {
                // Cannot happen given `room`; never leak the frames if it does.
                self.free.extend_from_slice(&self.scratch[..n]);
            } else {
                port.tx_inflight += n as u32;
                self.stats.ports[p].tx_packets.add(n as u64);
                self.stats.ports[p].tx_bytes.add(tx_bytes);
            }
        }
        let unsent_before = TX_RING_SIZE - tx.nb_free_exact();
        // Copy mode only transmits inside sendto() and keeps the need_wakeup flag set for good;
        // a zero-copy driver clears it while its NAPI is draining the ring.
        if unsent_before > 0 && tx.needs_wakeup() {
            tx.wakeup().map_err(|source| DataPlaneError::Kick { port: p, name: port.xsk.name.clone(), source })?;
        }
        let unsent_after = TX_RING_SIZE - tx.nb_free_exact();
        // On veth the peer usually frees the skbs inside the kick (its NAPI runs in the softirq
        // raised by our sendto), so completions are ready now: take them before deciding
        // whether a completion timer is needed at all.
        if port.tx_inflight > 0 {
            self.reap(p, now);
        }
        let port = &mut self.ports[p];
        let queued = port.queues.nonempty() != 0;
        // Decide what this port needs next.
        if unsent_after > 0 && unsent_after < unsent_before {
            return Ok(TxState::Busy); // the kick made progress: keep kicking
        }
        if queued && n == room && room == BATCH {
            return Ok(TxState::Busy);
        }
        let mut wake = u64::MAX;
        if let Some(t) = shaped_until {
            wake = t;
        }
        if port.tx_inflight > 0 || unsent_after > 0 {
            let dt = if now.saturating_sub(port.last_progress) > COMPLETION_STALL_NS {
                COMPLETION_STALL_POLL_NS
            } else {
                COMPLETION_POLL_NS
            };
            wake = wake.min(now + dt);
        }
        if wake == u64::MAX {
            if queued {
                // Queued but blocked on ring room without anything in flight: retry soon.
                return Ok(TxState::WaitUntil(now + COMPLETION_POLL_NS));
            }
            return Ok(TxState::Idle);
        }
        Ok(TxState::WaitUntil(wake))
    }

    /// Sleeps until a socket is readable, the timeout (ns) passes, or stop is requested.
    /// Returns true when stop was requested.
    fn wait(&mut self, timeout_ns: Option<u64>) -> Result<bool, DataPlaneError> {
        let ts = timeout_ns.map(|ns| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        for f in &mut self.pollfds {
            f.revents = 0;
        }
        // SAFETY: `pollfds` is a live array of initialised pollfd of the given length, `tsp` is
        // null or points to a live timespec, and a null sigmask leaves the mask unchanged.
        let r = unsafe { libc::ppoll(self.pollfds.as_mut_ptr(), self.pollfds.len() as libc::nfds_t, tsp, std::ptr::null()) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(DataPlaneError::Poll(e));
        }
        let stop = self.pollfds.last().is_some_and(|f| f.revents & libc::POLLIN != 0);
        Ok(stop)
    }

    /// Returns every queued frame to the pool (the sockets and UMEM are closed on drop).
    fn shutdown(&mut self) {
        let mut dropped = 0usize;
        for port in &mut self.ports {
            let free = &mut self.free;
            port.queues.drain(|d| {
                free.push(d);
                dropped += 1;
            });
        }
        self.stats.free_frames.set(self.free.len() as u64);
        tracing::info!(discarded_queued_frames = dropped, "data plane stopped");
    }
}
