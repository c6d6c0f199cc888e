//! The engine's UET mode: a NIC with a [`job::UetSpec`] runs every QP as a RUD Packet Delivery
//! Context ([`crate::uet`]) on UET frames (`rocefab_wire::uet::frame`) instead of RoCEv2.
//!
//! * Data: a PDS RUD request (SYN with the PSN offset until the first ACK names the peer's PDC,
//!   AR on a write's last packet and on retransmissions) and an SES standard request (WRITE;
//!   JobID and PIDonFEP from the job; buffer offset = the target address; memory key = the
//!   target QP number (high 32 bits) and its rkey (low 32 bits), which is how the receiver finds
//!   the region a SYN packet is for; SOM/EOM; payload length and message offset on every packet
//!   but the first), UDP to port 4793 with the packet's entropy as source port, DSCP and ECT(0)
//!   as the NIC's data class.
//! * A PDC id is the QP's index on its host + 1.
//! * ACK: a PDS ACK_CC (CACK_PSN, the PSN that prompted it, a 64-PSN SACK bitmap, the M flag
//!   for CE-marked data, NSCC state with the bytes received and out-of-order count).
//! * A received request whose payload is shorter than its SES header says (the SOM packet:
//!   min(request length, path MTU); the others: payload_length), or that carries the fabric's
//!   trim DSCP, was trimmed: it is not placed and a NACK (code TRIMMED) goes back at once.
//! * No DCQCN or CNPs in this mode: ECN reaches the sender in the ACK and cuts its window.
use rocefab_wire::roce::IpEcn;
use rocefab_wire::uet::frame::{Encap, ParsedUetFrame, Ports, Ses, UetFrame};
use rocefab_wire::uet::ses::{self, StandardRequest, StdTail};
use rocefab_wire::uet::{self, ack_flags, cc_type, request_flags, NackCode, NsccState, Repr as Pds};

use super::{job, Engine, Nic, CTRL_QUEUE_CAPACITY};
use crate::receiver::MemoryRegion;
use crate::uet::{AckOut, Entropy, PdcReceiver, PdcSender, RxPacket, RxVerdict};

/// A QP's PDC: its sending and receiving ends.
pub(super) struct Pdc {
    pub tx: Option<PdcSender>,
    pub rx: Option<PdcRx>,
    /// This end's PDC id.
    pub local_id: u16,
    /// The peer's, learnt from its packets.
    pub peer_id: Option<u16>,
    /// Entropy values used (mod 256).
    pub entropies: [u64; 4],
}

/// A PDC's receiving end and the region it places into.
pub(super) struct PdcRx {
    pub r: PdcReceiver,
    pub region: MemoryRegion,
    pub start_psn: u32,
}

/// A control packet a NIC owes.
#[derive(Clone, Copy, Debug)]
pub(super) enum UetCtrl {
    Ack(AckOut),
    /// A NACK for a trimmed packet of this PSN.
    NackTrimmed(u32),
    /// ROD: a NACK (ROD_OOO) for the PSN expected next.
    NackRodOutOfOrder(u32),
}

impl Pdc {
    pub fn new(local_id: u16) -> Pdc {
        Pdc { tx: None, rx: None, local_id, peer_id: None, entropies: [0; 4] }
    }

    /// Packets received in sequence (the collective's completion by PSN range).
    pub fn packets_completed(&self) -> u64 {
        self.rx.as_ref().map_or(0, |x| x.r.packets_completed(x.start_psn))
    }

    pub fn entropy_count(&self) -> u32 {
        self.entropies.iter().map(|w| w.count_ones()).sum()
    }
}

/// The entropy a PDC's packets carry: sprayed over 256 source ports above 0xC000, or the QP's
/// one port.
pub(super) fn entropy(spec: &job::UetSpec, sport: u16) -> Entropy {
    // ROD takes one path: sprayed packets would arrive out of order and be sent again.
    if spec.spray && !spec.ordered {
        Entropy::Spray { base: 0xc000, paths: 256 }
    } else {
        Entropy::Fixed(sport)
    }
}

fn push_ctrl(nic: &mut Nic, qi: usize, c: UetCtrl) {
    if nic.uet_ctrl.len() >= CTRL_QUEUE_CAPACITY {
        nic.c.ctrl_overflows += 1;
    } else {
        nic.uet_ctrl.push_back((qi, c));
    }
}

