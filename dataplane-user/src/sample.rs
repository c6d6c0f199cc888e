//! A switch's `GET /sample`: one JSON snapshot of what the DCQCN timeline (book ch. 11,
//! Fig. 11-7; `rocefab run --timeline`) draws, taken while a job runs.
//!
//! Per port: the line rate, the frames and bytes dequeued per egress queue and received (the
//! live web view's utilisation of the link towards the switch), the egress queue
//! depths and their peak watermarks, the PFC frames sent and received
//! per priority, which egress priorities the peer pauses now and for how long they have been
//! paused in total, and the XDP program's ECN-marked and WRED-dropped counters; per switch: the
//! WRED and xON/xOFF thresholds and the time dilation D. Bytes and counters are totals since the
//! daemon started; paused time is emulated (wall ÷ D), as in the metrics; the sampler stamps
//! each answer with its own clock and converts those stamps to emulated time.
//!
//! `POST /peak-window` opens a new peak window ([`SwitchStats::open_peak_window`]): from then
//! on each queue's `window_peak_cell_bytes` is its highest depth since, so a job's report
//! (`rocefab run` opens one before each job) carries the job's own peak whatever earlier jobs
//! reached; the daemon's watermark (`peak_depth_cell_bytes`, the metrics) still counts from
//! its start.
//!
//! [`build`] only reads the data plane's single-writer atomics
//! ([`switch_model::stats`]) and a copy of the XDP counters: it takes no lock the data-plane thread
//! takes.
use std::sync::Arc;

use dataplane_common::counter;
use rocefab_contracts::config::SwitchConfig;
pub use rocefab_contracts::sample::{PortSample, StallSample, SwitchSample, Thresholds};

use switch_model::stats::SwitchStats;

/// The XDP counters per port and counter id, as [`rocefab_plumbing::loader::XdpSwitch::counters`] reads them.
pub type XdpCounters = Vec<[u64; counter::COUNT as usize]>;

/// `GET /sample` for switch `cfg`: [`build`] from `stats` and `xdp()` (called once per
/// request, on the runtime's thread): the XDP counters and the frames each port's AF_XDP
/// socket lost in the kernel, each `None` when it cannot be read.
pub fn router<F>(cfg: SwitchConfig, stats: Arc<SwitchStats>, xdp: F) -> axum::Router
where
    F: Fn() -> (Option<XdpCounters>, Option<Vec<u64>>) + Send + Sync + 'static,
{
    let window = stats.clone();
    let src = Arc::new((cfg, stats, xdp));
    axum::Router::new()
        .route(
            "/sample",
            axum::routing::get(move || {
                let (cfg, stats, xdp) = &*src;
                let (counters, lost) = xdp();
                let sample = build(cfg, stats, counters.as_deref(), lost.as_deref());
                async move { axum::Json(sample) }
            }),
        )
        .route(
            "/peak-window",
            axum::routing::post(move || {
                let n = window.open_peak_window();
                async move { axum::Json(serde_json::json!({ "peak_window": n })) }
            }),
        )
}

