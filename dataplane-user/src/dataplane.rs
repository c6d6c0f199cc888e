//! The data-plane thread of one switch: owns every UMEM frame, receives from all port sockets,
//! rewrites, queues per (egress port, traffic class), schedules and shapes, transmits.
//!
//! Loop (one pass; the clock is read once per pass):
//! 1. reap TX completions of every port into the free pool (copy mode hands back length 0);
//! 2. refill every port's fill ring from the free pool;
//! 3. receive up to [`BATCH`] descriptors per port: validate the [`Decision`] the XDP program
//!    left as metadata in front of the frame ([`switch_model::decision`]; the frame is never moved:
//!    it leaves from where it arrived), apply the L3 rewrite ([`switch_model::rewrite`]), ask
//!    the shared buffer ([`switch_model::buffer`]) to admit the frame — charged to its egress queue and
//!    to its ingress priority group (ingress port, priority) — and enqueue it on the egress
//!    port's queue for its traffic class ([`switch_model::queue`]); a frame a lossy queue that
//!    trims (`qos.trim`) does not admit is cut, remarked ([`switch_model::trim`]) and, admitted
//!    again as the small frame it now is, enqueued on the port's trim queue. An admission that takes a lossless
//!    group past xOFF puts an 802.1Qbb PFC frame for that priority into the ingress port's
//!    control queue at once ([`switch_model::pfc::PfcTx`]). PAUSE and PFC frames received update the
//!    port's pause state ([`switch_model::pfc::PfcRx`]; PFC only for the lossless priorities, the PFC
//!    enable vector: a pause for another priority is counted and ignored); LLDP frames are counted and copied to the
//!    control side's LLDP/DCBX agent through a bounded ring ([`crate::ctrl`]). The frames were just written by the CPU that ran the XDP
//!    program, so the cache lines of each one's Decision and headers are prefetched [`PREFETCH_AHEAD`] frames
//!    ahead: the cross-core misses overlap instead of stalling one frame at a time;
//! 4. per port, first the control queue (frames the switch originates: PFC, and frames the
//!    control side hands over through [`crate::ctrl`]), then, while the shaper
//!    ([`switch_model::shaper`]) allows, frames in scheduler order ([`switch_model::sched`]: strict queues,
//!    then deficit-weighted round robin by the ETS shares) among the queues the peer has not
//!    paused, into one TX batch; dequeueing releases the frame's buffer charges,
//!    and a group that falls below xON sends PFC quanta 0. Then produce the batch and kick the
//!    socket once (`sendto`, only
//!    when the ring asks for a wake-up — always, in copy mode). Copy mode transmits at most the
//!    socket's TX budget per kick ([`crate::xsk`] raises it from 32 to the ring size), so a port
//!    with descriptors left in its TX ring is kicked again next pass;
//! 5. PFC refreshes that are due go out (an XOFF is repeated before the peer's pause expires
//!    while the group stays above xON); while any priority is paused or stormed, the PFC
//!    watchdog ([`switch_model::pfcwd`]) is polled every poll interval and its events are reported
//!    to the control side;
//! 6. a pass that moved anything is followed at once by the next; after [`IDLE_SPIN_NS`]
//!    without any work the worker ([`crate::worker`]) sleeps in `ppoll(2)` on every socket, the
//!    stop eventfd and the control side's doorbell (of all its data planes), with a timeout
//!    equal to the earliest deadline (shaped departure, pause expiry, PFC refresh, watchdog
//!    poll; ns resolution) — an idle switch sleeps indefinitely and costs no CPU.
//!
//! While a capture mirrors a port ([`rocefab_plumbing::capture`]), a received frame is stamped with the
//! time the XDP program saw it (`rx_ns` of its [`XdpMeta`]) and a sent frame with its departure
//! in the shaper's schedule ([`Shaper::departure`]), each spaced at least one serialisation time
//! after the previous frame in that direction ([`LineStamp`]).
//!
//! Nothing on this path allocates, locks, or panics on frame contents; per-port counters are
//! added once per batch.
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use afxdp::{FrameDesc, TxQueue, Umem};
use dataplane_common::limits::NUM_TC;
use dataplane_common::XdpMeta;
use rocefab_contracts::config::{QosConfig, SwitchConfig, TrimConfig, WatchdogAction, WredAt};
use rocefab_contracts::time::Dilation;
use rocefab_wire::ethernet::{MacAddr, PrioritySet};
use rocefab_wire::mac_control::{MacControlRepr, PfcRepr};

use crate::ctrl::{DataEnd, DpEvent};
use crate::frames::FramePool;
use crate::xsk::{XskPort, XskSet};
use rocefab_contracts::memory::{switch_memory, SwitchMemory};
use rocefab_plumbing::capture::{serialisation_ns, LineStamp, MonoClock, Tap, TapProducer, DIR_IN, DIR_OUT};
use switch_model::buffer::{BufferParams, PgEvent, Reject, SharedBuffer};
use switch_model::decision::{classify, Rx};
use switch_model::delay::DelayLine;
use switch_model::pfc::{PfcRx, PfcTx};
use switch_model::pfcwd::{Watchdog, WdAction, WdEvent, WdParams};
use switch_model::queue::{Fifo, PortQueues, PortStatsRef};
use switch_model::rewrite::rewrite_l3;
use switch_model::sched::Scheduler;
use switch_model::shaper::{Shaper, DEFAULT_BURST_BYTES};
use switch_model::stall::StallWatch;
use switch_model::stats::SwitchStats;

/// Descriptors received per port per pass, transmitted per port per pass (one `sendto`), and
/// reaped from a completion ring per call. Measured on the 2-core bench box: 256 was no faster
/// than 64 (the frames of a bigger batch fall out of L1 before the kernel copies them on TX).
pub const BATCH: usize = rocefab_contracts::memory::BATCH;
/// Poll interval while transmitted frames wait for completion.
const COMPLETION_POLL_NS: u64 = 50_000;
/// After this long without completions, wait longer between checks (a stuck peer must not
/// turn into a busy loop).
const COMPLETION_STALL_NS: u64 = 10_000_000;
const COMPLETION_STALL_POLL_NS: u64 = 10_000_000;
/// Shaper waits shorter than this are spun rather than slept (ppoll would overshoot them).
pub(crate) const MIN_SLEEP_NS: u64 = 2_000;
/// After the last pass that moved a frame, keep polling the rings this long before sleeping in
/// `ppoll`: frames of a flow arrive microseconds apart, and a sleep/wake-up pair (an IPI from
/// the CPU running XDP, two context switches) costs more than that. Bounded, so an idle
/// switch still sleeps right away and uses no CPU.
///
/// Not longer: the spin only pays while the switch has a CPU to itself. On the 2-core machine
/// with a rail-spine fabric (four switch daemons plus hosts), idle ping RTT host1 → rail1 →
/// spine → rail2 → host2 (p50 of 100 pings 20 ms apart, 2026-11-25) was 0.28 ms with no spin
/// and with 20 µs alike, but 0.96 ms with 200 µs and 3.7 ms with 1 ms (with `sched_yield` per
/// pass): a switch spinning after a frame holds the CPU that the next hop's daemon, or the
/// reply's, needs to wake up on.
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
    #[error("UMEM has {have} frames of {chunk} bytes, the rings and the configured buffer need {need} of {want}")]
    Frames { have: usize, chunk: u32, need: usize, want: u32 },
}

/// Makes a data plane stop: its worker ends it and goes on with the others.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<StopFlag>);

/// A data plane's stop request: a flag its worker reads every pass (a busy worker never
/// sleeps), and an eventfd that wakes it from `ppoll`.
#[derive(Debug)]
pub(crate) struct StopFlag {
    pub(crate) fd: OwnedFd,
    pub(crate) set: std::sync::atomic::AtomicBool,
}

