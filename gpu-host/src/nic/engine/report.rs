//! The engine's reports: per QP and per NIC counters in emulated time ([`Report`]), the
//! collective's per-rank verification, and what every unfinished QP or rank waits for
//! ([`QpStall`]) when a job stalls.
use super::reduce::{is_done, verify_collective, Coll};
use super::{Engine, Nic, Qp};
use crate::nic::job::{Migration, MilestoneReport, NicReport, QpReport, QpStall, RankReport, Report};
use crate::nic::pattern;
use crate::receiver::Receiver;
use crate::sender::Sender;

impl Engine {
    /// The report at `now`, verifying every responder region that has an `expect_seed`.
    pub fn report(&self, job: &str, now: u64) -> Report {
        self.report_with(job, now, true)
    }

    /// The report at `now`; `verify` compares responder regions with their pattern (costly
    /// for large regions: periodic snapshots skip it). Without `verify` (a periodic snapshot),
    /// an engine of more than [`SNAPSHOT_DETAIL_QPS`] QPs also leaves out what its unfinished
    /// QPs and ranks wait for: listing them costs more than a loaded host's data thread has
    /// between snapshots (a host of a 512-rank all-to-all has 8,176 QPs).
    pub fn report_with(&self, job: &str, now: u64, verify: bool) -> Report {
        let detail = verify || self.qps.len() <= SNAPSHOT_DETAIL_QPS;
        let d = self.dilation;
        let mut ok = true;
        let qps = self
            .qps
            .iter()
            .map(|q| {
                let (r, qp_ok) = self.qp_report(q, verify);
                ok &= qp_ok;
                r
            })
            .collect();
        let nics = self.nics.iter().map(|n| self.nic_report(n, now)).collect();
        let (ranks, ranks_ok) = self.rank_reports(verify, detail);
        ok &= ranks_ok;
        let end =
            if self.coll.as_ref().is_some_and(|c| !c.complete()) { now } else { self.finish_time().unwrap_or(now) };
        let elapsed_ns = d.to_emulated_ns(end - self.start);
        let stalls = if detail { self.stalls(now) } else { Vec::new() };
        Report {
            job: job.to_string(),
            time_dilation: d.factor(),
            ok,
            error: None,
            elapsed_ns,
            started_unix_ns: self.start_unix_ns,
            qps,
            nics,
            ranks,
            stalls,
            nvlink_bytes: self.coll.as_ref().map_or(0, |c| c.nvlink_bytes),
            milestones: self
                .milestones
                .iter()
                .map(|m| MilestoneReport { at_ns: d.to_emulated_ns(m.at_ns.saturating_sub(self.start)), ..*m })
                .collect(),
        }
    }

    /// QP `q`'s report, and whether the QP is done without error (its region verified when
    /// `verify` and it has an `expect_seed`).
    fn qp_report(&self, q: &Qp, verify: bool) -> (QpReport, bool) {
        let d = self.dilation;
        let mut ok = true;
        let mut r = QpReport {
            qpn: q.spec.qpn,
            peer_qpn: q.spec.peer_qpn,
            nic: self.nics[q.nic].cfg.name.clone(),
            label: q.spec.label.clone(),
            error: q.error.clone(),
            migration: q.migrated.map(|(from, at, cause)| Migration {
                from_nic: self.nics[from].cfg.name.clone(),
                at_ns: d.to_emulated_ns(at.saturating_sub(self.start)),
                cause,
            }),
            ..Default::default()
        };
        if let Some(s) = &q.sender {
            let c = s.counters();
            r.send_bytes = q.send_total;
            r.send_completed_bytes = q.send_acked;
            r.packets_sent = c.packets_sent;
            r.retransmitted_packets = c.retransmitted_packets;
            r.timeouts = c.timeouts;
            r.naks_received = c.naks_received;
            r.cnps_received = c.cnps_received;
            r.rate_bps = d.to_emulated_rate(s.rate_bps());
            r.alpha = s.reaction_point().map_or(0.0, |rp| rp.alpha());
            r.send_done_ns = q.send_done.map(|t| d.to_emulated_ns(t - self.start));
            r.goodput_bps = r.send_done_ns.filter(|&d| d > 0).map(|d| q.send_acked as f64 * 8e9 / d as f64);
            ok &= q.send_done.is_some();
        }
        if let Some(rx) = &q.receiver {
            let c = rx.counters();
            r.recv_bytes = q.recv_len;
            r.bytes_placed = c.bytes_placed;
            r.packets_received = c.packets_received;
            r.duplicates = c.duplicates;
            r.out_of_sequence = c.out_of_sequence;
            r.out_of_order = c.out_of_order;
            r.naks_sent = c.naks_sent;
            r.acks_sent = c.acks_sent;
            r.ce_marked = c.ce_marked;
            r.cnps_sent = q.cnps_sent;
            r.recv_done_ns = q.recv_done.map(|t| d.to_emulated_ns(t - self.start));
            ok &= q.recv_done.is_some();
            if let Some(seed) = q.spec.recv.as_ref().and_then(|r| r.expect_seed).filter(|_| verify) {
                let v = self.region(q.spec.qpn).is_some_and(|d| pattern::first_mismatch(d, seed).is_none());
                r.verified = Some(v);
                ok &= v;
            }
        }
        if let Some(p) = &q.pdc {
            ok &= self.pdc_report(q, p, &mut r, verify);
        }
        ok &= q.error.is_none();
        (r, ok)
    }

