//! Ultra Ethernet Transport: the two ends of a Packet Delivery Context in Reliable Unordered
//! Delivery (RUD), as pure state machines (UEC Specification 1.0 PDS; the model in
//! ../shared/reference/ultra-ethernet-and-ai-cluster-notes.txt; wire formats in
//! `rocefab_wire::uet`).
//!
//! * [`PdcSender`]: segments posted writes into packets of at most `max_payload` bytes, each
//!   with its own PSN, buffer offset and entropy (a different path per packet when spraying);
//!   sends SYN on every packet until the first ACK names the peer's PDC; tracks every packet in
//!   flight in a window of `window_packets`; an ACK acknowledges everything up to its CACK_PSN
//!   and the PSNs its SACK bitmap sets; a NACK (a trimmed packet) sends the packet again at
//!   once; a packet unacknowledged for `rto_ns` is sent again (a timeout), the timeout doubling
//!   with every time it is sent again. A write completes
//!   when all its packets are acknowledged, in any order.
//! * Congestion control is a window (NSCC comes with issue 43), TCP's rules (RFC 5681, RFC 3168)
//!   on UET's signals: `cwnd` bytes in flight, starting at `init_cwnd_bytes` (RFC 6928's ten
//!   packets by default), doubling per round trip until the first cut (slow start), then one
//!   packet more per window acknowledged; halved on an ECN-marked ACK (at most once per smoothed
//!   RTT), on the NACK of a trimmed packet sent after the last cut (one cut per congestion
//!   episode, whether its trims hit new packets or packets sent again) and on a timeout; never
//!   below one packet.
//! * [`PdcReceiver`]: learns the PDC's start PSN from a SYN packet (PSN − psn_offset), accepts
//!   any PSN within its window in any order (the engine places the payload at the packet's own
//!   buffer offset), drops duplicates, NACKs a trimmed packet at once, and acknowledges with a
//!   cumulative PSN and a 64-PSN SACK bitmap after `ack_every_bytes` (uet-htsim's
//!   `UecSink::_bytes_unacked_threshold`, 16 KiB), on a packet that asks (AR), or when the
//!   coalescing delay ends.
//!
//! The SACK bitmap's bit i (least significant first) stands for PSN `cack_psn +
//! sack_psn_offset + i`: the sources read for the wire format (xdp2, Wireshark, uet-ref-prov)
//! give the field, not its bit order, so this is rocefab's reading, used at both ends.
//!
//! PSNs are 32 bits and compared modulo 2^32. Nothing here allocates after construction except
//! [`PdcSender::post_write`] (a message, not a packet).
use std::collections::VecDeque;

/// Whether PSN `a` comes before `b` (modulo 2^32).
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// How each packet's entropy is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entropy {
    /// One value for every packet of the PDC (one path, as RoCEv2's per-QP source port).
    Fixed(u16),
    /// A different value per packet among `paths` values above `base` (spraying; uet-htsim
    /// sprays over `_path_entropy_size` = 256 values by default).
    Spray { base: u16, paths: u16 },
}

impl Entropy {
    fn of(self, psn: u32, spdcid: u16) -> u16 {
        match self {
            Entropy::Fixed(v) => v,
            Entropy::Spray { base, paths } => {
                // A multiplicative hash of the PSN, so consecutive packets spread over the paths.
                let h = psn.wrapping_add(u32::from(spdcid) << 16).wrapping_mul(0x9e37_79b1) >> 16;
                base.wrapping_add((h % u32::from(paths.max(1))) as u16)
            }
        }
    }
}

/// A sender's configuration (wall clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    pub max_payload: u32,
    pub start_psn: u32,
    /// Packets tracked at once (the sequence window).
    pub window_packets: u32,
    pub init_cwnd_bytes: u64,
    pub max_cwnd_bytes: u64,
    pub rto_ns: u64,
    /// Transmissions of one packet after the first before the PDC fails.
    pub max_retransmissions: u32,
    /// ROD: packets are sent again in PSN order from the first one a NACK names (go-back-N),
    /// since the receiver drops whatever arrives past a hole.
    pub ordered: bool,
    pub entropy: Entropy,
}

/// One packet to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPacket {
    pub psn: u32,
    /// Offset of the payload in the sender's buffer.
    pub local_addr: u64,
    pub len: u32,
    /// Where the payload goes at the target (the write's remote address + offset).
    pub buffer_offset: u64,
    pub message_id: u16,
    pub request_length: u32,
    pub message_offset: u32,
    pub som: bool,
    pub eom: bool,
    /// No ACK has named the peer's PDC yet: SYN, with `psn_offset` from the start PSN.
    pub syn: bool,
    pub psn_offset: u16,
    pub dpdcid: u16,
    pub retx: bool,
    /// The oldest PSN not acknowledged, as an offset from `psn` (≤ 0; clamped to 16 bits).
    pub clear_psn_offset: i16,
    /// Ask for an ACK at once (last packet of a write, retransmissions).
    pub ar: bool,
    pub entropy: u16,
}

/// A write whose packets are all acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub len: u32,
}

/// Sender counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderCounters {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub retransmitted_on_nack: u64,
    pub retransmitted_on_timeout: u64,
    pub acks_received: u64,
    pub acks_ecn_marked: u64,
    pub nacks_trimmed: u64,
    pub nacks_other: u64,
    pub window_cuts: u64,
    /// ACKs and NACKs for PSNs outside the window (late duplicates).
    pub stale: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum SlotState {
    #[default]
    Free,
    InFlight,
    NeedRetx,
    Acked,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    state: SlotState,
    sent_at: u64,
    /// Sequence number of its message (see `PdcSender::msg_seq_base`).
    msg: u64,
    offset: u32,
    len: u32,
    transmissions: u32,
}

