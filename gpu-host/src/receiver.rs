//! RC responder for RDMA WRITE (IBTA Vol. 1 §9.7 "Reliable service", responder side, and
//! §9.7.5 ACK/NAK generation), with the DCQCN notification point (CNP pacing).
//!
//! * Expected-PSN check: an in-sequence packet is validated and placed; a packet ahead of
//!   the expected PSN (within 2^23) is a sequence error, answered by **one** NAK
//!   (PSN sequence error, carrying the expected PSN) per out-of-sequence episode — the
//!   episode ends when the expected packet arrives; a packet behind it is a duplicate,
//!   which is not re-executed but re-ACKed with the last acknowledged PSN.
//! * Placement: First/Only carry a RETH; the VA, R_Key and length are checked against the
//!   registered [`MemoryRegion`]; Middle/Last continue at the running offset. First/Middle
//!   must carry exactly one PMTU, Last the remainder, Only the RETH length.
//! * Coalesced ACKs: one ACK every `ack_every` placed packets, or at once when the packet
//!   has AckReq (and/or ends a message), configurable; optionally flushed by
//!   [`Receiver::poll`] a fixed delay after the oldest unacknowledged packet.
//! * CNP: at most one per QP per interval (default 50 µs) when CE-marked packets arrive.

use crate::dcqcn::{NotificationPoint, DEFAULT_CNP_INTERVAL_NS};
use crate::desc::{AckPacket, AckSyndrome, Opcode, WritePacket};
use crate::psn::{Psn, PSN_MASK};
use crate::segment::PathMtu;

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
    /// ACK after this many placed packets at the latest (≥ 1; 1 = ACK every packet).
    pub ack_every: u32,
    /// ACK at once when a packet has AckReq set.
    pub ack_on_ack_req: bool,
    /// ACK at once at the end of every message (Last/Only).
    pub ack_on_message_end: bool,
    /// Minimum time between two CNPs of this QP, ns.
    pub cnp_interval_ns: u64,
    /// Coalescing delay: an unacknowledged placed packet is ACKed by [`Receiver::poll`] at
    /// most this long after it arrived (`None`: only the packet-count / AckReq rules).
    pub ack_delay_ns: Option<u64>,
}

impl ReceiverConfig {
    /// Defaults: MTU 4096, ACK every 16 packets or on AckReq or 10 µs after the oldest
    /// unacknowledged packet, CNP interval 50 µs.
    pub fn new(mtu: PathMtu) -> ReceiverConfig {
        ReceiverConfig {
            mtu,
            initial_psn: Psn::ZERO,
            ack_every: 16,
            ack_on_ack_req: true,
            ack_on_message_end: false,
            cnp_interval_ns: DEFAULT_CNP_INTERVAL_NS,
            ack_delay_ns: Some(10_000),
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
    /// First/Only inside a message, or Middle/Last outside one.
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
        /// It ended a message (MSN advanced).
        message_complete: bool,
    },
    /// Behind the expected PSN: not re-executed, re-ACKed.
    Duplicate,
    /// Ahead of the expected PSN: dropped.
    OutOfSequence,
    /// In sequence but refused.
    Rejected(RejectReason),
}

/// Responder output for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOutcome {
    /// ACK or NAK to send back, if any.
    pub ack: Option<AckPacket>,
    /// Send a CNP to the requester now.
    pub cnp: bool,
    /// What happened.
    pub event: RxEvent,
}

/// Responder counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    /// Packets offered.
    pub packets_received: u64,
    /// Packets placed in order.
    pub packets_placed: u64,
    /// Payload bytes placed.
    pub bytes_placed: u64,
    /// Messages completed.
    pub messages_completed: u64,
    /// Duplicates (re-ACKed, not re-executed).
    pub duplicates: u64,
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
    /// CNPs generated.
    pub cnps_sent: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InMessage {
    mr: usize,
    offset: usize,
    remaining: u32,
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
    np: NotificationPoint,
    counters: ReceiverCounters,
}

