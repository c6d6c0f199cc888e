//! The emulated RDMA NIC's protocol engine: glues the pure RC state machines ([`Sender`],
//! [`Receiver`], [`NicPfc`]) to RoCEv2 Ethernet frames (`rocefab_wire::roce`, IBTA Vol. 1
//! ch. 9 + Annex A17) and MAC control frames (IEEE 802.1Qbb / 802.3x, `rocefab_wire::mac_control`).
//!
//! Still pure: frames come in through [`Engine::on_frame`] and go out through
//! [`Engine::next_tx`], time is the caller's `now` (ns), so two engines are wired back to back
//! in unit tests. The AF_XDP layer ([`super::xsk`]) and the daemon loop live elsewhere.
//!
//! * Classes: each NIC's DSCPs and PFC priorities come from its [`job::NicClasses`] (what the
//!   host's DCBX agent negotiated; default DSCP 24 → priority 3 for data, 48 → 7 for CNPs).
//! * Transmit: per NIC, CNPs (DSCP 48, priority 7) first, then ACK/NAKs (DSCP 24, priority 3),
//!   then data packets of the NIC's requester QPs round robin. The NIC's transmitter
//!   ([`pacer`]) charges every frame with its wire size (frame + FCS + preamble + inter-frame
//!   gap) at the NIC line rate: a frame leaves one serialisation time after the previous one at
//!   the earliest, and no credit builds up while paused or idle; each QP's own limiter carries
//!   its DCQCN rate.
//! * Data frames: RDMA WRITE First/Middle/Last (or Only per packet), DSCP 24, ECN ECT(0), UDP
//!   source port = per-QP entropy ([`udp_src_port_for_qp`]), ICRC computed by the wire crate.
//! * Write-Only mode ([`job::NicSpec::write_only`]): requesters send every packet as a WRITE
//!   Only with its own RETH and responders place packets that arrive out of order (spraying)
//!   at their addresses; a collective step completes when its whole PSN range has arrived.
//!   Without it, reordering is a sequence error (NAK, go-back-N), as on a plain RC NIC.
//! * PFC: a received PFC frame pauses the data priority (data and ACKs) for quanta × 512 bit times at
//!   the NIC line rate; quanta 0 resumes at once; 802.3x PAUSE pauses every priority.
//! * DCQCN: CE-marked data makes the NIC's notification point send a CNP ([`CnpPacer`]: at most
//!   one per interval, default 50 µs, per QP, IP pair or port as the job's `dcqcn_np.scope`
//!   says, and with `dcqcn_np.cnp` deferred one more at the interval's end if marks arrived in
//!   it); a received CNP drives [`Sender::on_cnp`].
//!
//! * Emulated time (docs/src/emulated-time.md): the job's rates and timers are emulated;
//!   [`Engine::from_job`] is where the host applies the time dilation D (line rate, DCQCN rates
//!   / D; DCQCN timers, CNP interval, ACK coalescing delay, retransmit timeout × D; PFC quanta
//!   are timed at the wall line rate, so pauses stretch too), and [`Engine::report`] converts
//!   back to emulated time.
//!
//! Per-packet paths allocate nothing: control queues are preallocated and bounded (overflow is
//! counted), QP lookup is a dense table indexed by QPN offset built at setup ([`IndexTable`]).
//!
//! | module     | what                                                                   |
//! |------------|------------------------------------------------------------------------|
//! | this one   | the [`Engine`]: NICs and QPs, frames in and out, timers, completion    |
//! | [`setup`]  | [`Engine::from_job`]: NICs, QPs and the collective on the wall clock   |
//! | [`pacer`]  | the NIC transmitter at line rate: one frame per serialisation time     |
//! | [`reduce`] | the collective: rank buffers, transfers per QP, reduction, verification |
//! | [`report`] | [`Engine::report`] and [`Engine::stalls`]                              |
//! | [`index`]  | keys (QPNs, ranks) to dense indices without hashing                    |
use std::collections::VecDeque;
use std::net::IpAddr;

use rocefab_contracts::time::Dilation;
use rocefab_wire::mac_control::MacControlRepr;
use rocefab_wire::roce::{self, aeth, bth, reth, IpEcn, Opcode as WireOpcode, ParsedFrame, RoceFrame};

use super::job;
use crate::dcqcn::{CnpPacer, NpKey};
use crate::desc::{AckPacket, AckSyndrome, Opcode, Reth, WritePacket};
use crate::pfc::NicPfc;
use crate::psn::Psn;
use crate::receiver::Receiver;
use crate::segment::PathMtu;
use crate::sender::Sender;

#[cfg(test)]
mod apm_tests;
mod index;
mod pacer;
mod reduce;
mod report;
mod setup;
#[cfg(test)]
mod testkit;
mod uet;

use index::IndexTable;
use pacer::NicPacer;
use reduce::{Coll, SendRing};
use uet::{Pdc, UetCtrl};

pub use pacer::WIRE_OVERHEAD_BYTES;
pub use reduce::CollectiveSpecError;
pub use setup::{data_bytes, np_pacer, path_mtu_for_link, receiver_config, sender_config, EngineError};

/// Capacity of each per-NIC control queue (ACK/NAK and CNP).
pub const CTRL_QUEUE_CAPACITY: usize = 4096;
/// IPv4 + UDP + BTH + RETH + ICRC bytes around a payload (IPv6: 20 more).
pub const ROCE_IPV4_OVERHEAD: u32 = 20 + 8 + 12 + 16 + 4;

/// Per-NIC counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicCounters {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_bad_icrc: u64,
    pub rx_malformed: u64,
    pub rx_unknown_qp: u64,
    pub rx_ignored: u64,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    pub ctrl_overflows: u64,
}