#[derive(Clone, Copy, Debug)]
struct Msg {
    wr_id: u64,
    local_addr: u64,
    remote: u64,
    len: u32,
    id: u16,
    packets: u32,
    acked: u32,
}

/// Why a sender failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SenderError {
    #[error("PSN {psn} was sent {times} times without an acknowledgement")]
    RetriesExhausted { psn: u32, times: u32 },
    #[error("a write of {0} bytes: writes are 1..=4 GiB - 1")]
    BadLength(u64),
}

/// The sending end of a RUD PDC.
pub struct PdcSender {
    cfg: SenderConfig,
    spdcid: u16,
    dpdcid: Option<u16>,
    /// Oldest PSN not acknowledged (every PSN before it is).
    base: u32,
    /// The next new PSN.
    next: u32,
    slots: Vec<Slot>,
    msgs: VecDeque<Msg>,
    msg_seq_base: u64,
    /// The message new packets come from (a sequence number) and the offset in it.
    cur_msg: u64,
    cur_off: u32,
    next_msg_id: u16,
    retx: VecDeque<u32>,
    inflight: u64,
    cwnd: u64,
    /// Additive increase: bytes acknowledged since the last increase.
    acked_since: u64,
    /// Slow start below it (RFC 5681): the window doubles per round trip until the first cut.
    ssthresh: u64,
    /// Smoothed round-trip time (ns) from ACKs of packets sent once (Karn), RFC 6298's 1/8 gain.
    srtt: Option<u64>,
    /// When the window was last cut: at most one cut per smoothed RTT.
    last_cut: Option<u64>,
    /// The earliest a packet in flight may time out (a bound: scanned lazily).
    next_timeout: Option<u64>,
    completions: VecDeque<Completion>,
    c: SenderCounters,
}

impl PdcSender {
    /// A sender of source PDC id `spdcid`.
    pub fn new(cfg: SenderConfig, spdcid: u16) -> PdcSender {
        let w = cfg.window_packets.max(1) as usize;
        PdcSender {
            cfg,
            spdcid,
            dpdcid: None,
            base: cfg.start_psn,
            next: cfg.start_psn,
            slots: vec![Slot::default(); w],
            msgs: VecDeque::new(),
            msg_seq_base: 0,
            cur_msg: 0,
            cur_off: 0,
            next_msg_id: 0,
            retx: VecDeque::with_capacity(w),
            inflight: 0,
            cwnd: cfg
                .init_cwnd_bytes
                .clamp(u64::from(cfg.max_payload), cfg.max_cwnd_bytes.max(u64::from(cfg.max_payload))),
            acked_since: 0,
            ssthresh: cfg.max_cwnd_bytes,
            srtt: None,
            last_cut: None,
            next_timeout: None,
            completions: VecDeque::new(),
            c: SenderCounters::default(),
        }
    }

    pub fn counters(&self) -> &SenderCounters {
        &self.c
    }

    pub fn spdcid(&self) -> u16 {
        self.spdcid
    }

    /// The peer's PDC id, once an ACK named it.
    pub fn dpdcid(&self) -> Option<u16> {
        self.dpdcid
    }

    /// The congestion window (bytes).
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// Bytes in flight.
    pub fn inflight(&self) -> u64 {
        self.inflight
    }

    /// Nothing posted is unacknowledged.
    pub fn is_idle(&self) -> bool {
        self.msgs.is_empty()
    }

    /// Posts a write of `len` bytes from `local_addr` of the sender's buffer to `remote` at the
    /// target.
    pub fn post_write(&mut self, wr_id: u64, local_addr: u64, remote: u64, len: u64) -> Result<(), SenderError> {
        let len32 = u32::try_from(len).ok().filter(|&l| l > 0).ok_or(SenderError::BadLength(len))?;
        let packets = len32.div_ceil(self.cfg.max_payload);
        let id = self.next_msg_id;
        self.next_msg_id = self.next_msg_id.wrapping_add(1);
        self.msgs.push_back(Msg { wr_id, local_addr, remote, len: len32, id, packets, acked: 0 });
        Ok(())
    }

    /// The next completed write, in posting order.
    pub fn pop_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    fn slot(&self, psn: u32) -> usize {
        (psn as usize) % self.slots.len()
    }

    /// Whether `psn` is in flight or waiting (sent, not acknowledged).
    fn in_window(&self, psn: u32) -> bool {
        !before(psn, self.base) && before(psn, self.next)
    }

    fn packet(&self, psn: u32, retx: bool) -> TxPacket {
        let s = &self.slots[self.slot(psn)];
        let m = &self.msgs[(s.msg - self.msg_seq_base) as usize];
        let eom = s.offset + s.len == m.len;
        TxPacket {
            psn,
            local_addr: m.local_addr + u64::from(s.offset),
            len: s.len,
            buffer_offset: m.remote + u64::from(s.offset),
            message_id: m.id,
            request_length: m.len,
            message_offset: s.offset,
            som: s.offset == 0,
            eom,
            syn: self.dpdcid.is_none(),
            psn_offset: (psn.wrapping_sub(self.cfg.start_psn) & 0x0fff) as u16,
            dpdcid: self.dpdcid.unwrap_or(0),
            retx,
            clear_psn_offset: (self.base.wrapping_sub(psn) as i32).max(i32::from(i16::MIN)) as i16,
            ar: eom || retx,
            entropy: self.cfg.entropy.of(psn, self.spdcid),
        }
    }