    /// Fills UET QP `q`'s report `r` from its PDC `p`; whether its ends are done (and verified).
    fn pdc_report(&self, q: &Qp, p: &super::uet::Pdc, r: &mut QpReport, verify: bool) -> bool {
        let d = self.dilation;
        let mut ok = true;
        let mut pr = crate::nic::job::PdcReport {
            spdcid: p.local_id,
            dpdcid: p.peer_id.unwrap_or(0),
            entropies: p.entropy_count(),
            ..Default::default()
        };
        if let Some(t) = &p.tx {
            let c = t.counters();
            r.send_bytes = q.send_total;
            r.send_completed_bytes = q.send_acked;
            r.packets_sent = c.packets_sent;
            r.retransmitted_packets = c.retransmitted_on_nack + c.retransmitted_on_timeout;
            r.timeouts = c.retransmitted_on_timeout;
            r.naks_received = c.nacks_trimmed + c.nacks_other;
            r.rate_bps = self.nics[q.nic].cfg.emulated_line_rate_bps;
            r.send_done_ns = q.send_done.map(|t| d.to_emulated_ns(t - self.start));
            r.goodput_bps = r.send_done_ns.filter(|&d| d > 0).map(|d| q.send_acked as f64 * 8e9 / d as f64);
            pr.retransmitted_on_nack = c.retransmitted_on_nack;
            pr.retransmitted_on_timeout = c.retransmitted_on_timeout;
            pr.nacks_trimmed = c.nacks_trimmed;
            pr.nacks_other = c.nacks_other;
            pr.cwnd_bytes = t.cwnd();
            pr.window_cuts = c.window_cuts;
            ok &= q.send_done.is_some();
        }
        if let Some(x) = &p.rx {
            let c = x.r.counters();
            r.recv_bytes = q.recv_len;
            r.bytes_placed = c.bytes_placed;
            r.packets_received = c.packets_received;
            r.duplicates = c.duplicates;
            r.out_of_order = c.out_of_order;
            r.naks_sent = c.nacks_sent;
            r.acks_sent = c.acks_sent;
            r.ce_marked = c.ce_marked;
            r.recv_done_ns = q.recv_done.map(|t| d.to_emulated_ns(t - self.start));
            pr.trimmed_received = c.trimmed;
            pr.dropped = c.dropped;
            ok &= q.recv_done.is_some();
            if let Some(seed) = q.spec.recv.as_ref().and_then(|r| r.expect_seed).filter(|_| verify) {
                let v = pattern::first_mismatch(&x.region.data, seed).is_none();
                r.verified = Some(v);
                ok &= v;
            }
        }
        r.pdc = Some(pr);
        ok
    }

