//! RC responder for RDMA WRITE (IBTA Vol. 1 §9.7 "Reliable service", responder side, and
//! §9.7.5 ACK/NAK generation), with optional out-of-order data placement for
//! Write-Only-per-packet traffic. It counts CE-marked packets; the DCQCN notification point that
//! answers them with CNPs is the NIC's ([`crate::dcqcn::CnpPacer`]), since QPs may share it.
//!
//! * Expected-PSN check: an in-sequence packet is validated and placed; a packet ahead of
//!   the expected PSN (within 2^23) is a sequence error, answered by **one** NAK
//!   (PSN sequence error, carrying the expected PSN) per out-of-sequence episode — the
//!   episode ends when the expected packet arrives; a packet behind it is a duplicate,
//!   which is not re-executed but re-ACKed with the last acknowledged PSN. Every packet that
//!   arrives ahead of the expected PSN counts as an out-of-order arrival
//!   ([`ReceiverCounters::out_of_order`]).
//! * Placement: First/Only carry a RETH; the VA, R_Key and length are checked against the
//!   registered [`MemoryRegion`]; Middle/Last continue at the running offset. First/Middle
//!   must carry exactly one PMTU, Last the remainder, Only the RETH length.
//! * Out-of-order placement ([`ReceiverConfig::out_of_order`], the QP attribute of NVIDIA's
//!   "Out-of-Order (OOO) Data Placement", ConnectX-5 and later, MLNX_OFED documentation; book
//!   ch. 12, Fig. 12-7): a WRITE Only (it carries its own RETH, so its address does not depend
//!   on earlier packets) that arrives ahead of the expected PSN, within [`OOO_WINDOW`] PSNs,
//!   is placed at once and marked in a bitmap over the PSNs (fixed size, no allocation).
//!   Completion stays in order, as on mlx5 ("the completion ordering of WRs remains in-order",
//!   Linux commit "RDMA/mlx5: Support OOO RX WQE consumption", 2024): the expected PSN, the
//!   MSN and the cumulative ACK only move across PSNs that have all arrived, so an ACK always
//!   names the last PSN before the first hole, and a hole that fills is ACKed at once. Mere
//!   reordering causes no NAK and hence no go-back-N. First/Middle/Last cannot be placed ahead
//!   (Middle/Last have no address of their own), so they keep the sequence-error rule.
//! * Loss with out-of-order placement: a hole that persists for
//!   [`ReceiverConfig::reorder_window_ns`] is declared lost and NAKed once (PSN sequence error
//!   with the expected PSN; the requester goes back to it, and packets it resends that were
//!   already placed are duplicates, not re-executed). This is the time-based reordering window
//!   of RACK (RFC 8985 §6.2: a packet is lost once a later one was delivered and a reordering
//!   window has passed) rather than a duplicate-count threshold, because under packet spraying
//!   any number of later packets may overtake one delayed packet. A lost tail (no later packet
//!   arrives) is recovered by the requester's local ACK timeout, as without reordering.
//! * Coalesced ACKs: one ACK every `ack_every` packets that complete in order, or at once when
//!   the packet has AckReq (and/or ends a message), configurable; optionally flushed by
//!   [`Receiver::poll`] a fixed delay after the oldest unacknowledged packet.
use crate::desc::{AckPacket, AckSyndrome, Opcode, WritePacket};
use crate::psn::{Psn, PSN_MASK};
use crate::segment::PathMtu;

/// PSNs ahead of the expected one that out-of-order placement tracks (the bitmap's size in
/// bits; a power of two dividing 2^24). A packet further ahead is a sequence error. It covers
/// any requester window of the default job files (128 KiB of payload: 512 packets at path MTU
/// 256).
pub const OOO_WINDOW: u32 = 4096;
const OOO_WORDS: usize = (OOO_WINDOW / 64) as usize;

/// Default [`ReceiverConfig::reorder_window_ns`]: 25 ms, a quarter of the default local ACK
/// timeout (`nic::job::DEFAULT_RETRANSMIT_TIMEOUT_NS`), so a real loss is repaired well before
/// the requester times out while reordering on a loaded emulation host is not mistaken for it.
pub const DEFAULT_REORDER_WINDOW_NS: u64 = 25_000_000;

/// Responder construction errors.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReceiverError {
    /// A configuration value is out of range.
    #[error("invalid receiver configuration: {0}")]
    InvalidConfig(&'static str),
    /// A memory region's VA range overflows 64 bits.
    #[error("memory region rkey {rkey:#x} at VA {va:#x} with {len} bytes overflows 64 bits")]
    RegionOverflow {
        /// R_Key.
        rkey: u32,
        /// Base VA.
        va: u64,
        /// Length.
        len: usize,
    },
    /// Two memory regions share an R_Key.
    #[error("duplicate memory region rkey {0:#x}")]
    DuplicateRkey(u32),
}

/// An emulated registered memory region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRegion {
    /// Virtual address of `data[0]`.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Contents.
    pub data: Vec<u8>,
}

/// Responder configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Path MTU (payload limit and First/Middle size).
    pub mtu: PathMtu,
    /// Expected PSN at start (the requester's initial PSN).
    pub initial_psn: Psn,
    /// ACK after this many packets completed in order at the latest (≥ 1; 1 = ACK every packet).
    pub ack_every: u32,
    /// ACK at once when a packet has AckReq set.
    pub ack_on_ack_req: bool,
    /// ACK at once at the end of every message (Last/Only).
    pub ack_on_message_end: bool,
    /// Coalescing delay: an unacknowledged placed packet is ACKed by [`Receiver::poll`] at
    /// most this long after it arrived (`None`: only the packet-count / AckReq rules).
    pub ack_delay_ns: Option<u64>,
    /// Out-of-order data placement: WRITE Only packets ahead of the expected PSN are placed
    /// instead of dropped (see the module docs). Off: a plain RC responder.
    pub out_of_order: bool,
    /// With [`ReceiverConfig::out_of_order`]: NAK a hole that persisted this long after a later
    /// packet arrived (`None`: leave loss recovery to the requester's timeout).
    pub reorder_window_ns: Option<u64>,
}