impl Engine {
    /// A frame received on UET NIC `nic_idx` at `now`: requests are placed (or NACKed when
    /// trimmed) and acknowledged, ACKs and NACKs go to their sender. Returns (received,
    /// acked): whether a request was placed, whether an ACK freed send room, and the QP.
    pub(super) fn on_uet_frame(&mut self, nic_idx: usize, frame: &[u8], now: u64) -> Option<(usize, bool, bool)> {
        let spec = self.nics[nic_idx].cfg.uet?;
        let ports = Ports { udp_port: spec.udp_port, ip_protocol: spec.ip_protocol.unwrap_or(uet::IP_PROTOCOL) };
        let p = match ParsedUetFrame::parse_with(frame, ports) {
            Ok(p) => p,
            Err(_) => {
                self.nics[nic_idx].c.rx_malformed += 1;
                return None;
            }
        };
        match p.pds {
            Pds::Request { ordered, flags, psn, spdcid, dpdcid, .. } if ordered == spec.ordered => {
                let Ses::Request(s) = p.ses else {
                    self.nics[nic_idx].c.rx_ignored += 1;
                    return None;
                };
                let Some(qi) = self.by_qpn.get((s.memory_key >> 32) as u32) else {
                    self.nics[nic_idx].c.rx_unknown_qp += 1;
                    return None;
                };
                let syn = flags & request_flags::SYN != 0;
                let (nic, qp) = (&mut self.nics[nic_idx], &mut self.qps[qi]);
                let Some(pdc) = qp.pdc.as_mut().filter(|x| x.rx.is_some() && qp.nic == nic_idx) else {
                    nic.c.rx_unknown_qp += 1;
                    return None;
                };
                if !syn && dpdcid != pdc.local_id {
                    nic.c.rx_unknown_qp += 1;
                    return None;
                }
                pdc.peer_id = Some(spdcid);
                let max_payload = nic.cfg.path_mtu.bytes();
                let expected = match s.tail {
                    StdTail::HeaderData(_) => s.request_length.min(max_payload),
                    StdTail::Continuation { payload_length, .. } => u32::from(payload_length),
                };
                let len = p.payload.len() as u32;
                let trimmed =
                    len < expected || spec.trim_dscp.is_some_and(|d| d == p.dscp && d != nic.cfg.classes.data_dscp);
                let rx = pdc.rx.as_mut().expect("filtered above");
                let v = rx.r.on_packet(
                    RxPacket {
                        psn,
                        syn_offset: syn.then_some(dpdcid & 0x0fff),
                        len,
                        trimmed,
                        ce: p.ecn == IpEcn::CongestionExperienced,
                        ar: flags & request_flags::AR != 0,
                    },
                    now,
                );
                let mut placed = false;
                match v {
                    RxVerdict::Place => {
                        let at = s.buffer_offset.wrapping_sub(rx.region.va);
                        let end = at.checked_add(u64::from(len));
                        match end.filter(|&e| e <= rx.region.data.len() as u64) {
                            Some(e) => {
                                rx.region.data[at as usize..e as usize].copy_from_slice(p.payload);
                                placed = true;
                            }
                            None => {
                                qp.error.get_or_insert_with(|| {
                                    format!("UET write to {:#x} (+{len}) outside the region", s.buffer_offset)
                                });
                            }
                        }
                    }
                    RxVerdict::Trimmed => push_ctrl(nic, qi, UetCtrl::NackTrimmed(psn)),
                    RxVerdict::OutOfOrder { expected } => push_ctrl(nic, qi, UetCtrl::NackRodOutOfOrder(expected)),
                    RxVerdict::Duplicate | RxVerdict::Dropped => {}
                }
                if let Some(a) = rx.r.poll(now) {
                    push_ctrl(nic, qi, UetCtrl::Ack(a));
                }
                if qp.recv_done.is_none() && rx.r.counters().bytes_placed >= qp.recv_len {
                    qp.recv_done = Some(now);
                }
                Some((qi, placed, false))
            }
            Pds::AckCc { flags, cack_psn, spdcid, dpdcid, sack_psn_offset, sack_bitmap, .. } => {
                let sack_base = cack_psn.wrapping_add(sack_psn_offset as i32 as u32);
                self.uet_ack(
                    nic_idx,
                    dpdcid,
                    |tx| tx.on_ack(spdcid, cack_psn, sack_base, sack_bitmap, flags & ack_flags::M != 0, now),
                    now,
                )
            }
            Pds::Ack { flags, cack_psn, spdcid, dpdcid, .. } => self.uet_ack(
                nic_idx,
                dpdcid,
                |tx| tx.on_ack(spdcid, cack_psn, cack_psn, 0, flags & ack_flags::M != 0, now),
                now,
            ),
            Pds::Nack { code: NackCode::RodOutOfOrder, psn, dpdcid, .. } => {
                self.uet_ack(nic_idx, dpdcid, |tx| tx.on_rod_nack(psn), now)
            }
            Pds::Nack { code, psn, dpdcid, .. } => {
                let trimmed = matches!(code, NackCode::Trimmed | NackCode::TrimmedLastHop | NackCode::TrimmedAck);
                self.uet_ack(nic_idx, dpdcid, |tx| tx.on_nack(psn, trimmed, now), now)
            }
            _ => {
                self.nics[nic_idx].c.rx_ignored += 1;
                None
            }
        }
    }