    /// NIC `n`'s report at `now` (times emulated).
    fn nic_report(&self, n: &Nic, now: u64) -> NicReport {
        let d = self.dilation;
        let dp = n.cfg.classes.data_priority;
        let c = n.pfc.counters(dp).unwrap_or_default();
        NicReport {
            name: n.cfg.name.clone(),
            line_rate_bps: n.cfg.emulated_line_rate_bps,
            path_mtu: n.cfg.path_mtu.bytes(),
            tx_frames: n.c.tx_frames,
            tx_bytes: n.c.tx_bytes,
            rx_frames: n.c.rx_frames,
            rx_bytes: n.c.rx_bytes,
            rx_bad_icrc: n.c.rx_bad_icrc,
            rx_malformed: n.c.rx_malformed,
            rx_unknown_qp: n.c.rx_unknown_qp,
            rx_ignored: n.c.rx_ignored,
            cnps_sent: n.c.cnps_sent,
            cnps_received: n.c.cnps_received,
            ctrl_queue_overflows: n.c.ctrl_overflows,
            pfc_frames_received: n.pfc.frames_received(),
            pfc_ignored_frames: n.pfc.ignored_frames(),
            pfc_pause_frames_prio3: c.pause_frames,
            pfc_resume_frames_prio3: c.resume_frames,
            pfc_paused_ns_prio3: d.to_emulated_ns(n.pfc.paused_ns(dp, now).unwrap_or(0)),
            pfc_paused_now: n.pfc.is_paused(dp, now).unwrap_or(false),
            data_priority: dp,
            data_dscp: n.cfg.classes.data_dscp,
            xdp: Default::default(),
        }
    }

    /// The collective's per-rank reports (none without a collective), and whether it is
    /// complete and, when `verify`, every rank's buffer matches its expectations.
    fn rank_reports(&self, verify: bool, waiting_for: bool) -> (Vec<RankReport>, bool) {
        let mut ok = true;
        let mut ranks = Vec::new();
        if let Some(c) = &self.coll {
            let complete = c.complete();
            ok &= complete;
            let first = verify.then(|| verify_collective(&c.spec.expect, &c.bufs, &c.rank_idx));
            for r in &c.spec.ranks {
                let waiting_for = (waiting_for && !complete).then(|| self.rank_waiting_for(c, r.rank));
                let mut rr = RankReport { rank: r.rank, complete, verified: None, first_mismatch: None, waiting_for };
                if let Some(first) = &first {
                    // The rank's first failing expectation, in the job's order.
                    let mismatch =
                        c.spec.expect.iter().zip(first).filter(|(e, _)| e.rank == r.rank).find_map(|(_, m)| *m);
                    rr.verified = Some(mismatch.is_none() && complete);
                    rr.first_mismatch = mismatch;
                    ok &= mismatch.is_none();
                }
                ranks.push(rr);
            }
        }
        (ranks, ok)
    }

    /// What every unfinished QP is waiting for at `now` (a requester with data not acknowledged,
    /// a responder that has not received everything or still owes an ACK, a QP in error): the
    /// last PSN acknowledged, the PSNs outstanding, timeouts and retries left, whether PFC
    /// pauses its NIC's data priority, and when it last made progress. Empty when every QP
    /// finished.
    pub fn stalls(&self, now: u64) -> Vec<QpStall> {
        let mut out = Vec::new();
        for q in &self.qps {
            let nic = &self.nics[q.nic];
            let paused_now = nic.pfc.is_paused(nic.cfg.classes.data_priority, now).unwrap_or(false);
            let base = QpStall {
                qpn: q.spec.qpn,
                peer_qpn: q.spec.peer_qpn,
                nic: nic.cfg.name.clone(),
                label: q.spec.label.clone(),
                paused_now,
                at_ns: self.since_start(now),
                error: q.error.clone(),
                ..Default::default()
            };
            if let Some(s) = &q.sender {
                if q.send_done.is_none() || q.error.is_some() {
                    out.push(self.requester_stall(q, s, base.clone()));
                }
            }
            if let Some(r) = &q.receiver {
                if q.recv_done.is_none() || r.owes_ack() || (q.error.is_some() && q.sender.is_none()) {
                    out.push(self.responder_stall(q, r, base.clone()));
                }
            }
            if let Some(p) = &q.pdc {
                out.extend(self.pdc_stalls(q, p, base));
            }
        }
        out
    }

    /// Emulated ns from the job start to `t` (0 before it).
    fn since_start(&self, t: u64) -> u64 {
        self.dilation.to_emulated_ns(t.saturating_sub(self.start))
    }