/// One NIC port's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct NicConfig {
    pub name: String,
    pub mac: [u8; 6],
    pub ip: IpAddr,
    /// Wall-clock line rate (the job's emulated rate / D).
    pub line_rate_bps: u64,
    /// The job's emulated line rate (reports).
    pub emulated_line_rate_bps: u64,
    pub path_mtu: PathMtu,
    /// Requesters send every packet as a WRITE Only; responders place out of order.
    pub write_only: bool,
    pub dcqcn: bool,
    /// DSCPs and PFC priorities of data/ACK frames and CNPs.
    pub classes: job::NicClasses,
    /// UET instead of RoCEv2 ([`uet`]).
    pub uet: Option<job::UetSpec>,
}

/// One NIC: its configuration, PFC state, shaper, control queues and requester QPs.
struct Nic {
    cfg: NicConfig,
    pfc: NicPfc,
    /// The NIC shaper at the wall-clock line rate.
    pacer: NicPacer,
    /// The port has carrier ([`Engine::set_link`]); a port without sends nothing.
    link_up: bool,
    acks: VecDeque<(usize, AckPacket)>,
    cnps: VecDeque<usize>,
    /// UET ACKs and NACKs owed.
    uet_ctrl: VecDeque<(usize, UetCtrl)>,
    qps: Vec<usize>,
    rr: usize,
    c: NicCounters,
}

/// One QP: its requester and/or responder, their buffers and completion.
struct Qp {
    spec: job::QpSpec,
    nic: usize,
    peer_mac: [u8; 6],
    sport: u16,
    sender: Option<Sender>,
    send_buf: Vec<u8>,
    /// A collective requester's `send_buf` as a ring (else transfers are appended).
    send_ring: Option<SendRing>,
    send_total: u64,
    send_acked: u64,
    send_done: Option<u64>,
    receiver: Option<Receiver>,
    recv_len: u64,
    recv_done: Option<u64>,
    error: Option<String>,
    /// The alternate path while armed (APM; taken at the migration).
    alt: Option<AltRoute>,
    /// The migration, once made: the port it left, when (wall ns) and why. Its frames then
    /// carry MigReq (IBTA: set in the Migrated state, clear while Armed).
    migrated: Option<(usize, u64, job::MigrationCause)>,
    /// Its notification point's pacing domain in [`Engine::np`].
    np: usize,
    /// CNPs its responder queued (immediate and deferred).
    cnps_sent: u64,
    /// On a UET NIC: its PDC (then `sender` and `receiver` are `None`).
    pdc: Option<Pdc>,
}

impl Qp {
    /// It sends (an RC requester or a PDC's sending end).
    fn has_requester(&self) -> bool {
        self.sender.is_some() || self.pdc.as_ref().is_some_and(|p| p.tx.is_some())
    }

    /// It receives (an RC responder or a PDC's receiving end).
    fn has_responder(&self) -> bool {
        self.receiver.is_some() || self.pdc.as_ref().is_some_and(|p| p.rx.is_some())
    }

    /// Its responder owes an ACK it has not queued yet.
    fn owes_ack(&self) -> bool {
        self.receiver.as_ref().is_some_and(|r| r.owes_ack())
            || self.pdc.as_ref().and_then(|p| p.rx.as_ref()).is_some_and(|x| x.r.owes_ack())
    }

    /// Request packets its responder completed in PSN order.
    fn rx_packets_completed(&self) -> u64 {
        match (&self.receiver, &self.pdc) {
            (Some(r), _) => r.counters().packets_completed,
            (None, Some(p)) => p.packets_completed(),
            _ => 0,
        }
    }

    /// Its responder's region of `rkey`.
    fn rx_region(&self, rkey: u32) -> Option<&crate::receiver::MemoryRegion> {
        match (&self.receiver, &self.pdc) {
            (Some(r), _) => r.region(rkey),
            (None, Some(p)) => p.rx.as_ref().map(|x| &x.region).filter(|m| m.rkey == rkey),
            _ => None,
        }
    }

    /// Packets its requester sent again.
    fn retransmitted(&self) -> u64 {
        let rc = self.sender.as_ref().map_or(0, |s| s.counters().retransmitted_packets);
        let uet = self.pdc.as_ref().and_then(|p| p.tx.as_ref()).map_or(0, |t| {
            let c = t.counters();
            c.retransmitted_on_nack + c.retransmitted_on_timeout
        });
        rc + uet
    }
}

/// A QP's alternate path, resolved: the local NIC port, the peer's address and the next hop.
#[derive(Clone, Copy, Debug)]
struct AltRoute {
    nic: usize,
    peer_ip: IpAddr,
    peer_mac: [u8; 6],
}

/// All NICs and QPs of one emulated host.
pub struct Engine {
    nics: Vec<Nic>,
    qps: Vec<Qp>,
    by_qpn: IndexTable,
    start: u64,
    /// [`Engine::set_start_unix`]: Unix ns of `start` (0: not set).
    start_unix_ns: u64,
    coll: Option<Coll>,
    dilation: Dilation,
    /// The notification points of every responder QP.
    np: CnpPacer,
    /// Milestones reached (wall-clock `at_ns`; the report converts), with the host's counters
    /// then; capacity for all, so recording never allocates.
    milestones: Vec<job::MilestoneReport>,
}

impl Engine {
    /// Runs the collective, if any, forward ([`Coll::progress`]).
    fn progress(&mut self, now: u64) {
        if let Some(c) = self.coll.as_mut() {
            c.progress(&mut self.qps, now);
        }
        self.record_milestones();
    }

    /// Records the milestones the collective reached since the last call, with the host's
    /// counters (a sum over its NICs and QPs: milestones are a few per rank and iteration).
    fn record_milestones(&mut self) {
        let Some(c) = self.coll.as_mut() else { return };
        if c.milestones_hit.is_empty() {
            return;
        }
        let mut m = job::MilestoneReport::default();
        for n in &self.nics {
            m.tx_bytes += n.c.tx_bytes;
            m.cnps_received += n.c.cnps_received;
            m.pfc_frames_received += n.pfc.frames_received();
        }
        m.retransmitted_packets = self.qps.iter().map(Qp::retransmitted).sum();
        for (id, at) in c.milestones_hit.drain(..) {
            self.milestones.push(job::MilestoneReport { id, at_ns: at, ..m });
        }
    }