impl StopHandle {
    /// Asks the data plane to stop (idempotent; async-signal-safe: an atomic store and a write
    /// of an eventfd counter).
    pub fn stop(&self) {
        self.0.set.store(true, std::sync::atomic::Ordering::Release);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a live stack buffer to an eventfd we own.
        let _ = unsafe { libc::write(self.0.fd.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}

/// Static per-switch parameters of the data path, from the [`SwitchConfig`], on the wall clock:
/// [`DataPlaneConfig::from_switch`] is where the switch applies the time dilation (README
/// "Emulated time").
#[derive(Debug, Clone)]
pub struct DataPlaneConfig {
    pub port_macs: Vec<[u8; 6]>,
    /// Wall-clock shaper rates (emulated line rate / D); PFC quanta are timed at these rates,
    /// so a pause lasts quanta × 512 bit-times at the emulated speed × D.
    pub line_rates_bps: Vec<u64>,
    pub nexthop_macs: Vec<[u8; 6]>,
    pub nexthop_ports: Vec<u32>,
    pub queue_limit_bytes: u64,
    pub burst_bytes: u64,
    /// Thresholds in bytes (never scaled); the watchdog's times on the wall clock.
    pub qos: QosConfig,
    /// Time dilation D, to report measured times in emulated units.
    pub dilation: Dilation,
    /// Per port, the wall-clock delay (emulated × D) of frames leaving it and arriving on it
    /// ([`switch_model::delay`]); 0: none.
    pub tx_delay_ns: Vec<u64>,
    pub rx_delay_ns: Vec<u64>,
    /// The UMEM, rings and queues of this switch ([`rocefab_contracts::memory::switch_memory`]:
    /// the function `rocefab plan` prints).
    pub memory: SwitchMemory,
}

impl DataPlaneConfig {
    /// The data path's parameters for `cfg` (emulated units and D) on links of `link_mtu`
    /// bytes: rates divided by D, the watchdog's detect, restore and poll times multiplied by D;
    /// bytes unchanged.
    pub fn from_switch(cfg: &SwitchConfig, link_mtu: u32) -> Self {
        // `SwitchConfig::validate` (run by `load`) refuses a bad factor.
        let d = cfg.dilation().unwrap_or_default();
        let mut qos = cfg.qos.clone();
        let w = &mut qos.watchdog;
        (w.detect_us, w.restore_us, w.poll_us) =
            (d.duration(w.detect_us), d.duration(w.restore_us), d.duration(w.poll_us));
        DataPlaneConfig {
            port_macs: cfg.ports.iter().map(|p| p.mac.0).collect(),
            line_rates_bps: cfg.ports.iter().map(|p| d.rate(p.line_rate_bps)).collect(),
            nexthop_macs: cfg.nexthops.iter().map(|n| n.mac.0).collect(),
            nexthop_ports: cfg.nexthops.iter().map(|n| n.port).collect(),
            queue_limit_bytes: cfg.queue_limit_bytes,
            burst_bytes: DEFAULT_BURST_BYTES,
            qos,
            dilation: d,
            tx_delay_ns: cfg.ports.iter().map(|p| d.duration(p.tx_delay_ns)).collect(),
            rx_delay_ns: cfg.ports.iter().map(|p| d.duration(p.rx_delay_ns)).collect(),
            memory: switch_memory(cfg, link_mtu),
        }
    }

    /// The shared buffer's parameters.
    pub fn buffer_params(&self) -> BufferParams {
        let q = &self.qos;
        BufferParams {
            ports: self.port_macs.len(),
            buffer_bytes: q.buffer_bytes,
            cell_bytes: q.cell_bytes,
            lossless: q.lossless_priorities,
            xoff_bytes: q.xoff_bytes,
            xon_bytes: q.xon_bytes,
            headroom_bytes: q.headroom_bytes,
            queue_limit_bytes: self.queue_limit_bytes,
            chunk_bytes: self.memory.chunk_bytes,
            frames: self.memory.buffer,
        }
    }

    fn tx_line_capacity(&self, port: usize) -> usize {
        let slack = rocefab_contracts::memory::TX_LINE_SLACK;
        DelayLine::<FrameDesc>::capacity_for(self.line_rates_bps[port], self.tx_delay_ns[port], slack)
    }

    fn rx_line_capacity(&self, port: usize) -> usize {
        let slack = rocefab_contracts::memory::RX_LINE_SLACK;
        DelayLine::<FrameDesc>::capacity_for(self.line_rates_bps[port], self.rx_delay_ns[port], slack)
    }

    /// Frames reserved for PFC and control-side frames: a control queue's worth per port.
    pub fn own_reserve(&self) -> usize {
        self.port_macs.len() * OWN_QUEUE_LEN
    }
}

/// Longest MAC control frame acted on, without FCS: 60 bytes, 64 with an 802.1Q tag.
const MAC_CONTROL_MAX_FRAME: usize = 64;

/// Frames a port's control queue holds (PFC and LLDP are rare: one per priority per pause
/// interval, one per LLDP interval).
pub const OWN_QUEUE_LEN: usize = rocefab_contracts::memory::OWN_QUEUE_LEN;
// The plan's figures assume the data path's shaper burst and queue slot size.
const _: () = assert!(DEFAULT_BURST_BYTES == rocefab_contracts::memory::SHAPER_BURST_BYTES);
const _: () = assert!(
    std::mem::size_of::<(Held, u32)>() as u64 <= rocefab_contracts::memory::QUEUE_SLOT_BYTES,
    "a queue slot is larger than rocefab plan counts"
);
/// Channel sizes between control side and data plane.
pub const CTRL_FRAMES: usize = 64;
pub const CTRL_EVENTS: usize = 256;

/// A queued frame: its descriptor, and where its buffer charges go back when it leaves.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    d: FrameDesc,
    ingress: u8,
    /// When the frame joined its queue (data-plane clock): on a delayed egress port when it
    /// reached the switch, for its departure ([`Shaper::sent_at`]); else the pass that admitted
    /// it. The queue's sojourn time counts from here.
    at: u64,
}

/// Gives a held frame's buffer charges back and publishes its ingress group's occupancy;
/// returns the group's xON event, if any. The one place a held frame leaves the buffer.
#[inline]
fn release_held(
    buffer: &mut SharedBuffer,
    stats: &SwitchStats,
    h: &Held,
    egress: usize,
    tc: u8,
    len: u32,
    now: u64,
) -> Option<PgEvent> {
    let ingress = h.ingress as usize;
    let ev = buffer.release(ingress, tc, egress, tc, len);
    stats.ports[ingress].prio[tc as usize].pg_bytes.set(buffer.pg_bytes(ingress, tc));
    publish_depth(stats, egress, tc, buffer.queue_bytes(egress, tc), now);
    ev
}

/// Publishes the occupancy of ingress group (`ingress`, `prio`) after an admission and raises
/// its watermarks (occupancy and headroom): the group only grows on admission.
#[inline(always)]
pub(crate) fn publish_admitted_pg(stats: &SwitchStats, buffer: &SharedBuffer, ingress: usize, prio: u8) {
    let s = &stats.ports[ingress].prio[prio as usize & 7];
    let bytes = buffer.pg_bytes(ingress, prio);
    s.pg_bytes.set(bytes);
    s.pg_peak_bytes.raise(bytes);
    s.headroom_peak_bytes.raise(buffer.headroom_used(ingress, prio));
}

/// Publishes the depth of egress queue (`egress`, `tc`) as the buffer charges it, and adds the
/// depth it had since its last change to the queue's depth-time integral (the pass clock `now`).
#[inline(always)]
fn publish_depth(stats: &SwitchStats, egress: usize, tc: u8, cells: u64, now: u64) {
    let q = &stats.ports[egress].queues[tc as usize & 7];
    q.depth_cell_bytes.set(cells);
    q.depth_cell_area.set(now, cells);
}

/// Counts a frame the shared buffer did not admit: a headroom overflow on its ingress group, any
/// other reason as an admission drop of its egress queue (out of UMEM frames also on its own).
#[inline]
pub(crate) fn count_reject(stats: &SwitchStats, ingress: usize, egress: usize, tc: u8, len: u32, r: Reject) {
    let tc = tc as usize & 7;
    if r == Reject::HeadroomOverflow {
        stats.ports[ingress].prio[tc].headroom_overflow.inc();
        return;
    }
    let q = &stats.ports[egress].queues[tc];
    q.admission_dropped_packets.inc();
    if r == Reject::NoFrame {
        q.no_frame_dropped_packets.inc();
    }
    q.dropped_packets.inc();
    q.dropped_bytes.add(u64::from(len));
}

/// Whether a frame that queue `tc` rejected for `r` is trimmed (`qos.trim`): lossy rejections
/// on a queue that trims. A headroom overflow (lossless) never is; nor is anything when
/// trimming is off.
#[inline(always)]
pub(crate) fn trims(trim: &TrimConfig, tc: u8, r: Reject) -> bool {
    r != Reject::HeadroomOverflow && trim.queues & (1 << (tc & 7)) != 0
}

/// Counts a frame queue (`egress`, `tc`) rejected and [`switch_model::trim`] cut by `removed`
/// bytes; `queued`: the trim queue admitted it (SAI's TRIM and DROPPED_TRIM counters).
#[inline]
pub(crate) fn count_trim(stats: &SwitchStats, egress: usize, tc: u8, removed: usize, queued: bool) {
    let q = &stats.ports[egress].queues[tc as usize & 7];
    q.trimmed_packets.inc();
    q.trimmed_bytes.add(removed as u64);
    if !queued {
        q.trim_dropped_packets.inc();
    }
}

/// Logs a TX stall of port `p` ([`switch_model::stall`]).
#[cold]
fn note_stall(stats: &SwitchStats, p: usize, (stall, frame_ns): (switch_model::stats::Stall, u64)) {
    stats.ports[p].stalls.log(stall, frame_ns);
}

/// WRED at dequeue (`wred.at: dequeue`) on a frame leaving queue (`p`, `tc`) with `depth` bytes
/// left behind ([`switch_model::ecn::mark_at_dequeue`]); counts what it did. False when the frame is
/// to be dropped (Not-ECT).
#[inline]
#[expect(clippy::too_many_arguments, reason = "the data path's disjoint borrows, passed apart")]
fn mark_dequeued(
    umem: &Umem,
    stats: &SwitchStats,
    p: usize,
    tc: usize,
    d: &mut FrameDesc,
    depth: u64,
    params: &dataplane_common::WredParams,
    rng: &mut u32,
) -> bool {
    if params.queues & (1 << (tc & 7)) == 0 {
        return true;
    }
    *rng = dataplane_common::xorshift32(*rng);
    // SAFETY: `d` was just dequeued: a frame of our UMEM that nothing else references until it
    // is produced on the TX ring.
    let mut data = unsafe { umem.data_mut(d) };
    let q = &stats.ports[p].queues[tc];
    match switch_model::ecn::mark_at_dequeue(data.contents_mut(), depth, params, *rng) {
        switch_model::ecn::Mark::Pass => true,
        switch_model::ecn::Mark::Marked => {
            q.ecn_marked_dequeue.inc();
            true
        }
        switch_model::ecn::Mark::Drop => {
            q.wred_dropped_dequeue.inc();
            false
        }
    }
}

/// A frame the switch originates, queued on a port's control queue.
#[derive(Debug, Clone, Copy, Default)]
struct OwnFrame {
    d: FrameDesc,
    /// For a PFC XOFF: when its group crossed xOFF (ns on the data-plane clock), else 0.
    xoff_ns: u64,
}

struct Port {
    xsk: XskPort,
    mac: [u8; 6],
    queues: PortQueues<Held>,
    /// Frames the switch originates on this port (PFC, control-side frames): served first.
    own: Fifo<OwnFrame>,
    shaper: Shaper,
    sched: Scheduler,
    /// Descriptors produced on TX and not yet completed.
    tx_inflight: u32,
    /// Last time a completion arrived or nothing was in flight (ns).
    last_progress: u64,
    /// When the last transmit step stopped because the shaper had no credit: the departure
    /// it was waiting for (a capture stamps the frames that then leave from the schedule).
    shaped_at: Option<u64>,
    /// Capture stamps of the frames received and sent ([`rocefab_plumbing::capture::LineStamp`]).
    rx_stamp: LineStamp,
    tx_stamp: LineStamp,
    /// Frames sent and not yet at the peer (the cable and the pipelines, [`switch_model::delay`]);
    /// unused (and empty) when the port has no delay.
    tx_line: DelayLine<FrameDesc>,
    /// Frames the peer sent that are not yet here; unused when the peer delays them itself.
    rx_line: DelayLine<FrameDesc>,
    /// TX stalls: frames queued and not paused, nothing sent ([`switch_model::stall`]).
    stall: StallWatch,
    /// The data plane has acted on the port's carrier loss (stamped `carrier_lost_at`) and
    /// not seen the carrier back since.
    without_carrier: bool,
}

/// The data path of one switch. Build with [`DataPlane::new`], hand it to a
/// [`crate::worker::Worker`] (which runs its passes, alone or beside other switches' on one
/// thread), stop it with the [`StopHandle`].
pub struct DataPlane {
    umem: Umem,
    /// UMEM chunk size, and every port's RX (fill) and TX (completion) ring entries.
    chunk_bytes: u32,
    rx_ring: u32,
    tx_ring: u32,
    ports: Vec<Port>,
    /// Free frames, and the descriptor chains of multi-buffer packets ([`crate::frames`]).
    free: FramePool,
    /// A multi-buffer packet in one piece, for a capture.
    frame_buf: Box<[u8]>,
    /// The descriptors of a TX batch of packets (a multi-buffer packet takes several).
    tx_segs: Vec<FrameDesc>,
    /// The reserved pool for frames the switch originates; refilled first from completions.
    own_free: Vec<FrameDesc>,
    /// The data-plane clock (every `now` is ns since its origin; CLOCK_MONOTONIC, as the XDP
    /// program's `bpf_ktime_get_ns`).
    clock: MonoClock,
    own_reserve: usize,
    total_frames: usize,
    stats: Arc<SwitchStats>,
    nexthop_macs: Vec<[u8; 6]>,
    nexthop_ports: Vec<u32>,
    buffer: SharedBuffer,
    /// WRED settings, for the per-band statistics at enqueue (the marking itself is in XDP,
    /// unless `wred.at` is dequeue).
    wred: rocefab_contracts::config::WredConfig,
    /// `wred.at: dequeue`: the curve, and the xorshift32 state of the draws
    /// ([`switch_model::ecn::mark_at_dequeue`]); `None` when the XDP program marks at enqueue.
    wred_dequeue: Option<(dataplane_common::WredParams, u32)>,
    /// Packet trimming (`qos.trim`): which queues cut what they would drop, to what, where.
    trim: TrimConfig,
    pfc_tx: PfcTx,
    pfc_rx: PfcRx,
    /// The watchdog and the buffer its events are collected in (capacity ports × 8).
    watchdog: Option<(Watchdog, Vec<WdEvent>)>,
    /// Time dilation: the PFC reaction histogram records emulated time.
    dilation: Dilation,
    /// Paused priorities per port at the last pass (paused time is published while non-zero).
    pause_seen: Vec<u8>,
    ctrl: DataEnd,
    /// Port mirroring for `rocefab capture` ([`rocefab_plumbing::capture`]); off unless a capture runs.
    tap: Option<TapProducer>,
    pub(crate) stop: Arc<StopFlag>,
    scratch: Vec<FrameDesc>,
    /// Every port's socket, then the control side's doorbell, then the stop eventfd.
    pub(crate) pollfds: Vec<libc::pollfd>,
}

impl std::fmt::Debug for DataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPlane").field("ports", &self.ports.len()).field("frames", &self.total_frames).finish()
    }
}