    /// The stall of QP `q`'s unfinished requester `s` (`base`: the QP's part).
    fn requester_stall(&self, q: &Qp, s: &Sender, base: QpStall) -> QpStall {
        let pause = if !self.nics[q.nic].link_up {
            " (its port has no carrier and it has no alternate path left)"
        } else if base.paused_now {
            " (its priority is paused by PFC)"
        } else {
            ""
        };
        let since = |t: u64| self.since_start(t);
        let una = s.snd_una();
        let out_n = s.outstanding();
        let waiting_for = if q.error.is_some() {
            "nothing: the QP is in the error state".to_string()
        } else if out_n > 0 {
            format!("the ACK of PSN {}{pause}", una.value())
        } else if s.unsent() > 0 {
            format!("its turn to send PSN {}{pause}", s.snd_nxt().value())
        } else {
            "data to send (a collective dependency)".to_string()
        };
        QpStall {
            role: "requester".into(),
            // ACKs are cumulative: everything before the oldest unacknowledged PSN.
            last_acked_psn: s.last_progress().map(|_| una.sub(1).value()),
            outstanding_psns: (out_n > 0).then(|| (una.value(), s.high_water().sub(1).value())),
            outstanding_packets: out_n,
            unsent_packets: s.unsent(),
            timeouts: s.counters().timeouts,
            retries_left: s.retries_left(),
            last_progress_ns: s.last_progress().map(since),
            last_heard_ns: s.last_ack().map(since),
            waiting_for,
            ..base
        }
    }

    /// The stalls of UET QP `q`'s PDC `p`: an unfinished sending end, an unfinished receiving
    /// end (`base`: the QP's part).
    fn pdc_stalls(&self, q: &Qp, p: &super::uet::Pdc, base: QpStall) -> Vec<QpStall> {
        let mut out = Vec::new();
        if let Some(t) = &p.tx {
            if q.send_done.is_none() || q.error.is_some() {
                let waiting_for = if q.error.is_some() {
                    "nothing: the PDC failed".to_string()
                } else if t.inflight() > 0 {
                    format!("ACKs of {} bytes in flight (window {} bytes)", t.inflight(), t.cwnd())
                } else if t.has_work() {
                    "its turn to send".to_string()
                } else {
                    "data to send (a collective dependency)".to_string()
                };
                let c = t.counters();
                out.push(QpStall {
                    role: "requester".into(),
                    timeouts: c.retransmitted_on_timeout,
                    waiting_for,
                    ..base.clone()
                });
            }
        }
        if let Some(x) = &p.rx {
            if q.recv_done.is_none() || x.r.owes_ack() {
                let waiting_for = if q.recv_done.is_none() {
                    format!("{} more bytes from its peer", q.recv_len.saturating_sub(x.r.counters().bytes_placed))
                } else {
                    "sending the ACK it owes".to_string()
                };
                out.push(QpStall {
                    role: "responder".into(),
                    placed_bytes: x.r.counters().bytes_placed,
                    expected_bytes: q.recv_len,
                    waiting_for,
                    ..base
                });
            }
        }
        out
    }

    /// The stall of QP `q`'s unfinished responder `r` (`base`: the QP's part).
    fn responder_stall(&self, q: &Qp, r: &Receiver, base: QpStall) -> QpStall {
        let pause = if base.paused_now { " (its priority is paused by PFC)" } else { "" };
        let since = |t: u64| self.since_start(t);
        let waiting_for = if q.recv_done.is_none() {
            let hole = if r.pending_out_of_order() > 0 {
                format!(" ({} packets placed after the hole)", r.pending_out_of_order())
            } else {
                String::new()
            };
            format!("request PSN {} from its peer{hole}", r.expected_psn().value())
        } else {
            format!("sending the ACK it owes{pause}")
        };
        QpStall {
            role: "responder".into(),
            expected_psn: Some(r.expected_psn().value()),
            placed_bytes: r.counters().bytes_placed,
            expected_bytes: q.recv_len,
            last_progress_ns: r.last_placed().map(since),
            last_heard_ns: r.last_packet().map(since),
            waiting_for,
            ..base
        }
    }