    /// Declares `now` the job start (completion times in reports count from here): for a
    /// daemon that sets up first and waits for a start signal.
    pub fn set_start(&mut self, now: u64) {
        self.start = now;
    }

    /// The Unix time (ns) of the start set by [`Engine::set_start`], for the report.
    pub fn set_start_unix(&mut self, unix_ns: u64) {
        self.start_unix_ns = unix_ns;
    }

    /// Number of NICs.
    pub fn nic_count(&self) -> usize {
        self.nics.len()
    }

    /// Wall-clock line rate of NIC `i` (emulated / D).
    pub fn nic_line_rate_bps(&self, i: usize) -> u64 {
        self.nics[i].cfg.line_rate_bps
    }

    /// Counters of NIC `i`.
    pub fn nic_counters(&self, i: usize) -> NicCounters {
        self.nics[i].c
    }

    /// PFC state of NIC `i`.
    pub fn nic_pfc(&self, i: usize) -> &NicPfc {
        &self.nics[i].pfc
    }

    /// The requester of `qpn`, if it has one.
    pub fn sender(&self, qpn: u32) -> Option<&Sender> {
        self.by_qpn.get(qpn).and_then(|i| self.qps[i].sender.as_ref())
    }

    /// The notification points of the responders.
    pub fn cnp_pacer(&self) -> &CnpPacer {
        &self.np
    }

    /// The responder of `qpn`, if it has one.
    pub fn receiver(&self, qpn: u32) -> Option<&Receiver> {
        self.by_qpn.get(qpn).and_then(|i| self.qps[i].receiver.as_ref())
    }

    fn push_ack(nic: &mut Nic, qp: usize, ack: AckPacket) {
        if nic.acks.len() >= CTRL_QUEUE_CAPACITY {
            nic.c.ctrl_overflows += 1;
        } else {
            nic.acks.push_back((qp, ack));
        }
    }

    fn push_cnp(nic: &mut Nic, qp: usize) {
        if nic.cnps.len() >= CTRL_QUEUE_CAPACITY {
            nic.c.ctrl_overflows += 1;
        } else {
            nic.cnps.push_back(qp);
        }
    }

    /// NIC port `nic_idx` lost (`up` false) or regained its carrier at `now`. A port without
    /// carrier sends nothing; every QP on it with an armed alternate path migrates at once (the
    /// NIC detects the path failure itself: IBTA 17.2.8 leaves the detection to the channel
    /// adapter). Migrations are one-way, as in IBTA: a port coming back takes no QP back.
    /// Returns how many QPs migrated.
    pub fn set_link(&mut self, nic_idx: usize, up: bool, now: u64) -> usize {
        let Some(nic) = self.nics.get_mut(nic_idx) else { return 0 };
        nic.link_up = up;
        // An alternate path through a port without carrier is no way out: the requesters whose
        // alternate path it is fail at retry exhaustion rather than move there (and are armed
        // again when it comes back).
        for q in &mut self.qps {
            if let (Some(a), Some(s)) = (q.alt, q.sender.as_mut()) {
                if a.nic == nic_idx {
                    s.set_alternate_path_armed(up);
                }
            }
        }
        if up {
            return 0;
        }
        let nics = &self.nics;
        let moving: Vec<usize> = nics[nic_idx]
            .qps
            .iter()
            .copied()
            .filter(|&qi| self.qps[qi].alt.is_some_and(|a| nics[a.nic].link_up))
            .collect();
        for &qi in &moving {
            self.migrate(qi, now, job::MigrationCause::LinkDown);
        }
        moving.len()
    }

    /// Whether NIC port `i` has carrier as far as the engine knows.
    pub fn link_up(&self, i: usize) -> bool {
        self.nics[i].link_up
    }

    /// Moves QP `qi` to its alternate path at `now` (it must have one): its port, its peer's
    /// address and next hop, its queued ACKs and CNPs; a requester sends what is unacknowledged
    /// again at once (it was on the failed path). Rare, so it may allocate.
    fn migrate(&mut self, qi: usize, now: u64, cause: job::MigrationCause) {
        let qp = &mut self.qps[qi];
        let Some(alt) = qp.alt.take() else { return };
        let from = qp.nic;
        qp.nic = alt.nic;
        qp.spec.peer_ip = alt.peer_ip;
        qp.peer_mac = alt.peer_mac;
        qp.migrated = Some((from, now, cause));
        qp.np = self.np.domain(NpKey { qp: qi, port: alt.nic, local: self.nics[alt.nic].cfg.ip, peer: alt.peer_ip });
        if let Some(s) = qp.sender.as_mut() {
            s.path_migrated(now);
        }
        let old = &mut self.nics[from];
        old.qps.retain(|&q| q != qi);
        old.rr = 0;
        let acks: Vec<AckPacket> = old.acks.iter().filter(|(q, _)| *q == qi).map(|&(_, a)| a).collect();
        old.acks.retain(|(q, _)| *q != qi);
        let cnps = old.cnps.iter().filter(|&&q| q == qi).count();
        old.cnps.retain(|&q| q != qi);
        let new = &mut self.nics[alt.nic];
        new.qps.push(qi);
        for a in acks {
            Self::push_ack(new, qi, a);
        }
        for _ in 0..cnps {
            Self::push_cnp(new, qi);
        }
    }