impl ReceiverConfig {
    /// Defaults: MTU 4096, ACK every 16 packets or on AckReq or 10 µs after the oldest
    /// unacknowledged packet, in-order placement (out-of-order placement
    /// off; when turned on, holes are NAKed after [`DEFAULT_REORDER_WINDOW_NS`]).
    pub fn new(mtu: PathMtu) -> ReceiverConfig {
        ReceiverConfig {
            mtu,
            initial_psn: Psn::ZERO,
            ack_every: 16,
            ack_on_ack_req: true,
            ack_on_message_end: false,
            ack_delay_ns: Some(10_000),
            out_of_order: false,
            reorder_window_ns: Some(DEFAULT_REORDER_WINDOW_NS),
        }
    }
}

/// Why an in-sequence packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The payload slice length differs from the descriptor (malformed input; no NAK).
    PayloadLengthMismatch,
    /// Payload longer than the path MTU.
    PayloadTooLong,
    /// First/Only inside a message, or Middle/Last outside one, or (out-of-order placement)
    /// First/Middle although the next PSN already arrived as a WRITE Only.
    OpcodeSequence,
    /// First/Only without a RETH.
    MissingReth,
    /// Payload length inconsistent with the opcode / RETH length.
    LengthMismatch,
    /// No memory region with this R_Key.
    InvalidRkey,
    /// RETH range outside the memory region.
    OutOfBounds,
}

impl RejectReason {
    /// The NAK a responder sends for it (`None`: silently dropped, counted).
    pub const fn nak(self) -> Option<AckSyndrome> {
        match self {
            RejectReason::PayloadLengthMismatch => None,
            RejectReason::InvalidRkey | RejectReason::OutOfBounds => Some(AckSyndrome::NakRemoteAccessError),
            RejectReason::PayloadTooLong
            | RejectReason::OpcodeSequence
            | RejectReason::MissingReth
            | RejectReason::LengthMismatch => Some(AckSyndrome::NakInvalidRequest),
        }
    }
}

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxEvent {
    /// In sequence and placed.
    Placed {
        /// At least one message completed (the MSN advanced; with out-of-order placement
        /// possibly by several, when this packet filled a hole).
        message_complete: bool,
    },
    /// Ahead of the expected PSN and placed at its RETH address (out-of-order placement);
    /// it completes when every earlier PSN has arrived.
    PlacedOutOfOrder,
    /// Behind the expected PSN, or already placed out of order: not re-executed.
    Duplicate,
    /// Ahead of the expected PSN: dropped.
    OutOfSequence,
    /// Refused (in sequence, or ahead under out-of-order placement).
    Rejected(RejectReason),
}

/// Responder output for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOutcome {
    /// ACK or NAK to send back, if any.
    pub ack: Option<AckPacket>,
    /// What happened.
    pub event: RxEvent,
}

/// Responder counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    /// Packets offered.
    pub packets_received: u64,
    /// Packets placed (in order or, with out-of-order placement, ahead).
    pub packets_placed: u64,
    /// Payload bytes placed.
    pub bytes_placed: u64,
    /// Packets completed: the expected PSN moved past them, so every earlier PSN arrived too.
    pub packets_completed: u64,
    /// Messages completed.
    pub messages_completed: u64,
    /// Duplicates (re-ACKed when behind the expected PSN; not re-executed).
    pub duplicates: u64,
    /// Packets that arrived ahead of the expected PSN (a hole before them), placed or not;
    /// duplicates excluded.
    pub out_of_order: u64,
    /// Out-of-sequence packets dropped.
    pub out_of_sequence: u64,
    /// ACKs generated.
    pub acks_sent: u64,
    /// PSN-sequence-error NAKs generated.
    pub naks_sent: u64,
    /// Packets refused (invalid request / remote access / malformed).
    pub rejected: u64,
    /// CE-marked packets.
    pub ce_marked: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InMessage {
    mr: usize,
    offset: usize,
    remaining: u32,
}

/// Which PSNs ahead of the expected one arrived: one bit per PSN, indexed by PSN modulo
/// [`OOO_WINDOW`]; only bits of PSNs in `(ePSN, ePSN + OOO_WINDOW)` are ever set, and a bit is
/// cleared when the expected PSN passes it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Arrived {
    bits: [u64; OOO_WORDS],
    /// Bits set.
    count: u32,
}

impl Arrived {
    fn at(psn: Psn) -> (usize, u64) {
        let i = psn.value() % OOO_WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn contains(&self, psn: Psn) -> bool {
        let (w, b) = Arrived::at(psn);
        self.bits[w] & b != 0
    }

    fn insert(&mut self, psn: Psn) {
        let (w, b) = Arrived::at(psn);
        self.bits[w] |= b;
        self.count += 1;
    }

    /// Clears `psn`'s bit; returns whether it was set.
    fn take(&mut self, psn: Psn) -> bool {
        let (w, b) = Arrived::at(psn);
        let set = self.bits[w] & b != 0;
        if set {
            self.bits[w] &= !b;
            self.count -= 1;
        }
        set
    }
}

/// RC responder state machine of one QP.
#[derive(Debug)]
pub struct Receiver {
    cfg: ReceiverConfig,
    mrs: Vec<MemoryRegion>,
    epsn: Psn,
    msn: u32,
    cur: Option<InMessage>,
    nak_outstanding: bool,
    unacked: u32,
    /// Arrival time of the oldest placed-but-unacknowledged packet.
    unacked_since: u64,
    /// Out-of-order placement: PSNs placed ahead of `epsn`.
    arrived: Arrived,
    /// Out-of-order placement: since when the hole at `epsn` is known (a later packet arrived).
    hole_since: Option<u64>,
    counters: ReceiverCounters,
    /// When a request packet last arrived.
    last_packet: Option<u64>,
    /// When a packet was last placed (in order or ahead).
    last_placed: Option<u64>,
}

impl Receiver {
    /// What it was made with.
    pub fn config(&self) -> &ReceiverConfig {
        &self.cfg
    }

