//! A switch's `GET /sample` answer, which `rocefab run --timeline` polls and the machine-bound
//! check reads: per-port counters, queue depths and the thresholds the timeline draws.
use dataplane_common::limits::NUM_TC;
use serde::{Deserialize, Serialize};

/// The thresholds the timeline draws as horizontal lines (bytes, as configured). They act on
/// depths counted in whole cells of `cell_bytes` ([`PortSample::depth_cell_bytes`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    /// WRED minimum: no ECN mark below this egress queue depth.
    pub wred_min_bytes: u64,
    /// WRED maximum: every ECT packet marked at and above it.
    pub wred_max_bytes: u64,
    /// Bit tc set: egress queue tc runs WRED.
    pub wred_queues: u8,
    /// Ingress priority group: PFC XOFF sent when it crosses this.
    pub xoff_bytes: u64,
    /// Ingress priority group: PFC XON sent when it falls below this.
    pub xon_bytes: u64,
    /// Bit p set: priority p is lossless (PFC).
    pub lossless_priorities: u8,
    /// Accounting cell of the shared buffer, bytes (0 = frame bytes): every threshold above
    /// acts on depths counted in whole cells.
    #[serde(default)]
    pub cell_bytes: u32,
}

/// One port of a [`SwitchSample`]; arrays are indexed by traffic class / priority 0..=7.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortSample {
    /// Interface name in the switch's namespace.
    pub name: String,
    /// What is on the other end (`host1:gpu0`, `spine1:eth3`).
    pub peer: String,
    /// Line rate of the port, emulated bit/s (as configured).
    #[serde(default)]
    pub line_rate_bps: u64,
    /// Frames dequeued for transmission per egress queue since the daemon started.
    #[serde(default)]
    pub tx_packets: [u64; NUM_TC],
    /// Bytes (Ethernet frame without FCS) dequeued for transmission per egress queue.
    #[serde(default)]
    pub tx_bytes: [u64; NUM_TC],
    /// Frames received on the port since the daemon started (every class).
    #[serde(default)]
    pub rx_packets: u64,
    /// Bytes (Ethernet frame without FCS) received on the port since the daemon started.
    #[serde(default)]
    pub rx_bytes: u64,
    /// Egress queue depth now, frame bytes.
    pub depth_bytes: [u64; NUM_TC],
    /// Highest egress queue depth since the daemon started, frame bytes.
    pub peak_depth_bytes: [u64; NUM_TC],
    /// Egress queue depth now as the shared buffer charges it: whole cells × the cell size
    /// ([`Thresholds::cell_bytes`]). What WRED and the buffer thresholds act on.
    #[serde(default)]
    pub depth_cell_bytes: [u64; NUM_TC],
    /// Highest `depth_cell_bytes` since the daemon started.
    #[serde(default)]
    pub peak_depth_cell_bytes: [u64; NUM_TC],
    /// Highest `depth_cell_bytes` since the switch's current peak window opened
    /// ([`SwitchSample::peak_window`]; `rocefab run` opens one per job, `POST /peak-window`).
    #[serde(default)]
    pub window_peak_cell_bytes: [u64; NUM_TC],
    /// Time integral of `depth_cell_bytes` from the daemon's start to [`SwitchSample::clock_ns`],
    /// byte × emulated ns: exact (added at every enqueue and dequeue on the data-plane clock).
    /// The time-weighted average depth between two samples is the difference of this over the
    /// difference of `clock_ns` ([`average_depth`]).
    #[serde(default)]
    pub depth_area_byte_ns: [f64; NUM_TC],
    /// PFC frames sent out of this port with the priority's bit set (XOFF, refresh, XON).
    pub pfc_tx_frames: [u64; NUM_TC],
    /// Pause onsets of this ingress port per priority: XOFFs sent because its priority group
    /// crossed xOFF (not paused → paused at the peer); refreshes and XONs are not counted.
    #[serde(default)]
    pub pause_onsets: [u64; NUM_TC],
    /// PFC frames received on this port with the priority's bit set.
    pub pfc_rx_frames: [u64; NUM_TC],
    /// The peer pauses this egress priority now.
    pub paused: [bool; NUM_TC],
    /// Total time this egress priority has been paused by the peer, emulated ns (wall ÷ D).
    pub paused_ns: [u64; NUM_TC],
    /// Packets that arrived on this port and the XDP program marked CE (ECN).
    pub ecn_marked: u64,
    /// Packets that arrived on this port and the XDP program dropped by WRED (Not-ECT).
    pub wred_dropped: u64,
    /// Packets marked CE as they left this port's queues (`wred.at: dequeue`).
    #[serde(default)]
    pub ecn_marked_dequeue: u64,
    /// Not-ECT packets WRED dropped as they left this port's queues (`wred.at: dequeue`).
    #[serde(default)]
    pub wred_dropped_dequeue: u64,
    /// TX stalls of this port since the daemon started: it had frames queued that the peer did
    /// not pause and sent nothing for longer than a few frame times (the machine's doing, not
    /// the model's).
    #[serde(default)]
    pub stalls: u64,
    /// Their total time, emulated ns.
    #[serde(default)]
    pub stalled_ns: u64,
    /// The longest since the daemon started.
    #[serde(default)]
    pub longest_stall: Option<StallSample>,
    /// The latest stalls, oldest first (a bounded log: `stalls` says how many there were).
    #[serde(default)]
    pub recent_stalls: Vec<StallSample>,
    /// The frame time a stall is measured against: the serialisation time of the largest frame
    /// the port had sent (at least a 1514-byte one), emulated ns; a stall is longer than four.
    #[serde(default)]
    pub stall_frame_ns: u64,
    /// Frames the kernel dropped at this port's AF_XDP socket before the data plane took them,
    /// since the daemon started: `XDP_STATISTICS` `rx_dropped` (no fill-ring buffer to copy the
    /// frame into) plus `rx_ring_full`. The data plane did not refill or drain the rings in
    /// time: the machine lost them, not the model (`None`: the statistics could not be read).
    #[serde(default)]
    pub kernel_rx_lost: Option<u64>,
    /// PFC watchdog storms declared per priority of this egress port, since the daemon started.
    #[serde(default)]
    pub pfcwd_storms: [u64; NUM_TC],
    /// Frames the PFC watchdog dropped per egress queue of this port, since the daemon started
    /// (a frame to a stormed queue, or from the stormed port's ingress group, counts on the queue
    /// it was headed for).
    #[serde(default)]
    pub pfcwd_dropped: [u64; NUM_TC],
    /// PFC watchdog restores per priority of this egress port, since the daemon started (a queue
    /// is stormed while its storms outnumber its restores).
    #[serde(default)]
    pub pfcwd_restores: [u64; NUM_TC],
    /// Frames each egress queue of this port failed to admit (queue or shared pool full, or no
    /// UMEM frame), since the daemon started; trimmed ones included, as SAI counts them.
    #[serde(default)]
    pub admission_dropped: [u64; NUM_TC],
    /// Of those, frames each egress queue trimmed instead of dropping (`qos.trim`) and the trim
    /// queue admitted: they left as trimmed frames.
    #[serde(default)]
    pub trimmed: [u64; NUM_TC],
}