    fn room(&self, len: u32) -> bool {
        self.inflight == 0 || self.inflight + u64::from(len) <= self.cwnd
    }

    /// The next packet to send at `now`: a packet to send again first, then a new one, as the
    /// window allows.
    pub fn next_packet(&mut self, now: u64) -> Option<TxPacket> {
        while let Some(&psn) = self.retx.front() {
            let i = self.slot(psn);
            if !self.in_window(psn) || self.slots[i].state != SlotState::NeedRetx {
                self.retx.pop_front();
                continue;
            }
            if !self.room(self.slots[i].len) {
                return None;
            }
            self.retx.pop_front();
            let s = &mut self.slots[i];
            s.state = SlotState::InFlight;
            s.sent_at = now;
            s.transmissions += 1;
            self.inflight += u64::from(s.len);
            self.arm(now);
            let p = self.packet(psn, true);
            self.count_sent(&p);
            return Some(p);
        }
        if self.next.wrapping_sub(self.base) >= self.slots.len() as u32 {
            return None;
        }
        let mi = (self.cur_msg - self.msg_seq_base) as usize;
        let m = *self.msgs.get(mi)?;
        let len = (m.len - self.cur_off).min(self.cfg.max_payload);
        if !self.room(len) {
            return None;
        }
        let psn = self.next;
        let i = self.slot(psn);
        self.slots[i] = Slot {
            state: SlotState::InFlight,
            sent_at: now,
            msg: self.cur_msg,
            offset: self.cur_off,
            len,
            transmissions: 1,
        };
        self.next = self.next.wrapping_add(1);
        self.cur_off += len;
        if self.cur_off == m.len {
            self.cur_msg += 1;
            self.cur_off = 0;
        }
        self.inflight += u64::from(len);
        self.arm(now);
        let p = self.packet(psn, false);
        self.count_sent(&p);
        Some(p)
    }

    fn count_sent(&mut self, p: &TxPacket) {
        self.c.packets_sent += 1;
        self.c.bytes_sent += u64::from(p.len);
    }

    fn arm(&mut self, now: u64) {
        let t = now + self.cfg.rto_ns;
        self.next_timeout = Some(self.next_timeout.map_or(t, |x| x.min(t)));
    }

    /// The retransmission timeout of a packet sent `transmissions` times: `rto_ns`, doubled
    /// for every time it was sent again (RFC 6298 §5.5), at most 64 times: senders whose
    /// packets a full queue dropped do not all send again in step.
    fn rto(&self, transmissions: u32) -> u64 {
        self.cfg.rto_ns << transmissions.saturating_sub(1).min(6)
    }

    fn ack_one(&mut self, psn: u32, now: u64) -> u64 {
        let i = self.slot(psn);
        let s = &mut self.slots[i];
        match s.state {
            SlotState::InFlight | SlotState::NeedRetx => {
                if s.state == SlotState::InFlight {
                    self.inflight -= u64::from(s.len);
                    if s.transmissions == 1 {
                        let sample = now.saturating_sub(s.sent_at);
                        self.srtt = Some(self.srtt.map_or(sample, |r| r - r / 8 + sample / 8));
                    }
                }
                s.state = SlotState::Acked;
                let len = s.len;
                let mi = (s.msg - self.msg_seq_base) as usize;
                self.msgs[mi].acked += 1;
                u64::from(len)
            }
            _ => 0,
        }
    }

    /// Halves the window at `now`, unless it was cut less than a smoothed RTT ago: the signals
    /// of one round trip (its marks, its trims, whether of new packets or of packets sent again)
    /// cut once. Before any RTT sample every signal cuts.
    fn cut(&mut self, now: u64) {
        if let (Some(last), Some(rtt)) = (self.last_cut, self.srtt) {
            if now < last + rtt {
                return;
            }
        }
        self.cwnd = (self.cwnd / 2).max(u64::from(self.cfg.max_payload));
        self.ssthresh = self.cwnd;
        self.last_cut = Some(now);
        self.acked_since = 0;
        self.c.window_cuts += 1;
    }

    /// The smoothed round-trip time, once an ACK gave a sample.
    pub fn srtt(&self) -> Option<u64> {
        self.srtt
    }

