//! RC requester for RDMA WRITE (IBTA Vol. 1 §9.7 "Reliable service", requester side):
//! PSN assignment, an outstanding-packet window, cumulative ACK processing with MSN,
//! go-back-N retransmission on a PSN-sequence-error NAK (restart at the NAK's expected PSN)
//! and on the local ACK timeout (restart at the oldest unacknowledged PSN) with a retry
//! counter, plus a per-QP rate limiter whose rate the DCQCN reaction point drives.
//!
//! Everything is pure: the caller passes `now` (nanoseconds on any monotonic clock) and
//! moves the abstract [`TxPacket`]s / [`AckPacket`]s to and from the wire.
//!
//! Retry accounting: as in IBTA §9.9.2.x (retry count), the counter is decremented on each
//! local ACK timeout and restored when an ACK makes forward progress; PSN-sequence-error
//! NAKs prove the responder is alive and do not consume retries. When the counter is
//! exhausted the QP enters the error state and every call reports it.

use std::collections::VecDeque;

use crate::dcqcn::{DcqcnConfig, DcqcnError, ReactionPoint};
use crate::desc::{AckPacket, AckSyndrome, WritePacket};
use crate::psn::{Psn, PSN_HALF};
use crate::segment::{PathMtu, SegmentError, SegmentMode, Segmenter, WriteMessage};

/// Per-packet wire overhead with no RETH: Ethernet 14 + FCS 4 + IPv4 20 + UDP 8 + BTH 12
/// + ICRC 4 bytes.
pub const DEFAULT_PACKET_OVERHEAD_BYTES: u32 = 14 + 4 + 20 + 8 + 12 + 4;
/// RETH size, added to the overhead of First / Only packets.
pub const RETH_BYTES: u32 = 16;

/// Requester errors.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum SenderError {
    /// A configuration value is out of range.
    #[error("invalid sender configuration: {0}")]
    InvalidConfig(&'static str),
    /// DCQCN configuration rejected.
    #[error(transparent)]
    Dcqcn(#[from] DcqcnError),
    /// The work request cannot be segmented.
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// Posting would put more than 2^23 PSNs between the oldest unacked and the newest.
    #[error("send queue full: {queued} packets queued, {adding} more would exceed the 2^23 PSN window")]
    QueueFull {
        /// Packets already assigned PSNs and not yet acknowledged.
        queued: u32,
        /// Packets of the rejected request.
        adding: u32,
    },
    /// Retry count exhausted by local ACK timeouts; the QP is in the error state.
    #[error("retry count exceeded: no ACK progress for PSN {psn} after {retries} retries")]
    RetryExceeded {
        /// Oldest unacknowledged PSN.
        psn: Psn,
        /// Retries that were allowed.
        retries: u32,
    },
    /// The responder NAKed with a fatal code; the QP is in the error state.
    #[error("responder NAK {syndrome:?} at PSN {psn}")]
    RemoteNak {
        /// NAK class.
        syndrome: AckSyndrome,
        /// PSN of the NAK.
        psn: Psn,
    },
    /// The QP is in the error state (an earlier error is stored in `state()`).
    #[error("QP is in the error state")]
    QpError,
}

/// Requester configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SenderConfig {
    /// Path MTU.
    pub mtu: PathMtu,
    /// Standard First/Middle/Last or Write-Only-per-packet.
    pub mode: SegmentMode,
    /// First PSN (agreed at connection setup).
    pub initial_psn: Psn,
    /// Maximum unacknowledged packets in flight (≥ 1).
    pub max_outstanding_packets: u32,
    /// Local ACK timeout in ns.
    pub retransmit_timeout_ns: u64,
    /// Timeouts tolerated without progress before the QP errors (IB allows 0..=7).
    pub retry_count: u32,
    /// Also set AckReq every this many packets (0: only on message ends and when the
    /// window fills).
    pub ack_req_every: u32,
    /// Port line rate in bits/s; the limiter never exceeds it.
    pub line_rate_bps: u64,
    /// Token-bucket depth in bytes.
    pub burst_bytes: u32,
    /// Wire bytes added to each packet's payload when charging the limiter
    /// ([`RETH_BYTES`] more on First/Only).
    pub per_packet_overhead_bytes: u32,
    /// DCQCN reaction point; `None` sends at line rate.
    pub dcqcn: Option<DcqcnConfig>,
}

impl SenderConfig {
    /// Reasonable defaults at `line_rate_bps`: MTU 4096, window 256 packets, 1 ms timeout,
    /// 7 retries, DCQCN on with the cited defaults.
    pub fn new(line_rate_bps: u64) -> SenderConfig {
        SenderConfig {
            mtu: PathMtu::Mtu4096,
            mode: SegmentMode::FirstMiddleLast,
            initial_psn: Psn::ZERO,
            max_outstanding_packets: 256,
            retransmit_timeout_ns: 1_000_000,
            retry_count: 7,
            ack_req_every: 0,
            line_rate_bps,
            burst_bytes: 2 * (4096 + DEFAULT_PACKET_OVERHEAD_BYTES + RETH_BYTES),
            per_packet_overhead_bytes: DEFAULT_PACKET_OVERHEAD_BYTES,
            dcqcn: Some(DcqcnConfig::with_line_rate(line_rate_bps)),
        }
    }

