//! A host's `GET /sample` while a job runs: per QP the DCQCN state (rate Rc, α), the CNPs it
//! received and sent and its acknowledged bytes; per NIC the PFC frames it received and whether
//! its data priority is paused now. Built from the report snapshots the data thread publishes
//! every [`crate::job::Job::snapshot_interval_ms`], for the DCQCN timeline (book ch. 11,
//! Fig. 11-7; `rocefab run --timeline`). Values come from the latest report snapshot, which is
//! already in emulated units (the job carries its time dilation).
use serde::{Deserialize, Serialize};

use crate::job::Report;

/// One QP of a [`HostSample`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QpSample {
    pub qpn: u32,
    pub peer_qpn: u32,
    pub label: String,
    pub nic: String,
    /// The QP sends (a requester with bytes to send): its DCQCN reaction point is live.
    pub sender: bool,
    /// Current DCQCN rate Rc of the requester, emulated bit/s (as in the report).
    pub rate_bps: u64,
    /// DCQCN α of the requester.
    pub alpha: f64,
    /// CNPs the requester received.
    pub cnps_received: u64,
    /// CNPs the responder sent (DCQCN notification point).
    pub cnps_sent: u64,
    /// Payload bytes acknowledged to the requester.
    pub acked_bytes: u64,
}

/// One NIC of a [`HostSample`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NicSample {
    pub name: String,
    /// PFC priority of the NIC's RoCEv2 data.
    pub data_priority: u8,
    /// PFC and PAUSE frames received.
    pub pfc_frames_received: u64,
    /// The data priority is paused now.
    pub paused: bool,
    /// Total time the data priority was paused, emulated ns.
    pub paused_ns: u64,
}

/// A host's `GET /sample` answer: the latest snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    pub job: String,
    /// Time since the job started at the snapshot (or its completion time), emulated ns.
    pub elapsed_ns: u64,
    pub qps: Vec<QpSample>,
    pub nics: Vec<NicSample>,
}

impl HostSample {
    /// The sample of report snapshot `r`.
    pub fn from_report(r: &Report) -> HostSample {
        HostSample {
            job: r.job.clone(),
            elapsed_ns: r.elapsed_ns,
            qps: r
                .qps
                .iter()
                .map(|q| QpSample {
                    qpn: q.qpn,
                    peer_qpn: q.peer_qpn,
                    label: q.label.clone(),
                    nic: q.nic.clone(),
                    sender: q.send_bytes > 0,
                    rate_bps: q.rate_bps,
                    alpha: q.alpha,
                    cnps_received: q.cnps_received,
                    cnps_sent: q.cnps_sent,
                    acked_bytes: q.send_completed_bytes,
                })
                .collect(),
            nics: r
                .nics
                .iter()
                .map(|n| NicSample {
                    name: n.name.clone(),
                    data_priority: n.data_priority,
                    pfc_frames_received: n.pfc_frames_received,
                    paused: n.pfc_paused_now,
                    paused_ns: n.pfc_paused_ns_prio3,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{NicReport, QpReport};

    #[test]
    fn sample_takes_dcqcn_cnp_and_pause_state_from_the_report() {
        let mut r = Report { job: "j".into(), elapsed_ns: 5_000_000, ..Default::default() };
        r.qps.push(QpReport {
            qpn: 0x100,
            peer_qpn: 0x201,
            nic: "gpu0".into(),
            label: "r0->r1".into(),
            send_bytes: 1 << 20,
            send_completed_bytes: 4096,
            rate_bps: 400_000_000,
            alpha: 0.25,
            cnps_received: 3,
            ..Default::default()
        });
        r.qps.push(QpReport { qpn: 0x101, nic: "gpu0".into(), cnps_sent: 7, ..Default::default() });
        r.nics.push(NicReport {
            name: "gpu0".into(),
            data_priority: 3,
            pfc_frames_received: 4,
            pfc_paused_now: true,
            pfc_paused_ns_prio3: 90_000,
            ..Default::default()
        });
        let s = HostSample::from_report(&r);
        assert_eq!((s.job.as_str(), s.elapsed_ns), ("j", 5_000_000));
        let q = &s.qps[0];
        assert!(q.sender);
        assert_eq!(
            (q.rate_bps, q.alpha, q.cnps_received, q.acked_bytes, q.label.as_str()),
            (400_000_000, 0.25, 3, 4096, "r0->r1")
        );
        assert!(!s.qps[1].sender);
        assert_eq!(s.qps[1].cnps_sent, 7);
        assert_eq!(
            s.nics[0],
            NicSample {
                name: "gpu0".into(),
                data_priority: 3,
                pfc_frames_received: 4,
                paused: true,
                paused_ns: 90_000
            }
        );
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<HostSample>(&text).unwrap(), s);
    }
}