    /// An ACK from peer PDC `peer_pdcid`: every PSN up to `cack_psn` and those of the SACK
    /// bitmap (bit i: `sack_base + i`) arrived; `ecn_marked`: the acknowledged packet was.
    pub fn on_ack(
        &mut self,
        peer_pdcid: u16,
        cack_psn: u32,
        sack_base: u32,
        sack_bitmap: u64,
        ecn_marked: bool,
        now: u64,
    ) {
        self.c.acks_received += 1;
        self.dpdcid.get_or_insert(peer_pdcid);
        let mut acked = 0u64;
        let upto = cack_psn.wrapping_add(1);
        if before(self.base, upto) {
            if before(self.next, upto) {
                // Acknowledges what was never sent.
                self.c.stale += 1;
            } else {
                let mut p = self.base;
                while p != upto {
                    acked += self.ack_one(p, now);
                    p = p.wrapping_add(1);
                }
            }
        }
        let mut bits = sack_bitmap;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            let p = sack_base.wrapping_add(i);
            if self.in_window(p) {
                acked += self.ack_one(p, now);
            }
        }
        while self.base != self.next && self.slots[self.slot(self.base)].state == SlotState::Acked {
            let i = self.slot(self.base);
            self.slots[i].state = SlotState::Free;
            self.base = self.base.wrapping_add(1);
        }
        while let Some(m) = self.msgs.front() {
            if m.acked < m.packets || self.cur_msg == self.msg_seq_base {
                break;
            }
            self.completions.push_back(Completion { wr_id: m.wr_id, len: m.len });
            self.msgs.pop_front();
            self.msg_seq_base += 1;
        }
        if ecn_marked {
            self.c.acks_ecn_marked += 1;
            self.cut(now);
        } else if acked > 0 && self.cwnd < self.ssthresh {
            // Slow start: a window's worth more per window acknowledged, until the first cut.
            self.cwnd = (self.cwnd + acked).min(self.ssthresh).min(self.cfg.max_cwnd_bytes);
        } else if acked > 0 {
            self.acked_since += acked;
            if self.acked_since >= self.cwnd {
                self.acked_since -= self.cwnd;
                self.cwnd = (self.cwnd + u64::from(self.cfg.max_payload)).min(self.cfg.max_cwnd_bytes);
            }
        }
        if self.inflight == 0 {
            self.next_timeout = None;
        }
    }

    /// A NACK for `psn`; `trimmed`: its code says the packet was trimmed (sent again at once,
    /// and the window is cut); any other code sends it again too.
    pub fn on_nack(&mut self, psn: u32, trimmed: bool, now: u64) {
        if trimmed {
            self.c.nacks_trimmed += 1;
        } else {
            self.c.nacks_other += 1;
        }
        if !self.in_window(psn) {
            self.c.stale += 1;
            return;
        }
        let i = self.slot(psn);
        if self.slots[i].state != SlotState::InFlight {
            return;
        }
        let sent_at = self.slots[i].sent_at;
        self.slots[i].state = SlotState::NeedRetx;
        self.inflight -= u64::from(self.slots[i].len);
        self.retx.push_back(psn);
        self.c.retransmitted_on_nack += 1;
        if self.cfg.ordered {
            self.go_back(psn);
        }
        // A packet that left before the last cut tells of the congestion that cut: one cut per
        // episode, whether its trims hit new packets or packets sent again.
        if trimmed && self.last_cut.is_none_or(|l| sent_at > l) {
            self.cut(now);
        }
    }

    /// A ROD NACK (ROD_OOO): the receiver expects `psn` and dropped what came after it; every
    /// packet from `psn` on that is in flight is sent again, in order (go-back-N).
    pub fn on_rod_nack(&mut self, psn: u32) {
        self.c.nacks_other += 1;
        if !self.in_window(psn) {
            self.c.stale += 1;
            return;
        }
        self.go_back(psn);
    }

    /// Every packet from `from` on that is not acknowledged goes out again, in PSN order: the
    /// queue of packets to send again is rebuilt so that none past `from` leaves before it.
    fn go_back(&mut self, from: u32) {
        self.retx.retain(|&q| before(q, from));
        let mut p = from;
        while p != self.next {
            let i = self.slot(p);
            match self.slots[i].state {
                SlotState::InFlight => {
                    self.slots[i].state = SlotState::NeedRetx;
                    self.inflight -= u64::from(self.slots[i].len);
                    self.retx.push_back(p);
                    self.c.retransmitted_on_nack += 1;
                }
                SlotState::NeedRetx => self.retx.push_back(p),
                _ => {}
            }
            p = p.wrapping_add(1);
        }
    }

    /// Runs the retransmission timer at `now`: every packet in flight for `rto_ns` or longer
    /// is sent again; one sent too often fails the PDC.
    pub fn poll(&mut self, now: u64) -> Result<(), SenderError> {
        if self.next_timeout.is_none_or(|t| now < t) {
            return Ok(());
        }
        let mut next: Option<u64> = None;
        let mut p = self.base;
        let mut timed_out = false;
        while p != self.next {
            let i = self.slot(p);
            let s = self.slots[i];
            if s.state == SlotState::InFlight {
                let due = s.sent_at + self.rto(s.transmissions);
                if due <= now {
                    if s.transmissions > self.cfg.max_retransmissions {
                        return Err(SenderError::RetriesExhausted { psn: p, times: s.transmissions });
                    }
                    self.slots[i].state = SlotState::NeedRetx;
                    self.inflight -= u64::from(s.len);
                    self.retx.push_back(p);
                    self.c.retransmitted_on_timeout += 1;
                    timed_out = true;
                } else {
                    next = Some(next.map_or(due, |x| x.min(due)));
                }
            }
            p = p.wrapping_add(1);
        }
        if timed_out {
            // A timeout is loss without a trim to tell of it: one window's cut.
            self.cut(now);
        }
        self.next_timeout = next;
        Ok(())
    }

    /// When [`PdcSender::poll`] may next find a timeout.
    pub fn retransmit_deadline(&self) -> Option<u64> {
        self.next_timeout
    }

    /// Something may be sent now: a packet to send again or a new one, within the sequence
    /// window and the congestion window (a sender waiting for ACKs has no work).
    pub fn has_work(&self) -> bool {
        if let Some(&psn) = self.retx.front() {
            let s = &self.slots[self.slot(psn)];
            if !self.in_window(psn) || s.state != SlotState::NeedRetx {
                // A stale entry: the next call of next_packet skips it.
                return true;
            }
            return self.room(s.len);
        }
        if self.next.wrapping_sub(self.base) >= self.slots.len() as u32 {
            return false;
        }
        match self.msgs.get((self.cur_msg - self.msg_seq_base) as usize) {
            Some(m) => self.room((m.len - self.cur_off).min(self.cfg.max_payload)),
            None => false,
        }
    }
}