    fn validate(&self) -> Result<(), SenderError> {
        if self.max_outstanding_packets == 0 || self.max_outstanding_packets >= PSN_HALF {
            return Err(SenderError::InvalidConfig("max_outstanding_packets must be in 1..2^23"));
        }
        if self.retransmit_timeout_ns == 0 {
            return Err(SenderError::InvalidConfig("retransmit_timeout_ns must be > 0"));
        }
        if self.line_rate_bps == 0 {
            return Err(SenderError::InvalidConfig("line_rate_bps must be > 0"));
        }
        if let Some(d) = &self.dcqcn {
            d.validate()?;
        }
        Ok(())
    }
}

/// A token bucket / pacer in bits per second with an injected clock. Tokens may go
/// negative by one packet (a packet is sent whenever the balance is non-negative), so any
/// packet size works with any depth and the long-run rate is exact.
///
/// A bucket of depth zero is a pacer that gathers no credit while idle: a packet leaves when the
/// previous one's time at the rate is over. Its caller's thread wakes a little after that, and
/// a late wake-up is not idle time: a packet sent at most [`LATE_WAKE_NS`] (and at most the
/// previous packet's time) after the balance reached zero is charged from then, so wake-up
/// latency does not slow a backlogged sender (it did: 4154-byte frames 87 ns apart at 400G and
/// D 8000 instead of 83.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimiter {
    rate_bps: u64,
    max_rate_bps: u64,
    /// Balance in bit·ns/s units: one bit = 1e9 units, refilled `rate_bps` units per ns.
    tokens: i128,
    cap: i128,
    last: u64,
    /// The last packet's time at the rate (ns): how late a wake-up may be forgiven.
    last_packet_ns: u64,
}

const UNITS_PER_BIT: i128 = 1_000_000_000;

/// The most wake-up latency (ns on the caller's clock, wall) a depth-zero [`RateLimiter`]
/// forgives a backlogged sender.
pub const LATE_WAKE_NS: u64 = 100_000;

impl RateLimiter {
    /// A full bucket of `burst_bytes` at `rate_bps` (clamped to `1..=max_rate_bps`).
    pub fn new(rate_bps: u64, max_rate_bps: u64, burst_bytes: u32, now: u64) -> RateLimiter {
        let cap = i128::from(burst_bytes) * 8 * UNITS_PER_BIT;
        RateLimiter {
            rate_bps: rate_bps.clamp(1, max_rate_bps.max(1)),
            max_rate_bps: max_rate_bps.max(1),
            tokens: cap,
            cap,
            last: now,
            last_packet_ns: 0,
        }
    }

    /// Current rate, bits/s.
    pub const fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    fn refill(&mut self, now: u64) {
        if now > self.last {
            let rate = i128::from(self.rate_bps);
            let add = i128::from(now - self.last) * rate;
            if self.cap == 0 && self.tokens + add > 0 {
                // The balance reached zero at `zero`: a wake-up at most LATE_WAKE_NS (and one
                // packet time) after it keeps the clock there; anything later was idle.
                // (Rounded up, `zero` may be `now` itself, never later.)
                let zero = self.last + u64::try_from((-self.tokens + rate - 1) / rate).unwrap_or(u64::MAX);
                if now.saturating_sub(zero) <= LATE_WAKE_NS.min(self.last_packet_ns) {
                    self.tokens = 0;
                    self.last = zero.min(now);
                    return;
                }
            }
            self.tokens = (self.tokens + add).min(self.cap);
            self.last = now;
        }
    }

    /// Changes the rate at `now` (tokens earned so far are kept). Clamped to line rate.
    pub fn set_rate(&mut self, rate_bps: u64, now: u64) {
        self.refill(now);
        self.rate_bps = rate_bps.clamp(1, self.max_rate_bps);
    }

    /// May a packet leave at `now`?
    pub fn ready(&mut self, now: u64) -> bool {
        self.refill(now);
        self.tokens >= 0
    }

    /// Earliest time ≥ `now` at which a packet may leave.
    pub fn ready_at(&mut self, now: u64) -> u64 {
        self.refill(now);
        if self.tokens >= 0 {
            now
        } else {
            let deficit = -self.tokens;
            let rate = i128::from(self.rate_bps);
            let wait = (deficit + rate - 1) / rate;
            now.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
        }
    }

