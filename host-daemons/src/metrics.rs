//! Prometheus metrics of one `rocefab-hostd` (per QP and per NIC), updated from report
//! snapshots the data thread publishes every `snapshot_interval_ms` (100 ms by default; never
//! from the per-packet path), and served (`GET /metrics`, text exposition format 0.0.4) by the
//! daemons' shared HTTP server, [`rocefab_plumbing::http`], on a control thread of its own, next to
//! `GET /sample` (the latest snapshot as a [`HostSample`], JSON; 503 before the first).
//!
//! Times and rates are emulated, as in the [`Report`] (README "Emulated time"): wall-clock
//! measurements converted with the job's time dilation D, which `rocefab_time_dilation` exports.
use std::net::TcpListener;
use std::sync::{Arc, Mutex, PoisonError};

use rocefab_contracts::host_sample::HostSample;

use prometheus::{Counter, CounterVec, Encoder, Gauge, GaugeVec, IntCounterVec, Opts, Registry, TextEncoder};

use rocefab_contracts::job::{Job, Report};

const QP_LABELS: [&str; 4] = ["qpn", "peer_qpn", "nic", "label"];

/// The registry and every metric family.
pub struct Metrics {
    registry: Registry,
    /// Families without the `rocefab_host_` prefix (`rocefab_time_dilation`, named as the
    /// switch daemon names it).
    plain: Registry,
    qp_counters: Vec<(&'static str, IntCounterVec)>,
    qp_rate: GaugeVec,
    qp_goodput: GaugeVec,
    nic_counters: Vec<(&'static str, IntCounterVec)>,
    nic_paused: CounterVec,
    elapsed: Gauge,
    ok: Gauge,
    snapshots: Counter,
    /// The latest snapshot as `GET /sample` serves it.
    sample: Mutex<Option<HostSample>>,
}

fn qp_value(q: &rocefab_contracts::job::QpReport, name: &str) -> u64 {
    match name {
        "packets_sent" => q.packets_sent,
        "retransmitted_packets" => q.retransmitted_packets,
        "timeouts" => q.timeouts,
        "naks_received" => q.naks_received,
        "naks_sent" => q.naks_sent,
        "cnps_received" => q.cnps_received,
        "cnps_sent" => q.cnps_sent,
        "ce_marked_packets" => q.ce_marked,
        "acked_bytes" => q.send_completed_bytes,
        "placed_bytes" => q.bytes_placed,
        "packets_received" => q.packets_received,
        "duplicate_packets" => q.duplicates,
        "out_of_sequence_packets" => q.out_of_sequence,
        "out_of_order_packets" => q.out_of_order,
        "acks_sent" => q.acks_sent,
        _ => 0,
    }
}

fn nic_value(n: &rocefab_contracts::job::NicReport, name: &str) -> u64 {
    match name {
        "tx_frames" => n.tx_frames,
        "tx_bytes" => n.tx_bytes,
        "rx_frames" => n.rx_frames,
        "rx_bytes" => n.rx_bytes,
        "rx_bad_icrc_frames" => n.rx_bad_icrc,
        "rx_malformed_frames" => n.rx_malformed,
        "pfc_frames_received" => n.pfc_frames_received,
        "pfc_ignored_frames" => n.pfc_ignored_frames,
        "pfc_pause_frames_prio3" => n.pfc_pause_frames_prio3,
        "cnps_sent" => n.cnps_sent,
        "cnps_received" => n.cnps_received,
        _ => 0,
    }
}

const QP_COUNTERS: [(&str, &str); 15] = [
    ("packets_sent", "RoCEv2 data packets sent by the requester, retransmissions included"),
    ("retransmitted_packets", "packets sent again by go-back-N"),
    ("timeouts", "local ACK timeouts"),
    ("naks_received", "PSN sequence error NAKs received"),
    ("naks_sent", "PSN sequence error NAKs sent by the responder"),
    ("cnps_received", "CNPs received (DCQCN reaction point)"),
    ("cnps_sent", "CNPs sent (DCQCN notification point)"),
    ("ce_marked_packets", "data packets that arrived CE-marked"),
    ("acked_bytes", "payload bytes acknowledged"),
    ("placed_bytes", "payload bytes placed in the responder's memory region"),
    ("packets_received", "request packets received by the responder"),
    ("duplicate_packets", "request packets received again (a retransmission of delivered data: spurious timeout or lost ACK)"),
    ("out_of_sequence_packets", "request packets received past a gap and dropped (data lost or reordered upstream)"),
    ("out_of_order_packets", "request packets that arrived ahead of the expected PSN (reordered or past a loss); placed in Write-Only mode, else dropped"),
    ("acks_sent", "ACKs sent by the responder"),
];

const NIC_COUNTERS: [(&str, &str); 11] = [
    ("tx_frames", "frames transmitted"),
    ("tx_bytes", "bytes transmitted (without FCS)"),
    ("rx_frames", "frames received from the AF_XDP socket"),
    ("rx_bytes", "bytes received"),
    ("rx_bad_icrc_frames", "RoCEv2 frames dropped for a bad ICRC"),
    ("rx_malformed_frames", "frames that did not parse"),
    ("pfc_frames_received", "PFC and PAUSE frames received"),
    (
        "pfc_ignored_frames",
        "PFC frames naming a priority on which PFC is not enabled (DCBX PFC enable vector): not acted on for it",
    ),
    ("pfc_pause_frames_prio3", "frames that paused priority 3"),
    ("cnps_sent", "CNPs sent by this NIC"),
    ("cnps_received", "CNPs received by this NIC"),
];

impl Metrics {
    /// Registers every family with the constant label `job`.
    pub fn new(job: &Job) -> Result<Metrics, prometheus::Error> {
        let registry =
            Registry::new_custom(Some("rocefab_host".into()), Some([("job".to_string(), job.name.clone())].into()))?;
        let mut qp_counters = Vec::new();
        for (name, help) in QP_COUNTERS {
            let c = IntCounterVec::new(Opts::new(format!("qp_{name}_total"), help), &QP_LABELS)?;
            registry.register(Box::new(c.clone()))?;
            qp_counters.push((name, c));
        }
        let qp_rate = GaugeVec::new(
            Opts::new(
                "qp_rate_bytes_per_second",
                "current DCQCN sending rate of the requester, bytes per emulated second (Prometheus base unit: bytes)",
            ),
            &QP_LABELS,
        )?;
        let qp_goodput = GaugeVec::new(
            Opts::new(
                "qp_goodput_bytes_per_second",
                "acknowledged payload bytes per emulated second until the QP finished",
            ),
            &QP_LABELS,
        )?;
        registry.register(Box::new(qp_rate.clone()))?;
        registry.register(Box::new(qp_goodput.clone()))?;
        let mut nic_counters = Vec::new();
        for (name, help) in NIC_COUNTERS {
            let c = IntCounterVec::new(Opts::new(format!("nic_{name}_total"), help), &["nic"])?;
            registry.register(Box::new(c.clone()))?;
            nic_counters.push((name, c));
        }
        let nic_paused = CounterVec::new(
            Opts::new("nic_pfc_paused_seconds_total", "time the data priority (3 by default) was paused by received PFC, emulated seconds (wall / rocefab_time_dilation)"),
            &["nic"],
        )?;
        registry.register(Box::new(nic_paused.clone()))?;
        let elapsed = Gauge::new(
            "job_elapsed_seconds",
            "time since the job started, or its completion time once finished, emulated seconds",
        )?;
        let ok = Gauge::new("job_ok", "1 once every QP finished with verified data")?;
        let snapshots = Counter::new("snapshots_total", "report snapshots taken by the data thread")?;
        registry.register(Box::new(elapsed.clone()))?;
        registry.register(Box::new(ok.clone()))?;
        registry.register(Box::new(snapshots.clone()))?;
        let plain = Registry::new_custom(None, Some([("job".to_string(), job.name.clone())].into()))?;
        let dilation = Gauge::new(
            "rocefab_time_dilation",
            "Time dilation D of the job: rates run D times slower and timers D times longer than the emulated fabric's; every time metric is emulated (wall / D)",
        )?;
        plain.register(Box::new(dilation.clone()))?;
        dilation.set(job.time_dilation);
        Ok(Metrics {
            registry,
            plain,
            qp_counters,
            qp_rate,
            qp_goodput,
            nic_counters,
            nic_paused,
            elapsed,
            ok,
            snapshots,
            sample: Mutex::new(None),
        })
    }

    /// Brings every metric up to `r` (counters only move forward).
    pub fn update(&self, r: &Report) {
        for q in &r.qps {
            let (qpn, peer) = (q.qpn.to_string(), q.peer_qpn.to_string());
            let labels = [qpn.as_str(), peer.as_str(), q.nic.as_str(), q.label.as_str()];
            for (name, c) in &self.qp_counters {
                let c = c.with_label_values(&labels);
                c.inc_by(qp_value(q, name).saturating_sub(c.get()));
            }
            self.qp_rate.with_label_values(&labels).set(q.rate_bps as f64 / 8.0);
            if let Some(g) = q.goodput_bps {
                self.qp_goodput.with_label_values(&labels).set(g / 8.0);
            }
        }
        for n in &r.nics {
            for (name, c) in &self.nic_counters {
                let c = c.with_label_values(&[n.name.as_str()]);
                c.inc_by(nic_value(n, name).saturating_sub(c.get()));
            }
            let p = self.nic_paused.with_label_values(&[n.name.as_str()]);
            let secs = n.pfc_paused_ns_prio3 as f64 / 1e9;
            if secs > p.get() {
                p.inc_by(secs - p.get());
            }
        }
        self.elapsed.set(r.elapsed_ns as f64 / 1e9);
        self.ok.set(if r.ok { 1.0 } else { 0.0 });
        self.snapshots.inc();
        *self.sample.lock().unwrap_or_else(PoisonError::into_inner) = Some(HostSample::from_report(r));
    }

    /// The latest snapshot's sample, if one was taken.
    pub fn sample(&self) -> Option<HostSample> {
        self.sample.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for well-formed families.
        let mut families = self.registry.gather();
        families.extend(self.plain.gather());
        let _ = TextEncoder::new().encode(&families, &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// Serves `GET /metrics` on `listener` from a thread named `rocefab-ctl` running a
/// current-thread tokio runtime. The listener is bound by the caller, typically before it enters
/// the host's network namespace, so the controller can scrape it from the root namespace; the
/// thread may be spawned after (it only accepts on that socket). The thread runs until the
/// process exits.
pub fn serve(listener: TcpListener, m: Arc<Metrics>) -> std::io::Result<std::thread::JoinHandle<()>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let render = m.clone();
    let router = rocefab_plumbing::http::metrics_router(move || render.render()).route(
        "/sample",
        axum::routing::get(move || {
            let sample = m.sample();
            async move {
                use axum::response::IntoResponse;
                match sample {
                    Some(s) => axum::Json(s).into_response(),
                    None => (axum::http::StatusCode::SERVICE_UNAVAILABLE, "no snapshot yet\n").into_response(),
                }
            }
        }),
    );
    std::thread::Builder::new().name("rocefab-ctl".into()).spawn(move || {
        if let Err(e) = rt.block_on(rocefab_plumbing::http::serve(listener, router)) {
            tracing::error!("metrics server: {e}");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::job::{NicReport, QpReport};

    #[test]
    fn snapshots_become_monotonic_labelled_metrics() {
        let job: Job = serde_json::from_str(r#"{"name":"j1","nics":[],"qps":[]}"#).unwrap();
        let m = Metrics::new(&job).unwrap();
        let mut r = Report { job: "j1".into(), ..Default::default() };
        r.qps.push(QpReport {
            qpn: 5,
            peer_qpn: 6,
            nic: "gpu0".into(),
            retransmitted_packets: 7,
            rate_bps: 1000,
            duplicates: 4,
            out_of_order: 11,
            ..Default::default()
        });
        r.nics.push(NicReport {
            name: "gpu0".into(),
            pfc_paused_ns_prio3: 1_500_000_000,
            tx_frames: 3,
            pfc_ignored_frames: 2,
            ..Default::default()
        });
        m.update(&r);
        r.qps[0].retransmitted_packets = 9;
        m.update(&r);
        let t = m.render();
        assert!(
            t.contains(
                r#"rocefab_host_qp_retransmitted_packets_total{label="",nic="gpu0",peer_qpn="6",qpn="5",job="j1"} 9"#
            ),
            "{t}"
        );
        assert!(t.contains(r#"rocefab_host_nic_pfc_paused_seconds_total{nic="gpu0",job="j1"} 1.5"#), "{t}");
        assert!(t.contains(r#"rocefab_host_nic_pfc_ignored_frames_total{nic="gpu0",job="j1"} 2"#), "{t}");
        assert!(
            t.contains(
                r#"rocefab_host_qp_rate_bytes_per_second{label="",nic="gpu0",peer_qpn="6",qpn="5",job="j1"} 125"#
            ),
            "{t}"
        );
        assert!(t.contains("# HELP rocefab_host_qp_retransmitted_packets_total packets sent again by go-back-N"));
        assert!(t.contains("rocefab_host_snapshots_total{job=\"j1\"} 2"));
        assert!(
            t.contains(
                r#"rocefab_host_qp_duplicate_packets_total{label="",nic="gpu0",peer_qpn="6",qpn="5",job="j1"} 4"#
            ),
            "{t}"
        );
        assert!(t.contains("rocefab_time_dilation{job=\"j1\"} 1\n"), "{t}");
        assert!(
            t.contains(
                r#"rocefab_host_qp_out_of_order_packets_total{label="",nic="gpu0",peer_qpn="6",qpn="5",job="j1"} 11"#
            ),
            "{t}"
        );
    }

    #[test]
    fn the_time_dilation_is_exported_and_times_are_documented_as_emulated() {
        let job: Job = serde_json::from_str(r#"{"name":"j3","nics":[],"qps":[],"time_dilation":8000}"#).unwrap();
        let m = Metrics::new(&job).unwrap();
        let mut r = Report { job: "j3".into(), time_dilation: 8000.0, ..Default::default() };
        r.qps.push(QpReport { qpn: 5, goodput_bps: Some(8e9), ..Default::default() });
        r.nics.push(NicReport { name: "gpu0".into(), ..Default::default() });
        m.update(&r);
        let t = m.render();
        assert!(t.contains("# TYPE rocefab_time_dilation gauge\nrocefab_time_dilation{job=\"j3\"} 8000\n"), "{t}");
        for name in [
            "rocefab_host_nic_pfc_paused_seconds_total",
            "rocefab_host_job_elapsed_seconds",
            "rocefab_host_qp_goodput_bytes_per_second",
        ] {
            let help =
                t.lines().find(|l| l.starts_with(&format!("# HELP {name} "))).unwrap_or_else(|| panic!("{name}: {t}"));
            assert!(help.contains("emulated"), "{help}");
        }
    }

    #[test]
    fn serve_answers_a_scrape_from_its_own_thread() {
        use std::io::{Read, Write};
        let job: Job = serde_json::from_str(r#"{"name":"j2","nics":[],"qps":[]}"#).unwrap();
        let m = Arc::new(Metrics::new(&job).unwrap());
        m.update(&Report { job: "j2".into(), ..Default::default() });
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = serve(l, m).unwrap();
        assert_eq!(t.thread().name(), Some("rocefab-ctl"));
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("rocefab_host_snapshots_total{job=\"j2\"} 1\n"), "{out}");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /sample HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        let body = out.split_once("\r\n\r\n").unwrap().1;
        assert_eq!(serde_json::from_str::<HostSample>(body).unwrap().job, "j2");
    }
}