/// A receiver's configuration (wall clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// PSNs tracked beyond the cumulative one (a multiple of 64).
    pub window_packets: u32,
    pub ack_every_bytes: u32,
    pub ack_delay_ns: u64,
    /// Reliable Ordered Delivery (ROD): only the next PSN is accepted; a packet past a hole is
    /// dropped and the hole NACKed once (code ROD_OOO, 0x0D), and the sender goes back to it.
    pub ordered: bool,
}

/// A received request packet, as the receiver judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxPacket {
    pub psn: u32,
    /// Its psn_offset when SYN is set.
    pub syn_offset: Option<u16>,
    /// Payload bytes.
    pub len: u32,
    /// Trimmed in the fabric (as the engine judged from its lengths or DSCP).
    pub trimmed: bool,
    /// CE-marked.
    pub ce: bool,
    /// Asks for an ACK at once.
    pub ar: bool,
}

/// What became of a received packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxVerdict {
    /// New: the engine places its payload.
    Place,
    Duplicate,
    /// Trimmed in the fabric: not placed; a NACK is owed.
    Trimmed,
    /// Outside the window, or no SYN has opened the PDC yet: dropped.
    Dropped,
    /// ROD: past a hole, dropped; a NACK (ROD_OOO) for the expected PSN is owed, once per hole.
    OutOfOrder {
        expected: u32,
    },
}

/// Receiver counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    pub packets_received: u64,
    pub packets_placed: u64,
    pub bytes_placed: u64,
    pub duplicates: u64,
    /// Packets that arrived other than as the next PSN.
    pub out_of_order: u64,
    pub trimmed: u64,
    pub dropped: u64,
    pub ce_marked: u64,
    pub acks_sent: u64,
    pub nacks_sent: u64,
}

/// An ACK to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckOut {
    pub cack_psn: u32,
    /// The PSN whose arrival prompted it (ack_psn_offset = this − cack_psn).
    pub ack_psn: u32,
    pub sack_base: u32,
    pub sack_bitmap: u64,
    pub ecn_marked: bool,
    pub rcvd_bytes: u64,
    pub ooo: u64,
}

/// The receiving end of a RUD PDC.
pub struct PdcReceiver {
    cfg: ReceiverConfig,
    /// Every PSN before it arrived (valid once the start is known).
    expected: Option<u32>,
    bits: Vec<u64>,
    unacked_bytes: u32,
    owed: bool,
    ack_due: Option<u64>,
    ecn: bool,
    last_psn: u32,
    /// ROD: the hole (expected PSN) already NACKed.
    nacked_hole: Option<u32>,
    c: ReceiverCounters,
}

impl PdcReceiver {
    pub fn new(cfg: ReceiverConfig) -> PdcReceiver {
        let words = cfg.window_packets.div_ceil(64).max(1) as usize;
        PdcReceiver {
            cfg,
            expected: None,
            bits: vec![0; words],
            unacked_bytes: 0,
            owed: false,
            ack_due: None,
            ecn: false,
            last_psn: 0,
            nacked_hole: None,
            c: ReceiverCounters::default(),
        }
    }

    pub fn counters(&self) -> &ReceiverCounters {
        &self.c
    }

    /// Packets received in sequence from the start: every PSN before the cumulative one.
    pub fn packets_completed(&self, start_psn: u32) -> u64 {
        self.expected.map_or(0, |e| u64::from(e.wrapping_sub(start_psn)))
    }

    /// An ACK is owed (coalesced, not yet sent).
    pub fn owes_ack(&self) -> bool {
        self.owed
    }

    fn window(&self) -> u32 {
        (self.bits.len() * 64) as u32
    }

    fn bit(&self, psn: u32) -> (usize, u64) {
        let i = (psn % self.window()) as usize;
        (i / 64, 1u64 << (i % 64))
    }

    fn is_set(&self, psn: u32) -> bool {
        let (w, b) = self.bit(psn);
        self.bits[w] & b != 0
    }

    /// Packet `p` arrived at `now`.
    pub fn on_packet(&mut self, p: RxPacket, now: u64) -> RxVerdict {
        let RxPacket { psn, syn_offset, len, trimmed, ce, ar } = p;
        self.c.packets_received += 1;
        if self.expected.is_none() {
            match syn_offset {
                Some(off) => self.expected = Some(psn.wrapping_sub(u32::from(off))),
                None => {
                    self.c.dropped += 1;
                    return RxVerdict::Dropped;
                }
            }
        }
        let e = self.expected.expect("set above");
        let old = before(psn, e);
        if !old && psn.wrapping_sub(e) >= self.window() {
            self.c.dropped += 1;
            return RxVerdict::Dropped;
        }
        if old || (!trimmed && self.is_set(psn)) {
            self.c.duplicates += 1;
            // The sender did not hear the ACK: tell it again.
            self.owe(psn, now, true);
            return RxVerdict::Duplicate;
        }
        if trimmed {
            self.c.trimmed += 1;
            self.c.nacks_sent += 1;
            // ROD: the sender goes back from a trimmed packet on its NACK, so what arrives
            // behind it is dropped without another; a trim past a hole leaves the hole to be
            // NACKed again by the next arrival.
            self.nacked_hole = if self.expected == Some(psn) { Some(psn) } else { None };
            return RxVerdict::Trimmed;
        }
        if psn != e {
            self.c.out_of_order += 1;
            if self.cfg.ordered {
                self.c.dropped += 1;
                if self.nacked_hole == Some(e) {
                    return RxVerdict::Dropped;
                }
                self.nacked_hole = Some(e);
                self.c.nacks_sent += 1;
                return RxVerdict::OutOfOrder { expected: e };
            }
        }
        if ce {
            self.c.ce_marked += 1;
            self.ecn = true;
        }
        let (w, b) = self.bit(psn);
        self.bits[w] |= b;
        let mut x = e;
        while self.is_set(x) {
            let (w, b) = self.bit(x);
            self.bits[w] &= !b;
            x = x.wrapping_add(1);
        }
        self.expected = Some(x);
        self.c.packets_placed += 1;
        self.c.bytes_placed += u64::from(len);
        self.unacked_bytes = self.unacked_bytes.saturating_add(len);
        self.owe(psn, now, ar || self.unacked_bytes >= self.cfg.ack_every_bytes);
        RxVerdict::Place
    }