    /// Processes one frame received on NIC `nic` at `now`. Malformed frames, bad ICRCs and
    /// unknown QPs are counted and dropped.
    pub fn on_frame(&mut self, nic_idx: usize, frame: &[u8], now: u64) {
        let Some(nic) = self.nics.get_mut(nic_idx) else { return };
        nic.c.rx_frames += 1;
        nic.c.rx_bytes += frame.len() as u64;
        if frame.len() >= 14 && frame[12..14] == [0x88, 0x08] {
            match MacControlRepr::parse_frame(frame) {
                Ok((_, MacControlRepr::Pfc(p))) => nic.pfc.on_pfc_frame(p.enabled.bits(), &p.quanta, now),
                Ok((_, MacControlRepr::Pause { quanta })) => nic.pfc.on_global_pause(quanta, now),
                Ok((_, MacControlRepr::Unknown { .. })) => nic.c.rx_ignored += 1,
                Err(_) => nic.c.rx_malformed += 1,
            }
            return;
        }
        if nic.cfg.uet.is_some() {
            if let Some((qi, received, acked)) = self.on_uet_frame(nic_idx, frame, now) {
                self.after_receive(qi, received, acked, now);
            }
            return;
        }
        let p = match ParsedFrame::parse(frame) {
            Ok(p) => p,
            Err(_) => {
                nic.c.rx_malformed += 1;
                return;
            }
        };
        if !p.icrc.is_good() {
            nic.c.rx_bad_icrc += 1;
            return;
        }
        let Some(qi) = self.by_qpn.get(p.bth().dest_qp) else {
            nic.c.rx_unknown_qp += 1;
            return;
        };
        if self.qps[qi].nic != nic_idx {
            // The peer migrated: a packet with MigReq on the armed alternate path moves this end
            // too (IBTA 17.2.8; qib/hfi1's ruc_check_hdr).
            if p.bth().migreq && self.qps[qi].alt.is_some_and(|a| a.nic == nic_idx) {
                self.migrate(qi, now, job::MigrationCause::PeerMigrated);
            } else {
                self.nics[nic_idx].c.rx_unknown_qp += 1;
                return;
            }
        }
        let nic = &mut self.nics[nic_idx];
        let qp = &mut self.qps[qi];
        let (received, acked) = match p.bth().opcode {
            WireOpcode::Acknowledge => (false, Self::on_ack(nic, qp, &p, now)),
            WireOpcode::Cnp => {
                nic.c.cnps_received += 1;
                match qp.sender.as_mut() {
                    Some(s) => s.on_cnp(now),
                    None => nic.c.rx_ignored += 1,
                }
                (false, false)
            }
            _ => (Self::on_request(nic, &mut self.np, qi, qp, &p, now), false),
        };
        self.after_receive(qi, received, acked, now);
    }

    /// QP `qi` completed a message it received (`received`) or freed send room (`acked`): the
    /// collective moves on.
    fn after_receive(&mut self, qi: usize, received: bool, acked: bool, now: u64) {
        if received || acked {
            if let Some(c) = self.coll.as_mut() {
                c.touch_qp(qi, received, acked);
                c.progress(&mut self.qps, now);
            }
            self.record_milestones();
        }
    }

    /// An ACK/NAK `p` for requester QP `qp` on `nic`; whether it freed room in the QP's send
    /// ring (a transfer waiting for room may go now).
    fn on_ack(nic: &mut Nic, qp: &mut Qp, p: &ParsedFrame<'_>, now: u64) -> bool {
        let (Some(sender), Some(a)) = (qp.sender.as_mut(), p.aeth()) else {
            nic.c.rx_ignored += 1;
            return false;
        };
        let Some(syndrome) = AckSyndrome::from_aeth_syndrome(u8::from(a.syndrome)) else {
            nic.c.rx_ignored += 1;
            return false;
        };
        let ack = AckPacket { syndrome, psn: Psn::new(p.bth().psn), msn: a.msn };
        if let Err(e) = sender.on_ack(&ack, now) {
            qp.error.get_or_insert_with(|| e.to_string());
        }
        let mut freed = false;
        while let Some(c) = sender.pop_completion() {
            qp.send_acked += u64::from(c.len);
            if let Some(ring) = qp.send_ring.as_mut() {
                freed |= ring.posted.pop_front().is_some();
            }
        }
        if qp.send_done.is_none() && qp.send_acked >= qp.send_total {
            qp.send_done = Some(now);
        }
        freed
    }

    /// A request packet `p` (RDMA WRITE) for responder QP `qp` (index `qi`) on `nic`: placed,
    /// its ACK and CNP queued; whether it completed a message.
    fn on_request(nic: &mut Nic, np: &mut CnpPacer, qi: usize, qp: &mut Qp, p: &ParsedFrame<'_>, now: u64) -> bool {
        let bth = p.bth();
        let (Some(opcode), Some(receiver)) = (Opcode::from_code(u8::from(bth.opcode)), qp.receiver.as_mut()) else {
            nic.c.rx_ignored += 1;
            return false;
        };
        let pkt = WritePacket {
            opcode,
            psn: Psn::new(bth.psn),
            ack_req: bth.ack_req,
            reth: p.reth().map(|r| Reth { va: r.va, rkey: r.r_key, len: r.dma_len }),
            payload_offset: 0,
            payload_len: p.payload.len() as u32,
        };
        let ce = p.ip.ecn == IpEcn::CongestionExperienced;
        let out = receiver.on_packet(&pkt, p.payload, ce, now);
        let message_done = matches!(out.event, crate::receiver::RxEvent::Placed { message_complete: true });
        if let Some(ack) = out.ack {
            Self::push_ack(nic, qi, ack);
        }
        if ce && np.on_ce(qp.np, qi, now) {
            qp.cnps_sent += 1;
            Self::push_cnp(nic, qi);
        }
        if qp.recv_done.is_none() && receiver.counters().bytes_placed >= qp.recv_len {
            qp.recv_done = Some(now);
        }
        message_done
    }