/// A queue the PFC watchdog held stormed during a job, and what the watchdog dropped on its
/// switch for that priority meanwhile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogUse {
    pub switch: String,
    /// The stormed egress port, and the peer that kept pausing it.
    pub port: String,
    pub peer: String,
    pub priority: u8,
    /// Storms that began between the samples (0: stormed already before the job).
    pub storms: u64,
    /// Frames of `priority` the watchdog dropped on the whole switch between the samples: to
    /// the stormed queue, and from the stormed port's ingress group to any port.
    pub dropped_frames: u64,
}

/// Every egress port priority that was stormed between `before` and `after` (a storm began, or
/// it was stormed at either sample), with its switch's watchdog drops for that priority.
pub fn watchdog_use(before: &[SwitchSample], after: &[SwitchSample]) -> Vec<WatchdogUse> {
    let stormed = |p: &PortSample, prio: usize| p.pfcwd_storms[prio] > p.pfcwd_restores[prio];
    let mut out = Vec::new();
    for (_, a, _, pb, pa) in port_pairs(before, after) {
        for p in 0..NUM_TC {
            let storms = pa.pfcwd_storms[p].saturating_sub(pb.pfcwd_storms[p]);
            if storms == 0 && !stormed(pa, p) && !stormed(pb, p) {
                continue;
            }
            let dropped = port_pairs(before, after)
                .filter(|(_, x, ..)| x.switch == a.switch)
                .map(|(.., qb, qa)| qa.pfcwd_dropped[p].saturating_sub(qb.pfcwd_dropped[p]))
                .sum();
            out.push(WatchdogUse {
                switch: a.switch.clone(),
                port: pa.name.clone(),
                peer: pa.peer.clone(),
                priority: p as u8,
                storms,
                dropped_frames: dropped,
            });
        }
    }
    out
}