impl Receiver {
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
            np: NotificationPoint::new(cfg.cnp_interval_ns),
            counters: ReceiverCounters::default(),
        })
    }

    /// Expected PSN.
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

    /// Processes one request packet received at `now`. `payload` must be the packet's
    /// payload (`pkt.payload_len` bytes); `ce` is true when the IP ECN field was CE (11).
    /// Allocation-free.
    pub fn on_packet(&mut self, pkt: &WritePacket, payload: &[u8], ce: bool, now: u64) -> RxOutcome {
        self.counters.packets_received += 1;
        let cnp = ce && {
            self.counters.ce_marked += 1;
            let send = self.np.on_ce(now);
            if send {
                self.counters.cnps_sent += 1;
            }
            send
        };
        let d = pkt.psn.diff(self.epsn);
        if d < 0 {
            self.counters.duplicates += 1;
            let last = self.epsn.sub(1);
            let ack = self.ack_now(AckSyndrome::Ack, last);
            return RxOutcome { ack: Some(ack), cnp, event: RxEvent::Duplicate };
        }
        if d > 0 {
            self.counters.out_of_sequence += 1;
            let ack = if self.nak_outstanding {
                None
            } else {
                self.nak_outstanding = true;
                Some(self.ack_now(AckSyndrome::NakPsnSequenceError, self.epsn))
            };
            return RxOutcome { ack, cnp, event: RxEvent::OutOfSequence };
        }
        match self.place(pkt, payload) {
            Ok(message_complete) => {
                self.nak_outstanding = false;
                self.epsn = self.epsn.next();
                self.counters.packets_placed += 1;
                self.counters.bytes_placed += u64::from(pkt.payload_len);
                if message_complete {
                    self.msn = (self.msn + 1) & PSN_MASK;
                    self.counters.messages_completed += 1;
                }
                if self.unacked == 0 {
                    self.unacked_since = now;
                }
                self.unacked += 1;
                let want = (pkt.ack_req && self.cfg.ack_on_ack_req)
                    || (message_complete && self.cfg.ack_on_message_end)
                    || self.unacked >= self.cfg.ack_every;
                let ack = want.then(|| self.ack_now(AckSyndrome::Ack, pkt.psn));
                RxOutcome { ack, cnp, event: RxEvent::Placed { message_complete } }
            }
            Err(reason) => {
                self.counters.rejected += 1;
                let ack = reason.nak().map(|s| self.ack_now(s, pkt.psn));
                RxOutcome { ack, cnp, event: RxEvent::Rejected(reason) }
            }
        }
    }

    /// When [`Receiver::poll`] will flush a coalesced ACK (`None`: nothing pending or no
    /// coalescing delay configured).
    pub fn next_deadline(&self) -> Option<u64> {
        match (self.unacked, self.cfg.ack_delay_ns) {
            (0, _) | (_, None) => None,
            (_, Some(d)) => Some(self.unacked_since.saturating_add(d)),
        }
    }

    /// Flushes the coalesced ACK if the coalescing delay has expired at `now`.
    pub fn poll(&mut self, now: u64) -> Option<AckPacket> {
        match self.next_deadline() {
            Some(d) if d <= now => Some(self.ack_now(AckSyndrome::Ack, self.epsn.sub(1))),
            _ => None,
        }
    }

    /// Validates and places an in-sequence packet; returns whether it ended a message.
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
            (WritePacket { opcode: Opcode::WriteMiddle, reth: None, ..only(VA, RKEY, 256) }, RejectReason::OpcodeSequence),
            (WritePacket { reth: Some(Reth { va: VA, rkey: RKEY, len: 11 }), ..only(VA, RKEY, 10) }, RejectReason::LengthMismatch),
        ];
        for (p, reason) in cases {
            let o = r.on_packet(&p, &buf[..p.payload_len as usize], false, 0);
            assert_eq!(o.event, RxEvent::Rejected(reason), "{p:?}");
            assert_eq!(o.ack.map(|a| a.syndrome), reason.nak());
            assert_eq!(r.expected_psn(), Psn::ZERO, "refused packets do not advance the ePSN");
        }
        // Payload slice disagrees with the descriptor: dropped, no NAK, no panic.
        let o = r.on_packet(&only(VA, RKEY, 10), &buf[..9], false, 0);
        assert_eq!(o, RxOutcome { ack: None, cnp: false, event: RxEvent::Rejected(RejectReason::PayloadLengthMismatch) });
        assert_eq!(r.counters().rejected, 7);
        assert!(r.region(RKEY).unwrap().data.iter().all(|&b| b == 0));
    }

    #[test]
    fn cnp_rate_limited_per_qp() {
        let mut c = cfg256();
        c.ack_every = 1_000_000;
        let mut r = rx(c);
        let d = data(200 * 256);
        let p = packets(200 * 256, 0, 0, SegmentMode::FirstMiddleLast);
        let mut cnps = Vec::new();
        // One CE packet every 1 µs for 200 µs.
        for (i, pk) in p.iter().enumerate() {
            let now = 5_000 + i as u64 * 1_000;
            let o = pk.payload_offset as usize;
            if r.on_packet(pk, &d[o..o + 256], true, now).cnp {
                cnps.push(now);
            }
        }
        assert_eq!(cnps, vec![5_000, 55_000, 105_000, 155_000]);
        assert_eq!(r.counters().ce_marked, 200);
        assert_eq!(r.counters().cnps_sent, 4);
        // Non-CE packets never trigger a CNP.
        let mut r2 = rx(c);
        assert!(deliver(&mut r2, &p, &d).iter().all(|o| !o.cnp));
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
        assert_eq!(r.poll(10_999), None);
        assert_eq!(r.poll(11_000), Some(AckPacket { syndrome: AckSyndrome::Ack, psn: Psn::new(2), msn: 0 }));
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