    fn owe(&mut self, psn: u32, now: u64, at_once: bool) {
        self.owed = true;
        self.last_psn = psn;
        let due = if at_once { now } else { now + self.cfg.ack_delay_ns };
        self.ack_due = Some(self.ack_due.map_or(due, |d| d.min(due)));
    }

    /// The ACK owed at `now`, if one is due.
    pub fn poll(&mut self, now: u64) -> Option<AckOut> {
        if !self.owed || self.ack_due.is_some_and(|d| now < d) {
            return None;
        }
        let e = self.expected?;
        let cack = e.wrapping_sub(1);
        // The SACK block: the 64 PSNs after the cumulative one, or the 64 up to the newest
        // arrival when that lies further out.
        let sack_base = if self.last_psn.wrapping_sub(e) < 64 || before(self.last_psn, e) {
            e
        } else {
            self.last_psn.wrapping_sub(63)
        };
        let mut bitmap = 0u64;
        for i in 0..64u32 {
            let p = sack_base.wrapping_add(i);
            if p.wrapping_sub(e) < self.window() && self.is_set(p) {
                bitmap |= 1 << i;
            }
        }
        let out = AckOut {
            cack_psn: cack,
            ack_psn: self.last_psn,
            sack_base,
            sack_bitmap: bitmap,
            ecn_marked: self.ecn,
            rcvd_bytes: self.c.bytes_placed,
            ooo: self.c.out_of_order,
        };
        self.owed = false;
        self.ack_due = None;
        self.ecn = false;
        self.unacked_bytes = 0;
        self.c.acks_sent += 1;
        Some(out)
    }

    /// When a coalesced ACK falls due.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.owed {
            self.ack_due
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scfg() -> SenderConfig {
        SenderConfig {
            max_payload: 1000,
            start_psn: 0xffff_fff0,
            window_packets: 256,
            init_cwnd_bytes: 8000,
            max_cwnd_bytes: 64_000,
            rto_ns: 1_000_000,
            max_retransmissions: 3,
            entropy: Entropy::Spray { base: 0xc000, paths: 256 },
            ordered: false,
        }
    }

    fn rcfg() -> ReceiverConfig {
        ReceiverConfig { window_packets: 256, ack_every_bytes: 16384, ack_delay_ns: 10_000, ordered: false }
    }

    /// Delivers every packet the sender may send at `now` to the receiver in the order
    /// `order` permutes them, with `trim` trimmed; returns the packets.
    fn burst(s: &mut PdcSender, now: u64) -> Vec<TxPacket> {
        std::iter::from_fn(|| s.next_packet(now)).collect()
    }

    fn deliver(r: &mut PdcReceiver, s: &mut PdcSender, pkts: &[TxPacket], trimmed: &[u32], now: u64) {
        for p in pkts {
            let v = r.on_packet(
                RxPacket {
                    psn: p.psn,
                    syn_offset: p.syn.then_some(p.psn_offset),
                    len: p.len,
                    trimmed: trimmed.contains(&p.psn),
                    ce: false,
                    ar: p.ar,
                },
                now,
            );
            if v == RxVerdict::Trimmed {
                s.on_nack(p.psn, true, now);
            }
            if let Some(a) = r.poll(now) {
                s.on_ack(7, a.cack_psn, a.sack_base, a.sack_bitmap, a.ecn_marked, now);
            }
        }
        if let Some(a) = r.poll(now + rcfg().ack_delay_ns) {
            s.on_ack(7, a.cack_psn, a.sack_base, a.sack_bitmap, a.ecn_marked, now);
        }
    }

    #[test]
    fn a_write_is_segmented_sprayed_and_completes_across_the_psn_wrap() {
        let mut s = PdcSender::new(scfg(), 3);
        s.post_write(1, 0, 0x10_0000, 5500).unwrap();
        let pkts = burst(&mut s, 0);
        assert_eq!(pkts.len(), 6);
        assert_eq!(pkts.iter().map(|p| p.len).sum::<u32>(), 5500);
        assert!(pkts.iter().all(|p| p.syn && p.request_length == 5500));
        assert_eq!((pkts[0].som, pkts[5].eom, pkts[5].ar, pkts[2].ar), (true, true, true, false));
        assert_eq!(pkts[3].buffer_offset, 0x10_0000 + 3000);
        assert_eq!(pkts[3].message_offset, 3000);
        let entropies: std::collections::HashSet<u16> = pkts.iter().map(|p| p.entropy).collect();
        assert!(entropies.len() >= 5, "sprayed: {entropies:?}");
        let mut r = PdcReceiver::new(rcfg());
        let mut rev = pkts.clone();
        rev.reverse();
        deliver(&mut r, &mut s, &rev, &[], 10);
        assert_eq!(r.counters().out_of_order, 5);
        assert_eq!(r.packets_completed(scfg().start_psn), 6);
        assert_eq!(s.pop_completion(), Some(Completion { wr_id: 1, len: 5500 }));
        assert!(s.is_idle());
        assert_eq!(s.dpdcid(), Some(7));
        s.post_write(2, 0, 0, 10).unwrap();
        assert!(!s.next_packet(20).unwrap().syn, "the ACK named the peer's PDC");
    }