    /// Charges `bytes` sent at `now`.
    pub fn consume(&mut self, bytes: u32, now: u64) {
        self.refill(now);
        let bits = i128::from(bytes) * 8 * UNITS_PER_BIT;
        self.tokens -= bits;
        self.last_packet_ns = u64::try_from(bits / i128::from(self.rate_bps)).unwrap_or(u64::MAX);
    }
}

/// A packet to transmit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPacket {
    /// Transport fields.
    pub pkt: WritePacket,
    /// Work request this packet belongs to.
    pub wr_id: u64,
    /// Local address of the payload (`local_addr` of the post + `payload_offset`).
    pub local_addr: u64,
    /// This PSN was transmitted before (go-back-N resend).
    pub retransmission: bool,
}

/// A completed work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Work request id given to [`Sender::post_write`].
    pub wr_id: u64,
    /// Bytes written.
    pub len: u32,
}

/// QP state.
#[derive(Clone, Debug, PartialEq)]
pub enum QpState {
    /// Ready to send.
    ReadyToSend,
    /// Error: the QP sends nothing more.
    Error(SenderError),
}

/// Requester counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderCounters {
    /// Packets handed to the wire (including retransmissions).
    pub packets_sent: u64,
    /// Payload bytes handed to the wire (including retransmissions).
    pub payload_bytes_sent: u64,
    /// Packets sent again after go-back-N.
    pub retransmitted_packets: u64,
    /// Local ACK timeouts.
    pub timeouts: u64,
    /// PSN-sequence-error NAKs received.
    pub naks_received: u64,
    /// ACKs (positive) received.
    pub acks_received: u64,
    /// ACKs that acknowledged nothing new.
    pub duplicate_acks: u64,
    /// ACK/NAKs with a PSN outside the outstanding window (ignored).
    pub invalid_acks: u64,
    /// Work requests completed.
    pub messages_completed: u64,
    /// CNPs received.
    pub cnps_received: u64,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    wr_id: u64,
    local_addr: u64,
    seg: Segmenter,
}

/// RC requester state machine of one QP.
#[derive(Debug)]
pub struct Sender {
    cfg: SenderConfig,
    queue: VecDeque<Pending>,
    completions: VecDeque<Completion>,
    /// Oldest unacknowledged PSN.
    snd_una: Psn,
    /// Next PSN to transmit.
    snd_nxt: Psn,
    /// One past the highest PSN ever transmitted.
    high_water: Psn,
    /// PSN the next posted message starts at.
    next_post_psn: Psn,
    /// `queue[cur_msg]`, packet `cur_pkt` is `snd_nxt`.
    cur_msg: usize,
    cur_pkt: u32,
    since_ack_req: u32,
    deadline: Option<u64>,
    retries_left: u32,
    last_msn: u32,
    state: QpState,
    limiter: RateLimiter,
    rp: Option<ReactionPoint>,
    counters: SenderCounters,
    /// When an ACK or NAK last acknowledged new PSNs.
    last_progress: Option<u64>,
    /// When any ACK or NAK last arrived.
    last_ack: Option<u64>,
    /// An alternate path is loaded and armed (APM): retry exhaustion migrates instead of
    /// failing the QP.
    alt_armed: bool,
    /// Retries ran out with the alternate path armed: the QP's owner moves it
    /// ([`Sender::take_migration_request`], then [`Sender::path_migrated`]).
    migration_requested: bool,
}

impl Sender {
    /// A requester in RTS at `now`.
    pub fn new(cfg: SenderConfig, now: u64) -> Result<Sender, SenderError> {
        cfg.validate()?;
        let rp = cfg.dcqcn.map(ReactionPoint::new).transpose()?;
        let rate = rp.as_ref().map_or(cfg.line_rate_bps, |r| r.rate());
        Ok(Sender {
            cfg,
            queue: VecDeque::new(),
            completions: VecDeque::new(),
            snd_una: cfg.initial_psn,
            snd_nxt: cfg.initial_psn,
            high_water: cfg.initial_psn,
            next_post_psn: cfg.initial_psn,
            cur_msg: 0,
            cur_pkt: 0,
            since_ack_req: 0,
            deadline: None,
            retries_left: cfg.retry_count,
            last_msn: 0,
            state: QpState::ReadyToSend,
            limiter: RateLimiter::new(rate, cfg.line_rate_bps, cfg.burst_bytes, now),
            rp,
            counters: SenderCounters::default(),
            last_progress: None,
            last_ack: None,
            alt_armed: false,
            migration_requested: false,
        })
    }