    /// Runs the timers (requester ACK timeout and DCQCN, responder ACK coalescing, deferred
    /// CNPs) at `now`.
    pub fn poll(&mut self, now: u64) {
        if self.coll.as_ref().and_then(|c| c.next_nvlink()).is_some_and(|at| at <= now) {
            self.progress(now);
        }
        let (nics, qps) = (&mut self.nics, &mut self.qps);
        self.np.poll(now, |qi| {
            let qp = &mut qps[qi];
            qp.cnps_sent += 1;
            Self::push_cnp(&mut nics[qp.nic], qi);
        });
        for qi in 0..self.qps.len() {
            if self.qps[qi].pdc.is_some() {
                self.poll_uet(qi, now);
                continue;
            }
            let qp = &mut self.qps[qi];
            let mut migrate = false;
            if let Some(s) = qp.sender.as_mut() {
                if qp.error.is_none() {
                    if let Err(e) = s.poll(now) {
                        qp.error = Some(e.to_string());
                    }
                    migrate = s.take_migration_request();
                }
            }
            if let Some(r) = qp.receiver.as_mut() {
                if let Some(ack) = r.poll(now) {
                    Self::push_ack(&mut self.nics[qp.nic], qi, ack);
                }
            }
            if migrate {
                self.migrate(qi, now, job::MigrationCause::RetryExhausted);
            }
        }
    }

    /// Writes the next frame NIC `nic` may transmit at `now` into `buf` and returns its
    /// length; `None` when the shaper, PFC or the requesters have nothing to send now.
    pub fn next_tx(&mut self, nic_idx: usize, buf: &mut [u8], now: u64) -> Option<usize> {
        let nic = self.nics.get_mut(nic_idx)?;
        if !nic.link_up || !nic.pacer.ready(now) {
            return None;
        }
        let paused = nic.pfc.paused_mask(now);
        let cl = nic.cfg.classes;
        let len = if nic.cfg.uet.is_some() {
            if paused & (1 << cl.data_priority) != 0 {
                return None;
            }
            self.next_uet_frame(nic_idx, buf, now)
        } else {
            self.next_roce_frame(nic_idx, buf, now, paused)
        };
        let nic = &mut self.nics[nic_idx];
        match len? {
            Ok(n) => {
                nic.pacer.charge_frame(n, now);
                nic.c.tx_frames += 1;
                nic.c.tx_bytes += n as u64;
                Some(n)
            }
            Err(()) => {
                nic.c.tx_errors += 1;
                None
            }
        }
    }

    /// The next RoCEv2 frame of NIC `nic_idx` at `now` (CNPs, then ACK/NAKs, then data round
    /// robin), with priorities `paused`; `None`: nothing to send.
    fn next_roce_frame(&mut self, nic_idx: usize, buf: &mut [u8], now: u64, paused: u8) -> Option<Result<usize, ()>> {
        let nic = &mut self.nics[nic_idx];
        let cl = nic.cfg.classes;
        let mut len = None;
        if paused & (1 << cl.cnp_priority) == 0 {
            if let Some(qi) = nic.cnps.pop_front() {
                let qp = &self.qps[qi];
                let mut f = roce::cnp(nic.cfg.mac, qp.peer_mac, nic.cfg.ip, qp.spec.peer_ip, qp.spec.peer_qpn);
                f.headers.bth.migreq = qp.migrated.is_some();
                f.udp_src_port = qp.sport;
                f.dscp = cl.cnp_dscp;
                len = Some(f.emit(buf));
                nic.c.cnps_sent += 1;
            }
        }
        if len.is_none() && paused & (1 << cl.data_priority) == 0 {
            if let Some((qi, ack)) = nic.acks.pop_front() {
                let qp = &self.qps[qi];
                let mut b = bth::Repr::new(WireOpcode::Acknowledge, qp.spec.peer_qpn, ack.psn.value());
                b.migreq = qp.migrated.is_some();
                let mut h = roce::Repr::new(b);
                h.aeth =
                    Some(aeth::Repr { syndrome: aeth::Syndrome::from(ack.syndrome.aeth_syndrome()), msn: ack.msn });
                let mut f = RoceFrame::new(nic.cfg.mac, qp.peer_mac, nic.cfg.ip, qp.spec.peer_ip, h, &[]);
                f.udp_src_port = qp.sport;
                f.dscp = cl.data_dscp;
                len = Some(f.emit(buf));
            }
        }
        if len.is_none() && paused & (1 << cl.data_priority) == 0 {
            let n = nic.qps.len();
            for k in 0..n {
                let qi = nic.qps[(nic.rr + k) % n];
                let qp = &mut self.qps[qi];
                if qp.error.is_some() {
                    continue;
                }
                let Some(tx) = qp.sender.as_mut().and_then(|s| s.next_packet(now)) else { continue };
                nic.rr = (nic.rr + k + 1) % n;
                let start = tx.local_addr as usize;
                let payload = &qp.send_buf[start..start + tx.pkt.payload_len as usize];
                let mut b =
                    bth::Repr::new(WireOpcode::from(tx.pkt.opcode.code()), qp.spec.peer_qpn, tx.pkt.psn.value());
                b.ack_req = tx.pkt.ack_req;
                b.migreq = qp.migrated.is_some();
                let mut h = roce::Repr::new(b);
                h.reth = tx.pkt.reth.map(|r| reth::Repr { va: r.va, r_key: r.rkey, dma_len: r.len });
                let mut f = RoceFrame::new(nic.cfg.mac, qp.peer_mac, nic.cfg.ip, qp.spec.peer_ip, h, payload);
                f.udp_src_port = qp.sport;
                f.dscp = cl.data_dscp;
                len = Some(f.emit(buf));
                break;
            }
        }
        len.map(|r| r.map_err(drop))
    }