/// Hints the CPU to fetch the two cache lines of a received frame that the data path reads:
/// the metadata in the 16 bytes before the frame (the end of the line in front of it:
/// the frame starts at the 256-byte XDP headroom of its chunk), and the frame's first line
/// (Ethernet and IP headers, which the rewrite changes).
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
        _mm_prefetch::<_MM_HINT_T0>(ptr.wrapping_sub(XdpMeta::LEN).cast());
        _mm_prefetch::<_MM_HINT_T0>(ptr.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// What one pass of a data plane did ([`DataPlane::pass`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pass {
    /// Its clock at the start of the pass.
    pub now: u64,
    /// It moved frames, or has more to do at once.
    pub worked: bool,
    /// How long until the earliest deadline it waits for, ns (`None`: none).
    pub wake_in: Option<u64>,
}

/// Where the loop stands for one port after its transmit step.
enum TxState {
    /// Nothing queued, nothing in flight.
    Idle,
    /// More to do right away (batch limit hit, or the TX ring still holds unsent descriptors).
    Busy,
    /// Wake at this time (shaper departure, pause expiry or completion check).
    WaitUntil(u64),
}

impl DataPlane {
    /// `xsk` must be the UMEM and sockets of `cfg.memory` ([`crate::xsk::open`]).
    pub fn new(
        xsk: XskSet,
        cfg: &DataPlaneConfig,
        stats: Arc<SwitchStats>,
        ctrl: DataEnd,
    ) -> Result<Self, DataPlaneError> {
        let n = cfg.port_macs.len();
        if xsk.ports.len() != n
            || cfg.line_rates_bps.len() != n
            || stats.ports.len() != n
            || cfg.tx_delay_ns.len() != n
            || cfg.rx_delay_ns.len() != n
        {
            return Err(DataPlaneError::PortCount { ports: n, given: xsk.ports.len() });
        }
        // SAFETY: plain eventfd(2) call; the returned descriptor is checked and then owned.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(DataPlaneError::EventFd(std::io::Error::last_os_error()));
        }
        // SAFETY: `efd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(efd) };
        let stop = Arc::new(StopFlag { fd, set: std::sync::atomic::AtomicBool::new(false) });
        let total_frames = xsk.frames.len();
        let multi_buffer = xsk.multi_buffer;
        let buffer = SharedBuffer::new(cfg.buffer_params());
        let mem = &cfg.memory;
        let need = mem.umem_chunks as usize;
        if xsk.frames.len() < need || xsk.chunk_bytes != mem.chunk_bytes {
            return Err(DataPlaneError::Frames {
                have: total_frames,
                chunk: xsk.chunk_bytes,
                need,
                want: mem.chunk_bytes,
            });
        }
        // A lossy queue never holds more than its byte limit at the smallest charge; a
        // lossless one at most what the buffer's frames allow; a class the DSCP map never
        // names one slot (`rocefab_contracts::memory::queue_capacities`).
        let lossless = cfg.qos.lossless_priorities;
        let caps: [usize; NUM_TC] = mem.queue_caps;
        let ports: Vec<Port> = xsk
            .ports
            .into_iter()
            .enumerate()
            .map(|(i, x)| Port {
                xsk: x,
                mac: cfg.port_macs[i],
                queues: PortQueues::with_capacities(caps, PortStatsRef::new(stats.clone(), i)),
                own: Fifo::new(OWN_QUEUE_LEN, u64::MAX),
                shaper: Shaper::new(cfg.line_rates_bps[i].max(1), cfg.burst_bytes),
                sched: Scheduler::from_qos(&cfg.qos),
                tx_inflight: 0,
                last_progress: 0,
                shaped_at: None,
                rx_stamp: LineStamp::default(),
                tx_stamp: LineStamp::default(),
                tx_line: DelayLine::new(cfg.tx_delay_ns[i], cfg.tx_line_capacity(i)),
                rx_line: DelayLine::new(cfg.rx_delay_ns[i], cfg.rx_line_capacity(i)),
                stall: StallWatch::default(),
                without_carrier: false,
            })
            .collect();
        let mut pollfds: Vec<libc::pollfd> =
            ports.iter().map(|p| libc::pollfd { fd: p.xsk.fd(), events: libc::POLLIN, revents: 0 }).collect();
        pollfds.push(libc::pollfd { fd: ctrl.to_dp.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 });
        pollfds.push(libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 });
        let mut free = xsk.frames;
        let own_reserve = cfg.own_reserve();
        let own_free = free.split_off(free.len().saturating_sub(own_reserve));
        stats.free_frames.set(free.len() as u64);
        let q = &cfg.qos;
        let watchdog = (q.watchdog.enabled && lossless != 0).then(|| {
            let params = WdParams {
                detect_ns: q.watchdog.detect_us.saturating_mul(1000),
                restore_ns: q.watchdog.restore_us.saturating_mul(1000),
                poll_ns: q.watchdog.poll_us.saturating_mul(1000),
                action: match q.watchdog.action {
                    WatchdogAction::Drop => WdAction::Drop,
                    WatchdogAction::Forward => WdAction::Forward,
                    WatchdogAction::Alert => WdAction::Alert,
                },
            };
            // At most one event per queue and poll.
            (Watchdog::new(n, lossless, params), Vec::with_capacity(n * NUM_TC))
        });
        Ok(DataPlane {
            umem: xsk.umem,
            chunk_bytes: xsk.chunk_bytes,
            rx_ring: xsk.rx_ring,
            tx_ring: xsk.tx_ring,
            ports,
            free: FramePool::new(free, total_frames, multi_buffer),
            frame_buf: vec![0; afxdp::chain::MAX_FRAME_BYTES].into_boxed_slice(),
            tx_segs: vec![FrameDesc::default(); BATCH * afxdp::chain::MAX_SEGMENTS],
            own_free,
            // The statistics' clock, so that the control side reads their times on it.
            clock: stats.clock,
            tap: None,
            own_reserve,
            total_frames,
            stats,
            nexthop_macs: cfg.nexthop_macs.clone(),
            nexthop_ports: cfg.nexthop_ports.clone(),
            buffer,
            wred: q.wred.clone(),
            wred_dequeue: (q.wred.at == WredAt::Dequeue && q.wred.queues != 0)
                .then(|| (switch_model::ecn::params_of(&q.wred), q.wred.seed.max(1))),
            trim: q.trim.clone(),
            pfc_tx: PfcTx::new(n, q.pause_quanta, &cfg.line_rates_bps),
            pfc_rx: PfcRx::new(n, &cfg.line_rates_bps, q.lossless_priorities),
            watchdog,
            dilation: cfg.dilation,
            pause_seen: vec![0; n],
            ctrl,
            stop,
            scratch: vec![FrameDesc::default(); BATCH],
            pollfds,
        })
    }

    /// Publishes the queue depths into `board` (the XDP program's `DEPTHS` map) for WRED.
    pub fn with_depths(mut self, board: switch_model::depths::DepthBoard) -> Self {
        self.buffer.publish_to(board);
        self
    }

    /// Mirrors ports into `tap` while the control side asks for it ([`rocefab_plumbing::capture`]);
    /// timestamps are the data-plane clock plus the Unix time of its origin, measured once here.
    pub fn with_tap(mut self, tap: TapProducer, shared: &Tap) -> Self {
        shared.set_epoch(self.clock.unix_offset_ns());
        self.tap = Some(tap);
        self
    }

    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop.clone())
    }

    /// Socket fds in port order (to register in the XSKS map).
    pub fn socket_fds(&self) -> Vec<RawFd> {
        self.ports.iter().map(|p| p.xsk.fd()).collect()
    }

    /// Logs the data plane's sizes as it starts driving its ports.
    pub(crate) fn announce(&self) {
        let tx_budget = self.ports.iter().map(|p| p.xsk.tx_budget).min().unwrap_or(0);
        tracing::info!(
            ports = self.ports.len(),
            frames = self.total_frames,
            buffer_frames = self.buffer.frames_needed(),
            shared_bytes = self.buffer.shared_size(),
            tx_budget,
            "data plane running"
        );
    }

    /// One pass over every port (module docs, steps 1-5): whether it moved anything or has more
    /// to do at once, and how long until the earliest deadline it waits for.
    pub(crate) fn pass(&mut self) -> Result<Pass, DataPlaneError> {
        let now = self.clock.now();
        let mut work = 0usize;
        let mut busy = false;
        for p in 0..self.ports.len() {
            work += self.reap(p, now);
        }
        for p in 0..self.ports.len() {
            self.refill(p);
        }
        work += self.take_control_frames();
        for p in 0..self.ports.len() {
            work += self.receive(p, now);
            work += self.arrive(p, now);
        }
        self.refresh_pauses(now);
        let mut wake = self.publish_pauses(now);
        wake = wake.min(self.poll_watchdog(now));
        if let Some(t) = self.pfc_tx.next_deadline() {
            wake = wake.min(t);
        }
        for p in 0..self.ports.len() {
            let state = if self.stats.ports[p].no_carrier.load(std::sync::atomic::Ordering::Relaxed) {
                work += self.drop_without_carrier(p, now)?;
                TxState::Idle
            } else {
                if self.ports[p].without_carrier {
                    self.ports[p].without_carrier = false;
                    self.stats.ports[p].carrier_lost_at.set(0);
                }
                self.transmit(p, now, true)?
            };
            match state {
                TxState::Idle => {}
                TxState::Busy => busy = true,
                TxState::WaitUntil(t) => wake = wake.min(t),
            }
            if let Some(t) = self.ports[p].rx_line.next_due() {
                wake = wake.min(t);
            }
        }
        self.stats.free_frames.set(self.free.len() as u64);
        Ok(Pass { now, worked: busy || work > 0, wake_in: (wake != u64::MAX).then(|| wake.saturating_sub(now)) })
    }

    /// Moves completed TX descriptors back to the pools (the reserved pool first); returns how many.
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
            let mut done = &self.scratch[..n];
            let top_up = (self.own_reserve - self.own_free.len()).min(done.len());
            if top_up > 0 {
                self.own_free.extend_from_slice(&done[..top_up]);
                done = &done[top_up..];
            }
            self.free.extend_from_slice(done);
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
        let want = fill.nb_free(self.rx_ring) as usize;
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

    /// Copies frames the control side handed over into reserved frames on their control queues.
    fn take_control_frames(&mut self) -> usize {
        if !self.ctrl.has_frames() {
            return 0;
        }
        let mut n = 0;
        while let Some(f) = self.ctrl.next_frame() {
            let port = f.port as usize;
            if port >= self.ports.len() {
                tracing::warn!(
                    port,
                    ports = self.ports.len(),
                    "control side handed a frame for a port that does not exist; dropped"
                );
                continue;
            }
            if self.emit_own(port, f.bytes(), 0) {
                n += 1;
            }
        }
        n
    }

    /// Copies a frame the switch originates into a reserved UMEM frame and queues it on the
    /// port's control queue. False (counted) if the reserved pool or the queue is exhausted.
    fn emit_own(&mut self, p: usize, frame: &[u8], xoff_ns: u64) -> bool {
        let Some(mut d) = self.own_free.pop() else {
            self.stats.ports[p].own_pool_empty.inc();
            return false;
        };
        {
            // SAFETY: `d` came from the reserved pool: a frame of our UMEM owned by nobody else.
            let mut data = unsafe { self.umem.data_mut(&mut d) };
            let mut cur = data.cursor();
            cur.set_pos(0);
            // A UMEM chunk holds far more than OWN_FRAME_MAX bytes: the write is never short.
            let _ = std::io::Write::write_all(&mut cur, frame);
        }
        match self.ports[p].own.push(OwnFrame { d, xoff_ns }, frame.len() as u32) {
            Ok(()) => true,
            Err((o, _)) => {
                self.own_free.push(o.d);
                self.stats.ports[p].own_pool_empty.inc();
                false
            }
        }
    }

    /// Sends an 802.1Qbb PFC frame for `prio` out of `port` with `quanta` (0 = XON);
    /// `xoff_ns` is the xOFF crossing it answers (0 for refreshes and XONs).
    /// True when it was queued.
    fn send_pfc(&mut self, port: usize, prio: u8, quanta: u16, xoff_ns: u64) -> bool {
        let mac = self.ports[port].mac;
        let repr = MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << prio), quanta));
        let sent = self.emit_own(port, &repr.to_frame(MacAddr(mac)), xoff_ns);
        if sent {
            self.stats.ports[port].prio[prio as usize].pfc_tx_frames.inc();
        }
        sent
    }

    /// Acts on a priority-group event of the shared buffer.
    fn on_pg_event(&mut self, ev: PgEvent, now: u64) {
        match ev {
            PgEvent::Xoff { port, prio } => {
                let q = self.pfc_tx.on_xoff(port, prio, now);
                // A pause onset: the group crossed xOFF, the priority goes from not paused to
                // paused at the peer (refreshes and XONs are PFC frames, not onsets).
                if self.send_pfc(port, prio, q, now.max(1)) {
                    self.stats.ports[port].prio[prio as usize].pause_onsets.inc();
                }
            }
            PgEvent::Xon { port, prio } => {
                self.pfc_tx.on_xon(port, prio, now);
                let _ = self.send_pfc(port, prio, 0, 0);
            }
        }
    }

    /// Repeats XOFFs that are about to expire at the peer.
    fn refresh_pauses(&mut self, now: u64) {
        match self.pfc_tx.next_deadline() {
            Some(t) if t <= now => {}
            _ => return,
        }
        let mut due = [(0usize, 0u8, 0u16); 16];
        let mut n = 0;
        self.pfc_tx.due_refresh(now, &mut |port, prio, q| {
            if n < due.len() {
                due[n] = (port, prio, q);
                n += 1;
            }
        });
        for &(port, prio, q) in &due[..n] {
            let _ = self.send_pfc(port, prio, q, 0);
        }
    }

    /// Publishes the paused time of every port that is paused or was at the last pass; returns
    /// when the earliest running pause expires (to publish its end), `u64::MAX` if none.
    fn publish_pauses(&mut self, now: u64) -> u64 {
        let mut wake = u64::MAX;
        for p in 0..self.ports.len() {
            let mask = self.pfc_rx.paused_mask(p, now);
            if mask == 0 && self.pause_seen[p] == 0 {
                continue;
            }
            self.pause_seen[p] = mask;
            self.stats.ports[p].paused_mask.set(u64::from(mask));
            for prio in 0..NUM_TC as u8 {
                self.stats.ports[p].prio[prio as usize].paused_ns.set(self.pfc_rx.paused_ns_total(p, prio, now));
            }
            if mask != 0 {
                if let Some(t) = self.pfc_rx.next_expiry(p) {
                    wake = wake.min(t);
                }
            }
        }
        wake
    }

    /// Runs the PFC watchdog's pass ([`Watchdog::tick`]: it polls while something is paused or
    /// stormed) and acts on its events. Returns when it wants to run next (`u64::MAX`: nothing
    /// to watch).
    fn poll_watchdog(&mut self, now: u64) -> u64 {
        let Some((wd, events)) = self.watchdog.as_mut() else {
            return u64::MAX;
        };
        events.clear();
        let wake = wd.tick(&self.pfc_rx, now, events);
        let events = std::mem::take(events);
        for &e in &events {
            self.on_watchdog(e, now);
        }
        if let Some((_, buf)) = self.watchdog.as_mut() {
            *buf = events;
        }
        wake
    }

    fn on_watchdog(&mut self, e: WdEvent, now: u64) {
        let drop_action = self.watchdog.as_ref().is_some_and(|(w, _)| matches!(w.action(), WdAction::Drop));
        match e {
            WdEvent::Storm { port, prio, paused_for_ns } => {
                self.stats.ports[port].prio[prio as usize].pfcwd_storms.inc();
                self.ctrl.report(DpEvent::Storm { port, prio, paused_for_ns });
                if drop_action {
                    let freed = self.drop_queue(port, prio as usize, now);
                    self.stats.ports[port].queues[prio as usize].pfcwd_dropped_packets.add(freed as u64);
                }
            }
            WdEvent::Restore { port, prio } => {
                self.stats.ports[port].prio[prio as usize].pfcwd_restores.inc();
                self.ctrl.report(DpEvent::Restore { port, prio });
            }
        }
    }

    /// Receives one batch on port `p`; returns how many descriptors it took. On a port whose
    /// peer's frames are delayed here ([`switch_model::delay`]) the frames go onto its receive line,
    /// stamped with when the XDP program saw them, and [`Self::arrive`] takes them when due.
    fn receive(&mut self, p: usize, now: u64) -> usize {
        if self.ports[p].rx_line.delay_ns() > 0 {
            return self.receive_onto_line(p, now);
        }
        // SAFETY: the RX ring returns descriptors of frames of our UMEM that we gave to the fill
        // ring; from now on we own them (a multi-buffer packet as its head, [`crate::frames`]).
        let (n, too_long) = unsafe { self.ports[p].xsk.receive(&mut self.scratch, &mut self.free) };
        self.stats.ports[p].rx_invalid.add(too_long);
        if n == 0 {
            return 0;
        }
        for d in &self.scratch[..n.min(PREFETCH_AHEAD)] {
            prefetch_frame(&self.umem, d);
        }
        let mirror = self.mirrored(p);
        let mut rx_bytes = 0u64;
        for i in 0..n {
            if i + PREFETCH_AHEAD < n {
                prefetch_frame(&self.umem, &self.scratch[i + PREFETCH_AHEAD]);
            }
            rx_bytes += self.take_frame(p, self.scratch[i], now, None, mirror) as u64;
        }
        let rx_stats = &self.stats.ports[p];
        rx_stats.rx_packets.add(n as u64);
        rx_stats.rx_bytes.add(rx_bytes);
        n
    }

    /// Moves received frames onto port `p`'s receive line, due one delay after the XDP program
    /// saw them. Takes no more than the line has room for (the rest waits in the RX ring).
    fn receive_onto_line(&mut self, p: usize, now: u64) -> usize {
        let room = self.ports[p].rx_line.room().min(BATCH);
        if room == 0 {
            return 0;
        }
        // SAFETY: as in `receive`: the descriptors are ours from now on (packets as their heads).
        let (n, too_long) = unsafe { self.ports[p].xsk.receive(&mut self.scratch[..room], &mut self.free) };
        self.stats.ports[p].rx_invalid.add(too_long);
        for i in 0..n {
            let d = self.scratch[i];
            let seen = self.arrival(&d, now);
            let wire = rocefab_wire::ethernet::wire_bytes(self.free.packet_len(&d) as u32) as u32;
            let port = &mut self.ports[p];
            let rate = port.shaper.rate_bps();
            // Room was checked: the push cannot fail; never leak the frame if it does.
            if let Err(d) = port.rx_line.push_serialised(d, seen, wire, rate) {
                self.free.push(d);
            }
        }
        n
    }

    /// Takes the frames on port `p`'s receive line that are due; returns how many.
    fn arrive(&mut self, p: usize, now: u64) -> usize {
        if self.ports[p].rx_line.is_empty() {
            return 0;
        }
        let mirror = self.mirrored(p);
        let (mut n, mut rx_bytes) = (0u64, 0u64);
        while let Some((d, due)) = self.ports[p].rx_line.pop_due(now) {
            rx_bytes += self.take_frame(p, d, now, Some(due), mirror) as u64;
            n += 1;
        }
        let rx_stats = &self.stats.ports[p];
        rx_stats.rx_packets.add(n);
        rx_stats.rx_bytes.add(rx_bytes);
        n as usize
    }

    /// When the XDP program saw frame `d` (data-plane clock), or `now` without its metadata.
    #[inline]
    fn arrival(&self, d: &FrameDesc, now: u64) -> u64 {
        // SAFETY: `d` is a received frame of our UMEM that we own.
        let meta = unsafe { afxdp::metadata::<{ XdpMeta::LEN }>(&self.umem, self.chunk_bytes, d) };
        meta.and_then(|m| XdpMeta::from_bytes(&m)).map_or(now, |m| self.clock.from_ktime(m.rx_ns).min(now))
    }

    /// Is port `p` mirrored into a running capture?
    #[inline]
    fn mirrored(&self, p: usize) -> bool {
        p < 64 && self.tap.as_ref().is_some_and(|t| t.mask() & (1u64 << p) != 0)
    }

    /// Acts on one frame that arrived on port `p` (at `arrived`, for a delayed port: the end of
    /// its receive line; else when the XDP program saw it): forwards, hands up or drops it;
    /// returns its length.
    #[inline]
    fn take_frame(&mut self, p: usize, mut d: FrameDesc, now: u64, arrived: Option<u64>, mirror: bool) -> u32 {
        let nports = self.ports.len();
        let rx_stats = &self.stats.ports[p];
        // SAFETY: `d` is ours (received) and is a frame of our UMEM.
        let meta = unsafe { afxdp::metadata::<{ XdpMeta::LEN }>(&self.umem, self.chunk_bytes, &d) };
        let decision = meta.map(|m| [m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15]]);
        // The whole packet's bytes; its headers are in `buf` (the first descriptor).
        let (len, head) = (self.free.packet_len(&d), d);
        let (len, verdict) = {
            // SAFETY: `d` is ours and no other reference to its frame exists.
            let mut data = unsafe { self.umem.data_mut(&mut d) };
            let buf = data.contents_mut();
            if mirror {
                if let Some(t) = self.tap.as_mut() {
                    // When the frame reached the port, not when this batch was taken.
                    let seen = arrived.unwrap_or_else(|| {
                        meta.and_then(|m| XdpMeta::from_bytes(&m)).map_or(now, |m| self.clock.from_ktime(m.rx_ns))
                    });
                    let port = &mut self.ports[p];
                    let ts = port.rx_stamp.stamp(seen, serialisation_ns(len as u32, port.shaper.rate_bps()));
                    // SAFETY: the packet is ours (received), `buf` is its first part.
                    let whole = unsafe { self.free.whole_frame(&self.umem, &head, buf, &mut self.frame_buf) };
                    t.mirror(p as u16, DIR_IN, ts, whole);
                }
            }
            let verdict = match classify(decision, len, nports, &self.nexthop_ports) {
                Rx::Forward { egress_port, tc, nexthop } => {
                    match rewrite_l3(buf, self.ports[egress_port].mac, self.nexthop_macs[nexthop]) {
                        Ok(ecn) => Verdict::Forward(egress_port, tc, len as u32, ecn),
                        Err(_) => {
                            rx_stats.rewrite_errors.inc();
                            Verdict::Drop
                        }
                    }
                }
                Rx::Lldp => {
                    rx_stats.rx_lldp.inc();
                    // The LLDP/DCBX agent on the control side takes it (a bounded copy).
                    if !self.ctrl.hand_up(p as u16, buf) {
                        rx_stats.rx_lldp_dropped.inc();
                    }
                    Verdict::Drop
                }
                Rx::MacControl => {
                    rx_stats.rx_mac_control.inc();
                    // MAC control frames are minimum-size frames (802.3 clause 31): a longer
                    // one is not a valid PAUSE/PFC and is not acted on.
                    let parsed = if len > MAC_CONTROL_MAX_FRAME { None } else { MacControlRepr::parse_frame(buf).ok() };
                    match parsed {
                        Some((_, MacControlRepr::Pfc(pfc))) => Verdict::Pfc(pfc.enabled.0, pfc.quanta),
                        Some((_, MacControlRepr::Pause { quanta })) => Verdict::Pause(quanta),
                        Some((_, MacControlRepr::Unknown { .. })) | None => {
                            rx_stats.rx_mac_control_malformed.inc();
                            Verdict::Drop
                        }
                    }
                }
                Rx::Invalid(_) => {
                    rx_stats.rx_invalid.inc();
                    Verdict::Drop
                }
            };
            (len as u32, verdict)
        };
        match verdict {
            Verdict::Forward(egress, tc, len, ecn) => {
                self.count_wred_band(egress, tc, ecn);
                // A delayed egress times the frame from its arrival, not from this pass.
                let at = if self.ports[egress].tx_line.delay_ns() == 0 {
                    0
                } else {
                    arrived.unwrap_or_else(|| self.arrival(&d, now))
                };
                self.admit(p, egress, tc, d, len, now, at)
            }
            Verdict::Pfc(enabled, quanta) => {
                // Priorities without PFC (not lossless) come back: counted, not acted on. A
                // delayed frame acts from when it arrived (the end of its line).
                let ignored = self.pfc_rx.on_pfc(p, enabled, quanta, arrived.unwrap_or(now));
                for prio in 0..NUM_TC {
                    if enabled & (1 << prio) != 0 {
                        self.stats.ports[p].prio[prio].pfc_rx_frames.inc();
                    }
                    if ignored & (1 << prio) != 0 {
                        self.stats.ports[p].prio[prio].pfc_rx_ignored_frames.inc();
                    }
                }
                self.free.push(d);
            }
            Verdict::Pause(quanta) => {
                self.pfc_rx.on_pause(p, quanta, arrived.unwrap_or(now));
                for prio in 0..NUM_TC {
                    self.stats.ports[p].prio[prio].pfc_rx_frames.inc();
                }
                self.free.push(d);
            }
            Verdict::Drop => self.free.push(d),
        }
        len
    }

    /// On a WRED queue, counts an ECT/CE frame in the depth band its queue has as it arrives,
    /// and whether it is CE ([`rocefab_plumbing::depths`]): the marked fraction per band against the curve.
    #[inline]
    fn count_wred_band(&self, egress: usize, tc: u8, ecn: u8) {
        let w = &self.wred;
        if w.queues & (1 << (tc & 7)) == 0 || ecn == dataplane_common::ecn::NOT_ECT {
            return;
        }
        let band = switch_model::depths::band_of(self.buffer.queue_bytes(egress, tc), w.min_bytes, w.max_bytes);
        let q = &self.stats.ports[egress].queues[tc as usize & 7];
        q.wred_band_ect[band].inc();
        if ecn == dataplane_common::ecn::CE {
            q.wred_band_ce[band].inc();
        }
    }

    /// Admission of a forwarded frame into the shared buffer and its egress queue.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn admit(&mut self, ingress: usize, egress: usize, tc: u8, d: FrameDesc, len: u32, now: u64, at: u64) {
        if self.stats.ports[egress].no_carrier.load(std::sync::atomic::Ordering::Relaxed) {
            // Routed to a port without carrier (its ECMP groups move after the debounce).
            self.stats.ports[egress].carrier_dropped.inc();
            self.free.push(d);
            return;
        }
        if let Some((wd, _)) = &self.watchdog {
            if wd.drops(egress, tc) || wd.drops(ingress, tc) {
                self.stats.ports[egress].queues[tc as usize].pfcwd_dropped_packets.inc();
                self.free.push(d);
                return;
            }
        }
        match self.buffer.admit(ingress, tc, egress, tc, len) {
            Ok((_, ev)) => self.enqueue_admitted(ingress, egress, tc, d, len, now, at, ev),
            Err(r) => {
                count_reject(&self.stats, ingress, egress, tc, len, r);
                if trims(&self.trim, tc, r) {
                    self.trim_rejected(ingress, egress, tc, d, len, now, at);
                } else {
                    self.free.push(d);
                }
            }
        }
    }

    /// A frame queue (`egress`, `tc`) rejected, on a queue that trims: cut to the trim size,
    /// remarked ([`switch_model::trim::trim_frame`]) and, if the buffer admits it there, queued
    /// on the trim queue of the same port; else (not IP/UDP, not longer than the size, the
    /// trim queue full) given back. Nothing allocates.
    #[inline(never)]
    #[expect(clippy::too_many_arguments, reason = "the data path's frame and its times, as admit takes them")]
    fn trim_rejected(&mut self, ingress: usize, egress: usize, tc: u8, mut d: FrameDesc, len: u32, now: u64, at: u64) {
        let (size, tq) = (self.trim.size, self.trim.queue & 7);
        let cut = {
            // SAFETY: `d` is ours (received, in no queue or ring) and no other reference to its
            // frame exists; its first part holds at least `size` bytes (at most 1024).
            let mut data = unsafe { self.umem.data_mut(&mut d) };
            let cut = switch_model::trim::trim_frame(data.contents_mut(), len as usize, size as usize, self.trim.dscp);
            if cut.is_ok() {
                data.cursor().set_pos(size as usize);
            }
            cut
        };
        let Ok(cut) = cut else {
            self.free.push(d);
            return;
        };
        // The rest of a multi-buffer frame goes back now.
        self.free.keep_head(&mut d);
        match self.buffer.admit(ingress, tq, egress, tq, size) {
            Ok((_, ev)) => {
                count_trim(&self.stats, egress, tc, cut.removed, true);
                self.enqueue_admitted(ingress, egress, tq, d, size, now, at, ev);
            }
            Err(_) => {
                count_trim(&self.stats, egress, tc, cut.removed, false);
                self.free.push(d);
            }
        }
    }

    /// Queues a frame the buffer admitted to (`egress`, `tc`) and publishes what changed; `ev`
    /// is the ingress group's xOFF crossing its admission caused.
    #[inline]
    #[expect(clippy::too_many_arguments, reason = "the data path's frame and its times, as admit takes them")]
    fn enqueue_admitted(
        &mut self,
        ingress: usize,
        egress: usize,
        tc: u8,
        d: FrameDesc,
        len: u32,
        now: u64,
        at: u64,
        ev: Option<PgEvent>,
    ) {
        // The depth the thresholds act on (cells), beside the frame bytes the queue sets.
        let cells = self.buffer.queue_bytes(egress, tc);
        publish_depth(&self.stats, egress, tc, cells, now);
        let qs = &self.stats.ports[egress].queues[tc as usize & 7];
        qs.peak_depth_cell_bytes.raise(cells);
        qs.window_peak_cell_bytes.raise(cells);
        if self.ports[egress].queues.nonempty() == 0 {
            // However long since the port last sent, it was not stalled: it had nothing.
            self.ports[egress].stall.idle();
        }
        let h = Held { d, ingress: ingress as u8, at: if at != 0 { at } else { now } };
        if let Err(h) = self.ports[egress].queues.enqueue(tc, h, len) {
            // Cannot happen (queues hold what the buffer admits); never leak the frame.
            release_held(&mut self.buffer, &self.stats, &h, egress, tc, len, now);
            self.free.push(h.d);
        }
        publish_admitted_pg(&self.stats, &self.buffer, ingress, tc);
        if let Some(ev) = ev {
            // The group crossed xOFF when this frame arrived (known exactly on delayed
            // ports): a late pass does not delay the pause.
            self.on_pg_event(ev, if at != 0 { at.min(now) } else { now });
        }
    }

    /// Port `p` has no carrier: drops what the switch holds for it, counted (its egress queues,
    /// giving back their buffer charges, whose xON events release the senders the queues
    /// paused; its control queue; the frames on its cable). A lossless queue toward a cut cable
    /// would otherwise never drain, and its pauses would spread through the fabric. What the TX
    /// ring holds stays there (the kernel sends nothing on the down port). Returns how many.
    #[cold]
    fn drop_without_carrier(&mut self, p: usize, now: u64) -> Result<usize, DataPlaneError> {
        let mut dropped = 0usize;
        let port = &mut self.ports[p];
        // What the TX ring still holds: the kernel takes nothing from it while the interface is
        // administratively down, and would send it once the interface is up. Up without carrier
        // (a restore brings this end up alone first), it takes the frames and drops them, as a
        // dead cable: kick until the ring is empty. A kick on a down interface is a syscall that
        // returns ENETDOWN at once.
        // The kernel gives up a kick at the first frame it drops (EBUSY): kick while each takes one.
        let mut unsent = self.tx_ring - port.xsk.tx.nb_free_exact();
        if unsent > 0 {
            let before = unsent;
            let tx = &mut port.xsk.tx;
            for _ in 0..before {
                tx.wakeup().map_err(|source| DataPlaneError::Kick { port: p, name: port.xsk.name.clone(), source })?;
                let left = self.tx_ring - tx.nb_free_exact();
                if left >= unsent {
                    break;
                }
                unsent = left;
            }
            if unsent < before {
                self.reap(p, now);
            }
        }
        // Every pass, also when the ring was found empty: in copy mode the kernel also takes
        // from it inside the data plane's `ppoll` (xsk_poll drives TX), so a ring emptied that
        // way would otherwise keep reading what it held before (a frame "held" after a cut).
        self.stats.ports[p].tx_ring_unsent.set(u64::from(unsent));
        if !self.ports[p].without_carrier {
            // The first pass since the carrier went: the ring's count above is from after
            // the last frame this port will get, and nothing is handed to it from here on.
            // A fresh reading: `now` may predate the carrier loss this pass is acting on.
            self.ports[p].without_carrier = true;
            self.stats.ports[p].carrier_lost_at.set(self.clock.now().max(1));
        }
        let port = &mut self.ports[p];
        while let Some((o, _)) = port.own.pop() {
            if self.own_free.len() < self.own_reserve {
                self.own_free.push(o.d);
            } else {
                self.free.push(o.d);
            }
            dropped += 1;
        }
        while let Some(d) = port.tx_line.pop_any() {
            self.free.push(d);
            dropped += 1;
        }
        for tc in 0..NUM_TC {
            if !self.ports[p].queues.queue(tc).is_empty() {
                dropped += self.drop_queue(p, tc, now);
            }
        }
        if dropped > 0 {
            self.ports[p].stall.idle();
            self.stats.ports[p].carrier_dropped.add(dropped as u64);
        }
        Ok(dropped)
    }

    /// Drops every frame egress queue `tc` of port `p` holds (a PFC watchdog's drop, a port
    /// without carrier), giving back their buffer charges; the xON events that follow go out.
    /// Rare: the events may allocate (one per ingress group the queue's frames came from).
    /// Returns how many frames.
    #[cold]
    fn drop_queue(&mut self, p: usize, tc: usize, now: u64) -> usize {
        let mut dropped = 0;
        let mut events = Vec::new();
        let port = &mut self.ports[p];
        port.sched.emptied(tc);
        let (buffer, free, stats) = (&mut self.buffer, &mut self.free, &self.stats);
        port.queues.drain_queue(tc, |h, len| {
            events.extend(release_held(buffer, stats, &h, p, tc as u8, len, now));
            free.push(h.d);
            dropped += 1;
        });
        for ev in events {
            self.on_pg_event(ev, now);
        }
        dropped
    }

    /// Sends what the control queue, the pause state, the scheduler and the shaper allow on
    /// port `p`, kicks the socket. With `send_xons`, the XONs its dequeues queue at other ports
    /// are sent from there at once (by a call without it, so not nested further).
    fn transmit(&mut self, p: usize, now: u64, send_xons: bool) -> Result<TxState, DataPlaneError> {
        let paused = {
            let raw = self.pfc_rx.paused_mask(p, now);
            match &self.watchdog {
                Some((wd, _)) => wd.effective_paused(p, raw),
                None => raw,
            }
        };
        let mut released = [None; BATCH];
        let mut nrel = 0;
        let mirror = p < 64 && self.tap.as_ref().is_some_and(|t| t.mask() & (1u64 << p) != 0);
        // Departure times in the shaper's schedule, for a capture: frames that waited for the
        // shaper leave when it said they could, others when this pass sends them.
        let mut departs = [0u64; BATCH];
        let mut lens = [0u32; BATCH];
        let port = &mut self.ports[p];
        let not_before = port.shaped_at.take().map_or(now, |t| t.min(now));
        // A delayed port's frames go onto its transmit line, and from there to the TX ring
        // when they are due; an undelayed port's straight to the ring.
        let delayed = port.tx_line.delay_ns() > 0;
        let tx = &mut port.xsk.tx;
        let tx_ring = self.tx_ring;
        let ring_room = |tx: &mut TxQueue, inflight: u32| {
            (tx.nb_free_exact() as usize).min((tx_ring - inflight.min(tx_ring)) as usize).min(BATCH)
        };
        // Packets (a multi-buffer one takes up to `segs` ring slots); the batch's most.
        let segs = self.free.max_segments();
        let batch = if delayed { BATCH } else { BATCH / segs };
        let room = if delayed { port.tx_line.room().min(BATCH) } else { ring_room(tx, port.tx_inflight) / segs };
        let mut n = 0;
        let mut tx_bytes = 0u64;
        let mut shaped_until = None;
        // Frames the switch originates go first, ahead of the scheduler and the shaper (they
        // are counted by the shaper so the link rate still holds).
        let mut xoff_stamps = [0u64; 8];
        let mut nstamps = 0;
        while n < room {
            let Some((o, len)) = port.own.pop() else { break };
            if delayed {
                // An XOFF leaves from the crossing it answers; other frames from this pass.
                departs[n] = port.shaper.departure(if o.xoff_ns != 0 { o.xoff_ns.min(now) } else { now });
                port.shaper.sent_at(departs[n], len);
            } else {
                departs[n] = port.shaper.departure(not_before);
                port.shaper.sent(now, len);
            }
            if o.xoff_ns != 0 && nstamps < xoff_stamps.len() {
                xoff_stamps[nstamps] = o.xoff_ns;
                nstamps += 1;
            }
            self.scratch[n] = o.d;
            lens[n] = len;
            n += 1;
            tx_bytes += len as u64;
        }
        port.stall.step(now, port.queues.nonempty() & !paused != 0);
        // A frame whose dequeue takes its ingress group below xON ends the batch: the XON leaves
        // before the frames behind it (below), as it does in the port's schedule, even when a
        // late pass has many frames due at once.
        let mut crossed = false;
        while n < room && !crossed {
            let Some(tc) = port.sched.pick_unpaused(&port.queues, paused) else { break };
            if let Err(t) = port.shaper.poll(now) {
                shaped_until = Some(t);
                port.shaped_at = Some(t);
                break;
            }
            let Some((mut h, len)) = port.queues.dequeue(tc) else { break };
            port.sched.sent(&port.queues, tc, len);
            if let Some(stall) = port.stall.dequeued(now, len, port.shaper.rate_bps()) {
                note_stall(&self.stats, p, stall);
            }
            if let Some(ev) = release_held(&mut self.buffer, &self.stats, &h, p, tc as u8, len, now) {
                released[nrel] = Some(ev);
                nrel += 1;
                crossed = true;
            }
            if let Some((params, rng)) = self.wred_dequeue.as_mut() {
                let depth = self.buffer.queue_bytes(p, tc as u8);
                if !mark_dequeued(&self.umem, &self.stats, p, tc, &mut h.d, depth, params, rng) {
                    // A Not-ECT frame WRED drops: it never takes the shaper's time.
                    self.free.push(h.d);
                    continue;
                }
            }
            // Exactly timed: from the frame's arrival, the end of its priority's pause or the
            // previous frame's end, whichever is latest. A pass that comes late (the thread
            // serves other ports or switches in between) sends what the line would have sent
            // meanwhile, up to a batch, instead of losing that time.
            let eligible = h.at.max(self.pfc_rx.resumed_at(p, tc as u8)).min(now);
            departs[n] = port.shaper.departure(eligible);
            port.shaper.sent_at(departs[n], len);
            // How long it waited: from joining the queue to starting on the wire (a late pass
            // that finds the link long free sends in the schedule's past: 0, never negative).
            self.stats.ports[p].queues[tc].sojourn_max_ns.raise(departs[n].saturating_sub(h.at));
            self.scratch[n] = h.d;
            lens[n] = len;
            n += 1;
            tx_bytes += len as u64;
        }
        if n > 0 {
            let taken = if delayed {
                // Each frame is due at the peer when its last bit is there: one delay and its
                // serialisation after its departure in the shaper's schedule; `room` ≤ free
                // line slots.
                let rate = port.shaper.rate_bps();
                for (i, (&d, &dep)) in self.scratch[..n].iter().zip(&departs[..n]).enumerate() {
                    let wire = rocefab_wire::ethernet::wire_bytes(lens[i]) as u32;
                    if let Err(d) = port.tx_line.push_serialised(d, dep, wire, rate) {
                        self.free.push(d);
                    }
                }
                true
            } else {
                let k = self.free.expand_all(&self.scratch[..n], &mut self.tx_segs);
                // SAFETY: the descriptors were dequeued (owned by us, frames of our UMEM) and
                // their lengths were set when they were enqueued; `room` × `segs` ≤ free ring
                // slots so the all-or-nothing reserve succeeds.
                let done = unsafe { tx.produce(&self.tx_segs[..k]) };
                if done != k {
                    // Cannot happen given `room`; never leak the frames if it does.
                    for &d in &self.scratch[..n] {
                        self.free.push(d);
                    }
                } else {
                    port.tx_inflight += k as u32;
                }
                done == k
            };
            if taken {
                self.stats.ports[p].last_tx_at.set(now.max(1));
                self.stats.ports[p].tx_packets.add(n as u64);
                self.stats.ports[p].tx_bytes.add(tx_bytes);
                if let Some(t) = self.tap.as_mut().filter(|_| mirror) {
                    let rate = port.shaper.rate_bps();
                    for (d, &dep) in self.scratch[..n].iter().zip(&departs[..n]) {
                        // SAFETY: the frame was just produced on TX; the kernel only reads it
                        // (copy mode copies it out), and we only read it too.
                        let data = unsafe { self.umem.data(d) };
                        // SAFETY: as above, for every descriptor of the packet.
                        let frame =
                            unsafe { self.free.whole_frame(&self.umem, d, data.contents(), &mut self.frame_buf) };
                        let ts = port.tx_stamp.stamp(dep, serialisation_ns(frame.len() as u32, rate));
                        t.mirror(p as u16, DIR_OUT, ts, frame);
                    }
                }
            }
        }
        if delayed {
            // The frames at the end of the line go onto the TX ring: the peer sees them now.
            let room = ring_room(tx, port.tx_inflight) / segs;
            let mut k = 0;
            while k < room {
                let Some((d, _)) = port.tx_line.pop_due(now) else { break };
                self.scratch[k] = d;
                k += 1;
            }
            if k > 0 {
                let m = self.free.expand_all(&self.scratch[..k], &mut self.tx_segs);
                // SAFETY: frames of our UMEM that left the scheduler (lengths set at enqueue);
                // `room` × `segs` ≤ free ring slots.
                let done = unsafe { tx.produce(&self.tx_segs[..m]) };
                if done != m {
                    for &d in &self.scratch[..k] {
                        self.free.push(d);
                    }
                } else {
                    port.tx_inflight += m as u32;
                }
            }
        }
        let unsent_before = tx_ring - tx.nb_free_exact();
        // Copy mode only transmits inside sendto() and keeps the need_wakeup flag set for good;
        // a zero-copy driver clears it while its NAPI is draining the ring.
        if unsent_before > 0 && tx.needs_wakeup() {
            tx.wakeup().map_err(|source| DataPlaneError::Kick { port: p, name: port.xsk.name.clone(), source })?;
        }
        let unsent_after = tx_ring - tx.nb_free_exact();
        self.stats.ports[p].tx_ring_unsent.set(u64::from(unsent_after));
        if nstamps > 0 {
            // PFC reaction time: xOFF crossing (the pass's clock reading, at or before the
            // crossing) → the frame produced on the TX ring and kicked; in emulated time.
            let handed = self.clock.now();
            for &t in &xoff_stamps[..nstamps] {
                self.stats.pfc_reaction.observe(self.dilation.to_emulated_ns(handed.saturating_sub(t)));
            }
        }
        // Groups that fell below xON: their XON goes out now, from the ingress port's control
        // queue, before this port sends the frames behind the crossing (the next pass); one
        // queued while those are sent goes out with the next pass.
        for ev in released.into_iter().take(nrel).flatten() {
            self.on_pg_event(ev, now);
        }
        if send_xons {
            for ev in released.into_iter().take(nrel).flatten() {
                let (PgEvent::Xon { port: q, .. } | PgEvent::Xoff { port: q, .. }) = ev;
                if q != p && !self.ports[q].own.is_empty() {
                    self.transmit(q, now, false)?;
                }
            }
        }
        // On veth the peer usually frees the skbs inside the kick (its NAPI runs in the softirq
        // raised by our sendto), so completions are ready now: take them before deciding
        // whether a completion timer is needed at all.
        if self.ports[p].tx_inflight > 0 {
            self.reap(p, now);
        }
        let port = &mut self.ports[p];
        let queued = port.queues.nonempty() != 0 || !port.own.is_empty();
        let sendable = port.queues.nonempty() & !paused != 0 || !port.own.is_empty();
        // Decide what this port needs next.
        if unsent_after > 0 && unsent_after < unsent_before {
            return Ok(TxState::Busy); // the kick made progress: keep kicking
        }
        if sendable && n == room && room == batch {
            return Ok(TxState::Busy);
        }
        if !port.own.is_empty() && nrel > 0 {
            return Ok(TxState::Busy); // an XON was just queued
        }
        if crossed && sendable {
            return Ok(TxState::Busy); // the frames behind the crossing go next
        }
        let mut wake = port.tx_line.next_due().unwrap_or(u64::MAX);
        if let Some(t) = shaped_until {
            wake = wake.min(t);
        }
        if queued && !sendable {
            // Everything queued is paused: wake when the pause expires.
            if let Some(t) = self.pfc_rx.next_expiry(p) {
                wake = wake.min(t);
            }
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
            if sendable {
                // Queued but blocked on ring room without anything in flight: retry soon.
                return Ok(TxState::WaitUntil(now + COMPLETION_POLL_NS));
            }
            return Ok(TxState::Idle);
        }
        Ok(TxState::WaitUntil(wake))
    }

    /// After a `ppoll` of the worker: the control side's doorbell rang (`revents` of its
    /// pollfd): reset it, its frames are taken on the next pass.
    pub(crate) fn rang(&mut self) {
        self.ctrl.to_dp.drain();
    }

    /// Whether its stop was asked for.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.set.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Returns every queued frame to the pool (the sockets and UMEM are closed on drop).
    pub(crate) fn shutdown(&mut self) {
        let mut dropped = 0usize;
        for port in &mut self.ports {
            let free = &mut self.free;
            port.queues.drain(|h| {
                free.push(h.d);
                dropped += 1;
            });
            while let Some((OwnFrame { d, .. }, _)) = port.own.pop() {
                free.push(d);
            }
            while let Some(d) = port.tx_line.pop_any().or_else(|| port.rx_line.pop_any()) {
                free.push(d);
            }
        }
        self.stats.free_frames.set(self.free.len() as u64);
        tracing::info!(discarded_queued_frames = dropped, "data plane stopped");
    }
}