    #[test]
    fn a_trimmed_packet_is_nacked_and_sent_again_at_once_and_the_window_halves() {
        let mut s = PdcSender::new(scfg(), 3);
        s.post_write(1, 0, 0, 8000).unwrap();
        let pkts = burst(&mut s, 0);
        assert_eq!(pkts.len(), 8, "the initial window of 8000 bytes");
        assert!(!s.has_work(), "a full window waits for ACKs");
        let mut r = PdcReceiver::new(rcfg());
        let trimmed = pkts[2].psn;
        deliver(&mut r, &mut s, &pkts, &[trimmed], 10);
        assert_eq!((r.counters().trimmed, s.counters().nacks_trimmed, s.counters().window_cuts), (1, 1, 1));
        // Halved to 4000 at the NACK, then one packet more for the 7000 bytes acknowledged after.
        assert_eq!(s.cwnd(), 5000);
        let again = s.next_packet(20).unwrap();
        assert_eq!((again.psn, again.retx, again.ar, again.len), (trimmed, true, true, 1000));
        deliver(&mut r, &mut s, &[again], &[], 30);
        assert_eq!(s.pop_completion(), Some(Completion { wr_id: 1, len: 8000 }));
        assert_eq!(s.counters().retransmitted_on_timeout, 0);
        assert_eq!(r.counters().duplicates, 0);
    }

    #[test]
    fn a_lost_packet_is_sent_again_after_the_timeout_only() {
        let mut s = PdcSender::new(scfg(), 3);
        s.post_write(1, 0, 0, 3000).unwrap();
        let pkts = burst(&mut s, 0);
        let mut r = PdcReceiver::new(rcfg());
        deliver(&mut r, &mut s, &[pkts[0], pkts[2]], &[], 10);
        assert_eq!(s.inflight(), 1000, "the SACK acknowledged the third packet");
        s.poll(999_999).unwrap();
        assert!(s.next_packet(999_999).is_none());
        assert_eq!(s.retransmit_deadline(), Some(1_000_000));
        s.poll(1_000_000).unwrap();
        let again = s.next_packet(1_000_000).unwrap();
        assert_eq!((again.psn, again.retx), (pkts[1].psn, true));
        assert_eq!(s.counters().retransmitted_on_timeout, 1);
        deliver(&mut r, &mut s, &[again], &[], 1_000_010);
        assert_eq!(s.pop_completion().map(|c| c.len), Some(3000));
    }

    #[test]
    fn retries_end_in_an_error_after_timeouts_that_double() {
        let mut s = PdcSender::new(scfg(), 3);
        s.post_write(1, 0, 0, 10).unwrap();
        let mut t = 0;
        for (k, rto) in [1_000_000u64, 2_000_000, 4_000_000].into_iter().enumerate() {
            assert!(s.next_packet(t).is_some());
            s.poll(t + rto - 1).unwrap();
            assert!(s.next_packet(t + rto - 1).is_none(), "transmission {}: not before {rto} ns", k + 1);
            t += rto;
            s.poll(t).unwrap_or_else(|e| panic!("{e}"));
        }
        s.next_packet(t).unwrap();
        t += 8_000_000;
        assert_eq!(s.poll(t), Err(SenderError::RetriesExhausted { psn: 0xffff_fff0, times: 4 }));
    }

    #[test]
    fn duplicates_are_not_placed_and_packets_before_a_syn_are_dropped() {
        let mut r = PdcReceiver::new(rcfg());
        assert_eq!(
            r.on_packet(RxPacket { psn: 5, syn_offset: None, len: 100, trimmed: false, ce: false, ar: false }, 0),
            RxVerdict::Dropped
        );
        assert_eq!(
            r.on_packet(RxPacket { psn: 5, syn_offset: Some(0), len: 100, trimmed: false, ce: false, ar: false }, 0),
            RxVerdict::Place
        );
        assert_eq!(
            r.on_packet(RxPacket { psn: 5, syn_offset: Some(0), len: 100, trimmed: false, ce: false, ar: false }, 0),
            RxVerdict::Duplicate
        );
        assert_eq!(
            r.on_packet(RxPacket { psn: 7, syn_offset: Some(2), len: 100, trimmed: false, ce: true, ar: false }, 0),
            RxVerdict::Place
        );
        assert_eq!(
            r.on_packet(
                RxPacket { psn: 7 + 256, syn_offset: Some(2), len: 100, trimmed: false, ce: false, ar: false },
                0
            ),
            RxVerdict::Dropped,
            "beyond the window"
        );
        let a = r.poll(0).expect("the duplicate asked for an ACK at once");
        assert_eq!((a.cack_psn, a.sack_base, a.sack_bitmap, a.ecn_marked), (5, 6, 0b10, true));
        assert_eq!(r.packets_completed(5), 1);
        assert_eq!(r.counters().bytes_placed, 200);
    }