    /// The earliest time something may happen without a frame arriving: a frame may be sent,
    /// a pause expires, or a timer fires. `None`: nothing pending.
    pub fn next_deadline(&mut self, now: u64) -> Option<u64> {
        let mut t: Option<u64> = None;
        let mut at = |x: u64| t = Some(t.map_or(x, |t| t.min(x)));
        if let Some(x) = self.coll.as_ref().and_then(|c| c.next_nvlink()) {
            at(x);
        }
        // A deferred CNP, due at the end of its interval.
        if let Some(x) = self.np.next_deadline() {
            at(x);
        }
        for nic in &mut self.nics {
            if !nic.link_up {
                // Sends nothing: only its QPs' timers (retransmit, ACK coalescing) may act.
                for &qi in &nic.qps {
                    let qp = &self.qps[qi];
                    if qp.error.is_none() {
                        if let Some(r) = qp.receiver.as_ref().and_then(|r| r.next_deadline()) {
                            at(r);
                        }
                        if let Some(r) = qp.sender.as_ref().and_then(|s| s.retransmit_deadline()) {
                            at(r);
                        }
                        if let Some(p) = &qp.pdc {
                            if let Some(r) = p.rx.as_ref().and_then(|x| x.r.next_deadline()) {
                                at(r);
                            }
                            if let Some(r) = p.tx.as_ref().and_then(|t| t.retransmit_deadline()) {
                                at(r);
                            }
                        }
                    }
                }
                continue;
            }
            if nic.cfg.uet.is_some() {
                let paused = nic.pfc.paused_mask(now) & (1 << nic.cfg.classes.data_priority) != 0;
                if let Some(r) = nic.pfc.next_resume(now) {
                    at(r);
                }
                let ready = nic.pacer.ready_at(now);
                if !paused && !nic.uet_ctrl.is_empty() {
                    at(ready);
                }
                for &qi in &nic.qps {
                    let qp = &self.qps[qi];
                    let Some(p) = qp.pdc.as_ref().filter(|_| qp.error.is_none()) else { continue };
                    if let Some(r) = p.rx.as_ref().and_then(|x| x.r.next_deadline()) {
                        at(r);
                    }
                    if let Some(t) = &p.tx {
                        if let Some(r) = t.retransmit_deadline() {
                            at(r);
                        }
                        if !paused && t.has_work() {
                            at(ready);
                        }
                    }
                }
                continue;
            }
            let paused = nic.pfc.paused_mask(now);
            if let Some(r) = nic.pfc.next_resume(now) {
                at(r);
            }
            // The wire is free again one serialisation time after the last frame left: data and
            // control frames alike wait for that, and no earlier wake-up could send anything.
            let ready = nic.pacer.ready_at(now);
            let cl = nic.cfg.classes;
            if (!nic.cnps.is_empty() && paused & (1 << cl.cnp_priority) == 0)
                || (!nic.acks.is_empty() && paused & (1 << cl.data_priority) == 0)
            {
                at(ready);
            }
            for &qi in &nic.qps {
                let qp = &mut self.qps[qi];
                if qp.error.is_some() {
                    continue;
                }
                if let Some(r) = qp.receiver.as_ref().and_then(|r| r.next_deadline()) {
                    at(r);
                }
                // A requester whose data are all acknowledged sends nothing more: its DCQCN
                // timers (a cut sender's rate increase every T) would only wake the data thread,
                // during the job and while a finished host lingers.
                if paused & (1 << cl.data_priority) == 0 && qp.send_done.is_none() {
                    if let Some(s) = qp.sender.as_mut().and_then(|s| s.next_event_time(now)) {
                        at(s.max(ready));
                    }
                }
            }
        }
        t
    }

    /// Every QP finished (or failed) and the collective, if any, ran to its end; a responder
    /// that received all its data is finished only once it owes no ACK (neither a coalesced one
    /// [`Engine::poll`] will send nor one queued for transmission): its requester would
    /// otherwise time out and retransmit to a host that has gone.
    pub fn finished(&self) -> bool {
        if self.qps.iter().any(|q| q.error.is_some()) {
            return true;
        }
        if self.coll.as_ref().is_some_and(|c| !c.complete()) {
            return false;
        }
        // ACKs queued for transmission are still owed.
        if self.nics.iter().any(|n| !n.acks.is_empty() || !n.uet_ctrl.is_empty()) {
            return false;
        }
        self.qps.iter().all(|q| {
            q.error.is_some()
                || ((!q.has_requester() || q.send_done.is_some())
                    && (!q.has_responder() || (q.recv_done.is_some() && !q.owes_ack())))
        })
    }

    /// When the last QP finished, if all did.
    pub fn finish_time(&self) -> Option<u64> {
        let mut t = self.start.max(self.coll.as_ref().map_or(0, |c| c.nvlink_last));
        for q in &self.qps {
            if q.has_requester() {
                t = t.max(q.send_done?);
            }
            if q.has_responder() {
                t = t.max(q.recv_done?);
            }
        }
        Some(t)
    }

    /// The responder region of `qpn`.
    pub fn region(&self, qpn: u32) -> Option<&[u8]> {
        let q = &self.qps[self.by_qpn.get(qpn)?];
        let r = q.spec.recv.as_ref()?;
        Some(&q.rx_region(r.rkey)?.data)
    }

    /// Rank `rank`'s collective buffer.
    pub fn rank_buffer(&self, rank: u32) -> Option<&[u8]> {
        let c = self.coll.as_ref()?;
        Some(&c.bufs[c.rank_idx.get(rank)?])
    }