    /// A responder owning `mrs`.
    pub fn new(cfg: ReceiverConfig, mrs: Vec<MemoryRegion>) -> Result<Receiver, ReceiverError> {
        if cfg.ack_every == 0 {
            return Err(ReceiverError::InvalidConfig("ack_every must be >= 1"));
        }
        for (i, mr) in mrs.iter().enumerate() {
            if mr.va.checked_add(mr.data.len() as u64).is_none() {
                return Err(ReceiverError::RegionOverflow { rkey: mr.rkey, va: mr.va, len: mr.data.len() });
            }
            if mrs[..i].iter().any(|m| m.rkey == mr.rkey) {
                return Err(ReceiverError::DuplicateRkey(mr.rkey));
            }
        }
        Ok(Receiver {
            cfg,
            mrs,
            epsn: cfg.initial_psn,
            msn: 0,
            cur: None,
            nak_outstanding: false,
            unacked: 0,
            unacked_since: 0,
            arrived: Arrived { bits: [0; OOO_WORDS], count: 0 },
            hole_since: None,
            counters: ReceiverCounters::default(),
            last_packet: None,
            last_placed: None,
        })
    }

    /// Expected PSN: the first PSN that has not arrived.
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// Message sequence number (completed messages, 24 bits).
    pub fn msn(&self) -> u32 {
        self.msn
    }

    /// Counters.
    pub fn counters(&self) -> &ReceiverCounters {
        &self.counters
    }

    /// Whether packets were accepted that no ACK has covered yet (a coalesced ACK is due): the
    /// responder must stay up until [`Receiver::poll`] sends it, or its requester waits for an
    /// ACK that never comes.
    pub fn owes_ack(&self) -> bool {
        self.unacked != 0
    }

    /// When a request packet last arrived (`None`: never).
    pub fn last_packet(&self) -> Option<u64> {
        self.last_packet
    }

    /// When a packet was last placed, in order or ahead (`None`: never).
    pub fn last_placed(&self) -> Option<u64> {
        self.last_placed
    }

    /// Packets placed ahead of the expected PSN that wait for a hole to fill.
    pub fn pending_out_of_order(&self) -> u32 {
        self.arrived.count
    }

    /// The memory region with `rkey`.
    pub fn region(&self, rkey: u32) -> Option<&MemoryRegion> {
        self.mrs.iter().find(|m| m.rkey == rkey)
    }

    /// Mutable access to the memory region with `rkey` (e.g. to reset a buffer).
    pub fn region_mut(&mut self, rkey: u32) -> Option<&mut MemoryRegion> {
        self.mrs.iter_mut().find(|m| m.rkey == rkey)
    }

    fn ack_now(&mut self, syndrome: AckSyndrome, psn: Psn) -> AckPacket {
        self.unacked = 0;
        match syndrome {
            AckSyndrome::Ack => self.counters.acks_sent += 1,
            AckSyndrome::NakPsnSequenceError => self.counters.naks_sent += 1,
            _ => {}
        }
        AckPacket { syndrome, psn, msn: self.msn }
    }

    /// The sequence-error rule: drop, and NAK once per episode.
    fn out_of_sequence(&mut self) -> Option<AckPacket> {
        self.counters.out_of_sequence += 1;
        if self.nak_outstanding {
            None
        } else {
            self.nak_outstanding = true;
            Some(self.ack_now(AckSyndrome::NakPsnSequenceError, self.epsn))
        }
    }

    /// Processes one request packet received at `now`. `payload` must be the packet's
    /// payload (`pkt.payload_len` bytes); `ce` is true when the IP ECN field was CE (11).
    /// Allocation-free.
    pub fn on_packet(&mut self, pkt: &WritePacket, payload: &[u8], ce: bool, now: u64) -> RxOutcome {
        self.counters.packets_received += 1;
        self.last_packet = Some(now);
        self.counters.ce_marked += u64::from(ce);
        let d = pkt.psn.diff(self.epsn);
        if d < 0 {
            self.counters.duplicates += 1;
            let last = self.epsn.sub(1);
            let ack = self.ack_now(AckSyndrome::Ack, last);
            return RxOutcome { ack: Some(ack), event: RxEvent::Duplicate };
        }
        if d > 0 {
            let in_window = self.cfg.out_of_order && (d as u32) < OOO_WINDOW;
            if in_window && self.arrived.contains(pkt.psn) {
                // Resent by a go-back-N after it was placed: the hole before it is still open,
                // so there is nothing new to acknowledge.
                self.counters.duplicates += 1;
                return RxOutcome { ack: None, event: RxEvent::Duplicate };
            }
            self.counters.out_of_order += 1;
            if !(in_window && pkt.opcode == Opcode::WriteOnly && self.cur.is_none()) {
                let ack = self.out_of_sequence();
                return RxOutcome { ack, event: RxEvent::OutOfSequence };
            }
            return match self.place(pkt, payload) {
                Ok(_) => {
                    self.arrived.insert(pkt.psn);
                    self.last_placed = Some(now);
                    self.counters.packets_placed += 1;
                    self.counters.bytes_placed += u64::from(pkt.payload_len);
                    self.hole_since.get_or_insert(now);
                    RxOutcome { ack: None, event: RxEvent::PlacedOutOfOrder }
                }
                Err(reason) => self.reject(reason, pkt.psn),
            };
        }
        if self.arrived.contains(self.epsn.next()) && !pkt.opcode.ends_message() {
            // The next PSN was a WRITE Only, so this message cannot continue there.
            return self.reject(RejectReason::OpcodeSequence, pkt.psn);
        }
        match self.place(pkt, payload) {
            Ok(message_complete) => {
                self.nak_outstanding = false;
                self.epsn = self.epsn.next();
                self.last_placed = Some(now);
                self.counters.packets_placed += 1;
                self.counters.packets_completed += 1;
                self.counters.bytes_placed += u64::from(pkt.payload_len);
                let mut messages = u32::from(message_complete);
                // Complete the packets placed ahead that are now contiguous (each a WRITE Only).
                let mut filled = 0;
                while self.arrived.take(self.epsn) {
                    self.epsn = self.epsn.next();
                    filled += 1;
                }
                messages += filled;
                self.counters.packets_completed += u64::from(filled);
                self.msn = (self.msn + messages) & PSN_MASK;
                self.counters.messages_completed += u64::from(messages);
                self.hole_since = (self.arrived.count > 0).then_some(now);
                if self.unacked == 0 {
                    self.unacked_since = now;
                }
                self.unacked += 1 + filled;
                let want = filled > 0
                    || (pkt.ack_req && self.cfg.ack_on_ack_req)
                    || (message_complete && self.cfg.ack_on_message_end)
                    || self.unacked >= self.cfg.ack_every;
                let last = self.epsn.sub(1);
                let ack = want.then(|| self.ack_now(AckSyndrome::Ack, last));
                RxOutcome { ack, event: RxEvent::Placed { message_complete: messages > 0 } }
            }
            Err(reason) => self.reject(reason, pkt.psn),
        }
    }