    #[test]
    fn acks_coalesce_up_to_the_byte_threshold_or_the_delay() {
        let mut r = PdcReceiver::new(rcfg());
        for p in 0..16u32 {
            assert_eq!(
                r.on_packet(
                    RxPacket { psn: p, syn_offset: Some(p as u16), len: 1000, trimmed: false, ce: false, ar: false },
                    0
                ),
                RxVerdict::Place
            );
            assert!(r.poll(0).is_none(), "{p}");
        }
        assert_eq!(
            r.on_packet(RxPacket { psn: 16, syn_offset: Some(16), len: 1000, trimmed: false, ce: false, ar: false }, 0),
            RxVerdict::Place
        );
        assert_eq!(r.poll(0).map(|a| a.cack_psn), Some(16), "17 000 bytes >= 16 KiB");
        r.on_packet(RxPacket { psn: 17, syn_offset: Some(17), len: 10, trimmed: false, ce: false, ar: false }, 100);
        assert_eq!(r.next_deadline(), Some(10_100));
        assert!(r.poll(10_099).is_none());
        assert_eq!(r.poll(10_100).map(|a| a.cack_psn), Some(17));
    }

    /// ROD: a packet past a hole is dropped and the hole NACKed once; the sender goes back to
    /// it and the packets arrive again in order.
    #[test]
    fn rod_drops_past_a_hole_and_the_sender_goes_back() {
        let mut s = PdcSender::new(SenderConfig { entropy: Entropy::Fixed(7), ordered: true, ..scfg() }, 3);
        s.post_write(1, 0, 0, 5000).unwrap();
        let pkts = burst(&mut s, 0);
        let mut r = PdcReceiver::new(ReceiverConfig { ordered: true, ..rcfg() });
        let rx = |r: &mut PdcReceiver, p: &TxPacket| {
            r.on_packet(
                RxPacket {
                    psn: p.psn,
                    syn_offset: p.syn.then_some(p.psn_offset),
                    len: p.len,
                    trimmed: false,
                    ce: false,
                    ar: p.ar,
                },
                10,
            )
        };
        // The second packet is lost: the third is NACKed, the fourth and fifth dropped quietly.
        assert_eq!(rx(&mut r, &pkts[0]), RxVerdict::Place);
        assert_eq!(rx(&mut r, &pkts[2]), RxVerdict::OutOfOrder { expected: pkts[1].psn });
        assert_eq!(rx(&mut r, &pkts[3]), RxVerdict::Dropped);
        assert_eq!(rx(&mut r, &pkts[4]), RxVerdict::Dropped);
        s.on_rod_nack(pkts[1].psn);
        let again = burst(&mut s, 20);
        assert_eq!(
            again.iter().map(|p| (p.psn, p.retx)).collect::<Vec<_>>(),
            pkts[1..].iter().map(|p| (p.psn, true)).collect::<Vec<_>>()
        );
        for p in &again {
            assert_eq!(rx(&mut r, p), RxVerdict::Place);
        }
        let a = r.poll(30).unwrap();
        s.on_ack(9, a.cack_psn, a.sack_base, a.sack_bitmap, false, 30);
        assert_eq!(s.pop_completion().map(|c| c.len), Some(5000));
        assert_eq!((s.counters().retransmitted_on_nack, r.counters().nacks_sent), (4, 1));
    }

    #[test]
    fn the_window_doubles_per_round_trip_until_the_first_cut() {
        let mut s = PdcSender::new(scfg(), 3);
        s.post_write(1, 0, 0, 100_000).unwrap();
        let pkts = burst(&mut s, 0);
        assert_eq!(pkts.len(), 8);
        s.on_ack(9, pkts[7].psn, pkts[7].psn, 0, false, 100);
        assert_eq!(s.cwnd(), 16_000, "slow start: a window more per window acknowledged");
        let pkts = burst(&mut s, 200);
        assert_eq!(pkts.len(), 16);
        s.on_nack(pkts[0].psn, true, 300);
        assert_eq!(s.cwnd(), 8000);
        s.on_ack(9, pkts[15].psn, pkts[15].psn, 0, false, 400);
        assert_eq!(s.cwnd(), 9000, "after the cut: one packet per window acknowledged");
    }

    #[test]
    fn an_ecn_marked_ack_halves_the_window_once_per_round_trip() {
        let mut s = PdcSender::new(scfg(), 3);
        s.post_write(1, 0, 0, 8000).unwrap();
        let pkts = burst(&mut s, 0);
        // Sent at 0, acknowledged at 1000: the first RTT sample, marked.
        s.on_ack(9, pkts[0].psn, pkts[1].psn, 0, true, 1000);
        assert_eq!((s.srtt(), s.cwnd(), s.counters().window_cuts), (Some(1000), 4000, 1));
        s.on_ack(9, pkts[1].psn, pkts[2].psn, 0, true, 1500);
        assert_eq!((s.cwnd(), s.counters().window_cuts), (4000, 1), "within one RTT of the cut");
        // A trim of a packet that left before the cut tells of the same congestion.
        s.on_nack(pkts[5].psn, true, 2100);
        assert_eq!((s.cwnd(), s.counters().window_cuts), (4000, 1));
        s.on_ack(9, pkts[4].psn, pkts[5].psn, 0, false, 2300);
        let again = s.next_packet(2400).expect("room for the packet to send again");
        assert_eq!((again.psn, again.retx), (pkts[5].psn, true));
        // Its trim, sent after the cut, is news: a second cut.
        s.on_nack(again.psn, true, 3000);
        assert_eq!((s.cwnd(), s.counters().window_cuts), (2000, 2));
    }
}