    /// Configuration.
    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }

    /// Counters.
    pub fn counters(&self) -> &SenderCounters {
        &self.counters
    }

    /// QP state.
    pub fn state(&self) -> &QpState {
        &self.state
    }

    /// The DCQCN reaction point, if enabled.
    pub fn reaction_point(&self) -> Option<&ReactionPoint> {
        self.rp.as_ref()
    }

    /// Current pacing rate, bits/s.
    pub fn rate_bps(&self) -> u64 {
        self.limiter.rate_bps()
    }

    /// Oldest unacknowledged PSN.
    pub fn snd_una(&self) -> Psn {
        self.snd_una
    }

    /// Next PSN to transmit.
    pub fn snd_nxt(&self) -> Psn {
        self.snd_nxt
    }

    /// Last MSN reported by the responder.
    pub fn last_msn(&self) -> u32 {
        self.last_msn
    }

    /// One past the highest PSN ever transmitted.
    pub fn high_water(&self) -> Psn {
        self.high_water
    }

    /// Posted packets that wait to be sent, or sent again after a go-back-N rewind (from
    /// `snd_nxt` to the end of the last posted message).
    pub fn unsent(&self) -> u32 {
        self.snd_nxt.forward_distance(self.next_post_psn)
    }

    /// Local ACK timeouts left before the QP errors (restored by every ACK that makes progress).
    pub fn retries_left(&self) -> u32 {
        self.retries_left
    }

    /// When an ACK or NAK last acknowledged new PSNs (`None`: never).
    pub fn last_progress(&self) -> Option<u64> {
        self.last_progress
    }

    /// When any ACK or NAK last arrived (`None`: never).
    pub fn last_ack(&self) -> Option<u64> {
        self.last_ack
    }

    /// Packets transmitted and not yet acknowledged.
    pub fn outstanding(&self) -> u32 {
        self.snd_una.forward_distance(self.high_water)
    }

    /// Nothing queued and nothing unacknowledged.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// Pops a completed work request.
    pub fn pop_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    fn check_state(&self) -> Result<(), SenderError> {
        match self.state {
            QpState::ReadyToSend => Ok(()),
            QpState::Error(_) => Err(SenderError::QpError),
        }
    }

    fn fail(&mut self, e: SenderError) -> SenderError {
        self.state = QpState::Error(e.clone());
        self.deadline = None;
        e
    }

    /// Posts an RDMA WRITE of `msg.len` bytes from `local_addr` (an opaque address the
    /// caller resolves; [`TxPacket::local_addr`] is derived from it).
    pub fn post_write(&mut self, wr_id: u64, local_addr: u64, msg: WriteMessage) -> Result<(), SenderError> {
        self.check_state()?;
        let seg = Segmenter::new(msg, self.cfg.mtu, self.cfg.mode, self.next_post_psn)?;
        let queued = self.snd_una.forward_distance(self.next_post_psn);
        let adding = seg.num_packets();
        if u64::from(queued) + u64::from(adding) >= u64::from(PSN_HALF) {
            return Err(SenderError::QueueFull { queued, adding });
        }
        self.next_post_psn = self.next_post_psn.add(adding);
        self.queue.push_back(Pending { wr_id, local_addr, seg });
        Ok(())
    }

    /// Is there a packet to send once the window and the pacer allow?
    fn has_unsent(&self) -> bool {
        self.snd_nxt != self.next_post_psn
    }

    fn window_open(&self) -> bool {
        self.snd_una.forward_distance(self.snd_nxt) < self.cfg.max_outstanding_packets
    }

    /// The next packet to put on the wire at `now`, if the state, the window and the
    /// pacer allow one. Allocation-free.
    pub fn next_packet(&mut self, now: u64) -> Option<TxPacket> {
        if self.check_state().is_err() || !self.has_unsent() || !self.window_open() {
            return None;
        }
        if !self.limiter.ready(now) {
            return None;
        }
        let p = self.queue.get(self.cur_msg)?;
        let mut pkt = p.seg.packet(self.cur_pkt)?;
        debug_assert_eq!(pkt.psn, self.snd_nxt);
        let (wr_id, local_addr) = (p.wr_id, p.local_addr);
        let msg_packets = p.seg.num_packets();

        // AckReq: message end (set by segmentation), window now full, or every N packets.
        self.since_ack_req += 1;
        let fills_window = self.snd_una.forward_distance(self.snd_nxt) + 1 >= self.cfg.max_outstanding_packets;
        let every = self.cfg.ack_req_every != 0 && self.since_ack_req >= self.cfg.ack_req_every;
        pkt.ack_req |= fills_window || every;
        if pkt.ack_req {
            self.since_ack_req = 0;
        }

        let retransmission = self.snd_nxt.is_before(self.high_water);
        self.snd_nxt = self.snd_nxt.next();
        if !retransmission {
            self.high_water = self.snd_nxt;
        } else {
            self.counters.retransmitted_packets += 1;
        }
        self.cur_pkt += 1;
        if self.cur_pkt == msg_packets {
            self.cur_msg += 1;
            self.cur_pkt = 0;
        }

        let wire =
            pkt.payload_len + self.cfg.per_packet_overhead_bytes + if pkt.reth.is_some() { RETH_BYTES } else { 0 };
        self.limiter.consume(wire, now);
        if let Some(rp) = self.rp.as_mut() {
            rp.on_bytes_sent(u64::from(wire), now);
            self.limiter.set_rate(rp.rate(), now);
        }
        self.counters.packets_sent += 1;
        self.counters.payload_bytes_sent += u64::from(pkt.payload_len);
        if self.deadline.is_none() {
            self.deadline = Some(now.saturating_add(self.cfg.retransmit_timeout_ns));
        }
        Some(TxPacket { pkt, wr_id, local_addr: local_addr + u64::from(pkt.payload_offset), retransmission })
    }

    /// When the retransmit timer fires, if it runs (and the QP is not in error).
    pub fn retransmit_deadline(&self) -> Option<u64> {
        self.deadline.filter(|_| matches!(self.state, QpState::ReadyToSend))
    }

    /// When the next thing can happen: the pacer releasing a packet (if one is waiting
    /// and the window is open), the retransmit timer, or a DCQCN timer.
    pub fn next_event_time(&mut self, now: u64) -> Option<u64> {
        if self.check_state().is_err() {
            return None;
        }
        let send = (self.has_unsent() && self.window_open()).then(|| self.limiter.ready_at(now));
        let dcqcn = self.rp.as_ref().and_then(|r| r.next_deadline());
        [send, self.deadline, dcqcn].into_iter().flatten().min()
    }

    /// Moves `snd_nxt` to `psn` (which must be in `[snd_una, high_water]`) and finds its
    /// message.
    fn rewind_to(&mut self, psn: Psn) {
        self.snd_nxt = psn;
        self.since_ack_req = 0;
        for (i, p) in self.queue.iter().enumerate() {
            if psn.in_window(p.seg.first_psn(), p.seg.num_packets()) {
                self.cur_msg = i;
                self.cur_pkt = p.seg.first_psn().forward_distance(psn);
                return;
            }
        }
        self.cur_msg = self.queue.len();
        self.cur_pkt = 0;
    }

    /// Acknowledges everything before `new_una` (in `(snd_una, high_water]`).
    fn advance_una(&mut self, new_una: Psn, now: u64) {
        self.snd_una = new_una;
        self.last_progress = Some(now);
        while let Some(front) = self.queue.front() {
            let last = front.seg.last_psn();
            if last.is_before(new_una) {
                let len = front.seg.message().len;
                let wr_id = front.wr_id;
                self.queue.pop_front();
                self.cur_msg = self.cur_msg.saturating_sub(1);
                self.completions.push_back(Completion { wr_id, len });
                self.counters.messages_completed += 1;
            } else {
                break;
            }
        }
        if self.snd_nxt.is_before(new_una) {
            // A late ACK covered packets we had rewound to resend.
            self.rewind_to(new_una);
        }
        self.retries_left = self.cfg.retry_count;
        self.deadline = (self.snd_una != self.high_water).then(|| now.saturating_add(self.cfg.retransmit_timeout_ns));
    }

    /// Processes an ACK or NAK received at `now`.
    pub fn on_ack(&mut self, ack: &AckPacket, now: u64) -> Result<(), SenderError> {
        self.check_state()?;
        self.last_msn = ack.msn;
        self.last_ack = Some(now);
        let in_flight = self.snd_una.forward_distance(self.high_water);
        match ack.syndrome {
            AckSyndrome::Ack => {
                self.counters.acks_received += 1;
                // ACK PSN p acknowledges all PSNs ≤ p: valid p + 1 ∈ [snd_una, high_water].
                let through = ack.psn.next();
                let d = self.snd_una.forward_distance(through);
                if d > in_flight {
                    self.counters.invalid_acks += 1;
                } else if d == 0 {
                    self.counters.duplicate_acks += 1;
                } else {
                    self.advance_una(through, now);
                }
                Ok(())
            }
            AckSyndrome::NakPsnSequenceError => {
                self.counters.naks_received += 1;
                let expected = ack.psn;
                let d = self.snd_una.forward_distance(expected);
                if d > in_flight {
                    self.counters.invalid_acks += 1;
                    return Ok(());
                }
                if d > 0 {
                    // Implicitly acknowledges everything before the expected PSN.
                    self.advance_una(expected, now);
                } else {
                    self.deadline =
                        (self.snd_una != self.high_water).then(|| now.saturating_add(self.cfg.retransmit_timeout_ns));
                }
                self.rewind_to(expected);
                Ok(())
            }
            syndrome @ (AckSyndrome::NakInvalidRequest | AckSyndrome::NakRemoteAccessError) => {
                Err(self.fail(SenderError::RemoteNak { syndrome, psn: ack.psn }))
            }
        }
    }

    /// A CNP for this QP arrived at `now`: the DCQCN RP cuts the rate.
    pub fn on_cnp(&mut self, now: u64) {
        self.counters.cnps_received += 1;
        if let Some(rp) = self.rp.as_mut() {
            rp.on_cnp(now);
            self.limiter.set_rate(rp.rate(), now);
        }
    }

    /// Arms or disarms the alternate path (APM). Armed, the requester whose retries run out
    /// asks to migrate ([`Sender::take_migration_request`]) instead of failing. The owner arms
    /// it while the QP has an alternate path it can take (loaded, its port with carrier).
    pub fn set_alternate_path_armed(&mut self, armed: bool) {
        self.alt_armed = armed;
    }

    /// Whether an armed alternate path waits to be taken.
    pub fn alternate_path_armed(&self) -> bool {
        self.alt_armed
    }

    /// Whether the retries ran out on the primary path with the alternate path armed since the
    /// last call: the QP's owner moves it to the alternate path and calls
    /// [`Sender::path_migrated`] (until then the requester waits, its timer stopped).
    pub fn take_migration_request(&mut self) -> bool {
        std::mem::take(&mut self.migration_requested)
    }

    /// The QP now sends on its alternate path (from `now`): what was in flight on the old path
    /// is taken as lost, so the requester goes back to its oldest unacknowledged PSN at once,
    /// with a fresh retry count and timer. The alternate path is used up (IBTA's Migrated
    /// state: software would load and re-arm another).
    pub fn path_migrated(&mut self, now: u64) {
        self.alt_armed = false;
        self.retries_left = self.cfg.retry_count;
        let una = self.snd_una;
        self.rewind_to(una);
        self.deadline = (self.snd_una != self.high_water).then(|| now.saturating_add(self.cfg.retransmit_timeout_ns));
    }

    /// Runs timers due at `now`: DCQCN timers (rate follows) and the retransmit timeout.
    pub fn poll(&mut self, now: u64) -> Result<(), SenderError> {
        self.check_state()?;
        if let Some(rp) = self.rp.as_mut() {
            let r = rp.poll(now);
            self.limiter.set_rate(r, now);
        }
        match self.deadline {
            Some(d) if d <= now => {
                self.counters.timeouts += 1;
                if self.retries_left == 0 && self.alt_armed {
                    // The primary path failed (IBTA 17.2.8; qib/hfi1's restart_rc migrate here):
                    // the owner moves the QP and calls path_migrated.
                    self.migration_requested = true;
                    self.alt_armed = false;
                    self.deadline = None;
                    return Ok(());
                }
                if self.retries_left == 0 {
                    let e = SenderError::RetryExceeded { psn: self.snd_una, retries: self.cfg.retry_count };
                    return Err(self.fail(e));
                }
                self.retries_left -= 1;
                let una = self.snd_una;
                self.rewind_to(una);
                self.deadline = Some(now.saturating_add(self.cfg.retransmit_timeout_ns));
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::Opcode;

    fn cfg() -> SenderConfig {
        let mut c = SenderConfig::new(100_000_000_000);
        c.mtu = PathMtu::Mtu1024;
        c.dcqcn = None;
        c.burst_bytes = u32::MAX;
        c
    }

    fn msg(len: u32) -> WriteMessage {
        WriteMessage { remote_va: 0x1000, rkey: 7, len }
    }

    fn ack(psn: u32) -> AckPacket {
        AckPacket { syndrome: AckSyndrome::Ack, psn: Psn::new(psn), msn: 0 }
    }

    #[test]
    fn assigns_consecutive_psns_across_messages() {
        let mut c = cfg();
        c.initial_psn = Psn::new(0xFF_FFFE);
        let mut s = Sender::new(c, 0).unwrap();
        s.post_write(1, 0, msg(2048)).unwrap();
        s.post_write(2, 0x10_0000, msg(100)).unwrap();
        let p: Vec<_> = std::iter::from_fn(|| s.next_packet(0)).collect();
        let psns: Vec<u32> = p.iter().map(|p| p.pkt.psn.value()).collect();
        assert_eq!(psns, vec![0xFF_FFFE, 0xFF_FFFF, 0]);
        assert_eq!(p[0].pkt.opcode, Opcode::WriteFirst);
        assert_eq!(p[1].pkt.opcode, Opcode::WriteLast);
        assert_eq!(p[2].pkt.opcode, Opcode::WriteOnly);
        assert_eq!((p[1].wr_id, p[1].local_addr), (1, 1024));
        assert_eq!((p[2].wr_id, p[2].local_addr), (2, 0x10_0000));
        assert!(p.iter().all(|p| !p.retransmission));
        // Cumulative ACK of the last PSN completes both.
        s.on_ack(&ack(0), 10).unwrap();
        assert_eq!(s.pop_completion(), Some(Completion { wr_id: 1, len: 2048 }));
        assert_eq!(s.pop_completion(), Some(Completion { wr_id: 2, len: 100 }));
        assert!(s.is_idle());
        assert_eq!(s.outstanding(), 0);
        assert_eq!(s.next_event_time(10), None, "no timer once everything is acked");
    }

    #[test]
    fn window_limits_outstanding_and_sets_ack_req() {
        let mut c = cfg();
        c.max_outstanding_packets = 4;
        let mut s = Sender::new(c, 0).unwrap();
        s.post_write(1, 0, msg(10 * 1024)).unwrap();
        let p: Vec<_> = std::iter::from_fn(|| s.next_packet(0)).collect();
        assert_eq!(p.len(), 4);
        assert!(p[3].pkt.ack_req && !p[2].pkt.ack_req, "window-filling packet asks for an ACK");
        s.on_ack(&ack(1), 1).unwrap();
        assert_eq!(s.outstanding(), 2);
        let more: Vec<_> = std::iter::from_fn(|| s.next_packet(1)).collect();
        assert_eq!(more.len(), 2);
        assert_eq!(more[0].pkt.psn, Psn::new(4));
        assert_eq!(s.counters().duplicate_acks, 0);
        s.on_ack(&ack(1), 2).unwrap();
        assert_eq!(s.counters().duplicate_acks, 1);
        s.on_ack(&ack(100), 2).unwrap();
        assert_eq!(s.counters().invalid_acks, 1, "ACK beyond what was sent is ignored");
        assert_eq!(s.snd_una(), Psn::new(2));
    }

    #[test]
    fn nak_rewinds_to_expected_psn() {
        let mut s = Sender::new(cfg(), 0).unwrap();
        s.post_write(9, 0, msg(8 * 1024)).unwrap();
        for _ in 0..6 {
            s.next_packet(0).unwrap();
        }
        let nak = AckPacket { syndrome: AckSyndrome::NakPsnSequenceError, psn: Psn::new(3), msn: 0 };
        s.on_ack(&nak, 5).unwrap();
        assert_eq!(s.snd_una(), Psn::new(3), "NAK implicitly acks up to expected − 1");
        assert_eq!(s.counters().naks_received, 1);
        let r = s.next_packet(5).unwrap();
        assert_eq!(r.pkt.psn, Psn::new(3));
        assert!(r.retransmission);
        assert_eq!(r.pkt.opcode, Opcode::WriteMiddle);
        assert_eq!(r.pkt.payload_offset, 3 * 1024);
        let rest: Vec<_> = std::iter::from_fn(|| s.next_packet(5)).collect();
        assert_eq!(rest.len(), 4);
        assert_eq!(s.counters().retransmitted_packets, 3, "PSNs 3, 4, 5 resent; 6, 7 new");
        assert!(!rest[3].retransmission);
    }

    #[test]
    fn timeout_retransmits_then_errors_after_retry_count() {
        let mut c = cfg();
        c.retry_count = 2;
        c.retransmit_timeout_ns = 1_000;
        let mut s = Sender::new(c, 0).unwrap();
        s.post_write(1, 0, msg(3 * 1024)).unwrap();
        assert_eq!(std::iter::from_fn(|| s.next_packet(0)).count(), 3);
        s.poll(999).unwrap();
        assert_eq!(s.counters().timeouts, 0);
        assert_eq!(s.next_event_time(999), Some(1_000));
        s.poll(1_000).unwrap();
        assert_eq!(s.counters().timeouts, 1);
        assert_eq!(s.snd_nxt(), Psn::new(0));
        assert_eq!(std::iter::from_fn(|| s.next_packet(1_000)).count(), 3);
        assert_eq!(s.counters().retransmitted_packets, 3);
        // Progress restores the retry budget.
        s.on_ack(&ack(0), 1_500).unwrap();
        s.poll(2_499).unwrap();
        s.poll(2_500).unwrap();
        s.poll(3_500).unwrap();
        assert_eq!(s.counters().timeouts, 3);
        let e = s.poll(4_500).unwrap_err();
        assert_eq!(e, SenderError::RetryExceeded { psn: Psn::new(1), retries: 2 });
        assert!(matches!(s.state(), QpState::Error(_)));
        assert_eq!(s.next_packet(5_000), None);
        assert_eq!(s.post_write(2, 0, msg(1)), Err(SenderError::QpError));
    }

    #[test]
    fn an_armed_alternate_path_takes_over_when_the_retries_run_out_then_the_qp_fails_as_before() {
        let mut c = cfg();
        c.retry_count = 1;
        c.retransmit_timeout_ns = 1_000;
        let mut s = Sender::new(c, 0).unwrap();
        s.set_alternate_path_armed(true);
        s.post_write(1, 0, msg(3 * 1024)).unwrap();
        assert_eq!(std::iter::from_fn(|| s.next_packet(0)).count(), 3);
        s.poll(1_000).unwrap();
        assert!(!s.take_migration_request(), "one retry left: no migration yet");
        assert_eq!(std::iter::from_fn(|| s.next_packet(1_000)).count(), 3);
        s.poll(2_000).unwrap();
        assert!(s.take_migration_request(), "retries out with an armed alternate path: migrate");
        assert!(!s.take_migration_request(), "asked once");
        assert!(!s.alternate_path_armed());
        assert_eq!(s.next_event_time(2_000), None, "waits for its owner to move it");
        s.path_migrated(2_000);
        assert_eq!(s.state(), &QpState::ReadyToSend);
        assert_eq!(s.retries_left(), 1, "a fresh retry count on the alternate path");
        let again: Vec<_> = std::iter::from_fn(|| s.next_packet(2_000)).collect();
        assert_eq!(again.len(), 3, "everything unacknowledged goes again on the new path");
        assert!(again.iter().all(|p| p.retransmission));
        assert_eq!(s.next_event_time(2_000), Some(3_000), "the timer restarts at the migration");
        // The alternate path is used up: the next exhaustion fails the QP.
        s.poll(3_000).unwrap();
        s.next_packet(3_000);
        assert_eq!(s.poll(4_000).unwrap_err(), SenderError::RetryExceeded { psn: Psn::new(0), retries: 1 });
        assert!(!s.take_migration_request());
    }

    #[test]
    fn a_migration_sends_the_unacknowledged_packets_again_at_once() {
        let mut s = Sender::new(cfg(), 0).unwrap();
        s.set_alternate_path_armed(true);
        s.post_write(1, 0, msg(4 * 1024)).unwrap();
        assert_eq!(std::iter::from_fn(|| s.next_packet(0)).count(), 4);
        s.on_ack(&ack(1), 10).unwrap();
        s.path_migrated(20);
        assert!(!s.alternate_path_armed());
        let p: Vec<u32> = std::iter::from_fn(|| s.next_packet(20)).map(|p| p.pkt.psn.value()).collect();
        assert_eq!(p, vec![2, 3], "PSNs 0 and 1 were acknowledged; 2 and 3 were on the dead path");
        assert_eq!(s.counters().timeouts, 0, "no timeout was waited for");
    }

    #[test]
    fn fatal_nak_moves_to_error() {
        let mut s = Sender::new(cfg(), 0).unwrap();
        s.post_write(1, 0, msg(10)).unwrap();
        s.next_packet(0).unwrap();
        let nak = AckPacket { syndrome: AckSyndrome::NakRemoteAccessError, psn: Psn::new(0), msn: 0 };
        assert!(matches!(s.on_ack(&nak, 1), Err(SenderError::RemoteNak { .. })));
        assert_eq!(s.on_ack(&ack(0), 2), Err(SenderError::QpError));
    }

    #[test]
    fn limiter_paces_at_configured_rate() {
        // 1 Gbit/s, 1000-byte charges, tiny bucket: one packet per 8 µs.
        let mut l = RateLimiter::new(1_000_000_000, 1_000_000_000, 0, 0);
        let mut sent = Vec::new();
        let mut now = 0;
        while sent.len() < 5 {
            now = l.ready_at(now);
            assert!(l.ready(now));
            l.consume(1000, now);
            sent.push(now);
        }
        assert_eq!(sent, vec![0, 8_000, 16_000, 24_000, 32_000]);
        // Rate above line rate is clamped.
        l.set_rate(5_000_000_000, now);
        assert_eq!(l.rate_bps(), 1_000_000_000);
        // Halving the rate doubles the gap.
        l.set_rate(500_000_000, now);
        assert_eq!(l.ready_at(now), now + 16_000);
    }

    #[test]
    fn limiter_burst_then_rate() {
        let mut l = RateLimiter::new(8_000_000_000, 8_000_000_000, 3000, 0);
        // A 3000-byte bucket lets 3 × 1000 B out at once (tokens reach 0), then a 4th
        // (tokens go negative), then pacing at 1 ns per byte.
        for _ in 0..4 {
            assert!(l.ready(0));
            l.consume(1000, 0);
        }
        assert!(!l.ready(0));
        assert_eq!(l.ready_at(0), 1000);
    }

    #[test]
    fn cnp_cuts_pacing_rate_through_dcqcn() {
        let mut c = cfg();
        c.dcqcn = Some(DcqcnConfig::with_line_rate(c.line_rate_bps));
        let mut s = Sender::new(c, 0).unwrap();
        assert_eq!(s.rate_bps(), 100_000_000_000);
        s.on_cnp(10);
        assert_eq!(s.rate_bps(), 50_000_000_000);
        assert_eq!(s.counters().cnps_received, 1);
        // After the rate-increase timer the rate recovers part of the way.
        s.poll(10 + 1_500_000).unwrap();
        assert_eq!(s.rate_bps(), 75_000_000_000);
    }

    #[test]
    fn rejects_bad_config() {
        let mut c = cfg();
        c.max_outstanding_packets = 0;
        assert!(matches!(Sender::new(c, 0), Err(SenderError::InvalidConfig(_))));
    }
}