    fn reject(&mut self, reason: RejectReason, psn: Psn) -> RxOutcome {
        self.counters.rejected += 1;
        let ack = reason.nak().map(|s| self.ack_now(s, psn));
        RxOutcome { ack, event: RxEvent::Rejected(reason) }
    }

    /// When a hole that outlived the reordering window is due for its NAK.
    fn hole_deadline(&self) -> Option<u64> {
        match (self.hole_since, self.cfg.reorder_window_ns) {
            (Some(t), Some(w)) if !self.nak_outstanding => Some(t.saturating_add(w)),
            _ => None,
        }
    }

    /// When [`Receiver::poll`] has something to send: a coalesced ACK, or the NAK of a hole
    /// that outlived the reordering window (`None`: nothing pending).
    pub fn next_deadline(&self) -> Option<u64> {
        let ack = match (self.unacked, self.cfg.ack_delay_ns) {
            (0, _) | (_, None) => None,
            (_, Some(d)) => Some(self.unacked_since.saturating_add(d)),
        };
        match (ack, self.hole_deadline()) {
            (Some(a), Some(h)) => Some(a.min(h)),
            (a, h) => a.or(h),
        }
    }

    /// At `now`: NAKs the hole at the expected PSN if it outlived the reordering window (the
    /// NAK acknowledges everything before it), else flushes the coalesced ACK if the
    /// coalescing delay has expired.
    pub fn poll(&mut self, now: u64) -> Option<AckPacket> {
        if self.hole_deadline().is_some_and(|h| h <= now) {
            self.nak_outstanding = true;
            return Some(self.ack_now(AckSyndrome::NakPsnSequenceError, self.epsn));
        }
        match (self.unacked, self.cfg.ack_delay_ns) {
            (0, _) | (_, None) => None,
            (_, Some(d)) if self.unacked_since.saturating_add(d) <= now => {
                Some(self.ack_now(AckSyndrome::Ack, self.epsn.sub(1)))
            }
            _ => None,
        }
    }