    /// What rank `rank` of an incomplete collective waits for (at most [`WAITING_FOR_SHOWN`]
    /// items, then how many more): its first transfer not yet
    /// received (with how many of its packets arrived) and its first write not yet posted.
    fn rank_waiting_for(&self, c: &Coll, rank: u32) -> String {
        let mut parts = Vec::new();
        for (qi, list, applied) in &c.recvq {
            let Some(&(ri, need)) = list.get(*applied) else { continue };
            let r = &c.spec.recvs[ri];
            if r.rank != rank {
                continue;
            }
            let qp = &self.qps[*qi];
            let got = qp.rx_packets_completed();
            let first = if *applied == 0 { 0 } else { list[*applied - 1].1 };
            parts.push(format!(
                "transfer {} on QP {:#x} ({}): {} of {} packets",
                r.id,
                qp.spec.qpn,
                qp.spec.label,
                got.saturating_sub(first).min(need - first),
                need - first
            ));
        }
        for (qi, list, next) in &c.sendq {
            let qp = &self.qps[*qi];
            let Some(&si) = list.get(*next) else {
                // Every write posted: waiting for their acknowledgements, if any is missing.
                let mine = list.iter().any(|&i| c.spec.sends[i].rank == rank);
                if mine && qp.send_acked < qp.send_total {
                    parts.push(format!(
                        "its writes on QP {:#x} ({}) to complete: {} of {} bytes",
                        qp.spec.qpn, qp.spec.label, qp.send_acked, qp.send_total
                    ));
                }
                continue;
            };
            let x = &c.spec.sends[si];
            if x.rank != rank {
                continue;
            }
            let why = match x.deps.iter().find(|&&d| !is_done(&c.done, d)) {
                Some(dep) => format!("waits for transfer {dep}"),
                None => "waits for room in its send ring".to_string(),
            };
            parts.push(format!("write {} on QP {:#x} ({}) not posted: {why}", x.id, qp.spec.qpn, qp.spec.label));
        }
        if parts.is_empty() {
            parts.push("nothing of its own: its transfers are done, other ranks of the host are not".into());
        }
        // A rank of a large all-to-all may wait on hundreds of QPs: name the first few.
        let more = parts.len().saturating_sub(WAITING_FOR_SHOWN);
        parts.truncate(WAITING_FOR_SHOWN);
        if more > 0 {
            parts.push(format!("and {more} more"));
        }
        parts.join("; ")
    }
}

/// The most QPs for which a periodic snapshot lists stalls and what ranks wait for.
pub const SNAPSHOT_DETAIL_QPS: usize = 1024;

/// How many transfers a rank's `waiting_for` names before "and N more".
const WAITING_FOR_SHOWN: usize = 4;

#[cfg(test)]
mod tests {
    use crate::nic::engine::testkit::{engines, jobs, run};
    use crate::nic::engine::Engine;
    use crate::psn::Psn;
    use crate::segment::PathMtu;
    use rocefab_wire::ethernet::{MacAddr, PrioritySet};
    use rocefab_wire::mac_control::{MacControlRepr, PfcRepr};
    use rocefab_wire::roce::{Opcode as WireOpcode, ParsedFrame};