/// One TX stall of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallSample {
    /// When it began, emulated ns on the switch's clock ([`SwitchSample::clock_ns`]).
    pub at_ns: u64,
    /// How long the port sent nothing, emulated ns.
    pub ns: u64,
}

/// The time-weighted average depth of queue `tc` of port `port` between two samples of the
/// same switch (`before`, `after`), bytes; `None` when no time passed or the port is missing.
pub fn average_depth(before: &SwitchSample, after: &SwitchSample, port: usize, tc: usize) -> Option<f64> {
    let (a, b) = (before.ports.get(port)?, after.ports.get(port)?);
    let dt = after.clock_ns.checked_sub(before.clock_ns).filter(|&t| t > 0)?;
    Some((b.depth_area_byte_ns[tc] - a.depth_area_byte_ns[tc]).max(0.0) / dt as f64)
}

/// A switch's `GET /sample` answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchSample {
    pub switch: String,
    /// Time dilation D of the switch's configuration (1 = real time).
    pub time_dilation: f64,
    pub thresholds: Thresholds,
    /// The XDP counters could not be read for this sample (`ecn_marked` and `wred_dropped` are 0).
    #[serde(default)]
    pub xdp_unread: bool,
    /// The switch's data-plane clock when the sample was taken, emulated ns since the daemon
    /// started (the time base of [`PortSample::depth_area_byte_ns`] and the stalls).
    #[serde(default)]
    pub clock_ns: u64,
    /// Number of the peak window the `window_peak_cell_bytes` count from (0: none opened).
    #[serde(default)]
    pub peak_window: u64,
    pub ports: Vec<PortSample>,
}

/// One egress queue's use between two samples of its switch (a job): its time-weighted average
/// depth and its peak, in the buffer's accounting ([`PortSample::depth_cell_bytes`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueUse {
    pub switch: String,
    pub port: String,
    pub peer: String,
    pub tc: u8,
    /// Time-weighted average depth over the job (or the interval, [`queue_use`]), bytes (exact:
    /// from the daemon's depth-time integral).
    pub average_depth_bytes: f64,
    /// Highest depth during the interval, bytes: the switch's window watermark when one peak
    /// window spans the interval (both samples carry the same [`SwitchSample::peak_window`]: the
    /// job's own peak), else the daemon's watermark when it rose during the interval, else the
    /// larger of the depths at its ends (a lower bound; `peak_known` false).
    pub peak_depth_bytes: u64,
    pub peak_known: bool,
}

/// One ingress port priority's PFC between two samples: pause onsets and PFC frames sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcUse {
    pub switch: String,
    pub port: String,
    pub peer: String,
    pub priority: u8,
    /// XOFFs sent on crossing xOFF (not paused → paused at the peer).
    pub pause_onsets: u64,
    /// PFC frames sent (XOFF, refreshes, XON).
    pub pfc_frames: u64,
}

/// The pairs (switch, port index) present in both `before` and `after`, by switch name and port name.
fn port_pairs<'a>(
    before: &'a [SwitchSample],
    after: &'a [SwitchSample],
) -> impl Iterator<Item = (&'a SwitchSample, &'a SwitchSample, usize, &'a PortSample, &'a PortSample)> {
    after.iter().filter_map(move |a| Some((before.iter().find(|b| b.switch == a.switch)?, a))).flat_map(|(b, a)| {
        a.ports.iter().enumerate().filter_map(move |(i, pa)| {
            let pb = b.ports.iter().find(|p| p.name == pa.name)?;
            Some((b, a, i, pb, pa))
        })
    })
}