    /// Validates and places an in-sequence packet, or a WRITE Only ahead of it (outside any
    /// message, so `cur` stays `None`); returns whether it ended a message.
    fn place(&mut self, pkt: &WritePacket, payload: &[u8]) -> Result<bool, RejectReason> {
        if payload.len() != pkt.payload_len as usize {
            return Err(RejectReason::PayloadLengthMismatch);
        }
        let mtu = self.cfg.mtu.bytes();
        let len = pkt.payload_len;
        if len > mtu {
            return Err(RejectReason::PayloadTooLong);
        }
        let mut state = match (pkt.opcode, self.cur) {
            (Opcode::WriteFirst | Opcode::WriteOnly, None) => {
                let reth = pkt.reth.ok_or(RejectReason::MissingReth)?;
                let ok_len = match pkt.opcode {
                    Opcode::WriteFirst => len == mtu && reth.len > mtu,
                    _ => len == reth.len,
                };
                if !ok_len {
                    return Err(RejectReason::LengthMismatch);
                }
                let mr_idx = self.mrs.iter().position(|m| m.rkey == reth.rkey).ok_or(RejectReason::InvalidRkey)?;
                let mr = &self.mrs[mr_idx];
                let start = reth.va.checked_sub(mr.va).ok_or(RejectReason::OutOfBounds)?;
                let end = start.checked_add(u64::from(reth.len)).ok_or(RejectReason::OutOfBounds)?;
                if end > mr.data.len() as u64 {
                    return Err(RejectReason::OutOfBounds);
                }
                InMessage { mr: mr_idx, offset: start as usize, remaining: reth.len }
            }
            (Opcode::WriteMiddle, Some(cur)) => {
                if len != mtu || cur.remaining <= len {
                    return Err(RejectReason::LengthMismatch);
                }
                cur
            }
            (Opcode::WriteLast, Some(cur)) => {
                if len == 0 || cur.remaining != len {
                    return Err(RejectReason::LengthMismatch);
                }
                cur
            }
            _ => return Err(RejectReason::OpcodeSequence),
        };
        let mr = &mut self.mrs[state.mr];
        mr.data[state.offset..state.offset + len as usize].copy_from_slice(payload);
        state.offset += len as usize;
        state.remaining -= len;
        let done = pkt.opcode.ends_message();
        self.cur = if done { None } else { Some(state) };
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::Reth;
    use crate::segment::{SegmentMode, Segmenter, WriteMessage};

    const VA: u64 = 0x10_0000;
    const RKEY: u32 = 0x42;

    fn rx(cfg: ReceiverConfig) -> Receiver {
        Receiver::new(cfg, vec![MemoryRegion { va: VA, rkey: RKEY, data: vec![0; 64 * 1024] }]).unwrap()
    }

    fn cfg256() -> ReceiverConfig {
        ReceiverConfig::new(PathMtu::Mtu256)
    }

    fn packets(len: u32, off: u64, first: u32, mode: SegmentMode) -> Vec<WritePacket> {
        let s = Segmenter::new(
            WriteMessage { remote_va: VA + off, rkey: RKEY, len },
            PathMtu::Mtu256,
            mode,
            Psn::new(first),
        )
        .unwrap();
        s.iter().collect()
    }

    fn data(len: u32) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + 3) as u8).collect()
    }

    fn deliver(r: &mut Receiver, pkts: &[WritePacket], d: &[u8]) -> Vec<RxOutcome> {
        pkts.iter()
            .map(|p| {
                let o = p.payload_offset as usize;
                r.on_packet(p, &d[o..o + p.payload_len as usize], false, 0)
            })
            .collect()
    }

    #[test]
    fn places_first_middle_last_at_running_offset() {
        let mut r = rx(cfg256());
        let d = data(1000);
        let p = packets(1000, 100, 0, SegmentMode::FirstMiddleLast);
        let out = deliver(&mut r, &p, &d);
        assert_eq!(out[3].event, RxEvent::Placed { message_complete: true });
        assert!(out[..3].iter().all(|o| o.event == RxEvent::Placed { message_complete: false }));
        let mr = r.region(RKEY).unwrap();
        assert_eq!(&mr.data[100..1100], &d[..]);
        assert!(mr.data[..100].iter().all(|&b| b == 0) && mr.data[1100..].iter().all(|&b| b == 0));
        assert_eq!(r.msn(), 1);
        assert_eq!(r.expected_psn(), Psn::new(4));
        // Only the AckReq'd last packet is ACKed (ack_every = 16).
        assert_eq!(out.iter().filter(|o| o.ack.is_some()).count(), 1);
        assert_eq!(out[3].ack, Some(AckPacket { syndrome: AckSyndrome::Ack, psn: Psn::new(3), msn: 1 }));
    }

    #[test]
    fn places_write_only_per_packet() {
        let mut c = cfg256();
        c.initial_psn = Psn::new(10);
        let mut r = rx(c);
        let d = data(700);
        let p = packets(700, 0, 10, SegmentMode::WriteOnlyPerPacket);
        deliver(&mut r, &p, &d);
        assert_eq!(&r.region(RKEY).unwrap().data[..700], &d[..]);
        assert_eq!(r.msn(), 3, "each Write Only is a message");
        assert_eq!(r.counters().messages_completed, 3);
    }

    #[test]
    fn ack_coalescing_counts() {
        for (every, on_req, on_end, expect) in [
            (1, true, false, 40),
            (4, true, false, 10),
            (16, true, false, 3), // 16, 32, and the AckReq'd last packet (40)
            (16, false, false, 2),
            (16, false, true, 3),
            (100, true, false, 1),
        ] {
            let mut c = cfg256();
            c.ack_every = every;
            c.ack_on_ack_req = on_req;
            c.ack_on_message_end = on_end;
            let mut r = rx(c);
            let d = data(40 * 256);
            let out = deliver(&mut r, &packets(40 * 256, 0, 0, SegmentMode::FirstMiddleLast), &d);
            let acks: Vec<_> = out.iter().filter_map(|o| o.ack).collect();
            assert_eq!(acks.len(), expect, "every {every} req {on_req} end {on_end}");
            assert_eq!(r.counters().acks_sent, expect as u64);
            // ACK PSNs increase and are cumulative.
            assert!(acks.windows(2).all(|w| w[1].psn.is_after(w[0].psn)));
        }
    }

    #[test]
    fn out_of_sequence_naks_once_per_episode() {
        let mut r = rx(cfg256());
        let d = data(10 * 256);
        let p = packets(10 * 256, 0, 0, SegmentMode::FirstMiddleLast);
        let sl = |p: &WritePacket| &d[p.payload_offset as usize..(p.payload_offset + p.payload_len) as usize];
        r.on_packet(&p[0], sl(&p[0]), false, 0);
        r.on_packet(&p[1], sl(&p[1]), false, 0);
        // p[2] lost: 3, 4, 5 arrive.
        let o3 = r.on_packet(&p[3], sl(&p[3]), false, 0);
        assert_eq!(o3.event, RxEvent::OutOfSequence);
        assert_eq!(o3.ack, Some(AckPacket { syndrome: AckSyndrome::NakPsnSequenceError, psn: Psn::new(2), msn: 0 }));
        assert_eq!(r.on_packet(&p[4], sl(&p[4]), false, 0).ack, None);
        assert_eq!(r.on_packet(&p[5], sl(&p[5]), false, 0).ack, None);
        assert_eq!(r.counters().naks_sent, 1);
        assert_eq!(r.counters().out_of_sequence, 3);
        // Go-back-N resend from 2: the episode ends, a new loss NAKs again.
        assert!(matches!(r.on_packet(&p[2], sl(&p[2]), false, 0).event, RxEvent::Placed { .. }));
        r.on_packet(&p[3], sl(&p[3]), false, 0);
        let o5 = r.on_packet(&p[5], sl(&p[5]), false, 0);
        assert_eq!(o5.ack.map(|a| a.psn), Some(Psn::new(4)));
        assert_eq!(r.counters().naks_sent, 2);
    }

    #[test]
    fn duplicates_are_reacked_not_replaced() {
        let mut c = cfg256();
        c.initial_psn = Psn::new(0xFF_FFFF);
        let mut r = rx(c);
        let d = data(512);
        let p = packets(512, 0, 0xFF_FFFF, SegmentMode::FirstMiddleLast);
        deliver(&mut r, &p, &d);
        assert_eq!(r.expected_psn(), Psn::new(1));
        // Retransmitted First (duplicate) with different bytes must not overwrite.
        let junk = vec![0xEE; 256];
        let o = r.on_packet(&p[0], &junk, false, 0);
        assert_eq!(o.event, RxEvent::Duplicate);
        assert_eq!(o.ack, Some(AckPacket { syndrome: AckSyndrome::Ack, psn: Psn::new(0), msn: 1 }));
        assert_eq!(&r.region(RKEY).unwrap().data[..512], &d[..]);
        assert_eq!(r.counters().duplicates, 1);
    }

    #[test]
    fn rejects_bad_requests_with_the_right_nak() {
        let mut r = rx(cfg256());
        let only = |va: u64, rkey: u32, len: u32| WritePacket {
            opcode: Opcode::WriteOnly,
            psn: Psn::ZERO,
            ack_req: true,
            reth: Some(Reth { va, rkey, len }),
            payload_offset: 0,
            payload_len: len,
        };
        let buf = [0u8; 256];
        let cases = [
            (only(VA, 0x99, 10), RejectReason::InvalidRkey),
            (only(VA - 1, RKEY, 10), RejectReason::OutOfBounds),
            (only(VA + 64 * 1024 - 5, RKEY, 10), RejectReason::OutOfBounds),
            (WritePacket { reth: None, ..only(VA, RKEY, 10) }, RejectReason::MissingReth),
            (
                WritePacket { opcode: Opcode::WriteMiddle, reth: None, ..only(VA, RKEY, 256) },
                RejectReason::OpcodeSequence,
            ),
            (
                WritePacket { reth: Some(Reth { va: VA, rkey: RKEY, len: 11 }), ..only(VA, RKEY, 10) },
                RejectReason::LengthMismatch,
            ),
        ];
        for (p, reason) in cases {
            let o = r.on_packet(&p, &buf[..p.payload_len as usize], false, 0);
            assert_eq!(o.event, RxEvent::Rejected(reason), "{p:?}");
            assert_eq!(o.ack.map(|a| a.syndrome), reason.nak());
            assert_eq!(r.expected_psn(), Psn::ZERO, "refused packets do not advance the ePSN");
        }
        // Payload slice disagrees with the descriptor: dropped, no NAK, no panic.
        let o = r.on_packet(&only(VA, RKEY, 10), &buf[..9], false, 0);
        assert_eq!(o, RxOutcome { ack: None, event: RxEvent::Rejected(RejectReason::PayloadLengthMismatch) });
        assert_eq!(r.counters().rejected, 7);
        assert!(r.region(RKEY).unwrap().data.iter().all(|&b| b == 0));
    }

    #[test]
    fn counts_ce_marked_packets() {
        let mut c = cfg256();
        c.ack_every = 1_000_000;
        let mut r = rx(c);
        let d = data(200 * 256);
        let p = packets(200 * 256, 0, 0, SegmentMode::FirstMiddleLast);
        for (i, pk) in p.iter().enumerate() {
            let o = pk.payload_offset as usize;
            r.on_packet(pk, &d[o..o + 256], i % 2 == 0, i as u64 * 1_000);
        }
        assert_eq!((r.counters().ce_marked, r.counters().packets_received), (100, 200));
    }

    #[test]
    fn coalescing_delay_flushes_pending_ack() {
        let mut c = cfg256();
        c.ack_every = 100;
        c.ack_delay_ns = Some(10_000);
        let mut r = rx(c);
        let d = data(5 * 256);
        let p = packets(5 * 256, 0, 0, SegmentMode::FirstMiddleLast);
        assert_eq!(r.next_deadline(), None);
        for (i, pk) in p[..3].iter().enumerate() {
            let o = pk.payload_offset as usize;
            let out = r.on_packet(pk, &d[o..o + 256], false, 1_000 + i as u64 * 3_000);
            assert_eq!(out.ack, None);
        }
        // Deadline counts from the oldest unacknowledged packet (t = 1000).
        assert_eq!(r.next_deadline(), Some(11_000));
        assert!(r.owes_ack());
        assert_eq!(r.poll(10_999), None);
        assert_eq!(r.poll(11_000), Some(AckPacket { syndrome: AckSyndrome::Ack, psn: Psn::new(2), msn: 0 }));
        assert!(!r.owes_ack());
        assert_eq!(r.next_deadline(), None);
        assert_eq!(r.poll(50_000), None, "nothing pending after the flush");
        // Without a delay, nothing is flushed by time.
        let mut c2 = c;
        c2.ack_delay_ns = None;
        let mut r2 = rx(c2);
        r2.on_packet(&p[0], &d[..256], false, 0);
        assert_eq!(r2.next_deadline(), None);
        assert_eq!(r2.poll(u64::MAX), None);
    }

    fn ooo(initial: u32) -> ReceiverConfig {
        let mut c = cfg256();
        c.initial_psn = Psn::new(initial);
        c.out_of_order = true;
        c.reorder_window_ns = Some(50_000);
        c
    }

    /// Delivers `p[order[k]]` at time `k` µs; returns the outcomes in arrival order.
    fn deliver_in(r: &mut Receiver, p: &[WritePacket], d: &[u8], order: &[usize]) -> Vec<RxOutcome> {
        order
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let o = p[i].payload_offset as usize;
                r.on_packet(&p[i], &d[o..o + p[i].payload_len as usize], false, k as u64 * 1_000)
            })
            .collect()
    }

    /// Blocks of `n` packets, each block reversed: 7 of every 8 packets arrive past a hole.
    fn reversed_blocks(len: usize, n: usize) -> Vec<usize> {
        (0..len).collect::<Vec<_>>().chunks(n).flat_map(|c| c.iter().rev().copied().collect::<Vec<_>>()).collect()
    }

    #[test]
    fn write_only_places_reordered_packets_across_the_psn_wrap_without_a_nak() {
        // 40 packets from PSN 0xFF_FFF0: the stream wraps to 0 in the third block.
        let mut r = rx(ooo(0xFF_FFF0));
        let d = data(40 * 256);
        let p = packets(40 * 256, 0, 0xFF_FFF0, SegmentMode::WriteOnlyPerPacket);
        let order = reversed_blocks(40, 8);
        let out = deliver_in(&mut r, &p, &d, &order);
        assert_eq!(&r.region(RKEY).unwrap().data[..40 * 256], &d[..], "every packet at its RETH address");
        let c = *r.counters();
        assert_eq!(c.out_of_order, 35, "7 of every 8 arrive past a hole");
        assert_eq!(
            (c.naks_sent, c.out_of_sequence, c.duplicates, c.rejected),
            (0, 0, 0, 0),
            "reordering alone: no NAK"
        );
        assert_eq!((c.packets_placed, c.packets_completed, c.messages_completed), (40, 40, 40));
        assert_eq!(c.bytes_placed, 40 * 256);
        assert_eq!(r.expected_psn(), Psn::new(0x18), "wrapped past 0xFF_FFFF");
        assert_eq!(r.msn(), 40);
        assert_eq!(r.pending_out_of_order(), 0);
        for (k, o) in out.iter().enumerate() {
            if k % 8 == 7 {
                // The block's first packet fills the hole: completes 8, ACKed at once.
                assert_eq!(o.event, RxEvent::Placed { message_complete: true });
                let through = Psn::new(0xFF_FFF0).add(k as u32);
                assert_eq!(o.ack, Some(AckPacket { syndrome: AckSyndrome::Ack, psn: through, msn: k as u32 + 1 }));
            } else {
                assert_eq!(o.event, RxEvent::PlacedOutOfOrder);
                assert_eq!(o.ack, None, "nothing new to acknowledge behind a hole");
            }
        }
        assert_eq!(r.next_deadline(), None, "no hole, nothing unacknowledged");
    }

    #[test]
    fn ack_never_passes_the_first_hole() {
        let mut r = rx(ooo(100));
        let d = data(6 * 256);
        let p = packets(6 * 256, 0, 100, SegmentMode::WriteOnlyPerPacket);
        // 0, then 2..5 (1 is late), then 1.
        let out = deliver_in(&mut r, &p, &d, &[0, 2, 3, 4, 5]);
        assert!(out[1..].iter().all(|o| o.ack.is_none() && o.event == RxEvent::PlacedOutOfOrder));
        assert_eq!(r.expected_psn(), Psn::new(101));
        assert_eq!(r.pending_out_of_order(), 4);
        assert_eq!(r.counters().packets_completed, 1, "PSNs 102..=105 are placed but not complete");
        // The coalesced ACK that the timer flushes names PSN 100, the last before the hole.
        assert_eq!(r.poll(10_000), Some(AckPacket { syndrome: AckSyndrome::Ack, psn: Psn::new(100), msn: 1 }));
        let o = r.on_packet(&p[1], &d[256..512], false, 20_000);
        assert_eq!(o.ack, Some(AckPacket { syndrome: AckSyndrome::Ack, psn: Psn::new(105), msn: 6 }));
        assert_eq!(&r.region(RKEY).unwrap().data[..6 * 256], &d[..]);
    }

    #[test]
    fn first_middle_last_under_reordering_naks_and_counts_out_of_order() {
        for out_of_order in [false, true] {
            // A plain RC responder, and one with out-of-order placement (which cannot place
            // Middle/Last: they have no address of their own).
            let mut c = ooo(0xFF_FFFE);
            c.out_of_order = out_of_order;
            let mut r = rx(c);
            let d = data(8 * 256);
            let p = packets(8 * 256, 0, 0xFF_FFFE, SegmentMode::FirstMiddleLast);
            // Pairs swapped: 1 0 3 2 5 4 7 6.
            let out = deliver_in(&mut r, &p, &d, &[1, 0, 3, 2, 5, 4, 7, 6]);
            assert_eq!(out[0].event, RxEvent::OutOfSequence);
            assert_eq!(
                out[0].ack,
                Some(AckPacket { syndrome: AckSyndrome::NakPsnSequenceError, psn: Psn::new(0xFF_FFFE), msn: 0 })
            );
            assert!(matches!(out[1].event, RxEvent::Placed { message_complete: false }));
            // 0 ended the episode; 3 arrives when 1 is expected (1 was dropped): a new one.
            assert_eq!(
                out[2].ack.map(|a| (a.syndrome, a.psn)),
                Some((AckSyndrome::NakPsnSequenceError, Psn::new(0xFF_FFFF)))
            );
            assert!(out[3..].iter().all(|o| o.event == RxEvent::OutOfSequence && o.ack.is_none()));
            let cs = *r.counters();
            assert_eq!(cs.out_of_order, 7, "out_of_order {out_of_order}: every packet but 0 arrived past a hole");
            assert_eq!(cs.out_of_sequence, 7);
            assert_eq!(cs.naks_sent, 2, "one NAK per episode");
            assert_eq!(cs.packets_placed, 1, "only PSN 0xFF_FFFE was placed");
            assert_eq!(r.expected_psn(), Psn::new(0xFF_FFFF), "go-back-N must resend from here");
            // Go-back-N resends 1..7 in order: placed, data verified across the wrap.
            let out = deliver_in(&mut r, &p, &d, &[1, 2, 3, 4, 5, 6, 7]);
            assert!(out.iter().all(|o| matches!(o.event, RxEvent::Placed { .. })));
            assert_eq!(&r.region(RKEY).unwrap().data[..8 * 256], &d[..]);
            assert_eq!((r.msn(), r.expected_psn()), (1, Psn::new(6)));
        }
    }

    #[test]
    fn a_real_loss_is_naked_once_after_the_reordering_window() {
        let mut r = rx(ooo(0));
        let d = data(10 * 256);
        let p = packets(10 * 256, 0, 0, SegmentMode::WriteOnlyPerPacket);
        let sl = |i: usize| &d[i * 256..(i + 1) * 256];
        r.on_packet(&p[0], sl(0), false, 0);
        r.poll(100_000);
        // PSN 1 is lost; 2 and 3 arrive at t = 5 µs and 8 µs.
        r.on_packet(&p[2], sl(2), false, 5_000);
        r.on_packet(&p[3], sl(3), false, 8_000);
        // The hole is known since the first later packet (5 µs); window 50 µs; the coalesced
        // ACK flush has nothing pending.
        assert_eq!(r.next_deadline(), Some(55_000));
        assert_eq!(r.poll(54_999), None);
        let nak = r.poll(55_000);
        assert_eq!(nak, Some(AckPacket { syndrome: AckSyndrome::NakPsnSequenceError, psn: Psn::new(1), msn: 1 }));
        assert_eq!(r.next_deadline(), None, "one NAK per hole");
        assert_eq!(r.poll(1_000_000), None);
        // Go-back-N from 1: 1 fills the hole, the resent 2 and 3 are behind it now.
        let o = r.on_packet(&p[1], sl(1), false, 60_000);
        assert_eq!(o.ack.map(|a| a.psn), Some(Psn::new(3)));
        let junk = vec![0xEE; 256];
        assert_eq!(r.on_packet(&p[2], &junk, false, 61_000).event, RxEvent::Duplicate);
        // A later loss is a new hole with its own NAK.
        r.on_packet(&p[6], sl(6), false, 70_000);
        assert_eq!(r.next_deadline(), Some(120_000));
        assert_eq!(r.poll(120_000).map(|a| (a.syndrome, a.psn)), Some((AckSyndrome::NakPsnSequenceError, Psn::new(4))));
        for (i, pk) in p.iter().enumerate().skip(4) {
            r.on_packet(pk, sl(i), false, 130_000);
        }
        assert_eq!(&r.region(RKEY).unwrap().data[..10 * 256], &d[..], "duplicates did not overwrite");
        let c = r.counters();
        assert_eq!((c.naks_sent, c.out_of_order, c.duplicates, c.packets_completed), (2, 3, 2, 10));
        // Without a reordering window only the requester's timeout repairs a loss.
        let mut c = ooo(0);
        c.reorder_window_ns = None;
        let mut r = rx(c);
        r.on_packet(&p[2], sl(2), false, 0);
        assert_eq!(r.next_deadline(), None);
    }

    #[test]
    fn a_resent_packet_already_placed_ahead_is_a_duplicate_and_not_reexecuted() {
        let mut r = rx(ooo(0));
        let d = data(4 * 256);
        let p = packets(4 * 256, 0, 0, SegmentMode::WriteOnlyPerPacket);
        r.on_packet(&p[2], &d[512..768], false, 0);
        let junk = vec![0xEE; 256];
        let o = r.on_packet(&p[2], &junk, false, 1);
        assert_eq!(o, RxOutcome { ack: None, event: RxEvent::Duplicate });
        assert_eq!(r.counters().out_of_order, 1, "a duplicate is not another out-of-order arrival");
        assert_eq!(&r.region(RKEY).unwrap().data[512..768], &d[512..768]);
        assert_eq!(r.pending_out_of_order(), 1);
    }

    #[test]
    fn out_of_order_placement_is_bounded_by_its_window_and_checks_the_reth() {
        let mut r = Receiver::new(ooo(0), vec![MemoryRegion { va: VA, rkey: RKEY, data: vec![0; 256] }]).unwrap();
        let only = |psn: u32, va: u64| WritePacket {
            opcode: Opcode::WriteOnly,
            psn: Psn::new(psn),
            ack_req: false,
            reth: Some(Reth { va, rkey: RKEY, len: 16 }),
            payload_offset: 0,
            payload_len: 16,
        };
        let buf = [7u8; 16];
        // The last PSN the bitmap covers is placed; one further is a sequence error.
        assert_eq!(r.on_packet(&only(OOO_WINDOW - 1, VA), &buf, false, 0).event, RxEvent::PlacedOutOfOrder);
        let o = r.on_packet(&only(OOO_WINDOW, VA), &buf, false, 0);
        assert_eq!(o.event, RxEvent::OutOfSequence);
        assert_eq!(o.ack.map(|a| (a.syndrome, a.psn)), Some((AckSyndrome::NakPsnSequenceError, Psn::ZERO)));
        // Ahead, a bad address is still refused with its NAK, and nothing is marked arrived.
        let o = r.on_packet(&only(5, VA + 250), &buf, false, 0);
        assert_eq!(o.event, RxEvent::Rejected(RejectReason::OutOfBounds));
        assert_eq!(r.pending_out_of_order(), 1);
        // A First at the expected PSN whose next PSN already arrived as an Only cannot be.
        let mut r = rx(ooo(0));
        r.on_packet(&only(1, VA), &buf, false, 0);
        let first = WritePacket {
            opcode: Opcode::WriteFirst,
            reth: Some(Reth { va: VA, rkey: RKEY, len: 512 }),
            payload_len: 256,
            ..only(0, VA)
        };
        assert_eq!(r.on_packet(&first, &[0; 256], false, 0).event, RxEvent::Rejected(RejectReason::OpcodeSequence));
    }

    #[test]
    fn rejects_bad_config() {
        let mut c = cfg256();
        c.ack_every = 0;
        assert!(Receiver::new(c, vec![]).is_err());
        let mrs = vec![
            MemoryRegion { va: 0, rkey: 1, data: vec![0; 4] },
            MemoryRegion { va: 100, rkey: 1, data: vec![0; 4] },
        ];
        assert_eq!(Receiver::new(cfg256(), mrs).unwrap_err(), ReceiverError::DuplicateRkey(1));
    }
}