/// The sample of switch `cfg` from its live statistics and the XDP counters (per port, per
/// counter id, as [`rocefab_plumbing::loader::XdpSwitch::counters`] returns them; `None` when they could
/// not be read).
pub fn build(
    cfg: &SwitchConfig,
    stats: &SwitchStats,
    xdp: Option<&[[u64; counter::COUNT as usize]]>,
    kernel_rx_lost: Option<&[u64]>,
) -> SwitchSample {
    let q = &cfg.qos;
    let d = rocefab_contracts::time::Dilation::new(cfg.time_dilation)
        .unwrap_or(rocefab_contracts::time::Dilation::REAL_TIME);
    // One clock reading for every queue's integral: they all end at the same time.
    let now = stats.clock.now();
    let emulated_stall =
        |s: switch_model::stats::Stall| StallSample { at_ns: d.to_emulated_ns(s.at_ns), ns: d.to_emulated_ns(s.ns) };
    let ports = cfg
        .ports
        .iter()
        .zip(&stats.ports)
        .enumerate()
        .map(|(i, (pc, ps))| {
            let mask = ps.paused_mask.get();
            let row = xdp.and_then(|x| x.get(i));
            let stalls = ps.stalls.read();
            PortSample {
                name: pc.name.clone(),
                peer: pc.peer.clone(),
                line_rate_bps: pc.line_rate_bps,
                tx_packets: std::array::from_fn(|tc| ps.queues[tc].dequeued_packets.get()),
                tx_bytes: std::array::from_fn(|tc| ps.queues[tc].dequeued_bytes.get()),
                rx_packets: ps.rx_packets.get(),
                rx_bytes: ps.rx_bytes.get(),
                depth_bytes: std::array::from_fn(|tc| ps.queues[tc].depth_bytes.get()),
                peak_depth_bytes: std::array::from_fn(|tc| ps.queues[tc].peak_depth_bytes.get()),
                depth_cell_bytes: std::array::from_fn(|tc| ps.queues[tc].depth_cell_bytes.get()),
                peak_depth_cell_bytes: std::array::from_fn(|tc| ps.queues[tc].peak_depth_cell_bytes.get()),
                window_peak_cell_bytes: std::array::from_fn(|tc| ps.queues[tc].window_peak_cell_bytes.get()),
                depth_area_byte_ns: std::array::from_fn(|tc| {
                    ps.queues[tc].depth_cell_area.area_at(now).0 as f64 / d.factor()
                }),
                pause_onsets: std::array::from_fn(|p| ps.prio[p].pause_onsets.get()),
                pfc_tx_frames: std::array::from_fn(|p| ps.prio[p].pfc_tx_frames.get()),
                pfc_rx_frames: std::array::from_fn(|p| ps.prio[p].pfc_rx_frames.get()),
                paused: std::array::from_fn(|p| mask & (1 << p) != 0),
                paused_ns: std::array::from_fn(|p| d.to_emulated_ns(ps.prio[p].paused_ns.get())),
                ecn_marked: row.map_or(0, |r| r[counter::ECN_MARKED as usize]),
                wred_dropped: row.map_or(0, |r| r[counter::WRED_DROPPED as usize]),
                ecn_marked_dequeue: ps.queues.iter().map(|q| q.ecn_marked_dequeue.get()).sum(),
                wred_dropped_dequeue: ps.queues.iter().map(|q| q.wred_dropped_dequeue.get()).sum(),
                stalls: stalls.count,
                stalled_ns: d.to_emulated_ns(stalls.total_ns),
                longest_stall: (stalls.count > 0).then(|| emulated_stall(stalls.longest)),
                recent_stalls: stalls.latest.iter().map(|&s| emulated_stall(s)).collect(),
                stall_frame_ns: d.to_emulated_ns(stalls.frame_ns),
                kernel_rx_lost: kernel_rx_lost.and_then(|l| l.get(i).copied()),
                pfcwd_storms: std::array::from_fn(|p| ps.prio[p].pfcwd_storms.get()),
                pfcwd_dropped: std::array::from_fn(|q| ps.queues[q].pfcwd_dropped_packets.get()),
                pfcwd_restores: std::array::from_fn(|p| ps.prio[p].pfcwd_restores.get()),
                admission_dropped: std::array::from_fn(|q| ps.queues[q].admission_dropped_packets.get()),
                trimmed: std::array::from_fn(|q| {
                    let q = &ps.queues[q];
                    q.trimmed_packets.get().saturating_sub(q.trim_dropped_packets.get())
                }),
            }
        })
        .collect();
    SwitchSample {
        switch: cfg.name.clone(),
        time_dilation: cfg.time_dilation,
        thresholds: Thresholds {
            wred_min_bytes: q.wred.min_bytes,
            wred_max_bytes: q.wred.max_bytes,
            wred_queues: q.wred.queues,
            xoff_bytes: q.xoff_bytes,
            xon_bytes: q.xon_bytes,
            lossless_priorities: q.lossless_priorities,
            cell_bytes: q.cell_bytes,
        },
        xdp_unread: xdp.is_none(),
        clock_ns: d.to_emulated_ns(now),
        peak_window: stats.peak_window.load(std::sync::atomic::Ordering::Relaxed),
        ports,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::config::{NextHopConfig, PortConfig};

    fn cfg() -> SwitchConfig {
        SwitchConfig {
            name: "rail1".into(),
            role: "rail".into(),
            netns: None,
            hash_seed: 1,
            metrics_listen: "127.0.0.1:0".parse().unwrap(),
            dscp_to_tc: dataplane_common::dscp::default_table().to_vec(),
            queue_limit_bytes: 1 << 20,
            xdp_mode: "driver".into(),
            ports: [("eth0", "host1:gpu0"), ("eth1", "spine1:eth3")]
                .iter()
                .map(|(n, peer)| PortConfig {
                    name: n.to_string(),
                    mac: "02:00:00:00:00:01".parse().unwrap(),
                    line_rate_bps: 1_000_000_000,
                    addresses: vec![],
                    peer: peer.to_string(),
                    tx_delay_ns: 0,
                    rx_delay_ns: 0,
                })
                .collect(),
            nexthops: vec![NextHopConfig { port: 1, mac: "02:00:00:00:00:02".parse().unwrap() }],
            groups: vec![vec![0]],
            routes: vec![],
            qos: Default::default(),
            lldp: Default::default(),
            chassis_mac: None,
            time_dilation: 1000.0,
            load_balance: Default::default(),
            fib: false,
        }
    }

    /// A peak window restarts from the depth at its opening; the daemon's watermark does not.
    #[test]
    fn a_peak_window_counts_from_its_opening() {
        let cfg = cfg();
        let stats = SwitchStats::new(2);
        let q = &stats.ports[1].queues[3];
        q.depth_cell_bytes.set(9_216);
        q.peak_depth_cell_bytes.raise(9_216);
        q.window_peak_cell_bytes.raise(9_216);
        q.depth_cell_bytes.set(512);
        assert_eq!(build(&cfg, &stats, None, None).peak_window, 0);
        assert_eq!(stats.open_peak_window(), 1);
        let s = build(&cfg, &stats, None, None);
        assert_eq!(
            (s.peak_window, s.ports[1].window_peak_cell_bytes[3], s.ports[1].peak_depth_cell_bytes[3]),
            (1, 512, 9_216)
        );
        q.window_peak_cell_bytes.raise(4_096);
        q.window_peak_cell_bytes.raise(1_024);
        let s = build(&cfg, &stats, None, None);
        assert_eq!((s.ports[1].window_peak_cell_bytes[3], s.ports[1].peak_depth_cell_bytes[3]), (4_096, 9_216));
        assert_eq!(stats.open_peak_window(), 2);
    }

    #[test]
    fn sample_reflects_stats_counters_and_config() {
        let cfg = cfg();
        let stats = SwitchStats::new(2);
        let q = &stats.ports[1].queues[3];
        q.depth_bytes.set(4_000);
        q.peak_depth_bytes.raise(9_000);
        q.peak_depth_bytes.raise(5_000);
        // 16 frames of 250 bytes take 16 cells of 256 bytes.
        q.depth_cell_bytes.set(4_096);
        q.peak_depth_cell_bytes.raise(9_216);
        q.dequeued_packets.add(3);
        q.dequeued_bytes.add(3 * 1_078);
        stats.ports[1].rx_packets.add(4);
        stats.ports[1].rx_bytes.add(4 * 1_078);
        stats.ports[1].prio[3].pfc_rx_frames.add(2);
        stats.ports[0].prio[3].pfc_tx_frames.add(5);
        stats.ports[1].prio[3].paused_ns.set(70_000);
        stats.ports[1].paused_mask.set(1 << 3);
        let mut xdp = vec![[0u64; counter::COUNT as usize]; 2];
        xdp[1][counter::ECN_MARKED as usize] = 17;
        xdp[1][counter::WRED_DROPPED as usize] = 2;
        xdp[0][counter::ROUTE_MISS as usize] = 99;
        let s = build(&cfg, &stats, Some(&xdp), Some(&[0, 7]));
        assert_eq!((s.switch.as_str(), s.time_dilation, s.xdp_unread), ("rail1", 1000.0, false));
        assert_eq!(
            s.thresholds,
            Thresholds {
                wred_min_bytes: 150_000,
                wred_max_bytes: 3_000_000,
                wred_queues: 1 << 3,
                xoff_bytes: 3_200_000,
                xon_bytes: 120_000,
                lossless_priorities: 1 << 3,
                cell_bytes: 256
            }
        );
        let p = &s.ports[1];
        assert_eq!((p.name.as_str(), p.peer.as_str()), ("eth1", "spine1:eth3"));
        assert_eq!((p.depth_bytes[3], p.peak_depth_bytes[3]), (4_000, 9_000));
        assert_eq!((p.depth_cell_bytes[3], p.peak_depth_cell_bytes[3], p.depth_cell_bytes[2]), (4_096, 9_216, 0));
        assert_eq!((p.line_rate_bps, p.tx_packets[3], p.tx_bytes[3], p.tx_bytes[0]), (1_000_000_000, 3, 3_234, 0));
        assert_eq!((p.rx_packets, p.rx_bytes, s.ports[0].rx_packets), (4, 4_312, 0));
        // 70 µs of wall clock paused at D = 1000: 70 ns emulated.
        assert_eq!((p.pfc_rx_frames[3], p.paused_ns[3], p.ecn_marked, p.wred_dropped), (2, 70, 17, 2));
        assert_eq!(p.paused, [false, false, false, true, false, false, false, false]);
        assert_eq!((s.ports[0].pfc_tx_frames[3], s.ports[0].ecn_marked), (5, 0));
        assert!(!s.ports[0].paused.iter().any(|&b| b));
        assert_eq!((s.ports[0].kernel_rx_lost, p.kernel_rx_lost), (Some(0), Some(7)));

        let s2 = build(&cfg, &stats, None, None);
        assert!(s2.xdp_unread);
        assert_eq!((s2.ports[1].ecn_marked, s2.ports[1].kernel_rx_lost), (0, None));
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains("\"ecn_marked\":17"), "{text}");
        assert_eq!(serde_json::from_str::<SwitchSample>(&text).unwrap(), s);
    }

    /// The depth-time integral, pause onsets and stalls, in emulated units (D = 1000).
    #[test]
    fn sample_carries_the_depth_integral_onsets_and_stalls_in_emulated_time() {
        let cfg = cfg();
        // A data-plane clock that started 10 ms (wall) ago: 10 µs emulated.
        let origin = rocefab_plumbing::capture::monotonic_ns() - 10_000_000;
        let stats = SwitchStats::with_clock(2, rocefab_plumbing::capture::MonoClock::with_origin(origin));
        // A profile that ends empty: its integral does not depend on when the sample is taken.
        let a = &stats.ports[1].queues[3].depth_cell_area;
        a.set(1_000_000, 2_048);
        a.set(3_000_000, 8_192);
        a.set(4_000_000, 0);
        let p = &stats.ports[0].prio[3];
        p.pfc_tx_frames.add(9);
        p.pause_onsets.add(2);
        stats.ports[1].stalls.log(switch_model::stats::Stall { at_ns: 7_000_000, ns: 2_000_000 }, 49_216);
        stats.ports[1].stalls.log(switch_model::stats::Stall { at_ns: 9_000_000, ns: 500_000 }, 49_216);
        stats.ports[1].queues[3].ecn_marked_dequeue.add(5);
        stats.ports[1].queues[0].wred_dropped_dequeue.add(1);
        let q0 = &stats.ports[1].queues[0];
        q0.admission_dropped_packets.add(7);
        q0.trimmed_packets.add(5);
        q0.trim_dropped_packets.add(1);
        let before = build(&cfg, &stats, None, None);
        let s = build(&cfg, &stats, None, None);
        // Wall byte·ns / D: (2048 × 2 ms + 8192 × 1 ms) / 1000.
        let area = (2_048.0 * 2e6 + 8_192.0 * 1e6) / 1_000.0;
        assert_eq!(s.ports[1].depth_area_byte_ns[3], area);
        assert_eq!(s.ports[1].depth_area_byte_ns[2], 0.0);
        assert!(s.clock_ns >= before.clock_ns && before.clock_ns >= 10_000, "{} {}", s.clock_ns, before.clock_ns);
        let p0 = &s.ports[0];
        assert_eq!((p0.pfc_tx_frames[3], p0.pause_onsets[3], p0.pause_onsets[0]), (9, 2, 0));
        let p1 = &s.ports[1];
        assert_eq!((p1.stalls, p1.stalled_ns, p1.stall_frame_ns), (2, 2_500, 49));
        assert_eq!(p1.longest_stall, Some(StallSample { at_ns: 7_000, ns: 2_000 }));
        assert_eq!(p1.recent_stalls, [StallSample { at_ns: 7_000, ns: 2_000 }, StallSample { at_ns: 9_000, ns: 500 }]);
        assert_eq!((p1.ecn_marked_dequeue, p1.wred_dropped_dequeue), (5, 1));
        // Admission drops include the trimmed frames; the trimmed ones sent exclude those the
        // trim queue refused.
        assert_eq!((p1.admission_dropped[0], p1.trimmed[0], p1.trimmed[3]), (7, 4, 0));
        assert_eq!((s.ports[0].stalls, s.ports[0].longest_stall), (0, None));
        // The average over the whole profile, from a sample at the clock's origin.
        let origin = SwitchSample { clock_ns: 0, ports: vec![PortSample::default(); 2], ..s.clone() };
        let at_4ms = SwitchSample { clock_ns: 4_000, ..s.clone() };
        let avg = rocefab_contracts::sample::average_depth(&origin, &at_4ms, 1, 3).unwrap();
        assert_eq!(avg, (2_048.0 * 2.0 + 8_192.0) / 4.0);
    }

    #[test]
    fn sample_is_served_as_json() {
        use std::io::{Read, Write};
        let stats = Arc::new(SwitchStats::new(2));
        stats.ports[0].queues[3].depth_bytes.set(1_500);
        let xdp = || {
            let mut c = vec![[0u64; counter::COUNT as usize]; 2];
            c[0][counter::ECN_MARKED as usize] = 4;
            (Some(c), Some(vec![3, 0]))
        };
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let r = router(cfg(), stats, xdp);
        std::thread::spawn(move || rt.block_on(rocefab_plumbing::http::serve(l, r)));
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /sample HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.to_ascii_lowercase().contains("content-type: application/json"), "{out}");
        let got: SwitchSample = serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!((got.switch.as_str(), got.ports[0].depth_bytes[3], got.ports[0].ecn_marked), ("rail1", 1_500, 4));
        assert_eq!((got.ports[0].kernel_rx_lost, got.ports[1].kernel_rx_lost), (Some(3), Some(0)));
    }
}