/// Every egress queue that held anything between `before` and `after` (samples of the same
/// switches): average and peak depth.
///
/// The average is over `window_ns` when given (a job's completion time, emulated ns, as the
/// packet simulators average over [0, JCT]: the samples are taken before the job starts and
/// after its last report, so their interval is longer by the start-up and the wind-down, when
/// the job's queues are empty), else over the samples' interval; never over more than that.
pub fn queue_use(before: &[SwitchSample], after: &[SwitchSample], window_ns: Option<u64>) -> Vec<QueueUse> {
    let mut out = Vec::new();
    for (b, a, _, pb, pa) in port_pairs(before, after) {
        let interval = a.clock_ns.saturating_sub(b.clock_ns);
        let dt = window_ns.filter(|&w| w > 0).map_or(interval, |w| w.min(interval));
        let windowed = a.peak_window != 0 && a.peak_window == b.peak_window;
        for tc in 0..NUM_TC {
            let area = (pa.depth_area_byte_ns[tc] - pb.depth_area_byte_ns[tc]).max(0.0);
            let rose = pa.peak_depth_cell_bytes[tc] > pb.peak_depth_cell_bytes[tc];
            let peak = if windowed {
                pa.window_peak_cell_bytes[tc]
            } else if rose {
                pa.peak_depth_cell_bytes[tc]
            } else {
                pa.depth_cell_bytes[tc].max(pb.depth_cell_bytes[tc])
            };
            if area == 0.0 && peak == 0 {
                continue;
            }
            out.push(QueueUse {
                switch: a.switch.clone(),
                port: pa.name.clone(),
                peer: pa.peer.clone(),
                tc: tc as u8,
                average_depth_bytes: if dt == 0 { 0.0 } else { area / dt as f64 },
                peak_depth_bytes: peak,
                peak_known: windowed || rose || pb.peak_depth_cell_bytes[tc] == 0,
            });
        }
    }
    out
}

/// Every ingress port priority that sent PFC between `before` and `after`.
pub fn pfc_use(before: &[SwitchSample], after: &[SwitchSample]) -> Vec<PfcUse> {
    let mut out = Vec::new();
    for (_, a, _, pb, pa) in port_pairs(before, after) {
        for p in 0..NUM_TC {
            let frames = pa.pfc_tx_frames[p].saturating_sub(pb.pfc_tx_frames[p]);
            let onsets = pa.pause_onsets[p].saturating_sub(pb.pause_onsets[p]);
            if frames == 0 && onsets == 0 {
                continue;
            }
            out.push(PfcUse {
                switch: a.switch.clone(),
                port: pa.name.clone(),
                peer: pa.peer.clone(),
                priority: p as u8,
                pause_onsets: onsets,
                pfc_frames: frames,
            });
        }
    }
    out
}

/// A port's TX stalls between two samples of its switch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStalls {
    /// `switch:port (to peer)`.
    pub name: String,
    /// Stalls in the interval.
    pub count: u64,
    /// Their total time, emulated ns.
    pub stalled_ns: u64,
    /// The longest the samples still name that began in the interval: when, emulated ns after
    /// the first sample, and how long (`None` when the bounded log no longer holds one).
    pub longest_at_ns: Option<u64>,
    pub longest_ns: u64,
    /// The frame time stalls are measured against, emulated ns.
    pub frame_ns: u64,
}

/// Frames a switch port's AF_XDP socket lost in the kernel between two samples of its switch
/// ([`PortSample::kernel_rx_lost`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortLoss {
    /// `switch:port (from peer)`.
    pub name: String,
    pub frames: u64,
}

/// Every port whose socket lost frames in the kernel between `before` and `after` (ports whose
/// statistics could not be read at either sample are left out).
pub fn kernel_rx_losses(before: &[SwitchSample], after: &[SwitchSample]) -> Vec<PortLoss> {
    port_pairs(before, after)
        .filter_map(|(_, a, _, pb, pa)| {
            let frames = pa.kernel_rx_lost?.saturating_sub(pb.kernel_rx_lost?);
            (frames > 0).then(|| PortLoss { name: format!("{}:{} (from {})", a.switch, pa.name, pa.peer), frames })
        })
        .collect()
}