    /// Rank `rank`'s collective buffer, writable (tests corrupt it to check verification).
    #[cfg(test)]
    pub(crate) fn rank_buffer_mut(&mut self, rank: u32) -> Option<&mut [u8]> {
        let c = self.coll.as_mut()?;
        let i = c.rank_idx.get(rank)?;
        Some(&mut c.bufs[i])
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::{drive, engines, run};
    use super::*;
    use rocefab_wire::ethernet::{MacAddr, PrioritySet};
    use rocefab_wire::mac_control::PfcRepr;
    use rocefab_wire::roce::udp_src_port_for_qp;

    #[test]
    fn transfer_completes_with_verified_data_across_psn_wrap() {
        let (mut a, mut b) = engines(300_000, 10_000_000_000, true);
        let mut opcodes = std::collections::BTreeSet::new();
        let end = run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, _| {
                let p = ParsedFrame::parse(f).unwrap();
                assert!(p.icrc.is_good());
                if dir == 0 {
                    assert_eq!(p.ip.dscp, 24);
                    assert_eq!(p.ip.ecn, IpEcn::Ect0);
                    assert_eq!(p.udp_src_port, udp_src_port_for_qp(17, 33));
                    assert_eq!(p.bth().dest_qp, 33);
                }
                opcodes.insert(u8::from(p.bth().opcode));
                true
            },
            |_, _| {},
        );
        assert!(a.finished() && b.finished(), "stalled at {end}");
        let r = b.report("b", end);
        assert!(r.ok, "{r:?}");
        assert_eq!(r.qps[0].verified, Some(true));
        assert_eq!(r.qps[0].bytes_placed, 300_000);
        assert_eq!(opcodes, [0x06, 0x07, 0x08, 0x11].into_iter().collect(), "First/Middle/Last and ACK");
        let ra = a.report("a", end);
        assert!(ra.ok && ra.qps[0].send_completed_bytes == 300_000 && ra.qps[0].retransmitted_packets == 0);
        // 300 kB at 10 Gb/s takes ≥ 240 µs of serialization: the NIC shaper is honoured.
        assert!(ra.qps[0].send_done_ns.unwrap() > 240_000, "{ra:?}");
    }