    /// Applies `f` to the sender of the PDC `dpdcid` names, then takes its completions.
    fn uet_ack(
        &mut self,
        nic_idx: usize,
        dpdcid: u16,
        f: impl FnOnce(&mut PdcSender),
        now: u64,
    ) -> Option<(usize, bool, bool)> {
        let qi = usize::from(dpdcid).checked_sub(1).filter(|&q| q < self.qps.len());
        let Some(qi) = qi else {
            self.nics[nic_idx].c.rx_unknown_qp += 1;
            return None;
        };
        let qp = &mut self.qps[qi];
        let Some(tx) = qp.pdc.as_mut().and_then(|x| x.tx.as_mut()) else {
            self.nics[nic_idx].c.rx_ignored += 1;
            return None;
        };
        f(tx);
        let mut freed = false;
        while let Some(c) = tx.pop_completion() {
            qp.send_acked += u64::from(c.len);
            if let Some(ring) = qp.send_ring.as_mut() {
                freed |= ring.posted.pop_front().is_some();
            }
        }
        if qp.send_done.is_none() && qp.send_acked >= qp.send_total {
            qp.send_done = Some(now);
        }
        Some((qi, false, freed))
    }

    /// The UET PDCs' timers at `now`: retransmission timeouts and coalesced ACKs.
    pub(super) fn poll_uet(&mut self, qi: usize, now: u64) {
        let qp = &mut self.qps[qi];
        let Some(pdc) = qp.pdc.as_mut() else { return };
        if let Some(tx) = pdc.tx.as_mut() {
            if qp.error.is_none() {
                if let Err(e) = tx.poll(now) {
                    qp.error = Some(e.to_string());
                }
            }
        }
        if let Some(a) = pdc.rx.as_mut().and_then(|rx| rx.r.poll(now)) {
            push_ctrl(&mut self.nics[qp.nic], qi, UetCtrl::Ack(a));
        }
    }