/// Every port that stalled between `before` and `after`.
pub fn port_stalls(before: &[SwitchSample], after: &[SwitchSample]) -> Vec<PortStalls> {
    let mut out = Vec::new();
    for (b, a, _, pb, pa) in port_pairs(before, after) {
        let count = pa.stalls.saturating_sub(pb.stalls);
        if count == 0 {
            continue;
        }
        let within = |s: &&StallSample| s.at_ns >= b.clock_ns && s.at_ns <= a.clock_ns;
        let longest = pa.recent_stalls.iter().chain(pa.longest_stall.iter()).filter(within).max_by_key(|s| s.ns);
        out.push(PortStalls {
            name: format!("{}:{} (to {})", a.switch, pa.name, pa.peer),
            count,
            stalled_ns: pa.stalled_ns.saturating_sub(pb.stalled_ns),
            longest_at_ns: longest.map(|s| s.at_ns - b.clock_ns),
            longest_ns: longest.map_or(0, |s| s.ns),
            frame_ns: pa.stall_frame_ns,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(clock_ns: u64, port: PortSample) -> SwitchSample {
        SwitchSample { switch: "rail1".into(), clock_ns, ports: vec![port], ..Default::default() }
    }

    #[test]
    fn kernel_losses_count_between_the_samples_and_skip_unread_statistics() {
        let port = |name: &str, lost: Option<u64>| PortSample {
            name: name.into(),
            peer: "rail1:eth6".into(),
            kernel_rx_lost: lost,
            ..Default::default()
        };
        let s = |ports: Vec<PortSample>| SwitchSample { switch: "spine2".into(), ports, ..Default::default() };
        let before = [s(vec![port("eth1", Some(100)), port("eth2", Some(5)), port("eth3", None)])];
        let after = [s(vec![port("eth1", Some(1320)), port("eth2", Some(5)), port("eth3", Some(9))])];
        assert_eq!(
            kernel_rx_losses(&before, &after),
            vec![PortLoss { name: "spine2:eth1 (from rail1:eth6)".into(), frames: 1220 }]
        );
    }

    /// Issue 38: a second job whose queue peaks below the first job's got 0 and `peak_known:
    /// false` (the daemon's watermark counts from `up`); within one peak window, its own peak.
    #[test]
    fn a_later_job_reports_its_own_peak_from_its_peak_window() {
        let mut p = PortSample { name: "eth1".into(), peer: "host1:gpu0".into(), ..Default::default() };
        // The first job took the queue to 900 KB; this one only to 200 KB, and it is empty at
        // both ends of the job.
        p.peak_depth_cell_bytes[3] = 900_000;
        p.depth_area_byte_ns[3] = 5e9;
        let mut before = sw(1_000_000, p.clone());
        let mut after = sw(2_000_000, p.clone());
        after.ports[0].depth_area_byte_ns[3] = 6e9;
        after.ports[0].window_peak_cell_bytes[3] = 200_000;
        let q = |b: &SwitchSample, a: &SwitchSample| {
            let q = queue_use(std::slice::from_ref(b), std::slice::from_ref(a), None);
            (q[0].peak_depth_bytes, q[0].peak_known)
        };
        // No window (a daemon that has none, or none opened): the lower bound, as before.
        assert_eq!(q(&before, &after), (0, false));
        // One window spans the job: its own peak.
        (before.peak_window, after.peak_window) = (7, 7);
        assert_eq!(q(&before, &after), (200_000, true));
        // Someone opened another window during the job: not this job's window, back to the bound.
        after.peak_window = 8;
        assert_eq!(q(&before, &after), (0, false));
    }

    #[test]
    fn watchdog_use_is_what_the_watchdog_did_between_two_samples() {
        let port = |name: &str, peer: &str| PortSample { name: name.into(), peer: peer.into(), ..Default::default() };
        let (mut p2, mut p1) = (port("eth2", "host2:gpu0"), port("eth1", "host1:gpu0"));
        p2.pfcwd_storms[3] = 1;
        p2.pfcwd_restores[3] = 1;
        p2.pfcwd_dropped[3] = 50;
        let sw2 = |clock, a: &PortSample, b: &PortSample| SwitchSample {
            switch: "rail1".into(),
            clock_ns: clock,
            ports: vec![a.clone(), b.clone()],
            ..Default::default()
        };
        let before = vec![sw2(0, &p2, &p1)];
        assert!(watchdog_use(&before, &before).is_empty(), "restored before: nothing");
        // A storm of eth2 during the job; the watchdog dropped 10,000 frames to eth2 and 649
        // from eth2's ingress group to eth1.
        p2.pfcwd_storms[3] = 2;
        p2.pfcwd_dropped[3] = 10_050;
        p1.pfcwd_dropped[3] = 649;
        let after = vec![sw2(1, &p2, &p1)];
        let want = WatchdogUse {
            switch: "rail1".into(),
            port: "eth2".into(),
            peer: "host2:gpu0".into(),
            priority: 3,
            storms: 1,
            dropped_frames: 10_649,
        };
        assert_eq!(watchdog_use(&before, &after), vec![want.clone()]);
        // Stormed already before the job, still stormed after: no storm began, it is named.
        assert_eq!(watchdog_use(&after, &after), vec![WatchdogUse { storms: 0, dropped_frames: 0, ..want }]);
    }

    #[test]
    fn job_queues_pfc_and_stalls_are_the_differences_of_two_samples() {
        let mut p = PortSample { name: "eth1".into(), peer: "host1:gpu0".into(), ..Default::default() };
        p.depth_area_byte_ns[3] = 1e9;
        p.peak_depth_cell_bytes[3] = 40_000;
        p.pfc_tx_frames[3] = 10;
        p.pause_onsets[3] = 4;
        p.stalls = 3;
        p.stalled_ns = 900;
        p.longest_stall = Some(StallSample { at_ns: 100, ns: 800 });
        let before = vec![sw(1_000_000, p.clone())];
        // 100 µs later: 2e9 byte·ns more (an average of 20 KB), the peak rose to 90 KB, 6 onsets
        // and 30 PFC frames, two stalls of which the longest (500 ns) began 40 µs in.
        p.depth_area_byte_ns[3] = 3e9;
        p.peak_depth_cell_bytes[3] = 90_000;
        p.depth_cell_bytes[3] = 1_024;
        p.pfc_tx_frames[3] = 40;
        p.pause_onsets[3] = 10;
        p.stalls = 5;
        p.stalled_ns = 1_600;
        p.stall_frame_ns = 42;
        p.recent_stalls = vec![
            StallSample { at_ns: 100, ns: 800 },
            StallSample { at_ns: 1_040_000, ns: 500 },
            StallSample { at_ns: 1_050_000, ns: 200 },
        ];
        let after = vec![sw(1_100_000, p.clone())];
        let q = queue_use(&before, &after, None);
        assert_eq!(q.len(), 1);
        assert_eq!(
            (q[0].tc, q[0].average_depth_bytes, q[0].peak_depth_bytes, q[0].peak_known),
            (3, 20_000.0, 90_000, true)
        );
        assert_eq!(average_depth(&before[0], &after[0], 0, 3), Some(20_000.0));
        // Over a job of 80 µs inside those 100 µs (empty queues outside it): 25 KB; a window
        // longer than the samples' interval is cut to it.
        assert_eq!(queue_use(&before, &after, Some(80_000))[0].average_depth_bytes, 25_000.0);
        assert_eq!(queue_use(&before, &after, Some(500_000))[0].average_depth_bytes, 20_000.0);
        assert_eq!(queue_use(&before, &after, Some(0))[0].average_depth_bytes, 20_000.0);
        let f = pfc_use(&before, &after);
        assert_eq!((f.len(), f[0].priority, f[0].pause_onsets, f[0].pfc_frames), (1, 3, 6, 30));
        let s = port_stalls(&before, &after);
        assert_eq!(
            s,
            [PortStalls {
                name: "rail1:eth1 (to host1:gpu0)".into(),
                count: 2,
                stalled_ns: 700,
                longest_at_ns: Some(40_000),
                longest_ns: 500,
                frame_ns: 42
            }]
        );
        // A watermark that did not rise: the peak is only bounded by the ends' depths.
        let mut flat = p.clone();
        flat.depth_area_byte_ns[3] = 4e9;
        let q = queue_use(&after, &[sw(1_200_000, flat)], None);
        assert_eq!((q[0].average_depth_bytes, q[0].peak_depth_bytes, q[0].peak_known), (10_000.0, 1_024, false));
        // Nothing happened: nothing listed; no time: no average.
        assert!(pfc_use(&after, &after).is_empty() && port_stalls(&after, &after).is_empty());
        assert_eq!(average_depth(&after[0], &after[0], 0, 3), None);
    }
}