    #[test]
    fn pfc_pause_time_is_reported_in_emulated_time() {
        // 0xffff quanta at 1 Gb/s emulated is 33.55 ms emulated; at D 4 it lasts 134 ms of wall
        // clock and is reported as 33.55 ms.
        let (mut ja, jb) = jobs(4_000_000, 1_000_000_000, false);
        ja.time_dilation = 4.0;
        let mut a = Engine::from_job(&ja, &[PathMtu::Mtu1024], 0).unwrap();
        let _ = jb;
        let pause =
            MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), 0xffff)).to_frame(MacAddr([2, 0, 0, 0, 0, 0x0b]));
        a.on_frame(0, &pause, 1_000);
        let quanta_ns = crate::pfc::quanta_to_ns(0xffff, 1_000_000_000);
        assert!(a.nic_pfc(0).is_paused(3, 1_000 + quanta_ns * 4 - 10).unwrap());
        assert!(!a.nic_pfc(0).is_paused(3, 1_000 + quanta_ns * 4 + 10).unwrap());
        let r = a.report("a", 1_000 + quanta_ns * 4 + 1_000_000);
        assert!(
            r.nics[0].pfc_paused_ns_prio3.abs_diff(quanta_ns) <= 1,
            "{} vs {quanta_ns}",
            r.nics[0].pfc_paused_ns_prio3
        );
    }

    #[test]
    fn a_stalled_job_reports_what_each_qp_waits_for() {
        // 300 000 bytes = 293 packets from PSN 16777000 (wrapping at 2^24); window 32, ACK
        // timeout 2 ms, 7 retries. The responder's ACKs are lost from the first one that
        // acknowledges past PSN 16777100 on: the requester keeps a full window outstanding and
        // times out every 2 ms.
        let (mut a, mut b) = engines(300_000, 10_000_000_000, false);
        let first = 16_777_000u32;
        let mut last_delivered: Option<(u32, u64)> = None;
        let end = run(
            &mut a,
            &mut b,
            0,
            5_000_000,
            |dir, f, now| {
                let p = ParsedFrame::parse(f).unwrap();
                if dir == 1 && p.bth().opcode == WireOpcode::Acknowledge {
                    let psn = p.bth().psn;
                    if Psn::new(first).forward_distance(Psn::new(psn)) > 100 {
                        return false;
                    }
                    last_delivered = Some((psn, now + 5_000));
                }
                true
            },
            |_, _| {},
        );
        assert!(!a.finished() && !b.finished(), "the transfer cannot finish without ACKs");
        let (acked, acked_at) = last_delivered.expect("some ACKs arrived");
        let r = a.report("a", end);
        assert!(!r.ok);
        assert_eq!(r.stalls.len(), 1, "{:#?}", r.stalls);
        let st = &r.stalls[0];
        assert_eq!((st.qpn, st.peer_qpn, st.role.as_str(), st.nic.as_str()), (17, 33, "requester", "a0"));
        assert_eq!(st.last_acked_psn, Some(acked));
        let first_out = Psn::new(acked).next().value();
        assert_eq!(st.outstanding_psns, Some((first_out, Psn::new(first_out).add(31).value())), "a full window of 32");
        assert_eq!(st.outstanding_packets, 32);
        // Timeouts at 2 ms and 4 ms after the last progress, none yet at 5 ms when it came after 1 ms.
        let expected_timeouts = (end - acked_at) / 2_000_000;
        assert!(acked_at < 1_000_000 && expected_timeouts == 2, "acked at {acked_at}, end {end}");
        assert_eq!((st.timeouts, st.retries_left), (2, 5));
        assert_eq!(st.last_progress_ns, Some(acked_at), "the ACK's arrival");
        assert_eq!(st.last_heard_ns, Some(acked_at));
        assert_eq!(st.at_ns, end);
        assert!(!st.paused_now);
        assert_eq!(st.waiting_for, format!("the ACK of PSN {first_out}"));
        let line = st.describe();
        assert!(line.contains(&format!("last acked PSN {acked}, outstanding PSNs {first_out}..=")), "{line}");
        assert!(line.contains("2 timeouts (5 retries left), not paused"), "{line}");

        // The responder received everything that was sent (the go-back-N resends are
        // duplicates): it waits for the PSN after the window.
        let rb = b.report("b", end);
        assert_eq!(rb.stalls.len(), 1, "{:#?}", rb.stalls);
        let sb = &rb.stalls[0];
        let next = Psn::new(first_out).add(32).value();
        assert_eq!((sb.role.as_str(), sb.expected_psn), ("responder", Some(next)));
        assert_eq!(sb.placed_bytes, u64::from(Psn::new(first).forward_distance(Psn::new(next))) * 1024);
        assert_eq!(sb.expected_bytes, 300_000);
        assert_eq!(sb.waiting_for, format!("request PSN {next} from its peer"));
        assert!(
            sb.last_heard_ns.unwrap() > sb.last_progress_ns.unwrap(),
            "duplicates kept arriving after the last placement"
        );

        // A PFC pause on the data priority shows in the report made while it holds.
        let pause =
            MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(1 << 3), 0xffff)).to_frame(MacAddr([2, 0, 0, 0, 0, 0x0b]));
        a.on_frame(0, &pause, end);
        let st = &a.report("a", end + 1_000).stalls[0];
        assert!(st.paused_now);
        assert!(st.waiting_for.ends_with("(its priority is paused by PFC)"), "{}", st.waiting_for);
        assert!(st.describe().contains(", paused by PFC now"));

        // A finished transfer reports no stalls.
        let (mut a, mut b) = engines(30_000, 10_000_000_000, false);
        let end = run(&mut a, &mut b, 0, 1_000_000_000, |_, _, _| true, |_, _| {});
        assert!(a.finished() && b.finished());
        assert!(a.report("a", end).stalls.is_empty() && b.report("b", end).stalls.is_empty());
    }
}