    /// The next UET frame NIC `nic_idx` sends at `now` into `buf`: a control packet first, then
    /// the PDCs' data round robin. `None`: nothing to send.
    pub(super) fn next_uet_frame(&mut self, nic_idx: usize, buf: &mut [u8], now: u64) -> Option<Result<usize, ()>> {
        let nic = &mut self.nics[nic_idx];
        let spec = nic.cfg.uet?;
        if let Some((qi, c)) = nic.uet_ctrl.pop_front() {
            let qp = &self.qps[qi];
            let pdc = qp.pdc.as_ref()?;
            let (local, peer) = (pdc.local_id, pdc.peer_id.unwrap_or(0));
            let pds = match c {
                UetCtrl::Ack(a) => Pds::AckCc {
                    next_header: uet::next_header::NONE,
                    flags: if a.ecn_marked { ack_flags::M } else { 0 },
                    ack_psn_offset: clamp16(a.ack_psn.wrapping_sub(a.cack_psn) as i32),
                    cack_psn: a.cack_psn,
                    spdcid: local,
                    dpdcid: peer,
                    cc_type: cc_type::NSCC,
                    cc_flags: 0,
                    mpr: 0,
                    sack_psn_offset: clamp16(a.sack_base.wrapping_sub(a.cack_psn) as i32),
                    sack_bitmap: a.sack_bitmap,
                    cc_state: NsccState {
                        rcvd_bytes: (a.rcvd_bytes & 0xff_ffff) as u32,
                        ooo_count: a.ooo as u16,
                        ..Default::default()
                    }
                    .to_u64(),
                },
                UetCtrl::NackTrimmed(psn) | UetCtrl::NackRodOutOfOrder(psn) => Pds::Nack {
                    next_header: uet::next_header::NONE,
                    flags: 0,
                    code: if matches!(c, UetCtrl::NackTrimmed(_)) {
                        NackCode::Trimmed
                    } else {
                        NackCode::RodOutOfOrder
                    },
                    vendor_code: 0,
                    psn,
                    spdcid: local,
                    dpdcid: peer,
                    payload: 0,
                },
            };
            return Some(frame(nic, qp, encap(&spec, qp.sport), pds, Ses::None, &[]).emit(buf).map_err(drop));
        }
        let n = nic.qps.len();
        for k in 0..n {
            let qi = nic.qps[(nic.rr + k) % n];
            let qp = &mut self.qps[qi];
            if qp.error.is_some() {
                continue;
            }
            let Some(pdc) = qp.pdc.as_mut() else { continue };
            let Some(tx) = pdc.tx.as_mut() else { continue };
            let Some(t) = tx.next_packet(now) else { continue };
            nic.rr = (nic.rr + k + 1) % n;
            let e = usize::from(t.entropy as u8);
            pdc.entropies[e / 64] |= 1 << (e % 64);
            let mut flags = 0;
            if t.syn {
                flags |= request_flags::SYN;
            }
            if t.ar {
                flags |= request_flags::AR;
            }
            if t.retx {
                flags |= request_flags::RETX;
            }
            let pds = Pds::Request {
                ordered: spec.ordered,
                next_header: uet::next_header::STANDARD_REQUEST,
                flags,
                clear_psn_offset: t.clear_psn_offset,
                psn: t.psn,
                spdcid: pdc.local_id,
                dpdcid: if t.syn { t.psn_offset & 0x0fff } else { t.dpdcid },
            };
            let rkey = qp.spec.send.as_ref().map_or(0, |s| s.rkey);
            let mut sf = 0;
            if t.som {
                sf |= ses::flags::SOM;
            }
            if t.eom {
                sf |= ses::flags::EOM;
            }
            let s = StandardRequest {
                opcode: ses::Opcode::Write,
                version: 0,
                flags: sf,
                message_id: t.message_id,
                ri_generation: 0,
                job_id: spec.job_id,
                pid_on_fep: spec.pid_on_fep,
                resource_index: 0,
                buffer_offset: t.buffer_offset,
                initiator: qp.spec.qpn,
                memory_key: (u64::from(qp.spec.peer_qpn) << 32) | u64::from(rkey),
                tail: if t.som {
                    StdTail::HeaderData(0)
                } else {
                    StdTail::Continuation { payload_length: t.len as u16, message_offset: t.message_offset }
                },
                request_length: t.request_length,
            };
            let start = t.local_addr as usize;
            let payload = &qp.send_buf[start..start + t.len as usize];
            return Some(
                frame(nic, qp, encap(&spec, t.entropy), pds, Ses::Request(s), payload).emit(buf).map_err(drop),
            );
        }
        None
    }
}

/// A frame of `qp` on `nic`: the NIC's data class (DSCP, ECT(0)), to the QP's peer.
fn frame<'a>(nic: &Nic, qp: &super::Qp, encap: Encap, pds: Pds, ses: Ses, payload: &'a [u8]) -> UetFrame<'a> {
    UetFrame {
        src_mac: nic.cfg.mac,
        dst_mac: qp.peer_mac,
        src_ip: nic.cfg.ip,
        dst_ip: qp.spec.peer_ip,
        dscp: nic.cfg.classes.data_dscp,
        ecn: IpEcn::Ect0,
        ttl: 64,
        encap,
        pds,
        ses,
        payload,
    }
}

/// UDP to the NIC's port with `entropy` as source port, or the native encapsulation.
fn encap(spec: &job::UetSpec, entropy: u16) -> Encap {
    match spec.ip_protocol {
        Some(protocol) => Encap::Ip { protocol, entropy },
        None => Encap::Udp { src_port: entropy, dst_port: spec.udp_port },
    }
}

fn clamp16(v: i32) -> i16 {
    v.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16
}