/// What `receive` decided for one frame.
enum Verdict {
    /// Egress port, traffic class, frame length, ECN codepoint.
    Forward(usize, u8, u32, u8),
    Pfc(u8, [u16; 8]),
    Pause(u16),
    Drop,
}

/// The XDP program's `DEPTHS` map as the switch model's depth board: where the data path
/// publishes its queue depths for the program's WRED decision.
pub fn depth_board(
    xdp: &rocefab_plumbing::loader::XdpSwitch,
) -> Result<switch_model::depths::DepthBoard, rocefab_plumbing::loader::LoaderError> {
    let map = xdp.depths_map()?;
    let slots = map.slots();
    // SAFETY: `slots` are the map's DEPTHS_LEN u64s, mapped read/write and aligned until `map`
    // is dropped; the board owns `map`, and nothing else in this process touches them.
    Ok(unsafe { switch_model::depths::DepthBoard::mapped(slots, Box::new(map)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(d: f64) -> SwitchConfig {
        let c: SwitchConfig = serde_json::from_value(serde_json::json!({
            "name": "rail1", "role": "rail", "netns": null, "hash_seed": 1, "metrics_listen": "127.0.0.1:0",
            "ports": [
                { "name": "eth1", "mac": "02:00:00:00:00:01", "line_rate_bps": 400_000_000_000u64 },
                { "name": "eth2", "mac": "02:00:00:00:00:02", "line_rate_bps": 800_000_000_000u64 }
            ],
            "nexthops": [], "groups": [], "routes": [], "time_dilation": d
        }))
        .unwrap();
        c.validate().unwrap();
        c
    }

    #[test]
    fn from_switch_applies_the_time_dilation_at_the_wall_clock_edge() {
        let real = DataPlaneConfig::from_switch(&switch(1.0), 1500);
        assert_eq!(real.line_rates_bps, [400_000_000_000, 800_000_000_000]);
        assert_eq!(real.qos, QosConfig::default());
        let d = 8000.0;
        let slow = DataPlaneConfig::from_switch(&switch(d), 1500);
        let emulated = QosConfig::default();
        // Shapers: rates / D.
        assert_eq!(slow.line_rates_bps, [50_000_000, 100_000_000]);
        // Watchdog: times × D.
        let (w, e) = (&slow.qos.watchdog, &emulated.watchdog);
        assert_eq!(w.detect_us as f64, e.detect_us as f64 * d);
        assert_eq!(w.restore_us as f64, e.restore_us as f64 * d);
        assert_eq!(w.poll_us as f64, e.poll_us as f64 * d);
        // Bytes never scale.
        assert_eq!(
            (slow.qos.xoff_bytes, slow.qos.xon_bytes, slow.qos.buffer_bytes),
            (emulated.xoff_bytes, emulated.xon_bytes, emulated.buffer_bytes)
        );
        assert_eq!(slow.queue_limit_bytes, real.queue_limit_bytes);
        // A PFC pause timed at the wall rate lasts the emulated pause × D.
        let q = emulated.pause_quanta;
        let wall = switch_model::pfc::quanta_to_ns(q, slow.line_rates_bps[0]);
        let at_400g = switch_model::pfc::quanta_to_ns(q, 400_000_000_000);
        assert!((wall as f64 - at_400g as f64 * d).abs() <= d, "{wall} vs {at_400g} × {d}");
        assert!(slow.dilation.to_emulated_ns(wall).abs_diff(at_400g) <= 1);
    }
}