    #[test]
    fn a_lost_final_ack_is_answered_again_by_a_responder_that_keeps_serving() {
        // 20 000 bytes: PSNs 16777000..=16777019. The ACK of the last PSN is lost once.
        fn lose_final_ack(lost: &mut bool) -> impl FnMut(usize, &mut Vec<u8>, u64) -> bool + '_ {
            move |dir, f, _| {
                let p = ParsedFrame::parse(f).unwrap();
                if dir == 1 && !*lost && u8::from(p.bth().opcode) == 0x11 && p.bth().psn == 16_777_000 + 19 {
                    *lost = true;
                    return false;
                }
                true
            }
        }
        // The responder exits once it finished (no linger): the requester retransmits into the
        // void until its retries run out.
        let (mut a, mut b) = engines(20_000, 10_000_000_000, false);
        let mut lost = false;
        let end = drive(5_000, false, &mut a, &mut b, 0, 10_000_000_000, lose_final_ack(&mut lost), |_, _| {});
        assert!(lost && b.finished());
        let ra = a.report("a", end);
        assert!(!ra.ok && ra.qps[0].error.is_some(), "without a serving responder the requester fails: {ra:?}");
        // The responder keeps serving: the duplicate is re-ACKed and the requester completes.
        let (mut a, mut b) = engines(20_000, 10_000_000_000, false);
        let mut lost = false;
        let end = drive(5_000, true, &mut a, &mut b, 0, 10_000_000_000, lose_final_ack(&mut lost), |_, _| {});
        assert!(lost && a.finished() && b.finished(), "stalled at {end}");
        let (ra, rb) = (a.report("a", end), b.report("b", end));
        assert!(ra.ok && rb.ok, "{ra:?} {rb:?}");
        assert_eq!(ra.qps[0].send_completed_bytes, 20_000);
        assert!(ra.qps[0].retransmitted_packets >= 1, "the requester timed out and retransmitted: {ra:?}");
        assert!(rb.qps[0].duplicates >= 1, "the responder saw the duplicate: {rb:?}");
    }

    #[test]
    fn dropped_packets_are_recovered_by_nak_and_go_back_n() {
        let (mut a, mut b) = engines(200_000, 10_000_000_000, false);
        let mut n = 0;
        let mut dropped = 0;
        run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, _| {
                if dir == 0 && f[12..14] == [8, 0] {
                    n += 1;
                    if n % 50 == 0 {
                        dropped += 1;
                        return false;
                    }
                }
                let _ = f;
                true
            },
            |_, _| {},
        );
        assert!(dropped > 2);
        let ra = a.report("a", 0);
        let rb = b.report("b", 0);
        assert!(rb.ok, "{rb:?}");
        assert_eq!(rb.qps[0].verified, Some(true));
        assert!(ra.qps[0].retransmitted_packets >= dropped, "{ra:?}");
        assert!(ra.qps[0].naks_received >= 1 && rb.qps[0].naks_sent >= 1);
    }

    #[test]
    fn corrupted_frames_fail_the_icrc_and_are_counted() {
        let (mut a, mut b) = engines(20_000, 10_000_000_000, false);
        let mut n = 0;
        run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, _| {
                n += 1;
                if dir == 0 && n == 3 {
                    let last = f.len() - 10;
                    f[last] ^= 0xff; // payload byte: only the ICRC can tell
                }
                true
            },
            |_, _| {},
        );
        let rb = b.report("b", 0);
        assert!(rb.ok && rb.qps[0].verified == Some(true), "{rb:?}");
        assert_eq!(rb.nics[0].rx_bad_icrc, 1);
    }

    #[test]
    fn ce_marks_produce_paced_cnps_that_cut_the_sender_rate() {
        let (mut a, mut b) = engines(400_000, 10_000_000_000, true);
        let mut cnps_on_wire = Vec::new();
        let mut buf_ce = 0;
        let end = run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, now| {
                if dir == 0 {
                    // Mark every data frame CE (ECN bits of the IPv4 TOS byte) and fix the header
                    // checksum; the ICRC masks the TOS byte, so it stays valid.
                    f[15] |= 0x03;
                    f[24] = 0;
                    f[25] = 0;
                    let c =
                        etherparse::Ipv4HeaderSlice::from_slice(&f[14..34]).unwrap().to_header().calc_header_checksum();
                    f[24..26].copy_from_slice(&c.to_be_bytes());
                    buf_ce += 1;
                } else {
                    let p = ParsedFrame::parse(f).unwrap();
                    if p.bth().opcode == WireOpcode::Cnp {
                        assert_eq!(p.ip.dscp, 48);
                        assert_eq!(p.bth().dest_qp, 17);
                        assert!(p.icrc.is_good());
                        cnps_on_wire.push(now);
                    }
                }
                true
            },
            |_, _| {},
        );
        let ra = a.report("a", 0);
        let rb = b.report("b", 0);
        assert!(rb.ok, "{rb:?}");
        assert!(cnps_on_wire.len() >= 2, "{cnps_on_wire:?}");
        assert!(cnps_on_wire.windows(2).all(|w| w[1] - w[0] >= 50_000), "≤ 1 CNP per 50 µs: {cnps_on_wire:?}");
        assert_eq!(rb.qps[0].cnps_sent, cnps_on_wire.len() as u64);
        assert_eq!(ra.qps[0].cnps_received, cnps_on_wire.len() as u64);
        assert_eq!(rb.qps[0].ce_marked, buf_ce as u64, "every data frame arrived CE-marked");
        assert!(ra.qps[0].rate_bps < 10_000_000_000, "DCQCN cut the rate: {}", ra.qps[0].rate_bps);
        // Finished, the cut requester has no timer left to wake for (its rate increase would
        // wake a lingering hostd every T, as the responder's would not).
        assert!(a.finished() && b.finished());
        assert_eq!((a.next_deadline(end), b.next_deadline(end)), (None, None));
    }

    #[test]
    fn a_deferred_np_sends_the_cnp_for_marks_within_the_interval_when_it_ends() {
        // One congestion episode: the first 10 data frames (under 10 µs at 10 Gbit/s) arrive
        // CE-marked. The paper's NP answers the first and ignores the other nine; a deferred one
        // (htsim's) also sends a CNP when the 50 µs interval ends, with no packet arriving then.
        let cnps = |cnp| {
            let (mut a, mut b) = engines(400_000, 10_000_000_000, true);
            b.np = crate::dcqcn::CnpPacer::new(50_000, crate::dcqcn::NpSettings { cnp, ..Default::default() });
            b.qps[0].np = b.np.domain(NpKey { qp: 0, port: 0, local: b.nics[0].cfg.ip, peer: b.qps[0].spec.peer_ip });
            let (mut marked, mut on_wire) = (0, Vec::new());
            run(
                &mut a,
                &mut b,
                0,
                10_000_000_000,
                |dir, f, now| {
                    if dir == 0 && marked < 10 && !ParsedFrame::parse(f).unwrap().payload.is_empty() {
                        f[15] |= 0x03;
                        f[24..26].fill(0);
                        let c = etherparse::Ipv4HeaderSlice::from_slice(&f[14..34])
                            .unwrap()
                            .to_header()
                            .calc_header_checksum();
                        f[24..26].copy_from_slice(&c.to_be_bytes());
                        marked += 1;
                    } else if dir == 1 && ParsedFrame::parse(f).unwrap().bth().opcode == WireOpcode::Cnp {
                        on_wire.push(now);
                    }
                    true
                },
                |_, _| {},
            );
            assert_eq!(b.report("b", 0).qps[0].ce_marked, 10);
            assert_eq!(b.report("b", 0).qps[0].cnps_sent, on_wire.len() as u64);
            on_wire
        };
        let immediate = cnps(crate::dcqcn::CnpMode::Immediate);
        assert_eq!(immediate.len(), 1, "{immediate:?}");
        let deferred = cnps(crate::dcqcn::CnpMode::Deferred);
        assert_eq!(deferred.len(), 2, "{deferred:?}");
        assert_eq!(deferred[0], immediate[0]);
        // At the interval's end, give or take the NIC's serialisation of the CNP frame.
        assert!((49_000..51_000).contains(&(deferred[1] - deferred[0])), "{deferred:?}");
    }

    #[test]
    fn pfc_pauses_data_for_the_quanta_and_quanta_zero_resumes() {
        // 1 Gb/s: 0xffff quanta = 65535 × 512 ns = 33.55 ms.
        let (mut a, mut b) = engines(4_000_000, 1_000_000_000, false);
        let pause =
            MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), 0xffff)).to_frame(MacAddr([2, 0, 0, 0, 0, 0x0b]));
        let resume =
            MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), 0)).to_frame(MacAddr([2, 0, 0, 0, 0, 0x0b]));
        let mut data_times = Vec::new();
        let mut sent_pause = false;
        let mut sent_resume = false;
        run(
            &mut a,
            &mut b,
            0,
            10_000_000_000,
            |dir, f, now| {
                if dir == 0 && ParsedFrame::parse(f).is_ok_and(|p| p.bth().opcode != WireOpcode::Acknowledge) {
                    data_times.push(now);
                }
                true
            },
            |now, a| {
                if now >= 2_000_000 && !sent_pause {
                    a.on_frame(0, &pause, now);
                    sent_pause = true;
                }
                if now >= 50_000_000 && !sent_resume {
                    a.on_frame(0, &pause, now);
                    sent_resume = true;
                }
                if now >= 55_000_000 && sent_resume && a.nic_pfc(0).is_paused(3, now).unwrap() {
                    a.on_frame(0, &resume, now);
                }
            },
        );
        let gaps: Vec<u64> = data_times.windows(2).map(|w| w[1] - w[0]).filter(|&g| g > 1_000_000).collect();
        assert_eq!(gaps.len(), 2, "{gaps:?}");
        assert!((33_000_000..34_200_000).contains(&gaps[0]), "full pause {gaps:?}");
        assert!((4_500_000..5_600_000).contains(&gaps[1]), "resumed by quanta 0 after 5 ms: {gaps:?}");
        let ra = a.report("a", 100_000_000);
        assert_eq!(ra.nics[0].pfc_pause_frames_prio3, 2);
        assert_eq!(ra.nics[0].pfc_resume_frames_prio3, 1);
        let paused = ra.nics[0].pfc_paused_ns_prio3;
        assert!((38_000_000..39_700_000).contains(&paused), "{paused}");
        assert!(b.report("b", 0).ok);
    }
}
